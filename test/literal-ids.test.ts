// Bodies with element IDs in the query text share one cached plan per shape
// (protocol/literal-ids.ts, exec/request.ts). Differential: every body runs through the
// cache and through the uncached path (decode and plan from scratch: the cache takes no
// body longer than limits.planCacheBodyBytesMax, set to 0 for the reference run) on two
// stores with the same history; status and body must be identical, errors included,
// for well-formed bodies of many shapes, malformed ones, and every option outcome.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { executeRequest, noFlags, planCacheEntries, type ExecOptions, type ExecRole, type RequestFlags } from '../src/exec/request.js';
import type { IndexRuntime } from '../src/index/runtime.js';
import { limits } from '../src/limits.js';
import { holeCount, holeId, matchShape, shapeKey, shapePieces } from '../src/protocol/literal-ids.js';
import { Store } from '../src/store/store.js';
import { addN, q, read, str, i64, write } from './helpers/requests.js';

const writableLimits = limits as { planCacheBodyBytesMax: number };
const cachedBodyBytesMax = limits.planCacheBodyBytesMax;

function uncached<T>(run: () => T): T {
  writableLimits.planCacheBodyBytesMax = 0;
  try {
    return run();
  } finally {
    writableLimits.planCacheBodyBytesMax = cachedBodyBytesMax;
  }
}

/** A store with nodes 0-5 (labels P and Q, properties) and edges 0-5 between them. */
function graphStore(): Store {
  const store = Store.create();
  const props = (i: number): [string, unknown][] => [['name', str(`n${i}`)], ['k', i64(i % 3)]];
  const nodes = Array.from({ length: 6 }, (_, i) => q(null, addN(i % 2 === 0 ? 'P' : 'Q', props(i))));
  const edge = (from: number, to: number) => q(null, { add_e: { input: { nodes: { reference: { ids: [from] } } }, label: 'E', to: { ids: [to] }, properties: [] } });
  const edges = [[0, 1], [1, 2], [2, 3], [0, 3], [3, 4], [4, 0]].map(([a, b]) => edge(a!, b!));
  for (const body of [write(nodes, []), write(edges, [])]) {
    const out = executeRequest(store, JSON.stringify(body), noFlags, 'writer');
    if (!('status' in out) || out.status !== 200) throw new Error(JSON.stringify(out));
  }
  return store;
}

type Outcome = ReturnType<typeof executeRequest>;
interface Run { flags: RequestFlags; role: ExecRole; options: ExecOptions | undefined }

/** The same bodies on two stores, cached and uncached; returns the cached outcomes after checking they agree. */
function differential(bodies: { text: string; run: Run }[]): Outcome[] {
  const cachedStore = graphStore();
  const referenceStore = graphStore();
  return bodies.map(({ text, run }, step) => {
    const got = executeRequest(cachedStore, text, run.flags, run.role, run.options);
    const want = uncached(() => executeRequest(referenceStore, text, run.flags, run.role, run.options));
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      throw new Error(`step ${step}: ${text}\n  cached:   ${JSON.stringify(got)}\n  uncached: ${JSON.stringify(want)}`);
    }
    return got;
  });
}

// ---------------------------------------------------------------- bodies with holes

/** A hole's text: IDs in and out of the graph, and tokens that are no element ID or no integer. */
const holeArb = fc.oneof(
  { weight: 8, arbitrary: fc.nat(7).map(String) },
  { weight: 2, arbitrary: fc.nat().map(String) },
  {
    weight: 3,
    arbitrary: fc.constantFrom('-0', '-1', '0', '18446744073709551615', '18446744073709551616', '9007199254740993',
      '123456789012345678901234', '1.0', '1e2', '007', '"3"', 'null', '[]', '-'),
  },
);

const H = (k: number) => `@@hole${k}@@`;
const nodesOf = (...holes: number[]) => ({ nodes: { reference: { ids: holes.map(H) } } });
const readOne = (root: unknown) => read([q('r', root)], ['r']);

