// Admission to one bounded queue between threads (limits.ts, "load shedding"). A queue
// counts the requests it holds and their body bytes; a request that would take it past
// either bound is answered 503 server_overloaded with a Retry-After header instead of
// being queued, so nothing of it runs.
import assert from 'node:assert/strict';
import { limits } from '../limits.js';
import { errorBody, overloadError, type SvcError } from '../protocol/errors.js';
import type { QueryJob } from './job.js';

export class QueueBound {
  /** Requests in the queue. */
  requests = 0;
  /** Body bytes of those requests. */
  bodyBytes = 0;

  /**
   * `name` completes "server overloaded: NAME is full", e.g. "the reader queue"; `held`
   * says what its requests are doing ("waiting", "in progress").
   */
  constructor(readonly name: string, readonly requestsMax: number, readonly bodyBytesMax: number, readonly held = 'waiting') {
    assert(Number.isInteger(requestsMax) && requestsMax >= 0, `${name}: requestsMax must be a non-negative integer`);
    assert(Number.isInteger(bodyBytesMax) && bodyBytesMax >= 0, `${name}: bodyBytesMax must be a non-negative integer`);
  }

  /** The error for one more request of `bodyBytes`, or null when it fits. */
  refusal(bodyBytes: number): SvcError | null {
    if (this.requests >= this.requestsMax) {
      return overloadError(this.name, `${this.requests} request${this.requests === 1 ? '' : 's'} ${this.held}`);
    }
    if (this.bodyBytes + bodyBytes > this.bodyBytesMax) {
      return overloadError(this.name, `${this.bodyBytes} body bytes ${this.held}, a request of ${bodyBytes} more would pass ${this.bodyBytesMax}`);
    }
    return null;
  }

  /** Count the job in, or shed it (answered 503) and return false. */
  admit(job: QueryJob, bodyBytes: number): boolean {
    const refused = this.refusal(bodyBytes);
    if (refused !== null) {
      shed(job, refused);
      return false;
    }
    this.add(bodyBytes);
    return true;
  }

  add(bodyBytes: number): void {
    this.requests++;
    this.bodyBytes += bodyBytes;
  }

  remove(bodyBytes: number): void {
    this.requests--;
    this.bodyBytes -= bodyBytes;
    assert(this.requests >= 0 && this.bodyBytes >= 0, `${this.name}: removed more than was added`);
  }

  clear(): void {
    this.requests = 0;
    this.bodyBytes = 0;
  }
}

/** Answer a job 503 server_overloaded with Retry-After (it was not queued: nothing ran). */
export function shed(job: QueryJob, err: SvcError): void {
  job.responder.respond(err.status, errorBody(err), limits.overloadRetryAfterSeconds);
}
