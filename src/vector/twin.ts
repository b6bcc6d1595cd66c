// JS twins of the vector kernels (assembly/vector.ts): the same algorithms, statement for
// statement, over the same words, so that both produce the same bits (distances) and the
// same graphs (insert) and results (search). The differential tests run both; the engine
// runs these when the kernels are off (SVCDB_VECTOR_KERNEL=js, setVectorKernel(false)).
//
// f32 arithmetic: Math.fround after every operation. For +, -, *, / and sqrt of f32 inputs,
// computing in f64 and rounding once to f32 gives the correctly rounded f32 result (f64 has
// more than 2 * 24 + 2 bits), which is what WebAssembly's f32 and f32x4 operations return.
//
// Summation order of every vector reduction (docs/vector.md §3): 16 partial sums
// acc[4c + l] (4 accumulators c of 4 lanes l). Each full block of 16 components i..i+15 adds
// component i + 4c + l into acc[4c + l]; then up to 3 remaining blocks of 4 go into
// accumulators 0, 1, 2 in order. Lanes combine as t[l] = (acc[l] + acc[4 + l]) +
// (acc[8 + l] + acc[12 + l]), then s = (t[0] + t[1]) + (t[2] + t[3]); the last dim % 4
// components are added to s one by one in ascending order.
import {
  G_COUNT, G_DIM, G_EFC, G_M, G_M0, G_METRIC, G_RECORD, G_VEC, G_CHUNK0,
  METRIC_COSINE, METRIC_EUCLIDEAN, NEVER,
  R_CREATED, R_DELETED, R_ELEMENT, R_LEVEL, R_N0, R_NORM, R_UPPER, R_Q_STEP, R_Q_ERROR, R_Q_NORM, R_SQUARES, compactWords,
  E_CHUNK_SHIFT, W_RANKED, W_RECORD,
  S_BATCH, S_BATCH_CAP, S_WITHIN_RECORDS, S_CAND, S_OUT, S_QUERY, S_RES, S_SEL, S_TAG, S_VISITED, S_VISITED_CAP,
} from './layout.js';

const fr = Math.fround;
let U: Uint32Array = new Uint32Array(0);
let F: Float32Array = new Float32Array(0);
const acc = new Float32Array(16);

/** Point the twins at a memory's current views (call before every entry point). */
export function bindViews(u32: Uint32Array, f32: Float32Array): void {
  U = u32;
  F = f32;
}

export const OP_DOT = 0, OP_SQDIFF = 1, OP_ABSDIFF = 2;

/** One reduction in the documented order over x[a..a+dim) and y[b..b+dim); `op` picks the per-component term. */
export function reduceIn(op: number, x: Float32Array, a: number, y: Float32Array, b: number, dim: number): number {
  acc.fill(0);
  let i = 0;
  for (; i + 16 <= dim; i += 16) {
    for (let j = 0; j < 16; j++) acc[j] = acc[j]! + term(op, x[a + i + j]!, y[b + i + j]!);
  }
  for (let c = 0; i + 4 <= dim; i += 4, c++) {
    for (let l = 0; l < 4; l++) acc[4 * c + l] = acc[4 * c + l]! + term(op, x[a + i + l]!, y[b + i + l]!);
  }
  const t0 = fr(fr(acc[0]! + acc[4]!) + fr(acc[8]! + acc[12]!));
  const t1 = fr(fr(acc[1]! + acc[5]!) + fr(acc[9]! + acc[13]!));
  const t2 = fr(fr(acc[2]! + acc[6]!) + fr(acc[10]! + acc[14]!));
  const t3 = fr(fr(acc[3]! + acc[7]!) + fr(acc[11]! + acc[15]!));
  let s = fr(fr(t0 + t1) + fr(t2 + t3));
  for (; i < dim; i++) s = fr(s + term(op, x[a + i]!, y[b + i]!));
  return s;
}

const reduce = (op: number, a: number, b: number, dim: number): number => reduceIn(op, F, a, F, b, dim);

// Float32Array stores round to f32, so acc[j] + term is the f32 sum; term rounds its own result.
function term(op: number, x: number, y: number): number {
  switch (op) {
    case OP_DOT: return fr(x * y);
    case OP_SQDIFF: { const d = fr(x - y); return fr(d * d); }
    default: return Math.abs(fr(x - y));
  }
}

