// The topology: every node's adjacency directory and adjacency blocks, in ONE shared
// WebAssembly.Memory, so the AssemblyScript traversal kernels (assembly/) read exactly the
// bytes the JS operators read. JS owns all allocation; kernels only read.
//
// Layout (u32 words, offsets are word indexes; the kernels use byte address = word * 4):
//   [0]                     HEAP_USED: words allocated so far (bump pointer, atomic)
//   [1]                     RETIRE_SEQ: blocks superseded so far (block reuse, below)
//   [CHUNK_TABLE ..+CHUNKS) directory chunk table: word offset of the directory chunk for
//                           nodes k * CHUNK_NODES .. (k+1) * CHUNK_NODES - 1, 0 = none yet
//   [READER_SLOTS_AT ..)    one reader slot per thread reading this store, then an
//                           overflow flag (block reuse, below), the index catalog view's
//                           root (index/view.ts) and one past the highest reader slot ever
//                           claimed (block reuse)
//   [HEAP_START ..)         heap: directory chunks, adjacency blocks (superseded ones are
//                           reused for blocks of the same capacity once no read can hold
//                           them) and the threads' kernel scratch segments (scratch-arena.ts)
// Directory entry (DIR_WORDS): [outBlock, outLength, inBlock, inLength]; block 0 = none yet
// Block: [capacity] then `capacity` entries, then one sentinel entry that is never visible;
// a block's offset names its first entry.
// Adjacency entry (ADJ_WORDS): [edge, neighbor, label, created, deleted], in edge ID order.
//
// Concurrency (one writer, many readers), under the ECMAScript memory model: Atomics
// operations are sequentially consistent; a plain load that races with a write may return
// the old or the new value (a naturally aligned u32 never tears: one or the other, whole);
// a plain load ordered after an Atomics.load that observed an Atomics.store sees every write
// made before that store. The writer publishes every word a reader uses to find data with
// Atomics.store, and readers take those words with Atomics.load:
//   - a directory chunk pointer (CHUNK_TABLE word; addNode; written once, 0 -> chunk),
//     loaded by dir() and the kernels' directory();
//   - a block's length, then its offset (length() then entries(); the kernels' blockLength
//     then blockStart): two atomic loads per block scan, after the chunk pointer's one.
// Everything else a reader takes from the topology is a plain load ordered after those:
//   - A chunk is fresh (zero) heap when its pointer is stored, so its directory words read
//     0 (no block) until the writer Atomics.stores them.
//   - The writer writes an entry before it Atomics.stores the raised length, and fills a
//     new block (capacity, copy, sentinel) before it Atomics.stores its offset. A reader
//     that loaded length L therefore sees entries [0, L) of the block that was current when
//     L was stored, and (the offset being loaded after the length) gets that block or a
//     newer one; a newer one was filled with a copy of all `capacity` >= L entries before
//     its offset was stored, so its entries [0, L) are visible too.
//   - The superseded block stays as it was until no read that could hold its offset is
//     running (reader slots, beginRead/endRead below); only then may it be reused. So the
//     guarantee holds for offsets loaded inside an announced read, and only there.
// Words a reader may read while the writer overwrites them (plain, racing; either value is
// right): an entry's `deleted` (0 or an epoch no reader of the batch holds: a deletion or
// its rollback), and the words of an entry cut off by rollback (unappend lowers the length)
// and then overwritten by a later append; a reader that loaded the longer length may see
// a mix of the two entries' words, but `created` is never 0 after the first write and is
// always an epoch later than its snapshot (the rolled-back batch's, or a later one), so the
// entry is invisible to it whichever words it sees. Visibility itself needs no ordering
// beyond this: a snapshot at S was loaded (Atomics.load of VISIBLE, store.ts) after the
// writer finished every write of batches <= S. Lengths are the only published words that
// go down (rollback); the writer's own plain reads of the words it alone writes need no
// atomics.
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';
import { instantiateKernels, type TraversalKernels } from './kernels.js';
import { ScratchArena } from './scratch-arena.js';

