// shortest_path (operations.md §3.8) without exploring the whole graph.
//
// The protocol defines the answer by a one-sided BFS: neighbours expanded in ascending ID
// order, the first discovery of a node fixes its predecessor. In that BFS every node's tree
// path is the lexicographically smallest shortest path to it, and the queue order of a
// layer is the lexicographic order of those paths (induction over layers). The answer is
// therefore the lexicographically smallest shortest path to the target, found here as:
//
//   1. Bidirectional BFS by layers, growing the side with the smaller (weighted) frontier,
//      until a node of one side is reached by the other: then the distance is
//      D = a + b + 1 for the complete forward layers 0..a and backward layers 0..b.
//      Forward layers are built exactly in the protocol's order, with predecessors; the
//      backward side's order does not matter.
//   2. The answer's node at position a is the first node of forward layer a, in queue
//      order, with a successor at backward distance b; its tree path is the prefix.
//   3. From there each step takes the smallest-ID successor at backward distance
//      D - position.
//
// The differential tests compare this with the reference interpreter's one-sided BFS.
import { queryError } from '../protocol/errors.js';
import { limits } from '../limits.js';
import type { Store } from '../store/store.js';
import { kernelDirections, traversalKernelsOn } from '../store/kernels.js';
import { withRoom } from './marks.js';
import { A_NEIGHBOR, ADJ_WORDS, DIR_IN, DIR_OUT, entryVisible, type DirWord, type Topology } from '../store/topology.js';

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

/**
 * Per-thread scratch of one store, in its topology memory so the kernels can use it.
 * `state` holds STATE_WORDS words per node, side by side so one cache line serves a node:
 * [REACH_F] / [REACH_B] = distance + 1 from the source / target (0 = not reached),
 * [PRED_F] = the node that reached it first in the forward BFS. Queues hold each side's
 * nodes in BFS order, so a search resets exactly what it visited and costs what it visits,
 * not what the graph holds.
 */
class Scratch {
  readonly capacity: number;
  /** Word offsets in the topology memory (for the kernels) ... */
  readonly at: { state: number; queueF: number; queueB: number };
  /** ... and views of the same words (for JS). */
  readonly state: Uint32Array;
  readonly queueF: Uint32Array;
  readonly queueB: Uint32Array;
  endF = 0;
  endB = 0;

  constructor(topo: Topology, capacity: number) {
    this.capacity = capacity;
    const base = topo.scratch('shortest_path', (STATE_WORDS + 2) * capacity);
    const view = (at: number, words: number) => new Uint32Array(topo.memory.buffer, at * 4, words);
    this.at = { state: base, queueF: base + STATE_WORDS * capacity, queueB: base + (STATE_WORDS + 1) * capacity };
    this.state = view(this.at.state, STATE_WORDS * capacity);
    this.queueF = view(this.at.queueF, capacity);
    this.queueB = view(this.at.queueB, capacity);
  }

  /** Forget the search: reset what the queues name (PRED_F is only read where REACH_F is set). */
  reset(): void {
    const state = this.state;
    for (let i = 0; i < this.endF; i++) state[this.queueF[i]! * STATE_WORDS + REACH_F] = 0;
    for (let i = 0; i < this.endB; i++) state[this.queueB[i]! * STATE_WORDS + REACH_B] = 0;
    this.endF = this.endB = 0;
  }
}

const STATE_WORDS = 4, REACH_F = 0, REACH_B = 1, PRED_F = 3;

const scratches = new WeakMap<Topology, Scratch>();

function scratchFor(topo: Topology, nodes: number): Scratch {
  let s = scratches.get(topo);
  if (s === undefined || s.capacity < nodes) {
    s = new Scratch(topo, Math.max(nodes, 1024, (s?.capacity ?? 0) * 2));
    scratches.set(topo, s);
  }
  return s;
}

const forwardWords = (d: PathDirection): readonly DirWord[] => (d === 'out' ? [DIR_OUT] : d === 'in' ? [DIR_IN] : [DIR_OUT, DIR_IN]);
const backwardWords = (d: PathDirection): readonly DirWord[] => (d === 'out' ? [DIR_IN] : d === 'in' ? [DIR_OUT] : [DIR_OUT, DIR_IN]);

