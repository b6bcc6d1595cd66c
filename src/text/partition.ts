// One partition of a text index (docs/text.md §2-§4): documents with created/deleted
// epochs, a term dictionary, per-term postings lists and statistics chains, all in a
// TextMemory. One writer inserts and removes; readers on any thread search without locks.
//
// Publication (ECMAScript memory model: Atomics are sequentially consistent and order the
// plain accesses around them like release/acquire). Every word a reader uses to FIND data
// is stored with Atomics.store by the writer after the data it leads to, and loaded with
// Atomics.load by readers before the data:
//   * dictionary: P_DICT (table), then a slot (term id + 1): the term record, its text, its
//     list header and its first stats node are written before the slot is stored.
//   * postings: T_LIST (list header), then L_COUNT, then L_DIR, then the directory entry of
//     a block, then L_IMPACTS / B_IMPACTS. The writer writes a posting (and its document
//     record before it) and then raises L_COUNT; a directory, a grown block or new impacts
//     are filled and published before the count that needs them, so whatever a reader loads
//     after a count holds (and bounds) every posting below it. Replaced blocks, directories,
//     impacts and whole lists (maintain()) stay intact until every read announced before
//     their retirement has ended (memory.ts reader slots).
//   * statistics: T_STATS / P_STATS and every S_NEXT: a node is written whole before it is
//     linked in; a chain is cut (S_NEXT stored 0) only below the purge horizon.
// Words overwritten in place, read plainly, right with either value: a document's
// created/deleted (0 or an epoch of the open batch, which no reader holds), a stats node's
// value when its epoch is the open batch's (no reader takes it), block and list running
// bounds (they only grow looser while a list is current), the L_TOP hint (checked by
// readers), and (build scans only, while the index is not searchable) values of stats nodes
// newer than an out-of-order epoch. Offsets a reader loads may be newer than its views:
// see REGROW below.
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';
import { analyze, analyzerCode, ANALYZERS, distinctTerms, termHash, type Analyzer } from './analyze.js';
import { BOUND_INFLATION, idfOf, termWeight, type TermStats } from './bm25.js';
import {
  B_CAP, B_HEADER, B_MAX_TF, B_MIN_DL, BLOCK_POSTINGS, BLOCK_SHIFT, chunkOf, CHUNKS_MAX,
  D_CREATED, D_DELETED, D_ELEMENT, D_LENGTH, D_POS, D_TERMS, D_WORDS, DICT_CAP_MIN, FIRST_BLOCK_CAP,
  B_IMPACTS, H_CAP, H_REMOVED, H_SLOTS, IMPACTS_MAX, impactsWords, L_COUNT, L_DIR, L_DIR_CAP, L_IMPACTS, L_MAX_TF, L_MIN_DL, L_TOP, L_TOP_COUNT, L_WORDS,
  P_ANALYZER, P_DICT, P_DOC_CHUNK0, P_DOC_CHUNKS, P_DOCS, P_MAGIC, P_POSITIONS, P_PURGED, P_STATS, P_TERM_CHUNK0, P_TERM_CHUNKS, P_TERMS, P_WORDS,
  PARTITION_MAGIC, S_DF, S_DOCS, S_EPOCH, S_LEN_HI, S_LEN_LO, S_NEXT, S_PART_WORDS, S_TERM_WORDS,
  T_HASH, T_LEN, T_LIST, T_STATS, T_TEXT, T_WORDS,
} from './layout.js';
import type { TextMemory } from './memory.js';

const fail = (msg: string): never => {
  throw new SvcError('internal_error', `internal error: text partition: ${msg}`);
};

const NO_DOC = 0xffffffff;
/** Blocks a one-term search scores first, best bound first, to start with a high threshold. */
const FIRST_BLOCKS = 4;
const TWO32 = 4294967296;

/** Test hooks: work counters of this thread's searches (reset by tests). */
export const textSearchCounters = { scoredPostings: 0, searches: 0 };
/** Test hooks: maintain() work on this thread. */
export const textMaintainCounters = { compactions: 0, postingsDropped: 0, termsRemoved: 0, termIdsReused: 0 };
/** Tests: turn dynamic pruning off (every posting of every query term scored). */
export const textSearchOptions = { pruning: true };

/**
 * Whether a list with `dead` of its `count` postings dead is due for compaction: a quarter
 * dead (two at least, a copy per death is too many), or all of them (a term of one or a few
 * documents, e.g. an ID in a text: it leaves the dictionary, removeTerm()).
 */
const worthCompacting = (dead: number, count: number): boolean => (dead >= 2 ? 4 * dead >= count : dead === count);

/** Words of a term's UTF-16 text block (two code units a word, one word at least). */
const termTextWords = (length: number): number => Math.max(1, (length + 1) >> 1);

/** The text of the term record at `rec`. */
const termText = (u: Uint32Array, u16: Uint16Array, rec: number): string => {
  const text = 2 * u[rec + T_TEXT]!;
  return String.fromCharCode(...u16.subarray(text, text + u[rec + T_LEN]!));
};

/** Word offset of record `i` of a chunked table whose chunk pointers start at `chunk0`. */
const recordAt = (u: Uint32Array, root: number, chunk0: number, i: number, words: number): number => {
  const c = chunkOf(i);
  return u[root + chunk0 + c]! + (i + 1 - (1 << c)) * words;
};
export const docAt = (u: Uint32Array, root: number, d: number): number => recordAt(u, root, P_DOC_CHUNK0, d, D_WORDS);
export const termAt = (u: Uint32Array, root: number, t: number): number => recordAt(u, root, P_TERM_CHUNK0, t, T_WORDS);
/** Words of a block: header, then docs, tfs, document lengths and (positions on) positions offsets, cap each. */
export const postingWords = (positions: boolean): number => (positions ? 4 : 3);
export const blockWords = (cap: number, positions: boolean): number => B_HEADER + cap * postingWords(positions);

/** The visible-at-S rule of every MVCC record in the store. */
const visibleAt = (created: number, deleted: number, s: number): boolean =>
  created !== 0 && created <= s && (deleted === 0 || s < deleted);

// Writer scratch for impacts (pairs sorted by tf ascending; dl ascending with it).
const impTf = new Uint32Array(IMPACTS_MAX + 1);
const impDl = new Uint32Array(IMPACTS_MAX + 1);
const impTf2 = new Uint32Array(IMPACTS_MAX + 2);
const impDl2 = new Uint32Array(IMPACTS_MAX + 2);

/**
 * Add (tf, dl) to the n impacts in impTf/impDl; returns the new count, or -1 when the pair
 * was already dominated (nothing changed). Over IMPACTS_MAX pairs, the two neighbours
 * closest in tf merge into (higher tf, lower dl), which dominates both.
 */
function impactsAdd(n: number, tf: number, dl: number): number {
  for (let i = 0; i < n; i++) if (impTf[i]! >= tf && impDl[i]! <= dl) return -1;
  let w = 0, placed = false;
  // Drop pairs the new one dominates; insert it in tf order (into the second buffer).
  for (let i = 0; i < n; i++) {
    const t = impTf[i]!, d = impDl[i]!;
    if (t <= tf && d >= dl) continue;
    if (!placed && t > tf) { impTf2[w] = tf; impDl2[w] = dl; w++; placed = true; }
    impTf2[w] = t; impDl2[w] = d; w++;
  }
  if (!placed) { impTf2[w] = tf; impDl2[w] = dl; w++; }
  if (w > IMPACTS_MAX) {
    let best = 0;
    for (let i = 1; i + 1 < w; i++) if (impTf2[i + 1]! - impTf2[i]! < impTf2[best + 1]! - impTf2[best]!) best = i;
    impTf2[best] = impTf2[best + 1]!; // dl stays the lower one (impDl2[best])
    for (let i = best + 1; i + 1 < w; i++) { impTf2[i] = impTf2[i + 1]!; impDl2[i] = impDl2[i + 1]!; }
    w--;
  }
  impTf.set(impTf2.subarray(0, w));
  impDl.set(impDl2.subarray(0, w));
  return w;
}

/** Bound of the BM25 weight of any posting an impacts block covers. */
function impactsBound(u: Uint32Array, imp: number, idf: number, avgdl: number): number {
  let best = 0;
  const n = u[imp]!;
  for (let i = 0; i < n; i++) {
    const w = termWeight(idf, u[imp + 1 + 2 * i]!, u[imp + 2 + 2 * i]!, avgdl);
    if (w > best) best = w;
  }
  return best * BOUND_INFLATION;
}

/**
 * The best single-term score (f32, as search() rounds a one-term sum) of any posting an
 * impacts block covers: BM25's weight grows with tf and shrinks with dl in double precision
 * too (integer tf steps change it by far more than the rounding), so no inflation is needed.
 */
function impactsExact(u: Uint32Array, imp: number, idf: number, avgdl: number): number {
  let best = 0;
  const n = u[imp]!;
  for (let i = 0; i < n; i++) {
    const w = termWeight(idf, u[imp + 1 + 2 * i]!, u[imp + 2 + 2 * i]!, avgdl);
    if (w > best) best = w;
  }
  return Math.fround(best);
}

/**
 * Thrown by a read that meets an offset past its views: the memory grew after the read
 * re-made them, and a block published since is what it found. The read starts over with
 * fresh views (search(), termStats()); the snapshot is the same, so is the answer.
 */
const REGROW = new Error('text memory grew during a read');
const within = (u: Uint32Array, at: number, words: number): void => {
  if (at + words > u.length) throw REGROW;
};

/** Reader: block j of a directory, checked to lie inside the views. */
function blockAt(u: Uint32Array, dir: number, j: number, postingWords: number): number {
  const blk = Atomics.load(u, dir + j);
  within(u, blk, B_HEADER);
  within(u, blk, B_HEADER + u[blk + B_CAP]! * postingWords);
  return blk;
}

/** Reader: a block's impacts (0: none), checked to lie inside the views. */
function impactsOf(u: Uint32Array, word: number): number {
  const imp = Atomics.load(u, word);
  if (imp === 0) return 0;
  within(u, imp, 1);
  within(u, imp, impactsWords(u[imp]!));
  return imp;
}

/** Stats chain: the first node with epoch <= s (0: none), following links with acquires. */
function nodeAt(u: Uint32Array, headWord: number, s: number, words: number): number {
  let node = Atomics.load(u, headWord);
  if (node !== 0) within(u, node, words);
  while (node !== 0 && u[node + S_EPOCH]! > s) {
    node = Atomics.load(u, node + S_NEXT);
    if (node !== 0) within(u, node, words);
  }
  return node;
}

