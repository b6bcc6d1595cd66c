// Snapshot sections read from the LIVE shared memory, as of one epoch, in bounded chunks,
// and the streaming loader that turns such sections back into a store.
//
// Export (sectionsAt): the writer takes a StoreCut between batches (Store.cut(), O(1)) and
// goes on committing; any thread then reads the store as it was at cut.epoch = E. That is
// possible because the writer never overwrites what a reader at E can see (store.ts,
// topology.ts): rows below cut.nodeSlots / cut.edgeSlots change only in their deleted
// word, label, labelSince and version pointer, always to values of epochs > E (or back,
// on rollback); the versions a reader at E can reach are not reused while the cut is held
// (version-reuse.ts), nor are those of later batches, through which the chain from a row's
// newest version leads to them; the dictionary is append-only below cut.names; adjacency
// entries visible at E keep their place and words (a relocation copies them). Each row is
// therefore rewritten as a reader at E sees it, each block is cut down to the entries
// visible at E, and the heap down to the one version each visible element has at E
// (HeapPlacement: a loaded store is read at E or later, so no reader can ask for an older
// version). The output is a function of the state at E alone: an export taken while the
// writer runs equals one taken after it stopped.
//
// Section layouts are the store's own buffer layouts (the loader writes chunks straight
// into the buffers it allocates), so the section names and bytes are those the snapshot
// always had: meta, nodes, edges, topology, heap, names.meta, names.ends, names.bytes.
// The topology section is a compacted memory image: header, then per directory chunk the
// tight blocks of its nodes (out, in) in node order followed by the chunk itself.
import { limits } from '../limits.js';
import { VectorMemory } from '../vector/memory.js';
import { textSectionChunks, vectorSectionChunks } from './partition-section.js';
import { TextMemory } from '../text/memory.js';
import { SvcError } from '../protocol/errors.js';
import { COUNT as NAMES_COUNT, Dictionary, NAMES_META_BYTES, type DictionaryShared } from './dictionary.js';
import { sharedBuffer } from './growable.js';
import {
  EDGE_WORDS, E_CREATED, E_DELETED, E_DST, E_LABEL, E_PROPS, E_SRC, HEAP_HEADER_BYTES, META_BYTES,
  M_EDGE_SLOTS, M_EPOCH, M_HEAP_USED, M_NODE_SLOTS, M_VISIBLE, NODE_WORDS, N_CREATED, N_DELETED, N_LABEL,
  N_LABEL_SINCE, N_PROPS, Store, V_EPOCH, V_LABEL, V_LENGTH, V_PREV, versionWordsOf, type StoreCut, type StoreShared,
} from './store.js';
import {
  ADJ_WORDS, A_CREATED, A_DELETED, A_EDGE, A_LABEL, A_NEIGHBOR, CHUNKS, CHUNK_NODES, CHUNK_SHIFT, CHUNK_TABLE, CHUNK_WORDS,
  DIR_IN, DIR_OUT, DIR_WORDS, HEAP_START, NEVER, PAGES_MAX, PAGE_BYTES, T_HEAP_USED, Topology, entryVisible,
} from './topology.js';

export type { StoreCut } from './store.js';

/** One section of a snapshot: its exact length up front, then its bytes in bounded chunks. */
export interface SectionSource {
  readonly name: string;
  /** Exact total of the chunks' lengths (a number: may exceed 2^32 in principle). */
  readonly byteLength: number;
  /**
   * The bytes, each chunk at most the export's chunk size. A chunk may be a reused buffer,
   * valid only until the next iteration step. Every call starts over (same bytes).
   */
  chunks(): Iterable<Uint8Array>;
}

/** The sections of a snapshot, in the order sectionsAt returns them. */
export const snapshotSectionNames = ['meta', 'nodes', 'edges', 'topology', 'heap', 'names.meta', 'names.ends', 'names.bytes'] as const;
/** Sections a snapshot may lack (older snapshots): the index catalog (index/runtime.ts). */
export const optionalSectionNames = ['indexes', 'vectors', 'texts'] as const;
export type SnapshotSectionName = (typeof snapshotSectionNames)[number] | (typeof optionalSectionNames)[number];

const NODE_ROW_BYTES = NODE_WORDS * 4;
const EDGE_ROW_BYTES = EDGE_WORDS * 4;
/** Smallest chunk size accepted: the meta section in one chunk (and so a row, an entry). */
const CHUNK_BYTES_MIN = META_BYTES;

const internal = (message: string) => new SvcError('internal_error', `internal error: snapshot export: ${message}`);
const corrupt = (message: string) => new SvcError('storage_error', `storage error: snapshot ${message}`);

// ------------------------------------------------------------------ export

/** Views of the live buffers on the exporting thread; the heap view is re-made as it grows. */
class LiveStore {
  readonly nodes: Uint32Array;
  readonly edges: Uint32Array;
  heap: Uint32Array;
  readonly topology: Topology;