/** sqrt of the sum of squares of the `dim` f32 at word `a` (stored per point for cosine). */
export function norm(a: number, dim: number): number {
  return fr(Math.sqrt(reduce(OP_DOT, a, a, dim)));
}

/** (1 - clamp(cos, -1, 1)) / 2. */
function cosineDistance(cos: number): number {
  if (cos > 1) cos = 1;
  if (cos < -1) cos = -1;
  return fr(fr(1 - cos) * 0.5);
}

/** Norms in this range take the single-precision path (the kernel's COSINE_NORM_MIN / MAX). */
const COSINE_NORM_MIN = 2 ** -40, COSINE_NORM_MAX = 2 ** 63;

/**
 * Cosine distance of x[a..a+dim) and y[b..b+dim) with norms na and nb: in f32 when both norms
 * are in [COSINE_NORM_MIN, COSINE_NORM_MAX], else in f64, components in order, rounded once
 * (the kernel's cosineAt and cosineWide).
 */
export function cosineIn(x: Float32Array, a: number, na: number, y: Float32Array, b: number, nb: number, dim: number): number {
  if (na >= COSINE_NORM_MIN && na <= COSINE_NORM_MAX && nb >= COSINE_NORM_MIN && nb <= COSINE_NORM_MAX) {
    return cosineDistance(fr(reduceIn(OP_DOT, x, a, y, b, dim) / fr(na * nb)));
  }
  let wd = 0, sa = 0, sb = 0;
  for (let i = 0; i < dim; i++) {
    const p = x[a + i]!, q = y[b + i]!;
    wd += p * q;
    sa += p * p;
    sb += q * q;
  }
  const wide = Math.sqrt(sa) * Math.sqrt(sb);
  return cosineDistance(wide > 0 ? fr(wd / wide) : 0);
}

/** The metric's distance between the vectors at words a and b (norms used by cosine only). */
export function distance(metric: number, a: number, an: number, b: number, bn: number, dim: number): number {
  if (metric === METRIC_COSINE) return cosineIn(F, a, an, F, b, bn, dim);
  return reduce(metric === METRIC_EUCLIDEAN ? OP_SQDIFF : OP_ABSDIFF, a, b, dim);
}

// ---- Graph access (layout.ts) -------------------------------------------------------------

/** Word offset of point p's record: chunk c = floor(log2(p + 1)) holds points [2^c - 1, 2^(c+1) - 1). */
export function record(root: number, p: number): number {
  const c = 31 - Math.clz32(p + 1);
  return U[root + G_CHUNK0 + c]! + (p + 1 - (1 << c)) * U[root + G_RECORD]! + U[root + G_VEC]!;
}

/** Word offset of p's neighbour list [count, ids] at `layer` (the point has that layer). */
function links(root: number, rec: number, layer: number): number {
  return layer === 0 ? rec + R_N0 : U[rec + R_UPPER]! + (layer - 1) * (U[root + G_M]! + 1);
}

function visible(rec: number, snapshot: number): boolean {
  const created = U[rec + R_CREATED]!;
  const deleted = U[rec + R_DELETED]!;
  return created !== 0 && created <= snapshot && (deleted === 0 || snapshot < deleted);
}

/** Distance from the vector at word q (norm qn) to point record rec. */
function toPoint(root: number, q: number, qn: number, rec: number): number {
  return distance(U[root + G_METRIC]!, q, qn, rec - U[root + G_VEC]!, F[rec + R_NORM]!, U[root + G_DIM]!);
}

// ---- Heaps of [f32 distance, u32 point] pairs ---------------------------------------------
// Candidates: min-heap by (distance, point). Results: max-heap by (distance, element, point),
// so that the worst result leaves first and ties keep the lower element IDs.

function candLess(h: number, i: number, j: number): boolean {
  const di = F[h + 2 * i]!, dj = F[h + 2 * j]!;
  return di < dj || (di === dj && U[h + 2 * i + 1]! < U[h + 2 * j + 1]!);
}

/** Whether result pair i ranks after pair j (for the max-heap: i is "worse"). */
function resWorse(root: number, h: number, i: number, j: number): boolean {
  const di = F[h + 2 * i]!, dj = F[h + 2 * j]!;
  if (di !== dj) return di > dj;
  const pi = U[h + 2 * i + 1]!, pj = U[h + 2 * j + 1]!;
  const ei = U[record(root, pi) + R_ELEMENT]!, ej = U[record(root, pj) + R_ELEMENT]!;
  return ei !== ej ? ei > ej : pi > pj;
}

