// The vector engine (src/vector/): kernels against their JS twins, recall against exact
// brute force, exact search, visibility at snapshots, export / import.
import { afterEach, describe, expect, it } from 'vitest';
import { mixture } from '../bench/vector-data.js';
import { rng } from '../bench/seeded-random.js';
import { exportGraph, importGraph, joinChunks, setVectorKernel, vectorDistance, VectorGraph, VectorMemory, type Metric } from '../src/vector/index.js';
import { kernelsFor, vectorKernelsOn } from '../src/vector/kernel.js';
import { compactWords, METRIC_COSINE, R_Q_STEP, R_SQUARES, W_RANKED, W_RECORD } from '../src/vector/layout.js';
import { compactAt, recordAt } from '../src/vector/graph.js';
import { ElementPoints } from '../src/index/vector-elements.js';
import { SvcError } from '../src/protocol/errors.js';

const METRICS: Metric[] = ['cosine', 'euclidean', 'manhattan'];
const kernelDefault = vectorKernelsOn();
afterEach(() => setVectorKernel(kernelDefault));

const row = (data: Float32Array, dim: number, i: number): Float32Array => data.subarray(i * dim, (i + 1) * dim);

/** Brute force in plain JS over vectorDistance: (distance, element) ascending, first k. */
function bruteForce(metric: Metric, data: Float32Array, dim: number, visible: (i: number) => boolean, element: (i: number) => number, q: Float32Array, k: number): { elements: number[]; distances: number[] } {
  const all: [number, number][] = [];
  for (let i = 0; i < data.length / dim; i++) if (visible(i)) all.push([vectorDistance(metric, q, row(data, dim, i)), element(i)]);
  all.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const top = all.slice(0, k);
  return { elements: top.map((x) => x[1]), distances: top.map((x) => x[0]) };
}

function build(metric: Metric, data: Float32Array, dim: number, epochOf: (i: number) => number = () => 1, options: { connections?: number; efConstruction?: number } = {}): { vm: VectorMemory; g: VectorGraph } {
  const vm = VectorMemory.create();
  const g = VectorGraph.create(vm, { dimension: dim, metric, ...options });
  for (let i = 0; i < data.length / dim; i++) {
    expect(g.insert(1000 + i, row(data, dim, i), epochOf(i))).toBe(i);
  }
  return { vm, g };
}

