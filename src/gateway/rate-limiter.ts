// The per-database token bucket (SPEC "Cloud request rate limit"), shared by every gateway
// replica through Redis.
//
// One Lua script decides atomically: Redis runs a script alone, so two replicas can never
// both spend the last token. Time comes from Redis `TIME`, never from a gateway's clock, so
// replicas whose clocks disagree still refill one bucket at one rate. The bucket holds a
// fractional token count and the Redis time (µs) it was last brought up to date; each
// decision first adds `elapsed x rate` (continuous refill, capped at the burst), then spends
// up to the tokens asked for and says how long until the next token is there.
//
// Coalesced admissions (docs/gateway.md "Rate limiter"): the requests of one database that
// ask in the same event-loop turn, or while a decision for that database is in flight from
// this gateway, wait together and go to Redis as one script call asking for n tokens. The
// script grants min(n, whole tokens in the bucket), decided on Redis time like a single
// request; the first `granted` waiters (in arrival order) are admitted and the rest refused.
// That is the same outcome as n one-token calls arriving back to back at that Redis instant,
// so the bucket stays exact across replicas (no local leases): nothing is ever granted that
// the bucket did not hold. It costs one Redis call per batch instead of one per request.
//
// Fails closed: when Redis does not answer within the decision bound (or is disconnected:
// no offline queue, the command fails at once), the caller answers 503
// rate_limit_unavailable and nothing is admitted. The bound counts from the moment the first
// request of a batch asked, including any wait behind an in-flight decision.
import assert from 'node:assert/strict';
import { Redis, type RedisOptions } from 'ioredis';
import type { RateLimit } from '../cloud/control-plane.js';
import { GatewayError } from './errors.js';

