// What the query torture sends (bench/torture/queries.ts): the dense graphs and how they
// are loaded in batched write requests, the catalog of pathological read shapes (issue 10:
// "no query can take the server down"), and random deep traversals. Request bodies are
// plain objects shaped as the wire contract says (../shared/protocol/operations.md);
// nothing here imports src/.
import type { Random } from './lib.js';

type Json = unknown;

// ---------------------------------------------------------------- graphs

/**
 * `bipartite`: complete bipartite a x b, every A node -> every B node (a*b edges), the
 * shape of the report (300x300: count(both^3) from one node = 27M rows).
 * `random`: `nodes` nodes and `edges` uniformly random directed edges (parallel edges and
 * self-loops allowed), dense enough that 3-4 hops reach millions of rows.
 */
export type GraphSpec =
  | { kind: 'bipartite'; a: number; b: number }
  | { kind: 'random'; nodes: number; edges: number; seed: number };

/** A graph as loaded: its labels and node IDs (read back, not assumed). */
export interface LoadedGraph {
  name: string;
  spec: GraphSpec;
  /** Node labels: [A, B] for bipartite, one label for random graphs. */
  nodeLabels: string[];
  edgeLabel: string;
  /** Bipartite: the A side and the B side; random: all nodes in `a`, `b` empty. */
  a: number[];
  b: number[];
  all: number[];
  edges: number;
}

export const graphName = (s: GraphSpec): string =>
  s.kind === 'bipartite' ? `bipartite ${s.a}x${s.b}` : `random ${s.nodes} nodes / ${s.edges} edges`;

const tag = (s: GraphSpec): string => (s.kind === 'bipartite' ? `Bip${s.a}x${s.b}` : `Rnd${s.nodes}x${s.edges}`);

export const writeBody = (entries: Json[], returns: string[] = [], parameters?: Record<string, Json>): Json =>
  ({ request_type: 'write', query: { write: { entries, returns } }, ...(parameters !== undefined ? { parameters } : {}) });
export const readBody = (entries: Json[], returns: string[], parameters?: Record<string, Json>): Json =>
  ({ request_type: 'read', query: { read: { entries, returns } }, ...(parameters !== undefined ? { parameters } : {}) });
/** A read batch of one entry `r` returned. */
export const readOne = (root: Json, parameters?: Record<string, Json>): Json => readBody([{ query: { name: 'r', root } }], ['r'], parameters);

const NODE_ROWS_PER_REQUEST = 25_000;
const EDGES_PER_REQUEST = 50_000;

/** `post(body)` answers { status, body }: the loader throws on anything but 200. */
export type Post = (body: Json, timeoutMs?: number) => Promise<{ status: number; body: string }>;

async function must(post: Post, body: Json, what: string): Promise<string> {
  const a = await post(body, 120_000);
  if (a.status !== 200) throw new Error(`loading ${what}: ${a.status} ${a.body.slice(0, 300)}`);
  return a.body;
}

const labelIs = (label: string): Json => ({ eq: { left: { property: '$label' }, right: { constant: { string: label } } } });

/** Create `count` nodes labelled `label` (properties i, g = i % 7, s = "n<i>") and return their IDs, ascending. */
async function addNodes(post: Post, label: string, count: number): Promise<number[]> {
  for (let from = 0; from < count; from += NODE_ROWS_PER_REQUEST) {
    const rows = Array.from({ length: Math.min(NODE_ROWS_PER_REQUEST, count - from) }, (_, j) => ({ i: from + j, g: (from + j) % 7, s: `n${from + j}` }));
    await must(post, writeBody([{ for_each: { param: 'rows', body: [{ query: { root: { add_n: { label, properties: [
      ['i', { expr: { param: 'i' } }], ['g', { expr: { param: 'g' } }], ['s', { expr: { param: 's' } }],
    ] } } } }] } }], [], { rows }), `${count} ${label} nodes`);
  }
  const ids = (JSON.parse(await must(post, readOne({ id: { input: { nodes_where: { predicate: labelIs(label) } } } }), `${label} ids`)) as { r: number[] }).r;
  if (ids.length !== count) throw new Error(`loading ${label}: ${ids.length} nodes read back, ${count} written`);
  return ids;
}

