// Index scans: nodes_where / edges_where answered from a secondary index (plan/access-path.ts).
// The index yields candidates (a superset of the matches: keys are hashes or monotone
// prefixes, index/keys.ts); each candidate is then checked like a full scan checks every
// element (visible at the snapshot, whole predicate true), in ascending ID order. So the
// answer is the full scan's. The scan falls back to the full scan whenever the index
// cannot serve: not active at this snapshot, purged past it, or a bound that cannot be
// turned into keys (null, a value outside every domain, a parameter that fails).
import type { Op } from '../protocol/ast.js';
import { F32, StringArray, type Value } from '../protocol/value.js';
import type { AccessPath } from '../plan/access-path.js';
import { domainBounds, equalityKey, rangeDomain, rangeKeyOf, type IndexKey } from '../index/keys.js';
import { currentView, entriesOf, findServing } from '../index/view.js';
import { evalExpr, evalPredicate, type ExecCtx } from './context.js';
import { edgeKey, NO_ELEMENT, nodeKey, RowSet } from './rows.js';
import { guard } from '../query-guard.js';

type SourceOp = Extract<Op, { op: 'nodes_where' | 'edges_where' }>;

/** Key ranges [lo, hi] to look up, or null: the index cannot answer (scan instead). */
function keyRanges(ctx: ExecCtx, path: AccessPath): [IndexKey, IndexKey][] | null {
  const fixed = (e: Parameters<typeof evalExpr>[1]): Value => evalExpr(ctx, e, NO_ELEMENT, null);
  switch (path.kind) {
    case 'eq': {
      const k = equalityOrNull(fixed(path.value));
      return k === null ? null : [[k, k]];
    }
    case 'in': {
      const members = membersOf(fixed(path.values));
      if (members === null) return null;
      const out: [IndexKey, IndexKey][] = [];
      for (const m of members) {
        const k = equalityOrNull(m);
        if (k === null) return null;
        out.push([k, k]);
      }
      return out;
    }
    case 'range': {
      // undefined: no bound on that side; null: a bound that evaluated to null.
      const lo = path.lo === null ? undefined : fixed(path.lo);
      const hi = path.hi === null ? undefined : fixed(path.hi);
      // An eq answered by a range index (one operand as both bounds): null equals a
      // missing property (values.md §7.1), which no index holds: scan.
      if (path.lo !== null && path.lo === path.hi && lo === null) return null;
      const domain = rangeDomain(lo !== undefined ? lo : hi!);
      // A bound outside the three domains (null included) compares with nothing: no element matches.
      if (domain === 0 || (lo !== undefined && hi !== undefined && rangeDomain(hi) !== domain)) return [];
      const [min, max] = domainBounds(domain);
      return [[lo === undefined ? min : rangeKeyOf(lo, { k0: 0, k1: 0 }), hi === undefined ? max : rangeKeyOf(hi, { k0: 0, k1: 0 })]];
    }
  }
}

/** The equality key of a looked-up value; null for null (it matches absent properties) or unindexable values. */
function equalityOrNull(v: Value): IndexKey | null {
  if (v === null) return null;
  try {
    return equalityKey(v, false, { k0: 0, k1: 0 });
  } catch {
    return null;
  }
}

/** The members of an is_in set (values.md §7.4), or null when it is not a set. */
function membersOf(v: Value): Value[] | null {
  if (Array.isArray(v)) return v;
  if (v instanceof StringArray) return v.items;
  if (v instanceof BigInt64Array) return Array.from(v);
  if (v instanceof Float64Array) return Array.from(v);
  if (v instanceof Float32Array) return Array.from(v, (x) => new F32(x));
  return null;
}

/**
 * The rows of `op` answered through `path`, or null when the index cannot answer at this
 * snapshot (the caller scans). With `rowsMax`, only the first rowsMax rows (a limit right
 * after the source): rows come in ascending ID order and the predicate cannot raise (the
 * planner's rule), so they are exactly the first rows of the whole answer.
 */
export function indexScan(ctx: ExecCtx, op: SourceOp, path: AccessPath, rowsMax = Infinity): RowSet | null {
  const index = findServing(currentView(ctx.store), path.index, ctx.at);
  if (index === null) return null;
  let ranges: [IndexKey, IndexKey][] | null;
  try {
    ranges = keyRanges(ctx, path);
  } catch {
    return null; // the scan raises the same error where it should
  }
  if (ranges === null) return null;
  const entries = entriesOf(ctx.store, index);
  const candidates: number[] = [];
  for (const [lo, hi] of ranges) {
    if (!entries.scan(lo.k0, lo.k1, hi.k0, hi.k1, ctx.at, candidates)) return null;
  }
  // The candidates count against the query's memory while they exist (a number array, then
  // its sorted u32 copy: typed arrays sort numerically and several times faster).
  const candidateBytes = candidates.length * 12;
  guard.charge(candidateBytes);
  guard.step(candidates.length);
  // One candidate (a unique lookup, the common case) needs no copy and no sort.
  const sorted: ArrayLike<number> = candidates.length <= 1 ? candidates : Uint32Array.from(candidates).sort();
  if (sorted !== candidates) candidates.length = 0;
  const edges = op.op === 'edges_where';
  const out = new RowSet();
  let previous = -1;
  for (let i = 0; i < sorted.length; i++) {
    const id = sorted[i]!;
    if (id === previous) continue; // is_in members may share a key
    previous = id;
    if (!(edges ? ctx.store.edgeVisible(id, ctx.at) : ctx.store.nodeVisible(id, ctx.at))) continue;
    const key = edges ? edgeKey(id) : nodeKey(id);
    if (evalPredicate(ctx, op.predicate, key, null)) {
      out.push(key, null);
      if (out.length >= rowsMax) break;
    }
    guard.step(1);
  }
  guard.release(candidateBytes);
  return out;
}
