// The entries of ONE secondary index, in the topology's shared WebAssembly.Memory
// (topology.ts): its allocator, its block reuse and its reader slots. Reader threads read
// them without locks or copies; the single writer thread changes them.
//
// Entry (ENTRY_WORDS, u32): [K0, K1, ELEMENT, CREATED, DELETED], shaped like an adjacency
// entry where it matters (CREATED and DELETED at A_CREATED and A_DELETED). The key is the
// unsigned 64-bit (K0, K1), K0 the high word; entries are ordered by (K0, K1, ELEMENT),
// unsigned. Visible at snapshot S when CREATED != 0 && CREATED <= S && (DELETED == 0 ||
// S < DELETED). The same (key, element) may have several entries (written, removed at 7,
// written again at 9); at most one of them has DELETED == 0.
//
// Layout (word offsets into the topology memory; every block from Topology.allocateWords):
//   root    [HEADER, DELTA_MAX]: fixed for the index's lifetime (`root`); HEADER is the
//           offset of the current header (Atomics.store / Atomics.load).
//   header  [PURGED, DELTA_LENGTH, DELTA_BLOCK, DELTA_CAPACITY, RUN_COUNT,
//            (runBlock, runLength) x RUN_COUNT]
//           written whole, then published by storing its offset into root[HEADER]; after
//           that only DELTA_LENGTH and DELTA_BLOCK change (Atomics.store), plus
//           DELTA_CAPACITY, which only the writer reads. A replaced header is retired.
//           PURGED: snapshots older than it may miss entries (scan() returns false).
//   run     runLength entries sorted by (K0, K1, ELEMENT), oldest and largest run first;
//           never changed after publication except DELETED words. Its block is of the size
//           class of runLength * ENTRY_WORDS (retired with that count).
//   delta   DELTA_CAPACITY entries, the first DELTA_LENGTH of them written, unsorted (in
//           insertion order); DELTA_BLOCK 0 while the capacity is 0. A full delta is copied
//           into one twice as large, which is then published, the old one retired.
// The structure is an LSM: maintenance between batches sorts a delta of more than
// DELTA_MAX entries into a new run and merges runs like a binary counter (while the newest
// run is at least half as long as the one before it, the two are merged), so there are
// O(log n) runs, a lookup costs O(log^2 n) plus the delta, and each entry is copied
// O(log n) times over its life (amortized). Merges drop entries deleted at or before the
// `purgeBefore` epoch the writer passes; PURGED becomes the newest such deletion epoch.
//
// Memory ordering (ECMAScript memory model: Atomics operations are sequentially consistent
// and order the plain accesses around them as release/acquire do). A reader acquires
// root[HEADER] (Atomics.load), and then reads the header's fixed words and its runs with
// plain loads: the writer wrote them all before it published the header with Atomics.store
// and never changes them afterwards (except DELETED, below). For the delta it acquires
// DELTA_LENGTH and then DELTA_BLOCK, like an adjacency block (topology.ts): the writer
// writes an entry before it raises DELTA_LENGTH, and fills a larger delta block before it
// stores DELTA_BLOCK, so the block a reader gets holds at least the entries of any length
// it can pair with it (an outgrown delta block is left as it was). Each header has its own
// delta words, so a length is never paired with a delta of another header. DELETED is the
// one word overwritten in published entries: an aligned u32, so a racing plain load sees
// the old or the new value, and both give the same answer to a reader at S, because the
// writer only ever stores 0 (rollback of a deletion of an unpublished epoch) or the epoch
// of the batch it is running, which no reader holds. A delta entry cut off by rollback
// (DELTA_LENGTH lowered) may be overwritten while a reader that read the higher length
// looks at it; every version of that slot has CREATED of the rolled-back epoch or a later
// one, none of which the reader holds, so a torn mix is still invisible to it. A replaced
// entry copy (an outgrown delta, merged runs) keeps the DELETED it had when it was copied;
// later deletions go to the copy only. A reader still on the old copy fixed its snapshot
// S before it loaded the header (the caller passes `at`), and the copy was published
// before any later deletion epoch E was written and then published, so E > S: the missed
// deletion is invisible to it anyway. Blocks are reused only after every read that began
// before they were retired ended (Topology.beginRead, which readers call before scan()).
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';
import { wordBlockWords, type Topology } from '../store/topology.js';

export const ENTRY_WORDS = 5;
export const X_K0 = 0, X_K1 = 1, X_ELEMENT = 2, X_CREATED = 3, X_DELETED = 4;

const R_HEADER = 0, R_DELTA_MAX = 1, ROOT_WORDS = 2;
const H_PURGED = 0, H_DELTA_LENGTH = 1, H_DELTA_BLOCK = 2, H_DELTA_CAPACITY = 3, H_RUN_COUNT = 4, H_RUNS = 5;
const headerWords = (runCount: number): number => H_RUNS + 2 * runCount;
const DELTA_CAPACITY_MIN = 16;
/**
 * Runs of a header (an assertion): with no merge due each run is over twice as long as the
 * next, so 33 cover 2^32 entries, and budgets bind only up to RUNS_BUDGETED_MAX runs.
 */
const RUNS_MAX = 40;
const RUNS_BUDGETED_MAX = 24;
/** Below it a comparison sort of the order, above it a radix sort. */
const RADIX_SORT_MIN = 4096;
const RADIX_BUCKETS = 2048;

