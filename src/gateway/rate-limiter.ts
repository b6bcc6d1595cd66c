// The per-database token bucket (SPEC "Cloud request rate limit"), shared by every gateway
// replica through Redis.
//
// One Lua script decides atomically: Redis runs a script alone, so two replicas can never
// both spend the last token. Time comes from Redis `TIME`, never from a gateway's clock, so
// replicas whose clocks disagree still refill one bucket at one rate. The bucket holds a
// fractional token count and the Redis time (µs) it was last brought up to date; each
// decision first adds `elapsed x rate` (continuous refill, capped at the burst), then spends
// one token or says how long until one is there.
//
// Fails closed: when Redis does not answer within the decision bound (or is disconnected:
// no offline queue, the command fails at once), the caller answers 503
// rate_limit_unavailable and nothing is admitted.
import assert from 'node:assert/strict';
import { Redis, type RedisOptions } from 'ioredis';
import type { RateLimit } from '../cloud/control-plane.js';
import { GatewayError } from './errors.js';

const takeTokenScript = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
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
local admitted = 0
local waitUs = 0
if tokens >= 1 then
  tokens = tokens - 1
  admitted = 1
else
  waitUs = math.ceil((1 - tokens) * 1000000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'at', string.format('%.0f', at))
-- a bucket idle long enough to be full again is the same as no bucket: let it expire
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return {admitted, waitUs}
`;

export type RateDecision =
  | { readonly admitted: true }
  | { readonly admitted: false; readonly retryAfterSeconds: number };

const admittedDecision: RateDecision = { admitted: true };

interface RedisWithBucket extends Redis {
  svcTakeToken(key: string, perSecond: number, burst: number): Promise<[number, number]>;
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

  constructor(options: RateLimiterOptions) {
    this.keyPrefix = options.keyPrefix ?? 'svc:bucket:';
    const redis = new Redis({
      ...redisConnectionOptions(options.redisUrl),
      lazyConnect: true,
      // Never queue a decision while disconnected: the request would wait for an unknown
      // time and then be admitted late. Fail now; the client retries with backoff.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.decisionTimeoutMs,
      // Decisions asked for in the same event-loop turn go to Redis in one write (and come
      // back in one read): under load the syscalls per decision fall well below two.
      enableAutoPipelining: true,
      connectTimeout: Math.max(1000, options.decisionTimeoutMs),
      // Keep trying to come back, at most once a second.
      retryStrategy: (attempt: number) => Math.min(50 * attempt, 1000),
    });
    redis.defineCommand('svcTakeToken', { numberOfKeys: 1, lua: takeTokenScript });
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
   * when Redis cannot decide in time.
   */
  async take(databaseId: string, limit: RateLimit): Promise<RateDecision> {
    assert(limit.perSecond > 0 && Number.isFinite(limit.perSecond) && limit.burst >= 1 && Number.isFinite(limit.burst),
      `rate limit of ${databaseId} must have perSecond > 0 and burst >= 1`);
    let reply: [number, number];
    try {
      reply = await this.redis.svcTakeToken(this.keyPrefix + databaseId, limit.perSecond, limit.burst);
    } catch (err) {
      throw new GatewayError('rate_limit_unavailable', 'the rate limit could not be decided; retry with backoff', undefined, err as Error);
    }
    if (reply[0] === 1) return admittedDecision;
    // Whole seconds, rounded up: a client that waits this long finds a token.
    return { admitted: false, retryAfterSeconds: Math.max(1, Math.ceil(reply[1] / 1_000_000)) };
  }

  /** Forget a database's bucket (tests, and a database's deletion). */
  async reset(databaseId: string): Promise<void> {
    await this.redis.del(this.keyPrefix + databaseId);
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
