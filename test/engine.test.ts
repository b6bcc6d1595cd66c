// Engine behaviour through the embedded handle: transactions, ID sequences, error codes.
import { describe, expect, it } from 'vitest';
import { openDatabase, SvcError } from '../src/index.js';
import { limits } from '../src/limits.js';
import { annKnowsBo, dumpAll, addN, count, i64, nodes, nodesVar, q, read, str, write } from './helpers/requests.js';

async function seeded() {
  const db = await openDatabase({ storage: 'memory' });
  await db.query(annKnowsBo);
  return db;
}


async function errorOf(p: Promise<unknown>): Promise<SvcError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof SvcError) return err;
    throw err;
  }
  throw new Error('expected the query to fail');
}

describe('transactions', () => {
  it('a multi-entry write whose last entry fails leaves the store exactly as before', async () => {
    const db = await seeded();
    const before = await db.queryRaw(dumpAll);
    const err = await errorOf(db.query(write([
      q('c', addN('User', [['name', str('Cy')]])),
      q(null, { set_property: { input: nodes([0]), name: 'age', value: i64(99) } }),
      q(null, { drop: { input: nodes([1]) } }),
      q(null, { add_e: { input: nodesVar('c'), label: 'KNOWS', to: { ids: [12345] }, properties: [] } }),
    ], ['c'])));
    expect(err.code).toBe('node_not_found');
    expect(err.status).toBe(500);
    expect(await db.queryRaw(dumpAll)).toEqual(before);
  });

  it('later entries see earlier uncommitted effects', async () => {
    const db = await seeded();
    const r = await db.query(write([
      q('c', addN('User', [['name', str('Cy')]])),
      q('n', count({ nodes_where: { predicate: { eq: { left: { property: '$label' }, right: { constant: { string: 'User' } } } } } })),
    ], ['n']));
    expect(r).toEqual({ n: 3 });
  });

  it('IDs of a failed write stay consumed', async () => {
    const db = await seeded();
    await errorOf(db.query(write([q('c', addN('User')), q(null, { add_e: { input: nodesVar('c'), label: 'X', to: { ids: [999] }, properties: [] } })], [])));
    const r = await db.query(write([q('d', addN('User')), q('f', { add_e: { input: nodesVar('d'), label: 'X', to: { ids: [0] }, properties: [] } })], ['d', 'f']));
    expect(r).toEqual({ d: [{ $id: 3 }], f: [{ $id: 2 }] });
  });

  it('a relabel is atomic with the batch and visible afterwards', async () => {
    const db = await seeded();
    await db.query(write([q(null, { set_property: { input: nodes([0]), name: '$label', value: str('Admin') } })], []));
    expect(await db.query(read([q('l', { label: { input: nodes([0, 1]) } })], ['l']))).toEqual({ l: ['Admin', 'User'] });
  });
});

