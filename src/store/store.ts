// The graph in shared memory (ARCHITECTURE.md §4). One writer thread mutates it;
// any number of reader threads read it without locks.
//
// Layout (all u32, little-endian, in growable SharedArrayBuffers):
//   meta   [EPOCH, NODE_SLOTS, EDGE_SLOTS, HEAP_USED, VISIBLE, HEAP_RECLAIMABLE, reserved]
//   nodes  NODE_WORDS per node slot (slot = node ID): [label, labelSince, created, deleted, props]
//   edges  EDGE_WORDS per edge slot (slot = edge ID): [label, src, dst, created, deleted, props]
//   heap   property versions: [prev, epoch, label, byteLength] + msgpackr record bytes; the
//          space of versions no read can reach any more is reused (version-reuse.ts)
// and the adjacency in a shared WebAssembly.Memory (topology.ts), which the kernels read.
//
// Visibility (MVCC): an element is visible at snapshot S when
//   created != 0 && created <= S && (deleted == 0 || S < deleted).
// The writer does every write of epoch E+1 first and then Atomics.stores EPOCH = E+1 (its
// own committed epoch). Readers Atomics.load VISIBLE once per request: the newest epoch
// that is published, which durable storage advances only once a batch is durable
// (publish()), so no reader ever sees a batch that a crash could still take away.
// Property versions are immutable once their pointer is published, until no read can
// reach them (version-reuse.ts), and chained newest-first. An edge's label, created and deleted epochs are also in its two adjacency
// entries, so navigation scans them sequentially; the writer keeps both copies equal.
//
// Memory ordering (ECMAScript memory model: Atomics operations are sequentially
// consistent; a plain load racing with a write returns the old or the new value, whole
// for an aligned u32; a plain load ordered after an Atomics.load that observed an
// Atomics.store sees every write made before that store). Every write of batches <= S
// happens before a reader's Atomics.load of VISIBLE that returned S, so its plain loads
// of those words are exact unless a LATER batch overwrites the word while it reads. Words
// later batches (or their rollback) overwrite in place, and why a reader at S stays exact:
//   - N_CREATED / E_CREATED / N_DELETED / E_DELETED and an adjacency entry's `deleted`:
//     plain. They only ever go from 0 to the writing batch's epoch or back to 0 on
//     rollback, never to an epoch <= S, so either value gives the same answer at S.
//   - N_PROPS / E_PROPS (version pointers): Atomics.stored after the version is written and
//     Atomics.loaded before it is read.
//   - N_LABEL / N_LABEL_SINCE: a relabel stores N_LABEL_SINCE and then Atomics.stores
//     N_LABEL; a reader Atomics.loads N_LABEL before N_LABEL_SINCE, so a label of a newer
//     (or rolled-back) batch always comes with a labelSince the reader does not hold.
//     Rollback restores N_LABEL but never lowers N_LABEL_SINCE (a labelSince newer than
//     needed only sends readers to the version chain, which is always exact).
//   - NODE_SLOTS / EDGE_SLOTS: Atomics.store / Atomics.load. A slot past S's count (or one
//     reserved and rolled back) holds created 0 or an epoch > S.
//   - The space of a property version no read can reach any more (version-reuse.ts): a
//     version superseded or left by a deletion in batch E is retired once E is visible
//     and reused once every read announced before that ended (and no older snapshot cut is
//     held), so a reader at S < E, which may walk through it, announced its read earlier
//     and keeps it. The new version there is written before its pointer is published, as
//     any version. A chain may then point from low to high offsets, beyond a reader's
//     views: versionAt checks every step.
//   - The adjacency (topology.ts header): chunk pointers, block lengths and block offsets
//     are Atomics.stored and Atomics.loaded (lengths before offsets); block lengths go down
//     on rollback, superseded blocks are reused once no announced read can hold them, and
//     an entry cut off by rollback is rewritten by a later append, all invisible at S.
// Words that are written once before the batch that publishes them and never again (an
// edge's label, src and dst; a version's header and bytes) are plain on both sides.
import { limits } from '../limits.js';
import { guard } from '../query-guard.js';
import { SvcError } from '../protocol/errors.js';
import { Dictionary, type DictionaryShared } from './dictionary.js';
import { ensureBytes, sharedBuffer } from './growable.js';
import { BULK_BATCH_CHANGES_MIN } from './heap-trim.js';
import { decodeRecord, decodeRecordInPlace, DECODE_WHOLE, emptyRecord, encodeRecord, propertyOfEncoded, recordGet, recordJsonInPlace, type PropertyRecord } from './record-codec.js';
import type { Value } from '../protocol/value.js';
import { ADJ_WORDS, DIR_IN, DIR_OUT, Topology, type DirWord } from './topology.js';
import { VersionReuse } from './version-reuse.js';
import { VectorMemory } from '../vector/memory.js';
import { TextMemory, type TextMemoryShared } from '../text/memory.js';
import { splitPartitionSection, textSectionChunks, vectorSectionChunks, type PartitionsAtCut } from './partition-section.js';

export const NODE_WORDS = 5;
export const N_LABEL = 0, N_LABEL_SINCE = 1, N_CREATED = 2, N_DELETED = 3, N_PROPS = 4;
export const EDGE_WORDS = 6;
export const E_LABEL = 0, E_SRC = 1, E_DST = 2, E_CREATED = 3, E_DELETED = 4, E_PROPS = 5;

export const M_EPOCH = 0, M_NODE_SLOTS = 1, M_EDGE_SLOTS = 2, M_HEAP_USED = 3, M_VISIBLE = 4;
/** Bytes below HEAP_USED the writer will reuse (version-reuse.ts), as of its last batch: for metrics. */
export const M_HEAP_RECLAIMABLE = 5;
/** Bytes of the meta buffer (the words above, the rest reserved). */
export const META_BYTES = 64;
export const HEAP_HEADER_BYTES = 16;
/** A property version's header words (appendVersion): the older version, its batch's epoch, label, record bytes. */
export const V_PREV = 0, V_EPOCH = 1, V_LABEL = 2, V_LENGTH = 3;
/** Words a property version of `byteLength` record bytes takes: its header and the bytes, padded to a word. */
export const versionWordsOf = (byteLength: number): number => HEAP_HEADER_BYTES / 4 + ((byteLength + 3) >>> 2);
/** Slot of a heap offset in the record cache: the top bits of a multiplicative hash. */
const RECORD_CACHE_SHIFT = 32 - Math.log2(limits.recordCacheEntriesMax);
/** Misses in a row on its slot before a record enters the record cache (Store.recordAt). */
const RECORD_CACHE_ADMIT_MISSES = 3;

export type Direction = 'out' | 'in';

/** The directory word of a direction (topology.ts). */
export const dirWord = (dir: Direction): DirWord => (dir === 'out' ? DIR_OUT : DIR_IN);

/** Structured-cloneable description of the shared buffers, sent to reader threads. */
export interface StoreShared {
  meta: SharedArrayBuffer;
  nodes: SharedArrayBuffer;
  edges: SharedArrayBuffer;
  topology: WebAssembly.Memory;
  heap: SharedArrayBuffer;
  names: DictionaryShared;
  /** Vectors and graphs of the vector indexes (src/vector/), a shared WebAssembly memory of its own. */
  vectors: WebAssembly.Memory;
  /** Documents, dictionaries and postings of the text indexes (src/text/). */
  texts: TextMemoryShared;
}

