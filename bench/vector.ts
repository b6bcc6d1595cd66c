// `npm run bench -- vector [--quick]`: the vector engine against hnswlib-node and usearch
// (issue 11 item 6), in one process, single thread, on the same data:
//   data     N x D f32 (default 100k x 128) from a seeded Gaussian mixture (bench/vector-data.ts),
//            Q queries (default 1000) drawn from the same mixture with another seed;
//   truth    exact top-10 by our searchExact (squared euclidean);
//   build    time to insert every vector one by one (ours: M 16, our default
//            efConstruction; hnswlib-node: M 16, efConstruction 200; usearch: connectivity
//            16, its default expansion_add 128, threads 1), RSS growth over the build, and
//            for ours the vector memory's used bytes;
//   search   recall@10 and QPS for ef in 16, 32, 64, 96, 128, 256, the libraries alternating
//            per ef for R rounds (best round kept), one query at a time, k = 10.
// Times are this process's CPU time (process.cpuUsage: user + system), not wall time: the
// machine is shared, and CPU time does not count the time other processes took the core
// (every library runs single-threaded, so CPU time is its time); wall times are in the JSON.
// Ratios are ours / peer from the same run. Results go to dist/bench/vector.json.
// Options: --quick (one round, the same data), --n N, --queries Q, --dimension D, --rounds R.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { exportGraph, importGraph, joinChunks, VectorGraph, VectorMemory, setVectorKernel } from '../src/vector/index.js';
import { DEFAULT_EF_CONSTRUCTION } from '../src/vector/graph.js';
import { mixture } from './vector-data.js';
import { fmtMs, fmtOps, fmtRatio, log, table } from './util.js';

const { values: opt } = parseArgs({
  options: {
    vector: { type: 'boolean', default: true },
    quick: { type: 'boolean', default: false },
    n: { type: 'string' },
    queries: { type: 'string' },
    dimension: { type: 'string' },
    rounds: { type: 'string' },
    'ef-construction': { type: 'string' },
  },
  allowPositionals: true,
});
const N = Number(opt.n ?? 100_000);
const Q = Number(opt.queries ?? 1000);
const D = Number(opt.dimension ?? 128);
const ROUNDS = Number(opt.rounds ?? (opt.quick ? 1 : 3));
const EFC = Number(opt['ef-construction'] ?? DEFAULT_EF_CONSTRUCTION);
const K = 10;
const EFS = [16, 32, 64, 96, 128, 256];
const spec = { dimension: D, clusters: 100, spread: 1, seed: 42 };

const require = createRequire(import.meta.url);
interface Hnswlib {
  initIndex(max: number, m: number, efc: number, seed: number): void;
  addPoint(point: number[], label: number): void;
  searchKnn(q: number[], k: number): { neighbors: number[]; distances: number[] };
  setEf(ef: number): void;
}
interface Usearch {
  add(keys: BigUint64Array, vectors: Float32Array, threads: number): void;
  search(q: Float32Array, k: number, threads: number): { keys: BigUint64Array; distances: Float32Array };
  save(path: string): void;
  load(path: string): void;
}
const load = <T>(name: string): T | null => {
  try {
    return require(name) as T;
  } catch (e) {
    log(`(${name} is not installed: ${(e as Error).message.split('\n')[0]}; skipped)`);
    return null;
  }
};
const hnswlib = load<{ HierarchicalNSW: new (space: string, dim: number) => Hnswlib }>('hnswlib-node');
const usearch = load<{ Index: new (config: object) => Usearch }>('usearch');

const rss = (): number => process.memoryUsage().rss / 2 ** 20;
const cpuMs = (): number => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const row = (data: Float32Array, i: number): Float32Array => data.subarray(i * D, (i + 1) * D);

log(`vector benchmark: ${N} x ${D} f32 (Gaussian mixture, ${spec.clusters} clusters), ${Q} queries, k ${K}, ${ROUNDS} round(s), single thread`);
const data = mixture(spec, N, 1);
const queries = mixture(spec, Q, 2);

interface Built { name: string; buildMs: number; buildWallMs: number; rssMiB: number; usedMiB?: number; search: (qi: number, ef: number) => ArrayLike<number> }
const built: Built[] = [];
let recovery: { exportMs: number; importMs: number; bytes: number; chunks: number } | null = null;

