// Windows: limit, skip and range over a stream (operations.md §6).
import type { Op, StreamBound } from '../protocol/ast.js';
import { queryError, SvcError } from '../protocol/errors.js';
import { paramValue, type ExecCtx } from './context.js';
import type { EvalOp } from './eval-op.js';
import { RowSet, rowsOf, scalarItems, type Stream } from './rows.js';
import { streamedWindow } from './streaming.js';
import { guard, ROW_BYTES } from '../query-guard.js';
import { indexScan } from './index-scan.js';

function boundValue(ctx: ExecCtx, b: StreamBound, what: string): number {
  if (b.kind === 'literal') return b.value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(b.value);
  const e = b.expr;
  if (e.kind === 'constant' || e.kind === 'param') {
    const v = e.kind === 'constant' ? e.value : paramValue(ctx, e.name);
    if (typeof v === 'bigint' && v >= 0n) return v > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(v);
    throw queryError(`${what} must be a non-negative i64`);
  }
  throw queryError(`${what} must be a literal or a parameter`);
}

function window(input: Stream, start: number, end: number): Stream {
  if (input.kind === 'fold') throw queryError('window expected stream input, got a folded stream; use unfold first');
  if (input.kind === 'rows') {
    const rows = input.rows;
    const out = new RowSet();
    for (let i = start; i < Math.min(end, rows.length); i++) out.pushFrom(rows, i);
    return rowsOf(out);
  }
  const items = scalarItems(input)!;
  guard.charge(Math.max(0, Math.min(end, items.length) - start) * ROW_BYTES);
  return { kind: 'scalars', items: items.slice(start, Math.max(start, end)) };
}

/**
 * A window's input when it is a source answered from an index: only its first `end` rows
 * are looked up (index-scan.ts); null otherwise.
 */
function indexedHead(ctx: ExecCtx, input: Op, end: number): Stream | null {
  if (input.op !== 'nodes_where' && input.op !== 'edges_where') return null;
  const path = ctx.accessPaths?.get(input);
  if (path === undefined) return null;
  const rows = indexScan(ctx, input, path, end);
  return rows === null ? null : rowsOf(rows);
}

/** limit, skip or range over the stream of `op.input`. */
export function evalWindow(ctx: ExecCtx, op: Op, context: Stream | null, evalOp: EvalOp): Stream {
  switch (op.op) {
    case 'limit': {
      const n = boundValue(ctx, op.count, 'limit count');
      const head = indexedHead(ctx, op.input, n);
      if (head !== null) return window(head, 0, n);
      const streamed = streamedWindow(ctx, op.input, context, evalOp, 0, n);
      return streamed !== null ? rowsOf(streamed) : window(evalOp(ctx, op.input, context), 0, n);
    }
    case 'skip': {
      const n = boundValue(ctx, op.count, 'skip count');
      return window(evalOp(ctx, op.input, context), n, Number.MAX_SAFE_INTEGER);
    }
    case 'range': {
      const start = boundValue(ctx, op.start, 'range start');
      const end = boundValue(ctx, op.end, 'range end');
      const head = indexedHead(ctx, op.input, Math.max(start, end));
      if (head !== null) return window(head, start, Math.max(start, end));
      const streamed = streamedWindow(ctx, op.input, context, evalOp, start, Math.max(start, end));
      return streamed !== null ? rowsOf(streamed) : window(evalOp(ctx, op.input, context), start, Math.max(start, end));
    }
    default:
      throw new SvcError('internal_error', `internal error: ${op.op} is not a window`);
  }
}
