// Batches (envelope.md §4-§5): entries in order, conditions, for_each, bindings and the
// response object. The caller owns the transaction (begin/commit/rollback).
import type { Entry, Op } from '../protocol/ast.js';
import { queryError } from '../protocol/errors.js';
import type { Value } from '../protocol/value.js';
import { limits } from '../limits.js';
import type { Plan, ShapeClass } from '../plan/plan.js';
import { HIDDEN_PARAMETER, paramValue, type ExecCtx } from './context.js';
import { evalOp } from './ops.js';
import { guard } from '../query-guard.js';
import { renderBound, renderResponse, type Bound } from './render.js';
import { RowSet, sizeOf, type Stream } from './rows.js';

interface BatchState {
  readonly plan: Plan;
  /**
   * Bytes charged to the query guard by each entry whose result stays reachable (named, or
   * binding variables), keyed by the entry's root: a `for_each` iteration's result replaces
   * the previous iteration's, so only the latest counts.
   */
  retained: Map<Op, number> | null;
  /** Latest binding of every entry name. */
  readonly bound: Map<string, Bound>;
  /** Result of the entry that ran (or was skipped) last, for prev_not_empty. */
  prev: Stream | null;
  iterations: number;
}

const bindingOps = new Set(['as', 'store']);
const bindsCache = new WeakMap<Op, boolean>();

/** Whether an entry binds variables (`as`, `store`) that outlive it. */
function bindsVariables(root: Op): boolean {
  let binds = bindsCache.get(root);
  if (binds === undefined) {
    binds = containsOp(root, bindingOps);
    bindsCache.set(root, binds);
  }
  return binds;
}

/** Whether any operation object under `node` (sub-traversals included) has one of `names`. */
function containsOp(node: unknown, names: ReadonlySet<string>): boolean {
  if (node === null || typeof node !== 'object') return false;
  if (Array.isArray(node)) return node.some((item) => containsOp(item, names));
  if (node instanceof Map || ArrayBuffer.isView(node)) return false; // values, not operations
  const record = node as Record<string, unknown>;
  if (typeof record['op'] === 'string' && names.has(record['op'])) return true;
  for (const key in record) if (containsOp(record[key], names)) return true;
  return false;
}

function variableSize(ctx: ExecCtx, state: BatchState, name: string): number {
  const stream = ctx.vars.get(name) ?? state.bound.get(name)?.stream;
  if (stream === undefined) throw queryError(`variable \`${name}\` is not bound`);
  return sizeOf(stream);
}

function conditionHolds(ctx: ExecCtx, state: BatchState, entry: Extract<Entry, { kind: 'query' }>): boolean {
  const c = entry.condition;
  if (c === null) return true;
  switch (c.kind) {
    case 'var_not_empty': return variableSize(ctx, state, c.name) > 0;
    case 'var_empty': return variableSize(ctx, state, c.name) === 0;
    case 'var_min_size': return variableSize(ctx, state, c.name) >= c.size;
    case 'prev_not_empty': return state.prev !== null && sizeOf(state.prev) > 0;
  }
}

/** `repeated`: inside a for_each, where each entry runs once per iteration. */
function runEntries(ctx: ExecCtx, state: BatchState, entries: readonly Entry[], repeated: boolean): void {
  for (const entry of entries) {
    if (entry.kind === 'for_each') {
      runForEach(ctx, state, entry.param, entry.body);
      continue;
    }
    const cls = state.plan.classOf.get(entry.root)!;
    let stream: Stream;
    let skipped = false;
    if (conditionHolds(ctx, state, entry)) {
      const before = guard.bytes;
      stream = evalOp(ctx, entry.root, null);
      const charged = guard.bytes - before;
      const kept = entry.name !== null || bindsVariables(entry.root);
      if (!repeated) {
        if (!kept) guard.release(charged); // a top-level entry runs once: nothing to replace
      } else {
        guard.release((state.retained?.get(entry.root) ?? 0) + charged);
        if (kept) {
          guard.charge(charged);
          (state.retained ??= new Map()).set(entry.root, charged);
        } else {
          state.retained?.delete(entry.root);
        }
      }
    } else {
      stream = { kind: 'rows', rows: new RowSet() };
      skipped = true;
    }
    state.prev = stream;
    if (entry.name !== null) {
      state.bound.set(entry.name, { stream, cls, skipped });
      ctx.vars.set(entry.name, stream);
    }
  }
}

function runForEach(ctx: ExecCtx, state: BatchState, param: string, body: readonly Entry[]): void {
  let rows: Value;
  try {
    rows = paramValue(ctx, param);
  } catch {
    throw queryError(`for_each parameter \`${param}\` is not bound`);
  }
  if (!Array.isArray(rows)) throw queryError(`for_each parameter \`${param}\` must be an array of objects`);
  // Under each row's frame, one that hides the array itself from the body (a row's own
  // member of that name still shows).
  ctx.paramFrames.push(new Map([[param, HIDDEN_PARAMETER]]));
  try {
    forEachRow(ctx, state, param, body, rows);
  } finally {
    ctx.paramFrames.pop();
  }
}

function forEachRow(ctx: ExecCtx, state: BatchState, param: string, body: readonly Entry[], rows: readonly Value[]): void {
  for (const row of rows) {
    if (!(row instanceof Map)) throw queryError(`for_each parameter \`${param}\` must be an array of objects`);
    for (const name of row.keys()) if (name === '') throw queryError(`for_each parameter \`${param}\` has an empty member name`);
    if (++state.iterations > limits.forEachIterationsMax) {
      throw queryError(`for_each ran more than ${limits.forEachIterationsMax} iterations`);
    }
    ctx.paramFrames.push(row);
    try {
      runEntries(ctx, state, body, true);
    } finally {
      ctx.paramFrames.pop();
    }
  }
}

/** Static class of the last entry that could bind `name` (for names that never ran). */
function staticClass(plan: Plan, entries: readonly Entry[], name: string): ShapeClass | null {
  let found: ShapeClass | null = null;
  for (const e of entries) {
    if (e.kind === 'query') { if (e.name === name) found = plan.classOf.get(e.root as Op)!; } else found = staticClass(plan, e.body, name) ?? found;
  }
  return found;
}

/** Run every entry and render the response object. */
export function runBatch(ctx: ExecCtx, plan: Plan): string {
  const state: BatchState = { plan, retained: null, bound: new Map(), prev: null, iterations: 0 };
  runEntries(ctx, state, plan.request.batch.entries, false);
  const returns = plan.request.batch.returns;
  const rendered = new Array<string>(returns.length);
  for (let i = 0; i < returns.length; i++) {
    const name = returns[i]!;
    const b = state.bound.get(name);
    if (b !== undefined) {
      rendered[i] = renderBound(b);
      continue;
    }
    const cls = staticClass(plan, plan.request.batch.entries, name);
    if (cls === 'scalar' || cls === null) throw queryError(`return variable \`${name}\` is not bound`);
    rendered[i] = cls === 'object' ? 'null' : '[]';
  }
  return renderResponse(returns, rendered);
}