/** Query shapes with holes (H(k) marks hole k): most put every hole in an `ids` list, some elsewhere. */
const shapes: { holes: number; body: unknown }[] = [
  { holes: 1, body: readOne({ value_map: { input: nodesOf(0) } }) },
  { holes: 1, body: { request_type: 'read', query_name: null, query: { read: { entries: [q('r', { value_map: { input: nodesOf(0) } })], returns: ['r'] } } } },
  { holes: 2, body: readOne({ count: { input: nodesOf(0, 1) } }) },
  { holes: 3, body: readOne({ values: { input: nodesOf(0, 1, 2), properties: ['name'] } }) },
  { holes: 1, body: readOne({ id: { input: { edges: { reference: { ids: [H(0)] } } } } }) },
  { holes: 2, body: read([q('a', { value_map: { input: nodesOf(0) } }), q('b', { id: { input: { out: { input: nodesOf(1), label: 'E' } } } })], ['a', 'b']) },
  { holes: 2, body: readOne({ id: { input: { limit: { input: { out: { input: nodesOf(0), label: null } }, count: { literal: H(1) } } } } }) },
  { holes: 2, body: readOne({ id: { input: { has: { input: nodesOf(0), property: 'k', value: { value: { i64: H(1) } } } } } }) },
  { holes: 2, body: readOne({ shortest_path: { source: { ids: [H(0)] }, target: { ids: [H(1)] }, label: 'E', direction: 'out', max_depth: 8 } }) },
  { holes: 1, body: readOne({ value_map: { input: nodesOf(0) } }) },
  { holes: 2, body: write([q('r', { id: { input: { add_e: { input: nodesOf(0), label: 'E', to: { ids: [H(1)] }, properties: [] } } } })], ['r']) },
  { holes: 1, body: write([q('r', { id: { input: { set_property: { input: nodesOf(0), name: 'k', value: { value: { string: 'x' } } } } } })], ['r']) },
  { holes: 2, body: write([q('r', { id: { input: { set_property: { input: nodesOf(0), name: 'k', value: { value: { f64: H(1) } } } } } })], ['r']) },
  { holes: 1, body: read([q('r', { add_n: { label: 'P', properties: [] } }), q('s', { id: { input: nodesOf(0) } })], ['s']) },
  { holes: 1, body: readOne({ id: { input: { union: { input: nodesOf(0), traversals: [{ root: { out: { input: 'context', label: 'E' } } }] } } } }) },
  { holes: 1, body: readOne({ count: { input: { nodes: { reference: { ids: [H(0)] } } } } }) },
  { holes: 0, body: readOne({ count: { input: { nodes: { reference: 'all' } } } }) },
  { holes: 1, body: readOne({ value_map: { input: nodesOf(0) } }) },
];

/** A body's text: the shape's JSON with the hole texts in place, compact or spaced out. */
function bodyText(shape: { body: unknown }, holes: string[], spaced: boolean): string {
  let text = JSON.stringify(shape.body, null, spaced ? 1 : undefined);
  holes.forEach((hole, k) => { text = text.replaceAll(`"${H(k)}"`, hole); });
  return text;
}

/** Damage a text: cut it short, drop a character, or put a stray one in. */
const damageArb = fc.oneof(
  fc.constant((t: string) => t),
  fc.constant((t: string) => t),
  fc.constant((t: string) => t),
  fc.nat().map((at) => (t: string) => t.slice(0, at % t.length)),
  fc.nat().map((at) => (t: string) => t.slice(0, at % t.length) + t.slice((at % t.length) + 1)),
  fc.tuple(fc.nat(), fc.constantFrom('{', '}', '[', ']', ',', ':', '"', '0', '7', '-', 'a', ' ', '\u0000', '\\', '\u00e9'))
    .map(([at, c]) => (t: string) => t.slice(0, at % t.length) + c + t.slice(at % t.length)),
);

const runArb: fc.Arbitrary<Run> = fc.oneof(
  { weight: 6, arbitrary: fc.constant<Run>({ flags: noFlags, role: 'writer', options: undefined }) },
  { weight: 2, arbitrary: fc.constant<Run>({ flags: noFlags, role: 'reader', options: { queryTimeoutMs: 30_000, inlineWorkMax: 50 } }) },
  { weight: 1, arbitrary: fc.constant<Run>({ flags: { ...noFlags, awaitDurable: true }, role: 'writer', options: undefined }) },
  { weight: 1, arbitrary: fc.constant<Run>({ flags: { ...noFlags, warm: true }, role: 'writer', options: undefined }) },
  { weight: 1, arbitrary: fc.constant<Run>({ flags: noFlags, role: 'replica', options: undefined }) },
);

