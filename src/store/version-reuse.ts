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
// Free space is kept in one list per exact size up to SIZED_WORDS_MAX words (a bitmap says
// which are non-empty), larger blocks in one list. Updates mostly replace a record by one
// of the same size, so a version of w words first takes a block of exactly w; else the
// smallest block that leaves a remainder able to hold a version (a header), which goes
// back to the lists. Larger blocks are listed by size class (LARGE_CLASS_STEPS classes per
// doubling); a version larger than SIZED_WORDS_MAX, or one no sized block fits, takes the
// first block that fits from its own class up, looking at no more than LARGE_MISSES_MAX
// blocks too small for it in a class, so a take's cost is bounded whatever the free
// space holds. (Size classes for small blocks fragmented: records of varied sizes left
// half of an update round's versions unusable; one list of large blocks, scanned for the
// first fit, cost a scan of thousands of blocks per update once records of 4-32 KiB grew
// and shrank.)
//
// Free blocks merge with their free neighbours, so records that grow find room in what
// their smaller versions left. The writer keeps every free block's start and words in one
// map and its end and start in another (nothing is written into the heap: a word there may
// be a version's bytes). A block being freed absorbs the free block that starts where it
// ends and joins the one that ends where it starts, so no two free blocks touch, in
// whatever order neighbours are freed. The lists are not told: an entry is used only if the
// map has a free block of the list's size starting there when it comes up, and the lists
// are swept once they hold more than twice the free blocks (plus SWEEP_SLACK), so entries
// of sizes no longer asked for do not pile up. The map costs a few tens of bytes per free
// block, which merging and reuse keep few.
import type { Topology } from './topology.js';

/** Words of a version header (store.ts HEAP_HEADER_BYTES / 4): the smallest block worth keeping. */
const HEADER_WORDS = 4;
/** Allocations that found no free block between two scans of the reader slots (as topology.ts). */
const RECLAIM_EVERY = 16;

/** Blocks up to this many words are kept by exact size. */
const SIZED_WORDS_MAX = 1024;
/** Size classes of larger blocks per doubling of size (each spans 1/16 of its power of two). */
const LARGE_CLASS_STEPS = 16;
const LARGE_CLASS_SHIFT = 4;
/** Doublings above SIZED_WORDS_MAX a block can span (the heap's 4 GiB is 2^30 words). */
const LARGE_CLASSES = (31 - 10) * LARGE_CLASS_STEPS;
/** Free blocks too small for a version that a take looks at in one class before it tries the next. */
const LARGE_MISSES_MAX = 64;
/** List entries beyond twice the free blocks before the lists are swept of stale ones. */
const SWEEP_SLACK = 4096;