/**
 * The writer's counters between batches: everything a snapshot at `epoch` holds
 * (snapshot-sections.ts reads it from the live buffers). Plain data, structured-cloneable.
 */
export interface StoreCut {
  epoch: number; nodeSlots: number; edgeSlots: number; heapUsed: number; names: number;
  /** The index catalog at the cut (msgpack; index/runtime.ts), or null without an index runtime. */
  indexes: Uint8Array | null;
  /** The vector and text partitions the catalog names, with their counts at the cut (partition-section.ts). */
  partitions: PartitionsAtCut;
}

/**
 * One physical change of a committed batch, replayable without the query engine
 * (src/durability). Record payloads are the exact bytes written to the heap.
 */
export type RedoOp =
  | [op: RedoKind.AddNode, slot: number, label: number, record: Uint8Array]
  | [op: RedoKind.AddEdge, slot: number, label: number, src: number, dst: number, record: Uint8Array]
  | [op: RedoKind.NodeVersion, slot: number, label: number, record: Uint8Array]
  | [op: RedoKind.EdgeVersion, slot: number, record: Uint8Array]
  | [op: RedoKind.NodeDeleted, slot: number]
  | [op: RedoKind.EdgeDeleted, slot: number]
  /** A change of the index catalog (src/index/runtime.ts CatalogChange). */
  | [op: RedoKind.Catalog, change: unknown];

export const enum RedoKind { AddNode = 0, AddEdge = 1, NodeVersion = 2, EdgeVersion = 3, NodeDeleted = 4, EdgeDeleted = 5, Catalog = 6 }

/** How a write batch ended. */
export type BatchOutcome = 'committed' | 'rolled-back' | 'empty';

/**
 * The writer's index runtime (src/index/runtime.ts), seen from the store: it keeps index
 * entries in step with every element change of a batch and takes part in the batch's undo
 * and redo (joinBatch). Registered by the index module, so the store does not import it.
 */
export interface IndexHooks {
  watchesNode(label: number): boolean;
  watchesEdge(label: number): boolean;
  /** Element `slot` went from (oldLabel, oldRecord) to (newLabel, newRecord); label -1 = absent. Throws to fail the batch. */
  elementChanged(edge: boolean, slot: number, oldLabel: number, oldRecord: PropertyRecord | null, newLabel: number, newRecord: PropertyRecord | null): void;
  /** Before the open batch is logged and committed: do what can fail (throws to fail the batch). */
  prepareCommit(): void;
  /** The batch committed, rolled back, or ended empty. Never fails a committed batch. */
  settled(outcome: BatchOutcome): void;
  /** Replay a logged catalog change. */
  replayCatalog(change: unknown): void;
  /** The catalog for a snapshot, and back. */
  exportCatalog(): Uint8Array;
  /** The vector and text partitions of the catalog exportCatalog() just gave, in the order it names them (between batches). */
  partitionsAtCut(): PartitionsAtCut;
  /** The snapshot's `vectors` and `texts` sections split per partition (null: the snapshot has none). */
  restoreCatalog(bytes: Uint8Array, partitions: { vectors: Uint8Array[] | null; texts: Uint8Array[] | null }): void;
}

let indexHooksFactory: ((store: Store) => IndexHooks) | null = null;

/** Called once by the index module: every writer-side store gets an index runtime. */
export function registerIndexHooks(factory: (store: Store) => IndexHooks): void {
  indexHooksFactory = factory;
}

/** Everything a committed batch changed: enough to replay it on a copy of the store. */
export interface RedoBatch {
  epoch: number;
  nodeSlots: number;
  edgeSlots: number;
  /** Dictionary entries added by the batch, as [id, name]. */
  names: [number, string][];
  ops: RedoOp[];
}

// Every undo entry is recorded BEFORE the change it undoes, and undoing it is correct
// whether the change was made, partly made (a failing allocation half-way) or not at all.
type Undo =
  | { kind: 'node-created' | 'node-deleted' | 'edge-deleted'; slot: number }
  | { kind: 'edge-created'; slot: number; src: number; dst: number }
  | { kind: 'node-version'; slot: number; props: number; label: number }
  | { kind: 'edge-version'; slot: number; props: number }
  /** A participant of the batch (index runtime): its own undo. */
  | { kind: 'joined'; undo: () => void };

const missingEntry = (edge: number, node: number) =>
  new SvcError('internal_error', `internal error: edge ${edge} is missing from node ${node}'s adjacency`);

const redoMismatch = (batch: RedoBatch | null, what: string) =>
  new SvcError('storage_error', `storage error: redo${batch === null ? '' : ` of epoch ${batch.epoch}`} does not fit the store: ${what}`);

export class Store {
  readonly shared: StoreShared;
  readonly meta: Uint32Array;
  // Fixed-length views, re-made when a buffer grew (syncViews): on Node 20 indexing a
  // length-tracking view of a growable SharedArrayBuffer costs ~25 ns against ~2 ns for a
  // fixed-length one (measured, docs/architecture.md §3).
  nodes: Uint32Array;
  edges: Uint32Array;
  readonly topology: Topology;
  heap: Uint8Array;
  private heapWords: Uint32Array;
  readonly names: Dictionary;
  /** The vector and text indexes' memories, attached on first use (most stores have neither index). */
  private vectors: VectorMemory | null = null;
  private texts: TextMemory | null = null;
  /**
   * Decoded records by heap offset, direct-mapped (a record takes the slot its offset hashes
   * to and replaces the one there): a miss costs the decode and two stores, never a rehash
   * or a clear of the whole cache, which under random access cost more than the hits saved.
   */
  private readonly recordCacheAt = new Uint32Array(limits.recordCacheEntriesMax);
  /**
   * The epoch of each cached version: the space of a version no read can reach is reused
   * (version-reuse.ts), always by a version of a later epoch, so offset and epoch together
   * name one version.
   */
  private readonly recordCacheEpochs = new Uint32Array(limits.recordCacheEntriesMax);
  private readonly recordCacheRecords: (PropertyRecord | null)[] = new Array<PropertyRecord | null>(limits.recordCacheEntriesMax).fill(null);
  private readonly recordCacheLengths = new Uint32Array(limits.recordCacheEntriesMax);
  /** Per slot, the offset of the last record that missed there. */
  private readonly recordCacheMissed = new Uint32Array(limits.recordCacheEntriesMax);
  /** Misses in a row of recordCacheMissed's record on each slot (saturates at the admission count). */
  private readonly recordCacheMisses = new Uint8Array(limits.recordCacheEntriesMax);
  /** Epochs of the cuts taken and not released yet (snapshot exports that may be running). */
  private readonly heldCuts: number[] = [];
  /** Encoded bytes of the records in recordCache (their decoded form is about as large). */
  private recordCacheBytes = 0;
  /** Writer only: the epoch being written, or 0 outside a batch. */
  private pending = 0;
  /** Write batches begun on this store (writer): tells a caller whether a request opened one. */
  private writeBatches = 0;
  /** The slot counters when the open batch began: a batch that took IDs changed something. */
  private batchNodeSlots = 0;
  private batchEdgeSlots = 0;
  private readonly undo: Undo[] = [];
  /** When set (disk storage), every change of the open batch is also recorded for the WAL. */
  private redo: RedoOp[] | null = null;
  /**
   * Dictionary entries covered by the redo of committed batches. Names are never rolled
   * back (a failed batch keeps the ones it interned), so every redo carries the names from
   * here on: whatever a committed batch refers to is in its own redo or an earlier one.
   */
  private namesLogged = 0;
  captureRedo = false;
  /**
   * Writer only: commit() also publishes (memory storage, replay). Durable storage turns
   * this off and calls publish() once a batch is durable.
   */
  publishOnCommit = true;
  /** Writer-side stores only: the index runtime (null on readers). */
  indexes: IndexHooks | null = null;
  /** Writer-side stores only: reuse of the heap's unreachable versions (null on readers). */
  private readonly versionReuse: VersionReuse | null;

