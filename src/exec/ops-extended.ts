// Operations of the complete catalog beyond the engine foundation: branching and
// repetition (operations.md §10), fold/path/sack (§11), variables and bindings (§8),
// grouping and aggregation (§12.8-§12.12) and shortest path (§3.8).
import type { Op, RepeatConfig, SubTraversal } from '../protocol/ast.js';
import { queryError, SvcError } from '../protocol/errors.js';
import { DateTime, F32, StringArray, tagOf, type Value } from '../protocol/value.js';
import { compareKeys, renderValue } from '../protocol/json.js';
import { limits } from '../limits.js';
import { addI64, evalPredicate, resolveProperty, type ExecCtx } from './context.js';
import { renderValueKey } from './render.js';
import {
  emptyExtra, idOfKey, isEdgeKey, needRows, NO_ELEMENT, nodeKey, RowSet, rowsOf, scalarItems, type RowExtra, type Stream,
} from './rows.js';
import { checkDeadline, neighbors, resolveRef } from './ops.js';
import { ElementMarks } from './marks.js';
import { CONTAINER_BYTES, ENTRY_BYTES, EXTRA_BYTES, guard, ROW_BYTES } from './guard.js';
import { dirWord, type Direction } from '../store/store.js';
import { kernelDirections, traversalKernelsOn } from '../store/kernels.js';
import { shortestPathJs } from './shortest-path.js';

export type EvalOp = (ctx: ExecCtx, op: Op, context: Stream | null) => Stream;

const extendedOps = new Set<string>([
  'union', 'choose', 'coalesce', 'optional', 'repeat', 'fold', 'unfold', 'path', 'simple_path', 'with_sack',
  'sack_set', 'sack_add', 'sack_get', 'as', 'store', 'select', 'inject', 'within', 'without', 'bind',
  'project_bindings', 'group', 'group_count', 'aggregate_by', 'shortest_path',
]);

export function isExtendedOp(op: Op): boolean {
  return extendedOps.has(op.op);
}

/** Run a body; its output must be element rows (operations.md §2.6). */
function body(ctx: ExecCtx, evalOp: EvalOp, sub: SubTraversal, context: RowSet, op: string): RowSet {
  const out = evalOp(ctx, sub.root, rowsOf(context));
  if (out.kind !== 'rows') throw queryError(`${op} body must produce element rows, got ${out.kind === 'fold' ? 'a folded stream' : 'scalar values'}`);
  return out.rows;
}

function single(rows: RowSet, i: number): RowSet {
  const one = new RowSet();
  one.pushFrom(rows, i);
  return one;
}

function append(out: RowSet, rows: RowSet): void {
  for (let i = 0; i < rows.length; i++) out.pushFrom(rows, i);
  if (out.length > limits.streamRowsMax) throw queryError(`a stream exceeded ${limits.streamRowsMax} rows`);
}

/** The extras of row `i`, copied so they can be changed (rows share extras objects). */
function ownExtra(rows: RowSet, i: number): RowExtra {
  guard.chargeLater(EXTRA_BYTES);
  const e = rows.extraAt(i);
  return e === null ? emptyExtra() : { ...e };
}

function mapExtras(rows: RowSet, change: (extra: RowExtra, el: number) => void): RowSet {
  const out = new RowSet();
  for (let i = 0; i < rows.length; i++) {
    const extra = ownExtra(rows, i);
    change(extra, rows.el[i]!);
    out.push(rows.el[i]!, extra);
  }
  return out;
}

// ---------------------------------------------------------------- grouping

/**
 * Shortest round-trip digits written out without an exponent and without a trailing
 * ".0" (1e-7 -> "0.0000001", 1e21 -> "1000000000000000000000", 2.0 -> "2"), the way the
 * reference displays a float.
 */
