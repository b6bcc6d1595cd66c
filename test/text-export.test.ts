// Text partition export/import (docs/text.md §7): an export taken at a cut while the writer
// keeps inserting, removing and rolling back equals the state at the cut (searches and
// statistics at the cut's snapshot, the documents' records), whatever happened after the
// cut; the bytes depend only on the cut; damaged images are refused with storage_error.
import { describe, expect, it } from 'vitest';
import { exportPartition, importPartition, joinChunks, TextMemory, TextPartition, EXPORT_VERSION } from '../dist/src/text/index.js';
import { crc32 } from 'node:zlib';

const WORDS = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta', 'iota', 'kappa', 'lambda', 'mu', 'Straße', '東京'];

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a * 1664525 + 1013904223) >>> 0;
    return a / 4294967296;
  };
}
const text = (r: () => number): string => Array.from({ length: Math.floor(r() * 12) }, () => WORDS[Math.floor(r() * r() * WORDS.length)]!).join(' ');

interface Ops { part: TextPartition; epoch: number; live: Map<number, number>; next: number }

/** One committed (or rolled-back) batch of random inserts, updates and deletes. */
function batch(o: Ops, r: () => number, rollback: boolean): void {
  const e = o.epoch + 1;
  const undo: (() => void)[] = [];
  const n = 1 + Math.floor(r() * 8);
  for (let i = 0; i < n; i++) {
    const x = r();
    const elements = [...o.live.keys()];
    if (x < 0.6 || elements.length === 0) {
      const el = o.next++;
      const d = o.part.insert(el, text(r), e);
      o.live.set(el, d);
      undo.push(() => { o.part.undoInsert(d); o.live.delete(el); });
    } else {
      const el = elements[Math.floor(r() * elements.length)]!;
      const d = o.live.get(el)!;
      o.part.remove(d, e);
      o.live.delete(el);
      undo.push(() => { o.part.undoRemove(d); o.live.set(el, d); });
      if (x < 0.8) {
        const d2 = o.part.insert(el, text(r), e);
        o.live.set(el, d2);
        undo.push(() => { o.part.undoInsert(d2); o.live.delete(el); });
      }
    }
  }
  if (rollback) for (let i = undo.length - 1; i >= 0; i--) undo[i]!();
  else o.epoch = e;
}

function answers(p: TextPartition, snapshot: number): unknown[] {
  const out: unknown[] = [];
  const e = new Uint32Array(50), s = new Float32Array(50);
  for (const q of ['alpha', 'beta gamma', 'theta iota kappa lambda', 'straße 東京', 'mu', 'zeta eta alpha']) {
    const n = p.search(q, 50, snapshot, e, s);
    out.push([q, [...e.subarray(0, n)], [...s.subarray(0, n)]]);
  }
  out.push(p.termStats(['alpha', 'mu', 'straße', 'nothing'], snapshot));
  return out;
}