const fail = (what: string): never => {
  throw new SvcError('internal_error', `internal error: index entries: ${what}`);
};
const isU32 = (v: number): boolean => (v >>> 0) === v;

/** A run, or the delta, as the writer reads it from the header. */
interface Run { block: number; length: number }

export interface IndexEntriesStats {
  /** Entries stored (runs and delta), deleted or not. */
  entries: number;
  /** Entries with DELETED == 0. */
  liveEntries: number;
  /** Topology words the index holds (root, header, runs, delta), by size class. */
  words: number;
  runs: number;
}

/**
 * Copy the entry at word `p` to word `w` unless it was deleted at or before `purgeBefore`
 * (a merge drops those); returns where the next entry goes.
 */
function copyKept(words: Uint32Array, p: number, w: number, purgeBefore: number): number {
  const deleted = words[p + X_DELETED]!;
  if (deleted !== 0 && deleted <= purgeBefore) return w;
  words[w] = words[p]!;
  words[w + 1] = words[p + 1]!;
  words[w + 2] = words[p + 2]!;
  words[w + 3] = words[p + 3]!;
  words[w + 4] = deleted;
  return w + ENTRY_WORDS;
}

export class IndexEntries {
  /** The root block: fixed for the index's lifetime. */
  readonly root: number;
  private readonly topology: Topology;
  /** Writer: entries collected by appendBuild() as [k0, k1, element, created] (null: none). */
  private build: Uint32Array | null = null;
  private buildLength = 0;
  private freed = false;
  /**
   * Writer: a filter of the keys of every entry held (runs, delta, collected build
   * entries), made by the first mayContain() and kept up to date by insert() and
   * appendBuild(); null until then (indexes that never ask pay nothing). Two bits per key,
   * at least KEY_FILTER_BITS_PER_KEY bits per key held: it is re-made twice as large from
   * the entries when more keys were added than that allows. Removals (rollback, purges)
   * leave their bits set: a stale bit only makes mayContain answer true. Both bits of a key
   * are in one word (one memory access per lookup: the filter of a large index is megabytes).
   */
  private keyBits: Uint32Array | null = null;
  private keyBitsMask = 0;
  /** Keys the filter may take before it is re-made larger. */
  private keyBitsRoom = 0;

  private constructor(topology: Topology, root: number) {
    this.topology = topology;
    this.root = root;
  }

  /** Writer: a new empty index. `deltaEntriesMax` (tests lower it): limits.indexDeltaEntriesMax. */
  static create(topology: Topology, deltaEntriesMax: number = limits.indexDeltaEntriesMax): IndexEntries {
    if (!Number.isInteger(deltaEntriesMax) || deltaEntriesMax < 1) fail(`delta bound ${deltaEntriesMax}`);
    const root = topology.allocateWords(ROOT_WORDS);
    let header: number;
    try {
      header = topology.allocateWords(headerWords(0));
    } catch (err) {
      topology.retireWords(root, ROOT_WORDS); // never published
      throw err;
    }
    const words = topology.words;
    words[header + H_PURGED] = 0;
    words[header + H_DELTA_LENGTH] = 0;
    words[header + H_DELTA_BLOCK] = 0;
    words[header + H_DELTA_CAPACITY] = 0;
    words[header + H_RUN_COUNT] = 0;
    words[root + R_DELTA_MAX] = deltaEntriesMax;
    // The root itself is published by whoever hands `root` to readers (an index catalog).
    Atomics.store(words, root + R_HEADER, header);
    return new IndexEntries(topology, root);
  }

  /** Any thread: the index at `root`. Cheap (no memory is read): readers attach per query. */
  static attach(topology: Topology, root: number): IndexEntries {
    return new IndexEntries(topology, root);
  }

  // ------------------------------------------------------------ readers (any thread)

  /**
   * Push the ELEMENT of every entry with key in [lo, hi] (unsigned 64-bit, inclusive) that
   * is visible at snapshot `at`. Returns false, pushing nothing, when `at` is older than
   * the purge horizon (entries it needs may be gone: scan the elements instead). Call
   * inside a read (Topology.beginRead) and with `at` fixed before the call. `out` is in no
   * particular order. An element is pushed at most once as long as the writer keeps at
   * most one live entry per element (an index of a single-valued property: setting a value
   * marks the old entry deleted and inserts the new one in the same batch): then an
   * element's entries have disjoint visibility intervals [CREATED, DELETED), so at most
   * one is visible at `at`, and every entry is in exactly one block of the one header the
   * scan reads.
   */
  scan(k0lo: number, k1lo: number, k0hi: number, k1hi: number, at: number, out: number[]): boolean {
    return this.query(k0lo, k1lo, k0hi, k1hi, at, out) >= 0;
  }

  /** The number of entries scan() would push, or -1 where it returns false. */
  count(k0lo: number, k1lo: number, k0hi: number, k1hi: number, at: number): number {
    return this.query(k0lo, k1lo, k0hi, k1hi, at, null);
  }

  /** The purge horizon of the current header: scan() returns false below it. */
  purgedThrough(): number {
    const words = this.topology.cover(this.root + ROOT_WORDS);
    const header = Atomics.load(words, this.root + R_HEADER);
    return this.topology.cover(header + H_RUNS)[header + H_PURGED]!;
  }

