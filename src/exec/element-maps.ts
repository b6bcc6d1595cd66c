// `value_map` without a property list: every stored property of each element, with `$id`
// and `$label` (operations.md). Built as one Map per row when something reads the items,
// but a read batch that only renders them (the common case: a client asking for rows)
// writes each row's JSON straight from its record, in the byte-wise key order the Map
// would render in, without building the Map (issue 13: ~1 µs per row).
import { compareKeys, renderValue, writeInteger, writeString } from '../protocol/json.js';
import type { Value } from '../protocol/value.js';
import type { Store } from '../store/store.js';
import type { PropertyRecord } from '../store/record-codec.js';
import { CONTAINER_BYTES, ENTRY_BYTES, guard } from '../query-guard.js';
import { idOfKey, isEdgeKey, NO_ELEMENT, type LazyScalars, type RowSet } from './rows.js';

function recordOf(store: Store, el: number, at: number): PropertyRecord {
  const id = idOfKey(el);
  return isEdgeKey(el) ? store.edgeRecord(id, at) : store.nodeRecord(id, at);
}

function labelIdOf(store: Store, el: number, at: number): number {
  const id = idOfKey(el);
  return isEdgeKey(el) ? store.edgeLabel(id) : store.nodeLabel(id, at);
}

/** An element's stored properties, `$label` and `$id` as a Map (insertion order: record, `$label`, `$id`). */
export function storedMap(store: Store, el: number, at: number): Map<string, Value> {
  const out = new Map<string, Value>();
  if (el === NO_ELEMENT) return out;
  const record = recordOf(store, el, at);
  for (let i = 0; i < record.keys.length; i++) out.set(store.names.nameOf(record.keys[i]!), record.values[i]!);
  out.set('$label', store.names.nameOf(labelIdOf(store, el, at)));
  out.set('$id', BigInt(idOfKey(el)));
  return out;
}

/** Where each member of a rendered row comes from: a record value's index, or one of these. */
const FROM_LABEL = -1;
const FROM_ID = -2;

/** The members of rows whose records have one key list, in output order. */
interface RowLayout {
  /** The record's key IDs this layout is for. */
  readonly keys: readonly number[];
  /** `{"name":` then `,"name":`, in byte-wise name order. */
  readonly heads: readonly string[];
  /** Per member: the record value index, FROM_LABEL or FROM_ID. */
  readonly sources: readonly number[];
}

/** The layouts of one name dictionary (key IDs mean different names in different stores). */
interface Layouts {
  readonly byKeys: Map<string, RowLayout | null>;
  /** The layout found last: a request's rows, and the next request's, mostly share it. */
  last: RowLayout | null;
}
const layoutsByNames = new WeakMap<object, Layouts>();
const LAYOUTS_PER_DICTIONARY_MAX = 4096;

/** Whether `a` is the first `count` entries of `b`. */
function sameKeys(a: readonly number[], b: readonly number[], count: number): boolean {
  if (a === b) return true;
  if (a.length !== count) return false;
  for (let i = 0; i < count; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** A row's key IDs and value JSON, from Store.recordJson or the decoded record (one row at a time). */
const rowKeys: number[] = [];
const rowJson: string[] = [];

/** The layout of rows with `keys`, or null when the Map path must render them (a stored `$` name, or too many layouts). */
function layoutFor(store: Store, keys: readonly number[]): RowLayout | null {
  let layouts = layoutsByNames.get(store.names);
  if (layouts === undefined) layoutsByNames.set(store.names, (layouts = { byKeys: new Map(), last: null }));
  if (layouts.last !== null && sameKeys(layouts.last.keys, keys, keys.length)) return layouts.last;
  const key = keys.join(',');
  const known = layouts.byKeys.get(key);
  if (known !== undefined) {
    if (known !== null) layouts.last = known;
    return known;
  }
  if (layouts.byKeys.size >= LAYOUTS_PER_DICTIONARY_MAX) return null;
  const members: { name: string; source: number }[] = keys.map((k, i) => ({ name: store.names.nameOf(k), source: i }));
  let layout: RowLayout | null = null;
  if (!members.some((m) => m.name.startsWith('$'))) {
    members.push({ name: '$label', source: FROM_LABEL }, { name: '$id', source: FROM_ID });
    members.sort((a, b) => compareKeys(a.name, b.name));
    layout = {
      keys: [...keys],
      heads: members.map((m, i) => `${i === 0 ? '{' : ','}${writeString(m.name)}:`),
      sources: members.map((m) => m.source),
    };
  }
  layouts.byKeys.set(key, layout);
  if (layout !== null) layouts.last = layout;
  return layout;
}

/**
 * The rows of a read batch's `value_map` (no property list), rendered or built on demand.
 * Valid only while the read's snapshot is held (rendering runs inside it, exec/request.ts).
 */
export class StoredMaps implements LazyScalars {
  private built: Value[] | null = null;
  private lastLayout: RowLayout | null = null;
  /** The label rendered last, as JSON: rows mostly share it. */
  private lastLabelId = -1;
  private lastLabelJson = '';

  constructor(private readonly store: Store, private readonly at: number, private readonly rows: RowSet) {}

  get length(): number {
    return this.rows.length;
  }

  /** The rows as Maps, charged to the query's budget as `value_map` always was. */
  items(): Value[] {
    if (this.built !== null) return this.built;
    const items: Value[] = [];
    for (let i = 0; i < this.rows.length; i++) {
      const m = storedMap(this.store, this.rows.el[i]!, this.at);
      if (m.size > 0) {
        guard.chargeLater(CONTAINER_BYTES + ENTRY_BYTES * m.size);
        guard.step(1);
      }
      items.push(m);
    }
    return (this.built = items);
  }

  render(i: number): string {
    if (this.built !== null) return renderValue(this.built[i]!);
    const el = this.rows.el[i]!;
    if (el === NO_ELEMENT) return '{}';
    let count = this.store.recordJson(isEdgeKey(el), idOfKey(el), this.at, rowKeys, rowJson);
    if (count < 0) {
      // A value the in-place reader leaves to the decoder (arrays, bytes, long strings, dates).
      const record = recordOf(this.store, el, this.at);
      count = record.keys.length;
      for (let k = 0; k < count; k++) {
        rowKeys[k] = record.keys[k]!;
        rowJson[k] = renderValue(record.values[k]!);
      }
    }
    let layout = this.lastLayout;
    if (layout === null || !sameKeys(layout.keys, rowKeys, count)) {
      layout = layoutFor(this.store, rowKeys.slice(0, count));
      if (layout === null) return renderValue(storedMap(this.store, el, this.at));
      this.lastLayout = layout;
    }
    const { heads, sources } = layout;
    // Until the list is joined a row is a tree of concatenations, several times its text:
    // charged as its Map was, so the budget stops a huge value_map where it always did.
    guard.chargeLater(CONTAINER_BYTES + ENTRY_BYTES * heads.length);
    let out = '';
    for (let m = 0; m < heads.length; m++) {
      const source = sources[m]!;
      out += heads[m]!;
      out += source >= 0 ? rowJson[source]! : source === FROM_ID ? writeInteger(idOfKey(el)) : this.labelJson(labelIdOf(this.store, el, this.at));
    }
    return `${out}}`;
  }

  private labelJson(labelId: number): string {
    if (labelId !== this.lastLabelId) {
      this.lastLabelJson = writeString(this.store.names.nameOf(labelId));
      this.lastLabelId = labelId;
    }
    return this.lastLabelJson;
  }
}
