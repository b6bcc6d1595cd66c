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
import type { Metric } from '../protocol/index-spec.js';
import type { Value } from '../protocol/value.js';
import { recordGet, type PropertyRecord } from '../store/record-codec.js';
import type { Store } from '../store/store.js';
import { VectorGraph } from '../vector/graph.js';
import { NEVER } from '../vector/layout.js';
import type { IndexRecord } from './catalog.js';
import { partitionIdentity, TenantPartitions, type TenantPartition } from './partitions.js';
import { storedVector } from './vector-values.js';
import { ElementPoints } from './vector-elements.js';
import { SearchIndex } from './search-index.js';

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

interface Entry { readonly vector: Float32Array; readonly tenant: Value | undefined }

export class VectorPhysical extends SearchIndex<Entry> {
  readonly kind = 'vector' as const;
  readonly dimension: number;
  readonly metric: Metric;
  private readonly partitions = new TenantPartitions<Partition>();
  /** Element slot -> its live point (-1: none) and that point's graph, readable by readers. */
  readonly elements: ElementPoints;
  /** Graph root -> partition (the element map names graphs by root). */
  private readonly partitionOfRoot = new Map<number, number>();
  /** Partitions whose graph is half dead or more, or being compacted. */
  private readonly compactable = new Set<number>();
  private readonly pointInfo = new Uint32Array(3);

  constructor(store: Store, record: IndexRecord, labelId: number, propertyId: number, cursor: number) {
    super(store, record, labelId, propertyId, cursor);
    this.dimension = record.definition.dimension!;
    this.metric = record.definition.metric!;
    this.elements = ElementPoints.create(store.vectorMemory());
  }

  // ---------------------------------------------------------------- partitions and points

  private partitionFor(tenant: Value | undefined): number {
    const found = this.partitions.find(tenant);
    if (found >= 0) return found;
    const graph = VectorGraph.create(this.store.vectorMemory(), { dimension: this.dimension, metric: this.metric });
    const index = this.partitions.add({ ...partitionIdentity(tenant), graph, live: 0, compaction: null });
    this.partitionOfRoot.set(graph.root, index);
    this.directory.add(tenant, graph.root);
    return index;
  }

  private setPoint(slot: number, point: number, partition: number): void {
    this.elements.set(slot, point, this.partitions.list[partition]!.graph.root);
  }

  /** The partition of element `slot`'s point (0 when it has none). */
  private partitionAt(slot: number): number {
    return this.partitionOfRoot.get(this.elements.graphRoot(slot)) ?? 0;
  }

  protected itemOf(slot: number): number {
    return this.elements.point(slot);
  }

  protected sizes(entry: Entry): readonly [number, number] {
    // The vector, and its neighbour lists (about 128 bytes).
    return [entry.vector.byteLength, entry.vector.byteLength + 128];
  }

  /**
   * What element `slot` holds for this index in `record` (with the index's label), or null
   * when it is not indexed: no property, or a partitioned index and no tenant value. Throws
   * the §8.3 errors for a value the index cannot accept.
   */
  protected entryOf(record: PropertyRecord): Entry | null {
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
  protected insert(slot: number, entry: Entry, created: number, undoable: boolean): void {
    const partition = this.partitionFor(entry.tenant);
    const p = this.partitions.list[partition]!;
    const graph = p.graph;
    const point = graph.insert(slot, entry.vector, created);
    const before = this.itemOf(slot), beforePartition = this.partitionAt(slot);
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
  protected remove(slot: number, point: number, epoch: number): void {
    const partition = this.partitionAt(slot);
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

  // ---------------------------------------------------------------- readers, snapshots, memory

  /** Per partition: its view and the point count at a cut (writer, between batches). */
  cutPartitions(): { key: string; tenant: Uint8Array | null; root: number; points: number }[] {
    return this.partitions.list.map((p) => ({ key: p.key, tenant: p.tenantBytes, root: p.graph.root, points: p.graph.pointCount() }));
  }

  /** A partition whose graph a snapshot carried (restore): points and element map back, no rebuild. */
  adoptPartition(identity: TenantPartition, graph: VectorGraph): void {
    const partition: Partition = { ...identity, graph, live: 0, compaction: null };
    const index = this.partitions.add(partition);
    this.partitionOfRoot.set(graph.root, index);
    this.directory.add(identity.tenant, graph.root);
    graph.forEachPoint((point, element, created, deleted) => {
      if (deleted !== 0 || created === 0 || created === NEVER) return;
      this.setPoint(element, point, index);
      partition.live++;
    });
    if (graph.pointCount() >= limits.vectorCompactPointsMin && partition.live * 2 < graph.pointCount()) this.compactable.add(index);
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
    p.graph = c.graph;
    this.elements.forEach((slot, point, root) => {
      if (root === old.root) this.setPoint(slot, c.oldToNew[point]!, index);
    });
    this.partitionOfRoot.delete(old.root);
    this.partitionOfRoot.set(c.graph.root, index);
    this.directory.replaceRoot(old.root, c.graph.root);
    p.live = c.live;
    p.compaction = null;
    this.compactable.delete(index);
    return old.blocks();
  }

  /** Every block of the index: its partitions' graphs and its element map (to free once no reader can use them). */
  blocks(): [number, number][] {
    return [...this.partitions.list.flatMap((p) => p.graph.blocks()), ...this.elements.blocks()];
  }
}
