// A secondary index's entries in the topology memory (src/index/entries.ts): exact at every
// snapshot it answers for, through inserts, deletions, rollbacks, merges and purges; exact
// for a reader thread scanning while the writer changes it; and cheap to build.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { buildSync } from 'esbuild';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { IndexEntries } from '../src/index/entries.js';
import { Store } from '../src/store/store.js';
import { injectTopologyFault, Topology, wordBlockWords } from '../src/store/topology.js';
import { C_COMMITTED, C_PURGE_ISSUED, C_ROOT, C_STOP, C_WORDS, WINDOW, elementOf, keyOf } from './fixtures/index-entries-workload.js';

const K0S = [0, 1, 0x7fffffff, 0x80000000, 0xffffffff];
const K1S = [0, 3, 0x80000000, 0xffffffff];
const KEY_COUNT = K0S.length * K1S.length;
/** Key number i, in ascending unsigned order of i. */
const keyAt = (i: number): [number, number] => [K0S[Math.floor(i / K1S.length)]!, K1S[i % K1S.length]!];
const ELEMENTS = 12;

interface ModelEntry { key: number; element: number; created: number; deleted: number }
type Op = { kind: 'set'; element: number; key: number } | { kind: 'remove'; element: number; key: number };
interface Batch { ops: Op[]; rollback: boolean; faultAfter: number | null; maintain: boolean; purge: number; budget: number | null; maintainFault: number | null }

const visible = (e: ModelEntry, at: number): boolean => e.created !== 0 && e.created <= at && (e.deleted === 0 || at < e.deleted);

function modelScan(model: ModelEntry[], lo: number, hi: number, at: number): number[] {
  return model.filter((e) => e.key >= lo && e.key <= hi && visible(e, at)).map((e) => e.element).sort((a, b) => a - b);
}

const opArb: fc.Arbitrary<Op> = fc.record({
  kind: fc.constantFrom<'set' | 'remove'>('set', 'set', 'remove'),
  element: fc.integer({ min: 0, max: ELEMENTS - 1 }),
  key: fc.integer({ min: 0, max: KEY_COUNT - 1 }),
});
const batchArb: fc.Arbitrary<Batch> = fc.record({
  ops: fc.array(opArb, { maxLength: 12 }),
  rollback: fc.boolean(),
  faultAfter: fc.option(fc.integer({ min: 0, max: 3 }), { freq: 4 }),
  maintain: fc.boolean(),
  purge: fc.double({ min: 0, max: 1, noNaN: true }),
  budget: fc.option(fc.integer({ min: 1, max: 40 })),
  maintainFault: fc.option(fc.integer({ min: 0, max: 2 }), { freq: 6 }),
});

