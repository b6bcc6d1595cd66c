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
import type { Op } from '../protocol/ast.js';
import { queryError } from '../protocol/errors.js';
import { limits } from '../limits.js';
import type { Store } from '../store/store.js';
import { traversalKernelsOn } from '../store/kernels.js';
import { withRoom } from './marks.js';
import type { ExecCtx } from './context.js';
import { guard } from '../query-guard.js';
import type { Stream } from './rows.js';
import { resolveRef } from './sources.js';
import { A_NEIGHBOR, ADJ_WORDS, DIR_IN, DIR_OUT, entryVisible, kernelDirections, type DirWord, type Topology } from '../store/topology.js';

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
 * One search's state, in this thread's kernel scratch (topology memory, so the kernels use
 * the same words; given back when the search ends). A header (H_*) and an open-addressing
 * table of the nodes the search reached, ENTRY_WORDS words each, side by side so one cache
 * line serves a node: [E_KEY] node + 1 (0 = empty slot), [E_REACH_F] / [E_REACH_B] =
 * distance + 1 from the source / target (0 = not reached), [E_PRED_F] = the node that
 * reached it first in the forward BFS. Queues hold each side's nodes in BFS order. All of
 * it grows with what the search visits, never with the store (assembly/kernels.ts repeats
 * the layout).
 */
class Search {
  /** Word offsets in the topology memory and capacities (words). */
  head = 0;
  queueF = 0;
  capF = 0;
  queueB = 0;
  capB = 0;
  /** One node's sorted list, for the expandOrdered kernel. */
  temp = 0;
  tempCap = 0;
  endF = 0;
  endB = 0;
}

const H_TABLE = 0, H_SHIFT = 1, H_COUNT = 2, H_ROOM = 3, H_RESUME = 4, H_NEED = 5, HEADER_WORDS = 8;
const ENTRY_WORDS = 4, E_KEY = 0, E_REACH_F = 1, E_REACH_B = 2, E_PRED_F = 3;
/** Fibonacci hashing: node IDs are dense and often consecutive; this spreads them. */
const HASH = 0x9e3779b1;
/** claimEntry's flag on an entry it made. */
const NEW = 0x80000000;
/**
 * First sizes (a search that meets in a few layers stays within them: 8 KiB of table).
 * Each doubles as needed.
 */
const TABLE_SLOTS_MIN = 4096, QUEUE_WORDS_MIN = 2048, TEMP_WORDS_MIN = 256;
/**
 * Load bound: 1/2 while the table is small enough to stay in cache (short probes are what
 * counts there), 3/4 beyond 2^20 slots, where the cache misses dominate and the memory
 * matters (a search at limits.shortestPathVisitedMax fits in limits.scratchBytesPerThreadMax).
 */
const roomOf = (slots: number): number => (slots <= 1 << 20 ? slots >>> 1 : slots - (slots >>> 2));

/** Word offset of `node`'s entry, or 0 when the search has not reached it. */
function findEntry(words: Uint32Array, table: number, shift: number, node: number): number {
  const mask = 0xffffffff >>> shift, key = node + 1;
  for (let i = Math.imul(node, HASH) >>> shift; ; i = (i + 1) & mask) {
    const e = table + i * ENTRY_WORDS;
    const k = words[e + E_KEY]!;
    if (k === key) return e;
    if (k === 0) return 0;
  }
}

/** `node`'s entry, made when missing (then + NEW); the caller made room for it. */
function claimEntry(words: Uint32Array, table: number, shift: number, node: number): number {
  const mask = 0xffffffff >>> shift, key = node + 1;
  for (let i = Math.imul(node, HASH) >>> shift; ; i = (i + 1) & mask) {
    const e = table + i * ENTRY_WORDS;
    const k = words[e + E_KEY]!;
    if (k === key) return e;
    if (k === 0) {
      words[e + E_KEY] = key;
      return e + NEW;
    }
  }
}