export const DIR_WORDS = 4;
export const DIR_OUT = 0, DIR_IN = 2; // + 0 block offset, + 1 length
export const ADJ_WORDS = 5;
export const A_EDGE = 0, A_NEIGHBOR = 1, A_LABEL = 2, A_CREATED = 3, A_DELETED = 4;

// Exported for the snapshot export and loader (snapshot-sections.ts), which write this layout.
export const T_HEAP_USED = 0;
export const CHUNK_TABLE = 2;
export const CHUNK_SHIFT = 14;
export const CHUNK_NODES = 1 << CHUNK_SHIFT;
export const CHUNK_WORDS = CHUNK_NODES * DIR_WORDS;
export const CHUNKS = 4096; // 2^26 nodes (limits.nodesMax) / CHUNK_NODES
export const HEAP_START = 8192;
export const PAGE_BYTES = 65536;
export const PAGES_MAX = 65536;
const ADJ_BLOCK_MIN = 4;
/**
 * Reuse of superseded blocks (epoch-based reclamation). Header word RETIRE_SEQ counts
 * superseded blocks. Reader slots (one per thread and store, claimed on first read): 0 free,
 * 1 idle, s + 2 while a read runs that began when RETIRE_SEQ was s. A read announces itself
 * before it loads any block offset, so a block superseded at sequence r can only be held by
 * a read whose slot shows s <= r; once every running read shows s > r it is reused.
 */
const RETIRE_SEQ = 1;
const READER_SLOTS_AT = CHUNK_TABLE + CHUNKS;
const READERS_OVERFLOW = READER_SLOTS_AT + limits.topologyReaderSlotsMax;
/**
 * One past the highest reader slot ever claimed: oldestReadSequence scans only below it (a
 * few slots, not all 1024). Raised after the claim and before the slot's first announcement:
 * a scan that read it lower started before that announcement, which therefore comes after
 * every retire the scan frees, and sees their epochs.
 */
const READER_SLOTS_USED = READERS_OVERFLOW + 2;
/** The index catalog view's root word (index/view.ts). */
export const T_VIEW_ROOT = READERS_OVERFLOW + 1;
const SLOT_FREE = 0, SLOT_IDLE = 1;
/**
 * Allocations that found no reusable block between two scans of the reader slots (a scan
 * reads every slot). A block grows through ~4 size classes per doubling, so blocks are
 * superseded often: a long interval leaves many of them waiting while fresh heap is taken.
 */
const RECLAIM_EVERY = 16;
/** `created` of a block's sentinel entry: later than every epoch (limits.epochMax). */
export const NEVER = 0xffffffff;

/**
 * Test-only fault injection: the writer's topology changes that can fail (block and chunk
 * allocation, marking a deletion) throw storage_error once `topologyFaultAfter` of them
 * succeeded, so tests can fail a batch half-way through adding or dropping edges.
 */
let topologyFaultAfter = -1;
export function injectTopologyFault(succeedingCalls: number | null): void {
  topologyFaultAfter = succeedingCalls ?? -1;
}
function faultPoint(): void {
  if (topologyFaultAfter < 0) return;
  if (topologyFaultAfter === 0) throw new SvcError('storage_error', 'storage error: injected topology fault');
  topologyFaultAfter--;
}

/**
 * Whether the entry at word `p` is visible at snapshot `at` and has label `label` (any when
 * < 0). The one definition of an entry's visibility; the kernels repeat it in AssemblyScript.
 */
export function entryVisible(words: Uint32Array, p: number, at: number, label: number): boolean {
  const created = words[p + A_CREATED]!, deleted = words[p + A_DELETED]!;
  return created !== 0 && created <= at && (deleted === 0 || at < deleted) && (label < 0 || words[p + A_LABEL] === label);
}

/** Entries of a block not deleted (at any epoch). */
function liveEntries(words: Uint32Array, block: number, len: number): number {
  let kept = 0;
  for (let p = block, stop = block + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) if (words[p + A_DELETED] === 0) kept++;
  return kept;
}

