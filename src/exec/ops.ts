// Operators: each evaluates one operation over the materialized stream of its input
// (operations.md). Streams are vectors of row element keys (see rows.ts), so an
// operator is a loop over numbers; objects appear only for rows with extras.
import type { ElementRef, Op, Order, PropertyAssignment, StreamBound, SubTraversal, ValueInput } from '../protocol/ast.js';
import { dbError, queryError, SvcError } from '../protocol/errors.js';
import type { Value } from '../protocol/value.js';
import { limits } from '../limits.js';
import type { PropertyRecord } from '../store/record-codec.js';
import { dirWord, type Direction } from '../store/store.js';
import { A_EDGE, A_NEIGHBOR, ADJ_WORDS, entryVisible } from '../store/topology.js';
import { compareSortKeys, valuesEqual } from './compare.js';
import { evalExpr, evalPredicate, paramValue, resolveProperty, type ExecCtx } from './context.js';
import {
  edgeKey, idOfKey, isEdgeKey, movedExtra, needRows, NO_ELEMENT, nodeKey, RowSet, rowsOf, scalarItems,
  type RowExtra, type Stream,
} from './rows.js';
import { renderValueKey } from './render.js';
import { evalExtendedOp, evalRepeat, isExtendedOp } from './ops-extended.js';
import { ElementMarks, withRoom } from './marks.js';
import { streamedDedup, streamedTerminal, streamedWindow } from './streaming.js';
import { CONTAINER_BYTES, deadlineExceeded, ENTRY_BYTES, guard, ROW_BYTES } from './guard.js';

const elementMarks = new ElementMarks();

const emptyRows = (): Stream => rowsOf(new RowSet());

/** Check the query's deadline, memory budget and work cap now (exec/guard.ts). */
export function checkDeadline(ctx: ExecCtx): void {
  guard.check();
  if (Date.now() > ctx.deadlineMs) throw deadlineExceeded();
}

function checkRowLimit(n: number): void {
  if (n > limits.streamRowsMax) throw queryError(`a stream exceeded ${limits.streamRowsMax} rows`);
}

// ---------------------------------------------------------------- references

/** IDs from a parameter value: one non-negative integer or an array of them. */
function idsFromParam(ctx: ExecCtx, name: string): number[] {
  const v = paramValue(ctx, name);
  const one = (x: Value): number => {
    if (typeof x !== 'bigint' || x < 0n) throw queryError(`parameter \`${name}\` must hold non-negative integer ids`);
    return x > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(x);
  };
  if (Array.isArray(v)) return v.map(one);
  return [one(v)];
}

/** Rows bound to a variable (entry result, as/store); null when unbound. */
function rowsOfVariable(ctx: ExecCtx, name: string): RowSet | null {
  const bound = ctx.vars.get(name);
  if (bound === undefined) return null;
  if (bound.kind === 'rows' || bound.kind === 'fold') return bound.rows;
  throw queryError(`variable \`${name}\` is not bound to element rows`);
}

/** Resolve a reference to element IDs of one kind (operations.md §2.1). */
export function resolveRef(ctx: ExecCtx, ref: ElementRef, edges: boolean, asTarget: boolean): number[] {
  const exists = (id: number) => (edges ? ctx.store.edgeExists(id, ctx.at) : ctx.store.nodeExists(id, ctx.at));
  switch (ref.kind) {
    case 'all': {
      const out: number[] = [];
      const slots = edges ? ctx.store.edgeSlots() : ctx.store.nodeSlots();
      for (let id = 0; id < slots; id++) {
        if (edges ? ctx.store.edgeVisible(id, ctx.at) : ctx.store.nodeVisible(id, ctx.at)) {
          guard.row(); // the id now, its row next: charged once per element here
          guard.chargeLater(ROW_BYTES);
          out.push(id);
        } else {
          guard.step(1);
        }
      }
      return out;
    }
    case 'ids': {
      const out: number[] = [];
      for (const id of ref.ids) {
        const n = id > BigInt(Number.MAX_SAFE_INTEGER) ? -1 : Number(id);
        if (asTarget ? n >= 0 : exists(n)) out.push(n);
      }
      return out;
    }
    case 'var': {
      const rows = rowsOfVariable(ctx, ref.name);
      if (rows === null) {
        if (asTarget) throw queryError(`variable \`${ref.name}\` is not bound`);
        return [];
      }
      guard.charge(2 * rows.length * ROW_BYTES);
      guard.step(rows.length);
      const out: number[] = [];
      for (const el of rows.el) if (el !== NO_ELEMENT && isEdgeKey(el) === edges) out.push(idOfKey(el));
      return out;
    }
    case 'param': {
      const ids = idsFromParam(ctx, ref.name);
      return asTarget ? ids : ids.filter(exists);
    }
  }
}

