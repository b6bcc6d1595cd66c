// Vector indexes through the embedded handle (indexes.md §2, §5, §7, §8.3): lifecycle of
// the vector family, searches and their planning and run-time errors, values a write may
// store, tenant partitions, maintenance under updates, deletes and relabels, `*_within`,
// answers against brute force, and a restart on disk that loads the graphs instead of
// building them again.
import { copyFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openDatabase, type Database } from '../src/index.js';
import { VectorPhysical } from '../src/index/vector-index.js';
import { tempDirs } from './helpers/temp-dirs.js';
import { buildIndex, createIndex, fails, ok, random, runOn, settleIndexWork } from './helpers/search-indexes.js';
import { executeRequest, noFlags } from '../src/exec/request.js';
import { limits } from '../src/limits.js';
import { Store } from '../src/store/store.js';
import { loadSections, sectionsAt } from '../src/store/snapshot-sections.js';
import { q, read, str, write } from './helpers/requests.js';

const newDir = tempDirs('vector-index');

const vectorSpec = (fields: Record<string, unknown>, element: 'node' | 'edge' = 'node') => ({ [`${element}_vector`]: fields });
const create = createIndex;
const build = buildIndex;
const drop = (spec: unknown) => write([q('r', { drop_index: { spec } })], ['r']);
const f32 = (xs: number[]) => ({ value: { f32_array: xs } });




const article = (title: string, embedding: unknown, extra: [string, unknown][] = []) =>
  q(null, { add_n: { label: 'Article', properties: [['title', str(title)], ['embedding', embedding], ...extra] } });

const search = (query: unknown, k: unknown, more: Record<string, unknown> = {}) =>
  ({ vector_search_nodes: { label: 'Article', property: 'embedding', query_vector: query, k, ...more } });
const hits = async (db: Database, query: unknown, k: unknown = { literal: 10 }, more: Record<string, unknown> = {}, parameters?: unknown) =>
  (await ok(db, read([q('r', search(query, k, more))], ['r'], parameters === undefined ? {} : { parameters })))['r'] as { $id: number; $distance: number }[];


/** Brute-force squared Euclidean distance in double precision (the test's own reference). */
const squared = (a: number[], b: number[]) => a.reduce((s, x, i) => s + (x - b[i]!) ** 2, 0);

afterEach(() => vi.restoreAllMocks());

