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
import { dbError } from '../protocol/errors.js';
import { StringArray, tagOf, type Value } from '../protocol/value.js';
import { recordGet, type PropertyRecord } from '../store/record-codec.js';
import type { Store } from '../store/store.js';
import { TextPartition, type Analyzer } from '../text/index.js';
import type { IndexRecord } from './catalog.js';
import { partitionIdentity, SlotMap, TenantPartitions, type TenantPartition } from './partitions.js';
import { SearchIndex } from './search-index.js';

interface Partition extends TenantPartition {
  readonly text: TextPartition;
}

/** The text a stored value gives a text index (§8.4): a string, or a string_array's items joined with newlines. */
export function storedText(v: Value): string {
  if (typeof v === 'string') return v;
  if (v instanceof StringArray) return v.items.join('\n');
  throw dbError('invalid_index_source_data', `Invalid index source data: a text index accepts a string or a string_array, got ${tagOf(v)}`);
}

interface Entry { readonly text: string; readonly tenant: Value | undefined }

export class TextPhysical extends SearchIndex<Entry> {
  readonly kind = 'text' as const;
  readonly analyzer: Analyzer;
  readonly positions: boolean;
  private readonly partitions = new TenantPartitions<Partition>();
  private readonly docs = new SlotMap();
  /** Partitions with dead postings to merge (maintain() said more remains, or a document went since). */
  private readonly merging = new Set<number>();
  /** Partitions whose lists wait for the purge horizon to pass their deletions, with the horizon they waited at. */
  private readonly parked = new Map<number, number>();
  /** UTF-16 code units of text the open batch indexed (limits.textMutationCharsMax). */
  private batchChars = 0;

  constructor(store: Store, record: IndexRecord, labelId: number, propertyId: number, cursor: number) {
    super(store, record, labelId, propertyId, cursor);
    this.analyzer = record.definition.analyzer ?? 'standard';
    this.positions = record.definition.positions ?? false;
  }

  private partitionFor(tenant: Value | undefined): number {
    const found = this.partitions.find(tenant);
    if (found >= 0) return found;
    const text = TextPartition.create(this.store.textMemory(), { analyzer: this.analyzer, positions: this.positions });
    this.directory.add(tenant, text.root);
    return this.partitions.add({ ...partitionIdentity(tenant), text });
  }

  /**
   * What `record` gives the index: null when not indexed (no property); throws
   * invalid_index_source_data for a value it cannot accept and, under a tenant property,
   * for an element without a tenant value (§8.4).
   */
  protected entryOf(record: PropertyRecord): Entry | null {
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

  protected itemOf(slot: number): number {
    return this.docs.get(slot);
  }

  protected sizes(entry: Entry): readonly [number, number] {
    return [Buffer.byteLength(entry.text, 'utf8'), 16 + 2 * entry.text.length];
  }

  /** The texts one batch indexes are bounded (limits.textMutationCharsMax). */
  protected override admit(entry: Entry): void {
    this.batchChars += entry.text.length;
    if (this.batchChars > limits.textMutationCharsMax) {
      throw dbError('active_text_mutation_limit_exceeded', `Active text mutation limit exceeded: one write may index at most ${limits.textMutationCharsMax} characters of text per text index`);
    }
  }

  protected insert(slot: number, entry: Entry, created: number, undoable: boolean): void {
    const partition = this.partitionFor(entry.tenant);
    const p = this.partitions.list[partition]!;
    const doc = p.text.insert(slot, entry.text, created);
    const before = this.docs.get(slot), beforePartition = this.docs.partition(slot);
    this.docs.set(slot, doc, partition);
    if (undoable) {
      this.store.joinBatch(() => {
        p.text.undoInsert(doc);
        this.docs.set(slot, before, beforePartition);
      }, null);
    }
  }

  /** The document goes at `epoch` (inside the open batch); its postings are dead, so the lists may need merging. */
  protected remove(slot: number, doc: number, epoch: number): void {
    const partition = this.docs.partition(slot);
    const p = this.partitions.list[partition]!;
    const text = p.text;
    text.remove(doc, epoch);
    this.merging.add(partition);
    this.docs.set(slot, -1, partition);
    this.store.joinBatch(() => {
      text.undoRemove(doc);
      this.docs.set(slot, doc, partition);
    }, null);
  }

  /** The batch settled: the per-batch text count starts again. */
  batchSettled(): void {
    this.batchChars = 0;
  }

  // ---------------------------------------------------------------- merges (between batches)

  /** Whether a partition has merges to do now (per request: O(1)). */
  needsMerging(): boolean {
    return this.merging.size > 0;
  }

  /** Whether some partition's merges wait for the purge horizon to move (tried again after batches). */
  hasParkedMerges(): boolean {
    return this.parked.size > 0;
  }

  /**
   * One bounded step of merges in every partition with dead postings (`force`: every
   * partition): documents deleted at or before `purgeBefore` (no running read or export
   * can hold an older snapshot) leave the postings. Returns whether more remains.
   */
  merge(visible: number, purgeBefore: number, force: boolean): boolean {
    const which = force ? [...this.partitions.list.keys()] : [...this.merging];
    // Parked lists go again once the horizon moved past where they stopped.
    if (!force) for (const [i, at] of this.parked) if (purgeBefore > at && !this.merging.has(i)) which.push(i);
    for (const i of which) {
      const text = this.partitions.list[i]!.text;
      if (text.maintain(visible, purgeBefore)) {
        this.merging.add(i);
        this.parked.delete(i);
        continue;
      }
      this.merging.delete(i);
      if (text.mergesWaiting()) this.parked.set(i, purgeBefore);
      else this.parked.delete(i);
    }
    return this.merging.size > 0;
  }

  // ---------------------------------------------------------------- readers, snapshots, memory

  cutPartitions(): { key: string; tenant: Uint8Array | null; root: number; points: number }[] {
    return this.partitions.list.map((p) => ({ key: p.key, tenant: p.tenantBytes, root: p.text.root, points: p.text.pointCount() }));
  }

  /** A partition whose documents a snapshot carried (restore): the element map back, no re-analysis. */
  adoptPartition(identity: TenantPartition, text: TextPartition): void {
    const index = this.partitions.add({ ...identity, text });
    this.directory.add(identity.tenant, text.root);
    this.merging.add(index);
    text.forEachDoc((doc, element, created, deleted) => {
      if (deleted === 0 && created !== 0 && created !== 0xffffffff) this.docs.set(element, doc, index);
    });
  }

  blocks(): [number, number][] {
    return this.partitions.list.flatMap((p) => p.text.blocks());
  }
}
