// The text memory: one shared WebAssembly.Memory for every text index of a store, readable
// by any thread without copies or locks (docs/text.md §2). Allocation is a bump pointer
// (M_TOP, compare-exchanged) plus the writer's free lists by size. A block the writer
// replaces (a grown postings block, a directory, a compacted list) is retired and reused
// only once every read that could still hold its offset has ended (reader slots, below).
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';
import { M_MAGIC, M_OVERFLOW, M_SEQ, M_SLOT0, M_TOP, NOT_READING, TEXT_MEMORY_MAGIC } from './layout.js';

const PAGE_BYTES = 65536;
const PAGES_MAX = 65536;
const ALIGN_WORDS = 2;
const HEADER_WORDS = M_SLOT0 + 2 * limits.textReaderSlotsMax;
/** Retired blocks are looked at again after this many more retirements. */
const RECLAIM_EVERY = 64;

/** What reader threads need to attach (structured-cloneable). */
export interface TextMemoryShared {
  memory: WebAssembly.Memory;
}

const fail = (msg: string): never => {
  throw new SvcError('internal_error', `internal error: text memory: ${msg}`);
};

// This thread's reader slot per memory (claimed on first read, kept for the thread's life).
const slots = new WeakMap<WebAssembly.Memory, number>();

export class TextMemory {
  readonly shared: TextMemoryShared;
  /** Fixed-length views, re-made when the memory grew (docs/architecture.md "Fixed-length views"). */
  u32: Uint32Array;
  u16: Uint16Array;
  private bytes: number;
  // Writer only: free blocks by size in words, and retired blocks waiting for readers.
  private readonly free = new Map<number, number[]>();
  private freeWordsTotal = 0;
  /** The oldest announced read's sequence at the last reclaim() (what has a tag at or below it is free of readers). */
  private oldestAtReclaim = 0;
  private retired: number[] = []; // [at, words, seq] triples
  private retiredSinceReclaim = 0;

  private constructor(memory: WebAssembly.Memory) {
    this.shared = { memory };
    const buffer = memory.buffer;
    this.bytes = buffer.byteLength;
    this.u32 = new Uint32Array(buffer);
    this.u16 = new Uint16Array(buffer);
  }

  static create(): TextMemory {
    const pages = Math.ceil((HEADER_WORDS * 4) / PAGE_BYTES) + 1;
    const memory = new WebAssembly.Memory({ initial: pages, maximum: PAGES_MAX, shared: true });
    const tm = new TextMemory(memory);
    for (let i = 0; i < limits.textReaderSlotsMax; i++) tm.u32[M_SLOT0 + 2 * i + 1] = NOT_READING;
    Atomics.store(tm.u32, M_TOP, HEADER_WORDS);
    Atomics.store(tm.u32, M_MAGIC, TEXT_MEMORY_MAGIC);
    return tm;
  }

  static attach(shared: TextMemoryShared): TextMemory {
    if (!(shared?.memory instanceof WebAssembly.Memory)) fail('attach without a memory');
    const tm = new TextMemory(shared.memory);
    if (Atomics.load(tm.u32, M_MAGIC) !== TEXT_MEMORY_MAGIC) fail('not a text memory');
    return tm;
  }

  private refresh(): void {
    const buffer = this.shared.memory.buffer;
    if (buffer.byteLength === this.bytes) return;
    this.bytes = buffer.byteLength;
    this.u32 = new Uint32Array(buffer);
    this.u16 = new Uint16Array(buffer);
  }

  /**
   * Views that cover every word allocated so far (any thread); true when they were re-made.
   * M_TOP only grows and is raised before anything in the new words is published, so after
   * the acquire that found a partition's data, covering M_TOP covers that data.
   */
  cover(): boolean {
    const top = Atomics.load(this.u32, M_TOP);
    if (top * 4 <= this.bytes) return false;
    this.refresh();
    // A thread's buffer object can lag behind another thread's grow until it asks again.
    if (top * 4 > this.bytes) { this.shared.memory.grow(0); this.refresh(); }
    if (top * 4 > this.bytes) fail(`memory shorter (${this.bytes} bytes) than its heap top (${top * 4})`);
    return true;
  }