  constructor(readonly shared: StoreShared, readonly cut: StoreCut) {
    this.nodes = new Uint32Array(shared.nodes, 0, cut.nodeSlots * NODE_WORDS);
    this.edges = new Uint32Array(shared.edges, 0, cut.edgeSlots * EDGE_WORDS);
    this.heap = new Uint32Array(shared.heap, 0, shared.heap.byteLength >>> 2);
    this.topology = Topology.attach(shared.topology);
  }

  /** The heap words, covering word `end` (exclusive): versions after the cut may lie beyond the view. */
  heapCovering(end: number): Uint32Array {
    if (end > this.heap.length) {
      this.heap = new Uint32Array(this.shared.heap, 0, this.shared.heap.byteLength >>> 2);
      if (end > this.heap.length) throw internal(`property version at word ${end} is beyond the heap`);
    }
    return this.heap;
  }

  /**
   * The version of the chain starting at `head` that a reader at the cut sees (0: none):
   * the first with an epoch <= E. Versions of later epochs (superseded after the cut, or
   * of a batch that may roll back) are newer and point to older ones; none of them is
   * reused while the cut is held (version-reuse.ts), and their space may lie anywhere.
   */
  versionAtCut(head: number): number {
    const epoch = this.cut.epoch;
    let ptr = head, previousEpoch = Infinity;
    for (;;) {
      if (ptr === 0) return 0;
      const heap = this.heapCovering((ptr + HEAP_HEADER_BYTES) >>> 2);
      const versionEpoch = heap[(ptr >>> 2) + V_EPOCH]!;
      if (versionEpoch > previousEpoch) throw internal(`property version at byte ${ptr} is newer than the version before it in its chain`);
      if (versionEpoch <= epoch) return ptr;
      previousEpoch = versionEpoch;
      ptr = heap[(ptr >>> 2) + V_PREV]!;
    }
  }

  /**
   * labelSince of a node at the cut, from its visible version `version`: that version's
   * epoch. Every reader of the loaded store reads at the cut or later, where any labelSince
   * <= E gives the label of the column, which is the version's; the older versions the
   * exact value would need may already hold other versions.
   */
  labelSinceAtCut(version: number): number {
    return this.heap[(version >>> 2) + V_EPOCH]!;
  }

  /**
   * The property version of a node or edge that a reader at the cut sees, if the element
   * itself is visible then (0: not visible at the cut, or an edge without properties).
   * Only these versions go into the exported heap (HeapPlacement).
   */
  liveVersion(edge: boolean, slot: number): number {
    const rows = edge ? this.edges : this.nodes, base = edge ? slot * EDGE_WORDS : slot * NODE_WORDS;
    const created = rows[base + (edge ? E_CREATED : N_CREATED)]!;
    if (created === 0 || created > this.cut.epoch) return 0;
    const deleted = rows[base + (edge ? E_DELETED : N_DELETED)]!;
    if (deleted !== 0 && deleted <= this.cut.epoch) return 0;
    // Acquire, like every reader (store.ts): the pointer is released after its version is written.
    const version = this.versionAtCut(Atomics.load(rows, base + (edge ? E_PROPS : N_PROPS)));
    if (version === 0 && !edge) throw internal(`node ${slot} has no property version at epoch ${this.cut.epoch}`);
    return version;
  }

  /** Words version `ptr` takes in the heap: header and record bytes, padded to a word. */
  versionWords(ptr: number): number {
    return versionWordsOf(this.heap[(ptr >>> 2) + V_LENGTH]!);
  }

  /**
   * Write node `slot` as a reader at the cut sees it into `out` at `at` (left zero if it
   * never existed then); its version pointer is where `heap` places it in the exported heap.
   */
  nodeRow(slot: number, out: Uint32Array, at: number, heap: HeapPlacement): void {
    const nodes = this.nodes, base = slot * NODE_WORDS, epoch = this.cut.epoch;
    const created = nodes[base + N_CREATED]!;
    if (created === 0 || created > epoch) return;
    const deleted = nodes[base + N_DELETED]!;
    out[at + N_CREATED] = created;
    if (deleted !== 0 && deleted <= epoch) {
      // Gone for every reader of the loaded store: its row without a record (a store loaded
      // from an earlier snapshot holds none for it). Its label words, which no reader asks
      // for, are as the writer left them: nothing writes a deleted node's row.
      out[at + N_LABEL] = nodes[base + N_LABEL]!;
      out[at + N_LABEL_SINCE] = nodes[base + N_LABEL_SINCE]!;
      out[at + N_DELETED] = deleted;
      return;
    }
    const version = this.liveVersion(false, slot);
    // The label of the visible version is the label at E, whatever the column holds now.
    out[at + N_LABEL] = this.heap[(version >>> 2) + V_LABEL]!;
    // From the version, never the column: the column may have moved on since the cut, and
    // the export must not depend on when it ran.
    out[at + N_LABEL_SINCE] = this.labelSinceAtCut(version);
    out[at + N_PROPS] = heap.place(this, version);
  }

