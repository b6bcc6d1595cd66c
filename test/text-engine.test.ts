// The text engine against a brute-force BM25 written here (docs/text.md §5 fixes the
// arithmetic): seeded random corpora with a Zipf-ish vocabulary go through inserts,
// updates (remove + insert), deletes and rolled-back batches; every few batches random
// queries are searched at the current and at older snapshots and must return the same
// elements in the same order with the same single-precision scores. Also: analyzers,
// statistics at snapshots, that pruning skips work, and the bm25() helper.
import { describe, expect, it } from 'vitest';
import { analyze, bm25, TextMemory, TextPartition, textMaintainCounters, textSearchCounters, textSearchOptions, type Analyzer } from '../dist/src/text/index.js';
import { rng } from '../bench/seeded-random.js';
import { bruteForce, tokens } from './fixtures/text-workload.js';

// ------------------------------------------------------------------ the model

interface ModelDoc { doc: number; element: number; terms: string[]; created: number; deleted: number }

/** Tokenizer of the spec, written again here: runs of Unicode letters/numbers, lower-cased per token. */

const visible = (d: ModelDoc, s: number): boolean => d.created !== 0 && d.created <= s && (d.deleted === 0 || s < d.deleted);


// ------------------------------------------------------------------ random corpora


const SPECIAL = ['Straße', 'naïve', 'ΣΊΣΥΦΟΣ', '東京', 'x2', '42', 'émigré', 'OK'];

function makeWords(vocab: number): string[] {
  const words: string[] = [];
  for (let i = 0; i < vocab; i++) words.push(i < SPECIAL.length ? SPECIAL[i]! : `w${i.toString(36)}`);
  return words;
}

/** A word of rank ~ Zipf(1): P(rank r) ~ 1/r. */
function zipf(random: () => number, vocab: number): number {
  return Math.min(vocab - 1, Math.floor(Math.exp(random() * Math.log(vocab + 1)) - 1));
}

function randomText(random: () => number, words: string[], maxLen: number): string {
  const len = Math.floor(random() * maxLen);
  const seps = [' ', ', ', '. ', '\n', ' -- ', '!?', '\t', '_'];
  let out = random() < 0.2 ? '  ' : '';
  for (let i = 0; i < len; i++) {
    const w = words[zipf(random, words.length)]!;
    out += (random() < 0.1 ? w.toUpperCase() : w) + seps[Math.floor(random() * seps.length)]!;
  }
  return out;
}

function randomQuery(random: () => number, words: string[]): string {
  const n = 1 + Math.floor(random() * 4);
  const parts: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = random();
    if (r < 0.08) parts.push('absentterm');
    else if (r < 0.15 && parts.length > 0) parts.push(parts[0]!.toUpperCase()); // a repeated term counts once
    else parts.push(words[zipf(random, words.length)]!);
  }
  return parts.join(random() < 0.5 ? ' ' : ', ');
}

interface Workload {
  seed: number; vocab: number; batches: number; maxLen: number; deltaPerBatch: number;
  /** maintain() may drop documents deleted more than this many epochs ago (older snapshots are then not checked). */
  purgeLag?: number;
}

