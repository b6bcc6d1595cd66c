// shortest_path (operations.md §3.8) without exploring the whole graph.
//
// The protocol defines the answer by a one-sided BFS: neighbours expanded in ascending ID
// order, the first discovery of a node fixes its predecessor. By induction over BFS layers
// that BFS reaches every node along the lexicographically smallest shortest path from the
// source (the queue order of a layer is the lexicographic order of the tree paths). So any
// search that finds (1) the distance D and (2) that smallest path gives the same answer:
//
//   1. Bidirectional BFS by layers, growing the side with the smaller (weighted) frontier,
//      until a new node of one side was reached by the other: then D = a + b + 1 for the
//      complete forward layers 0..a and backward layers 0..b.
//   2. Find which forward nodes lie on a shortest path (a node of layer a: an edge to a node
//      at backward distance b; of layer i < a: an edge to such a node of layer i + 1), by a
//      depth-first search from the source that tries successors in ascending ID order.
//   3. Walk from the source, each step taking the smallest-ID neighbour that is on a
//      shortest path (positions <= a) or has backward distance D - position (positions > a).
//
// The differential tests compare this with the reference interpreter's one-sided BFS.
import { queryError } from '../protocol/errors.js';
import { limits } from '../limits.js';
import type { Store } from '../store/store.js';
import { traversalKernelsOn } from '../store/kernels.js';
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
 * Per-thread scratch of one store, in its topology memory so the kernel can use it.
 * `state` holds STATE_WORDS words per node, side by side so one cache line serves a node:
 * [REACH_F] / [REACH_B] = distance + 1 from the source / target (0 = not reached), [MARK] =
 * GOOD / BAD (markGood). Queues hold each side's nodes in BFS order, so one search resets
 * exactly what it visited and costs what it visits, not what the graph holds.
 */
class Scratch {
  readonly capacity: number;
  /** Word offsets in the topology memory (for the kernel) ... */
  readonly at: { state: number; queueF: number; queueB: number };
  /** ... and views of the same words (for JS). */
  readonly state: Uint32Array;
  readonly queueF: Uint32Array;
  readonly queueB: Uint32Array;
  endF = 0;
  endB = 0;
  /** Forward layer a of the last search (orderedPath). */
  layerStartF = 0;
  layerEndF = 0;

  constructor(topo: Topology, capacity: number) {
    this.capacity = capacity;
    const base = topo.scratch('shortest_path', (STATE_WORDS + 2) * capacity);
    const view = (at: number, words: number) => new Uint32Array(topo.memory.buffer, at * 4, words);
    this.at = { state: base, queueF: base + STATE_WORDS * capacity, queueB: base + (STATE_WORDS + 1) * capacity };
    this.state = view(this.at.state, STATE_WORDS * capacity);
    this.queueF = view(this.at.queueF, capacity);
    this.queueB = view(this.at.queueB, capacity);
  }

  /** Forget the search: reset what the queues name. */
  reset(): void {
    const state = this.state;
    for (let i = 0; i < this.endF; i++) {
      const n = this.queueF[i]! * STATE_WORDS;
      state[n + REACH_F] = 0;
      state[n + MARK] = 0;
    }
    for (let i = 0; i < this.endB; i++) state[this.queueB[i]! * STATE_WORDS + REACH_B] = 0;
    this.endF = this.endB = 0;
  }
}

const STATE_WORDS = 4, REACH_F = 0, REACH_B = 1, MARK = 2, PRED_F = 3;

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
 * grow (interleaved A/B on the benchmark graph: 3 gave 1.14-1.21x the paths/s of 1; 2, 4
 * and 8 gave 1.04, 1.16 and 0.98). Any value gives the same answers.
 */
const FORWARD_WEIGHT = 3;

/** Set in an expansion's result when a new node was already reached by the other side. */
const MET = 0x80000000;

/**
 * One BFS layer in JS: the unreached visible neighbours of queue[from..to) get reach
 * `mark` and are appended to the queue. Returns the new end; stops at the first appended
 * node the other side reached, returning end | MET.
 */
