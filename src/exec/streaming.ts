// Terminals that need less than their whole input (issue 10): `count`, `exists`,
// `limit`/`range` and `dedup` over a chain of navigation and filter steps from plain rows
// (no bindings, paths or sacks) are answered without materializing every walk. A 3-hop
// `count` on a dense graph has billions of walks but only as many distinct elements per
// level as the graph has.
//
// Why each is exact (rows are plain, so every step maps an element to the same children
// wherever it occurs, and the materialized stream of a step is the concatenation of the
// children of its input rows in order):
// - count: the number of walks to an element adds up over its predecessors, so a level
//   is a multiset (element -> number of walks reaching it); the last step only sums.
// - exists / dedup: a later occurrence of an element on a level only repeats, later, what
//   its first occurrence produces, so each level keeps first occurrences in order.
// - limit / range: concatenation composes, so a depth-first walk emits rows in exactly the
//   materialized order, and it can stop at the last row wanted.
import { exprMayThrow, predicateMayThrow } from '../plan/may-throw.js';
import type { Expr, Op, Predicate } from '../protocol/ast.js';
import { queryError } from '../protocol/errors.js';
import type { ExecCtx } from './context.js';
import { guard } from '../query-guard.js';
import { ElementMarks } from './marks.js';
import type { EvalOp } from './eval-op.js';
import { expandElement, navigate, navigationOps, navigationStep, type NavigationOp, type NavigationStep } from './navigation.js';
import { dedupStream, filterOps, filterRows, keepRow, type FilterOp } from './filters.js';
import { idOfKey, isEdgeKey, needRows, NO_ELEMENT, RowSet, rowsOf, type Stream } from './rows.js';
import { distinctEndCount, distinctNeighbourCount, nodeHop, type NodeHop } from './navigation-counts.js';
import { traversalKernelsOn } from '../store/kernels.js';

/** One navigation or filter operation over materialized rows. */
function applyElementOp(ctx: ExecCtx, op: NavigationOp | FilterOp, rows: RowSet): RowSet {
  return navigationOps.has(op.op) ? navigate(ctx, op as NavigationOp, rows) : filterRows(ctx, op as FilterOp, rows);
}

/** A navigation step (with what it does to node rows, navigation-counts.ts) or a filter. */
type ChainStep = { readonly nav: NavigationStep; readonly hop: NodeHop | null; readonly filter: null }
  | { readonly nav: null; readonly hop: null; readonly filter: FilterOp };

interface Chain {
  /** The first operation below the chain; its stream feeds the first step. */
  readonly source: Op;
  /** The chain's operations, first applied first. */
  readonly ops: (NavigationOp | FilterOp)[];
}

/** Chains by their last operation: a cached plan's operations keep their structure (only ID lists may be rebound), so its chain is found once. */
const chains = new WeakMap<Op, Chain | null>();

/** The navigation/filter chain `op` ends with, when it has a navigation step and rows need no paths. */
function chainOf(ctx: ExecCtx, op: Op): Chain | null {
  if (ctx.trackPath) return null;
  let chain = chains.get(op);
  if (chain === undefined) {
    chain = chainEndingWith(op);
    chains.set(op, chain);
  }
  return chain;
}

function chainEndingWith(op: Op): Chain | null {
  const ops: (NavigationOp | FilterOp)[] = [];
  let navigates = false;
  let current = op;
  while (navigationOps.has(current.op) || filterOps.has(current.op)) {
    if (navigationOps.has(current.op)) navigates = true;
    ops.push(current as NavigationOp | FilterOp);
    current = (current as NavigationOp | FilterOp).input;
  }
  if (!navigates) return null;
  return { source: current, ops: ops.reverse() };
}

/**
 * The chain's source rows, or null when they are not plain (some row has extras or no
 * element): then the chain is evaluated materialized, step by step, into `fallback`.
 */
