// The bounds of one running query: a memory budget, a deadline and (inline runs on the
// HTTP thread only) a work cap. Every loop that can run long reports to the guard of the
// query on its thread, so no query can exhaust the heap or run past its deadline by more
// than one check interval.
//
// Memory is counted as the bytes a query allocates for its intermediate results (rows,
// row extras and paths, dedup sets, group maps, scalar items, the rendered response),
// with fixed estimates per allocation: allocation is what can be counted cheaply where it
// happens, and it bounds the peak from above. Two places give bytes back because what
// they allocated is garbage afterwards: a batch entry whose result is not kept (exec/batch.ts;
// a `for_each` runs its body many times), and a `repeat` level once the next one exists.
//
// Why a thread-wide "active guard" instead of a field passed to every function: RowSet and
// the render helpers have no ExecCtx, and a thread runs exactly one query at a time
// (executeRequest is synchronous), like the per-thread scratch in src/exec/. It sits below
// src/exec/ because the store reports to it too: decoding a record is work of the query.
import { queryError, SvcError } from './protocol/errors.js';
import { monotonicMs } from './clock.js';

/** Estimated bytes of one row in a RowSet (a JS number in a growable array, with slack). */
export const ROW_BYTES = 16;
/** Estimated bytes of one row's extras object (bindings, path, sack fields). */
export const EXTRA_BYTES = 96;
/** Estimated bytes of one entry of a Map, Set or object value built by a query. */
export const ENTRY_BYTES = 48;
/** Estimated bytes of a value container (Map, array) before its entries. */
export const CONTAINER_BYTES = 64;

/**
 * Work units between two checks of the clock and the memory count. A unit is a row pushed,
 * an adjacency entry scanned, a predicate or comparison evaluated: ~10 ns to ~1 us each, so
 * a check interval is at most about a millisecond.
 */
const CHECK_INTERVAL = 1024;

/** Characters or bytes of one value handled per work unit (~0.3-0.6 us of rendering or decoding). */
const LENGTH_PER_WORK_UNIT = 64;

/** Thrown when an inline run (HTTP thread) outgrows its work cap: rerun it in the pool. */
export class InlineWorkExceeded extends Error {
  constructor() {
    super('inline work cap reached');
  }
}

export class QueryGuard {
  /** Bytes charged so far. */
  bytes = 0;
  /** Work units so far. */
  work = 0;
  private nextCheck = CHECK_INTERVAL;

  /**
   * @param bytesMax the memory budget (`--query-memory-mb`)
   * @param deadlineMs monotonicMs() value after which the query fails, or Infinity
   * @param workMax work units after which an inline run gives up (Infinity elsewhere)
   */
  constructor(readonly bytesMax: number, readonly deadlineMs: number, readonly workMax: number = Number.POSITIVE_INFINITY) {
    if (workMax < CHECK_INTERVAL) this.nextCheck = workMax;
  }

  /** One row pushed (the hot path: two additions and a compare). */
  row(): void {
    this.bytes += ROW_BYTES;
    if (++this.work >= this.nextCheck) this.check();
  }

  /** `units` of work that allocate nothing the guard counts. */
  step(units: number): void {
    if ((this.work += units) >= this.nextCheck) this.check();
  }

  /**
   * The work of handling one value of `length` characters or bytes at once (rendering it,
   * decoding a record, keying it for dedup): one unit per LENGTH_PER_WORK_UNIT. Counted as
   * one unit whatever its size, an inline read rendered 9 MB strings and sorted 1 M-element
   * arrays on the HTTP thread for seconds (a probe).
   */
  stepLength(length: number): void {
    this.step(1 + Math.floor(length / LENGTH_PER_WORK_UNIT));
  }

  /** A large allocation: counted and checked at once. */
  charge(bytes: number): void {
    this.bytes += bytes;
    if (this.bytes > this.bytesMax) this.overBudget();
  }

  /** Give back `bytes` charged for results that are garbage now. */
  release(bytes: number): void {
    this.bytes -= bytes;
  }

  /** Fail now if `bytes` more would exceed the budget (before allocating what is charged later). */
  ensureRoom(bytes: number): void {
    if (this.bytes + bytes > this.bytesMax) this.overBudget();
  }

  /** A smaller allocation, checked with the next work check. */
  chargeLater(bytes: number): void {
    this.bytes += bytes;
  }

  /** Check the clock, the budget and the work cap now. */
  check(): void {
    this.nextCheck = Math.min(this.work + CHECK_INTERVAL, this.workMax);
    if (this.bytes > this.bytesMax) this.overBudget();
    if (this.work >= this.workMax) throw new InlineWorkExceeded();
    if (monotonicMs() > this.deadlineMs) throw deadlineExceeded();
  }

  private overBudget(): never {
    throw queryError(`the query exceeded its memory budget of ${Math.round(this.bytesMax / (1024 * 1024))} MiB `
      + '(rows, sets, groups and the response it builds; see --query-memory-mb)');
  }
}

export function deadlineExceeded(): SvcError {
  return new SvcError('query_deadline_exceeded', 'db error: query deadline exceeded');
}

/** Outside any query (tests that call operators directly): nothing is bounded. */
const unbounded = new QueryGuard(Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY);

/** The guard of the query running on this thread. */
export let guard: QueryGuard = unbounded;

/** Make `g` this thread's guard; returns the previous one, to be put back with the same call. */
export function swapGuard(g: QueryGuard): QueryGuard {
  const previous = guard;
  guard = g;
  return previous;
}
