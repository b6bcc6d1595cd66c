// One thread's kernel scratch: memory the WebAssembly kernels can address, so it lives in
// the topology memory (topology.ts), in segments the thread reserves from the topology heap
// and keeps. Within a query, scratch is handed out by a bump pointer over the segments and
// given back in LIFO order (mark / release, in a `finally`), so a finished query leaves
// nothing taken and the next query on the thread reuses the same segments. What a thread
// reserves in all is bounded by limits.scratchBytesPerThreadMax; a query that needs more
// fails with invalid_query and the segments stay for the next one.
//
// The heap never frees, so segments are reserved large (at least what the thread holds
// already: sizes double) and reused, never replaced: a thread's reservation over its
// lifetime is its peak need rounded up, at most the limit.
import { limits } from '../limits.js';
import { queryError, SvcError } from '../protocol/errors.js';
import type { Topology } from './topology.js';

/** Smallest segment a thread reserves (256 KiB): what a typical query needs in all. */
const SEGMENT_WORDS_MIN = 1 << 16;
/** Marks are (segment + 1) * MARK_SCALE + words used in it; a segment is < 2^32 words. */
const MARK_SCALE = 2 ** 32;

export class ScratchArena {
  private readonly topo: Topology;
  private readonly bytesMax: number;
  private readonly wordsMax: number;
  /** Reserved segments, in reservation order: word offset and size. */
  private readonly starts: number[] = [];
  private readonly sizes: number[] = [];
  private reservedWords = 0;
  /** Segment being filled (-1: none yet) and words taken from it. */
  private segment = -1;
  private used = 0;

  /** `bytesMax` other than the limit: tests only. */
  constructor(topo: Topology, bytesMax: number = limits.scratchBytesPerThreadMax) {
    this.topo = topo;
    this.bytesMax = bytesMax;
    this.wordsMax = Math.floor(bytesMax / 4);
  }

  /** Bytes this thread holds in the topology heap (taken or not). */
  get reservedBytes(): number {
    return this.reservedWords * 4;
  }

  /** Where the scratch stands; release(mark) gives back everything taken after it. */
  mark(): number {
    return (this.segment + 1) * MARK_SCALE + this.used;
  }

  release(mark: number): void {
    this.segment = Math.floor(mark / MARK_SCALE) - 1;
    this.used = mark % MARK_SCALE;
  }

  /** Whether nothing is taken (between queries). */
  idle(): boolean {
    return this.mark() === 0;
  }

  /**
   * `wordCount` words (word offset in the topology memory), with `topo.words` covering them;
   * their content is whatever an earlier query left. Offsets taken earlier never move.
   */
  take(wordCount: number): number {
    if (!Number.isInteger(wordCount) || wordCount <= 0) throw new SvcError('internal_error', `internal error: scratch request of ${wordCount} words`);
    const at = this.place(wordCount);
    this.topo.cover(at + wordCount);
    return at;
  }

  /** The same, zeroed. */
  takeZeroed(wordCount: number): number {
    const at = this.take(wordCount);
    this.topo.words.fill(0, at, at + wordCount);
    return at;
  }

  private place(wordCount: number): number {
    const s = this.segment;
    if (s >= 0 && this.used + wordCount <= this.sizes[s]!) {
      const at = this.starts[s]! + this.used;
      this.used += wordCount;
      return at;
    }
    // A later segment this thread already holds; smaller ones are skipped for this query.
    for (let next = s + 1; next < this.starts.length; next++) {
      if (this.sizes[next]! >= wordCount) {
        this.segment = next;
        this.used = wordCount;
        return this.starts[next]!;
      }
    }
    // A new segment: doubling what the thread holds keeps the count of segments (and the
    // space skipped in them) logarithmic; near the limit, just what is asked.
    let size = Math.max(wordCount, this.reservedWords, SEGMENT_WORDS_MIN);
    if (this.reservedWords + size > this.wordsMax) size = wordCount;
    if (this.reservedWords + size > this.wordsMax) {
      throw queryError(`kernel scratch of one thread would exceed scratchBytesPerThreadMax (${this.bytesMax} bytes)`);
    }
    const at = this.topo.reserveScratch(size);
    this.starts.push(at);
    this.sizes.push(size);
    this.reservedWords += size;
    this.segment = this.starts.length - 1;
    this.used = wordCount;
    return at;
  }
}
