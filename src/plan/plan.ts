// Stage 7 of envelope.md §6: static validation of a decoded batch (every planning error
// of operations.md §15 and the per-operation rules) and the empty-value shape class of
// each entry (envelope.md §9). Planning is all-or-nothing: nothing has run yet.
import type { Batch, ElementRef, Entry, Expr, Op, Predicate, Request, SearchOp, StreamBound, SubTraversal, ValueInput } from '../protocol/ast.js';
import { planError, type ErrorCode } from '../protocol/errors.js';
import { tagOf, type Value } from '../protocol/value.js';
import { describeIndex } from '../index/catalog.js';
import { acceptableLiteralVector } from '../index/vector-values.js';
import { emptyNameOf, type IndexDefinition } from '../protocol/index-spec.js';
import { chooseAccessPath, filterConjunct, type AccessPath } from './access-path.js';
import { predicateMayThrow } from './may-throw.js';

export type ShapeClass = 'scalar' | 'list' | 'object';

export interface Plan {
  /**
   * The request planned. Its `parameters` are those of the body it was planned for: the
   * plan cache reuses a plan for other parameter values (exec/request.ts), so execution
   * takes the parameters from the request at hand, never from here.
   */
  readonly request: Request;
  /** Shape class of every query entry's root. */
  readonly classOf: Map<Op, ShapeClass>;
  /** Whether any operation needs row paths (path, simple_path, other_n, both on edges). */
  readonly trackPath: boolean;
  /**
   * Whether the request's cost has a static bound, so the HTTP thread may run it inline
   * (under a work cap, src/query-guard.ts): no scans of every element, no repeat, no searches
   * or shortest paths. Everything else goes to the reader pool without being tried.
   */
  readonly inlineSafe: boolean;
  /** Sources answered from an index (plan/access-path.ts); empty when none applies. */
  readonly accessPaths: ReadonlyMap<Op, AccessPath>;
  /** The catalog version the access paths were chosen under; a plan of another version is re-made. */
  readonly catalogVersion: number;
  /** A write batch with an index operation (a commit barrier, envelope.md §5.3). */
  readonly hasBarrier: boolean;
}

/** What planning needs of the index catalog: its version and the indexes active in it. */
export interface PlanningCatalog {
  readonly version: number;
  readonly active: readonly IndexDefinition[];
}

export const noCatalog: PlanningCatalog = { version: 0, active: [] };

/** Operations whose cost follows the size of the graph, not of their input. */
const unboundedOps = new Set<string>(['nodes_where', 'edges_where', 'repeat', 'shortest_path',
  'vector_search_nodes', 'vector_search_edges', 'text_search_nodes', 'text_search_edges',
  'vector_search_nodes_within', 'vector_search_edges_within', 'text_search_nodes_within', 'text_search_edges_within']);

type Kind = 'node' | 'edge' | 'unknown';
interface StreamState { bound: boolean; kind: Kind }

const fail = (code: ErrorCode, detail: string): never => { throw planError(code, detail); };

function checkName(name: string, what: string): void {
  if (name === '') fail('invalid_empty_name', `${what} must not be empty`);
}

function checkRef(ref: ElementRef, what: string): void {
  if (ref.kind === 'ids') {
    const seen = new Set<bigint>();
    for (const id of ref.ids) {
      if (seen.has(id)) fail('duplicate_element_id', `duplicate element id ${id} in ${what}`);
      seen.add(id);
    }
  } else if (ref.kind === 'var' || ref.kind === 'param') {
    checkName(ref.name, `${what} ${ref.kind} name`);
  }
}

function checkExpr(e: Expr): void {
  switch (e.kind) {
    case 'property': checkName(e.name, 'property name'); return;
    case 'param': checkName(e.name, 'parameter name'); return;
    case 'add': case 'sub': case 'mul': case 'div': case 'mod': checkExpr(e.left); checkExpr(e.right); return;
    case 'neg': checkExpr(e.expr); return;
    case 'case':
      for (const b of e.when_then) { checkPredicate(b.when); checkExpr(b.then); }
      if (e.else_expr) checkExpr(e.else_expr);
      return;
    default: return;
  }
}

