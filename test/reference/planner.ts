// Static checks of the reference interpreter ("planning", envelope.md §6 stage 7) and
// the static shape class of an entry (envelope.md §9). Everything here looks only at the
// request tree, never at data. Any failure is a 400 with a planning code.
import type {
  Batch, ElementRef, Entry, Expr, Op, Predicate, PropertyAssignment, StreamBound, ValueInput,
} from '../../src/protocol/ast.js';
import { bodiesOf, inputOf, mutatingOps } from '../../src/protocol/ast.js';
import { planError, RefError } from './values.js';

// ------------------------------------------------------------------ shape classes (§9)

export type ShapeClass = 'scalar' | 'list' | 'object';
type Multiplicity = 'one' | 'many';

const scalarRoots = new Set<string>([
  'count', 'exists', 'create_index', 'drop_index', 'get_index_operation', 'retry_index_operation', 'abort_index_operation',
]);
const listRoots = new Set<string>([
  'add_n', 'add_e', 'set_property', 'remove_property', 'drop', 'drop_edge', 'drop_edge_labeled', 'drop_edge_by_id',
  'group', 'group_count', 'aggregate_by', 'fold', 'shortest_path',
]);

/** envelope.md §9.1: the class of an entry is decided by its root operation. */
export function classOf(root: Op): ShapeClass {
  if (scalarRoots.has(root.op)) return 'scalar';
  if (listRoots.has(root.op)) return 'list';
  return multiplicity(root) === 'one' ? 'object' : 'list';
}

const isLiteral = (b: StreamBound): b is { kind: 'literal'; value: bigint } => b.kind === 'literal';

/** envelope.md §9.2. Only `{"literal": n}` bounds count as literals here. */
export function multiplicity(op: Op, contextMultiplicity: Multiplicity = 'many'): Multiplicity {
  const input = (): Multiplicity => {
    const i = inputOf(op);
    return i === null ? 'many' : multiplicity(i, contextMultiplicity);
  };
  switch (op.op) {
    case 'nodes': case 'edges':
      return op.reference.kind === 'ids' && op.reference.ids.length <= 1 ? 'one' : 'many';
    case 'nodes_where': case 'edges_where': return 'many';
    case 'vector_search_nodes': case 'vector_search_edges': case 'text_search_nodes': case 'text_search_edges':
      return isLiteral(op.k) && op.k.value <= 1n ? 'one' : 'many';
    case 'vector_search_nodes_within': case 'vector_search_edges_within':
    case 'text_search_nodes_within': case 'text_search_edges_within':
      return input() === 'one' || (isLiteral(op.k) && op.k.value <= 1n) ? 'one' : 'many';
    case 'limit':
      return input() === 'one' || (isLiteral(op.count) && op.count.value <= 1n) ? 'one' : 'many';
    case 'range':
      return input() === 'one' || (isLiteral(op.start) && isLiteral(op.end) && op.end.value - op.start.value <= 1n)
        ? 'one' : 'many';
    case 'out': case 'in': case 'both': case 'out_e': case 'in_e': case 'both_e':
    case 'out_n': case 'in_n': case 'other_n': case 'inject': case 'select': case 'repeat': case 'unfold':
    case 'union': case 'choose': case 'coalesce': case 'optional': case 'shortest_path':
      return 'many';
    case 'count': case 'exists':
    case 'create_index': case 'drop_index': case 'get_index_operation': case 'retry_index_operation': case 'abort_index_operation':
      return 'one';
    case 'add_n': case 'add_e': case 'set_property': case 'remove_property': case 'drop': case 'drop_edge':
    case 'drop_edge_labeled': case 'drop_edge_by_id': case 'group': case 'group_count': case 'aggregate_by': case 'fold':
      return 'many';
    case 'context': return contextMultiplicity;
    default:
      // has, has_label, has_key, where, dedup, within, without, edge_has, edge_has_label, skip, as, store,
      // bind, id, label, values, value_map, project, project_bindings, edge_properties, order_by,
      // order_by_multiple, path, simple_path, with_sack, sack_set, sack_add, sack_get: same as input.
      return input();
  }
}

// ------------------------------------------------------------------ stream facts for §15.3