describe('vector distance kernels', () => {
  it('the WASM kernels and the JS twins give bit-identical distances and norms for every metric', () => {
    const next = rng(7);
    for (const dim of [1, 3, 4, 7, 15, 16, 17, 31, 33, 48, 128, 129]) {
      for (const metric of METRICS) {
        const data = new Float32Array(40 * dim);
        // Mixed magnitudes so that summation order matters.
        for (let i = 0; i < data.length; i++) data[i] = (next() - 0.5) * 10 ** Math.floor(next() * 6 - 2);
        const results: Float32Array[] = [];
        for (const on of [true, false]) {
          setVectorKernel(on);
          const { g } = build(metric, data, dim, () => 1, { efConstruction: 16 });
          const out = new Float32Array(40), el = new Uint32Array(40);
          const all = new Float32Array(40 * 40);
          for (let i = 0; i < 40; i++) {
            expect(g.searchExact(row(data, dim, i), 40, 1, el, out)).toBe(40);
            // Put back in element order to compare against vectorDistance.
            for (let j = 0; j < 40; j++) all[i * 40 + el[j]! - 1000] = out[j]!;
          }
          results.push(all);
        }
        const bits = results.map((r) => new Uint32Array(r.buffer));
        for (let i = 0; i < 40; i++) for (let j = 0; j < 40; j++) {
          const expected = Math.fround(vectorDistance(metric, row(data, dim, i), row(data, dim, j)));
          expect(results[0]![i * 40 + j], `${metric} dim ${dim} pair ${i},${j}`).toBe(expected);
        }
        expect(bits[0], `${metric} dim ${dim}: kernel vs twin`).toEqual(bits[1]);
      }
    }
  });

  it('each kernel entry point equals its twin bit for bit on random vectors (dimensions 1, 3, 7, 128, 129)', () => {
    const next = rng(99);
    const vm = VectorMemory.create();
    for (const dim of [1, 2, 3, 5, 7, 8, 12, 16, 19, 64, 127, 128, 129, 300]) {
      const pairs = 200;
      const a = vm.allocateWords(dim * pairs), b = vm.allocateWords(dim * pairs);
      for (let i = 0; i < dim * pairs; i++) {
        // One pair in 8 has components whose squares overflow or vanish in f32 (cosine in f64).
        const wide = Math.floor(i / dim) % 8 === 7 ? 10 ** Math.floor(next() * 60 - 30) : 1;
        vm.f32[a + i] = (next() - 0.5) * 10 ** Math.floor(next() * 8 - 4) * wide;
        vm.f32[b + i] = (next() - 0.5) * 10 ** Math.floor(next() * 8 - 4) * wide;
      }
      for (let metric = 0; metric < 3; metric++) {
        for (let i = 0; i < pairs; i++) {
          const x = a + i * dim, y = b + i * dim;
          const wasm = kernelsFor(vm, true), twin = kernelsFor(vm, false);
          const nx = wasm.norm(x, dim), ny = wasm.norm(y, dim);
          expect(nx, `norm dim ${dim}`).toBe(twin.norm(x, dim));
          const dw = wasm.distance(metric, x, nx, y, ny, dim);
          expect(dw, `metric ${metric} dim ${dim} pair ${i}`).toBe(twin.distance(metric, x, nx, y, ny, dim));
          const arrays = [vm.f32.slice(x, x + dim), vm.f32.slice(y, y + dim)] as const;
          expect(dw).toBe(vectorDistance((['cosine', 'euclidean', 'manhattan'] as const)[metric]!, ...arrays));
          if (metric === METRIC_COSINE) expect(dw >= 0 && dw <= 1).toBe(true);
        }
      }
    }
  });

  it('insert and search on the kernels build the same graph and find the same results as the twins', () => {
    const dim = 24;
    const spec = { dimension: dim, clusters: 10, spread: 1.5, seed: 21 };
    const data = mixture(spec, 3000, 22), queries = mixture(spec, 50, 23);
    for (const metric of METRICS) {
      const images: Uint8Array[] = [];
      const found: number[][] = [];
      for (const on of [true, false]) {
        setVectorKernel(on);
        const { vm, g } = build(metric, data, dim, (i) => 1 + (i % 3), { efConstruction: 40 });
        for (let i = 0; i < 3000; i += 13) g.remove(i, 3);
        images.push(joinChunks(exportGraph(vm, g.root, g.pointCount(), 10)));
        // The int8 copies (left out of exports) too: the bound words and the bytes.
        const compact: number[] = [];
        for (let p = 0; p < g.pointCount(); p++) {
          const rec = recordAt(vm.u32, g.root, p), at = compactAt(vm.u32, g.root, p);
          compact.push(...vm.u32.subarray(rec + R_Q_STEP, rec + R_SQUARES + 1), ...vm.u32.subarray(at, at + compactWords(dim)));
        }
        images.push(new Uint8Array(Uint32Array.from(compact).buffer));
        const el = new Uint32Array(10), d = new Float32Array(10), all: number[] = [];
        for (let qi = 0; qi < 50; qi++) {
          for (const snapshot of [1, 2, 3]) {
            const n = g.search(row(queries, dim, qi), 10, 16 + qi, snapshot, el, d);
            all.push(n, ...el.subarray(0, n), ...new Uint32Array(d.buffer, 0, n));
          }
        }
        found.push(all);
      }
      expect(images[0]!.length, metric).toBe(images[2]!.length);
      expect(Buffer.compare(images[0]!, images[2]!), `${metric}: graphs built on the kernels and on the twins differ`).toBe(0);
      expect(images[1]!.some((w) => w !== 0), metric).toBe(true);
      expect(Buffer.compare(images[1]!, images[3]!), `${metric}: int8 copies written by the kernels and by the twins differ`).toBe(0);
      expect(found[0], metric).toEqual(found[1]);
    }
  });

  it('cosine is right where f32 squares overflow (components past ~1.8e19) or vanish (below ~1e-19), on the kernels and the twins alike', () => {
    const cases: [number[], number[], number][] = [
      [[1e30, 1, 1], [1, 0, 0], 0],
      [[1e20, 0, 0], [1, 0, 0], 0],
      [[3e19, 3e19, 0], [1, 0, 0], Math.fround((1 - Math.SQRT1_2) / 2)],
      [[-1e38, 0, 0], [1e38, 0, 0], 1],
      [[1e-30, 0, 0], [0, 1e-30, 0], 0.5],
      [[1e-30, 1e-30, 0], [2, 0, 0], Math.fround((1 - Math.SQRT1_2) / 2)],
      [[1e-40, 0, 0], [1e30, 0, 0], 0],
    ];
    const vm = VectorMemory.create();
    const x = vm.allocateWords(3), y = vm.allocateWords(3);
    for (const [a, b, expected] of cases) {
      const arrays = [new Float32Array(a), new Float32Array(b)] as const;
      expect(vectorDistance('cosine', ...arrays), `${a} vs ${b}`).toBeCloseTo(expected, 6);
      vm.f32.set(arrays[0], x);
      vm.f32.set(arrays[1], y);
      const wasm = kernelsFor(vm, true), twin = kernelsFor(vm, false);
      const nx = wasm.norm(x, 3), ny = wasm.norm(y, 3);
      expect(wasm.distance(METRIC_COSINE, x, nx, y, ny, 3), `${a} vs ${b}`).toBe(vectorDistance('cosine', ...arrays));
      expect(twin.distance(METRIC_COSINE, x, nx, y, ny, 3), `${a} vs ${b}`).toBe(vectorDistance('cosine', ...arrays));
    }
  });

  it('vectorDistance follows §7.4 on small exact cases', () => {
    const a = new Float32Array([1, 0, 0]), b = new Float32Array([0, 1, 0]), c = new Float32Array([-2, 0, 0]);
    expect(vectorDistance('cosine', a, a)).toBe(0);
    expect(vectorDistance('cosine', a, b)).toBe(0.5);
    expect(vectorDistance('cosine', a, c)).toBe(1);
    expect(vectorDistance('euclidean', a, c)).toBe(9);
    expect(vectorDistance('manhattan', b, c)).toBe(3);
  });
});