describe('vector index lifecycle and searches', () => {
  it('builds over existing data with the vector family stages and ranks by cosine distance (examples 47-48)', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await ok(db, write([article('Graph basics', f32([1, 0, 0])), article('Vector math', f32([0, 1, 0])), article('Ops notes', f32([1, 1, 0]))], []));
    const done = await build(db, vectorSpec({ label: 'Article', property: 'embedding', dimension: 3, metric: 'cosine' }));
    expect(done).toMatchObject({ status: 'succeeded', family: 'vector', operation_kind: 'build', stage: 'activate' });
    expect((done['progress'] as Record<string, string>)['output_operations']).toBe('3');
    expect(await hits(db, f32([1, 0, 0]), { literal: 2 })).toEqual([{ $distance: 0, $id: 0 }, { $distance: Math.fround((1 - Math.fround(1 / Math.fround(Math.SQRT2))) / 2), $id: 2 }]);
    // An untyped parameter (a generic array of integers) is an acceptable query vector.
    const viaParam = await hits(db, { expr: { param: 'qv' } }, { literal: 3 }, {}, { qv: [0, 1, 0] });
    expect(viaParam.map((r) => r.$id)).toEqual([1, 2, 0]);
    expect(viaParam[0]!.$distance).toBe(0);
    expect(viaParam[2]!.$distance).toBe(0.5);
    // $distance stays on the row through value_map when listed.
    const titled = (await ok(db, read([q('r', { value_map: { input: search(f32([0, 1, 0]), { literal: 1 }), properties: ['title', '$distance'] } })], ['r'])))['r'];
    expect(titled).toEqual([{ $distance: 0, title: 'Vector math' }]);
    await db.close();
  });

  it('answers every planning check of §7.2 in order with its code and status 400', async () => {
    const db = await openDatabase({ storage: 'memory' });
    expect(await fails(db, read([q('r', search(f32([1, 0]), { literal: 1 }))], ['r']))).toMatchObject({ status: 400, error: 'index_not_found' });
    await build(db, vectorSpec({ label: 'Article', property: 'embedding', dimension: 2, metric: 'euclidean' }));
    const plan = async (more: Record<string, unknown>, query: unknown = f32([1, 0]), k: unknown = { literal: 1 }) => fails(db, read([q('r', search(query, k, more))], ['r']));
    expect(await plan({ label: '' })).toMatchObject({ status: 400, error: 'invalid_empty_name' });
    expect(await plan({ tenant_value: str('acme') })).toMatchObject({ status: 400, error: 'invalid_search_tenant' });
    expect(await plan({}, { value: { f64_array: [1, 0] } })).toMatchObject({ status: 400, error: 'invalid_search_input' });
    expect(await plan({}, { value: { string: 'x' } })).toMatchObject({ status: 400, error: 'invalid_search_input' });
    expect(await plan({}, f32([]))).toMatchObject({ status: 400, error: 'invalid_search_input' });
    expect(await plan({}, f32([1, 0]), { literal: 0 })).toMatchObject({ status: 400, error: 'invalid_search_result_count' });
    expect(await plan({}, f32([1, 0]), { expr: { constant: { i64: 0 } } })).toMatchObject({ status: 400, error: 'invalid_search_result_count' });
    expect(await plan({}, f32([1, 0]), { expr: { constant: { i64: -1 } } })).toMatchObject({ status: 400, error: 'invalid_search_result_count_expression' });
    expect(await plan({}, f32([1, 0]), { expr: { constant: { f64: 2.0 } } })).toMatchObject({ status: 400, error: 'invalid_search_result_count_expression' });
    // A dimension the engine cannot hold is refused when the index is created.
    expect(await fails(db, create(vectorSpec({ label: 'Big', property: 'v', dimension: 100_000, metric: 'cosine' })))).toMatchObject({ status: 500, error: 'invalid_vector_configuration' });
    // The edge index of the same label/property does not exist.
    expect(await fails(db, read([q('r', { vector_search_edges: { label: 'Article', property: 'embedding', query_vector: f32([1, 0]), k: { literal: 1 } } })], ['r']))).toMatchObject({ status: 400, error: 'index_not_found' });
    await db.close();
  });

  it('applies the run-time rules of §7.3 to k, the query vector and the tenant', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await build(db, vectorSpec({ label: 'Article', property: 'embedding', dimension: 3, metric: 'euclidean' }));
    await ok(db, write([article('a', f32([1, 2, 3]))], []));
    const run = (parameters: unknown, k: unknown = { expr: { param: 'k' } }) => fails(db, read([q('r', search({ expr: { param: 'v' } }, k))], ['r'], { parameters }));
    expect(await run({ v: [1, 2, 3], k: 0 })).toMatchObject({ status: 500, error: 'invalid_query' });
    expect(await run({ v: [1, 2, 3], k: 'two' })).toMatchObject({ status: 500, error: 'invalid_query' });
    expect(await run({ v: 'not a vector', k: 1 })).toMatchObject({ status: 500, error: 'invalid_query' });
    expect(await run({ v: [], k: 1 })).toMatchObject({ status: 500, error: 'invalid_query' });
    expect(await run({ v: [1, 2], k: 1 })).toMatchObject({ status: 400, error: 'invalid_vector_dimension', msg: 'db error: Invalid vector dimension: expected 3, got 2' });
    expect(await run({ v: [1e30, 0, 0], k: 1 })).toMatchObject({ status: 400, error: 'vector_component_magnitude_exceeded' });
    // A typed array of f32 parameters and an f64_array constant are accepted too.
    const typed = (await ok(db, read([q('r', search({ expr: { param: 'v' } }, { literal: 1 }))], ['r'], { parameters: { v: [1, 2, 4] }, parameter_types: { v: { array: 'f32' } } })))['r'];
    expect(typed).toEqual([{ $distance: 1, $id: 0 }]);
    // A constant is a literal: only an f32_array passes planning (§7.2 step 4).
    expect(await fails(db, read([q('r', search({ expr: { constant: { f64_array: [1, 2, 2] } } }, { literal: 1 }))], ['r']))).toMatchObject({ status: 400, error: 'invalid_search_input' });
    expect((await ok(db, read([q('r', search({ expr: { constant: { f32_array: [1, 2, 2] } } }, { literal: 1 }))], ['r'])))['r']).toEqual([{ $distance: 1, $id: 0 }]);
    expect(typed).toEqual([{ $distance: 1, $id: 0 }]);
    await db.close();
  });

  it('ranks cosine neighbours whose components overflow or vanish in f32 by their true angle, in search and *_within', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await build(db, vectorSpec({ label: 'Article', property: 'embedding', dimension: 3, metric: 'cosine' }));
    // Cosine has no magnitude limit (§8.3), and only the zero vector has no direction.
    const vectors = [[1e30, 1, 1], [1, 0, 0], [0, 1, 0], [1e20, 0, 0], [3e19, 3e19, 0], [1e-30, 1e-30, 0]];
    await ok(db, write(vectors.map((v, i) => article(`v${i}`, f32(v))), []));
    const found = await hits(db, f32([1, 0, 0]));
    const diagonal = Math.fround((1 - Math.SQRT1_2) / 2);
    expect(found.map((r) => r.$id)).toEqual([0, 1, 3, 4, 5, 2]);
    expect(found.map((r) => r.$distance)).toEqual([0, 0, 0, diagonal, diagonal, 0.5]);
    // *_within skips a candidate its int8 copy bounds beyond the k-th distance: not one whose
    // norm overflowed (here 3, after 4 filled k = 1 with 0.146).
    const within = { vector_search_nodes_within: { input: { nodes: { reference: { ids: [4, 2, 3] } } }, label: 'Article', property: 'embedding', query_vector: f32([1, 0, 0]), k: { literal: 1 } } };
    expect((await ok(db, read([q('r', within)], ['r'])))['r']).toEqual([{ $distance: 0, $id: 3 }]);
    await db.close();
  });

  it('refuses stored values §8.3 forbids and rolls the whole write back', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await build(db, vectorSpec({ label: 'Article', property: 'embedding', dimension: 2, metric: 'cosine' }));
    const attempt = (embedding: unknown) => fails(db, write([q(null, { add_n: { label: 'Other', properties: [] } }), article('x', embedding)], []));
    expect(await attempt(f32([1, 2, 3]))).toMatchObject({ status: 400, error: 'invalid_vector_dimension' });
    expect(await attempt(f32([0, 0]))).toMatchObject({ status: 400, error: 'zero_norm_cosine_vector' });
    expect(await attempt({ value: { f64_array: [1e39, 1] } })).toMatchObject({ status: 400, error: 'invalid_vector_component' });
    expect(await attempt(str('nope'))).toMatchObject({ status: 500, error: 'invalid_query' });
    expect(await attempt({ value: { array: [{ i64: 1 }, { string: 'x' }] } })).toMatchObject({ status: 500, error: 'invalid_query' });
    // Nothing of the failed batches stayed: no Other node, no Article.
    expect((await ok(db, read([q('r', { count: { input: { nodes: { reference: 'all' } } } })], ['r'])))['r']).toBe(0);
    // Accepted forms: generic numeric arrays, i64 and f64 arrays.
    const added = await ok(db, write([q('g', { add_n: { label: 'Article', properties: [['embedding', { value: { array: [{ i64: 1 }, { f64: 0.5 }] } }]] } }), q('i', { add_n: { label: 'Article', properties: [['embedding', { value: { i64_array: [3, 4] } }]] } })], ['g', 'i']));
    const idOf = (name: string) => (added[name] as { $id: number }[])[0]!.$id;
    expect((await hits(db, f32([3, 4]), { literal: 2 })).map((r) => r.$id)).toEqual([idOf('i'), idOf('g')]);
    const euclid = await openDatabase({ storage: 'memory' });
    await build(euclid, vectorSpec({ label: 'Article', property: 'embedding', dimension: 8, metric: 'euclidean' }));
    // √(F / 8d) = √(3.4028235e38 / 64) ≈ 2.3058e18: 1e18 passes, 1e19 does not.
    await ok(euclid, write([article('big', f32([1e18, 0, 0, 0, 0, 0, 0, 0]))], []));
    expect(await fails(euclid, write([article('bigger', f32([1e19, 0, 0, 0, 0, 0, 0, 0]))], []))).toMatchObject({ status: 400, error: 'vector_component_magnitude_exceeded' });
    await euclid.close();
    await db.close();
  });

  it('keeps searches exact under updates, deletes, relabels and rolled-back writes', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await build(db, vectorSpec({ label: 'Article', property: 'embedding', dimension: 2, metric: 'euclidean' }));
    await ok(db, write([article('a', f32([0, 0])), article('b', f32([10, 0])), article('c', f32([20, 0]))], []));
    const ids = async () => (await hits(db, f32([0, 0]))).map((r) => r.$id);
    expect(await ids()).toEqual([0, 1, 2]);
    // Update: node 2 moves next to the query.
    await ok(db, write([q(null, { set_property: { input: { nodes: { reference: { ids: [2] } } }, name: 'embedding', value: f32([1, 0]) } })], []));
    expect(await hits(db, f32([0, 0]))).toEqual([{ $distance: 0, $id: 0 }, { $distance: 1, $id: 2 }, { $distance: 100, $id: 1 }]);
    // Other properties change nothing.
    await ok(db, write([q(null, { set_property: { input: { nodes: { reference: { ids: [2] } } }, name: 'title', value: str('cc') } })], []));
    expect(await ids()).toEqual([0, 2, 1]);
    // Remove the property, relabel, drop: each leaves the index.
    await ok(db, write([q(null, { remove_property: { input: { nodes: { reference: { ids: [0] } } }, name: 'embedding' } })], []));
    expect(await ids()).toEqual([2, 1]);
    await ok(db, write([q(null, { set_property: { input: { nodes: { reference: { ids: [2] } } }, name: '$label', value: str('Draft') } })], []));
    expect(await ids()).toEqual([1]);
    await ok(db, write([q(null, { set_property: { input: { nodes: { reference: { ids: [2] } } }, name: '$label', value: str('Article') } })], []));
    expect(await ids()).toEqual([2, 1]);
    await ok(db, write([q(null, { drop: { input: { nodes: { reference: { ids: [1] } } } } })], []));
    expect(await ids()).toEqual([2]);
    // A write that fails after indexing a vector leaves no trace of it.
    await fails(db, write([article('d', f32([0, 0])), article('e', f32([1, 2, 3]))], []));
    expect(await ids()).toEqual([2]);
    await db.close();
  });

  it('partitions by tenant: a search sees only its tenant, an unknown tenant nothing, a missing tenant value is a run-time error', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await build(db, vectorSpec({ label: 'Article', property: 'embedding', dimension: 2, metric: 'manhattan', tenant_property: 'team' }));
    await ok(db, write([
      article('core1', f32([0, 0]), [['team', str('core')]]), article('infra1', f32([0, 0]), [['team', str('infra')]]),
      article('core2', f32([1, 1]), [['team', str('core')]]), article('none', f32([0, 0])),
      article('five', f32([0, 0]), [['team', { value: { i64: 5 } }]]),
    ], []));
    const tenantHits = async (tenant: unknown) => (await hits(db, f32([0, 0]), { literal: 10 }, { tenant_value: tenant })).map((r) => r.$id);
    expect(await tenantHits(str('core'))).toEqual([0, 2]);
    expect(await tenantHits(str('infra'))).toEqual([1]);
    expect(await tenantHits(str('nobody'))).toEqual([]);
    // Typed equality: f64 5.0 is the i64 5 tenant.
    expect(await tenantHits({ value: { f64: 5.0 } })).toEqual([4]);
    expect(await fails(db, read([q('r', search(f32([0, 0]), { literal: 1 }))], ['r']))).toMatchObject({ status: 500, error: 'invalid_query' });
    expect(await fails(db, read([q('r', search(f32([0, 0]), { literal: 1 }, { tenant_value: { value: 'null' } }))], ['r']))).toMatchObject({ status: 400, error: 'invalid_search_tenant_value' });
    // Moving an element to another tenant moves its point.
    await ok(db, write([q(null, { set_property: { input: { nodes: { reference: { ids: [0] } } }, name: 'team', value: str('infra') } })], []));
    expect(await tenantHits(str('core'))).toEqual([2]);
    expect(await tenantHits(str('infra'))).toEqual([0, 1]);
    await db.close();
  });

  it('ranks exactly the distinct input elements in *_within searches', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await build(db, vectorSpec({ label: 'Article', property: 'embedding', dimension: 2, metric: 'euclidean' }));
    await ok(db, write([article('a', f32([3, 0])), article('b', f32([1, 0])), article('c', f32([2, 0])), q(null, { add_n: { label: 'Tag', properties: [] } })], []));
    const within = (ids: number[], k = 10) => ({ vector_search_nodes_within: { input: { nodes: { reference: { ids } } }, label: 'Article', property: 'embedding', query_vector: f32([0, 0]), k: { literal: k } } });
    // Node 3 (a Tag) is no candidate; node 1 is not in the input.
    expect((await ok(db, read([q('r', within([0, 2, 3]))], ['r'])))['r']).toEqual([{ $distance: 4, $id: 2 }, { $distance: 9, $id: 0 }]);
    expect((await ok(db, read([q('r', within([0, 1, 2], 2))], ['r'])))['r']).toEqual([{ $distance: 1, $id: 1 }, { $distance: 4, $id: 2 }]);
    // Duplicates count once (two parallel edges from the Tag reach node 0 twice); empty input gives nothing.
    const parallel = { add_e: { input: { nodes: { reference: { ids: [3] } } }, label: 'P', to: { ids: [0] }, properties: [] } };
    await ok(db, write([q(null, parallel), q(null, parallel)], []));
    const twice = { out_n: { input: { out_e: { input: { nodes: { reference: { ids: [3] } } }, label: 'P' } } } };
    expect(((await ok(db, read([q('r', { id: { input: twice } })], ['r'])))['r'])).toEqual([0, 0]);
    const dup = { vector_search_nodes_within: { input: twice, label: 'Article', property: 'embedding', query_vector: f32([0, 0]), k: { literal: 5 } } };
    expect((await ok(db, read([q('r', dup)], ['r'])))['r']).toEqual([{ $distance: 9, $id: 0 }]);
    // Keys that ascend and then repeat (Tag 3 links to 0, 1, 2 and a new Tag 4 to 0, 1), or
    // descend: each element once.
    await ok(db, write([q(null, { add_n: { label: 'Tag', properties: [] } })], []));
    await ok(db, write([q(null, { add_e: { input: { nodes: { reference: { ids: [3] } } }, label: 'Q', to: { ids: [0, 1, 2] }, properties: [] } }), q(null, { add_e: { input: { nodes: { reference: { ids: [4] } } }, label: 'Q', to: { ids: [0, 1] }, properties: [] } })], []));
    const repeating = { out: { input: { nodes: { reference: { ids: [3, 4] } } }, label: 'Q' } };
    expect(((await ok(db, read([q('r', { id: { input: repeating } })], ['r'])))['r'])).toEqual([0, 1, 2, 0, 1]);
    const three = [{ $distance: 1, $id: 1 }, { $distance: 4, $id: 2 }, { $distance: 9, $id: 0 }];
    expect((await ok(db, read([q('r', { ...within([]), vector_search_nodes_within: { ...within([]).vector_search_nodes_within, input: repeating } })], ['r'])))['r']).toEqual(three);
    expect((await ok(db, read([q('r', within([2, 1, 0]))], ['r'])))['r']).toEqual(three);
    // Rows with bindings keep them (the first row of each element), in the same order.
    const bound = { out: { input: { bind: { input: { nodes: { reference: { ids: [3] } } }, name: 'tag' } }, label: 'Q' } };
    const annotated = three.map((row) => ({ bindings: { tag: { node: 3 } }, current: { node: row.$id } }));
    expect((await ok(db, read([q('r', { vector_search_nodes_within: { ...within([]).vector_search_nodes_within, input: bound } })], ['r'])))['r']).toEqual(annotated);
    // (An input of at most one row makes the entry's shape one element: empty is null.)
    expect((await ok(db, read([q('r', within([]))], ['r'])))['r']).toBeNull();
    // Edge rows into a node search are an error.
    await ok(db, write([q(null, { add_e: { input: { nodes: { reference: { ids: [0] } } }, label: 'L', to: { ids: [1] }, properties: [] } })], []));
    const edgesIn = { vector_search_nodes_within: { input: { edges: { reference: 'all' } }, label: 'Article', property: 'embedding', query_vector: f32([0, 0]), k: { literal: 1 } } };
    expect(await fails(db, read([q('r', edgesIn)], ['r']))).toMatchObject({ status: 500, error: 'invalid_query' });
    await db.close();
  });

  it('drops: searches fail at planning, a re-created index gets generation 2 and serves again', async () => {
    const db = await openDatabase({ storage: 'memory' });
    const spec = vectorSpec({ label: 'Article', property: 'embedding', dimension: 2, metric: 'euclidean' });
    await build(db, spec);
    await ok(db, write([article('a', f32([1, 0]))], []));
    const receipt = (await ok(db, drop(spec)))['r'] as Record<string, string>;
    expect(receipt['kind']).toBe('accepted');
    expect(await fails(db, read([q('r', search(f32([1, 0]), { literal: 1 }))], ['r']))).toMatchObject({ status: 400, error: 'index_not_found' });
    for (let i = 0; i < 1000; i++) {
      const s = (await ok(db, read([q('r', { get_index_operation: { operation_id: receipt['operation_id'] } })], ['r'])))['r'] as Record<string, string>;
      if (s['status'] === 'succeeded') {
        expect(s['stage']).toBe('finalize');
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    const again = await build(db, spec);
    expect(again).toMatchObject({ status: 'succeeded', generation: '2' });
    expect(await hits(db, f32([1, 0]))).toEqual([{ $distance: 0, $id: 0 }]);
    await db.close();
  });

  it('blocks a build over invalid source data with invalid_source_data, and retry passes once the data is fixed', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await ok(db, write([article('ok', f32([1, 0])), article('bad', f32([1, 0, 0]))], []));
    const blocked = await build(db, vectorSpec({ label: 'Article', property: 'embedding', dimension: 2, metric: 'euclidean' }));
    expect(blocked).toMatchObject({ status: 'blocked', stage: 'validate_descriptor', blocker_code: 'invalid_source_data' });
    await ok(db, write([q(null, { set_property: { input: { nodes: { reference: { ids: [1] } } }, name: 'embedding', value: f32([0, 1]) } })], []));
    await ok(db, write([q('r', { retry_index_operation: { operation_id: blocked['operation_id'] } })], ['r']));
    for (let i = 0; i < 1000; i++) {
      const s = (await ok(db, read([q('r', { get_index_operation: { operation_id: blocked['operation_id'] } })], ['r'])))['r'] as Record<string, string>;
      if (s['status'] === 'succeeded') break;
      if (i === 999) throw new Error(`retry did not succeed: ${JSON.stringify(s)}`);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    expect((await hits(db, f32([0, 1]))).map((r) => r.$id)).toEqual([1, 0]);
    await db.close();
  });

  it('answers a large partition from the graph: exact distances, recall against brute force, later writes visible', async () => {
    const db = await openDatabase({ storage: 'memory' });
    const rnd = random(7);
    const dimension = 8;
    const data: number[][] = [];
    for (let batch = 0; batch < 6; batch++) {
      const entries = [];
      for (let i = 0; i < 500; i++) {
        const v = Array.from({ length: dimension }, () => Math.fround(rnd() * 2 - 1));
        data.push(v);
        entries.push(article(`n${data.length - 1}`, f32(v)));
      }
      await ok(db, write(entries, []));
    }
    await build(db, vectorSpec({ label: 'Article', property: 'embedding', dimension, metric: 'euclidean' }));
    let found = 0;
    const queries = 30;
    for (let t = 0; t < queries; t++) {
      const query = Array.from({ length: dimension }, () => Math.fround(rnd() * 2 - 1));
      const answer = await hits(db, f32(query), { literal: 10 });
      expect(answer).toHaveLength(10);
      const truth = data.map((v, id) => ({ id, d: squared(v, query) })).sort((a, b) => a.d - b.d).slice(0, 10).map((x) => x.id);
      for (const row of answer) {
        expect(row.$distance).toBeCloseTo(squared(data[row.$id]!, query), 4);
        if (truth.includes(row.$id)) found++;
      }
      // Ascending distance, ties by ascending id.
      for (let i = 1; i < answer.length; i++) expect(answer[i - 1]!.$distance < answer[i]!.$distance || (answer[i - 1]!.$distance === answer[i]!.$distance && answer[i - 1]!.$id < answer[i]!.$id)).toBe(true);
    }
    expect(found / (queries * 10)).toBeGreaterThanOrEqual(0.9);
    // A point written after activation is found at once.
    await ok(db, write([article('new', f32(Array(dimension).fill(5)))], []));
    expect((await hits(db, f32(Array(dimension).fill(5)), { literal: 1 }))[0]).toEqual({ $distance: 0, $id: 3000 });
    await db.close();
  });
});