export function plainDecimal(n: number): string {
  if (!Number.isFinite(n)) return Number.isNaN(n) ? 'NaN' : n > 0 ? 'inf' : '-inf';
  const text = String(n);
  const e = text.indexOf('e');
  if (e < 0) return Object.is(n, -0) ? '-0' : text;
  const negative = text.startsWith('-');
  const mantissa = text.slice(negative ? 1 : 0, e);
  const exponent = Number(text.slice(e + 1));
  const dot = mantissa.indexOf('.');
  const digits = mantissa.replace('.', '');
  const point = (dot < 0 ? mantissa.length : dot) + exponent;
  const body = point <= 0 ? `0.${'0'.repeat(-point)}${digits}`
    : point >= digits.length ? digits + '0'.repeat(point - digits.length)
    : `${digits.slice(0, point)}.${digits.slice(point)}`;
  return negative ? `-${body}` : body;
}

/** The display text that decides a group (operations.md §12.10). */
function displayText(v: Value | undefined): string {
  if (v === undefined || v === null) return 'null';
  switch (typeof v) {
    case 'string': return v;
    case 'boolean': return v ? 'true' : 'false';
    case 'bigint': return v.toString();
    case 'number': return plainDecimal(v);
  }
  if (v instanceof F32) return plainDecimal(v.value);
  if (v instanceof DateTime) return renderValue(v).slice(1, -1);
  const length = v instanceof StringArray ? v.items.length : v instanceof Map ? v.size : (v as ArrayLike<unknown>).length;
  return `<${tagOf(v)}:${length}>`;
}

function group(ctx: ExecCtx, rows: RowSet, property: string, withIds: boolean): Value[] {
  const groups = new Map<string, { value: Value; count: number; ids: bigint[] }>();
  for (let i = 0; i < rows.length; i++) {
    const el = rows.el[i]!;
    if (el === NO_ELEMENT) throw queryError('group needs rows with a current element');
    const v = resolveProperty(ctx, el, rows.extraAt(i), property);
    const key = displayText(v);
    let g = groups.get(key);
    if (g === undefined) {
      guard.charge(CONTAINER_BYTES + ENTRY_BYTES + 2 * key.length);
      groups.set(key, (g = { value: v ?? null, count: 0, ids: [] }));
    }
    guard.chargeLater(ENTRY_BYTES); // the id
    guard.step(1);
    g.count++;
    g.ids.push(BigInt(idOfKey(el)));
  }
  return [...groups.keys()].sort(compareKeys).map((key) => {
    const g = groups.get(key)!;
    const m = new Map<string, Value>([[property, g.value], ['count', BigInt(g.count)]]);
    if (withIds) m.set('ids', g.ids);
    return m;
  });
}

const numericText = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

function aggregate(ctx: ExecCtx, op: Extract<Op, { op: 'aggregate_by' }>, input: Stream): Stream {
  if (input.kind !== 'rows') {
    const items = scalarItems(input);
    if (items === null || op.function !== 'count') throw queryError(`aggregate_by ${op.function} expected element rows`);
    return { kind: 'count', n: items.length };
  }
  const rows = input.rows;
  let count = 0, sum = 0, min = Infinity, max = -Infinity;
  for (let i = 0; i < rows.length; i++) {
    guard.step(1);
    const v = resolveProperty(ctx, rows.el[i]!, rows.extraAt(i), op.property);
    let n: number;
    if (typeof v === 'bigint' || typeof v === 'number') n = Number(v);
    else if (v instanceof F32) n = v.value;
    else if (typeof v === 'string' && numericText.test(v)) n = Number(v);
    else continue;
    count++;
    sum += n;
    if (n < min) min = n;
    if (n > max) max = n;
  }
  const result = op.function === 'count' ? count : op.function === 'sum' ? sum
    : op.function === 'min' ? (count === 0 ? 0 : min) : op.function === 'max' ? (count === 0 ? 0 : max)
    : count === 0 ? 0 : sum / count;
  const name = `${op.property}_${op.function[0]!.toUpperCase()}${op.function.slice(1)}`;
  return { kind: 'scalars', items: [new Map<string, Value>([[name, result]])] };
}