// ---- ours
{
  setVectorKernel(true);
  const before = rss();
  const vm = VectorMemory.create();
  const g = VectorGraph.create(vm, { dimension: D, metric: 'euclidean', connections: 16, efConstruction: EFC, seed: 7 });
  const t0 = cpuMs(), w0 = performance.now();
  for (let i = 0; i < N; i++) g.insert(i, row(data, i), 1);
  const buildMs = cpuMs() - t0, buildWallMs = performance.now() - w0;
  const out = new Uint32Array(K), dist = new Float32Array(K);
  built.push({
    name: 'svcdb', buildMs, buildWallMs, rssMiB: rss() - before, usedMiB: vm.usedBytes() / 2 ** 20,
    search: (qi, ef) => { g.search(row(queries, qi), K, ef, 1, out, dist); return out; },
  });
  log(`svcdb: built in ${fmtMs(buildMs)} (efConstruction ${EFC})`);
  // Recovery without a rebuild: export (as a snapshot does) and import into a new memory.
  const e0 = cpuMs();
  const chunks = exportGraph(vm, g.root, g.pointCount(), 1);
  const exportMs = cpuMs() - e0;
  const image = joinChunks(chunks);
  const i0 = cpuMs();
  const restored = importGraph(VectorMemory.create(), image);
  const importMs = cpuMs() - i0;
  if (restored.pointCount() !== N) throw new Error('import lost points');
  recovery = { exportMs, importMs, bytes: image.length, chunks: chunks.length };
  log(`svcdb: export ${fmtMs(exportMs)} (${(image.length / 2 ** 20).toFixed(1)} MiB in ${chunks.length} chunks), import ${fmtMs(importMs)} (no rebuild)`);
  // Ground truth by exact search on the same graph.
  const t1 = cpuMs();
  const truth: Set<number>[] = [];
  for (let qi = 0; qi < Q; qi++) {
    g.searchExact(row(queries, qi), K, 1, out, dist);
    truth.push(new Set(out));
  }
  const exactQps = Q / ((cpuMs() - t1) / 1000);
  log(`exact ground truth: ${fmtOps(exactQps)} QPS (searchExact, WASM SIMD)`);
  (globalThis as { truth?: Set<number>[]; exactQps?: number }).truth = truth;
  (globalThis as { exactQps?: number }).exactQps = exactQps;
  // The JS twins, for the record (the kernels stay only because they win).
  setVectorKernel(false);
  const tq = Math.min(Q, 200);
  const t2 = cpuMs();
  for (let qi = 0; qi < tq; qi++) g.search(row(queries, qi), K, 64, 1, out, dist);
  (globalThis as { twinQps?: number }).twinQps = tq / ((cpuMs() - t2) / 1000);
  setVectorKernel(true);
}
const truth = (globalThis as { truth?: Set<number>[] }).truth!;

// ---- hnswlib-node
if (hnswlib !== null) {
  const before = rss();
  const h = new hnswlib.HierarchicalNSW('l2', D);
  h.initIndex(N, 16, 200, 100);
  const t0 = cpuMs(), w0 = performance.now();
  for (let i = 0; i < N; i++) h.addPoint(Array.from(row(data, i)), i);
  const buildMs = cpuMs() - t0, buildWallMs = performance.now() - w0;
  const qs = Array.from({ length: Q }, (_, qi) => Array.from(row(queries, qi)));
  let efNow = -1;
  built.push({
    name: 'hnswlib-node', buildMs, buildWallMs, rssMiB: rss() - before,
    search: (qi, ef) => {
      if (ef !== efNow) { h.setEf(ef); efNow = ef; }
      return h.searchKnn(qs[qi]!, K).neighbors;
    },
  });
  log(`hnswlib-node: built in ${fmtMs(buildMs)}`);
}

// ---- usearch
const usearchDir = join(tmpdir(), `svcdb-bench-usearch-${process.pid}`);
if (usearch !== null) {
  const before = rss();
  const config = { dimensions: D, metric: 'l2sq', quantization: 'f32', connectivity: 16, expansion_add: 128, expansion_search: 64, multi: false };
  const u = new usearch.Index(config);
  const keys = new BigUint64Array(1);
  const t0 = cpuMs(), w0 = performance.now();
  for (let i = 0; i < N; i++) { keys[0] = BigInt(i); u.add(keys, row(data, i), 1); }
  const buildMs = cpuMs() - t0, buildWallMs = performance.now() - w0;
  const rssMiB = rss() - before;
  // expansion_search is fixed at construction: one copy of the saved index per ef, loaded
  // into memory (load, not view: a memory-mapped view could pay page faults in the timing).
  mkdirSync(usearchDir, { recursive: true });
  const file = join(usearchDir, 'index.usearch');
  u.save(file);
  const views = new Map<number, Usearch>();
  for (const ef of EFS) {
    const v = new usearch.Index({ ...config, expansion_search: ef });
    v.load(file);
    views.set(ef, v);
  }
  const out = new Float64Array(K);
  built.push({
    name: 'usearch', buildMs, buildWallMs, rssMiB,
    search: (qi, ef) => {
      const keysFound = views.get(ef)!.search(row(queries, qi), K, 1).keys;
      for (let i = 0; i < K; i++) out[i] = Number(keysFound[i]);
      return out;
    },
  });
  log(`usearch: built in ${fmtMs(buildMs)}`);
}

