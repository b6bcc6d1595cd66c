// The traversal builder: one method per operation of operations.md, named after the
// operation in camelCase. Each call wraps the tree built so far as the new step's `input`,
// so the last call is the outermost object, exactly like the wire format:
//
//   g().nWithLabel('User').out('FOLLOWS').count()
//   → {"count": {"input": {"out": {"input": {"nodes_where": …}, "label": "FOLLOWS"}}}}
//
// Builders are immutable: every call returns a new Traversal and the previous one can be
// reused. Optional wire fields are omitted when not given (that is how the official client
// writes them); fields the protocol requires are always written, with the official
// client's defaults (`emit: "none"` and `max_depth: 100` for repeat, …).

import { defineMember, writeJson, type WireJson, type WireObject } from './json.js';
import { QueryBuildError } from './errors.js';
import { Expr, ParamExpr, Pred, operandJson } from './expr.js';
import { TaggedValue, describe, idToken, tag, type JsValue } from './values.js';

// ---------------------------------------------------------------------------------------
// Inputs shared by many operations

/** A literal-or-expression input (values.md §4): an `Expr` → `{"expr"}`, else `{"value"}`. */
export type ValueInput = JsValue | Expr;
/** Properties for `addN`/`addE`: an object (key order kept) or `[name, value]` pairs. */
export type PropertiesInput = { readonly [name: string]: ValueInput } | readonly (readonly [string, ValueInput])[];
/** A stream bound (operations.md §2.2): a non-negative integer literal, or an expression. */
export type Bound = number | bigint | Expr;
export type Order = 'asc' | 'desc';
export type Direction = 'out' | 'in' | 'both';
export type EmitMode = 'none' | 'before' | 'after' | 'all';
export type AggregateFunction = 'count' | 'sum' | 'min' | 'max' | 'mean';

export function valueInput(v: ValueInput): WireJson {
  return v instanceof Expr ? { expr: v.json } : { value: tag(v) };
}

function propertiesJson(props: PropertiesInput | undefined): WireJson {
  if (props === undefined) return [];
  const pairs: readonly (readonly [string, ValueInput])[] = Array.isArray(props)
    ? (props as readonly (readonly [string, ValueInput])[])
    : Object.keys(props).map((k) => [k, (props as { readonly [name: string]: ValueInput })[k]!] as const);
  return pairs.map(([name, v]) => [name, valueInput(v)]);
}

function boundJson(b: Bound): WireJson {
  if (b instanceof Expr) return { expr: b.json };
  if (typeof b === 'number' && (!Number.isInteger(b) || b < 0)) throw new QueryBuildError(`a stream bound must be a non-negative integer, got ${b}`);
  if (typeof b === 'bigint' && b < 0n) throw new QueryBuildError(`a stream bound must be non-negative, got ${b}`);
  return { literal: b };
}

/** A node or edge reference (operations.md §2.1), built explicitly. */
export class Ref {
  constructor(readonly json: WireJson) {}
}
export type IdInput = number | bigint;
/**
 * Where a reference is expected: an ID or ID list → `{"ids"}`, a string → `{"var"}` (a
 * variable bound by an earlier entry or `as`), `param('p')` → `{"param"}`, or a `ref.*`.
 */
export type RefInput = IdInput | readonly IdInput[] | string | ParamExpr | Ref;

export const ref = {
  all: (): Ref => new Ref('all'),
  ids: (...ids: IdInput[]): Ref => new Ref({ ids: ids.map(idToken) }),
  var: (name: string): Ref => new Ref({ var: name }),
  param: (name: string): Ref => new Ref({ param: name }),
} as const;

function refJson(r: RefInput): WireJson {
  if (r instanceof Ref) return r.json;
  if (r instanceof ParamExpr) return { param: r.name };
  if (typeof r === 'string') return { var: r };
  if (typeof r === 'number' || typeof r === 'bigint') return { ids: [idToken(r)] };
  if (Array.isArray(r)) return { ids: (r as readonly IdInput[]).map(idToken) };
  throw new QueryBuildError(`cannot use ${describe(r)} as a node/edge reference`);
}