describe('vector search', () => {
  const dim = 32;
  const spec = { dimension: dim, clusters: 20, spread: 1.5, seed: 11 };
  const data = mixture(spec, 6000, 1);
  const queries = mixture(spec, 100, 2);

  for (const metric of METRICS) {
    it(`recall@10 >= 0.95 against brute force (${metric}, 6000 x 32 Gaussian mixture, queries not in the data)`, () => {
      const { g } = build(metric, data, dim);
      const el = new Uint32Array(10), d = new Float32Array(10);
      let hits = 0;
      for (let qi = 0; qi < 100; qi++) {
        const q = row(queries, dim, qi);
        const truth = bruteForce(metric, data, dim, () => true, (i) => 1000 + i, q, 10);
        const n = g.search(q, 10, 64, 1, el, d);
        expect(n).toBe(10);
        const set = new Set(truth.elements);
        for (let i = 0; i < n; i++) if (set.has(el[i]!)) hits++;
        // Results are sorted by (distance, element) and carry their true distances.
        for (let i = 0; i < n; i++) {
          expect(d[i]).toBe(vectorDistance(metric, q, row(data, dim, el[i]! - 1000)));
          if (i > 0) expect(d[i - 1]! < d[i]! || (d[i - 1] === d[i] && el[i - 1]! < el[i]!)).toBe(true);
        }
      }
      expect(hits / 1000).toBeGreaterThanOrEqual(0.95);
    });
  }

  it('searchExact equals brute force exactly (order and distances)', () => {
    const { g } = build('euclidean', data.subarray(0, 2000 * dim), dim);
    const el = new Uint32Array(50), d = new Float32Array(50);
    for (let qi = 0; qi < 20; qi++) {
      const q = row(queries, dim, qi);
      const truth = bruteForce('euclidean', data.subarray(0, 2000 * dim), dim, () => true, (i) => 1000 + i, q, 50);
      expect(g.searchExact(q, 50, 1, el, d)).toBe(50);
      expect([...el]).toEqual(truth.elements);
      expect([...d]).toEqual(truth.distances);
    }
  });
});