type Kind = 'node' | 'edge' | 'unknown';
interface Flow { bind: boolean; kind: Kind }

const merge = (kinds: Kind[]): Kind => (kinds.every((k) => k === kinds[0]) ? kinds[0]! : 'unknown');

/** Does the stream carry bindings, and is it statically known to hold nodes or edges? */
export function flowOf(op: Op, context: Flow): Flow {
  const input = (): Flow => {
    const i = inputOf(op);
    return i === null ? { bind: false, kind: 'unknown' } : flowOf(i, context);
  };
  switch (op.op) {
    case 'context': return context;
    case 'nodes': case 'nodes_where': case 'vector_search_nodes': case 'text_search_nodes':
      return { bind: false, kind: 'node' };
    case 'edges': case 'edges_where': case 'vector_search_edges': case 'text_search_edges':
      return { bind: false, kind: 'edge' };
    case 'out_e': case 'in_e': case 'both_e': return { bind: input().bind, kind: 'edge' };
    case 'out': case 'in': case 'both': case 'out_n': case 'in_n': case 'other_n':
      return { bind: input().bind, kind: 'node' };
    case 'bind': return { bind: true, kind: input().kind };
    case 'repeat': {
      const i = input();
      const body = flowOf(op.config.traversal.root, i);
      return { bind: i.bind || body.bind, kind: body.kind };
    }
    case 'union': case 'coalesce': case 'optional': {
      const i = input();
      const branches = bodiesOf(op).map((b) => flowOf(b.root, i));
      return { bind: i.bind || branches.some((b) => b.bind), kind: merge([i.kind, ...branches.map((b) => b.kind)]) };
    }
    case 'choose': {
      const i = input();
      const then = flowOf(op.then_traversal.root, i);
      const otherwise = op.else_traversal ? flowOf(op.else_traversal.root, i) : i;
      return { bind: i.bind || then.bind || otherwise.bind, kind: merge([then.kind, otherwise.kind]) };
    }
    default:
      if (inputOf(op) === null) return { bind: false, kind: 'unknown' };
      return input();
  }
}

const afterBindForbidden = new Set<string>([
  'choose', 'order_by', 'order_by_multiple', 'repeat', 'id', 'label', 'values', 'value_map', 'project', 'edge_properties',
]);

// ------------------------------------------------------------------ request checks

const sourceOps = new Set<string>([
  'nodes', 'nodes_where', 'edges', 'edges_where', 'vector_search_nodes', 'text_search_nodes', 'vector_search_edges',
  'text_search_edges', 'shortest_path', 'create_index', 'drop_index', 'get_index_operation', 'retry_index_operation',
  'abort_index_operation',
]);
const rootOnlyOps = new Set<string>([
  'shortest_path', 'create_index', 'drop_index', 'get_index_operation', 'retry_index_operation', 'abort_index_operation',
]);

function nonEmpty(name: string, what: string): void {
  if (name === '') throw planError('invalid_empty_name', `${what} must not be empty`);
}

function noDuplicates(names: string[], code: string, what: string): void {
  const seen = new Set<string>();
  for (const n of names) {
    if (seen.has(n)) throw planError(code, `duplicate ${what} \`${n}\``);
    seen.add(n);
  }
}

/** Every query-entry name in a batch, including those nested in for_each bodies. */
export function entryNames(entries: Entry[], out = new Set<string>()): Set<string> {
  for (const e of entries) {
    if (e.kind === 'for_each') entryNames(e.body, out);
    else if (e.name !== null) out.add(e.name);
  }
  return out;
}

interface Env {
  write: boolean;
  /** Inside a branch/repeat body. */
  inSub: boolean;
  /** The op is the root of its entry. */
  isRoot: boolean;
  /** Flow of the rows that `context` stands for. */
  context: Flow;
}

export function planBatch(batch: Batch, write: boolean): void {
  if (!write) checkReadOnly(batch.entries);
  checkEntries(batch.entries, write);
  const names = entryNames(batch.entries);
  const seen = new Set<string>();
  for (const r of batch.returns) {
    nonEmpty(r, 'return variable');
    if (seen.has(r)) throw planError('duplicate_return_variable', `duplicate return variable \`${r}\``);
    seen.add(r);
    if (!names.has(r)) {
      throw planError('internal_planner_error', `invalid executable plan: return variable \`${r}\` has no executable binding`);
    }
  }
}

