// Navigation: out/in/both and their edge and unlabeled forms (operations.md §4), over
// the adjacency lists of the store's topology.
import type { Op } from '../protocol/ast.js';
import { dirWord, type Direction } from '../store/store.js';
import { A_EDGE, A_NEIGHBOR, ADJ_WORDS, entryVisible, kernelDirections } from '../store/topology.js';
import {
  checkRowLimit, edgeKey, idOfKey, isEdgeKey, movedExtra, NO_ELEMENT, nodeKey, RowSet, type RowExtra,
} from './rows.js';
import { ElementMarks, withRoom } from './marks.js';
import type { ExecCtx } from './context.js';
import { guard, ROW_BYTES } from '../query-guard.js';
import { limits } from '../limits.js';
import { queryError } from '../protocol/errors.js';
import { traversalKernelsOn } from '../store/kernels.js';

/** Reused per thread: neighbor IDs of one row before sort + dedup. */
let scratch: Uint32Array = new Uint32Array(1024);

/**
 * Distinct neighbor node IDs of node `id`, ascending (operations.md §4.1); with `asKeys`,
 * their row element keys instead.
 */
export function neighbors(ctx: ExecCtx, id: number, dirs: readonly Direction[], label: number, asKeys = false): number[] {
  const topo = ctx.store.topology, at = ctx.at, dir = topo.dir(id);
  let n = 0;
  // Ascending across both lists (one is often empty), so the sort is skipped when it can be.
  let ordered = true;
  let previous = -1;
  for (let d = 0; d < dirs.length; d++) {
    const which = dirWord(dirs[d]!);
    const len = topo.length(dir, which), off = topo.entries(dir, which, len);
    const words = topo.words;
    guard.step(len);
    scratch = withRoom(scratch, n, n + len);
    for (let p = off, end = off + len * ADJ_WORDS; p < end; p += ADJ_WORDS) {
      if (!entryVisible(words, p, at, label)) continue;
      const neighbor = words[p + A_NEIGHBOR]!;
      if (neighbor < previous) ordered = false;
      previous = neighbor;
      scratch[n++] = neighbor;
    }
  }
  if (n === 0) return [];
  // Blocks are in edge ID order, which is often neighbor order too (bulk loads): skip the sort then.
  if (!ordered) scratch.subarray(0, n).sort();
  const scale = asKeys ? 2 : 1; // nodeKey(id) = id * 2
  const out: number[] = [scratch[0]! * scale];
  for (let i = 1; i < n; i++) if (scratch[i] !== scratch[i - 1]) out.push(scratch[i]! * scale);
  return out;
}

/**
 * Distinct incident edge IDs of node `id`, ascending (operations.md §4.2); with `asKeys`,
 * their row element keys instead.
 */
export function incidentEdges(ctx: ExecCtx, id: number, dirs: readonly Direction[], label: number, asKeys = false): number[] {
  const topo = ctx.store.topology, at = ctx.at, dir = topo.dir(id);
  const out: number[] = [];
  let ordered = true;
  let previous = -1;
  for (const direction of dirs) {
    const which = dirWord(direction);
    const len = topo.length(dir, which), off = topo.entries(dir, which, len);
    const words = topo.words;
    guard.step(len);
    for (let p = off, end = off + len * ADJ_WORDS; p < end; p += ADJ_WORDS) {
      if (!entryVisible(words, p, at, label)) continue;
      // A self-loop sits in both lists; keep it once.
      if (direction === 'in' && dirs.length === 2 && words[p + A_NEIGHBOR] === id) continue;
      const edge = words[p + A_EDGE]!;
      if (edge < previous) ordered = false;
      previous = edge;
      out.push(edge);
    }
  }
  if (!ordered) out.sort((a, b) => a - b);
  if (asKeys) for (let i = 0; i < out.length; i++) out[i] = out[i]! * 2 + 1; // edgeKey
  return out;
}

