// Ordering: order_by and order_by_multiple (operations.md §7).
import type { Order } from '../protocol/ast.js';
import type { Value } from '../protocol/value.js';
import { compareSortKeys } from '../protocol/compare.js';
import { resolveProperty, type ExecCtx } from './context.js';
import { idOfKey, isEdgeKey, NO_ELEMENT, RowSet } from './rows.js';
import { guard, ROW_BYTES } from '../query-guard.js';

export function orderRows(ctx: ExecCtx, input: RowSet, keys: readonly [string, Order][]): RowSet {
  const n = input.length;
  guard.charge((keys.length + 1) * n * ROW_BYTES); // one column per key, and the index
  const values: (Value | undefined)[][] = keys.map(([prop]) => {
    const col: (Value | undefined)[] = new Array(n);
    for (let i = 0; i < n; i++) {
      col[i] = input.el[i] === NO_ELEMENT && input.extraAt(i) === null ? undefined : resolveProperty(ctx, input.el[i]!, input.extraAt(i), prop);
      guard.step(1);
    }
    return col;
  });
  const index = Array.from({ length: n }, (_, i) => i);
  index.sort((a, b) => {
    guard.step(1);
    for (let k = 0; k < keys.length; k++) {
      const c = compareSortKeys(values[k]![a], values[k]![b]);
      if (c !== 0) return keys[k]![1] === 'desc' ? -c : c;
    }
    return compareElements(input.el[a]!, input.el[b]!);
  });
  const out = new RowSet();
  for (const i of index) out.pushFrom(input, i);
  return out;
}

/** Tie-breaker: nodes before edges, then by ID; rows without an element last. */
function compareElements(a: number, b: number): number {
  if (a === b) return 0;
  if (a === NO_ELEMENT || b === NO_ELEMENT) return a === NO_ELEMENT ? 1 : -1;
  const ea = isEdgeKey(a), eb = isEdgeKey(b);
  if (ea !== eb) return ea ? 1 : -1;
  return idOfKey(a) - idOfKey(b);
}
