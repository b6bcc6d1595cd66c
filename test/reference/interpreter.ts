// A small, deliberately naive reference interpreter of the query protocol
// (/work/shared/protocol: envelope.md, values.md, operations.md, errors.md), used as the
// oracle for differential tests of the real engine. It is written from the spec alone.
//
// Design:
//   * The graph is plain Maps (./graph.ts); every lookup is a scan. Clarity over speed.
//   * One request = one transaction: a write snapshots the graph first and restores it on
//     any error (the ID sequences are not restored, so IDs of a failed write stay consumed).
//   * Planning (./planner.ts) runs before anything executes: its errors are 400s.
//   * Each operation evaluates its whole input first and then produces its whole output
//     (no streaming), so side effects happen operation by operation, rows in order.
//   * Results are rendered into plain JSON values: integers as bigint, other numbers as
//     number, objects as Map<string, Plain> with keys sorted byte-wise (envelope.md §7-§8).
//
// Search and index operations need index machinery the reference does not model; they
// answer 501 `reference_unsupported` (see planner.ts).
import type {
  Condition, ElementRef, Entry, Expr, Op, Predicate, Request, StreamBound, SubTraversal, ValueInput,
} from '../../src/protocol/ast.js';
import { DateTime, F32, I64_MAX, StringArray, type Value } from '../../src/protocol/value.js';
import { Graph, type EdgeRec, type NodeRec } from './graph.js';
import { classOf, literalBound, planBatch, type ShapeClass } from './planner.js';

/** Append `items` to `out` (a spread of a long array overflows the call stack). */
function append<T>(out: T[], items: readonly T[]): void {
  for (const item of items) out.push(item);
}
import {
  compareForPredicate, compareSortKeys, displayText, identityKey, isNumeric, parseNumericString, queryError,
  RefError, renderValue, sortedPlainObject, toDouble, valuesEqual, compareStrings, type Plain,
} from './values.js';

export { Graph } from './graph.js';
export type { Plain } from './values.js';

// ------------------------------------------------------------------ run-time data

/** An element: its kind matters (node 4 ≠ edge 4). */
export interface El { kind: 'node' | 'edge'; id: bigint }

/** A row (operations.md §1.2). The reference never has ranking fields: it has no searches. */
export interface Row {
  el: El | null;
  bindings: Map<string, El>;
  path: El[];
  pathVisible: boolean;
  /** undefined = unset. */
  sack: Value | undefined;
  sackVisible: boolean;
}

/** One scalar item of a terminal's output. */
export type Item =
  | { t: 'id'; id: bigint }
  | { t: 'value'; v: Value }
  | { t: 'count'; n: bigint }
  | { t: 'bool'; b: boolean };

/** What an operation produces (stream kinds R/N/E, F, S of operations.md §1.2). */
export type Result =
  | { kind: 'rows'; rows: Row[] }
  | { kind: 'folded'; rows: Row[] }
  | { kind: 'count'; n: bigint }
  | { kind: 'exists'; b: boolean }
  | { kind: 'items'; items: Item[] };

interface Scope {
  /** Effective parameters (for_each members shadow top-level ones). */
  params: Map<string, Value>;
  /** The rows `context` stands for inside a sub-traversal. */
  context: Row[] | null;
}

/** What an entry name is bound to: its value and the class of the entry that produced it. */
interface Bound { value: Result; cls: ShapeClass }

const rows = (rs: Row[]): Result => ({ kind: 'rows', rows: rs });
const items = (is: Item[]): Result => ({ kind: 'items', items: is });
const EMPTY: Result = { kind: 'rows', rows: [] };

// ------------------------------------------------------------------ the work bound

/**
 * Rows one request may create (every newRow and moveRow: sources, navigation, mutations)
 * before the reference gives up with ReferenceBudgetExceeded. Everything else it holds is
 * at most a small multiple of its rows (a row's path and bindings are as long as the
 * query's navigation and binds), so this bounds a request's memory: ~300 bytes a row, 1 M
 * rows ~300 MB. Without it, random chains or repeats of `both` steps over the dense graphs
 * of the differential tests (40 nodes, 160 edges) can ask for tens of millions of walks and
 * gigabytes. The engine bounds the same queries with its per-query memory budget
 * (limits.queryMemoryBytesMax, ~8 M rows), so a case over this bound is not comparable:
 * the differential tests skip it.
 */
export const referenceRowsMax = 1_000_000;

/** Thrown (not an answer: a limit of the oracle) when a request creates more than referenceRowsMax rows. */
export class ReferenceBudgetExceeded extends Error {}

/** Rows the running request may still create (the interpreter is synchronous: one request at a time). */
let rowsLeft = referenceRowsMax;

function countRow(): void {
  if (--rowsLeft < 0) throw new ReferenceBudgetExceeded(`the reference created more than ${referenceRowsMax} rows for one request`);
}

const newRow = (el: El): Row => {
  countRow();
  return { el, bindings: new Map(), path: [el], pathVisible: false, sack: undefined, sackVisible: false };
};

/** The row moved to another element: path extended, bindings and sack kept. */
const moveRow = (row: Row, el: El): Row => {
  countRow();
  return { ...row, el, bindings: new Map(row.bindings), path: [...row.path, el] };
};

const nodeEl = (id: bigint): El => ({ kind: 'node', id });
const edgeEl = (id: bigint): El => ({ kind: 'edge', id });
const elKey = (el: El) => `${el.kind}:${el.id}`;

/** IDs inside projections/expressions are i64; larger u64 IDs clamp (envelope.md §10). */
const asI64 = (id: bigint): bigint => (id > I64_MAX ? I64_MAX : id);

/** Size of a bound value for batch conditions and the shape rule (envelope.md §4.3). */
export function sizeOf(r: Result): bigint {
  switch (r.kind) {
    case 'rows': return BigInt(r.rows.length);
    case 'folded': return r.rows.length > 0 ? 1n : 0n;
    case 'count': return r.n;
    case 'exists': return r.b ? 1n : 0n;
    case 'items': return BigInt(r.items.length);
  }
}

function describe(r: Result): string {
  return r.kind === 'rows' ? 'stream' : r.kind === 'folded' ? 'folded stream' : `scalar (${r.kind})`;
}

