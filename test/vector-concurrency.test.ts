// The vector engine across threads: readers search a graph while the writer inserts,
// removes and rolls back (every result visible at the reader's snapshot, with its exact
// distance), and an export taken on another thread at a cut while the writer keeps going
// imports to exactly the state at the cut. Workers run the built engine (dist/).
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { mixture } from '../bench/vector-data.js';
import { rng } from '../bench/seeded-random.js';
import { importGraph, joinChunks, VectorGraph, VectorMemory, type Metric } from '../src/vector/index.js';

interface ReaderResult { searches: number; results: number; errors: number; violations: string[]; epochs: number; counts: number }
interface ExportResult { pointsAtCut: number; cutEpoch: number; chunks: Uint8Array[] }

const DIM = 16;
const ROWS = 4000;
const INSERTS = 15_000;
const EPOCHS_MAX = 4096;
const READERS = 2;

describe('vector graph across threads', () => {
  for (const metric of ['euclidean', 'cosine'] as Metric[]) {
    it(`readers see exactly the committed points while the writer inserts, removes and rolls back; exports at cuts import as the cut (${metric})`, async () => {
      const spec = { dimension: DIM, clusters: 12, spread: 2, seed: 31 };
      const sab = (n: number) => new SharedArrayBuffer(n * 4);
      const vectorsSab = sab(ROWS * DIM), queriesSab = sab(64 * DIM);
      const vectors = new Float32Array(vectorsSab);
      vectors.set(mixture(spec, ROWS, 32));
      new Float32Array(queriesSab).set(mixture(spec, 64, 33));
      const tables = { created: sab(INSERTS + 1), deleted: sab(INSERTS + 1), liveAt: sab(EPOCHS_MAX) };
      const created = new Int32Array(tables.created), deleted = new Int32Array(tables.deleted), liveAt = new Int32Array(tables.liveAt);
      const control = new Int32Array(sab(3));

      const vm = VectorMemory.create();
      const g = VectorGraph.create(vm, { dimension: DIM, metric, efConstruction: 48 });
      const base = { memory: vm.memory, root: g.root };
      const readers = Array.from({ length: READERS }, () => new Worker(new URL('./fixtures/vector-worker.mjs', import.meta.url), {
        workerData: { ...base, role: 'reader', dim: DIM, metric, vectors: vectorsSab, queries: queriesSab, control: control.buffer, ...tables },
      }));
      const readerResults = readers.map((w) => new Promise<ReaderResult>((resolve, reject) => { w.once('message', resolve); w.once('error', reject); }));
      const exporter = new Worker(new URL('./fixtures/vector-worker.mjs', import.meta.url), { workerData: { ...base, role: 'exporter' } });
      const exports: ExportResult[] = [];
      exporter.on('message', (m: ExportResult) => exports.push(m));
      const exporterError = new Promise<never>((_, reject) => exporter.once('error', reject));
      void exporterError.catch(() => undefined);
      while (Atomics.load(control, 2) < READERS) await new Promise((r) => setTimeout(r, 5));

      // The writer: element e is vector row e % ROWS; elements are never reused.
      const random = rng(34);
      const live: number[] = []; // elements
      const pointOf = new Map<number, number>();
      let epoch = 0, element = 1, rollbacks = 0, removes = 0, cuts = 0;
      const row = (e: number) => vectors.subarray((e % ROWS) * DIM, (e % ROWS + 1) * DIM);
      while (element <= INSERTS - 64 && epoch < EPOCHS_MAX - 2) {
        const E = epoch + 1;
        const inserted: [number, number][] = [];
        const removed: number[] = []; // elements
        const n = 10 + Math.floor(random() * 40);
        for (let j = 0; j < n; j++, element++) inserted.push([element, g.insert(element, row(element), E)]);
        for (let j = 0; j < n / 4 && live.length > 100; j++) {
          const at = Math.floor(random() * live.length);
          const e = live[at]!;
          g.remove(pointOf.get(e)!, E);
          removed.push(e);
          live[at] = live[live.length - 1]!;
          live.pop();
        }
        if (random() < 0.1) {
          // Rollback: the batch never happened (its epoch is used again by the next batch).
          rollbacks++;
          for (const [, p] of inserted) g.undoInsert(p);
          for (const e of removed) { g.undoRemove(pointOf.get(e)!); live.push(e); }
          continue;
        }
        for (const [e, p] of inserted) { pointOf.set(e, p); created[e] = E; live.push(e); }
        for (const e of removed) { deleted[e] = E; removes++; }
        liveAt[E] = live.length;
        epoch = E;
        Atomics.store(control, 0, E);
        if (epoch % 60 === 0) {
          cuts++;
          exporter.postMessage({ pointsAtCut: g.pointCount(), cutEpoch: epoch });
        }
        await new Promise((r) => setImmediate(r));
      }
      Atomics.store(control, 1, 1);
      const results = await Promise.all(readerResults);
      while (exports.length < cuts) await new Promise((r) => setTimeout(r, 5));
      exporter.postMessage({ pointsAtCut: -1, cutEpoch: 0 });
      await Promise.all([...readers, exporter].map((w) => w.terminate()));

      if (process.env.VECTOR_TEST_VERBOSE) console.log(JSON.stringify({ results, rollbacks, removes, cuts, epoch, element }));
      for (const r of results) {
        expect(r.violations, `${r.errors} errors`).toEqual([]);
        expect(r.searches).toBeGreaterThan(100);
        expect(r.epochs).toBeGreaterThan(20);
      }
      expect(rollbacks).toBeGreaterThan(0);
      expect(removes).toBeGreaterThan(0);

      // Each export imports to the state at its cut: exact results and counts at every
      // snapshot up to the cut equal the live graph's now (later batches only add points
      // created after the cut and removals after it).
      expect(exports.length).toBe(cuts);
      const el = [new Uint32Array(20), new Uint32Array(20)], d = [new Float32Array(20), new Float32Array(20)];
      const queries = new Float32Array(queriesSab);
      for (const x of exports) {
        const h = importGraph(VectorMemory.create(), joinChunks(x.chunks));
        expect(h.pointCount()).toBe(x.pointsAtCut);
        for (const S of [1, Math.max(1, x.cutEpoch >> 1), x.cutEpoch]) {
          expect(h.visibleCount(S), `cut ${x.cutEpoch} at ${S}`).toBe(liveAt[S]);
          for (let qi = 0; qi < 8; qi++) {
            const q = queries.subarray(qi * DIM, (qi + 1) * DIM);
            const a = g.searchExact(q, 20, S, el[0]!, d[0]!), b = h.searchExact(q, 20, S, el[1]!, d[1]!);
            expect([b, ...el[1]!.subarray(0, b), ...d[1]!.subarray(0, b)]).toEqual([a, ...el[0]!.subarray(0, a), ...d[0]!.subarray(0, a)]);
          }
        }
      }
    }, 120_000);
  }
});