function runWorkload(w: Workload): { checks: number } {
  const random = rng(w.seed);
  const words = makeWords(w.vocab);
  const tm = TextMemory.create();
  const part = TextPartition.create(tm, { analyzer: 'standard', positions: w.seed % 2 === 0 });
  const docs: ModelDoc[] = [];
  const liveOf = new Map<number, ModelDoc>(); // element -> its live doc
  let epoch = 0, nextElement = 1, checks = 0;
  const outE = new Uint32Array(64), outS = new Float32Array(64);
  const check = (s: number): void => {
    for (let q = 0; q < 6; q++) {
      const query = randomQuery(random, words);
      const k = 1 + Math.floor(random() * 20);
      const want = bruteForce(docs, query, k, s);
      const n = part.search(query, k, s, outE, outS);
      const got = { elements: [...outE.subarray(0, n)], scores: [...outS.subarray(0, n)] };
      expect(got, `seed ${w.seed} snapshot ${s} epoch ${epoch} query ${JSON.stringify(query)} k ${k}`).toEqual(want);
      textSearchOptions.pruning = false;
      const n2 = part.search(query, k, s, outE, outS);
      textSearchOptions.pruning = true;
      expect({ elements: [...outE.subarray(0, n2)], scores: [...outS.subarray(0, n2)] }, 'without pruning').toEqual(want);
      checks++;
    }
    // Statistics at s.
    const live = docs.filter((d) => visible(d, s));
    const probe = [words[0]!.toLowerCase(), words[3]!.toLowerCase(), 'absentterm', words[Math.floor(random() * words.length)]!.toLowerCase()];
    expect(part.termStats(probe, s)).toEqual({
      docs: live.length,
      totalLength: live.reduce((a, d) => a + d.terms.length, 0),
      df: probe.map((t) => live.filter((d) => d.terms.includes(t)).length),
    });
  };
  for (let b = 0; b < w.batches; b++) {
    const e = epoch + 1;
    const undo: (() => void)[] = [];
    const ops = 1 + Math.floor(random() * w.deltaPerBatch);
    for (let o = 0; o < ops; o++) {
      const r = random();
      const elements = [...liveOf.keys()];
      if (r < 0.6 || elements.length === 0) {
        const text = randomText(random, words, w.maxLen);
        const element = nextElement++;
        const doc = part.insert(element, text, e);
        const md: ModelDoc = { doc, element, terms: tokens(text), created: e, deleted: 0 };
        expect(doc).toBe(docs.length);
        docs.push(md);
        liveOf.set(element, md);
        undo.push(() => { part.undoInsert(doc); md.created = 0; md.deleted = 0; liveOf.delete(element); });
      } else {
        const element = elements[Math.floor(random() * elements.length)]!;
        const old = liveOf.get(element)!;
        part.remove(old.doc, e);
        old.deleted = e;
        liveOf.delete(element);
        undo.push(() => { part.undoRemove(old.doc); old.deleted = 0; liveOf.set(element, old); });
        if (r < 0.85) {
          // An update: the new text under the same element.
          const text = randomText(random, words, w.maxLen);
          const doc = part.insert(element, text, e);
          const md: ModelDoc = { doc, element, terms: tokens(text), created: e, deleted: 0 };
          docs.push(md);
          liveOf.set(element, md);
          undo.push(() => { part.undoInsert(doc); md.created = 0; liveOf.delete(element); });
        }
      }
    }
    if (random() < 0.15) {
      // The batch fails: undone in reverse order, the epoch not advanced.
      for (let i = undo.length - 1; i >= 0; i--) undo[i]!();
    } else {
      epoch = e;
    }
    const purgeBefore = w.purgeLag === undefined ? 0 : Math.max(0, epoch - w.purgeLag);
    while (part.maintain(epoch, purgeBefore));
    expect(part.purgedBefore()).toBeLessThanOrEqual(purgeBefore);
    if (b % 7 === 6 || b === w.batches - 1) {
      check(epoch);
      const oldest = Math.max(1, purgeBefore);
      if (epoch > oldest) check(oldest + Math.floor(random() * (epoch - oldest)));
    }
  }
  expect(part.pointCount()).toBe(docs.length);
  const seen: [number, number, number, number][] = [];
  part.forEachDoc((doc, element, created, deleted) => seen.push([doc, element, created, deleted]));
  expect(seen).toEqual(docs.map((d) => [d.doc, d.element, d.created, d.deleted]));
  return { checks };
}

// ------------------------------------------------------------------ tests