  /**
   * This store grows the buffers (the writer's, created or loaded here): its views are
   * re-made the moment it grows one (ensure), so a read needs no check. Stores attached
   * on other threads check at every beginRead.
   */
  private readonly grower: boolean;

  private constructor(shared: StoreShared, grower: boolean) {
    this.shared = shared;
    this.grower = grower;
    this.meta = new Uint32Array(shared.meta);
    this.nodes = new Uint32Array(shared.nodes, 0, shared.nodes.byteLength >>> 2);
    this.edges = new Uint32Array(shared.edges, 0, shared.edges.byteLength >>> 2);
    this.topology = Topology.attach(shared.topology);
    this.heap = new Uint8Array(shared.heap, 0, shared.heap.byteLength);
    this.heapWords = new Uint32Array(shared.heap, 0, shared.heap.byteLength >>> 2);
    this.names = new Dictionary(shared.names);
    this.versionReuse = grower
      ? new VersionReuse(this.topology, (ptr) => versionWordsOf(this.heapWords[(ptr >>> 2) + V_LENGTH]!), () => this.oldestHeldCut())
      : null;
    // A loaded store's heap holds no reclaimable space (a snapshot keeps visible versions only).
    if (grower) this.meta[M_HEAP_RECLAIMABLE] = 0;
  }

  /** The vector indexes' memory (src/vector/memory.ts), on any thread. */
  vectorMemory(): VectorMemory {
    return this.vectors ??= VectorMemory.attach(this.shared.vectors);
  }

  /** This thread's reader slot in the text memory, -1 while it has none (reader-pool.ts frees a gone thread's). */
  get textReaderSlot(): number {
    return this.texts?.readerSlotIndex ?? -1;
  }

  /** The text indexes' memory (src/text/memory.ts), on any thread. */
  textMemory(): TextMemory {
    return this.texts ??= TextMemory.attach(this.shared.texts);
  }

  /** Writer side: a store over `shared` with new, empty vector and text memories. */
  private static withSearchMemories(shared: Omit<StoreShared, 'vectors' | 'texts'>): Store {
    const vectors = VectorMemory.create(), texts = TextMemory.create();
    const store = new Store({ ...shared, vectors: vectors.memory, texts: texts.shared }, true);
    store.vectors = vectors;
    store.texts = texts;
    return store;
  }

  /**
   * The snapshot of `cut` was written (or given up): what its export reads may go. Every
   * cut() must be released once, by whoever took it.
   */
  releaseCut(cut: StoreCut): void {
    const at = this.heldCuts.indexOf(cut.epoch);
    if (at < 0) throw new SvcError('internal_error', `internal error: release of a cut at epoch ${cut.epoch} that is not held`);
    this.heldCuts.splice(at, 1);
  }

  /** The epoch of the oldest cut whose export may still run (Infinity: none). */
  oldestHeldCut(): number {
    return this.heldCuts.length === 0 ? Infinity : Math.min(...this.heldCuts);
  }

  /** Writer side: allocate a fresh empty store. */
  static create(): Store {
    const shared: Omit<StoreShared, 'vectors' | 'texts'> = {
      meta: new SharedArrayBuffer(META_BYTES),
      nodes: sharedBuffer(1 << 16, limits.nodesMax * NODE_WORDS * 4),
      edges: sharedBuffer(1 << 16, limits.edgesMax * EDGE_WORDS * 4),
      topology: Topology.create().memory,
      heap: sharedBuffer(1 << 16, limits.propertyHeapBytesMax + 4096),
      names: new Dictionary().shared,
    };
    const store = Store.withSearchMemories(shared);
    // Epoch 0 is "never": created = 0 marks a slot that is not (or no longer) a live element.
    Atomics.store(store.meta, M_EPOCH, 1);
    Atomics.store(store.meta, M_VISIBLE, 1);
    store.meta[M_HEAP_USED] = HEAP_HEADER_BYTES; // heap pointer 0 means "no record"
    store.indexes = indexHooksFactory?.(store) ?? null;
    return store;
  }

  /** Reader side: views over a store created elsewhere. */
  static attach(shared: StoreShared): Store {
    return new Store(shared, false);
  }

  /** Writer side: a store over buffers a snapshot loader filled and checked (snapshot-sections.ts). */
  static loaded(shared: Omit<StoreShared, 'vectors' | 'texts'>, catalog: Uint8Array | null = null, vectors: Uint8Array | null = null, texts: Uint8Array | null = null): Store {
    const store = Store.withSearchMemories(shared);
    // The snapshot carries the whole dictionary, so redo from here on needs no older name.
    store.namesLogged = store.names.size();
    store.indexes = indexHooksFactory?.(store) ?? null;
    if (catalog !== null) store.restoreIndexes(catalog, vectors, texts);
    return store;
  }

  /**
   * The counters a snapshot at the committed epoch needs, so that another thread can read
   * it from the live buffers (sectionsAt) while this one goes on. Writer thread, between batches.
   */
  cut(): StoreCut {
    if (this.pending !== 0) throw new SvcError('internal_error', 'internal error: snapshot cut inside a write batch');
    // Held until releaseCut: the index runtime keeps what an export as of this epoch reads.
    this.heldCuts.push(this.committedEpoch());
    return {
      epoch: this.committedEpoch(), nodeSlots: this.nodeSlots(), edgeSlots: this.edgeSlots(), heapUsed: this.meta[M_HEAP_USED]!,
      names: this.names.size(), indexes: this.indexes?.exportCatalog() ?? null, partitions: this.indexes?.partitionsAtCut() ?? { vectors: [], texts: [] },
    };
  }

  /**
   * The used bytes of every buffer, for a snapshot. Writer thread, between batches: the
   * copies are consistent because only this thread writes.
   */
  exportSections(): Map<string, Uint8Array> {
    if (this.pending !== 0) throw new SvcError('internal_error', 'internal error: snapshot inside a write batch');
    const copy = (sab: SharedArrayBuffer, bytes: number) => new Uint8Array(sab, 0, bytes).slice();
    const sections = new Map<string, Uint8Array>([
      ['meta', copy(this.shared.meta, this.shared.meta.byteLength)],
      ['nodes', copy(this.shared.nodes, this.nodeSlots() * NODE_WORDS * 4)],
      ['edges', copy(this.shared.edges, this.edgeSlots() * EDGE_WORDS * 4)],
      ['topology', this.topology.exportBytes()],
      ['heap', copy(this.shared.heap, this.meta[M_HEAP_USED]!)],
    ]);
    for (const [name, bytes] of this.names.exportSections()) sections.set(`names.${name}`, bytes);
    if (this.indexes !== null) {
      sections.set('indexes', this.indexes.exportCatalog());
      const { vectors, texts } = this.indexes.partitionsAtCut();
      if (vectors.length > 0) sections.set('vectors', Buffer.concat(vectorSectionChunks(this.vectorMemory(), vectors, this.committedEpoch())));
      if (texts.length > 0) sections.set('texts', Buffer.concat(textSectionChunks(this.textMemory(), texts, this.committedEpoch())));
    }
    return sections;
  }