function checkPredicate(p: Predicate): void {
  switch (p.kind) {
    case 'and': case 'or':
      if (p.predicates.length === 0) fail('invalid_predicate_arity', `${p.kind} requires at least one predicate`);
      p.predicates.forEach(checkPredicate);
      return;
    case 'not': checkPredicate(p.predicate); return;
    case 'has_key': case 'is_null': case 'is_not_null': checkName(p.property, 'property name'); return;
    case 'between': checkExpr(p.value); checkExpr(p.min); checkExpr(p.max); return;
    case 'starts_with': checkExpr(p.value); checkExpr(p.prefix); return;
    case 'ends_with': checkExpr(p.value); checkExpr(p.suffix); return;
    case 'contains': checkExpr(p.value); checkExpr(p.substring); return;
    case 'is_in': checkExpr(p.value); checkExpr(p.values); return;
    default: checkExpr(p.left); checkExpr(p.right); return;
  }
}

/** The planning-time checks of a search (indexes.md §7.2), in the protocol's order. */
function checkSearch(op: SearchOp, catalog: PlanningCatalog): void {
  checkName(op.label, 'search label');
  checkName(op.property, 'search property');
  const lane = op.op.startsWith('vector') ? 'vector' : 'text';
  const element = op.op.includes('nodes') ? 'node' : 'edge';
  const index = catalog.active.find((d) => d.lane === lane && d.element === element && d.label === op.label && d.property === op.property);
  if (index === undefined) fail('index_not_found', `missing ${element === 'node' ? 'Node' : 'Edge'} ${lane} index for \`${op.label}.${op.property}\``);
  const literal = (input: ValueInput): { value: Value } | null =>
    input.kind === 'value' ? { value: input.value } : input.expr.kind === 'constant' ? { value: input.expr.value } : null;
  if (op.tenant_value !== null) {
    if (index!.tenantProperty === null) fail('invalid_search_tenant', `${describeIndex(index!)} is not partitioned by tenant, but the search gives a tenant value`);
    if (literal(op.tenant_value)?.value === null) fail('invalid_search_tenant_value', `the tenant value of a search on ${describeIndex(index!)} must not be null`);
  }
  const query = literal(op.query);
  if (query !== null) {
    const ok = lane === 'vector' ? acceptableLiteralVector(query.value) : typeof query.value === 'string' && query.value !== '';
    if (!ok) fail('invalid_search_input', lane === 'vector' ? 'a literal query vector must be a non-empty f32_array of finite numbers' : 'a literal query text must be a non-empty string');
  }
  if (op.k.kind === 'literal') {
    if (op.k.value === 0n) fail('invalid_search_result_count', 'k must be at least 1');
  } else if (op.k.expr.kind === 'constant') {
    const k = op.k.expr.value;
    if (k === 0n) fail('invalid_search_result_count', 'k must be at least 1');
    if (typeof k !== 'bigint' || k < 0n) fail('invalid_search_result_count_expression', `k must be a positive i64, got ${typeof k === 'bigint' ? String(k) : tagOf(k)}`);
  }
  checkExpr(op.query.kind === 'expr' ? op.query.expr : { kind: 'constant', value: null });
  if (op.tenant_value?.kind === 'expr') checkExpr(op.tenant_value.expr);
  if (op.k.kind === 'expr') checkExpr(op.k.expr);
}

/** Literal value of a stream bound, after folding `{"expr": {"constant": i64 >= 0}}`. */
export function literalBound(b: StreamBound): bigint | null {
  if (b.kind === 'literal') return b.value;
  if (b.expr.kind === 'constant' && typeof b.expr.value === 'bigint' && b.expr.value >= 0n) return b.expr.value;
  return null;
}

function checkBound(b: StreamBound, what: string): void {
  if (b.kind === 'expr') {
    if (b.expr.kind === 'constant' && (typeof b.expr.value !== 'bigint' || b.expr.value < 0n)) {
      fail('invalid_stream_bound_expression', `${what} must be a non-negative i64, got ${tagOf(b.expr.value)}`);
    }
    checkExpr(b.expr);
  }
}