/**
 * How much a forward frontier node counts against a backward one when choosing the side to
 * grow (forward layers cost more: they are sorted per node). Interleaved A/B on the
 * benchmark graph: 3 gave 1.14-1.21x the paths/s of 1; 2, 4 and 8 gave 1.04, 1.16 and
 * 0.98. Any value gives the same answers.
 */
const FORWARD_WEIGHT = 3;

/** Set in an expansion's result when a new node was already reached by the other side. */
const MET = 0x80000000;

/** Layer expansions: (scratch, layer bounds in the queue, ...) -> new queue end, | MET. */
type Expand = (topo: Topology, s: Scratch, from: number, to: number, words: readonly DirWord[], label: number, at: number, mark: number) => number;

/** Reused by expandForwardJs: one node's unreached neighbours before sorting. */
let fresh: Uint32Array = new Uint32Array(256);

/**
 * A forward layer in the protocol's own order: nodes in queue order, each one's unreached
 * neighbours ascending, each remembering the node that reached it. Stops after the node
 * whose list reached a node of the backward side.
 */
const expandForwardJs: Expand = (topo, s, from, to, words, label, at, mark) => {
  const queue = s.queueF, state = s.state;
  let end = to;
  for (let i = from; i < to; i++) {
    const node = queue[i]!;
    const dir = topo.dir(node);
    let n = 0;
    for (const w of words) {
      const len = topo.length(dir, w), off = topo.entries(dir, w, len);
      const adj = topo.words;
      fresh = withRoom(fresh, n, n + len);
      for (let p = off, stop = off + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
        if (!entryVisible(adj, p, at, label)) continue;
        const next = adj[p + A_NEIGHBOR]!;
        if (state[next * STATE_WORDS + REACH_F] === 0) fresh[n++] = next;
      }
    }
    if (n > 1) fresh.subarray(0, n).sort();
    let met = false;
    for (let k = 0; k < n; k++) {
      const slot = fresh[k]! * STATE_WORDS;
      if (state[slot + REACH_F] !== 0) continue; // a parallel edge: already appended
      state[slot + REACH_F] = mark;
      state[slot + PRED_F] = node;
      queue[end++] = fresh[k]!;
      if (state[slot + REACH_B] !== 0) met = true;
    }
    if (met) return (end | MET) >>> 0;
  }
  return end;
};

/** The same on the expandOrdered kernel. */
const expandForwardKernel: Expand = (topo, s, from, to, words, label, at, mark) => {
  const kernels = topo.kernels();
  const dirs = kernelDirections(words);
  // The largest list one node can contribute is at most the layer's whole entry count.
  const temp = topo.scratch('shortest_path.sort', Math.max(64, kernels.entryCount(s.at.queueF + from, to - from, dirs)));
  return kernels.expandOrdered(s.at.queueF, from, to, dirs, label, at, s.at.state, mark, temp) >>> 0;
};

/** A backward layer (order irrelevant): unreached neighbours get reach `mark`; stops at the first met node. */
const expandBackwardJs: Expand = (topo, s, from, to, words, label, at, mark) => {
  const queue = s.queueB, state = s.state;
  let end = to;
  for (let i = from; i < to; i++) {
    const dir = topo.dir(queue[i]!);
    for (const w of words) {
      const len = topo.length(dir, w), off = topo.entries(dir, w, len);
      const adj = topo.words;
      for (let p = off, stop = off + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
        if (!entryVisible(adj, p, at, label)) continue;
        const next = adj[p + A_NEIGHBOR]!;
        const slot = next * STATE_WORDS;
        if (state[slot + REACH_B] !== 0) continue;
        state[slot + REACH_B] = mark;
        queue[end++] = next;
        if (state[slot + REACH_F] !== 0) return (end | MET) >>> 0; // the sides met: nothing more is needed
      }
    }
  }
  return end;
};

/** The same on the expandLayer kernel. */
const expandBackwardKernel: Expand = (topo, s, from, to, words, label, at, mark) =>
  topo.kernels().expandLayer(s.at.queueB, from, to, kernelDirections(words), label, at, s.at.state, REACH_B, mark) >>> 0;