// ---------------------------------------------------------------- repeat

/**
 * repeat (operations.md §10.1) over `input`. With `dedupLevels` (only for a repeat whose
 * result goes straight into dedup) a navigation-only repeat keeps the first occurrence of
 * each node per level: a later duplicate on a level would only add copies of what the
 * first one adds, later, so the enclosing dedup returns the same rows in the same order,
 * and k hops cost the distinct nodes per level instead of the number of walks.
 */
export function evalRepeat(ctx: ExecCtx, op: Extract<Op, { op: 'repeat' }>, input: RowSet, evalOp: EvalOp, dedupLevels: boolean): RowSet {
  const c = op.config;
  const cap = BigInt(limits.repeatIterationsMax) + 1n; // one past the limit, so running into it raises
  const maxDepth = Number(c.max_depth > cap ? cap : c.max_depth);
  const iterations = c.times === null ? maxDepth : Math.min(Number(c.times > cap ? cap : c.times), maxDepth);
  const step = navigationStep(ctx, c, input);
  let frontier = input;
  const emitted = new RowSet();
  /** Bytes charged for the current frontier (and its level's garbage); 0 for the input. */
  let frontierBytes = 0;
  for (let i = 0; i < iterations; i++) {
    if (i >= limits.repeatIterationsMax) throw queryError(`repeat exceeded ${limits.repeatIterationsMax} iterations`);
    checkDeadline(ctx);
    if (c.emit === 'before' || c.emit === 'all') append(emitted, frontier);
    const before = guard.bytes;
    const next = step !== null ? navigateRows(ctx, step, frontier, dedupLevels) : body(ctx, evalOp, c.traversal, frontier, 'repeat');
    // The previous level is garbage once the next exists (emitted rows were charged when copied).
    const levelBytes = guard.bytes - before;
    guard.release(frontierBytes);
    frontierBytes = levelBytes;
    if (c.emit === 'all' || (c.emit === 'after' && c.emit_predicate === null)) append(emitted, next);
    if (c.emit === 'after' && c.emit_predicate !== null) {
      for (let r = 0; r < next.length; r++) {
        guard.step(1);
        if (evalPredicate(ctx, c.emit_predicate, next.el[r]!, next.extraAt(r))) emitted.pushFrom(next, r);
      }
    }
    let stop = false;
    if (c.until !== null) {
      for (let r = 0; r < next.length && !stop; r++) {
        guard.step(1);
        stop = evalPredicate(ctx, c.until, next.el[r]!, next.extraAt(r));
      }
    }
    frontier = next;
    if (frontier.length === 0 || stop) break;
  }
  return c.emit === 'none' ? frontier : emitted;
}

interface NavigationStep { dirs: readonly Direction[]; kernelDirs: number; label: number }

/**
 * The body as one out/in/both step from the context, when the rows are plain node rows
 * (no bindings, path or sack): then each row maps to its sorted distinct neighbours and
 * nothing else, so the step runs on element keys without building row extras.
 */
function navigationStep(ctx: ExecCtx, c: RepeatConfig, input: RowSet): NavigationStep | null {
  const root = c.traversal.root;
  if ((root.op !== 'out' && root.op !== 'in' && root.op !== 'both') || root.input.op !== 'context') return null;
  if (input.extra !== null || ctx.trackPath || c.until !== null || c.emit_predicate !== null) return null;
  for (let i = 0; i < input.length; i++) if (input.el[i] === NO_ELEMENT || isEdgeKey(input.el[i]!)) return null;
  const dirs: readonly Direction[] = root.op === 'out' ? ['out'] : root.op === 'in' ? ['in'] : ['out', 'in'];
  // An unknown label matches no edge: -2 is no label ID (-1 would mean any label).
  const label = root.label === null ? -1 : ctx.store.names.idOf(root.label);
  return { dirs, kernelDirs: kernelDirections(dirs.map(dirWord)), label: root.label !== null && label < 0 ? -2 : label };
}