describe('index entries', () => {
  // One memory for every run (each run's index is freed, so its blocks are reused by the next).
  const topo = Topology.create();
  const bundleDir = mkdtempSync(join(tmpdir(), 'svcdb-index-entries-'));
  afterAll(() => rmSync(bundleDir, { recursive: true, force: true }));

  it('size classes round up by less than a quarter', () => {
    for (const n of [1, 8, 9, 15, 17, 100, 1000, 5 << 20, (5 << 20) + 1, 123_457]) {
      const size = wordBlockWords(n);
      expect(size).toBeGreaterThanOrEqual(n);
      expect(n <= 8 || size < n * 1.25 + 1).toBe(true);
      expect(wordBlockWords(size)).toBe(size);
    }
  });

  it('scan() at every snapshot since the last purge is exactly the model (inserts, deletions, rollbacks, faults, merges, purges)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.array(batchArb, { minLength: 1, maxLength: 30 }), fc.array(fc.tuple(fc.nat(KEY_COUNT - 1), fc.nat(KEY_COUNT - 1)), { minLength: 1, maxLength: 4 }), (deltaMax, batches, ranges) => {
        const index = IndexEntries.create(topo, deltaMax);
        const check = (model: ModelEntry[], committed: number, purgeMax: number, epochs: number[]): void => {
          const purgedThrough = index.purgedThrough();
          expect(purgedThrough).toBeLessThanOrEqual(purgeMax);
          const all: [number, number][] = [[0, KEY_COUNT - 1], ...ranges.map(([a, b]): [number, number] => [Math.min(a, b), Math.max(a, b)])];
          for (const at of epochs) {
            for (const [lo, hi] of all) {
              const out: number[] = [];
              const [k0lo, k1lo] = keyAt(lo), [k0hi, k1hi] = keyAt(hi);
              const answered = index.scan(k0lo, k1lo, k0hi, k1hi, at, out);
              if (!answered) {
                expect(out, 'nothing pushed when unanswered').toEqual([]);
                expect(at, `scan at ${at} refused, purged through ${purgedThrough}`).toBeLessThan(purgedThrough);
                expect(index.count(k0lo, k1lo, k0hi, k1hi, at)).toBe(-1);
                continue;
              }
              expect(at >= purgedThrough, `scan at ${at} answered below purge ${purgedThrough}`).toBe(true);
              out.sort((a, b) => a - b);
              expect(out, `at ${at} of ${committed}, keys ${lo}..${hi}`).toEqual(modelScan(model, lo, hi, at));
              expect(index.count(k0lo, k1lo, k0hi, k1hi, at)).toBe(out.length);
            }
          }
          // An empty range answers nothing.
          if (KEY_COUNT > 1) expect(index.count(0xffffffff, 0xffffffff, 0, 0, committed)).toBe(purgedThrough > committed ? -1 : 0);
        };
        let model: ModelEntry[] = [];
        let committed = 0, purgeMax = 0;
        try {
          for (const batch of batches) {
            const epoch = committed + 1;
            const saved = model.map((e) => ({ ...e }));
            const undo: (() => void)[] = [];
            let failed = false;
            if (batch.faultAfter !== null) injectTopologyFault(batch.faultAfter);
            try {
              for (const op of batch.ops) {
                const live = model.find((e) => e.element === op.element && e.deleted === 0);
                if (live !== undefined) {
                  const [k0, k1] = keyAt(live.key);
                  expect(index.markDeleted(k0, k1, op.element, epoch)).toBe(true);
                  undo.push(() => expect(index.undoDelete(k0, k1, op.element, epoch)).toBe(true));
                  live.deleted = epoch;
                } else {
                  const [k0, k1] = keyAt(op.key);
                  expect(index.markDeleted(k0, k1, op.element, epoch)).toBe(false);
                }
                if (op.kind === 'set') {
                  const [k0, k1] = keyAt(op.key);
                  undo.push(() => index.undoInsert(k0, k1, op.element)); // recorded before the change
                  index.insert(k0, k1, op.element, epoch);
                  model.push({ key: op.key, element: op.element, created: epoch, deleted: 0 });
                }
              }
            } catch (err) {
              expect((err as { code?: string }).code).toBe('storage_error');
              failed = true;
            } finally {
              injectTopologyFault(null);
            }
            if (failed || batch.rollback) {
              for (let i = undo.length - 1; i >= 0; i--) undo[i]!();
              model = saved;
            } else {
              committed = epoch;
            }
            if (batch.maintain && committed > 0) {
              const purge = Math.floor(batch.purge * (committed + 1)); // 0 .. committed
              if (batch.maintainFault !== null) injectTopologyFault(batch.maintainFault);
              try {
                index.maintain(purge, batch.budget ?? undefined);
                purgeMax = Math.max(purgeMax, purge);
                // Entries deleted at or before the purge may be gone from the structure, not from the model.
              } catch (err) {
                expect((err as { code?: string }).code).toBe('storage_error');
              } finally {
                injectTopologyFault(null);
              }
            }
            const stats = index.stats();
            expect(stats.liveEntries).toBe(model.filter((e) => e.deleted === 0).length);
            expect(stats.entries).toBeLessThanOrEqual(model.length);
            const sample = [committed, Math.max(0, committed - 1), purgeMax, Math.floor(committed / 2)].filter((s) => s <= committed);
            check(model, committed, purgeMax, sample);
          }
          // Everything is merged eventually, and still exact.
          for (let i = 0; i < 64 && index.pendingMaintenance(); i++) index.maintain(purgeMax);
          const epochs = Array.from({ length: committed + 2 }, (_, s) => s);
          check(model, committed, purgeMax, epochs);
          for (const s of epochs) if (s >= purgeMax) expect(index.count(0, 0, 0xffffffff, 0xffffffff, s)).toBeGreaterThanOrEqual(0);
        } finally {
          index.free();
        }
      }),
      { numRuns: 300 },
    );
  });

  it('a reader thread scanning while the writer inserts, deletes, rolls back, merges, purges and grows the memory sees exactly each snapshot', async () => {
    const store = Store.create();
    const topology = store.topology;
    const index = IndexEntries.create(topology, 16);
    const control = new Int32Array(new SharedArrayBuffer(C_WORDS * 4));
    Atomics.store(control, C_ROOT, index.root);
    const bundle = join(bundleDir, 'index-entries-reader.mjs');
    buildSync({ entryPoints: [new URL('./fixtures/index-entries-reader.ts', import.meta.url).pathname], bundle: true, platform: 'node', format: 'esm', target: 'node20', outfile: bundle, logLevel: 'error' });
    const reader = new Worker(bundle, { workerData: { memory: store.shared.topology, control: control.buffer } });
    const result = new Promise<{ scans: number; purgedAnswers: number; checkedEntries: number; violations: string[] }>((resolve, reject) => {
      reader.once('message', resolve);
      reader.once('error', reject);
    });
    const deadline = Date.now() + 3000;
    let epoch = 0, rolledBack = 0;
    const heapBefore = topology.heapUsed();
    while (Date.now() < deadline) {
      const e = epoch + 1;
      if (e % 7 === 0) {
        // A batch that fails: junk entries (some growing the delta) and a deletion, undone newest first.
        const undo: (() => void)[] = [];
        for (let j = 0; j < (e % 23); j++) {
          const [k0, k1] = keyOf(e + j);
          undo.push(() => index.undoInsert(k0, k1, 1000 + j));
          index.insert(k0, k1, 1000 + j, e);
        }
        if (e > 5) {
          const [k0, k1] = keyOf(e - 5);
          expect(index.markDeleted(k0, k1, elementOf(e - 5), e)).toBe(true);
          undo.push(() => expect(index.undoDelete(k0, k1, elementOf(e - 5), e)).toBe(true));
        }
        for (let i = undo.length - 1; i >= 0; i--) undo[i]!();
        rolledBack++;
      }
      const [k0, k1] = keyOf(e);
      index.insert(k0, k1, elementOf(e), e);
      if (e > WINDOW) {
        const [d0, d1] = keyOf(e - WINDOW);
        expect(index.markDeleted(d0, d1, elementOf(e - WINDOW), e)).toBe(true);
      }
      epoch = e;
      Atomics.store(control, C_COMMITTED, e);
      const purge = Math.max(0, e - 30);
      Atomics.store(control, C_PURGE_ISSUED, purge); // before the header that may refuse below it
      index.maintain(purge, e % 3 === 0 ? 8 : undefined);
      // Grow the memory now and then (scratch from the same heap), so readers must re-cover.
      if (e % 500 === 0) topology.reserveScratch(1 << 16);
    }
    Atomics.store(control, C_STOP, 1);
    const r = await result;
    console.log(`index entries cross-thread: ${epoch} batches (${rolledBack} rolled back first), ${r.scans} scans (${r.purgedAnswers} below the purge), ${r.checkedEntries} entries checked, heap +${topology.heapUsed() - heapBefore} words, stats ${JSON.stringify(index.stats())}`);
    expect(r.violations).toEqual([]);
    expect(r.scans).toBeGreaterThan(1000);
    expect(r.checkedEntries).toBeGreaterThan(1000);
  });

  it('rollback of a failed re-insert keeps the older entry of the same (key, element) until its deletion is undone', () => {
    const index = IndexEntries.create(topo, 8); // a first delta block of 16 entries
    const undo: (() => void)[] = [];
    const insert = (k1: number, element: number) => {
      undo.push(() => index.undoInsert(7, k1, element));
      index.insert(7, k1, element, 3);
    };
    for (let i = 0; i < 15; i++) insert(i, 100 + i);
    insert(99, 1); // the 16th entry fills the first delta block
    expect(index.markDeleted(7, 99, 1, 3)).toBe(true);
    undo.push(() => expect(index.undoDelete(7, 99, 1, 3)).toBe(true));
    injectTopologyFault(0); // the re-insert needs a larger delta block, and fails
    try {
      expect(() => insert(99, 1)).toThrow(/injected topology fault/);
    } finally {
      injectTopologyFault(null);
    }
    for (let i = undo.length - 1; i >= 0; i--) undo[i]!();
    expect(index.stats()).toMatchObject({ entries: 0, liveEntries: 0 });
    expect(index.count(0, 0, 0xffffffff, 0xffffffff, 3)).toBe(0);
    index.free();
  });

  it('sorts large deltas and builds in any element order (the radix sort) into runs that scan exactly', () => {
    const n = 9000;
    let seed = 99;
    const random = (m: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 4) % m;
    };
    const keys = Array.from({ length: 60 }, (_, i): [number, number] => [[0, 0x80000000, 0xffffffff][i % 3]!, (Math.imul(i, 0x9e3779b9) >>> 0)]);
    const elements = Array.from({ length: n }, (_, i) => i);
    for (let i = n - 1; i > 0; i--) {
      const j = random(i + 1);
      [elements[i], elements[j]] = [elements[j]!, elements[i]!];
    }
    const records = elements.map((element) => ({ key: keys[random(keys.length)]!, element, created: 1 + random(3) }));
    const viaDelta = IndexEntries.create(topo, 16);
    for (const r of records) viaDelta.insert(r.key[0], r.key[1], r.element, r.created);
    viaDelta.maintain(0);
    expect(viaDelta.stats()).toMatchObject({ entries: n, runs: 1 });
    const viaBuild = IndexEntries.create(topo);
    for (const r of records) viaBuild.appendBuild(r.key[0], r.key[1], r.element, r.created);
    viaBuild.finishBuild(0);
    const le = (a: [number, number], b: [number, number]) => a[0] < b[0] || (a[0] === b[0] && a[1] <= b[1]);
    for (let q = 0; q < 200; q++) {
      const a = keys[random(keys.length)]!, b = keys[random(keys.length)]!;
      const [lo, hi] = le(a, b) ? [a, b] : [b, a];
      const at = 1 + random(3);
      const expected = records.filter((r) => r.created <= at && le(lo, r.key) && le(r.key, hi)).map((r) => r.element).sort((x, y) => x - y);
      for (const index of [viaDelta, viaBuild]) {
        const out: number[] = [];
        expect(index.scan(lo[0], lo[1], hi[0], hi[1], at, out)).toBe(true);
        expect(out.sort((x, y) => x - y)).toEqual(expected);
      }
    }
    // markDeleted finds each entry by binary search on (key, element): the full order is right.
    for (const index of [viaDelta, viaBuild]) {
      for (const r of records) expect(index.markDeleted(r.key[0], r.key[1], r.element, 5)).toBe(true);
      expect(index.count(0, 0, 0xffffffff, 0xffffffff, 5)).toBe(0);
      expect(index.count(0, 0, 0xffffffff, 0xffffffff, 4)).toBe(n);
    }
    viaDelta.free();
    viaBuild.free();
  });

  it('the key filter never misses a key held (runs, delta, build entries, before and after it grows) and rarely claims a fresh one', () => {
    const index = IndexEntries.create(topo, 16);
    const key = (i: number): [number, number] => [Math.imul(i, 0x9e3779b1) >>> 0, Math.imul(i ^ 0x5bd1e995, 0x85ebca6b) >>> 0];
    let held = 0;
    // Entries before the filter exists: a sorted run, a delta, and collected build entries.
    for (; held < 3000; held++) index.insert(...key(held), held, 1);
    index.maintain(0);
    for (; held < 3010; held++) index.insert(...key(held), held, 1);
    for (; held < 3100; held++) index.appendBuild(...key(held), held, 1);
    const allHeld = () => { for (let i = 0; i < held; i++) if (!index.mayContain(...key(i))) throw new Error(`key ${i} missed`); };
    allHeld(); // the first call makes the filter from everything held
    // Then through growth (the filter is re-made several times) by both insert paths.
    for (; held < 200_000; held++) {
      if (held % 2 === 0) index.insert(...key(held), held, 2);
      else index.appendBuild(...key(held), held, 2);
      if (held % 1000 === 0) index.maintain(0);
    }
    index.finishBuild(0);
    allHeld();
    let claimed = 0;
    for (let i = 1_000_000; i < 1_100_000; i++) if (index.mayContain(...key(i))) claimed++;
    expect(claimed / 100_000).toBeLessThan(0.03); // ~2 % at the fullest, less after growing
    index.free();
  });

  it('builds 1 M entries into one run and finds them (time and words per entry reported)', () => {
    const n = 1_000_000;
    const k0s = new Uint32Array(n), k1s = new Uint32Array(n);
    let seed = 7;
    for (let i = 0; i < n; i++) {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      k0s[i] = seed % 3 === 0 ? 0xffffffff : seed % 7;
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      k1s[i] = seed;
    }
    const index = IndexEntries.create(topo);
    const started = performance.now();
    for (let i = 0; i < n; i++) index.appendBuild(k0s[i]!, k1s[i]!, i);
    index.finishBuild(1);
    const builtMs = performance.now() - started;
    const stats = index.stats();
    expect(stats).toMatchObject({ entries: n, liveEntries: n, runs: 1 });
    // A lookup: every entry with K0 = 3 and K1 in the lower half.
    const lookupStarted = performance.now();
    const out: number[] = [];
    expect(index.scan(3, 0, 3, 0x7fffffff, 5, out)).toBe(true);
    const lookupMs = performance.now() - lookupStarted;
    const expected: number[] = [];
    for (let i = 0; i < n; i++) if (k0s[i] === 3 && k1s[i]! <= 0x7fffffff) expected.push(i);
    expect(out.sort((a, b) => a - b)).toEqual(expected);
    expect(index.scan(3, 0, 3, 0x7fffffff, 0, [])).toBe(false); // older than the build
    const pointStarted = performance.now();
    const point: number[] = [];
    for (let i = 0; i < 1000; i++) index.scan(k0s[i * 997]!, k1s[i * 997]!, k0s[i * 997]!, k1s[i * 997]!, 5, point);
    const pointUs = ((performance.now() - pointStarted) * 1000) / 1000;
    expect(point.length).toBeGreaterThanOrEqual(1000);
    console.log(`index entries build: ${n} entries in ${builtMs.toFixed(0)} ms, ${(stats.words / n).toFixed(2)} words per entry; range lookup of ${out.length} in ${lookupMs.toFixed(2)} ms; point lookup ${pointUs.toFixed(2)} us`);
    index.free();
  });
});