describe('text analyzers', () => {
  it('standard splits on anything but Unicode letters and digits and lower-cases each term', () => {
    expect(analyze('Hello, World! 42 apples-and-oranges', 'standard')).toEqual(['hello', 'world', '42', 'apples', 'and', 'oranges']);
    expect(analyze('Straße naïve ÉMIGRÉ Σίσυφος 東京タワー ١٢٣ x²', 'standard')).toEqual(['straße', 'naïve', 'émigré', 'σίσυφος', '東京タワー', '١٢٣', 'x²']);
    expect(analyze('don\'t e-mail foo_bar a.b', 'standard')).toEqual(['don', 't', 'e', 'mail', 'foo', 'bar', 'a', 'b']);
    expect(analyze('  ...  ', 'standard')).toEqual([]);
    expect(analyze('', 'standard')).toEqual([]);
    expect(analyze('MiXeD CaSe', 'standard')).toEqual(['mixed', 'case']);
  });
  it('standard_stem_en stems English words with Porter2 after lower-casing', () => {
    expect(analyze('Running runners RAN easily', 'standard_stem_en')).toEqual(['run', 'runner', 'ran', 'easili']);
    expect(analyze('connection connected connecting', 'standard_stem_en')).toEqual(['connect', 'connect', 'connect']);
  });
  it('whitespace_lowercase splits on whitespace only', () => {
    expect(analyze('Foo-Bar  baz\tQUX\nx.y', 'whitespace_lowercase')).toEqual(['foo-bar', 'baz', 'qux', 'x.y']);
  });
  it('drops terms longer than the term bound, in documents and queries alike', () => {
    const long = 'a'.repeat(300);
    expect(analyze(`short ${long} end`, 'standard')).toEqual(['short', 'end']);
    const tm = TextMemory.create();
    const p = TextPartition.create(tm, { analyzer: 'standard', positions: false });
    p.insert(1, `short ${long}`, 1);
    const e = new Uint32Array(4), s = new Float32Array(4);
    expect(p.search(long, 4, 1, e, s)).toBe(0);
    expect(p.termStats([], 1)).toEqual({ docs: 1, totalLength: 1, df: [] });
  });
  it('every analyzer works in a partition', () => {
    for (const analyzer of ['standard', 'standard_stem_en', 'whitespace_lowercase'] as Analyzer[]) {
      const tm = TextMemory.create();
      const p = TextPartition.create(tm, { analyzer, positions: true });
      p.insert(7, 'Connecting people-first', 1);
      p.insert(8, 'nothing here', 1);
      const e = new Uint32Array(4), s = new Float32Array(4);
      const q = analyzer === 'whitespace_lowercase' ? 'PEOPLE-FIRST' : analyzer === 'standard' ? 'connecting' : 'connected';
      expect(p.search(q, 4, 1, e, s), analyzer).toBe(1);
      expect(e[0]).toBe(7);
    }
  });
});

describe('text search vs brute-force BM25', () => {
  for (const w of [
    { seed: 1, vocab: 40, batches: 60, maxLen: 12, deltaPerBatch: 6 },
    { seed: 2, vocab: 300, batches: 120, maxLen: 30, deltaPerBatch: 12 },
    { seed: 3, vocab: 2000, batches: 80, maxLen: 60, deltaPerBatch: 40 },
    { seed: 4, vocab: 12, batches: 150, maxLen: 5, deltaPerBatch: 3 },
    { seed: 5, vocab: 30, batches: 200, maxLen: 10, deltaPerBatch: 8, purgeLag: 3 },
    { seed: 6, vocab: 500, batches: 150, maxLen: 40, deltaPerBatch: 30, purgeLag: 0 },
  ]) {
    it(`seed ${w.seed}: vocabulary ${w.vocab}, ${w.batches} batches: same elements, order and f32 scores at current and older snapshots`, () => {
      const before = textMaintainCounters.postingsDropped;
      const { checks } = runWorkload(w);
      expect(checks).toBeGreaterThan(10);
      // Rolled-back inserts (and, with a purge lag, old deletions) were compacted away.
      if (w.batches >= 100) expect(textMaintainCounters.postingsDropped).toBeGreaterThan(before);
    });
  }

  it('a query with no terms, k = 0 and snapshot 0 match nothing; ties go by ascending element', () => {
    const tm = TextMemory.create();
    const p = TextPartition.create(tm, { analyzer: 'standard', positions: false });
    for (const el of [50, 3, 20, 7]) p.insert(el, 'same words here', 1);
    const e = new Uint32Array(8), s = new Float32Array(8);
    expect(p.search('  !!  ', 8, 1, e, s)).toBe(0);
    expect(p.search('same', 0, 1, e, s)).toBe(0);
    expect(p.search('same', 8, 0, e, s)).toBe(0);
    expect(p.search('same', 3, 1, e, s)).toBe(3);
    expect([...e.subarray(0, 3)]).toEqual([3, 7, 20]);
    expect(s[0]).toBe(s[2]);
  });

  it('bm25() equals search() bit for bit', () => {
    const tm = TextMemory.create();
    const p = TextPartition.create(tm, { analyzer: 'standard', positions: false });
    const random = rng(99);
    const words = makeWords(50);
    const texts: string[] = [];
    for (let i = 0; i < 300; i++) { const t = randomText(random, words, 20); texts.push(t); p.insert(i, t, 1 + (i >> 4)); }
    const S = 1 + (299 >> 4);
    const e = new Uint32Array(300), s = new Float32Array(300);
    for (let q = 0; q < 20; q++) {
      const query = randomQuery(random, words);
      const qterms = [...new Set(analyze(query, 'standard'))];
      const stats = p.termStats(qterms, S);
      const n = p.search(query, 300, S, e, s);
      for (let i = 0; i < n; i++) {
        const terms = analyze(texts[e[i]!]!, 'standard');
        const tfs = qterms.map((t) => terms.filter((x) => x === t).length);
        expect(bm25(tfs, terms.length, stats)).toBe(s[i]);
      }
    }
  });
});