// ---------------------------------------------------------------- windows

function boundValue(ctx: ExecCtx, b: StreamBound, what: string): number {
  if (b.kind === 'literal') return b.value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(b.value);
  const e = b.expr;
  if (e.kind === 'constant' || e.kind === 'param') {
    const v = e.kind === 'constant' ? e.value : paramValue(ctx, e.name);
    if (typeof v === 'bigint' && v >= 0n) return v > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(v);
    throw queryError(`${what} must be a non-negative i64`);
  }
  throw queryError(`${what} must be a literal or a parameter`);
}

function window(input: Stream, start: number, end: number): Stream {
  if (input.kind === 'fold') throw queryError('window expected stream input, got a folded stream; use unfold first');
  if (input.kind === 'rows') {
    const rows = input.rows;
    const out = new RowSet();
    for (let i = start; i < Math.min(end, rows.length); i++) out.pushFrom(rows, i);
    return rowsOf(out);
  }
  const items = scalarItems(input)!;
  guard.charge(Math.max(0, Math.min(end, items.length) - start) * ROW_BYTES);
  return { kind: 'scalars', items: items.slice(start, Math.max(start, end)) };
}

// ---------------------------------------------------------------- navigation

/** Reused per thread: neighbor IDs of one row before sort + dedup. */
let scratch: Uint32Array = new Uint32Array(1024);

/**
 * Distinct neighbor node IDs of node `id`, ascending (operations.md §4.1); with `asKeys`,
 * their row element keys instead.
 */
export function neighbors(ctx: ExecCtx, id: number, dirs: readonly Direction[], label: number, asKeys = false): number[] {
  const topo = ctx.store.topology, at = ctx.at, dir = topo.dir(id);
  let n = 0;
  // Ascending across both lists (one is often empty), so the sort is skipped when it can be.
  let ordered = true;
  let previous = -1;
  for (let d = 0; d < dirs.length; d++) {
    const which = dirWord(dirs[d]!);
    const len = topo.length(dir, which), off = topo.entries(dir, which, len);
    const words = topo.words;
    guard.step(len);
    scratch = withRoom(scratch, n, n + len);
    for (let p = off, end = off + len * ADJ_WORDS; p < end; p += ADJ_WORDS) {
      if (!entryVisible(words, p, at, label)) continue;
      const neighbor = words[p + A_NEIGHBOR]!;
      if (neighbor < previous) ordered = false;
      previous = neighbor;
      scratch[n++] = neighbor;
    }
  }
  if (n === 0) return [];
  // Blocks are in edge ID order, which is often neighbor order too (bulk loads): skip the sort then.
  if (!ordered) scratch.subarray(0, n).sort();
  const scale = asKeys ? 2 : 1; // nodeKey(id) = id * 2
  const out: number[] = [scratch[0]! * scale];
  for (let i = 1; i < n; i++) if (scratch[i] !== scratch[i - 1]) out.push(scratch[i]! * scale);
  return out;
}

/**
 * Distinct incident edge IDs of node `id`, ascending (operations.md §4.2); with `asKeys`,
 * their row element keys instead.
 */
export function incidentEdges(ctx: ExecCtx, id: number, dirs: readonly Direction[], label: number, asKeys = false): number[] {
  const topo = ctx.store.topology, at = ctx.at, dir = topo.dir(id);
  const out: number[] = [];
  let ordered = true;
  let previous = -1;
  for (const direction of dirs) {
    const which = dirWord(direction);
    const len = topo.length(dir, which), off = topo.entries(dir, which, len);
    const words = topo.words;
    guard.step(len);
    for (let p = off, end = off + len * ADJ_WORDS; p < end; p += ADJ_WORDS) {
      if (!entryVisible(words, p, at, label)) continue;
      // A self-loop sits in both lists; keep it once.
      if (direction === 'in' && dirs.length === 2 && words[p + A_NEIGHBOR] === id) continue;
      const edge = words[p + A_EDGE]!;
      if (edge < previous) ordered = false;
      previous = edge;
      out.push(edge);
    }
  }
  if (!ordered) out.sort((a, b) => a - b);
  if (asKeys) for (let i = 0; i < out.length; i++) out[i] = out[i]! * 2 + 1; // edgeKey
  return out;
}