// ------------------------------------------------------------------ per-thread search scratch

class Scratch {
  cap = 0;
  list = new Uint32Array(0);
  count = new Uint32Array(0);
  dir = new Uint32Array(0);
  pos = new Uint32Array(0);
  doc = new Uint32Array(0);
  blk = new Uint32Array(0); // current block (word offset)
  blkIdx = new Int32Array(0); // its index in the directory (-1: none loaded)
  blkLast = new Uint32Array(0); // last doc of the current block
  blkEnd = new Uint32Array(0); // posting index past the current block's last published posting
  idf = new Float64Array(0);
  ub = new Float64Array(0);
  blkUb = new Float64Array(0); // bound of the current block
  avgdl = 0;
  order = new Int32Array(0);
  prime = new Float64Array(0); // the threshold's min-heap
  first = new Int32Array(FIRST_BLOCKS); // a one-term search's most promising blocks
  heapScore = new Float64Array(0);
  heapElem = new Uint32Array(0);
  heapCap = 0;
  ensurePrime(k: number): void {
    if (k > this.prime.length) this.prime = new Float64Array(Math.max(k, 2 * this.prime.length, 16));
  }
  ensure(terms: number, k: number): void {
    if (terms > this.cap) {
      const n = Math.max(terms, 2 * this.cap, 8);
      this.cap = n;
      this.list = new Uint32Array(n); this.count = new Uint32Array(n); this.dir = new Uint32Array(n);
      this.pos = new Uint32Array(n); this.doc = new Uint32Array(n); this.blk = new Uint32Array(n);
      this.blkIdx = new Int32Array(n); this.blkLast = new Uint32Array(n); this.blkEnd = new Uint32Array(n);
      this.idf = new Float64Array(n); this.ub = new Float64Array(n); this.blkUb = new Float64Array(n); this.order = new Int32Array(n);
    }
    if (k > this.heapCap) {
      const n = Math.max(k, 2 * this.heapCap, 16);
      this.heapCap = n;
      this.heapScore = new Float64Array(n);
      this.heapElem = new Uint32Array(n);
    }
  }
}
const scratch = new Scratch();

/** A parsed export (export.ts): documents by doc handle, terms with where their postings start. */
export interface PartitionImage {
  analyzer: Analyzer;
  positions: boolean;
  created: Uint32Array;
  deleted: Uint32Array;
  element: Uint32Array;
  length: Uint32Array;
  termTexts: string[];
  /** Word index of each term's first posting; postings are [doc, tf, (positions) tf words]. */
  postingStarts: number[];
  postingCounts: number[];
  word: (i: number) => number;
}

export interface TextPartitionOptions {
  analyzer: Analyzer;
  positions: boolean;
}

export class TextPartition {
  readonly root: number;
  readonly analyzer: Analyzer;
  readonly positions: boolean;
  private readonly tm: TextMemory;
  // Writer state, made on the first write (a reader thread never needs it).
  private termIds: Map<string, number> | null = null;
  private stamp = new Int32Array(0); // per term id: the insert that last saw it
  private slot = new Int32Array(0); // per term id: its index among that insert's distinct terms
  private dead = new Int32Array(0); // per term id: postings of its current list whose doc is dead (removed or undone)
  private queued = new Uint8Array(0); // per term id: 1 while in `due`
  private isParked = new Uint8Array(0); // per term id: 1 while in `parked`
  // Writer's copies per term id (0: not known, read from the memory): current list, its last
  // block, the head of the term's statistics chain.
  private wList = new Uint32Array(0);
  private wBlk = new Uint32Array(0);
  private wHead = new Uint32Array(0);
  private readonly due: number[] = []; // terms whose lists maintain() should compact
  private parked: number[] = []; // [term, horizon epoch it waits for] pairs
  private parkedHorizon = 0; // the horizon parked terms were last looked at with
  private trimHorizon = 0; // the newest purge horizon maintain() was given: chains are cut below it
  private pendingEpochs = new Uint32Array(0); // compact() scratch
  private dictSlotsUsed = 0; // slots of the current dictionary table that are not 0 (terms and H_REMOVED)
  private freeTerms: number[] = []; // [term id, retire tag] of removed terms, oldest first (termId reuses them)
  private freeTermsHead = 0; // index in freeTerms of the oldest pair not reused yet
  private stampNow = 0;
  private distinct = new Uint32Array(64);
  private tfs = new Uint32Array(64);
  private tokenTerm = new Uint32Array(64);

  private constructor(tm: TextMemory, root: number) {
    tm.cover();
    const u = tm.u32;
    if (Atomics.load(u, root + P_MAGIC) !== PARTITION_MAGIC) fail(`no text partition at word ${root}`);
    this.tm = tm;
    this.root = root;
    this.analyzer = ANALYZERS[u[root + P_ANALYZER]!] ?? fail('bad analyzer');
    this.positions = u[root + P_POSITIONS] === 1;
  }

  /** Writer: a new empty partition (~0.5 KiB until documents arrive). */
  static create(memory: TextMemory, options: TextPartitionOptions): TextPartition {
    const code = analyzerCode(options.analyzer);
    const root = memory.allocate(P_WORDS);
    const dict = memory.allocate(H_SLOTS + DICT_CAP_MIN);
    const u = memory.u32;
    u[dict + H_CAP] = DICT_CAP_MIN;
    u[root + P_ANALYZER] = code;
    u[root + P_POSITIONS] = options.positions ? 1 : 0;
    Atomics.store(u, root + P_DICT, dict);
    // The magic last: attach() checks it.
    Atomics.store(u, root + P_MAGIC, PARTITION_MAGIC);
    return new TextPartition(memory, root);
  }

  /** Any thread: the partition at `root`. */
  static attach(memory: TextMemory, root: number): TextPartition {
    return new TextPartition(memory, root);
  }

  /** Documents ever inserted (published count). */
  pointCount(): number {
    return Atomics.load(this.tm.u32, this.root + P_DOCS);
  }

  /** Snapshots older than this may miss documents deleted before it (maintain() purged them); 0: none. */
  purgedBefore(): number {
    return Atomics.load(this.tm.u32, this.root + P_PURGED);
  }

  // ---------------------------------------------------------------- writer

  private writerState(): Map<string, number> {
    if (this.termIds !== null) return this.termIds;
    const ids = new Map<string, number>();
    const u = this.tm.u32, u16 = this.tm.u16, root = this.root;
    const n = u[root + P_TERMS]!;
    for (let t = 0; t < n; t++) {
      const rec = termAt(u, root, t);
      // Removed: reusable once the reads running now have ended.
      if (u[rec + T_LIST] === 0) this.freeTerms.push(t, this.tm.retireTag());
      else ids.set(termText(u, u16, rec), t);
    }
    this.termIds = ids;
    this.growTermArrays(n);
    const dict = u[root + P_DICT]!, cap = u[dict + H_CAP]!;
    let used = 0;
    for (let i = 0; i < cap; i++) if (u[dict + H_SLOTS + i] !== 0) used++;
    this.dictSlotsUsed = used;
    return ids;
  }

  private growTermArrays(terms: number): void {
    if (terms <= this.stamp.length) return;
    const n = Math.max(terms, 2 * this.stamp.length, 64);
    const stamp = new Int32Array(n), slot = new Int32Array(n), dead = new Int32Array(n), queued = new Uint8Array(n), isParked = new Uint8Array(n);
    stamp.set(this.stamp);
    slot.set(this.slot);
    dead.set(this.dead);
    queued.set(this.queued);
    isParked.set(this.isParked);
    this.isParked = isParked;
    const wList = new Uint32Array(n), wBlk = new Uint32Array(n), wHead = new Uint32Array(n);
    wList.set(this.wList);
    wBlk.set(this.wBlk);
    wHead.set(this.wHead);
    this.wList = wList;
    this.wBlk = wBlk;
    this.wHead = wHead;
    this.stamp = stamp;
    this.slot = slot;
    this.dead = dead;
    this.queued = queued;
  }

  /** Writer: the id of `term`, added to the dictionary if new. */
  private termId(term: string): number {
    const ids = this.termIds!;
    const known = ids.get(term);
    if (known !== undefined) return known;
    const tm = this.tm, root = this.root;
    // Room in the table (load <= 1/2, removed slots counted) first, and every allocation
    // before a reused id is taken: once a reused record (below P_TERMS, seen by exports and
    // by a writer attaching anew) is rewritten, nothing may fail before its slot is stored.
    let dict = tm.u32[root + P_DICT]!;
    if (2 * (this.dictSlotsUsed + 1) > tm.u32[dict + H_CAP]!) dict = this.rehashDictionary(dict);
    const reused = this.reusableTermId(false);
    const t = reused >= 0 ? reused : tm.u32[root + P_TERMS]!;
    if (t >= limits.textTermsPerPartitionMax) throw new SvcError('storage_error', `text index partition is full (${limits.textTermsPerPartitionMax} distinct terms)`);
    const c = chunkOf(t);
    if (reused < 0 && c >= tm.u32[root + P_TERM_CHUNKS]!) {
      if (c >= CHUNKS_MAX) fail('term chunks exhausted');
      const chunk = tm.allocate((1 << c) * T_WORDS);
      tm.u32[root + P_TERM_CHUNK0 + c] = chunk; // readers reach it only through a slot stored later
      tm.u32[root + P_TERM_CHUNKS] = c + 1;
    }
    const text = tm.allocate(termTextWords(term.length));
    const list = tm.allocate(L_WORDS);
    if (reused >= 0) this.reusableTermId(true);
    const u = tm.u32;
    const u16 = tm.u16;
    for (let i = 0; i < term.length; i++) u16[2 * text + i] = term.charCodeAt(i);
    u[list + L_MIN_DL] = 0xffffffff;
    const rec = termAt(u, root, t);
    const hash = termHash(term);
    u[rec + T_HASH] = hash;
    u[rec + T_TEXT] = text;
    u[rec + T_LEN] = term.length;
    u[rec + T_STATS] = 0;
    // A reused record is below P_TERMS, where an export may look at it now: T_LIST last
    // (0 until then: "removed", skipped), the words it leads to before it.
    Atomics.store(u, rec + T_LIST, list);
    // Publish the term through its slot.
    this.dictSlotsUsed++;
    const mask = u[dict + H_CAP]! - 1;
    let i = hash & mask;
    while (u[dict + H_SLOTS + i] !== 0) i = (i + 1) & mask;
    Atomics.store(u, dict + H_SLOTS + i, t + 1);
    // Export iterates terms below P_TERMS: stored after the record it covers.
    if (reused < 0) Atomics.store(u, root + P_TERMS, t + 1);
    ids.set(term, t);
    this.growTermArrays(t + 1);
    return t;
  }

