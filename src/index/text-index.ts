// A text index on the writer (indexes.md §7-§8.4, docs/indexes.md "Text indexes"): its
// partitions, one TextPartition each in the store's text memory (src/text/), the element ->
// document map, maintenance inside write batches, build slices, background merges, and
// what readers and snapshots need of it.
//
// Documents are never logged. A write batch inserts and removes documents at its epoch and
// pushes undos into the batch (undoInsert makes a document never visible, statistics
// included); the partitions are derived from the data, carried whole by snapshots and
// otherwise rebuilt from the data.
import { limits } from '../limits.js';
import { dbError, queryError } from '../protocol/errors.js';
import { valuesEqual } from '../protocol/compare.js';
import { StringArray, tagOf, type Value } from '../protocol/value.js';
import { recordGet, type PropertyRecord } from '../store/record-codec.js';
import type { Store } from '../store/store.js';
import { analyze, TextPartition, type Analyzer } from '../text/index.js';
import type { IndexRecord } from './catalog.js';
import { partitionIdentity, SlotMap, TenantPartitions, type PartitionView, type TenantPartition } from './partitions.js';
import type { SliceProgress } from './vector-index.js';

interface Partition extends TenantPartition {
  readonly text: TextPartition;
  /** maintain() said more merging remains. */
  merging: boolean;
}

/** The text a stored value gives a text index (§8.4): a string, or a string_array's items joined with newlines. */
export function storedText(v: Value): string {
  if (typeof v === 'string') return v;
  if (v instanceof StringArray) return v.items.join('\n');
  throw dbError('invalid_index_source_data', `Invalid index source data: a text index accepts a string or a string_array, got ${tagOf(v)}`);
}

/** A query's distinct terms in first-occurrence order, as TextPartition.search sees them. */
export function distinctTerms(query: string, analyzer: Analyzer): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  for (const t of analyze(query, analyzer)) if (!seen.has(t)) { seen.add(t); out.push(t); }
  if (out.length > limits.textQueryTermsMax) throw queryError(`a text query of ${out.length} distinct terms is over the limit of ${limits.textQueryTermsMax}`);
  return out;
}

export class TextPhysical {
  readonly kind = 'text' as const;
  readonly analyzer: Analyzer;
  readonly positions: boolean;
  /** -1: not partitioned. */
  readonly tenantPropertyId: number;
  /** Build only: element slots below it are scanned (and maintained by writes). Infinity once scanned. */
  cursor: number;
  /** Build only: slots holding values the index cannot accept, re-checked at validate_manifests. */
  readonly invalidSlots = new Set<number>();
  private readonly partitions = new TenantPartitions<Partition>();
  private readonly docs = new SlotMap();
  /** A partition was added since the view was last published. */
  partitionsChanged = false;
  /** UTF-16 code units of text the open batch indexed (limits.textMutationCharsMax). */
  private batchChars = 0;

  constructor(
    private readonly store: Store,
    public record: IndexRecord,
    readonly labelId: number,
    readonly propertyId: number,
    cursor: number,
  ) {
    const d = record.definition;
    this.analyzer = d.analyzer ?? 'standard';
    this.positions = d.positions ?? false;
    this.tenantPropertyId = d.tenantProperty === null ? -1 : store.names.intern(d.tenantProperty);
    this.cursor = cursor;
  }

  private partitionFor(tenant: Value | undefined): number {
    const found = this.partitions.find(tenant);
    if (found >= 0) return found;
    const text = TextPartition.create(this.store.textMemory(), { analyzer: this.analyzer, positions: this.positions });
    this.partitionsChanged = true;
    return this.partitions.add({ ...partitionIdentity(tenant), text, merging: false });
  }