  /** Write edge `slot` as a reader at the cut sees it into `out` at `at` (left zero if it never existed then). */
  edgeRow(slot: number, out: Uint32Array, at: number, heap: HeapPlacement): void {
    const edges = this.edges, base = slot * EDGE_WORDS, epoch = this.cut.epoch;
    const created = edges[base + E_CREATED]!;
    if (created === 0 || created > epoch) return;
    const deleted = edges[base + E_DELETED]!;
    out[at + E_LABEL] = edges[base + E_LABEL]!;
    out[at + E_SRC] = edges[base + E_SRC]!;
    out[at + E_DST] = edges[base + E_DST]!;
    out[at + E_CREATED] = created;
    out[at + E_DELETED] = deleted !== 0 && deleted <= epoch ? deleted : 0;
    const version = this.liveVersion(true, slot);
    out[at + E_PROPS] = version === 0 ? 0 : heap.place(this, version);
  }

  /** Word offset of the directory entry of node `node` (< cut.nodeSlots), or -1 if its chunk was never made. */
  dirOf(node: number): number {
    const topo = this.topology;
    // Acquire, as Topology.dir: pairs with the writer's Atomics.store in addNode (a chunk
    // made after the cut holds only entries of later epochs, so 0 and the chunk agree).
    const chunk = Atomics.load(topo.words, CHUNK_TABLE + (node >>> CHUNK_SHIFT));
    if (chunk === 0) return -1;
    const at = chunk + (node & (CHUNK_NODES - 1)) * DIR_WORDS;
    if (at + DIR_WORDS > topo.words.length) topo.cover(at + DIR_WORDS);
    return at;
  }

  /** Entries of a block visible at the cut. */
  visibleEntries(dir: number, which: typeof DIR_OUT | typeof DIR_IN): number {
    const topo = this.topology, epoch = this.cut.epoch;
    const len = topo.length(dir, which);
    const block = topo.entries(dir, which, len);
    const words = topo.words;
    let kept = 0;
    for (let p = block, stop = block + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) if (entryVisible(words, p, epoch, -1)) kept++;
    return kept;
  }

  /** Directory chunks of the export: one per chunk of node slots below cut.nodeSlots. */
  directoryChunks(): number {
    return Math.ceil(this.cut.nodeSlots / CHUNK_NODES);
  }

  /** Words the tight blocks of directory chunk `k` take at the cut (pass 1). */
  chunkBlockWords(k: number): number {
    let words = 0;
    const first = k * CHUNK_NODES, end = Math.min(first + CHUNK_NODES, this.cut.nodeSlots);
    for (let node = first; node < end; node++) {
      const dir = this.dirOf(node);
      if (dir < 0) break; // the whole chunk was never made (slots consumed without a node)
      const out = this.visibleEntries(dir, DIR_OUT), into = this.visibleEntries(dir, DIR_IN);
      if (out > 0) words += blockWords(out);
      if (into > 0) words += blockWords(into);
    }
    return words;
  }
}

/**
 * Copies the entries of a block visible at the cut into chunks, as a reader at the cut
 * sees them (deleted later = not deleted). A plain loop outside the generator, stopping
 * when the chunk has no room for a whole entry.
 */
class BlockCopy {
  words: Uint32Array = new Uint32Array(0);
  stop = 0;
  written = 0;
  private lastEdge = -1;

  constructor(private readonly epoch: number, private readonly edgeSlots: number) {}

  start(words: Uint32Array, first: number, length: number): void {
    this.words = words;
    this.stop = first + length * ADJ_WORDS;
    this.written = 0;
    this.lastEdge = -1;
  }

  /** Copy from entry word `p` while whole entries fit into `out`; returns where it stopped. */
  copy(p: number, out: WordChunks): number {
    const words = this.words, stop = this.stop, epoch = this.epoch, o = out.words;
    let f = out.fill;
    for (; p < stop && o.length - f >= ADJ_WORDS; p += ADJ_WORDS) {
      if (!entryVisible(words, p, epoch, -1)) continue;
      const edge = words[p + A_EDGE]!;
      if (edge <= this.lastEdge || edge >= this.edgeSlots) throw internal(`adjacency entry for edge ${edge} is out of order or beyond the cut`);
      this.lastEdge = edge;
      o[f + A_EDGE] = edge;
      o[f + A_NEIGHBOR] = words[p + A_NEIGHBOR]!;
      o[f + A_LABEL] = words[p + A_LABEL]!;
      o[f + A_CREATED] = words[p + A_CREATED]!;
      o[f + A_DELETED] = 0;
      f += ADJ_WORDS;
      this.written++;
    }
    out.fill = f;
    return p;
  }
}

/** Words of a tight block of `entries` entries: capacity word, entries, sentinel. */
const blockWords = (entries: number): number => 1 + (entries + 1) * ADJ_WORDS;

/** Collects words into one reused chunk; the generator takes it whenever it is full. */
class WordChunks {
  readonly words: Uint32Array;
  private readonly bytes: Uint8Array;
  fill = 0;
  /** Words handed out so far (checked against the announced length). */
  total = 0;

  constructor(chunkBytes: number, byteLength: number) {
    this.words = new Uint32Array(Math.max(1, Math.min(chunkBytes, byteLength) >>> 2));
    this.bytes = new Uint8Array(this.words.buffer);
  }