const levelMarks = new ElementMarks();

function navigateRows(ctx: ExecCtx, step: NavigationStep, rows: RowSet, dedupLevel: boolean): RowSet {
  if (step.label === -2 || rows.length === 0) return new RowSet();
  return traversalKernelsOn() ? navigateRowsKernel(ctx, step, rows, dedupLevel) : navigateRowsJs(ctx, step, rows, dedupLevel);
}

/** Adjacency entries one expandRows call scans at most (~2-5 ms on this class of machine). */
const KERNEL_ENTRIES_PER_CALL = 1 << 20;

/** Smallest first-occurrence table of navigateRowsKernel (slots; 1 KiB). */
const SEEN_SLOTS_MIN = 256;

/** The step on the expandRows kernel: ids in, distinct sorted neighbours per row out. */
function navigateRowsKernel(ctx: ExecCtx, step: NavigationStep, rows: RowSet, dedupLevel: boolean): RowSet {
  const topo = ctx.store.topology, kernels = topo.kernels(), arena = topo.scratch();
  const count = rows.length;
  const dirs = step.kernelDirs;
  const mark = arena.mark();
  try {
    const input = arena.take(count);
    const ids = topo.words;
    for (let i = 0; i < count; i++) ids[input + i] = idOfKey(rows.el[i]!);
    guard.step(count);
    const bound = kernels.entryCount(input, count, dirs);
    if (bound > limits.streamRowsMax) throw queryError(`a stream exceeded ${limits.streamRowsMax} rows`);
    const output = arena.take(Math.max(bound, 1));
    let seen = 0, seenShift = 0;
    if (dedupLevel) {
      // The level's nodes are at most `bound`: a table of node + 1 at load <= 1/2, or, when
      // that would be no smaller, one byte per node of the store. Either way the memory
      // follows the entries this step scans, and is zeroed fresh for the level.
      let slots = SEEN_SLOTS_MIN;
      while (slots < 2 * bound) slots *= 2;
      const nodes = ctx.store.nodeSlots();
      if (nodes <= slots * 4) {
        seen = arena.takeZeroed(Math.ceil(nodes / 4));
      } else {
        seen = arena.takeZeroed(slots);
        seenShift = 32 - Math.log2(slots);
      }
    }
    // In slices of about KERNEL_ENTRIES_PER_CALL entries, so the deadline is checked
    // between them (a level of a dense graph can scan tens of millions of entries).
    const sliceRows = Math.max(1, Math.floor(count * (KERNEL_ENTRIES_PER_CALL / Math.max(bound, 1))));
    let produced = 0;
    for (let first = 0; first < count; first += sliceRows) {
      const rowsInSlice = Math.min(sliceRows, count - first);
      produced += kernels.expandRows(input + first, rowsInSlice, dirs, step.label, ctx.at, output + produced, seen, seenShift);
      guard.step(Math.ceil(bound * (rowsInSlice / count)));
      checkDeadline(ctx);
    }
    guard.charge(produced * ROW_BYTES);
    const neighbours = topo.words;
    const out = new Array<number>(produced);
    for (let i = 0; i < produced; i++) {
      out[i] = nodeKey(neighbours[output + i]!);
      if ((i & 0xffff) === 0xffff) guard.step(0x10000);
    }
    return new RowSet(out);
  } finally {
    arena.release(mark);
  }
}

