// One HNSW graph over points (element ID, f32 vector, created/deleted epochs) in a vector
// memory: one per index partition. The writer inserts and removes while readers on any
// thread search it without locks (docs/vector.md §2, the publish protocol):
//   * A point's record, its neighbour lists and its upper-layer block are written in full,
//     and links to it added to existing points, before G_COUNT is raised past it with
//     Atomics.store. A reader loads G_COUNT once (Atomics.load, an acquire) at the start of
//     a search and ignores every neighbour ID >= it; everything a point < count reaches
//     (chunk pointer, record, upper block) was written before that store and never moves.
//   * G_ENTRY is stored after the count that covers the new entry point and loaded before
//     the count, so a reader's entry is always below its count.
//   * Neighbour lists are rewritten in place when pruned; a reader may read one torn, but
//     every ID ever written to a list is a point ID, and its count is clamped.
//   * created / deleted are overwritten in place only between 0 / NEVER and an epoch no
//     running reader holds, so either value read is right.
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';
import { kernelsFor } from './kernel.js';
import {
  G_CHUNK0, G_CHUNKS, G_COUNT, G_DIM, G_EFC, G_ENTRY, G_HEADER_WORDS, G_M, G_M0, G_MAGIC, G_METRIC, G_RECORD, G_RNG, G_TOP, G_VEC,
  GRAPH_MAGIC, METRIC_COSINE, METRIC_EUCLIDEAN, METRIC_MANHATTAN, NEVER,
  R_CREATED, R_DELETED, R_ELEMENT, R_LEVEL, R_NORM, R_UPPER, recordWords, S_BATCH, S_BATCH_CAP, S_WITHIN_RECORDS, S_OUT, S_QUERY, S_RES, vectorWords, chunkWords, compactWords,
} from './layout.js';
import type { VectorMemory } from './memory.js';

export type Metric = 'cosine' | 'euclidean' | 'manhattan';
export const METRICS: readonly Metric[] = ['cosine', 'euclidean', 'manhattan'];
export const metricCode = (metric: Metric): number =>
  metric === 'cosine' ? METRIC_COSINE : metric === 'euclidean' ? METRIC_EUCLIDEAN : METRIC_MANHATTAN;

export interface VectorGraphOptions {
  dimension: number;
  metric: Metric;
  /** M: links per point on the upper layers; layer 0 keeps 2M. Default 16. */
  connections?: number;
  /** Beam width while inserting. Default DEFAULT_EF_CONSTRUCTION. */
  efConstruction?: number;
  /** Seed of the level draws (deterministic graphs for a given insert sequence). */
  seed?: number;
}

export const DEFAULT_CONNECTIONS = 16;
/** Beam width while inserting: 200 matches hnswlib-node's recall per ef on the benchmark set (128: ef 64 recall 0.981 vs 0.985) at ~0.8x usearch's build time (docs/vector.md §7). */
export const DEFAULT_EF_CONSTRUCTION = 200;

/** Word offset of point p's record header (layout.ts): chunk c = floor(log2(p + 1)); the vector is G_VEC words before it. */
export const recordAt = (u32: Uint32Array, root: number, p: number): number => {
  const c = 31 - Math.clz32(p + 1);
  return u32[root + G_CHUNK0 + c]! + (p + 1 - (1 << c)) * u32[root + G_RECORD]! + u32[root + G_VEC]!;
};

/** Word offset of point p's int8 copy (layout.ts): after its chunk's records, in point order. */
export const compactAt = (u32: Uint32Array, root: number, p: number): number => {
  const c = 31 - Math.clz32(p + 1);
  return u32[root + G_CHUNK0 + c]! + (1 << c) * u32[root + G_RECORD]! + (p + 1 - (1 << c)) * compactWords(u32[root + G_DIM]!);
};

function fail(msg: string): never {
  throw new SvcError('internal_error', `internal error: ${msg}`);
}