  /**
   * Writer: the id of a removed term no running read can still hold (its record is then
   * rewritten for a new term), or -1. Ids come back in the order they were removed;
   * `take` false only looks (the caller takes it once nothing can fail any more).
   */
  private reusableTermId(take: boolean): number {
    const free = this.freeTerms;
    const head = this.freeTermsHead;
    if (head === free.length || !this.tm.reusable(free[head + 1]!)) return -1;
    const t = free[head]!;
    if (!take) return t;
    this.freeTermsHead = head + 2;
    if (this.freeTermsHead === free.length) {
      free.length = 0;
      this.freeTermsHead = 0;
    } else if (this.freeTermsHead >= 4096 && 2 * this.freeTermsHead >= free.length) {
      this.freeTerms = free.slice(this.freeTermsHead);
      this.freeTermsHead = 0;
    }
    textMaintainCounters.termIdsReused++;
    return t;
  }

  /**
   * Writer: a new table holding the dictionary's terms (the writer's map: removed ones
   * left out, with their slots), at most a quarter full, published; the old one retired.
   */
  private rehashDictionary(old: number): number {
    const tm = this.tm, root = this.root;
    const live = this.termIds!.size;
    let cap = DICT_CAP_MIN;
    while (cap < 4 * (live + 1)) cap *= 2;
    const dict = tm.allocate(H_SLOTS + cap);
    const u = tm.u32;
    u[dict + H_CAP] = cap;
    const mask = cap - 1;
    for (const t of this.termIds!.values()) {
      let i = u[termAt(u, root, t) + T_HASH]! & mask;
      while (u[dict + H_SLOTS + i] !== 0) i = (i + 1) & mask;
      u[dict + H_SLOTS + i] = t + 1;
    }
    Atomics.store(u, root + P_DICT, dict);
    tm.retire(old, H_SLOTS + u[old + H_CAP]!);
    this.dictSlotsUsed = live;
    return dict;
  }

  /** Writer: a document record slot for doc `d` (its chunk allocated if new). */
  private docRecord(d: number): number {
    const tm = this.tm, root = this.root;
    const c = chunkOf(d);
    if (c >= tm.u32[root + P_DOC_CHUNKS]!) {
      if (c >= CHUNKS_MAX) fail('doc chunks exhausted');
      const chunk = tm.allocate((1 << c) * D_WORDS);
      tm.u32[root + P_DOC_CHUNK0 + c] = chunk; // reached only through postings and P_DOCS stored later
      tm.u32[root + P_DOC_CHUNKS] = c + 1;
    }
    return docAt(tm.u32, root, d);
  }

  /** Writer: append (doc, tf, positions offset) to term t's current list. */
  private append(t: number, doc: number, tf: number, dl: number, posAt: number): void {
    // The writer's copies of the term's list and last block spare it two cache misses per
    // posting (the term record and the directory) on large vocabularies.
    let list = this.wList[t]!;
    if (list === 0) list = this.wList[t] = this.tm.u32[termAt(this.tm.u32, this.root, t) + T_LIST]!;
    this.appendTo(list, doc, tf, dl, posAt, t);
  }

  /** Writer: append to the list at `list` (the current one, or one maintain() is building). */
  private appendTo(list: number, doc: number, tf: number, dl: number, posAt: number, t = -1): void {
    const tm = this.tm, positions = this.positions;
    let u = tm.u32;
    const count = u[list + L_COUNT]!;
    const j = count >>> BLOCK_SHIFT, off = count & (BLOCK_POSTINGS - 1);
    let blk: number;
    if (off === 0) {
      // A new block j (every earlier block is full at BLOCK_POSTINGS and never changes again).
      let dir = u[list + L_DIR]!;
      const dirCap = u[list + L_DIR_CAP]!;
      if (j >= dirCap) {
        const cap = Math.max(1, 2 * dirCap);
        const grown = tm.allocate(cap);
        u = tm.u32;
        for (let i = 0; i < j; i++) u[grown + i] = u[dir + i]!;
        Atomics.store(u, list + L_DIR, grown);
        u[list + L_DIR_CAP] = cap;
        if (dir !== 0) tm.retire(dir, dirCap);
        dir = grown;
      }
      const cap = j === 0 ? FIRST_BLOCK_CAP : BLOCK_POSTINGS;
      blk = tm.allocate(blockWords(cap, positions));
      u = tm.u32;
      u[blk + B_CAP] = cap;
      u[blk + B_MIN_DL] = 0xffffffff;
      Atomics.store(u, dir + j, blk);
      if (t >= 0) this.wBlk[t] = blk;
    } else {
      const dir = u[list + L_DIR]!;
      if (t >= 0) {
        blk = this.wBlk[t]!;
        if (blk === 0) blk = this.wBlk[t] = u[dir + j]!;
      } else {
        blk = u[dir + j]!;
      }
      const cap = u[blk + B_CAP]!;
      if (off === cap) {
        // The growing first block is full: a copy twice as large replaces it.
        const grown = tm.allocate(blockWords(2 * cap, positions));
        u = tm.u32;
        u[grown + B_CAP] = 2 * cap;
        u[grown + B_MAX_TF] = u[blk + B_MAX_TF]!;
        u[grown + B_MIN_DL] = u[blk + B_MIN_DL]!;
        u.copyWithin(grown + B_HEADER, blk + B_HEADER, blk + B_HEADER + cap);
        u.copyWithin(grown + B_HEADER + 2 * cap, blk + B_HEADER + cap, blk + B_HEADER + 2 * cap);
        u.copyWithin(grown + B_HEADER + 4 * cap, blk + B_HEADER + 2 * cap, blk + B_HEADER + 3 * cap);
        if (positions) u.copyWithin(grown + B_HEADER + 6 * cap, blk + B_HEADER + 3 * cap, blk + B_HEADER + 4 * cap);
        Atomics.store(u, dir + j, grown);
        tm.retire(blk, blockWords(cap, positions));
        blk = grown;
        if (t >= 0) this.wBlk[t] = blk;
      }
    }
    const cap = u[blk + B_CAP]!;
    u[blk + B_HEADER + off] = doc;
    u[blk + B_HEADER + cap + off] = tf;
    // The document's length beside its tf: a search scores a posting without the document's
    // record, which it reads only for a candidate that would enter the top k.
    u[blk + B_HEADER + 2 * cap + off] = dl;
    if (positions) u[blk + B_HEADER + 3 * cap + off] = posAt;
    if (tf > u[blk + B_MAX_TF]!) u[blk + B_MAX_TF] = tf;
    if (dl < u[blk + B_MIN_DL]!) u[blk + B_MIN_DL] = dl;
    if (tf > u[list + L_MAX_TF]!) u[list + L_MAX_TF] = tf;
    if (dl < u[list + L_MIN_DL]!) u[list + L_MIN_DL] = dl;
    // The list's impacts: replaced (immutable blocks) when the posting is not dominated.
    const limp = u[list + L_IMPACTS]!;
    const had = limp === 0 ? 0 : u[limp]!;
    // Most postings are dominated by a pair already there: checked in place first.
    let dominated = false;
    for (let i = 0; i < had; i++) {
      if (u[limp + 1 + 2 * i]! >= tf && u[limp + 2 + 2 * i]! <= dl) { dominated = true; break; }
    }
    let now = -1;
    if (!dominated) {
      for (let i = 0; i < had; i++) { impTf[i] = u[limp + 1 + 2 * i]!; impDl[i] = u[limp + 2 + 2 * i]!; }
      now = impactsAdd(had, tf, dl);
    }
    if (now >= 0) {
      const imp = this.writeImpacts(now, 0);
      u = tm.u32;
      Atomics.store(u, list + L_IMPACTS, imp);
      if (limp !== 0) tm.retire(limp, impactsWords(had));
    }
    if (off + 1 === BLOCK_POSTINGS) {
      // The block is full and never changes again: its impacts, before the count that covers them.
      let n = 0, minElement = 0xffffffff;
      for (let i = 0; i < BLOCK_POSTINGS; i++) {
        const rec = docAt(u, this.root, u[blk + B_HEADER + i]!);
        const r = impactsAdd(n, u[blk + B_HEADER + cap + i]!, u[blk + B_HEADER + 2 * cap + i]!);
        if (r >= 0) n = r;
        if (u[rec + D_ELEMENT]! < minElement) minElement = u[rec + D_ELEMENT]!;
      }
      const imp = this.writeImpacts(n, minElement);
      u = tm.u32;
      Atomics.store(u, blk + B_IMPACTS, imp);
      this.rankBlock(list, j, imp);
    }
    Atomics.store(u, list + L_COUNT, count + 1);
  }

  /**
   * Writer: keep block j among the list's L_TOP blocks if its bound beats theirs (bounds at
   * today's average length; the idf scales every block of a list alike).
   */
  private rankBlock(list: number, j: number, imp: number): void {
    const u = this.tm.u32;
    const node = u[this.root + P_STATS]!;
    const docs = node === 0 ? 0 : u[node + S_DOCS]!;
    const avgdl = docs === 0 ? 1 : (u[node + S_LEN_HI]! * TWO32 + u[node + S_LEN_LO]!) / docs || 1;
    const dir = u[list + L_DIR]!;
    const key = impactsBound(u, imp, 1, avgdl);
    let at = L_TOP_COUNT;
    for (let i = L_TOP_COUNT - 1; i >= 0; i--) {
      const v = u[list + L_TOP + i]!;
      if (v !== 0 && impactsBound(u, u[u[dir + v - 1]! + B_IMPACTS]!, 1, avgdl) >= key) break;
      at = i;
    }
    if (at === L_TOP_COUNT) return;
    for (let i = L_TOP_COUNT - 1; i > at; i--) u[list + L_TOP + i] = u[list + L_TOP + i - 1]!;
    u[list + L_TOP + at] = j + 1;
  }

