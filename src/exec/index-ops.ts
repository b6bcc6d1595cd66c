// Index lifecycle operations (indexes.md §3-§6): create_index, drop_index and the three
// operation controls. Each runs behind a commit barrier (envelope.md §5.3): the graph
// mutations made so far commit first, the index operation commits alone, and later
// mutations start a new transaction. get_index_operation in a read batch reads the
// catalog view (the writer's catalog as last committed), a terminal status only once the
// read's snapshot holds the batch that set it.
import type { Op } from '../protocol/ast.js';
import { SvcError } from '../protocol/errors.js';
import { operationNotFound, statusObject } from '../index/catalog.js';
import type { IndexRuntime } from '../index/runtime.js';
import { currentView } from '../index/view.js';
import type { ExecCtx } from './context.js';
import type { Stream } from './rows.js';

type IndexOp = Extract<Op, { op: 'create_index' | 'drop_index' | 'get_index_operation' | 'retry_index_operation' | 'abort_index_operation' }>;

export function evalIndexOp(ctx: ExecCtx, op: IndexOp): Stream {
  if (!ctx.writing) {
    if (op.op !== 'get_index_operation') throw new SvcError('internal_error', `internal error: ${op.op} in a read batch`);
    const found = currentView(ctx.store).operations.get(op.operation_id);
    if (found === undefined) throw operationNotFound(op.operation_id);
    // The view is published at commit; the batch that made an operation succeeded (or
    // aborted) may not be durable yet, so not visible to this read: until it is, the
    // operation is still running here. A client told `succeeded` can use the index at once,
    // and no crash takes a `succeeded` back (indexes.md §5.2: terminal).
    if ((found.status === 'succeeded' || found.status === 'aborted') && found.stageEpoch > ctx.at) {
      return { kind: 'object', value: statusObject({ ...found, status: 'running' }) };
    }
    return { kind: 'object', value: statusObject(found) };
  }
  const runtime = ctx.store.indexes as IndexRuntime | null;
  if (runtime === null || ctx.barrier === null) throw new SvcError('index_lifecycle_unavailable', 'index lifecycle unavailable on this store');
  ctx.barrier();
  const epoch = ctx.store.pendingEpoch();
  let value;
  switch (op.op) {
    case 'create_index': value = runtime.createIndex(op.spec.definition, op.if_not_exists, epoch); break;
    case 'drop_index': value = runtime.dropIndex(op.spec.definition, epoch); break;
    case 'get_index_operation': value = runtime.getOperation(op.operation_id); break;
    case 'retry_index_operation': value = runtime.retryOperation(op.operation_id); break;
    case 'abort_index_operation': value = runtime.abortOperation(op.operation_id, epoch); break;
  }
  ctx.barrier();
  return { kind: 'object', value };
}