/** Load one graph with batched write requests (at most 50k edges and 25k nodes per request). */
export async function loadGraph(post: Post, spec: GraphSpec): Promise<LoadedGraph> {
  const t = tag(spec);
  if (spec.kind === 'bipartite') {
    const a = await addNodes(post, `${t}A`, spec.a);
    const b = await addNodes(post, `${t}B`, spec.b);
    const edgeLabel = `${t.toUpperCase()}E`;
    // add_e makes |sources| x |targets| edges: a slice of A to all of B per request.
    const sourcesPerRequest = Math.max(1, Math.floor(EDGES_PER_REQUEST / spec.b));
    for (let i = 0; i < a.length; i += sourcesPerRequest) {
      await must(post, writeBody([{ query: { root: { add_e: {
        input: { nodes: { reference: { ids: a.slice(i, i + sourcesPerRequest) } } }, label: edgeLabel, to: { ids: b }, properties: [],
      } } } }]), `${edgeLabel} edges`);
    }
    return { name: graphName(spec), spec, nodeLabels: [`${t}A`, `${t}B`], edgeLabel, a, b, all: [...a, ...b], edges: spec.a * spec.b };
  }
  const all = await addNodes(post, t, spec.nodes);
  const edgeLabel = `${t.toUpperCase()}E`;
  // A private generator: the graph depends on the spec's seed only, not on the run's.
  let x = spec.seed >>> 0 || 1;
  const next = (): number => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x; };
  for (let from = 0; from < spec.edges; from += EDGES_PER_REQUEST) {
    const rows = Array.from({ length: Math.min(EDGES_PER_REQUEST, spec.edges - from) }, () => ({ s: all[next() % all.length]!, d: all[next() % all.length]! }));
    await must(post, writeBody([{ for_each: { param: 'rows', body: [{ query: { root: { add_e: {
      input: { nodes: { reference: { param: 's' } } }, label: edgeLabel, to: { param: 'd' }, properties: [],
    } } } }] } }], [], { rows }), `${edgeLabel} edges`);
  }
  return { name: graphName(spec), spec, nodeLabels: [t], edgeLabel, a: all, b: [], all, edges: spec.edges };
}

// ---------------------------------------------------------------- building blocks

const src = (ids: number[]): Json => ({ nodes: { reference: { ids } } });
const nav = (op: string, input: Json, label?: string): Json => ({ [op]: label !== undefined ? { input, label } : { input } });
const hops = (op: string, input: Json, n: number, label?: string): Json => {
  let x = input;
  for (let i = 0; i < n; i++) x = nav(op, x, label);
  return x;
};
const count = (input: Json): Json => ({ count: { input } });
const sub = (root: Json): Json => ({ root });
const repeat = (input: Json, body: Json, times: number, emit: 'none' | 'before' | 'after' | 'all', maxDepth = times): Json =>
  ({ repeat: { input, config: { traversal: sub(body), times, emit, max_depth: maxDepth } } });
const lt = (property: string, v: number): Json => ({ lt: { left: { property }, right: { constant: { i64: v } } } });

// ---------------------------------------------------------------- pathological shapes

/** One pathological request shape: a name for the tables and a builder. */
export interface Shape {
  name: string;
  build(g: LoadedGraph, r: Random): Json;
}

/** A start node on the A side (bipartite) or anywhere (random). */
const startA = (g: LoadedGraph, r: Random): number => r.pick(g.a);
const startAny = (g: LoadedGraph, r: Random): number => r.pick(g.all);

/**
 * The shapes issue 10 names, and their relatives: every one of them produces millions
 * to billions of rows (or bytes of response) on the dense graphs, so a server survives
 * them only by cutting them off (deadline, memory budget, row limits) without stalling
 * anybody else.
 */