function expandJs(topo: Topology, s: Scratch, forward: boolean, from: number, to: number, words: readonly DirWord[], label: number, at: number, mark: number): number {
  const queue = forward ? s.queueF : s.queueB, state = s.state;
  const reach = forward ? REACH_F : REACH_B, other = forward ? REACH_B : REACH_F;
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
        if (state[slot + reach] !== 0) continue;
        state[slot + reach] = mark;
        queue[end++] = next;
        if (state[slot + other] !== 0) return (end | MET) >>> 0; // the sides met: nothing more is needed
      }
    }
  }
  return end;
}

/** Reused by expandForwardOrdered: one node's unreached neighbours before sorting. */
let fresh = new Uint32Array(256);

/**
 * A forward layer in the protocol's own BFS order: nodes in queue order, each one's new
 * neighbours ascending, each remembering the node that found it (PRED_F). The forward tree
 * then holds, for every node, the lexicographically smallest shortest path to it.
 */
function expandForwardOrdered(topo: Topology, s: Scratch, from: number, to: number, words: readonly DirWord[], label: number, at: number, mark: number): number {
  const queue = s.queueF, state = s.state;
  let end = to, met = 0;
  for (let i = from; i < to; i++) {
    const node = queue[i]!;
    const dir = topo.dir(node);
    let n = 0;
    for (const w of words) {
      const len = topo.length(dir, w), off = topo.entries(dir, w, len);
      const adj = topo.words;
      if (n + len > fresh.length) {
        const bigger = new Uint32Array(Math.max(fresh.length * 2, n + len));
        bigger.set(fresh.subarray(0, n));
        fresh = bigger;
      }
      for (let p = off, stop = off + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
        if (!entryVisible(adj, p, at, label)) continue;
        const next = adj[p + A_NEIGHBOR]!;
        if (state[next * STATE_WORDS + REACH_F] === 0) fresh[n++] = next;
      }
    }
    if (n > 1) fresh.subarray(0, n).sort();
    for (let k = 0; k < n; k++) {
      const next = fresh[k]!, slot = next * STATE_WORDS;
      if (state[slot + REACH_F] !== 0) continue; // a parallel edge: already appended
      state[slot + REACH_F] = mark;
      state[slot + PRED_F] = node;
      queue[end++] = next;
      if (state[slot + REACH_B] !== 0) met = MET;
    }
    if (met !== 0) return (end | MET) >>> 0; // this node's list is whole; the rest is not needed
  }
  return end;
}

/** The same layer on the WebAssembly kernel (assembly/kernels.ts). */
function expandKernel(topo: Topology, s: Scratch, forward: boolean, from: number, to: number, words: readonly DirWord[], label: number, at: number, mark: number): number {
  let dirs = 0;
  for (const w of words) dirs |= w === DIR_OUT ? 1 : 2;
  const queue = forward ? s.at.queueF : s.at.queueB;
  return topo.kernels().expandLayer(queue, from, to, dirs, label, at, s.at.state, forward ? REACH_F : REACH_B, mark) >>> 0;
}

const GOOD = 1, BAD = 2;

/**
 * Settle marked[v] (GOOD: v reaches a node at backward distance b in a - position(v) + 1
 * forward steps through forward layers; BAD: it does not) for the source and, depth first,
 * for successors in ascending ID order until one is GOOD. Iterative: positions go up to a.
 */