  /**
   * What `record` gives the index: null when not indexed (no property); throws
   * invalid_index_source_data for a value it cannot accept and, under a tenant property,
   * for an element without a tenant value (§8.4).
   */
  private entryOf(record: PropertyRecord): { text: string; tenant: Value | undefined } | null {
    const value = recordGet(record, this.propertyId);
    if (value === undefined) return null;
    const text = storedText(value);
    let tenant: Value | undefined;
    if (this.tenantPropertyId >= 0) {
      tenant = recordGet(record, this.tenantPropertyId);
      if (tenant === undefined || tenant === null) {
        throw dbError('invalid_index_source_data', `Invalid index source data: the text index \`${this.record.definition.label}.${this.record.definition.property}\` is partitioned by \`${this.record.definition.tenantProperty}\`, which the element lacks`);
      }
    }
    return { text, tenant };
  }

  private add(slot: number, text: string, tenant: Value | undefined, created: number, undoable: boolean): void {
    const partition = this.partitionFor(tenant);
    const p = this.partitions.list[partition]!;
    const doc = p.text.insert(slot, text, created);
    const before = this.docs.get(slot), beforePartition = this.docs.partition(slot);
    this.docs.set(slot, doc, partition);
    if (undoable) {
      this.store.joinBatch(() => {
        p.text.undoInsert(doc);
        this.docs.set(slot, before, beforePartition);
      }, null);
    }
  }

  // ---------------------------------------------------------------- maintenance (inside a write batch)

  /** Like VectorPhysical.maintain: the element's document moves when its text or tenant changed. */
  maintain(slot: number, oldLabel: number, oldRecord: PropertyRecord | null, newLabel: number, newRecord: PropertyRecord | null, building: boolean): void {
    if (slot >= this.cursor) return;
    const oldDoc = this.docs.get(slot);
    const hasNew = newLabel === this.labelId && newRecord !== null;
    if (oldDoc >= 0 && hasNew && oldLabel === this.labelId && oldRecord !== null && this.sameEntry(oldRecord, newRecord!)) return;
    let entry: { text: string; tenant: Value | undefined } | null = null;
    if (hasNew) {
      try {
        entry = this.entryOf(newRecord!);
        this.invalidSlots.delete(slot);
      } catch (err) {
        if (!building) throw err;
        this.invalidSlots.add(slot);
      }
    }
    if (entry !== null) {
      this.batchChars += entry.text.length;
      if (this.batchChars > limits.textMutationCharsMax) {
        throw dbError('active_text_mutation_limit_exceeded', `Active text mutation limit exceeded: one write may index at most ${limits.textMutationCharsMax} characters of text per text index`);
      }
    }
    const epoch = this.store.pendingEpoch();
    if (oldDoc >= 0) {
      const partition = this.docs.partition(slot);
      const p = this.partitions.list[partition]!;
      const text = p.text;
      text.remove(oldDoc, epoch);
      // Its postings are dead now: the lists may need merging (settled() runs a step).
      p.merging = true;
      this.docs.set(slot, -1, partition);
      this.store.joinBatch(() => {
        text.undoRemove(oldDoc);
        this.docs.set(slot, oldDoc, partition);
      }, null);
    }
    if (entry !== null) this.add(slot, entry.text, entry.tenant, epoch, true);
  }

  private sameEntry(a: PropertyRecord, b: PropertyRecord): boolean {
    const va = recordGet(a, this.propertyId), vb = recordGet(b, this.propertyId);
    if (va === undefined || vb === undefined || !valuesEqual(va, vb)) return false;
    if (this.tenantPropertyId < 0) return true;
    const ta = recordGet(a, this.tenantPropertyId), tb = recordGet(b, this.tenantPropertyId);
    return ta !== undefined && tb !== undefined && valuesEqual(ta, tb);
  }

  /** The batch settled: the per-batch text count starts again. */
  batchSettled(): void {
    this.batchChars = 0;
  }

  // ---------------------------------------------------------------- builds

