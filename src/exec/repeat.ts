// repeat (operations.md §10.1), with a kernel (or JS) navigation step for bodies that are
// one out/in/both hop from plain node rows.
import type { Op, RepeatConfig } from '../protocol/ast.js';
import { queryError } from '../protocol/errors.js';
import { limits } from '../limits.js';
import { checkDeadline, evalPredicate, type ExecCtx } from './context.js';
import { body, type EvalOp } from './eval-op.js';
import { append, idOfKey, isEdgeKey, NO_ELEMENT, nodeKey, RowSet } from './rows.js';
import { neighbors } from './navigation.js';
import { ElementMarks } from './marks.js';
import { guard, ROW_BYTES } from './guard.js';
import { dirWord, type Direction } from '../store/store.js';
import { kernelDirections, traversalKernelsOn } from '../store/kernels.js';

/**
 * repeat (operations.md §10.1) over `input`. With `dedupLevels` (only for a repeat whose
 * result goes straight into dedup) a navigation-only repeat keeps the first occurrence of
 * each node per level: a later duplicate on a level would only add copies of what the
 * first one adds, later, so the enclosing dedup returns the same rows in the same order,
 * and k hops cost the distinct nodes per level instead of the number of walks.
 */
export function evalRepeat(ctx: ExecCtx, op: Extract<Op, { op: 'repeat' }>, input: RowSet, evalOp: EvalOp, dedupLevels: boolean): RowSet {
  const c = op.config;
  const cap = BigInt(limits.repeatIterationsMax) + 1n; // one past the limit, so running into it raises
  const maxDepth = Number(c.max_depth > cap ? cap : c.max_depth);
  const iterations = c.times === null ? maxDepth : Math.min(Number(c.times > cap ? cap : c.times), maxDepth);
  const step = navigationStep(ctx, c, input);
  let frontier = input;
  const emitted = new RowSet();
  /** Bytes charged for the current frontier (and its level's garbage); 0 for the input. */
  let frontierBytes = 0;
  for (let i = 0; i < iterations; i++) {
    if (i >= limits.repeatIterationsMax) throw queryError(`repeat exceeded ${limits.repeatIterationsMax} iterations`);
    checkDeadline(ctx);
    if (c.emit === 'before' || c.emit === 'all') append(emitted, frontier);
    const before = guard.bytes;
    const next = step !== null ? navigateRows(ctx, step, frontier, dedupLevels) : body(ctx, evalOp, c.traversal, frontier, 'repeat');
    // The previous level is garbage once the next exists (emitted rows were charged when copied).
    const levelBytes = guard.bytes - before;
    guard.release(frontierBytes);
    frontierBytes = levelBytes;
    if (c.emit === 'all' || (c.emit === 'after' && c.emit_predicate === null)) append(emitted, next);
    if (c.emit === 'after' && c.emit_predicate !== null) {
      for (let r = 0; r < next.length; r++) {
        guard.step(1);
        if (evalPredicate(ctx, c.emit_predicate, next.el[r]!, next.extraAt(r))) emitted.pushFrom(next, r);
      }
    }
    let stop = false;
    if (c.until !== null) {
      for (let r = 0; r < next.length && !stop; r++) {
        guard.step(1);
        stop = evalPredicate(ctx, c.until, next.el[r]!, next.extraAt(r));
      }
    }
    frontier = next;
    if (frontier.length === 0 || stop) break;
  }
  return c.emit === 'none' ? frontier : emitted;
}

interface NavigationStep { dirs: readonly Direction[]; kernelDirs: number; label: number }

/**
 * The body as one out/in/both step from the context, when the rows are plain node rows
 * (no bindings, path or sack): then each row maps to its sorted distinct neighbours and
 * nothing else, so the step runs on element keys without building row extras.
 */
function navigationStep(ctx: ExecCtx, c: RepeatConfig, input: RowSet): NavigationStep | null {
  const root = c.traversal.root;
  if ((root.op !== 'out' && root.op !== 'in' && root.op !== 'both') || root.input.op !== 'context') return null;
  if (input.extra !== null || ctx.trackPath || c.until !== null || c.emit_predicate !== null) return null;
  for (let i = 0; i < input.length; i++) if (input.el[i] === NO_ELEMENT || isEdgeKey(input.el[i]!)) return null;
  const dirs: readonly Direction[] = root.op === 'out' ? ['out'] : root.op === 'in' ? ['in'] : ['out', 'in'];
  // An unknown label matches no edge: -2 is no label ID (-1 would mean any label).
  const label = root.label === null ? -1 : ctx.store.names.idOf(root.label);
  return { dirs, kernelDirs: kernelDirections(dirs.map(dirWord)), label: root.label !== null && label < 0 ? -2 : label };
}

const levelMarks = new ElementMarks();

function navigateRows(ctx: ExecCtx, step: NavigationStep, rows: RowSet, dedupLevel: boolean): RowSet {
  if (step.label === -2 || rows.length === 0) return new RowSet();
  return traversalKernelsOn() ? navigateRowsKernel(ctx, step, rows, dedupLevel) : navigateRowsJs(ctx, step, rows, dedupLevel);
}

/** Adjacency entries one expandRows call scans at most (~2-5 ms on this class of machine). */
const KERNEL_ENTRIES_PER_CALL = 1 << 20;

/** Smallest first-occurrence table of navigateRowsKernel (slots; 1 KiB). */
const SEEN_SLOTS_MIN = 256;

/** The step on the expandRows kernel: ids in, distinct sorted neighbours per row out. */
function navigateRowsKernel(ctx: ExecCtx, step: NavigationStep, rows: RowSet, dedupLevel: boolean): RowSet {
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
    if (bound > limits.streamRowsMax) throw queryError(`a stream exceeded ${limits.streamRowsMax} rows`);
    const output = arena.take(Math.max(bound, 1));
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
      produced += kernels.expandRows(input + first, rowsInSlice, dirs, step.label, ctx.at, output + produced, seen, seenShift);
      guard.step(Math.ceil(bound * (rowsInSlice / count)));
      checkDeadline(ctx);
    }
    guard.charge(produced * ROW_BYTES);
    const neighbours = topo.words;
    const out = new Array<number>(produced);
    for (let i = 0; i < produced; i++) {
      out[i] = nodeKey(neighbours[output + i]!);
      if ((i & 0xffff) === 0xffff) guard.step(0x10000);
    }
    return new RowSet(out);
  } finally {
    arena.release(mark);
  }
}

function navigateRowsJs(ctx: ExecCtx, step: NavigationStep, rows: RowSet, dedupLevel: boolean): RowSet {
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