function sourceRows(ctx: ExecCtx, chain: Chain, context: Stream | null, evalOp: EvalOp): { rows: RowSet; plain: boolean } {
  const rows = needRows(evalOp(ctx, chain.source, context), chain.ops[0]!.op);
  if (rows.extra !== null) return { rows, plain: false };
  for (let i = 0; i < rows.length; i++) if (rows.el[i] === NO_ELEMENT) return { rows, plain: false };
  return { rows, plain: true };
}

function materialize(ctx: ExecCtx, chain: Chain, rows: RowSet): RowSet {
  let current = rows;
  for (const op of chain.ops) current = applyElementOp(ctx, op, current);
  return current;
}

// A chain stopped early skips rows the materialized stream would evaluate; that is exact
// only when no filter can raise an error on some row (arithmetic on a wrong type, mod by
// zero). Otherwise `exists` walks the whole chain and `limit` materializes.

function chainMayThrow(chain: Chain): boolean {
  return chain.ops.some((op) => (op.op === 'where' ? predicateMayThrow(op.predicate)
    : op.op === 'edge_has' ? op.value.kind === 'expr' && exprMayThrow(op.value.expr) : false));
}

/**
 * A chain's steps for one store, made once while every label of the chain is known to it
 * (label IDs never change; an unknown one may become known, so such steps are made anew).
 */
const stepsByStore = new WeakMap<ExecCtx['store'], WeakMap<Chain, ChainStep[]>>();

function stepsOf(ctx: ExecCtx, chain: Chain): ChainStep[] {
  let byChain = stepsByStore.get(ctx.store);
  const kept = byChain?.get(chain);
  if (kept !== undefined) return kept;
  const steps = chain.ops.map((op): ChainStep => (navigationOps.has(op.op)
    ? navigationChainStep(navigationStep(ctx, op as NavigationOp))
    : { nav: null, hop: null, filter: op as FilterOp }));
  if (steps.every((step) => step.nav === null || !step.nav.noLabelMatch)) {
    if (byChain === undefined) stepsByStore.set(ctx.store, byChain = new WeakMap());
    byChain.set(chain, steps);
  }
  return steps;
}

function navigationChainStep(nav: NavigationStep): ChainStep {
  return { nav, hop: nodeHop(nav), filter: null };
}

// ---------------------------------------------------------------- count

/** Distinct elements one level may hold in a count (a Map holds at most 2^24 entries). */
const LEVEL_ELEMENTS_MAX = (1 << 24) - 1;
/** Estimated bytes per distinct element of a level (Map entry, key, walks). */
const LEVEL_ENTRY_BYTES = 64;

/** Element keys with a number of walks each, in first-insertion order. */
class WalkCounts {
  readonly keys: number[] = [];
  readonly walks: number[] = [];
  private readonly index = new Map<number, number>();

  add(key: number, walks: number): void {
    const at = this.index.get(key);
    if (at !== undefined) {
      this.walks[at]! += walks;
      return;
    }
    if (this.keys.length >= LEVEL_ELEMENTS_MAX) throw queryError(`a level of a count exceeded ${LEVEL_ELEMENTS_MAX} distinct elements`);
    guard.chargeLater(LEVEL_ENTRY_BYTES);
    this.index.set(key, this.keys.length);
    this.keys.push(key);
    this.walks.push(walks);
  }
}

function checkedSum(total: number): number {
  if (total > Number.MAX_SAFE_INTEGER) throw queryError(`count exceeded ${Number.MAX_SAFE_INTEGER}`);
  return total;
}

/**
 * Walks through the chain from `rows` (plain), without materializing them. The source rows
 * count one walk each (not merged: a one-step count is a sum over them); later levels merge
 * equal elements, and the last step only sums.
 */
