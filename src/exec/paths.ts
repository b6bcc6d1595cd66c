// Paths and sacks: path, simple_path, with_sack, sack_set, sack_add, sack_get (operations.md §11).
import type { Op } from '../protocol/ast.js';
import { queryError, SvcError } from '../protocol/errors.js';
import { F32, type Value } from '../protocol/value.js';
import { addI64, resolveProperty, type ExecCtx } from './context.js';
import type { EvalOp } from './eval-op.js';
import { mapExtras, needRows, NO_ELEMENT, RowSet, rowsOf, type Stream } from './rows.js';
import { guard } from '../query-guard.js';

/** path, simple_path or a sack operation over the stream of `op.input`. */
export function evalPath(ctx: ExecCtx, op: Op, context: Stream | null, evalOp: EvalOp): Stream {
  const input = (): Stream => evalOp(ctx, (op as { input: Op }).input, context);
  switch (op.op) {
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
    default:
      throw new SvcError('internal_error', `internal error: ${op.op} is not a path or sack operation`);
  }
}