export const pathologicalShapes: Shape[] = [
  { name: 'count(both^3)', build: (g, r) => readOne(count(hops('both', src([startAny(g, r)]), 3))) },
  { name: 'count(both^4)', build: (g, r) => readOne(count(hops('both', src([startAny(g, r)]), 4))) },
  {
    name: 'count(out.in.out)',
    build: (g, r) => readOne(count(nav('out', nav('in', nav('out', src([startA(g, r)]), g.edgeLabel), g.edgeLabel), g.edgeLabel))),
  },
  {
    name: 'count(out.in.out.in)',
    build: (g, r) => readOne(count(nav('in', nav('out', nav('in', nav('out', src([startA(g, r)]), g.edgeLabel), g.edgeLabel), g.edgeLabel), g.edgeLabel))),
  },
  { name: 'rows out.in.out', build: (g, r) => readOne(nav('out', nav('in', nav('out', src([startA(g, r)]))))) },
  { name: 'id(both^3)', build: (g, r) => readOne({ id: { input: hops('both', src([startAny(g, r)]), 3) } }) },
  { name: 'value_map(both^3)', build: (g, r) => readOne({ value_map: { input: hops('both', src([startAny(g, r)]), 3) } }) },
  { name: 'value_map(both^2 of all)', build: (g) => readOne({ value_map: { input: hops('both', { nodes: { reference: { ids: g.all.slice(0, 50) } } }, 2) } }) },
  { name: 'repeat both x10000 emit none', build: (g, r) => readOne(count(repeat(src([startAny(g, r)]), nav('both', 'context'), 10_000, 'none'))) },
  { name: 'repeat both x10000 emit all', build: (g, r) => readOne(count(repeat(src([startAny(g, r)]), nav('both', 'context'), 10_000, 'all'))) },
  { name: 'rows repeat both x10000 emit all', build: (g, r) => readOne(repeat(src([startAny(g, r)]), nav('both', 'context'), 10_000, 'all')) },
  { name: 'count(dedup(both^4))', build: (g, r) => readOne(count({ dedup: { input: hops('both', src([startAny(g, r)]), 4) } })) },
  {
    name: 'order_by over both^3',
    build: (g, r) => readOne({ value_map: { input: { limit: { input: { order_by: { input: hops('both', src([startAny(g, r)]), 3), property: 'i', order: r.pick(['asc', 'desc']) } }, count: { literal: 10 } } } } }),
  },
  {
    name: 'order_by_multiple over both^4',
    build: (g, r) => readOne(count({ order_by_multiple: { input: hops('both', src([startAny(g, r)]), 4), orderings: [['g', 'asc'], ['s', 'desc']] } })),
  },
  { name: 'group_count over both^3', build: (g, r) => readOne({ group_count: { input: hops('both', src([startAny(g, r)]), 3), property: 'g' } }) },
  { name: 'group over both^3', build: (g, r) => readOne({ group: { input: hops('both', src([startAny(g, r)]), 3), property: 'i' } }) },
  { name: 'aggregate_by mean over both^4', build: (g, r) => readOne({ aggregate_by: { input: hops('both', src([startAny(g, r)]), 4), function: 'mean', property: 'i' } }) },
  { name: 'project over both^3', build: (g, r) => readOne({ project: { input: hops('both', src([startAny(g, r)]), 3), projections: [
    { property: { source: 's', alias: 'name' } }, { expr: { alias: 'twice', expr: { add: { left: { property: 'i' }, right: { property: 'i' } } } } },
  ] } }) },
  { name: 'path(both^4)', build: (g, r) => readOne({ path: { input: hops('both', src([startAny(g, r)]), 4) } }) },
  { name: 'count(simple_path(repeat both x8 emit all))', build: (g, r) => readOne(count({ simple_path: { input: repeat(src([startAny(g, r)]), nav('both', 'context'), 8, 'all') } })) },
  {
    // One row whose path grows by one element per hop for 10,000 hops: a long path, not a wide stream.
    name: 'path over 10000 hops',
    build: (g, r) => readOne({ path: { input: repeat(src([startAny(g, r)]), { limit: { input: nav('both', 'context'), count: { literal: 1 } } }, 10_000, 'none') } }),
  },
  {
    name: 'shortest_path both, unreachable target',
    // The target is outside the graph (another graph's node or a missing ID): a full search.
    build: (g, r) => readOne({ shortest_path: { source: { ids: [startAny(g, r)] }, target: { ids: [900_000_000_000] }, direction: 'both', max_depth: 100_000 } }),
  },
  {
    name: 'shortest_path both, within graph',
    build: (g, r) => readOne({ shortest_path: { source: { ids: [startAny(g, r)] }, target: { ids: [startAny(g, r)] }, direction: 'both', max_depth: 100_000 } }),
  },
  {
    name: 'union fan-out x4 over both^2',
    build: (g, r) => readOne(count({ union: { input: hops('both', src([startAny(g, r)]), 2), traversals: [
      sub(nav('both', 'context')), sub(nav('both', 'context')), sub(hops('both', 'context', 2)), sub(nav('both_e', 'context')),
    ] } })),
  },
  {
    name: 'coalesce fan-out over both^2',
    build: (g, r) => readOne(count({ coalesce: { input: hops('both', src([startAny(g, r)]), 2), traversals: [
      sub({ has_label: { input: 'context', label: 'NoSuchLabel' } }), sub(hops('both', 'context', 2)),
    ] } })),
  },
  {
    name: 'optional(both^2) per row of both^2',
    build: (g, r) => readOne(count({ optional: { input: hops('both', src([startAny(g, r)]), 2), traversal: sub(hops('both', 'context', 2)) } })),
  },
  {
    name: 'for_each x1000 of count(both^3)',
    build: (g, r) => readBody([{ for_each: { param: 'rows', body: [{ query: { name: 'c', root: count(hops('both', { nodes: { reference: { param: 'k' } } }, 3)) } }] } }], ['c'],
      { rows: Array.from({ length: 1000 }, () => ({ k: startAny(g, r) })) }),
  },
  {
    name: '50 entries of count(both^3)',
    build: (g, r) => readBody(Array.from({ length: 50 }, (_, i) => ({ query: { name: `c${i}`, root: count(hops('both', src([startAny(g, r)]), 3)) } })), ['c49']),
  },
  { name: 'count(unfold(fold(both^3)))', build: (g, r) => readOne(count({ unfold: { input: { fold: { input: hops('both', src([startAny(g, r)]), 3) } } } })) },
  {
    name: 'within over both^4',
    build: (g, r) => readBody([
      { query: { name: 'x', root: hops('both', src([startAny(g, r)]), 2) } },
      { query: { name: 'r', root: count({ within: { input: hops('both', src([startAny(g, r)]), 4), variable: 'x' } }) } },
    ], ['r']),
  },
  {
    name: 'inject x20 of both^2',
    build: (g, r) => {
      let x: Json = { as: { input: hops('both', src([startAny(g, r)]), 2), name: 'v' } };
      for (let i = 0; i < 20; i++) x = { inject: { input: x, variable: 'v' } };
      return readOne(count(x));
    },
  },
  {
    name: 'edge chain both_e.other_n x3',
    build: (g, r) => readOne(count(nav('other_n', nav('both_e', nav('other_n', nav('both_e', nav('other_n', nav('both_e', src([startAny(g, r)])))))))))
  },
  {
    name: 'sack over both^3',
    build: (g, r) => readOne({ sack_get: { input: { sack_add: { input: hops('both', { with_sack: { input: src([startAny(g, r)]), initial: { i64: 0 } } }, 3), property: 'i' } } } }),
  },
  { name: 'count(both^2 of all nodes)', build: () => readOne(count(hops('both', { nodes: { reference: 'all' } }, 2))) },
  { name: 'edges all both_e', build: () => readOne(count(nav('both_e', nav('out_n', { edges: { reference: 'all' } })))) },
];