const takeTokensScript = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local now = redis.call('TIME')
local nowUs = tonumber(now[1]) * 1000000 + tonumber(now[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = burst
  at = nowUs
elseif nowUs > at then
  tokens = tokens + (nowUs - at) * rate / 1000000
  at = nowUs
end
-- an override may have lowered the burst since the bucket was filled
if tokens > burst then tokens = burst end
-- as many whole tokens as are there, at most the number asked for
local granted = math.floor(tokens)
if granted > want then granted = want end
if granted < 0 then granted = 0 end
tokens = tokens - granted
local waitUs = 0
if granted < want then
  waitUs = math.ceil((1 - tokens) * 1000000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'at', string.format('%.0f', at))
-- a bucket idle long enough to be full again is the same as no bucket: let it expire
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return {granted, waitUs}
`;

export type RateDecision =
  | { readonly admitted: true }
  | { readonly admitted: false; readonly retryAfterSeconds: number };

const admittedDecision: RateDecision = { admitted: true };

interface RedisWithBucket extends Redis {
  svcTakeTokens(key: string, perSecond: number, burst: number, want: number): Promise<[number, number]>;
}

interface Waiter {
  resolve(decision: RateDecision): void;
  reject(err: GatewayError): void;
}

/** Requests of one database waiting for one decision. */
interface Batch {
  readonly databaseId: string;
  /** The limit of the latest request (routes are cached; all requests of a batch normally agree). */
  limit: RateLimit;
  readonly waiters: Waiter[];
  /** Sent to Redis (its answer, if any, decides the waiters). */
  sent: boolean;
  /** Decided, failed or timed out: later outcomes are ignored. */
  done: boolean;
  /** The decision bound, from the first waiter's arrival. */
  timer: NodeJS.Timeout | null;
}

function unavailable(cause?: Error): GatewayError {
  return new GatewayError('rate_limit_unavailable', 'the rate limit could not be decided; retry with backoff', undefined, cause);
}

/** `redis://host:port[/db]`, `rediss://...`, or `unix:///path/to/redis.sock`. */
export function redisConnectionOptions(url: string): RedisOptions {
  if (url.startsWith('unix:')) return { path: new URL(url).pathname };
  const parsed = new URL(url);
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw new Error(`redis URL must start with redis://, rediss:// or unix://, got ${parsed.protocol}`);
  }
  const options: RedisOptions = { host: parsed.hostname, port: parsed.port === '' ? 6379 : Number(parsed.port) };
  if (parsed.password !== '') options.password = decodeURIComponent(parsed.password);
  if (parsed.username !== '') options.username = decodeURIComponent(parsed.username);
  const db = parsed.pathname.replace(/^\//, '');
  if (db !== '') options.db = Number(db);
  if (parsed.protocol === 'rediss:') options.tls = {};
  return options;
}

export interface RateLimiterOptions {
  redisUrl: string;
  /** Longest wait for one decision (ms). */
  decisionTimeoutMs: number;
  /** Prefix of the bucket keys, so several deployments can share one Redis. */
  keyPrefix?: string;
}

export class RedisRateLimiter {
  private readonly redis: RedisWithBucket;
  private readonly keyPrefix: string;
  private readonly decisionTimeoutMs: number;
  /** The batch collecting requests of each database (not sent yet). */
  private readonly collecting = new Map<string, Batch>();
  /** Databases with a decision in flight from this limiter. */
  private readonly inFlight = new Set<string>();
  /** Databases whose collecting batch is sent at the end of this event-loop turn. */
  private flushScheduled = false;
  private readonly flushNow = (): void => this.flush();
  /** Script calls sent to Redis (tests prove coalescing). */
  redisCalls = 0;

  constructor(options: RateLimiterOptions) {
    this.keyPrefix = options.keyPrefix ?? 'svc:bucket:';
    this.decisionTimeoutMs = options.decisionTimeoutMs;
    const redis = new Redis({
      ...redisConnectionOptions(options.redisUrl),
      lazyConnect: true,
      // Never queue a decision while disconnected: the request would wait for an unknown
      // time and then be admitted late. Fail now; the client retries with backoff.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.decisionTimeoutMs,
      // Decisions of different databases asked in the same event-loop turn go to Redis in
      // one write (and come back in one read).
      enableAutoPipelining: true,
      connectTimeout: Math.max(1000, options.decisionTimeoutMs),
      // Keep trying to come back, at most once a second.
      retryStrategy: (attempt: number) => Math.min(50 * attempt, 1000),
    });
    redis.defineCommand('svcTakeTokens', { numberOfKeys: 1, lua: takeTokensScript });
    // Connection errors surface as failed decisions (and readyz); without a listener
    // ioredis would print each one as an unhandled 'error' event.
    redis.on('error', () => {});
    this.redis = redis as RedisWithBucket;
  }

  /** Connect; resolves false (and keeps retrying in the background) if Redis is not there yet. */
  async connect(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.redis.connect(),
        new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('timeout')), timeoutMs); }),
      ]);
      return true;
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Whether the connection is up (readyz). */
  get available(): boolean {
    return this.redis.status === 'ready';
  }

  /**
   * Spend one token of `databaseId`'s bucket. Throws GatewayError rate_limit_unavailable
   * when Redis cannot decide in time. Requests of one database asking in the same turn, or
   * while its decision is in flight, share one script call (see the top of this file).
   */
  take(databaseId: string, limit: RateLimit): Promise<RateDecision> {
    // (Not assert(cond, `...`): that would build the message on every request.)
    if (!(limit.perSecond > 0 && Number.isFinite(limit.perSecond) && limit.burst >= 1 && Number.isFinite(limit.burst))) {
      assert.fail(`rate limit of ${databaseId} must have perSecond > 0 and burst >= 1`);
    }
    return new Promise<RateDecision>((resolve, reject) => {
      let batch = this.collecting.get(databaseId);
      if (batch === undefined) {
        batch = { databaseId, limit, waiters: [], sent: false, done: false, timer: null };
        this.collecting.set(databaseId, batch);
        if (this.inFlight.has(databaseId)) {
          // It waits for the decision in flight first: its own bound, from now. (A batch sent
          // in this turn is bounded by the command timeout alone.)
          const waiting = batch;
          batch.timer = setTimeout(() => this.timedOut(waiting), this.decisionTimeoutMs);
        } else if (!this.flushScheduled) {
          this.flushScheduled = true;
          setImmediate(this.flushNow);
        }
      } else {
        batch.limit = limit;
      }
      batch.waiters.push({ resolve, reject });
    });
  }

  /** Send the collecting batch of every database with no decision in flight. */
  private flush(): void {
    this.flushScheduled = false;
    for (const batch of this.collecting.values()) {
      if (!this.inFlight.has(batch.databaseId)) this.send(batch);
    }
  }

  private send(batch: Batch): void {
    const databaseId = batch.databaseId;
    this.collecting.delete(databaseId);
    if (batch.done) return; // timed out while it waited
    batch.sent = true;
    this.inFlight.add(databaseId);
    this.redisCalls++;
    let reply: Promise<[number, number]>;
    try {
      reply = this.redis.svcTakeTokens(this.keyPrefix + databaseId, batch.limit.perSecond, batch.limit.burst, batch.waiters.length);
    } catch (err) {
      reply = Promise.reject(err);
    }
    reply.then((answer) => {
      this.settled(databaseId);
      this.decide(batch, answer);
    }, (err: Error) => {
      this.settled(databaseId);
      this.fail(batch, err);
    });
  }

  /** The decision of `databaseId` came back: the requests that gathered meanwhile go next. */
  private settled(databaseId: string): void {
    this.inFlight.delete(databaseId);
    const next = this.collecting.get(databaseId);
    if (next !== undefined) this.send(next);
  }

  private decide(batch: Batch, [granted, waitUs]: [number, number]): void {
    if (batch.done) return; // answered 503 at the bound; its tokens (if any) are spent unused: fail closed
    this.finish(batch);
    const waiters = batch.waiters;
    const admitted = Math.min(granted, waiters.length);
    for (let i = 0; i < admitted; i++) waiters[i]!.resolve(admittedDecision);
    if (admitted === waiters.length) return;
    // Whole seconds, rounded up: a client that waits this long finds a token.
    const refused: RateDecision = { admitted: false, retryAfterSeconds: Math.max(1, Math.ceil(waitUs / 1_000_000)) };
    for (let i = admitted; i < waiters.length; i++) waiters[i]!.resolve(refused);
  }

  private fail(batch: Batch, cause?: Error): void {
    if (batch.done) return;
    this.finish(batch);
    const err = unavailable(cause);
    for (const waiter of batch.waiters) waiter.reject(err);
  }

  private finish(batch: Batch): void {
    batch.done = true;
    if (batch.timer !== null) clearTimeout(batch.timer);
    batch.timer = null;
  }

  /** The first request of `batch` asked `decisionTimeoutMs` ago: 503 for all of them. */
  private timedOut(batch: Batch): void {
    batch.timer = null;
    if (!batch.sent && this.collecting.get(batch.databaseId) === batch) this.collecting.delete(batch.databaseId);
    this.fail(batch, new Error(`no decision within ${this.decisionTimeoutMs} ms`));
  }

  /** Forget a database's bucket (tests, and a database's deletion). */
  async reset(databaseId: string): Promise<void> {
    await this.redis.del(this.keyPrefix + databaseId);
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
