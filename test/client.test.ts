// The client DSL writes exactly the wire JSON of ../shared/protocol: one hand-written
// expectation per operation variant (all 80), predicate, expression, tagged value,
// reference, projection, repeat configuration, index spec, condition and parameter shape.
import { describe, expect, it } from 'vitest';
import {
  B, Cond, E, Index, P, QueryBuildError, Traversal, V, __, bytes, dateTime, defineParams, f32, f32Array, f64, f64Array, g, i64,
  i64Array, param, parseResponseJson, readBatch, ref, stringArray, writeBatch, writeJson,
} from '../src/client/index.js';

/** The JSON a traversal writes, parsed back (integers beyond 2^53 as bigint). */
const wire = (t: Traversal): unknown => parseResponseJson(t.toString());

const n5 = { nodes: { reference: { ids: [5] } } };
const src = (): Traversal => g().n([5]);
const eqLabel = (label: string) => ({ eq: { left: { property: '$label' }, right: { constant: { string: label } } } });
const outCtx = (label?: string) => ({ root: { out: label === undefined ? { input: 'context' } : { input: 'context', label } } });

/** [operation variant, DSL, expected tree]; every one of the 80 variants appears at least once. */
const operationCases: [string, Traversal, unknown][] = [
  // Sources (operations.md §3)
  ['context', __(), 'context'],
  ['nodes', g().n([8, 2]), { nodes: { reference: { ids: [8, 2] } } }],
  ['nodes', g().n(), { nodes: { reference: 'all' } }],
  ['nodes', g().nVar('staff'), { nodes: { reference: { var: 'staff' } } }],
  ['nodes', g().n('staff'), { nodes: { reference: { var: 'staff' } } }],
  ['nodes', g().n(param('ids')), { nodes: { reference: { param: 'ids' } } }],
  ['nodes', g().n(ref.ids(0, 18446744073709551615n)), { nodes: { reference: { ids: [0, 18446744073709551615n] } } }],
  ['nodes_where', g().nWhere(P.gte('age', 30)),
    { nodes_where: { predicate: { gte: { left: { property: 'age' }, right: { constant: { i64: 30 } } } } } }],
  ['nodes_where', g().nWithLabel('Person'), { nodes_where: { predicate: eqLabel('Person') } }],
  ['nodes_where', g().nWithLabel('Person', P.gte('age', 30)), {
    nodes_where: { predicate: { and: { predicates: [eqLabel('Person'), { gte: { left: { property: 'age' }, right: { constant: { i64: 30 } } } }] } } },
  }],
  ['edges', g().e(3), { edges: { reference: { ids: [3] } } }],
  ['edges', g().e(), { edges: { reference: 'all' } }],
  ['edges', g().eVar('hops'), { edges: { reference: { var: 'hops' } } }],
  ['edges_where', g().eWhere(P.label('RATED')), { edges_where: { predicate: eqLabel('RATED') } }],
  ['edges_where', g().eWithLabel('RATED'), { edges_where: { predicate: eqLabel('RATED') } }],
  ['vector_search_nodes', g().vectorSearchNodes({ label: 'Article', property: 'embedding', tenant: 'acme', vector: param('qv'), k: 5 }), {
    vector_search_nodes: {
      label: 'Article', property: 'embedding', tenant_value: { value: { string: 'acme' } },
      query_vector: { expr: { param: 'qv' } }, k: { literal: 5 },
    },
  }],
  ['vector_search_edges', g().vectorSearchEdges({ label: 'SIMILAR', property: 'vec', vector: [0.1, 0.2, 0.3], k: 3 }), {
    vector_search_edges: { label: 'SIMILAR', property: 'vec', query_vector: { value: { f32_array: [0.1, 0.2, 0.3] } }, k: { literal: 3 } },
  }],
  ['text_search_nodes', g().textSearchNodes({ label: 'Article', property: 'body', text: 'graph', k: 1 }), {
    text_search_nodes: { label: 'Article', property: 'body', query_text: { value: { string: 'graph' } }, k: { literal: 1 } },
  }],
  ['text_search_edges', g().textSearchEdges({ label: 'COMMENTED', property: 'body', text: 'late delivery', k: param('n') }), {
    text_search_edges: { label: 'COMMENTED', property: 'body', query_text: { value: { string: 'late delivery' } }, k: { expr: { param: 'n' } } },
  }],
  ['shortest_path', g().shortestPath(0, param('dest'), { label: 'ROAD', direction: 'both', maxDepth: 6 }), {
    shortest_path: { source: { ids: [0] }, target: { param: 'dest' }, label: 'ROAD', direction: 'both', max_depth: 6 },
  }],
  ['shortest_path', g().shortestPath('from', 'to'), {
    shortest_path: { source: { var: 'from' }, target: { var: 'to' }, direction: 'out', max_depth: 100 },
  }],
  ['inject', g().inject('shortlist'), { inject: { variable: 'shortlist' } }],
  ['inject', src().inject('extra'), { inject: { input: n5, variable: 'extra' } }],

  // Search inside a stream (§6)
  ['text_search_nodes_within', g().nVar('me').out('CAN_EDIT').textSearchNodesWithin({ label: 'Article', property: 'body', text: param('q'), k: 10 }), {
    text_search_nodes_within: {
      input: { out: { input: { nodes: { reference: { var: 'me' } } }, label: 'CAN_EDIT' } },
      label: 'Article', property: 'body', query_text: { expr: { param: 'q' } }, k: { literal: 10 },
    },
  }],
  ['vector_search_edges_within', g().e().vectorSearchEdgesWithin({ label: 'SIMILAR', property: 'vec', tenant: param('team'), vector: f32Array([0.1, 0.2, 0.3]), k: 3 }), {
    vector_search_edges_within: {
      input: { edges: { reference: 'all' } }, label: 'SIMILAR', property: 'vec', tenant_value: { expr: { param: 'team' } },
      query_vector: { value: { f32_array: [0.1, 0.2, 0.3] } }, k: { literal: 3 },
    },
  }],
  ['vector_search_nodes_within', src().vectorSearchNodesWithin({ label: 'A', property: 'v', vector: [1, 0], k: 2 }), {
    vector_search_nodes_within: { input: n5, label: 'A', property: 'v', query_vector: { value: { f32_array: [1, 0] } }, k: { literal: 2 } },
  }],
  ['text_search_edges_within', g().e().textSearchEdgesWithin({ label: 'C', property: 't', text: 'x', k: 4, tenant: 'acme' }), {
    text_search_edges_within: {
      input: { edges: { reference: 'all' } }, label: 'C', property: 't', tenant_value: { value: { string: 'acme' } },
      query_text: { value: { string: 'x' } }, k: { literal: 4 },
    },
  }],

  // Navigation (§4)
  ['out', src().out('FOLLOWS'), { out: { input: n5, label: 'FOLLOWS' } }],
  ['out', src().out(), { out: { input: n5 } }],
  ['in', src().in('FOLLOWS'), { in: { input: n5, label: 'FOLLOWS' } }],
  ['both', src().both(), { both: { input: n5 } }],
  ['out_e', src().outE('RATED'), { out_e: { input: n5, label: 'RATED' } }],
  ['in_e', src().inE('RATED'), { in_e: { input: n5, label: 'RATED' } }],
  ['both_e', src().bothE(), { both_e: { input: n5 } }],
  ['out_n', g().e(1).outN(), { out_n: { input: { edges: { reference: { ids: [1] } } } } }],
  ['in_n', g().e(1).inN(), { in_n: { input: { edges: { reference: { ids: [1] } } } } }],
  ['other_n', g().e(1).otherN(), { other_n: { input: { edges: { reference: { ids: [1] } } } } }],

  // Filters (§5)
  ['has', src().has('status', 'open'), { has: { input: n5, property: 'status', value: { string: 'open' } } }],
  ['has', src().has('nickname', null), { has: { input: n5, property: 'nickname', value: 'null' } }],
  ['has_label', src().hasLabel('Person'), { has_label: { input: n5, label: 'Person' } }],
  ['has_key', src().hasKey('email'), { has_key: { input: n5, property: 'email' } }],
  ['where', src().where(P.eq('city', param('city'))),
    { where: { input: n5, predicate: { eq: { left: { property: 'city' }, right: { param: 'city' } } } } }],
  ['dedup', src().dedup(), { dedup: { input: n5 } }],
  ['within', src().within('blocked'), { within: { input: n5, variable: 'blocked' } }],
  ['without', src().without('blocked'), { without: { input: n5, variable: 'blocked' } }],
  ['edge_has', g().e().edgeHas('weight', param('w')), { edge_has: { input: { edges: { reference: 'all' } }, property: 'weight', value: { expr: { param: 'w' } } } }],
  ['edge_has', g().e().edgeHas('weight', 0.5), { edge_has: { input: { edges: { reference: 'all' } }, property: 'weight', value: { value: { f64: 0.5 } } } }],
  ['edge_has_label', g().e().edgeHasLabel('RATED'), { edge_has_label: { input: { edges: { reference: 'all' } }, label: 'RATED' } }],

  // Windows (§7)
  ['limit', src().limit(20), { limit: { input: n5, count: { literal: 20 } } }],
  ['skip', src().skip(param('offset')), { skip: { input: n5, count: { expr: { param: 'offset' } } } }],
  ['range', src().range(10, 20), { range: { input: n5, start: { literal: 10 }, end: { literal: 20 } } }],
  ['limit', src().limit(E.const(1)), { limit: { input: n5, count: { expr: { constant: { i64: 1 } } } } }],

  // Variables and row bindings (§8)
  ['as', src().as('seed'), { as: { input: n5, name: 'seed' } }],
  ['store', src().store('seen'), { store: { input: n5, name: 'seen' } }],
  ['select', src().select('seed'), { select: { input: n5, name: 'seed' } }],
  ['bind', src().bind('owner'), { bind: { input: n5, name: 'owner' } }],

  // Ordering (§9)
  ['order_by', src().orderBy('salary', 'desc'), { order_by: { input: n5, property: 'salary', order: 'desc' } }],
  ['order_by', src().orderBy('name'), { order_by: { input: n5, property: 'name', order: 'asc' } }],
  ['order_by_multiple', src().orderByMultiple([['department', 'asc'], ['salary', 'desc']]),
    { order_by_multiple: { input: n5, orderings: [['department', 'asc'], ['salary', 'desc']] } }],

  // Branching and repetition (§10)
  ['union', src().union(__().out('A'), (c) => c.in('B')), {
    union: { input: n5, traversals: [outCtx('A'), { root: { in: { input: 'context', label: 'B' } } }] },
  }],
  ['choose', src().choose(P.isNotNull('boss'), __().out('REPORTS_TO'), __().in('REPORTS_TO')), {
    choose: {
      input: n5, condition: { is_not_null: { property: 'boss' } },
      then_traversal: outCtx('REPORTS_TO'), else_traversal: { root: { in: { input: 'context', label: 'REPORTS_TO' } } },
    },
  }],
  ['choose', src().choose(P.hasKey('x'), (c) => c.out()), {
    choose: { input: n5, condition: { has_key: { property: 'x' } }, then_traversal: outCtx() },
  }],
  ['coalesce', src().coalesce((c) => c.out('A')), { coalesce: { input: n5, traversals: [outCtx('A')] } }],
  ['optional', src().optional((c) => c.out('A')), { optional: { input: n5, traversal: outCtx('A') } }],
  ['repeat', src().repeat((c) => c.out('LINKS_TO'), {
    times: 3, until: P.eq('kind', 'hub'), emit: 'after', emitPredicate: P.gt('rank', 5), maxDepth: 10,
  }), {
    repeat: {
      input: n5,
      config: {
        traversal: outCtx('LINKS_TO'),
        times: 3,
        until: { eq: { left: { property: 'kind' }, right: { constant: { string: 'hub' } } } },
        emit: 'after',
        emit_predicate: { gt: { left: { property: 'rank' }, right: { constant: { i64: 5 } } } },
        max_depth: 10,
      },
    },
  }],
  ['repeat', src().repeat(__().out()), { repeat: { input: n5, config: { traversal: outCtx(), emit: 'none', max_depth: 100 } } }],

  // Fold, path and sack (§11)
  ['fold', src().fold(), { fold: { input: n5 } }],
  ['unfold', src().fold().unfold(), { unfold: { input: { fold: { input: n5 } } } }],
  ['path', src().path(), { path: { input: n5 } }],
  ['simple_path', src().simplePath(), { simple_path: { input: n5 } }],
  ['with_sack', src().withSack(f64(0)), { with_sack: { input: n5, initial: { f64: 0 } } }],
  ['sack_set', src().sackSet('toll'), { sack_set: { input: n5, property: 'toll' } }],
  ['sack_add', src().sackAdd('toll'), { sack_add: { input: n5, property: 'toll' } }],
  ['sack_get', src().sackGet(), { sack_get: { input: n5 } }],

  // Terminals (§12)
  ['count', src().count(), { count: { input: n5 } }],
  ['exists', src().exists(), { exists: { input: n5 } }],
  ['id', src().id(), { id: { input: n5 } }],
  ['label', src().label(), { label: { input: n5 } }],
  ['values', src().values(['name', 'age']), { values: { input: n5, properties: ['name', 'age'] } }],
  ['value_map', src().valueMap(['$id', 'name']), { value_map: { input: n5, properties: ['$id', 'name'] } }],
  ['value_map', src().valueMap(), { value_map: { input: n5 } }],
  ['project', src().project({ pid: '$id', author: '$from.name', age_next_year: E.prop('age').add(1) }), {
    project: {
      input: n5, projections: [
        { property: { source: '$id', alias: 'pid' } },
        { property: { source: '$from.name', alias: 'author' } },
        { expr: { alias: 'age_next_year', expr: { add: { left: { property: 'age' }, right: { constant: { i64: 1 } } } } } },
      ],
    },
  }],
  ['project', src().project([['2', 'b'], ['1', E.id()]]), {
    project: { input: n5, projections: [{ property: { source: 'b', alias: '2' } }, { expr: { alias: '1', expr: 'id' } }] },
  }],
  ['project_bindings', src().bind('shop').projectBindings({
    shop: B.binding('shop', 'name'),
    item: B.current('$id'),
    code: B.coalesce(B.binding('promo', 'code'), B.binding('shop', 'default_code')),
  }, { distinct: true }), {
    project_bindings: {
      input: { bind: { input: n5, name: 'shop' } },
      distinct: true,
      projections: [
        { property: { target: { binding: 'shop' }, source: 'name', alias: 'shop' } },
        { property: { target: 'current', source: '$id', alias: 'item' } },
        { coalesce: { refs: [{ target: { binding: 'promo' }, source: 'code' }, { target: { binding: 'shop' }, source: 'default_code' }], alias: 'code' } },
      ],
    },
  }],
  ['edge_properties', g().e().edgeProperties(), { edge_properties: { input: { edges: { reference: 'all' } } } }],
  ['group', src().group('city'), { group: { input: n5, property: 'city' } }],
  ['group_count', src().groupCount('city'), { group_count: { input: n5, property: 'city' } }],
  ['aggregate_by', src().aggregateBy('mean', 'salary'), { aggregate_by: { input: n5, function: 'mean', property: 'salary' } }],

  // Mutations (§13)
  ['add_n', g().addN('Person', { name: 'Rita', joined: E.now() }), {
    add_n: { label: 'Person', properties: [['name', { value: { string: 'Rita' } }], ['joined', { expr: 'date_time_now' }]] },
  }],
  ['add_n', g().addN('Empty'), { add_n: { label: 'Empty', properties: [] } }],
  ['add_n', src().addN('Badge', [['of', E.prop('$id')]]), {
    add_n: { input: n5, label: 'Badge', properties: [['of', { expr: { property: '$id' } }]] },
  }],
  ['add_e', src().addE('WORKS_AT', 'acme', { since: 2019 }), {
    add_e: { input: n5, label: 'WORKS_AT', to: { var: 'acme' }, properties: [['since', { value: { i64: 2019 } }]] },
  }],
  ['add_e', src().addE('KNOWS', [7, 8]), { add_e: { input: n5, label: 'KNOWS', to: { ids: [7, 8] }, properties: [] } }],
  ['set_property', src().setProperty('score', E.prop('score').mul(f64(1.1))), {
    set_property: { input: n5, name: 'score', value: { expr: { mul: { left: { property: 'score' }, right: { constant: { f64: 1.1 } } } } } },
  }],
  ['set_property', src().setProperty('nickname', null), { set_property: { input: n5, name: 'nickname', value: { value: 'null' } } }],
  ['remove_property', src().removeProperty('nickname'), { remove_property: { input: n5, name: 'nickname' } }],
  ['drop', src().drop(), { drop: { input: n5 } }],
  ['drop_edge', src().dropEdge(12), { drop_edge: { input: n5, to: { ids: [12] } } }],
  ['drop_edge_labeled', src().dropEdgeLabeled(ref.all(), 'FOLLOWS'), { drop_edge_labeled: { input: n5, to: 'all', label: 'FOLLOWS' } }],
  ['drop_edge_by_id', g().dropEdgeById(param('gone')), { drop_edge_by_id: { edges: { param: 'gone' } } }],
  ['drop_edge_by_id', src().dropEdgeById([3, 4]), { drop_edge_by_id: { input: n5, edges: { ids: [3, 4] } } }],

  // Index operations (§14)
  ['create_index', g().createIndex(Index.nodeEquality('Person', 'email', { unique: true })), {
    create_index: { spec: { node_equality: { label: 'Person', property: 'email', unique: true } }, if_not_exists: true },
  }],
  ['create_index', g().createIndex(Index.edgeText('COMMENTED', 'text'), { ifNotExists: false }), {
    create_index: { spec: { edge_text: { label: 'COMMENTED', property: 'text' } }, if_not_exists: false },
  }],
  ['drop_index', g().dropIndex(Index.nodeRange('Person', 'age', { direction: 'desc' })), {
    drop_index: { spec: { node_range: { label: 'Person', property: 'age', direction: 'desc' } } },
  }],
  ['get_index_operation', g().getIndexOperation('4f6d2b9e-8c1a-4e57-9a3d-0b7e6c2f1a85'),
    { get_index_operation: { operation_id: '4f6d2b9e-8c1a-4e57-9a3d-0b7e6c2f1a85' } }],
  ['retry_index_operation', g().retryIndexOperation('4f6d2b9e-8c1a-4e57-9a3d-0b7e6c2f1a85'),
    { retry_index_operation: { operation_id: '4f6d2b9e-8c1a-4e57-9a3d-0b7e6c2f1a85' } }],
  ['abort_index_operation', g().abortIndexOperation('4f6d2b9e-8c1a-4e57-9a3d-0b7e6c2f1a85'),
    { abort_index_operation: { operation_id: '4f6d2b9e-8c1a-4e57-9a3d-0b7e6c2f1a85' } }],
];

