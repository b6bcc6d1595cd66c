// The text partition's lock-free read protocol across threads (src/text/partition.ts
// header): while the writer inserts, removes, rolls back batches, compacts lists with
// maintain() (dropping rolled-back documents and deletions older than the reader's
// announced snapshot) and grows the memory, a worker_threads reader searches at the newest
// committed snapshot and every answer must equal the brute force at that snapshot.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { buildSync } from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';
import { TextMemory, TextPartition, textMaintainCounters } from '../dist/src/text/index.js';
import { C_COMMITTED, C_READER_SNAPSHOT, C_ROOT, C_STARTED, C_STOP, C_WORDS, generate } from './fixtures/text-workload.js';

describe('text partition across threads', () => {
  const bundleDir = mkdtempSync(join(tmpdir(), 'svcdb-text-'));
  afterAll(() => rmSync(bundleDir, { recursive: true, force: true }));

  it('a reader searching while the writer inserts, removes, rolls back, compacts and grows the memory gets exactly each snapshot', async () => {
    const seed = 4242, batches = 1500, vocab = 400;
    const { docs, batches: history } = generate(seed, batches, vocab);
    const tm = TextMemory.create();
    const part = TextPartition.create(tm, { analyzer: 'standard', positions: true });
    const control = new Int32Array(new SharedArrayBuffer(C_WORDS * 4));
    Atomics.store(control, C_ROOT, part.root);
    const bundle = join(bundleDir, 'text-reader.mjs');
    buildSync({ entryPoints: [new URL('./fixtures/text-reader.ts', import.meta.url).pathname], bundle: true, platform: 'node', format: 'esm', target: 'node20', outfile: bundle, logLevel: 'error' });
    const reader = new Worker(bundle, { workerData: { shared: tm.shared, control: control.buffer, seed, batches, vocab } });
    const result = new Promise<{ searches: number; snapshots: number; violations: string[] }>((resolve, reject) => {
      reader.once('message', resolve);
      reader.once('error', reject);
    });
    while (Atomics.load(control, C_STARTED) === 0) await new Promise((r) => setTimeout(r, 2));
    const compactionsBefore = textMaintainCounters.compactions;
    const removedBefore = textMaintainCounters.termsRemoved, reusedBefore = textMaintainCounters.termIdsReused;
    const bytesBefore = tm.shared.memory.buffer.byteLength;
    let epoch = 0;
    for (const b of history) {
      const handles: number[] = [];
      for (const op of b.ops) {
        if (op.kind === 'insert') {
          const d = docs[op.doc]!;
          const handle = part.insert(d.element, d.text, b.epoch);
          expect(handle).toBe(op.doc);
          handles.push(handle);
        } else {
          part.remove(op.doc, b.epoch);
          handles.push(-1 - op.doc);
        }
      }
      if (b.rollback) {
        for (let i = handles.length - 1; i >= 0; i--) {
          const h = handles[i]!;
          if (h >= 0) part.undoInsert(h); else part.undoRemove(-1 - h);
        }
      } else {
        epoch = b.epoch;
        Atomics.store(control, C_COMMITTED, epoch);
      }
      // Between batches: compaction, purging below what the reader announced.
      const purgeBefore = Atomics.load(control, C_READER_SNAPSHOT);
      for (let i = 0; i < 4 && part.maintain(epoch, purgeBefore); i++);
      // Give the reader time to search at many snapshots.
      if (b.epoch % 8 === 0) await new Promise((r) => setImmediate(r));
    }
    Atomics.store(control, C_STOP, 1);
    const r = await result;
    await reader.terminate();
    expect(r.violations).toEqual([]);
    expect(r.searches).toBeGreaterThan(50);
    expect(r.snapshots).toBeGreaterThan(10);
    expect(textMaintainCounters.compactions - compactionsBefore).toBeGreaterThan(10);
    // Rare words lose their last document and leave the dictionary while the reader searches.
    expect(textMaintainCounters.termsRemoved - removedBefore).toBeGreaterThan(10);
    // ... and their ids (records) go to new terms once the reader's older reads have ended.
    expect(textMaintainCounters.termIdsReused - reusedBefore).toBeGreaterThan(5);
    expect(tm.shared.memory.buffer.byteLength).toBeGreaterThan(bytesBefore);
  });
});