  private reserve(size: number): number {
    for (;;) {
      const at = Atomics.load(this.u32, M_TOP);
      const end = at + size;
      if (end * 4 > limits.textMemoryBytesMax) {
        throw new SvcError('storage_error', `text memory full: ${size * 4} more bytes do not fit in ${limits.textMemoryBytesMax} (${at * 4} used)`);
      }
      this.ensureBytes(end * 4);
      if (Atomics.compareExchange(this.u32, M_TOP, at, end) === at) return at;
    }
  }

  private ensureBytes(need: number): void {
    while (this.shared.memory.buffer.byteLength < need) {
      const have = this.shared.memory.buffer.byteLength;
      // Grow by at least 1/4 of the memory: growing copies nothing, but each grow makes every
      // thread re-make its views.
      const pages = Math.min(PAGES_MAX - have / PAGE_BYTES, Math.max(Math.ceil((need - have) / PAGE_BYTES), Math.ceil(have / PAGE_BYTES / 4), 16));
      try {
        this.shared.memory.grow(pages);
      } catch {
        throw new SvcError('storage_error', `text memory full: cannot grow to ${need} bytes`);
      }
    }
    this.refresh();
  }

  /** Writer: `words` zeroed words (word offset). */
  allocate(words: number): number {
    if (!(Number.isInteger(words) && words > 0)) fail(`allocation of ${words} words`);
    const size = (words + ALIGN_WORDS - 1) & ~(ALIGN_WORDS - 1);
    const list = this.free.get(size);
    let at: number;
    if (list !== undefined && list.length > 0) {
      at = list.pop()!;
      this.freeWordsTotal -= size;
    } else {
      at = this.reserve(size);
    }
    // Fresh heap words may hold an older image's bytes only if someone wrote past M_TOP: clear anyway (cheap, and free-list blocks need it).
    this.u32.fill(0, at, at + size);
    return at;
  }

  /** Writer: give back a block no reader can reach any more and none can still hold (drop, never-published). */
  freeNow(at: number, words: number): void {
    const size = (words + ALIGN_WORDS - 1) & ~(ALIGN_WORDS - 1);
    if (at < HEADER_WORDS || at % ALIGN_WORDS !== 0 || (at + size) * 4 > this.bytes) fail(`freeing words [${at}, +${words})`);
    let list = this.free.get(size);
    if (list === undefined) this.free.set(size, list = []);
    list.push(at);
    this.freeWordsTotal += size;
  }

  /**
   * Writer: a block that was reachable until now (its replacement is already published).
   * It is freed once every read announced at a sequence below its tag has ended.
   */
  retire(at: number, words: number): void {
    const seq = Atomics.add(this.u32, M_SEQ, 1) + 1;
    this.retired.push(at, words, seq);
    if (++this.retiredSinceReclaim >= RECLAIM_EVERY) this.reclaim();
  }

  /**
   * Writer, dropping a partition: its blocks (TextPartition.blocks()) go back to the heap
   * once every read running now has ended. The caller has already made the partition
   * unreachable for reads that start later (the catalog no longer names it).
   */
  dropBlocks(blocks: readonly (readonly [number, number])[]): void {
    for (const [at, words] of blocks) {
      this.retired.push(at, words, Atomics.add(this.u32, M_SEQ, 1) + 1);
    }
    this.reclaim();
  }

  /**
   * Writer: a retire tag for something that is not a block (TextPartition's term ids): it
   * may be reused once reusable(tag), as a block retired at that moment would be freed.
   */
  retireTag(): number {
    return Atomics.add(this.u32, M_SEQ, 1) + 1;
  }

  /** Writer: whether every read that could hold what was retired with `tag` had ended at the last reclaim(). */
  reusable(tag: number): boolean {
    return tag <= this.oldestAtReclaim;
  }

