// Counts over navigation that never build rows, on the traversal kernels (assembly/kernels.ts):
// - the distinct neighbours of one node row (what neighbors() returns, only its length),
//   for the last step of a streamed count (streaming.ts countWalks);
// - the distinct ends of a chain of node-to-node steps (count(dedup(out(out(...))))), level
//   by level in kernel calls that mark nodes in a bitset instead of sorting neighbour lists.
// Both answer exactly what the JS path (navigation.ts neighbors(), streaming.ts
// distinctWalkEnds) answers; with the kernels off (setTraversalKernel(false)) callers take
// that path, which is the twin the differential tests compare against.
import { dirWord } from '../store/store.js';
import { traversalKernelsOn } from '../store/kernels.js';
import { kernelDirection, type Topology } from '../store/topology.js';
import type { ExecCtx } from './context.js';
import { guard, ROW_BYTES } from '../query-guard.js';
import type { NavigationStep } from './navigation.js';
import { idOfKey, isEdgeKey, NO_ELEMENT } from './rows.js';

/** A navigation step from node rows to their distinct neighbours, as the kernels take it. */
export interface NodeHop {
  /** Bit 0 out, bit 1 in. */
  readonly dirs: number;
  /** Label ID, or -1 for any. */
  readonly label: number;
}

/** No neighbour at all: a labelled step whose label the store does not know. */
const NO_HOP: NodeHop = { dirs: 0, label: -1 };

/**
 * What `step` does to a node row when it moves to neighbour nodes (expandElement's node
 * branch: neighbors() with these directions and label), NO_HOP when it yields nothing,
 * or null when it moves to edges.
 */
export function nodeHop(step: NavigationStep): NodeHop | null {
  if (step.toEdges) return null;
  if (step.noLabelMatch && !step.unlabeled) return NO_HOP;
  let dirs = 0;
  for (const d of step.dirs) dirs |= kernelDirection(dirWord(d));
  return { dirs, label: step.unlabeled ? -1 : step.label };
}

// ---------------------------------------------------------------- node marks

/**
 * Per thread and topology: a bitset over node IDs in kernel scratch, every bit clear between
 * kernel calls (assembly/kernels.ts, "Node marks"). Grown by doubling as the store grows
 * (the topology heap never frees, so the old one is left behind: at most as much again).
 * One bit per node slot: 12.5 KB for 100k nodes, 8 MB at limits.nodesMax.
 */
const nodeMarks = new WeakMap<Topology, { at: number; bits: number }>();
const MARK_BITS_MIN = 1 << 16;

function marksFor(ctx: ExecCtx): number {
  const topo = ctx.store.topology;
  const nodes = ctx.store.nodeSlots();
  let marks = nodeMarks.get(topo);
  if (marks === undefined || marks.bits < nodes) {
    let bits = MARK_BITS_MIN;
    while (bits < nodes) bits *= 2;
    if (marks !== undefined && bits < 2 * marks.bits) bits = 2 * marks.bits;
    const words = bits / 32;
    const at = topo.reserveScratch(words);
    topo.cover(at + words).fill(0, at, at + words);
    marks = { at, bits };
    nodeMarks.set(topo, marks);
  }
  return marks.at;
}

// ---------------------------------------------------------------- one node

/**
 * The number of distinct neighbours neighbors(ctx, id, ...) would return for node `id`
 * under `hop`, on the kernel (the caller checked traversalKernelsOn()).
 */
export function distinctNeighbourCount(ctx: ExecCtx, id: number, hop: NodeHop): number {
  if (hop.dirs === 0) return 0;
  const topo = ctx.store.topology;
  const kernels = topo.kernels();
  // The work of the scan, as neighbors() counts it (one unit per entry of each block).
  const dir = topo.dir(id);
  guard.step(((hop.dirs & 1) !== 0 ? topo.length(dir, 0) : 0) + ((hop.dirs & 2) !== 0 ? topo.length(dir, 2) : 0));
  return kernels.distinctNeighbourCount(id, hop.dirs, hop.label, ctx.at, marksFor(ctx));
}

// ---------------------------------------------------------------- chains

/** Adjacency entries one reachUnmarked call scans at most (~2-5 ms), so the deadline is checked between calls. */
const KERNEL_ENTRIES_PER_CALL = 1 << 20;

/**
 * The number of distinct ends of the walks from `rows` through `hops` (each a step from
 * node rows to neighbour nodes): count(dedup(chain)). null when some source row is not a
 * node row (the caller takes the general path) or the kernels are off.
 *
 * Why it equals the JS path (distinctWalkEnds): that keeps each level's first occurrences,
 * and a level's set of elements does not depend on the order they were found in; the count
 * is the size of the last level's set. Work is charged per adjacency entry scanned and
 * memory per distinct node of each level, as there.
 */
export function distinctEndCount(ctx: ExecCtx, hops: readonly NodeHop[], rows: readonly number[]): number | null {
  if (!traversalKernelsOn()) return null;
  for (let i = 0; i < rows.length; i++) if (rows[i] === NO_ELEMENT || isEdgeKey(rows[i]!)) return null;
  if (rows.length === 0) return 0;
  const topo = ctx.store.topology, kernels = topo.kernels(), arena = topo.scratch();
  const marks = marksFor(ctx);
  const nodes = ctx.store.nodeSlots();
  const mark = arena.mark();
  // The list whose nodes are marked now (cleared on the way out, whatever happens).
  let marked = 0, markedCount = 0;
  try {
    let level = arena.take(rows.length);
    const words = topo.words; // after take(): it covers what was taken
    for (let i = 0; i < rows.length; i++) words[level + i] = idOfKey(rows[i]!);
    guard.step(rows.length);
    // The source level's first occurrences (one row has nothing to drop: no kernel call).
    let count = rows.length;
    if (count > 1) {
      count = kernels.keepUnmarked(level, count, marks);
      kernels.clearMarks(level, count, marks);
    }
    for (const hop of hops) {
      if (count === 0) return 0;
      if (hop.dirs === 0) return 0;
      const bound = kernels.entryCount(level, count, hop.dirs);
      const room = Math.max(1, Math.min(bound, nodes));
      const next = arena.take(room);
      marked = next;
      markedCount = 0;
      const sliceRows = Math.max(1, Math.floor(count * (KERNEL_ENTRIES_PER_CALL / Math.max(bound, 1))));
      for (let first = 0; first < count; first += sliceRows) {
        const rowsInSlice = Math.min(sliceRows, count - first);
        // Charged before the slice runs: an inline run over its work cap stops before it.
        guard.step(sliceRows >= count ? bound : kernels.entryCount(level + first, rowsInSlice, hop.dirs));
        markedCount += kernels.reachUnmarked(level + first, rowsInSlice, hop.dirs, hop.label, ctx.at, marks, next + markedCount, room - markedCount);
      }
      kernels.clearMarks(next, markedCount, marks);
      const produced = markedCount;
      markedCount = 0;
      guard.charge(produced * ROW_BYTES);
      level = next;
      count = produced;
    }
    return count;
  } finally {
    if (markedCount > 0) kernels.clearMarks(marked, markedCount, marks);
    arena.release(mark);
  }
}
