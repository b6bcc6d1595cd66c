// A vector index on the writer (indexes.md §7-§8.3, docs/indexes.md "Vector indexes"): its
// partitions, one HNSW graph each in the store's vector memory (src/vector/), the element ->
// point map, maintenance inside write batches, build slices, and what readers and
// snapshots need of it.
//
// Points are never logged. A write batch inserts and tombstones points at its epoch and
// pushes undos into the batch (a rolled-back insert becomes a never-visible point: the graph
// may keep it as a routing node, nothing reads it as a result); the graph itself is derived
// from the data, carried whole by snapshots and otherwise rebuilt from the data.
import { limits } from '../limits.js';
import { valuesEqual } from '../protocol/compare.js';
import type { Metric } from '../protocol/index-spec.js';
import type { Value } from '../protocol/value.js';
import { decodeRecord, encodeRecord, recordGet, type PropertyRecord } from '../store/record-codec.js';
import type { Store } from '../store/store.js';
import { VectorGraph } from '../vector/graph.js';
import { NEVER } from '../vector/layout.js';
import type { IndexRecord } from './catalog.js';
import { partitionIdentity, TenantPartitions, type PartitionView, type TenantPartition } from './partitions.js';
import { storedVector } from './vector-values.js';
import { ElementPoints } from './vector-elements.js';


interface Partition extends TenantPartition {
  graph: VectorGraph;
  /** Points of `graph` that are live now (inserted, neither removed nor rolled back). */
  live: number;
  compaction: Compaction | null;
}

/**
 * A partition's graph being copied without its dead points (compaction, docs/indexes.md):
 * old points below `cursor` are copied (or left out); writes go to the old graph, and a
 * removal of a copied point is mirrored into the new one. When the cursor reaches the old
 * graph's count the new graph replaces it, once every read that began before the
 * compaction started has ended: every later read holds a snapshot at or after `horizon`,
 * and the new graph holds every point visible at such snapshots.
 */
interface Compaction {
  readonly graph: VectorGraph;
  cursor: number;
  /** The visible epoch when it started: points deleted at or before it are left out. */
  readonly horizon: number;
  /** The topology retire sequence when it started (topology.ts reader slots). */
  readonly startSequence: number;
  /** Old point -> new point (-1: left out), for the points below the cursor. */
  oldToNew: Int32Array;
  live: number;
}

/** Progress of one build slice (the counters of indexes.md §5.3). */
export interface SliceProgress { entities: number; inputBytes: number; outputs: number; outputBytes: number }

export class VectorPhysical {
  readonly kind = 'vector' as const;
  readonly dimension: number;
  readonly metric: Metric;
  /** -1: not partitioned. */
  readonly tenantPropertyId: number;
  /** Build only: element slots below it are scanned (and maintained by writes). Infinity once scanned. */
  cursor: number;
  /** Build only: slots holding values the index cannot accept, re-checked at validate_descriptor. */
  readonly invalidSlots = new Set<number>();
  private readonly partitions = new TenantPartitions<Partition>();
  /** Element slot -> its live point (-1: none) and that point's partition, readable by readers. */
  readonly elements: ElementPoints;
  /** A partition was added or replaced its graph since the view was last published. */
  partitionsChanged = false;
  /** Partitions whose graph is half dead or more, or being compacted. */
  private readonly compactable = new Set<number>();
  private readonly pointInfo = new Uint32Array(3);

  constructor(
    private readonly store: Store,
    public record: IndexRecord,
    readonly labelId: number,
    readonly propertyId: number,
    cursor: number,
  ) {
    const d = record.definition;
    this.dimension = d.dimension!;
    this.metric = d.metric!;
    this.tenantPropertyId = d.tenantProperty === null ? -1 : store.names.intern(d.tenantProperty);
    this.cursor = cursor;
    this.elements = ElementPoints.create(store.vectorMemory());
  }

  // ---------------------------------------------------------------- partitions and points

  private partitionFor(tenant: Value | undefined): number {
    const found = this.partitions.find(tenant);
    if (found >= 0) return found;
    const graph = VectorGraph.create(this.store.vectorMemory(), { dimension: this.dimension, metric: this.metric });
    this.partitionsChanged = true;
    return this.partitions.add({ ...partitionIdentity(tenant), graph, live: 0, compaction: null });
  }

  private setPoint(slot: number, point: number, partition: number): void {
    this.elements.set(slot, point, partition);
  }

  private pointAt(slot: number): number {
    return this.elements.point(slot);
  }

  /**
   * What element `slot` holds for this index in `record` (with the index's label), or null
   * when it is not indexed: no property, or a partitioned index and no tenant value. Throws
   * the §8.3 errors for a value the index cannot accept.
   */
  private entryOf(record: PropertyRecord): { vector: Float32Array; tenant: Value | undefined } | null {
    const value = recordGet(record, this.propertyId);
    if (value === undefined) return null;
    let tenant: Value | undefined;
    if (this.tenantPropertyId >= 0) {
      tenant = recordGet(record, this.tenantPropertyId);
      // indexes.md §8.3: an element without a tenant value is not indexed.
      if (tenant === undefined || tenant === null) return null;
    }
    return { vector: storedVector(value, this.dimension, this.metric), tenant };
  }