/** The rows of an element stream; F, S and X inputs are run-time errors (operations.md §1.2). */
function requireRows(r: Result, what: string): Row[] {
  if (r.kind === 'rows') return r.rows;
  if (r.kind === 'folded') throw queryError(`${what} expected stream input, got folded stream; use unfold first`);
  throw queryError(`${what} expected stream input, got ${describe(r)}`);
}

/** Rows or scalar items (windows, dedup): a count/exists result counts as one item. */
function rowsOrItems(r: Result, what: string): { rows: Row[] } | { items: Item[] } {
  switch (r.kind) {
    case 'rows': return { rows: r.rows };
    case 'items': return { items: r.items };
    case 'count': return { items: [{ t: 'count', n: r.n }] };
    case 'exists': return { items: [{ t: 'bool', b: r.b }] };
    case 'folded': throw queryError(`${what} expected stream input, got folded stream; use unfold first`);
  }
}

// ------------------------------------------------------------------ rendering (envelope.md §8-§9)

const elRef = (el: El): Plain => new Map<string, Plain>([[el.kind, el.id]]);

export function renderRow(row: Row): Plain {
  if (row.el !== null && row.bindings.size === 0 && !row.pathVisible && !row.sackVisible) {
    return new Map<string, Plain>([['$id', row.el.id]]);
  }
  const parts: [string, Plain][] = [
    ['bindings', sortedPlainObject([...row.bindings].map(([k, el]) => [k, elRef(el)]))],
    ['current', row.el === null ? null : elRef(row.el)],
  ];
  if (row.pathVisible) parts.push(['path', row.path.map(elRef)]);
  if (row.sackVisible) parts.push(['sack', row.sack === undefined ? null : renderValue(row.sack)]);
  return sortedPlainObject(parts);
}

function renderItem(item: Item): Plain {
  switch (item.t) {
    case 'id': return item.id;
    case 'value': return renderValue(item.v);
    case 'count': return item.n;
    case 'bool': return item.b;
  }
}

export function renderResult(r: Result): Plain {
  switch (r.kind) {
    case 'rows': case 'folded': return r.rows.map(renderRow);
    case 'count': return r.n;
    case 'exists': return r.b;
    case 'items': return r.items.map(renderItem);
  }
}

/** envelope.md §9.3/§9.4: only an empty value needs the class. */
function renderBound(b: Bound): Plain {
  if (sizeOf(b.value) === 0n) {
    if (b.cls === 'list') return [];
    if (b.cls === 'object') return null;
    // Scalar: an executed count/exists shows itself; a skipped entry's empty stream shows as [].
    return b.value.kind === 'count' || b.value.kind === 'exists' ? renderResult(b.value) : [];
  }
  return renderResult(b.value);
}

// ------------------------------------------------------------------ the database

export interface Response { status: number; body: unknown }

export class ReferenceDb {
  readonly graph = new Graph();

  /** Runs one request; throws ReferenceBudgetExceeded (after undoing a write) past referenceRowsMax rows. */
  query(request: Request): Response {
    rowsLeft = referenceRowsMax;
    const write = request.request_type === 'write';
    try {
      planBatch(request.batch, write);
    } catch (e) {
      return errorResponse(e);
    }
    const snapshot = write ? this.graph.snapshot() : null;
    try {
      return { status: 200, body: new Execution(this.graph, request).run() };
    } catch (e) {
      if (snapshot !== null) this.graph.restore(snapshot);
      return errorResponse(e);
    }
  }
}

function errorResponse(e: unknown): Response {
  if (e instanceof RefError) {
    return { status: e.status, body: new Map<string, Plain>([['error', e.code], ['msg', e.message]]) };
  }
  throw e; // a bug in the reference itself
}

// ------------------------------------------------------------------ execution of one request

class Execution {
  /** The request-wide variable table: entry names and as/store names. */
  private readonly vars = new Map<string, Result>();
  /** Entry names only, for `returns`. */
  private readonly bound = new Map<string, Bound>();

  constructor(private readonly graph: Graph, private readonly request: Request) {}

  run(): Map<string, Plain> {
    this.runEntries(this.request.batch.entries, this.request.parameters);
    const out: [string, Plain][] = [];
    for (const name of this.request.batch.returns) {
      const b = this.bound.get(name);
      if (b !== undefined) {
        out.push([name, renderBound(b)]);
        continue;
      }
      // Bound only inside a for_each body that never ran (envelope.md §4.4).
      const cls = classOf(lastEntryNamed(this.request.batch.entries, name)!.root);
      if (cls === 'scalar') throw queryError(`return variable \`${name}\` is not bound`);
      out.push([name, cls === 'list' ? [] : null]);
    }
    return sortedPlainObject(out);
  }

  // ---------------------------------------------------------------- batches

  /** Runs entries in order; returns the result of the last entry run (for prev_not_empty). */
  private runEntries(entries: Entry[], params: Map<string, Value>): Result | null {
    let prev: Result | null = null;
    for (const entry of entries) {
      if (entry.kind === 'for_each') {
        prev = this.runForEach(entry.param, entry.body, params) ?? prev;
        continue;
      }
      const runs = entry.condition === null || this.conditionHolds(entry.condition, prev);
      const value = runs ? this.evalOp(entry.root, { params, context: null }) : EMPTY;
      if (entry.name !== null) {
        this.vars.set(entry.name, value);
        this.bound.set(entry.name, { value, cls: classOf(entry.root) });
      }
      prev = value;
    }
    return prev;
  }

  private runForEach(param: string, body: Entry[], params: Map<string, Value>): Result | null {
    const list = params.get(param);
    if (list === undefined) throw queryError(`parameter \`${param}\` is not bound`);
    if (!Array.isArray(list)) throw queryError(`for_each parameter \`${param}\` must be an array of objects`);
    const iterations: Map<string, Value>[] = [];
    for (const element of list) {
      if (!(element instanceof Map)) throw queryError(`for_each parameter \`${param}\` must be an array of objects`);
      if ([...element.keys()].some((k) => k === '')) throw queryError('for_each object member names must be non-empty');
      iterations.push(element);
    }
    let last: Result | null = null;
    for (const element of iterations) {
      const inner = new Map(params);
      inner.delete(param); // the array itself is not visible inside the body
      for (const [k, v] of element) inner.set(k, v);
      last = this.runEntries(body, inner) ?? last;
    }
    return last;
  }