  /** A writer store holding exactly the sections of a snapshot. */
  static fromSections(sections: Map<string, Uint8Array>): Store {
    const section = (name: string): Uint8Array => {
      const bytes = sections.get(name);
      if (bytes === undefined) throw new SvcError('storage_error', `storage error: snapshot lacks section \`${name}\``);
      return bytes;
    };
    const fill = (bytes: Uint8Array, max: number) => {
      const sab = sharedBuffer(Math.max(1 << 16, bytes.byteLength), max);
      new Uint8Array(sab).set(bytes);
      return sab;
    };
    const meta = new SharedArrayBuffer(64);
    new Uint8Array(meta).set(section('meta'));
    const shared: Omit<StoreShared, 'vectors' | 'texts'> = {
      meta,
      nodes: fill(section('nodes'), limits.nodesMax * NODE_WORDS * 4),
      edges: fill(section('edges'), limits.edgesMax * EDGE_WORDS * 4),
      topology: Topology.fromBytes(section('topology')).memory,
      heap: fill(section('heap'), limits.propertyHeapBytesMax + 4096),
      names: Dictionary.sharedFromSections(section('names.meta'), section('names.ends'), section('names.bytes')),
    };
    const store = Store.withSearchMemories(shared);
    // The snapshot carries the whole dictionary, so redo from here on needs no older name.
    store.namesLogged = store.names.size();
    // A loaded snapshot holds only committed (durable) batches: all of them are visible.
    Atomics.store(store.meta, M_VISIBLE, store.committedEpoch());
    store.indexes = indexHooksFactory?.(store) ?? null;
    const catalog = sections.get('indexes');
    if (catalog !== undefined) store.restoreIndexes(catalog, sections.get('vectors') ?? null, sections.get('texts') ?? null);
    return store;
  }

  // ------------------------------------------------------------ reading

  /** The last committed epoch (the writer's own view; readers see visibleEpoch()). */
  committedEpoch(): number {
    return Atomics.load(this.meta, M_EPOCH);
  }

  /** The newest epoch readers may see: committed and, on durable storage, durable. */
  visibleEpoch(): number {
    return Atomics.load(this.meta, M_VISIBLE);
  }

  /**
   * Start a read: the snapshot epoch, with views covering everything published up to it
   * (the writer grows a buffer before it writes what a later epoch publishes).
   */
  beginRead(): number {
    // Announced before any block offset is read: superseded blocks stay until endRead().
    this.topology.beginRead();
    const at = Atomics.load(this.meta, M_VISIBLE);
    if (!this.grower) this.syncViews();
    return at;
  }

  /** The read begun by beginRead() ended: its superseded blocks may be reused. */
  endRead(): void {
    this.topology.endRead();
  }

  private syncViews(): void {
    const { nodes, edges, heap } = this.shared;
    if (this.nodes.byteLength !== nodes.byteLength) this.nodes = new Uint32Array(nodes, 0, nodes.byteLength >>> 2);
    if (this.edges.byteLength !== edges.byteLength) this.edges = new Uint32Array(edges, 0, edges.byteLength >>> 2);
    if (this.heap.byteLength !== heap.byteLength) {
      this.heap = new Uint8Array(heap, 0, heap.byteLength);
      this.heapWords = new Uint32Array(heap, 0, heap.byteLength >>> 2);
    }
  }

  /** Grow a buffer of this store (writer) and re-make the views. */
  private ensure(buffer: SharedArrayBuffer, bytesNeeded: number, what: string): void {
    if (bytesNeeded <= buffer.byteLength) return;
    ensureBytes(buffer, bytesNeeded, what);
    this.syncViews();
  }

  /** Node slots ever allocated (an upper bound on node IDs + 1). */
  nodeSlots(): number {
    return Atomics.load(this.meta, M_NODE_SLOTS);
  }

  edgeSlots(): number {
    return Atomics.load(this.meta, M_EDGE_SLOTS);
  }

  /**
   * Bytes of the property heap in use (limits.propertyHeapBytesMax): its extent, including
   * the space of unreachable versions it will reuse (propertyHeapReclaimableBytes); a
   * snapshot keeps only the visible versions (snapshot-sections.ts).
   */
  propertyHeapBytes(): number {
    return Atomics.load(this.meta, M_HEAP_USED);
  }

  /**
   * Bytes below propertyHeapBytes() the writer reuses before the heap grows: versions no
   * read can reach any more, free or waiting for the reads that could (version-reuse.ts),
   * as of the writer's last batch or publish.
   */
  propertyHeapReclaimableBytes(): number {
    return Atomics.load(this.meta, M_HEAP_RECLAIMABLE);
  }

  /** Bytes of the adjacency memory in use (limits.topologyWordsMax words), free blocks included. */
  adjacencyHeapBytes(): number {
    return this.topology.heapUsed() * 4;
  }

  nodeVisible(slot: number, at: number): boolean {
    const base = slot * NODE_WORDS;
    const created = this.nodes[base + N_CREATED]!;
    const deleted = this.nodes[base + N_DELETED]!;
    return created !== 0 && created <= at && (deleted === 0 || at < deleted);
  }

  edgeVisible(slot: number, at: number): boolean {
    const base = slot * EDGE_WORDS;
    const created = this.edges[base + E_CREATED]!;
    const deleted = this.edges[base + E_DELETED]!;
    return created !== 0 && created <= at && (deleted === 0 || at < deleted);
  }

  /** Whether node `id` (any number, may be out of range) exists at `at`. */
  nodeExists(id: number, at: number): boolean {
    return Number.isInteger(id) && id >= 0 && id < this.nodeSlots() && this.nodeVisible(id, at);
  }

  edgeExists(id: number, at: number): boolean {
    return Number.isInteger(id) && id >= 0 && id < this.edgeSlots() && this.edgeVisible(id, at);
  }

  /**
   * The version visible at `at` in the chain from `ptr`, which the caller Atomics.loaded
   * (the header behind a pointer is written before the pointer is published).
   */
  private versionAt(ptr: number, at: number): number {
    for (; ptr !== 0; ptr = this.heapWords[(ptr >>> 2) + V_PREV]!) {
      // Versions newer than this reader's views (written after beginRead) may lie beyond
      // them, anywhere in the chain: a version in reused space points to one appended later.
      if (ptr + HEAP_HEADER_BYTES > this.heap.length) this.syncViews();
      if (this.heapWords[(ptr >>> 2) + V_EPOCH]! <= at) break;
    }
    return ptr;
  }

