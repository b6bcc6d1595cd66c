// The clock of deadlines and intervals.
//
// Date.now() is the wall clock: NTP or an administrator can step it, and a VM's clock jumps
// when it resumes. A deadline taken on it would stretch by a step back (a query allowed 30 s
// ran on for as long as the step) or fire early on a step forward. Deadlines are taken on
// the system's monotonic clock instead (CLOCK_MONOTONIC, which steps never move), in
// milliseconds. performance.now() reads it too but counts from each thread's own start, so
// each thread adds the offset that turns its readings into the process-wide clock: a
// request's arrival time taken on the HTTP thread is compared on the writer or a reader.
// CLOCK_MONOTONIC does not count time the machine spends suspended: where that matters (a
// lease another machine judges by its wall clock) both clocks are read (Instant, msSince).

/**
 * performance.now() + this = the monotonic clock in ms. The first performance.now() of a
 * thread is slow (the global loads lazily: ~0.7 ms), so it is called once first, and the
 * hrtime reading is paired with the middle of two performance.now() around it, the closest
 * pair of three: each thread's offset is then within microseconds of the clock.
 */
const offsetMs = ((): number => {
  performance.now();
  let best = Number.POSITIVE_INFINITY, offset = 0;
  for (let attempt = 0; attempt < 3; attempt++) {
    const before = performance.now();
    const hrMs = Number(process.hrtime.bigint()) / 1e6;
    const after = performance.now();
    if (after - before < best) {
      best = after - before;
      offset = hrMs - (before + after) / 2;
    }
  }
  return offset;
})();

/** Milliseconds on the monotonic clock, comparable between the threads of the process. */
export function monotonicMs(): number {
  return performance.now() + offsetMs;
}

/** A moment on both clocks, for an interval another machine judges by its wall clock. */
export interface Instant {
  readonly monotonicMs: number;
  readonly wallMs: number;
}

export function instant(): Instant {
  return { monotonicMs: monotonicMs(), wallMs: Date.now() };
}

/**
 * Milliseconds since `then`, the larger of what the two clocks say: a step back of the wall
 * clock does not shorten it (the monotonic side counts), nor a suspension, which the
 * monotonic clock does not count (the wall side does).
 */
export function msSince(then: Instant): number {
  return Math.max(monotonicMs() - then.monotonicMs, Date.now() - then.wallMs);
}
