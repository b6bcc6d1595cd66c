// Terminals: count, exists, id, label, values, value_map, project, edge_properties.
import type { Op } from '../protocol/ast.js';
import { queryError, SvcError } from '../protocol/errors.js';
import type { Value } from '../protocol/value.js';
import { evalExpr, resolveProperty, type ExecCtx } from './context.js';
import { idOfKey, isEdgeKey, needRows, NO_ELEMENT, RowSet, scalarItems, type Stream } from './rows.js';
import { CONTAINER_BYTES, ENTRY_BYTES, guard, ROW_BYTES } from '../query-guard.js';
import { storedMap, StoredMaps } from './element-maps.js';

/** Count one built result item (a Map of a row's properties) against the budget. */
function chargeItem(m: Map<string, Value>): Map<string, Value> {
  guard.chargeLater(CONTAINER_BYTES + ENTRY_BYTES * m.size);
  guard.step(1);
  return m;
}

function valueMap(ctx: ExecCtx, input: RowSet, properties: string[] | null): Stream {
  if (properties === null || properties.length === 0) {
    const maps = new StoredMaps(ctx.store, ctx.at, input);
    // A write batch's later entries may change the records: its rows are built now.
    return ctx.writing ? { kind: 'scalars', items: maps.items() } : { kind: 'lazy_scalars', source: maps };
  }
  const items: Value[] = [];
  for (let i = 0; i < input.length; i++) {
    const el = input.el[i]!;
    const extra = input.extraAt(i);
    const m = new Map<string, Value>();
    for (const p of properties) {
      const v = resolveProperty(ctx, el, extra, p);
      if (v !== undefined) m.set(p, v);
    }
    items.push(chargeItem(m));
  }
  return { kind: 'scalars', items };
}

export function terminal(ctx: ExecCtx, op: Op, input: Stream): Stream {
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
      return valueMap(ctx, needRows(input, 'value_map'), op.properties);
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
        const m = storedMap(ctx.store, el, ctx.at);
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
