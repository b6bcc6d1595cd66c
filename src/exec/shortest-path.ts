// shortest_path (operations.md §3.8) without exploring the whole graph.
//
// The protocol defines the answer by a one-sided BFS: neighbours expanded in ascending ID
// order, the first discovery of a node fixes its predecessor. By induction over BFS layers
// that BFS reaches every node along the lexicographically smallest shortest path from the
// source (the queue order of a layer is the lexicographic order of the tree paths). So any
// search that finds (1) the distance D and (2) that smallest path gives the same answer:
//
//   1. Bidirectional BFS by whole layers, always growing the side whose next layer is
//      cheaper (fewer adjacency entries to scan). Forward layers 0..a from the source and
//      backward layers 0..b from the target, a + b = D when they first meet.
//   2. Mark the forward nodes that lie on some shortest path: layer a = those the backward
//      search reached at distance b; layer i < a = those with an edge into a marked node of
//      layer i + 1 (found from the marked nodes over reversed edges).
//   3. Walk from the source, each step taking the smallest-ID neighbour that is marked
//      (positions < a) or has backward distance D - position (positions >= a).
//
// The differential tests compare this with the reference interpreter's one-sided BFS.
import { queryError } from '../protocol/errors.js';
import { limits } from '../limits.js';
import type { Store } from '../store/store.js';
import { A_CREATED, A_DELETED, A_LABEL, A_NEIGHBOR, ADJ_WORDS, DIR_IN, DIR_OUT, type DirWord, type Topology } from '../store/topology.js';

export type PathDirection = 'out' | 'in' | 'both';

export interface PathSearch {
  store: Store;
  at: number;
  source: number;
  target: number;
  /** Label ID to follow, or -1 for any. */
  label: number;
  direction: PathDirection;
  maxDepth: number;
  /** Called once per layer: throws when the query's deadline passed. */
  checkDeadline: () => void;
}

/** Per-thread scratch, reused across searches: one generation stamp per node and side. */
class Scratch {
  seenF = new Uint32Array(0);
  seenB = new Uint32Array(0);
  distF = new Uint32Array(0);
  distB = new Uint32Array(0);
  marked = new Uint32Array(0);
  queueF: Uint32Array = new Uint32Array(1024);
  queueB: Uint32Array = new Uint32Array(1024);
  generation = 0;

  begin(nodes: number): number {
    if (this.seenF.length < nodes) {
      const size = Math.max(nodes, this.seenF.length * 2);
      this.seenF = new Uint32Array(size);
      this.seenB = new Uint32Array(size);
      this.distF = new Uint32Array(size);
      this.distB = new Uint32Array(size);
      this.marked = new Uint32Array(size);
      this.generation = 0;
    }
    if (++this.generation === 0xffffffff) {
      this.seenF.fill(0);
      this.seenB.fill(0);
      this.marked.fill(0);
      this.generation = 1;
    }
    return this.generation;
  }
}

const scratch = new Scratch();

const forwardWords = (d: PathDirection): readonly DirWord[] => (d === 'out' ? [DIR_OUT] : d === 'in' ? [DIR_IN] : [DIR_OUT, DIR_IN]);
const backwardWords = (d: PathDirection): readonly DirWord[] => (d === 'out' ? [DIR_IN] : d === 'in' ? [DIR_OUT] : [DIR_OUT, DIR_IN]);

/** Adjacency entries a node's expansion scans (the cost model for choosing a side). */
function scanCost(topo: Topology, node: number, words: readonly DirWord[]): number {
  const dir = topo.dir(node);
  let n = 0;
  for (const w of words) n += topo.length(dir, w);
  return n;
}

function grown(queue: Uint32Array, needed: number): Uint32Array {
  if (needed <= queue.length) return queue;
  const bigger = new Uint32Array(Math.max(needed, queue.length * 2));
  bigger.set(queue);
  return bigger;
}