function checkDistinct(names: readonly string[], code: ErrorCode, what: string): void {
  const seen = new Set<string>();
  for (const n of names) {
    if (seen.has(n)) fail(code, `duplicate ${what} \`${n}\``);
    seen.add(n);
  }
}

const sourceOps = new Set<string>(['nodes', 'nodes_where', 'edges', 'edges_where', 'vector_search_nodes', 'vector_search_edges',
  'text_search_nodes', 'text_search_edges', 'shortest_path', 'create_index', 'drop_index', 'get_index_operation',
  'retry_index_operation', 'abort_index_operation']);
const rootOnlyOps = new Set<string>(['shortest_path', 'create_index', 'drop_index', 'get_index_operation',
  'retry_index_operation', 'abort_index_operation']);
const afterBindForbidden = new Set<string>(['choose', 'order_by', 'order_by_multiple', 'repeat', 'id', 'label', 'values',
  'value_map', 'project', 'edge_properties']);
const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

class Checker {
  trackPath = false;
  /** An operation without a static cost bound was seen (Plan.inlineSafe). */
  unbounded = false;
  constructor(private readonly write: boolean, private readonly catalog: PlanningCatalog) {}

  /** The chain from the innermost operation (source or context) to `root`. */
  private chain(root: Op): Op[] {
    const ops: Op[] = [];
    for (let op: Op | null = root; op !== null; op = 'input' in op ? op.input : null) ops.push(op);
    return ops.reverse();
  }

  /** Check a whole chain; `context` is the parent's state inside a sub-traversal, null at entry level. */
  walk(root: Op, context: StreamState | null): StreamState {
    const ops = this.chain(root);
    let state: StreamState = { bound: false, kind: 'unknown' };
    ops.forEach((op, index) => {
      const isRoot = index === ops.length - 1 && context === null;
      state = this.step(op, state, context, isRoot);
    });
    return state;
  }

  private sub(body: SubTraversal, input: StreamState): StreamState {
    return this.walk(body.root, input);
  }