/** The most recent node in a row's path, or -1. */
function latestPathNode(extra: RowExtra | null): number {
  const path = extra?.path;
  if (!path) return -1;
  for (let i = path.length - 1; i >= 0; i--) if (!isEdgeKey(path[i]!)) return idOfKey(path[i]!);
  return -1;
}

/** other_n on an edge row (operations.md §4.3). */
function otherEnds(ctx: ExecCtx, edge: number, extra: RowExtra | null): number[] {
  const src = ctx.store.edgeSource(edge), dst = ctx.store.edgeTarget(edge);
  const latest = latestPathNode(extra);
  if (latest === src) return [dst];
  if (latest === dst) return [src];
  return src === dst ? [src] : [src, dst];
}

const dirsOf = (op: string): readonly Direction[] =>
  op === 'out' || op === 'out_e' || op === 'out_n' ? ['out'] : op === 'in' || op === 'in_e' || op === 'in_n' ? ['in'] : ['out', 'in'];

export type NavigationOp = Extract<Op, { op: 'out' | 'in' | 'both' | 'out_e' | 'in_e' | 'both_e' | 'out_n' | 'in_n' | 'other_n' }>;

export const navigationOps = new Set<string>(['out', 'in', 'both', 'out_e', 'in_e', 'both_e', 'out_n', 'in_n', 'other_n']);

/** A navigation operation with its label resolved once per evaluation. */
export interface NavigationStep {
  readonly op: NavigationOp['op'];
  readonly toEdges: boolean;
  readonly label: number;
  /** An unknown label matches no edge of a node row; edge rows ignore the label. */
  readonly noLabelMatch: boolean;
  readonly dirs: readonly Direction[];
  readonly unlabeled: boolean;
}

export function navigationStep(ctx: ExecCtx, op: NavigationOp): NavigationStep {
  const labelName = 'label' in op ? op.label : null;
  const label = labelName === null ? -1 : ctx.store.names.idOf(labelName);
  return {
    op: op.op,
    toEdges: op.op === 'out_e' || op.op === 'in_e' || op.op === 'both_e',
    label,
    noLabelMatch: labelName !== null && label < 0,
    dirs: dirsOf(op.op),
    unlabeled: op.op === 'out_n' || op.op === 'in_n' || op.op === 'other_n',
  };
}

/** Element keys one row moves to (operations.md §4), in order; null: the row yields nothing. */
export function expandElement(ctx: ExecCtx, step: NavigationStep, el: number, extra: RowExtra | null): number[] | null {
  if (el === NO_ELEMENT) return null;
  if (isEdgeKey(el)) {
    if (step.toEdges) return null;
    const e = idOfKey(el);
    guard.step(1);
    if (step.op === 'out' || step.op === 'out_n') return [nodeKey(ctx.store.edgeTarget(e))];
    if (step.op === 'in' || step.op === 'in_n') return [nodeKey(ctx.store.edgeSource(e))];
    return otherEnds(ctx, e, extra).map(nodeKey);
  }
  const id = idOfKey(el);
  if (step.noLabelMatch && !step.unlabeled) return null;
  if (step.toEdges) return incidentEdges(ctx, id, step.dirs, step.label, true);
  return neighbors(ctx, id, step.dirs, step.unlabeled ? -1 : step.label, true);
}

function navigate(ctx: ExecCtx, op: NavigationOp, input: RowSet): RowSet {
  const out = new RowSet();
  const step = navigationStep(ctx, op);
  for (let i = 0; i < input.length; i++) {
    const el = input.el[i]!;
    const extra = input.extraAt(i);
    if (el === NO_ELEMENT || isEdgeKey(el)) {
      // At most two ends: the general form.
      const produced = expandElement(ctx, step, el, extra);
      if (produced !== null) for (const key of produced) out.push(key, movedExtra(extra, key, ctx.trackPath, el));
      continue;
    }
    // Node rows (the hot path): keys straight from the ID lists, no second array.
    if (step.noLabelMatch && !step.unlabeled) continue;
    const id = idOfKey(el);
    if (step.toEdges) {
      for (const e of incidentEdges(ctx, id, step.dirs, step.label)) out.push(edgeKey(e), movedExtra(extra, edgeKey(e), ctx.trackPath, el));
    } else {
      for (const n of neighbors(ctx, id, step.dirs, step.unlabeled ? -1 : step.label)) out.push(nodeKey(n), movedExtra(extra, nodeKey(n), ctx.trackPath, el));
    }
    checkRowLimit(out.length);
  }
  return out;
}