function swap(h: number, i: number, j: number): void {
  const d = U[h + 2 * i]!, p = U[h + 2 * i + 1]!;
  U[h + 2 * i] = U[h + 2 * j]!;
  U[h + 2 * i + 1] = U[h + 2 * j + 1]!;
  U[h + 2 * j] = d;
  U[h + 2 * j + 1] = p;
}

/** Push onto a heap of n pairs (returns n + 1); `max` picks the result order. */
function heapPush(root: number, h: number, n: number, d: number, p: number, max: boolean): number {
  F[h + 2 * n] = d;
  U[h + 2 * n + 1] = p;
  let i = n;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (!(max ? resWorse(root, h, i, parent) : candLess(h, i, parent))) break;
    swap(h, i, parent);
    i = parent;
  }
  return n + 1;
}

/** Remove the top of a heap of n pairs (returns n - 1). */
function heapPop(root: number, h: number, n: number, max: boolean): number {
  n--;
  if (n > 0) {
    U[h] = U[h + 2 * n]!;
    U[h + 1] = U[h + 2 * n + 1]!;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1, r = l + 1;
      let top = i;
      if (l < n && (max ? resWorse(root, h, l, top) : candLess(h, l, top))) top = l;
      if (r < n && (max ? resWorse(root, h, r, top) : candLess(h, r, top))) top = r;
      if (top === i) break;
      swap(h, i, top);
      i = top;
    }
  }
  return n;
}

/** Next visited-mark generation; on wrap the marks are cleared. */
function nextTag(s: number): number {
  let tag = (U[s + S_TAG]! + 1) >>> 0;
  if (tag === 0) {
    U.fill(0, U[s + S_VISITED]!, U[s + S_VISITED]! + U[s + S_VISITED_CAP]!);
    tag = 1;
  }
  U[s + S_TAG] = tag;
  return tag;
}

/** Greedy descent at one upper layer from `cur` (at distance curD): the closest point found. Returns the point; its distance is left in greedyD. */
let greedyD = 0;
function greedy(root: number, q: number, qn: number, cur: number, curD: number, layer: number, count: number): number {
  const mMax = U[root + G_M]!;
  let changed = true;
  while (changed) {
    changed = false;
    const list = links(root, record(root, cur), layer);
    let n = U[list]!;
    if (n > mMax) n = mMax;
    for (let j = 0; j < n; j++) {
      const e = U[list + 1 + j]!;
      if (e >= count) continue;
      const d = toPoint(root, q, qn, record(root, e));
      if (d < curD) { curD = d; cur = e; changed = true; }
    }
  }
  greedyD = curD;
  return cur;
}

/**
 * Beam search of one layer from the `starts` pairs at word `from` (already distances to q):
 * leaves up to `ef` results in the result heap and returns how many. `snapshot` = 0: every
 * point is a result (construction); else only points visible at it are results, while every
 * point may be traversed.
 */
function layerSearch(root: number, s: number, q: number, qn: number, from: number, starts: number, ef: number, layer: number, count: number, snapshot: number): number {
  const cand = U[s + S_CAND]!, res = U[s + S_RES]!, visited = U[s + S_VISITED]!;
  const tag = nextTag(s);
  const mMax = layer === 0 ? U[root + G_M0]! : U[root + G_M]!;
  let nc = 0, nr = 0;
  for (let i = 0; i < starts; i++) {
    const p = U[from + 2 * i + 1]!, d = F[from + 2 * i]!;
    if (U[visited + p] === tag) continue;
    U[visited + p] = tag;
    nc = heapPush(root, cand, nc, d, p, false);
    if (snapshot === 0 || visible(record(root, p), snapshot)) {
      nr = heapPush(root, res, nr, d, p, true);
      if (nr > ef) nr = heapPop(root, res, nr, true);
    }
  }
  while (nc > 0) {
    const cd = F[cand]!, c = U[cand + 1]!;
    if (nr >= ef && cd > F[res]!) break;
    nc = heapPop(root, cand, nc, false);
    const list = links(root, record(root, c), layer);
    let n = U[list]!;
    if (n > mMax) n = mMax;
    // (The kernel first marks the batch of unvisited neighbours and loads their vectors'
    // lines, then measures them: the same marks, distances and pushes in the same order.)
    for (let j = 0; j < n; j++) {
      const e = U[list + 1 + j]!;
      if (e >= count || U[visited + e] === tag) continue;
      U[visited + e] = tag;
      const rec = record(root, e);
      const d = toPoint(root, q, qn, rec);
      if (nr < ef || d < F[res]!) {
        nc = heapPush(root, cand, nc, d, e, false);
        if (snapshot === 0 || visible(rec, snapshot)) {
          nr = heapPush(root, res, nr, d, e, true);
          if (nr > ef) nr = heapPop(root, res, nr, true);
        }
      }
    }
  }
  return nr;
}