describe('text export and import', () => {
  for (const positions of [false, true]) {
    it(`an export at a cut taken while the writer continues equals the state at the cut (positions ${positions ? 'on' : 'off'})`, () => {
      const r = rng(positions ? 7 : 8);
      const tm = TextMemory.create();
      const o: Ops = { part: TextPartition.create(tm, { analyzer: 'standard', positions }), epoch: 0, live: new Map(), next: 1 };
      for (let b = 0; b < 40; b++) batch(o, r, r() < 0.1);
      // The cut, between batches.
      const docsAtCut = o.part.pointCount(), cutEpoch = o.epoch;
      const before = Array.from({ length: cutEpoch + 1 }, (_, s) => answers(o.part, s));
      const recordsAtCut: number[][] = [];
      o.part.forEachDoc((d, el, c, x) => recordsAtCut.push([d, el, c, x]));
      // An export taken at once, and one taken while the writer goes on (slices between batches).
      const first = joinChunks(exportPartition(tm, o.part.root, docsAtCut, cutEpoch));
      for (let b = 0; b < 30; b++) batch(o, r, r() < 0.2);
      while (o.part.maintain(o.epoch));
      const later = joinChunks(exportPartition(tm, o.part.root, docsAtCut, cutEpoch));
      expect(Buffer.from(later).equals(Buffer.from(first)), 'the export depends only on the cut').toBe(true);
      // Imported into a fresh memory and into the same one.
      for (const target of [TextMemory.create(), tm]) {
        const q = importPartition(target, later);
        expect(q.pointCount()).toBe(docsAtCut);
        expect(q.positions).toBe(positions);
        // The cut's snapshot (an import serves the cut and later ones).
        expect(answers(q, cutEpoch), `snapshot ${cutEpoch}`).toEqual(before[cutEpoch]);
        const records: number[][] = [];
        q.forEachDoc((d, el, c, x) => records.push([d, el, c, x]));
        // Live at the cut: as they were, deletions after it read 0; the rest never visible.
        expect(records).toEqual(recordsAtCut.map(([d, el, c, x]) => (c !== 0 && c! <= cutEpoch && (x === 0 || x! > cutEpoch) ? [d, el, c, 0] : [d, el, 0, 0])));
        // The import is writable: a new document and a removal.
        q.insert(999, 'alpha omega', cutEpoch + 1);
        const e = new Uint32Array(5), s = new Float32Array(5);
        expect(q.search('omega', 5, cutEpoch + 1, e, s)).toBe(1);
        expect(e[0]).toBe(999);
        // Re-exported at the same cut: the same bytes.
        expect(Buffer.from(joinChunks(exportPartition(target, q.root, docsAtCut, cutEpoch))).equals(Buffer.from(later))).toBe(true);
      }
    });
  }

  it('an export at an earlier cut leaves out later documents; documents not visible at the cut are written never visible', () => {
    const tm = TextMemory.create();
    const p = TextPartition.create(tm, { analyzer: 'standard', positions: false });
    const a = p.insert(1, 'alpha beta', 1);
    p.insert(2, 'alpha', 2);
    p.remove(a, 3);
    const cut = p.pointCount();
    p.insert(3, 'alpha gamma', 4);
    const q = importPartition(TextMemory.create(), joinChunks(exportPartition(tm, p.root, cut, 2)));
    const seen: number[][] = [];
    q.forEachDoc((d, el, c, x) => seen.push([d, el, c, x]));
    expect(seen).toEqual([[0, 1, 1, 0], [1, 2, 2, 0]]);
    expect(q.termStats(['alpha', 'gamma'], 9)).toEqual({ docs: 2, totalLength: 3, df: [2, 0] });
    // A doc inserted in the open batch (epoch > cut epoch) is written never visible.
    const cut2 = p.pointCount();
    const q2 = importPartition(TextMemory.create(), joinChunks(exportPartition(tm, p.root, cut2, 3)));
    const seen2: number[][] = [];
    q2.forEachDoc((d, el, c, x) => seen2.push([d, el, c, x]));
    expect(seen2).toEqual([[0, 1, 0, 0], [1, 2, 2, 0], [2, 3, 0, 0]]);
    expect(q2.termStats(['alpha', 'gamma'], 9)).toEqual({ docs: 1, totalLength: 1, df: [1, 0] });
  });

  it('refuses damaged images with storage_error', () => {
    const tm = TextMemory.create();
    const p = TextPartition.create(tm, { analyzer: 'standard_stem_en', positions: true });
    for (let i = 0; i < 50; i++) p.insert(i, `document number ${i} about running ${i % 7}`, 1 + i);
    const good = joinChunks(exportPartition(tm, p.root, p.pointCount(), 50));
    const target = TextMemory.create();
    expect(() => importPartition(target, good)).not.toThrow();
    const refuse = (bytes: Uint8Array, what: RegExp): void => {
      let err: unknown;
      try { importPartition(target, bytes); } catch (e) { err = e; }
      expect(err, String(what)).toMatchObject({ code: 'storage_error' });
      expect((err as Error).message).toMatch(what);
    };
    /** With its checksum fixed, so that the structural checks are what refuses it. */
    const resealed = (bytes: Uint8Array): Uint8Array => {
      const out = bytes.slice();
      new DataView(out.buffer).setUint32(out.length - 4, crc32(out.subarray(0, out.length - 4)) >>> 0, true);
      return out;
    };
    const word = (bytes: Uint8Array, i: number, v: number): Uint8Array => {
      const out = bytes.slice();
      new DataView(out.buffer).setUint32(4 * i, v, true);
      return resealed(out);
    };
    // Any flipped byte: the checksum.
    for (const at of [0, 7, 100, good.length - 9, good.length - 1]) {
      const bad = good.slice();
      bad[at]! ^= 0x40;
      refuse(bad, /checksum|corrupt/);
    }
    refuse(good.subarray(0, good.length - 8), /checksum|corrupt/);
    refuse(new Uint8Array(10), /bytes/);
    refuse(word(good, 0, 0x12345678), /magic/);
    refuse(word(good, 1, EXPORT_VERSION + 1), /format version/);
    refuse(word(good, 3, 9), /analyzer/);
    refuse(word(good, 5, 1e9), /documents/);
    // The first doc's length (word 16 + 3) no longer matches its postings.
    refuse(word(good, 19, 3), /length|occurrences|position/);
    // A never-visible doc with a deletion epoch, and a doc deleted before it was created.
    refuse(word(word(good, 16, 0), 17, 5), /deleted/);
    refuse(word(word(good, 20 + 16, 9), 20 + 17, 8), /deleted/);
    // Truncated terms (the end marker cut off, checksum fixed).
    refuse(resealed(good.slice(0, good.length - 8).slice()), /truncated|corrupt|after/);
  });
});