  private conditionHolds(c: Condition, prev: Result | null): boolean {
    if (c.kind === 'prev_not_empty') return prev !== null && sizeOf(prev) > 0n;
    const v = this.vars.get(c.name);
    if (v === undefined) throw queryError(`variable \`${c.name}\` is not bound`);
    switch (c.kind) {
      case 'var_not_empty': return sizeOf(v) > 0n;
      case 'var_empty': return sizeOf(v) === 0n;
      case 'var_min_size': return sizeOf(v) >= BigInt(c.size);
    }
  }

  // ---------------------------------------------------------------- elements and properties

  private record(el: El): NodeRec | EdgeRec | undefined {
    return el.kind === 'node' ? this.graph.nodes.get(el.id) : this.graph.edges.get(el.id);
  }

  private exists(el: El): boolean {
    return this.record(el) !== undefined;
  }

  /** A variable read back: rows of elements deleted since it was bound are gone (SPEC §9). */
  private withoutDeleted(value: Result): Result {
    if (value.kind !== 'rows' && value.kind !== 'folded') return value;
    return { ...value, rows: value.rows.filter((r) => r.el === null || this.exists(r.el)) };
  }

  /** values.md §6. undefined = absent. */
  resolve(row: Row, name: string): Value | undefined {
    if (row.el === null) return undefined;
    const rec = this.record(row.el);
    if (rec === undefined) return undefined;
    if (row.el.kind === 'edge') {
      const e = rec as EdgeRec;
      if (name === '$from') return asI64(e.from);
      if (name === '$to') return asI64(e.to);
      for (const [prefix, end] of [['$from.', e.from], ['$to.', e.to]] as const) {
        if (!name.startsWith(prefix)) continue;
        const rest = name.slice(prefix.length);
        if (rest === '$id') return asI64(end);
        const node = this.graph.nodes.get(end);
        return node === undefined ? undefined : lookupStored(node.props, rest);
      }
    }
    if (name === '$id') return asI64(row.el.id);
    return lookupStored(rec.props, name);
  }

  private labelOf(row: Row): string | undefined {
    const v = this.resolve(row, '$label');
    return typeof v === 'string' ? v : undefined;
  }

  // ---------------------------------------------------------------- parameters, expressions, predicates

  private param(name: string, scope: Scope): Value {
    const v = scope.params.get(name);
    if (v === undefined) throw queryError(`parameter \`${name}\` is not bound`);
    return v;
  }

  /** values.md §5. `row` is the current row (an empty row for sources). */
  evalExpr(e: Expr, row: Row, scope: Scope): Value {
    switch (e.kind) {
      case 'property': return this.resolve(row, e.name) ?? null;
      case 'id':
        if (row.el === null) throw queryError('id expression requires a current element');
        return asI64(row.el.id);
      case 'timestamp': return BigInt(Date.now());
      case 'date_time_now': return new DateTime(Date.now());
      case 'constant': return e.value;
      case 'param': return this.param(e.name, scope);
      case 'add': case 'sub': case 'mul': case 'div': {
        const l = this.evalExpr(e.left, row, scope);
        const r = this.evalExpr(e.right, row, scope);
        if (!isNumeric(l)) throw queryError('left expression must be numeric');
        if (!isNumeric(r)) throw queryError('right expression must be numeric');
        const x = toDouble(l);
        const y = toDouble(r);
        return e.kind === 'add' ? x + y : e.kind === 'sub' ? x - y : e.kind === 'mul' ? x * y : x / y;
      }
      case 'mod': {
        const l = this.evalExpr(e.left, row, scope);
        const r = this.evalExpr(e.right, row, scope);
        if (typeof l !== 'bigint') throw queryError('mod left expression must be i64');
        if (typeof r !== 'bigint') throw queryError('mod right expression must be i64');
        if (r === 0n) throw queryError('mod by zero');
        return l % r; // truncated remainder, sign of the dividend
      }
      case 'neg': {
        const v = this.evalExpr(e.expr, row, scope);
        if (typeof v === 'bigint') {
          if (v === -I64_MAX - 1n) throw queryError('integer overflow in neg');
          return -v;
        }
        if (isNumeric(v)) return -toDouble(v);
        throw queryError('neg expression must be numeric');
      }
      case 'case':
        for (const wt of e.when_then) if (this.evalPred(wt.when, row, scope)) return this.evalExpr(wt.then, row, scope);
        return e.else_expr === null ? null : this.evalExpr(e.else_expr, row, scope);
    }
  }

  private evalInput(v: ValueInput, row: Row, scope: Scope): Value {
    return v.kind === 'value' ? v.value : this.evalExpr(v.expr, row, scope);
  }

  /** operations.md §2.3 with values.md §7. */
  evalPred(p: Predicate, row: Row, scope: Scope): boolean {
    const ev = (e: Expr) => this.evalExpr(e, row, scope);
    switch (p.kind) {
      case 'eq': case 'neq': case 'gt': case 'gte': case 'lt': case 'lte':
        return compareWith(p.kind, ev(p.left), ev(p.right));
      case 'compare': return compareWith(p.op, ev(p.left), ev(p.right));
      case 'between': {
        const v = ev(p.value);
        const lo = ev(p.min);
        const hi = ev(p.max);
        return compareWith('lte', lo, v) && compareWith('lte', v, hi);
      }
      case 'has_key': return this.resolve(row, p.property) !== undefined;
      case 'is_null': return (this.resolve(row, p.property) ?? null) === null;
      case 'is_not_null': return (this.resolve(row, p.property) ?? null) !== null;
      case 'starts_with': {
        const v = ev(p.value);
        const x = ev(p.prefix);
        return typeof v === 'string' && typeof x === 'string' && v.startsWith(x);
      }
      case 'ends_with': {
        const v = ev(p.value);
        const x = ev(p.suffix);
        return typeof v === 'string' && typeof x === 'string' && v.endsWith(x);
      }
      case 'contains': {
        const v = ev(p.value);
        const x = ev(p.substring);
        return typeof v === 'string' && typeof x === 'string' && v.includes(x);
      }
      case 'is_in': {
        const v = ev(p.value);
        const set = ev(p.values);
        return setMembers(set).some((m) => valuesEqual(m, v));
      }
      case 'and': return p.predicates.every((q) => this.evalPred(q, row, scope));
      case 'or': return p.predicates.some((q) => this.evalPred(q, row, scope));
      case 'not': return !this.evalPred(p.predicate, row, scope);
    }
  }