  nodeLabel(slot: number, at: number): number {
    const base = slot * NODE_WORDS;
    // N_LABEL first (acquire): its labelSince is then at least the one stored with it.
    const label = Atomics.load(this.nodes, base + N_LABEL);
    if (this.nodes[base + N_LABEL_SINCE]! <= at) return label;
    // Relabelled after `at` (or by a batch that rolled back): the label of the version visible then.
    const ptr = this.versionAt(Atomics.load(this.nodes, base + N_PROPS), at);
    return this.heapWords[(ptr >>> 2) + V_LABEL]!;
  }

  edgeLabel(slot: number): number {
    return this.edges[slot * EDGE_WORDS + E_LABEL]!;
  }

  edgeSource(slot: number): number {
    return this.edges[slot * EDGE_WORDS + E_SRC]!;
  }

  edgeTarget(slot: number): number {
    return this.edges[slot * EDGE_WORDS + E_DST]!;
  }

  nodeRecord(slot: number, at: number): PropertyRecord {
    return this.recordAt(this.newestVersion(false, slot), at);
  }

  edgeRecord(slot: number, at: number): PropertyRecord {
    return this.recordAt(this.newestVersion(true, slot), at);
  }

  /**
   * One property (`keyId`) of a node's or edge's record at `at`, or undefined: for scans
   * that read one property of each element once (index builds). Reads it out of the
   * encoded record in place; only a value that is not a scalar or a short string decodes
   * the record (uncached), so a build allocates nothing per element but the value.
   */
  propertyOnce(edge: boolean, slot: number, at: number, keyId: number): Value | undefined {
    const newest = this.newestVersion(edge, slot);
    const ptr = this.versionAt(newest, at);
    if (ptr === 0) return undefined;
    const length = this.recordLength(ptr);
    const start = ptr + HEAP_HEADER_BYTES;
    const value = propertyOfEncoded(this.heap, start, start + length, keyId);
    return value !== DECODE_WHOLE ? value : recordGet(this.recordAt(newest, at, false), keyId);
  }

  /**
   * A node's or edge's record at `at` as response JSON, read in place (recordJsonInPlace):
   * its key IDs into `keys`, each value's JSON into `json`; the count, or -1 when a value
   * needs the decoder (the caller then renders the decoded record). Skips the record cache:
   * rendering in place costs about what a hit does, and a row read once would churn it.
   */
  recordJson(edge: boolean, slot: number, at: number, keys: number[], json: string[]): number {
    const newest = this.newestVersion(edge, slot);
    const ptr = this.versionAt(newest, at);
    if (ptr === 0) return 0;
    const length = this.recordLength(ptr);
    const start = ptr + HEAP_HEADER_BYTES;
    return recordJsonInPlace(this.heap, start, start + length, keys, json);
  }

  /**
   * A node's or edge's whole record at `at`, not added to the record cache: for scans that
   * read several properties of each element once (vector and text index builds: the value
   * and the tenant), which would only churn the cache.
   */
  recordOnce(edge: boolean, slot: number, at: number): PropertyRecord {
    const newest = this.newestVersion(edge, slot);
    return this.recordAt(newest, at, false);
  }

  /** The newest version of a node's or edge's record (0: none), as its slot publishes it. */
  private newestVersion(edge: boolean, slot: number): number {
    return edge ? Atomics.load(this.edges, slot * EDGE_WORDS + E_PROPS) : Atomics.load(this.nodes, slot * NODE_WORDS + N_PROPS);
  }

  /**
   * The byte length of the record version at `ptr`, with the views made to cover its bytes
   * (the header may fit the views while the record bytes do not yet: a read would cut them).
   */
  private recordLength(ptr: number): number {
    const length = this.heapWords[(ptr >>> 2) + V_LENGTH]!;
    if (ptr + HEAP_HEADER_BYTES + length > this.heap.length) this.syncViews();
    return length;
  }

  /** The record visible at `at` in the chain from `newest`; `remember`: keep it in the record cache. */
  private recordAt(newest: number, at: number, remember = true): PropertyRecord {
    const ptr = this.versionAt(newest, at);
    if (ptr === 0) return emptyRecord;
    const slot = Math.imul(ptr, 0x9e3779b1) >>> RECORD_CACHE_SHIFT;
    const epoch = this.heapWords[(ptr >>> 2) + V_EPOCH]!;
    if (this.recordCacheAt[slot] === ptr && this.recordCacheEpochs[slot] === epoch) return this.recordCacheRecords[slot]!;
    const length = this.recordLength(ptr);
    // A decode is work of the running query: counted as nothing, an inline read sorting 12
    // nodes by 1 M-element arrays decoded them on the HTTP thread for 6 s.
    guard.stepLength(length);
    // In place: decodeRecordInPlace copies out of shared memory before it hands a record
    // to msgpackr, whose native string extractor crashes the process on
    // SharedArrayBuffer-backed input (seen on Node 20, msgpackr 2.1.3).
    const start = ptr + HEAP_HEADER_BYTES;
    const record = decodeRecordInPlace(this.heap, start, start + length);
    if (!remember) return record;
    // Admitted at its RECORD_CACHE_ADMIT_MISSES-th miss in a row on its slot: a record read
    // once (random access over a large graph) would only displace one read again, and
    // kept records that die later are promoted to the old generation, whose collections
    // are the server's longest pauses. At the second miss, uniform reads over 100k nodes
    // (~6 records per slot) admitted a record every ~6 misses: ~24 bytes promoted per
    // request and a full collection every few seconds under load (docs/benchmarks.md).
    if (this.recordCacheMissed[slot] !== ptr) {
      this.recordCacheMissed[slot] = ptr;
      this.recordCacheMisses[slot] = 1;
      return record;
    }
    if (++this.recordCacheMisses[slot]! < RECORD_CACHE_ADMIT_MISSES) return record;
    const bytes = this.recordCacheBytes - this.recordCacheLengths[slot]! + length;
    if (bytes <= limits.recordCacheBytesMax) {
      this.recordCacheAt[slot] = ptr;
      this.recordCacheEpochs[slot] = epoch;
      this.recordCacheRecords[slot] = record;
      this.recordCacheLengths[slot] = length;
      this.recordCacheBytes = bytes;
    }
    return record;
  }

  /** Forget every cached record (writer, after a rollback). */
  private clearRecordCache(): void {
    this.recordCacheAt.fill(0);
    this.recordCacheRecords.fill(null);
    this.recordCacheLengths.fill(0);
    this.recordCacheBytes = 0;
  }

  // ------------------------------------------------------------ writing (writer thread only)

  /** Start a write batch; returns the epoch its changes carry (and reads it uses). */
  beginWrite(): number {
    if (this.pending !== 0) throw new SvcError('internal_error', 'internal error: nested write batch');
    this.syncViews();
    const committed = this.committedEpoch();
    if (committed >= limits.epochMax) throw new SvcError('storage_error', 'storage error: epoch space exhausted');
    this.pending = committed + 1;
    this.writeBatches++;
    this.batchNodeSlots = this.nodeSlots();
    this.batchEdgeSlots = this.edgeSlots();
    this.undo.length = 0;
    this.versionReuse!.beginBatch(this.meta[M_HEAP_USED]!);
    this.redo = this.captureRedo ? [] : null;
    return this.pending;
  }

