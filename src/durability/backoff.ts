// Retry timing of failing durability steps (fsync, uploads, snapshots): bounded exponential
// backoff with jitter, so that many writers do not retry in step and none waits unbounded.
import { limits } from '../limits.js';

/** Delay before retry `attempt` (1-based): exponential, capped, the upper half random (jitter). */
export function backoffMs(attempt: number, firstMs: number, maxMs: number): number {
  const ceiling = Math.min(maxMs, firstMs * 2 ** Math.min(attempt - 1, 30));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

/** The retry delays of one failing step: each next() doubles up to the cap; reset() after a success. */
export class Backoff {
  private attempt = 0;
  constructor(private readonly firstMs: number = limits.storageRetryFirstMs, private readonly maxMs: number = limits.storageRetryMaxMs) {}
  next(): number {
    this.attempt++;
    return backoffMs(this.attempt, this.firstMs, this.maxMs);
  }
  reset(): void {
    this.attempt = 0;
  }
}