function markGood(topo: Topology, s: Scratch, source: number, a: number, b: number, fwd: readonly DirWord[], label: number, at: number): void {
  const state = s.state;
  const nodes = [source], positions = [0], candidates: (number[] | null)[] = [null], next = [0];
  while (nodes.length > 0) {
    const top = nodes.length - 1;
    const node = nodes[top]!, position = positions[top]!;
    let list = candidates[top]!;
    if (list === null) {
      // First visit: the successors that could continue a shortest path.
      const found = traversalKernelsOn()
        ? successorsKernel(topo, s, node, position === a, position === a ? b + 1 : position + 2, fwd, label, at)
        : successorsJs(topo, s, node, position === a, position === a ? b + 1 : position + 2, fwd, label, at);
      if (position === a) {
        state[node * STATE_WORDS + MARK] = found === true ? GOOD : BAD;
        nodes.pop(); positions.pop(); candidates.pop(); next.pop();
        continue;
      }
      list = found as number[];
      list.sort((x, y) => x - y);
      candidates[top] = list;
    }
    let i = next[top]!;
    while (i < list.length && state[list[i]! * STATE_WORDS + MARK] === BAD) i++;
    next[top] = i;
    if (i < list.length && state[list[i]! * STATE_WORDS + MARK] === GOOD) {
      state[node * STATE_WORDS + MARK] = GOOD;
    } else if (i < list.length) {
      nodes.push(list[i]!); positions.push(position + 1); candidates.push(null); next.push(0);
      continue;
    } else {
      state[node * STATE_WORDS + MARK] = BAD;
    }
    nodes.pop(); positions.pop(); candidates.pop(); next.pop();
  }
}

/**
 * `node`'s forward successors for markGood: with `backward`, whether one has backward reach
 * `reach`; otherwise those with forward reach `reach` that are not settled BAD (unsorted).
 */
function successorsJs(topo: Topology, s: Scratch, node: number, backward: boolean, reach: number, fwd: readonly DirWord[], label: number, at: number): boolean | number[] {
  const state = s.state, list: number[] = [];
  const dir = topo.dir(node);
  for (const w of fwd) {
    const len = topo.length(dir, w), off = topo.entries(dir, w, len);
    const adj = topo.words;
    for (let p = off, stop = off + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
      if (!entryVisible(adj, p, at, label)) continue;
      const slot = adj[p + A_NEIGHBOR]! * STATE_WORDS;
      if (backward) {
        if (state[slot + REACH_B] === reach) return true;
      } else if (state[slot + REACH_F] === reach && state[slot + MARK] !== BAD) {
        list.push(adj[p + A_NEIGHBOR]!);
      }
    }
  }
  return backward ? false : list;
}

/** The same on the successorsAt kernel. */
function successorsKernel(topo: Topology, s: Scratch, node: number, backward: boolean, reach: number, fwd: readonly DirWord[], label: number, at: number): boolean | number[] {
  let dirs = 0, entries = 0;
  const dir = topo.dir(node);
  for (const w of fwd) {
    dirs |= w === DIR_OUT ? 1 : 2;
    entries += topo.length(dir, w);
  }
  const kernels = topo.kernels();
  if (backward) return kernels.successorsAt(node, dirs, label, at, s.at.state, 1, reach, 0) === 1;
  const out = topo.scratch('shortest_path.successors', Math.max(entries, 64));
  const count = kernels.successorsAt(node, dirs, label, at, s.at.state, 0, reach, out);
  const found = new Uint32Array(topo.memory.buffer, out * 4, count);
  return Array.from(found);
}

export const ORDERED = { on: true };

/**
 * With forward layers in the protocol's order: the answer's node at position a is the first
 * node of forward layer a (queue order = lexicographic order of tree paths) with a forward
 * neighbour at backward distance b; its tree path is the prefix; the suffix is the greedy
 * walk over backward distances.
 */
