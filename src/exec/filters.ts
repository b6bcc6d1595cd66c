// Filters: has/has_label/has_key/where (operations.md §5) and dedup.
import type { Op } from '../protocol/ast.js';
import { queryError } from '../protocol/errors.js';
import type { Value } from '../protocol/value.js';
import { chargedEqual, evalPredicate, resolveProperty, type ExecCtx } from './context.js';
import { NO_ELEMENT, RowSet, rowsOf, scalarItems, type RowExtra, type Stream } from './rows.js';
import { renderValueKey } from './render.js';
import { ElementMarks } from './marks.js';
import { inputValue } from './context.js';
import { ENTRY_BYTES, guard } from '../query-guard.js';

const elementMarks = new ElementMarks();

export type FilterOp = Extract<Op, { op: 'has' | 'edge_has' | 'has_label' | 'edge_has_label' | 'has_key' | 'where' }>;

export const filterOps = new Set<string>(['has', 'edge_has', 'has_label', 'edge_has_label', 'has_key', 'where']);

/** Whether a row passes a filter operation (operations.md §5). */
export function keepRow(ctx: ExecCtx, op: FilterOp, el: number, extra: RowExtra | null): boolean {
  guard.step(1);
  switch (op.op) {
    case 'has': return chargedEqual(resolveProperty(ctx, el, extra, op.property) ?? null, op.value);
    case 'edge_has': return chargedEqual(resolveProperty(ctx, el, extra, op.property) ?? null, inputValue(ctx, op.value, el, extra));
    case 'has_label': case 'edge_has_label': return resolveProperty(ctx, el, extra, '$label') === op.label;
    case 'has_key': return resolveProperty(ctx, el, extra, op.property) !== undefined;
    case 'where': return evalPredicate(ctx, op.predicate, el, extra);
  }
}

export function filterRows(ctx: ExecCtx, op: FilterOp, input: RowSet): RowSet {
  const out = new RowSet();
  for (let i = 0; i < input.length; i++) {
    const extra = input.extraAt(i);
    if (keepRow(ctx, op, input.el[i]!, extra)) out.push(input.el[i]!, extra);
  }
  return out;
}

export function dedupStream(ctx: ExecCtx, input: Stream): Stream {
  if (input.kind === 'rows') {
    const rows = input.rows;
    const seenElements = elementMarks.begin(ctx, rows.length);
    const seenOthers = new Set<string>();
    const out = new RowSet();
    try {
      for (let i = 0; i < rows.length; i++) {
        const el = rows.el[i]!;
        guard.step(1);
        if (el !== NO_ELEMENT) {
          if (!seenElements.add(el)) continue;
        } else {
          const key = renderRowIdentity(rows.extraAt(i));
          if (seenOthers.has(key)) continue;
          guard.chargeLater(ENTRY_BYTES + 2 * key.length);
          seenOthers.add(key);
        }
        out.pushFrom(rows, i);
      }
    } finally {
      elementMarks.end();
    }
    return rowsOf(out);
  }
  const items = scalarItems(input);
  if (items === null) throw queryError('dedup expected stream input, got a folded stream; use unfold first');
  const seen = new Set<string>();
  const out: Value[] = [];
  for (const item of items) {
    const key = renderValueKey(item);
    guard.stepLength(key.length);
    if (!seen.has(key)) {
      guard.chargeLater(ENTRY_BYTES + 2 * key.length);
      seen.add(key);
      out.push(item);
    }
  }
  return { kind: 'scalars', items: out };
}

/** Identity of an element-less row: its bindings, visible path and sack. */
function renderRowIdentity(extra: RowExtra | null): string {
  if (extra === null) return '';
  const bindings = extra.bindings ? [...extra.bindings].map(([k, b]) => `${k}=${b.el}`).sort().join(',') : '';
  const path = extra.pathVisible && extra.path ? extra.path.join(',') : '';
  const sack = extra.sackVisible && extra.sack !== undefined ? renderValueKey(extra.sack) : '';
  return `${bindings}|${path}|${sack}`;
}