/**
 * The size class of a block of `wordCount` words from allocateWords: the smallest
 * m * 2^k >= wordCount with m in 4..7 (at least 8), so a block wastes under a quarter of
 * itself and a superseded one is reused for any request of the same class.
 */
export function wordBlockWords(wordCount: number): number {
  if (!Number.isInteger(wordCount) || wordCount <= 0 || wordCount > limits.topologyWordsMax) {
    throw new SvcError('internal_error', `internal error: topology request of ${wordCount} words`);
  }
  if (wordCount <= 8) return 8;
  const unit = 2 ** (29 - Math.clz32(wordCount)); // 2^(floor(log2 wordCount) - 2)
  return Math.ceil(wordCount / unit) * unit;
}

/** Bytes of the topology memory by use (Topology.memoryUsage). */
export interface TopologyUsage {
  /** The WebAssembly memory's length (pages past heapBytes were never touched: not resident). */
  memoryBytes: number;
  /** Allocated so far (the bump pointer). */
  heapBytes: number;
  headerBytes: number;
  directoryBytes: number;
  /** Blocks the directory points at, whole (capacity, entries, sentinel)... */
  blockBytes: number;
  /** ... of which live entries (visible or deleted, below the length). */
  entryBytes: number;
  /** Superseded blocks a running read may still hold. */
  retiredBytes: number;
  /** Superseded blocks ready for reuse. */
  freeBytes: number;
  /** Kernel scratch, secondary index entries, holes. */
  otherBytes: number;
}

/**
 * The capacity of the block that replaces a full block of `capacity` entries: the next
 * size class m * 2^k (m in 4..7, at least ADJ_BLOCK_MIN). Each class is at most a quarter
 * larger than the one before, so a block's unused tail stays under a fifth of it (doubling
 * left a third of the bench graph's adjacency memory unused: docs/benchmarks.md "Memory"),
 * at the price of copying each entry about four times as a block grows instead of once, and
 * every block of a class has the same size, so a superseded block is reused for any later
 * block of its class.
 */
export function grownCapacity(capacity: number): number {
  if (capacity < ADJ_BLOCK_MIN) return ADJ_BLOCK_MIN;
  const unit = 2 ** (29 - Math.clz32(capacity)); // 2^(floor(log2 capacity) - 2)
  return (Math.floor(capacity / unit) + 1) * unit;
}

/** The direction word of a directory entry: DIR_OUT or DIR_IN. */
export type DirWord = typeof DIR_OUT | typeof DIR_IN;

/** The traversal kernels' `dirs` argument (kernels.ts): bit 0 out, bit 1 in. */
export const kernelDirection = (word: DirWord): number => (word === DIR_OUT ? 1 : 2);
export const kernelDirections = (words: readonly DirWord[]): number => words.reduce<number>((bits, w) => bits | kernelDirection(w), 0);

export class Topology {
  readonly memory: WebAssembly.Memory;
  /** Refreshed when the memory grew (views over WebAssembly memory do not track growth). */
  words: Uint32Array;
  private kernelInstance: TraversalKernels | null = null;
  /** HEAP_USED when kernels() last refreshed this thread's view of the memory. */
  private kernelsCheckedUsed = 0;
  private arena: ScratchArena | null = null;
  /** This thread's reader slot (-1: none claimed yet). */
  private readerSlot = -1;
  /** Writer: superseded blocks as [block, capacity, retire sequence] triples, oldest first. */
  private retired: number[] = [];
  /** Writer: reusable blocks by capacity. */
  private readonly freeBlocks = new Map<number, number[]>();
  private allocationsSinceReclaim = 0;

  private constructor(memory: WebAssembly.Memory) {
    this.memory = memory;
    this.words = new Uint32Array(memory.buffer);
  }

  static create(): Topology {
    const topo = new Topology(new WebAssembly.Memory({ initial: 1, maximum: PAGES_MAX, shared: true }));
    topo.words[T_HEAP_USED] = HEAP_START;
    return topo;
  }

  static attach(memory: WebAssembly.Memory): Topology {
    return new Topology(memory);
  }

