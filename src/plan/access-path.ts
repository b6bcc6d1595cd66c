// Access paths (issue 9 §4): which source operations an active secondary index can answer.
// nodes_where / edges_where (and a `where` or `has` applied right after one) whose
// predicate is a conjunction containing `$label == L` and, on a top-level property p of
// an index over (element, L, p), one of eq / is_in / gt / gte / lt / lte / between with a
// constant or parameter. Everything else scans. The index only produces candidates: the
// executor re-checks the whole predicate on each (exec/index-scan.ts), so answers and
// their order (ascending ID) are identical with and without an index.
import type { Expr, Op, Predicate } from '../protocol/ast.js';
import type { IndexDefinition } from '../protocol/index-spec.js';

export type AccessPath =
  | { kind: 'eq'; index: IndexDefinition; value: Expr }
  | { kind: 'in'; index: IndexDefinition; values: Expr }
  | { kind: 'range'; index: IndexDefinition; lo: Expr | null; hi: Expr | null };

/** Constants and parameters: values known before the scan (evaluated with an empty row). */
const isFixed = (e: Expr): boolean => e.kind === 'constant' || e.kind === 'param';

/** A property an index can hold: top-level, not virtual. */
function indexedProperty(e: Expr): string | null {
  return e.kind === 'property' && !e.name.startsWith('$') && !e.name.includes('.') ? e.name : null;
}

function conjuncts(p: Predicate, out: Predicate[]): Predicate[] {
  if (p.kind === 'and') for (const c of p.predicates) conjuncts(c, out);
  else out.push(p);
  return out;
}

/** The label a conjunct pins (`$label == "L"`), if it is one. */
function pinnedLabel(p: Predicate): string | null {
  const eq = p.kind === 'eq' || (p.kind === 'compare' && p.op === 'eq');
  if (!eq) return null;
  const { left, right } = p as { left: Expr; right: Expr };
  for (const [a, b] of [[left, right], [right, left]] as const) {
    if (a.kind === 'property' && a.name === '$label' && b.kind === 'constant' && typeof b.value === 'string') return b.value;
  }
  return null;
}

const flip: Record<string, string> = { gt: 'lt', gte: 'lte', lt: 'gt', lte: 'gte', eq: 'eq' };

/** Candidate paths of one conjunct over the indexes of the pinned label. */
function pathsOf(p: Predicate, indexes: readonly IndexDefinition[]): { path: AccessPath; rank: number }[] {
  const out: { path: AccessPath; rank: number }[] = [];
  const on = (property: string, lane: 'equality' | 'range') => indexes.find((d) => d.property === property && d.lane === lane);
  let op: string | null = null, property: string | null = null, operand: Expr | null = null;
  if (p.kind === 'eq' || p.kind === 'gt' || p.kind === 'gte' || p.kind === 'lt' || p.kind === 'lte' || p.kind === 'compare') {
    const kind = p.kind === 'compare' ? p.op : p.kind;
    const { left, right } = p as { left: Expr; right: Expr };
    if (indexedProperty(left) !== null && isFixed(right)) { op = kind; property = indexedProperty(left); operand = right; }
    else if (indexedProperty(right) !== null && isFixed(left)) { op = flip[kind] ?? null; property = indexedProperty(right); operand = left; }
  }
  if (op !== null && property !== null && operand !== null) {
    if (op === 'eq') {
      const eq = on(property, 'equality');
      if (eq !== undefined) out.push({ path: { kind: 'eq', index: eq, value: operand }, rank: eq.unique ? 0 : 1 });
      const range = on(property, 'range');
      if (range !== undefined) out.push({ path: { kind: 'range', index: range, lo: operand, hi: operand }, rank: 2 });
    } else {
      const range = on(property, 'range');
      const lower = op === 'gt' || op === 'gte';
      if (range !== undefined && op !== 'neq') out.push({ path: { kind: 'range', index: range, lo: lower ? operand : null, hi: lower ? null : operand }, rank: 4 });
    }
  }
  if (p.kind === 'between') {
    const prop = indexedProperty(p.value);
    const range = prop === null ? undefined : on(prop, 'range');
    if (range !== undefined && isFixed(p.min) && isFixed(p.max)) out.push({ path: { kind: 'range', index: range, lo: p.min, hi: p.max }, rank: 3 });
  }
  if (p.kind === 'is_in') {
    const prop = indexedProperty(p.value);
    const eq = prop === null ? undefined : on(prop, 'equality');
    if (eq !== undefined && isFixed(p.values)) out.push({ path: { kind: 'in', index: eq, values: p.values }, rank: 2 });
  }
  return out;
}

/**
 * The best access path for a source with predicate `predicate` (plus `extra` conjuncts
 * from the filter right after it), over the active secondary indexes `indexes`; null: scan.
 */
export function chooseAccessPath(element: 'node' | 'edge', predicate: Predicate, extra: readonly Predicate[], indexes: readonly IndexDefinition[]): AccessPath | null {
  if (indexes.length === 0) return null;
  const all = conjuncts(predicate, []);
  // The source's own predicate must pin the label: the index holds only that label's elements.
  let label: string | null = null;
  for (const c of all) label ??= pinnedLabel(c);
  if (label === null) return null;
  const usable = indexes.filter((d) => d.element === element && d.label === label && (d.lane === 'equality' || d.lane === 'range'));
  if (usable.length === 0) return null;
  let best: { path: AccessPath; rank: number } | null = null;
  for (const c of [...all, ...extra.flatMap((p) => conjuncts(p, []))]) {
    for (const candidate of pathsOf(c, usable)) if (best === null || candidate.rank < best.rank) best = candidate;
  }
  return best?.path ?? null;
}

/** Predicates of the filter applied directly to a source, as conjuncts for its access path. */
export function filterConjunct(op: Op): Predicate | null {
  if (op.op === 'where') return op.predicate;
  if (op.op === 'has') return { kind: 'eq', left: { kind: 'property', name: op.property }, right: { kind: 'constant', value: op.value } };
  return null;
}
