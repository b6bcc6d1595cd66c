// The gateway's rate limiter against a real redis-server (src/gateway/rate-limiter.ts,
// docs/gateway.md "Rate limiter"): coalesced admissions. Requests of one database that ask
// in the same event-loop turn, or while its decision is in flight, share one script call
// asking for n tokens; the grant must be exactly what the bucket holds, never more, also
// when two limiters (gateway replicas) coalesce on the same bucket.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RateLimit } from '../src/cloud/control-plane.js';
import { RedisRateLimiter, type RateDecision } from '../src/gateway/rate-limiter.js';
import { startRedis, type RedisServer } from './helpers/redis.js';
import { expectBucketBound } from './helpers/token-bucket.js';

let redis: RedisServer;
const limiters: RedisRateLimiter[] = [];
let bucketCounter = 0;
const freshBucket = (): string => `db_coalesce_${process.pid}_${++bucketCounter}`;

async function limiter(decisionTimeoutMs = 500): Promise<RedisRateLimiter> {
  const l = new RedisRateLimiter({ redisUrl: redis.url, decisionTimeoutMs, keyPrefix: 'test:coalesce:' });
  expect(await l.connect(5000)).toBe(true);
  limiters.push(l);
  return l;
}

/** `count` decisions asked in one synchronous loop (one event-loop turn). */
function burst(l: RedisRateLimiter, databaseId: string, limit: RateLimit, count: number): Promise<RateDecision>[] {
  return Array.from({ length: count }, () => l.take(databaseId, limit));
}

const admittedCount = (decisions: RateDecision[]): number => decisions.filter((d) => d.admitted).length;
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

beforeAll(async () => {
  redis = await startRedis();
}, 60_000);

afterAll(async () => {
  await Promise.all(limiters.map((l) => l.close()));
  await redis?.dispose();
});

describe('coalesced admissions', () => {
  it('a burst in one turn is one script call that admits exactly the tokens the bucket holds', async () => {
    const l = await limiter();
    const db = freshBucket();
    // 0.001 tokens/s: nothing refills during the test, so the burst is all there is.
    const limit = { perSecond: 0.001, burst: 7 };
    const calls = l.redisCalls;
    const decisions = await Promise.all(burst(l, db, limit, 50));
    expect(l.redisCalls - calls, 'one script call for the whole turn').toBe(1);
    expect(admittedCount(decisions)).toBe(7);
    // The first askers are the admitted ones (arrival order).
    expect(decisions.slice(0, 7).every((d) => d.admitted)).toBe(true);
    for (const d of decisions.slice(7)) {
      expect(d.admitted).toBe(false);
      if (!d.admitted) expect(d.retryAfterSeconds).toBeGreaterThan(900); // the next token is ~1000 s away
    }
    // The bucket is empty now: a later single request is refused too.
    expect((await l.take(db, limit)).admitted).toBe(false);
  });

  it('requests arriving while a decision is in flight join the next call, which grants only what is left', async () => {
    const l = await limiter();
    const db = freshBucket();
    const limit = { perSecond: 0.001, burst: 5 };
    const calls = l.redisCalls;
    const first = burst(l, db, limit, 3);
    // The first call goes out at the end of this turn; the next immediate runs right after
    // it, before any answer can be read: these four find the decision in flight.
    await nextTurn();
    expect(l.redisCalls - calls).toBe(1);
    const second = burst(l, db, limit, 4);
    const [a, b] = await Promise.all([Promise.all(first), Promise.all(second)]);
    expect(l.redisCalls - calls, 'the latecomers shared one call').toBe(2);
    expect(admittedCount(a)).toBe(3);
    expect(admittedCount(b)).toBe(2);
  });

  it('two replicas coalescing on one bucket together admit exactly the burst, never more', async () => {
    const [l1, l2] = [await limiter(), await limiter()];
    const db = freshBucket();
    const limit = { perSecond: 0.001, burst: 10 };
    const decisions = await Promise.all([...burst(l1, db, limit, 40), ...burst(l2, db, limit, 40)]);
    expect(admittedCount(decisions)).toBe(10);
    // And again in several waves: still nothing beyond the burst.
    const more = await Promise.all([...burst(l1, db, limit, 20), ...burst(l2, db, limit, 20)]);
    expect(admittedCount(more)).toBe(0);
  });

  it('under sustained concurrent load two replicas admit burst + rate x time within one token', async () => {
    const [l1, l2] = [await limiter(), await limiter()];
    const db = freshBucket();
    const limit = { perSecond: 40, burst: 8 };
    let admitted = 0;
    let refused = 0;
    let firstAnswerMs = 0;
    let lastAskMs = 0;
    const windowMs = 1500;
    const startMs = performance.now();
    const worker = async (l: RedisRateLimiter): Promise<void> => {
      while (performance.now() - startMs < windowMs) {
        lastAskMs = performance.now();
        const d = await l.take(db, limit);
        if (firstAnswerMs === 0) firstAnswerMs = performance.now();
        if (d.admitted) admitted++;
        else refused++;
        // A refused client backs off briefly (as real ones do), without leaving the window empty.
        if (!d.admitted) await new Promise((r) => setTimeout(r, 2));
      }
    };
    await Promise.all(Array.from({ length: 32 }, (_, i) => worker(i % 2 === 0 ? l1 : l2)));
    const endMs = performance.now();
    const outer = (endMs - startMs) / 1000;
    const inner = (lastAskMs - firstAnswerMs) / 1000;
    expectBucketBound(admitted, limit, outer, inner);
    expect(refused).toBeGreaterThan(0);
  });

  it('a batch waiting behind a stalled decision is refused 503 within its own bound, and deciding resumes after', async () => {
    const l = await limiter(150);
    const db = freshBucket();
    const limit = { perSecond: 100, burst: 100 };
    expect((await l.take(db, limit)).admitted).toBe(true);
    const pid = redis.pid()!;
    process.kill(pid, 'SIGSTOP');
    let outcomes: PromiseSettledResult<RateDecision>[];
    const started = performance.now();
    const elapsed: number[] = [];
    try {
      const first = burst(l, db, limit, 2).map((p) => p.finally(() => elapsed.push(performance.now() - started)));
      await nextTurn(); // the first call is in flight, stalled
      await new Promise((r) => setTimeout(r, 50));
      const queuedAt = performance.now();
      const second = burst(l, db, limit, 2).map((p) => p.finally(() => elapsed.push(performance.now() - queuedAt)));
      outcomes = await Promise.allSettled([...first, ...second]);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    for (const o of outcomes) {
      expect(o.status).toBe('rejected');
      if (o.status === 'rejected') expect((o.reason as { code?: string }).code).toBe('rate_limit_unavailable');
    }
    // Each waited about one bound (150 ms), not two; generous slack for a busy machine.
    for (const ms of elapsed) expect(ms).toBeLessThan(1000);
    for (let i = 0; ; i++) {
      try {
        if ((await l.take(db, limit)).admitted) break;
      } catch (err) {
        if (i > 100) throw err;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  });
});