  private step(op: Op, input: StreamState, context: StreamState | null, isRoot: boolean): StreamState {
    const inSub = context !== null;
    const isSource = sourceOps.has(op.op) || (('input' in op) && op.input === null);
    if (op.op === 'context') {
      if (!inSub) fail('unbound_context', '`context` is only valid inside a sub-traversal');
      return context!;
    }
    if (inSub && (isSource || op.op === 'project_bindings')) {
      fail('invalid_sub_traversal_operation', `\`${op.op}\` cannot be used inside a sub-traversal`);
    }
    if (rootOnlyOps.has(op.op) && !isRoot) fail('internal_planner_error', `\`${op.op}\` must be the root of its entry`);
    if (this.write && (op.op === 'bind' || op.op === 'project_bindings')) {
      fail('read_only_traversal_in_write_batch', `\`${op.op}\` is not allowed in a write batch`);
    }
    if (input.bound && afterBindForbidden.has(op.op)) fail('invalid_after_bind_operation', `\`${op.op}\` is not allowed after bind`);
    if (input.bound && (op.op === 'edge_has' || op.op === 'edge_has_label') && input.kind !== 'edge') {
      fail('invalid_after_bind_operation', `\`${op.op}\` after bind needs rows known to be edges`);
    }
    const keep = input;
    // A nodes_where / edges_where may still be bounded: when an index answers it (decided below).
    if (unboundedOps.has(op.op) && op.op !== 'nodes_where' && op.op !== 'edges_where') this.unbounded = true;
    if ((op.op === 'nodes' || op.op === 'edges') && op.reference.kind === 'all') this.unbounded = true;
    switch (op.op) {
      case 'nodes': checkRef(op.reference, 'nodes reference'); return { bound: false, kind: 'node' };
      case 'edges': checkRef(op.reference, 'edges reference'); return { bound: false, kind: 'edge' };
      case 'nodes_where': checkPredicate(op.predicate); return { bound: false, kind: 'node' };
      case 'edges_where': checkPredicate(op.predicate); return { bound: false, kind: 'edge' };
      case 'vector_search_nodes': case 'text_search_nodes': case 'vector_search_edges': case 'text_search_edges':
      case 'vector_search_nodes_within': case 'text_search_nodes_within': case 'vector_search_edges_within': case 'text_search_edges_within':
        checkSearch(op, this.catalog);
        return { bound: false, kind: op.op.includes('nodes') ? 'node' : 'edge' };
      case 'shortest_path':
        checkRef(op.source, 'shortest_path source');
        checkRef(op.target, 'shortest_path target');
        if (op.label !== null) checkName(op.label, 'shortest_path label');
        if (op.max_depth === 0n) fail('invalid_shortest_path_count', 'shortest_path max_depth must be positive');
        return { bound: false, kind: 'unknown' };
      case 'out': case 'in': case 'both':
        if (op.label !== null) checkName(op.label, 'navigation label');
        // `both` from an edge row needs the node it came from (operations.md §4.3); from
        // node rows it needs nothing, and tracking paths costs an object per row.
        if (op.op === 'both' && keep.kind !== 'node') this.trackPath = true;
        return { bound: keep.bound, kind: 'node' };
      case 'out_e': case 'in_e': case 'both_e':
        if (op.label !== null) checkName(op.label, 'navigation label');
        return { bound: keep.bound, kind: 'edge' };
      case 'out_n': case 'in_n': return { bound: keep.bound, kind: 'node' };
      case 'other_n': this.trackPath = true; return { bound: keep.bound, kind: 'node' };
      case 'has': checkName(op.property, 'property name'); return keep;
      // operations.md §15.1 names labels of navigation, mutations, searches and indexes; a
      // label filter with "" is legal and simply matches nothing.
      case 'has_label': case 'edge_has_label': return keep;
      case 'has_key': checkName(op.property, 'property name'); return keep;
      case 'where': checkPredicate(op.predicate); return keep;
      case 'edge_has':
        checkName(op.property, 'property name');
        if (op.value.kind === 'expr') checkExpr(op.value.expr);
        return keep;
      case 'within': case 'without': checkName(op.variable, 'variable name'); return keep;
      case 'dedup': return keep;
      case 'limit': case 'skip': checkBound(op.count, `${op.op} count`); return keep;
      case 'range': {
        checkBound(op.start, 'range start');
        checkBound(op.end, 'range end');
        const s = literalBound(op.start), e = literalBound(op.end);
        if (s !== null && e !== null && s > e) fail('invalid_stream_range', `range start ${s} is greater than end ${e}`);
        return keep;
      }
      case 'as': case 'store': case 'select': checkName(op.name, 'variable name'); return keep;
      case 'bind': checkName(op.name, 'binding name'); return { bound: true, kind: keep.kind };
      case 'inject': checkName(op.variable, 'variable name'); return op.input === null ? { bound: false, kind: 'unknown' } : keep;
      case 'order_by': checkName(op.property, 'order property'); return keep;
      case 'order_by_multiple':
        if (op.orderings.length === 0) fail('invalid_order_keys', 'order_by_multiple requires at least one key');
        op.orderings.forEach(([p]) => checkName(p, 'order property'));
        checkDistinct(op.orderings.map(([p]) => p), 'duplicate_order_key', 'order key');
        return keep;
      case 'union': case 'coalesce': {
        const min = op.op === 'union' ? 2 : 1;
        if (op.traversals.length < min) {
          fail('invalid_branch_arity', `${op.op} branch requires at least ${min} traversal(s), got ${op.traversals.length}`);
        }
        return this.merge(keep, op.traversals.map((t) => this.sub(t, keep)));
      }
      case 'optional': return this.merge(keep, [this.sub(op.traversal, keep)]);
      case 'choose': {
        checkPredicate(op.condition);
        const then = this.sub(op.then_traversal, keep);
        const other = op.else_traversal ? this.sub(op.else_traversal, keep) : keep;
        return { bound: then.bound || other.bound, kind: then.kind === other.kind ? then.kind : 'unknown' };
      }
      case 'repeat': {
        const c = op.config;
        if (c.times === 0n || c.max_depth === 0n) fail('invalid_repeat_count', 'repeat times and max_depth must be positive');
        if (c.emit_predicate !== null && c.emit !== 'after') fail('invalid_repeat_emit', 'emit_predicate requires emit "after"');
        if (c.until) checkPredicate(c.until);
        if (c.emit_predicate) checkPredicate(c.emit_predicate);
        const body = this.sub(c.traversal, keep);
        // The stream's kind is the body's (as §15.3's check reads it), but rows of the input
        // can leave unchanged (emit "before", an `until` met at once): edges from a repeat
        // whose body yields nodes reach a later `both` with their path needed (other_n).
        if (keep.kind !== 'node' && body.kind === 'node') this.trackPath = true;
        return { bound: keep.bound || body.bound, kind: body.kind };
      }
      case 'fold': case 'unfold': case 'sack_get': return keep;
      case 'path': case 'simple_path': this.trackPath = true; return keep;
      case 'with_sack': return keep;
      case 'sack_set': case 'sack_add': checkName(op.property, 'property name'); return keep;
      case 'count': case 'exists': case 'id': case 'label': case 'edge_properties': return keep;
      case 'values':
        if (op.properties.length === 0) fail('invalid_projection_arity', 'values requires at least one property');
        op.properties.forEach((p) => checkName(p, 'property name'));
        checkDistinct(op.properties, 'duplicate_property_selection', 'property selection');
        return keep;
      case 'value_map':
        if (op.properties !== null) {
          op.properties.forEach((p) => checkName(p, 'property name'));
          checkDistinct(op.properties, 'duplicate_property_selection', 'property selection');
        }
        return keep;
      case 'project':
        if (op.projections.length === 0) fail('invalid_projection_arity', 'project requires at least one projection');
        for (const p of op.projections) {
          checkName(p.alias, 'projection alias');
          if (p.kind === 'property') checkName(p.source, 'projection source'); else checkExpr(p.expr);
        }
        checkDistinct(op.projections.map((p) => p.alias), 'duplicate_projection_alias', 'projection alias');
        return keep;
      case 'project_bindings':
        if (op.projections.length === 0) fail('invalid_projection_arity', 'project_bindings requires at least one projection');
        for (const p of op.projections) {
          checkName(p.alias, 'projection alias');
          if (p.kind === 'coalesce') {
            if (p.refs.length === 0) fail('invalid_projection_arity', 'coalesce requires at least one reference');
            for (const r of p.refs) {
              checkName(r.source, 'projection source');
              if (r.target.kind === 'binding') checkName(r.target.name, 'binding name');
            }
          } else {
            checkName(p.source, 'projection source');
            if (p.target.kind === 'binding') checkName(p.target.name, 'binding name');
          }
        }
        checkDistinct(op.projections.map((p) => p.alias), 'duplicate_projection_alias', 'projection alias');
        return keep;
      case 'group': case 'group_count': case 'aggregate_by': checkName(op.property, 'property name'); return keep;
      case 'add_n': case 'add_e':
        checkName(op.label, 'label');
        for (const [name, value] of op.properties) {
          checkName(name, 'property name');
          if (value.kind === 'expr') checkExpr(value.expr);
        }
        checkDistinct(op.properties.map(([n]) => n), 'duplicate_property_assignment', 'property assignment');
        if (op.op === 'add_e') checkRef(op.to, 'add_e target');
        return { bound: keep.bound, kind: op.op === 'add_n' ? 'node' : 'edge' };
      case 'set_property':
        checkName(op.name, 'property name');
        if (op.value.kind === 'expr') checkExpr(op.value.expr);
        return keep;
      case 'remove_property': checkName(op.name, 'property name'); return keep;
      case 'drop': return keep;
      case 'drop_edge': checkRef(op.to, 'drop_edge target'); return keep;
      case 'drop_edge_labeled': checkName(op.label, 'label'); checkRef(op.to, 'drop_edge_labeled target'); return keep;
      case 'drop_edge_by_id':
        if (op.edges.kind === 'all') fail('unsupported_edge_all_target', '"all" is not a valid edge mutation target');
        checkRef(op.edges, 'drop_edge_by_id edges');
        return keep;
      case 'create_index': case 'drop_index': {
        const empty = emptyNameOf(op.spec.definition);
        if (empty !== null) fail('invalid_empty_name', `${empty} must not be empty`);
        return keep;
      }
      case 'get_index_operation': case 'retry_index_operation': case 'abort_index_operation':
        if (!uuidPattern.test(op.operation_id) || /^[0-]+$/.test(op.operation_id)) {
          fail('invalid_index_operation_id', `operation id \`${op.operation_id}\` is not a canonical lower-case non-nil UUID`);
        }
        return keep;
    }
  }