/** Options of the search operations (indexes.md §7); `k` is a bound ≥ 1. */
interface SearchCommon {
  label: string;
  property: string;
  k: Bound;
  /** Partition value for a tenant-partitioned index. */
  tenant?: ValueInput;
}
export interface VectorSearch extends SearchCommon {
  /** A number list is written as an `f32_array` literal; a TaggedValue or Expr as given. */
  vector: readonly number[] | TaggedValue | Expr;
}
export interface TextSearch extends SearchCommon {
  text: string | TaggedValue | Expr;
}

function vectorSearchFields(s: VectorSearch): Fields {
  const vector: WireJson = s.vector instanceof Expr ? { expr: s.vector.json }
    : { value: s.vector instanceof TaggedValue ? s.vector.json : { f32_array: [...s.vector] } };
  return { label: s.label, property: s.property, tenant_value: optional(s.tenant, valueInput), query_vector: vector, k: boundJson(s.k) };
}

function textSearchFields(s: TextSearch): Fields {
  return { label: s.label, property: s.property, tenant_value: optional(s.tenant, valueInput), query_text: valueInput(s.text), k: boundJson(s.k) };
}

/** `project` items: alias → source property name, or alias → expression. */
export type ProjectionsInput = { readonly [alias: string]: string | Expr } | readonly (readonly [string, string | Expr])[];

function projectionsJson(p: ProjectionsInput): WireJson {
  return entriesOf(p).map(([alias, v]): WireJson =>
    typeof v === 'string' ? { property: { source: v, alias } } : { expr: { alias, expr: v.json } });
}

/** A `project_bindings` value reference: a property of the current element or of a binding. */
export class BindingRef {
  constructor(readonly json: WireJson) {}
}
export class BindingCoalesce {
  constructor(readonly refs: readonly BindingRef[]) {
    if (refs.length === 0) throw new QueryBuildError('B.coalesce() needs at least one reference');
  }
}
/** Binding projections (operations.md §2.5). */
export const B = {
  current: (source: string): BindingRef => new BindingRef({ target: 'current', source }),
  binding: (name: string, source: string): BindingRef => new BindingRef({ target: { binding: name }, source }),
  coalesce: (...refs: BindingRef[]): BindingCoalesce => new BindingCoalesce(refs),
} as const;
export type BindingProjectionsInput =
  | { readonly [alias: string]: BindingRef | BindingCoalesce }
  | readonly (readonly [string, BindingRef | BindingCoalesce])[];

function bindingProjectionsJson(p: BindingProjectionsInput): WireJson {
  return entriesOf(p).map(([alias, v]): WireJson => {
    if (v instanceof BindingCoalesce) return { coalesce: { refs: v.refs.map((r) => r.json), alias } };
    const { target, source } = v.json as { target: WireJson; source: WireJson };
    return { property: { target, source, alias } };
  });
}

/** Index definitions (indexes.md §2). */
export class IndexSpec {
  constructor(readonly json: WireJson) {}
}
export type VectorMetric = 'cosine' | 'euclidean' | 'manhattan';
const spec = (variant: string, fields: Fields): IndexSpec => new IndexSpec({ [variant]: compact(fields) });
export const Index = {
  nodeEquality: (label: string, property: string, o: { unique?: boolean } = {}): IndexSpec =>
    spec('node_equality', { label, property, unique: o.unique ?? false }),
  edgeEquality: (label: string, property: string): IndexSpec => spec('edge_equality', { label, property }),
  nodeRange: (label: string, property: string, o: { direction?: Order } = {}): IndexSpec =>
    spec('node_range', { label, property, direction: o.direction ?? 'asc' }),
  edgeRange: (label: string, property: string, o: { direction?: Order } = {}): IndexSpec =>
    spec('edge_range', { label, property, direction: o.direction ?? 'asc' }),
  nodeVector: (label: string, property: string, o: { dimension: number; metric: VectorMetric; tenantProperty?: string }): IndexSpec =>
    spec('node_vector', { label, property, dimension: o.dimension, metric: o.metric, tenant_property: o.tenantProperty }),
  edgeVector: (label: string, property: string, o: { dimension: number; metric: VectorMetric; tenantProperty?: string }): IndexSpec =>
    spec('edge_vector', { label, property, dimension: o.dimension, metric: o.metric, tenant_property: o.tenantProperty }),
  nodeText: (label: string, property: string, o: { tenantProperty?: string } = {}): IndexSpec =>
    spec('node_text', { label, property, tenant_property: o.tenantProperty }),
  edgeText: (label: string, property: string, o: { tenantProperty?: string } = {}): IndexSpec =>
    spec('edge_text', { label, property, tenant_property: o.tenantProperty }),
} as const;