describe('vector visibility', () => {
  it('points are visible from their created epoch until their deleted epoch; undone inserts never; undone removes again', () => {
    const dim = 8;
    const data = mixture({ dimension: dim, clusters: 4, spread: 2, seed: 3 }, 300, 4);
    // Point i created at epoch 1 + (i % 5).
    const { g } = build('euclidean', data, dim, (i) => 1 + (i % 5));
    for (let i = 0; i < 300; i += 7) g.remove(i, 4);
    g.undoInsert(1);
    g.undoInsert(2);
    g.remove(3, 6);
    g.undoRemove(3);
    const visibleAt = (s: number) => (i: number): boolean => i !== 1 && i !== 2 && 1 + (i % 5) <= s && (i % 7 !== 0 || s < 4);
    const el = new Uint32Array(300), d = new Float32Array(300);
    const q = row(data, dim, 5);
    for (let s = 0; s <= 7; s++) {
      const expected = bruteForce('euclidean', data, dim, visibleAt(s), (i) => 1000 + i, q, 300);
      expect(g.visibleCount(s), `snapshot ${s}`).toBe(expected.elements.length);
      const n = g.searchExact(q, 300, s, el, d);
      expect([...el.subarray(0, n)], `exact at ${s}`).toEqual(expected.elements);
      // The approximate search with ef = all points finds the same.
      const m = g.search(q, 300, 300, s, el, d);
      expect([...el.subarray(0, m)], `approximate at ${s}`).toEqual(expected.elements);
    }
    const seen: number[] = [];
    g.forEachPoint((p, element, created, deleted) => { if (p < 4) seen.push(element, created, deleted); });
    expect(seen).toEqual([1000, 1, 4, 1001, 0xffffffff, 0, 1002, 0xffffffff, 0, 1003, 4, 0]);
  });
});

describe('vector export', () => {
  it('an import of an export equals the graph (exact and approximate results), and corrupt images are refused', () => {
    const dim = 16;
    const data = mixture({ dimension: dim, clusters: 8, spread: 2, seed: 5 }, 1500, 6);
    const { vm, g } = build('cosine', data, dim, (i) => 1 + (i >> 8));
    for (let i = 0; i < 1500; i += 11) g.remove(i, 3);
    const bytes = joinChunks(exportGraph(vm, g.root, g.pointCount(), 10));
    const h = importGraph(VectorMemory.create(), bytes);
    expect(h.pointCount()).toBe(1500);
    const queries = mixture({ dimension: dim, clusters: 8, spread: 2, seed: 5 }, 20, 7);
    const a = new Uint32Array(20), ad = new Float32Array(20), b = new Uint32Array(20), bd = new Float32Array(20);
    for (let qi = 0; qi < 20; qi++) {
      for (const s of [2, 4, 10]) {
        const q = row(queries, dim, qi);
        expect(h.searchExact(q, 20, s, b, bd)).toBe(g.searchExact(q, 20, s, a, ad));
        expect([...b, ...bd]).toEqual([...a, ...ad]);
        expect(h.search(q, 20, 40, s, b, bd)).toBe(g.search(q, 20, 40, s, a, ad));
        expect([...b, ...bd]).toEqual([...a, ...ad]);
      }
    }
    for (const at of [0, 4, 8, 200, bytes.length - 1]) {
      const bad = bytes.slice();
      bad[at]! ^= 0x40;
      expect(() => importGraph(VectorMemory.create(), bad), `flipped byte ${at}`).toThrow(SvcError);
    }
    expect(() => importGraph(VectorMemory.create(), bytes.subarray(0, bytes.length - 8))).toThrow(/corrupt/);
  });
});