/** The most recent node in a row's path, or -1. */
function latestPathNode(extra: RowExtra | null): number {
  const path = extra?.path;
  if (!path) return -1;
  for (let i = path.length - 1; i >= 0; i--) if (!isEdgeKey(path[i]!)) return idOfKey(path[i]!);
  return -1;
}

/** other_n on an edge row (operations.md §4.3). */
function otherEnds(ctx: ExecCtx, edge: number, extra: RowExtra | null): number[] {
  const src = ctx.store.edgeSource(edge), dst = ctx.store.edgeTarget(edge);
  const latest = latestPathNode(extra);
  if (latest === src) return [dst];
  if (latest === dst) return [src];
  return src === dst ? [src] : [src, dst];
}

const OUT: readonly Direction[] = ['out'], IN: readonly Direction[] = ['in'], BOTH: readonly Direction[] = ['out', 'in'];
const dirsOf = (op: string): readonly Direction[] =>
  op === 'out' || op === 'out_e' || op === 'out_n' ? OUT : op === 'in' || op === 'in_e' || op === 'in_n' ? IN : BOTH;

export type NavigationOp = Extract<Op, { op: 'out' | 'in' | 'both' | 'out_e' | 'in_e' | 'both_e' | 'out_n' | 'in_n' | 'other_n' }>;

export const navigationOps = new Set<string>(['out', 'in', 'both', 'out_e', 'in_e', 'both_e', 'out_n', 'in_n', 'other_n']);

/** A navigation operation with its label resolved once per evaluation. */
export interface NavigationStep {
  readonly op: NavigationOp['op'];
  readonly toEdges: boolean;
  readonly label: number;
  /** An unknown label matches no edge of a node row; edge rows ignore the label. */
  readonly noLabelMatch: boolean;
  readonly dirs: readonly Direction[];
  readonly unlabeled: boolean;
}

export function navigationStep(ctx: ExecCtx, op: NavigationOp): NavigationStep {
  const labelName = 'label' in op ? op.label : null;
  const label = labelName === null ? -1 : ctx.store.names.idOf(labelName);
  return {
    op: op.op,
    toEdges: op.op === 'out_e' || op.op === 'in_e' || op.op === 'both_e',
    label,
    noLabelMatch: labelName !== null && label < 0,
    dirs: dirsOf(op.op),
    unlabeled: op.op === 'out_n' || op.op === 'in_n' || op.op === 'other_n',
  };
}

/** Element keys one row moves to (operations.md §4), in order; null: the row yields nothing. */
export function expandElement(ctx: ExecCtx, step: NavigationStep, el: number, extra: RowExtra | null): number[] | null {
  if (el === NO_ELEMENT) return null;
  if (isEdgeKey(el)) {
    if (step.toEdges) return null;
    const e = idOfKey(el);
    guard.step(1);
    if (step.op === 'out' || step.op === 'out_n') return [nodeKey(ctx.store.edgeTarget(e))];
    if (step.op === 'in' || step.op === 'in_n') return [nodeKey(ctx.store.edgeSource(e))];
    return otherEnds(ctx, e, extra).map(nodeKey);
  }
  const id = idOfKey(el);
  if (step.noLabelMatch && !step.unlabeled) return null;
  if (step.toEdges) return incidentEdges(ctx, id, step.dirs, step.label, true);
  return neighbors(ctx, id, step.dirs, step.unlabeled ? -1 : step.label, true);
}

