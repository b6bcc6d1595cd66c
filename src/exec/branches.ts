// Branching: union, coalesce, optional and choose (operations.md §10).
import type { Op } from '../protocol/ast.js';
import { queryError, SvcError } from '../protocol/errors.js';
import { evalPredicate, type ExecCtx } from './context.js';
import { body, type EvalOp } from './eval-op.js';
import { append, isEdgeKey, needRows, NO_ELEMENT, RowSet, rowsOf, single, type Stream } from './rows.js';

/** union, coalesce, optional or choose over the stream of `op.input`. */
export function evalBranch(ctx: ExecCtx, op: Op, context: Stream | null, evalOp: EvalOp): Stream {
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
    default:
      throw new SvcError('internal_error', `internal error: ${op.op} is not a branch`);
  }
}