  /** A writer topology holding exactly `bytes` (from exportBytes). */
  static fromBytes(bytes: Uint8Array): Topology {
    if (bytes.byteLength < HEAP_START * 4 || bytes.byteLength % 4 !== 0) {
      throw new SvcError('storage_error', 'storage error: topology section is truncated');
    }
    const pages = Math.ceil(bytes.byteLength / PAGE_BYTES);
    const topo = new Topology(new WebAssembly.Memory({ initial: pages, maximum: PAGES_MAX, shared: true }));
    new Uint8Array(topo.memory.buffer).set(bytes);
    if (topo.words[T_HEAP_USED]! * 4 !== bytes.byteLength) {
      throw new SvcError('storage_error', 'storage error: topology section length does not match its header');
    }
    return topo;
  }

  /**
   * The topology for a snapshot (writer, between batches), compacted: each block exactly as
   * long as its live entries, no superseded blocks, no scratch. Between batches every
   * deletion is committed, so no reader of the snapshot could see a deleted entry: those
   * are left out.
   */
  exportBytes(): Uint8Array {
    const words = this.words;
    // Pass 1: the size. Pass 2: the copy, in chunk and node order.
    let size = HEAP_START;
    for (let k = 0; k < CHUNKS; k++) {
      const chunk = words[CHUNK_TABLE + k]!;
      if (chunk === 0) continue;
      size += CHUNK_WORDS;
      for (let entry = chunk; entry < chunk + CHUNK_WORDS; entry += DIR_WORDS / 2) {
        const block = words[entry]!, len = words[entry + 1]!;
        const kept = liveEntries(words, block, len);
        if (kept > 0) size += 1 + (kept + 1) * ADJ_WORDS;
      }
    }
    const out = new Uint32Array(size);
    out[T_HEAP_USED] = size;
    let next = HEAP_START;
    for (let k = 0; k < CHUNKS; k++) {
      const chunk = words[CHUNK_TABLE + k]!;
      if (chunk === 0) continue;
      const copy = next;
      out[CHUNK_TABLE + k] = copy;
      next += CHUNK_WORDS;
      for (let e = 0; e < CHUNK_WORDS; e += DIR_WORDS / 2) {
        const block = words[chunk + e]!, len = words[chunk + e + 1]!;
        const kept = liveEntries(words, block, len);
        if (kept === 0) continue; // no block: offset and length stay 0
        const moved = next + 1;
        out[next] = kept;
        let w = moved;
        for (let p = block, stop = block + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
          if (words[p + A_DELETED] !== 0) continue;
          for (let j = 0; j < ADJ_WORDS; j++) out[w + j] = words[p + j]!;
          w += ADJ_WORDS;
        }
        out[w + A_CREATED] = NEVER;
        next = w + ADJ_WORDS;
        out[copy + e] = moved;
        out[copy + e + 1] = kept;
      }
    }
    if (next !== size) throw new SvcError('internal_error', `internal error: compacted topology is ${next} words, expected ${size}`);
    return new Uint8Array(out.buffer);
  }

  /**
   * Where the heap's words go (writer, between batches; docs/benchmarks.md "Memory"):
   * directory chunks, the blocks nodes point at (their live entries and the rest of their
   * capacity), superseded blocks waiting for readers or free for reuse, and the remainder
   * (kernel scratch, index entries, holes).
   */
  memoryUsage(): TopologyUsage {
    const words = this.words;
    let directoryWords = 0, blockWords = 0, entryWords = 0;
    for (let k = 0; k < CHUNKS; k++) {
      const chunk = words[CHUNK_TABLE + k]!;
      if (chunk === 0) continue;
      directoryWords += CHUNK_WORDS;
      for (let entry = chunk; entry < chunk + CHUNK_WORDS; entry += DIR_WORDS / 2) {
        const block = words[entry]!;
        if (block === 0) continue;
        blockWords += 1 + (words[block - 1]! + 1) * ADJ_WORDS;
        entryWords += words[entry + 1]! * ADJ_WORDS;
      }
    }
    let retiredWords = 0, freeWords = 0;
    const sizeOf = (key: number): number => (key > 0 ? 1 + (key + 1) * ADJ_WORDS : -key);
    for (let i = 0; i < this.retired.length; i += 3) retiredWords += sizeOf(this.retired[i + 1]!);
    for (const [key, list] of this.freeBlocks) freeWords += sizeOf(key) * list.length;
    const heapWords = this.heapUsed();
    return {
      memoryBytes: this.memory.buffer.byteLength, heapBytes: heapWords * 4, headerBytes: HEAP_START * 4,
      directoryBytes: directoryWords * 4, blockBytes: blockWords * 4, entryBytes: entryWords * 4,
      retiredBytes: retiredWords * 4, freeBytes: freeWords * 4,
      otherBytes: (heapWords - HEAP_START - directoryWords - blockWords - retiredWords - freeWords) * 4,
    };
  }