  full(): boolean {
    return this.fill === this.words.length;
  }

  /** Whether `words` more fit (records are never split: a chunk may end a few words early). */
  room(words: number): boolean {
    return this.words.length - this.fill >= words;
  }

  /** Append one word; the caller made room. */
  put(word: number): void {
    this.words[this.fill++] = word;
  }

  /** Copy as much of `source` from `from` as fits; returns the words copied. */
  putFrom(source: Uint32Array, from: number): number {
    const n = Math.min(this.words.length - this.fill, source.length - from);
    this.words.set(source.subarray(from, from + n), this.fill);
    this.fill += n;
    return n;
  }

  take(): Uint8Array {
    const chunk = this.bytes.subarray(0, this.fill * 4);
    this.total += this.fill;
    this.fill = 0;
    return chunk;
  }
}

function* rowChunks(rows: number, rowWords: number, chunkBytes: number, writeRow: (slot: number, out: Uint32Array, at: number) => void): Generator<Uint8Array> {
  if (rows === 0) return;
  const rowsPerChunk = Math.max(1, Math.floor(chunkBytes / (rowWords * 4)));
  const out = new Uint32Array(Math.min(rowsPerChunk, rows) * rowWords);
  const bytes = new Uint8Array(out.buffer);
  for (let first = 0; first < rows; first += rowsPerChunk) {
    const count = Math.min(rowsPerChunk, rows - first);
    out.fill(0, 0, count * rowWords);
    for (let r = 0; r < count; r++) writeRow(first + r, out, r * rowWords);
    yield bytes.subarray(0, count * rowWords * 4);
  }
}

/**
 * Where the exported heap puts the versions a reader at the cut sees (LiveStore.liveVersion):
 * after the heap's reserved start, those of nodes in slot order, then those of edges, each
 * as the head of its own chain (prev 0). Superseded versions and those of deleted or
 * rolled-back elements are left behind: every reader of the loaded store reads at the cut
 * or later, so none can reach them. The rows take their pointers from a placement as they
 * are written; heapChunks lays the versions out in the same order.
 */
class HeapPlacement {
  private next: number;

  constructor(start: number, private readonly end: number) {
    this.next = start;
  }

  /** The exported pointer of `version`, the next one in the order. */
  place(live: LiveStore, version: number): number {
    const ptr = this.next;
    this.next += live.versionWords(version) * 4;
    return ptr;
  }

  /** Every version was placed, ending where the first pass (heapLayout) said. */
  finish(): void {
    if (this.next !== this.end) throw internal(`the rows place their versions up to byte ${this.next} of the heap, the first pass found ${this.end}`);
  }
}

/** First pass over the rows: where the nodes' versions end in the exported heap, and where the heap ends. */
function heapLayout(live: LiveStore): { nodesEnd: number; end: number } {
  let bytes = HEAP_HEADER_BYTES, nodesEnd = 0;
  for (const edge of [false, true]) {
    for (let slot = 0, slots = edge ? live.cut.edgeSlots : live.cut.nodeSlots; slot < slots; slot++) {
      const version = live.liveVersion(edge, slot);
      if (version !== 0) bytes += live.versionWords(version) * 4;
    }
    if (!edge) nodesEnd = bytes;
  }
  if (bytes > limits.propertyHeapBytesMax) throw internal(`compacted heap of ${bytes} bytes exceeds the limit`);
  return { nodesEnd, end: bytes };
}

function* placedRowChunks(rows: number, rowWords: number, chunkBytes: number, heap: HeapPlacement, writeRow: (slot: number, out: Uint32Array, at: number, heap: HeapPlacement) => void): Generator<Uint8Array> {
  yield* rowChunks(rows, rowWords, chunkBytes, (slot, out, at) => writeRow(slot, out, at, heap));
  heap.finish();
}

/** The exported heap (HeapPlacement): the reserved start, then each placed version, split across chunks where it must be. */
function* heapChunks(live: LiveStore, byteLength: number, chunkBytes: number): Generator<Uint8Array> {
  const out = new WordChunks(chunkBytes, byteLength);
  // Pointer 0 means "no version": the start stays reserved (and zero), as in a live heap.
  for (let w = 0; w < HEAP_HEADER_BYTES / 4; w++) out.put(0);
  for (const edge of [false, true]) {
    for (let slot = 0, slots = edge ? live.cut.edgeSlots : live.cut.nodeSlots; slot < slots; slot++) {
      const version = live.liveVersion(edge, slot);
      if (version === 0) continue;
      const first = version >>> 2, end = first + live.versionWords(version);
      if (out.full()) yield out.take();
      out.put(0); // V_PREV: nothing older is exported
      // The view may be re-made by liveVersion (versions after the cut lie beyond it).
      const heap = live.heap;
      for (let w = first + 1; w < end; w++) {
        if (out.full()) yield out.take();
        out.put(heap[w]!);
      }
    }
  }
  if (out.fill > 0) yield out.take();
  if (out.total * 4 !== byteLength) throw internal(`heap section has ${out.total * 4} bytes, announced ${byteLength}`);
}

