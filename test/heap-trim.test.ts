// Heap trims (src/store/heap-trim.ts): the writer's after a bulk batch, and the HTTP
// thread's after a busy period, only when the heap has grown since the last one.
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scheduleHeapTrim, trimHeapWhenIdle } from '../src/store/heap-trim.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Wait until `check` holds (GC entries reach the observer a few turns later), or `ms` pass. */
async function settle(check: () => boolean, ms = 2000): Promise<void> {
  const until = performance.now() + ms;
  while (!check() && performance.now() < until) await sleep(10);
}

/** Keep the event loop busy for `ms` (the trim's interval sees a busy period). */
function spin(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) { /* busy */ }
}

/** Major collections forced by a `gc()` call (a trim), as opposed to V8's own. */
let forced = 0;
const observer = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const detail = (entry as unknown as { detail: { kind: number; flags: number } }).detail;
    if (detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR && (detail.flags & constants.NODE_PERFORMANCE_GC_FLAGS_FORCED) !== 0) forced++;
  }
});

describe('trim after a bulk batch', () => {
  beforeAll(() => observer.observe({ entryTypes: ['gc'] }));
  afterAll(() => observer.disconnect());

  it('a heap past the at-once size is trimmed at once and again once the batch is over', async () => {
    // The batch's own garbage is alive while it runs: the trim at once cannot free it.
    let batch: number[][] | null = Array.from({ length: 64 }, () => new Array<number>(128 * 1024).fill(1.5));
    forced = 0;
    scheduleHeapTrim();
    await settle(() => forced >= 1);
    expect(forced, 'at once, inside the batch').toBe(1);
    batch = null;
    await settle(() => forced >= 3);
    expect(batch).toBeNull();
    // Two collections: V8 keeps the pages the first one empties committed until the next.
    expect(forced, 'and after it (50 ms later), when its garbage is dead, twice').toBe(3);
  });
});

describe('idle heap trim', () => {
  let trim: { stop(): void };
  beforeAll(() => {
    observer.observe({ entryTypes: ['gc'] });
    trim = trimHeapWhenIdle();
  });
  afterAll(() => {
    trim.stop();
    observer.disconnect();
  });

  it('collects after a busy period, again only once the heap has grown', async () => {
    forced = 0;
    // Grown: a busy period that holds 48 MB, then idle.
    const first = Array.from({ length: 48 }, () => new Array<number>(128 * 1024).fill(1.5));
    spin(300);
    await settle(() => forced >= 1);
    expect(forced, 'the first idle interval after a busy period trims').toBeGreaterThanOrEqual(1);
    await sleep(300); // that trim's entry is in

    // Busy again, nothing grown: no trim.
    forced = 0;
    spin(300);
    await sleep(800);
    expect(forced, 'a heap no larger than after the last trim is left alone').toBe(0);

    // Busy with a heap 48 MB larger again: trimmed. `first` stays alive to the end, so the
    // heap after the first trim held it: had it been freed, V8 could have kept its pages
    // and the second 48 MB reused them without the heap growing (CI saw that once).
    const second = Array.from({ length: 48 }, () => new Array<number>(128 * 1024).fill(1.5));
    spin(300);
    await settle(() => forced >= 1);
    expect(forced, 'grown again: trimmed').toBeGreaterThanOrEqual(1);
    expect(first.length + second.length).toBe(96);
  });
});