  private query(k0lo: number, k1lo: number, k0hi: number, k1hi: number, at: number, out: number[] | null): number {
    if (!isU32(k0lo) || !isU32(k1lo) || !isU32(k0hi) || !isU32(k1hi) || !isU32(at)) {
      fail(`scan of [${k0lo}:${k1lo}, ${k0hi}:${k1hi}] at ${at}`);
    }
    const topo = this.topology;
    let words = topo.words;
    if (this.root + ROOT_WORDS > words.length) words = topo.cover(this.root + ROOT_WORDS);
    const header = Atomics.load(words, this.root + R_HEADER); // acquire: the header and its runs
    if (header + H_RUNS > words.length) words = topo.cover(header + H_RUNS);
    const runCount = words[header + H_RUN_COUNT]!;
    if (header + headerWords(runCount) > words.length) words = topo.cover(header + headerWords(runCount));
    if (at < words[header + H_PURGED]!) return -1;
    if (k0lo > k0hi || (k0lo === k0hi && k1lo > k1hi)) return 0;
    let found = 0;
    for (let r = 0; r < runCount; r++) {
      const block = words[header + H_RUNS + 2 * r]!, length = words[header + H_RUNS + 2 * r + 1]!;
      if (block + length * ENTRY_WORDS > words.length) words = topo.cover(block + length * ENTRY_WORDS);
      // First entry with key >= lo.
      let lo = 0, hi = length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        const p = block + mid * ENTRY_WORDS;
        const a0 = words[p]!;
        if (a0 < k0lo || (a0 === k0lo && words[p + X_K1]! < k1lo)) lo = mid + 1;
        else hi = mid;
      }
      for (let p = block + lo * ENTRY_WORDS, stop = block + length * ENTRY_WORDS; p < stop; p += ENTRY_WORDS) {
        const a0 = words[p]!;
        if (a0 > k0hi || (a0 === k0hi && words[p + X_K1]! > k1hi)) break;
        const created = words[p + X_CREATED]!, deleted = words[p + X_DELETED]!;
        if (created !== 0 && created <= at && (deleted === 0 || at < deleted)) {
          found++;
          if (out !== null) out.push(words[p + X_ELEMENT]!);
        }
      }
    }
    // Length first, then the block (see the file header).
    const length = Atomics.load(words, header + H_DELTA_LENGTH);
    if (length > 0) {
      const block = Atomics.load(words, header + H_DELTA_BLOCK);
      if (block + length * ENTRY_WORDS > words.length) words = topo.cover(block + length * ENTRY_WORDS);
      for (let p = block, stop = block + length * ENTRY_WORDS; p < stop; p += ENTRY_WORDS) {
        const a0 = words[p]!, a1 = words[p + X_K1]!;
        if (a0 < k0lo || (a0 === k0lo && a1 < k1lo) || a0 > k0hi || (a0 === k0hi && a1 > k1hi)) continue;
        const created = words[p + X_CREATED]!, deleted = words[p + X_DELETED]!;
        if (created !== 0 && created <= at && (deleted === 0 || at < deleted)) {
          found++;
          if (out !== null) out.push(words[p + X_ELEMENT]!);
        }
      }
    }
    return found;
  }

  // ------------------------------------------------------------ writer

  // ------------------------------------------------------------ writer: key filter

  /**
   * Writer: false when no entry of key (k0, k1) exists, deleted or not; true when one may.
   * A unique index's writes ask it before they look the key up: a fresh key (almost every
   * insert) then costs two bit tests instead of a binary search per run plus the delta.
   */
  mayContain(k0: number, k1: number): boolean {
    if (this.keyBits === null) this.makeKeyFilter(this.heldEntries());
    const h = keyHash(k0, k1), two = (1 << (h >>> 27)) | (1 << ((h >>> 22) & 31));
    return (this.keyBits![h & this.keyBitsMask]! & two) === two;
  }

  private noteKey(k0: number, k1: number): void {
    if (this.keyBitsRoom === 0) this.makeKeyFilter(this.heldEntries() + 1);
    this.keyBitsRoom--;
    const h = keyHash(k0, k1), at = h & this.keyBitsMask;
    this.keyBits![at] = this.keyBits![at]! | (1 << (h >>> 27)) | (1 << ((h >>> 22) & 31));
  }

  /** Entries held by the writer: runs, delta and collected build entries. */
  private heldEntries(): number {
    const header = this.header();
    let n = this.topology.words[header + H_DELTA_LENGTH]! + this.buildLength;
    for (const run of this.runsOf(header)) n += run.length;
    return n;
  }

  /** A filter with room for twice `keys` keys, filled with the key of every entry held. */
  private makeKeyFilter(keys: number): void {
    let bits = 1 << 16;
    while (bits < keys * 2 * KEY_FILTER_BITS_PER_KEY && bits < 1 << 30) bits *= 2;
    this.keyBits = new Uint32Array(bits >>> 5);
    this.keyBitsMask = (bits >>> 5) - 1; // a word index: both bits of a key are in one word
    this.keyBitsRoom = Infinity; // filling: no re-make
    const header = this.header();
    const words = this.topology.words;
    const runs = this.runsOf(header);
    runs.push({ block: words[header + H_DELTA_BLOCK]!, length: words[header + H_DELTA_LENGTH]! });
    for (const run of runs) {
      for (let p = run.block, stop = run.block + run.length * ENTRY_WORDS; p < stop; p += ENTRY_WORDS) this.noteKey(words[p]!, words[p + 1]!);
    }
    const build = this.build;
    for (let q = 0; q < this.buildLength * 4; q += 4) this.noteKey(build![q]!, build![q + 1]!);
    this.keyBitsRoom = Math.max(1, Math.floor(bits / KEY_FILTER_BITS_PER_KEY) - keys);
  }

  // ------------------------------------------------------------ writer

  /** Writer: the current header (the writer's own view covers every block it allocated). */
  private header(): number {
    if (this.freed) fail('use after free()');
    return this.topology.words[this.root + R_HEADER]!;
  }

  private runsOf(header: number): Run[] {
    const words = this.topology.words;
    const runs: Run[] = [];
    for (let r = 0, n = words[header + H_RUN_COUNT]!; r < n; r++) {
      runs.push({ block: words[header + H_RUNS + 2 * r]!, length: words[header + H_RUNS + 2 * r + 1]! });
    }
    return runs;
  }

  /**
   * Writer: append (key, element) created at `created` to the delta: the batch's epoch, or
   * 1 while a build fills an index no reader can reach yet. Allocation may throw
   * (storage_error); then nothing changed.
   */
  insert(k0: number, k1: number, element: number, created: number): void {
    if (!isU32(k0) || !isU32(k1) || !isU32(element) || !isU32(created) || created === 0) {
      fail(`insert of ${k0}:${k1} -> ${element} at ${created}`);
    }
    const topo = this.topology;
    const header = this.header();
    let words = topo.words;
    const length = words[header + H_DELTA_LENGTH]!, capacity = words[header + H_DELTA_CAPACITY]!;
    let block = words[header + H_DELTA_BLOCK]!;
    if (length === capacity) {
      // A fresh delta (after every flush) starts big enough for its bound and then some, so
      // a batch's inserts do not copy it block by block as it grows.
      const grown = capacity === 0 ? Math.max(DELTA_CAPACITY_MIN, 2 * words[this.root + R_DELTA_MAX]!) : capacity * 2;
      const moved = topo.allocateWords(grown * ENTRY_WORDS);
      words = topo.words;
      if (length > 0) words.copyWithin(moved, block, block + length * ENTRY_WORDS);
      // Published whole; the old block stays as it is for the reads that may hold it.
      Atomics.store(words, header + H_DELTA_BLOCK, moved);
      words[header + H_DELTA_CAPACITY] = grown; // the writer's word only
      if (block !== 0) topo.retireWords(block, capacity * ENTRY_WORDS);
      block = moved;
    }
    const p = block + length * ENTRY_WORDS;
    words[p + X_K0] = k0;
    words[p + X_K1] = k1;
    words[p + X_ELEMENT] = element;
    words[p + X_DELETED] = 0;
    words[p + X_CREATED] = created;
    Atomics.store(words, header + H_DELTA_LENGTH, length + 1);
    if (this.keyBits !== null) this.noteKey(k0, k1);
  }

  /**
   * Writer: word offset of an entry of (key, element) whose DELETED is `deleted`, or -1.
   * The delta newest first, then the runs by binary search.
   */
  private find(k0: number, k1: number, element: number, deleted: number): number {
    const header = this.header();
    const words = this.topology.words;
    const length = words[header + H_DELTA_LENGTH]!, delta = words[header + H_DELTA_BLOCK]!;
    for (let p = delta + (length - 1) * ENTRY_WORDS; p >= delta && length > 0; p -= ENTRY_WORDS) {
      if (words[p + X_DELETED] === deleted && words[p + X_ELEMENT] === element && words[p + X_K1] === k1 && words[p + X_K0] === k0) return p;
    }
    for (let r = 0, n = words[header + H_RUN_COUNT]!; r < n; r++) {
      const block = words[header + H_RUNS + 2 * r]!, runLength = words[header + H_RUNS + 2 * r + 1]!;
      let lo = 0, hi = runLength;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (compareAt(words, block + mid * ENTRY_WORDS, k0, k1, element) < 0) lo = mid + 1;
        else hi = mid;
      }
      for (let p = block + lo * ENTRY_WORDS, stop = block + runLength * ENTRY_WORDS; p < stop; p += ENTRY_WORDS) {
        if (compareAt(words, p, k0, k1, element) !== 0) break;
        if (words[p + X_DELETED] === deleted) return p;
      }
    }
    return -1;
  }

  /**
   * Writer: mark the live entry of (key, element) deleted at `epoch` (the batch's epoch).
   * False when there is none.
   */
  markDeleted(k0: number, k1: number, element: number, epoch: number): boolean {
    if (!isU32(epoch) || epoch === 0) fail(`deletion at epoch ${epoch}`);
    const p = this.find(k0, k1, element, 0);
    if (p < 0) return false;
    this.topology.words[p + X_DELETED] = epoch; // one aligned word: see the file header
    return true;
  }

  /**
   * Writer, rollback (newest first): undo insert(k0, k1, element), if it was made. An insert
   * that failed left nothing; one that succeeded is the newest delta entry, and still live:
   * a deletion of it later in the batch was undone before this. (A newest entry of the same
   * (key, element) that is deleted is an older insert whose deletion is undone later.) Its
   * CREATED was never visible, so lowering the length is enough.
   */
  undoInsert(k0: number, k1: number, element: number): void {
    const header = this.header();
    const words = this.topology.words;
    const length = words[header + H_DELTA_LENGTH]!;
    if (length === 0) return;
    const p = words[header + H_DELTA_BLOCK]! + (length - 1) * ENTRY_WORDS;
    if (words[p + X_K0] === k0 && words[p + X_K1] === k1 && words[p + X_ELEMENT] === element && words[p + X_DELETED] === 0) {
      Atomics.store(words, header + H_DELTA_LENGTH, length - 1);
    }
  }

  /** Writer, rollback: undo markDeleted(k0, k1, element, epoch). False when no entry has DELETED == epoch. */
  undoDelete(k0: number, k1: number, element: number, epoch: number): boolean {
    if (!isU32(epoch) || epoch === 0) fail(`undo of a deletion at epoch ${epoch}`);
    const p = this.find(k0, k1, element, epoch);
    if (p < 0) return false;
    this.topology.words[p + X_DELETED] = 0;
    return true;
  }

  /** Writer: whether maintain() has work (a delta past its bound, or runs to merge). */
  pendingMaintenance(): boolean {
    const header = this.header();
    const words = this.topology.words;
    if (words[header + H_DELTA_LENGTH]! > words[this.root + R_DELTA_MAX]!) return true;
    return mergeDue(this.runsOf(header)) >= 0;
  }

  /**
   * Writer, between batches only: sort a delta longer than its bound into a new run, then
   * merge runs while a newer run is at least half as long as the one before it (mergeDue),
   * dropping entries deleted at or before `purgeBefore`, and publish the result as a new
   * header. `budgetEntries` bounds the entries copied per call, except that one step (the
   * delta sort or one merge) always runs, and merges continue past it while there are more
   * than RUNS_BUDGETED_MAX runs: the worst single step is a merge whose output is every
   * entry of the index (a carry that reaches the oldest run), O(n) words copied
   * (measured ~50 ms for 1 M entries on Node 20); amortized each entry is copied O(log n) times. Work left over shows in
   * pendingMaintenance(). May throw storage_error (allocation): then nothing changed.
   * `compact`: merge every run into one, newest pair first, whether due or not (a build's
   * runs, before it activates: a lookup then makes one binary search instead of one per run).
   */
  maintain(purgeBefore: number, budgetEntries: number = Infinity, compact = false): void {
    if (!isU32(purgeBefore)) fail(`purge before ${purgeBefore}`);
    const topo = this.topology;
    const header = this.header();
    let words = topo.words;
    const runs = this.runsOf(header);
    let purged = words[header + H_PURGED]!;
    let deltaLength = words[header + H_DELTA_LENGTH]!, deltaBlock = words[header + H_DELTA_BLOCK]!;
    let deltaCapacity = words[header + H_DELTA_CAPACITY]!;
    const deltaOverflows = deltaLength > words[this.root + R_DELTA_MAX]!;
    const due = compact ? (r: Run[]) => r.length - 2 : mergeDue;
    if (!deltaOverflows && due(runs) < 0) return;
    const made: [number, number][] = []; // allocated here: retired again if a step fails
    const replaced: [number, number][] = []; // superseded: retired once the header is out
    try {
      let spent = 0;
      if (deltaOverflows) {
        const { order } = sortRecords(words, deltaBlock, ENTRY_WORDS, deltaLength);
        const run = this.writeRun(order, deltaBlock, purgeBefore, made);
        words = topo.words;
        purged = Math.max(purged, run.purged);
        if (run.length > 0) runs.push({ block: run.block, length: run.length });
        if (deltaBlock !== 0) replaced.push([deltaBlock, deltaCapacity * ENTRY_WORDS]);
        spent += deltaLength;
        deltaLength = deltaBlock = deltaCapacity = 0;
      }
      for (let i = due(runs); i >= 0; i = due(runs)) {
        const older = runs[i]!, newer = runs[i + 1]!;
        // The budget binds only while the runs are few, so that flushes alone cannot pile them up.
        if (spent > 0 && runs.length <= RUNS_BUDGETED_MAX && spent + newer.length + older.length > budgetEntries) break;
        const run = this.mergeRuns(older, newer, purgeBefore, made);
        words = topo.words;
        purged = Math.max(purged, run.purged);
        runs.splice(i, 2, ...(run.length > 0 ? [{ block: run.block, length: run.length }] : []));
        replaced.push([older.block, older.length * ENTRY_WORDS], [newer.block, newer.length * ENTRY_WORDS]);
        spent += newer.length + older.length;
      }
      if (runs.length > RUNS_MAX) fail(`${runs.length} runs`);
      const next = topo.allocateWords(headerWords(runs.length));
      made.push([next, headerWords(runs.length)]);
      words = topo.words;
      words[next + H_PURGED] = purged;
      words[next + H_DELTA_LENGTH] = deltaLength;
      words[next + H_DELTA_BLOCK] = deltaBlock;
      words[next + H_DELTA_CAPACITY] = deltaCapacity;
      words[next + H_RUN_COUNT] = runs.length;
      for (let r = 0; r < runs.length; r++) {
        words[next + H_RUNS + 2 * r] = runs[r]!.block;
        words[next + H_RUNS + 2 * r + 1] = runs[r]!.length;
      }
      Atomics.store(words, this.root + R_HEADER, next); // publish
    } catch (err) {
      for (const [block, count] of made) topo.retireWords(block, count); // never published
      throw err;
    }
    topo.retireWords(header, headerWords(words[header + H_RUN_COUNT]!));
    for (const [block, count] of replaced) topo.retireWords(block, count);
  }

  /**
   * Writer: a new run of the entries at `base + order[i] * stride` (sorted), without those
   * deleted at or before `purgeBefore`. Its block is sized exactly (a first pass counts).
   */
  private writeRun(order: Uint32Array, base: number, purgeBefore: number, made: [number, number][]): { block: number; length: number; purged: number } {
    let length = 0, purged = 0;
    for (let i = 0; i < order.length; i++) {
      const deleted = this.topology.words[base + order[i]! * ENTRY_WORDS + X_DELETED]!;
      if (deleted !== 0 && deleted <= purgeBefore) purged = Math.max(purged, deleted);
      else length++;
    }
    if (length === 0) return { block: 0, length, purged };
    const topo = this.topology;
    const block = topo.allocateWords(length * ENTRY_WORDS);
    made.push([block, length * ENTRY_WORDS]);
    const words = topo.words;
    let w = block;
    for (let i = 0; i < order.length; i++) w = copyKept(words, base + order[i]! * ENTRY_WORDS, w, purgeBefore);
    return { block, length, purged };
  }

  /**
   * Writer: the merge of two runs into a new one, without entries deleted at or before
   * `purgeBefore`. One pass: the block is sized for both runs whole (purges are rare) and
   * replaced by an exact one only when the dropped entries change its size class (a run's
   * block is retired by the class of its length). A counting pass first read every entry
   * twice, and the large merges are bound by memory traffic.
   */
  private mergeRuns(older: Run, newer: Run, purgeBefore: number, made: [number, number][]): { block: number; length: number; purged: number } {
    const topo = this.topology;
    const most = older.length + newer.length;
    const block = topo.allocateWords(most * ENTRY_WORDS);
    made.push([block, most * ENTRY_WORDS]);
    const words = topo.words;
    let purged = 0;
    let a = older.block, b = newer.block, w = block;
    const aStop = older.block + older.length * ENTRY_WORDS, bStop = newer.block + newer.length * ENTRY_WORDS;
    while (a < aStop || b < bStop) {
      let p: number;
      if (b >= bStop || (a < aStop && compareAt(words, a, words[b]!, words[b + 1]!, words[b + 2]!) <= 0)) {
        p = a;
        a += ENTRY_WORDS;
      } else {
        p = b;
        b += ENTRY_WORDS;
      }
      const deleted = words[p + X_DELETED]!;
      if (deleted !== 0 && deleted <= purgeBefore) {
        if (deleted > purged) purged = deleted;
        continue;
      }
      words[w] = words[p]!;
      words[w + 1] = words[p + 1]!;
      words[w + 2] = words[p + 2]!;
      words[w + 3] = words[p + 3]!;
      words[w + 4] = deleted;
      w += ENTRY_WORDS;
    }
    const length = (w - block) / ENTRY_WORDS;
    if (length === most) return { block, length, purged };
    // Entries were dropped: the block must be of the class of the run's length.
    made.pop();
    if (length > 0 && wordBlockWords(length * ENTRY_WORDS) === wordBlockWords(most * ENTRY_WORDS)) {
      made.push([block, length * ENTRY_WORDS]); // the same class: retired alike
      return { block, length, purged };
    }
    let exact = 0;
    try {
      if (length > 0) {
        exact = topo.allocateWords(length * ENTRY_WORDS);
        topo.words.copyWithin(exact, block, block + length * ENTRY_WORDS);
        made.push([exact, length * ENTRY_WORDS]);
      }
    } finally {
      topo.retireWords(block, most * ENTRY_WORDS); // never published
    }
    return { block: exact, length, purged };
  }

  /**
   * Writer: collect an entry of an index build (not visible until finishBuild()). Entries
   * are kept in this thread's memory, 16 bytes each, and sorted once.
   */
  appendBuild(k0: number, k1: number, element: number, created: number = 1): void {
    if (!isU32(k0) || !isU32(k1) || !isU32(element) || !isU32(created) || created === 0) {
      fail(`build entry ${k0}:${k1} -> ${element} at ${created}`);
    }
    let build = this.build;
    const at = this.buildLength * 4;
    if (build === null || at === build.length) {
      if (this.buildLength * ENTRY_WORDS >= limits.topologyWordsMax) throw new SvcError('storage_error', 'storage error: index build does not fit the topology memory');
      const grown = new Uint32Array(build === null ? 4096 * 4 : build.length * 2);
      if (build !== null) grown.set(build);
      this.build = build = grown;
    }
    build[at] = k0;
    build[at + 1] = k1;
    build[at + 2] = element;
    build[at + 3] = created;
    this.buildLength++;
    if (this.keyBits !== null) this.noteKey(k0, k1);
  }

  /**
   * Writer, between batches: sort the entries of appendBuild() into one run and publish it
   * (with the runs already there, merged by later maintenance). Snapshots older than
   * `completeFrom` (the snapshot the build read) get false from scan(): the build has no
   * entries of what they saw and it did not.
   */
  finishBuild(completeFrom: number = 0): void {
    if (!isU32(completeFrom)) fail(`build complete from ${completeFrom}`);
    const build = this.build, n = this.buildLength;
    this.build = null;
    this.buildLength = 0;
    const topo = this.topology;
    const header = this.header();
    const runs = this.runsOf(header);
    const made: [number, number][] = [];
    try {
      if (n > 0) {
        const sorted = sortRecords(build!, 0, 4, n);
        const block = topo.allocateWords(n * ENTRY_WORDS);
        made.push([block, n * ENTRY_WORDS]);
        const words = topo.words;
        // CREATED is read out of order only when the build's entries differ in it.
        const created = build![3]!;
        let sameCreated = true;
        for (let q = 3; q < n * 4 && sameCreated; q += 4) sameCreated = build![q] === created;
        const { order, k0, k1, element } = sorted;
        for (let i = 0, w = block; i < n; i++, w += ENTRY_WORDS) {
          words[w] = k0[i]!;
          words[w + 1] = k1[i]!;
          words[w + 2] = element[i]!;
          words[w + 3] = sameCreated ? created : build![order[i]! * 4 + 3]!;
          words[w + 4] = 0;
        }
        runs.push({ block, length: n });
      }
      if (runs.length > RUNS_MAX) fail(`${runs.length} runs`);
      const next = topo.allocateWords(headerWords(runs.length));
      made.push([next, headerWords(runs.length)]);
      const words = topo.words;
      words[next + H_PURGED] = Math.max(words[header + H_PURGED]!, completeFrom);
      words[next + H_DELTA_LENGTH] = words[header + H_DELTA_LENGTH]!;
      words[next + H_DELTA_BLOCK] = words[header + H_DELTA_BLOCK]!;
      words[next + H_DELTA_CAPACITY] = words[header + H_DELTA_CAPACITY]!;
      words[next + H_RUN_COUNT] = runs.length;
      for (let r = 0; r < runs.length; r++) {
        words[next + H_RUNS + 2 * r] = runs[r]!.block;
        words[next + H_RUNS + 2 * r + 1] = runs[r]!.length;
      }
      Atomics.store(words, this.root + R_HEADER, next);
    } catch (err) {
      for (const [block, count] of made) topo.retireWords(block, count);
      throw err;
    }
    topo.retireWords(header, headerWords(topo.words[header + H_RUN_COUNT]!));
  }

  /** Writer: the index is dropped (no reader attaches to it any more): retire every block. */
  free(): void {
    const topo = this.topology;
    const header = this.header();
    const words = topo.words;
    for (const run of this.runsOf(header)) topo.retireWords(run.block, run.length * ENTRY_WORDS);
    const delta = words[header + H_DELTA_BLOCK]!;
    if (delta !== 0) topo.retireWords(delta, words[header + H_DELTA_CAPACITY]! * ENTRY_WORDS);
    topo.retireWords(header, headerWords(words[header + H_RUN_COUNT]!));
    topo.retireWords(this.root, ROOT_WORDS);
    this.freed = true;
    this.build = null;
    this.keyBits = null;
  }

  /** Writer: what the index holds (memory per entry: words / entries). */
  stats(): IndexEntriesStats {
    const header = this.header();
    const words = this.topology.words;
    const size = wordBlockWords;
    let entries = 0, liveEntries = 0, held = size(ROOT_WORDS) + size(headerWords(words[header + H_RUN_COUNT]!));
    const count = (block: number, length: number): void => {
      entries += length;
      for (let p = block + X_DELETED, stop = block + length * ENTRY_WORDS; p < stop; p += ENTRY_WORDS) if (words[p] === 0) liveEntries++;
    };
    const runs = this.runsOf(header);
    for (const run of runs) {
      count(run.block, run.length);
      held += size(run.length * ENTRY_WORDS);
    }
    const capacity = words[header + H_DELTA_CAPACITY]!;
    count(words[header + H_DELTA_BLOCK]!, words[header + H_DELTA_LENGTH]!);
    if (capacity > 0) held += size(capacity * ENTRY_WORDS);
    return { entries, liveEntries, words: held, runs: runs.length };
  }
}

