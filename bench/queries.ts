// Request bodies (JSON text) used by the benchmarks. Everything the scenarios send is
// built here so the shapes live in one place (envelope.md §2-§4, operations.md §3-§4, §12).
import type { Graph } from './graph.js';

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
