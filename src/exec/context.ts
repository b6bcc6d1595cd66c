// Per-request execution state, property resolution (values.md §6), expressions
// (values.md §5) and predicates (operations.md §2.3).
import type { Expr, Op, Predicate, ValueInput } from '../protocol/ast.js';
import type { AccessPath } from '../plan/access-path.js';
import { queryError } from '../protocol/errors.js';
import { DateTime, F32, I64_MAX, I64_MIN, type Value } from '../protocol/value.js';
import { recordGet } from '../store/record-codec.js';
import type { Store } from '../store/store.js';
import { compareComparable, isMember, memberCount, takeEqualityWork, valuesEqual } from '../protocol/compare.js';
import { idOfKey, isEdgeKey, NO_ELEMENT, type RowExtra, type Stream } from './rows.js';
import { guard } from '../query-guard.js';

export interface ExecCtx {
  readonly store: Store;
  /** Snapshot epoch; in a write batch, the epoch being written (sees its own changes). */
  at: number;
  /**
   * Write batches: commit what the batch changed so far and open the next transaction
   * (index operations are commit barriers, envelope.md §5.3); `at` moves on. Null on reads.
   */
  readonly barrier: (() => void) | null;
  /** Sources the plan answers from an index (plan/access-path.ts); null: none. */
  readonly accessPaths: ReadonlyMap<Op, AccessPath> | null;
  readonly writing: boolean;
  /** Parameter frames: request parameters first, then one per enclosing for_each iteration. */
  readonly paramFrames: Map<string, Value>[];
  /** Entry results and as/store bindings, request-wide. */
  readonly vars: Map<string, Stream>;
  /** Whether rows must carry their path (the plan uses path, simple_path or other_n). */
  readonly trackPath: boolean;
  /** Time for `timestamp` / `date_time_now` (the wall clock), read at its first use and fixed for the request; 0 until then. */
  nowMs: number;
}

/**
 * A frame value that hides the name below it: a for_each body does not see the array
 * parameter it runs over (envelope.md §4.4).
 */
export const HIDDEN_PARAMETER = Symbol('hidden parameter') as unknown as Value;

export function paramValue(ctx: ExecCtx, name: string): Value {
  for (let i = ctx.paramFrames.length - 1; i >= 0; i--) {
    const v = ctx.paramFrames[i]!.get(name);
    if (v === HIDDEN_PARAMETER) break;
    if (v !== undefined) return v;
  }
  throw queryError(`parameter \`${name}\` is not bound`);
}

// ---------------------------------------------------------------- property resolution

function storedProperty(ctx: ExecCtx, el: number, name: string): Value | undefined {
  const store = ctx.store;
  const id = idOfKey(el);
  const edge = isEdgeKey(el);
  if (name === '$label') return store.names.nameOf(edge ? store.edgeLabel(id) : store.nodeLabel(id, ctx.at));
  const keyId = store.names.idOf(name);
  let value: Value | undefined;
  if (keyId >= 0) value = recordGet(edge ? store.edgeRecord(id, ctx.at) : store.nodeRecord(id, ctx.at), keyId);
  if (value !== undefined || name.indexOf('.') < 0) return value;
  // Dotted path: the first segment names an object property, later segments members.
  const segments = name.split('.');
  if (segments.some((s) => s === '')) return undefined;
  const firstKey = store.names.idOf(segments[0]!);
  if (firstKey < 0) return undefined;
  let current: Value | undefined = recordGet(edge ? store.edgeRecord(id, ctx.at) : store.nodeRecord(id, ctx.at), firstKey);
  for (let i = 1; i < segments.length; i++) {
    if (!(current instanceof Map)) return undefined;
    current = current.get(segments[i]!);
  }
  return current;
}

/** Resolve a property name against a row (values.md §6); undefined = absent. */
export function resolveProperty(ctx: ExecCtx, el: number, extra: RowExtra | null, name: string): Value | undefined {
  if (el === NO_ELEMENT) {
    return extra !== null && extra.rankName === name ? extra.rank : undefined;
  }
  if (name.charCodeAt(0) === 36 /* $ */) {
    if (isEdgeKey(el)) {
      const id = idOfKey(el);
      if (name === '$from') return BigInt(ctx.store.edgeSource(id));
      if (name === '$to') return BigInt(ctx.store.edgeTarget(id));
      const from = name.startsWith('$from.'), to = !from && name.startsWith('$to.');
      if (from || to) {
        const node = from ? ctx.store.edgeSource(id) : ctx.store.edgeTarget(id);
        const rest = name.slice(from ? 6 : 4);
        if (rest === '$id') return BigInt(node);
        if (!ctx.store.nodeVisible(node, ctx.at)) return undefined;
        return storedProperty(ctx, node * 2, rest);
      }
    }
    if (name === '$id') return BigInt(idOfKey(el));
    if (extra !== null && extra.rankName === name) return extra.rank;
  }
  return storedProperty(ctx, el, name);
}

// ---------------------------------------------------------------- expressions