const bodyArb = fc.record({
  shape: fc.nat(shapes.length - 1),
  holes: fc.array(holeArb, { minLength: 3, maxLength: 3 }),
  spaced: fc.boolean(),
  damage: damageArb,
  run: runArb,
});

describe('element IDs in the query text: one plan per shape', () => {
  it('keeps one entry for the bodies of a shortest path between literal IDs with a literal max_depth', () => {
    const path = { body: readOne({ shortest_path: { source: { ids: [H(0)] }, target: { ids: [H(1)] }, label: 'E', direction: 'out', max_depth: 7 } }) };
    const store = graphStore();
    const before = planCacheEntries();
    // (First in the file: the cache must have room, or a new entry would only replace an old one.)
    expect(before).toBeLessThan(limits.planCacheEntriesMax - 40);
    // Another shape between them: each path body is looked up by its key, not as the shape seen last.
    for (let i = 0; i < 40; i++) {
      for (const text of [bodyText(path, [String(i % 6), String((i * 5 + 1) % 6)], false), bodyText(shapes[0]!, [String(i % 6)], false)]) {
        const out = executeRequest(store, text, noFlags, 'writer');
        expect('status' in out && out.status).toBe(200);
      }
    }
    expect(planCacheEntries() - before).toBeLessThanOrEqual(3);
  });

  it('answers exactly as decoding from scratch, for well-formed, malformed and failing bodies', () => {
    fc.assert(fc.property(fc.array(bodyArb, { minLength: 1, maxLength: 30 }), (picks) => {
      // Few shapes per run, so most bodies meet a shape already cached.
      differential(picks.map((p) => ({ text: p.damage(bodyText(shapes[p.shape % 4 === 0 ? 0 : p.shape]!, p.holes, p.spaced)), run: p.run })));
    }), { numRuns: 400 });
  });

  it('answers each body for its own IDs, not the first body\'s of its shape', () => {
    const shape = shapes[0]!;
    const run: Run = { flags: noFlags, role: 'writer', options: undefined };
    const outcomes = differential([3, 0, 5, 3, 9, 1].map((id) => ({ text: bodyText(shape, [String(id)], false), run })));
    expect(outcomes.map((o) => ('body' in o ? JSON.parse(o.body).r : o))).toEqual([
      [{ $id: 3, $label: 'Q', k: 0, name: 'n3' }], [{ $id: 0, $label: 'P', k: 0, name: 'n0' }],
      [{ $id: 5, $label: 'Q', k: 2, name: 'n5' }], [{ $id: 3, $label: 'Q', k: 0, name: 'n3' }], null, [{ $id: 1, $label: 'Q', k: 1, name: 'n1' }],
    ]);
    // A repeated ID in one list is the planning error, after a cached body of the shape.
    const counts = differential(['0,1', '2,2', '1,0', '4,4'].map((ids) => ({ text: bodyText(shapes[2]!, ids.split(','), false), run })));
    expect(counts.map((o) => ('body' in o ? JSON.parse(o.body) : o))).toEqual([
      { r: 2 }, { error: 'duplicate_element_id', msg: expect.any(String) }, { r: 2 }, { error: 'duplicate_element_id', msg: expect.any(String) },
    ]);
  });

  it('a shape whose integers are not all element IDs keys on the exact text: a literal limit answers for its own value', () => {
    const run: Run = { flags: noFlags, role: 'writer', options: undefined };
    // Node 0 has out-edges to 1 and 3; each body gets its own limit.
    const outcomes = differential([['0', '2'], ['0', '1'], ['0', '3'], ['0', '2'], ['3', '1']].map((holes) => ({ text: bodyText(shapes[6]!, holes, false), run })));
    expect(outcomes.map((o) => ('body' in o ? JSON.parse(o.body).r : o))).toEqual([[1, 3], [1], [1, 3], [1, 3], [4]]);
  });

  it('keys a shape with IDs and other integers on the other integers: one entry per limit, each body for its own IDs', () => {
    const run: Run = { flags: noFlags, role: 'writer', options: undefined };
    // Shapes no other test sends (the first body of a shape decides how it is keyed): the
    // out-neighbours of one node, at most a literal count of them, under a name of its own.
    const limited = (name: string) => ({ body: read([q(name, { id: { input: { limit: { input: { out: { input: nodesOf(0), label: 'E' } }, count: { literal: H(1) } } } } })], [name]) });
    const answers = (name: string, bodies: string[][]) => differential(bodies.map((holes) => ({ text: bodyText(limited(name), holes, false), run })))
      .map((o) => ('body' in o ? JSON.parse(o.body)[name] ?? JSON.parse(o.body).error : o));
    // Node 0 has out-edges to 1 and 3, node 2 to 3, node 3 to 4, node 4 to 0.
    const bodies = [['0', '2'], ['3', '2'], ['4', '2'], ['0', '1'], ['3', '1'], ['0', '2'], ['4', '1'], ['0', '-1'], ['-1', '2'], ['2', '2']];
    const want = [[1, 3], [4], [0], [1], [4], [1, 3], [0], 'invalid_query_json', 'invalid_query_json', [3]];
    expect(answers('limited', bodies)).toEqual(want);
    // A first body whose ID is its limit cannot tell the two apart: that shape stays keyed on the exact text.
    expect(answers('limited2', [['2', '2'], ...bodies])).toEqual([[3], ...want]);
  });

  it('re-plans a shape when the index catalog changes', () => {
    const store = graphStore();
    const settle = () => {
      for (;;) {
        store.beginWrite();
        if ((store.indexes as IndexRuntime).step() === 'progress') store.commit();
        else { store.rollback(); return; }
      }
    };
    const exec = (body: unknown) => executeRequest(store, typeof body === 'string' ? body : JSON.stringify(body), noFlags, 'writer');
    const isP = { eq: { left: { property: '$label' }, right: { constant: { string: 'P' } } } };
    const byName = { and: { predicates: [isP, { eq: { left: { property: 'name' }, right: { constant: { string: 'n2' } } } }] } };
    // An ID in the text and a nodes_where: a scan (sent to the pool when inline) until an index serves it.
    const text = (id: number) => JSON.stringify(read([q('a', { id: { input: nodesOf(0) } }), q('r', { id: { input: { nodes_where: { predicate: byName } } } })], ['a', 'r'])).replace(`"${H(0)}"`, String(id));
    const inline = { queryTimeoutMs: 30_000, inlineWorkMax: 10_000 };
    expect(executeRequest(store, text(1), noFlags, 'reader', inline)).toEqual({ forward: 'pool', unbounded: true });
    expect(executeRequest(store, text(4), noFlags, 'reader', inline)).toEqual({ forward: 'pool', unbounded: true });
    exec(write([q('r', { create_index: { spec: { node_equality: { label: 'P', property: 'name' } }, if_not_exists: false } })], ['r']));
    settle();
    expect(executeRequest(store, text(3), noFlags, 'reader', inline)).toEqual({ status: 200, body: '{"a":[3],"r":[2]}' });
    expect(executeRequest(store, text(1), noFlags, 'reader', inline)).toEqual({ status: 200, body: '{"a":[1],"r":[2]}' });
  });

  it('never takes a kept integer for a cut ID: -0 as an ID, IDs next to 2^64 - 1 (a review\'s reproductions)', () => {
    // A first body with `-0` in its ids list and `0` as its limit, then bodies whose ID is
    // 2^64 - 1 (the value the probe of a key puts in its first cut hole): through the cache
    // the limit was written in as a node ID, and a set_property wrote to node 2.
    const limited = (id: string, n: string) => `{"request_type":"read","query_name":null,"query":{"read":{"entries":[{"query":{"name":"r","root":{"id":{"input":{"limit":{"input":{"out":{"input":{"nodes":{"reference":{"ids":[${id}]}}},"label":null}},"count":{"literal":${n}}}}}}}}],"returns":["r"]}}}`;
    const setK = (id: string, v: string) => `{"request_type":"write","query_name":null,"query":{"write":{"entries":[{"query":{"name":"r","root":{"id":{"input":{"set_property":{"input":{"nodes":{"reference":{"ids":[${id}]}}},"name":"k","value":{"value":{"f64":${v}}}}}}}}}],"returns":["r"]}}}`;
    const top = '18446744073709551615';
    const cases: [(a: string, b: string) => string, [string, string][]][] = [
      [limited, [['-0', '0'], [top, '1'], [top, '1'], [top, '3'], ['2', '1'], ['-0', '0'], ['0', '2']]],
      [setK, [['-0', '0'], [top, '1'], [top, '2'], ['2', '5'], ['3', '6']]],
    ];
    for (const [body, values] of cases) {
      const cached = graphStore(), fresh = graphStore();
      for (const [a, b] of values) {
        const text = body(a, b);
        expect(executeRequest(cached, text, noFlags, 'writer'), text).toEqual(uncached(() => executeRequest(fresh, text, noFlags, 'writer')));
      }
      const dump = JSON.stringify(read([q('r', { value_map: { input: { nodes: { reference: 'all' } } } })], ['r']));
      expect(executeRequest(cached, dump, noFlags, 'writer')).toEqual(executeRequest(fresh, dump, noFlags, 'writer'));
    }
  });
});