function orderedPath(topo: Topology, s: Scratch, source: number, a: number, b: number, fwd: readonly DirWord[], bwd: readonly DirWord[], label: number, at: number): number[] {
  const state = s.state, queue = s.queueF;
  const total = a + b + 1;
  let pivot = -1;
  for (let i = s.layerStartF; i < s.layerEndF && pivot === -1; i++) {
    const node = queue[i]!;
    const good = traversalKernelsOn() ? successorsKernel(topo, s, node, true, b + 1, fwd, label, at) : successorsJs(topo, s, node, true, b + 1, fwd, label, at);
    if (good === true) pivot = node;
  }
  if (pivot === -1) throw queryError('internal error: shortest_path lost its way');
  const path: number[] = [];
  for (let node = pivot, k = a; k >= 0; k--) {
    path.push(node);
    node = state[node * STATE_WORDS + PRED_F]!;
  }
  path.reverse();
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
        if (best !== -1 && next >= best) continue;
        if (state[next * STATE_WORDS + REACH_B] === total - position + 1) best = next;
      }
    }
    if (best === -1) throw queryError('internal error: shortest_path lost its way');
    path.push(best);
    node = best;
  }
  void bwd;
  return path;
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

  // 1. Queues hold whole layers back to back; layerF[i] = start of forward layer i.
  s.queueF[0] = source; s.endF = 1; state[source * STATE_WORDS + REACH_F] = 1;
  s.queueB[0] = target; s.endB = 1; state[target * STATE_WORDS + REACH_B] = 1;
  const layerF = [0, 1], layerB = [0, 1];
  let a = 0, b = 0, met = false;
  while (!met && a + b < q.maxDepth) {
    q.checkDeadline();
    // Grow the side with the smaller frontier (reading degrees would cost a cache miss per
    // node), weighting the forward side: its layers are scanned again by markGood.
    const forward = FORWARD_WEIGHT * (layerF[a + 1]! - layerF[a]!) <= layerB[b + 1]! - layerB[b]!;
    const layers = forward ? layerF : layerB;
    const words = forward ? fwd : bwd;
    const depth = forward ? a : b;
    const from = layers[depth]!, to = layers[depth + 1]!;
    const end = forward && ORDERED.on
      ? expandForwardOrdered(topo, s, from, to, words, label, at, depth + 2)
      : traversalKernelsOn()
        ? expandKernel(topo, s, forward, from, to, words, label, at, depth + 2)
        : expandJs(topo, s, forward, from, to, words, label, at, depth + 2);
    if (forward) s.endF = end & ~MET; else s.endB = end & ~MET;
    if (s.endF + s.endB > limits.shortestPathVisitedMax) throw queryError(`shortest_path visited more than ${limits.shortestPathVisitedMax} nodes`);
    // The expansion stops at the first node the other side reached: that layer stays
    // partial and unused; layers 0..a and 0..b are complete.
    met = (end & MET) !== 0;
    if (met) break;
    layers.push(end);
    if (forward) a++; else b++;
    if (end === to) return []; // this side is exhausted: the other cannot be reached
  }
  if (!met) return [];
  const total = a + b + 1;
  s.layerStartF = layerF[a]!; s.layerEndF = layerF[a + 1]!;

  // 2. Which forward nodes lead on to the target: a depth-first search from the source that
  // tries successors in ascending ID order and remembers every verdict, so it settles the
  // smallest good successor of each node on the answer and rarely much more.
  if (ORDERED.on) return orderedPath(topo, s, source, a, b, fwd, bwd, label, at);
  if (a > 0) markGood(topo, s, source, a, b, fwd, label, at);

  // 3. The smallest-ID admissible neighbour at every step.
  const path = [source];
  let node = source;
  for (let position = 1; position <= total; position++) {
    let best = -1;
    const dir = topo.dir(node);
    for (const w of fwd) {
      const len = topo.length(dir, w), off = topo.entries(dir, w, len);
      const adj = topo.words;
      for (let p = off, stop = off + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
        if (!entryVisible(adj, p, at, label)) continue;
        const next = adj[p + A_NEIGHBOR]!;
        if (best !== -1 && next >= best) continue;
        const slot = next * STATE_WORDS;
        const admissible = position <= a
          ? state[slot + MARK] === GOOD && state[slot + REACH_F] === position + 1
          : state[slot + REACH_B] === total - position + 1;
        if (admissible) best = next;
      }
    }
    if (best === -1) throw queryError('internal error: shortest_path lost its way');
    path.push(best);
    node = best;
  }
  return path;
}