  /** Make `words` cover word `end` (exclusive); another thread may have grown the memory. */
  cover(end: number): Uint32Array {
    if (end > this.words.length) {
      this.refresh();
      if (end > this.words.length) throw new SvcError('internal_error', `internal error: topology word ${end} is beyond the memory`);
    }
    return this.words;
  }

  /**
   * Re-make `words` over the memory as it is now. When another thread grows a shared
   * memory, V8 hands this thread the longer `memory.buffer` only once it handles the grow
   * interrupt (at a later stack check), so right after the grow the getter can still
   * return the old buffer; `grow(0)` refreshes it on this thread at once (verified on
   * Node 20, test/concurrency.test.ts). It also interrupts the other threads, so it runs
   * only when the plain getter came up short.
   */
  private refresh(): void {
    const before = this.words.length;
    this.words = new Uint32Array(this.memory.buffer);
    if (this.words.length === before) {
      this.memory.grow(0);
      this.words = new Uint32Array(this.memory.buffer);
    }
  }

  /**
   * Word offset of node `node`'s directory entry (the node must have been added). The
   * chunk pointer is an acquire (Atomics.load): it pairs with addNode's Atomics.store, so
   * the directory words behind it read as the zero of fresh heap or as published since.
   */
  dir(node: number): number {
    const chunk = Atomics.load(this.words, CHUNK_TABLE + (node >>> CHUNK_SHIFT));
    const at = chunk + (node & (CHUNK_NODES - 1)) * DIR_WORDS;
    if (at + DIR_WORDS > this.words.length) this.cover(at + DIR_WORDS);
    return at;
  }

  /** Entries in a node's block (acquire). Read it before the block offset (see the header). */
  length(dir: number, which: DirWord): number {
    return Atomics.load(this.words, dir + which + 1);
  }

  /** Word offset of a node's first entry (acquire), with `words` made to cover `length` entries. */
  entries(dir: number, which: DirWord, length: number): number {
    const block = Atomics.load(this.words, dir + which);
    if (block + (length + 1) * ADJ_WORDS > this.words.length) this.cover(block + (length + 1) * ADJ_WORDS);
    return block;
  }

  /**
   * The kernels, instantiated over this memory for this thread on first use. Kernels read
   * blocks JS never covered, so the memory this thread sees is first brought up to what
   * the heap pointer says was allocated (refresh() on why), once per heap pointer value:
   * one atomic load per call otherwise.
   */
  kernels(): TraversalKernels {
    const used = Atomics.load(this.words, T_HEAP_USED);
    if (used > this.words.length && used !== this.kernelsCheckedUsed) {
      this.kernelsCheckedUsed = used;
      this.refresh();
    }
    if (this.kernelInstance === null) this.kernelInstance = instantiateKernels(this.memory);
    return this.kernelInstance;
  }

  /** This thread's kernel scratch (made on first use; this object is per thread). */
  scratch(): ScratchArena {
    if (this.arena === null) this.arena = new ScratchArena(this);
    return this.arena;
  }

  /** Words of the heap handed out so far (blocks, directories and every thread's scratch). */
  heapUsed(): number {
    return Atomics.load(this.words, T_HEAP_USED);
  }