describe('error codes', () => {
  const cases: [string, unknown, string, number][] = [
    ['empty entries', read([], []), 'invalid_batch_arity', 400],
    ['empty entry name', read([q('', nodes('all'))], []), 'invalid_empty_name', 400],
    ['duplicate return', read([q('x', nodes('all'))], ['x', 'x']), 'duplicate_return_variable', 400],
    ['unknown return', read([q('x', nodes('all'))], ['y']), 'internal_planner_error', 400],
    ['prev_not_empty first', read([q('x', nodes('all'), 'prev_not_empty')], []), 'invalid_initial_batch_condition', 400],
    ['var_min_size 0', read([q('x', nodes('all')), q('y', nodes('all'), { var_min_size: ['x', 0] })], []), 'invalid_batch_condition_min_size', 400],
    ['duplicate ids', read([q('x', nodes([1, 1]))], []), 'duplicate_element_id', 400],
    ['context at top level', read([q('x', { out: { input: 'context', label: null } })], []), 'unbound_context', 400],
    ['empty and', read([q('x', { nodes_where: { predicate: { and: { predicates: [] } } } })], []), 'invalid_predicate_arity', 400],
    ['duplicate order key', read([q('x', { order_by_multiple: { input: nodes('all'), orderings: [['a', 'asc'], ['a', 'desc']] } })], []), 'duplicate_order_key', 400],
    ['no order keys', read([q('x', { order_by_multiple: { input: nodes('all'), orderings: [] } })], []), 'invalid_order_keys', 400],
    ['empty values', read([q('x', { values: { input: nodes('all'), properties: [] } })], []), 'invalid_projection_arity', 400],
    ['duplicate selection', read([q('x', { value_map: { input: nodes('all'), properties: ['a', 'a'] } })], []), 'duplicate_property_selection', 400],
    ['duplicate alias', read([q('x', { project: { input: nodes('all'), projections: [{ property: { source: 'a', alias: 'k' } }, { property: { source: 'b', alias: 'k' } }] } })], []), 'duplicate_projection_alias', 400],
    ['range start > end', read([q('x', { range: { input: nodes('all'), start: { literal: 3 }, end: { literal: 1 } } })], []), 'invalid_stream_range', 400],
    ['negative bound constant', read([q('x', { limit: { input: nodes('all'), count: { expr: { constant: { i64: -1 } } } } })], []), 'invalid_stream_bound_expression', 400],
    ['duplicate assignment', write([q('x', addN('U', [['a', i64(1)], ['a', i64(2)]]))], []), 'duplicate_property_assignment', 400],
    ['edges all target', write([q('x', { drop_edge_by_id: { edges: 'all' } })], []), 'unsupported_edge_all_target', 400],
    ['bind in write batch', write([q('x', { bind: { input: nodes('all'), name: 'b' } })], []), 'read_only_traversal_in_write_batch', 400],
    ['source in branch', read([q('x', { union: { input: nodes('all'), traversals: [{ root: nodes('all') }, { root: 'context' }] } })], []), 'invalid_sub_traversal_operation', 400],
    ['union arity', read([q('x', { union: { input: nodes('all'), traversals: [{ root: 'context' }] } })], []), 'invalid_branch_arity', 400],
    ['repeat times 0', read([q('x', { repeat: { input: nodes('all'), config: { traversal: { root: 'context' }, times: 0, emit: 'none', max_depth: 3 } } })], []), 'invalid_repeat_count', 400],
    ['emit_predicate without after', read([q('x', { repeat: { input: nodes('all'), config: { traversal: { root: 'context' }, emit: 'all', emit_predicate: { has_key: { property: 'a' } }, max_depth: 3 } } })], []), 'invalid_repeat_emit', 400],
    ['order after bind', read([q('x', { order_by: { input: { bind: { input: nodes('all'), name: 'b' } }, property: 'a', order: 'asc' } })], []), 'invalid_after_bind_operation', 400],
    ['shortest path depth 0', read([q('x', { shortest_path: { source: { ids: [0] }, target: { ids: [1] }, label: null, direction: 'out', max_depth: 0 } })], []), 'invalid_shortest_path_count', 400],
    ['wrapped shortest path', read([q('x', count({ shortest_path: { source: { ids: [0] }, target: { ids: [1] }, label: null, direction: 'out', max_depth: 3 } }))], []), 'internal_planner_error', 400],
    ['search without index', read([q('x', { vector_search_nodes: { label: 'A', property: 'v', query_vector: { value: { f32_array: [1] } }, k: { literal: 1 } } })], []), 'index_not_found', 400],
    ['bad operation id', read([q('x', { get_index_operation: { operation_id: 'nope' } })], []), 'invalid_index_operation_id', 400],
    ['unknown index spec variant', write([q('x', { create_index: { spec: { node_secondary: { label: 'U', property: 'a' } }, if_not_exists: true } })], ['x']), 'invalid_query_json', 400],
    ['vector index dimension the engine cannot hold', write([q('x', { create_index: { spec: { node_vector: { label: 'U', property: 'a', dimension: 1_000_000, metric: 'cosine' } }, if_not_exists: true } })], ['x']), 'invalid_vector_configuration', 500],
    ['mutation in read batch', read([q('x', addN('U'))], []), 'invalid_query_json', 400],
    ['request_type mismatch', { request_type: 'read', query: { write: { entries: [q('x', addN('U'))] } } }, 'invalid_query_json', 400],
    ['Read capitalized', { request_type: 'Read', query: { read: { entries: [q('x', nodes('all'))] } } }, 'invalid_query_json', 400],
    ['unknown operation', read([q('x', { teleport: { input: nodes('all') } })], []), 'invalid_query_json', 400],
    ['plain value where tagged expected', read([q('x', { has: { input: nodes('all'), property: 'a', value: 5 } })], []), 'invalid_query_json', 400],
    ['typed parameter mismatch', read([q('x', nodes('all'))], [], { parameters: { n: 1.5 }, parameter_types: { n: 'i64' } }), 'invalid_query_json', 400],
    ['typed parameter missing', read([q('x', nodes('all'))], [], { parameters: {}, parameter_types: { n: 'i64' } }), 'invalid_query_json', 400],
    ['unbound parameter at run time', read([q('x', { limit: { input: nodes('all'), count: { expr: { param: 'n' } } } })], []), 'invalid_query', 500],
    ['unbound variable in condition', read([q('x', nodes('all'), { var_empty: 'nope' })], []), 'invalid_query', 500],
    ['mod by zero', read([q('x', { project: { input: nodes([0]), projections: [{ expr: { alias: 'm', expr: { mod: { left: { constant: { i64: 1 } }, right: { constant: { i64: 0 } } } } } }] } })], ['x']), 'invalid_query', 500],
    ['add_e without targets', write([q('x', { add_e: { input: nodes([0]), label: 'X', to: { ids: [] }, properties: [] } })], []), 'invalid_query', 500],
    ['$label in property list', write([q('x', addN('U', [['$label', str('V')]]))], []), 'invalid_query', 500],
  ];
  for (const [what, request, code, status] of cases) {
    it(`${what} -> ${status} ${code}`, async () => {
      const db = await seeded();
      const before = await db.queryRaw(dumpAll);
      const { status: got, body } = await db.queryRaw(request);
      expect({ status: got, error: JSON.parse(body).error }).toEqual({ status, error: code });
      expect(Object.keys(JSON.parse(body)).sort()).toEqual(['error', 'msg']);
      expect(await db.queryRaw(dumpAll)).toEqual(before);
    });
  }

  it('embedded rejects gateway and routing options with invalid_request', async () => {
    const db = await seeded();
    const err = await errorOf(db.query(read([q('x', nodes('all'))], ['x']), { warm: true }));
    expect(err.code).toBe('invalid_request');
    expect(err.status).toBe(400);
  });

  it('20,000 levels of nesting fail cleanly', async () => {
    const db = await seeded();
    const body = `{"request_type":"read","query":{"read":{"entries":[{"query":{"name":"x","root":${'{"not":{"predicate":'.repeat(20000)}{"has_key":{"property":"a"}}${'}}'.repeat(20000)}}}],"returns":[]}}}`;
    const { status, body: answer } = await db.queryRaw(body);
    expect(status).toBe(400);
    expect(JSON.parse(answer).error).toBe('invalid_query_json');
  });
});