describe('dynamic pruning', () => {
  it('a 1-term top-10 over a common term scores far fewer postings than its df, and 2-term queries skip too', () => {
    const tm = TextMemory.create();
    const p = TextPartition.create(tm, { analyzer: 'standard', positions: false });
    const random = rng(5);
    const words = makeWords(5000);
    let commonDf = 0;
    // Lengths 10..200 and a heavy-tailed tf: like prose, few documents share the best scores
    // (when hundreds tie at the top, the tie rule forbids skipping any of them).
    for (let i = 0; i < 20_000; i++) {
      let text = randomText(random, words, 190) + ' filler'.repeat(10);
      if (random() < 0.8) { text += ' common'.repeat(1 + Math.floor(-Math.log(1 - random()) * 2)); commonDf++; }
      p.insert(i, text, 1);
    }
    const e = new Uint32Array(10), s = new Float32Array(10);
    textSearchCounters.scoredPostings = 0;
    expect(p.search('common', 10, 1, e, s)).toBe(10);
    const pruned = textSearchCounters.scoredPostings;
    textSearchOptions.pruning = false;
    textSearchCounters.scoredPostings = 0;
    const e2 = new Uint32Array(10), s2 = new Float32Array(10);
    p.search('common', 10, 1, e2, s2);
    const full = textSearchCounters.scoredPostings;
    textSearchOptions.pruning = true;
    expect(full).toBe(commonDf);
    expect(pruned).toBeLessThan(commonDf / 4);
    expect([...e]).toEqual([...e2]);
    expect([...s]).toEqual([...s2]);
    // Two terms, one common one rarer.
    textSearchCounters.scoredPostings = 0;
    p.search(`common ${words[20]}`, 10, 1, e, s);
    const pruned2 = textSearchCounters.scoredPostings;
    textSearchOptions.pruning = false;
    textSearchCounters.scoredPostings = 0;
    p.search(`common ${words[20]}`, 10, 1, e2, s2);
    textSearchOptions.pruning = true;
    expect(pruned2).toBeLessThan(textSearchCounters.scoredPostings * 0.75);
    expect([...e]).toEqual([...e2]);
  });
});