/** Bytes [0, byteLength) of a buffer that is immutable there, copied chunk by chunk. */
function* copyChunks(source: SharedArrayBuffer, byteLength: number, chunkBytes: number): Generator<Uint8Array> {
  if (byteLength === 0) return;
  const out = new Uint8Array(Math.min(chunkBytes, byteLength));
  for (let at = 0; at < byteLength; at += out.length) {
    const n = Math.min(out.length, byteLength - at);
    // Copied (not a view of shared memory): consumers such as native encoders may not take SharedArrayBuffers.
    out.set(new Uint8Array(source, at, n));
    yield out.subarray(0, n);
  }
}

/**
 * The compacted topology at the cut: the header, then per directory chunk the tight blocks
 * of its nodes ([out, in] in node order) followed by the chunk itself, which is filled in
 * as the blocks are written (so a block is counted and copied while it is in cache).
 * `chunkBlockWords[k]` is what pass 1 (sectionsAt) found; every count is asserted to agree.
 */
function* topologyChunks(live: LiveStore, chunkBlockWords: Float64Array, totalWords: number, chunkBytes: number): Generator<Uint8Array> {
  live.topology.beginRead();
  try {
    yield* compactedTopologyChunks(live, chunkBlockWords, totalWords, chunkBytes);
  } finally {
    live.topology.releaseReaderSlot();
  }
}

function* compactedTopologyChunks(live: LiveStore, chunkBlockWords: Float64Array, totalWords: number, chunkBytes: number): Generator<Uint8Array> {
  const out = new WordChunks(chunkBytes, totalWords * 4);
  const chunks = live.directoryChunks();
  const blocks = new BlockCopy(live.cut.epoch, live.cut.edgeSlots);
  const directory = new Uint32Array(CHUNK_WORDS); // per-chunk state
  const sentinel = new Uint32Array(ADJ_WORDS);
  sentinel[A_CREATED] = NEVER;

  // Header: heap pointer, reserved, chunk table.
  const header = new Uint32Array(HEAP_START);
  header[T_HEAP_USED] = totalWords;
  let next = HEAP_START;
  for (let k = 0; k < chunks; k++) {
    header[CHUNK_TABLE + k] = next + chunkBlockWords[k]!;
    next += chunkBlockWords[k]! + CHUNK_WORDS;
  }
  if (next !== totalWords) throw internal(`topology chunk table ends at word ${next}, expected ${totalWords}`);
  for (let from = 0; from < header.length;) {
    from += out.putFrom(header, from);
    if (out.full()) yield out.take();
  }

  next = HEAP_START;
  for (let k = 0; k < chunks; k++) {
    directory.fill(0);
    let block = next;
    const first = k * CHUNK_NODES, end = Math.min(first + CHUNK_NODES, live.cut.nodeSlots);
    for (let node = first; node < end; node++) {
      const dir = live.dirOf(node);
      if (dir < 0) break; // the whole chunk was never made
      for (let side = 0; side < 2; side++) {
        const which = side === 0 ? DIR_OUT : DIR_IN;
        const kept = live.visibleEntries(dir, which);
        if (kept === 0) continue;
        const topo = live.topology;
        const length = topo.length(dir, which);
        const entries = topo.entries(dir, which, length);
        blocks.start(topo.words, entries, length);
        if (!out.room(1 + ADJ_WORDS)) yield out.take();
        out.put(kept); // capacity: the block is exactly full
        for (let p = entries; p < blocks.stop;) {
          p = blocks.copy(p, out);
          if (p < blocks.stop) yield out.take();
        }
        if (blocks.written !== kept) throw internal(`block of node ${node} holds ${blocks.written} entries visible at ${live.cut.epoch}, counted ${kept} just before`);
        if (!out.room(ADJ_WORDS)) yield out.take();
        out.putFrom(sentinel, 0);
        const at = (node - first) * DIR_WORDS + which;
        directory[at] = block + 1;
        directory[at + 1] = kept;
        block += blockWords(kept);
      }
    }
    if (block - next !== chunkBlockWords[k]) throw internal(`topology chunk ${k} holds ${block - next} block words, first pass found ${chunkBlockWords[k]}`);
    for (let from = 0; from < directory.length;) {
      from += out.putFrom(directory, from);
      if (out.full()) yield out.take();
    }
    next = block + CHUNK_WORDS;
  }
  if (out.fill > 0) yield out.take();
  if (out.total !== totalWords) throw internal(`topology section has ${out.total} words, announced ${totalWords}`);
}