  private merge(input: StreamState, branches: StreamState[]): StreamState {
    let kind = input.kind;
    let bound = input.bound;
    for (const b of branches) {
      if (b.kind !== kind) kind = 'unknown';
      bound = bound || b.bound;
    }
    return { bound, kind };
  }
}

// ---------------------------------------------------------------- shape class (envelope.md §9)

const scalarRoots = new Set<string>(['count', 'exists', 'create_index', 'drop_index', 'get_index_operation',
  'retry_index_operation', 'abort_index_operation']);
const listRoots = new Set<string>(['add_n', 'add_e', 'set_property', 'remove_property', 'drop', 'drop_edge',
  'drop_edge_labeled', 'drop_edge_by_id', 'group', 'group_count', 'aggregate_by', 'fold', 'shortest_path']);
const sameAsInput = new Set<string>(['has', 'has_label', 'has_key', 'where', 'dedup', 'within', 'without', 'edge_has',
  'edge_has_label', 'skip', 'as', 'store', 'bind', 'id', 'label', 'values', 'value_map', 'project', 'project_bindings',
  'edge_properties', 'order_by', 'order_by_multiple', 'path', 'simple_path', 'with_sack', 'sack_set', 'sack_add', 'sack_get']);

const literalOf = (b: StreamBound): bigint | null => (b.kind === 'literal' ? b.value : null);