// ---------------------------------------------------------------- random deep traversals

const emits = ['none', 'before', 'after', 'all'] as const;

/** One random step over element rows (the input stays an element stream). */
function randomStep(x: Json, g: LoadedGraph, r: Random): Json {
  const label = (): string | undefined => (r.chance(0.5) ? g.edgeLabel : undefined);
  const navOp = (): string => r.pick(['out', 'in', 'both', 'both', 'both']);
  const bodyNav = (): Json => (r.chance(0.8) ? nav(navOp(), 'context', label()) : nav(r.pick(['out_n', 'in_n', 'other_n']), nav(r.pick(['out_e', 'in_e', 'both_e']), 'context', label())));
  switch (r.int(0, 15)) {
    case 0: case 1: case 2: case 3: return nav(navOp(), x, label());
    case 4: return nav(r.pick(['out_n', 'in_n', 'other_n']), nav(r.pick(['out_e', 'in_e', 'both_e']), x, label()));
    case 5: return r.chance(0.5) ? { dedup: { input: x } } : { has_label: { input: x, label: r.pick(g.nodeLabels) } };
    case 6: return { where: { input: x, predicate: lt('i', r.int(0, Math.max(1, g.all.length))) } };
    case 7: return r.pick([{ limit: { input: x, count: { literal: r.int(0, 100_000) } } }, { skip: { input: x, count: { literal: r.int(0, 1000) } } },
      { range: { input: x, start: { literal: r.int(0, 10) }, end: { literal: r.int(10, 100_000) } } }]);
    case 8: return r.chance(0.5) ? { path: { input: x } } : { simple_path: { input: x } };
    case 9: case 10: {
      const times = r.int(1, 12);
      return repeat(x, bodyNav(), times, r.pick(emits), r.chance(0.8) ? times : r.int(1, 100));
    }
    case 11: return { union: { input: x, traversals: Array.from({ length: r.int(2, 3) }, () => sub(bodyNav())) } };
    case 12: return { coalesce: { input: x, traversals: Array.from({ length: r.int(1, 2) }, () => sub(bodyNav())) } };
    case 13: return { optional: { input: x, traversal: sub(bodyNav()) } };
    case 14: return { order_by: { input: x, property: r.pick(['i', 'g', 's', '$id']), order: r.pick(['asc', 'desc']) } };
    default: return { sack_add: { input: { with_sack: { input: x, initial: { i64: 0 } } }, property: 'i' } };
  }
}

