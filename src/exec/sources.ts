// Source operators: the references that name elements (operations.md §2.1) and the
// nodes/edges/nodes_where/edges_where operations that start a stream from them.
import type { ElementRef, Op } from '../protocol/ast.js';
import { queryError, SvcError } from '../protocol/errors.js';
import type { Value } from '../protocol/value.js';
import { evalPredicate, paramValue, type ExecCtx } from './context.js';
import { edgeKey, idOfKey, isEdgeKey, NO_ELEMENT, nodeKey, RowSet, rowsOf, type Stream } from './rows.js';
import { guard, ROW_BYTES } from '../query-guard.js';
import { indexScan } from './index-scan.js';

/** IDs from a parameter value: one non-negative integer or an array of them. */
/** The largest ID a JS number holds exactly, as a bigint (compared per ID: made once). */
const MAX_SAFE_ID = BigInt(Number.MAX_SAFE_INTEGER);

export const exists = (ctx: ExecCtx, id: number, edges: boolean): boolean => (edges ? ctx.store.edgeExists(id, ctx.at) : ctx.store.nodeExists(id, ctx.at));

function idFromParam(x: Value, name: string): number {
  if (typeof x !== 'bigint' || x < 0n) throw queryError(`parameter \`${name}\` must hold non-negative integer ids`);
  return x > MAX_SAFE_ID ? Number.MAX_SAFE_INTEGER : Number(x);
}

/** The IDs of a parameter, those that do not exist left out unless `asTarget`. */
function idsFromParam(ctx: ExecCtx, name: string, edges: boolean, asTarget: boolean): number[] {
  const v = paramValue(ctx, name);
  const out: number[] = [];
  if (!Array.isArray(v)) {
    const id = idFromParam(v, name);
    if (asTarget || exists(ctx, id, edges)) out.push(id);
    return out;
  }
  for (const x of v) {
    const id = idFromParam(x, name);
    if (asTarget || exists(ctx, id, edges)) out.push(id);
  }
  return out;
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
        const n = id > MAX_SAFE_ID ? -1 : Number(id);
        if (asTarget ? n >= 0 : exists(ctx, n, edges)) out.push(n);
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
      // A write batch may have deleted some since they were bound: a source names only
      // elements that exist (a mutation target keeps them, and its own check refuses them).
      const deletable = ctx.writing && !asTarget;
      const out: number[] = [];
      for (const el of rows.el) {
        if (el === NO_ELEMENT || isEdgeKey(el) !== edges) continue;
        const id = idOfKey(el);
        if (!deletable || exists(ctx, id, edges)) out.push(id);
      }
      return out;
    }
    case 'param':
      return idsFromParam(ctx, ref.name, edges, asTarget);
  }
}

/** nodes, edges, nodes_where or edges_where: the stream of the elements they name. */
export function evalSource(ctx: ExecCtx, op: Op): Stream {
  switch (op.op) {
    case 'nodes': case 'edges': {
      const edges = op.op === 'edges';
      const ids = resolveRef(ctx, op.reference, edges, false);
      if (op.reference.kind !== 'all' && op.reference.kind !== 'var') guard.charge(2 * ids.length * ROW_BYTES);
      return rowsOf(new RowSet(ids.map(edges ? edgeKey : nodeKey)));
    }
    case 'nodes_where': case 'edges_where': {
      const path = ctx.accessPaths?.get(op);
      if (path !== undefined) {
        const found = indexScan(ctx, op, path);
        if (found !== null) return rowsOf(found);
      }
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
    default:
      throw new SvcError('internal_error', `internal error: ${op.op} is not a source`);
  }
}