  /**
   * `wordCount` heap words for a thread's scratch segment (any thread; see reserve). The
   * words are not zeroed: a segment is reused by many queries, which zero what they need.
   */
  reserveScratch(wordCount: number): number {
    return this.reserve(wordCount);
  }

  // ------------------------------------------------------------ writer

  private allocate(wordCount: number): number {
    faultPoint();
    return this.reserve(wordCount);
  }

  /**
   * Move HEAP_USED past `wordCount` words and return where they start. Reader threads take
   * scratch from the same heap as the writer's blocks, so this is a compare-exchange loop
   * that checks the bound before it moves the pointer: a request that does not fit changes
   * nothing (an add-then-undo would let other threads see, and fail on, the overshoot), and
   * the u32 pointer can never wrap onto live directories.
   */
  private reserve(wordCount: number): number {
    if (!Number.isInteger(wordCount) || wordCount <= 0) {
      throw new SvcError('internal_error', `internal error: topology request of ${wordCount} words`);
    }
    const words = this.words; // word 0 is in every view
    for (;;) {
      const at = Atomics.load(words, T_HEAP_USED);
      const end = at + wordCount; // a double: no wrap
      if (end > limits.topologyWordsMax) throw new SvcError('storage_error', 'storage error: adjacency heap is full');
      if (Atomics.compareExchange(words, T_HEAP_USED, at, end) !== at) continue;
      try {
        this.grow(end);
      } catch (err) {
        // Give the words back unless another thread took words after them (then they stay
        // a hole): the pointer must not stay beyond what the memory holds.
        Atomics.compareExchange(words, T_HEAP_USED, end, at);
        if (err instanceof SvcError) throw err;
        throw new SvcError('storage_error', `storage error: adjacency memory could not grow: ${(err as Error).message}`);
      }
      return at;
    }
  }

  /**
   * Grow the memory (by at least a quarter, so growth is amortized) to hold `end` words.
   * Several threads may grow at once (scratch); each retries until the memory is big enough.
   */
  private grow(end: number): void {
    let have = this.memory.buffer.byteLength;
    while (end * 4 > have) {
      const needPages = Math.ceil((end * 4 - have) / PAGE_BYTES);
      const havePages = have / PAGE_BYTES;
      this.memory.grow(Math.min(PAGES_MAX - havePages, Math.max(needPages, havePages >>> 2, 16)));
      have = this.memory.buffer.byteLength;
    }
    if (end > this.words.length) this.words = new Uint32Array(this.memory.buffer);
  }

  /** Give node `node` a directory entry (all blocks empty). */
  addNode(node: number): void {
    const slot = CHUNK_TABLE + (node >>> CHUNK_SHIFT);
    if (this.words[slot] === 0) {
      const chunk = this.allocate(CHUNK_WORDS);
      // Fresh heap is zero (chunks are never reused): every entry of the chunk starts as
      // empty blocks. Published with a release; readers load it with an acquire (dir()).
      Atomics.store(this.words, slot, chunk);
    }
  }

  /** Append an entry to a node's block (edges arrive in ascending ID order). */
  append(node: number, which: DirWord, edge: number, neighbor: number, label: number, created: number): void {
    const slot = this.dir(node) + which;
    let words = this.words;
    let block = words[slot]!;
    const len = words[slot + 1]!;
    const cap = block === 0 ? 0 : words[block - 1]!;
    if (len === cap) {
      const newCap = grownCapacity(cap);
      const moved = this.allocateBlock(newCap);
      words = this.words;
      words[moved - 1] = newCap;
      if (len > 0) words.copyWithin(moved, block, block + len * ADJ_WORDS);
      words[moved + newCap * ADJ_WORDS + A_CREATED] = NEVER;
      // Published once the block is whole; the old block stays valid for the reads that
      // may still hold its offset, and is reused only after they ended.
      Atomics.store(words, slot, moved);
      if (block !== 0) this.retire(block, cap);
      block = moved;
    }
    // The entry first, then the length (release): a reader that loads the new length
    // (acquire) sees all five words. `created` last, so that it is never 0 once written.
    const p = block + len * ADJ_WORDS;
    words[p + A_EDGE] = edge;
    words[p + A_NEIGHBOR] = neighbor;
    words[p + A_LABEL] = label;
    words[p + A_DELETED] = 0;
    words[p + A_CREATED] = created;
    Atomics.store(words, slot + 1, len + 1);
  }