describe('text partition blocks', () => {
  it('blocks() names every block the partition holds: dropping them gives the memory back exactly', () => {
    const tm = TextMemory.create();
    const keep = TextPartition.create(tm, { analyzer: 'standard', positions: false });
    keep.insert(1, 'another partition stays', 1);
    const keptBytes = tm.usedBytes();
    for (const positions of [false, true]) {
      const p = TextPartition.create(tm, { analyzer: 'standard', positions });
      const r = rng(3);
      let epoch = 1;
      const live: number[] = [];
      for (let i = 0; i < 3000; i++) {
        live.push(p.insert(i, text(r) + ' ' + text(r), epoch));
        if (r() < 0.3) { const d = live.splice(Math.floor(r() * live.length), 1)[0]!; p.remove(d, epoch); }
        if (r() < 0.05) p.undoInsert(live.pop()!);
        if (i % 50 === 0) { epoch++; while (p.maintain(epoch, epoch - 1)); }
      }
      expect(tm.usedBytes()).toBeGreaterThan(keptBytes + 100_000);
      tm.dropBlocks(p.blocks());
      // Every retired block (grown blocks, old lists, old dictionaries) and every dropped one is free again.
      expect(tm.usedBytes()).toBe(keptBytes);
    }
    const e = new Uint32Array(2), s = new Float32Array(2);
    expect(keep.search('partition', 2, 1, e, s)).toBe(1);
  });
});

describe('tiny partitions', () => {
  it('a tenant partition is cheap: ~0.3 KiB empty, ~1 KiB with one short document', () => {
    const tm = TextMemory.create();
    const before = tm.usedBytes();
    const parts: TextPartition[] = [];
    for (let i = 0; i < 1000; i++) parts.push(TextPartition.create(tm, { analyzer: 'standard', positions: false }));
    const empty = (tm.usedBytes() - before) / 1000;
    for (let i = 0; i < 1000; i++) parts[i]!.insert(i, 'a short tenant document', 1);
    const one = (tm.usedBytes() - before) / 1000;
    expect(empty).toBeLessThanOrEqual(512);
    expect(one).toBeLessThanOrEqual(2048);
    const e = new Uint32Array(1), s = new Float32Array(1);
    expect(parts[123]!.search('tenant', 1, 1, e, s)).toBe(1);
    expect(e[0]).toBe(123);
  });
});
