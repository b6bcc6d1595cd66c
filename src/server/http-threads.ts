// The extra front-end threads (docs/architecture.md §2 "Front-end threads"): the main
// thread's HttpFrontEnd plus `count - 1` worker threads, each a uWS app of its own on the
// same port (SO_REUSEPORT). One uWS thread tops out at roughly one core of HTTP parsing,
// copying and inline reads; several take connections in parallel, and Linux spreads new
// connections over them.
//
// Each thread runs cheap reads itself on its own attachment of the shared store
// (http-thread-worker.ts). The queries it may not run (costly reads, writes, reads pinned
// to the writer, everything on a reader server) come here over the thread's port, go
// through the main thread's sinks (the reader pool's and the writer's bounded queues, so
// overload is decided in one place for the whole server) and their answers go back.
import { Worker } from 'node:worker_threads';
import { limits, type LimitOverrides } from '../limits.js';
import type { StoreShared } from '../store/store.js';
import type { ServerMode } from './http.js';
import { decodeFlags, describeError, type QueryJob, type QueryResponder, type QuerySink } from './job.js';
import type { QueryRoute, RequestLogOptions } from './request-log.js';
import type { MetricsJson } from '../metrics/counts.js';
import { answerMetricsRequest, collectThreadMetrics, type MetricsReply } from '../metrics/threads.js';
import { threadListening } from './thread-listening.js';

/** `workerData` of a front-end thread (structured-cloned: plain data and shared buffers). */
export interface FrontThreadData {
  shared: StoreShared;
  host: string;
  /** The port the main thread chose and listens on (never 0). */
  port: number;
  mode: ServerMode;
  inlineReads: boolean;
  queryTimeoutMs: number;
  queryMemoryBytes: number;
  /** The server-wide count of body bytes being received (http.ts sharedReceivingCounter). */
  receivingBytes: Int32Array;
  storageReady: boolean;
  limits: LimitOverrides<'receivingBodyBytesMax'>;
  log: Omit<RequestLogOptions, 'destination'>;
  /** The database the server is bound to (FrontEndOptions.databaseId), or null. */
  databaseId: string | null;
  /** This thread's number, 1 and up (the main thread's front end is 0): request log lines carry it. */
  httpThread: number;
}

/** Front-end thread -> main thread. */
export type ToMainThread =
  | { kind: 'listening' }
  | { kind: 'failed'; message: string }
  /** A query for the reader pool or the writer; its body buffer is transferred. */
  | { kind: 'query'; id: number; target: 'pool' | 'writer'; body: Uint8Array; flags: number; receivedAtMs: number; costly: boolean }
  /** After 'stop-accepting': every query the thread accepted was answered (or the timeout passed). */
  | { kind: 'drained'; drained: boolean }
  /** A GET /metrics reached this thread: the main thread answers with the server's metrics text. */
  | { kind: 'metrics-request'; id: number }
  /** This thread's own metrics, asked for by 'collect-metrics'. */
  | MetricsReply;

/** Main thread -> front-end thread. */
export type ToFrontThread =
  | { kind: 'answer'; id: number; status: number; body: Uint8Array; retryAfterSeconds?: number; route: QueryRoute | null }
  | { kind: 'health'; ready: boolean }
  /** A reader server's follower replaced the store. */
  | { kind: 'swap'; shared: StoreShared }
  | { kind: 'stop-accepting'; drainTimeoutMs: number }
  /** Close the remaining sockets and exit. */
  | { kind: 'close' }
  /** Send this thread's metrics ('metrics'). */
  | { kind: 'collect-metrics'; id: number }
  /** The server's metrics text, for the 'metrics-request' with this id. */
  | { kind: 'metrics-text'; id: number; text: string | null };

export interface FrontThreadsOptions extends Omit<FrontThreadData, 'port' | 'httpThread'> {
  /** Worker threads to start (the main thread's front end is not counted). */
  threads: number;
  port: number;
  /** Where relayed queries go on the main thread. */
  pool: QuerySink;
  writer: QuerySink;
  /** A front-end thread died: the server has lost the connections it held. */
  onFatal: (err: Error) => void;
  startTimeoutMs?: number;
}

const utf8 = new TextEncoder();
const START_TIMEOUT_MS_DEFAULT = 30_000;
/** How long close() waits for a thread to exit after its sockets were closed. */
const EXIT_TIMEOUT_MS = 5_000;

/** One relayed query on the main thread: its own job and responder; the answer goes back. */
class RelayedQuery implements QueryJob, QueryResponder {
  readonly responder: QueryResponder = this;
  settled = false;
  route: QueryRoute | null = null;
  readonly flags;

  constructor(
    private readonly thread: FrontThread,
    private readonly id: number,
    public body: Uint8Array,
    flags: number,
    readonly receivedAtMs: number,
    readonly costly: boolean,
  ) {
    this.flags = decodeFlags(flags);
  }

