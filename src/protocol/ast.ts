// The request AST. Types mirror the wire format of ../shared/protocol exactly:
// every externally tagged enum is a discriminated union on `op` / `kind`, and every
// struct keeps the wire field names. Optional wire fields are `| null` here
// (absent and null mean the same on the wire).
import type { Value } from './value.js';

// ---------------------------------------------------------------- envelope

export type RequestType = 'read' | 'write';

export interface Request {
  request_type: RequestType;
  query_name: string | null;
  batch: Batch;
  /** Runtime parameter values (envelope.md §3), already normalized. */
  parameters: Map<string, Value>;
  /** Whether parameter_types was present (typed mode). */
  typed: boolean;
}

export interface Batch {
  entries: Entry[];
  returns: string[];
}

export type Entry =
  | { kind: 'query'; name: string | null; root: Op; condition: Condition | null }
  | { kind: 'for_each'; param: string; body: Entry[] };

export type Condition =
  | { kind: 'var_not_empty'; name: string }
  | { kind: 'var_empty'; name: string }
  | { kind: 'var_min_size'; name: string; size: number }
  | { kind: 'prev_not_empty' };

// ---------------------------------------------------------------- building blocks

/** Element IDs are u64; bigint keeps them exact. */
export type ElementRef =
  | { kind: 'all' }
  | { kind: 'ids'; ids: bigint[] }
  | { kind: 'var'; name: string }
  | { kind: 'param'; name: string };

export type StreamBound =
  | { kind: 'literal'; value: bigint }
  | { kind: 'expr'; expr: Expr };

export type CompareOp = 'eq' | 'neq' | 'gt' | 'gte' | 'lt' | 'lte';
export type Order = 'asc' | 'desc';
export type Direction = 'out' | 'in' | 'both';
export type EmitMode = 'none' | 'before' | 'after' | 'all';
export type AggregateFunction = 'count' | 'sum' | 'min' | 'max' | 'mean';

export type Expr =
  | { kind: 'property'; name: string }
  | { kind: 'id' }
  | { kind: 'timestamp' }
  | { kind: 'date_time_now' }
  | { kind: 'constant'; value: Value }
  | { kind: 'param'; name: string }
  | { kind: 'add' | 'sub' | 'mul' | 'div' | 'mod'; left: Expr; right: Expr }
  | { kind: 'neg'; expr: Expr }
  | { kind: 'case'; when_then: { when: Predicate; then: Expr }[]; else_expr: Expr | null };

export type Predicate =
  | { kind: CompareOp; left: Expr; right: Expr }
  | { kind: 'between'; value: Expr; min: Expr; max: Expr }
  | { kind: 'has_key' | 'is_null' | 'is_not_null'; property: string }
  | { kind: 'starts_with'; value: Expr; prefix: Expr }
  | { kind: 'ends_with'; value: Expr; suffix: Expr }
  | { kind: 'contains'; value: Expr; substring: Expr }
  | { kind: 'is_in'; value: Expr; values: Expr }
  | { kind: 'and' | 'or'; predicates: Predicate[] }
  | { kind: 'not'; predicate: Predicate }
  | { kind: 'compare'; left: Expr; op: CompareOp; right: Expr };

/** A literal-or-expression input (values.md §4). */
export type ValueInput =
  | { kind: 'value'; value: Value }
  | { kind: 'expr'; expr: Expr };

export type PropertyAssignment = [name: string, input: ValueInput];

export type Projection =
  | { kind: 'property'; source: string; alias: string }
  | { kind: 'expr'; alias: string; expr: Expr };

export type BindingTarget = { kind: 'current' } | { kind: 'binding'; name: string };
export interface BindingValueRef { target: BindingTarget; source: string }
export type BindingProjection =
  | { kind: 'property'; target: BindingTarget; source: string; alias: string }
  | { kind: 'coalesce'; refs: BindingValueRef[]; alias: string };

export interface SubTraversal { root: Op }

export interface RepeatConfig {
  traversal: SubTraversal;
  times: bigint | null;
  until: Predicate | null;
  emit: EmitMode;
  emit_predicate: Predicate | null;
  max_depth: bigint;
}

// ---------------------------------------------------------------- index specs (indexes.md)

/** Index specs are kept as decoded wire objects until the index issue types them. */
/** An IndexSpec as sent (`kind` is the variant tag) and the definition it asks for. */
import type { IndexDefinition } from './index-spec.js';

export type IndexSpec = { kind: string; fields: Map<string, unknown>; definition: IndexDefinition };

// ---------------------------------------------------------------- operations