export class VersionReuse {
  /** Versions the open batch superseded or whose element it deleted. */
  private readonly superseded: number[] = [];
  /** Blocks the open batch took from the free lists: [ptr, words]. */
  private readonly reusedInBatch: number[] = [];
  /** The heap's bump pointer when the open batch began (what it appended lies above). */
  private batchBumpStart = 0;
  /** Versions superseded by committed batches not yet visible: [ptr, epoch], epochs ascending. */
  private readonly awaiting: number[] = [];
  /** Retired blocks waiting for the reads and cuts that may hold them: [ptr, words, sequence, epoch]. */
  private readonly retired: number[] = [];
  private retiredHead = 0;
  /** Free blocks of each size up to SIZED_WORDS_MAX words: their offsets (some stale). */
  private readonly sized: number[][] = Array.from({ length: SIZED_WORDS_MAX + 1 }, () => []);
  /** Bit w: sized[w] is not empty. */
  private readonly sizedNonEmpty = new Uint32Array((SIZED_WORDS_MAX >>> 5) + 1);
  /** Free blocks larger than SIZED_WORDS_MAX words, by largeClassOf(words): their offsets (some stale). */
  private readonly large: number[][] = Array.from({ length: LARGE_CLASSES }, () => []);
  /** Bit c: large[c] is not empty. */
  private readonly largeNonEmpty = new Uint32Array((LARGE_CLASSES >>> 5) + 1);
  /** Bytes in the free lists (reusable now). */
  freeBytes = 0;
  /** Every free block: its start (byte offset) and words. */
  private readonly freeAt = new Map<number, number>();
  /** Every free block: its end (byte offset past it) and start. */
  private readonly freeEnd = new Map<number, number>();
  /** Entries in the lists, stale ones included. */
  private listed = 0;
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
    // Once per batch (a scan of the claimed reader slots): what the batches before retired
    // is then free for this one's first versions.
    if (this.retiredHead < this.retired.length) this.reclaim();
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
    // In place: these lists live as long as the store (no garbage per batch).
    awaiting.copyWithin(0, done);
    awaiting.length -= done;
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
    if (words <= SIZED_WORDS_MAX) {
      let ptr = this.popSized(words);
      // Else the smallest size that leaves a rest able to hold a version.
      for (let size = this.nextSized(words + HEADER_WORDS); ptr < 0 && size >= 0; size = this.nextSized(size + 1)) ptr = this.popSized(size);
      if (ptr >= 0) return this.split(ptr, words);
    }
    // Blocks of the version's own class may be too small for it; from the next class up
    // (almost) every one fits.
    for (let c = this.nextLarge(words > SIZED_WORDS_MAX ? largeClassOf(words) : 0); c >= 0; c = this.nextLarge(c + 1)) {
      const list = this.large[c]!;
      let misses = 0;
      // From the end, so that stale entries are dropped as they come up.
      for (let i = list.length - 1; i >= 0; i--) {
        const at = list[i]!, size = this.freeAt.get(at);
        const listedHere = size !== undefined && largeListOf(size) === c;
        if (listedHere && size !== words && size < words + HEADER_WORDS) {
          if (++misses >= LARGE_MISSES_MAX) break; // on to the next class
          continue;
        }
        list[i] = list[list.length - 1]!;
        list.length--;
        this.listed--;
        if (list.length === 0) clearBit(this.largeNonEmpty, c);
        if (listedHere) return this.split(at, words);
      }
    }
    return -1;
  }

  /** The smallest class >= `from` whose list may hold a free block, or -1. */
  private nextLarge(from: number): number {
    return nextSetBit(this.largeNonEmpty, from, LARGE_CLASSES - 1);
  }

  /** A free block of exactly `size` words from its list (-1: none left). */
  private popSized(size: number): number {
    const list = this.sized[size]!;
    let ptr = -1;
    while (list.length > 0) {
      const at = list.pop()!;
      this.listed--;
      // Still a free block of this size (it may have been absorbed or taken since it was listed).
      if (this.freeAt.get(at) === size) {
        ptr = at;
        break;
      }
    }
    if (list.length === 0) clearBit(this.sizedNonEmpty, size);
    return ptr;
  }

  /** Take `words` words at the start of free block `ptr`; the rest stays free. */
  private split(ptr: number, words: number): number {
    const size = this.freeAt.get(ptr)!;
    this.freeAt.delete(ptr);
    this.freeEnd.delete(ptr + size * 4);
    this.freeBytes -= size * 4;
    if (size > words) this.addFree(ptr + words * 4, size - words);
    return ptr;
  }

  /** The smallest size >= `from` (<= SIZED_WORDS_MAX) whose list may hold a free block, or -1. */
  private nextSized(from: number): number {
    return nextSetBit(this.sizedNonEmpty, from, SIZED_WORDS_MAX);
  }

  /** Free `words` words at `ptr` (a unit no read can reach), merged with the free blocks on either side. */
  private addFree(ptr: number, words: number): void {
    this.freeBytes += words * 4;
    // Their list entries are stale from now on.
    const next = this.freeAt.get(ptr + words * 4);
    if (next !== undefined) {
      this.freeAt.delete(ptr + words * 4);
      this.freeEnd.delete(ptr + (words + next) * 4);
      words += next;
    }
    const previous = this.freeEnd.get(ptr);
    if (previous !== undefined) {
      this.freeEnd.delete(ptr);
      words += (ptr - previous) >>> 2;
      ptr = previous;
    }
    this.freeAt.set(ptr, words);
    this.freeEnd.set(ptr + words * 4, ptr);
    this.listed++;
    if (words <= SIZED_WORDS_MAX) {
      this.sized[words]!.push(ptr);
      setBit(this.sizedNonEmpty, words);
    } else {
      const c = largeClassOf(words);
      this.large[c]!.push(ptr);
      setBit(this.largeNonEmpty, c);
    }
    if (this.listed > 2 * this.freeAt.size + SWEEP_SLACK) this.sweep();
  }

  /** Drop the list entries that no longer name a free block of their list (and repeats). */
  private sweep(): void {
    const seen = new Set<number>();
    const sweepLists = (lists: number[][], nonEmpty: Uint32Array, listOf: (words: number) => number): number => {
      let listed = 0;
      for (let l = 0; l < lists.length; l++) {
        const list = lists[l]!;
        if (list.length === 0) continue;
        let kept = 0;
        for (const at of list) {
          const words = this.freeAt.get(at);
          if (words === undefined || listOf(words) !== l || seen.has(at)) continue;
          seen.add(at);
          list[kept++] = at;
        }
        list.length = kept;
        if (kept === 0) clearBit(nonEmpty, l);
        listed += kept;
      }
      return listed;
    };
    this.listed = sweepLists(this.sized, this.sizedNonEmpty, sizedListOf) + sweepLists(this.large, this.largeNonEmpty, largeListOf);
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
      retired.length = 0;
      this.retiredHead = 0;
    } else if (i > 4096 && i * 2 > retired.length) {
      retired.copyWithin(0, i);
      retired.length -= i;
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

/** The exact-size list a free block of `words` words belongs in, or -1 (a large one). */
function sizedListOf(words: number): number {
  return words <= SIZED_WORDS_MAX ? words : -1;
}

/** The size-class list a free block of `words` words belongs in, or -1 (a sized one). */
function largeListOf(words: number): number {
  return words > SIZED_WORDS_MAX ? largeClassOf(words) : -1;
}

/** The size class of a free block of more than SIZED_WORDS_MAX words. */
function largeClassOf(words: number): number {
  const doubling = 31 - Math.clz32(words); // >= 10
  return (doubling - 10) * LARGE_CLASS_STEPS + ((words >>> (doubling - LARGE_CLASS_SHIFT)) & (LARGE_CLASS_STEPS - 1));
}

/** The lowest set bit at or above `from` (and at most `last`), or -1. */
function nextSetBit(bits: Uint32Array, from: number, last: number): number {
  if (from > last) return -1;
  let i = from >>> 5;
  let word = bits[i]! & (~0 << (from & 31));
  for (;;) {
    if (word !== 0) {
      const bit = (i << 5) + (31 - Math.clz32(word & -word));
      return bit <= last ? bit : -1;
    }
    if (++i >= bits.length) return -1;
    word = bits[i]!;
  }
}

function setBit(bits: Uint32Array, bit: number): void {
  bits[bit >>> 5]! |= 1 << (bit & 31);
}

function clearBit(bits: Uint32Array, bit: number): void {
  bits[bit >>> 5]! &= ~(1 << (bit & 31));
}