/** operations.md §16: the 80 variants. */
const variantInventory = [
  'context', 'nodes', 'nodes_where', 'edges', 'edges_where', 'vector_search_nodes', 'text_search_nodes', 'vector_search_edges',
  'text_search_edges', 'shortest_path',
  'text_search_nodes_within', 'text_search_edges_within', 'vector_search_nodes_within', 'vector_search_edges_within',
  'out', 'in', 'both', 'out_e', 'in_e', 'both_e', 'out_n', 'in_n', 'other_n',
  'has', 'has_label', 'has_key', 'where', 'dedup', 'within', 'without', 'edge_has', 'edge_has_label',
  'limit', 'skip', 'range',
  'as', 'store', 'select', 'bind', 'inject',
  'order_by', 'order_by_multiple',
  'repeat', 'union', 'choose', 'coalesce', 'optional',
  'fold', 'unfold', 'path', 'simple_path', 'with_sack', 'sack_set', 'sack_add', 'sack_get',
  'count', 'exists', 'id', 'label', 'values', 'value_map', 'project', 'project_bindings', 'edge_properties', 'group', 'group_count', 'aggregate_by',
  'add_n', 'add_e', 'set_property', 'remove_property', 'drop', 'drop_edge', 'drop_edge_labeled', 'drop_edge_by_id',
  'create_index', 'drop_index', 'get_index_operation', 'retry_index_operation', 'abort_index_operation',
];