function countWalks(ctx: ExecCtx, steps: ChainStep[], rows: RowSet): number {
  let keys: readonly number[] = rows.el;
  let walks: readonly number[] | null = null; // null: one walk each
  const kernels = traversalKernelsOn();
  for (let s = 0; s < steps.length; s++) {
    const step = steps[s]!;
    const last = s === steps.length - 1;
    let total = 0;
    const next = last ? null : new WalkCounts();
    for (let i = 0; i < keys.length; i++) {
      const el = keys[i]!, w = walks === null ? 1 : walks[i]!;
      if (step.filter !== null) {
        if (!keepRow(ctx, step.filter, el, null)) continue;
        if (next === null) total += w;
        else next.add(el, w);
        continue;
      }
      if (next === null && kernels && step.hop !== null && !isEdgeKey(el)) {
        // The last step only needs how many children: counted on the kernel, no list.
        total += w * distinctNeighbourCount(ctx, idOfKey(el), step.hop);
        continue;
      }
      const children = expandElement(ctx, step.nav, el, null);
      if (children === null) continue;
      if (next === null) {
        total += w * children.length;
        continue;
      }
      for (const child of children) next.add(child, w);
      guard.step(children.length);
    }
    if (next === null) return checkedSum(total);
    keys = next.keys;
    walks = next.walks;
  }
  throw new Error('unreachable: a chain has at least one step');
}

// ---------------------------------------------------------------- distinct levels

const levelMarks = new ElementMarks();

/**
 * The distinct elements the chain reaches from `rows` (plain), in first-occurrence order
 * of the materialized stream; with `firstOnly`, stop at the first one.
 */
function distinctWalkEnds(ctx: ExecCtx, steps: ChainStep[], rows: RowSet, firstOnly: boolean): number[] {
  let level: number[] = distinct(ctx, rows.el);
  for (let s = 0; s < steps.length; s++) {
    const step = steps[s]!;
    const last = s === steps.length - 1;
    const next: number[] = [];
    const seen = levelMarks.begin(ctx);
    try {
      for (const el of level) {
        if (step.filter !== null) {
          if (keepRow(ctx, step.filter, el, null)) { // the level is distinct already
            guard.row();
            next.push(el);
          }
        } else {
          const children = expandElement(ctx, step.nav, el, null);
          if (children === null) continue;
          guard.step(children.length);
          for (const child of children) {
            if (!seen.add(child)) continue;
            guard.row();
            next.push(child);
            if (last && firstOnly) return next;
          }
        }
        if (last && firstOnly && next.length > 0) return next;
      }
    } finally {
      levelMarks.end();
    }
    level = next;
  }
  return level;
}

function distinct(ctx: ExecCtx, keys: readonly number[]): number[] {
  const out: number[] = [];
  const seen = levelMarks.begin(ctx, keys.length);
  try {
    for (const key of keys) {
      guard.step(1);
      if (!seen.add(key)) continue;
      guard.row();
      out.push(key);
    }
  } finally {
    levelMarks.end();
  }
  return out;
}

// ---------------------------------------------------------------- first rows

/** Rows [start, end) of the chain's stream from `rows` (plain), walked depth first. */
function walkWindow(ctx: ExecCtx, steps: ChainStep[], rows: RowSet, start: number, end: number): RowSet {
  const out = new RowSet();
  let position = 0;
  const visit = (el: number, depth: number): boolean => {
    if (depth === steps.length) {
      if (position >= start) out.push(el, null);
      position++;
      return position >= end;
    }
    const step = steps[depth]!;
    if (step.filter !== null) return keepRow(ctx, step.filter, el, null) && visit(el, depth + 1);
    const children = expandElement(ctx, step.nav, el, null);
    if (children === null) return false;
    for (const child of children) if (visit(child, depth + 1)) return true;
    return false;
  };
  if (end > start) {
    for (let i = 0; i < rows.length; i++) if (visit(rows.el[i]!, 0)) break;
  }
  return out;
}

// ---------------------------------------------------------------- entry points

/** The steps as node hops when every one is a node-to-node navigation step, else null (per steps array). */
const hopsBySteps = new WeakMap<ChainStep[], NodeHop[] | null>();

