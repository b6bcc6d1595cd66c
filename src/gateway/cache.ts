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
//
// Stale if the store fails: an entry confirmed less than `staleMs` ago outlives a failed
// refresh (the store down, or no answer in time). The requests that waited for that lookup
// get the stale value; until one TTL later nobody asks again, and while a later refresh of
// a failing entry runs, requests take the stale value instead of waiting for it. So an outage
// of the control plane costs the data plane nothing for `staleMs` (keys, routes and
// allowances seen in that window keep working), at the price that a key revoked just
// before the outage also keeps working that long. Past `staleMs`, or for an entry never
// seen, the answer is 503 control_plane_unavailable as before.
import { GatewayError } from './errors.js';
import { monotonicMs } from '../clock.js';

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
  /** Until then the value is used as it is; after it, the store is asked again. */
  freshUntilMs: number;
  /** Until then the value outlives a failed refresh (confirmed by the store + staleMs). */
  readonly staleUntilMs: number;
  /** The last refresh failed: requests take the value rather than wait for the next one. */
  failing: boolean;
}

export interface CacheOptions<V> {
  ttlMs: number;
  entriesMax: number;
  /** Longest a lookup may take; longer: 503 control_plane_unavailable. */
  lookupTimeoutMs: number;
  /** How long after the store last confirmed it a value outlives failed refreshes (0: never). */
  staleMs: number;
  /** Told when an entry starts being served stale (once per failing spell of that entry). */
  onStale?(what: string, err: Error): void;
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
  /** Answers given from an entry past its TTL because the store failed (GET /metrics). */
  staleAnswers = 0;

  constructor(options: CacheOptions<V>) {
    this.options = options;
  }

  /** The value for `key`, from the cache when fresh. Throws GatewayError control_plane_unavailable. */
  get(key: string): Promise<V> | V {
    const entry = this.entries.get(key);
    const now = monotonicMs();
    // (A failing entry is re-armed for one TTL at a time: its value is stale all the same.)
    if (entry !== undefined && entry.freshUntilMs > now) return entry.failing ? this.stale(entry) : entry.value;
    const usableStale = entry !== undefined && entry.failing && entry.staleUntilMs > now;
    const running = this.lookups.get(key);
    if (running !== undefined) return usableStale ? this.stale(entry!) : running;
    const slots = this.options.slots;
    if (slots.inFlight >= slots.max) {
      if (usableStale) return this.stale(entry!);
      throw new GatewayError('control_plane_unavailable', `the ${this.options.what} could not be looked up: too many lookups are running; retry later`);
    }
    const lookup = this.lookUp(key);
    this.lookups.set(key, lookup);
    return usableStale ? this.stale(entry!) : lookup;
  }

  private stale(entry: Entry<V>): V {
    this.staleAnswers++;
    return entry.value;
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
      const entry = this.entries.get(key);
      if (entry !== undefined && entry.staleUntilMs > monotonicMs()) {
        // Stale if the store fails: nobody asks again for one TTL.
        if (!entry.failing) this.options.onStale?.(this.options.what, err as Error);
        entry.failing = true;
        entry.freshUntilMs = monotonicMs() + this.options.ttlMs;
        return this.stale(entry);
      }
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
    const now = monotonicMs();
    this.entries.set(key, { value, freshUntilMs: now + this.options.ttlMs, staleUntilMs: now + this.options.staleMs, failing: false });
  }
}