  /** A block of `capacity` entries (word offset of its first entry): a reusable one, else new heap. */
  private allocateBlock(capacity: number): number {
    let list = this.freeBlocks.get(capacity);
    if ((list === undefined || list.length === 0) && this.retired.length > 0 && ++this.allocationsSinceReclaim >= RECLAIM_EVERY) {
      this.allocationsSinceReclaim = 0;
      this.reclaim();
      list = this.freeBlocks.get(capacity);
    }
    if (list !== undefined && list.length > 0) {
      faultPoint();
      return list.pop()!;
    }
    return this.allocate(1 + (capacity + 1) * ADJ_WORDS) + 1;
  }

  /**
   * Writer: a block of at least `wordCount` words for another structure kept in this memory
   * (secondary index entries, src/index/entries.ts), rounded up to its size class
   * (wordBlockWords): a superseded block of that class once no read can hold it, else new
   * heap. Not zeroed. Give it back with retireWords(block, the same wordCount).
   */
  allocateWords(wordCount: number): number {
    const size = wordBlockWords(wordCount);
    // Keyed by -size in the lists of adjacency blocks (keyed by capacity > 0): one
    // retire/reclaim machinery, disjoint keys.
    let list = this.freeBlocks.get(-size);
    if ((list === undefined || list.length === 0) && this.retired.length > 0 && ++this.allocationsSinceReclaim >= RECLAIM_EVERY) {
      this.allocationsSinceReclaim = 0;
      this.reclaim();
      list = this.freeBlocks.get(-size);
    }
    if (list !== undefined && list.length > 0) {
      faultPoint();
      return list.pop()!;
    }
    return this.allocate(size);
  }

  /**
   * Writer: a block from allocateWords(wordCount) was superseded just now (nothing published
   * names it any more); reused once every read that could hold it ended.
   */
  retireWords(block: number, wordCount: number): void {
    this.retire(block, -wordBlockWords(wordCount));
  }

  /** A block superseded just now (its successor's offset is published). */
  private retire(block: number, capacity: number): void {
    const sequence = Atomics.add(this.words, RETIRE_SEQ, 1);
    this.retired.push(block, capacity, sequence);
  }

  /**
   * Writer: retire something kept outside this memory (vector index blocks) with the same
   * protocol: it may be reused once oldestReadSequence() is above the sequence returned.
   */
  retireSequence(): number {
    return Atomics.add(this.words, RETIRE_SEQ, 1);
  }

  /** The retire sequence below which nothing can be held by a running read (-Infinity: unknown, reuse nothing). */
  oldestReadSequence(): number {
    const words = this.words;
    if (Atomics.load(words, READERS_OVERFLOW) !== 0) return -Infinity; // a reader without a slot
    let oldest = Infinity;
    for (let i = 0, used = Atomics.load(words, READER_SLOTS_USED); i < used; i++) {
      const v = Atomics.load(words, READER_SLOTS_AT + i);
      if (v > SLOT_IDLE && v - 2 < oldest) oldest = v - 2;
    }
    return oldest === Infinity ? Atomics.load(words, RETIRE_SEQ) : oldest;
  }

  /** Move retired blocks that no running read can hold to the free lists. */
  private reclaim(): void {
    const oldest = this.oldestReadSequence();
    if (oldest === -Infinity) return; // a reader without a slot: never reuse
    let kept = 0;
    const retired = this.retired;
    for (let i = 0; i < retired.length; i += 3) {
      const block = retired[i]!, capacity = retired[i + 1]!, sequence = retired[i + 2]!;
      if (sequence < oldest) {
        let list = this.freeBlocks.get(capacity);
        if (list === undefined) this.freeBlocks.set(capacity, list = []);
        list.push(block);
      } else {
        retired[kept++] = block;
        retired[kept++] = capacity;
        retired[kept++] = sequence;
      }
    }
    retired.length = kept;
  }