function checkCut(shared: StoreShared, cut: StoreCut, chunkBytes: number): void {
  const meta = new Uint32Array(shared.meta);
  const counters = [cut.epoch, cut.nodeSlots, cut.edgeSlots, cut.heapUsed, cut.names];
  if (!counters.every((n) => Number.isInteger(n) && n >= 0) || cut.epoch < 1) throw internal(`malformed cut ${JSON.stringify(cut)}`);
  // Every counter only grows: a cut past the live one is not of this store.
  if (cut.epoch > Atomics.load(meta, M_EPOCH) || cut.nodeSlots > Atomics.load(meta, M_NODE_SLOTS)
    || cut.edgeSlots > Atomics.load(meta, M_EDGE_SLOTS) || cut.heapUsed > Atomics.load(meta, M_HEAP_USED)
    || cut.names > Atomics.load(new Uint32Array(shared.names.meta), NAMES_COUNT)) {
    throw internal(`cut ${JSON.stringify(cut)} is ahead of the store`);
  }
  if (chunkBytes % 4 !== 0 || chunkBytes < CHUNK_BYTES_MIN || chunkBytes > limits.snapshotChunkBytes) {
    throw internal(`chunk size ${chunkBytes} is not a multiple of 4 in [${CHUNK_BYTES_MIN}, ${limits.snapshotChunkBytes}]`);
  }
}

/**
 * The store as of `cut.epoch`, read from the shared buffers on any thread while the writer
 * goes on. The topology's length is counted here (one pass over the adjacency); everything
 * else is read when the chunks are iterated. Memory: one chunk per section being iterated
 * (plus a directory chunk's counts for the topology), never a copy of a buffer.
 */
export function sectionsAt(shared: StoreShared, cut: StoreCut, chunkBytes: number = limits.snapshotChunkBytes): SectionSource[] {
  checkCut(shared, cut, chunkBytes);
  const live = new LiveStore(shared, cut);

  const chunkBlockWords = new Float64Array(live.directoryChunks());
  let topologyWords = HEAP_START;
  // Like any read, the block scans announce themselves, so the writer reuses no block
  // they may still hold (topology.ts); the chunk generator does the same for its pass.
  live.topology.beginRead();
  try {
    for (let k = 0; k < chunkBlockWords.length; k++) {
      chunkBlockWords[k] = live.chunkBlockWords(k);
      topologyWords += chunkBlockWords[k]! + CHUNK_WORDS;
    }
  } finally {
    // Given back, not kept for the chunk pass: a snapshot that fails before its topology
    // section never runs that pass, and each failure would hold a slot until none is left
    // (then no superseded block is reused again). The pass takes one when it starts.
    live.topology.releaseReaderSlot();
  }
  if (topologyWords > limits.topologyWordsMax) throw internal(`compacted topology of ${topologyWords} words exceeds the limit`);
  const heap = heapLayout(live);

  const nameEnds = new Uint32Array(shared.names.ends, 0, cut.names);
  const nameBytes = cut.names === 0 ? 0 : nameEnds[cut.names - 1]!;

  const source = (name: SnapshotSectionName, byteLength: number, chunks: () => Iterable<Uint8Array>): SectionSource => ({ name, byteLength, chunks });
  return [
    source('meta', META_BYTES, () => {
      const meta = new Uint32Array(META_BYTES / 4);
      meta[M_EPOCH] = cut.epoch;
      meta[M_NODE_SLOTS] = cut.nodeSlots;
      meta[M_EDGE_SLOTS] = cut.edgeSlots;
      meta[M_HEAP_USED] = heap.end;
      meta[M_VISIBLE] = cut.epoch;
      return [new Uint8Array(meta.buffer)];
    }),
    source('nodes', cut.nodeSlots * NODE_ROW_BYTES, () => placedRowChunks(cut.nodeSlots, NODE_WORDS, chunkBytes, new HeapPlacement(HEAP_HEADER_BYTES, heap.nodesEnd), (slot, out, at, placement) => live.nodeRow(slot, out, at, placement))),
    source('edges', cut.edgeSlots * EDGE_ROW_BYTES, () => placedRowChunks(cut.edgeSlots, EDGE_WORDS, chunkBytes, new HeapPlacement(heap.nodesEnd, heap.end), (slot, out, at, placement) => live.edgeRow(slot, out, at, placement))),
    source('topology', topologyWords * 4, () => topologyChunks(live, chunkBlockWords, topologyWords, chunkBytes)),
    source('heap', heap.end, () => heapChunks(live, heap.end, chunkBytes)),
    source('names.meta', NAMES_META_BYTES, () => {
      const meta = new Uint32Array(NAMES_META_BYTES / 4);
      meta[NAMES_COUNT] = cut.names;
      return [new Uint8Array(meta.buffer)];
    }),
    source('names.ends', cut.names * 4, () => copyChunks(shared.names.ends, cut.names * 4, chunkBytes)),
    source('names.bytes', nameBytes, () => copyChunks(shared.names.bytes, nameBytes, chunkBytes)),
    ...(cut.indexes === null ? [] : [source('indexes', cut.indexes.byteLength, () => [cut.indexes!])]),
    ...vectorSource(),
  ];

  /** The vector and text partitions as of the cut, each exported once (read from the live memories). */
  function vectorSource(): SectionSource[] {
    const out: SectionSource[] = [];
    const { vectors, texts } = cut.partitions;
    const add = (name: 'vectors' | 'texts', chunks: Uint8Array[]) => out.push(source(name, chunks.reduce((n, c) => n + c.byteLength, 0), () => chunks));
    if (vectors.length > 0) add('vectors', vectorSectionChunks(VectorMemory.attach(shared.vectors), vectors, cut.epoch));
    if (texts.length > 0) add('texts', textSectionChunks(TextMemory.attach(shared.texts), texts, cut.epoch));
    return out;
  }
}