export function navigate(ctx: ExecCtx, op: NavigationOp, input: RowSet): RowSet {
  const step = navigationStep(ctx, op);
  const plain = nodeRowsStep(ctx, step, input);
  if (plain !== null) return navigateNodeRows(ctx, plain, input, false);
  const out = new RowSet();
  for (let i = 0; i < input.length; i++) {
    const el = input.el[i]!;
    const extra = input.extraAt(i);
    if (el === NO_ELEMENT || isEdgeKey(el)) {
      // At most two ends: the general form.
      const produced = expandElement(ctx, step, el, extra);
      if (produced !== null) for (const key of produced) out.push(key, movedExtra(extra, key, ctx.trackPath, el));
      continue;
    }
    // Node rows (the hot path): keys straight from the ID lists, no second array.
    if (step.noLabelMatch && !step.unlabeled) continue;
    const id = idOfKey(el);
    if (step.toEdges) {
      for (const e of incidentEdges(ctx, id, step.dirs, step.label)) out.push(edgeKey(e), movedExtra(extra, edgeKey(e), ctx.trackPath, el));
    } else {
      for (const n of neighbors(ctx, id, step.dirs, step.unlabeled ? -1 : step.label)) out.push(nodeKey(n), movedExtra(extra, nodeKey(n), ctx.trackPath, el));
    }
    checkRowLimit(out.length);
  }
  return out;
}

// ---------------------------------------------------------------- plain node rows

/**
 * One out/in/both (or out_n/in_n/other_n) step of plain node rows: rows without bindings,
 * path or sack, in a query that tracks no paths. Each row then maps to its sorted distinct
 * neighbours and nothing else, so the step runs on element keys alone (the expandRows
 * kernel when traversal kernels are on), without building row extras.
 */
export interface NodeRowsStep {
  readonly dirs: readonly Direction[];
  readonly kernelDirs: number;
  /** A label ID, ANY_LABEL, or NO_LABEL (a label the store never saw: no edge matches). */
  readonly label: number;
}

const ANY_LABEL = -1, NO_LABEL = -2;

/** The step of `step` on plain node rows `rows`, or null when the rows or the step are not that. */
export function nodeRowsStep(ctx: ExecCtx, step: NavigationStep, rows: RowSet): NodeRowsStep | null {
  if (step.toEdges || rows.extra !== null || ctx.trackPath) return null;
  for (let i = 0; i < rows.length; i++) if (rows.el[i] === NO_ELEMENT || isEdgeKey(rows.el[i]!)) return null;
  const label = step.unlabeled ? ANY_LABEL : step.noLabelMatch ? NO_LABEL : step.label;
  return { dirs: step.dirs, kernelDirs: kernelDirections(step.dirs.map(dirWord)), label };
}

const levelMarks = new ElementMarks();

export function navigateNodeRows(ctx: ExecCtx, step: NodeRowsStep, rows: RowSet, dedupLevel: boolean): RowSet {
  if (step.label === NO_LABEL || rows.length === 0) return new RowSet();
  let out: RowSet | null = null;
  const onKernel = traversalKernelsOn() && expandOnKernel(ctx, step, rows, dedupLevel, (words, at, produced) => {
    guard.charge(produced * ROW_BYTES);
    const keys = new Array<number>(produced);
    for (let i = 0; i < produced; i++) {
      keys[i] = nodeKey(words[at + i]!);
      if ((i & 0xffff) === 0xffff) guard.step(0x10000);
    }
    out = new RowSet(keys);
  });
  return onKernel ? out! : navigateRowsJs(ctx, step, rows, dedupLevel);
}

/**
 * The neighbour IDs navigateNodeRows(ctx, step, rows, false) would make rows of, in the
 * same order, without the rows (a consumer that needs only the elements: `*_within`),
 * copied into `into(count)` (a buffer of at least count words) and returned as its first
 * count words; null when the step is not for the kernel (then make the rows).
 */
export function nodeRowsNeighbourIds(ctx: ExecCtx, step: NodeRowsStep, rows: RowSet, into: (count: number) => Uint32Array): Uint32Array | null {
  if (step.label === NO_LABEL || rows.length === 0) return new Uint32Array(0);
  let ids: Uint32Array | null = null;
  const onKernel = traversalKernelsOn() && expandOnKernel(ctx, step, rows, false, (words, at, produced) => {
    guard.charge(produced * 4);
    const buffer = into(produced);
    buffer.set(words.subarray(at, at + produced));
    ids = buffer.subarray(0, produced);
  });
  return onKernel ? ids : null;
}