  /** Writer: a new impacts block holding the n pairs in impTf/impDl. */
  private writeImpacts(n: number, minElement: number): number {
    const imp = this.tm.allocate(impactsWords(n));
    const u = this.tm.u32;
    u[imp] = n;
    for (let i = 0; i < n; i++) { u[imp + 1 + 2 * i] = impTf[i]!; u[imp + 2 + 2 * i] = impDl[i]!; }
    u[imp + 1 + 2 * n] = minElement;
    return imp;
  }

  /**
   * Writer: add `delta` to a term's df from `epoch` on. Normally `epoch` is the open batch's,
   * at or after the newest node: that node is changed in place or a new one linked in front.
   * An older epoch (a build scan inserting at the element's creation) changes every newer
   * node and links a node in behind them.
   */
  private bumpTerm(t: number, epoch: number, delta: number): void {
    const tm = this.tm;
    const headWord = termAt(tm.u32, this.root, t) + T_STATS;
    let link = headWord;
    // The writer's copy of the head (0: not known here) spares reading the term record.
    let node = this.wHead[t]! !== 0 ? this.wHead[t]! : tm.u32[link]!;
    while (node !== 0 && tm.u32[node + S_EPOCH]! > epoch) {
      tm.u32[node + S_DF] = tm.u32[node + S_DF]! + delta;
      link = node + S_NEXT;
      node = tm.u32[link]!;
    }
    if (node !== 0 && tm.u32[node + S_EPOCH] === epoch) {
      tm.u32[node + S_DF] = tm.u32[node + S_DF]! + delta;
      return;
    }
    const fresh = tm.allocate(S_TERM_WORDS);
    const u = tm.u32; // allocate() may have grown the memory
    const linkNow = link === headWord ? termAt(u, this.root, t) + T_STATS : link;
    u[fresh + S_EPOCH] = epoch;
    u[fresh + S_DF] = (node !== 0 ? u[node + S_DF]! : 0) + delta;
    u[fresh + S_NEXT] = node;
    Atomics.store(u, linkNow, fresh);
    if (link === headWord) {
      this.wHead[t] = fresh;
      this.trimChain(fresh, S_TERM_WORDS);
    }
  }

  /**
   * Writer: cut a statistics chain after its first node at or below the purge horizon the
   * last maintain() was given (no read will take a snapshot below it, so older nodes are
   * unreachable for every read to come); the cut nodes are retired (a read walking them now
   * keeps them until it ends).
   */
  private trimChain(head: number, words: number): void {
    const horizon = this.trimHorizon;
    if (horizon === 0) return;
    const tm = this.tm;
    let u = tm.u32;
    let node = head;
    while (node !== 0 && u[node + S_EPOCH]! > horizon) node = u[node + S_NEXT]!;
    if (node === 0 || u[node + S_NEXT] === 0) return;
    let tail = u[node + S_NEXT]!;
    Atomics.store(u, node + S_NEXT, 0);
    while (tail !== 0) {
      u = tm.u32;
      const next = u[tail + S_NEXT]!;
      tm.retire(tail, words);
      tail = next;
    }
  }

  /** Writer: add (docs, length) to the partition statistics from `epoch` on (as bumpTerm). */
  private bumpPartition(epoch: number, docs: number, length: number): void {
    const tm = this.tm;
    const add = (node: number): void => {
      const u = tm.u32;
      u[node + S_DOCS] = u[node + S_DOCS]! + docs;
      const total = u[node + S_LEN_HI]! * TWO32 + u[node + S_LEN_LO]! + length;
      u[node + S_LEN_LO] = total % TWO32;
      u[node + S_LEN_HI] = Math.floor(total / TWO32);
    };
    let link = this.root + P_STATS;
    let node = tm.u32[link]!;
    while (node !== 0 && tm.u32[node + S_EPOCH]! > epoch) {
      add(node);
      link = node + S_NEXT;
      node = tm.u32[link]!;
    }
    if (node !== 0 && tm.u32[node + S_EPOCH] === epoch) { add(node); return; }
    const fresh = tm.allocate(S_PART_WORDS);
    const u = tm.u32;
    u[fresh + S_EPOCH] = epoch;
    if (node !== 0) {
      u[fresh + S_DOCS] = u[node + S_DOCS]!;
      u[fresh + S_LEN_LO] = u[node + S_LEN_LO]!;
      u[fresh + S_LEN_HI] = u[node + S_LEN_HI]!;
    }
    add(fresh);
    u[fresh + S_NEXT] = node;
    Atomics.store(u, link, fresh);
    if (link === this.root + P_STATS) this.trimChain(fresh, S_PART_WORDS);
  }

  /** Writer: index a document for `element` visible from `epoch`; returns its doc handle. */
  insert(element: number, text: string, epoch: number): number {
    if ((element >>> 0) !== element) fail(`element ${element}`);
    if (!(Number.isInteger(epoch) && epoch >= 1 && epoch <= limits.epochMax)) fail(`insert at epoch ${epoch}`);
    const terms = analyze(text, this.analyzer);
    if (terms.length > limits.textDocumentTermsMax) {
      throw new SvcError('invalid_index_source_data', `a text of ${terms.length} terms is over the ${limits.textDocumentTermsMax} terms a document may hold`);
    }
    const tm = this.tm, root = this.root;
    const d = tm.u32[root + P_DOCS]!;
    if (d >= limits.textDocumentsPerPartitionMax) throw new SvcError('storage_error', `text index partition is full (${limits.textDocumentsPerPartitionMax} documents)`);
    this.writerState();
    // Distinct terms in first-occurrence order with their frequencies (per-term stamps: no Map per document).
    const n = terms.length;
    if (n > this.tokenTerm.length) this.tokenTerm = new Uint32Array(Math.max(n, 2 * this.tokenTerm.length));
    if (this.stampNow === 0x7fffffff) { this.stamp.fill(0); this.stampNow = 0; }
    const stampNow = ++this.stampNow;
    let distinct = 0;
    for (let i = 0; i < n; i++) {
      const t = this.termId(terms[i]!);
      this.tokenTerm[i] = t;
      if (this.stamp[t] !== stampNow) {
        this.stamp[t] = stampNow;
        this.slot[t] = distinct;
        if (distinct === this.distinct.length) {
          const grownD = new Uint32Array(2 * distinct), grownT = new Uint32Array(2 * distinct);
          grownD.set(this.distinct); grownT.set(this.tfs);
          this.distinct = grownD; this.tfs = grownT;
        }
        this.distinct[distinct] = t;
        this.tfs[distinct] = 0;
        distinct++;
      }
      this.tfs[this.slot[t]!]!++;
    }
    // The record first, never visible (created 0) until every posting is in; P_DOCS is raised
    // even if something below fails, so that the slot is never reused under its postings.
    const rec0 = this.docRecord(d);
    const termsBlock = tm.allocate(1 + distinct);
    const posBlock = this.positions && n > 0 ? tm.allocate(n) : 0;
    let u = tm.u32;
    u[termsBlock] = distinct;
    for (let i = 0; i < distinct; i++) u[termsBlock + 1 + i] = this.distinct[i]!;
    // Positions grouped by term in first-occurrence order: term i's run starts at the sum of the earlier tfs.
    const posStart = this.positions ? new Uint32Array(distinct) : null;
    if (posStart !== null && posBlock !== 0) {
      let at = 0;
      for (let i = 0; i < distinct; i++) { posStart[i] = at; at += this.tfs[i]!; }
      const fill = new Uint32Array(distinct);
      for (let p = 0; p < n; p++) {
        const i = this.slot[this.tokenTerm[p]!]!;
        u[posBlock + posStart[i]! + fill[i]!] = p;
        fill[i]!++;
      }
    }
    const rec = docAt(u, root, d);
    if (rec !== rec0) fail('doc record moved');
    u[rec + D_CREATED] = 0;
    u[rec + D_DELETED] = 0;
    u[rec + D_ELEMENT] = element;
    u[rec + D_LENGTH] = n;
    u[rec + D_TERMS] = termsBlock;
    u[rec + D_POS] = posBlock;
    try {
      for (let i = 0; i < distinct; i++) {
        this.append(this.distinct[i]!, d, this.tfs[i]!, n, posBlock === 0 ? 0 : posBlock + posStart![i]!);
      }
      this.applyStats(d, epoch, 1);
      u = tm.u32;
      u[docAt(u, root, d) + D_CREATED] = epoch;
    } finally {
      Atomics.store(tm.u32, root + P_DOCS, d + 1);
    }
    return d;
  }

  /** Writer: add `sign` x doc d's contribution (df of its terms, 1 doc, its length) from `epoch` on. */
  private applyStats(d: number, epoch: number, sign: 1 | -1): void {
    const tm = this.tm;
    const rec = docAt(tm.u32, this.root, d);
    const termsBlock = tm.u32[rec + D_TERMS]!;
    const length = tm.u32[rec + D_LENGTH]!;
    const distinct = tm.u32[termsBlock]!;
    let done = 0;
    try {
      for (; done < distinct; done++) this.bumpTerm(tm.u32[termsBlock + 1 + done]!, epoch, sign);
      this.bumpPartition(epoch, sign, sign * length);
    } catch (err) {
      // Undo what was applied: nodes at `epoch` exist now, so undoing allocates nothing.
      for (let i = 0; i < done; i++) this.bumpTerm(tm.u32[termsBlock + 1 + i]!, epoch, -sign);
      throw err;
    }
  }

  private recordOf(doc: number): number {
    if (!(Number.isInteger(doc) && doc >= 0 && doc < this.tm.u32[this.root + P_DOCS]!)) fail(`no document ${doc}`);
    return docAt(this.tm.u32, this.root, doc);
  }

  /** Writer: the document stops being visible at `epoch`. */
  remove(doc: number, epoch: number): void {
    const rec = this.recordOf(doc);
    const u = this.tm.u32;
    const created = u[rec + D_CREATED]!;
    if (created === 0) fail(`removing document ${doc}, which was never visible`);
    if (u[rec + D_DELETED] !== 0) fail(`document ${doc} removed twice`);
    if (!(Number.isInteger(epoch) && epoch >= created && epoch <= limits.epochMax)) fail(`remove at epoch ${epoch} of a document created at ${created}`);
    this.writerState();
    this.applyStats(doc, epoch, -1);
    this.tm.u32[rec + D_DELETED] = epoch;
    this.markDead(doc, 1);
  }