/** One navigation or filter operation over materialized rows. */
export function applyElementOp(ctx: ExecCtx, op: NavigationOp | FilterOp, rows: RowSet): RowSet {
  return navigationOps.has(op.op) ? navigate(ctx, op as NavigationOp, rows) : filterRows(ctx, op as FilterOp, rows);
}

// ---------------------------------------------------------------- filters

export type FilterOp = Extract<Op, { op: 'has' | 'edge_has' | 'has_label' | 'edge_has_label' | 'has_key' | 'where' }>;

export const filterOps = new Set<string>(['has', 'edge_has', 'has_label', 'edge_has_label', 'has_key', 'where']);

/** Whether a row passes a filter operation (operations.md §5). */
export function keepRow(ctx: ExecCtx, op: FilterOp, el: number, extra: RowExtra | null): boolean {
  guard.step(1);
  switch (op.op) {
    case 'has': return valuesEqual(resolveProperty(ctx, el, extra, op.property) ?? null, op.value);
    case 'edge_has': return valuesEqual(resolveProperty(ctx, el, extra, op.property) ?? null, inputValue(ctx, op.value, el, extra));
    case 'has_label': case 'edge_has_label': return resolveProperty(ctx, el, extra, '$label') === op.label;
    case 'has_key': return resolveProperty(ctx, el, extra, op.property) !== undefined;
    case 'where': return evalPredicate(ctx, op.predicate, el, extra);
  }
}

function filterRows(ctx: ExecCtx, op: FilterOp, input: RowSet): RowSet {
  const out = new RowSet();
  for (let i = 0; i < input.length; i++) {
    const extra = input.extraAt(i);
    if (keepRow(ctx, op, input.el[i]!, extra)) out.push(input.el[i]!, extra);
  }
  return out;
}

export function dedupStream(ctx: ExecCtx, input: Stream): Stream {
  if (input.kind === 'rows') {
    const rows = input.rows;
    const seenElements = elementMarks.begin(ctx, rows.length);
    const seenOthers = new Set<string>();
    const out = new RowSet();
    try {
      for (let i = 0; i < rows.length; i++) {
        const el = rows.el[i]!;
        guard.step(1);
        if (el !== NO_ELEMENT) {
          if (!seenElements.add(el)) continue;
        } else {
          const key = renderRowIdentity(rows.extraAt(i));
          if (seenOthers.has(key)) continue;
          guard.chargeLater(ENTRY_BYTES + 2 * key.length);
          seenOthers.add(key);
        }
        out.pushFrom(rows, i);
      }
    } finally {
      elementMarks.end();
    }
    return rowsOf(out);
  }
  const items = scalarItems(input);
  if (items === null) throw queryError('dedup expected stream input, got a folded stream; use unfold first');
  const seen = new Set<string>();
  const out: Value[] = [];
  for (const item of items) {
    const key = renderValueKey(item);
    guard.step(1);
    if (!seen.has(key)) {
      guard.chargeLater(ENTRY_BYTES + 2 * key.length);
      seen.add(key);
      out.push(item);
    }
  }
  return { kind: 'scalars', items: out };
}

/** Identity of an element-less row: its bindings, visible path and sack. */
function renderRowIdentity(extra: RowExtra | null): string {
  if (extra === null) return '';
  const bindings = extra.bindings ? [...extra.bindings].map(([k, b]) => `${k}=${b.el}`).sort().join(',') : '';
  const path = extra.pathVisible && extra.path ? extra.path.join(',') : '';
  const sack = extra.sackVisible && extra.sack !== undefined ? renderValueKey(extra.sack) : '';
  return `${bindings}|${path}|${sack}`;
}

// ---------------------------------------------------------------- ordering

