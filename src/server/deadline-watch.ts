// What the deadline watches of the reader pool and of the writer thread (reader-pool.ts,
// writer.ts) share: when a request is overdue and the answer it then gets (OverdueAnswers),
// and one timer armed for the earliest such moment (DeadlineTimer), however many requests
// a watch looks after. Unref'd: a watch never keeps the process alive.
import { deadlineExceeded } from '../query-guard.js';
import { limits } from '../limits.js';
import { errorBody } from '../protocol/errors.js';
import type { QueryJob } from './job.js';
import { monotonicMs } from '../clock.js';

/** setTimeout's largest delay (2^31 - 1 ms). */
const TIMER_DELAY_MS_MAX = 2 ** 31 - 1;

/** The answer a watch gives (the body a reader's or the writer's own cut gives), built once. */
const OVERDUE = deadlineExceeded();
const OVERDUE_BODY = errorBody(OVERDUE);

/**
 * A request is overdue limits.deadlineAnswerGraceMs after its deadline (arrival +
 * --query-timeout-ms); the watch then answers it `500 query_deadline_exceeded` itself.
 */
export class OverdueAnswers {
  /** Requests answered so far (health, metrics and tests). */
  answered = 0;
  private readonly afterArrivalMs: number;

  constructor(queryTimeoutMs: number, graceMs: number = limits.deadlineAnswerGraceMs) {
    this.afterArrivalMs = queryTimeoutMs + graceMs;
  }

  /** monotonicMs() past which `job` is overdue (Infinity: it has no arrival time). */
  atMs(job: QueryJob): number {
    const arrived = job.receivedAtMs ?? 0;
    return arrived > 0 ? arrived + this.afterArrivalMs : Number.POSITIVE_INFINITY;
  }

  /** Answer `job` unless something did already. */
  answer(job: QueryJob): void {
    if (job.responder.settled) return;
    this.answered++;
    job.responder.respond(OVERDUE.status, OVERDUE_BODY);
  }
}

export class DeadlineTimer {
  private timer: NodeJS.Timeout | null = null;
  private atMs = Number.POSITIVE_INFINITY;
  private closed = false;

  /** `fire` runs at the armed moment; it arms the timer again for whatever is next. */
  constructor(private readonly fire: () => void) {}

  /** Make sure `fire` runs by `atMs` (a monotonicMs() value; Infinity: nothing to do). */
  armBy(atMs: number): void {
    if (atMs >= this.atMs || this.closed) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.atMs = atMs;
    // Capped at setTimeout's largest delay (~24.8 days): past it Node fires after 1 ms.
    this.timer = setTimeout(this.run, Math.min(TIMER_DELAY_MS_MAX, Math.max(1, atMs - monotonicMs())));
    this.timer.unref();
  }

  close(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private readonly run = (): void => {
    this.timer = null;
    this.atMs = Number.POSITIVE_INFINITY;
    this.fire();
  };
}