  /** operations.md §2.2: literal, normalized constant, or a parameter holding an i64 ≥ 0. */
  private evalBound(b: StreamBound, scope: Scope): bigint {
    const literal = literalBound(b);
    if (literal !== null) return literal;
    if (b.kind === 'expr' && b.expr.kind === 'param') {
      const v = this.param(b.expr.name, scope);
      if (typeof v === 'bigint' && v >= 0n) return v;
      throw queryError(`stream bound parameter \`${b.expr.name}\` must be a non-negative i64`);
    }
    throw queryError('stream bound expression must be a literal or a parameter');
  }

  // ---------------------------------------------------------------- element references (operations.md §2.1)

  private paramIds(name: string, scope: Scope): bigint[] {
    const v = this.param(name, scope);
    const list = Array.isArray(v) ? v : [v];
    return list.map((x) => {
      if (typeof x !== 'bigint' || x < 0n) throw queryError(`parameter \`${name}\` must hold non-negative integer IDs`);
      return x;
    });
  }

  /** IDs of the right kind held by a variable (rows or folded rows). */
  private varIds(name: string, kind: El['kind']): bigint[] | undefined {
    const v = this.vars.get(name);
    if (v === undefined) return undefined;
    if (v.kind !== 'rows' && v.kind !== 'folded') throw queryError(`variable \`${name}\` does not hold element rows`);
    return v.rows.flatMap((r) => (r.el !== null && r.el.kind === kind ? [r.el.id] : []));
  }

  private allIds(kind: El['kind']): bigint[] {
    return (kind === 'node' ? this.graph.allNodes() : this.graph.allEdges()).map((x) => x.id);
  }

  /** Source column: fresh rows for the existing elements named by the reference. */
  private sourceRows(ref: ElementRef, kind: El['kind'], scope: Scope): Row[] {
    let ids: bigint[];
    switch (ref.kind) {
      case 'all': ids = this.allIds(kind); break;
      case 'ids': ids = ref.ids; break;
      case 'var': ids = this.varIds(ref.name, kind) ?? []; break;
      case 'param': ids = this.paramIds(ref.name, scope); break;
    }
    return ids.map((id) => ({ kind, id })).filter((el) => this.exists(el)).map(newRow);
  }

  /** Mutation-target column: the IDs as given (existence is checked by the mutation). */
  private targetIds(ref: ElementRef, kind: El['kind'], scope: Scope): bigint[] {
    switch (ref.kind) {
      case 'all': return this.allIds(kind);
      case 'ids': return ref.ids;
      case 'var': {
        const ids = this.varIds(ref.name, kind);
        if (ids === undefined) throw queryError(`variable \`${ref.name}\` is not bound`);
        return ids;
      }
      case 'param': return this.paramIds(ref.name, scope);
    }
  }

  // ---------------------------------------------------------------- operations

  private input(op: Op & { input: Op }, scope: Scope): Result {
    return this.evalOp(op.input, scope);
  }

  private inputRows(op: Op & { input: Op }, scope: Scope): Row[] {
    return requireRows(this.evalOp(op.input, scope), op.op);
  }

  /** Runs a sub-traversal with `context` rows; the body must produce element rows. */
  private runBody(body: SubTraversal, context: Row[], scope: Scope, what: string): Row[] {
    return requireRows(this.evalOp(body.root, { params: scope.params, context }), `${what} body`);
  }

