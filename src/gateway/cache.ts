// Brief caching of control-plane answers (docs/gateway.md "Caching"), so a request on the
// hot path reaches no store: a key's grant, a database's route and a workspace's allowance
// are each remembered for `ttlMs` (1 s by default). The price is staleness: a revoked key,
// a changed route or an exhausted allowance takes effect within one TTL.
//
// Concurrent misses of one key share one lookup (no stampede on the store when a popular
// entry expires), and the map holds at most `entriesMax` entries (unknown keys are cached
// too, so a flood of random keys costs one lookup each per TTL and bounded memory). The
// caches of one gateway share a bound on lookups running at once (LookupSlots): a flood of
// distinct keys is refused at the bound instead of queueing on the store.
import { GatewayError } from './errors.js';

/** Lookups running at once, shared by the caches of one gateway. */
export class LookupSlots {
  inFlight = 0;
  readonly max: number;
  constructor(max: number) {
    this.max = max;
  }
}

interface Entry<V> {
  readonly value: V;
  readonly expiresAtMs: number;
}

export interface CacheOptions<V> {
  ttlMs: number;
  entriesMax: number;
  /** Longest a lookup may take; longer: 503 control_plane_unavailable. */
  lookupTimeoutMs: number;
  /** What is being looked up, for error messages ("API key", "database route"). */
  what: string;
  /** The bound on lookups running at once; a miss past it: 503 control_plane_unavailable at once. */
  slots: LookupSlots;
  lookup(key: string): Promise<V>;
}

export class ExpiringCache<V> {
  private readonly entries = new Map<string, Entry<V>>();
  private readonly lookups = new Map<string, Promise<V>>();
  private readonly options: CacheOptions<V>;
  /** Lookups sent to the store (tests prove the hot path reaches no store). */
  lookupsStarted = 0;

  constructor(options: CacheOptions<V>) {
    this.options = options;
  }

  /** The value for `key`, from the cache when fresh. Throws GatewayError control_plane_unavailable. */
  get(key: string): Promise<V> | V {
    const entry = this.entries.get(key);
    if (entry !== undefined && entry.expiresAtMs > Date.now()) return entry.value;
    const running = this.lookups.get(key);
    if (running !== undefined) return running;
    const slots = this.options.slots;
    if (slots.inFlight >= slots.max) {
      throw new GatewayError('control_plane_unavailable', `the ${this.options.what} could not be looked up: too many lookups are running; retry later`);
    }
    const lookup = this.lookUp(key);
    this.lookups.set(key, lookup);
    return lookup;
  }

  /**
   * Drop one entry, so the next get() asks the store again: a backend proved the cached
   * route wrong (it serves another database, docs/gateway.md "Binding backends").
   */
  forget(key: string): void {
    this.entries.delete(key);
  }

  /** Drop every entry (tests; an operator's "forget now"). */
  clear(): void {
    this.entries.clear();
  }

  private async lookUp(key: string): Promise<V> {
    this.lookupsStarted++;
    this.options.slots.inFlight++;
    let timer: NodeJS.Timeout | undefined;
    try {
      const value = await Promise.race([
        this.options.lookup(key),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${this.options.lookupTimeoutMs} ms`)), this.options.lookupTimeoutMs);
        }),
      ]);
      this.remember(key, value);
      return value;
    } catch (err) {
      // Failures are not cached: the next request asks again.
      throw new GatewayError('control_plane_unavailable', `the ${this.options.what} could not be looked up; retry later`, undefined, err as Error);
    } finally {
      clearTimeout(timer);
      this.lookups.delete(key);
      // Freed at the timeout even if the store still works on it: the bound is on what the
      // gateway waits for; the store's own pool bounds what it runs.
      this.options.slots.inFlight--;
    }
  }

  private remember(key: string, value: V): void {
    this.entries.delete(key); // re-inserted last: Map order is insertion order, oldest first
    if (this.entries.size >= this.options.entriesMax) {
      const oldest = this.entries.keys().next();
      if (oldest.done !== true) this.entries.delete(oldest.value);
    }
    this.entries.set(key, { value, expiresAtMs: Date.now() + this.options.ttlMs });
  }
}