/** Repeat configuration (operations.md §2.7); `emit` defaults to "none", `maxDepth` to 100. */
export interface RepeatOptions {
  times?: number;
  until?: Pred;
  emit?: EmitMode;
  emitPredicate?: Pred;
  maxDepth?: number;
}

export interface ShortestPathOptions {
  label?: string;
  /** Default "out". */
  direction?: Direction;
  /** Default 100. */
  maxDepth?: number;
}

// ---------------------------------------------------------------------------------------
// Small JSON helpers

type Fields = { readonly [key: string]: WireJson | undefined };

/** Fields without the undefined ones (optional wire fields are omitted, not null). */
function compact(fields: Fields): WireObject {
  const out: Record<string, WireJson> = {};
  for (const key of Object.keys(fields)) {
    const v = fields[key];
    if (v !== undefined) defineMember(out, key, v);
  }
  return out;
}

function optional<T>(v: T | undefined, f: (v: T) => WireJson): WireJson | undefined {
  return v === undefined ? undefined : f(v);
}

function entriesOf<V>(p: { readonly [key: string]: V } | readonly (readonly [string, V])[]): (readonly [string, V])[] {
  return Array.isArray(p) ? [...(p as readonly (readonly [string, V])[])] : Object.keys(p).map((k) => [k, (p as { readonly [key: string]: V })[k]!] as const);
}

// ---------------------------------------------------------------------------------------
// The traversal

/** A branch or repeat body: a traversal started with `__()`, or a function of the context. */
export type Body = Traversal | ((context: Traversal) => Traversal);

/** Operations that make an entry mutating (envelope.md §5.1). */
const mutatingOps: ReadonlySet<string> = new Set([
  'create_index', 'drop_index', 'retry_index_operation', 'abort_index_operation', 'add_n', 'add_e',
  'set_property', 'remove_property', 'drop', 'drop_edge', 'drop_edge_labeled', 'drop_edge_by_id',
]);
/** Row-binding operations, refused in write batches (operations.md §15.4). */
const rowBindingOps: ReadonlySet<string> = new Set(['bind', 'project_bindings']);

export class Traversal {
  /**
   * @param root the operation tree (wire JSON)
   * @param mutation the first mutating operation anywhere in the tree, or null
   * @param rowBinding the first `bind`/`project_bindings` anywhere in the tree, or null
   */
  private constructor(readonly root: WireJson, readonly mutation: string | null, readonly rowBinding: string | null) {}

  /** `"context"`: the rows handed to a branch or repeat body. Prefer `__()`. */
  static context(): Traversal {
    return new Traversal('context', null, null);
  }

  /** A source operation (no input). Used by `g()`. */
  static source(op: string, fields: Fields): Traversal {
    return Traversal.make(op, compact(fields), [], null);
  }

  /** Wraps raw wire JSON (an escape hatch; flags are not derived from it). */
  static raw(root: WireJson, flags: { mutation?: string; rowBinding?: string } = {}): Traversal {
    return new Traversal(root, flags.mutation ?? null, flags.rowBinding ?? null);
  }

  private static make(op: string, fields: WireObject, bodies: readonly Traversal[], input: Traversal | null): Traversal {
    const parts = input === null ? bodies : [input, ...bodies];
    const mutation = mutatingOps.has(op) ? op : parts.find((t) => t.mutation !== null)?.mutation ?? null;
    const rowBinding = rowBindingOps.has(op) ? op : parts.find((t) => t.rowBinding !== null)?.rowBinding ?? null;
    return new Traversal({ [op]: fields }, mutation, rowBinding);
  }