/** Empty the result heap of n pairs into S_OUT in ascending (distance, element, point) order. */
function drainSorted(root: number, s: number, n: number): void {
  const res = U[s + S_RES]!, out = U[s + S_OUT]!;
  for (let i = n - 1; i >= 0; i--) {
    U[out + 2 * i] = U[res]!;
    U[out + 2 * i + 1] = U[res + 1]!;
    heapPop(root, res, i + 1, true);
  }
}

/**
 * Approximate top-k at `snapshot` for the query at S_QUERY among the first `count` points,
 * from `entry`: greedy descent through the upper layers, then a beam of width ef at layer 0.
 * Leaves min(k, found) [distance, element] pairs at S_OUT, sorted; returns how many.
 */
export function search(root: number, s: number, k: number, ef: number, snapshot: number, count: number, entry: number): number {
  if (count === 0 || k === 0) return 0;
  const q = U[s + S_QUERY]!, dim = U[root + G_DIM]!;
  const qn = U[root + G_METRIC] === METRIC_COSINE ? norm(q, dim) : 0;
  let cur = entry;
  const erec = record(root, cur);
  let curD = toPoint(root, q, qn, erec);
  for (let layer = U[erec + R_LEVEL]!; layer > 0; layer--) {
    cur = greedy(root, q, qn, cur, curD, layer, count);
    curD = greedyD;
  }
  const out = U[s + S_OUT]!;
  F[out] = curD;
  U[out + 1] = cur;
  const n = layerSearch(root, s, q, qn, out, 1, ef < k ? k : ef, 0, count, snapshot);
  drainSorted(root, s, n);
  const m = n < k ? n : k;
  for (let i = 0; i < m; i++) U[out + 2 * i + 1] = U[record(root, U[out + 2 * i + 1]!) + R_ELEMENT]!;
  return m;
}

/** Exact top-k at `snapshot` over the first `count` points: same output as search. */
export function searchExact(root: number, s: number, k: number, snapshot: number, count: number): number {
  if (k === 0) return 0;
  const q = U[s + S_QUERY]!, dim = U[root + G_DIM]!;
  const qn = U[root + G_METRIC] === METRIC_COSINE ? norm(q, dim) : 0;
  const res = U[s + S_RES]!;
  let nr = 0;
  for (let p = 0; p < count; p++) {
    const rec = record(root, p);
    if (!visible(rec, snapshot)) continue;
    const d = toPoint(root, q, qn, rec);
    if (nr < k) {
      nr = heapPush(root, res, nr, d, p, true);
    } else if (d <= F[res]!) {
      // Replace the worst when the new pair ranks before it (ties by element, then point).
      nr = heapPush(root, res, nr, d, p, true);
      nr = heapPop(root, res, nr, true);
    }
  }
  drainSorted(root, s, nr);
  const out = U[s + S_OUT]!;
  for (let i = 0; i < nr; i++) U[out + 2 * i + 1] = U[record(root, U[out + 2 * i + 1]!) + R_ELEMENT]!;
  return nr;
}

/**
 * `*_within` (assembly/vector.ts withinTop): the same statuses and the same k pairs, by
 * measuring every ranked candidate whole and sorting (the kernel abandons points that cannot
 * enter the top k; its pruning is exact, so both give the same bits).
 */
