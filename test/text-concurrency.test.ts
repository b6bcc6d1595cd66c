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
    expect(tm.shared.memory.buffer.byteLength).toBeGreaterThan(bytesBefore);
  });
});