  /**
   * Announce a read (before any block offset is loaded): blocks superseded from now on are
   * not reused until endRead(). Any thread; one slot per thread and store.
   */
  beginRead(): void {
    const words = this.words;
    if (this.readerSlot < 0) {
      for (let i = 0; i < limits.topologyReaderSlotsMax; i++) {
        if (Atomics.compareExchange(words, READER_SLOTS_AT + i, SLOT_FREE, SLOT_IDLE) === SLOT_FREE) {
          this.readerSlot = i;
          for (let used = Atomics.load(words, READER_SLOTS_USED); used <= i; used = Atomics.load(words, READER_SLOTS_USED)) {
            if (Atomics.compareExchange(words, READER_SLOTS_USED, used, i + 1) === used) break;
          }
          break;
        }
      }
      if (this.readerSlot < 0) {
        // Out of slots: this read is safe only if nothing is ever reused again.
        Atomics.store(words, READERS_OVERFLOW, 1);
        return;
      }
    }
    Atomics.store(words, READER_SLOTS_AT + this.readerSlot, Atomics.load(words, RETIRE_SEQ) + 2);
  }

  /** The read announced by beginRead() ended. */
  endRead(): void {
    if (this.readerSlot >= 0) Atomics.store(this.words, READER_SLOTS_AT + this.readerSlot, SLOT_IDLE);
  }

  /** This thread's reader slot, or -1 while it has none. */
  get readerSlotIndex(): number {
    return this.readerSlot;
  }

  /**
   * Free the reader slot of a thread that died (the reader pool learns of deaths): a read it
   * announced will never end, and would keep superseded blocks from being reused forever.
   */
  freeDeadReaderSlot(slot: number): void {
    Atomics.store(this.words, READER_SLOTS_AT + slot, SLOT_FREE);
  }

  /** Reader slots inside a read now (tests). */
  readsInProgress(): number {
    let reading = 0;
    for (let i = 0; i < limits.topologyReaderSlotsMax; i++) if (Atomics.load(this.words, READER_SLOTS_AT + i) > SLOT_IDLE) reading++;
    return reading;
  }

  /** Give this thread's reader slot back (a short-lived attach, such as a snapshot job). */
  releaseReaderSlot(): void {
    if (this.readerSlot >= 0) Atomics.store(this.words, READER_SLOTS_AT + this.readerSlot, SLOT_FREE);
    this.readerSlot = -1;
  }

  /**
   * Roll back the append of edge `edge` to a node's block, if it was made: an append that
   * failed (allocation) left nothing, and one that succeeded is the newest entry, because
   * rollback undoes newest first and an edge is appended once per direction.
   */
  unappend(node: number, which: DirWord, edge: number): void {
    const slot = this.dir(node) + which;
    const block = this.words[slot]!, len = this.words[slot + 1]!;
    if (len > 0 && this.words[block + (len - 1) * ADJ_WORDS + A_EDGE] === edge) Atomics.store(this.words, slot + 1, len - 1);
  }

  /**
   * Set the deleted epoch (0 = live again, for rollback) of edge `edge` in a node's block.
   * Returns false when the block has no such entry (rollback of an append that never
   * happened); callers that expect the entry treat that as corruption.
   */
  markDeleted(node: number, which: DirWord, edge: number, deleted: number): boolean {
    if (deleted !== 0) faultPoint();
    const words = this.words;
    const slot = this.dir(node) + which;
    const block = words[slot]!;
    let lo = 0, hi = words[slot + 1]! - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const e = words[block + mid * ADJ_WORDS + A_EDGE]!;
      if (e === edge) {
        // In place, plain: one aligned u32 never tears, and a racing reader is right with
        // either value (both are 0 or an epoch it does not hold; see the header).
        words[block + mid * ADJ_WORDS + A_DELETED] = deleted;
        return true;
      }
      if (e < edge) lo = mid + 1;
      else hi = mid - 1;
    }
    return false;
  }
}