describe('values round-trip', () => {
  it('stores and renders every value variant exactly, including "__proto__" member names', async () => {
    const db = await openDatabase();
    const props: [string, unknown][] = [
      ['n', { value: 'null' }], ['b', { value: { bool: true } }], ['i', { value: { i64: 9223372036854775807n } }],
      ['f', { value: { f64: 2 } }], ['g', { value: { f32: 0.1 } }], ['d', { value: { date_time: 1740816000000 } }],
      ['s', { value: { string: 'x' } }], ['y', { value: { bytes: [104, 105] } }], ['ia', { value: { i64_array: [3, -1] } }],
      ['fa', { value: { f64_array: [0.25, 1] } }], ['ga', { value: { f32_array: [0.5] } }], ['sa', { value: { string_array: [] } }],
      ['a', { value: { array: [{ i64: 1 }, { string: 'x' }, 'null'] } }],
      ['o', { value: { object: JSON.parse('{"__proto__":{"i64":1},"z":{"object":{"constructor":{"bool":false}}}}') } }],
      ['__proto__', { value: { string: 'own key' } }],
    ];
    await db.query(write([q('x', addN('V', props as [string, never][]))], []));
    const { body } = await db.queryRaw(read([q('m', { value_map: { input: nodes([0]), properties: null } })], ['m']));
    expect(body).toBe('{"m":[{"$id":0,"$label":"V","__proto__":"own key","a":[1,"x",null],"b":true,"d":"2025-03-01T08:00:00.000Z",' +
      '"f":2.0,"fa":[0.25,1.0],"g":0.10000000149011612,"ga":[0.5],"i":9223372036854775807,"ia":[3,-1],"n":null,' +
      '"o":{"__proto__":1,"z":{"constructor":false}},"s":"x","sa":[],"y":[104,105]}]}');
  });
});

