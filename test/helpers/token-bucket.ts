// What a token bucket shared by several clients may have admitted over a measured window.
import { expect } from 'vitest';

/**
 * `admitted` requests over a run: at most burst + rate x the outer window (from before the
 * first request to after the last answer), at least burst + rate x the inner window (from
 * the first answer to the last request), within one token either way.
 */
export function expectBucketBound(admitted: number, limit: { burst: number; perSecond: number }, outerSec: number, innerSec: number): void {
  expect(admitted).toBeLessThanOrEqual(Math.floor(limit.burst + limit.perSecond * outerSec) + 1);
  expect(admitted).toBeGreaterThanOrEqual(Math.floor(limit.burst + limit.perSecond * innerSec) - 1);
}