  /** Writer rollback of the open batch: the doc is never visible (statistics too). */
  undoInsert(doc: number): void {
    const rec = this.recordOf(doc);
    let u = this.tm.u32;
    const created = u[rec + D_CREATED]!, deleted = u[rec + D_DELETED]!;
    if (created === 0) fail(`document ${doc} undone twice`);
    this.writerState();
    if (deleted !== 0) { this.applyStats(doc, deleted, 1); u = this.tm.u32; u[rec + D_DELETED] = 0; }
    this.applyStats(doc, created, -1);
    u = this.tm.u32;
    u[docAt(u, this.root, doc) + D_CREATED] = 0;
    // Dead whether or not it was removed too (then it was counted once already).
    if (deleted === 0) this.markDead(doc, 1);
  }

  /** Writer rollback of remove(). */
  undoRemove(doc: number): void {
    const rec = this.recordOf(doc);
    const deleted = this.tm.u32[rec + D_DELETED]!;
    if (deleted === 0) fail(`undoing the removal of document ${doc}, which is not removed`);
    this.writerState();
    this.applyStats(doc, deleted, 1);
    this.tm.u32[docAt(this.tm.u32, this.root, doc) + D_DELETED] = 0;
    this.markDead(doc, -1);
  }

  /** Writer, between batches: one bounded step of background work; true while more remains. */
  /**
   * Writer, between batches: one bounded step of background work; true while more remains.
   * The work is compaction: a term whose list holds many postings of dead documents gets a
   * new list without them, built aside and published with one Atomics.store of T_LIST (a
   * reader has either the old list or the new one, each whole); the old blocks are retired.
   * Always dropped: documents that were never visible (rolled-back inserts). Dropped only
   * when the caller passes `purgeBefore`: documents deleted at or before it (min'ed with
   * visibleEpoch). The default 0 keeps every snapshot and every export cut exact; a caller
   * that knows no read or export will use a snapshot below E passes E, and purgedBefore()
   * tells later readers which snapshots may miss documents.
   */
  maintain(visibleEpoch: number, purgeBefore = 0): boolean {
    if (!(Number.isInteger(visibleEpoch) && visibleEpoch >= 0 && visibleEpoch <= limits.epochMax)) fail(`maintain at ${visibleEpoch}`);
    if (!(Number.isInteger(purgeBefore) && purgeBefore >= 0)) fail(`purge before ${purgeBefore}`);
    if (this.termIds === null) return false; // nothing written through this object yet
    const horizon = Math.min(purgeBefore, visibleEpoch);
    // Statistics chains are cut below the horizon from now on (as they grow).
    if (horizon > this.trimHorizon) this.trimHorizon = horizon;
    // Lists waiting for the horizon to pass their deletions: due again once it has.
    if (this.parked.length > 0 && horizon > this.parkedHorizon) {
      this.parkedHorizon = horizon;
      let w = 0;
      for (let i = 0; i < this.parked.length; i += 2) {
        const t = this.parked[i]!, epoch = this.parked[i + 1]!;
        if (epoch <= horizon) {
          this.isParked[t] = 0;
          if (this.queued[t] === 0) { this.queued[t] = 1; this.due.push(t); }
        } else {
          this.parked[w++] = t; this.parked[w++] = epoch;
        }
      }
      this.parked.length = w;
    }
    let budget = limits.textMaintainPostingsPerStep;
    while (this.due.length > 0 && budget > 0) {
      const t = this.due.pop()!;
      this.queued[t] = 0;
      budget -= this.compact(t, horizon);
    }
    return this.due.length > 0;
  }

  /**
   * Writer: lists wait for the purge horizon to pass their deletions (maintain() returned
   * false for them): call maintain() again once the horizon has moved.
   */
  mergesWaiting(): boolean {
    return this.parked.length > 0;
  }

  /** Writer: `delta` more (or fewer) postings of dead documents in the lists of doc d's terms. */
  private markDead(d: number, delta: number): void {
    const tm = this.tm;
    const u = tm.u32;
    const tb = u[docAt(u, this.root, d) + D_TERMS]!;
    const n = u[tb]!;
    for (let i = 0; i < n; i++) {
      const t = u[tb + 1 + i]!;
      const dead = (this.dead[t] = this.dead[t]! + delta);
      if (delta > 0 && this.queued[t] === 0 && worthCompacting(dead, u[u[termAt(u, this.root, t) + T_LIST]! + L_COUNT]!)) {
        this.queued[t] = 1;
        this.due.push(t);
      }
    }
  }

  /** Writer: rebuild term t's list without the postings `horizon` lets go; returns the work done (postings read). */
  private compact(t: number, horizon: number): number {
    const tm = this.tm, root = this.root, positions = this.positions;
    let u = tm.u32;
    const trec = termAt(u, root, t);
    const old = u[trec + T_LIST]!;
    if (old === 0) return 0; // removed while it waited in `parked`
    const count = u[old + L_COUNT]!;
    const dir = u[old + L_DIR]!;
    const dropped = (doc: number): boolean => {
      const rec = docAt(u, root, doc);
      const created = u[rec + D_CREATED]!, deleted = u[rec + D_DELETED]!;
      return created === 0 || (deleted !== 0 && deleted <= horizon);
    };
    // The newest deletion among the dropped documents: what P_PURGED must cover after.
    let drop = 0, pending = 0, purged = 0;
    if (this.pendingEpochs.length < count) this.pendingEpochs = new Uint32Array(Math.max(count, 2 * this.pendingEpochs.length));
    const pendingEpochs = this.pendingEpochs;
    for (let p = 0; p < count; p++) {
      const rec = docAt(u, root, u[u[dir + (p >>> BLOCK_SHIFT)]! + B_HEADER + (p & (BLOCK_POSTINGS - 1))]!);
      const created = u[rec + D_CREATED]!, deleted = u[rec + D_DELETED]!;
      if (created === 0 || (deleted !== 0 && deleted <= horizon)) {
        drop++;
        if (deleted > purged) purged = deleted;
      } else if (deleted !== 0) pendingEpochs[pending++] = deleted;
    }
    if (drop === 0 || 8 * drop < count) {
      // Not worth a copy yet: the deaths are newer than the horizon. Parked until the horizon
      // reaches the epoch at which an eighth of the list could go (or looked at again on
      // the next death).
      const need = Math.ceil(count / 8) - drop;
      if (need >= 1 && need <= pending) {
        const epochs = pendingEpochs.subarray(0, pending).sort();
        if (this.isParked[t] === 0) { this.isParked[t] = 1; this.parked.push(t, epochs[need - 1]!); }
      }
      return count;
    }
    if (drop === count) {
      this.removeTerm(t, purged);
      return count;
    }
    const list = tm.allocate(L_WORDS);
    u = tm.u32;
    u[list + L_MIN_DL] = 0xffffffff;
    let deadKept = 0;
    for (let p = 0; p < count; p++) {
      const blk = u[dir + (p >>> BLOCK_SHIFT)]!, cap = u[blk + B_CAP]!, off = p & (BLOCK_POSTINGS - 1);
      const doc = u[blk + B_HEADER + off]!;
      if (dropped(doc)) continue;
      const rec = docAt(u, root, doc);
      if (u[rec + D_DELETED] !== 0) deadKept++;
      this.appendTo(list, doc, u[blk + B_HEADER + cap + off]!, u[rec + D_LENGTH]!, positions ? u[blk + B_HEADER + 3 * cap + off]! : 0);
      u = tm.u32;
    }
    textMaintainCounters.compactions++;
    textMaintainCounters.postingsDropped += drop;
    if (purged > Atomics.load(u, root + P_PURGED)) Atomics.store(u, root + P_PURGED, purged);
    Atomics.store(u, trec + T_LIST, list);
    this.wList[t] = 0;
    this.wBlk[t] = 0;
    // The old list: retired whole (a reader that loaded it before the store above still reads it).
    this.retireList(old);
    this.dead[t] = deadKept;
    return 2 * count;
  }

  /** Writer: a list that is no longer reachable, with its directory, blocks and impacts. */
  private retireList(list: number): void {
    const tm = this.tm;
    const u = tm.u32;
    const count = u[list + L_COUNT]!, dir = u[list + L_DIR]!;
    tm.retire(list, L_WORDS);
    const limp = u[list + L_IMPACTS]!;
    if (limp !== 0) tm.retire(limp, impactsWords(u[limp]!));
    for (let j = 0; j << BLOCK_SHIFT < count; j++) {
      const blk = u[dir + j]!;
      const imp = u[blk + B_IMPACTS]!;
      if (imp !== 0) tm.retire(imp, impactsWords(u[imp]!));
      tm.retire(blk, blockWords(u[blk + B_CAP]!, this.positions));
    }
    if (dir !== 0) tm.retire(dir, u[list + L_DIR_CAP]!);
  }

  /**
   * Writer: term t's every posting is of a document `horizon` lets go, so no read to come
   * can find a document holding it: the term leaves the dictionary, and its text, list and
   * statistics chain go back to the memory once the reads that could have found it ended.
   * Without this a partition kept every term it ever indexed (~200 B each) until a snapshot
   * load: text that keeps bringing new words grew the memory without bound (a soak probe).
   * The slot becomes H_REMOVED before anything is retired; T_LIST becomes 0, which the
   * readers that found the term earlier take for "no postings". The id, with its record, is
   * reused for a new term once every read that could have found this one has ended
   * (reusableTermId).
   */
  private removeTerm(t: number, purged: number): void {
    const tm = this.tm, root = this.root;
    const u = tm.u32, u16 = tm.u16;
    const rec = termAt(u, root, t);
    const list = u[rec + T_LIST]!;
    // `purged`: the newest deletion among its documents, which P_PURGED must cover (as a
    // compaction's copy does).
    if (purged > Atomics.load(u, root + P_PURGED)) Atomics.store(u, root + P_PURGED, purged);
    const dict = u[root + P_DICT]!;
    const mask = u[dict + H_CAP]! - 1;
    let i = u[rec + T_HASH]! & mask;
    while (u[dict + H_SLOTS + i] !== t + 1) {
      if (u[dict + H_SLOTS + i] === 0) fail(`term ${t} is not in the dictionary`);
      i = (i + 1) & mask;
    }
    Atomics.store(u, dict + H_SLOTS + i, H_REMOVED);
    this.termIds!.delete(termText(u, u16, rec));
    Atomics.store(u, rec + T_LIST, 0);
    this.retireList(list);
    const text = u[rec + T_TEXT]!;
    tm.retire(text, termTextWords(u[rec + T_LEN]!));
    let node = this.wHead[t]! !== 0 ? this.wHead[t]! : u[rec + T_STATS]!;
    while (node !== 0) {
      const next = tm.u32[node + S_NEXT]!;
      tm.retire(node, S_TERM_WORDS);
      node = next;
    }
    this.wList[t] = 0;
    this.wBlk[t] = 0;
    this.wHead[t] = 0;
    this.dead[t] = 0;
    // The id comes back for a new term once the reads that could have found this one ended.
    this.freeTerms.push(t, tm.retireTag());
    textMaintainCounters.termsRemoved++;
  }