function orderRows(ctx: ExecCtx, input: RowSet, keys: readonly [string, Order][]): RowSet {
  const n = input.length;
  guard.charge((keys.length + 1) * n * ROW_BYTES); // one column per key, and the index
  const values: (Value | undefined)[][] = keys.map(([prop]) => {
    const col: (Value | undefined)[] = new Array(n);
    for (let i = 0; i < n; i++) {
      col[i] = input.el[i] === NO_ELEMENT && input.extraAt(i) === null ? undefined : resolveProperty(ctx, input.el[i]!, input.extraAt(i), prop);
      guard.step(1);
    }
    return col;
  });
  const index = Array.from({ length: n }, (_, i) => i);
  index.sort((a, b) => {
    guard.step(1);
    for (let k = 0; k < keys.length; k++) {
      const c = compareSortKeys(values[k]![a], values[k]![b]);
      if (c !== 0) return keys[k]![1] === 'desc' ? -c : c;
    }
    return compareElements(input.el[a]!, input.el[b]!);
  });
  const out = new RowSet();
  for (const i of index) out.pushFrom(input, i);
  return out;
}

/** Tie-breaker: nodes before edges, then by ID; rows without an element last. */
function compareElements(a: number, b: number): number {
  if (a === b) return 0;
  if (a === NO_ELEMENT || b === NO_ELEMENT) return a === NO_ELEMENT ? 1 : -1;
  const ea = isEdgeKey(a), eb = isEdgeKey(b);
  if (ea !== eb) return ea ? 1 : -1;
  return idOfKey(a) - idOfKey(b);
}

// ---------------------------------------------------------------- terminals

function storedMap(ctx: ExecCtx, el: number): Map<string, Value> {
  const store = ctx.store;
  const id = idOfKey(el);
  const edge = isEdgeKey(el);
  const record = edge ? store.edgeRecord(id, ctx.at) : store.nodeRecord(id, ctx.at);
  const out = new Map<string, Value>();
  for (let i = 0; i < record.keys.length; i++) out.set(store.names.nameOf(record.keys[i]!), record.values[i]!);
  out.set('$label', store.names.nameOf(edge ? store.edgeLabel(id) : store.nodeLabel(id, ctx.at)));
  return out;
}

/** Count one built result item (a Map of a row's properties) against the budget. */
function chargeItem(m: Map<string, Value>): Map<string, Value> {
  guard.chargeLater(CONTAINER_BYTES + ENTRY_BYTES * m.size);
  guard.step(1);
  return m;
}

function valueMap(ctx: ExecCtx, input: RowSet, properties: string[] | null): Value[] {
  const items: Value[] = [];
  for (let i = 0; i < input.length; i++) {
    const el = input.el[i]!;
    const extra = input.extraAt(i);
    if (properties === null || properties.length === 0) {
      if (el === NO_ELEMENT) { items.push(new Map()); continue; }
      const m = storedMap(ctx, el);
      m.set('$id', BigInt(idOfKey(el)));
      items.push(chargeItem(m));
      continue;
    }
    const m = new Map<string, Value>();
    for (const p of properties) {
      const v = resolveProperty(ctx, el, extra, p);
      if (v !== undefined) m.set(p, v);
    }
    items.push(chargeItem(m));
  }
  return items;
}

