// The DSL expression for every request of ../shared/conformance/corpus (runtime/ and
// json-only/). test/client-corpus.test.ts checks that each builder produces exactly the
// corpus file's JSON. The generated `combo-*` files are built from their name pattern.

import {
  B, Cond, E, Index, P, __, bytes, dateTime, defineParams, f32, f32Array, f64, f64Array, g, param, readBatch, writeBatch,
  type Traversal,
} from '../../src/client/index.js';

/** Any batch builder, whatever its parameter schema. */
export type AnyBatch = { toJSON(): string };

const users = (): Traversal => g().nWithLabel('ParityUser');
const userBy = (externalId: string): Traversal => users().where(P.eq('externalId', externalId));
const follows = (): Traversal => g().eWithLabel('FOLLOWS');
const textCounts = (nodeText: string, edgeText: string): AnyBatch => readBatch()
  .varAs('nodes', g().textSearchNodes({ label: 'ParityUser', property: 'bio', text: nodeText, k: 5 }).count())
  .varAs('edges', g().textSearchEdges({ label: 'FOLLOWS', property: 'note', text: edgeText, k: 5 }).count())
  .returning(['nodes', 'edges']);

function seedUser(externalId: string, name: string, age: number, score: number, status: string, city: string, bio: string, embedding: number[]): Traversal {
  return g().addN('ParityUser', {
    externalId, name, age, score: f64(score), status, tenantId: 'tenant-a', city, bio,
    createdAt: dateTime(1776000000000), embedding: f32Array(embedding),
  });
}