describe('epochs out of order and positions', () => {
  it('a build scan inserting at older epochs after newer writes keeps statistics exact at every snapshot', () => {
    const tm = TextMemory.create();
    const p = TextPartition.create(tm, { analyzer: 'standard', positions: false });
    const random = rng(11);
    const words = makeWords(30);
    const docs: ModelDoc[] = [];
    const add = (element: number, epoch: number): ModelDoc => {
      const text = randomText(random, words, 15);
      const doc = p.insert(element, text, epoch);
      const md = { doc, element, terms: tokens(text), created: epoch, deleted: 0 };
      docs.push(md);
      return md;
    };
    // Catch-up writes at epochs 5..20 while the scan inserts existing elements at epoch 1..4.
    let element = 1;
    for (let e = 5; e <= 20; e++) {
      const md = add(element++, e);
      if (e % 3 === 0) { p.remove(md.doc, e + 1); md.deleted = e + 1; }
      for (let i = 0; i < 5; i++) add(element++, 1 + (i % 4));
    }
    const e = new Uint32Array(40), s = new Float32Array(40);
    for (let snap = 1; snap <= 22; snap++) {
      const live = docs.filter((d) => visible(d, snap));
      const probe = [words[0]!.toLowerCase(), words[9]!.toLowerCase()];
      expect(p.termStats(probe, snap), `snapshot ${snap}`).toEqual({
        docs: live.length,
        totalLength: live.reduce((a, d) => a + d.terms.length, 0),
        df: probe.map((t) => live.filter((d) => d.terms.includes(t)).length),
      });
      for (let q = 0; q < 4; q++) {
        const query = randomQuery(random, words);
        const n = p.search(query, 40, snap, e, s);
        expect({ elements: [...e.subarray(0, n)], scores: [...s.subarray(0, n)] }, `snapshot ${snap} ${query}`).toEqual(bruteForce(docs, query, 40, snap));
      }
    }
  });

  it('an export gives its reader slot back: the snapshot thread that runs it may be replaced, and each would keep one', async () => {
    const { exportPartition } = await import('../dist/src/text/index.js');
    const tm = TextMemory.create();
    const p = TextPartition.create(tm, { analyzer: 'standard', positions: true });
    p.insert(5, 'b a b c a b', 1);
    expect(tm.readerSlotIndex).toBe(-1);
    exportPartition(tm, p.root, p.pointCount(), 1);
    expect(tm.readerSlotIndex, 'no slot held after the export').toBe(-1);
    expect(tm.readsInProgress()).toBe(0);
    // A search (a reader thread's read) keeps its slot for the thread's life.
    p.search('a', 10, 1, new Uint32Array(10), new Float32Array(10));
    expect(tm.readerSlotIndex).toBeGreaterThanOrEqual(0);
  });

  it('positions are stored per posting: the export carries each term occurrence position', async () => {
    const { exportPartition, joinChunks } = await import('../dist/src/text/index.js');
    const tm = TextMemory.create();
    const p = TextPartition.create(tm, { analyzer: 'standard', positions: true });
    p.insert(5, 'b a b c a b', 1);
    p.insert(6, 'c', 1);
    const bytes = joinChunks(exportPartition(tm, p.root, p.pointCount(), 1));
    const w = new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
    // Header (16) + 2 docs x 4 words, then terms in id order: b, a, c.
    let at = 16 + 8;
    const seen: Record<string, number[][]> = {};
    for (;;) {
      const len = w[at++]!;
      if (len === 0) break;
      let term = '';
      for (let i = 0; i < len; i += 2) { const x = w[at++]!; term += String.fromCharCode(x & 0xffff); if (i + 1 < len) term += String.fromCharCode(x >>> 16); }
      const n = w[at++]!;
      seen[term] = [];
      for (let j = 0; j < n; j++) {
        const doc = w[at++]!, tf = w[at++]!;
        seen[term]!.push([doc, ...Array.from({ length: tf }, () => w[at++]!)]);
      }
    }
    expect(seen).toEqual({ b: [[0, 0, 2, 5]], a: [[0, 1, 4]], c: [[0, 3], [1, 0]] });
  });
});