describe('operations: one DSL call per variant writes the documented JSON', () => {
  it('the table covers all 80 operation variants', () => {
    expect(variantInventory.length).toBe(80);
    expect(new Set(operationCases.map(([op]) => op))).toEqual(new Set(variantInventory));
  });

  it.each(operationCases.map(([op, t, expected], i) => ({ name: `${op} #${i}`, op, t, expected })))('$name', ({ op, t, expected }) => {
    const written = wire(t);
    expect(written).toStrictEqual(expected);
    expect(typeof written === 'string' ? written : Object.keys(written as object)).toEqual(op === 'context' ? 'context' : [op]);
  });

  it('chains nest with the last call outermost', () => {
    expect(wire(g().nWithLabel('User').out('FOLLOWS').valueMap(['name']))).toStrictEqual({
      value_map: { input: { out: { input: { nodes_where: { predicate: eqLabel('User') } }, label: 'FOLLOWS' } }, properties: ['name'] },
    });
  });

  it('builders are immutable: a prefix can be reused', () => {
    const base = g().n([1]);
    const a = base.out('A');
    const b = base.in('B');
    expect(wire(a)).toStrictEqual({ out: { input: { nodes: { reference: { ids: [1] } } }, label: 'A' } });
    expect(wire(b)).toStrictEqual({ in: { input: { nodes: { reference: { ids: [1] } } }, label: 'B' } });
    expect(wire(base)).toStrictEqual({ nodes: { reference: { ids: [1] } } });
  });

  it('a chain 20 000 steps deep is built and written without recursion', () => {
    let t = g().n([1]);
    for (let i = 0; i < 20_000; i++) t = t.out();
    const text = t.toString();
    expect(text.startsWith('{"out":{"input":{"out":')).toBe(true);
    expect(text.length).toBeGreaterThan(20_000 * 10);
  });

  it('rejects malformed bounds and IDs before anything is sent', () => {
    expect(() => src().limit(-1)).toThrow(QueryBuildError);
    expect(() => src().limit(1.5)).toThrow(QueryBuildError);
    expect(() => g().n([-1])).toThrow(/out of range/);
    expect(() => g().n(2 ** 64)).toThrow(/out of range/);
    expect(() => P.and()).toThrow(/at least one/);
  });
});