  // ---------------------------------------------------------------- readers

  /** Reader: the id of an analyzed term, or -1. */
  private lookup(u: Uint32Array, u16: Uint16Array, term: string): number {
    const hash = termHash(term);
    const dict = Atomics.load(u, this.root + P_DICT);
    within(u, dict, H_SLOTS);
    within(u, dict, H_SLOTS + u[dict + H_CAP]!);
    const mask = u[dict + H_CAP]! - 1;
    for (let i = hash & mask; ; i = (i + 1) & mask) {
      const s = Atomics.load(u, dict + H_SLOTS + i);
      if (s === 0) return -1;
      if (s === H_REMOVED) continue;
      const rec = termAt(u, this.root, s - 1);
      within(u, rec, T_WORDS);
      if (u[rec + T_HASH] !== hash || u[rec + T_LEN] !== term.length) continue;
      within(u, u[rec + T_TEXT]!, termTextWords(term.length));
      const text = 2 * u[rec + T_TEXT]!;
      let same = true;
      for (let c = 0; c < term.length; c++) if (u16[text + c] !== term.charCodeAt(c)) { same = false; break; }
      if (same) return s - 1;
    }
  }

  /** The distinct terms of a query, first-occurrence order. */
  private queryTerms(query: string): string[] {
    return distinctTerms(query, this.analyzer);
  }

  /** Statistics at a snapshot (already announced read). */
  private statsIn(terms: readonly string[], snapshot: number): TermStats {
    const tm = this.tm;
    const u = tm.u32, u16 = tm.u16;
    const node = nodeAt(u, this.root + P_STATS, snapshot, S_PART_WORDS);
    const docs = node === 0 ? 0 : u[node + S_DOCS]!;
    const totalLength = node === 0 ? 0 : u[node + S_LEN_HI]! * TWO32 + u[node + S_LEN_LO]!;
    const df: number[] = [];
    for (const term of terms) {
      const t = this.lookup(u, u16, term);
      if (t < 0) { df.push(0); continue; }
      const n = nodeAt(u, termAt(u, this.root, t) + T_STATS, snapshot, S_TERM_WORDS);
      df.push(n === 0 ? 0 : u[n + S_DF]!);
    }
    return { docs, totalLength, df };
  }

  /** Statistics at a snapshot for `*_within` and tests: visible doc count, total length of visible docs, and df per given term. */
  termStats(terms: readonly string[], snapshot: number): TermStats {
    const tm = this.tm;
    const slot = tm.beginRead();
    try {
      for (;;) {
        tm.cover();
        try {
          return this.statsIn(terms, snapshot);
        } catch (err) {
          if (err !== REGROW) throw err;
        }
      }
    } finally {
      tm.endRead(slot);
    }
  }

  /**
   * Readers, lock-free: BM25 top-k among docs visible at `snapshot`, OR over the query's
   * distinct terms, ties by ascending element; writes the out arrays, returns the count.
   */
  search(query: string, k: number, snapshot: number, outElements: Uint32Array, outScores: Float32Array): number {
    if (!(Number.isInteger(k) && k >= 0 && outElements.length >= k && outScores.length >= k)) fail(`search for ${k} results into ${outElements.length} / ${outScores.length}`);
    const terms = this.queryTerms(query);
    if (terms.length === 0 || k === 0 || snapshot === 0) return 0;
    const tm = this.tm;
    const slot = tm.beginRead();
    try {
      for (;;) {
        tm.cover();
        try {
          return this.searchIn(terms, k, snapshot, outElements, outScores);
        } catch (err) {
          if (err !== REGROW) throw err;
        }
      }
    } finally {
      tm.endRead(slot);
    }
  }

  private searchIn(terms: string[], k: number, snapshot: number, outElements: Uint32Array, outScores: Float32Array): number {
    const tm = this.tm, root = this.root;
    const u = tm.u32, u16 = tm.u16;
    textSearchCounters.searches++;
    const pnode = nodeAt(u, root + P_STATS, snapshot, S_PART_WORDS);
    if (pnode === 0) return 0;
    const docsVisible = u[pnode + S_DOCS]!;
    const totalLength = u[pnode + S_LEN_HI]! * TWO32 + u[pnode + S_LEN_LO]!;
    if (docsVisible === 0 || totalLength === 0) return 0;
    const avgdl = totalLength / docsVisible;
    const kk = Math.min(k, docsVisible);
    const sc = scratch;
    sc.avgdl = avgdl;
    sc.ensure(terms.length, kk);
    // Cursors, in query-term order (the order scores are summed in).
    let m = 0;
    for (const term of terms) {
      const t = this.lookup(u, u16, term);
      if (t < 0) continue;
      const trec = termAt(u, root, t);
      const snode = nodeAt(u, trec + T_STATS, snapshot, S_TERM_WORDS);
      const df = snode === 0 ? 0 : u[snode + S_DF]!;
      if (df === 0) continue;
      const list = Atomics.load(u, trec + T_LIST);
      if (list === 0) continue; // removed since the lookup found it
      within(u, list, L_WORDS);
      const count = Atomics.load(u, list + L_COUNT);
      if (count === 0) continue;
      sc.list[m] = list;
      sc.count[m] = count;
      sc.dir[m] = Atomics.load(u, list + L_DIR);
      within(u, sc.dir[m]!, ((count - 1) >>> BLOCK_SHIFT) + 1);
      const idf = idfOf(docsVisible, df);
      sc.idf[m] = idf;
      // Impacts loaded after the count: they cover at least the postings below it.
      sc.ub[m] = impactsBound(u, impactsOf(u, list + L_IMPACTS), idf, avgdl);
      sc.order[m] = m;
      m++;
    }
    if (m === 0) return 0;
    // Every document record and block below the counts just loaded was allocated before
    // they were published: covered by the heap top loaded now. (Blocks grown since and
    // impacts sealed since are checked where they are loaded.)
    if (tm.cover()) throw REGROW;
    const pruning = textSearchOptions.pruning;
    const pw = postingWords(this.positions);
    let scored = 0;
    // Pruning starts from a threshold: the k-th best single-term weight among the visible
    // documents of each list's most promising block (its best-ranked full block). Every
    // document scores at least the weight of any one of its terms, and a list's documents are
    // distinct, so k documents score at least theta0 and nothing below it can enter the top k.
    let theta0 = 0;
    if (pruning) {
      sc.ensurePrime(kk);
      for (let c = 0; c < m; c++) {
        const count = sc.count[c]!, dir = sc.dir[c]!, idf = sc.idf[c]!;
        // The list's best-ranked full block (L_TOP, a hint checked against the count), else its first block.
        let bestJ = 0, best = -1;
        for (let i = 0; i < L_TOP_COUNT; i++) {
          const v = u[sc.list[c]! + L_TOP + i]!;
          if (v === 0 || v << BLOCK_SHIFT > count) continue;
          const imp = impactsOf(u, blockAt(u, dir, v - 1, pw) + B_IMPACTS);
          if (imp === 0) continue;
          const b = impactsBound(u, imp, idf, avgdl);
          if (b > best) { best = b; bestJ = v - 1; }
        }
        if (best < 0) {
          // No full block ranked yet (a short list): its first block, by its running maxima.
          const blk = blockAt(u, dir, 0, pw);
          best = termWeight(idf, u[blk + B_MAX_TF]!, u[blk + B_MIN_DL]!, avgdl) * BOUND_INFLATION;
        }
        if (m === 1 || best <= theta0 || count < kk) continue;
        // The block's visible documents' weights, the k best kept in a min-heap.
        const blk = blockAt(u, dir, bestJ, pw), cap = u[blk + B_CAP]!;
        const end = Math.min(count - (bestJ << BLOCK_SHIFT), BLOCK_POSTINGS);
        const prime = sc.prime;
        let n = 0;
        for (let i = 0; i < end; i++) {
          const w = Math.fround(termWeight(idf, u[blk + B_HEADER + cap + i]!, u[blk + B_HEADER + 2 * cap + i]!, avgdl));
          scored++;
          if (n === kk && w <= prime[0]!) continue;
          const rec = docAt(u, root, u[blk + B_HEADER + i]!);
          if (!visibleAt(u[rec + D_CREATED]!, u[rec + D_DELETED]!, snapshot)) continue;
          if (n < kk) {
            let x = n++;
            while (x > 0 && prime[(x - 1) >> 1]! > w) { prime[x] = prime[(x - 1) >> 1]!; x = (x - 1) >> 1; }
            prime[x] = w;
          } else if (w > prime[0]!) {
            let x = 0;
            for (;;) {
              let ch = 2 * x + 1;
              if (ch >= n) break;
              if (ch + 1 < n && prime[ch + 1]! < prime[ch]!) ch++;
              if (prime[ch]! >= w) break;
              prime[x] = prime[ch]!; x = ch;
            }
            prime[x] = w;
          }
        }
        // fround of one weight <= fround of the whole sum (rounding is monotone).
        if (n === kk && prime[0]! > theta0) theta0 = prime[0]!;
      }
    }
    if (m === 1 && pruning) {
      textSearchCounters.scoredPostings += scored;
      return this.searchOne(u, kk, snapshot, avgdl, theta0, outElements, outScores);
    }
    for (let c = 0; c < m; c++) {
      sc.blkIdx[c] = -1;
      sc.pos[c] = 0;
      this.loadBlock(u, c, 0, pruning);
      sc.doc[c] = u[sc.blk[c]! + B_HEADER]!;
    }
    const order = sc.order, cdoc = sc.doc, ub = sc.ub;
    const heapScore = sc.heapScore, heapElem = sc.heapElem;
    let size = 0;
    for (;;) {
      // Cursors by current doc (few terms: insertion sort).
      for (let i = 1; i < m; i++) {
        const c = order[i]!, dc = cdoc[c]!;
        let j = i - 1;
        while (j >= 0 && cdoc[order[j]!]! > dc) { order[j + 1] = order[j]!; j--; }
        order[j + 1] = c;
      }
      const theta = size === kk && heapScore[0]! > theta0 ? heapScore[0]! : theta0;
      // Pivot: the first cursor at which the bounds of it and all before it reach theta.
      let p = -1;
      if (pruning && theta > 0) {
        let acc = 0;
        for (let i = 0; i < m; i++) {
          acc += ub[order[i]!]!;
          if (acc >= theta) { p = i; break; }
        }
        if (p < 0) break;
      } else {
        p = 0;
      }
      const pivotDoc = cdoc[order[p]!]!;
      if (pivotDoc === NO_DOC) break;
      if (cdoc[order[0]!]! !== pivotDoc) {
        // No document before pivotDoc can reach theta: move the cursors before the pivot up to it.
        for (let i = 0; i < p; i++) this.advance(u, order[i]!, pivotDoc);
        continue;
      }
      let last = p;
      while (last + 1 < m && cdoc[order[last + 1]!]! === pivotDoc) last++;
      if (pruning && theta > 0) {
        // Block-max bound of pivotDoc: the current blocks of the cursors on it.
        let bound = 0;
        let next = last + 1 < m ? cdoc[order[last + 1]!]! : NO_DOC;
        for (let i = 0; i <= last; i++) {
          const c = order[i]!;
          bound += sc.blkUb[c]!;
          const after = sc.blkLast[c]! + 1;
          if (after < next) next = after;
        }
        let skip = bound < theta;
        if (!skip && last === 0) {
          // One list alone can hold documents in [pivotDoc, next): their score is the f32 of
          // one weight, so the block's best pair gives the exact best score (no inflation), and
          // a tie with the k-th result loses when every element in the block is larger.
          const c = order[0]!, blk = sc.blk[c]!;
          const imp = impactsOf(u, blk + B_IMPACTS);
          const exact = imp !== 0 ? impactsExact(u, imp, sc.idf[c]!, avgdl) : Math.fround(termWeight(sc.idf[c]!, u[blk + B_MAX_TF]!, u[blk + B_MIN_DL]!, avgdl));
          skip = exact < theta ||
            (exact === theta && size === kk && theta === heapScore[0]! && imp !== 0 && u[imp + 1 + 2 * u[imp]!]! > heapElem[0]!);
        }
        if (skip) {
          // Nothing in [pivotDoc, next) can reach theta: every list that may hold such a doc is
          // bounded there by its current block.
          for (let i = 0; i <= last; i++) this.advance(u, order[i]!, next);
          continue;
        }
      }
      // Score pivotDoc (tf and length from the postings); its record only if it could enter.
      let sum = 0;
      for (let c = 0; c < m; c++) {
        if (cdoc[c] !== pivotDoc) continue;
        const blk = sc.blk[c]!, cap = u[blk + B_CAP]!, off = sc.pos[c]! & (BLOCK_POSTINGS - 1);
        sum += termWeight(sc.idf[c]!, u[blk + B_HEADER + cap + off]!, u[blk + B_HEADER + 2 * cap + off]!, avgdl);
        scored++;
      }
      const score = Math.fround(sum);
      const rec = size < kk || score >= heapScore[0]! ? docAt(u, root, pivotDoc) : -1;
      if (rec >= 0 && visibleAt(u[rec + D_CREATED]!, u[rec + D_DELETED]!, snapshot)) {
        const element = u[rec + D_ELEMENT]!;
        if (size < kk) {
          // Heap of the kept results, worst at the root: lower score, or equal score and higher element.
          let i = size++;
          while (i > 0) {
            const parent = (i - 1) >> 1;
            const ps = heapScore[parent]!, pe = heapElem[parent]!;
            if (ps < score || (ps === score && pe > element)) break;
            heapScore[i] = ps; heapElem[i] = pe; i = parent;
          }
          heapScore[i] = score; heapElem[i] = element;
        } else if (score > heapScore[0]! || (score === heapScore[0]! && element < heapElem[0]!)) {
          siftDown(heapScore, heapElem, size, score, element);
        }
      }
      for (let i = 0; i <= last; i++) this.advance(u, order[i]!, pivotDoc + 1);
    }
    textSearchCounters.scoredPostings += scored;
    // Best first: pop the worst into the back.
    const n = size;
    for (let i = n - 1; i >= 0; i--) {
      outScores[i] = heapScore[0]!;
      outElements[i] = heapElem[0]!;
      size--;
      if (size > 0) siftDown(heapScore, heapElem, size, heapScore[size]!, heapElem[size]!);
    }
    return n;
  }