function nodeHops(steps: ChainStep[]): NodeHop[] | null {
  let hops = hopsBySteps.get(steps);
  if (hops === undefined) {
    hops = steps.every((step) => step.hop !== null) ? steps.map((step) => step.hop!) : null;
    hopsBySteps.set(steps, hops);
  }
  return hops;
}

/**
 * `count(dedup(chain))` where every step moves node rows to neighbour nodes: the size of the
 * last level, counted on the kernels (navigation-counts.ts); null otherwise.
 */
function distinctCount(ctx: ExecCtx, dedup: Op, context: Stream | null, evalOp: EvalOp): Stream | null {
  if (dedup.op !== 'dedup' || !traversalKernelsOn()) return null;
  const chain = chainOf(ctx, dedup.input);
  if (chain === null) return null;
  const steps = stepsOf(ctx, chain);
  const hops = nodeHops(steps);
  if (hops === null) return null;
  const { rows, plain } = sourceRows(ctx, chain, context, evalOp);
  const n = plain ? distinctEndCount(ctx, hops, rows.el) : null;
  // Source rows that are not all node rows: the dedup's own rows, counted.
  return { kind: 'count', n: n ?? needRows(dedupChain(ctx, chain, steps, rows, plain), 'count').length };
}

/** dedup(chain) from the chain's source rows (sourceRows). */
function dedupChain(ctx: ExecCtx, chain: Chain, steps: ChainStep[], rows: RowSet, plain: boolean): Stream {
  if (!plain) return dedupStream(ctx, rowsOf(materialize(ctx, chain, rows)));
  return rowsOf(new RowSet(distinctWalkEnds(ctx, steps, rows, false))); // rows charged as found
}

/** `count(op)` or `exists(op)` without materializing `op`, or null when it is no chain. */
export function streamedTerminal(ctx: ExecCtx, terminal: 'count' | 'exists', op: Op, context: Stream | null, evalOp: EvalOp): Stream | null {
  if (terminal === 'count') {
    const counted = distinctCount(ctx, op, context, evalOp);
    if (counted !== null) return counted;
  }
  const chain = chainOf(ctx, op);
  if (chain === null) return null;
  const { rows, plain } = sourceRows(ctx, chain, context, evalOp);
  if (!plain) {
    const all = materialize(ctx, chain, rows);
    return terminal === 'count' ? { kind: 'count', n: all.length } : { kind: 'exists', value: all.length > 0 };
  }
  const steps = stepsOf(ctx, chain);
  if (terminal === 'count') return { kind: 'count', n: countWalks(ctx, steps, rows) };
  return { kind: 'exists', value: distinctWalkEnds(ctx, steps, rows, !chainMayThrow(chain)).length > 0 };
}

/** `dedup(op)` keeping first occurrences, without materializing `op`, or null. */
export function streamedDedup(ctx: ExecCtx, op: Op, context: Stream | null, evalOp: EvalOp): Stream | null {
  const chain = chainOf(ctx, op);
  if (chain === null) return null;
  const { rows, plain } = sourceRows(ctx, chain, context, evalOp);
  return dedupChain(ctx, chain, plain ? stepsOf(ctx, chain) : [], rows, plain);
}

/** Rows [start, end) of `op`'s stream without materializing the rest, or null. */
export function streamedWindow(ctx: ExecCtx, op: Op, context: Stream | null, evalOp: EvalOp, start: number, end: number): RowSet | null {
  const chain = chainOf(ctx, op);
  if (chain === null || end <= start || chainMayThrow(chain)) return null;
  const { rows, plain } = sourceRows(ctx, chain, context, evalOp);
  if (!plain) {
    const all = materialize(ctx, chain, rows);
    const out = new RowSet();
    for (let i = start; i < Math.min(end, all.length); i++) out.pushFrom(all, i);
    return out;
  }
  return walkWindow(ctx, stepsOf(ctx, chain), rows, start, end);
}
