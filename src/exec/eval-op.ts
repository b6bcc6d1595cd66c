// The evaluator's signature, for the operator families that run sub-traversals: they get
// ops.ts's evalOp as a parameter instead of importing it, so no family imports ops.ts.
import type { Op, SubTraversal } from '../protocol/ast.js';
import { queryError } from '../protocol/errors.js';
import type { ExecCtx } from './context.js';
import { rowsOf, type RowSet, type Stream } from './rows.js';

export type EvalOp = (ctx: ExecCtx, op: Op, context: Stream | null) => Stream;

/** Run a body; its output must be element rows (operations.md §2.6). */
export function body(ctx: ExecCtx, evalOp: EvalOp, sub: SubTraversal, context: RowSet, op: string): RowSet {
  const out = evalOp(ctx, sub.root, rowsOf(context));
  if (out.kind !== 'rows') throw queryError(`${op} body must produce element rows, got ${out.kind === 'fold' ? 'a folded stream' : 'scalar values'}`);
  return out.rows;
}