/** Whether `op` yields at most one row (envelope.md §9.2). */
function isAtMostOne(root: Op): boolean {
  // Walk down to the first operation that decides, without recursion.
  for (let op: Op = root; ;) {
    switch (op.op) {
      case 'nodes': case 'edges': return op.reference.kind === 'ids' && op.reference.ids.length <= 1;
      case 'vector_search_nodes': case 'vector_search_edges': case 'text_search_nodes': case 'text_search_edges': {
        const k = literalOf(op.k);
        return k !== null && k <= 1n;
      }
      case 'vector_search_nodes_within': case 'vector_search_edges_within': case 'text_search_nodes_within': case 'text_search_edges_within': {
        const k = literalOf(op.k);
        if (k !== null && k <= 1n) return true;
        op = op.input;
        continue;
      }
      case 'limit': {
        const n = literalOf(op.count);
        if (n !== null && n <= 1n) return true;
        op = op.input;
        continue;
      }
      case 'range': {
        const s = literalOf(op.start), e = literalOf(op.end);
        if (s !== null && e !== null && e - s <= 1n) return true;
        op = op.input;
        continue;
      }
      case 'count': case 'exists': case 'create_index': case 'drop_index': case 'get_index_operation':
      case 'retry_index_operation': case 'abort_index_operation':
        return true;
      case 'context': return false;
      default:
        if (sameAsInput.has(op.op) && 'input' in op && op.input !== null) {
          op = op.input;
          continue;
        }
        return false;
    }
  }
}

export function shapeClass(root: Op): ShapeClass {
  if (scalarRoots.has(root.op)) return 'scalar';
  if (listRoots.has(root.op)) return 'list';
  return isAtMostOne(root) ? 'object' : 'list';
}

// ---------------------------------------------------------------- batch

function queryEntryNames(entries: Entry[], into: Set<string>): void {
  for (const e of entries) {
    if (e.kind === 'query') { if (e.name !== null) into.add(e.name); } else queryEntryNames(e.body, into);
  }
}

