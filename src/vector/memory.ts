// The vector memory: one shared WebAssembly.Memory for every vector index of a store (its
// own memory, not the topology's), so that the vector kernels (assembly/vector.ts) and the
// JS twins read the same bytes from any thread. Allocation is a 64-byte aligned bump pointer (V_TOP,
// compare-exchanged: reader threads reserve their scratch from it too) plus writer-side free
// lists by size. Blocks never move, so a reader never has to follow a copy.
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';
import { V_HEADER_WORDS, V_MAGIC, V_TOP, VECTOR_MEMORY_MAGIC } from './layout.js';
import { ScratchSpace } from './scratch.js';

const PAGE_BYTES = 65536;
const PAGES_MAX = 65536;
/** Word offsets are < 2^30; allocations are 16-word (64-byte, a cache line) aligned: records and their vectors start on a line. */
const ALIGN_WORDS = 16;

export class VectorMemory {
  readonly memory: WebAssembly.Memory;
  /** Fixed-length views, re-made when the memory grew (docs/architecture.md "Fixed-length views"). */
  u32: Uint32Array;
  f32: Float32Array;
  private bytes: number;
  /** Writer's free blocks by size in words (only the writer frees; readers never see them). */
  private readonly free = new Map<number, number[]>();
  private freeBytes = 0;
  /** This thread's scratch (made on first search). */
  private scratchSpace: ScratchSpace | null = null;
  /** This thread's kernel instance (kernel.ts), made on first use. */
  kernelInstance: unknown = null;

  private constructor(memory: WebAssembly.Memory) {
    this.memory = memory;
    const buffer = memory.buffer;
    this.bytes = buffer.byteLength;
    this.u32 = new Uint32Array(buffer);
    this.f32 = new Float32Array(buffer);
  }

  /** A new memory; `maximumPages` (64 KiB each, default 65536 = 4 GiB) other than the default: tests only. */
  static create(maximumPages: number = PAGES_MAX): VectorMemory {
    const memory = new WebAssembly.Memory({ initial: 1, maximum: maximumPages, shared: true });
    const vm = new VectorMemory(memory);
    vm.u32[V_MAGIC] = VECTOR_MEMORY_MAGIC;
    Atomics.store(vm.u32, V_TOP, V_HEADER_WORDS);
    return vm;
  }

  static attach(memory: WebAssembly.Memory): VectorMemory {
    const vm = new VectorMemory(memory);
    if (vm.u32[V_MAGIC] !== VECTOR_MEMORY_MAGIC) throw new SvcError('internal_error', 'internal error: not a vector memory');
    return vm;
  }

  /** Re-make the views when the memory is longer than they are (any thread, any time). */
  refresh(): void {
    let buffer = this.memory.buffer;
    if (buffer.byteLength === this.bytes) return;
    this.bytes = buffer.byteLength;
    this.u32 = new Uint32Array(buffer);
    this.f32 = new Float32Array(buffer);
  }

  /**
   * Views that cover every word allocated so far. V_TOP is loaded with Atomics (it only
   * grows, and is raised before anything in the new words is published), so after the
   * acquire that found a graph's data, covering V_TOP covers that data.
   */
  cover(): void {
    const top = Atomics.load(this.u32, V_TOP);
    if (top * 4 <= this.bytes) return;
    this.refresh();
    // A thread's buffer object can lag behind another thread's grow until it asks again.
    if (top * 4 > this.bytes) { this.memory.grow(0); this.refresh(); }
    if (top * 4 > this.bytes) throw new SvcError('internal_error', `internal error: vector memory shorter (${this.bytes} bytes) than its heap top (${top * 4})`);
  }

  /** Words reserved from the heap (any thread): compare-exchange on V_TOP, then grow to cover. */
  reserve(words: number): number {
    if (!Number.isInteger(words) || words <= 0) throw new SvcError('internal_error', `internal error: vector allocation of ${words} words`);
    const size = (words + ALIGN_WORDS - 1) & ~(ALIGN_WORDS - 1);
    let at: number;
    for (;;) {
      at = Atomics.load(this.u32, V_TOP);
      const end = at + size;
      if (end * 4 > PAGES_MAX * PAGE_BYTES) throw new SvcError('storage_error', `vector memory full: ${words} more words do not fit in 4 GiB (${at * 4} bytes used)`);
      this.ensureBytes(end * 4);
      if (Atomics.compareExchange(this.u32, V_TOP, at, end) === at) break;
    }
    return at;
  }

  private ensureBytes(need: number): void {
    while (this.memory.buffer.byteLength < need) {
      const have = this.memory.buffer.byteLength;
      const exact = Math.ceil((need - have) / PAGE_BYTES);
      const pages = Math.min(PAGES_MAX - have / PAGE_BYTES, Math.max(exact, Math.ceil(have / PAGE_BYTES / 8), 16));
      try {
        this.memory.grow(pages);
      } catch {
        // Near the maximum (the memory's own, which JS cannot read): grow by what is needed.
        try {
          this.memory.grow(exact);
        } catch {
          throw new SvcError('storage_error', `vector memory full: cannot grow to ${need} bytes`);
        }
      }
    }
    this.refresh();
  }

  /** Writer: `words` zeroed words (word offset). */
  allocateWords(words: number): number {
    const size = (words + ALIGN_WORDS - 1) & ~(ALIGN_WORDS - 1);
    const list = this.free.get(size);
    if (list !== undefined && list.length > 0) {
      const at = list.pop()!;
      this.freeBytes -= size * 4;
      this.u32.fill(0, at, at + size);
      return at;
    }
    const at = this.reserve(size);
    // Fresh heap words are zero unless an earlier memory image put data there (import writes all of its words).
    this.u32.fill(0, at, at + size);
    return at;
  }

  /** Writer: give back a block; the caller guarantees no reader can still use it. */
  freeWords(at: number, words: number): void {
    const size = (words + ALIGN_WORDS - 1) & ~(ALIGN_WORDS - 1);
    if (at < V_HEADER_WORDS || at % ALIGN_WORDS !== 0 || (at + size) * 4 > this.bytes) throw new SvcError('internal_error', `internal error: freeing vector words [${at}, +${words})`);
    let list = this.free.get(size);
    if (list === undefined) this.free.set(size, list = []);
    list.push(at);
    this.freeBytes += size * 4;
  }

  /** Bytes allocated and not freed (heap top minus the writer's free lists). */
  usedBytes(): number {
    return Atomics.load(this.u32, V_TOP) * 4 - this.freeBytes;
  }

  /** This thread's search scratch (scratch.ts). */
  scratch(): ScratchSpace {
    return this.scratchSpace ??= new ScratchSpace(this, limits.vectorScratchBytesPerThreadMax);
  }
}