describe('maintain', () => {
  it('statistics chains are cut below the purge horizon (memory stays bounded), and stay exact above it', () => {
    const run = (withHorizon: boolean): { bytes: number; p: TextPartition } => {
      const tm = TextMemory.create();
      const p = TextPartition.create(tm, { analyzer: 'standard', positions: false });
      let prev = -1;
      for (let e = 1; e <= 3000; e++) {
        const d = p.insert(e, `common words ${e % 3}`, e);
        if (prev >= 0 && e % 2 === 0) p.remove(prev, e);
        prev = d;
        if (withHorizon) while (p.maintain(e, Math.max(0, e - 2)));
      }
      return { bytes: tm.usedBytes(), p };
    };
    const kept = run(false), cut = run(true);
    // Without a horizon every batch left a node in three chains.
    expect(kept.bytes - cut.bytes).toBeGreaterThan(3000 * 3 * 8);
    for (const s of [2998, 2999, 3000]) expect(cut.p.termStats(['common', 'words', '1'], s)).toEqual(kept.p.termStats(['common', 'words', '1'], s));
  });

  it('a term whose last document is gone leaves the dictionary: texts that keep bringing new words do not grow the memory by the word', async () => {
    const { exportPartition, importPartition, joinChunks } = await import('../dist/src/text/index.js');
    const tm = TextMemory.create();
    const p = TextPartition.create(tm, { analyzer: 'standard', positions: false });
    const docs = 500;
    let epoch = 1, serial = 0;
    // Ten words no other text ever holds (as IDs or timestamps in a text), and one shared word.
    const text = (): string => `${Array.from({ length: 10 }, () => `id${(serial++).toString(36)}`).join(' ')} shared`;
    const handles: number[] = [];
    for (let i = 0; i < docs; i++) handles.push(p.insert(i, text(), epoch));
    const removedBefore = textMaintainCounters.termsRemoved;
    const bytes: number[] = [];
    for (let round = 0; round < 16; round++) {
      epoch++;
      for (let i = 0; i < docs; i++) {
        p.remove(handles[i]!, epoch);
        handles[i] = p.insert(i, text(), epoch);
      }
      while (p.maintain(epoch, epoch));
      tm.reclaim();
      bytes.push(tm.usedBytes());
    }
    expect(textMaintainCounters.termsRemoved - removedBefore).toBe(16 * docs * 10);
    // What is left per new word: the updates' document handles, ~7 B (never reused); with
    // removed words' ids not reused ~47 B, keeping the words ~214 B.
    const perNewWord = (bytes[15]! - bytes[3]!) / (12 * docs * 10);
    expect(perNewWord).toBeLessThan(20);
    const e = new Uint32Array(10), s = new Float32Array(10);
    expect(p.search('id0', 10, epoch, e, s), 'a removed word').toBe(0);
    expect(p.termStats(['id0', 'shared'], epoch)).toEqual({ docs, totalLength: docs * 11, df: [0, docs] });
    const newest = `id${(serial - 1).toString(36)}`;
    expect(p.search(newest, 10, epoch, e, s)).toBe(1);
    expect(e[0]).toBe(docs - 1);
    // A removed word written again is a new term; a writer that attaches anew rebuilds its
    // map without the removed ones.
    epoch++;
    const again = TextPartition.attach(tm, p.root);
    again.insert(docs, 'id0 shared', epoch);
    expect(again.search('id0', 10, epoch, e, s)).toBe(1);
    expect(e[0]).toBe(docs);
    // An export leaves removed terms out and loads back with the same answers.
    const copy = importPartition(TextMemory.create(), joinChunks(exportPartition(tm, p.root, again.pointCount(), epoch)));
    for (const query of ['id0', 'shared', newest, 'id1']) {
      const n = again.search(query, 10, epoch, e, s);
      const e2 = new Uint32Array(10), s2 = new Float32Array(10);
      expect(copy.search(query, 10, epoch, e2, s2), query).toBe(n);
      expect([...e2.subarray(0, n)], query).toEqual([...e.subarray(0, n)]);
    }
  });

  it('deletions newer than the horizon wait, and are compacted once it passes them, with no new deaths', () => {
    const tm = TextMemory.create();
    const p = TextPartition.create(tm, { analyzer: 'standard', positions: false });
    const docs: number[] = [];
    for (let i = 0; i < 1000; i++) docs.push(p.insert(i, `common word${i % 10}`, 1));
    for (let i = 0; i < 600; i++) p.remove(docs[i]!, 2);
    const before = textMaintainCounters.postingsDropped;
    // A reader still at snapshot 1: nothing may go.
    while (p.maintain(2, 1));
    expect(textMaintainCounters.postingsDropped).toBe(before);
    expect(p.mergesWaiting()).toBe(true);
    expect(p.purgedBefore()).toBe(0);
    const e = new Uint32Array(10), s = new Float32Array(10);
    expect(p.search('common', 10, 1, e, s)).toBe(10);
    expect(e[0]).toBe(0); // deleted at 2, visible at 1
    // The horizon moves past 2 (no new deaths): the waiting lists are compacted.
    while (p.maintain(3, 3));
    expect(p.mergesWaiting()).toBe(false);
    expect(textMaintainCounters.postingsDropped - before).toBeGreaterThanOrEqual(600);
    expect(p.purgedBefore()).toBe(2);
    expect(p.search('common', 10, 3, e, s)).toBe(10);
    expect(e[0]).toBe(600);
    expect(p.termStats(['common'], 3)).toEqual({ docs: 400, totalLength: 800, df: [400] });
  });
});