describe('one query text with other parameters: the same answers as decoding from scratch', () => {
  const byParam = (root: unknown) => JSON.stringify(read([q('r', root)], ['r'])).slice(0, -1);
  const queries = [
    byParam({ value_map: { input: { nodes: { reference: { param: 'id' } } } } }),
    byParam({ id: { input: { out: { input: { nodes: { reference: { param: 'id' } } }, label: 'E' } } } }),
    byParam({ id: { input: { limit: { input: { nodes: { reference: 'all' } }, count: { expr: { param: 'id' } } } } } }),
    byParam({ values: { input: { has: { input: { nodes: { reference: 'all' } }, property: 'k', value: { expr: { param: 'id' } } } }, properties: ['name'] } }),
  ];
  const valueArb = fc.oneof(
    { weight: 6, arbitrary: fc.nat(7).map(String) },
    { weight: 3, arbitrary: fc.constantFrom('-0', '-1', '1.5', '"3"', 'null', '[1,2]', '[2,2]', 'true', '{}', '18446744073709551616', '', '1 ', '01') },
  );
  const paramsArb = fc.oneof(
    { weight: 6, arbitrary: valueArb.map((v) => `{"id":${v}}`) },
    { weight: 1, arbitrary: fc.constantFrom('{}', 'null', '[1]', '{"id":1,"x":2}', '{"id":1,"id":2}', '{"x":1}', '{"id":', ' {"id" : 2} ') },
  );
  const typesArb = fc.constantFrom('', ',"parameter_types":{"id":"i64"}', ',"parameter_types":{"id":"value"}', ',"parameter_types":{"id":{"array":"i64"}}', ',"parameter_types":{"id":"f64"}');
  const bodyArb = fc.record({ query: fc.nat(queries.length - 1), params: paramsArb, types: typesArb, typesFirst: fc.boolean(), damage: damageArb, run: runArb });

  it('integer parameters decoded from the text alone (the recent entry) answer like a fresh decoding, out-of-range ones included', () => {
    const run: Run = { flags: noFlags, role: 'writer', options: undefined };
    for (const types of ['', ',"parameter_types":{"id":"i64"}']) {
      for (const query of queries) {
        const values = ['5', '1', '2', '18446744073709551616', '-0', '9223372036854775807', '9223372036854775808', '-9223372036854775809', '3', '7'];
        const outcomes = differential(values.map((v) => ({ text: `${query},"parameters":{"id":${v}}${types}}`, run })));
        expect(outcomes.every((o) => 'status' in o)).toBe(true);
      }
    }
    // Two integer parameters, declared in another order than given.
    const two = `${byParam({ values: { input: { nodes: { reference: { param: 'id' } } }, properties: ['name'] } }).slice(0, -1)}`;
    const twoText = (a: string, b: string) => `${two}},"parameters":{"id":${a},"n":${b}},"parameter_types":{"n":"i64","id":"i64"}}`;
    differential([['1', '2'], ['3', '4'], ['5', '99999999999999999999'], ['0', '0'], ['2', '-1']].map(([a, b]) => ({ text: twoText(a!, b!), run })));
  });

  it('for valid, ill-typed and malformed parameters, with the types before or after them', () => {
    fc.assert(fc.property(fc.array(bodyArb, { minLength: 1, maxLength: 30 }), (picks) => {
      differential(picks.map((p) => {
        const query = queries[p.query % 3 === 0 ? 0 : p.query]!;
        const params = `,"parameters":${p.params}`;
        return { text: p.damage(`${query}${p.typesFirst ? p.types + params : params + p.types}}`), run: p.run };
      }));
    }), { numRuns: 400 });
  });
});