export class VectorGraph {
  readonly root: number;
  readonly dimension: number;
  readonly metric: Metric;
  private readonly vm: VectorMemory;
  private readonly m: number;
  private readonly m0: number;
  private readonly efc: number;
  private readonly recordW: number;
  /** How many candidates the last withinTop() left to their records (W_RECORD). */
  recordCandidates = 0;
  private readonly vecOffset: number;
  private readonly levelScale: number;

  private constructor(vm: VectorMemory, root: number) {
    vm.cover();
    const u = vm.u32;
    if (u[root + G_MAGIC] !== GRAPH_MAGIC) fail(`no vector graph at word ${root}`);
    this.vm = vm;
    this.root = root;
    this.dimension = u[root + G_DIM]!;
    this.metric = METRICS[u[root + G_METRIC]!] ?? fail('bad metric');
    this.m = u[root + G_M]!;
    this.m0 = u[root + G_M0]!;
    this.efc = u[root + G_EFC]!;
    this.recordW = u[root + G_RECORD]!;
    this.vecOffset = u[root + G_VEC]!;
    this.levelScale = 1 / Math.log(this.m);
  }

  /** Writer: a new empty graph. */
  static create(memory: VectorMemory, options: VectorGraphOptions): VectorGraph {
    const { dimension, metric } = options;
    const m = options.connections ?? DEFAULT_CONNECTIONS;
    const efc = options.efConstruction ?? DEFAULT_EF_CONSTRUCTION;
    if (!Number.isInteger(dimension) || dimension < 1 || dimension > limits.vectorDimensionMax) {
      throw new SvcError('storage_error', `vector dimension ${dimension} is outside 1..${limits.vectorDimensionMax}`);
    }
    if (!METRICS.includes(metric)) throw new SvcError('storage_error', `unknown vector metric ${String(metric)}`);
    if (!Number.isInteger(m) || m < 2 || m > limits.vectorConnectionsMax) {
      throw new SvcError('storage_error', `vector connections ${m} is outside 2..${limits.vectorConnectionsMax}`);
    }
    if (!Number.isInteger(efc) || efc < 1 || efc > limits.vectorEfConstructionMax) {
      throw new SvcError('storage_error', `vector efConstruction ${efc} is outside 1..${limits.vectorEfConstructionMax}`);
    }
    const root = memory.allocateWords(G_HEADER_WORDS);
    const u = memory.u32;
    const m0 = 2 * m;
    u[root + G_DIM] = dimension;
    u[root + G_METRIC] = metricCode(metric);
    u[root + G_M] = m;
    u[root + G_M0] = m0;
    u[root + G_EFC] = efc;
    u[root + G_RECORD] = recordWords(m0, dimension);
    u[root + G_VEC] = vectorWords(dimension);
    u[root + G_RNG] = ((options.seed ?? 1) >>> 0) || 0x9e3779b9;
    // The magic last: attach() checks it.
    Atomics.store(u, root + G_MAGIC, GRAPH_MAGIC);
    return new VectorGraph(memory, root);
  }

  /** Any thread: the graph at `root`. */
  static attach(memory: VectorMemory, root: number): VectorGraph {
    return new VectorGraph(memory, root);
  }

  /** Points ever inserted (published count). */
  pointCount(): number {
    return Atomics.load(this.vm.u32, this.root + G_COUNT);
  }

  /** Writer: the level of a new point, -ln(u) / ln(M) floored (capped at vectorLevelMax). */
  private drawLevel(): number {
    const u = this.vm.u32;
    let x = u[this.root + G_RNG]!;
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    u[this.root + G_RNG] = x;
    const r = (x + 1) / 4294967297; // in (0, 1)
    return Math.min(limits.vectorLevelMax, Math.floor(-Math.log(r) * this.levelScale));
  }