describe('limits', () => {
  async function cycle(size: number) {
    const db = await openDatabase({ storage: 'memory' });
    const rows = Array.from({ length: size }, (_, i) => ({ src: i, dst: (i + 1) % size }));
    await db.query(write([
      { for_each: { param: 'nodes', body: [q(null, addN('C'))] } },
      { for_each: { param: 'rows', body: [q(null, { add_e: { input: { nodes: { reference: { param: 'src' } } }, label: 'NEXT', to: { param: 'dst' }, properties: [] } })] } },
    ], [], { parameters: { nodes: rows.map(() => ({})), rows } }));
    return db;
  }
  const repeatAround = (maxDepth: number) => read([q('r', count({ repeat: { input: nodes([0]), config: {
    traversal: { root: { out: { input: 'context', label: 'NEXT' } } }, emit: 'all', max_depth: maxDepth } } }))], ['r']);

  it('a repeat that would run past repeatIterationsMax fails with invalid_query', async () => {
    const db = await cycle(3);
    expect((await db.query(repeatAround(100))).r).toBe(101 + 99); // emit all: frontier before each hop + after each hop
    const err = await errorOf(db.query(repeatAround(20_000)));
    expect([err.status, err.code]).toEqual([500, 'invalid_query']);
    expect(err.msg).toMatch(/repeat exceeded 10000 iterations/);
  });

  /** Run `body` with one limit lowered (the engine reads `limits` at run time). */
  async function withLimit<T>(name: 'shortestPathVisitedMax' | 'pathLengthMax', value: number, body: () => Promise<T>): Promise<T> {
    const writable = limits as unknown as Record<string, number>;
    const saved = writable[name]!;
    writable[name] = value;
    try {
      return await body();
    } finally {
      writable[name] = saved;
    }
  }

  it('a shortest_path search that reaches more than shortestPathVisitedMax nodes fails with invalid_query', async () => {
    const db = await cycle(100);
    const search = read([q('p', { shortest_path: { source: { ids: [0] }, target: { ids: [50] }, direction: 'out', max_depth: 100 } })], ['p']);
    expect(((await db.query(search)).p as unknown[]).length).toBe(51);
    const err = await withLimit('shortestPathVisitedMax', 20, () => errorOf(db.query(search)));
    expect([err.status, err.code]).toEqual([500, 'invalid_query']);
    expect(err.msg).toMatch(/shortest_path visited more than 20 nodes/);
  });

  it('a row path longer than pathLengthMax fails with invalid_query', async () => {
    const db = await cycle(3);
    const walk = (times: number) => read([q('p', { path: { input: { repeat: { input: nodes([0]), config: {
      traversal: { root: { out: { input: 'context', label: 'NEXT' } } }, times, emit: 'none', max_depth: 100 } } } } })], ['p']);
    expect(((await db.query(walk(8))).p as { path: unknown[] }[])[0]!.path.length).toBe(9);
    const err = await withLimit('pathLengthMax', 8, () => errorOf(db.query(walk(8))));
    expect([err.status, err.code]).toEqual([500, 'invalid_query']);
    expect(err.msg).toMatch(/path exceeded 8 elements/);
  });

  it('the cooperative deadline stops a long query with query_deadline_exceeded', async () => {
    const db = await cycle(2000);
    const err = await errorOf(db.query(repeatAround(9_000), { timeoutMs: 1 }));
    expect([err.status, err.code]).toEqual([500, 'query_deadline_exceeded']);
  });
});