describe('predicates (operations.md §2.3)', () => {
  const prop = (name: string) => ({ property: name });
  const c = (tagged: unknown) => ({ constant: tagged });
  const cases: [string, ReturnType<typeof P.eq>, unknown][] = [
    ['eq', P.eq('a', 1), { eq: { left: prop('a'), right: c({ i64: 1 }) } }],
    ['neq', P.neq('a', 'x'), { neq: { left: prop('a'), right: c({ string: 'x' }) } }],
    ['gt', P.gt('a', 1.5), { gt: { left: prop('a'), right: c({ f64: 1.5 }) } }],
    ['gte', P.gte(E.prop('a'), E.prop('b')), { gte: { left: prop('a'), right: prop('b') } }],
    ['lt', P.lt('at', dateTime('2025-03-01T08:00:00Z')), { lt: { left: prop('at'), right: c({ date_time: 1740816000000 }) } }],
    ['lte', P.lte('a', param('max')), { lte: { left: prop('a'), right: { param: 'max' } } }],
    ['between', P.between('age', 18, param('max')), { between: { value: prop('age'), min: c({ i64: 18 }), max: { param: 'max' } } }],
    ['has_key', P.hasKey('email'), { has_key: { property: 'email' } }],
    ['is_null', P.isNull('email'), { is_null: { property: 'email' } }],
    ['is_not_null', P.isNotNull('email'), { is_not_null: { property: 'email' } }],
    ['starts_with', P.startsWith('name', 'A'), { starts_with: { value: prop('name'), prefix: c({ string: 'A' }) } }],
    ['ends_with', P.endsWith('name', 'z'), { ends_with: { value: prop('name'), suffix: c({ string: 'z' }) } }],
    ['contains', P.contains('bio', param('q')), { contains: { value: prop('bio'), substring: { param: 'q' } } }],
    ['is_in', P.isIn('status', ['a', 'b']), { is_in: { value: prop('status'), values: c({ string_array: ['a', 'b'] }) } }],
    ['and', P.and(P.hasKey('a'), P.hasKey('b')), { and: { predicates: [{ has_key: { property: 'a' } }, { has_key: { property: 'b' } }] } }],
    ['or', P.hasKey('a').or(P.hasKey('b')), { or: { predicates: [{ has_key: { property: 'a' } }, { has_key: { property: 'b' } }] } }],
    ['not', P.hasKey('a').not(), { not: { predicate: { has_key: { property: 'a' } } } }],
    ['compare', P.compare(E.id(), 'lte', 3), { compare: { left: 'id', op: 'lte', right: c({ i64: 3 }) } }],
  ];
  it.each(cases.map(([name, p, expected]) => ({ name, p, expected })))('$name', ({ p, expected }) => {
    expect(parseResponseJson(writeJson(p.json))).toStrictEqual(expected);
  });
  it('covers the 18 predicate variants', () => {
    expect(new Set(cases.map(([n]) => n)).size).toBe(18);
  });
});