export const corpusDsl: Record<string, () => AnyBatch> = {
  // ---- runtime/ ----
  '001-write-seed-core.json': () => writeBatch()
    .varAs('alice', seedUser('user-alice', 'Alice', 31, 90.5, 'active', 'London', 'Alice writes graph database tests', [1, 0, 0]))
    .varAs('bob', seedUser('user-bob', 'Bob', 27, 72.25, 'active', 'Paris', 'Bob likes traversal testing', [0.9, 0.1, 0]))
    .varAs('carol', seedUser('user-carol', 'Carol', 42, 64, 'inactive', 'Berlin', 'Carol archives old records', [0, 1, 0]))
    .varAs('alice_follows_bob', g().nVar('alice').addE('FOLLOWS', 'bob', {
      weight: f64(1), since: '2024-01-01', note: 'Alice follows Bob', embedding: f32Array([1, 0]),
    }))
    .varAs('bob_follows_carol', g().nVar('bob').addE('FOLLOWS', 'carol', {
      weight: f64(0.5), since: '2024-02-01', note: 'Bob follows Carol', embedding: f32Array([0, 1]),
    }))
    .returning(['alice', 'bob', 'carol', 'alice_follows_bob', 'bob_follows_carol']),

  '002-read-count-all-users.json': () => readBatch().varAs('user_count', users().count()).returning(['user_count']),

  '003-read-source-predicate-and-count.json': () => readBatch()
    .varAs('active_adults', g().nWithLabel('ParityUser', P.and(P.eq('status', 'active'), P.gte('age', 30))).count())
    .returning(['active_adults']),

  '004-read-value-map-projection.json': () => readBatch()
    .varAs('alice', userBy('user-alice').project({
      id: 'externalId',
      name: 'name',
      score_plus_one: E.prop('score').add(f64(1)),
      status_label: E.when(P.eq('status', 'active'), 'enabled').otherwise('disabled'),
    }))
    .returning(['alice']),

  '005-read-order-range-values.json': () => readBatch()
    .varAs('ordered', users().orderByMultiple([['status', 'asc'], ['age', 'desc']]).range(0, 2).valueMap(['externalId', 'age', 'status']))
    .returning(['ordered']),

  '006-read-edge-count.json': () => readBatch()
    .varAs('edge_count', userBy('user-alice').outE('FOLLOWS').count())
    .returning(['edge_count']),

  '007-read-edge-properties.json': () => readBatch()
    .varAs('edges', follows().edgeHas('weight', f64(1)).edgeProperties())
    .returning(['edges']),

  '008-read-edge-endpoints.json': () => readBatch()
    .varAs('from_nodes', follows().edgeHasLabel('FOLLOWS').inN().valueMap(['externalId', 'name']))
    .varAs('to_nodes', follows().outN().valueMap(['externalId', 'name']))
    .returning(['from_nodes', 'to_nodes']),

  '009-read-conditional-var-not-empty.json': () => readBatch()
    .varAs('alice', userBy('user-alice'))
    .varAs('friends', g().nVar('alice').out('FOLLOWS').valueMap(['externalId', 'name']), Cond.varNotEmpty('alice'))
    .returning(['alice', 'friends']),

  '010-read-conditional-var-empty.json': () => readBatch()
    .varAs('missing', userBy('missing-user'))
    .varAs('fallback', users().limit(1).valueMap(['externalId']), Cond.varEmpty('missing'))
    .returning(['missing', 'fallback']),

  '011-read-conditional-var-min-size-prev.json': () => readBatch()
    .varAs('users', users().limit(3))
    .varAs('min_two', g().nVar('users').count(), Cond.varMinSize('users', 2))
    .varAs('prev_ok', g().nVar('users').exists(), Cond.prevNotEmpty())
    .returning(['min_two', 'prev_ok']),

  '012-read-foreach-param.json': () => {
    const params = defineParams({ lookups: { array: 'object' } });
    return readBatch(params)
      .forEach(params.ref('lookups'), (body) => body
        .varAs('matched', users().where(P.eq('externalId', param('externalId'))).valueMap(['externalId', 'name'])))
      .returning(['matched'])
      .withParams({ lookups: [{ externalId: 'user-alice' }, { externalId: 'user-carol' }] });
  },

  '013-write-foreach-param-create.json': () => {
    const params = defineParams({ rows: { array: 'object' } });
    return writeBatch(params)
      .forEach('rows', (body) => body
        .varAs('created', g().addN('ParityEvent', { eventId: param('eventId'), kind: param('kind'), score: param('score') })))
      .returning(['created'])
      .withParams({ rows: [{ eventId: 'event-1', kind: 'click', score: 10 }, { eventId: 'event-2', kind: 'view', score: 5 }] });
  },

  '014-read-after-foreach-param.json': () => readBatch()
    .varAs('event_count', g().nWithLabel('ParityEvent').count())
    .returning(['event_count']),

  '015-write-set-remove-properties.json': () => writeBatch()
    .varAs('updated', userBy('user-bob')
      .setProperty('status', 'inactive')
      .setProperty('updatedAt', dateTime(1777000000000))
      .removeProperty('city')
      .count())
    .returning(['updated']),

  '016-read-updated-properties.json': () => readBatch()
    .varAs('bob', userBy('user-bob').valueMap(['externalId', 'status', 'updatedAt', 'city']))
    .returning(['bob']),

  '017-read-repeat-union.json': () => readBatch()
    .varAs('walked', userBy('user-alice')
      .repeat(__().out('FOLLOWS'), { times: 2, emit: 'all', maxDepth: 4 })
      .union(__().out('FOLLOWS'), __().in('FOLLOWS'))
      .dedup()
      .valueMap(['externalId', 'name']))
    .returning(['walked']),

  '018-read-choose-coalesce-optional.json': () => readBatch()
    .varAs('branched', userBy('user-alice')
      .choose(P.eq('status', 'active'), (c) => c.out('FOLLOWS'), (c) => c.in('FOLLOWS'))
      .coalesce((c) => c.out('FOLLOWS'), (c) => c.in('FOLLOWS'))
      .optional((c) => c.out('FOLLOWS'))
      .dedup()
      .valueMap(['externalId', 'name']))
    .returning(['branched']),

  '019-read-aggregations.json': () => readBatch()
    .varAs('by_status', users().groupCount('status'))
    .varAs('mean_score', users().aggregateBy('mean', 'score'))
    .varAs('max_age', users().aggregateBy('max', 'age'))
    .returning(['by_status', 'mean_score', 'max_age']),

  '020-write-index-create.json': () => writeBatch()
    .varAs('node_eq', g().createIndex(Index.nodeEquality('ParityUser', 'externalId')))
    .varAs('node_range', g().createIndex(Index.nodeRange('ParityUser', 'age')))
    .varAs('edge_eq', g().createIndex(Index.edgeEquality('FOLLOWS', 'since')))
    .varAs('edge_range', g().createIndex(Index.edgeRange('FOLLOWS', 'weight')))
    .returning(['node_eq', 'node_range', 'edge_eq', 'edge_range']),

  '021-read-parameter-types.json': () => {
    const params = defineParams({ statuses: { array: 'string' }, created_after: 'date_time', limit: 'i64' });
    return readBatch(params)
      .varAs('matches', users()
        .where(P.isIn('status', params.ref('statuses')))
        .where(P.gte('createdAt', params.ref('created_after')))
        .limit(params.ref('limit'))
        .valueMap(['externalId', 'status']))
      .returning(['matches'])
      .withParams({ statuses: ['active', 'inactive'], created_after: new Date(Date.UTC(2026, 0, 1)), limit: 5 });
  },

  '022-write-property-value-variants.json': () => writeBatch()
    .varAs('variant_node', g().addN('ParityVariant', {
      nullValue: null,
      boolValue: true,
      i64Value: 9223372036854775000n,
      dateTimeValue: dateTime(-1),
      f64Value: 3.25,
      f32Value: f32(1.5),
      stringValue: 'variant',
      bytesValue: new Uint8Array([1, 2, 3]),
      i64Array: [1, 2, 3],
      f64Array: f64Array([1, 2]),
      f32Array: f32Array([1, 2]),
      stringArray: ['a', 'b'],
    }))
    .returning(['variant_node']),

  '023-read-property-value-variants.json': () => readBatch()
    .varAs('variant', g().nWithLabel('ParityVariant').valueMap())
    .returning(['variant']),

  '024-write-text-vector-indexes.json': () => writeBatch()
    .varAs('node_text', g().createIndex(Index.nodeText('ParityUser', 'bio')))
    .varAs('node_vector', g().createIndex(Index.nodeVector('ParityUser', 'embedding', { dimension: 3, metric: 'cosine' })))
    .varAs('edge_text', g().createIndex(Index.edgeText('FOLLOWS', 'note')))
    .varAs('edge_vector', g().createIndex(Index.edgeVector('FOLLOWS', 'embedding', { dimension: 2, metric: 'cosine' })))
    .returning(['node_text', 'node_vector', 'edge_text', 'edge_vector']),

  '025-read-text-search-nodes.json': () => readBatch()
    .varAs('text_hits', g().textSearchNodes({ label: 'ParityUser', property: 'bio', text: 'graph', k: 5 })
      .valueMap(['externalId', 'bio', '$distance']))
    .returning(['text_hits']),

  '026-read-vector-search-nodes.json': () => readBatch()
    .varAs('vector_hits', g().vectorSearchNodes({ label: 'ParityUser', property: 'embedding', vector: [1, 0, 0], k: 3 })
      .project({ externalId: 'externalId', distance: '$distance' }))
    .returning(['vector_hits']),

  '027-read-text-search-edges.json': () => readBatch()
    .varAs('edge_text_hits', g().textSearchEdges({ label: 'FOLLOWS', property: 'note', text: 'follows', k: 5 }).edgeProperties())
    .returning(['edge_text_hits']),

  '028-read-vector-search-edges.json': () => readBatch()
    .varAs('edge_vector_hits', g().vectorSearchEdges({ label: 'FOLLOWS', property: 'embedding', vector: [1, 0], k: 5 }).edgeProperties())
    .returning(['edge_vector_hits']),

  '029-write-drop-temp-node.json': () => writeBatch()
    .varAs('temp', g().addN('ParityTemp', { name: 'temp' }))
    .varAs('dropped', g().nVar('temp').drop().count())
    .returning(['dropped']),

  '030-read-final-counts.json': () => readBatch()
    .varAs('users', users().count())
    .varAs('events', g().nWithLabel('ParityEvent').count())
    .varAs('variants', g().nWithLabel('ParityVariant').count())
    .returning(['users', 'events', 'variants']),

  '031-read-source-predicate-eq-param.json': () => {
    const params = defineParams({ name: 'string' });
    return readBatch(params)
      .varAs('user', g().nWithLabel('ParityUser', P.eq('name', params.ref('name'))).valueMap(['externalId', 'name']))
      .returning(['user'])
      .withParams({ name: 'Alice' });
  },

  '032-read-source-predicate-between-param.json': () => {
    const params = defineParams({ min_age: 'i64' });
    return readBatch(params)
      .varAs('adults', g().nWithLabel('ParityUser', P.between('age', params.ref('min_age'), 65)).valueMap(['externalId', 'age']))
      .returning(['adults'])
      .withParams({ min_age: 30 });
  },

  '900-write-active-text-items.json': () => writeBatch()
    .varAs('source', g().addN('ParityUser', { externalId: 'active-text-source', bio: 'activeinsertnode' }))
    .varAs('target', g().addN('ParityUser', { externalId: 'active-text-target' }))
    .varAs('edge', g().nVar('source').addE('FOLLOWS', 'target', { note: 'activeinsertedge' }))
    .returning(['source', 'target', 'edge']),

  '901-read-active-text-items.json': () => textCounts('activeinsertnode', 'activeinsertedge'),

  '902-write-remove-indexed-properties.json': () => writeBatch()
    .varAs('nodes', userBy('active-text-source').removeProperty('bio').count())
    .varAs('edges', follows().where(P.eq('note', 'activeinsertedge')).removeProperty('note').count())
    .returning(['nodes', 'edges']),

  '903-read-removed-indexed-properties.json': () => textCounts('activeinsertnode', 'activeinsertedge'),

  '904-write-text-drop-candidates.json': () => writeBatch()
    .varAs('source', g().addN('ParityUser', { externalId: 'drop-text-source', bio: 'dropitemnode' }))
    .varAs('target', g().addN('ParityUser', { externalId: 'drop-text-target' }))
    .varAs('edge', g().nVar('source').addE('FOLLOWS', 'target', { note: 'dropitemedge' }))
    .varAs('source_values', g().nVar('source').values(['externalId', 'bio']))
    .varAs('target_values', g().nVar('target').values(['externalId']))
    .varAs('edge_values', g().eVar('edge').values(['note']))
    .returning(['source_values', 'target_values', 'edge_values']),

  '905-read-text-drop-candidates.json': () => textCounts('dropitemnode', 'dropitemedge'),

  '906-write-drop-indexed-items.json': () => writeBatch()
    .varAs('edge_matches', follows().where(P.eq('note', 'dropitemedge')))
    .varAs('edges', g().dropEdgeById('edge_matches').count())
    .varAs('source', userBy('drop-text-source').drop().count())
    .varAs('target', userBy('drop-text-target').drop().count())
    .varAs('active_source', userBy('active-text-source').drop().count())
    .varAs('active_target', userBy('active-text-target').drop().count())
    .returning(['edges', 'source', 'target', 'active_source', 'active_target']),

  '907-read-dropped-indexed-items.json': () => textCounts('dropitemnode', 'dropitemedge'),

  '908-write-drop-text-indexes.json': () => writeBatch()
    .varAs('node_text', g().dropIndex(Index.nodeText('ParityUser', 'bio')))
    .varAs('edge_text', g().dropIndex(Index.edgeText('FOLLOWS', 'note')))
    .returning(['node_text', 'edge_text']),

  // ---- json-only/ ----
  '900-exhaustive-raw-read-steps.json': () => {
    const params = defineParams({
      node_ids: { array: 'i64' }, edge_ids: { array: 'i64' }, needle: 'string', limit: 'i64', skip: 'i64', end: 'i64',
    });
    return readBatch(params)
      .varAs('raw_nodes', g().n(params.ref('node_ids'))
        .has('name', 'Alice')
        .where(P.contains('bio', params.ref('needle')))
        .limit(params.ref('limit'))
        .skip(params.ref('skip'))
        .range(0, params.ref('end'))
        .as('a')
        .store('stored')
        .select('stored')
        .dedup()
        .within('stored')
        .without('missing')
        .fold()
        .unfold()
        .path()
        .simplePath()
        .withSack(0)
        .sackSet('score')
        .sackAdd('score')
        .sackGet()
        .project({ externalId: 'externalId', neg_age: E.prop('age').neg() }))
      .varAs('raw_edges', g().e(params.ref('edge_ids'))
        .where(P.or(P.hasKey('since'), P.startsWith('note', 'Alice')))
        .edgeHas('weight', f64(1))
        .edgeHasLabel('FOLLOWS')
        .orderBy('weight', 'desc')
        .edgeProperties())
      .varAs('index_operation', g().getIndexOperation('018f0c58-6bc7-7c56-8d3d-9c5f18a0f001'))
      .returning(['raw_nodes', 'raw_edges', 'index_operation'])
      .withParams({ node_ids: [1, 2], edge_ids: [1], needle: 'graph', limit: 10, skip: 0, end: 10 });
  },

  '901-exhaustive-raw-write-steps.json': () => {
    const operation = '018f0c58-6bc7-7c56-8d3d-9c5f18a0f001';
    return writeBatch()
      .varAs('raw_unique_index', g().createIndex(Index.nodeEquality('ParityUser', 'externalId', { unique: true })))
      .varAs('raw_drop_range_index', g().dropIndex(Index.nodeRange('ParityUser', 'age')))
      .varAs('raw_node_vector_index', g().createIndex(Index.nodeVector('ParityUser', 'embedding', { dimension: 3, metric: 'cosine', tenantProperty: 'tenantId' })))
      .varAs('raw_edge_vector_index', g().createIndex(Index.edgeVector('FOLLOWS', 'embedding', { dimension: 2, metric: 'cosine', tenantProperty: 'tenantId' })))
      .varAs('raw_node_text_index', g().createIndex(Index.nodeText('ParityUser', 'bio', { tenantProperty: 'tenantId' })))
      .varAs('raw_edge_text_index', g().createIndex(Index.edgeText('FOLLOWS', 'note', { tenantProperty: 'tenantId' })))
      .varAs('raw_mutations', g().addN('RawNode', { name: 'raw' })
        .addE('RAW_EDGE', 'raw_mutations', { weight: 1 })
        .setProperty('name', param('name'))
        .removeProperty('old')
        .dropEdge([999999])
        .dropEdgeLabeled([999999], 'RAW_EDGE')
        .dropEdgeById([999999])
        .drop())
      .varAs('retry_index_operation', g().retryIndexOperation(operation))
      .varAs('abort_index_operation', g().abortIndexOperation(operation))
      .returning([
        'raw_unique_index', 'raw_drop_range_index', 'raw_node_vector_index', 'raw_edge_vector_index', 'raw_node_text_index',
        'raw_edge_text_index', 'raw_mutations', 'retry_index_operation', 'abort_index_operation',
      ]);
  },

  '902-query-value-and-param-type-shapes.json': () => {
    const params = defineParams({
      null: 'value', bool: 'bool', i64: 'i64', f64: 'f64', f32: 'f32', string: 'string', array: { array: 'value' }, object: 'object',
    });
    return readBatch(params)
      .varAs('empty', g().nWithLabel('Missing').count())
      .returning(['empty'])
      .withParams({
        null: null, bool: true, i64: 9223372036854775807n, f64: 1.25, f32: 1.5, string: 'value', array: [1, 'two'], object: { nested: true },
      });
  },

  '903-empty-source-vector-text-runtime-inputs.json': () => {
    const params = defineParams({ query_vector: { array: 'f64' }, query_text: 'string', limit: 'i64', tenant: 'string' });
    const common = { tenant: params.ref('tenant'), k: params.ref('limit') };
    return readBatch(params)
      .varAs('vector_nodes', g().vectorSearchNodes({ label: 'ParityUser', property: 'embedding', vector: params.ref('query_vector'), ...common }))
      .varAs('text_nodes', g().textSearchNodes({ label: 'ParityUser', property: 'bio', text: params.ref('query_text'), ...common }))
      .returning(['vector_nodes', 'text_nodes'])
      .withParams({ query_vector: [1, 0, 0], query_text: 'graph', limit: 5, tenant: 'tenant-a' });
  },

  '904-empty-query-and-node-edge-ref-shapes.json': () => readBatch()
    .varAs('all_nodes', g().n().count())
    .varAs('node_ids', g().n([1, 2]).id())
    .varAs('node_var', g().nVar('all_nodes').label())
    .varAs('edge_ids', g().e([1, 2]).id())
    .varAs('edge_var', g().eVar('edge_ids').label())
    .returning(['all_nodes', 'node_ids', 'node_var', 'edge_ids', 'edge_var']),

  '905-empty-traversal-source-mutators.json': () => writeBatch()
    .varAs('inject', g().inject('some_var').count())
    .varAs('drop_edge_by_id', g().dropEdgeById([123456]).count())
    .returning(['inject', 'drop_edge_by_id']),

  '906-nested-query-property-write-shapes.json': () => {
    const params = defineParams({ metadata: 'object' });
    return writeBatch(params)
      .varAs('created', g().addN('ParityNested', { name: 'nested', metadata: { externalID: 'some_id', score: 20, tags: ['alpha', 7] } }))
      .varAs('updated', g().nVar('created').setProperty('metadata', params.ref('metadata')).valueMap(['metadata.externalID']))
      .varAs('target', g().addN('ParityNestedTarget', { name: 'target' }))
      .varAs('edge', g().nVar('created')
        .addE('NESTED_LINK', 'target', { metadata: { externalID: 'edge_id', score: 5, tags: ['alpha', 7] } })
        .count())
      .returning(['created', 'updated', 'edge'])
      .withParams({ metadata: { externalID: 'param_id', score: 22, tags: ['alpha', 7] } });
  },

  '907-nested-query-property-read-shapes.json': () => {
    const params = defineParams({ external_id: 'string' });
    const nested = (): Traversal => g().nWithLabel('ParityNested');
    return readBatch(params)
      .varAs('nested_users', g().nWithLabel('ParityNested', P.eq('metadata.externalID', params.ref('external_id')))
        .where(P.compare('metadata.score', 'gt', 10))
        .orderByMultiple([['metadata.score', 'desc'], ['name', 'asc']])
        .project({ external_id: 'metadata.externalID', score_copy: E.prop('metadata.score') }))
      .varAs('nested_values', nested().values(['metadata.externalID']))
      .varAs('nested_map', nested().valueMap(['metadata.externalID', 'metadata.score']))
      .varAs('nested_edges', g().eWithLabel('NESTED_LINK', P.eq('metadata.externalID', 'edge_id'))
        .edgeHas('metadata.externalID', 'edge_id')
        .edgeProperties())
      .returning(['nested_users', 'nested_values', 'nested_map', 'nested_edges'])
      .withParams({ external_id: 'param_id' });
  },

  '908-edge-endpoint-projection.json': () => readBatch()
    .varAs('endpoints', follows().project({ from_id: '$from.externalId', to_id: '$to.externalId', edge_id: '$id' }))
    .returning(['endpoints']),

  '909-row-binding-basic-projection.json': () => readBatch()
    .varAs('bindings', g().nWithLabel('ParityService').bind('service').projectBindings({
      service_id: B.binding('service', '$id'),
      current_name: B.current('metadata.name'),
      missing_external_id: B.binding('missing_binding', 'externalId'),
    }))
    .returning(['bindings']),

  '910-row-binding-branch-distinct-projection.json': () => readBatch()
    .varAs('workloads', g().nWithLabel('ParityService')
      .bind('service')
      .out('ROUTES_TO')
      .bind('pod')
      .optional((c) => c.in('CREATES').bind('deployment'))
      .union((c) => c.in('MANAGES').bind('owner'), (c) => c.out('ROUTES_TO').bind('workload'))
      .projectBindings({
        service_id: B.binding('service', '$id'),
        workload_id: B.coalesce(B.binding('deployment', '$id'), B.binding('owner', '$id'), B.binding('workload', '$id')),
      }, { distinct: true }))
    .returning(['workloads']),

  '911-range-index-direction.json': () => writeBatch()
    .varAs('node_desc', g().createIndex(Index.nodeRange('ParityUser', 'age', { direction: 'desc' })))
    .varAs('edge_desc', g().createIndex(Index.edgeRange('FOLLOWS', 'weight', { direction: 'desc' })))
    .varAs('node_asc', g().createIndex(Index.nodeRange('ParityUser', 'score')))
    .returning(['node_desc', 'edge_desc', 'node_asc']),

  '912-shortest-path-terminal.json': () => {
    const params = defineParams({ target: 'i64' });
    return readBatch(params)
      .varAs('path', g().shortestPath(1, params.ref('target'), { label: 'FOLLOWS', direction: 'both', maxDepth: 5 }))
      .returning(['path'])
      .withParams({ target: 3 });
  },

  '913-remaining-read-contract.json': () => remainingReadContract(),

  '914-remaining-write-contract.json': () => writeBatch()
    .varAs('edge_equality', g().createIndex(Index.edgeEquality('FOLLOWS', 'since')))
    .varAs('node_euclidean', g().createIndex(Index.nodeVector('ParityUser', 'euclidean_embedding', { dimension: 4, metric: 'euclidean' })))
    .varAs('edge_manhattan', g().createIndex(Index.edgeVector('FOLLOWS', 'manhattan_embedding', { dimension: 4, metric: 'manhattan' })))
    .returning(['edge_equality', 'node_euclidean', 'edge_manhattan']),
};

