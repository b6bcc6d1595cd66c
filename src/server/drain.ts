// What a graceful stop waits for on a uWS front end (the server's and the gateway's):
// every accepted request answered (or aborted), and every answer's last byte written.
// Closing a socket while an answer is still being written as it drains cuts the answer
// short (a probe's 20 MB answers arrived 4-19 MB long after a SIGTERM).
import assert from 'node:assert/strict';

export class DrainTracker {
  /** Requests accepted and not yet answered or aborted. */
  inFlight = 0;
  /** Answers larger than their socket took at once, still being written. */
  private answersWriting = 0;
  private waiters: (() => void)[] = [];

  requestStarted(): void {
    this.inFlight++;
  }

  /** Called exactly once per request, when it is answered or aborted. */
  requestFinished(): void {
    assert(this.inFlight > 0, 'a request finished twice');
    this.inFlight--;
    this.wakeIfDrained();
  }

  /** An answer is written as its socket drains. */
  answerWriting(): void {
    this.answersWriting++;
  }

  /** Such an answer's last byte was written, or its client went away. */
  answerWritten(): void {
    assert(this.answersWriting > 0, 'an answer was written twice');
    this.answersWriting--;
    this.wakeIfDrained();
  }

  /** Resolves true once drained, false at the timeout. */
  drained(timeoutMs: number): Promise<boolean> {
    if (this.inFlight === 0 && this.answersWriting === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      this.waiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  private wakeIfDrained(): void {
    if (this.inFlight === 0 && this.answersWriting === 0 && this.waiters.length > 0) {
      const waiters = this.waiters;
      this.waiters = [];
      // After the current uWS callback: an answer written inside a handler is flushed when
      // the handler returns, and the waiters go on to close every socket.
      setImmediate(() => { for (const wake of waiters) wake(); });
    }
  }
}