  evalOp(op: Op, scope: Scope): Result {
    switch (op.op) {
      // -------------------------------------------------------- sources
      case 'context':
        if (scope.context === null) throw queryError('context outside a sub-traversal');
        return rows(scope.context);
      case 'nodes': return rows(this.sourceRows(op.reference, 'node', scope));
      case 'edges': return rows(this.sourceRows(op.reference, 'edge', scope));
      case 'nodes_where': case 'edges_where': {
        const kind = op.op === 'nodes_where' ? 'node' : 'edge';
        return rows(this.allIds(kind).map((id) => newRow({ kind, id })).filter((r) => this.evalPred(op.predicate, r, scope)));
      }
      case 'shortest_path': return this.shortestPath(op, scope);

      // -------------------------------------------------------- navigation (operations.md §4)
      case 'out': case 'in': case 'both': {
        const dir = op.op;
        return rows(this.inputRows(op, scope).flatMap((row) => {
          if (row.el === null) return [];
          if (row.el.kind === 'node') {
            return this.graph.neighbors(row.el.id, dir, op.label).map((n) => moveRow(row, nodeEl(n)));
          }
          const e = this.graph.edges.get(row.el.id);
          if (e === undefined) return [];
          const ends = dir === 'out' ? [e.to] : dir === 'in' ? [e.from] : otherEnds(row, e);
          return ends.map((n) => moveRow(row, nodeEl(n)));
        }));
      }
      case 'out_e': case 'in_e': case 'both_e': {
        const dir = op.op === 'out_e' ? 'out' : op.op === 'in_e' ? 'in' : 'both';
        return rows(this.inputRows(op, scope).flatMap((row) => {
          if (row.el === null || row.el.kind !== 'node') return [];
          return this.graph.incidentEdges(row.el.id, dir, op.label).map((e) => moveRow(row, edgeEl(e.id)));
        }));
      }
      case 'out_n': case 'in_n': case 'other_n': {
        const dir = op.op === 'out_n' ? 'out' : op.op === 'in_n' ? 'in' : 'both';
        return rows(this.inputRows(op, scope).flatMap((row) => {
          if (row.el === null) return [];
          if (row.el.kind === 'node') {
            return this.graph.neighbors(row.el.id, dir, null).map((n) => moveRow(row, nodeEl(n)));
          }
          const e = this.graph.edges.get(row.el.id);
          if (e === undefined) return [];
          const ends = dir === 'out' ? [e.to] : dir === 'in' ? [e.from] : otherEnds(row, e);
          return ends.map((n) => moveRow(row, nodeEl(n)));
        }));
      }

      // -------------------------------------------------------- filters (operations.md §5)
      case 'has':
        return rows(this.inputRows(op, scope).filter((r) => valuesEqual(this.resolve(r, op.property) ?? null, op.value)));
      case 'has_label': case 'edge_has_label':
        return rows(this.inputRows(op, scope).filter((r) => this.labelOf(r) === op.label));
      case 'has_key':
        return rows(this.inputRows(op, scope).filter((r) => this.resolve(r, op.property) !== undefined));
      case 'where':
        return rows(this.inputRows(op, scope).filter((r) => this.evalPred(op.predicate, r, scope)));
      case 'edge_has':
        return rows(this.inputRows(op, scope).filter((r) =>
          valuesEqual(this.resolve(r, op.property) ?? null, this.evalInput(op.value, r, scope))));
      case 'dedup': {
        const input = rowsOrItems(this.input(op, scope), 'dedup');
        const seen = new Set<string>();
        const firstOf = <T>(xs: T[], key: (x: T) => string) => xs.filter((x) => {
          const k = key(x);
          if (seen.has(k)) return false;
          seen.add(k);
          return true;
        });
        if ('rows' in input) {
          return rows(firstOf(input.rows, (r) => (r.el !== null ? elKey(r.el) : `row:${plainKey(renderRow(r))}`)));
        }
        return items(firstOf(input.items, itemKey));
      }
      case 'within': case 'without': {
        const input = this.inputRows(op, scope); // first: the input may bind the variable (as/store)
        const held = this.vars.get(op.variable);
        if (held === undefined) throw queryError(`variable \`${op.variable}\` is not bound`);
        if (held.kind !== 'rows' && held.kind !== 'folded') throw queryError(`variable \`${op.variable}\` does not hold element rows`);
        const set = new Set(held.rows.flatMap((r) => (r.el === null ? [] : [elKey(r.el)])));
        const keep = op.op === 'within';
        return rows(input.filter((r) => (r.el === null ? !keep : set.has(elKey(r.el)) === keep)));
      }

      // -------------------------------------------------------- windows (operations.md §7)
      case 'limit': case 'skip': case 'range': {
        const input = rowsOrItems(this.input(op, scope), op.op);
        let start: bigint;
        let end: bigint | null;
        if (op.op === 'limit') { start = 0n; end = this.evalBound(op.count, scope); }
        else if (op.op === 'skip') { start = this.evalBound(op.count, scope); end = null; }
        else { start = this.evalBound(op.start, scope); end = this.evalBound(op.end, scope); }
        const window = <T>(xs: T[]): T[] => xs.filter((_, i) => BigInt(i) >= start && (end === null || BigInt(i) < end));
        return 'rows' in input ? rows(window(input.rows)) : items(window(input.items));
      }

      // -------------------------------------------------------- variables (operations.md §8)
      case 'as': case 'store': {
        const value = this.input(op, scope);
        this.vars.set(op.name, value);
        return value;
      }
      case 'select': {
        this.input(op, scope); // evaluated, then discarded
        const value = this.vars.get(op.name);
        if (value === undefined) throw queryError(`variable \`${op.name}\` is not bound`);
        return this.withoutDeleted(value);
      }
      case 'inject': {
        if (op.input === null) {
          const value = this.vars.get(op.variable);
          if (value === undefined) throw queryError(`variable \`${op.variable}\` is not bound`);
          return this.withoutDeleted(value);
        }
        const first = requireRows(this.evalOp(op.input, scope), 'inject');
        const value = this.vars.get(op.variable);
        if (value === undefined) throw queryError(`variable \`${op.variable}\` is not bound`);
        return rows([...first, ...requireRows(this.withoutDeleted(value), 'inject variable')]);
      }
      case 'bind':
        return rows(this.inputRows(op, scope).map((r) => {
          if (r.el === null) return r;
          const bindings = new Map(r.bindings);
          bindings.set(op.name, r.el);
          return { ...r, bindings };
        }));

      // -------------------------------------------------------- ordering (operations.md §9, values.md §8)
      case 'order_by': return rows(this.sortRows(this.inputRows(op, scope), [[op.property, op.order]]));
      case 'order_by_multiple': return rows(this.sortRows(this.inputRows(op, scope), op.orderings));

      // -------------------------------------------------------- branching (operations.md §10)
      case 'union': {
        const out: Row[] = [];
        for (const row of this.inputRows(op, scope)) {
          for (const branch of op.traversals) append(out, this.runBody(branch, [row], scope, 'union'));
        }
        const kinds = new Set(out.flatMap((r) => (r.el === null ? [] : [r.el.kind])));
        if (out.some((r) => r.bindings.size > 0) && kinds.size > 1) {
          throw queryError('union with bindings cannot mix node and edge rows');
        }
        return rows(out);
      }
      case 'coalesce':
        return rows(this.inputRows(op, scope).flatMap((row) => {
          for (const branch of op.traversals) {
            const out = this.runBody(branch, [row], scope, 'coalesce');
            if (out.length > 0) return out;
          }
          return [];
        }));
      case 'optional':
        return rows(this.inputRows(op, scope).flatMap((row) => {
          const out = this.runBody(op.traversal, [row], scope, 'optional');
          return out.length > 0 ? out : [row];
        }));
      case 'choose': {
        const input = this.inputRows(op, scope);
        const passes = input.map((r) => this.evalPred(op.condition, r, scope));
        const pass = input.filter((_, i) => passes[i]);
        const fail = input.filter((_, i) => !passes[i]);
        const run = (body: SubTraversal, ctx: Row[]) => this.evalOp(body.root, { params: scope.params, context: ctx });
        if (op.else_traversal === null) return pass.length === 0 ? EMPTY : run(op.then_traversal, pass);
        if (pass.length === 0) return run(op.else_traversal, input);
        if (fail.length === 0) return run(op.then_traversal, input);
        const thenRows = requireRows(run(op.then_traversal, pass), 'choose then body');
        const elseRows = requireRows(run(op.else_traversal, fail), 'choose else body');
        return rows([...thenRows, ...elseRows]);
      }
      case 'repeat': return this.repeat(op, scope);

      // -------------------------------------------------------- fold, path, sack (operations.md §11)
      case 'fold': return { kind: 'folded', rows: this.inputRows(op, scope) };
      case 'unfold': {
        const value = this.input(op, scope);
        if (value.kind === 'folded' || value.kind === 'rows') return rows(value.rows);
        throw queryError(`unfold expected a folded stream, got ${describe(value)}`);
      }
      case 'path': return rows(this.inputRows(op, scope).map((r) => ({ ...r, pathVisible: true })));
      case 'simple_path':
        return rows(this.inputRows(op, scope).filter((r) => new Set(r.path.map(elKey)).size === r.path.length));
      case 'with_sack': return rows(this.inputRows(op, scope).map((r) => ({ ...r, sack: op.initial })));
      case 'sack_set': return rows(this.inputRows(op, scope).map((r) => ({ ...r, sack: this.resolve(r, op.property) })));
      case 'sack_add': return rows(this.inputRows(op, scope).map((r) => ({ ...r, sack: sackAdd(r.sack, this.resolve(r, op.property)) })));
      case 'sack_get': return rows(this.inputRows(op, scope).map((r) => ({ ...r, sackVisible: true })));

      // -------------------------------------------------------- terminals (operations.md §12)
      case 'count': case 'exists': {
        const input = rowsOrItems(this.input(op, scope), op.op);
        const n = BigInt('rows' in input ? input.rows.length : input.items.length);
        return op.op === 'count' ? { kind: 'count', n } : { kind: 'exists', b: n > 0n };
      }
      case 'id': {
        const input = rowsOrItems(this.input(op, scope), 'id');
        if ('items' in input) return items(input.items.filter((i) => i.t === 'id'));
        return items(input.rows.flatMap((r) => (r.el === null ? [] : [{ t: 'id', id: r.el.id } as Item])));
      }
      case 'label':
        return items(this.inputRows(op, scope).flatMap((r) => {
          const l = r.el === null ? undefined : this.labelOf(r);
          return l === undefined ? [] : [{ t: 'value', v: l } as Item];
        }));
      case 'values':
        return items(this.inputRows(op, scope).flatMap((r) => {
          const obj = this.pick(r, op.properties);
          return obj.size === 0 ? [] : [{ t: 'value', v: obj } as Item];
        }));
      case 'value_map':
        return items(this.inputRows(op, scope).map((r) => {
          if (op.properties !== null && op.properties.length > 0) return { t: 'value', v: this.pick(r, op.properties) };
          const obj = new Map<string, Value>();
          if (r.el !== null) {
            const rec = this.record(r.el);
            if (rec !== undefined) {
              for (const [k, v] of rec.props) obj.set(k, v);
              obj.set('$id', asI64(r.el.id));
            }
          }
          return { t: 'value', v: obj };
        }));
      case 'project':
        return items(this.inputRows(op, scope).map((r) => {
          const obj = new Map<string, Value>();
          for (const p of op.projections) {
            if (p.kind === 'property') {
              const v = this.resolve(r, p.source);
              if (v !== undefined) obj.set(p.alias, v);
            } else {
              obj.set(p.alias, this.evalExpr(p.expr, r, scope));
            }
          }
          return { t: 'value', v: obj };
        }));
      case 'project_bindings': return this.projectBindings(op, scope);
      case 'edge_properties':
        return items(this.inputRows(op, scope).flatMap((r) => {
          if (r.el === null || r.el.kind !== 'edge') return [];
          const e = this.graph.edges.get(r.el.id);
          if (e === undefined) return [];
          const obj = new Map<string, Value>(e.props);
          obj.set('$id', asI64(e.id));
          obj.set('$from', asI64(e.from));
          obj.set('$to', asI64(e.to));
          return [{ t: 'value', v: obj } as Item];
        }));
      case 'group': case 'group_count': return this.group(op, scope);
      case 'aggregate_by': return this.aggregate(op, scope);

      // -------------------------------------------------------- mutations (operations.md §13)
      case 'add_n': {
        const create = (row: Row): El => {
          const props = this.assignments(op.properties, row, scope);
          return nodeEl(this.graph.addNode(op.label, props).id);
        };
        if (op.input === null) return rows([newRow(create(emptyRow()))]);
        return rows(this.inputRows(op as Op & { input: Op }, scope).map((row) => moveRow(row, create(row))));
      }
      case 'add_e': {
        const targets = this.targetIds(op.to, 'node', scope); // resolved before the input is inspected
        const sources = this.inputRows(op, scope).filter((r) => r.el !== null && r.el.kind === 'node');
        if (sources.length === 0) return EMPTY;
        if (targets.length === 0) throw queryError('addE() requires at least one target vertex');
        const out: Row[] = [];
        for (const row of sources) {
          for (const target of targets) {
            const props = this.assignments(op.properties, row, scope);
            const edge = this.graph.addEdge(row.el!.id, target, op.label, props);
            out.push(moveRow(row, edgeEl(edge.id)));
          }
        }
        return rows(out);
      }
      case 'set_property': {
        const input = this.inputRows(op, scope);
        for (const row of input) {
          if (row.el === null) continue;
          const rec = this.record(row.el);
          if (rec === undefined) continue;
          if (op.name === '$label') {
            if (row.el.kind === 'edge') throw queryError('edge labels cannot be changed');
            const v = this.evalInput(op.value, row, scope);
            if (typeof v !== 'string') throw queryError('$label must be set to a string');
            rec.props.set('$label', v);
          } else {
            rec.props.set(op.name, this.evalInput(op.value, row, scope));
          }
        }
        return rows(input);
      }
      case 'remove_property': {
        const input = this.inputRows(op, scope);
        // Invalid whatever the rows are (unlike set_property, where it depends on node/edge).
        if (op.name === '$label') throw queryError('$label cannot be removed');
        for (const row of input) if (row.el !== null) this.record(row.el)?.props.delete(op.name);
        return rows(input);
      }
      case 'drop': {
        for (const row of this.inputRows(op, scope)) {
          if (row.el !== null && row.el.kind === 'node') this.graph.removeNode(row.el.id);
        }
        return EMPTY;
      }
      case 'drop_edge': case 'drop_edge_labeled': {
        const targets = new Set(this.targetIds(op.to, 'node', scope));
        const from = new Set(this.inputRows(op, scope).flatMap((r) => (r.el !== null && r.el.kind === 'node' ? [r.el.id] : [])));
        for (const e of this.graph.allEdges()) {
          const labelOk = op.op === 'drop_edge' || e.props.get('$label') === op.label;
          if (from.has(e.from) && targets.has(e.to) && labelOk) this.graph.removeEdge(e.id);
        }
        return EMPTY;
      }
      case 'drop_edge_by_id': {
        const ids = this.targetIds(op.edges, 'edge', scope);
        if (op.input !== null && requireRows(this.evalOp(op.input, scope), 'drop_edge_by_id').length === 0) return EMPTY;
        for (const id of ids) this.graph.removeEdge(id);
        return EMPTY;
      }

      default:
        throw new RefError('reference_unsupported', `the reference interpreter does not implement ${op.op}`, 501);
    }
  }

