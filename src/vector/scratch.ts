// One thread's search scratch in a vector memory: visited marks, the candidate and result
// heaps, the sorted output, the query, and the neighbour-selection area (layout.ts S_*). The
// kernels address it by word offset, so it lives in the vector memory; each region is
// reserved once from the heap and kept (outgrown regions are replaced by ones twice as large,
// so what a thread holds stays under twice its peak need), bounded by
// limits.vectorScratchBytesPerThreadMax.
import { SvcError } from '../protocol/errors.js';
import { S_BATCH, S_BATCH_CAP, S_CAND, S_CAND_CAP, S_HEADER_WORDS, S_OUT, S_QUERY, S_QUERY_CAP, S_RES, S_RES_CAP, S_SEL, S_SEL_CAP, S_TAG, S_VISITED, S_VISITED_CAP, queryWords } from './layout.js';
import type { VectorMemory } from './memory.js';

export class ScratchSpace {
  private readonly vm: VectorMemory;
  private readonly wordsMax: number;
  private reservedWords = 0;
  /** Word offset of the scratch header. */
  readonly at: number;

  constructor(vm: VectorMemory, bytesMax: number) {
    this.vm = vm;
    this.wordsMax = Math.floor(bytesMax / 4);
    this.at = this.take(S_HEADER_WORDS);
    vm.u32.fill(0, this.at, this.at + S_HEADER_WORDS);
  }

  get reservedBytes(): number {
    return this.reservedWords * 4;
  }

  private take(words: number): number {
    if (this.reservedWords + words > this.wordsMax) {
      throw new SvcError('storage_error', `vector search scratch of this thread would exceed ${this.wordsMax * 4} bytes (limits.vectorScratchBytesPerThreadMax)`);
    }
    const at = this.vm.reserve(words);
    this.reservedWords += words;
    return at;
  }

  /**
   * Make room for a search or insert over `points` points with up to `pairs` results (ef,
   * k, efConstruction), a `dimension`-long query and `selPairs` selection candidates.
   * Returns the header's word offset. Views cover the regions afterwards.
   */
  ensure(points: number, pairs: number, dimension: number, selPairs: number): number {
    const h = this.at;
    let u = this.vm.u32;
    if (u[h + S_VISITED_CAP]! < points) {
      const cap = grown(u[h + S_VISITED_CAP]!, points, 1024);
      // Both regions before the header names either: a failed take leaves the old pair.
      const at = this.take(cap);
      // The candidate heap holds at most one entry per visited point.
      const cand = this.take(2 * cap);
      u = this.vm.u32;
      u.fill(0, at, at + cap);
      u[h + S_VISITED] = at;
      u[h + S_VISITED_CAP] = cap;
      u[h + S_TAG] = 0;
      u[h + S_CAND] = cand;
      u[h + S_CAND_CAP] = cap;
    }
    if (u[h + S_RES_CAP]! < pairs + 1) {
      const cap = grown(u[h + S_RES_CAP]!, pairs + 1, 256);
      const res = this.take(2 * cap);
      const out = this.take(2 * cap);
      u = this.vm.u32;
      u[h + S_RES] = res;
      u[h + S_OUT] = out;
      u[h + S_RES_CAP] = cap;
    }
    if (u[h + S_QUERY_CAP]! < queryWords(dimension)) {
      const cap = grown(u[h + S_QUERY_CAP]!, queryWords(dimension), 128);
      const q = this.take(cap);
      u = this.vm.u32;
      u[h + S_QUERY] = q;
      u[h + S_QUERY_CAP] = cap;
    }
    if (u[h + S_SEL_CAP]! < selPairs) {
      const cap = grown(u[h + S_SEL_CAP]!, selPairs, 64);
      const sel = this.take(3 * cap);
      u = this.vm.u32;
      u[h + S_SEL] = sel;
      u[h + S_SEL_CAP] = cap;
    }
    return h;
  }

  /** Room for a batch of `n` element IDs and their statuses (withinTop()); returns the header. */
  ensureBatch(n: number, dimension: number): number {
    const h = this.ensure(0, 0, dimension, 0);
    if (this.vm.u32[h + S_BATCH_CAP]! < n) {
      const cap = grown(this.vm.u32[h + S_BATCH_CAP]!, n, 1024);
      const at = this.take(2 * cap);
      this.vm.u32[h + S_BATCH] = at;
      this.vm.u32[h + S_BATCH_CAP] = cap;
    }
    return h;
  }
}

const grown = (have: number, need: number, min: number): number => {
  let cap = Math.max(min, have * 2);
  while (cap < need) cap *= 2;
  return cap;
};