export function withinTop(root: number, elements: number, s: number, n: number, snapshot: number, count: number, k: number): number {
  if (k === 0) return 0;
  const q = U[s + S_QUERY]!, dim = U[root + G_DIM]!;
  const qn = U[root + G_METRIC] === METRIC_COSINE ? norm(q, dim) : 0;
  const batch = U[s + S_BATCH]!, status = batch + U[s + S_BATCH_CAP]!, h = U[s + S_RES]!;
  const slotMask = (1 << E_CHUNK_SHIFT) - 1;
  const ranked: { d: number; i: number }[] = [];
  let records = 0;
  for (let i = 0; i < n; i++) {
    const id = U[batch + i]!;
    let st = W_RECORD;
    const chunk = Atomics.load(U, elements + 1 + (id >>> E_CHUNK_SHIFT));
    if (chunk !== 0) {
      const pair = chunk + 2 * (id & slotMask);
      const p = (U[pair]! - 1) >>> 0;
      if (U[pair + 1] === root && p < count) {
        const rec = record(root, p);
        if (U[rec + R_ELEMENT] === id && visible(rec, snapshot)) {
          st = W_RANKED;
          ranked.push({ d: toPoint(root, q, qn, rec), i });
        }
      }
    }
    U[status + i] = st;
    records += st; // W_RECORD is 1, W_RANKED 0
  }
  U[s + S_WITHIN_RECORDS] = records;
  ranked.sort((x, y) => x.d - y.d || U[batch + x.i]! - U[batch + y.i]!);
  const nr = Math.min(k, ranked.length);
  for (let j = 0; j < nr; j++) {
    F[h + 2 * j] = ranked[j]!.d;
    U[h + 2 * j + 1] = ranked[j]!.i;
  }
  return nr;
}

/** Round to the nearest integer, ties to even (wasm f64.nearest). */
function nearestEven(v: number): number {
  const f = Math.floor(v), d = v - f;
  return d > 0.5 || (d === 0.5 && f % 2 !== 0) ? f + 1 : f;
}

/**
 * Writer: the int8 copy of point p and its bounds (assembly/
 * vector.ts quantize, layout.ts: the same f64 arithmetic, so the same bytes and words).
 */
export function quantize(root: number, p: number): void {
  const rec = record(root, p), dim = U[root + G_DIM]!, x = rec - U[root + G_VEC]!;
  const c = 31 - Math.clz32(p + 1);
  const at = U[root + G_CHUNK0 + c]! + (1 << c) * U[root + G_RECORD]! + (p + 1 - (1 << c)) * compactWords(dim);
  const bytes = new Int8Array(U.buffer, U.byteOffset + 4 * at, 4 * compactWords(dim));
  let m = 0;
  for (let i = 0; i < dim; i++) m = Math.max(m, Math.abs(F[x + i]!));
  const step = fr(m / 127);
  let error = 0, norm2 = 0, squares = 0;
  for (let i = 0; i < dim; i++) {
    const v = F[x + i]!;
    const q = step > 0 ? Math.min(127, Math.max(-127, nearestEven(v / step))) : 0;
    bytes[i] = q;
    const r = v - step * q;
    error += r * r;
    norm2 += (step * q) * (step * q);
    squares += v * v;
  }
  bytes.fill(0, dim);
  F[rec + R_Q_STEP] = step;
  F[rec + R_Q_ERROR] = Math.sqrt(error) * 1.000001;
  F[rec + R_Q_NORM] = Math.sqrt(norm2) * 1.000001;
  F[rec + R_SQUARES] = squares;
}

/** Points among the first `count` visible at `snapshot`. */
export function visibleCount(root: number, snapshot: number, count: number): number {
  let n = 0;
  for (let p = 0; p < count; p++) if (visible(record(root, p), snapshot)) n++;
  return n;
}

/**
 * Neighbour selection heuristic over `n` candidate pairs at word `c`, sorted ascending by
 * distance to the base point: keep a candidate unless it is closer to an already kept one
 * than to the base (keeps links in several directions instead of one cluster). Fewer than
 * `m` candidates are all kept. Kept points are written to `out`; returns how many.
 */