function remainingReadContract(): AnyBatch {
  const params = defineParams({ date_time: 'date_time' });
  const compareOps = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte'] as const;
  const aggregates = ['count', 'sum', 'min', 'max', 'mean'] as const;
  const emits = ['none', 'before', 'after', 'all'] as const;
  const node1 = (): Traversal => g().n([1]);
  const allNodes = (): Traversal => g().n();

  let b = readBatch(params)
    .varAs('expressions_and_predicates', allNodes()
      .where(P.and(
        P.neq('neq', 1), P.gt('gt', 1), P.gte('gte', 1), P.lt('lt', 1), P.lte('lte', 1),
        P.between('between', 1, 3),
        P.endsWith('suffix', 'end'),
        P.isIn('status', ['active', 'inactive']),
        P.isNull('missing'),
        P.isNotNull('present'),
        P.not(P.eq('disabled', true)),
        ...compareOps.map((op) => P.compare(E.id(), op, 1)),
      ))
      .project({
        id: E.id(),
        timestamp: E.timestamp(),
        datetime: E.now(),
        null: E.const(null),
        date_value: E.const(dateTime(1777000000000)),
        f32: E.const(f32(1.25)),
        bytes: E.const(bytes([1, 2, 3])),
        i64_array: E.const([1, 2, 3]),
        f64_array: E.const([1.25, 2.5]),
        add: E.add(4, 1),
        sub: E.sub(4, 1),
        mul: E.mul(4, 2),
        div: E.div(4, 2),
        mod: E.mod(5, 2),
        case: E.when(P.eq('status', 'active'), 'enabled').otherwise('disabled'),
      }))
    .varAs('both', node1().both().count())
    .varAs('in_e', node1().inE().edgeProperties())
    .varAs('out_e', node1().outE().edgeProperties())
    .varAs('both_e', node1().bothE().edgeProperties())
    .varAs('in_n', g().e().inN().valueMap())
    .varAs('out_n', g().e().outN().valueMap())
    .varAs('other_n', g().e().otherN().valueMap())
    .varAs('direct_has_key', allNodes().hasKey('externalId').count())
    .varAs('has_label', allNodes().hasLabel('ParityUser').count())
    .varAs('exists', allNodes().exists())
    .varAs('choose', allNodes().choose(P.isNotNull('status'), (c) => c.out(), (c) => c.in()).count())
    .varAs('coalesce', allNodes().coalesce((c) => c.out(), (c) => c.in()).count())
    .varAs('group', allNodes().group('status'))
    .varAs('group_count', allNodes().groupCount('status'));
  for (const fn of aggregates) b = b.varAs(`aggregate_${fn}`, allNodes().aggregateBy(fn, 'age'));
  for (const emit of emits) b = b.varAs(`repeat_${emit}`, node1().repeat(__().out(), { emit }).count());
  b = b
    .varAs('shortest_out', g().shortestPath(1, 2, { direction: 'out', maxDepth: 5 }))
    .varAs('shortest_in', g().shortestPath(1, 2, { direction: 'in', maxDepth: 5 }))
    .varAs('vector_edges', g().vectorSearchEdges({ label: 'FOLLOWS', property: 'embedding', vector: [1, 0], k: 5 }).edgeProperties())
    .varAs('vector_nodes_within', users().vectorSearchNodesWithin({ label: 'ParityUser', property: 'embedding', vector: [1, 0, 0], k: 5 }))
    .varAs('vector_edges_within', g().e().hasLabel('FOLLOWS').vectorSearchEdgesWithin({ label: 'FOLLOWS', property: 'embedding', vector: [1, 0], k: 5 }))
    .varAs('text_edges', g().textSearchEdges({ label: 'FOLLOWS', property: 'note', text: 'graph', k: 5 }).edgeProperties())
    .varAs('text_nodes_within', users().textSearchNodesWithin({ label: 'ParityUser', property: 'bio', text: 'graph', k: 5 }))
    .varAs('text_edges_within', g().e().hasLabel('FOLLOWS').textSearchEdgesWithin({ label: 'FOLLOWS', property: 'note', text: 'graph', k: 5 }))
    .varAs('previous', allNodes().count(), Cond.prevNotEmpty())
    .varAs('not_empty', allNodes().count(), Cond.varNotEmpty('expressions_and_predicates'))
    .varAs('empty', allNodes().count(), Cond.varEmpty('missing'))
    .varAs('min_size', allNodes().count(), Cond.varMinSize('expressions_and_predicates', 1))
    .forEach('rows', (body) => body.varAs('foreach', allNodes().count()));
  return b
    .returning([
      'expressions_and_predicates', 'both', 'in_e', 'out_e', 'both_e', 'in_n', 'out_n', 'other_n', 'direct_has_key', 'has_label',
      'exists', 'choose', 'coalesce', 'group', 'group_count',
      ...aggregates.map((fn) => `aggregate_${fn}`),
      ...emits.map((emit) => `repeat_${emit}`),
      'shortest_out', 'shortest_in', 'vector_edges', 'vector_nodes_within', 'vector_edges_within', 'text_edges',
      'text_nodes_within', 'text_edges_within', 'previous', 'not_empty', 'empty', 'min_size', 'foreach',
    ])
    .withParams({ date_time: new Date('2026-01-01T00:00:00.000Z') });
}