  /** The next step: `{op: {input: <this>, ...fields}}`. */
  private step(op: string, fields: Fields = {}, bodies: readonly Traversal[] = []): Traversal {
    return Traversal.make(op, compact({ input: this.root, ...fields }), bodies, this);
  }

  /** JSON text of the operation tree. */
  toString(): string {
    return writeJson(this.root);
  }

  // ---- Navigation (operations.md §4) ----
  out(label?: string): Traversal { return this.step('out', { label }); }
  in(label?: string): Traversal { return this.step('in', { label }); }
  both(label?: string): Traversal { return this.step('both', { label }); }
  outE(label?: string): Traversal { return this.step('out_e', { label }); }
  inE(label?: string): Traversal { return this.step('in_e', { label }); }
  bothE(label?: string): Traversal { return this.step('both_e', { label }); }
  outN(): Traversal { return this.step('out_n'); }
  inN(): Traversal { return this.step('in_n'); }
  otherN(): Traversal { return this.step('other_n'); }

  // ---- Filters (§5) ----
  has(property: string, value: JsValue): Traversal { return this.step('has', { property, value: tag(value) }); }
  hasLabel(label: string): Traversal { return this.step('has_label', { label }); }
  hasKey(property: string): Traversal { return this.step('has_key', { property }); }
  where(predicate: Pred): Traversal { return this.step('where', { predicate: predicate.json }); }
  dedup(): Traversal { return this.step('dedup'); }
  within(variable: string): Traversal { return this.step('within', { variable }); }
  without(variable: string): Traversal { return this.step('without', { variable }); }
  edgeHas(property: string, value: ValueInput): Traversal { return this.step('edge_has', { property, value: valueInput(value) }); }
  edgeHasLabel(label: string): Traversal { return this.step('edge_has_label', { label }); }

  // ---- Search inside the stream (§6) ----
  vectorSearchNodesWithin(s: VectorSearch): Traversal { return this.step('vector_search_nodes_within', vectorSearchFields(s)); }
  vectorSearchEdgesWithin(s: VectorSearch): Traversal { return this.step('vector_search_edges_within', vectorSearchFields(s)); }
  textSearchNodesWithin(s: TextSearch): Traversal { return this.step('text_search_nodes_within', textSearchFields(s)); }
  textSearchEdgesWithin(s: TextSearch): Traversal { return this.step('text_search_edges_within', textSearchFields(s)); }

  // ---- Windows (§7) ----
  limit(count: Bound): Traversal { return this.step('limit', { count: boundJson(count) }); }
  skip(count: Bound): Traversal { return this.step('skip', { count: boundJson(count) }); }
  range(start: Bound, end: Bound): Traversal { return this.step('range', { start: boundJson(start), end: boundJson(end) }); }

  // ---- Variables and row bindings (§8) ----
  as(name: string): Traversal { return this.step('as', { name }); }
  store(name: string): Traversal { return this.step('store', { name }); }
  select(name: string): Traversal { return this.step('select', { name }); }
  inject(variable: string): Traversal { return this.step('inject', { variable }); }
  bind(name: string): Traversal { return this.step('bind', { name }); }

  // ---- Ordering (§9) ----
  orderBy(property: string, order: Order = 'asc'): Traversal { return this.step('order_by', { property, order }); }
  orderByMultiple(orderings: readonly (readonly [string, Order])[]): Traversal {
    return this.step('order_by_multiple', { orderings: orderings.map(([p, o]) => [p, o]) });
  }