/**
 * Bits of the key filter per key it holds, at least (mayContain): with two bits set per
 * key in one 32-bit word, a key never added is reported present with probability ~2 % at
 * the fullest (measured 1.3-2.1 % on random keys from 30k to 1M). 2-4 bytes per key; only
 * unique indexes make one.
 */
const KEY_FILTER_BITS_PER_KEY = 16;

/** A 32-bit mix of a key for the filter (range keys are not uniform, equality keys are). */
function keyHash(k0: number, k1: number): number {
  let h = Math.imul(k0 ^ Math.imul(k1, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 15;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 13)) >>> 0;
}

/**
 * The runs the binary-counter policy merges next: the newest adjacent pair (i, i + 1) whose
 * newer run is at least half as long as the older one; -1 when none. Usually the two newest
 * runs (a carry); an older pair only when a budget stopped a carry before a later flush, or
 * a purge shrank a run. Once no pair is due each run is over twice the next: O(log n) runs.
 */
function mergeDue(runs: Run[]): number {
  for (let i = runs.length - 2; i >= 0; i--) if (runs[i + 1]!.length * 2 >= runs[i]!.length) return i;
  return -1;
}

/** The entry at `p` against (k0, k1, element): negative, 0 or positive, unsigned. */
function compareAt(words: Uint32Array, p: number, k0: number, k1: number, element: number): number {
  const a0 = words[p]!;
  if (a0 !== k0) return a0 < k0 ? -1 : 1;
  const a1 = words[p + 1]!;
  if (a1 !== k1) return a1 < k1 ? -1 : 1;
  const e = words[p + 2]!;
  return e === element ? 0 : e < element ? -1 : 1;
}