describe('an operation succeeded only as of a snapshot that holds it', () => {
  it('get_index_operation in a read says running until the batch that made it succeeded is visible; then the index answers', () => {
    // As under durable storage: commits are published only when durable.
    const store = Store.create();
    store.publishOnCommit = false;
    const publish = () => store.publish(store.committedEpoch());
    runOn(store, write([article('a', f32([1, 0])), article('b', f32([0, 1]))], []));
    const receipt = runOn(store, create(vectorSpec({ label: 'Article', property: 'embedding', dimension: 2, metric: 'euclidean' })))['r'] as Record<string, string>;
    publish();
    const status = () => (runOn(store, read([q('r', { get_index_operation: { operation_id: receipt['operation_id']! } })], ['r']), 'reader')['r'] as Record<string, string>);
    const searched = () => executeRequest(store, JSON.stringify(read([q('r', search(f32([1, 0]), { literal: 1 }))], ['r'])), noFlags, 'reader');
    settleIndexWork(store); // the activation committed, not yet durable
    // A probe saw `succeeded` here, then index_not_found from the search it made next.
    expect(status()).toMatchObject({ status: 'running', stage: 'activate' });
    expect(searched()).toMatchObject({ status: 400, body: expect.stringContaining('index_not_found') });
    publish();
    expect(status()).toMatchObject({ status: 'succeeded', stage: 'activate' });
    expect(searched()).toEqual({ status: 200, body: '{"r":[{"$distance":0.0,"$id":0}]}' });

    // The drop likewise: succeeded once its last batch is visible.
    const dropped = runOn(store, drop(vectorSpec({ label: 'Article', property: 'embedding', dimension: 2, metric: 'euclidean' })))['r'] as Record<string, string>;
    publish();
    const dropStatus = () => (runOn(store, read([q('r', { get_index_operation: { operation_id: dropped['operation_id']! } })], ['r']), 'reader')['r'] as Record<string, string>);
    for (let i = 0; i < 100 && dropStatus()['status'] !== 'succeeded'; i++) {
      settleIndexWork(store);
      expect(dropStatus()['status']).not.toBe('succeeded');
      publish();
    }
    expect(dropStatus()['status']).toBe('succeeded');
  });
});