export type Op =
  // sources
  | { op: 'context' }
  | { op: 'nodes'; reference: ElementRef }
  | { op: 'nodes_where'; predicate: Predicate }
  | { op: 'edges'; reference: ElementRef }
  | { op: 'edges_where'; predicate: Predicate }
  | SearchOp
  | { op: 'shortest_path'; source: ElementRef; target: ElementRef; label: string | null; direction: Direction; max_depth: bigint }
  // navigation
  | { op: 'out' | 'in' | 'both' | 'out_e' | 'in_e' | 'both_e'; input: Op; label: string | null }
  | { op: 'out_n' | 'in_n' | 'other_n'; input: Op }
  // filters
  | { op: 'has'; input: Op; property: string; value: Value }
  | { op: 'has_label'; input: Op; label: string }
  | { op: 'has_key'; input: Op; property: string }
  | { op: 'where'; input: Op; predicate: Predicate }
  | { op: 'dedup'; input: Op }
  | { op: 'within' | 'without'; input: Op; variable: string }
  | { op: 'edge_has'; input: Op; property: string; value: ValueInput }
  | { op: 'edge_has_label'; input: Op; label: string }
  // windows
  | { op: 'limit'; input: Op; count: StreamBound }
  | { op: 'skip'; input: Op; count: StreamBound }
  | { op: 'range'; input: Op; start: StreamBound; end: StreamBound }
  // variables
  | { op: 'as' | 'store'; input: Op; name: string }
  | { op: 'select'; input: Op; name: string }
  | { op: 'bind'; input: Op; name: string }
  | { op: 'inject'; input: Op | null; variable: string }
  // ordering
  | { op: 'order_by'; input: Op; property: string; order: Order }
  | { op: 'order_by_multiple'; input: Op; orderings: [string, Order][] }
  // branching
  | { op: 'repeat'; input: Op; config: RepeatConfig }
  | { op: 'union'; input: Op; traversals: SubTraversal[] }
  | { op: 'choose'; input: Op; condition: Predicate; then_traversal: SubTraversal; else_traversal: SubTraversal | null }
  | { op: 'coalesce'; input: Op; traversals: SubTraversal[] }
  | { op: 'optional'; input: Op; traversal: SubTraversal }
  // fold, path, sack
  | { op: 'fold' | 'unfold' | 'path' | 'simple_path' | 'sack_get'; input: Op }
  | { op: 'with_sack'; input: Op; initial: Value }
  | { op: 'sack_set' | 'sack_add'; input: Op; property: string }
  // terminals
  | { op: 'count' | 'exists' | 'id' | 'label' | 'edge_properties'; input: Op }
  | { op: 'values'; input: Op; properties: string[] }
  | { op: 'value_map'; input: Op; properties: string[] | null }
  | { op: 'project'; input: Op; projections: Projection[] }
  | { op: 'project_bindings'; input: Op; distinct: boolean; projections: BindingProjection[] }
  | { op: 'group' | 'group_count'; input: Op; property: string }
  | { op: 'aggregate_by'; input: Op; function: AggregateFunction; property: string }
  // mutations
  | { op: 'add_n'; input: Op | null; label: string; properties: PropertyAssignment[] }
  | { op: 'add_e'; input: Op; label: string; to: ElementRef; properties: PropertyAssignment[] }
  | { op: 'set_property'; input: Op; name: string; value: ValueInput }
  | { op: 'remove_property'; input: Op; name: string }
  | { op: 'drop'; input: Op }
  | { op: 'drop_edge'; input: Op; to: ElementRef }
  | { op: 'drop_edge_labeled'; input: Op; to: ElementRef; label: string }
  | { op: 'drop_edge_by_id'; input: Op | null; edges: ElementRef }
  // index operations
  | { op: 'create_index'; spec: IndexSpec; if_not_exists: boolean }
  | { op: 'drop_index'; spec: IndexSpec }
  | { op: 'get_index_operation' | 'retry_index_operation' | 'abort_index_operation'; operation_id: string };

export type SearchOp =
  | {
      op: 'vector_search_nodes' | 'vector_search_edges' | 'text_search_nodes' | 'text_search_edges';
      input: null; label: string; property: string; tenant_value: ValueInput | null;
      query: ValueInput; k: StreamBound;
    }
  | {
      op: 'vector_search_nodes_within' | 'vector_search_edges_within' | 'text_search_nodes_within' | 'text_search_edges_within';
      input: Op; label: string; property: string; tenant_value: ValueInput | null;
      query: ValueInput; k: StreamBound;
    };

export type OpName = Op['op'];

/** Operations that change the graph or its indexes (envelope.md §5.1). */
export const mutatingOps: ReadonlySet<OpName> = new Set<OpName>([
  'create_index', 'drop_index', 'retry_index_operation', 'abort_index_operation', 'add_n', 'add_e',
  'set_property', 'remove_property', 'drop', 'drop_edge', 'drop_edge_labeled', 'drop_edge_by_id',
]);

/** The `input` of an op, if it has one. */
export function inputOf(op: Op): Op | null {
  return 'input' in op ? op.input : null;
}

/** The sub-traversal bodies directly under an op (branches, repeat body). */
export function bodiesOf(op: Op): SubTraversal[] {
  switch (op.op) {
    case 'union': case 'coalesce': return op.traversals;
    case 'optional': return [op.traversal];
    case 'choose': return op.else_traversal ? [op.then_traversal, op.else_traversal] : [op.then_traversal];
    case 'repeat': return [op.config.traversal];
    default: return [];
  }
}