// ------------------------------------------------------------------ load

/** Where one announced section's bytes go, and how many have arrived. */
interface Landing { readonly target: Uint8Array; written: number; ended: boolean }

/** Receives one section's chunks. */
export interface SectionSink { write(chunk: Uint8Array): void; end(): void }

/**
 * Streaming load: sections arrive in any order, each announced with its length, then
 * written in chunks straight into the buffers the store will use, sized for that length.
 * finish() checks that the sections agree with each other and returns the store.
 */
export class StoreLoader {
  private readonly landings = new Map<SnapshotSectionName, Landing>();
  private meta: SharedArrayBuffer | null = null;
  private nodes: SharedArrayBuffer | null = null;
  private edges: SharedArrayBuffer | null = null;
  private heap: SharedArrayBuffer | null = null;
  private topology: WebAssembly.Memory | null = null;
  private names: Partial<DictionaryShared> = {};
  private finished = false;

  section(name: string, byteLength: number): SectionSink {
    if (this.finished) throw internal('section after finish');
    if (!(snapshotSectionNames as readonly string[]).includes(name) && !(optionalSectionNames as readonly string[]).includes(name)) {
      throw corrupt(`has an unknown section \`${name}\``);
    }
    const known = name as SnapshotSectionName;
    if (this.landings.has(known)) throw corrupt(`has section \`${name}\` twice`);
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) throw corrupt(`section \`${name}\` has a malformed length ${byteLength}`);
    const landing: Landing = { target: this.allocate(known, byteLength), written: 0, ended: false };
    this.landings.set(known, landing);
    return {
      write: (chunk: Uint8Array) => {
        if (landing.ended) throw internal(`write to section \`${name}\` after its end`);
        if (landing.written + chunk.byteLength > byteLength) throw corrupt(`section \`${name}\` is longer than its ${byteLength} bytes`);
        landing.target.set(chunk, landing.written);
        landing.written += chunk.byteLength;
      },
      end: () => {
        if (landing.written !== byteLength) throw corrupt(`section \`${name}\` is short: ${landing.written} of ${byteLength} bytes`);
        landing.ended = true;
      },
    };
  }

  /** The buffer a section lands in, sized (and bounded) for its announced length. */
  private allocate(name: SnapshotSectionName, byteLength: number): Uint8Array {
    const bounded = (max: number, unit: number) => {
      if (byteLength > max || byteLength % unit !== 0) throw corrupt(`section \`${name}\` has a bad length ${byteLength} (at most ${max}, a multiple of ${unit})`);
    };
    switch (name) {
      case 'meta': {
        // Older snapshots may lack the trailing reserved words, never the counters.
        bounded(META_BYTES, 4);
        if (byteLength < (M_HEAP_USED + 1) * 4) throw corrupt(`meta section of ${byteLength} bytes lacks the counters`);
        this.meta = new SharedArrayBuffer(META_BYTES);
        return new Uint8Array(this.meta, 0, byteLength);
      }
      case 'nodes':
        bounded(limits.nodesMax * NODE_ROW_BYTES, NODE_ROW_BYTES);
        this.nodes = sharedBuffer(Math.max(1 << 16, byteLength), limits.nodesMax * NODE_ROW_BYTES);
        return new Uint8Array(this.nodes, 0, byteLength);
      case 'edges':
        bounded(limits.edgesMax * EDGE_ROW_BYTES, EDGE_ROW_BYTES);
        this.edges = sharedBuffer(Math.max(1 << 16, byteLength), limits.edgesMax * EDGE_ROW_BYTES);
        return new Uint8Array(this.edges, 0, byteLength);
      case 'heap':
        bounded(limits.propertyHeapBytesMax, 4);
        this.heap = sharedBuffer(Math.max(1 << 16, byteLength), limits.propertyHeapBytesMax + 4096);
        return new Uint8Array(this.heap, 0, byteLength);
      case 'topology': {
        bounded(limits.topologyWordsMax * 4, 4);
        if (byteLength < HEAP_START * 4) throw corrupt(`topology section is truncated (${byteLength} bytes)`);
        this.topology = new WebAssembly.Memory({ initial: Math.ceil(byteLength / PAGE_BYTES), maximum: PAGES_MAX, shared: true });
        return new Uint8Array(this.topology.buffer, 0, byteLength);
      }
      case 'names.meta':
        bounded(NAMES_META_BYTES, 4);
        if (byteLength < (NAMES_COUNT + 1) * 4) throw corrupt('names.meta section lacks the count');
        this.names.meta = new SharedArrayBuffer(NAMES_META_BYTES);
        return new Uint8Array(this.names.meta, 0, byteLength);
      case 'names.ends':
        bounded(limits.dictionaryEntriesMax * 4, 4);
        this.names.ends = Dictionary.endsBuffer(byteLength);
        return new Uint8Array(this.names.ends, 0, byteLength);
      case 'names.bytes':
        bounded(limits.dictionaryBytesMax, 1);
        this.names.bytes = Dictionary.bytesBuffer(byteLength);
        return new Uint8Array(this.names.bytes, 0, byteLength);
      case 'indexes':
        bounded(limits.indexCatalogBytesMax, 1);
        return new Uint8Array(byteLength);
      case 'vectors':
        bounded(limits.vectorMemoryBytesMax, 1);
        return new Uint8Array(byteLength);
      case 'texts':
        bounded(limits.textMemoryBytesMax, 1);
        return new Uint8Array(byteLength);
    }
  }

  /** The loaded store (writer side; every loaded epoch is visible). storage_error if anything is missing or inconsistent. */
  finish(): Store {
    if (this.finished) throw internal('finish twice');
    this.finished = true;
    for (const name of snapshotSectionNames) {
      const landing = this.landings.get(name);
      if (landing === undefined) throw corrupt(`lacks section \`${name}\``);
      if (!landing.ended) throw corrupt(`section \`${name}\` was not finished (${landing.written} of ${landing.target.byteLength} bytes)`);
    }
    const length = (name: SnapshotSectionName) => this.landings.get(name)!.target.byteLength;
    const meta = new Uint32Array(this.meta!);
    const epoch = meta[M_EPOCH]!;
    if (epoch < 1 || epoch > limits.epochMax) throw corrupt(`meta holds epoch ${epoch}`);
    const agree = (what: string, counter: number, bytes: number, name: SnapshotSectionName) => {
      if (counter !== length(name)) throw corrupt(`meta says ${what} ${counter / bytes}, section \`${name}\` holds ${length(name) / bytes}`);
    };
    agree('node slots', meta[M_NODE_SLOTS]! * NODE_ROW_BYTES, NODE_ROW_BYTES, 'nodes');
    agree('edge slots', meta[M_EDGE_SLOTS]! * EDGE_ROW_BYTES, EDGE_ROW_BYTES, 'edges');
    agree('heap bytes', meta[M_HEAP_USED]!, 1, 'heap');
    if (meta[M_HEAP_USED]! < HEAP_HEADER_BYTES) throw corrupt(`heap of ${meta[M_HEAP_USED]} bytes lacks its reserved start`);

    const topology = this.topology!;
    const words = new Uint32Array(topology.buffer, 0, length('topology') >>> 2);
    if (words[T_HEAP_USED]! * 4 !== length('topology')) {
      throw corrupt(`topology section length does not match its header (${length('topology')} bytes, header says ${words[T_HEAP_USED]! * 4})`);
    }
    for (let k = 0; k < CHUNKS; k++) {
      const chunk = words[CHUNK_TABLE + k]!;
      if (chunk !== 0 && (chunk < HEAP_START || chunk + CHUNK_WORDS > words.length)) throw corrupt(`topology directory chunk ${k} lies outside the section`);
    }

    const count = new Uint32Array(this.names.meta!)[NAMES_COUNT]!;
    if (count * 4 !== length('names.ends')) throw corrupt(`names.meta counts ${count} names, names.ends holds ${length('names.ends') / 4}`);
    const ends = new Uint32Array(this.names.ends!, 0, count);
    for (let id = 0, start = 0; id < count; start = ends[id]!, id++) {
      if (ends[id]! < start) throw corrupt(`names.ends decreases at name ${id}`);
    }
    const used = count === 0 ? 0 : ends[count - 1]!;
    if (used !== length('names.bytes')) throw corrupt(`names.ends ends at byte ${used}, names.bytes holds ${length('names.bytes')}`);

    // A snapshot holds only committed (durable) batches: all of them are visible.
    Atomics.store(meta, M_VISIBLE, epoch);
    const catalog = this.landings.get('indexes');
    if (catalog !== undefined && !catalog.ended) throw corrupt(`section \`indexes\` was not finished (${catalog.written} of ${catalog.target.byteLength} bytes)`);
    const [vectors, texts] = (['vectors', 'texts'] as const).map((name) => {
      const landing = this.landings.get(name);
      if (landing !== undefined && !landing.ended) throw corrupt(`section \`${name}\` was not finished (${landing.written} of ${landing.target.byteLength} bytes)`);
      if (landing !== undefined && catalog === undefined) throw corrupt(`holds section \`${name}\` but no index catalog`);
      return landing;
    });
    return Store.loaded({
      meta: this.meta!, nodes: this.nodes!, edges: this.edges!, topology, heap: this.heap!,
      names: { meta: this.names.meta!, ends: this.names.ends!, bytes: this.names.bytes! },
    }, catalog?.target ?? null, vectors?.target ?? null, texts?.target ?? null);
  }
}

/** Load sections that are already in memory (tests, small stores). */
export function loadSections(sections: Iterable<SectionSource>): Store {
  const loader = new StoreLoader();
  for (const section of sections) {
    const sink = loader.section(section.name, section.byteLength);
    for (const chunk of section.chunks()) sink.write(chunk);
    sink.end();
  }
  return loader.finish();
}