  // ---- Branching and repetition (§10) ----
  repeat(body: Body, o: RepeatOptions = {}): Traversal {
    const t = resolveBody(body);
    return this.step('repeat', {
      config: compact({
        traversal: { root: t.root },
        times: o.times,
        until: o.until?.json,
        emit: o.emit ?? 'none',
        emit_predicate: o.emitPredicate?.json,
        max_depth: o.maxDepth ?? 100,
      }),
    }, [t]);
  }
  union(...bodies: Body[]): Traversal { return this.branches('union', bodies); }
  coalesce(...bodies: Body[]): Traversal { return this.branches('coalesce', bodies); }
  choose(condition: Pred, then: Body, otherwise?: Body): Traversal {
    const t = resolveBody(then);
    const e = otherwise === undefined ? undefined : resolveBody(otherwise);
    return this.step('choose', {
      condition: condition.json,
      then_traversal: { root: t.root },
      else_traversal: e === undefined ? undefined : { root: e.root },
    }, e === undefined ? [t] : [t, e]);
  }
  optional(body: Body): Traversal {
    const t = resolveBody(body);
    return this.step('optional', { traversal: { root: t.root } }, [t]);
  }
  private branches(op: 'union' | 'coalesce', bodies: readonly Body[]): Traversal {
    const ts = bodies.map(resolveBody);
    return this.step(op, { traversals: ts.map((t) => ({ root: t.root })) }, ts);
  }

  // ---- Fold, path and sack (§11) ----
  fold(): Traversal { return this.step('fold'); }
  unfold(): Traversal { return this.step('unfold'); }
  path(): Traversal { return this.step('path'); }
  simplePath(): Traversal { return this.step('simple_path'); }
  withSack(initial: JsValue): Traversal { return this.step('with_sack', { initial: tag(initial) }); }
  sackSet(property: string): Traversal { return this.step('sack_set', { property }); }
  sackAdd(property: string): Traversal { return this.step('sack_add', { property }); }
  sackGet(): Traversal { return this.step('sack_get'); }

  // ---- Terminals (§12) ----
  count(): Traversal { return this.step('count'); }
  exists(): Traversal { return this.step('exists'); }
  id(): Traversal { return this.step('id'); }
  label(): Traversal { return this.step('label'); }
  values(properties: readonly string[]): Traversal { return this.step('values', { properties: [...properties] }); }
  /** Without a list: every stored property plus `$id`. */
  valueMap(properties?: readonly string[]): Traversal {
    return this.step('value_map', { properties: properties === undefined ? undefined : [...properties] });
  }
  project(projections: ProjectionsInput): Traversal { return this.step('project', { projections: projectionsJson(projections) }); }
  projectBindings(projections: BindingProjectionsInput, o: { distinct?: boolean } = {}): Traversal {
    return this.step('project_bindings', { projections: bindingProjectionsJson(projections), distinct: o.distinct ?? false });
  }
  edgeProperties(): Traversal { return this.step('edge_properties'); }
  group(property: string): Traversal { return this.step('group', { property }); }
  groupCount(property: string): Traversal { return this.step('group_count', { property }); }
  aggregateBy(fn: AggregateFunction, property: string): Traversal { return this.step('aggregate_by', { function: fn, property }); }

  // ---- Mutations (§13) ----
  /** One new node per input row. */
  addN(label: string, properties?: PropertiesInput): Traversal {
    return this.step('add_n', { label, properties: propertiesJson(properties) });
  }
  /** Edges from every input node to every node of `to` (a string names a variable). */
  addE(label: string, to: RefInput, properties?: PropertiesInput): Traversal {
    return this.step('add_e', { label, to: refJson(to), properties: propertiesJson(properties) });
  }
  setProperty(name: string, value: ValueInput): Traversal { return this.step('set_property', { name, value: valueInput(value) }); }
  removeProperty(name: string): Traversal { return this.step('remove_property', { name }); }
  drop(): Traversal { return this.step('drop'); }
  dropEdge(to: RefInput): Traversal { return this.step('drop_edge', { to: refJson(to) }); }
  dropEdgeLabeled(to: RefInput, label: string): Traversal { return this.step('drop_edge_labeled', { to: refJson(to), label }); }
  /** Deletes the edges of `edges` if the input yields any row. */
  dropEdgeById(edges: RefInput): Traversal { return this.step('drop_edge_by_id', { edges: refJson(edges) }); }
}

function resolveBody(body: Body): Traversal {
  const t = typeof body === 'function' ? body(Traversal.context()) : body;
  if (!(t instanceof Traversal)) throw new QueryBuildError(`a branch body must be a traversal started with __(), got ${describe(t)}`);
  return t;
}

