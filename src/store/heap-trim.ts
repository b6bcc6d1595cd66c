// Giving a thread's JavaScript heap back after a burst of large requests.
//
// A bulk load's write bodies (1-3 MB of JSON each) are parsed into trees of Maps and
// bigints; they die with the request, but V8 grows the old generation to hold them while
// they live and keeps those pages after the next ordinary collection. Its memory reducer
// shrinks an idle heap only seconds later, so right after a load the writer held ~60 MB
// of heap for ~8 MB of live data and the reader that had parsed the bodies to forward
// them ~30 MB (docs/benchmarks.md "Memory"). Two full collections right after the burst
// return those pages at once (trimHeapNow says why one is not enough).
import { performance } from 'node:perf_hooks';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** Writer: a committed or rolled-back batch with at least this many changes schedules a trim. */
export const BULK_BATCH_CHANGES_MIN = 10_000;
/** Request bodies of at least this many bytes are a bulk request (readers trim after forwarding one). */
export const BULK_BODY_BYTES_MIN = 1024 * 1024;
/** How long the thread must stay without another bulk request before the scheduled trim runs. */
const TRIM_DELAY_MS = 50;
/**
 * A trim runs only when the heap is at least this large: an idle server thread holds
 * 10-17 MB, so below this there is little to give back and the collection is not worth it.
 */
const TRIM_HEAP_BYTES_MIN = 24 * 1024 * 1024;

let collect: (() => void) | null = null;
let scheduled: ReturnType<typeof setTimeout> | null = null;

/**
 * Two full garbage collections on this thread now, if its heap is large.
 * Node exposes no collection API without `--expose-gc`; setting the flag at run time makes
 * the `gc` function available in contexts created afterwards, here one made for it.
 * Why two: the first frees the garbage but V8 sweeps the emptied pages concurrently
 * afterwards and keeps them committed until its next collection. Measured in a worker
 * thread with 8 MB live after 240 MB of parsed-body garbage: one collection left 104 MB of
 * heap (10 ms), two left 11 MB (38 ms); on the writer after the bench's load, one left
 * 29 MB of heap for 8 MB live a second later (docs/benchmarks.md).
 */
export function trimHeapNow(heapBytesMin = TRIM_HEAP_BYTES_MIN): void {
  if (getHeapStatistics().total_heap_size < heapBytesMin) return;
  collectGarbage();
  collectGarbage();
}

/** One full collection. */
function collectGarbage(): void {
  if (collect === null) {
    setFlagsFromString('--expose-gc');
    collect = runInNewContext('gc') as () => void;
  }
  collect();
}

/**
 * A heap this large right after a bulk batch is trimmed at once. Large writes reach the
 * writer back to back (straight from the HTTP thread, server/inline-reads.ts), so without
 * this its old generation grew batch after batch until the one scheduled trim at the end:
 * 22-70 MiB more RSS the instant a load ended (docs/benchmarks.md).
 */
const TRIM_NOW_HEAP_BYTES_MIN = 2 * TRIM_HEAP_BYTES_MIN;

/**
 * Trim this thread's heap once it has gone TRIM_DELAY_MS without another bulk request (a
 * load of many bulk requests pays for one collection, after the last), and, when it has
 * grown past TRIM_NOW_HEAP_BYTES_MIN, at once as well. Needs an event loop that runs
 * between requests (the writer's; not Piscina readers', which sleep in Atomics.wait: they
 * call trimHeapNow()).
 */
export function scheduleHeapTrim(): void {
  if (scheduled !== null) clearTimeout(scheduled);
  scheduled = null;
  // At once inside the batch frees what earlier batches left; the request that is running
  // keeps its own garbage alive until it ends, so the trim after the last batch still runs
  // (without it the writer kept 53 MB of heap for 8 MB live after a load).
  // One collection there, not two: the next batch's own collections release its pages.
  if (getHeapStatistics().total_heap_size >= TRIM_NOW_HEAP_BYTES_MIN) collectGarbage();
  scheduled = setTimeout(() => {
    scheduled = null;
    trimHeapNow();
  }, TRIM_DELAY_MS);
  scheduled.unref();
}

/** How often trimHeapWhenIdle looks at the event loop. */
const IDLE_CHECK_MS = 250;
/** An interval in which the event loop was busy at most this share of the time is idle. */
const IDLE_UTILIZATION_MAX = 0.02;
/**
 * An idle trim needs the heap to have grown this much since the last one, and to be at
 * least IDLE_TRIM_HEAP_BYTES_MIN. Lower than a bulk trim's bounds: after the bench's read
 * scenarios the HTTP thread held ~20 MB of heap for ~11 MB live (it holds ~13 MB idle), which
 * 24 MiB and 8 MiB left alone. With these the idle trim takes it to ~17 MB and the server's
 * VmRSS one second after the reads is 188.2-189.2 MiB against 192.7-194.1 MiB (three runs
 * each, alternating; docs/benchmarks.md "Sixth stop"). Before the plan cache kept one entry
 * per shape with a literal max_depth, the same bounds gave no measurable gain.
 */
const IDLE_TRIM_GROWTH_BYTES_MIN = 4 * 1024 * 1024;
const IDLE_TRIM_HEAP_BYTES_MIN = 16 * 1024 * 1024;

/**
 * A thread that serves requests (the HTTP thread): once a busy period is followed by an idle
 * interval, trim its heap. Its garbage is per-request (inline reads, routing) and V8 grows
 * the old generation well past the live data under load (42 MB for 15 MB live after the
 * bench's read scenarios) and shrinks it only seconds into idleness. A trim costs one full
 * collection (~10-20 ms on such a heap), at most once per busy period, when nothing waits.
 */
export function trimHeapWhenIdle(): { stop(): void } {
  let last = performance.eventLoopUtilization();
  let busySinceTrim = false;
  // The heap's size after the last trim: a heap that has not grown past it by
  // IDLE_TRIM_GROWTH_BYTES_MIN has nothing to give back, and a full collection would only
  // pause the thread (under the query torture, 10-60 ms every 500 ms on an HTTP thread
  // whose requests all ran in the pool, so it looked idle, over a 28 MB heap of 10 MB live).
  let heapAfterTrim = 0;
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const busy = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    if (busy > IDLE_UTILIZATION_MAX) {
      busySinceTrim = true;
      return;
    }
    if (!busySinceTrim) return;
    busySinceTrim = false;
    const total = getHeapStatistics().total_heap_size;
    // A heap V8 shrank on its own since is measured from there.
    heapAfterTrim = Math.min(heapAfterTrim, total);
    if (total < heapAfterTrim + IDLE_TRIM_GROWTH_BYTES_MIN) return;
    trimHeapNow(IDLE_TRIM_HEAP_BYTES_MIN);
    heapAfterTrim = getHeapStatistics().total_heap_size;
  }, IDLE_CHECK_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
