// A QueryJob answered through a promise, as http.ts answers a client, for tests that drive
// the reader pool or the writer thread directly.
import type { QueryJob } from '../../dist/src/server/job.js';
import { noFlags } from '../../dist/src/exec/request.js';
import { monotonicMs } from '../../dist/src/clock.js';

/** `atMs`: monotonicMs() when it was answered (src/clock.ts), the clock of arrival times. */
export interface Answered { status: number; body: string; atMs: number }

export interface AnsweredJob {
  job: QueryJob;
  /** The first answer offered (later ones are dropped, as a client's are). */
  answer: Promise<Answered>;
  /** How many answers were offered, the first included. */
  offered(): number;
}

/** `receivedAtMs` undefined: a job without an arrival time (no deadline watch applies). */
export function answeredJob(body: string, receivedAtMs: number | undefined, flags: Partial<typeof noFlags> = {}): AnsweredJob {
  let done: (a: Answered) => void = () => undefined;
  let offered = 0;
  const answer = new Promise<Answered>((resolve) => { done = resolve; });
  const responder = {
    settled: false,
    respond(status: number, reply: Uint8Array | string) {
      offered++;
      if (this.settled) return;
      this.settled = true;
      done({ status, body: typeof reply === 'string' ? reply : Buffer.from(reply).toString('utf8'), atMs: monotonicMs() });
    },
  };
  // A buffer of its own: the job's body is transferred to the thread that runs it.
  const bytes = Buffer.from(body);
  const own = new Uint8Array(new ArrayBuffer(bytes.byteLength));
  own.set(bytes);
  const job: QueryJob = { body: own, flags: { ...noFlags, ...flags }, responder, ...(receivedAtMs !== undefined ? { receivedAtMs } : {}) };
  return { job, answer, offered: () => offered };
}