  respond(status: number, body: Uint8Array | string, retryAfterSeconds?: number): void {
    if (this.settled) return;
    this.settled = true;
    // A pool answer is a range of its task's shared answer buffer: copy it into a buffer of
    // its own so it can be transferred (a string becomes a fresh buffer anyway).
    const own = typeof body === 'string' ? utf8.encode(body) : body.slice();
    const message: ToFrontThread = retryAfterSeconds === undefined
      ? { kind: 'answer', id: this.id, status, body: own, route: this.route }
      : { kind: 'answer', id: this.id, status, body: own, retryAfterSeconds, route: this.route };
    this.thread.post(message, [own.buffer as ArrayBuffer]);
  }
}

class FrontThread {
  stopped = false;
  constructor(readonly worker: Worker) {}

  post(message: ToFrontThread, transfer: ArrayBuffer[] = []): void {
    if (!this.stopped) this.worker.postMessage(message, transfer);
  }
}

export class FrontThreads {
  private closing = false;
  /** The whole server's metrics text (server.ts sets it): what a scrape on any thread answers. */
  serverMetrics: () => Promise<string> = () => Promise.reject(new Error('metrics are not set up yet'));

  private constructor(private readonly threads: FrontThread[]) {}

  /** Start the threads; resolves once every one listens on the port. */
  static async start(options: FrontThreadsOptions): Promise<FrontThreads> {
    const { threads: count, pool, writer, onFatal, startTimeoutMs, ...rest } = options;

    const started: FrontThread[] = [];
    const front = new FrontThreads(started);
    const listeners: Promise<void>[] = [];
    let up = false;
    for (let i = 0; i < count; i++) {
      const worker = new Worker(new URL('./http-thread-worker.js', import.meta.url), { workerData: { ...rest, httpThread: i + 1 } satisfies FrontThreadData, name: `svcdb-http-${i + 1}`, resourceLimits: { maxYoungGenerationSizeMb: limits.workerThreadYoungGenerationMb } });
      const thread = new FrontThread(worker);
      started.push(thread);
      // Before it listens: its first query may follow its 'listening' message at once.
      worker.on('message', (message: ToMainThread) => {
        if (message.kind === 'metrics-request') {
          answerMetricsRequest(message.id, () => front.serverMetrics(), (m) => thread.post(m));
          return;
        }
        if (message.kind !== 'query') return;
        const job = new RelayedQuery(thread, message.id, message.body, message.flags, message.receivedAtMs, message.costly);
        (message.target === 'pool' ? pool : writer).submit(job);
      });
      worker.on('exit', (code) => {
        thread.stopped = true;
        if (up && !front.closing) onFatal(new Error(`front-end thread ${i + 1} exited with code ${code}`));
      });
      worker.on('error', (err) => {
        process.stderr.write(`svcdb: front-end thread ${i + 1} failed: ${describeError(err)}\n`);
      });
      listeners.push(threadListening(worker, `front-end thread ${i + 1}`, startTimeoutMs ?? START_TIMEOUT_MS_DEFAULT));
    }
    // Started together: on a 64-core machine one after the other would add seconds.
    const outcomes = await Promise.allSettled(listeners);
    const failure = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (failure !== undefined) {
      await front.close();
      throw failure.reason;
    }
    up = true;
    return front;
  }

  get count(): number {
    return this.threads.length;
  }

  /** Every thread's own metrics (metrics/threads.ts). */
  collectMetrics(): Promise<MetricsJson[]> {
    return collectThreadMetrics(this.threads.filter((t) => !t.stopped).map((t) => ({ worker: t.worker, post: (m) => t.post(m) })));
  }

  /** The storage became (un)ready: /readyz on every thread says so. */
  health(ready: boolean): void {
    for (const t of this.threads) t.post({ kind: 'health', ready });
  }

  /** A reader server's follower replaced the store: threads explain against the new one. */
  swapStore(shared: StoreShared): void {
    for (const t of this.threads) t.post({ kind: 'swap', shared });
  }

  /**
   * Stop accepting on every thread; resolves when each has answered what it accepted (or
   * its timeout passed). Relayed queries still reach the pool and the writer meanwhile.
   */
  async stopAccepting(drainTimeoutMs: number): Promise<void> {
    this.closing = true;
    await Promise.all(this.threads.map((t) => new Promise<void>((resolve) => {
      if (t.stopped) { resolve(); return; }
      const onMessage = (message: ToMainThread): void => {
        if (message.kind !== 'drained') return;
        t.worker.off('message', onMessage);
        t.worker.off('exit', onExit);
        resolve();
      };
      const onExit = (): void => { t.worker.off('message', onMessage); resolve(); };
      t.worker.on('message', onMessage);
      t.worker.once('exit', onExit);
      t.post({ kind: 'stop-accepting', drainTimeoutMs });
    })));
  }

  /** Close every thread's sockets and wait for the threads to exit (terminate stragglers). */
  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(this.threads.map((t) => new Promise<void>((resolve) => {
      if (t.stopped) { resolve(); return; }
      const timer = setTimeout(() => void t.worker.terminate(), EXIT_TIMEOUT_MS);
      t.worker.once('exit', () => { clearTimeout(timer); resolve(); });
      t.post({ kind: 'close' });
    })));
  }
}