describe('vector graph edges', () => {
  it('elementOf and readVector read points back', () => {
    const dim = 13;
    const data = mixture({ dimension: dim, clusters: 3, spread: 2, seed: 8 }, 5000, 9);
    for (const metric of METRICS) {
      const { g } = build(metric, data, dim, () => 1, { efConstruction: 16 });
      expect(g.elementOf(4999)).toBe(5999);
      const v = new Float32Array(dim);
      g.readVector(4242, v);
      expect([...v]).toEqual([...row(data, dim, 4242)]);
      expect(() => g.readVector(5000, v)).toThrow(/no vector point/);
    }
  });

  it('withinTop() ranks exactly the given elements whose point in the graph is visible, ties by ID; the rest go to their records', () => {
    const dim = 37;
    // Every 10th row repeats the one before it: equal distances, ranked by element ID.
    const base = mixture({ dimension: dim, clusters: 4, spread: 1, seed: 21 }, 3000, 5);
    for (let i = 10; i < 3000; i += 10) base.copyWithin(i * dim, (i - 1) * dim, i * dim);
    const other = mixture({ dimension: dim, clusters: 2, spread: 1, seed: 22 }, 200, 6);
    const next = rng(31);
    for (const metric of METRICS) {
      const results: string[] = [];
      // Candidates: a shuffle of most elements, the other graph's, and unknown IDs.
      const ids = [...Array.from({ length: 3000 }, (_, i) => 1000 + i).filter((id) => id % 4 !== 1), ...Array.from({ length: 200 }, (_, i) => 9000 + i), 5, 7, 70_000];
      for (let i = ids.length - 1; i > 0; i--) { const j = Math.floor(next() * (i + 1)); [ids[i], ids[j]] = [ids[j]!, ids[i]!]; }
      for (const on of [true, false]) {
        setVectorKernel(on);
        const { vm, g } = build(metric, base, dim, (i) => 1 + (i % 3), { efConstruction: 16 });
        const elsewhere = VectorGraph.create(vm, { dimension: dim, metric, efConstruction: 16 });
        const map = ElementPoints.create(vm);
        for (let i = 0; i < 3000; i++) if (i % 50 !== 7) map.set(1000 + i, i, g.root); // some elements not in the map
        for (let i = 0; i < 200; i++) map.set(9000 + i, elsewhere.insert(9000 + i, row(other, dim, i), 1), elsewhere.root);
        for (let p = 0; p < 3000; p += 13) g.remove(p, 3);
        const idArray = Uint32Array.from(ids);
        const status = new Uint32Array(ids.length);
        for (const [snapshot, k] of [[2, 10], [4, 1], [4, 100], [3, 5000]] as const) {
          const q = row(base, dim, 500).map((x, i) => x + (i % 2 === 0 ? 0.5 : -0.25));
          const positions = new Uint32Array(k), distances = new Float32Array(k);
          const found = g.withinTop(q, map.root, idArray, ids.length, snapshot, k, status, positions, distances);
          const ranked: [number, number][] = [];
          ids.forEach((id, c) => {
            const point = id - 1000;
            const visible = id >= 1000 && id < 4000 && point % 50 !== 7 && 1 + (point % 3) <= snapshot && !(point % 13 === 0 && snapshot >= 3);
            expect(status[c], `${metric} ${on} ${id} @${snapshot}`).toBe(visible ? W_RANKED : W_RECORD);
            if (visible) ranked.push([vectorDistance(metric, q, row(base, dim, point)), id]);
          });
          ranked.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
          const want = ranked.slice(0, k);
          expect(found).toBe(want.length);
          expect(Array.from({ length: found }, (_, j) => [distances[j], ids[positions[j]!]])).toEqual(want);
          results.push(`${found}:${[...positions.subarray(0, found)]}:${[...distances.subarray(0, found)]}`);
        }
      }
      // The kernel and its twin give the same positions and the same bits.
      expect(results.slice(0, 4).join() === results.slice(4).join(), metric).toBe(true);
    }
  });

  it("withinTop()'s int8 bound skips no point of the top k: near-duplicate vectors whose differences are below the int8 step", () => {
    const next = rng(47);
    for (const metric of ['euclidean', 'cosine'] as const) {
      for (const dim of [64, 37, 3072]) {
        // Every point is the base plus noise under half of its int8 step: the int8 copies
        // are (nearly) equal, so only the bound's error terms keep the nearest ones.
        const base = Float32Array.from({ length: dim }, () => next() * 2 - 1);
        const step = Math.max(...base.map(Math.abs)) / 127;
        const n = 400;
        const data = new Float32Array(n * dim);
        for (let i = 0; i < n; i++) for (let j = 0; j < dim; j++) data[i * dim + j] = base[j]! + (next() - 0.5) * 0.9 * step;
        const { vm, g } = build(metric, data, dim);
        const map = ElementPoints.create(vm);
        for (let i = 0; i < n; i++) map.set(1000 + i, i, g.root);
        const ids = Uint32Array.from({ length: n }, (_, i) => 1000 + i);
        const status = new Uint32Array(n);
        for (const k of [1, 5, 20]) {
          const q = base.map((x) => x + (next() - 0.5) * 4 * step);
          const positions = new Uint32Array(k), distances = new Float32Array(k);
          const found = g.withinTop(q, map.root, ids, n, 1, k, status, positions, distances);
          const want = bruteForce(metric, data, dim, () => true, (i) => 1000 + i, q, k);
          expect({ elements: [...positions.subarray(0, found)].map((p) => ids[p]!), distances: [...distances.subarray(0, found)] }, `${metric} ${dim} k=${k}`).toEqual(want);
        }
      }
    }
  });

  it('empty and tiny graphs: no results from nothing, k beyond the visible points, ef below k, snapshot 0; a one-point graph costs under 1 KiB', () => {
    const vm = VectorMemory.create();
    const before = vm.usedBytes();
    const g = VectorGraph.create(vm, { dimension: 8, metric: 'cosine' });
    const el = new Uint32Array(5), d = new Float32Array(5);
    const q = new Float32Array([1, 0, 0, 0, 0, 0, 0, 0]);
    expect(g.search(q, 5, 10, 1, el, d)).toBe(0);
    expect(g.searchExact(q, 5, 1, el, d)).toBe(0);
    g.insert(7, new Float32Array([0, 1, 0, 0, 0, 0, 0, 0]), 2);
    expect(vm.usedBytes() - before).toBeLessThan(1024);
    expect(g.search(q, 5, 10, 1, el, d)).toBe(0); // not yet created at snapshot 1
    expect(g.search(q, 5, 1, 2, el, d)).toBe(1);
    expect([el[0], d[0]]).toEqual([7, 0.5]);
    g.insert(3, new Float32Array([1, 1, 0, 0, 0, 0, 0, 0]), 2);
    g.insert(9, new Float32Array([-1, 0, 0, 0, 0, 0, 0, 0]), 3);
    expect(g.search(q, 5, 1, 3, el, d)).toBe(3);
    expect([...el.subarray(0, 3)]).toEqual([3, 7, 9]);
    expect(d[2]).toBe(1);
    expect(g.search(q, 5, 64, 0, el, d)).toBe(0);
    expect(g.visibleCount(2)).toBe(2);
  });

  it('blocks() names every block of a graph: freed, they are reused by the next graph of the same shape', () => {
    const vm = VectorMemory.create();
    const data = mixture({ dimension: 20, clusters: 3, spread: 2, seed: 10 }, 700, 11);
    const make = (): VectorGraph => {
      const g = VectorGraph.create(vm, { dimension: 20, metric: 'manhattan', seed: 5 });
      for (let i = 0; i < 700; i++) g.insert(i, row(data, 20, i), 1);
      return g;
    };
    const g = make();
    // The scratch is reserved by now too; what the graph holds is exactly its blocks.
    const held = vm.usedBytes();
    const blocks = g.blocks();
    const words = blocks.reduce((n, [, w]) => n + ((w + 15) & ~15), 0);
    for (const [at, w] of blocks) vm.freeWords(at, w);
    expect(held - vm.usedBytes()).toBe(words * 4);
    const h = make();
    expect(vm.usedBytes()).toBe(held);
    const el = new Uint32Array(3), d = new Float32Array(3);
    expect(h.searchExact(row(data, 20, 5), 3, 1, el, d)).toBe(3);
    expect(el[0]).toBe(5);
  });
});