function containsMutation(op: Op): boolean {
  if (mutatingOps.has(op.op)) return true;
  const i = inputOf(op);
  return (i !== null && containsMutation(i)) || bodiesOf(op).some((b) => containsMutation(b.root));
}

function checkReadOnly(entries: Entry[]): void {
  for (const e of entries) {
    if (e.kind === 'for_each') checkReadOnly(e.body);
    else if (containsMutation(e.root)) {
      throw new RefError('invalid_query_json', 'invalid query JSON: read batch entry contains a persistent mutation', 400);
    }
  }
}

function checkEntries(entries: Entry[], write: boolean): void {
  if (entries.length === 0) throw planError('invalid_batch_arity', 'batch requires at least one entry');
  entries.forEach((entry, index) => {
    if (entry.kind === 'for_each') {
      nonEmpty(entry.param, 'for_each parameter');
      checkEntries(entry.body, write);
      return;
    }
    if (entry.name !== null) nonEmpty(entry.name, 'entry name');
    const c = entry.condition;
    if (c !== null) {
      if (c.kind === 'prev_not_empty') {
        if (index === 0) throw planError('invalid_initial_batch_condition', 'prev_not_empty on the first entry');
      } else {
        nonEmpty(c.name, 'condition variable');
        if (c.kind === 'var_min_size' && c.size === 0) {
          throw planError('invalid_batch_condition_min_size', 'var_min_size must be at least 1');
        }
      }
    }
    checkOp(entry.root, { write, inSub: false, isRoot: true, context: { bind: false, kind: 'unknown' } });
  });
}

function checkRef(ref: ElementRef, edgeTarget: boolean): void {
  switch (ref.kind) {
    case 'all':
      if (edgeTarget) throw planError('unsupported_edge_all_target', '"all" is not a valid edge target');
      return;
    case 'ids': {
      const seen = new Set<bigint>();
      for (const id of ref.ids) {
        if (seen.has(id)) throw planError('duplicate_element_id', `duplicate element id ${id}`);
        seen.add(id);
      }
      return;
    }
    case 'var': return nonEmpty(ref.name, 'variable');
    case 'param': return nonEmpty(ref.name, 'parameter');
  }
}

export function checkExpr(e: Expr): void {
  switch (e.kind) {
    case 'property': return nonEmpty(e.name, 'property');
    case 'param': return nonEmpty(e.name, 'parameter');
    case 'add': case 'sub': case 'mul': case 'div': case 'mod': checkExpr(e.left); checkExpr(e.right); return;
    case 'neg': return checkExpr(e.expr);
    case 'case':
      for (const wt of e.when_then) { checkPredicate(wt.when); checkExpr(wt.then); }
      if (e.else_expr !== null) checkExpr(e.else_expr);
      return;
    default: return;
  }
}

export function checkPredicate(p: Predicate): void {
  switch (p.kind) {
    case 'eq': case 'neq': case 'gt': case 'gte': case 'lt': case 'lte': case 'compare':
      checkExpr(p.left); checkExpr(p.right); return;
    case 'between': checkExpr(p.value); checkExpr(p.min); checkExpr(p.max); return;
    case 'has_key': case 'is_null': case 'is_not_null': return nonEmpty(p.property, 'property');
    case 'starts_with': checkExpr(p.value); checkExpr(p.prefix); return;
    case 'ends_with': checkExpr(p.value); checkExpr(p.suffix); return;
    case 'contains': checkExpr(p.value); checkExpr(p.substring); return;
    case 'is_in': checkExpr(p.value); checkExpr(p.values); return;
    case 'and': case 'or':
      if (p.predicates.length === 0) throw planError('invalid_predicate_arity', `${p.kind} requires at least one predicate`);
      p.predicates.forEach(checkPredicate);
      return;
    case 'not': return checkPredicate(p.predicate);
  }
}

function checkValueInput(v: ValueInput): void {
  if (v.kind === 'expr') checkExpr(v.expr);
}