describe('expressions (values.md §5)', () => {
  const k = (n: number) => ({ constant: { i64: n } });
  const cases: [string, { json: unknown }, unknown][] = [
    ['property', E.prop('age'), { property: 'age' }],
    ['id', E.id(), 'id'],
    ['timestamp', E.timestamp(), 'timestamp'],
    ['date_time_now', E.now(), 'date_time_now'],
    ['constant', E.const('Porto'), { constant: { string: 'Porto' } }],
    ['param', param('limit'), { param: 'limit' }],
    ['add', E.prop('visits').add(1), { add: { left: { property: 'visits' }, right: k(1) } }],
    ['sub', E.sub(4, 1), { sub: { left: k(4), right: k(1) } }],
    ['mul', E.mul(E.prop('a'), f64(2)), { mul: { left: { property: 'a' }, right: { constant: { f64: 2 } } } }],
    ['div', E.prop('a').div(E.prop('b')), { div: { left: { property: 'a' }, right: { property: 'b' } } }],
    ['mod', E.mod(5, 2), { mod: { left: k(5), right: k(2) } }],
    ['neg', E.prop('age').neg(), { neg: { expr: { property: 'age' } } }],
    ['case', E.when(P.eq('s', 'a'), 'x').when(P.eq('s', 'b'), E.prop('y')).otherwise(null), {
      case: {
        when_then: [
          { when: { eq: { left: { property: 's' }, right: { constant: { string: 'a' } } } }, then: { constant: { string: 'x' } } },
          { when: { eq: { left: { property: 's' }, right: { constant: { string: 'b' } } } }, then: { property: 'y' } },
        ],
        else_expr: { constant: 'null' },
      },
    }],
    ['case', E.when(P.hasKey('a'), 1), { case: { when_then: [{ when: { has_key: { property: 'a' } }, then: k(1) }] } }],
  ];
  it.each(cases.map(([name, e, expected], i) => ({ name: `${name} #${i}`, e, expected })))('$name', ({ e, expected }) => {
    expect(parseResponseJson(writeJson(e.json))).toStrictEqual(expected);
  });
  it('covers the 13 expression variants', () => {
    expect(new Set(cases.map(([n]) => n)).size).toBe(13);
  });
});