/** A new search: header, empty table, queues; the caller gives the scratch back. */
function startSearch(topo: Topology): Search {
  const arena = topo.scratch();
  const s = new Search();
  s.head = arena.takeZeroed(HEADER_WORDS);
  moveTable(topo, s, TABLE_SLOTS_MIN);
  s.queueF = arena.take(QUEUE_WORDS_MIN); s.capF = QUEUE_WORDS_MIN;
  s.queueB = arena.take(QUEUE_WORDS_MIN); s.capB = QUEUE_WORDS_MIN;
  s.temp = arena.take(TEMP_WORDS_MIN); s.tempCap = TEMP_WORDS_MIN;
  return s;
}

/**
 * Give the search a new table of `slots` slots holding its entries (the old table stays
 * taken until the search ends: at most half the new one). The rehash kernel zeroes and
 * re-inserts much faster than JS; rehashJs is its twin.
 */
function moveTable(topo: Topology, s: Search, slots: number): void {
  const table = topo.scratch().take(slots * ENTRY_WORDS);
  const shift = 32 - Math.log2(slots);
  if (traversalKernelsOn()) topo.kernels().rehash(s.head, table, shift);
  else rehashJs(topo.words, s.head, table, shift);
  topo.words[s.head + H_ROOM] = roomOf(slots);
}

function rehashJs(words: Uint32Array, head: number, table: number, shift: number): void {
  words.fill(0, table, table + 2 ** (32 - shift) * ENTRY_WORDS);
  const old = words[head + H_TABLE]!;
  if (old !== 0) {
    for (let e = old, stop = old + 2 ** (32 - words[head + H_SHIFT]!) * ENTRY_WORDS; e < stop; e += ENTRY_WORDS) {
      const key = words[e + E_KEY]!;
      if (key === 0) continue;
      const moved = claimEntry(words, table, shift, key - 1) - NEW;
      words[moved + E_REACH_F] = words[e + E_REACH_F]!;
      words[moved + E_REACH_B] = words[e + E_REACH_B]!;
      words[moved + E_PRED_F] = words[e + E_PRED_F]!;
    }
  }
  words[head + H_TABLE] = table;
  words[head + H_SHIFT] = shift;
}

/**
 * Room for `need` more nodes: table entries (at its load bound) and the forward or
 * backward queue past `end`; or, with `withTemp` (the kernel) when `need` is more than
 * temp holds, one node's list in temp (only that: the kernel then counts what the node
 * really adds). Larger regions are new scratch (old ones stay taken until the search ends).
 */