function toF64(v: Value, side: string): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  if (v instanceof F32) return v.value;
  throw queryError(`${side} expression must be numeric`);
}

/** The request's wall-clock time: every `timestamp` / `date_time_now` of one request gives the same. */
function requestNowMs(ctx: ExecCtx): number {
  if (ctx.nowMs === 0) ctx.nowMs = Date.now();
  return ctx.nowMs;
}

export function evalExpr(ctx: ExecCtx, e: Expr, el: number, extra: RowExtra | null): Value {
  switch (e.kind) {
    case 'property': return resolveProperty(ctx, el, extra, e.name) ?? null;
    case 'id':
      if (el === NO_ELEMENT) throw queryError('id expression needs a row with a current element');
      return BigInt(idOfKey(el));
    case 'timestamp': return BigInt(requestNowMs(ctx));
    case 'date_time_now': return new DateTime(requestNowMs(ctx));
    case 'constant': return e.value;
    case 'param': return paramValue(ctx, e.name);
    case 'add': return toF64(evalExpr(ctx, e.left, el, extra), 'left') + toF64(evalExpr(ctx, e.right, el, extra), 'right');
    case 'sub': return toF64(evalExpr(ctx, e.left, el, extra), 'left') - toF64(evalExpr(ctx, e.right, el, extra), 'right');
    case 'mul': return toF64(evalExpr(ctx, e.left, el, extra), 'left') * toF64(evalExpr(ctx, e.right, el, extra), 'right');
    case 'div': return toF64(evalExpr(ctx, e.left, el, extra), 'left') / toF64(evalExpr(ctx, e.right, el, extra), 'right');
    case 'mod': {
      const l = evalExpr(ctx, e.left, el, extra), r = evalExpr(ctx, e.right, el, extra);
      if (typeof l !== 'bigint') throw queryError('mod left expression must be i64');
      if (typeof r !== 'bigint') throw queryError('mod right expression must be i64');
      if (r === 0n) throw queryError('mod by zero');
      return l % r;
    }
    case 'neg': {
      const v = evalExpr(ctx, e.expr, el, extra);
      if (typeof v === 'bigint') {
        if (v === I64_MIN) throw queryError('i64 overflow in negation');
        return -v;
      }
      return -toF64(v, 'neg');
    }
    case 'case': {
      for (const branch of e.when_then) if (evalPredicate(ctx, branch.when, el, extra)) return evalExpr(ctx, branch.then, el, extra);
      return e.else_expr === null ? null : evalExpr(ctx, e.else_expr, el, extra);
    }
  }
}

// ---------------------------------------------------------------- predicates

/**
 * valuesEqual, with the elements it compared inside large values charged as work. (The
 * count is taken before too: other callers of valuesEqual, index code, do not take it.)
 */
export function chargedEqual(l: Value, r: Value): boolean {
  takeEqualityWork();
  const equal = valuesEqual(l, r);
  chargeEqualityWork();
  return equal;
}

/** Charge the elements valuesEqual compared since the last takeEqualityWork(). */
function chargeEqualityWork(): void {
  const work = takeEqualityWork();
  if (work > 0) guard.step(work);
}

function compareWith(op: 'eq' | 'neq' | 'gt' | 'gte' | 'lt' | 'lte', l: Value, r: Value): boolean {
  if (op === 'eq') return chargedEqual(l, r);
  if (op === 'neq') return !chargedEqual(l, r);
  const c = compareComparable(l, r);
  if (c === undefined) return false;
  switch (op) {
    case 'gt': return c > 0;
    case 'gte': return c >= 0;
    case 'lt': return c < 0;
    case 'lte': return c <= 0;
  }
}

/**
 * Characters a string predicate (`contains`, `starts_with`, `ends_with`) scans per work
 * unit (src/query-guard.ts): ~30-100 ns of scanning, like a row, so the inline cap's 20,000 units
 * are ~640 K characters. A predicate over a stored string of megabytes is one evaluation but
 * milliseconds of work: counted as one unit, 14 rows of 9 MB held the HTTP thread 0.36 s
 * within an inline cap meant for ~1-2 ms (a probe).
 */
const SEARCH_CHARS_PER_WORK_UNIT = 32;

/** Work units of scanning `chars` characters. */
function searchWork(chars: number): number {
  return Math.ceil(chars / SEARCH_CHARS_PER_WORK_UNIT);
}

/**
 * Longest substring handed to String.prototype.includes. V8's Boyer-Moore tables cover only
 * the last 250 characters of a pattern; past them a text in which that tail matches often
 * is compared naively, O(text x pattern): `contains` of a 3,001-character pattern in a 9 MB
 * stored string held a thread 13 s in one call, out of reach of every deadline check (a
 * probe; 28 s on the HTTP thread for two rows). Longer patterns take a linear search.
 */
const NATIVE_SEARCH_PATTERN_MAX = 250;

/** Characters the linear search scans between two reports to the guard. */
const SEARCH_SLICE_CHARS = 1 << 16;