describe('vector index compaction', () => {
  it('copies a half-dead partition without its dead points while writes go on, and answers stay exact', async () => {
    const db = await openDatabase({ storage: 'memory' });
    const rnd = random(3);
    const data = new Map<number, number[]>();
    const vec = () => [rnd(), rnd(), rnd(), rnd()].map((x) => Math.fround(x));
    await build(db, vectorSpec({ label: 'Article', property: 'embedding', dimension: 4, metric: 'euclidean' }));
    for (let b = 0; b < 6; b++) {
      const vs = Array.from({ length: 500 }, vec);
      const added = await ok(db, write(vs.map((v, i) => q(`n${i}`, { add_n: { label: 'Article', properties: [['embedding', f32(v)]] } })), vs.map((_, i) => `n${i}`)));
      vs.forEach((v, i) => data.set((added[`n${i}`] as { $id: number }[])[0]!.$id, v));
    }
    const runtime = (db as unknown as { backing: { committer: { storage: { store: { indexes: { searches: Map<number, { partitions: { list: { graph: { pointCount(): number; root: number } }[] } }> } } } } } }).backing.committer.storage.store.indexes;
    const graph = () => [...runtime.searches.values()][0]!.partitions.list[0]!.graph;
    const rootBefore = graph().root;
    expect(graph().pointCount()).toBe(3000);
    const slice = limits.vectorBuildSliceMs;
    (limits as { vectorBuildSliceMs: number }).vectorBuildSliceMs = 1;
    try {
      // Drop two thirds: the partition is more than half dead.
      const doomed = [...data.keys()].filter((id) => id % 3 !== 0);
      await ok(db, write([q(null, { drop: { input: { nodes: { reference: { ids: doomed } } } } })], []));
      for (const id of doomed) data.delete(id);
      // Writes while the copy runs: updates and deletes of copied and uncopied points, inserts.
      for (let round = 0; round < 10; round++) {
        const ids = [...data.keys()];
        const moved = ids[Math.floor(rnd() * ids.length)]!, gone = ids[Math.floor(rnd() * ids.length)]!;
        const v = vec();
        await ok(db, write([q(null, { set_property: { input: { nodes: { reference: { ids: [moved] } } }, name: 'embedding', value: f32(v) } })], []));
        data.set(moved, v);
        if (gone !== moved) {
          await ok(db, write([q(null, { drop: { input: { nodes: { reference: { ids: [gone] } } } } })], []));
          data.delete(gone);
        }
        const fresh = vec();
        const added = await ok(db, write([q('n', { add_n: { label: 'Article', properties: [['embedding', f32(fresh)]] } })], ['n']));
        data.set((added['n'] as { $id: number }[])[0]!.$id, fresh);
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      for (let i = 0; i < 2000 && graph().root === rootBefore; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    } finally {
      (limits as { vectorBuildSliceMs: number }).vectorBuildSliceMs = slice;
    }
    expect(graph().root).not.toBe(rootBefore);
    // The new graph holds the live points (and those removed after the compaction started), not the 2000 dropped before.
    expect(graph().pointCount()).toBeLessThan(1100);
    expect(graph().pointCount()).toBeGreaterThanOrEqual(data.size);
    for (let t = 0; t < 20; t++) {
      const query = vec();
      const truth = [...data.entries()].map(([id, v]) => ({ id, d: squared(v, query) })).sort((a, b) => a.d - b.d || a.id - b.id).slice(0, 5);
      const answer = await hits(db, f32(query), { literal: 5 });
      expect(answer.map((r) => r.$id)).toEqual(truth.map((x) => x.id));
    }
    await db.close();
  });
});

describe('vector indexes on disk', () => {
  it('survive a restart with their graphs loaded from the snapshot, not built again, and take later writes', async () => {
    const path = newDir();
    const spec = vectorSpec({ label: 'Article', property: 'embedding', dimension: 2, metric: 'euclidean', tenant_property: 'team' });
    let db = await openDatabase({ storage: 'disk', path });
    await ok(db, write([article('a', f32([0, 0]), [['team', str('x')]]), article('b', f32([1, 0]), [['team', str('x')]]), article('c', f32([0, 0]), [['team', str('y')]])], []));
    await build(db, spec);
    await ok(db, write([article('d', f32([2, 0]), [['team', str('x')]])], []));
    await db.close(); // a clean stop writes a snapshot
    const materialize = vi.spyOn(VectorPhysical.prototype, 'materialize');
    db = await openDatabase({ storage: 'disk', path });
    expect(materialize).not.toHaveBeenCalled();
    const x = async () => (await hits(db, f32([0, 0]), { literal: 10 }, { tenant_value: str('x') })).map((r) => r.$id);
    expect(await x()).toEqual([0, 1, 3]);
    expect((await hits(db, f32([0, 0]), { literal: 10 }, { tenant_value: str('y') })).map((r) => r.$id)).toEqual([2]);
    // Writes after the restart are maintained, also for points that came from the snapshot.
    await ok(db, write([q(null, { drop: { input: { nodes: { reference: { ids: [0] } } } } }), article('e', f32([0.5, 0]), [['team', str('x')]])], []));
    expect(await x()).toEqual([4, 1, 3]);
    await db.close();
    // A restart that replays the log after the snapshot ends in the same state.
    db = await openDatabase({ storage: 'disk', path });
    expect(await x()).toEqual([4, 1, 3]);
    await db.close();
  });

  it('rebuilds from the data when only the log holds the activation', async () => {
    const path = newDir();
    let db = await openDatabase({ storage: 'disk', path });
    await ok(db, write([article('a', f32([0, 0])), article('b', f32([3, 0]))], []));
    await build(db, vectorSpec({ label: 'Article', property: 'embedding', dimension: 2, metric: 'euclidean' }));
    await ok(db, write([article('c', f32([2, 0]))], []));
    // The files a crash leaves (no clean stop, so no snapshot after the build): only the log holds the activation.
    const copy = newDir();
    for (const f of readdirSync(path).filter((f) => /^(wal|snapshot)-/.test(f))) copyFileSync(join(path, f), join(copy, f));
    await db.close();
    const materialize = vi.spyOn(VectorPhysical.prototype, 'materialize');
    db = await openDatabase({ storage: 'disk', path: copy });
    expect(materialize).toHaveBeenCalledTimes(1);
    expect((await hits(db, f32([3, 0]))).map((r) => r.$id)).toEqual([1, 2, 0]);
    await db.close();
  });
});

describe('vector graphs in snapshots', () => {
  const run = runOn;
  const settleIndexes = settleIndexWork;
  const everything = (store: Store) => run(store, read([q('r', { vector_search_nodes: { label: 'Article', property: 'embedding', tenant_value: { expr: { param: 't' } }, query_vector: f32([0, 0, 0]), k: { literal: 1000 } } })], ['r'], { parameters: { t: 'a' } }), 'reader')['r'];

  it('a snapshot cut while the writer inserts, updates and deletes holds the graphs as of the cut, and loads without a rebuild', () => {
    const rnd = random(11);
    const vec = () => f32([rnd(), rnd(), rnd()].map((x) => Math.fround(x * 10)));
    const live = Store.create(), upToCut = Store.create();
    const both = (request: unknown) => { run(live, request); run(upToCut, request); };
    both(create(vectorSpec({ label: 'Article', property: 'embedding', dimension: 3, metric: 'euclidean', tenant_property: 'team' })));
    settleIndexes(live);
    settleIndexes(upToCut);
    for (let b = 0; b < 5; b++) both(write(Array.from({ length: 200 }, (_, i) => article(`${b}.${i}`, vec(), [['team', str(i % 3 === 0 ? 'b' : 'a')]])), []));
    const cut = live.cut();
    // After the cut: inserts, updates of points the cut holds, deletes.
    run(live, write(Array.from({ length: 300 }, (_, i) => article(`late${i}`, vec(), [['team', str('a')]])), []));
    run(live, write([q(null, { set_property: { input: { nodes: { reference: { ids: [1, 2, 4] } } }, name: 'embedding', value: vec() } })], []));
    run(live, write([q(null, { drop: { input: { nodes: { reference: { ids: [5, 7, 8] } } } } })], []));
    // More than half dropped: the partition is compacted, and new points take memory; the
    // graph the cut names must stay readable for its export.
    run(live, write([q(null, { drop: { input: { nodes: { reference: { ids: Array.from({ length: 800 }, (_, i) => 100 + i) } } } } })], []));
    settleIndexes(live);
    run(live, write(Array.from({ length: 300 }, () => article('later', vec(), [['team', str('a')]])), []));
    const sections = sectionsAt(live.shared, cut);
    expect(sections.map((s) => s.name)).toContain('vectors');
    const materialize = vi.spyOn(VectorPhysical.prototype, 'materialize');
    const loaded = loadSections(sections);
    expect(materialize).not.toHaveBeenCalled();
    expect(everything(loaded)).toEqual(everything(upToCut));
    // The loaded store goes on like the one that stopped at the cut.
    const later = write([article('after', f32([0, 0, 0]), [['team', str('a')]]), q(null, { drop: { input: { nodes: { reference: { ids: [3] } } } } })], []);
    run(loaded, later);
    run(upToCut, later);
    expect(everything(loaded)).toEqual(everything(upToCut));
    expect((everything(loaded) as unknown[])[0]).toEqual({ $distance: 0, $id: 1000 });
  });
});