function makeRoom(topo: Topology, s: Search, forward: boolean, end: number, need: number, withTemp: boolean): void {
  const arena = topo.scratch();
  if (withTemp && need > s.tempCap) {
    s.tempCap = Math.max(s.tempCap * 2, need);
    s.temp = arena.take(s.tempCap);
    return;
  }
  const words = topo.words;
  const count = words[s.head + H_COUNT]!;
  if (count + need > words[s.head + H_ROOM]!) {
    let slots = 2 ** (33 - words[s.head + H_SHIFT]!);
    while (count + need > roomOf(slots)) slots *= 2;
    moveTable(topo, s, slots);
  }
  const cap = forward ? s.capF : s.capB;
  if (end + need > cap) {
    const grown = Math.max(cap * 2, end + need);
    const queue = arena.take(grown);
    const old = forward ? s.queueF : s.queueB;
    topo.words.copyWithin(queue, old, old + end);
    if (forward) { s.queueF = queue; s.capF = grown; } else { s.queueB = queue; s.capB = grown; }
  }
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
/** Set in a kernel's result when it stopped for room (H_RESUME, H_NEED say where and how much). */
const ROOM = 0x40000000;

/** Layer expansions: (search, layer bounds in the queue, ...) -> new queue end, | MET. */
type Expand = (topo: Topology, s: Search, from: number, to: number, words: readonly DirWord[], label: number, at: number, mark: number) => number;

/** Reused by expandForwardJs: one node's unreached neighbours before sorting. */
let fresh: Uint32Array = new Uint32Array(256);

/**
 * A forward layer in the protocol's own order: nodes in queue order, each one's unreached
 * neighbours ascending, each remembering the node that reached it. Stops after the node
 * whose list reached a node of the backward side.
 */
const expandForwardJs: Expand = (topo, s, from, to, dirWords, label, at, mark) => {
  const w0 = dirWords[0]!, w1 = dirWords[1];
  let end = to;
  for (let i = from; i < to; i++) {
    const node = topo.words[s.queueF + i]!;
    const dir = topo.dir(node);
    // Lengths read once: the room check and the scan count the same entries.
    const len0 = topo.length(dir, w0), len1 = w1 === undefined ? 0 : topo.length(dir, w1);
    fresh = withRoom(fresh, 0, len0 + len1);
    let n = 0;
    for (let d = 0; d < 2; d++) {
      const len = d === 0 ? len0 : len1;
      if (len === 0) continue;
      const off = topo.entries(dir, d === 0 ? w0 : w1!, len);
      const words = topo.words;
      const table = words[s.head + H_TABLE]!, shift = words[s.head + H_SHIFT]!;
      for (let p = off, stop = off + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
        if (!entryVisible(words, p, at, label)) continue;
        const next = words[p + A_NEIGHBOR]!;
        const e = findEntry(words, table, shift, next);
        if (e === 0 || words[e + E_REACH_F] === 0) fresh[n++] = next;
      }
    }
    // This node adds at most its n candidates (a hub's mostly reached list asks for little).
    if (topo.words[s.head + H_COUNT]! + n > topo.words[s.head + H_ROOM]! || end + n > s.capF) makeRoom(topo, s, true, end, n, false);
    if (n > 1) fresh.subarray(0, n).sort();
    const words = topo.words;
    const table = words[s.head + H_TABLE]!, shift = words[s.head + H_SHIFT]!;
    let count = words[s.head + H_COUNT]!;
    let met = false;
    for (let k = 0; k < n; k++) {
      let e = claimEntry(words, table, shift, fresh[k]!);
      if (e >= NEW) { e -= NEW; count++; }
      else if (words[e + E_REACH_F] !== 0) continue; // a parallel edge: already appended
      words[e + E_REACH_F] = mark;
      words[e + E_PRED_F] = node;
      words[s.queueF + end++] = fresh[k]!;
      if (words[e + E_REACH_B] !== 0) met = true;
    }
    words[s.head + H_COUNT] = count;
    if (met) return (end | MET) >>> 0;
  }
  return end;
};

/** The same on the expandOrdered kernel. */
const expandForwardKernel: Expand = (topo, s, from, to, words, label, at, mark) => {
  const kernels = topo.kernels();
  const dirs = kernelDirections(words);
  let resume = from, end = to;
  for (;;) {
    const result = kernels.expandOrdered(s.queueF, resume, to, end, s.capF, dirs, label, at, s.head, mark, s.temp, s.tempCap) >>> 0;
    if ((result & ROOM) === 0) return result;
    end = result - ROOM;
    resume = topo.words[s.head + H_RESUME]!;
    makeRoom(topo, s, true, end, topo.words[s.head + H_NEED]!, true);
  }
};

/** A backward layer (order irrelevant): unreached neighbours get reach `mark`; stops at the first met node. */
const expandBackwardJs: Expand = (topo, s, from, to, dirWords, label, at, mark) => {
  const w0 = dirWords[0]!, w1 = dirWords[1];
  let end = to;
  for (let i = from; i < to; i++) {
    const dir = topo.dir(topo.words[s.queueB + i]!);
    const len0 = topo.length(dir, w0), len1 = w1 === undefined ? 0 : topo.length(dir, w1);
    const need = len0 + len1;
    if (topo.words[s.head + H_COUNT]! + need > topo.words[s.head + H_ROOM]! || end + need > s.capB) {
      // Near the bound (or a hub): ask only for what this node can really add.
      const fresh = unreachedCountJs(topo, dir, [len0, len1], dirWords, label, at, s, E_REACH_B);
      if (topo.words[s.head + H_COUNT]! + fresh > topo.words[s.head + H_ROOM]! || end + fresh > s.capB) makeRoom(topo, s, false, end, fresh, false);
    }
    for (let d = 0; d < 2; d++) {
      const len = d === 0 ? len0 : len1;
      if (len === 0) continue;
      const off = topo.entries(dir, d === 0 ? w0 : w1!, len);
      const words = topo.words;
      const table = words[s.head + H_TABLE]!, shift = words[s.head + H_SHIFT]!;
      for (let p = off, stop = off + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
        if (!entryVisible(words, p, at, label)) continue;
        const next = words[p + A_NEIGHBOR]!;
        let e = claimEntry(words, table, shift, next);
        if (e >= NEW) { e -= NEW; words[s.head + H_COUNT]++; }
        else if (words[e + E_REACH_B] !== 0) continue;
        words[e + E_REACH_B] = mark;
        words[s.queueB + end++] = next;
        if (words[e + E_REACH_F] !== 0) return (end | MET) >>> 0; // the sides met: nothing more is needed
      }
    }
  }
  return end;
};

/** Visible entries of a node's blocks whose neighbour has no reach word `reach` (the unreachedCount kernel helper). */
function unreachedCountJs(topo: Topology, dir: number, lens: readonly number[], dirWords: readonly DirWord[], label: number, at: number, s: Search, reach: number): number {
  let fresh = 0;
  for (let d = 0; d < dirWords.length; d++) {
    const len = lens[d]!;
    if (len === 0) continue;
    const off = topo.entries(dir, dirWords[d]!, len);
    const words = topo.words;
    const table = words[s.head + H_TABLE]!, shift = words[s.head + H_SHIFT]!;
    for (let p = off, stop = off + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
      if (!entryVisible(words, p, at, label)) continue;
      const e = findEntry(words, table, shift, words[p + A_NEIGHBOR]!);
      if (e === 0 || words[e + reach] === 0) fresh++;
    }
  }
  return fresh;
}

/** The same on the expandLayer kernel. */
const expandBackwardKernel: Expand = (topo, s, from, to, words, label, at, mark) => {
  const kernels = topo.kernels();
  const dirs = kernelDirections(words);
  let resume = from, end = to;
  for (;;) {
    const result = kernels.expandLayer(s.queueB, resume, to, end, s.capB, dirs, label, at, s.head, 1, mark) >>> 0;
    if ((result & ROOM) === 0) return result;
    end = result - ROOM;
    resume = topo.words[s.head + H_RESUME]!;
    makeRoom(topo, s, false, end, topo.words[s.head + H_NEED]!, false);
  }
};

/** `node`'s entry word offset in the search table (0: not reached). */
function entryOf(topo: Topology, s: Search, node: number): number {
  const words = topo.words;
  return findEntry(words, words[s.head + H_TABLE]!, words[s.head + H_SHIFT]!, node);
}

/** Backward reach of `node` (0: not reached from the target). */
function reachB(topo: Topology, s: Search, node: number): number {
  const e = entryOf(topo, s, node);
  return e === 0 ? 0 : topo.words[e + E_REACH_B]!;
}

/** Whether one of `node`'s successors has backward reach `reach`. */
function hasSuccessorAt(topo: Topology, s: Search, node: number, words: readonly DirWord[], label: number, at: number, reach: number): boolean {
  if (traversalKernelsOn()) return topo.kernels().hasSuccessorAt(node, kernelDirections(words), label, at, s.head, reach) === 1;
  const dir = topo.dir(node);
  for (const w of words) {
    const len = topo.length(dir, w), off = topo.entries(dir, w, len);
    const adj = topo.words;
    for (let p = off, stop = off + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
      if (entryVisible(adj, p, at, label) && reachB(topo, s, adj[p + A_NEIGHBOR]!) === reach) return true;
    }
  }
  return false;
}

/** The node IDs of the path the protocol's BFS finds, source first; [] when none. */
export function shortestPathJs(q: PathSearch): number[] {
  if (q.source === q.target) return [q.source];
  const arena = q.store.topology.scratch();
  const mark = arena.mark();
  try {
    return search(q, startSearch(q.store.topology));
  } finally {
    arena.release(mark);
  }
}

function search(q: PathSearch, s: Search): number[] {
  const { store, at, source, target, label } = q;
  const topo = store.topology;
  const fwd = forwardWords(q.direction), bwd = backwardWords(q.direction);
  const kernel = traversalKernelsOn();
  const expandForward = kernel ? expandForwardKernel : expandForwardJs;
  const expandBackward = kernel ? expandBackwardKernel : expandBackwardJs;

  // 1. Queues hold whole layers back to back; layerF[i] = start of forward layer i.
  {
    const words = topo.words;
    const table = words[s.head + H_TABLE]!, shift = words[s.head + H_SHIFT]!;
    words[claimEntry(words, table, shift, source) - NEW + E_REACH_F] = 1;
    words[claimEntry(words, table, shift, target) - NEW + E_REACH_B] = 1;
    words[s.head + H_COUNT] = 2;
    words[s.queueF] = source; s.endF = 1;
    words[s.queueB] = target; s.endB = 1;
  }
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
    const node = topo.words[s.queueF + i]!;
    if (hasSuccessorAt(topo, s, node, fwd, label, at, b + 1)) pivot = node;
  }
  if (pivot === -1) throw queryError('internal error: shortest_path lost its way');
  const path: number[] = [];
  for (let node = pivot, k = a; k >= 0; k--, node = topo.words[entryOf(topo, s, node) + E_PRED_F]!) path.push(node);
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
        if ((best === -1 || next < best) && reachB(topo, s, next) === total - position + 1) best = next;
      }
    }
    if (best === -1) throw queryError('internal error: shortest_path lost its way');
    path.push(best);
    node = best;
  }
  return path;
}