/** Records sorted by sortRecords: their original positions and their key words, in order. */
interface Sorted { order: Uint32Array; k0: Uint32Array; k1: Uint32Array; element: Uint32Array }

/**
 * sortRecords for short inputs (every delta flush after a batch): a stable bottom-up merge
 * sort of positions, comparing key words copied out once. A comparator function passed to
 * TypedArray.prototype.sort was ~5 % of indexed write time (a call per comparison).
 */
function mergeSortRecords(keys: Uint32Array, base: number, stride: number, n: number): Sorted {
  const w0 = new Uint32Array(n), w1 = new Uint32Array(n), we = new Uint32Array(n);
  let src = new Uint32Array(n), dst = new Uint32Array(n);
  for (let i = 0, p = base; i < n; i++, p += stride) {
    w0[i] = keys[p]!;
    w1[i] = keys[p + 1]!;
    we[i] = keys[p + 2]!;
    src[i] = i;
  }
  const less = (x: number, y: number): boolean =>
    w0[x]! < w0[y]! || (w0[x] === w0[y] && (w1[x]! < w1[y]! || (w1[x] === w1[y] && we[x]! < we[y]!)));
  const RUN = 8;
  for (let lo = 0; lo < n; lo += RUN) {
    for (let i = lo + 1, hi = Math.min(n, lo + RUN); i < hi; i++) {
      const x = src[i]!;
      let j = i;
      for (; j > lo && less(x, src[j - 1]!); j--) src[j] = src[j - 1]!;
      src[j] = x;
    }
  }
  for (let width = RUN; width < n; width *= 2) {
    for (let lo = 0; lo < n; lo += 2 * width) {
      const mid = Math.min(n, lo + width), hi = Math.min(n, lo + 2 * width);
      let a = lo, b = mid, w = lo;
      while (a < mid && b < hi) dst[w++] = less(src[b]!, src[a]!) ? src[b++]! : src[a++]!;
      while (a < mid) dst[w++] = src[a++]!;
      while (b < hi) dst[w++] = src[b++]!;
    }
    [src, dst] = [dst, src];
  }
  const k0 = dst, k1 = new Uint32Array(n), element = new Uint32Array(n); // dst is free now
  for (let i = 0; i < n; i++) {
    const x = src[i]!;
    k0[i] = w0[x]!;
    k1[i] = w1[x]!;
    element[i] = we[x]!;
  }
  return { order: src, k0, k1, element };
}