/** A random valid read: a source on `g`, 1-8 random steps, a random terminal (or rows). */
export function randomTraversal(g: LoadedGraph, r: Random): { name: string; body: Json } {
  const depth = r.int(1, 8);
  let x: Json = r.chance(0.85)
    ? src(Array.from(new Set(Array.from({ length: r.int(1, 3) }, () => r.pick(g.all)))))
    : { nodes_where: { predicate: { and: { predicates: [labelIs(r.pick(g.nodeLabels)), lt('i', r.int(1, 50))] } } } };
  for (let i = 0; i < depth; i++) x = randomStep(x, g, r);
  const terminals: [string, (y: Json) => Json][] = [
    ['count', (y) => count(y)],
    ['dedup.count', (y) => count({ dedup: { input: y } })],
    ['id', (y) => ({ id: { input: y } })],
    ['value_map', (y) => ({ value_map: { input: y } })],
    ['values', (y) => ({ values: { input: y, properties: ['i', 's'] } })],
    ['group_count', (y) => ({ group_count: { input: y, property: 'g' } })],
    ['aggregate_by', (y) => ({ aggregate_by: { input: y, function: r.pick(['sum', 'max', 'mean']), property: 'i' } })],
    ['exists', (y) => ({ exists: { input: y } })],
    ['rows', (y) => y],
  ];
  const [tname, terminal] = r.pick(terminals);
  return { name: `depth ${depth} ${tname}`, body: readOne(terminal(x)) };
}

// ---------------------------------------------------------------- probes and acknowledged writes

/** The low-rate client's point lookup: `value_map(nodes {ids: [k]})`. */
export const pointLookup = (id: number): Json => readOne({ value_map: { input: src([id]) } });

export const SEQ_LABEL = 'TortureSeq';

/** One acknowledged write of the writer client: a node carrying its sequence number. */
export const seqWrite = (seq: number): Json =>
  writeBody([{ query: { name: 'n', root: { add_n: { label: SEQ_LABEL, properties: [['seq', { value: { i64: seq } }], ['w', { value: { string: `write ${seq}` } }]] } } } }], ['n']);

/** Read every sequence number written so far. */
export const readSeqs = (): Json => readOne({ values: { input: { nodes_where: { predicate: labelIs(SEQ_LABEL) } }, properties: ['seq'] } });