// ---------------------------------------------------------------- the operation (endpoints from references)

function endpoint(ctx: ExecCtx, ref: Parameters<typeof resolveRef>[1], what: string): number | null {
  if (ref.kind === 'all') throw queryError(`shortest_path ${what} must name at most one node, got "all"`);
  if (ref.kind === 'ids' && ref.ids.length >= 2) throw queryError(`shortest_path ${what} must name at most one node`);
  const ids = resolveRef(ctx, ref, false, ref.kind !== 'ids');
  if (ids.length >= 2) throw queryError(`shortest_path ${what} must name at most one node`);
  if (ids.length === 0 || !ctx.store.nodeExists(ids[0]!, ctx.at)) return null;
  return ids[0]!;
}

export function shortestPath(ctx: ExecCtx, op: Extract<Op, { op: 'shortest_path' }>): Stream {
  const source = endpoint(ctx, op.source, 'source');
  const target = endpoint(ctx, op.target, 'target');
  if (source === null || target === null) return { kind: 'scalars', items: [] };
  if (source === target) return { kind: 'scalars', items: [BigInt(source)] };
  const label = op.label === null ? -1 : ctx.store.names.idOf(op.label);
  if (op.label !== null && label < 0) return { kind: 'scalars', items: [] };
  const maxDepth = op.max_depth > BigInt(limits.nodesMax) ? limits.nodesMax : Number(op.max_depth);
  const path = shortestPathJs({
    store: ctx.store, at: ctx.at, source, target, label, direction: op.direction, maxDepth,
    checkDeadline: () => guard.check(),
  });
  return { kind: 'scalars', items: path.map((id) => BigInt(id)) };
}