function terminal(ctx: ExecCtx, op: Op, input: Stream): Stream {
  switch (op.op) {
    case 'count': {
      if (input.kind === 'rows') return { kind: 'count', n: input.rows.length };
      const items = scalarItems(input);
      if (items === null) throw queryError('count expected stream input, got a folded stream; use unfold first');
      return { kind: 'count', n: items.length };
    }
    case 'exists': {
      if (input.kind === 'rows') return { kind: 'exists', value: input.rows.length > 0 };
      const items = scalarItems(input);
      if (items === null) throw queryError('exists expected stream input, got a folded stream; use unfold first');
      return { kind: 'exists', value: items.length > 0 };
    }
    case 'id': {
      if (input.kind !== 'rows') {
        const items = scalarItems(input);
        if (items === null) throw queryError('id expected stream input, got a folded stream; use unfold first');
        return { kind: 'scalars', items: items.filter((x) => typeof x === 'bigint') };
      }
      const items: Value[] = [];
      guard.charge(input.rows.length * ENTRY_BYTES);
      for (const el of input.rows.el) {
        guard.step(1);
        if (el !== NO_ELEMENT) items.push(BigInt(idOfKey(el)));
      }
      return { kind: 'scalars', items };
    }
    case 'label': {
      const rows = needRows(input, 'label');
      guard.charge(rows.length * ROW_BYTES);
      const items: Value[] = [];
      for (let i = 0; i < rows.length; i++) {
        guard.step(1);
        if (rows.el[i] === NO_ELEMENT) continue;
        items.push(resolveProperty(ctx, rows.el[i]!, rows.extraAt(i), '$label')!);
      }
      return { kind: 'scalars', items };
    }
    case 'values': {
      const rows = needRows(input, 'values');
      const items: Value[] = [];
      for (let i = 0; i < rows.length; i++) {
        guard.step(1);
        const m = new Map<string, Value>();
        for (const p of op.properties) {
          const v = resolveProperty(ctx, rows.el[i]!, rows.extraAt(i), p);
          if (v !== undefined) m.set(p, v);
        }
        if (m.size > 0) items.push(chargeItem(m));
      }
      return { kind: 'scalars', items };
    }
    case 'value_map':
      return { kind: 'scalars', items: valueMap(ctx, needRows(input, 'value_map'), op.properties) };
    case 'project': {
      const rows = needRows(input, 'project');
      const items: Value[] = [];
      for (let i = 0; i < rows.length; i++) {
        const m = new Map<string, Value>();
        for (const p of op.projections) {
          if (p.kind === 'property') {
            const v = resolveProperty(ctx, rows.el[i]!, rows.extraAt(i), p.source);
            if (v !== undefined) m.set(p.alias, v);
          } else {
            m.set(p.alias, evalExpr(ctx, p.expr, rows.el[i]!, rows.extraAt(i)));
          }
        }
        items.push(chargeItem(m));
      }
      return { kind: 'scalars', items };
    }
    case 'edge_properties': {
      const rows = needRows(input, 'edge_properties');
      const items: Value[] = [];
      for (const el of rows.el) {
        guard.step(1);
        if (el === NO_ELEMENT || !isEdgeKey(el)) continue;
        const id = idOfKey(el);
        const m = storedMap(ctx, el);
        m.set('$id', BigInt(id));
        m.set('$from', BigInt(ctx.store.edgeSource(id)));
        m.set('$to', BigInt(ctx.store.edgeTarget(id)));
        items.push(chargeItem(m));
      }
      return { kind: 'scalars', items };
    }
    default:
      throw new SvcError('internal_error', `internal error: ${op.op} is not a terminal`);
  }
}

// ---------------------------------------------------------------- mutations

function inputValue(ctx: ExecCtx, input: ValueInput, el: number, extra: RowExtra | null): Value {
  return input.kind === 'value' ? input.value : evalExpr(ctx, input.expr, el, extra);
}

function buildRecord(ctx: ExecCtx, props: PropertyAssignment[], el: number, extra: RowExtra | null): PropertyRecord {
  const keys: number[] = [];
  const values: Value[] = [];
  for (const [name, input] of props) {
    if (name === '$label') throw queryError('`$label` cannot be assigned in a property list');
    const value = inputValue(ctx, input, el, extra);
    keys.push(ctx.store.names.intern(name));
    values.push(value);
  }
  return { keys, values };
}

function withProperty(record: PropertyRecord, key: number, value: Value | undefined): PropertyRecord {
  const keys: number[] = [];
  const values: Value[] = [];
  let found = false;
  for (let i = 0; i < record.keys.length; i++) {
    if (record.keys[i] === key) {
      found = true;
      if (value === undefined) continue;
      keys.push(key);
      values.push(value);
    } else {
      keys.push(record.keys[i]!);
      values.push(record.values[i]!);
    }
  }
  if (!found && value !== undefined) { keys.push(key); values.push(value); }
  return { keys, values };
}

function elementLive(ctx: ExecCtx, el: number): boolean {
  const id = idOfKey(el);
  return isEdgeKey(el) ? ctx.store.edgeVisible(id, ctx.at) : ctx.store.nodeVisible(id, ctx.at);
}