describe('tagged values: plain JS values get the tags of values.md §10', () => {
  const cases: [string, Parameters<typeof V.infer>[0], unknown][] = [
    ['null', null, 'null'],
    ['boolean', true, { bool: true }],
    ['string', 'Porto', { string: 'Porto' }],
    ['bigint', 9223372036854775807n, { i64: 9223372036854775807n }],
    ['integer number', 3, { i64: 3 }],
    ['whole float number', 3.0, { i64: 3 }],
    ['fractional number', 0.5, { f64: 0.5 }],
    ['Uint8Array', new Uint8Array([104, 105]), { bytes: [104, 105] }],
    ['Date', new Date('2025-03-01T08:00:00.000Z'), { date_time: 1740816000000 }],
    ['string array', ['red', 'blue'], { string_array: ['red', 'blue'] }],
    ['empty array', [], { string_array: [] }],
    ['integer array', [3, 1, 2], { i64_array: [3, 1, 2] }],
    ['number array with a fraction', [0.25, 1], { f64_array: [0.25, 1] }],
    ['mixed array', [1, 'x', null], { array: [{ i64: 1 }, { string: 'x' }, 'null'] }],
    ['object', { lat: 38.7, tags: ['a'] }, { object: { lat: { f64: 38.7 }, tags: { string_array: ['a'] } } }],
  ];
  it.each(cases.map(([name, v, expected]) => ({ name, v, expected })))('$name', ({ v, expected }) => {
    expect(parseResponseJson(writeJson(V.infer(v).json))).toStrictEqual(expected);
  });

  it('explicit helpers force every one of the 14 variants', () => {
    const helpers: [unknown, unknown][] = [
      [V.null().json, 'null'],
      [V.infer(false).json, { bool: false }],
      [i64('-12').json, { i64: -12 }],
      [dateTime(-1).json, { date_time: -1 }],
      [f64(3).json, { f64: 3 }],
      [f32(0.5).json, { f32: 0.5 }],
      [V.infer('s').json, { string: 's' }],
      [bytes([1, 2]).json, { bytes: [1, 2] }],
      [i64Array([3, 1n]).json, { i64_array: [3, 1] }],
      [f64Array([1, 2]).json, { f64_array: [1, 2] }],
      [f32Array([0.1]).json, { f32_array: [0.1] }],
      [stringArray([]).json, { string_array: [] }],
      [V.array([1, f64(2)]).json, { array: [{ i64: 1 }, { f64: 2 }] }],
      [V.object({ a: f32(1) }).json, { object: { a: { f32: 1 } } }],
    ];
    for (const [json, expected] of helpers) expect(parseResponseJson(writeJson(json))).toStrictEqual(expected);
  });

  it('writes i64 values of any size as bare integer tokens', () => {
    const text = g().addN('Big', { max: 9223372036854775807n, min: -9223372036854775808n, fromString: i64('9007199254740993') }).toString();
    expect(text).toContain('{"i64":9223372036854775807}');
    expect(text).toContain('{"i64":-9223372036854775808}');
    expect(text).toContain('{"i64":9007199254740993}');
    expect(() => i64(9223372036854775808n)).toThrow(/out of range/);
    expect(() => i64(1.5)).toThrow(/integer/);
  });

  it('keeps "__proto__" as an ordinary object member', () => {
    const props = JSON.parse('{"__proto__": 1}') as { [k: string]: number };
    expect(g().addN('X', { meta: props }).toString()).toContain('"meta",{"value":{"object":{"__proto__":{"i64":1}}}}');
  });

  it('refuses values JSON cannot carry', () => {
    expect(() => V.infer(Number.NaN)).toThrow(QueryBuildError);
    expect(() => f64(Infinity)).toThrow(QueryBuildError);
    expect(() => bytes([256])).toThrow(QueryBuildError);
    expect(() => dateTime('not a date')).toThrow(QueryBuildError);
  });

  it('dateTime reads strings as RFC 3339 with their offset, never in the machine\'s time zone, and never moves an impossible date', () => {
    expect(dateTime('2025-03-01T08:00:00Z').json).toStrictEqual({ date_time: 1740816000000 });
    expect(dateTime('2025-03-01T09:00:00+01:00').json).toStrictEqual({ date_time: 1740816000000 });
    expect(dateTime('2025-03-01 08:00:00.123456z').json).toStrictEqual({ date_time: 1740816000123 });
    expect(dateTime('2016-12-31T23:59:60Z').json).toStrictEqual({ date_time: Date.UTC(2017, 0, 1) });
    expect(dateTime('0050-01-01T00:00:00Z').json).toStrictEqual({ date_time: new Date('0050-01-01T00:00:00Z').getTime() });
    for (const text of ['2025-03-01T08:00:00', 'March 1, 2025', '2025-02-30T08:00:00Z', '2025-03-01T24:00:00Z', '2025-13-01T00:00:00Z', '2025-03-01T08:00:00+24:00']) {
      expect(() => dateTime(text), text).toThrow(/RFC 3339 date-time with its offset/);
    }
  });

  it('writes arrays of bigints, or of whole numbers and bigints, as i64_array', () => {
    expect(V.infer([1n, 2n]).json).toStrictEqual({ i64_array: [1n, 2n] });
    expect(parseResponseJson(writeJson(V.infer([1, 2n ** 60n]).json))).toStrictEqual({ i64_array: [1, 2n ** 60n] });
    expect(V.infer([1n, 'x']).json).toStrictEqual({ array: [{ i64: 1n }, { string: 'x' }] });
    expect(() => V.infer([1n, 2n ** 63n])).toThrow(/out of range/);
  });
});

describe('index specs (indexes.md §2)', () => {
  it.each([
    [Index.nodeEquality('Person', 'email'), { node_equality: { label: 'Person', property: 'email', unique: false } }],
    [Index.nodeRange('Person', 'age', { direction: 'desc' }), { node_range: { label: 'Person', property: 'age', direction: 'desc' } }],
    [Index.edgeEquality('RATED', 'stars'), { edge_equality: { label: 'RATED', property: 'stars' } }],
    [Index.edgeRange('RATED', 'at'), { edge_range: { label: 'RATED', property: 'at', direction: 'asc' } }],
    [Index.nodeVector('Article', 'embedding', { dimension: 384, metric: 'cosine', tenantProperty: 'workspace' }),
      { node_vector: { label: 'Article', property: 'embedding', dimension: 384, metric: 'cosine', tenant_property: 'workspace' } }],
    [Index.edgeVector('SIMILAR', 'vec', { dimension: 8, metric: 'euclidean' }),
      { edge_vector: { label: 'SIMILAR', property: 'vec', dimension: 8, metric: 'euclidean' } }],
    [Index.nodeText('Article', 'body', { tenantProperty: 'workspace' }), { node_text: { label: 'Article', property: 'body', tenant_property: 'workspace' } }],
    [Index.edgeText('COMMENTED', 'text'), { edge_text: { label: 'COMMENTED', property: 'text' } }],
  ])('%#', (spec, expected) => {
    expect(spec.json).toStrictEqual(expected);
  });
});