/** The literal value of a bound after normalizing `{"expr": {"constant": {"i64": n}}}` (values.md §4). */
export function literalBound(b: StreamBound): bigint | null {
  if (b.kind === 'literal') return b.value;
  if (b.expr.kind === 'constant' && typeof b.expr.value === 'bigint' && b.expr.value >= 0n) return b.expr.value;
  return null;
}

function checkBound(b: StreamBound): void {
  if (b.kind === 'literal') return;
  if (b.expr.kind === 'constant') {
    if (typeof b.expr.value !== 'bigint' || b.expr.value < 0n) {
      throw planError('invalid_stream_bound_expression', 'stream bound must be non-negative integer');
    }
    return;
  }
  checkExpr(b.expr);
}

function checkAssignments(props: PropertyAssignment[]): void {
  for (const [name, input] of props) { nonEmpty(name, 'property'); checkValueInput(input); }
  noDuplicates(props.map(([n]) => n), 'duplicate_property_assignment', 'property assignment');
}

function checkOp(op: Op, env: Env): void {
  if (op.op === 'context') {
    if (!env.inSub) throw planError('unbound_context', 'sub-traversal context cannot be planned without parent input');
    return;
  }
  const input = inputOf(op);
  const isSource = sourceOps.has(op.op) || (input === null && (op.op === 'add_n' || op.op === 'drop_edge_by_id' || op.op === 'inject'));
  if (env.inSub && (isSource || op.op === 'project_bindings')) {
    throw planError('invalid_sub_traversal_operation', 'source is not supported inside branch/repeat sub-traversals');
  }
  if (rootOnlyOps.has(op.op) && !env.isRoot) {
    throw planError('internal_planner_error', `${op.op} must be the root of its entry`);
  }
  if (env.write && (op.op === 'bind' || op.op === 'project_bindings')) {
    throw planError('read_only_traversal_in_write_batch', `${op.op} is read-only and cannot be used in write batches`);
  }
  if (input !== null) {
    const flow = flowOf(input, env.context);
    const edgeOnly = op.op === 'edge_has' || op.op === 'edge_has_label';
    if (flow.bind && (afterBindForbidden.has(op.op) || (edgeOnly && flow.kind !== 'edge'))) {
      throw planError('invalid_after_bind_operation', `${op.op} is not supported after bind`);
    }
  }
  checkFields(op);
  if (input !== null) checkOp(input, { ...env, isRoot: false });
  const bodyContext = input === null ? env.context : flowOf(input, env.context);
  for (const body of bodiesOf(op)) checkOp(body.root, { ...env, inSub: true, isRoot: false, context: bodyContext });
}