describe('numbers', () => {
  it('keeps the sign of a stored -0.0 (f64 and f32)', async () => {
    const db = await openDatabase();
    // JSON.stringify writes -0 as 0, so the literals go in as text.
    const request = JSON.stringify(write([q('x', addN('U', [['a', { value: { f64: 'NEG_ZERO' } }], ['b', { value: { f32: 'NEG_ZERO' } }],
      ['c', { expr: { mul: { left: { constant: { f64: -1 } }, right: { constant: { i64: 0 } } } } }]]))], [])).replaceAll('"NEG_ZERO"', '-0.0');
    expect((await db.queryRaw(request)).status).toBe(200);
    const { body } = await db.queryRaw(read([q('v', { values: { input: nodes([0]), properties: ['a', 'b', 'c'] } })], ['v']));
    expect(body).toBe('{"v":[{"a":-0.0,"b":-0.0,"c":-0.0}]}');
  });

  it('groups floats by their plain decimal text (no exponent)', async () => {
    const db = await openDatabase();
    for (const f of [1e-7, 1e21, 2, 0.5]) await db.query(write([q('x', addN('U', [['f', { value: { f64: f } }]]))], []));
    const r = await db.query(read([q('g', { group_count: { input: nodes('all'), property: 'f' } })], ['g']));
    expect((r.g as { f: number }[]).map((x) => x.f)).toEqual([1e-7, 0.5, 1e21, 2]);
  });
});

describe('plan cache', () => {
  it('a repeated body gives the same answers as a fresh one, across writes and parameters', async () => {
    const db = await openDatabase();
    const body = JSON.stringify(read([q('c', count(nodes('all')))], ['c']));
    expect(await db.query(body)).toEqual({ c: 0 });
    await db.query(write([q('x', addN('U'))], []));
    expect(await db.query(body)).toEqual({ c: 1 }); // cached plan, new snapshot
    const withParam = (n: number) => JSON.stringify(read([q('v', { limit: { input: nodes('all'), count: { expr: { param: 'n' } } } })], ['v'], { parameters: { n } }));
    await db.query(write([q('y', addN('U'))], []));
    expect(await db.query(withParam(1))).toEqual({ v: [{ $id: 0 }] });
    expect(await db.query(withParam(2))).toEqual({ v: [{ $id: 0 }, { $id: 1 }] });
    expect(await db.query(withParam(1))).toEqual({ v: [{ $id: 0 }] });
  });

  it('keeps the stage order: an option error still wins over a planning error on a cached body', async () => {
    const db = await openDatabase();
    const bad = JSON.stringify(read([q('', nodes('all'))], []));
    expect(JSON.parse((await db.queryRaw(bad)).body).error).toBe('invalid_empty_name');
    const { status, body } = await db.queryRaw(bad, { awaitDurable: true });
    expect([status, JSON.parse(body).error]).toEqual([400, 'invalid_request_option']);
  });

  it('invalid UTF-8 in a body is still a decode error', async () => {
    const { executeRequest, noFlags } = await import('../src/exec/request.js');
    const { Store } = await import('../src/store/store.js');
    const bytes = new TextEncoder().encode(JSON.stringify(read([q('c', count(nodes('all')))], ['c'])).replace('"c"', '"\u0001c"'));
    bytes[bytes.indexOf(1)] = 0xff;
    const out = executeRequest(Store.create(), bytes, noFlags, 'writer');
    expect('status' in out && [out.status, JSON.parse(out.body).error]).toEqual([400, 'invalid_query_json']);
  });
});