  // ---------------------------------------------------------------- helpers for the operations above

  /** Evaluates a property list against a row; `$label` is a run-time error (operations.md §13). */
  private assignments(list: [string, ValueInput][], row: Row, scope: Scope): Map<string, Value> {
    const props = new Map<string, Value>();
    for (const [name, input] of list) {
      if (name === '$label') throw queryError('$label cannot be assigned in a property list');
      props.set(name, this.evalInput(input, row, scope));
    }
    return props;
  }

  /** The listed names that resolve, as an object (values, value_map with a list). */
  private pick(row: Row, names: string[]): Map<string, Value> {
    const obj = new Map<string, Value>();
    for (const n of names) {
      const v = this.resolve(row, n);
      if (v !== undefined) obj.set(n, v);
    }
    return obj;
  }

  /** values.md §8: stable sort by the keys; full ties by element (nodes first, then ID), never reversed. */
  private sortRows(input: Row[], keys: [string, 'asc' | 'desc'][]): Row[] {
    const decorated = input.map((row) => ({ row, keys: keys.map(([p]) => this.resolve(row, p)) }));
    decorated.sort((a, b) => {
      for (let i = 0; i < keys.length; i++) {
        const c = compareSortKeys(a.keys[i], b.keys[i]);
        if (c !== 0) return keys[i]![1] === 'asc' ? c : -c;
      }
      return compareElements(a.row.el, b.row.el);
    });
    return decorated.map((d) => d.row);
  }

