// The topology: every node's adjacency directory and adjacency blocks, in ONE shared
// WebAssembly.Memory, so the AssemblyScript traversal kernels (assembly/) read exactly the
// bytes the JS operators read. JS owns all allocation; kernels only read.
//
// Layout (u32 words, offsets are word indexes; the kernels use byte address = word * 4):
//   [0]                     HEAP_USED: words allocated so far (bump pointer, writer only)
//   [1]                     SCRATCH_USED: words handed out as per-thread kernel scratch
//   [CHUNK_TABLE ..+CHUNKS) directory chunk table: word offset of the directory chunk for
//                           nodes k * CHUNK_NODES .. (k+1) * CHUNK_NODES - 1, 0 = none yet
//   [HEAP_START ..)         heap: directory chunks and adjacency blocks, never freed
// Directory entry (DIR_WORDS): [outOff, outLen, outCap, inOff, inLen, inCap]
// Adjacency entry (ADJ_WORDS): [edge, neighbor, label, created, deleted], in edge ID order.
//
// Concurrency (one writer, many readers): nothing a reader can reach is overwritten except
// the `deleted` word of an entry (one aligned u32) and the lengths. A full block is copied
// into a larger one and the new offset published before the new length; readers load the
// length first, so either block is valid for the length they read. Entries of a rolled-back
// batch are cut off by lowering the length again: their `created` is an epoch no reader holds.
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';

export const DIR_WORDS = 6;
export const DIR_OUT = 0, DIR_IN = 3; // + 0 offset, + 1 length, + 2 capacity
export const ADJ_WORDS = 5;
export const A_EDGE = 0, A_NEIGHBOR = 1, A_LABEL = 2, A_CREATED = 3, A_DELETED = 4;

const T_HEAP_USED = 0;
const T_SCRATCH_USED = 1;
const CHUNK_TABLE = 2;
const CHUNK_SHIFT = 14;
const CHUNK_NODES = 1 << CHUNK_SHIFT;
const CHUNK_WORDS = CHUNK_NODES * DIR_WORDS;
const HEAP_START = 8192;
const PAGE_BYTES = 65536;
const PAGES_MAX = 65536;
const ADJ_BLOCK_MIN = 4;

/** The direction word of a directory entry: DIR_OUT or DIR_IN. */
export type DirWord = typeof DIR_OUT | typeof DIR_IN;