function checkEntries(entries: Entry[], checker: Checker, classOf: Map<Op, ShapeClass>, what: string): void {
  if (entries.length === 0) fail('invalid_batch_arity', `${what} requires at least one entry`);
  entries.forEach((entry, i) => {
    if (entry.kind === 'for_each') {
      checkName(entry.param, 'for_each parameter');
      checkEntries(entry.body, checker, classOf, 'for_each body');
      return;
    }
    if (entry.name !== null) checkName(entry.name, 'entry name');
    const c = entry.condition;
    if (c !== null) {
      if (c.kind === 'prev_not_empty') {
        if (i === 0) fail('invalid_initial_batch_condition', `prev_not_empty cannot gate the first entry of a ${what}`);
      } else {
        checkName(c.name, 'condition variable');
        if (c.kind === 'var_min_size' && c.size === 0) fail('invalid_batch_condition_min_size', 'var_min_size must be at least 1');
      }
    }
    checker.walk(entry.root, null);
    classOf.set(entry.root, shapeClass(entry.root));
  });
}

const indexOps = new Set<string>(['create_index', 'drop_index', 'get_index_operation', 'retry_index_operation', 'abort_index_operation']);

/**
 * Every operation object under `node` (sub-traversals and for_each bodies included), in
 * document order, with its parent operation.
 */
export function eachOp(node: unknown, parent: Op | null, visit: (op: Op, parent: Op | null) => void): void {
  if (node === null || typeof node !== 'object') return;
  if (Array.isArray(node)) { for (const item of node) eachOp(item, parent, visit); return; }
  if (node instanceof Map || ArrayBuffer.isView(node)) return; // values, not operations
  const record = node as Record<string, unknown>;
  const isOp = typeof record['op'] === 'string';
  if (isOp) visit(node as Op, parent);
  for (const key in record) eachOp(record[key], isOp ? node as Op : parent, visit);
}

/** Access paths of the request's sources over the catalog's active indexes. */
function accessPathsOf(request: Request, catalog: PlanningCatalog): { paths: Map<Op, AccessPath>; barrier: boolean; sources: Op[] } {
  const paths = new Map<Op, AccessPath>();
  let barrier = false;
  const extra = new Map<Op, Predicate[]>();
  const sources: Op[] = [];
  eachOp(request.batch.entries, null, (op, parent) => {
    if (indexOps.has(op.op)) barrier = true;
    if (op.op !== 'nodes_where' && op.op !== 'edges_where') return;
    sources.push(op);
    const conjunct = parent !== null && 'input' in parent && parent.input === op ? filterConjunct(parent) : null;
    if (conjunct !== null && !predicateMayThrow(conjunct)) extra.set(op, [conjunct]);
  });
  if (catalog.active.length > 0) {
    for (const op of sources) {
      if (op.op !== 'nodes_where' && op.op !== 'edges_where') continue;
      // An index scan evaluates the predicate on candidates only: exact only if it cannot raise.
      if (predicateMayThrow(op.predicate)) continue;
      const path = chooseAccessPath(op.op === 'edges_where' ? 'edge' : 'node', op.predicate, extra.get(op) ?? [], catalog.active);
      if (path !== null) paths.set(op, path);
    }
  }
  return { paths, barrier, sources };
}

export function planRequest(request: Request, catalog: PlanningCatalog = noCatalog): Plan {
  const batch: Batch = request.batch;
  const checker = new Checker(request.request_type === 'write', catalog);
  const classOf = new Map<Op, ShapeClass>();
  checkEntries(batch.entries, checker, classOf, 'batch');
  for (const name of batch.returns) checkName(name, 'return variable');
  checkDistinct(batch.returns, 'duplicate_return_variable', 'return variable');
  const bound = new Set<string>();
  queryEntryNames(batch.entries, bound);
  for (const name of batch.returns) {
    if (!bound.has(name)) fail('internal_planner_error', `return variable \`${name}\` has no executable binding`);
  }
  const { paths, barrier, sources } = accessPathsOf(request, catalog);
  // A source answered from an index costs about its candidates, not the graph: inline-safe,
  // with the inline work cap still bounding it (an index that stops serving makes it scan,
  // which outgrows the cap and moves the request to the pool).
  const inlineSafe = request.request_type === 'read' && !checker.unbounded && sources.every((op) => paths.has(op));
  return {
    request, classOf, trackPath: checker.trackPath, inlineSafe, accessPaths: paths, catalogVersion: catalog.version,
    hasBarrier: barrier && request.request_type === 'write',
  };
}