/** Whether one of `node`'s successors has backward reach `reach`. */
function hasSuccessorAt(topo: Topology, s: Scratch, node: number, words: readonly DirWord[], label: number, at: number, reach: number): boolean {
  if (traversalKernelsOn()) return topo.kernels().hasSuccessorAt(node, kernelDirections(words), label, at, s.at.state, reach) === 1;
  const dir = topo.dir(node);
  for (const w of words) {
    const len = topo.length(dir, w), off = topo.entries(dir, w, len);
    const adj = topo.words;
    for (let p = off, stop = off + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
      if (entryVisible(adj, p, at, label) && s.state[adj[p + A_NEIGHBOR]! * STATE_WORDS + REACH_B] === reach) return true;
    }
  }
  return false;
}

/** The node IDs of the path the protocol's BFS finds, source first; [] when none. */
export function shortestPathJs(q: PathSearch): number[] {
  if (q.source === q.target) return [q.source];
  const s = scratchFor(q.store.topology, q.store.nodeSlots());
  try {
    return search(q, s);
  } finally {
    s.reset();
  }
}

function search(q: PathSearch, s: Scratch): number[] {
  const { store, at, source, target, label } = q;
  const topo = store.topology;
  const fwd = forwardWords(q.direction), bwd = backwardWords(q.direction);
  const state = s.state;
  const kernel = traversalKernelsOn();
  const expandForward = kernel ? expandForwardKernel : expandForwardJs;
  const expandBackward = kernel ? expandBackwardKernel : expandBackwardJs;

  // 1. Queues hold whole layers back to back; layerF[i] = start of forward layer i.
  s.queueF[0] = source; s.endF = 1; state[source * STATE_WORDS + REACH_F] = 1;
  s.queueB[0] = target; s.endB = 1; state[target * STATE_WORDS + REACH_B] = 1;
  const layerF = [0, 1], layerB = [0, 1];
  let a = 0, b = 0, met = false;
  while (a + b < q.maxDepth) {
    q.checkDeadline();
    // Grow the side with the smaller frontier (reading degrees would cost a cache miss per node).
    const forward = FORWARD_WEIGHT * (layerF[a + 1]! - layerF[a]!) <= layerB[b + 1]! - layerB[b]!;
    const layers = forward ? layerF : layerB;
    const depth = forward ? a : b;
    const from = layers[depth]!, to = layers[depth + 1]!;
    const result = forward
      ? expandForward(topo, s, from, to, fwd, label, at, depth + 2)
      : expandBackward(topo, s, from, to, bwd, label, at, depth + 2);
    const end = result & ~MET;
    if (forward) s.endF = end; else s.endB = end;
    if (s.endF + s.endB > limits.shortestPathVisitedMax) throw queryError(`shortest_path visited more than ${limits.shortestPathVisitedMax} nodes`);
    // The expansion stopped at the first node the other side reached: that layer stays
    // partial and unused; layers 0..a and 0..b are complete.
    met = (result & MET) !== 0;
    if (met) break;
    layers.push(end);
    if (forward) a++; else b++;
    if (end === to) return []; // this side is exhausted: the other cannot be reached
  }
  if (!met) return [];
  const total = a + b + 1;

  // 2. The first node of forward layer a with a successor at backward distance b.
  let pivot = -1;
  for (let i = layerF[a]!; i < layerF[a + 1]! && pivot === -1; i++) {
    if (hasSuccessorAt(topo, s, s.queueF[i]!, fwd, label, at, b + 1)) pivot = s.queueF[i]!;
  }
  if (pivot === -1) throw queryError('internal error: shortest_path lost its way');
  const path: number[] = [];
  for (let node = pivot, k = a; k >= 0; k--, node = state[node * STATE_WORDS + PRED_F]!) path.push(node);
  path.reverse();

  // 3. The smallest-ID successor at the right backward distance, step by step.
  let node = pivot;
  for (let position = a + 1; position <= total; position++) {
    let best = -1;
    const dir = topo.dir(node);
    for (const w of fwd) {
      const len = topo.length(dir, w), off = topo.entries(dir, w, len);
      const adj = topo.words;
      for (let p = off, stop = off + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
        if (!entryVisible(adj, p, at, label)) continue;
        const next = adj[p + A_NEIGHBOR]!;
        if ((best === -1 || next < best) && state[next * STATE_WORDS + REACH_B] === total - position + 1) best = next;
      }
    }
    if (best === -1) throw queryError('internal error: shortest_path lost its way');
    path.push(best);
    node = best;
  }
  return path;
}