/** `text.includes(pattern)` in time linear in both, charged to the guard as it scans. */
export function stringContains(text: string, pattern: string): boolean {
  if (pattern.length > text.length) return false;
  if (pattern.length <= NATIVE_SEARCH_PATTERN_MAX) {
    guard.step(searchWork(text.length));
    return text.includes(pattern);
  }
  // Knuth-Morris-Pratt over UTF-16 code units (what includes compares).
  const m = pattern.length;
  guard.charge(4 * m);
  guard.step(searchWork(m));
  const fail = new Int32Array(m);
  for (let i = 1, k = 0; i < m; i++) {
    const c = pattern.charCodeAt(i);
    while (k > 0 && pattern.charCodeAt(k) !== c) k = fail[k - 1]!;
    if (pattern.charCodeAt(k) === c) k++;
    fail[i] = k;
  }
  let matched = 0;
  for (let start = 0; start < text.length; start += SEARCH_SLICE_CHARS) {
    const end = Math.min(text.length, start + SEARCH_SLICE_CHARS);
    guard.step(searchWork(end - start));
    for (let i = start; i < end; i++) {
      const c = text.charCodeAt(i);
      while (matched > 0 && pattern.charCodeAt(matched) !== c) matched = fail[matched - 1]!;
      if (pattern.charCodeAt(matched) === c && ++matched === m) {
        guard.release(4 * m);
        return true;
      }
    }
  }
  guard.release(4 * m);
  return false;
}

export function evalPredicate(ctx: ExecCtx, p: Predicate, el: number, extra: RowExtra | null): boolean {
  switch (p.kind) {
    case 'eq': case 'neq': case 'gt': case 'gte': case 'lt': case 'lte':
      return compareWith(p.kind, evalExpr(ctx, p.left, el, extra), evalExpr(ctx, p.right, el, extra));
    case 'compare':
      return compareWith(p.op, evalExpr(ctx, p.left, el, extra), evalExpr(ctx, p.right, el, extra));
    case 'between': {
      // All three operands are evaluated (so an error in any of them surfaces), then compared.
      const v = evalExpr(ctx, p.value, el, extra);
      const min = evalExpr(ctx, p.min, el, extra);
      const max = evalExpr(ctx, p.max, el, extra);
      const lo = compareComparable(min, v);
      const hi = compareComparable(v, max);
      return lo !== undefined && lo <= 0 && hi !== undefined && hi <= 0;
    }
    case 'has_key': return resolveProperty(ctx, el, extra, p.property) !== undefined;
    case 'is_null': {
      const v = resolveProperty(ctx, el, extra, p.property);
      return v === undefined || v === null;
    }
    case 'is_not_null': {
      const v = resolveProperty(ctx, el, extra, p.property);
      return v !== undefined && v !== null;
    }
    case 'starts_with': {
      const v = evalExpr(ctx, p.value, el, extra), s = evalExpr(ctx, p.prefix, el, extra);
      if (typeof v !== 'string' || typeof s !== 'string') return false;
      guard.step(searchWork(Math.min(v.length, s.length)));
      return v.startsWith(s);
    }
    case 'ends_with': {
      const v = evalExpr(ctx, p.value, el, extra), s = evalExpr(ctx, p.suffix, el, extra);
      if (typeof v !== 'string' || typeof s !== 'string') return false;
      guard.step(searchWork(Math.min(v.length, s.length)));
      return v.endsWith(s);
    }
    case 'contains': {
      const v = evalExpr(ctx, p.value, el, extra), s = evalExpr(ctx, p.substring, el, extra);
      return typeof v === 'string' && typeof s === 'string' && stringContains(v, s);
    }
    case 'is_in': {
      const set = evalExpr(ctx, p.values, el, extra);
      // A linear search: its work is the set's size, not one unit per row (a probe's 18 sets
      // of 1,200 held the HTTP thread 150 ms within an inline work cap meant for ~1-2 ms).
      guard.step(memberCount(set));
      const value = evalExpr(ctx, p.value, el, extra);
      takeEqualityWork();
      const member = isMember(value, set);
      chargeEqualityWork(); // members that are themselves large values
      return member;
    }
    case 'and':
      for (const c of p.predicates) if (!evalPredicate(ctx, c, el, extra)) return false;
      return true;
    case 'or':
      for (const c of p.predicates) if (evalPredicate(ctx, c, el, extra)) return true;
      return false;
    case 'not': return !evalPredicate(ctx, p.predicate, el, extra);
  }
}

/** A literal-or-expression input (values.md §4) evaluated on a row. */
export function inputValue(ctx: ExecCtx, input: ValueInput, el: number, extra: RowExtra | null): Value {
  return input.kind === 'value' ? input.value : evalExpr(ctx, input.expr, el, extra);
}

/** i64 result of an addition, or an invalid_query on overflow (sack_add). */
export function addI64(a: bigint, b: bigint): bigint {
  const sum = a + b;
  if (sum < I64_MIN || sum > I64_MAX) throw queryError('i64 overflow in sack_add');
  return sum;
}