describe('batches (envelope.md §2, §4)', () => {
  it('writes the request object with query_name null, entries and returns', () => {
    const request = readBatch()
      .varAs('staff', g().nWithLabel('Employee'))
      .varAs('headcount', g().nVar('staff').count(), Cond.varNotEmpty('staff'))
      .run(g().n().count(), Cond.prevNotEmpty())
      .returning(['headcount', 'staff'])
      .toRequest();
    expect(parseResponseJson(writeJson(request))).toStrictEqual({
      request_type: 'read',
      query_name: null,
      query: {
        read: {
          entries: [
            { query: { name: 'staff', root: { nodes_where: { predicate: eqLabel('Employee') } } } },
            { query: { name: 'headcount', root: { count: { input: { nodes: { reference: { var: 'staff' } } } } }, condition: { var_not_empty: 'staff' } } },
            { query: { root: { count: { input: { nodes: { reference: 'all' } } } }, condition: 'prev_not_empty' } },
          ],
          returns: ['headcount', 'staff'],
        },
      },
    });
  });

  it('writes the four conditions', () => {
    expect(Cond.varNotEmpty('x').json).toStrictEqual({ var_not_empty: 'x' });
    expect(Cond.varEmpty('x').json).toStrictEqual({ var_empty: 'x' });
    expect(Cond.varMinSize('x', 3).json).toStrictEqual({ var_min_size: ['x', 3] });
    expect(Cond.prevNotEmpty().json).toBe('prev_not_empty');
    expect(() => Cond.varMinSize('x', 0)).toThrow(QueryBuildError);
  });

  it('writes queryName, nested forEach and an empty returns list', () => {
    const request = writeBatch()
      .queryName('import')
      .forEach(param('rows'), (body) => body
        .varAs('row', g().addN('Row', { v: param('v') }))
        .forEach('children', (inner) => inner.run(g().nVar('row').addE('HAS', 'row'))))
      .toRequest();
    expect(parseResponseJson(writeJson(request))).toStrictEqual({
      request_type: 'write',
      query_name: 'import',
      query: {
        write: {
          entries: [{
            for_each: {
              param: 'rows',
              body: [
                { query: { name: 'row', root: { add_n: { label: 'Row', properties: [['v', { expr: { param: 'v' } }]] } } } },
                { for_each: { param: 'children', body: [{ query: { root: { add_e: { input: { nodes: { reference: { var: 'row' } } }, label: 'HAS', to: { var: 'row' }, properties: [] } } } }] } },
              ],
            },
          }],
          returns: [],
        },
      },
    });
  });

  it('toJSON and toString give the body text; JSON.stringify(batch) is not confused by its key argument', () => {
    const b = readBatch().varAs('n', g().n().count()).returning(['n']);
    const text = '{"request_type":"read","query_name":null,"query":{"read":{"entries":[{"query":{"name":"n","root":{"count":{"input":{"nodes":{"reference":"all"}}}}}}],"returns":["n"]}}}';
    expect(b.toJSON()).toBe(text);
    expect(String(b)).toBe(text);
    expect(JSON.parse(JSON.stringify(b)) as string).toBe(text);
  });

  it('refuses a read batch with a mutation anywhere, naming the entry and the operation', () => {
    expect(() => readBatch().varAs('x', g().addN('A'))).toThrow(/read batch entry 'x' contains the mutation `add_n`/);
    expect(() => readBatch().varAs('x', g().n().union(__().out(), __().drop()))).toThrow(/`drop`/);
    expect(() => readBatch().varAs('x', g().n().repeat((c) => c.setProperty('a', 1)))).toThrow(/`set_property`/);
    expect(() => readBatch().varAs('x', g().n().choose(P.hasKey('a'), __().out(), __().addE('L', 'y')))).toThrow(/`add_e`/);
    expect(() => readBatch().forEach('rows', (b) => b.run(g().createIndex(Index.nodeText('A', 'b'))))).toThrow(/`create_index`/);
    expect(() => readBatch().varAs('x', g().n().count().as('c'))).not.toThrow();
    expect(() => readBatch().varAs('op', g().getIndexOperation('4f6d2b9e-8c1a-4e57-9a3d-0b7e6c2f1a85'))).not.toThrow();
  });

  it('refuses bind/project_bindings in a write batch', () => {
    expect(() => writeBatch().varAs('x', g().n().bind('b').count())).toThrow(/`bind`/);
    expect(() => writeBatch().varAs('x', g().n().optional((c) => c.out().bind('b')))).toThrow(/`bind`/);
    expect(() => writeBatch().varAs('x', g().n().addN('A'))).not.toThrow();
  });
});