  /** Writer: insert a point visible from `epoch`; returns its point ID. */
  insert(element: number, vector: Float32Array, epoch: number): number {
    if (vector.length !== this.dimension) fail(`vector of length ${vector.length} for dimension ${this.dimension}`);
    if (!(epoch >= 1 && epoch <= limits.epochMax)) fail(`insert at epoch ${epoch}`);
    const vm = this.vm, root = this.root;
    const p = vm.u32[root + G_COUNT]!;
    if (p >= limits.vectorPointsMax) throw new SvcError('storage_error', `vector index partition is full (${limits.vectorPointsMax} points)`);
    const c = 31 - Math.clz32(p + 1);
    if (c >= vm.u32[root + G_CHUNKS]!) {
      const at = vm.allocateWords(chunkWords(c, this.recordW, this.dimension));
      Atomics.store(vm.u32, root + G_CHUNK0 + c, at);
      vm.u32[root + G_CHUNKS] = c + 1;
    }
    const level = this.drawLevel();
    const upper = level > 0 ? vm.allocateWords(level * (this.m + 1)) : 0;
    const u = vm.u32;
    const rec = recordAt(u, root, p);
    // A record slot is zero (fresh chunk) except what this writer wrote into it before.
    u[rec + R_CREATED] = epoch;
    u[rec + R_DELETED] = 0;
    u[rec + R_ELEMENT] = element;
    u[rec + R_LEVEL] = level;
    u[rec + R_UPPER] = upper;
    vm.f32.set(vector, rec - this.vecOffset);
    const k = kernelsFor(vm);
    vm.f32[rec + R_NORM] = this.metric === 'cosine' ? k.norm(rec - this.vecOffset, this.dimension) : 0;
    k.quantize(root, p);
    if (p === 0) {
      Atomics.store(u, root + G_COUNT, 1);
      Atomics.store(u, root + G_ENTRY, 0);
      u[root + G_TOP] = level;
      return p;
    }
    const top = u[root + G_TOP]!;
    const s = vm.scratch().ensure(p, this.efc, this.dimension, this.m0 + 1);
    kernelsFor(vm).insert(root, s, p, Atomics.load(vm.u32, root + G_ENTRY), top);
    Atomics.store(vm.u32, root + G_COUNT, p + 1);
    if (level > top) {
      Atomics.store(vm.u32, root + G_ENTRY, p);
      vm.u32[root + G_TOP] = level;
    }
    return p;
  }

  private recordOf(point: number): number {
    if (!(point >= 0 && point < this.vm.u32[this.root + G_COUNT]!)) fail(`no vector point ${point}`);
    return recordAt(this.vm.u32, this.root, point);
  }

  /** Writer: the point stops being visible at `epoch`. */
  remove(point: number, epoch: number): void {
    const rec = this.recordOf(point);
    const u = this.vm.u32;
    if (u[rec + R_DELETED] !== 0) fail(`vector point ${point} removed twice`);
    if (!(epoch >= 1 && epoch <= limits.epochMax)) fail(`remove at epoch ${epoch}`);
    u[rec + R_DELETED] = epoch;
  }

  /** Writer rollback: the point was never visible (it stays as a routing node). */
  undoInsert(point: number): void {
    this.vm.u32[this.recordOf(point) + R_CREATED] = NEVER;
  }

  /** Writer rollback of remove(). */
  undoRemove(point: number): void {
    this.vm.u32[this.recordOf(point) + R_DELETED] = 0;
  }

  private prepare(query: Float32Array, k: number, outElements: Uint32Array, outDistances: Float32Array, ef: number = k): void {
    if (!(ef >= 0 && ef <= 2 ** 32)) fail(`search ef ${ef}`);
    if (query.length !== this.dimension) fail(`query of length ${query.length} for dimension ${this.dimension}`);
    if (!Number.isInteger(k) || k < 0 || outElements.length < k || outDistances.length < k) fail(`search for ${k} results into ${outElements.length} / ${outDistances.length}`);
  }

  private results(s: number, n: number, outElements: Uint32Array, outDistances: Float32Array): number {
    const u = this.vm.u32, f = this.vm.f32;
    const out = u[s + S_OUT]!;
    for (let i = 0; i < n; i++) {
      outDistances[i] = f[out + 2 * i]!;
      outElements[i] = u[out + 2 * i + 1]!;
    }
    return n;
  }