  /**
   * Reader, a one-term query: block at a time, the most promising blocks first (so the
   * threshold starts high), then the others in order, each skipped when its exact best
   * score cannot beat the k-th result (or only ties it with larger elements).
   */
  private searchOne(u: Uint32Array, kk: number, snapshot: number, avgdl: number, theta0: number, outElements: Uint32Array, outScores: Float32Array): number {
    const sc = scratch, root = this.root;
    const count = sc.count[0]!, dir = sc.dir[0]!, idf = sc.idf[0]!, list = sc.list[0]!;
    const nb = ((count - 1) >>> BLOCK_SHIFT) + 1;
    const heapScore = sc.heapScore, heapElem = sc.heapElem;
    let size = 0, scored = 0;
    // The list's best-ranked blocks first (L_TOP: a hint, checked against the count), then all in order.
    const first = sc.first;
    let nFirst = 0;
    for (let i = 0; i < L_TOP_COUNT; i++) {
      const v = u[list + L_TOP + i]!;
      if (v !== 0 && v << BLOCK_SHIFT <= count) first[nFirst++] = v - 1;
    }
    for (let step = 0; step < nFirst + nb; step++) {
      let j: number;
      if (step < nFirst) j = first[step]!;
      else {
        j = step - nFirst;
        let done = false;
        for (let i = 0; i < nFirst; i++) if (first[i] === j) { done = true; break; }
        if (done) continue;
      }
      const full = size === kk;
      const theta = full && heapScore[0]! > theta0 ? heapScore[0]! : theta0;
      const blk = blockAt(u, dir, j, postingWords(this.positions));
      if (theta > 0) {
        // The block's (max tf, min length) first: one weight, a looser but exact bound.
        if (Math.fround(termWeight(idf, u[blk + B_MAX_TF]!, u[blk + B_MIN_DL]!, avgdl)) < theta) continue;
        const imp = impactsOf(u, blk + B_IMPACTS);
        if (imp !== 0) {
          const exact = impactsExact(u, imp, idf, avgdl);
          if (exact < theta) continue;
          if (exact === theta && full && theta === heapScore[0]! && u[imp + 1 + 2 * u[imp]!]! > heapElem[0]!) continue;
        }
      }
      const cap = u[blk + B_CAP]!;
      const end = Math.min(count - (j << BLOCK_SHIFT), BLOCK_POSTINGS);
      for (let i = 0; i < end; i++) {
        const score = Math.fround(termWeight(idf, u[blk + B_HEADER + cap + i]!, u[blk + B_HEADER + 2 * cap + i]!, avgdl));
        scored++;
        // The document's record only for a score that could enter (equal: the element decides).
        if (size === kk && score < heapScore[0]!) continue;
        const rec = docAt(u, root, u[blk + B_HEADER + i]!);
        if (!visibleAt(u[rec + D_CREATED]!, u[rec + D_DELETED]!, snapshot)) continue;
        const element = u[rec + D_ELEMENT]!;
        if (size < kk) {
          let x = size++;
          while (x > 0) {
            const parent = (x - 1) >> 1;
            const ps = heapScore[parent]!, pe = heapElem[parent]!;
            if (ps < score || (ps === score && pe > element)) break;
            heapScore[x] = ps; heapElem[x] = pe; x = parent;
          }
          heapScore[x] = score; heapElem[x] = element;
        } else if (score > heapScore[0]! || (score === heapScore[0]! && element < heapElem[0]!)) {
          siftDown(heapScore, heapElem, size, score, element);
        }
      }
    }
    textSearchCounters.scoredPostings += scored;
    const n = size;
    for (let i = n - 1; i >= 0; i--) {
      outScores[i] = heapScore[0]!;
      outElements[i] = heapElem[0]!;
      size--;
      if (size > 0) siftDown(heapScore, heapElem, size, heapScore[size]!, heapElem[size]!);
    }
    return n;
  }

  /** Reader: make block j of cursor c current. */
  private loadBlock(u: Uint32Array, c: number, j: number, pruning: boolean): void {
    const sc = scratch;
    const blk = blockAt(u, sc.dir[c]!, j, postingWords(this.positions));
    sc.blk[c] = blk;
    sc.blkIdx[c] = j;
    const end = Math.min(sc.count[c]!, (j + 1) << BLOCK_SHIFT);
    sc.blkEnd[c] = end;
    sc.blkLast[c] = u[blk + B_HEADER + (end - 1 - (j << BLOCK_SHIFT))]!;
    if (pruning) {
      // A full block's impacts, else its running maxima (both cover the postings below the count).
      const imp = impactsOf(u, blk + B_IMPACTS);
      sc.blkUb[c] = imp !== 0
        ? impactsBound(u, imp, sc.idf[c]!, sc.avgdl)
        : termWeight(sc.idf[c]!, u[blk + B_MAX_TF]!, u[blk + B_MIN_DL]!, sc.avgdl) * BOUND_INFLATION;
    }
  }

