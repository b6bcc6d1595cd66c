// The clock of deadlines and intervals (src/clock.ts): one monotonic clock for every thread,
// which a step of the wall clock does not move.
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { monotonicMs } from '../src/clock.js';
import { ExpiringCache, LookupSlots } from '../src/gateway/cache.js';
import { WriterLock, type Bucket, type ObjectInfo } from '../src/durability/object-bucket.js';

const realNow = Date.now;
afterEach(() => { Date.now = realNow; });

describe('monotonicMs', () => {
  it('agrees with the monotonic clock within a tenth of a millisecond, in this thread and in a new one', async () => {
    const clockUrl = new URL('../dist/src/clock.js', import.meta.url).href;
    // The smallest of 50 gaps: a thread preempted between the two readings widens one of them.
    const gap = (read: () => number): number => {
      let least = Number.POSITIVE_INFINITY;
      for (let i = 0; i < 50; i++) least = Math.min(least, Math.abs(read() - Number(process.hrtime.bigint()) / 1e6));
      return least;
    };
    expect(gap(monotonicMs)).toBeLessThan(0.1);
    const worker = new Worker(`import(${JSON.stringify(clockUrl)}).then((c) => {
      let least = Infinity;
      for (let i = 0; i < 50; i++) least = Math.min(least, Math.abs(c.monotonicMs() - Number(process.hrtime.bigint()) / 1e6));
      require('node:worker_threads').parentPort.postMessage(least);
    });`, { eval: true });
    const there = await new Promise<number>((resolve, reject) => { worker.once('message', resolve); worker.once('error', reject); });
    await worker.terminate();
    expect(there).toBeLessThan(0.1);
  });

  it('reads the same clock in another thread: an arrival time taken here is comparable there', async () => {
    const clockUrl = new URL('../dist/src/clock.js', import.meta.url).href;
    for (let round = 0; round < 3; round++) {
      const before = monotonicMs();
      const worker = new Worker(`import(${JSON.stringify(clockUrl)}).then((c) => require('node:worker_threads').parentPort.postMessage(c.monotonicMs()));`, { eval: true });
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

describe('the object-storage writer lock\'s lease', () => {
  /** A bucket of one lock object, in memory: what WriterLock reads and writes. */
  function lockBucket(): Bucket {
    let lock: ObjectInfo | null = null;
    let version = 0;
    const fake = {
      uri: 's3://test/lease', lockKey: 'lease/writer.lock',
      get: async (): Promise<ObjectInfo | null> => lock,
      put: async (_key: string, bytes: Uint8Array): Promise<string> => {
        lock = { bytes: Uint8Array.from(bytes), etag: `"${++version}"`, lastModified: new Date(realNow()) };
        return lock.etag!;
      },
      delete: async (): Promise<void> => { lock = null; },
    };
    return fake as unknown as Bucket;
  }

  it('is stale once the wall clock has moved past it (a suspended machine), and a step back does not freshen it', async () => {
    const lock = await WriterLock.acquire(lockBucket(), { leaseMs: 60_000, onLost: () => undefined });
    try {
      expect(lock.fresh).toBe(true);
      // Suspended for a minute: the monotonic clock stood still, the wall clock (and a rival's) did not.
      Date.now = () => realNow() + 60_000;
      expect(lock.fresh).toBe(false);
      // A step back of the wall clock: still fresh by both clocks, as it was.
      Date.now = () => realNow() - 3_600_000;
      expect(lock.fresh).toBe(true);
    } finally {
      Date.now = realNow;
      await lock.release();
    }
  });
});