  /** The changes of the open batch, for the WAL (null unless captureRedo). Call before commit. */
  pendingRedo(): RedoBatch | null {
    this.assertWriting();
    if (this.redo === null) return null;
    const names: [number, string][] = [];
    for (let id = this.namesLogged; id < this.names.size(); id++) names.push([id, this.names.nameOf(id)]);
    return { epoch: this.pending, nodeSlots: this.nodeSlots(), edgeSlots: this.edgeSlots(), names, ops: this.redo };
  }

  /**
   * Commit the batch: later batches build on it. With publishOnCommit every reader that
   * starts after this sees all of it; otherwise it waits for publish().
   */
  commit(): void {
    this.assertWriting();
    // Epochs only grow, by one per batch: everything readers and the WAL rely on.
    const committed = Atomics.load(this.meta, M_EPOCH);
    if (this.pending !== committed + 1) throw new SvcError('internal_error', `internal error: commit of epoch ${this.pending} after epoch ${committed}`);
    Atomics.store(this.meta, M_EPOCH, this.pending);
    if (this.publishOnCommit) Atomics.store(this.meta, M_VISIBLE, this.pending);
    this.versionReuse!.committed(this.pending, this.visibleEpoch());
    this.showReclaimable();
    // Its redo (if one was taken) carried every name up to here.
    this.namesLogged = this.names.size();
    this.pending = 0;
    this.endBatch();
    this.redo = null;
    this.indexes?.settled('committed');
  }

  /**
   * Before the open batch is logged and committed (exec/request.ts logPending, replay): the
   * work of its commit that can fail, done while the batch can still roll back.
   */
  prepareCommit(): void {
    this.assertWriting();
    this.indexes?.prepareCommit();
  }

  /** Make every committed epoch up to `epoch` visible to readers (it is durable now). */
  publish(epoch: number): void {
    const committed = this.committedEpoch();
    if (epoch > committed) throw new SvcError('internal_error', `internal error: publish of epoch ${epoch} beyond the committed ${committed}`);
    if (epoch > this.visibleEpoch()) Atomics.store(this.meta, M_VISIBLE, epoch);
    this.versionReuse!.published(epoch);
    // What the published batches superseded is retired now: reclaimable.
    this.showReclaimable();
  }

  /** Publish the heap's reclaimable bytes (propertyHeapReclaimableBytes) after the writer retired versions. */
  private showReclaimable(): void {
    Atomics.store(this.meta, M_HEAP_RECLAIMABLE, this.versionReuse!.reclaimableBytes());
  }

  /** Undo every change of the batch, newest first. Allocated IDs stay consumed. */
  rollback(): void {
    this.assertWriting();
    for (let i = this.undo.length - 1; i >= 0; i--) {
      const u = this.undo[i]!;
      switch (u.kind) {
        case 'node-created': this.nodes[u.slot * NODE_WORDS + N_CREATED] = 0; break;
        case 'edge-created': {
          this.edges[u.slot * EDGE_WORDS + E_CREATED] = 0;
          // Each only if that append was made (it is then the newest entry of its block).
          this.topology.unappend(u.src, DIR_OUT, u.slot);
          this.topology.unappend(u.dst, DIR_IN, u.slot);
          break;
        }
        // Deletions are only of elements live in this batch: 0 is the word before, set or not.
        case 'node-deleted': this.nodes[u.slot * NODE_WORDS + N_DELETED] = 0; break;
        case 'edge-deleted': {
          this.edges[u.slot * EDGE_WORDS + E_DELETED] = 0;
          this.topology.markDeleted(this.edgeSource(u.slot), DIR_OUT, u.slot, 0);
          this.topology.markDeleted(this.edgeTarget(u.slot), DIR_IN, u.slot, 0);
          break;
        }
        case 'node-version': {
          // N_LABEL_SINCE stays as it is (see the header on why it is never lowered).
          const base = u.slot * NODE_WORDS;
          Atomics.store(this.nodes, base + N_PROPS, u.props);
          Atomics.store(this.nodes, base + N_LABEL, u.label);
          break;
        }
        case 'edge-version': Atomics.store(this.edges, u.slot * EDGE_WORDS + E_PROPS, u.props); break;
        case 'joined': u.undo(); break;
      }
    }
    this.versionReuse!.rolledBack(this.meta[M_HEAP_USED]!, this.pending);
    this.showReclaimable();
    // This thread may have cached a version of the batch, whose space a batch of the same
    // epoch may reuse: offset and epoch would no longer name one version.
    this.clearRecordCache();
    this.pending = 0;
    this.endBatch();
    this.redo = null;
    this.indexes?.settled('rolled-back');
  }

  /**
   * Called after a batch of at least BULK_BATCH_CHANGES_MIN changes: the server's writer
   * thread trims its heap then (heap-trim.ts); an embedded store leaves its host's heap alone.
   */
  onBulkBatch: (() => void) | null = null;

  /**
   * Drop the batch's undo log (length 0 frees its backing store). A bulk batch left its
   * request's garbage behind (the parsed body, its rows): onBulkBatch.
   */
  private endBatch(): void {
    if (this.undo.length >= BULK_BATCH_CHANGES_MIN) this.onBulkBatch?.();
    this.undo.length = 0;
  }

  /** Whether the open batch changed nothing yet (no undo, no new name, no ID taken). */
  batchIsEmpty(): boolean {
    this.assertWriting();
    return this.undo.length === 0 && this.names.size() === this.namesLogged
      && this.nodeSlots() === this.batchNodeSlots && this.edgeSlots() === this.batchEdgeSlots;
  }

  /**
   * End the open batch, which changed nothing, without committing it: it takes no epoch and
   * logs nothing (epochs are a bound over the database's life, docs/limits.md epochMax).
   */
  endEmptyBatch(): void {
    if (!this.batchIsEmpty()) throw new SvcError('internal_error', 'internal error: a batch with changes ended as empty');
    this.pending = 0;
    this.endBatch();
    this.redo = null;
    this.indexes?.settled('empty');
  }

  /** Write batches begun so far (writer): whether a request read at the newest committed epoch. */
  writeBatchesBegun(): number {
    return this.writeBatches;
  }

  /** The epoch of the open batch (writer; 0 outside a batch). */
  pendingEpoch(): number {
    return this.pending;
  }

  /**
   * A participant joins the open batch: `undo` runs if it rolls back (newest first, with
   * the store's own undo), and `changes` (if any) go into its redo as Catalog ops.
   */
  joinBatch(undo: () => void, changes: readonly unknown[] | null): void {
    this.assertWriting();
    this.undo.push({ kind: 'joined', undo });
    if (changes !== null && this.redo !== null) for (const change of changes) this.redo.push([RedoKind.Catalog, change]);
  }

  /** A snapshot's index catalog (writer-side stores). */
  private restoreIndexes(catalog: Uint8Array, vectors: Uint8Array | null, texts: Uint8Array | null): void {
    if (this.indexes === null) throw new SvcError('storage_error', 'storage error: the snapshot holds indexes but this store has no index runtime');
    this.indexes.restoreCatalog(catalog, {
      vectors: vectors === null ? null : splitPartitionSection('vectors', vectors),
      texts: texts === null ? null : splitPartitionSection('texts', texts),
    });
  }

  private assertWriting(): void {
    if (this.pending === 0) throw new SvcError('internal_error', 'internal error: no write batch open');
  }

