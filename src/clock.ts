// The clock of deadlines and intervals.
//
// Date.now() is the wall clock: NTP or an administrator can step it, and a VM's clock jumps
// when it resumes. A deadline taken on it would stretch by a step back (a query allowed 30 s
// ran on for as long as the step) or fire early on a step forward. Deadlines are taken on
// the system's monotonic clock instead (CLOCK_MONOTONIC, which steps never move), in
// milliseconds. performance.now() reads it too but counts from each thread's own start, so
// each thread adds the offset that turns its readings into the process-wide clock: a
// request's arrival time taken on the HTTP thread is compared on the writer or a reader.

const offsetMs = Number(process.hrtime.bigint()) / 1e6 - performance.now();

/** Milliseconds on the monotonic clock, comparable between the threads of the process. */
export function monotonicMs(): number {
  return performance.now() + offsetMs;
}
