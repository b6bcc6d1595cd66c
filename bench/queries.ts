// Request bodies (JSON text) used by the benchmarks. Everything the scenarios send is
// built here so the shapes live in one place (envelope.md §2-§4, operations.md §3-§4, §12).
import type { Graph } from './graph.js';
import { defineParams, g, readBatch, writeBatch, type ParamExpr, type Traversal } from '../src/client/index.js';

const FOLLOWS = 'FOLLOWS';

function readOne(root: unknown): string {
  return JSON.stringify({ request_type: 'read', query: { read: { entries: [{ query: { name: 'r', root } }], returns: ['r'] } } });
}

const startNode = (id: number): unknown => ({ nodes: { reference: { ids: [id] } } });
const out = (input: unknown): unknown => ({ out: { input, label: FOLLOWS } });

/** (a) point lookup: node by ID, all properties plus $id. */
export const pointLookup = (id: number): string => readOne({ value_map: { input: startNode(id) } });

/** (b) 1-hop: number of distinct out-neighbours over FOLLOWS. */
export const oneHopCount = (id: number): string => readOne({ count: { input: out(startNode(id)) } });

/** (c) 2-hop: out -> out -> dedup -> count (distinct ends of 2-step out-walks; may include the start and 1-hop nodes). */
export const twoHopDedupCount = (id: number): string =>
  readOne({ count: { input: { dedup: { input: out(out(startNode(id))) } } } });

/** 3-hop repeat (no dedup between hops) -> dedup -> count: distinct ends of 3-step out-walks. */
export const threeHopRepeatDedupCount = (id: number): string =>
  readOne({ count: { input: { dedup: { input: { repeat: { input: startNode(id), config: {
    traversal: { root: { out: { input: 'context', label: FOLLOWS } } }, times: 3, emit: 'none', max_depth: 3 } } } } } } });

/** Unweighted shortest path over FOLLOWS edges, forward direction. */
export const shortestPath = (source: number, target: number): string =>
  readOne({ shortest_path: { source: { ids: [source] }, target: { ids: [target] }, label: FOLLOWS, direction: 'out', max_depth: 64 } });

/** (d) single add_n write. */
export const addUser = (i: number): string => JSON.stringify({
  request_type: 'write',
  query: { write: { entries: [{ query: { name: 'n', root: { add_n: { label: 'User', properties: [
    ['name', { value: { string: `bench_${i}` } }],
    ['age', { value: { i64: 30 + (i % 40) } }],
    ['score', { value: { f64: 0.5 + i } }],
  ] } } } }], returns: ['n'] } },
});

// ------------------------------------------------------------------ what clients send (issue 13)
//
// Each of these is a body with holes that the load generator fills with a random integer
// per request (loadgen.ts BodyTemplate): the parameterized ones are built with the client
// library (src/client), so the text is what an application using it sends. A hole is
// written as a sentinel number and the text is cut there.

/** A body cut at its holes: `pieces.length === holes.length + 1`; hole k takes a uniform integer in [0, holes[k]). */
export interface BodyTemplate {
  pieces: string[];
  holes: number[];
}

const SENTINELS = [900000001, 900000002, 900000003];

/** Cuts `text` at the sentinel numbers (`SENTINELS[k]` is the hole with range `ranges[k]`). */
function cut(text: string, ranges: number[]): BodyTemplate {
  const pieces: string[] = [], holes: number[] = [];
  const re = /(?<!\d)90000000([1-3])(?!\d)/g;
  let last = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const k = Number(m[1]) - 1;
    if (k >= ranges.length) throw new Error(`sentinel ${m[0]} without a range in ${text}`);
    pieces.push(text.slice(last, m.index));
    holes.push(ranges[k]!);
    last = m.index + m[0].length;
  }
  pieces.push(text.slice(last));
  if (holes.length === 0) throw new Error(`no hole in ${text}`);
  return { pieces, holes };
}