/** Adjacency entries one expandRows call scans at most (~2-5 ms on this class of machine). */
const KERNEL_ENTRIES_PER_CALL = 1 << 20;

/** Adjacency entries of a step above which it runs in JS (16 MiB of kernel output area). */
const KERNEL_STEP_ENTRIES_MAX = 1 << 22;

/** Smallest first-occurrence table of navigateRowsKernel (slots; 1 KiB). */
const SEEN_SLOTS_MIN = 256;

/**
 * The step on the expandRows kernel: ids in, distinct sorted neighbours per row out, handed
 * to `take` as words [at, at + produced) of the topology memory (valid during the call).
 * False, without taking anything, for a step over KERNEL_STEP_ENTRIES_MAX adjacency entries:
 * that one streams in JS instead, checking the deadline, the memory budget and the row
 * limit as its rows grow (the kernel would first reserve the whole bound).
 */
function expandOnKernel(ctx: ExecCtx, step: NodeRowsStep, rows: RowSet, dedupLevel: boolean, take: (words: Uint32Array, at: number, produced: number) => void): boolean {
  const topo = ctx.store.topology, kernels = topo.kernels(), arena = topo.scratch();
  const count = rows.length;
  const dirs = step.kernelDirs;
  const mark = arena.mark();
  try {
    const input = arena.take(count);
    const ids = topo.words;
    for (let i = 0; i < count; i++) ids[input + i] = idOfKey(rows.el[i]!);
    guard.step(count);
    const bound = kernels.entryCount(input, count, dirs);
    if (bound > KERNEL_STEP_ENTRIES_MAX) return false;
    const outputWords = Math.max(bound, 1);
    const output = arena.take(outputWords);
    let seen = 0, seenShift = 0;
    if (dedupLevel) {
      // The level's nodes are at most `bound`: a table of node + 1 at load <= 1/2, or, when
      // that would be no smaller, one byte per node of the store. Either way the memory
      // follows the entries this step scans, and is zeroed fresh for the level.
      let slots = SEEN_SLOTS_MIN;
      while (slots < 2 * bound) slots *= 2;
      const nodes = ctx.store.nodeSlots();
      if (nodes <= slots * 4) {
        seen = arena.takeZeroed(Math.ceil(nodes / 4));
      } else {
        seen = arena.takeZeroed(slots);
        seenShift = 32 - Math.log2(slots);
      }
    }
    // In slices of about KERNEL_ENTRIES_PER_CALL entries, so the deadline is checked
    // between them (a level of a dense graph can scan tens of millions of entries).
    const sliceRows = Math.max(1, Math.floor(count * (KERNEL_ENTRIES_PER_CALL / Math.max(bound, 1))));
    let produced = 0;
    for (let first = 0; first < count; first += sliceRows) {
      const rowsInSlice = Math.min(sliceRows, count - first);
      produced += kernels.expandRows(input + first, rowsInSlice, dirs, step.label, ctx.at, output + produced, outputWords - produced, seen, seenShift);
      guard.step(Math.ceil(bound * (rowsInSlice / count)));
      guard.check();
    }
    take(topo.words, output, produced);
    return true;
  } finally {
    arena.release(mark);
  }
}

function navigateRowsJs(ctx: ExecCtx, step: NodeRowsStep, rows: RowSet, dedupLevel: boolean): RowSet {
  const out: number[] = [];
  const seen = dedupLevel ? levelMarks.begin(ctx) : null;
  try {
    for (let i = 0; i < rows.length; i++) {
      for (const id of neighbors(ctx, idOfKey(rows.el[i]!), step.dirs, step.label)) {
        if (seen === null || seen.add(nodeKey(id))) {
          guard.row();
          out.push(nodeKey(id));
        }
      }
      if (out.length > limits.streamRowsMax) throw queryError(`a stream exceeded ${limits.streamRowsMax} rows`);
    }
  } finally {
    seen?.end();
  }
  return new RowSet(out);
}
