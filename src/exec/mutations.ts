// Mutations: add_n, add_e, set_property, remove_property and the drops.
import type { Op, PropertyAssignment } from '../protocol/ast.js';
import { dbError, queryError, SvcError } from '../protocol/errors.js';
import type { Value } from '../protocol/value.js';
import type { PropertyRecord } from '../store/record-codec.js';
import { inputValue, type ExecCtx } from './context.js';
import {
  checkRowLimit, edgeKey, idOfKey, isEdgeKey, movedExtra, needRows, NO_ELEMENT, nodeKey, RowSet, rowsOf, scalarItems,
  type RowExtra, type Stream,
} from './rows.js';
import { resolveRef } from './sources.js';
import { incidentEdges } from './navigation.js';
import { guard } from '../query-guard.js';

const emptyRows = (): Stream => rowsOf(new RowSet());


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

export function mutate(ctx: ExecCtx, op: Op, input: Stream | null): Stream {
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
      // An ID may come twice (a parameter list, a variable): the edge is dropped once.
      for (const id of resolveRef(ctx, op.edges, true, false)) if (store.edgeVisible(id, ctx.at)) store.deleteEdge(id);
      return emptyRows();
    }
    default:
      throw new SvcError('internal_error', `internal error: ${op.op} is not a mutation`);
  }
}