  private appendVersion(prev: number, label: number, bytes: Uint8Array): number {
    if (bytes.byteLength > limits.propertyRecordBytesMax) {
      throw new SvcError('invalid_query', `db error: Query error: property record of ${bytes.byteLength} bytes exceeds ${limits.propertyRecordBytesMax}`);
    }
    const words = versionWordsOf(bytes.byteLength);
    let ptr = this.versionReuse!.take(words);
    if (ptr < 0) {
      ptr = this.meta[M_HEAP_USED]!;
      const end = ptr + words * 4;
      if (end > limits.propertyHeapBytesMax) throw new SvcError('storage_error', 'storage error: property heap is full');
      this.ensure(this.shared.heap, end, 'property heap');
      this.meta[M_HEAP_USED] = end;
    }
    const w = ptr >>> 2;
    // The last word's padding as in fresh heap: reused space holds an older version's bytes.
    this.heapWords[w + words - 1] = 0;
    this.heapWords[w + V_PREV] = prev;
    this.heapWords[w + V_EPOCH] = this.pending;
    this.heapWords[w + V_LABEL] = label;
    this.heapWords[w + V_LENGTH] = bytes.byteLength;
    this.heap.set(bytes, ptr + HEAP_HEADER_BYTES);
    return ptr;
  }

  addNode(label: number, record: PropertyRecord): number {
    return this.addNodeEncoded(this.meta[M_NODE_SLOTS]!, label, encodeRecord(record), record);
  }

  private addNodeEncoded(slot: number, label: number, bytes: Uint8Array, record: PropertyRecord | null): number {
    this.assertWriting();
    if (slot >= limits.nodesMax) throw new SvcError('storage_error', `storage error: node limit ${limits.nodesMax} reached`);
    this.ensure(this.shared.nodes, (slot + 1) * NODE_WORDS * 4, 'node table');
    const base = slot * NODE_WORDS;
    this.undo.push({ kind: 'node-created', slot });
    // A new slot: no reader looks at it before `created` is published with the epoch.
    this.nodes.fill(0, base, base + NODE_WORDS);
    this.nodes[base + N_LABEL] = label;
    this.nodes[base + N_LABEL_SINCE] = this.pending;
    this.nodes[base + N_PROPS] = this.appendVersion(0, label, bytes);
    this.topology.addNode(slot);
    this.nodes[base + N_CREATED] = this.pending;
    if (slot + 1 > this.meta[M_NODE_SLOTS]!) Atomics.store(this.meta, M_NODE_SLOTS, slot + 1);
    this.redo?.push([RedoKind.AddNode, slot, label, bytes.slice()]);
    if (this.indexes?.watchesNode(label)) this.indexes.elementChanged(false, slot, -1, null, label, record ?? decodeRecord(bytes));
    return slot;
  }

  /** Reserve an edge ID without creating the edge (IDs of failed add_e stay consumed). */
  reserveEdgeSlot(): number {
    return this.reserveEdgeSlotAt(this.meta[M_EDGE_SLOTS]!);
  }

  private reserveEdgeSlotAt(slot: number): number {
    if (slot >= limits.edgesMax) throw new SvcError('storage_error', `storage error: edge limit ${limits.edgesMax} reached`);
    this.ensure(this.shared.edges, (slot + 1) * EDGE_WORDS * 4, 'edge table');
    this.edges.fill(0, slot * EDGE_WORDS, (slot + 1) * EDGE_WORDS);
    if (slot + 1 > this.meta[M_EDGE_SLOTS]!) Atomics.store(this.meta, M_EDGE_SLOTS, slot + 1);
    return slot;
  }

  /** Create edge `slot` (from reserveEdgeSlot) from `src` to `dst`. */
  addEdge(slot: number, label: number, src: number, dst: number, record: PropertyRecord): void {
    this.addEdgeEncoded(slot, label, src, dst, encodeRecord(record), record);
  }

  private addEdgeEncoded(slot: number, label: number, src: number, dst: number, bytes: Uint8Array, record: PropertyRecord | null): void {
    this.assertWriting();
    const base = slot * EDGE_WORDS;
    this.undo.push({ kind: 'edge-created', slot, src, dst });
    this.edges[base + E_LABEL] = label;
    this.edges[base + E_SRC] = src;
    this.edges[base + E_DST] = dst;
    // Property-less edges (the common case) keep no record: pointer 0 reads as empty.
    this.edges[base + E_PROPS] = bytes.byteLength === 0 ? 0 : this.appendVersion(0, label, bytes);
    this.edges[base + E_CREATED] = this.pending;
    this.topology.append(src, DIR_OUT, slot, dst, label, this.pending);
    this.topology.append(dst, DIR_IN, slot, src, label, this.pending);
    this.redo?.push([RedoKind.AddEdge, slot, label, src, dst, bytes.slice()]);
    if (this.indexes?.watchesEdge(label)) this.indexes.elementChanged(true, slot, -1, null, label, record ?? decodeRecord(bytes));
  }

  /** New property version of node `slot` (label unchanged). */
  setNodeRecord(slot: number, record: PropertyRecord): void {
    this.writeNodeVersion(slot, this.nodes[slot * NODE_WORDS + N_LABEL]!, encodeRecord(record), record);
  }

  relabelNode(slot: number, label: number): void {
    const record = this.nodeRecord(slot, this.pending);
    this.writeNodeVersion(slot, label, encodeRecord(record), record);
  }

  private writeNodeVersion(slot: number, label: number, bytes: Uint8Array, record: PropertyRecord | null): void {
    this.assertWriting();
    const base = slot * NODE_WORDS;
    const props = this.nodes[base + N_PROPS]!;
    const oldLabel = this.nodes[base + N_LABEL]!;
    const indexed = this.indexes !== null && (this.indexes.watchesNode(oldLabel) || this.indexes.watchesNode(label));
    const oldRecord = indexed ? this.nodeRecord(slot, this.pending) : null;
    this.undo.push({ kind: 'node-version', slot, props, label: this.nodes[base + N_LABEL]! });
    Atomics.store(this.nodes, base + N_PROPS, this.appendVersion(props, label, bytes));
    this.versionReuse!.supersede(props);
    if (label !== this.nodes[base + N_LABEL]) {
      // labelSince before the label it qualifies (see the header).
      this.nodes[base + N_LABEL_SINCE] = this.pending;
      Atomics.store(this.nodes, base + N_LABEL, label);
    }
    this.redo?.push([RedoKind.NodeVersion, slot, label, bytes.slice()]);
    if (indexed) this.indexes!.elementChanged(false, slot, oldLabel, oldRecord, label, record ?? decodeRecord(bytes));
  }

  setEdgeRecord(slot: number, record: PropertyRecord): void {
    this.writeEdgeVersion(slot, encodeRecord(record), record);
  }

  private writeEdgeVersion(slot: number, bytes: Uint8Array, record: PropertyRecord | null): void {
    this.assertWriting();
    const base = slot * EDGE_WORDS;
    const props = this.edges[base + E_PROPS]!;
    const label = this.edges[base + E_LABEL]!;
    const indexed = this.indexes?.watchesEdge(label) ?? false;
    const oldRecord = indexed ? this.edgeRecord(slot, this.pending) : null;
    this.undo.push({ kind: 'edge-version', slot, props });
    Atomics.store(this.edges, base + E_PROPS, this.appendVersion(props, this.edges[base + E_LABEL]!, bytes));
    this.versionReuse!.supersede(props);
    this.redo?.push([RedoKind.EdgeVersion, slot, bytes.slice()]);
    if (indexed) this.indexes!.elementChanged(true, slot, label, oldRecord, label, record ?? decodeRecord(bytes));
  }

