// Reuse of property-version space in the heap (store.ts), by the same epoch-based
// reclamation as the adjacency's superseded blocks (topology.ts): writer thread only.
//
// A version stops being reachable for new reads in three ways, and each is retired when
// no new read can reach it any more:
//   - superseded (a newer version of its element) or left by a deletion, by batch E: from
//     the moment E is visible (published), since a read at S < E walks the chain to it.
//     Batches committed but not yet visible (durable storage) wait in `awaiting`;
//   - written by batch P that rolled back: at once (the pointers are restored), as if
//     superseded at P: a read, or an export of an older cut, may have loaded a pointer of
//     the batch and be walking past its versions.
// Retiring takes a retire sequence from the topology (one Atomics.add): a read that
// announced itself after that (Topology.beginRead, before it loads VISIBLE) reads at an
// epoch >= E, so it stops at a newer version and never follows a pointer to this one. The
// space is reused once every running read announced a later sequence
// (Topology.oldestReadSequence) AND no held snapshot cut is older than E (Store.cut(): an
// export as of C < E still reads the version visible at C, and walks to it from the head).
//
// Free space is kept in lists by size class (m * 2^k words, m = 4..7, the class of a block
// being the largest not above its size). A version of w words takes the newest block of
// its own class if that one is large enough, else the newest block of the first non-empty
// class above (every block there is larger than w); what it leaves, if it could hold a
// version (a header), goes back to the lists. Blocks are never merged.
import type { Topology } from './topology.js';

/** Words of a version header (store.ts HEAP_HEADER_BYTES / 4): the smallest block worth keeping. */
const HEADER_WORDS = 4;
/** Allocations that found no free block between two scans of the reader slots (as topology.ts). */
const RECLAIM_EVERY = 16;

/** Size class of a block of `words` (>= 4) words: the largest m * 2^k <= words, m in 4..7. */
function classOf(words: number): number {
  const k = 31 - Math.clz32(words);
  return (k - 2) * 4 + ((words >>> (k - 2)) - 4);
}

export class VersionReuse {
  /** Versions the open batch superseded or whose element it deleted. */
  private readonly superseded: number[] = [];
  /** Blocks the open batch took from the free lists: [ptr, words]. */
  private readonly reusedInBatch: number[] = [];
  /** The heap's bump pointer when the open batch began (what it appended lies above). */
  private batchBumpStart = 0;
  /** Versions superseded by committed batches not yet visible: [ptr, epoch], epochs ascending. */
  private awaiting: number[] = [];
  /** Retired blocks waiting for the reads and cuts that may hold them: [ptr, words, sequence, epoch]. */
  private retired: number[] = [];
  private retiredHead = 0;
  /** Free blocks by size class: [ptr, words, ...]. */
  private readonly free: number[][] = [];
  /** Bytes in the free lists (reusable now). */
  freeBytes = 0;
  /** Words retired and not free yet (waiting for reads or cuts). */
  private retiredWords = 0;
  private allocationsSinceReclaim = 0;

  constructor(
    private readonly topology: Topology,
    /** Words of the version at `ptr` (its header is intact until it is reused). */
    private readonly versionWords: (ptr: number) => number,
    /** The epoch of the oldest snapshot cut whose export may still run (Infinity: none). */
    private readonly oldestHeldCut: () => number,
  ) {}

  beginBatch(bumpPointer: number): void {
    this.batchBumpStart = bumpPointer;
    this.superseded.length = 0;
    this.reusedInBatch.length = 0;
  }

  /** The open batch made version `ptr` unreachable from its epoch on (0: no version). */
  supersede(ptr: number): void {
    if (ptr !== 0) this.superseded.push(ptr);
  }

  /** The open batch committed as `epoch`; `visible` is the newest epoch reads may see now. */
  committed(epoch: number, visible: number): void {
    for (const ptr of this.superseded) this.awaiting.push(ptr, epoch);
    this.superseded.length = 0;
    this.reusedInBatch.length = 0;
    this.published(visible);
  }