describe('shapeKey', () => {
  it('cuts out exactly the integer tokens outside strings', () => {
    expect(shapeKey('{"a":[12,-3,0],"b":"45","c":1.5,"d":1e3,"e":true}')).toBe('S{"a":[\u0000,\u0000,\u0000],"b":"45","c":1.5,"d":1e3,"e":true}');
    expect(holeCount).toBe(3);
    expect(shapeKey('{"a":"\\"7",  "b" : 007 , "c":-0}')).toBe('S{"a":"\\"7",  "b" : 007 , "c":\u0000}');
    expect(shapeKey('[1')).toBe('S[\u0000');
    for (const refused of ['{"a":"x', '[1,\u0000]', '[\u0001]', `[${Array.from({ length: 65 }, () => '1').join(',')}]`]) expect(shapeKey(refused)).toBeNull();
  });

  it('gives two texts one key only when they differ in integer tokens alone', () => {
    const textArb = fc.array(fc.constantFrom('{', '}', '[', ']', ',', ':', '"a"', '"1"', '"\\""', ' ', '1', '23', '-4', '0', '1.5', 'e', 'true', 'x', '-'), { maxLength: 16 });
    fc.assert(fc.property(textArb, textArb, (a, b) => {
      const ta = a.join(''), tb = b.join('');
      const ka = shapeKey(ta), kb = shapeKey(tb);
      if (ka === null || kb === null || ka !== kb) return;
      // Same key: replacing every integer word by 0 makes the texts equal.
      const zeroed = (t: string) => t.replace(/"(?:[^"\\]|\\.)*"|[0-9A-Za-z+\-.]+/g, (w) => (/^-?(0|[1-9][0-9]*)$/.test(w) ? '0' : w));
      expect(zeroed(ta)).toBe(zeroed(tb));
    }), { numRuns: 5000 });
  });

  it('matchShape accepts a text exactly when its shape key is the pieces\' key, with the same holes', () => {
    const wordArb = fc.constantFrom('{', '}', '[', ']', ',', ':', '"a"', '"1"', '"\\""', ' ', '1', '23', '-4', '0', '007', '1.5', 'e', 'true', 'x', '-', '\u0000');
    const textArb = fc.array(wordArb, { maxLength: 16 }).map((w) => w.join(''));
    // The second text is often the first with its integers changed, so matches are common.
    const pairArb = fc.tuple(textArb, textArb, fc.boolean(), fc.array(fc.constantFrom('0', '5', '-1', '18446744073709551616', '12'), { minLength: 1, maxLength: 1 }))
      .map(([a, b, related, [n]]) => [a, related ? a.replace(/(?<![0-9A-Za-z+\-.])-?(0|[1-9][0-9]*)(?![0-9A-Za-z+\-.])/g, n!) : b] as const);
    fc.assert(fc.property(pairArb, ([ta, tb]) => {
      const ka = shapeKey(ta);
      if (ka === null) return;
      const pieces = shapePieces(ta);
      const kb = shapeKey(tb);
      const holesB = kb === null ? [] : Array.from({ length: holeCount }, (_, k) => holeId(tb, k));
      const matched = matchShape(tb, pieces);
      expect(matched).toBe(kb === ka);
      if (matched) expect(Array.from({ length: holeCount }, (_, k) => holeId(tb, k))).toEqual(holesB);
    }), { numRuns: 5000 });
  });
});