describe('vector memory limits', () => {
  it('a full vector memory refuses an insert with storage_error and leaves the graph as it was', () => {
    const vm = VectorMemory.create(40); // 2.5 MiB
    const g = VectorGraph.create(vm, { dimension: 64, metric: 'euclidean', efConstruction: 32 });
    const data = mixture({ dimension: 64, clusters: 5, spread: 2, seed: 12 }, 6000, 13);
    let inserted = 0;
    let error: unknown = null;
    try {
      for (; inserted < 6000; inserted++) g.insert(inserted, row(data, 64, inserted), 1);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(SvcError);
    expect((error as SvcError).code).toBe('storage_error');
    expect(inserted).toBeGreaterThan(500);
    expect(g.pointCount()).toBe(inserted);
    const el = new Uint32Array(10), d = new Float32Array(10);
    for (const i of [0, inserted >> 1, inserted - 1]) {
      expect(g.searchExact(row(data, 64, i), 10, 1, el, d)).toBe(10);
      expect([el[0], d[0]]).toEqual([i, 0]);
      expect(g.search(row(data, 64, i), 10, 64, 1, el, d)).toBe(10);
      expect(el[0]).toBe(i);
    }
    // Still full, still consistent.
    expect(() => g.insert(inserted, row(data, 64, inserted), 2)).toThrow(/vector memory full/);
    expect(g.pointCount()).toBe(inserted);
  });
});

describe('vector export cut', () => {
  it('points created after the cut epoch are never visible in the image, removals after it are undone, and the rest is as at the cut', () => {
    const dim = 10;
    const data = mixture({ dimension: dim, clusters: 4, spread: 2, seed: 14 }, 900, 15);
    // Point i created at epoch 1 + floor(i / 100): epochs 1..9.
    const { vm, g } = build('manhattan', data, dim, (i) => 1 + Math.floor(i / 100));
    for (let i = 0; i < 900; i += 9) g.remove(i, 2 + (i % 8)); // removals at epochs 2..9
    g.undoInsert(5);
    const cut = 5;
    const h = importGraph(VectorMemory.create(), joinChunks(exportGraph(vm, g.root, 900, cut)));
    const seen: [number, number, number][] = [];
    h.forEachPoint((p, element, created, deleted) => { seen.push([element, created, deleted]); });
    g.forEachPoint((p, element, created, deleted) => {
      const [e, c, d] = seen[p]!;
      expect(e).toBe(element);
      expect(c, `created of ${p}`).toBe(created === 0xffffffff || created > cut ? 0xffffffff : created);
      expect(d, `deleted of ${p}`).toBe(deleted > cut ? 0 : deleted);
    });
    const el = [new Uint32Array(30), new Uint32Array(30)], d = [new Float32Array(30), new Float32Array(30)];
    for (let S = 0; S <= 9; S++) {
      const q = row(data, dim, 300 + S);
      const a = g.searchExact(q, 30, Math.min(S, cut), el[0]!, d[0]!), b = h.searchExact(q, 30, S, el[1]!, d[1]!);
      // At or after the cut the image holds the cut's state; before it, the same as the graph.
      expect([b, ...el[1]!.subarray(0, b)], `snapshot ${S}`).toEqual([a, ...el[0]!.subarray(0, a)]);
    }
  });

  it('SVCDB_VECTOR_KERNEL=js starts the engine on the JS twins', async () => {
    const { spawnSync } = await import('node:child_process');
    const script = "import('./dist/src/vector/kernel.js').then((k) => console.log(k.vectorKernelsOn()))";
    const on = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, SVCDB_VECTOR_KERNEL: '' } });
    const off = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, SVCDB_VECTOR_KERNEL: 'js' } });
    expect([on.stdout.trim(), off.stdout.trim()]).toEqual(['true', 'false']);
  });
});