/** One instance of a template (for the checks before timing and for tests). */
export const fill = (t: BodyTemplate, values: number[]): string =>
  t.pieces.reduce((acc, piece, k) => (k === 0 ? piece : `${acc}${values[k - 1]!}${piece}`), '');

const idParam = defineParams({ id: 'i64' });
const ROWS = 100;
const readById = (root: (id: ParamExpr) => Traversal, nodes: number): BodyTemplate =>
  cut(readBatch(idParam).varAs('r', root(idParam.ref('id'))).returning(['r']).toJSON({ id: SENTINELS[0]! }), [nodes]);

/** Point lookup with the ID written into the query text: every ID is a distinct body. */
export const pointLookupLiteral = (nodes: number): BodyTemplate => cut(pointLookup(SENTINELS[0]!), [nodes]);

/** Point lookup as the client sends it: one query text, the ID in `parameters` (typed i64). */
export const pointLookupParam = (nodes: number): BodyTemplate => readById((id) => g().n(id).valueMap(), nodes);

/** 1-hop rows: `value_map` of at most 100 out-neighbours over FOLLOWS, start ID as a parameter. */
export const oneHopRowsParam = (nodes: number): BodyTemplate => readById((id) => g().n(id).out(FOLLOWS).limit(ROWS).valueMap(), nodes);

/** 2-hop rows: `value_map` of at most 100 distinct nodes two FOLLOWS steps out, start ID as a parameter. */
export const twoHopRowsParam = (nodes: number): BodyTemplate =>
  readById((id) => g().n(id).out(FOLLOWS).out(FOLLOWS).dedup().limit(ROWS).valueMap(), nodes);

const userParams = defineParams({ name: 'string', age: 'i64', score: 'f64' });
/** A write as the client sends it: one new User, its properties as parameters. */
export const addUserParam = (): BodyTemplate => cut(writeBatch(userParams)
  .varAs('n', g().addN('User', { name: userParams.ref('name'), age: userParams.ref('age'), score: userParams.ref('score') }))
  .returning(['n'])
  .toJSON({ name: `mix_${SENTINELS[0]!}`, age: SENTINELS[1]!, score: SENTINELS[2]! + 0.25 }), [1 << 30, 100, 1000]);

const scoreParams = defineParams({ id: 'i64', score: 'f64' });
/** A write as the client sends it: set `score` of a random node, ID and value as parameters. */
export const setScoreParam = (nodes: number): BodyTemplate => cut(writeBatch(scoreParams)
  .varAs('s', g().n(scoreParams.ref('id')).setProperty('score', scoreParams.ref('score')).id())
  .returning(['s'])
  .toJSON({ id: SENTINELS[0]!, score: SENTINELS[1]! + 0.5 }), [nodes, 1000]);

/** Bulk load: one request adding the nodes [from, to) through for_each (envelope.md §4.4). */
export function addNodesChunk(g: Graph, from: number, to: number): string {
  const rows: string[] = [];
  for (let i = from; i < to; i++) {
    const p = g.props(i);
    rows.push(`{"name":${JSON.stringify(p.name)},"age":${p.age},"score":${p.score}}`);
  }
  const entries = [{ for_each: { param: 'rows', body: [{ query: { root: { add_n: { label: 'User', properties: [
    ['name', { expr: { param: 'name' } }],
    ['age', { expr: { param: 'age' } }],
    ['score', { expr: { param: 'score' } }],
  ] } } } }] } }];
  const head = JSON.stringify({ request_type: 'write', query: { write: { entries, returns: [] } } });
  return `${head.slice(0, -1)},"parameters":{"rows":[${rows.join(',')}]}}`;
}