  private repeat(op: Extract<Op, { op: 'repeat' }>, scope: Scope): Result {
    const c = op.config;
    const limit = c.times !== null && c.times < c.max_depth ? c.times : c.max_depth;
    let frontier = this.inputRows(op, scope);
    const emitted: Row[] = [];
    for (let i = 0n; i < limit; i++) {
      if (c.emit === 'before' || c.emit === 'all') append(emitted, frontier);
      const next = this.runBody(c.traversal, frontier, scope, 'repeat');
      if (c.emit === 'all' || (c.emit === 'after' && c.emit_predicate === null)) append(emitted, next);
      if (c.emit === 'after' && c.emit_predicate !== null) {
        append(emitted, next.filter((r) => this.evalPred(c.emit_predicate!, r, scope)));
      }
      const stop = c.until !== null && next.some((r) => this.evalPred(c.until!, r, scope));
      frontier = next;
      if (frontier.length === 0 || stop) break;
    }
    return rows(c.emit === 'none' ? frontier : emitted);
  }

  private projectBindings(op: Extract<Op, { op: 'project_bindings' }>, scope: Scope): Result {
    const valueAt = (row: Row, target: { kind: 'current' } | { kind: 'binding'; name: string }, source: string) => {
      const el = target.kind === 'current' ? row.el : row.bindings.get(target.name) ?? null;
      return el === null ? undefined : this.resolve(newRow(el), source);
    };
    const out: Item[] = [];
    const seen = new Set<string>();
    for (const row of this.inputRows(op, scope)) {
      const obj = new Map<string, Value>();
      for (const p of op.projections) {
        if (p.kind === 'property') {
          const v = valueAt(row, p.target, p.source);
          if (v !== undefined) obj.set(p.alias, v);
        } else {
          for (const ref of p.refs) {
            const v = valueAt(row, ref.target, ref.source);
            if (v !== undefined && v !== null) { obj.set(p.alias, v); break; }
          }
        }
      }
      const key = identityKey(obj);
      if (op.distinct && seen.has(key)) continue;
      seen.add(key);
      out.push({ t: 'value', v: obj });
    }
    return items(out);
  }

  private group(op: Extract<Op, { op: 'group' | 'group_count' }>, scope: Scope): Result {
    const groups = new Map<string, { first: Value; count: bigint; ids: bigint[] }>();
    for (const row of this.inputRows(op, scope)) {
      if (row.el === null) throw queryError(`${op.op} requires element rows`);
      const v = this.resolve(row, op.property);
      const key = displayText(v);
      const g = groups.get(key) ?? { first: v ?? null, count: 0n, ids: [] };
      g.count++;
      g.ids.push(asI64(row.el.id));
      groups.set(key, g);
    }
    const keys = [...groups.keys()].sort(compareStrings);
    return items(keys.map((k) => {
      const g = groups.get(k)!;
      const obj = new Map<string, Value>([[op.property, g.first], ['count', g.count]]);
      if (op.op === 'group') obj.set('ids', g.ids);
      return { t: 'value', v: obj };
    }));
  }

  private aggregate(op: Extract<Op, { op: 'aggregate_by' }>, scope: Scope): Result {
    const input = this.input(op, scope);
    if (input.kind !== 'rows') {
      const scalar = rowsOrItems(input, 'aggregate_by');
      if (!('items' in scalar)) throw queryError('aggregate_by expected stream input');
      if (op.function !== 'count') throw queryError(`aggregate_by ${op.function} requires element rows`);
      return { kind: 'count', n: BigInt(scalar.items.length) };
    }
    const numbers: number[] = [];
    for (const row of input.rows) {
      const v = this.resolve(row, op.property);
      if (v !== undefined && isNumeric(v)) numbers.push(toDouble(v));
      else if (typeof v === 'string') {
        const n = parseNumericString(v);
        if (n !== undefined) numbers.push(n);
      }
    }
    let result: number;
    const sum = () => numbers.reduce((a, b) => a + b, 0);
    switch (op.function) {
      case 'count': result = numbers.length; break;
      case 'sum': result = sum(); break;
      case 'min': result = numbers.length === 0 ? 0 : numbers.reduce((a, b) => (b < a ? b : a)); break;
      case 'max': result = numbers.length === 0 ? 0 : numbers.reduce((a, b) => (b > a ? b : a)); break;
      case 'mean': result = numbers.length === 0 ? 0 : sum() / numbers.length; break;
    }
    const fn = op.function[0]!.toUpperCase() + op.function.slice(1);
    return items([{ t: 'value', v: new Map<string, Value>([[`${op.property}_${fn}`, result]]) }]);
  }

