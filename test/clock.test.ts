// The clock of deadlines and intervals (src/clock.ts): one monotonic clock for every thread,
// which a step of the wall clock does not move.
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { monotonicMs } from '../src/clock.js';
import { ExpiringCache, LookupSlots } from '../src/gateway/cache.js';

const realNow = Date.now;
afterEach(() => { Date.now = realNow; });

describe('monotonicMs', () => {
  it('reads the same clock in another thread: an arrival time taken here is comparable there', async () => {
    const clockUrl = new URL('../dist/src/clock.js', import.meta.url).href;
    for (let round = 0; round < 3; round++) {
      const worker = new Worker(`import(${JSON.stringify(clockUrl)}).then((c) => require('node:worker_threads').parentPort.postMessage(c.monotonicMs()));`, { eval: true });
      const before = monotonicMs();
      const there = await new Promise<number>((resolve, reject) => { worker.once('message', resolve); worker.once('error', reject); });
      const after = monotonicMs();
      await worker.terminate();
      // The worker read its clock after `before` and before `after` (1 ms for rounding).
      expect(there).toBeGreaterThanOrEqual(before - 1);
      expect(there).toBeLessThanOrEqual(after + 1);
    }
  });

  it('does not move when the wall clock is stepped', () => {
    const first = monotonicMs();
    Date.now = () => realNow() - 3_600_000;
    const second = monotonicMs();
    expect(second).toBeGreaterThanOrEqual(first);
    expect(second - first).toBeLessThan(1_000);
  });
});

describe('intervals on the monotonic clock', () => {
  it('a gateway cache entry expires on time after the wall clock steps back an hour', async () => {
    let lookups = 0;
    const cache = new ExpiringCache<number>({
      ttlMs: 30, entriesMax: 10, lookupTimeoutMs: 1_000, staleMs: 0, what: 'test value', slots: new LookupSlots(4),
      lookup: async () => ++lookups,
    });
    expect(await cache.get('k')).toBe(1);
    expect(await cache.get('k')).toBe(1); // fresh: from the entry
    Date.now = () => realNow() - 3_600_000;
    await new Promise((resolve) => setTimeout(resolve, 80));
    // Past its 30 ms: looked up again (on the wall clock it would have an hour left).
    expect(await cache.get('k')).toBe(2);
  });
});
