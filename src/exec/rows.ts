// Streams and rows. A row's element is one number: node ID * 2, edge ID * 2 + 1, or -1
// for "no element". Rows without extras (the common case) are just that number; extras
// (ranking field, bindings, path, sack) live in a parallel array allocated only when
// some row has them.
import { queryError } from '../protocol/errors.js';
import type { Value } from '../protocol/value.js';
import { limits } from '../limits.js';
import { EXTRA_BYTES, guard, ROW_BYTES } from '../query-guard.js';

export const NO_ELEMENT = -1;
export const nodeKey = (id: number): number => id * 2;
export const edgeKey = (id: number): number => id * 2 + 1;
export const isEdgeKey = (key: number): boolean => (key & 1) === 1;
export const idOfKey = (key: number): number => Math.floor(key / 2);

/** A bound element inside a row's bindings (kept with its ranking field snapshot). */
export interface BoundElement { el: number; rankName: string | null; rank: number }

export interface RowExtra {
  /** `$distance` or `$score` of a search, until the row moves. */
  rankName: string | null;
  rank: number;
  bindings: Map<string, BoundElement> | null;
  /** Element keys visited, oldest first (tracked only when the plan needs it). */
  path: number[] | null;
  pathVisible: boolean;
  /** Sack value; undefined = unset. */
  sack: Value | undefined;
  sackVisible: boolean;
}

export class RowSet {
  readonly el: number[];
  /** Parallel to `el`, or null when no row has extras. */
  extra: (RowExtra | null)[] | null;
  /** `el` given: the caller charged its rows to the query's guard (src/query-guard.ts). */
  constructor(el: number[] = [], extra: (RowExtra | null)[] | null = null) {
    this.el = el;
    this.extra = extra;
  }
  get length(): number { return this.el.length; }

  extraAt(i: number): RowExtra | null {
    return this.extra === null ? null : this.extra[i]!;
  }

  push(el: number, extra: RowExtra | null): void {
    guard.row();
    if (extra !== null && this.extra === null) {
      guard.charge(this.el.length * ROW_BYTES);
      this.extra = new Array<RowExtra | null>(this.el.length).fill(null);
    }
    this.el.push(el);
    if (this.extra !== null) this.extra.push(extra);
  }

  /** Append row `i` of `from`. */
  pushFrom(from: RowSet, i: number): void {
    this.push(from.el[i]!, from.extraAt(i));
  }
}

export function emptyExtra(): RowExtra {
  return { rankName: null, rank: 0, bindings: null, path: null, pathVisible: false, sack: undefined, sackVisible: false };
}

/** The extras of a row that moved to a new element: ranking dropped, path extended. */
export function movedExtra(from: RowExtra | null, newEl: number, trackPath: boolean, fromEl: number): RowExtra | null {
  if (from === null && !trackPath) return null;
  guard.chargeLater(EXTRA_BYTES);
  const next = from === null ? emptyExtra() : { ...from };
  next.rankName = null;
  next.rank = 0;
  if (trackPath) {
    const base = from?.path ?? (fromEl === NO_ELEMENT ? [] : [fromEl]);
    if (base.length >= limits.pathLengthMax) throw queryError(`a row path exceeded ${limits.pathLengthMax} elements`);
    guard.charge((base.length + 1) * 8);
    next.path = [...base, newEl];
  }
  if (next.bindings === null && next.path === null && next.sack === undefined && !next.pathVisible && !next.sackVisible) return null;
  return next;
}

/** Result of evaluating an operation. */
export type Stream =
  | { kind: 'rows'; rows: RowSet }
  | { kind: 'fold'; rows: RowSet }
  | { kind: 'scalars'; items: Value[] }
  /** Scalars built only if an operator reads them; rendering may write them directly (exec/element-maps.ts). */
  | { kind: 'lazy_scalars'; source: LazyScalars }
  | { kind: 'count'; n: number }
  | { kind: 'exists'; value: boolean }
  | { kind: 'object'; value: Value };

/** Scalar items that are cheaper to render than to build. */
export interface LazyScalars {
  readonly length: number;
  /** The items, built once. */
  items(): Value[];
  /** Item `i` as response JSON, byte for byte renderValue(items()[i]). */
  render(i: number): string;
}

export const rowsOf = (rows: RowSet): Stream => ({ kind: 'rows', rows });

/** Rows of a stream for operators that need element rows (operations.md §1.2). */
export function needRows(s: Stream, op: string): RowSet {
  if (s.kind === 'rows') return s.rows;
  if (s.kind === 'fold') throw queryError(`${op} expected stream input, got a folded stream; use unfold first`);
  throw queryError(`${op} expected stream input, got ${s.kind === 'scalars' || s.kind === 'lazy_scalars' ? 'scalar values' : `a ${s.kind} result`}`);
}

/** Items of a stream as scalars, for operators that accept scalar input (windows, dedup, count). */
export function scalarItems(s: Stream): Value[] | null {
  switch (s.kind) {
    case 'scalars': return s.items;
    case 'lazy_scalars': return s.source.items();
    case 'count': return [BigInt(s.n)];
    case 'exists': return [s.value];
    case 'object': return [s.value];
    default: return null;
  }
}

/** Size of a bound value for batch conditions (envelope.md §4.3). */
export function sizeOf(s: Stream): number {
  switch (s.kind) {
    case 'rows': return s.rows.length;
    case 'fold': return s.rows.length > 0 ? 1 : 0;
    case 'scalars': return s.items.length;
    case 'lazy_scalars': return s.source.length;
    case 'count': return s.n;
    case 'exists': return s.value ? 1 : 0;
    case 'object': return 1;
  }
}

// ---------------------------------------------------------------- helpers of the operators

/** Fail the query once a stream has more than limits.streamRowsMax rows. */
export function checkRowLimit(n: number): void {
  if (n > limits.streamRowsMax) throw queryError(`a stream exceeded ${limits.streamRowsMax} rows`);
}

/** Row `i` of `rows` alone. */
export function single(rows: RowSet, i: number): RowSet {
  const one = new RowSet();
  one.pushFrom(rows, i);
  return one;
}

/** Append every row of `rows` to `out`, within limits.streamRowsMax. */
export function append(out: RowSet, rows: RowSet): void {
  for (let i = 0; i < rows.length; i++) out.pushFrom(rows, i);
  if (out.length > limits.streamRowsMax) throw queryError(`a stream exceeded ${limits.streamRowsMax} rows`);
}

/** The extras of row `i`, copied so they can be changed (rows share extras objects). */
export function ownExtra(rows: RowSet, i: number): RowExtra {
  guard.chargeLater(EXTRA_BYTES);
  const e = rows.extraAt(i);
  return e === null ? emptyExtra() : { ...e };
}

/** The rows with each row's own copy of its extras, changed by `change`. */
export function mapExtras(rows: RowSet, change: (extra: RowExtra, el: number) => void): RowSet {
  const out = new RowSet();
  for (let i = 0; i < rows.length; i++) {
    const extra = ownExtra(rows, i);
    change(extra, rows.el[i]!);
    out.push(rows.el[i]!, extra);
  }
  return out;
}