export class Topology {
  readonly memory: WebAssembly.Memory;
  /** Refreshed when the memory grew (views over WebAssembly memory do not track growth). */
  words: Uint32Array;

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
    topo.words[T_SCRATCH_USED] = 0;
    return topo;
  }

  /** The allocated words (directory + blocks) for a snapshot. Writer, between batches. */
  exportBytes(): Uint8Array {
    return new Uint8Array(this.memory.buffer, 0, this.words[T_HEAP_USED]! * 4).slice();
  }

  /** Make `words` cover word `end` (exclusive); another thread may have grown the memory. */
  cover(end: number): Uint32Array {
    if (end > this.words.length) {
      this.words = new Uint32Array(this.memory.buffer);
      if (end > this.words.length) throw new SvcError('internal_error', `internal error: topology word ${end} is beyond the memory`);
    }
    return this.words;
  }

  /** Word offset of node `node`'s directory entry (the node must have been added). */
  dir(node: number): number {
    let words = this.words;
    const chunk = words[CHUNK_TABLE + (node >>> CHUNK_SHIFT)]!;
    const at = chunk + (node & (CHUNK_NODES - 1)) * DIR_WORDS;
    if (at + DIR_WORDS > words.length) words = this.cover(at + DIR_WORDS);
    return at;
  }

  /** Entries in a node's block; load it BEFORE the offset (see the header). */
  length(dir: number, which: DirWord): number {
    return Atomics.load(this.words, dir + which + 1);
  }

  /** Word offset of a node's block, with `words` made to cover `length` entries of it. */
  offset(dir: number, which: DirWord, length: number): number {
    const off = this.words[dir + which]!;
    if (off + length * ADJ_WORDS > this.words.length) this.cover(off + length * ADJ_WORDS);
    return off;
  }

  // ------------------------------------------------------------ writer

  private allocate(wordCount: number): number {
    // Atomic because reader threads take kernel scratch from the same heap.
    const at = Atomics.add(this.words, T_HEAP_USED, wordCount);
    const end = at + wordCount;
    if (end > limits.topologyWordsMax) {
      Atomics.sub(this.words, T_HEAP_USED, wordCount);
      throw new SvcError('storage_error', 'storage error: adjacency heap is full');
    }
    this.grow(end);
    return at;
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
      // Fresh memory is zero: every entry of the chunk starts as empty blocks.
      Atomics.store(this.words, slot, chunk);
    }
  }

  /** Append an entry to a node's block (edges arrive in ascending ID order). */
  append(node: number, which: DirWord, edge: number, neighbor: number, label: number, created: number): void {
    const dir = this.dir(node) + which;
    let words = this.words;
    let off = words[dir]!;
    const len = words[dir + 1]!;
    const cap = words[dir + 2]!;
    if (len === cap) {
      const newCap = Math.max(ADJ_BLOCK_MIN, cap * 2);
      const newOff = this.allocate(newCap * ADJ_WORDS);
      words = this.words;
      words.copyWithin(newOff, off, off + len * ADJ_WORDS);
      // Readers load the length first, so the old block stays valid for the old length.
      Atomics.store(words, dir, newOff);
      words[dir + 2] = newCap;
      off = newOff;
    }
    const p = off + len * ADJ_WORDS;
    words[p + A_EDGE] = edge;
    words[p + A_NEIGHBOR] = neighbor;
    words[p + A_LABEL] = label;
    words[p + A_DELETED] = 0;
    words[p + A_CREATED] = created;
    Atomics.store(words, dir + 1, len + 1);
  }

  /** Roll back the newest append of a node's block. */
  unappend(node: number, which: DirWord, edge: number): void {
    const dir = this.dir(node) + which;
    const len = this.words[dir + 1]!;
    if (len === 0 || this.words[this.words[dir]! + (len - 1) * ADJ_WORDS + A_EDGE] !== edge) {
      throw new SvcError('internal_error', `internal error: rollback of edge ${edge} is not the newest adjacency entry`);
    }
    Atomics.store(this.words, dir + 1, len - 1);
  }

  /** Set the deleted epoch (0 = live again, for rollback) of edge `edge` in a node's block. */
  markDeleted(node: number, which: DirWord, edge: number, deleted: number): void {
    const dir = this.dir(node) + which;
    const words = this.words;
    const off = words[dir]!;
    let lo = 0, hi = words[dir + 1]! - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const e = words[off + mid * ADJ_WORDS + A_EDGE]!;
      if (e === edge) {
        words[off + mid * ADJ_WORDS + A_DELETED] = deleted;
        return;
      }
      if (e < edge) lo = mid + 1;
      else hi = mid - 1;
    }
    throw new SvcError('internal_error', `internal error: edge ${edge} is missing from node ${node}'s adjacency`);
  }

  /**
   * `wordCount` words of kernel scratch for one thread, zeroed. Scratch is taken from the
   * top of the heap at the time of the call and is never reused by the writer, because the
   * writer's next allocation starts after it (HEAP_USED is advanced atomically).
   */
  allocateScratch(wordCount: number): number {
    const at = Atomics.add(this.words, T_HEAP_USED, wordCount);
    const end = at + wordCount;
    if (end > limits.topologyWordsMax) throw new SvcError('storage_error', 'storage error: adjacency heap is full');
    Atomics.add(this.words, T_SCRATCH_USED, wordCount);
    this.grow(end);
    this.words.fill(0, at, end);
    return at;
  }
}