  /** Reader: move cursor c to its first posting with doc >= target (NO_DOC past the end). */
  private advance(u: Uint32Array, c: number, target: number): void {
    const sc = scratch;
    if (sc.doc[c]! >= target) return;
    const count = sc.count[c]!;
    if (sc.blkLast[c]! < target) {
      // Find the first block whose last doc reaches target (blocks after the current one):
      // the next block first (most moves are short), then a binary search.
      let lo = sc.blkIdx[c]! + 1, hi = ((count - 1) >>> BLOCK_SHIFT) + 1;
      const dir = sc.dir[c]!;
      if (lo < hi) {
        const end = Math.min(count, (lo + 1) << BLOCK_SHIFT);
        if (u[blockAt(u, dir, lo, postingWords(this.positions)) + B_HEADER + (end - 1 - (lo << BLOCK_SHIFT))]! >= target) hi = lo;
        else lo++;
      }
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        const blk = blockAt(u, dir, mid, postingWords(this.positions));
        const end = Math.min(count, (mid + 1) << BLOCK_SHIFT);
        if (u[blk + B_HEADER + (end - 1 - (mid << BLOCK_SHIFT))]! < target) lo = mid + 1;
        else hi = mid;
      }
      if (lo > (count - 1) >>> BLOCK_SHIFT) {
        sc.pos[c] = count;
        sc.doc[c] = NO_DOC;
        return;
      }
      this.loadBlock(u, c, lo, textSearchOptions.pruning);
      sc.pos[c] = lo << BLOCK_SHIFT;
      const firstDoc = u[sc.blk[c]! + B_HEADER]!;
      if (firstDoc >= target) { sc.doc[c] = firstDoc; return; }
    }
    // Within the current block (its last doc is >= target): the next posting first (the
    // usual step of one), then a binary search.
    const blk = sc.blk[c]!, base = sc.blkIdx[c]! << BLOCK_SHIFT;
    let lo = sc.pos[c]!, hi = sc.blkEnd[c]! - 1;
    if (lo < hi && u[blk + B_HEADER + (lo + 1 - base)]! >= target) {
      sc.pos[c] = lo + 1;
      sc.doc[c] = u[blk + B_HEADER + (lo + 1 - base)]!;
      return;
    }
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (u[blk + B_HEADER + (mid - base)]! < target) lo = mid + 1;
      else hi = mid;
    }
    sc.pos[c] = lo;
    sc.doc[c] = u[blk + B_HEADER + (lo - base)]!;
  }

  // ---------------------------------------------------------------- import (export.ts)

  /**
   * Writer: a new partition holding a parsed, validated export image (export.ts). Postings go
   * in as insert() would have put them; statistics chains are rebuilt from the documents'
   * epochs, so they are exact at every snapshot.
   */
  static fromImage(memory: TextMemory, img: PartitionImage): TextPartition {
    const part = TextPartition.create(memory, { analyzer: img.analyzer, positions: img.positions });
    part.writerState();
    const docs = img.created.length, positions = img.positions;
    const root = part.root;
    const distinctCount = new Uint32Array(docs);
    for (let t = 0; t < img.termTexts.length; t++) {
      let at = img.postingStarts[t]!;
      for (let p = 0; p < img.postingCounts[t]!; p++) {
        distinctCount[img.word(at)]!++;
        at += 2 + (positions ? img.word(at + 1) : 0);
      }
    }
    const termsBlock = new Uint32Array(docs), posBlock = new Uint32Array(docs);
    const termsFill = new Uint32Array(docs), posFill = new Uint32Array(docs);
    for (let d = 0; d < docs; d++) {
      part.docRecord(d);
      termsBlock[d] = memory.allocate(1 + distinctCount[d]!);
      posBlock[d] = positions && img.length[d]! > 0 ? memory.allocate(img.length[d]!) : 0;
      const u = memory.u32;
      const rec = docAt(u, root, d);
      u[rec + D_CREATED] = img.created[d]!;
      u[rec + D_DELETED] = img.deleted[d]!;
      u[rec + D_ELEMENT] = img.element[d]!;
      u[rec + D_LENGTH] = img.length[d]!;
      u[rec + D_TERMS] = termsBlock[d]!;
      u[rec + D_POS] = posBlock[d]!;
      u[termsBlock[d]!] = distinctCount[d]!;
    }
    let keys = new Float64Array(64);
    for (let ti = 0; ti < img.termTexts.length; ti++) {
      const t = part.termId(img.termTexts[ti]!);
      let at = img.postingStarts[ti]!;
      const n = img.postingCounts[ti]!;
      if (2 * n > keys.length) keys = new Float64Array(Math.max(2 * n, 2 * keys.length));
      let events = 0;
      for (let p = 0; p < n; p++) {
        const doc = img.word(at), tf = img.word(at + 1);
        at += 2;
        let posAt = 0;
        if (positions) {
          posAt = posBlock[doc]! + posFill[doc]!;
          const u = memory.u32;
          for (let i = 0; i < tf; i++) u[posAt + i] = img.word(at + i);
          posFill[doc]! += tf;
          at += tf;
        }
        memory.u32[termsBlock[doc]! + 1 + termsFill[doc]!++] = t;
        part.append(t, doc, tf, img.length[doc]!, posAt);
        // Statistics events: +1 at creation, -1 at deletion (key = epoch * 2 + (1: add)).
        const c = img.created[doc]!, x = img.deleted[doc]!;
        if (c !== 0) keys[events++] = c * 2 + 1;
        if (x !== 0) keys[events++] = x * 2;
      }
      const sorted = keys.subarray(0, events).sort();
      let value = 0, head = 0;
      for (let i = 0; i < events;) {
        const epoch = Math.floor(sorted[i]! / 2);
        const before = value;
        for (; i < events && Math.floor(sorted[i]! / 2) === epoch; i++) value += sorted[i]! % 2 === 1 ? 1 : -1;
        if (value === before) continue;
        const node = memory.allocate(S_TERM_WORDS);
        const u = memory.u32;
        u[node + S_EPOCH] = epoch;
        u[node + S_DF] = value;
        u[node + S_NEXT] = head;
        head = node;
      }
      Atomics.store(memory.u32, termAt(memory.u32, root, t) + T_STATS, head);
    }
    // Partition statistics: the same from the documents.
    const order: number[] = [];
    for (let d = 0; d < docs; d++) {
      if (img.created[d] !== 0) order.push(2 * d + 1);
      if (img.deleted[d] !== 0) order.push(2 * d);
    }
    const epochOf = (e: number): number => (e % 2 === 1 ? img.created : img.deleted)[e >> 1]!;
    order.sort((a, b) => epochOf(a) - epochOf(b));
    let docsNow = 0, lengthNow = 0, head = 0;
    for (let i = 0; i < order.length;) {
      const epoch = epochOf(order[i]!);
      for (; i < order.length && epochOf(order[i]!) === epoch; i++) {
        const e = order[i]!, sign = e % 2 === 1 ? 1 : -1;
        docsNow += sign;
        lengthNow += sign * img.length[e >> 1]!;
      }
      const node = memory.allocate(S_PART_WORDS);
      const u = memory.u32;
      u[node + S_EPOCH] = epoch;
      u[node + S_DOCS] = docsNow;
      u[node + S_LEN_LO] = lengthNow % TWO32;
      u[node + S_LEN_HI] = Math.floor(lengthNow / TWO32);
      u[node + S_NEXT] = head;
      head = node;
    }
    Atomics.store(memory.u32, root + P_STATS, head);
    Atomics.store(memory.u32, root + P_DOCS, docs);
    return part;
  }

  // ---------------------------------------------------------------- inspection

  /** Every document ever inserted: element, created, deleted (writer, recovery). */
  forEachDoc(fn: (doc: number, element: number, created: number, deleted: number) => void): void {
    const count = this.pointCount();
    for (let d = 0; d < count; d++) {
      const u = this.tm.u32; // fn may make the writer allocate (views re-made)
      const rec = docAt(u, this.root, d);
      fn(d, u[rec + D_ELEMENT]!, u[rec + D_CREATED]!, u[rec + D_DELETED]!);
    }
  }

  /** The blocks this partition holds, [word offset, words] (to free when it is dropped, after readers left). */
  blocks(): [number, number][] {
    const u = this.tm.u32, root = this.root, positions = this.positions;
    const out: [number, number][] = [[root, P_WORDS]];
    const dict = u[root + P_DICT]!;
    out.push([dict, H_SLOTS + u[dict + H_CAP]!]);
    const docChunks = u[root + P_DOC_CHUNKS]!, termChunks = u[root + P_TERM_CHUNKS]!;
    for (let c = 0; c < docChunks; c++) out.push([u[root + P_DOC_CHUNK0 + c]!, (1 << c) * D_WORDS]);
    for (let c = 0; c < termChunks; c++) out.push([u[root + P_TERM_CHUNK0 + c]!, (1 << c) * T_WORDS]);
    for (let node = u[root + P_STATS]!; node !== 0; node = u[node + S_NEXT]!) out.push([node, S_PART_WORDS]);
    const docs = u[root + P_DOCS]!;
    for (let d = 0; d < docs; d++) {
      const rec = docAt(u, root, d);
      const tb = u[rec + D_TERMS]!;
      out.push([tb, 1 + u[tb]!]);
      if (u[rec + D_POS] !== 0) out.push([u[rec + D_POS]!, u[rec + D_LENGTH]!]);
    }
    const terms = u[root + P_TERMS]!;
    for (let t = 0; t < terms; t++) {
      const rec = termAt(u, root, t);
      if (u[rec + T_LIST] === 0) continue; // removed: its blocks were retired then
      out.push([u[rec + T_TEXT]!, termTextWords(u[rec + T_LEN]!)]);
      for (let node = u[rec + T_STATS]!; node !== 0; node = u[node + S_NEXT]!) out.push([node, S_TERM_WORDS]);
      const list = u[rec + T_LIST]!;
      out.push([list, L_WORDS]);
      const dir = u[list + L_DIR]!;
      if (dir === 0) continue;
      out.push([dir, u[list + L_DIR_CAP]!]);
      const count = u[list + L_COUNT]!;
      const limp = u[list + L_IMPACTS]!;
      if (limp !== 0) out.push([limp, impactsWords(u[limp]!)]);
      for (let j = 0; j << BLOCK_SHIFT < count; j++) {
        const blk = u[dir + j]!;
        out.push([blk, blockWords(u[blk + B_CAP]!, positions)]);
        const imp = u[blk + B_IMPACTS]!;
        if (imp !== 0) out.push([imp, impactsWords(u[imp]!)]);
      }
    }
    return out;
  }

  /** The memory this partition lives in. */
  get memory(): TextMemory {
    return this.tm;
  }
}

/** Replace the heap root with (score, element) and restore the heap (worst at the root). */
function siftDown(hs: Float64Array, he: Uint32Array, size: number, score: number, element: number): void {
  let i = 0;
  for (;;) {
    let child = 2 * i + 1;
    if (child >= size) break;
    const r = child + 1;
    // The worse child: lower score, or equal score and higher element.
    if (r < size && (hs[r]! < hs[child]! || (hs[r] === hs[child] && he[r]! > he[child]!))) child = r;
    const cs = hs[child]!, ce = he[child]!;
    if (score < cs || (score === cs && element > ce)) break;
    hs[i] = cs; he[i] = ce; i = child;
  }
  hs[i] = score; he[i] = element;
}