/**
 * The `n` records at `keys[base + i * stride]` = [k0, k1, element, ...] sorted by
 * (k0, k1, element): a comparison sort when short, else an LSD radix sort on 11-bit digits
 * (2048 buckets stay in cache; 16-bit digits measured several times slower on 1 M
 * records): up to nine stable passes, least significant first, skipping a digit all records
 * share, and the element passes when the records come in element order already (a build
 * scans elements in ID order; equal keys then keep that order). The key words travel with
 * the order, so no pass reads the records out of order.
 */
function sortRecords(keys: Uint32Array, base: number, stride: number, n: number): Sorted {
  if (n < RADIX_SORT_MIN) return mergeSortRecords(keys, base, stride, n);
  let order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  let element = new Uint32Array(n), k1 = new Uint32Array(n), k0 = new Uint32Array(n);
  let ascending = true;
  for (let i = 0, p = base; i < n; i++, p += stride) {
    k0[i] = keys[p]!;
    k1[i] = keys[p + 1]!;
    element[i] = keys[p + 2]!;
    if (i > 0 && element[i - 1]! > element[i]!) ascending = false;
  }
  // Every pass's histogram in one read: pass = word * 3 + digit (words: element, k1, k0).
  const counts = new Uint32Array(9 * RADIX_BUCKETS);
  const words = [element, k1, k0];
  for (let w = 0; w < 3; w++) {
    const src = words[w]!, at = w * 3 * RADIX_BUCKETS;
    for (let i = 0; i < n; i++) {
      const v = src[i]!;
      counts[at + (v & 0x7ff)]++;
      counts[at + RADIX_BUCKETS + ((v >>> 11) & 0x7ff)]++;
      counts[at + 2 * RADIX_BUCKETS + (v >>> 22)]++;
    }
  }
  let order2 = new Uint32Array(n), element2 = new Uint32Array(n), k12 = new Uint32Array(n), k02 = new Uint32Array(n);
  for (let pass = ascending ? 3 : 0; pass < 9; pass++) {
    const shift = (pass % 3) * 11, at = pass * RADIX_BUCKETS;
    const digits = pass < 3 ? element : pass < 6 ? k1 : k0;
    if (counts[at + ((digits[0]! >>> shift) & 0x7ff)] === n) continue; // one digit: order stays
    let sum = 0;
    for (let d = at; d < at + RADIX_BUCKETS; d++) {
      const c = counts[d]!;
      counts[d] = sum;
      sum += c;
    }
    for (let i = 0; i < n; i++) {
      const slot = counts[at + ((digits[i]! >>> shift) & 0x7ff)]++;
      order2[slot] = order[i]!;
      element2[slot] = element[i]!;
      k12[slot] = k1[i]!;
      k02[slot] = k0[i]!;
    }
    [order, order2] = [order2, order];
    [element, element2] = [element2, element];
    [k1, k12] = [k12, k1];
    [k0, k02] = [k02, k0];
  }
  return { order, k0, k1, element };
}