function select(root: number, c: number, n: number, m: number, out: number): number {
  if (n <= m) {
    for (let i = 0; i < n; i++) U[out + i] = U[c + 2 * i + 1]!;
    return n;
  }
  const vec = U[root + G_VEC]!, metric = U[root + G_METRIC]!, dim = U[root + G_DIM]!;
  let kept = 0;
  for (let i = 0; i < n && kept < m; i++) {
    const p = U[c + 2 * i + 1]!, d = F[c + 2 * i]!;
    const rec = record(root, p);
    let good = true;
    for (let j = 0; j < kept; j++) {
      const r = record(root, U[out + j]!);
      if (distance(metric, rec - vec, F[rec + R_NORM]!, r - vec, F[r + R_NORM]!, dim) < d) { good = false; break; }
    }
    if (good) U[out + kept++] = p;
  }
  return kept;
}

/** Insertion sort of n pairs at word c by (distance, point): n <= M0 + 1. */
function sortPairs(c: number, n: number): void {
  for (let i = 1; i < n; i++) {
    const d = F[c + 2 * i]!, p = U[c + 2 * i + 1]!;
    let j = i - 1;
    while (j >= 0 && (F[c + 2 * j]! > d || (F[c + 2 * j] === d && U[c + 2 * j + 1]! > p))) {
      U[c + 2 * j + 2] = U[c + 2 * j]!;
      U[c + 2 * j + 3] = U[c + 2 * j + 1]!;
      j--;
    }
    F[c + 2 * j + 2] = d;
    U[c + 2 * j + 3] = p;
  }
}

/**
 * Add point p to e's list at `layer`: appended (id before count) while there is room, else
 * the list is re-selected with the heuristic among its points and p and rewritten in place
 * (ids, then count). Readers may read a list mid-rewrite: every id in it is a point id, and
 * ids of unpublished points (p) are >= their count, so they skip them.
 */
function link(root: number, s: number, e: number, p: number, layer: number): void {
  const erec = record(root, e);
  const list = links(root, erec, layer);
  const mMax = layer === 0 ? U[root + G_M0]! : U[root + G_M]!;
  const n = U[list]!;
  if (n < mMax) {
    U[list + 1 + n] = p;
    Atomics.store(U, list, n + 1);
    return;
  }
  const vec = U[root + G_VEC]!, metric = U[root + G_METRIC]!, dim = U[root + G_DIM]!;
  const sel = U[s + S_SEL]!;
  const en = F[erec + R_NORM]!;
  for (let j = 0; j <= n; j++) {
    const x = j < n ? U[list + 1 + j]! : p;
    const xr = record(root, x);
    F[sel + 2 * j] = distance(metric, erec - vec, en, xr - vec, F[xr + R_NORM]!, dim);
    U[sel + 2 * j + 1] = x;
  }
  sortPairs(sel, n + 1);
  const kept = sel + 2 * (n + 1);
  const m = select(root, sel, n + 1, mMax, kept);
  for (let j = 0; j < m; j++) U[list + 1 + j] = U[kept + j]!;
  Atomics.store(U, list, m);
}

/**
 * Link the written, unpublished point p (record complete, lists empty) into the graph of the
 * p points before it, from `entry` (level `top`): greedy descent above p's level, then at each
 * of its layers a beam of efConstruction, the heuristic's M picks as p's list, and a link back
 * from each of them. The caller publishes p afterwards.
 */
export function insert(root: number, s: number, p: number, entry: number, top: number): void {
  const prec = record(root, p);
  const q = prec - U[root + G_VEC]!, qn = F[prec + R_NORM]!;
  const level = U[prec + R_LEVEL]!;
  const m = U[root + G_M]!, efc = U[root + G_EFC]!;
  let cur = entry;
  let curD = toPoint(root, q, qn, record(root, cur));
  for (let layer = top; layer > level; layer--) {
    cur = greedy(root, q, qn, cur, curD, layer, p);
    curD = greedyD;
  }
  const out = U[s + S_OUT]!, sel = U[s + S_SEL]!;
  F[out] = curD;
  U[out + 1] = cur;
  let starts = 1;
  for (let layer = level < top ? level : top; layer >= 0; layer--) {
    const n = layerSearch(root, s, q, qn, out, starts, efc, layer, p, 0);
    drainSorted(root, s, n);
    const kept = select(root, out, n, m, sel);
    const list = links(root, prec, layer);
    for (let j = 0; j < kept; j++) U[list + 1 + j] = U[sel + j]!;
    U[list] = kept;
    // p's own list holds the picks: link() reuses the selection area.
    for (let j = 0; j < kept; j++) link(root, s, U[list + 1 + j]!, p, layer);
    starts = n;
  }
}