  /** Writer: free the retired blocks no running read can hold. */
  reclaim(): void {
    this.retiredSinceReclaim = 0;
    if (Atomics.load(this.u32, M_OVERFLOW) !== 0) return;
    let oldest = NOT_READING;
    for (let i = 0; i < limits.textReaderSlotsMax; i++) {
      const a = Atomics.load(this.u32, M_SLOT0 + 2 * i + 1);
      if (a < oldest) oldest = a;
    }
    // No read announced: everything retired so far is free of readers.
    this.oldestAtReclaim = oldest === NOT_READING ? Atomics.load(this.u32, M_SEQ) : oldest;
    if (this.retired.length === 0) return;
    const keep: number[] = [];
    for (let i = 0; i < this.retired.length; i += 3) {
      // A read announced at `a` loaded its offsets after it saw sequence `a`; a block retired
      // with tag t > a may still be held by it, one with t <= a was unpublished before it began.
      if (this.retired[i + 2]! <= oldest) this.freeNow(this.retired[i]!, this.retired[i + 1]!);
      else keep.push(this.retired[i]!, this.retired[i + 1]!, this.retired[i + 2]!);
    }
    this.retired = keep;
  }

  /**
   * Any thread, before loading any offset of a text index: announce the current retire
   * sequence in this thread's slot (sequentially consistent, so a block retired after this
   * store has a tag above it). Returns the slot (-1: none free, nothing is reused any more).
   */
  beginRead(): number {
    const memory = this.shared.memory;
    let slot = slots.get(memory);
    if (slot === undefined) {
      slot = -1;
      for (let i = 0; i < limits.textReaderSlotsMax; i++) {
        if (Atomics.compareExchange(this.u32, M_SLOT0 + 2 * i, 0, 1) === 0) { slot = i; break; }
      }
      if (slot < 0) Atomics.store(this.u32, M_OVERFLOW, 1);
      slots.set(memory, slot);
    }
    if (slot >= 0) {
      const w = M_SLOT0 + 2 * slot + 1;
      // Nested reads (export inside a search callback) keep the outer, older announcement.
      if (Atomics.load(this.u32, w) === NOT_READING) Atomics.store(this.u32, w, Atomics.load(this.u32, M_SEQ));
      else return -2;
    }
    return slot;
  }

  endRead(slot: number): void {
    if (slot >= 0) Atomics.store(this.u32, M_SLOT0 + 2 * slot + 1, NOT_READING);
  }

  /** This thread's reader slot in this memory; -1 while it has none (or none was free). */
  get readerSlotIndex(): number {
    return slots.get(this.shared.memory) ?? -1;
  }

  /**
   * Free the slot of a thread that is gone (the reader pool learns of exits): a read it
   * announced will never end, and slots are claimed for a thread's life, so each thread
   * replaced would keep one until none is free and nothing is reused any more.
   */
  freeDeadReaderSlot(slot: number): void {
    Atomics.store(this.u32, M_SLOT0 + 2 * slot + 1, NOT_READING);
    Atomics.store(this.u32, M_SLOT0 + 2 * slot, 0);
  }

  /**
   * Give this thread's slot back, between reads (a thread that may be replaced, such as the
   * snapshot thread, so that no slot outlives it).
   */
  releaseReaderSlot(): void {
    const slot = this.readerSlotIndex;
    slots.delete(this.shared.memory);
    if (slot >= 0) this.freeDeadReaderSlot(slot);
  }

  /** Reader slots inside a read now (tests). */
  readsInProgress(): number {
    let reading = 0;
    for (let i = 0; i < limits.textReaderSlotsMax; i++) if (Atomics.load(this.u32, M_SLOT0 + 2 * i + 1) !== NOT_READING) reading++;
    return reading;
  }

  /** Bytes allocated and not free (heap top minus header and free lists; retired blocks count). */
  usedBytes(): number {
    return (Atomics.load(this.u32, M_TOP) - HEADER_WORDS - this.freeWordsTotal) * 4;
  }
}