  /** Insert a point for `slot` (inside the open batch when `undoable`). */
  private add(slot: number, vector: Float32Array, tenant: Value | undefined, created: number, undoable: boolean): void {
    const partition = this.partitionFor(tenant);
    const p = this.partitions.list[partition]!;
    const graph = p.graph;
    const point = graph.insert(slot, vector, created);
    const before = this.pointAt(slot), beforePartition = this.elements.partition(slot);
    this.setPoint(slot, point, partition);
    p.live++;
    if (undoable) {
      this.store.joinBatch(() => {
        graph.undoInsert(point);
        p.live--;
        this.setPoint(slot, before, beforePartition);
      }, null);
    }
  }

  /** Tombstone element `slot`'s point at `epoch` (inside the open batch), mirrored into a compaction's copy. */
  private removePoint(slot: number, point: number, epoch: number): void {
    const partition = this.elements.partition(slot);
    const p = this.partitions.list[partition]!;
    const graph = p.graph;
    graph.remove(point, epoch);
    const c = p.compaction;
    const copied = c !== null && point < c.cursor ? c.oldToNew[point]! : -1;
    if (copied >= 0) c!.graph.remove(copied, epoch);
    this.setPoint(slot, -1, partition);
    p.live--;
    // Half dead (and large enough to matter): the next idle slice compacts it.
    if (graph.pointCount() >= limits.vectorCompactPointsMin && p.live * 2 < graph.pointCount()) this.compactable.add(partition);
    this.store.joinBatch(() => {
      graph.undoRemove(point);
      if (copied >= 0) c!.graph.undoRemove(copied);
      p.live++;
      this.setPoint(slot, point, partition);
    }, null);
  }

  // ---------------------------------------------------------------- maintenance (inside a write batch)

  /**
   * Element `slot` changed from (oldLabel, oldRecord) to (newLabel, newRecord) in the open
   * batch. Its point (if any) is tombstoned and a new one inserted, unless the indexed value
   * and tenant stayed equal. An active index fails the write on a value it cannot accept; a
   * building one remembers the slot for validate_descriptor.
   */
  maintain(slot: number, oldLabel: number, oldRecord: PropertyRecord | null, newLabel: number, newRecord: PropertyRecord | null, building: boolean): void {
    // A building index learns slots at or past its cursor from its scan.
    if (slot >= this.cursor) return;
    const oldPoint = this.pointAt(slot);
    const hasNew = newLabel === this.labelId && newRecord !== null;
    if (oldPoint >= 0 && hasNew && oldLabel === this.labelId && oldRecord !== null && this.sameEntry(oldRecord, newRecord!)) return;
    let entry: { vector: Float32Array; tenant: Value | undefined } | null = null;
    if (hasNew) {
      try {
        entry = this.entryOf(newRecord!);
        this.invalidSlots.delete(slot);
      } catch (err) {
        if (!building) throw err;
        this.invalidSlots.add(slot);
      }
    }
    const epoch = this.store.pendingEpoch();
    if (oldPoint >= 0) this.removePoint(slot, oldPoint, epoch);
    if (entry !== null) this.add(slot, entry.vector, entry.tenant, epoch, true);
  }

  /** The indexed value and tenant are equal in both records. */
  private sameEntry(a: PropertyRecord, b: PropertyRecord): boolean {
    const va = recordGet(a, this.propertyId), vb = recordGet(b, this.propertyId);
    if (va === undefined || vb === undefined || !valuesEqual(va, vb)) return false;
    if (this.tenantPropertyId < 0) return true;
    const ta = recordGet(a, this.tenantPropertyId), tb = recordGet(b, this.tenantPropertyId);
    return ta !== undefined && tb !== undefined && valuesEqual(ta, tb);
  }

  // ---------------------------------------------------------------- builds

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
   * each element with a vector gets a point created at epoch 1 (every reader that may use
   * the index holds it; later writes are maintained at their own epochs). Values the index
   * cannot accept are remembered for validate_descriptor.
   */
  scan(slots: number, at: number, deadlineMs: number, progress: SliceProgress): void {
    const stop = Math.min(slots, this.cursor + limits.indexBuildSliceElements);
    let slot = this.cursor;
    for (; slot < stop; slot++) {
      // The clock every 8 elements: an insert costs ~0.1-1 ms.
      if ((slot & 7) === 0 && slot !== this.cursor && performance.now() >= deadlineMs) break;
      progress.entities++;
      const record = this.sourceRecord(slot, at);
      if (record === null) continue;
      let entry: { vector: Float32Array; tenant: Value | undefined } | null;
      try {
        entry = this.entryOf(record);
      } catch {
        this.invalidSlots.add(slot);
        continue;
      }
      if (entry === null) continue;
      progress.inputBytes += entry.vector.byteLength;
      this.add(slot, entry.vector, entry.tenant, 1, false);
      progress.outputs++;
      progress.outputBytes += entry.vector.byteLength + 4 * 2 * 16;
    }
    this.cursor = slot;
  }