  /** Reader: approximate top-k by (distance, element) among points visible at `snapshot`. */
  search(query: Float32Array, k: number, ef: number, snapshot: number, outElements: Uint32Array, outDistances: Float32Array): number {
    this.prepare(query, k, outElements, outDistances, ef);
    const vm = this.vm;
    // Entry before count (see the header): the entry is then below the count. The views
    // are made to cover the heap top AFTER the count's acquire: every block a point below
    // the count lives in was allocated (heap top raised) before the count was stored.
    const entry = Atomics.load(vm.u32, this.root + G_ENTRY);
    const count = Atomics.load(vm.u32, this.root + G_COUNT);
    vm.cover();
    if (count === 0 || k === 0 || snapshot === 0) return 0;
    const width = Math.max(k, Math.min(Math.max(1, Math.floor(ef)), limits.vectorEfMax));
    const s = vm.scratch().ensure(count, width, this.dimension, this.m0 + 1);
    vm.f32.set(query, vm.u32[s + S_QUERY]!);
    const n = kernelsFor(vm).search(this.root, s, k, width, snapshot, count, entry);
    return this.results(s, n, outElements, outDistances);
  }

  /** Reader: exact top-k (scans every point). */
  searchExact(query: Float32Array, k: number, snapshot: number, outElements: Uint32Array, outDistances: Float32Array): number {
    this.prepare(query, k, outElements, outDistances);
    const vm = this.vm;
    const count = Atomics.load(vm.u32, this.root + G_COUNT);
    vm.cover(); // after the count (search)
    if (count === 0 || k === 0 || snapshot === 0) return 0;
    const s = vm.scratch().ensure(0, k, this.dimension, 0);
    vm.f32.set(query, vm.u32[s + S_QUERY]!);
    const n = kernelsFor(vm).searchExact(this.root, s, k, snapshot, count);
    return this.results(s, n, outElements, outDistances);
  }

  /**
   * Reader (`*_within`): of the `count` element IDs in `ids`, those whose point in this graph
   * holds their vector at `snapshot`, found through the element map at word `elements`
   * (index/vector-elements.ts), get status[i] = W_RANKED, the others W_RECORD (the caller
   * decides those from their records); the k nearest ranked ones, ascending by (distance,
   * ID), go to `positions` (indexes into `ids`) and `distances`. One kernel pass, no call
   * per candidate. Returns how many. `status` is written only when some candidate is
   * W_RECORD: recordCandidates says how many.
   */
  withinTop(query: Float32Array, elements: number, ids: Uint32Array, count: number, snapshot: number, k: number, status: Uint32Array, positions: Uint32Array, distances: Float32Array): number {
    if (query.length !== this.dimension) fail(`query of length ${query.length} for dimension ${this.dimension}`);
    const want = Math.min(k, count);
    if (!(count <= ids.length && count <= status.length && want <= positions.length && want <= distances.length)) fail(`within top of ${count} elements into ${ids.length} / ${status.length} / ${positions.length} / ${distances.length}`);
    this.recordCandidates = 0;
    if (want === 0) return 0;
    const vm = this.vm;
    const known = Atomics.load(vm.u32, this.root + G_COUNT);
    vm.cover(); // after the count (search)
    const scratch = vm.scratch();
    scratch.ensure(0, want, this.dimension, 0);
    const s = scratch.ensureBatch(count, this.dimension);
    let u = vm.u32;
    const batch = u[s + S_BATCH]!;
    u.set(ids.subarray(0, count), batch);
    vm.f32.set(query, u[s + S_QUERY]!);
    const found = kernelsFor(vm).withinTop(this.root, elements, s, count, snapshot, known, want);
    u = vm.u32;
    const res = u[s + S_RES]!, f = vm.f32;
    this.recordCandidates = u[s + S_WITHIN_RECORDS]!;
    if (this.recordCandidates > 0) status.set(u.subarray(batch + u[s + S_BATCH_CAP]!, batch + u[s + S_BATCH_CAP]! + count));
    for (let j = 0; j < found; j++) {
      distances[j] = f[res + 2 * j]!;
      positions[j] = u[res + 2 * j + 1]!;
    }
    return found;
  }