describe('text export on another thread', () => {
  const bundleDir = mkdtempSync(join(tmpdir(), 'svcdb-text-export-'));
  afterAll(() => rmSync(bundleDir, { recursive: true, force: true }));

  it('an export taken by a worker while the writer inserts, removes, rolls back and compacts equals the export of the state at the cut', async () => {
    const { exportPartition, joinChunks } = await import('../dist/src/text/index.js');
    const seed = 77, batches = 600, vocab = 300;
    const { docs, batches: history } = generate(seed, batches, vocab);
    const tm = TextMemory.create();
    const part = TextPartition.create(tm, { analyzer: 'standard', positions: true });
    let epoch = 0;
    const apply = (b: (typeof history)[number]): void => {
      const handles: number[] = [];
      for (const op of b.ops) {
        if (op.kind === 'insert') handles.push(part.insert(docs[op.doc]!.element, docs[op.doc]!.text, b.epoch));
        else { part.remove(op.doc, b.epoch); handles.push(-1 - op.doc); }
      }
      if (b.rollback) for (let i = handles.length - 1; i >= 0; i--) { const h = handles[i]!; if (h >= 0) part.undoInsert(h); else part.undoRemove(-1 - h); }
      else epoch = b.epoch;
      while (part.maintain(epoch, Math.max(0, epoch - 50)));
    };
    for (const b of history.slice(0, 300)) apply(b);
    const docsAtCut = part.pointCount(), cutEpoch = epoch;
    // The reference: the same cut exported here before anything else happens.
    const want = Buffer.from(joinChunks(exportPartition(tm, part.root, docsAtCut, cutEpoch)));
    const bundle = join(bundleDir, 'text-exporter.mjs');
    buildSync({ entryPoints: [new URL('./fixtures/text-exporter.ts', import.meta.url).pathname], bundle: true, platform: 'node', format: 'esm', target: 'node20', outfile: bundle, logLevel: 'error' });
    const go = new Int32Array(new SharedArrayBuffer(8));
    const worker = new Worker(bundle, { workerData: { shared: tm.shared, root: part.root, docsAtCut, cutEpoch, go: go.buffer } });
    const result = new Promise<Uint8Array[]>((resolve, reject) => { worker.once('message', resolve); worker.once('error', reject); });
    while (Atomics.load(go, 1) === 0) await new Promise((r) => setTimeout(r, 1));
    Atomics.store(go, 0, 1);
    // Purges stay below the cut (the export is a reader of snapshot cutEpoch).
    for (const b of history.slice(300)) {
      const handles: number[] = [];
      for (const op of b.ops) {
        if (op.kind === 'insert') handles.push(part.insert(docs[op.doc]!.element, docs[op.doc]!.text, b.epoch));
        else { part.remove(op.doc, b.epoch); handles.push(-1 - op.doc); }
      }
      if (b.rollback) for (let i = handles.length - 1; i >= 0; i--) { const h = handles[i]!; if (h >= 0) part.undoInsert(h); else part.undoRemove(-1 - h); }
      else epoch = b.epoch;
      while (part.maintain(epoch, cutEpoch));
    }
    const got = Buffer.from(joinChunks(await result));
    await worker.terminate();
    expect(got.equals(want)).toBe(true);
    expect(part.pointCount()).toBeGreaterThan(docsAtCut);
  });
});

describe('text reads with views older than the memory', () => {
  it('a reader whose views predate the memory growth re-makes them (search, termStats, export)', async () => {
    const { exportPartition, importPartition, joinChunks } = await import('../dist/src/text/index.js');
    const writerMem = TextMemory.create();
    const part = TextPartition.create(writerMem, { analyzer: 'standard', positions: true });
    part.insert(1, 'first words', 1);
    // A second attachment in this thread stands for a reader thread: its own views.
    const readerMem = TextMemory.attach(writerMem.shared);
    const reader = TextPartition.attach(readerMem, part.root);
    const e = new Uint32Array(5), s = new Float32Array(5);
    expect(reader.search('words', 5, 1, e, s)).toBe(1);
    const bytes = readerMem.u32.length;
    for (let i = 2; i < 20_000; i++) part.insert(i, `words ${i} and more words number ${i % 97} to grow the memory`, 2);
    expect(writerMem.u32.length).toBeGreaterThan(bytes);
    expect(readerMem.u32.length).toBe(bytes); // stale until its next read
    expect(reader.search('number words 42', 5, 2, e, s)).toBe(5);
    expect(readerMem.u32.length).toBe(writerMem.u32.length);
    const readerMem2 = TextMemory.attach(writerMem.shared);
    const reader2 = TextPartition.attach(readerMem2, part.root);
    for (let i = 20_000; i < 40_000; i++) part.insert(i, `more text ${i}`, 3);
    expect(reader2.termStats(['more', 'text'], 3)).toEqual(part.termStats(['more', 'text'], 3));
    const readerMem3 = TextMemory.attach(writerMem.shared);
    for (let i = 40_000; i < 60_000; i++) part.insert(i, `again ${i}`, 4);
    const img = joinChunks(exportPartition(readerMem3, part.root, part.pointCount(), 4));
    expect(importPartition(TextMemory.create(), img).termStats(['again'], 4).df).toEqual([20_000]);
  });
});