/** The node IDs of the path the protocol's BFS finds, source first; [] when none. */
export function shortestPathJs(q: PathSearch): number[] {
  const { store, at, source, target, label } = q;
  if (source === target) return [source];
  const topo = store.topology;
  const s = scratch;
  const gen = s.begin(store.nodeSlots());
  const fwd = forwardWords(q.direction), bwd = backwardWords(q.direction);

  // Queues hold whole layers back to back; layerF[i] = start of forward layer i.
  let queueF = s.queueF, queueB = s.queueB;
  queueF[0] = source; queueB[0] = target;
  s.seenF[source] = gen; s.distF[source] = 0;
  s.seenB[target] = gen; s.distB[target] = 0;
  const layerF = [0, 1], layerB = [0, 1];
  let costF = scanCost(topo, source, fwd), costB = scanCost(topo, target, bwd);
  let a = 0, b = 0, visited = 2;
  let met = false;

  while (!met && a + b < q.maxDepth) {
    q.checkDeadline();
    const forward = costF <= costB;
    const queue = forward ? queueF : queueB;
    const layers = forward ? layerF : layerB;
    const seen = forward ? s.seenF : s.seenB, dist = forward ? s.distF : s.distB;
    const otherSeen = forward ? s.seenB : s.seenF;
    const words = forward ? fwd : bwd;
    const depth = (forward ? a : b) + 1;
    const from = layers[layers.length - 2]!, to = layers[layers.length - 1]!;
    if (from === to) return []; // this side is exhausted: no path at all
    let end = to, cost = 0;
    let buffer = queue;
    for (let i = from; i < to; i++) {
      const node = buffer[i]!;
      const dir = topo.dir(node);
      for (const w of words) {
        const len = topo.length(dir, w);
        const off = topo.offset(dir, w, len);
        const adj = topo.words;
        for (let p = off, stop = off + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
          const created = adj[p + A_CREATED]!, deleted = adj[p + A_DELETED]!;
          if (created > at || (deleted !== 0 && at >= deleted)) continue;
          if (label >= 0 && adj[p + A_LABEL] !== label) continue;
          const next = adj[p + A_NEIGHBOR]!;
          if (seen[next] === gen) continue;
          seen[next] = gen;
          dist[next] = depth;
          if (otherSeen[next] === gen) met = true;
          if (end === buffer.length) buffer = grown(buffer, end + 1);
          buffer[end++] = next;
          cost += scanCost(topo, next, words);
        }
      }
    }
    visited += end - to;
    if (visited > limits.shortestPathVisitedMax) throw queryError(`shortest_path visited more than ${limits.shortestPathVisitedMax} nodes`);
    layers.push(end);
    if (forward) { queueF = buffer; s.queueF = buffer; a = depth; costF = cost; }
    else { queueB = buffer; s.queueB = buffer; b = depth; costB = cost; }
    if (end === to) return []; // nothing new on this side: the other side cannot be reached
  }
  if (!met) return [];
  const total = a + b;

  // 2. Marks on forward layers 1..a-1 (layer a: backward distance b, checked directly).
  const marked = s.marked;
  let good: number[] = [];
  for (let i = layerF[a]!; i < layerF[a + 1]!; i++) {
    const node = queueF[i]!;
    if (s.seenB[node] === gen && s.distB[node] === b) good.push(node);
  }
  for (let layer = a - 1; layer >= 1; layer--) {
    const previous: number[] = [];
    for (const node of good) {
      const dir = topo.dir(node);
      for (const w of bwd) {
        const len = topo.length(dir, w);
        const off = topo.offset(dir, w, len);
        const adj = topo.words;
        for (let p = off, stop = off + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
          const created = adj[p + A_CREATED]!, deleted = adj[p + A_DELETED]!;
          if (created > at || (deleted !== 0 && at >= deleted)) continue;
          if (label >= 0 && adj[p + A_LABEL] !== label) continue;
          const prev = adj[p + A_NEIGHBOR]!;
          if (s.seenF[prev] !== gen || s.distF[prev] !== layer || marked[prev] === gen) continue;
          marked[prev] = gen;
          previous.push(prev);
        }
      }
    }
    good = previous;
  }

  // 3. The smallest-ID admissible neighbour at every step.
  const path = [source];
  let node = source;
  for (let position = 1; position <= total; position++) {
    let best = -1;
    const dir = topo.dir(node);
    for (const w of fwd) {
      const len = topo.length(dir, w);
      const off = topo.offset(dir, w, len);
      const adj = topo.words;
      for (let p = off, stop = off + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
        const created = adj[p + A_CREATED]!, deleted = adj[p + A_DELETED]!;
        if (created > at || (deleted !== 0 && at >= deleted)) continue;
        if (label >= 0 && adj[p + A_LABEL] !== label) continue;
        const next = adj[p + A_NEIGHBOR]!;
        if (best !== -1 && next >= best) continue;
        const admissible = position < a
          ? s.seenF[next] === gen && s.distF[next] === position && marked[next] === gen
          : s.seenB[next] === gen && s.distB[next] === total - position;
        if (admissible) best = next;
      }
    }
    if (best === -1) throw queryError('internal error: shortest_path lost its way');
    path.push(best);
    node = best;
  }
  return path;
}