function navigateRowsJs(ctx: ExecCtx, step: NavigationStep, rows: RowSet, dedupLevel: boolean): RowSet {
  const out: number[] = [];
  const seen = dedupLevel ? levelMarks.begin(ctx) : null;
  try {
    for (let i = 0; i < rows.length; i++) {
      for (const id of neighbors(ctx, idOfKey(rows.el[i]!), step.dirs, step.label)) {
        if (seen === null || seen.add(nodeKey(id))) {
          guard.row();
          out.push(nodeKey(id));
        }
      }
      if (out.length > limits.streamRowsMax) throw queryError(`a stream exceeded ${limits.streamRowsMax} rows`);
    }
  } finally {
    seen?.end();
  }
  return new RowSet(out);
}

// ---------------------------------------------------------------- shortest path

function endpoint(ctx: ExecCtx, ref: Parameters<typeof resolveRef>[1], what: string): number | null {
  if (ref.kind === 'all') throw queryError(`shortest_path ${what} must name at most one node, got "all"`);
  if (ref.kind === 'ids' && ref.ids.length >= 2) throw queryError(`shortest_path ${what} must name at most one node`);
  const ids = resolveRef(ctx, ref, false, ref.kind !== 'ids');
  if (ids.length >= 2) throw queryError(`shortest_path ${what} must name at most one node`);
  if (ids.length === 0 || !ctx.store.nodeExists(ids[0]!, ctx.at)) return null;
  return ids[0]!;
}

function shortestPath(ctx: ExecCtx, op: Extract<Op, { op: 'shortest_path' }>): Stream {
  const source = endpoint(ctx, op.source, 'source');
  const target = endpoint(ctx, op.target, 'target');
  if (source === null || target === null) return { kind: 'scalars', items: [] };
  if (source === target) return { kind: 'scalars', items: [BigInt(source)] };
  const label = op.label === null ? -1 : ctx.store.names.idOf(op.label);
  if (op.label !== null && label < 0) return { kind: 'scalars', items: [] };
  const maxDepth = op.max_depth > BigInt(limits.nodesMax) ? limits.nodesMax : Number(op.max_depth);
  const path = shortestPathJs({
    store: ctx.store, at: ctx.at, source, target, label, direction: op.direction, maxDepth,
    checkDeadline: () => checkDeadline(ctx),
  });
  return { kind: 'scalars', items: path.map((id) => BigInt(id)) };
}

// ---------------------------------------------------------------- dispatch