function checkFields(op: Op): void {
  switch (op.op) {
    case 'nodes': case 'edges': return checkRef(op.reference, false);
    case 'nodes_where': case 'edges_where': case 'where': return checkPredicate(op.predicate);
    case 'out': case 'in': case 'both': case 'out_e': case 'in_e': case 'both_e':
      if (op.label !== null) nonEmpty(op.label, 'label');
      return;
    case 'has': case 'has_key': return nonEmpty(op.property, 'property');
    case 'edge_has': nonEmpty(op.property, 'property'); return checkValueInput(op.value);
    case 'within': case 'without': return nonEmpty(op.variable, 'variable');
    case 'limit': case 'skip': return checkBound(op.count);
    case 'range': {
      checkBound(op.start);
      checkBound(op.end);
      const s = literalBound(op.start);
      const e = literalBound(op.end);
      if (s !== null && e !== null && s > e) {
        throw planError('invalid_stream_range', `stream range start must not exceed end, got ${s}..${e}`);
      }
      return;
    }
    case 'as': case 'store': case 'select': case 'bind': return nonEmpty(op.name, 'variable');
    case 'inject': return nonEmpty(op.variable, 'variable');
    case 'order_by': return nonEmpty(op.property, 'order key');
    case 'order_by_multiple':
      if (op.orderings.length === 0) throw planError('invalid_order_keys', 'order_by_multiple requires at least one key');
      for (const [p] of op.orderings) nonEmpty(p, 'order key');
      return noDuplicates(op.orderings.map(([p]) => p), 'duplicate_order_key', 'order key');
    case 'repeat': {
      const c = op.config;
      if (c.times !== null && c.times === 0n) throw planError('invalid_repeat_count', 'repeat times must be positive');
      if (c.max_depth === 0n) throw planError('invalid_repeat_count', 'repeat max_depth must be positive');
      if (c.emit_predicate !== null && c.emit !== 'after') {
        throw planError('invalid_repeat_emit', 'emit_predicate requires emit "after"');
      }
      if (c.until !== null) checkPredicate(c.until);
      if (c.emit_predicate !== null) checkPredicate(c.emit_predicate);
      return;
    }
    case 'union':
      if (op.traversals.length < 2) {
        throw planError('invalid_branch_arity', `union branch requires at least 2 traversal(s), got ${op.traversals.length}`);
      }
      return;
    case 'coalesce':
      if (op.traversals.length < 1) throw planError('invalid_branch_arity', 'coalesce requires at least 1 traversal(s), got 0');
      return;
    case 'choose': return checkPredicate(op.condition);
    case 'sack_set': case 'sack_add': return nonEmpty(op.property, 'property');
    case 'values':
      if (op.properties.length === 0) throw planError('invalid_projection_arity', 'values requires at least one property');
      op.properties.forEach((p) => nonEmpty(p, 'property'));
      return noDuplicates(op.properties, 'duplicate_property_selection', 'property selection');
    case 'value_map':
      if (op.properties === null) return;
      op.properties.forEach((p) => nonEmpty(p, 'property'));
      return noDuplicates(op.properties, 'duplicate_property_selection', 'property selection');
    case 'project':
      if (op.projections.length === 0) throw planError('invalid_projection_arity', 'project requires at least one projection');
      for (const p of op.projections) {
        nonEmpty(p.alias, 'alias');
        if (p.kind === 'property') nonEmpty(p.source, 'property');
        else checkExpr(p.expr);
      }
      return noDuplicates(op.projections.map((p) => p.alias), 'duplicate_projection_alias', 'projection alias');
    case 'project_bindings':
      if (op.projections.length === 0) throw planError('invalid_projection_arity', 'project_bindings requires at least one projection');
      for (const p of op.projections) {
        nonEmpty(p.alias, 'alias');
        const refs = p.kind === 'property' ? [p] : p.refs;
        if (p.kind === 'coalesce' && refs.length === 0) throw planError('invalid_projection_arity', 'coalesce requires at least one ref');
        for (const r of refs) {
          if (r.target.kind === 'binding') nonEmpty(r.target.name, 'binding');
          nonEmpty(r.source, 'property');
        }
      }
      return noDuplicates(op.projections.map((p) => p.alias), 'duplicate_projection_alias', 'projection alias');
    case 'group': case 'group_count': case 'aggregate_by': return nonEmpty(op.property, 'property');
    case 'add_n': nonEmpty(op.label, 'label'); return checkAssignments(op.properties);
    case 'add_e': nonEmpty(op.label, 'label'); checkRef(op.to, false); return checkAssignments(op.properties);
    case 'set_property': nonEmpty(op.name, 'property'); return checkValueInput(op.value);
    case 'remove_property': return nonEmpty(op.name, 'property');
    case 'drop_edge': return checkRef(op.to, false);
    case 'drop_edge_labeled': nonEmpty(op.label, 'label'); return checkRef(op.to, false);
    case 'drop_edge_by_id': return checkRef(op.edges, true);
    case 'shortest_path':
      if (op.label !== null) nonEmpty(op.label, 'label');
      if (op.max_depth === 0n) throw planError('invalid_shortest_path_count', 'shortest_path max_depth must be positive');
      checkRef(op.source, false);
      return checkRef(op.target, false);
    case 'vector_search_nodes': case 'vector_search_edges': case 'text_search_nodes': case 'text_search_edges':
    case 'vector_search_nodes_within': case 'vector_search_edges_within':
    case 'text_search_nodes_within': case 'text_search_edges_within':
    case 'create_index': case 'drop_index': case 'get_index_operation': case 'retry_index_operation': case 'abort_index_operation':
      throw new RefError('reference_unsupported', `the reference interpreter does not implement ${op.op}`, 501);
    default:
      return; // has_label, edge_has_label, dedup, windows' inputs, terminals without fields, ...
  }
}