  /** Delete a node visible in this batch, and every edge incident to it. */
  deleteNode(slot: number): void {
    this.assertWriting();
    const topo = this.topology, dir = topo.dir(slot);
    for (const which of [DIR_OUT, DIR_IN] as const) {
      const len = topo.length(dir, which), off = topo.entries(dir, which, len);
      for (let i = 0; i < len; i++) {
        const edge = topo.words[off + i * ADJ_WORDS]!;
        if (this.edgeVisible(edge, this.pending)) this.deleteEdge(edge);
      }
    }
    this.markNodeDeleted(slot);
  }

  private markNodeDeleted(slot: number): void {
    // A second deletion would log a redo op that cannot replay and retire the record twice.
    if (!this.nodeVisible(slot, this.pending)) throw new SvcError('internal_error', `internal error: deletion of node ${slot}, which is not visible`);
    const label = this.nodes[slot * NODE_WORDS + N_LABEL]!;
    const oldRecord = this.indexes?.watchesNode(label) ? this.nodeRecord(slot, this.pending) : null;
    this.undo.push({ kind: 'node-deleted', slot });
    this.nodes[slot * NODE_WORDS + N_DELETED] = this.pending;
    this.versionReuse!.supersede(this.nodes[slot * NODE_WORDS + N_PROPS]!);
    this.redo?.push([RedoKind.NodeDeleted, slot]);
    if (oldRecord !== null) this.indexes!.elementChanged(false, slot, label, oldRecord, -1, null);
  }

  /** Delete an edge visible in this batch: its table row and both adjacency entries. */
  deleteEdge(slot: number): void {
    this.assertWriting();
    // A second deletion would log a redo op that cannot replay and retire the record twice.
    if (!this.edgeVisible(slot, this.pending)) throw new SvcError('internal_error', `internal error: deletion of edge ${slot}, which is not visible`);
    const label = this.edges[slot * EDGE_WORDS + E_LABEL]!;
    const oldRecord = this.indexes?.watchesEdge(label) ? this.edgeRecord(slot, this.pending) : null;
    this.undo.push({ kind: 'edge-deleted', slot });
    this.edges[slot * EDGE_WORDS + E_DELETED] = this.pending;
    this.versionReuse!.supersede(this.edges[slot * EDGE_WORDS + E_PROPS]!);
    const src = this.edgeSource(slot), dst = this.edgeTarget(slot);
    if (!this.topology.markDeleted(src, DIR_OUT, slot, this.pending)) throw missingEntry(slot, src);
    if (!this.topology.markDeleted(dst, DIR_IN, slot, this.pending)) throw missingEntry(slot, dst);
    this.redo?.push([RedoKind.EdgeDeleted, slot]);
    if (oldRecord !== null) this.indexes!.elementChanged(true, slot, label, oldRecord, -1, null);
  }

  /**
   * Replay a batch recorded by pendingRedo() (recovery, replicas). Epochs must follow on. A
   * batch that does not fit this store (its names, slots or elements) is storage_error and
   * leaves the store as it was.
   */
  applyRedo(batch: RedoBatch): void {
    const epoch = this.beginWrite();
    try {
      if (epoch !== batch.epoch) throw new SvcError('internal_error', `internal error: redo batch for epoch ${batch.epoch} applied at epoch ${epoch}`);
      this.replayNames(batch);
      for (const op of batch.ops) this.replayOp(op);
      // IDs consumed by failed work inside the batch stay consumed after replay too.
      if (batch.nodeSlots > this.nodeSlots()) {
        this.ensure(this.shared.nodes, batch.nodeSlots * NODE_WORDS * 4, 'node table');
        Atomics.store(this.meta, M_NODE_SLOTS, batch.nodeSlots);
      }
      if (batch.edgeSlots > this.edgeSlots()) {
        this.ensure(this.shared.edges, batch.edgeSlots * EDGE_WORDS * 4, 'edge table');
        Atomics.store(this.meta, M_EDGE_SLOTS, batch.edgeSlots);
      }
      this.prepareCommit();
    } catch (err) {
      this.rollback();
      throw err;
    }
    this.commit();
  }

  /**
   * The batch's names: ids this store already has must hold the same name (a snapshot may
   * already hold names a failed batch interned), the rest must be the next new ids in order.
   */
  private replayNames(batch: RedoBatch): void {
    for (const [id, name] of batch.names) {
      const known = this.names.size();
      const fits = id < known ? this.names.nameOf(id) === name : id === known && this.names.idOf(name) < 0;
      if (!fits) throw redoMismatch(batch, `dictionary id ${id} (\`${name}\`) does not line up with the ${known} names replayed so far`);
      if (id === known) this.names.intern(name);
    }
  }

  private replayOp(op: RedoOp): void {
    const names = this.names.size();
    const checkLabel = (label: number) => {
      if (!(label >= 0 && label < names)) throw redoMismatch(null, `label id ${label} is not in the dictionary`);
    };
    const checkNode = (slot: number) => {
      if (!this.nodeExists(slot, this.pending)) throw redoMismatch(null, `node ${slot} does not exist`);
    };
    const checkEdge = (slot: number) => {
      if (!this.edgeExists(slot, this.pending)) throw redoMismatch(null, `edge ${slot} does not exist`);
    };
    switch (op[0]) {
      case RedoKind.AddNode:
        if (!(op[1] >= this.nodeSlots())) throw redoMismatch(null, `node slot ${op[1]} is already allocated`);
        checkLabel(op[2]);
        this.addNodeEncoded(op[1], op[2], op[3], null);
        break;
      case RedoKind.AddEdge:
        if (!(op[1] >= this.edgeSlots())) throw redoMismatch(null, `edge slot ${op[1]} is already allocated`);
        checkLabel(op[2]); checkNode(op[3]); checkNode(op[4]);
        this.reserveEdgeSlotAt(op[1]);
        this.addEdgeEncoded(op[1], op[2], op[3], op[4], op[5], null);
        break;
      case RedoKind.NodeVersion: checkNode(op[1]); checkLabel(op[2]); this.writeNodeVersion(op[1], op[2], op[3], null); break;
      case RedoKind.EdgeVersion: checkEdge(op[1]); this.writeEdgeVersion(op[1], op[2], null); break;
      case RedoKind.NodeDeleted: checkNode(op[1]); this.markNodeDeleted(op[1]); break;
      case RedoKind.EdgeDeleted:
        // Logs written before drop_edge_by_id dropped a repeated ID once hold the deletion
        // twice in one batch: the second is a no-op, not a mismatch.
        if (op[1] < this.edgeSlots() && this.edges[op[1] * EDGE_WORDS + E_DELETED] === this.pending) break;
        checkEdge(op[1]); this.deleteEdge(op[1]); break;
      case RedoKind.Catalog:
        if (this.indexes === null) throw redoMismatch(null, 'an index catalog change, but this store has no index runtime');
        this.indexes.replayCatalog(op[1]);
        break;
      default: throw redoMismatch(null, `unknown redo op kind ${String((op as unknown[])[0])}`);
    }
  }
}