// ---- runtime/1xx-2xx-combo-node-<source>-<filter>-<window>-<terminal>.json ----

const comboSources: Record<string, () => Traversal> = {
  label: () => g().nWithLabel('ParityUser'),
  where: () => g().nWhere(P.label('ParityUser')),
  all: () => g().n().hasLabel('ParityUser'),
};
const comboFilters: Record<string, (t: Traversal) => Traversal> = {
  none: (t) => t,
  has: (t) => t.has('status', 'active'),
  logic: (t) => t.where(P.and(
    P.hasKey('externalId'),
    P.or(P.startsWith('name', 'A'), P.endsWith('name', 'b')),
    P.not(P.isNull('age')),
  )),
  expr: (t) => t.where(P.compare(E.prop('score').add(f64(1)), 'gt', f64(65))),
};
const comboWindows: Record<string, (t: Traversal) => Traversal> = {
  none: (t) => t,
  limit: (t) => t.limit(2),
  skip: (t) => t.skip(1),
  range: (t) => t.range(0, 2),
};
const comboTerminals: Record<string, (t: Traversal) => Traversal> = {
  count: (t) => t.count(),
  exists: (t) => t.exists(),
  value_map: (t) => t.valueMap(['externalId', 'name', 'age', 'status']),
  project: (t) => t.project({ externalId: 'externalId', status: 'status', age_plus_two: E.prop('age').add(2) }),
};

const comboName = /^\d{3}-combo-node-([a-z]+)-([a-z]+)-([a-z]+)-([a-z_]+)\.json$/;

/** The builder for a `combo-*` file, from its name; undefined if the name does not fit. */
export function comboDsl(file: string): (() => AnyBatch) | undefined {
  const m = comboName.exec(file);
  if (m === null) return undefined;
  const [, source, filter, window, terminal] = m as unknown as [string, string, string, string, string];
  const start = comboSources[source];
  const narrow = comboFilters[filter];
  const cut = comboWindows[window];
  const finish = comboTerminals[terminal];
  if (!start || !narrow || !cut || !finish) return undefined;
  return () => readBatch()
    .varAs('result', finish(cut(narrow(start())).orderBy('externalId')))
    .returning(['result']);
}

/** The builder for any corpus file name. */
export function dslFor(file: string): (() => AnyBatch) | undefined {
  return corpusDsl[file] ?? comboDsl(file);
}