describe('vector import validation', () => {
  it('an image with any word changed (and its checksum fixed) imports as a searchable graph or fails with storage_error, never otherwise', async () => {
    const { crc32 } = await import('node:zlib');
    const dim = 6;
    const data = mixture({ dimension: dim, clusters: 3, spread: 2, seed: 19 }, 400, 20);
    const { vm, g } = build('cosine', data, dim, (i) => 1 + (i % 4), { efConstruction: 24 });
    const image = joinChunks(exportGraph(vm, g.root, 400, 9));
    const words = image.length / 4 - 1;
    const next = rng(21);
    const el = new Uint32Array(5), d = new Float32Array(5);
    let refused = 0, loaded = 0;
    for (let round = 0; round < 400; round++) {
      const bad = image.slice();
      const view = new DataView(bad.buffer);
      // Header words often, the rest at random; values: small changes, huge values, zero.
      const at = round % 3 === 0 ? Math.floor(next() * 16) : Math.floor(next() * words);
      const old = view.getUint32(at * 4, true);
      const choice = Math.floor(next() * 4);
      const value = choice === 0 ? old + 1 : choice === 1 ? old - 1 : choice === 2 ? 0xffffffff - Math.floor(next() * 100) : Math.floor(next() * 1000);
      view.setUint32(at * 4, value >>> 0, true);
      view.setUint32(bad.length - 4, crc32(bad.subarray(0, bad.length - 4)), true);
      try {
        const h = importGraph(VectorMemory.create(), bad);
        loaded++;
        h.search(row(data, dim, round % 400), 5, 32, 4, el, d);
        h.searchExact(row(data, dim, round % 400), 5, 4, el, d);
      } catch (e) {
        expect(e, `word ${at} set to ${value >>> 0}: ${String(e)}`).toBeInstanceOf(SvcError);
        expect((e as SvcError).code).toBe('storage_error');
        refused++;
      }
    }
    expect(refused).toBeGreaterThan(50);
    expect(loaded).toBeGreaterThan(50);
  });
});

describe('vector scratch', () => {
  it('a scratch request past the per-thread bound fails with storage_error and leaves every region consistent', async () => {
    const { ScratchSpace } = await import('../src/vector/scratch.js');
    const L = await import('../src/vector/layout.js');
    const vm = VectorMemory.create();
    const s = new ScratchSpace(vm, 80 * 1024);
    const h = s.ensure(1000, 10, 8, 33);
    // 5000 points take 8192 words of marks and 16384 of candidates: with ~4.4k words held,
    // the marks fit the 20k-word bound, the candidates do not.
    expect(() => s.ensure(5000, 10, 8, 33)).toThrow(expect.objectContaining({ code: 'storage_error' }));
    const u = vm.u32;
    expect(u[h + L.S_VISITED_CAP]).toBeGreaterThanOrEqual(1000);
    expect(u[h + L.S_CAND_CAP]).toBe(u[h + L.S_VISITED_CAP]);
    expect(s.ensure(2000, 10, 8, 33)).toBe(h);
    expect(vm.u32[h + L.S_CAND_CAP]).toBe(vm.u32[h + L.S_VISITED_CAP]);
    expect(vm.u32[h + L.S_VISITED_CAP]).toBeGreaterThanOrEqual(2000);
  });
});