  private shortestPath(op: Extract<Op, { op: 'shortest_path' }>, scope: Scope): Result {
    const endpoint = (ref: ElementRef): bigint | null => {
      if (ref.kind === 'all') throw queryError('shortest_path endpoint cannot be "all"');
      const ids = this.targetIds(ref, 'node', scope);
      if (ids.length >= 2) throw queryError('shortest_path endpoint must resolve to at most one node');
      return ids.length === 1 && this.graph.nodes.has(ids[0]!) ? ids[0]! : null;
    };
    const source = endpoint(op.source);
    const target = endpoint(op.target);
    if (source === null || target === null) return items([]);
    const predecessor = new Map<bigint, bigint | null>([[source, null]]);
    let frontier = [source];
    for (let depth = 0n; depth < op.max_depth && frontier.length > 0 && !predecessor.has(target); depth++) {
      const next: bigint[] = [];
      for (const u of frontier) {
        for (const v of this.graph.neighbors(u, op.direction, op.label)) {
          if (predecessor.has(v)) continue;
          predecessor.set(v, u);
          next.push(v);
        }
      }
      frontier = next;
    }
    if (!predecessor.has(target)) return items([]);
    const path: bigint[] = [];
    for (let at: bigint | null = target; at !== null; at = predecessor.get(at)!) path.unshift(at);
    return items(path.map((id) => ({ t: 'id', id })));
  }
}

// ------------------------------------------------------------------ small pure helpers

function emptyRow(): Row {
  return { el: null, bindings: new Map(), path: [], pathVisible: false, sack: undefined, sackVisible: false };
}

/** A stored property by exact name, then by dotted path into object values (values.md §6 steps 5-6). */
function lookupStored(props: Map<string, Value>, name: string): Value | undefined {
  if (props.has(name)) return props.get(name);
  if (!name.includes('.')) return undefined;
  const segments = name.split('.');
  if (segments.some((s) => s === '')) return undefined;
  let current: Value | undefined = props.get(segments[0]!);
  for (const seg of segments.slice(1)) {
    if (!(current instanceof Map)) return undefined;
    current = current.get(seg);
  }
  return current;
}

/** The edge's far end for other_n / both on an edge row (operations.md §4.3). */
function otherEnds(row: Row, e: EdgeRec): bigint[] {
  const lastNode = [...row.path].reverse().find((el) => el.kind === 'node');
  if (lastNode !== undefined) {
    if (lastNode.id === e.from) return [e.to];
    if (lastNode.id === e.to) return [e.from];
  }
  return e.from === e.to ? [e.from] : [e.from, e.to];
}

function compareWith(op: 'eq' | 'neq' | 'gt' | 'gte' | 'lt' | 'lte', l: Value, r: Value): boolean {
  if (op === 'eq') return valuesEqual(l, r);
  if (op === 'neq') return !valuesEqual(l, r);
  const c = compareForPredicate(l, r);
  if (c === undefined) return false;
  return op === 'gt' ? c > 0 : op === 'gte' ? c >= 0 : op === 'lt' ? c < 0 : c <= 0;
}

/** values.md §7.4: arrays are sets of their elements; anything else is a one-element set. */
function setMembers(v: Value): Value[] {
  if (Array.isArray(v)) return v;
  if (v instanceof BigInt64Array || v instanceof Float64Array) return [...v];
  if (v instanceof Float32Array) return [...v].map((x) => new F32(x));
  if (v instanceof StringArray) return v.items;
  return [v];
}

/** Full-tie order: nodes before edges, then ascending ID (rows without an element last). */
function compareElements(a: El | null, b: El | null): number {
  if (a === null || b === null) return (a === null ? 1 : 0) - (b === null ? 1 : 0);
  if (a.kind !== b.kind) return a.kind === 'node' ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

function itemKey(i: Item): string {
  switch (i.t) {
    case 'id': return `id:${i.id}`;
    case 'count': return `count:${i.n}`;
    case 'bool': return `bool:${i.b}`;
    case 'value': return `value:${identityKey(i.v)}`;
  }
}

/** A canonical text of a rendered value (used to tell element-less rows apart). */
function plainKey(p: Plain): string {
  if (p instanceof Map) return `{${[...p].map(([k, v]) => `${JSON.stringify(k)}:${plainKey(v)}`).join(',')}}`;
  if (Array.isArray(p)) return `[${p.map(plainKey).join(',')}]`;
  return typeof p === 'bigint' ? `${p}n` : JSON.stringify(p);
}

/** operations.md §11.7. */
function sackAdd(sack: Value | undefined, v: Value | undefined): Value | undefined {
  if (v === undefined) return sack;
  if (!isNumeric(v)) throw queryError('sack_add property must be numeric');
  if (sack === undefined) return v;
  if (!isNumeric(sack)) throw queryError('sack_add requires a numeric sack');
  if (typeof sack === 'bigint' && typeof v === 'bigint') {
    const sum = sack + v;
    if (sum > I64_MAX || sum < -I64_MAX - 1n) throw queryError('sack_add overflow');
    return sum;
  }
  return toDouble(sack) + toDouble(v);
}

/** The last query entry with this name, searching for_each bodies too. */
function lastEntryNamed(entries: Entry[], name: string): Extract<Entry, { kind: 'query' }> | undefined {
  let found: Extract<Entry, { kind: 'query' }> | undefined;
  for (const e of entries) {
    if (e.kind === 'for_each') found = lastEntryNamed(e.body, name) ?? found;
    else if (e.name === name) found = e;
  }
  return found;
}