  private sourceRecord(slot: number, at: number): PropertyRecord | null {
    const store = this.store;
    if (this.record.definition.element === 'edge') {
      if (!store.edgeVisible(slot, at) || store.edgeLabel(slot) !== this.labelId) return null;
      return store.recordOnce(true, slot, at);
    }
    if (!store.nodeVisible(slot, at) || store.nodeLabel(slot, at) !== this.labelId) return null;
    return store.recordOnce(false, slot, at);
  }

  /** Like VectorPhysical.scan: documents created at epoch 1, values it cannot accept remembered. */
  scan(slots: number, at: number, deadlineMs: number, progress: SliceProgress): void {
    const stop = Math.min(slots, this.cursor + limits.indexBuildSliceElements);
    let slot = this.cursor;
    for (; slot < stop; slot++) {
      if ((slot & 63) === 0 && slot !== this.cursor && performance.now() >= deadlineMs) break;
      progress.entities++;
      const record = this.sourceRecord(slot, at);
      if (record === null) continue;
      let entry: { text: string; tenant: Value | undefined } | null;
      try {
        entry = this.entryOf(record);
      } catch {
        this.invalidSlots.add(slot);
        continue;
      }
      if (entry === null) continue;
      progress.inputBytes += Buffer.byteLength(entry.text, 'utf8');
      this.add(slot, entry.text, entry.tenant, 1, false);
      progress.outputs++;
      progress.outputBytes += 16 + 2 * entry.text.length;
    }
    this.cursor = slot;
  }

  /** validate_manifests: the slots that held unacceptable values, on the current data. */
  invalidSourceData(at: number): boolean {
    for (const slot of this.invalidSlots) {
      const record = this.sourceRecord(slot, at);
      try {
        if (record !== null) this.entryOf(record);
        this.invalidSlots.delete(slot);
      } catch {
        return true;
      }
    }
    return false;
  }

  /** Build whole from the data at `at`. */
  materialize(slots: number, at: number): void {
    this.cursor = 0;
    const progress: SliceProgress = { entities: 0, inputBytes: 0, outputs: 0, outputBytes: 0 };
    while (this.cursor < slots) this.scan(slots, at, Infinity, progress);
    this.cursor = Infinity;
    this.invalidSlots.clear();
  }

  // ---------------------------------------------------------------- merges (between batches)

  /** Whether a partition has merges to do. */
  needsMerging(): boolean {
    return this.partitions.list.some((p) => p.merging);
  }

  /**
   * One bounded step of merges in every partition a batch touched (`force`: every one):
   * documents deleted at or before `purgeBefore` (no running read can hold an older
   * snapshot) leave the postings. Returns whether more remains.
   */
  merge(visible: number, purgeBefore: number, force: boolean): boolean {
    let more = false;
    for (const p of this.partitions.list) {
      if (!force && !p.merging) continue;
      p.merging = p.text.maintain(visible, purgeBefore);
      more ||= p.merging;
    }
    return more;
  }

  // ---------------------------------------------------------------- readers, snapshots, memory

  partitionViews(): PartitionView[] {
    return this.partitions.list.map((p) => ({ key: p.key, tenant: p.tenantBytes, root: p.text.root }));
  }

  cutPartitions(): { key: string; tenant: Uint8Array | null; root: number; points: number }[] {
    return this.partitions.list.map((p) => ({ key: p.key, tenant: p.tenantBytes, root: p.text.root, points: p.text.pointCount() }));
  }

  /** A partition whose documents a snapshot carried (restore): the element map back, no re-analysis. */
  adoptPartition(identity: TenantPartition, text: TextPartition): void {
    const index = this.partitions.add({ ...identity, text, merging: true });
    text.forEachDoc((doc, element, created, deleted) => {
      if (deleted === 0 && created !== 0 && created !== 0xffffffff) this.docs.set(element, doc, index);
    });
    this.partitionsChanged = true;
  }

  blocks(): [number, number][] {
    return this.partitions.list.flatMap((p) => p.text.blocks());
  }
}