  /** A point's element ID. */
  elementOf(point: number): number {
    if (!(point >= 0 && point < this.pointCount())) fail(`no vector point ${point}`);
    this.vm.cover(); // after the count (search)
    return this.vm.u32[recordAt(this.vm.u32, this.root, point) + R_ELEMENT]!;
  }

  /** A copy of a point's stored vector into `out` (length >= dimension). */
  readVector(point: number, out: Float32Array): void {
    if (!(point >= 0 && point < this.pointCount())) fail(`no vector point ${point}`);
    this.vm.cover(); // after the count (search)
    const at = recordAt(this.vm.u32, this.root, point) - this.vecOffset;
    out.set(this.vm.f32.subarray(at, at + this.dimension));
  }

  /** Points visible at `snapshot` (O(n)). */
  visibleCount(snapshot: number): number {
    const vm = this.vm;
    const count = Atomics.load(vm.u32, this.root + G_COUNT);
    vm.cover(); // after the count (search)
    if (count === 0 || snapshot === 0) return 0;
    return kernelsFor(vm).visibleCount(this.root, snapshot, count);
  }

  /** Every point ever inserted: element, created, deleted (writer, recovery). */
  forEachPoint(fn: (point: number, element: number, created: number, deleted: number) => void): void {
    const count = this.pointCount();
    for (let p = 0; p < count; p++) {
      const u = this.vm.u32; // fn may make the writer allocate (views re-made)
      const rec = recordAt(u, this.root, p);
      fn(p, u[rec + R_ELEMENT]!, u[rec + R_CREATED]!, u[rec + R_DELETED]!);
    }
  }

  /**
   * Reader (`*_within`): whether `point` is `element`'s vector at `snapshot`: published
   * (below the count, loaded with an acquire, so its record is whole), that element's, and
   * visible. An element has at most one point visible at any snapshot, in any partition.
   */
  holds(point: number, element: number, snapshot: number): boolean {
    const vm = this.vm;
    if (point >= Atomics.load(vm.u32, this.root + G_COUNT)) return false;
    vm.cover();
    const u = vm.u32;
    const rec = recordAt(u, this.root, point);
    if (u[rec + R_ELEMENT] !== element) return false;
    const created = u[rec + R_CREATED]!, deleted = u[rec + R_DELETED]!;
    return created !== 0 && created !== NEVER && created <= snapshot && (deleted === 0 || snapshot < deleted);
  }

  /**
   * Writer (compaction): point `point`'s element, created and deleted epochs into `info`
   * and its vector into `vector` (length = dimension).
   */
  readPoint(point: number, info: Uint32Array, vector: Float32Array): void {
    const rec = this.recordOf(point);
    const u = this.vm.u32;
    info[0] = u[rec + R_ELEMENT]!;
    info[1] = u[rec + R_CREATED]!;
    info[2] = u[rec + R_DELETED]!;
    this.readVector(point, vector);
  }

  /** The blocks this graph holds, [word offset, words] (to free when it is dropped). */
  blocks(): [number, number][] {
    const u = this.vm.u32, root = this.root;
    const out: [number, number][] = [[root, G_HEADER_WORDS]];
    const chunks = u[root + G_CHUNKS]!;
    for (let c = 0; c < chunks; c++) out.push([u[root + G_CHUNK0 + c]!, chunkWords(c, this.recordW, this.dimension)]);
    const count = u[root + G_COUNT]!;
    for (let p = 0; p < count; p++) {
      const rec = recordAt(u, root, p);
      const level = u[rec + R_LEVEL]!;
      if (level > 0) out.push([u[rec + R_UPPER]!, level * (this.m + 1)]);
    }
    return out;
  }

  /** Writer (import.ts): the memory this graph lives in. */
  get memory(): VectorMemory {
    return this.vm;
  }
}
