// What vector and text indexes share on the writer (index/vector-index.ts,
// index/text-index.ts): an element has at most one *item* (a vector point, a text document)
// in one tenant partition; writes move it inside the batch, builds scan element slots in
// time-bounded slices, validation re-checks the values a build could not accept.
import { limits } from '../limits.js';
import { valuesEqual } from '../protocol/compare.js';
import type { Value } from '../protocol/value.js';
import { recordGet, type PropertyRecord } from '../store/record-codec.js';
import type { Store } from '../store/store.js';
import type { IndexRecord } from './catalog.js';
import { PartitionDirectory } from './partition-directory.js';

/** Progress of one build slice (the counters of indexes.md §5.3). */
export interface SliceProgress { entities: number; inputBytes: number; outputs: number; outputBytes: number }

export abstract class SearchIndex<Entry extends { readonly tenant: Value | undefined }> {
  /** -1: not partitioned. */
  readonly tenantPropertyId: number;
  /** Build only: element slots below it are scanned (and maintained by writes). Infinity once scanned. */
  cursor: number;
  /** Build only: slots holding values the index cannot accept, re-checked at validation. */
  readonly invalidSlots = new Set<number>();
  /** Tenant -> partition root, for readers (index/partition-directory.ts). */
  readonly directory: PartitionDirectory;

  constructor(
    protected readonly store: Store,
    public record: IndexRecord,
    readonly labelId: number,
    readonly propertyId: number,
    cursor: number,
  ) {
    const tenant = record.definition.tenantProperty;
    this.tenantPropertyId = tenant === null ? -1 : store.names.intern(tenant);
    this.cursor = cursor;
    this.directory = PartitionDirectory.create(store.topology);
  }

  /** What `record` (of an element with the index's label) gives the index: null when nothing; throws for a value it refuses. */
  protected abstract entryOf(record: PropertyRecord): Entry | null;
  /** The element's current item, or -1. */
  protected abstract itemOf(slot: number): number;
  /** Give the element an item for `entry`, created at `created` (inside the open batch when `undoable`). */
  protected abstract insert(slot: number, entry: Entry, created: number, undoable: boolean): void;
  /** The element's item stops being visible at `epoch` (inside the open batch). */
  protected abstract remove(slot: number, item: number, epoch: number): void;
  /** Bytes read and written for an entry, for the progress counters. */
  protected abstract sizes(entry: Entry): readonly [input: number, output: number];
  /** Called before a write inserts an entry (a bound per batch may refuse it). */
  protected admit(_entry: Entry): void {}

  /**
   * Element `slot` changed from (oldLabel, oldRecord) to (newLabel, newRecord) in the open
   * batch. Its item (if any) goes and a new one is made, unless the indexed value and tenant
   * stayed equal. An active index fails the write on a value it cannot accept; a building
   * one remembers the slot for validation.
   */
  maintain(slot: number, oldLabel: number, oldRecord: PropertyRecord | null, newLabel: number, newRecord: PropertyRecord | null, building: boolean): void {
    // A building index learns slots at or past its cursor from its scan.
    if (slot >= this.cursor) return;
    const oldItem = this.itemOf(slot);
    const hasNew = newLabel === this.labelId && newRecord !== null;
    if (oldItem >= 0 && hasNew && oldLabel === this.labelId && oldRecord !== null && this.sameEntry(oldRecord, newRecord!)) return;
    let entry: Entry | null = null;
    if (hasNew) {
      try {
        entry = this.entryOf(newRecord!);
        this.invalidSlots.delete(slot);
      } catch (err) {
        if (!building) throw err;
        this.invalidSlots.add(slot);
      }
    }
    if (entry !== null) this.admit(entry);
    const epoch = this.store.pendingEpoch();
    if (oldItem >= 0) this.remove(slot, oldItem, epoch);
    if (entry !== null) this.insert(slot, entry, epoch, true);
  }

  /** The indexed value and tenant are equal in both records. */
  private sameEntry(a: PropertyRecord, b: PropertyRecord): boolean {
    const va = recordGet(a, this.propertyId), vb = recordGet(b, this.propertyId);
    if (va === undefined || vb === undefined || !valuesEqual(va, vb)) return false;
    if (this.tenantPropertyId < 0) return true;
    const ta = recordGet(a, this.tenantPropertyId), tb = recordGet(b, this.tenantPropertyId);
    return ta !== undefined && tb !== undefined && valuesEqual(ta, tb);
  }

  /** The record of element `slot` at `at` if it has the index's label, else null. */
  private sourceRecord(slot: number, at: number): PropertyRecord | null {
    const store = this.store;
    if (this.record.definition.element === 'edge') {
      if (!store.edgeVisible(slot, at) || store.edgeLabel(slot) !== this.labelId) return null;
      return store.recordOnce(true, slot, at);
    }
    if (!store.nodeVisible(slot, at) || store.nodeLabel(slot, at) !== this.labelId) return null;
    return store.recordOnce(false, slot, at);
  }

  /**
   * Scan from the cursor up to `slots` (the element slots of now), for at most
   * limits.indexBuildSliceElements elements or until `deadlineMs` (performance.now()):
   * each element gets its item created at epoch 1 (every reader that may use the index
   * holds it; later writes are maintained at their own epochs). Values the index cannot
   * accept are remembered for validation.
   */
  scan(slots: number, at: number, deadlineMs: number, progress: SliceProgress): void {
    const stop = Math.min(slots, this.cursor + limits.indexBuildSliceElements);
    let slot = this.cursor;
    for (; slot < stop; slot++) {
      // The clock every 8 elements: an insert costs ~0.01-1 ms.
      if ((slot & 7) === 0 && slot !== this.cursor && performance.now() >= deadlineMs) break;
      progress.entities++;
      const record = this.sourceRecord(slot, at);
      if (record === null) continue;
      let entry: Entry | null;
      try {
        entry = this.entryOf(record);
      } catch {
        this.invalidSlots.add(slot);
        continue;
      }
      if (entry === null) continue;
      const [input, output] = this.sizes(entry);
      progress.inputBytes += input;
      this.insert(slot, entry, 1, false);
      progress.outputs++;
      progress.outputBytes += output;
    }
    this.cursor = slot;
  }

  /** Validation: whether a slot that held an unacceptable value still does, on the current data. */
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

  /** Build whole from the data at `at` (a replayed activation, a snapshot without the partitions): no deadline. */
  materialize(slots: number, at: number): void {
    this.cursor = 0;
    const progress: SliceProgress = { entities: 0, inputBytes: 0, outputs: 0, outputBytes: 0 };
    while (this.cursor < slots) this.scan(slots, at, Infinity, progress);
    this.cursor = Infinity;
    // Committed data satisfied the index when it was written.
    this.invalidSlots.clear();
  }
}
