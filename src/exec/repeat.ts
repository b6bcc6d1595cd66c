// repeat (operations.md §10.1); a body that is one out/in/both hop from plain node rows
// runs on element keys (navigation.ts navigateNodeRows).
import type { Op, RepeatConfig } from '../protocol/ast.js';
import { queryError } from '../protocol/errors.js';
import { limits } from '../limits.js';
import { evalPredicate, type ExecCtx } from './context.js';
import { body, type EvalOp } from './eval-op.js';
import { append, RowSet } from './rows.js';
import { navigateNodeRows, navigationStep, nodeRowsStep, type NodeRowsStep } from './navigation.js';
import { guard } from '../query-guard.js';

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
  const step = repeatStep(ctx, c, input);
  let frontier = input;
  const emitted = new RowSet();
  /** Bytes charged for the current frontier (and its level's garbage); 0 for the input. */
  let frontierBytes = 0;
  for (let i = 0; i < iterations; i++) {
    if (i >= limits.repeatIterationsMax) throw queryError(`repeat exceeded ${limits.repeatIterationsMax} iterations`);
    guard.check();
    if (c.emit === 'before' || c.emit === 'all') append(emitted, frontier);
    const before = guard.bytes;
    const next = step !== null ? navigateNodeRows(ctx, step, frontier, dedupLevels) : body(ctx, evalOp, c.traversal, frontier, 'repeat');
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

/**
 * The body as one out/in/both step from the context, when the rows are plain node rows
 * and nothing is checked per row: the step then runs on element keys (navigateNodeRows).
 */
function repeatStep(ctx: ExecCtx, c: RepeatConfig, input: RowSet): NodeRowsStep | null {
  const root = c.traversal.root;
  if ((root.op !== 'out' && root.op !== 'in' && root.op !== 'both') || root.input.op !== 'context') return null;
  if (c.until !== null || c.emit_predicate !== null) return null;
  return nodeRowsStep(ctx, navigationStep(ctx, root), input);
}