function mutate(ctx: ExecCtx, op: Op, input: Stream | null): Stream {
  const store = ctx.store;
  switch (op.op) {
    case 'add_n': {
      const label = store.names.intern(op.label);
      const out = new RowSet();
      if (input === null) {
        const id = store.addNode(label, buildRecord(ctx, op.properties, NO_ELEMENT, null));
        out.push(nodeKey(id), null);
        return rowsOf(out);
      }
      const rows = needRows(input, 'add_n');
      for (let i = 0; i < rows.length; i++) {
        const el = rows.el[i]!, extra = rows.extraAt(i);
        const id = store.addNode(label, buildRecord(ctx, op.properties, el, extra));
        out.push(nodeKey(id), movedExtra(extra, nodeKey(id), ctx.trackPath, el));
      }
      return rowsOf(out);
    }
    case 'add_e': {
      const targets = resolveRef(ctx, op.to, false, true);
      const rows = needRows(input!, 'add_e');
      const out = new RowSet();
      let usable = 0;
      for (const el of rows.el) if (el !== NO_ELEMENT && !isEdgeKey(el)) usable++;
      if (usable === 0) return rowsOf(out);
      if (targets.length === 0) throw queryError('addE() requires at least one target vertex');
      const label = store.names.intern(op.label);
      for (let i = 0; i < rows.length; i++) {
        const el = rows.el[i]!;
        if (el === NO_ELEMENT || isEdgeKey(el)) continue;
        const src = idOfKey(el), extra = rows.extraAt(i);
        for (const dst of targets) {
          const slot = store.reserveEdgeSlot();
          if (!store.nodeExists(src, ctx.at)) throw dbError('node_not_found', `Node not found: ${src}`);
          if (!store.nodeExists(dst, ctx.at)) throw dbError('node_not_found', `Node not found: ${dst}`);
          store.addEdge(slot, label, src, dst, buildRecord(ctx, op.properties, el, extra));
          out.push(edgeKey(slot), movedExtra(extra, edgeKey(slot), ctx.trackPath, el));
        }
        checkRowLimit(out.length);
      }
      return rowsOf(out);
    }
    case 'set_property': case 'remove_property': {
      const rows = needRows(input!, op.op);
      if (op.op === 'remove_property' && op.name === '$label') throw queryError('`$label` cannot be removed');
      for (let i = 0; i < rows.length; i++) {
        const el = rows.el[i]!;
        guard.step(1);
        if (el === NO_ELEMENT || !elementLive(ctx, el)) continue;
        const id = idOfKey(el), edge = isEdgeKey(el);
        const value = op.op === 'set_property' ? inputValue(ctx, op.value, el, rows.extraAt(i)) : undefined;
        if (op.name === '$label') {
          if (edge) throw queryError('edge labels cannot be changed');
          if (typeof value !== 'string' || value === '') throw queryError('`$label` must be set to a non-empty string');
          store.relabelNode(id, store.names.intern(value));
          continue;
        }
        const key = store.names.intern(op.name);
        if (edge) store.setEdgeRecord(id, withProperty(store.edgeRecord(id, ctx.at), key, value));
        else store.setNodeRecord(id, withProperty(store.nodeRecord(id, ctx.at), key, value));
      }
      return rowsOf(rows);
    }
    case 'drop': {
      const rows = needRows(input!, 'drop');
      for (const el of rows.el) {
        guard.step(1);
        if (el === NO_ELEMENT || isEdgeKey(el)) continue;
        if (store.nodeVisible(idOfKey(el), ctx.at)) store.deleteNode(idOfKey(el));
      }
      return emptyRows();
    }
    case 'drop_edge': case 'drop_edge_labeled': {
      const rows = needRows(input!, op.op);
      const targets = new Set(resolveRef(ctx, op.to, false, true));
      const label = op.op === 'drop_edge_labeled' ? store.names.idOf(op.label) : -1;
      if (op.op === 'drop_edge_labeled' && label < 0) return emptyRows();
      for (const el of rows.el) {
        guard.step(1);
        if (el === NO_ELEMENT || isEdgeKey(el)) continue;
        for (const e of incidentEdges(ctx, idOfKey(el), ['out'], label)) {
          if (targets.has(store.edgeTarget(e)) && store.edgeVisible(e, ctx.at)) store.deleteEdge(e);
        }
      }
      return emptyRows();
    }
    case 'drop_edge_by_id': {
      if (input !== null) {
        const gate = input.kind === 'rows' || input.kind === 'fold' ? input.rows.length : (scalarItems(input)?.length ?? 0);
        if (gate === 0) return emptyRows();
      }
      for (const id of resolveRef(ctx, op.edges, true, false)) store.deleteEdge(id);
      return emptyRows();
    }
    default:
      throw new SvcError('internal_error', `internal error: ${op.op} is not a mutation`);
  }
}

// ---------------------------------------------------------------- dispatch