export function evalExtendedOp(ctx: ExecCtx, op: Op, context: Stream | null, evalOp: EvalOp): Stream {
  const input = (): Stream => evalOp(ctx, (op as { input: Op }).input, context);
  switch (op.op) {
    case 'union': {
      const rows = needRows(input(), 'union');
      const out = new RowSet();
      for (let i = 0; i < rows.length; i++) {
        for (const t of op.traversals) append(out, body(ctx, evalOp, t, single(rows, i), 'union'));
      }
      let hasBindings = false, hasNode = false, hasEdge = false;
      for (let i = 0; i < out.length; i++) {
        if (out.extraAt(i)?.bindings) hasBindings = true;
        if (out.el[i] !== NO_ELEMENT) { if (isEdgeKey(out.el[i]!)) hasEdge = true; else hasNode = true; }
      }
      if (hasBindings && hasNode && hasEdge) throw queryError('union of bound rows mixes nodes and edges');
      return rowsOf(out);
    }
    case 'coalesce': {
      const rows = needRows(input(), 'coalesce');
      const out = new RowSet();
      for (let i = 0; i < rows.length; i++) {
        for (const t of op.traversals) {
          const produced = body(ctx, evalOp, t, single(rows, i), 'coalesce');
          if (produced.length > 0) { append(out, produced); break; }
        }
      }
      return rowsOf(out);
    }
    case 'optional': {
      const rows = needRows(input(), 'optional');
      const out = new RowSet();
      for (let i = 0; i < rows.length; i++) {
        const produced = body(ctx, evalOp, op.traversal, single(rows, i), 'optional');
        if (produced.length > 0) append(out, produced); else out.pushFrom(rows, i);
      }
      return rowsOf(out);
    }
    case 'choose': {
      const rows = needRows(input(), 'choose');
      const pass = new RowSet(), failing = new RowSet();
      for (let i = 0; i < rows.length; i++) {
        (evalPredicate(ctx, op.condition, rows.el[i]!, rows.extraAt(i)) ? pass : failing).pushFrom(rows, i);
      }
      if (op.else_traversal === null) {
        return pass.length === 0 ? rowsOf(new RowSet()) : evalOp(ctx, op.then_traversal.root, rowsOf(pass));
      }
      if (pass.length === 0) return evalOp(ctx, op.else_traversal.root, rowsOf(failing));
      if (failing.length === 0) return evalOp(ctx, op.then_traversal.root, rowsOf(pass));
      const out = new RowSet();
      append(out, body(ctx, evalOp, op.then_traversal, pass, 'choose'));
      append(out, body(ctx, evalOp, op.else_traversal, failing, 'choose'));
      return rowsOf(out);
    }
    case 'repeat':
      return rowsOf(evalRepeat(ctx, op, needRows(input(), 'repeat'), evalOp, false));
    case 'fold': return { kind: 'fold', rows: needRows(input(), 'fold') };
    case 'unfold': {
      const s = input();
      if (s.kind === 'fold' || s.kind === 'rows') return rowsOf(s.rows);
      throw queryError('unfold expected a folded stream, got scalar values');
    }
    case 'path':
      return rowsOf(mapExtras(needRows(input(), 'path'), (e, el) => {
        e.path = e.path ?? (el === NO_ELEMENT ? [] : [el]);
        e.pathVisible = true;
      }));
    case 'simple_path': {
      const rows = needRows(input(), 'simple_path');
      const out = new RowSet();
      for (let i = 0; i < rows.length; i++) {
        const path = rows.extraAt(i)?.path ?? [rows.el[i]!];
        guard.step(path.length);
        if (new Set(path).size === path.length) out.pushFrom(rows, i);
      }
      return rowsOf(out);
    }
    case 'with_sack':
      return rowsOf(mapExtras(needRows(input(), 'with_sack'), (e) => { e.sack = op.initial; }));
    case 'sack_set': {
      const rows = needRows(input(), 'sack_set');
      return rowsOf(mapExtras(rows, (e, el) => { e.sack = resolveProperty(ctx, el, e, op.property); }));
    }
    case 'sack_add': {
      const rows = needRows(input(), 'sack_add');
      return rowsOf(mapExtras(rows, (e, el) => {
        const v = resolveProperty(ctx, el, e, op.property);
        if (v === undefined) return;
        const isNum = (x: Value | undefined) => typeof x === 'bigint' || typeof x === 'number' || x instanceof F32;
        if (!isNum(v)) throw queryError('sack_add property must be numeric');
        if (e.sack === undefined) { e.sack = v; return; }
        if (!isNum(e.sack)) throw queryError('sack_add sack must be numeric');
        if (typeof e.sack === 'bigint' && typeof v === 'bigint') { e.sack = addI64(e.sack, v); return; }
        const n = (x: Value) => (x instanceof F32 ? x.value : Number(x));
        e.sack = n(e.sack!) + n(v);
      }));
    }
    case 'sack_get':
      return rowsOf(mapExtras(needRows(input(), 'sack_get'), (e) => { e.sackVisible = true; }));
    case 'as': case 'store': {
      const s = input();
      ctx.vars.set(op.name, s);
      return s;
    }
    case 'select': {
      input();
      const s = ctx.vars.get(op.name);
      if (s === undefined) throw queryError(`variable \`${op.name}\` is not bound`);
      return s;
    }
    case 'inject': {
      // The input runs first: it may bind the variable (as/store).
      const input = op.input === null ? null : evalOp(ctx, op.input, context);
      const bound = ctx.vars.get(op.variable);
      if (bound === undefined) throw queryError(`variable \`${op.variable}\` is not bound`);
      if (input === null) return bound;
      const rows = needRows(input, 'inject');
      if (bound.kind !== 'rows' && bound.kind !== 'fold') throw queryError(`inject variable \`${op.variable}\` is not bound to rows`);
      const out = new RowSet();
      append(out, rows);
      append(out, bound.rows);
      return rowsOf(out);
    }
    case 'within': case 'without': {
      const rows = needRows(input(), op.op);
      const bound = ctx.vars.get(op.variable);
      if (bound === undefined) throw queryError(`variable \`${op.variable}\` is not bound`);
      if (bound.kind !== 'rows' && bound.kind !== 'fold') throw queryError(`variable \`${op.variable}\` is not bound to element rows`);
      guard.charge(bound.rows.length * ENTRY_BYTES);
      const members = new Set(bound.rows.el.filter((el) => el !== NO_ELEMENT));
      const out = new RowSet();
      for (let i = 0; i < rows.length; i++) {
        const el = rows.el[i]!;
        guard.step(1);
        const inside = el !== NO_ELEMENT && members.has(el);
        if (op.op === 'within' ? inside : !inside) out.pushFrom(rows, i);
      }
      return rowsOf(out);
    }
    case 'bind': {
      const rows = needRows(input(), 'bind');
      const out = new RowSet();
      for (let i = 0; i < rows.length; i++) {
        const el = rows.el[i]!;
        if (el === NO_ELEMENT) { out.pushFrom(rows, i); continue; }
        const e = ownExtra(rows, i);
        guard.chargeLater(CONTAINER_BYTES + ENTRY_BYTES * (1 + (e.bindings?.size ?? 0)));
        e.bindings = new Map(e.bindings ?? []);
        e.bindings.set(op.name, { el, rankName: e.rankName, rank: e.rank });
        out.push(el, e);
      }
      return rowsOf(out);
    }
    case 'project_bindings': {
      const rows = needRows(input(), 'project_bindings');
      const items: Value[] = [];
      const seen = new Set<string>();
      const resolveTarget = (i: number, target: { kind: 'current' } | { kind: 'binding'; name: string }, source: string): Value | undefined => {
        const extra = rows.extraAt(i);
        if (target.kind === 'current') return rows.el[i] === NO_ELEMENT ? undefined : resolveProperty(ctx, rows.el[i]!, extra, source);
        const b = extra?.bindings?.get(target.name);
        if (b === undefined) return undefined;
        const bExtra = b.rankName === null ? null : { ...emptyExtra(), rankName: b.rankName, rank: b.rank };
        return resolveProperty(ctx, b.el, bExtra, source);
      };
      for (let i = 0; i < rows.length; i++) {
        const m = new Map<string, Value>();
        for (const p of op.projections) {
          if (p.kind === 'property') {
            const v = resolveTarget(i, p.target, p.source);
            if (v !== undefined) m.set(p.alias, v);
          } else {
            for (const r of p.refs) {
              const v = resolveTarget(i, r.target, r.source);
              if (v !== undefined && v !== null) { m.set(p.alias, v); break; }
            }
          }
        }
        guard.chargeLater(CONTAINER_BYTES + ENTRY_BYTES * m.size);
        guard.step(1);
        if (op.distinct) {
          const key = renderValueKey(m);
          if (seen.has(key)) continue;
          guard.chargeLater(ENTRY_BYTES + 2 * key.length);
          seen.add(key);
        }
        items.push(m);
      }
      return { kind: 'scalars', items };
    }
    case 'group': case 'group_count':
      return { kind: 'scalars', items: group(ctx, needRows(input(), op.op), op.property, op.op === 'group') };
    case 'aggregate_by':
      return aggregate(ctx, op, input());
    case 'shortest_path':
      return shortestPath(ctx, op);
    default:
      throw new SvcError('internal_error', `internal error: operation \`${op.op}\` is not supported by this server yet`);
  }
}