/** Bulk load: one request adding the edges [from, to) of the edge list. */
export function addEdgesChunk(g: Graph, from: number, to: number): string {
  const rows: string[] = [];
  for (let e = from; e < to; e++) rows.push(`{"s":${g.src[e]},"d":${g.dst[e]}}`);
  const entries = [{ for_each: { param: 'rows', body: [{ query: { root: { add_e: {
    input: { nodes: { reference: { param: 's' } } }, label: FOLLOWS, to: { param: 'd' }, properties: [],
  } } } }] } }];
  const head = JSON.stringify({ request_type: 'write', query: { write: { entries, returns: [] } } });
  return `${head.slice(0, -1)},"parameters":{"rows":[${rows.join(',')}]}}`;
}

/** Bodies for loading the whole graph, nodes first (load.ts checks the 16 MiB limit). */
export function* loadChunks(g: Graph, nodesPerChunk: number, edgesPerChunk: number): Generator<{ kind: 'nodes' | 'edges'; body: string }> {
  for (let i = 0; i < g.spec.nodes; i += nodesPerChunk) {
    yield { kind: 'nodes', body: addNodesChunk(g, i, Math.min(g.spec.nodes, i + nodesPerChunk)) };
  }
  for (let e = 0; e < g.spec.edges; e += edgesPerChunk) {
    yield { kind: 'edges', body: addEdgesChunk(g, e, Math.min(g.spec.edges, e + edgesPerChunk)) };
  }
}

// ------------------------------------------------------------------ the flood scenario (flood.ts)

const DENSE = 'DENSE';

/** A complete bipartite a x b subgraph (labels DenseA/DenseB, edges DENSE), one request per part. */
export function denseNodes(label: 'DenseA' | 'DenseB', count: number): string {
  const rows = Array.from({ length: count }, (_, i) => `{"i":${i}}`).join(',');
  const head = JSON.stringify({ request_type: 'write', query: { write: { entries: [{ for_each: { param: 'rows', body: [{ query: { root: {
    add_n: { label, properties: [['i', { expr: { param: 'i' } }]] } } } }] } }], returns: [] } } });
  return `${head.slice(0, -1)},"parameters":{"rows":[${rows}]}}`;
}

/** IDs of the nodes carrying `label`, ascending. */
export const idsOfLabel = (label: string): string =>
  readOne({ id: { input: { nodes_where: { predicate: { eq: { left: { property: '$label' }, right: { constant: { string: label } } } } } } } });

/** Every source to every target over DENSE edges (|sources| x |targets| edges). */
export const denseEdges = (sources: number[], targets: number[]): string => JSON.stringify({ request_type: 'write', query: { write: { entries: [
  { query: { root: { add_e: { input: { nodes: { reference: { ids: sources } } }, label: DENSE, to: { ids: targets }, properties: [] } } } },
], returns: [] } } });

const both = (input: unknown): unknown => ({ both: { input } });

/**
 * Pathological reads for the flood (issue 10): the 3-hop `both` count on the dense subgraph
 * (27M rows on 300x300), out.in.out over DENSE, a repeat of 10,000 `both` hops, and the
 * 3-hop `both` count from the graph's busiest node. Each one runs until the server cuts it.
 */
export function floodBodies(denseA: number[], hub: number): string[] {
  const from = (id: number): unknown => startNode(id);
  return denseA.slice(0, 16).flatMap((a) => [
    readOne({ count: { input: both(both(both(from(a)))) } }),
    readOne({ count: { input: { out: { input: { in: { input: { out: { input: from(a), label: DENSE } }, label: DENSE } }, label: DENSE } } } }),
    readOne({ count: { input: { repeat: { input: from(a), config: { traversal: { root: { both: { input: 'context' } } }, times: 10_000, emit: 'none', max_depth: 10_000 } } } } }),
    readOne({ count: { input: both(both(both(from(hub)))) } }),
    // Counts over navigation are answered without materializing the walks (exec/streaming.ts);
    // these ask for every row, so they run into the memory budget or the deadline.
    readOne({ id: { input: both(both(both(from(a)))) } }),
    readOne({ value_map: { input: { order_by: { input: both(both(from(a))), property: '$id', order: 'desc' } } } }),
  ]);
}
