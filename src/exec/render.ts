// Stage 10 of envelope.md §6: results -> response JSON text (envelope.md §7-§9).
import { compareKeys, renderValue, writeF64, writeInteger, writeString } from '../protocol/json.js';
import { tagOf, type Value } from '../protocol/value.js';
import type { ShapeClass } from '../plan/plan.js';
import { guard } from '../query-guard.js';
import { idOfKey, isEdgeKey, NO_ELEMENT, sizeOf, type RowExtra, type RowSet, type Stream } from './rows.js';

/** A value bound to an entry name, with what rendering needs. */
export interface Bound {
  readonly stream: Stream;
  readonly cls: ShapeClass;
  /** The entry's condition was false (envelope.md §9.4). */
  readonly skipped: boolean;
}

const elementRef = (el: number): string => `{"${isEdgeKey(el) ? 'edge' : 'node'}":${writeInteger(idOfKey(el))}}`;

function renderRow(el: number, extra: RowExtra | null): string {
  const annotated = el === NO_ELEMENT || (extra !== null && (extra.bindings !== null || extra.pathVisible || extra.sackVisible));
  if (!annotated) {
    if (extra === null || extra.rankName === null) return `{"$id":${writeInteger(idOfKey(el))}}`;
    const rank = writeF64(extra.rank);
    const id = writeInteger(idOfKey(el));
    return extra.rankName === '$distance' ? `{"$distance":${rank},"$id":${id}}` : `{"$id":${id},"$score":${rank}}`;
  }
  let bindings = '';
  if (extra?.bindings) {
    const names = [...extra.bindings.keys()].sort(compareKeys);
    bindings = names.map((n) => `${writeString(n)}:${elementRef(extra.bindings!.get(n)!.el)}`).join(',');
  }
  let out = `{"bindings":{${bindings}},"current":${el === NO_ELEMENT ? 'null' : elementRef(el)}`;
  if (extra?.pathVisible) out += `,"path":[${(extra.path ?? (el === NO_ELEMENT ? [] : [el])).map(elementRef).join(',')}]`;
  if (extra?.sackVisible) out += `,"sack":${extra.sack === undefined ? 'null' : renderValue(extra.sack)}`;
  return `${out}}`;
}

// Rendering counts against the query's memory budget (src/query-guard.ts): each part as it is
// built, then the joined text (JS strings: up to 2 bytes per character).

/** `[part0,part1,...]` of `count` rendered parts, each and the joined text counted as built. */
function renderList(count: number, partAt: (i: number) => string): string {
  const parts: string[] = new Array(count);
  guard.charge(8 * count);
  let length = 0;
  for (let i = 0; i < count; i++) {
    const part = partAt(i);
    parts[i] = part;
    length += part.length;
    guard.charge(2 * part.length + 16);
    guard.stepLength(part.length);
  }
  guard.charge(2 * length);
  return `[${parts.join(',')}]`;
}

export function renderRows(rows: RowSet): string {
  return renderList(rows.length, (i) => renderRow(rows.el[i]!, rows.extraAt(i)));
}

function renderItems(items: readonly Value[]): string {
  return renderList(items.length, (i) => renderValue(items[i]!));
}

function renderPresent(s: Stream): string {
  switch (s.kind) {
    case 'rows': case 'fold': return renderRows(s.rows);
    case 'scalars': return renderItems(s.items);
    case 'lazy_scalars': return renderList(s.source.length, (i) => s.source.render(i));
    case 'count': return writeInteger(s.n);
    case 'exists': return s.value ? 'true' : 'false';
    case 'object': return renderValue(s.value);
  }
}

export function renderBound(b: Bound): string {
  if (b.skipped) return b.cls === 'object' ? 'null' : '[]';
  if (sizeOf(b.stream) > 0) return renderPresent(b.stream);
  switch (b.cls) {
    case 'list': return '[]';
    case 'object': return 'null';
    case 'scalar': return renderPresent(b.stream);
  }
}

/**
 * Identity of a value with its variant tags at every level (dedup of scalar streams,
 * project_bindings distinct): i64 1 and f64 1.0, or an empty string_array and an empty
 * i64_array, are different items although they render alike.
 */
export function renderValueKey(v: Value): string {
  const tag = tagOf(v);
  switch (tag) {
    case 'array': return `array[${(v as Value[]).map(renderValueKey).join(',')}]`;
    case 'object': {
      const entries = [...(v as Map<string, Value>)].sort((a, b) => compareKeys(a[0], b[0]));
      return `object{${entries.map(([k, x]) => `${writeString(k)}:${renderValueKey(x)}`).join(',')}}`;
    }
    case 'f64': return Object.is(v, -0) ? 'f64:-0' : `f64:${String(v)}`;
    case 'date_time': return `date_time:${(v as { ms: number }).ms}`;
    default:
      try {
        return `${tag}:${renderValue(v)}`;
      } catch {
        return `${tag}:?${String(v)}`;
      }
  }
}

/** The response object: returned names in byte-wise key order (envelope.md §7); `values[i]` is `returns[i]`'s JSON. */
export function renderResponse(returns: readonly string[], values: readonly string[]): string {
  let length = 0;
  for (const text of values) length += text.length;
  guard.charge(2 * length);
  if (returns.length === 1) return `{${writeString(returns[0]!)}:${values[0]!}}`;
  const order = returns.map((_, i) => i).sort((a, b) => compareKeys(returns[a]!, returns[b]!));
  return `{${order.map((i) => `${writeString(returns[i]!)}:${values[i]!}`).join(',')}}`;
}