// ---- search curves: per ef, every library in turn, ROUNDS times; best QPS kept.
interface Point { ef: number; recall: number; qps: number; wallQps: number }
const curves = new Map<string, Point[]>(built.map((b) => [b.name, []]));
for (const ef of EFS) {
  const best = new Map<string, { qps: number; wallQps: number; recall: number }>();
  for (let r = 0; r < ROUNDS; r++) {
    for (const b of built) {
      let hits = 0;
      const t0 = cpuMs(), w0 = performance.now();
      for (let qi = 0; qi < Q; qi++) {
        const found = b.search(qi, ef);
        const t = truth[qi]!;
        for (let i = 0; i < K; i++) if (t.has(found[i]!)) hits++;
      }
      const qps = Q / ((cpuMs() - t0) / 1000), wallQps = Q / ((performance.now() - w0) / 1000);
      const prev = best.get(b.name);
      if (prev === undefined || qps > prev.qps) best.set(b.name, { qps, wallQps, recall: hits / (Q * K) });
    }
  }
  for (const b of built) curves.get(b.name)!.push({ ef, ...best.get(b.name)! });
}
rmSync(usearchDir, { recursive: true, force: true });

const ours = curves.get('svcdb')!;
const hn = curves.get('hnswlib-node');
const us = curves.get('usearch');
log('');
log(table(
  ['ef', 'svcdb recall', 'svcdb QPS', ...(hn ? ['hnswlib recall', 'hnswlib QPS', 'svcdb/hnswlib'] : []), ...(us ? ['usearch recall', 'usearch QPS', 'svcdb/usearch'] : [])],
  EFS.map((ef, i) => [
    String(ef), ours[i]!.recall.toFixed(4), fmtOps(ours[i]!.qps),
    ...(hn ? [hn[i]!.recall.toFixed(4), fmtOps(hn[i]!.qps), fmtRatio(ours[i]!.qps / hn[i]!.qps)] : []),
    ...(us ? [us[i]!.recall.toFixed(4), fmtOps(us[i]!.qps), fmtRatio(ours[i]!.qps / us[i]!.qps)] : []),
  ]),
));
/** Best QPS among the efs reaching `recall`. */
const atRecall = (curve: Point[], recall: number): number => Math.max(0, ...curve.filter((p) => p.recall >= recall).map((p) => p.qps));
log('');
log(table(['library', 'build (CPU)', 'build / usearch', 'RSS growth', 'vector memory', 'QPS at recall >= 0.99', 'svcdb / it'],
  built.map((b) => {
    const q99 = atRecall(curves.get(b.name)!, 0.99);
    const usBuild = built.find((x) => x.name === 'usearch')?.buildMs;
    return [b.name, fmtMs(b.buildMs), usBuild ? fmtRatio(b.buildMs / usBuild) : 'n/a', `${b.rssMiB.toFixed(0)} MiB`,
      b.usedMiB !== undefined ? `${b.usedMiB.toFixed(1)} MiB` : '', fmtOps(q99), fmtRatio(atRecall(ours, 0.99) / q99)];
  })));
const g = globalThis as { exactQps?: number; twinQps?: number };
log(`exact search (ground truth): ${fmtOps(g.exactQps!)} QPS; svcdb on the JS twins at ef 64: ${fmtOps(g.twinQps!)} QPS (the kernels ${fmtRatio(ours[2]!.qps / g.twinQps!)} faster)`);

const outDir = fileURLToPath(new URL('../bench/', import.meta.url));
mkdirSync(outDir, { recursive: true });
const result = {
  when: new Date().toISOString(), n: N, dimension: D, queries: Q, k: K, rounds: ROUNDS, data: spec, efConstruction: EFC,
  builds: built.map((b) => ({ name: b.name, buildCpuMs: b.buildMs, buildWallMs: b.buildWallMs, rssGrowthMiB: b.rssMiB, vectorMemoryMiB: b.usedMiB })),
  curves: Object.fromEntries(curves), recovery, exactQps: g.exactQps, twinQpsEf64: g.twinQps,
};
writeFileSync(join(outDir, 'vector.json'), `${JSON.stringify(result, null, 2)}\n`);
log(`results: ${join(outDir, 'vector.json')}`);