describe('parameters (envelope.md §3)', () => {
  it('typed: writes parameter_types and the values the way the official client does', () => {
    const params = defineParams({
      big: 'i64', small: 'i64', ratio: 'f64', narrow: 'f32', when: 'date_time', whenText: 'date_time', flag: 'bool', name: 'string',
      any: 'value', obj: 'object', ids: { array: 'i64' }, vectors: { array: { array: 'f32' } },
      row: { object: { id: 'i64', at: 'date_time' } },
    });
    const b = readBatch(params).varAs('n', g().n(params.ref('ids')).count()).returning(['n']);
    const text = b.toJSON({
      big: 9223372036854775807n, small: 5, ratio: 0.5, narrow: 1.1, when: new Date('2025-03-01T07:00:00Z'),
      whenText: '2025-03-01T09:00:00+01:00', flag: true, name: 'Oslo', any: [1, 'two', null], obj: { a: 1 },
      ids: [1, 2n], vectors: [[0.1, 1]], row: { id: 7n, at: 0 },
    });
    expect(text).toContain('"big":9223372036854775807,');
    const request = parseResponseJson(text) as { parameters: unknown; parameter_types: unknown };
    expect(request.parameters).toStrictEqual({
      big: 9223372036854775807n, small: 5, ratio: 0.5, narrow: 1.100000023841858, when: '2025-03-01T07:00:00.000Z',
      whenText: '2025-03-01T08:00:00.000Z', flag: true, name: 'Oslo', any: [1, 'two', null], obj: { a: 1 },
      ids: [1, 2], vectors: [[Math.fround(0.1), 1]], row: { id: 7, at: '1970-01-01T00:00:00.000Z' },
    });
    expect(request.parameter_types).toStrictEqual({
      big: 'i64', small: 'i64', ratio: 'f64', narrow: 'f32', when: 'date_time', whenText: 'date_time', flag: 'bool', name: 'string',
      any: 'value', obj: 'object', ids: { array: 'i64' }, vectors: { array: { array: 'f32' } }, row: 'object',
    });
  });

  it('-0 keeps its sign on the wire: the integer token -0, read as -0.0 where a float is read', () => {
    expect(f64(-0).json).toStrictEqual({ f64: -0 });
    const text = readBatch().varAs('x', g().n().count()).withParams({ z: -0 }).toJSON();
    expect(text).toContain('"parameters":{"z":-0}');
    expect(JSON.stringify(V.array([f64(-0)]).json)).toBe('{"array":[{"f64":0}]}'); // JSON.stringify itself drops it
    expect(readBatch().varAs('x', g().n().where(P.eq('s', f64(-0))).count()).toJSON()).toContain('{"f64":-0}');
  });

  it('typed with no declarations still switches to typed mode (parameter_types {})', () => {
    const request = readBatch(defineParams({})).varAs('n', g().n().count()).toRequest();
    expect(request.parameters).toStrictEqual({});
    expect(request.parameter_types).toStrictEqual({});
  });

  it('untyped: parameters only, plain JSON, bigint exact, Dates as ISO strings', () => {
    const b = readBatch().varAs('n', g().n(param('ids')).count()).withParams({ ids: [1n, 18446744073709551615n], at: new Date(0) });
    const request = b.toRequest();
    expect('parameter_types' in request).toBe(false);
    expect(b.toJSON()).toContain('"parameters":{"ids":[1,18446744073709551615],"at":"1970-01-01T00:00:00.000Z"}');
    expect('parameters' in readBatch().varAs('n', g().n().count()).toRequest()).toBe(false);
  });

  it('refuses values that do not match their declarations, and bytes', () => {
    const params = defineParams({ n: 'i64', f: 'f32', d: 'date_time', row: { object: { id: 'i64' } } });
    const b = readBatch(params).varAs('x', g().n().count());
    const ok = { n: 1, f: 1.5, d: new Date(0), row: { id: 1 } };
    expect(() => b.toRequest(ok)).not.toThrow();
    expect(() => b.toRequest({ ...ok, n: 1.5 })).toThrow(/'n' expects an integer/);
    expect(() => b.toRequest({ ...ok, n: 2n ** 63n })).toThrow(/out of range/);
    expect(() => b.toRequest({ ...ok, f: 1e39 })).toThrow(/f32 range/);
    expect(() => b.toRequest({ ...ok, d: 'yesterday' })).toThrow(/'d' expects an RFC 3339 date-time/);
    // RFC 3339: a four-digit year, and an offset (without one, Date reads local time).
    expect(() => b.toRequest({ ...ok, d: new Date(Date.UTC(10000, 0, 1)) })).toThrow(/'d' expects a date-time in the years 0000-9999/);
    expect(() => b.toRequest({ ...ok, d: -62198755200001 })).toThrow(/years 0000-9999/);
    expect(() => b.toRequest({ ...ok, d: '2025-03-01T08:00' })).toThrow(/'d' expects an RFC 3339 date-time with its offset/);
    // Impossible dates are refused as the server refuses them, not moved to another date.
    for (const d of ['2025-02-30T08:00:00Z', '2025-04-31T00:00:00Z', '2025-03-01T24:00:00Z', '2025-03-01T08:00:00']) {
      expect(() => b.toRequest({ ...ok, d }), d).toThrow(/'d' expects an RFC 3339 date-time/);
    }
    // A leap second is the next second's start, as POSIX time counts it.
    expect(b.toRequest({ ...ok, d: '2016-12-31T23:59:60Z' }).parameters).toMatchObject({ d: '2017-01-01T00:00:00.000Z' });
    expect(() => b.toRequest({ ...ok, d: '2025-03-01T08:00:00-05:30' })).not.toThrow();
    expect(() => b.toRequest({ ...ok, row: { id: 1, extra: 2 } as never })).toThrow(/undeclared member 'extra'/);
    expect(() => b.toRequest({ n: 1, f: 1.5, d: 0 } as never)).toThrow(/missing: \[row\]/);
    expect(() => b.toRequest({ ...ok, z: 1 } as never)).toThrow(/undeclared: \[z\]/);
    expect(() => defineParams({ blob: 'bytes' as never })).toThrow(/bytes/);
    expect(() => readBatch().varAs('x', g().n().count()).toRequest({ blob: new Uint8Array(1) as never })).toThrow(/bytes/);
    expect(() => params.ref('nope' as never)).toThrow(/not declared/);
  });
});

describe('client JSON codec', () => {
  it('round-trips exact integers, floats, strings, nesting and empty containers', () => {
    const text = '{"a":[1,-0.5,1e-7,18446744073709551615,-9223372036854775808,[],{}],"b":{"c":"\\u00e9\\"x\\n"},"d":null,"e":true,"f":false}';
    const v = parseResponseJson(text);
    expect(v).toStrictEqual({ a: [1, -0.5, 1e-7, 18446744073709551615n, -9223372036854775808n, [], {}], b: { c: 'é"x\n' }, d: null, e: true, f: false });
    expect(writeJson(v)).toBe('{"a":[1,-0.5,1e-7,18446744073709551615,-9223372036854775808,[],{}],"b":{"c":"é\\"x\\n"},"d":null,"e":true,"f":false}');
    expect(parseResponseJson(' \n[ 1 , { "k" : [ ] } ] \t')).toStrictEqual([1, { k: [] }]);
  });

  it('rejects malformed JSON', () => {
    for (const bad of ['', '{', '[1,]', '{"a" 1}', '{"a":1,}', '01', '1.', '-', 'nul', '"\u0001"', '[1] 2', '{1:2}', '"abc']) {
      expect(() => parseResponseJson(bad), bad).toThrow(SyntaxError);
    }
  });

  it('parses and writes 50 000 levels of nesting without recursion', () => {
    const depth = 50_000;
    const text = '['.repeat(depth) + ']'.repeat(depth);
    const v = parseResponseJson(text);
    expect(writeJson(v)).toBe(text);
  });

  it('refuses what JSON cannot carry', () => {
    expect(() => writeJson({ a: Number.NaN })).toThrow(/finite/);
    expect(() => writeJson({ a: new Map() })).toThrow(/Map/);
    const cyclic: { self?: unknown } = {};
    cyclic.self = cyclic;
    expect(() => writeJson(cyclic)).toThrow(/deeper/);
    expect(writeJson({ a: undefined, b: [undefined] })).toBe('{"b":[null]}');
  });
});