  /** validate_descriptor: the slots that held unacceptable values, on the current data. */
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

  /** Build whole from the data at `at` (a replayed activation, a snapshot without the graphs): no deadline. */
  materialize(slots: number, at: number): void {
    this.cursor = 0;
    const progress: SliceProgress = { entities: 0, inputBytes: 0, outputs: 0, outputBytes: 0 };
    while (this.cursor < slots) this.scan(slots, at, Infinity, progress);
    this.cursor = Infinity;
    // Committed data satisfied the index when it was written.
    this.invalidSlots.clear();
  }

  // ---------------------------------------------------------------- readers, snapshots, memory

  /** The partitions as the readers' view carries them. */
  partitionViews(): PartitionView[] {
    return this.partitions.list.map((p) => ({ key: p.key, tenant: p.tenantBytes, root: p.graph.root }));
  }

  /** Per partition: its view and the point count at a cut (writer, between batches). */
  cutPartitions(): { key: string; tenant: Uint8Array | null; root: number; points: number }[] {
    return this.partitions.list.map((p) => ({ key: p.key, tenant: p.tenantBytes, root: p.graph.root, points: p.graph.pointCount() }));
  }

  /** A partition whose graph a snapshot carried (restore): points and element map back, no rebuild. */
  adoptPartition(identity: TenantPartition, graph: VectorGraph): void {
    const partition: Partition = { ...identity, graph, live: 0, compaction: null };
    const index = this.partitions.add(partition);
    graph.forEachPoint((point, element, created, deleted) => {
      if (deleted !== 0 || created === 0 || created === NEVER) return;
      this.setPoint(element, point, index);
      partition.live++;
    });
    if (graph.pointCount() >= limits.vectorCompactPointsMin && partition.live * 2 < graph.pointCount()) this.compactable.add(index);
    this.partitionsChanged = true;
  }

  // ---------------------------------------------------------------- compaction (between batches)

  /** Whether a partition waits for compaction or is being compacted. */
  needsCompaction(): boolean {
    return this.compactable.size > 0;
  }

  /**
   * One slice of compaction, inside a batch of its own: copy live points of one partition
   * into a new graph until `deadlineMs`, or replace the old graph once all are copied.
   * Returns the old graph's blocks when it was replaced (the caller frees them once no
   * read holds them), 'waiting' while reads older than the compaction run, 'idle' when
   * nothing is left.
   */
  compactStep(deadlineMs: number, visible: number, oldestRead: number, retireSequence: () => number): 'progress' | 'waiting' | 'idle' | [number, number][] {
    const next = this.compactable.values().next();
    if (next.done === true) return 'idle';
    const index = next.value;
    const p = this.partitions.list[index]!;
    const old = p.graph;
    if (p.compaction === null) {
      const graph = VectorGraph.create(this.store.vectorMemory(), { dimension: this.dimension, metric: this.metric });
      p.compaction = { graph, cursor: 0, horizon: visible, startSequence: retireSequence(), oldToNew: new Int32Array(Math.max(16, old.pointCount())).fill(-1), live: 0 };
    }
    const c = p.compaction;
    const count = old.pointCount();
    if (c.oldToNew.length < count) {
      const grown = new Int32Array(count * 2).fill(-1);
      grown.set(c.oldToNew);
      c.oldToNew = grown;
    }
    const vector = new Float32Array(this.dimension);
    const info = this.pointInfo;
    for (; c.cursor < count; c.cursor++) {
      if ((c.cursor & 7) === 0 && performance.now() >= deadlineMs) return 'progress';
      old.readPoint(c.cursor, info, vector);
      const created = info[1]!, deleted = info[2]!;
      // Never visible (rolled back), or invisible to every read that can still start.
      if (created === 0 || created === NEVER || (deleted !== 0 && deleted <= c.horizon)) continue;
      const copy = c.graph.insert(info[0]!, vector, created);
      if (deleted !== 0) c.graph.remove(copy, deleted);
      else c.live++;
      c.oldToNew[c.cursor] = copy;
    }
    // Every read that began before the compaction (its snapshot may predate the horizon) must be over.
    if (oldestRead <= c.startSequence) return 'waiting';
    this.elements.forEach((slot, point, partition) => {
      if (partition === index) this.setPoint(slot, c.oldToNew[point]!, index);
    });
    p.graph = c.graph;
    p.live = c.live;
    p.compaction = null;
    this.compactable.delete(index);
    this.partitionsChanged = true;
    return old.blocks();
  }

  /** Every block of the index: its partitions' graphs and its element map (to free once no reader can use them). */
  blocks(): [number, number][] {
    return [...this.partitions.list.flatMap((p) => p.graph.blocks()), ...this.elements.blocks()];
  }
}
