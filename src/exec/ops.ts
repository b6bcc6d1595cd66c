// The operator dispatcher: evalOp evaluates one operation over the materialized stream of
// its input (operations.md), handing each family to its module (sources, navigation,
// filters, windows, ordering, terminals, mutations, branches, repeat, paths, variables,
// groups, shortest-path, searches). Streams are vectors of row element keys (see rows.ts), so an
// operator is a loop over numbers; objects appear only for rows with extras. Families that
// run sub-traversals get evalOp as a parameter (eval-op.ts), so none imports this file.
import type { Op, SubTraversal } from '../protocol/ast.js';
import { queryError, SvcError } from '../protocol/errors.js';
import type { ExecCtx } from './context.js';
import { needRows, rowsOf, type Stream } from './rows.js';
import { evalSource } from './sources.js';
import { navigate } from './navigation.js';
import { dedupStream, filterRows } from './filters.js';
import { evalWindow } from './windows.js';
import { orderRows } from './ordering.js';
import { terminal } from './terminals.js';
import { mutate } from './mutations.js';
import { evalBranch } from './branches.js';
import { evalRepeat } from './repeat.js';
import { evalPath } from './paths.js';
import { evalVariable } from './variables.js';
import { evalGroup } from './groups.js';
import { shortestPath } from './shortest-path.js';
import { streamedDedup, streamedTerminal } from './streaming.js';
import { guard } from '../query-guard.js';
import { evalIndexOp } from './index-ops.js';
import { evalSearch } from './search.js';

/** Evaluate `root`. `context` is the rows of the enclosing sub-traversal, if any. */
export function evalOp(ctx: ExecCtx, root: Op, context: Stream | null): Stream {
  guard.step(1); // the clock is read every 1,024 steps, not per operation
  const op = root;
  switch (op.op) {
    case 'context':
      if (context === null) throw queryError('`context` outside a sub-traversal');
      return context;
    case 'nodes': case 'edges': case 'nodes_where': case 'edges_where':
      return evalSource(ctx, op);
    case 'out': case 'in': case 'both': case 'out_e': case 'in_e': case 'both_e': case 'out_n': case 'in_n': case 'other_n':
      return rowsOf(navigate(ctx, op, needRows(evalOp(ctx, op.input, context), op.op)));
    case 'has': case 'edge_has': case 'has_label': case 'edge_has_label': case 'has_key': case 'where':
      return rowsOf(filterRows(ctx, op, needRows(evalOp(ctx, op.input, context), op.op)));
    case 'dedup': {
      const source = op.input;
      if (source.op === 'repeat') {
        // Each level of the repeat may drop its own duplicates (see evalRepeat).
        return dedupStream(ctx, rowsOf(evalRepeat(ctx, source, needRows(evalOp(ctx, source.input, context), 'repeat'), evalOp, true)));
      }
      return streamedDedup(ctx, op.input, context, evalOp) ?? dedupStream(ctx, evalOp(ctx, op.input, context));
    }
    case 'limit': case 'skip': case 'range':
      return evalWindow(ctx, op, context, evalOp);
    case 'order_by':
      return rowsOf(orderRows(ctx, needRows(evalOp(ctx, op.input, context), 'order_by'), [[op.property, op.order]]));
    case 'order_by_multiple':
      return rowsOf(orderRows(ctx, needRows(evalOp(ctx, op.input, context), 'order_by_multiple'), op.orderings));
    case 'count': case 'exists':
      return streamedTerminal(ctx, op.op, op.input, context, evalOp) ?? terminal(ctx, op, evalOp(ctx, op.input, context));
    case 'id': case 'label': case 'values': case 'value_map': case 'project': case 'edge_properties':
      return terminal(ctx, op, evalOp(ctx, op.input, context));
    case 'add_n': case 'drop_edge_by_id':
      return mutate(ctx, op, op.input === null ? null : evalOp(ctx, op.input, context));
    case 'add_e': case 'set_property': case 'remove_property': case 'drop': case 'drop_edge': case 'drop_edge_labeled':
      return mutate(ctx, op, evalOp(ctx, op.input, context));
    case 'create_index': case 'drop_index': case 'get_index_operation': case 'retry_index_operation': case 'abort_index_operation':
      return evalIndexOp(ctx, op);
    case 'union': case 'coalesce': case 'optional': case 'choose':
      return evalBranch(ctx, op, context, evalOp);
    case 'repeat':
      return rowsOf(evalRepeat(ctx, op, needRows(evalOp(ctx, op.input, context), 'repeat'), evalOp, false));
    case 'fold': return { kind: 'fold', rows: needRows(evalOp(ctx, op.input, context), 'fold') };
    case 'unfold': {
      const s = evalOp(ctx, op.input, context);
      if (s.kind === 'fold' || s.kind === 'rows') return rowsOf(s.rows);
      throw queryError('unfold expected a folded stream, got scalar values');
    }
    case 'path': case 'simple_path': case 'with_sack': case 'sack_set': case 'sack_add': case 'sack_get':
      return evalPath(ctx, op, context, evalOp);
    case 'as': case 'store': case 'select': case 'inject': case 'within': case 'without': case 'bind': case 'project_bindings':
      return evalVariable(ctx, op, context, evalOp);
    case 'group': case 'group_count': case 'aggregate_by':
      return evalGroup(ctx, op, context, evalOp);
    case 'shortest_path':
      return shortestPath(ctx, op);
    case 'vector_search_nodes': case 'vector_search_edges': case 'text_search_nodes': case 'text_search_edges':
    case 'vector_search_nodes_within': case 'vector_search_edges_within': case 'text_search_nodes_within': case 'text_search_edges_within':
      return evalSearch(ctx, op, context, evalOp);
    default:
      throw new SvcError('internal_error', `internal error: operation \`${(op as { op: string }).op}\` is not supported by this server`);
  }
}

/** Run a sub-traversal body with `context` as its input. */
export function runBody(ctx: ExecCtx, body: SubTraversal, context: Stream): Stream {
  return evalOp(ctx, body.root, context);
}
