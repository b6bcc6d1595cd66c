// Variables and bindings: as, store, select, inject, within, without, bind and
// project_bindings (operations.md §8).
import type { Op } from '../protocol/ast.js';
import { queryError, SvcError } from '../protocol/errors.js';
import type { Value } from '../protocol/value.js';
import { resolveProperty, type ExecCtx } from './context.js';
import type { EvalOp } from './eval-op.js';
import { renderValueKey } from './render.js';
import { append, emptyExtra, idOfKey, isEdgeKey, needRows, NO_ELEMENT, ownExtra, RowSet, rowsOf, type Stream } from './rows.js';
import { exists } from './sources.js';
import { CONTAINER_BYTES, ENTRY_BYTES, guard } from '../query-guard.js';

/**
 * A variable's rows as a later read of it sees them: in a write batch, without the elements
 * deleted since they were bound (entries see the batch's earlier changes, SPEC §9; a deleted
 * element's old properties must not be read, or copied into new writes). Reads delete
 * nothing: the stream itself.
 */
function withoutDeleted(ctx: ExecCtx, s: Stream): Stream {
  if (!ctx.writing || (s.kind !== 'rows' && s.kind !== 'fold')) return s;
  const rows = s.rows;
  // Work per read of the variable, checked against the deadline: a for_each may read a
  // large one once per row.
  guard.step(rows.length);
  let firstGone = -1;
  for (let i = 0; i < rows.length && firstGone < 0; i++) {
    const el = rows.el[i]!;
    if (el !== NO_ELEMENT && !exists(ctx, idOfKey(el), isEdgeKey(el))) firstGone = i;
  }
  if (firstGone < 0) return s;
  const out = new RowSet();
  for (let i = 0; i < rows.length; i++) {
    const el = rows.el[i]!;
    if (i < firstGone || el === NO_ELEMENT || exists(ctx, idOfKey(el), isEdgeKey(el))) out.pushFrom(rows, i);
  }
  return { kind: s.kind, rows: out };
}

/** A variable or binding operation over the stream of `op.input`. */
export function evalVariable(ctx: ExecCtx, op: Op, context: Stream | null, evalOp: EvalOp): Stream {
  const input = (): Stream => evalOp(ctx, (op as { input: Op }).input, context);
  switch (op.op) {
    case 'as': case 'store': {
      const s = input();
      ctx.vars.set(op.name, s);
      return s;
    }
    case 'select': {
      input();
      const s = ctx.vars.get(op.name);
      if (s === undefined) throw queryError(`variable \`${op.name}\` is not bound`);
      return withoutDeleted(ctx, s);
    }
    case 'inject': {
      // The input runs first: it may bind the variable (as/store).
      const input = op.input === null ? null : evalOp(ctx, op.input, context);
      const found = ctx.vars.get(op.variable);
      if (found === undefined) throw queryError(`variable \`${op.variable}\` is not bound`);
      const bound = withoutDeleted(ctx, found);
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
    default:
      throw new SvcError('internal_error', `internal error: ${op.op} is not a variable operation`);
  }
}