/** The start of a sub-traversal: `__().out('KNOWS')` is `{"out": {"input": "context", …}}`. */
export function __(): Traversal {
  return Traversal.context();
}

// ---------------------------------------------------------------------------------------
// Sources (operations.md §3, §13 source forms, §14)

const labelIs = (label: string, extra?: Pred): WireJson => {
  const eq = { eq: { left: { property: '$label' }, right: operandJson(label) } };
  return extra === undefined ? eq : { and: { predicates: [eq, extra.json] } };
};

export class GraphSource {
  /** Nodes by reference; no argument means every node (`"all"`). */
  n(reference?: RefInput): Traversal { return Traversal.source('nodes', { reference: reference === undefined ? 'all' : refJson(reference) }); }
  /** Edges by reference; no argument means every edge. */
  e(reference?: RefInput): Traversal { return Traversal.source('edges', { reference: reference === undefined ? 'all' : refJson(reference) }); }
  /** The nodes held by a variable: `{"var": name}`. */
  nVar(name: string): Traversal { return Traversal.source('nodes', { reference: { var: name } }); }
  eVar(name: string): Traversal { return Traversal.source('edges', { reference: { var: name } }); }
  nWhere(predicate: Pred): Traversal { return Traversal.source('nodes_where', { predicate: predicate.json }); }
  eWhere(predicate: Pred): Traversal { return Traversal.source('edges_where', { predicate: predicate.json }); }
  /** `nodes_where` `$label` = label, and-ed with `predicate` when given. */
  nWithLabel(label: string, predicate?: Pred): Traversal { return Traversal.source('nodes_where', { predicate: labelIs(label, predicate) }); }
  eWithLabel(label: string, predicate?: Pred): Traversal { return Traversal.source('edges_where', { predicate: labelIs(label, predicate) }); }
  /** The value bound to a variable, unchanged. */
  inject(variable: string): Traversal { return Traversal.source('inject', { variable }); }

  vectorSearchNodes(s: VectorSearch): Traversal { return Traversal.source('vector_search_nodes', vectorSearchFields(s)); }
  vectorSearchEdges(s: VectorSearch): Traversal { return Traversal.source('vector_search_edges', vectorSearchFields(s)); }
  textSearchNodes(s: TextSearch): Traversal { return Traversal.source('text_search_nodes', textSearchFields(s)); }
  textSearchEdges(s: TextSearch): Traversal { return Traversal.source('text_search_edges', textSearchFields(s)); }

  /** Node IDs of one shortest path (must be the entry's root). */
  shortestPath(source: RefInput, target: RefInput, o: ShortestPathOptions = {}): Traversal {
    return Traversal.source('shortest_path', {
      source: refJson(source), target: refJson(target), label: o.label, direction: o.direction ?? 'out', max_depth: o.maxDepth ?? 100,
    });
  }

  /** Creates exactly one node. */
  addN(label: string, properties?: PropertiesInput): Traversal {
    return Traversal.source('add_n', { label, properties: propertiesJson(properties) });
  }
  dropEdgeById(edges: RefInput): Traversal { return Traversal.source('drop_edge_by_id', { edges: refJson(edges) }); }

  // ---- Index operations (§14; each must be an entry's root) ----
  /** `ifNotExists` defaults to true. */
  createIndex(spec: IndexSpec, o: { ifNotExists?: boolean } = {}): Traversal {
    return Traversal.source('create_index', { spec: spec.json, if_not_exists: o.ifNotExists ?? true });
  }
  dropIndex(spec: IndexSpec): Traversal { return Traversal.source('drop_index', { spec: spec.json }); }
  getIndexOperation(operationId: string): Traversal { return Traversal.source('get_index_operation', { operation_id: operationId }); }
  retryIndexOperation(operationId: string): Traversal { return Traversal.source('retry_index_operation', { operation_id: operationId }); }
  abortIndexOperation(operationId: string): Traversal { return Traversal.source('abort_index_operation', { operation_id: operationId }); }
}

const graph = new GraphSource();

/** The start of every entry's traversal: `g().nWithLabel('User')…`. */
export function g(): GraphSource {
  return graph;
}