/** Evaluate `root`. `context` is the rows of the enclosing sub-traversal, if any. */
export function evalOp(ctx: ExecCtx, root: Op, context: Stream | null): Stream {
  guard.step(1); // the clock is read every 1,024 steps, not per operation
  const op = root;
  switch (op.op) {
    case 'context':
      if (context === null) throw queryError('`context` outside a sub-traversal');
      return context;
    case 'nodes': case 'edges': {
      const edges = op.op === 'edges';
      const ids = resolveRef(ctx, op.reference, edges, false);
      if (op.reference.kind !== 'all' && op.reference.kind !== 'var') guard.charge(2 * ids.length * ROW_BYTES);
      return rowsOf(new RowSet(ids.map(edges ? edgeKey : nodeKey)));
    }
    case 'nodes_where': case 'edges_where': {
      const edges = op.op === 'edges_where';
      const slots = edges ? ctx.store.edgeSlots() : ctx.store.nodeSlots();
      const out = new RowSet();
      for (let id = 0; id < slots; id++) {
        if (!(edges ? ctx.store.edgeVisible(id, ctx.at) : ctx.store.nodeVisible(id, ctx.at))) continue;
        const key = edges ? edgeKey(id) : nodeKey(id);
        if (evalPredicate(ctx, op.predicate, key, null)) out.push(key, null);
        guard.step(1);
      }
      return rowsOf(out);
    }
    case 'out': case 'in': case 'both': case 'out_e': case 'in_e': case 'both_e': case 'out_n': case 'in_n': case 'other_n':
      return rowsOf(navigate(ctx, op, needRows(evalOp(ctx, op.input, context), op.op)));
    case 'has': case 'edge_has': case 'has_label': case 'edge_has_label': case 'has_key': case 'where':
      return rowsOf(filterRows(ctx, op, needRows(evalOp(ctx, op.input, context), op.op)));
    case 'dedup': {
      const source = op.input;
      if (source.op === 'repeat') {
        // Each level of the repeat may drop its own duplicates (see evalRepeat).
        return dedupStream(ctx, rowsOf(evalRepeat(ctx, source, needRows(evalOp(ctx, source.input, context), 'repeat'), evalOp, true)));
      }
      return streamedDedup(ctx, op.input, context, evalOp) ?? dedupStream(ctx, evalOp(ctx, op.input, context));
    }
    case 'limit': {
      const n = boundValue(ctx, op.count, 'limit count');
      const streamed = streamedWindow(ctx, op.input, context, evalOp, 0, n);
      return streamed !== null ? rowsOf(streamed) : window(evalOp(ctx, op.input, context), 0, n);
    }
    case 'skip': {
      const n = boundValue(ctx, op.count, 'skip count');
      return window(evalOp(ctx, op.input, context), n, Number.MAX_SAFE_INTEGER);
    }
    case 'range': {
      const start = boundValue(ctx, op.start, 'range start');
      const end = boundValue(ctx, op.end, 'range end');
      const streamed = streamedWindow(ctx, op.input, context, evalOp, start, Math.max(start, end));
      return streamed !== null ? rowsOf(streamed) : window(evalOp(ctx, op.input, context), start, Math.max(start, end));
    }
    case 'order_by':
      return rowsOf(orderRows(ctx, needRows(evalOp(ctx, op.input, context), 'order_by'), [[op.property, op.order]]));
    case 'order_by_multiple':
      return rowsOf(orderRows(ctx, needRows(evalOp(ctx, op.input, context), 'order_by_multiple'), op.orderings));
    case 'count': case 'exists':
      return streamedTerminal(ctx, op.op, op.input, context, evalOp) ?? terminal(ctx, op, evalOp(ctx, op.input, context));
    case 'id': case 'label': case 'values': case 'value_map': case 'project': case 'edge_properties':
      return terminal(ctx, op, evalOp(ctx, op.input, context));
    case 'add_n': case 'drop_edge_by_id':
      return mutate(ctx, op, op.input === null ? null : evalOp(ctx, op.input, context));
    case 'add_e': case 'set_property': case 'remove_property': case 'drop': case 'drop_edge': case 'drop_edge_labeled':
      return mutate(ctx, op, evalOp(ctx, op.input, context));
    case 'create_index': case 'drop_index': case 'get_index_operation': case 'retry_index_operation': case 'abort_index_operation':
      throw new SvcError('index_lifecycle_unavailable', `index lifecycle unavailable: \`${op.op}\` is not supported by this server yet`);
    default:
      if (isExtendedOp(op)) return evalExtendedOp(ctx, op, context, evalOp);
      throw new SvcError('internal_error', `internal error: operation \`${op.op}\` is not supported by this server yet`);
  }
}

/** Run a sub-traversal body with `context` as its input. */
export function runBody(ctx: ExecCtx, body: SubTraversal, context: Stream): Stream {
  return evalOp(ctx, body.root, context);
}