  /** Epochs up to `visible` are visible: what they superseded is retired. */
  published(visible: number): void {
    const awaiting = this.awaiting;
    let done = 0;
    while (done < awaiting.length && awaiting[done + 1]! <= visible) done += 2;
    if (done === 0) return;
    const sequence = this.topology.retireSequence();
    for (let i = 0; i < done; i += 2) this.retire(awaiting[i]!, this.versionWords(awaiting[i]!), sequence, awaiting[i + 1]!);
    this.awaiting = done === awaiting.length ? [] : awaiting.slice(done);
  }

  /**
   * The open batch rolled back, its pointers restored: what it appended (everything above
   * the bump pointer it began with, and the blocks it reused) is retired; what it superseded
   * stays in use.
   */
  rolledBack(bumpPointer: number, epoch: number): void {
    this.superseded.length = 0;
    const reused = this.reusedInBatch;
    if (bumpPointer === this.batchBumpStart && reused.length === 0) return;
    // Reads that loaded a pointer of the batch may be walking its versions right now.
    const sequence = this.topology.retireSequence();
    if (bumpPointer > this.batchBumpStart) this.retire(this.batchBumpStart, (bumpPointer - this.batchBumpStart) >>> 2, sequence, epoch);
    for (let i = 0; i < reused.length; i += 2) this.retire(reused[i]!, reused[i + 1]!, sequence, epoch);
    reused.length = 0;
  }

  private retire(ptr: number, words: number, sequence: number, epoch: number): void {
    this.retired.push(ptr, words, sequence, epoch);
    this.retiredWords += words;
  }

  /** A free block of `words` words for a new version (its byte offset), or -1: append it. */
  take(words: number): number {
    let ptr = this.fromLists(words);
    if (ptr < 0 && this.retiredHead < this.retired.length && ++this.allocationsSinceReclaim >= RECLAIM_EVERY) {
      this.allocationsSinceReclaim = 0;
      this.reclaim();
      ptr = this.fromLists(words);
    }
    if (ptr >= 0) this.reusedInBatch.push(ptr, words);
    return ptr;
  }

  private fromLists(words: number): number {
    if (this.freeBytes === 0) return -1;
    const free = this.free;
    const own = classOf(words);
    let list = free[own];
    let at = list === undefined ? -1 : list.length - 2;
    if (at < 0 || list![at + 1]! < words) {
      // Every block of a higher class is larger than `words`.
      at = -1;
      for (let c = own + 1; c < free.length; c++) {
        list = free[c];
        if (list !== undefined && list.length > 0) { at = list.length - 2; break; }
      }
      if (at < 0) return -1;
    }
    const ptr = list![at]!, size = list![at + 1]!;
    list!.length = at;
    this.freeBytes -= size * 4;
    if (size - words >= HEADER_WORDS) this.addFree(ptr + words * 4, size - words);
    return ptr;
  }

  private addFree(ptr: number, words: number): void {
    const c = classOf(words);
    while (this.free.length <= c) this.free.push([]);
    this.free[c]!.push(ptr, words);
    this.freeBytes += words * 4;
  }

  /** Move retired blocks that no running read and no held cut can reach to the free lists. */
  reclaim(): void {
    const oldestRead = this.topology.oldestReadSequence();
    if (oldestRead === -Infinity) return; // a reader without a slot: never reuse
    const oldestCut = this.oldestHeldCut();
    const retired = this.retired;
    let i = this.retiredHead;
    // In retire order: sequences ascend; a cut that holds one epoch may hold later ones too.
    for (; i < retired.length; i += 4) {
      if (retired[i + 2]! >= oldestRead || retired[i + 3]! > oldestCut) break;
      this.addFree(retired[i]!, retired[i + 1]!);
      this.retiredWords -= retired[i + 1]!;
    }
    if (i === retired.length) {
      this.retired = [];
      this.retiredHead = 0;
    } else if (i > 4096 && i * 2 > retired.length) {
      this.retired = retired.slice(i);
      this.retiredHead = 0;
    } else {
      this.retiredHead = i;
    }
  }

  /** Bytes the heap will reuse before it grows: free, or retired and waiting for reads or cuts. */
  reclaimableBytes(): number {
    return this.freeBytes + this.retiredWords * 4;
  }
}
