// AssemblyScript vector kernels over the vector memory (src/vector/memory.ts), which the
// module imports as its memory. Offsets are u32 WORD offsets (byte address / 4), as in
// src/vector/layout.ts, whose constants are mirrored here. The module must not have data
// segments (instantiating it would write them into the shared memory; checked at load).
// Every function has a JS twin in src/vector/twin.ts with the same arithmetic and order.

const METRIC_COSINE: u32 = 0, METRIC_EUCLIDEAN: u32 = 1;

// ---- Reductions -----------------------------------------------------------------------------
// Order (twin.ts header, docs/vector.md §3): 4 accumulators of 4 f32 lanes; each full block
// of 16 components adds components 4c..4c+3 into accumulator c; up to 3 remaining blocks of 4
// go into accumulators 0, 1, 2; then (acc0 + acc1) + (acc2 + acc3) lane-wise, lanes
// (l0 + l1) + (l2 + l3), then the last dim % 4 components one by one. f32x4 add/mul/sub/abs
// are the IEEE single-precision operations per lane (no fused multiply-add).

// @ts-ignore: decorator
@inline function lanes(v: v128): f32 {
  return (f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1)) + (f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3));
}

// @ts-ignore: decorator
@inline function dot(a: u32, b: u32, dim: u32): f32 {
  const pa = <usize>a << 2, pb = <usize>b << 2;
  let c0 = f32x4.splat(0), c1 = f32x4.splat(0), c2 = f32x4.splat(0), c3 = f32x4.splat(0);
  let i: u32 = 0;
  for (; i + 16 <= dim; i += 16) {
    const o = <usize>i << 2;
    c0 = f32x4.add(c0, f32x4.mul(v128.load(pa + o), v128.load(pb + o)));
    c1 = f32x4.add(c1, f32x4.mul(v128.load(pa + o, 16), v128.load(pb + o, 16)));
    c2 = f32x4.add(c2, f32x4.mul(v128.load(pa + o, 32), v128.load(pb + o, 32)));
    c3 = f32x4.add(c3, f32x4.mul(v128.load(pa + o, 48), v128.load(pb + o, 48)));
  }
  if (i + 4 <= dim) {
    c0 = f32x4.add(c0, f32x4.mul(v128.load(pa + (<usize>i << 2)), v128.load(pb + (<usize>i << 2)))); i += 4;
    if (i + 4 <= dim) {
      c1 = f32x4.add(c1, f32x4.mul(v128.load(pa + (<usize>i << 2)), v128.load(pb + (<usize>i << 2)))); i += 4;
      if (i + 4 <= dim) {
        c2 = f32x4.add(c2, f32x4.mul(v128.load(pa + (<usize>i << 2)), v128.load(pb + (<usize>i << 2)))); i += 4;
      }
    }
  }
  let s = lanes(f32x4.add(f32x4.add(c0, c1), f32x4.add(c2, c3)));
  for (; i < dim; i++) s += load<f32>(pa + (<usize>i << 2)) * load<f32>(pb + (<usize>i << 2));
  return s;
}

// @ts-ignore: decorator
@inline function sqd(x: v128, y: v128): v128 {
  const d = f32x4.sub(x, y);
  return f32x4.mul(d, d);
}

// @ts-ignore: decorator
@inline function squaredL2(a: u32, b: u32, dim: u32): f32 {
  const pa = <usize>a << 2, pb = <usize>b << 2;
  let c0 = f32x4.splat(0), c1 = f32x4.splat(0), c2 = f32x4.splat(0), c3 = f32x4.splat(0);
  let i: u32 = 0;
  for (; i + 16 <= dim; i += 16) {
    const o = <usize>i << 2;
    c0 = f32x4.add(c0, sqd(v128.load(pa + o), v128.load(pb + o)));
    c1 = f32x4.add(c1, sqd(v128.load(pa + o, 16), v128.load(pb + o, 16)));
    c2 = f32x4.add(c2, sqd(v128.load(pa + o, 32), v128.load(pb + o, 32)));
    c3 = f32x4.add(c3, sqd(v128.load(pa + o, 48), v128.load(pb + o, 48)));
  }
  if (i + 4 <= dim) {
    c0 = f32x4.add(c0, sqd(v128.load(pa + (<usize>i << 2)), v128.load(pb + (<usize>i << 2)))); i += 4;
    if (i + 4 <= dim) {
      c1 = f32x4.add(c1, sqd(v128.load(pa + (<usize>i << 2)), v128.load(pb + (<usize>i << 2)))); i += 4;
      if (i + 4 <= dim) {
        c2 = f32x4.add(c2, sqd(v128.load(pa + (<usize>i << 2)), v128.load(pb + (<usize>i << 2)))); i += 4;
      }
    }
  }
  let s = lanes(f32x4.add(f32x4.add(c0, c1), f32x4.add(c2, c3)));
  for (; i < dim; i++) {
    const d = load<f32>(pa + (<usize>i << 2)) - load<f32>(pb + (<usize>i << 2));
    s += d * d;
  }
  return s;
}

// @ts-ignore: decorator
@inline function absd(x: v128, y: v128): v128 {
  return f32x4.abs(f32x4.sub(x, y));
}

// @ts-ignore: decorator
@inline function manhattan(a: u32, b: u32, dim: u32): f32 {
  const pa = <usize>a << 2, pb = <usize>b << 2;
  let c0 = f32x4.splat(0), c1 = f32x4.splat(0), c2 = f32x4.splat(0), c3 = f32x4.splat(0);
  let i: u32 = 0;
  for (; i + 16 <= dim; i += 16) {
    const o = <usize>i << 2;
    c0 = f32x4.add(c0, absd(v128.load(pa + o), v128.load(pb + o)));
    c1 = f32x4.add(c1, absd(v128.load(pa + o, 16), v128.load(pb + o, 16)));
    c2 = f32x4.add(c2, absd(v128.load(pa + o, 32), v128.load(pb + o, 32)));
    c3 = f32x4.add(c3, absd(v128.load(pa + o, 48), v128.load(pb + o, 48)));
  }
  if (i + 4 <= dim) {
    c0 = f32x4.add(c0, absd(v128.load(pa + (<usize>i << 2)), v128.load(pb + (<usize>i << 2)))); i += 4;
    if (i + 4 <= dim) {
      c1 = f32x4.add(c1, absd(v128.load(pa + (<usize>i << 2)), v128.load(pb + (<usize>i << 2)))); i += 4;
      if (i + 4 <= dim) {
        c2 = f32x4.add(c2, absd(v128.load(pa + (<usize>i << 2)), v128.load(pb + (<usize>i << 2)))); i += 4;
      }
    }
  }
  let s = lanes(f32x4.add(f32x4.add(c0, c1), f32x4.add(c2, c3)));
  for (; i < dim; i++) s += Mathf.abs(load<f32>(pa + (<usize>i << 2)) - load<f32>(pb + (<usize>i << 2)));
  return s;
}

/** sqrt of the sum of squares of the `dim` f32 at word `a` (the dot product of a with itself). */
export function norm(a: u32, dim: u32): f32 {
  return Mathf.sqrt(dot(a, a, dim));
}

/** (1 - clamp(cos, -1, 1)) / 2. */
// @ts-ignore: decorator
@inline function cosineDistance(c: f32): f32 {
  let cos = c;
  if (cos > 1) cos = 1;
  if (cos < -1) cos = -1;
  return (<f32>1 - cos) * <f32>0.5;
}

/**
 * Norms in [2^-40, 2^63] take the single-precision path: the largest component's square is
 * a normal f32, and the product of two norms and any dot product of the two stay finite.
 */
const COSINE_NORM_MIN: f32 = <f32>9.094947017729282e-13, COSINE_NORM_MAX: f32 = <f32>9.223372036854775808e18;

// @ts-ignore: decorator
@inline function cosineNormInRange(n: f32): bool {
  return n >= COSINE_NORM_MIN && n <= COSINE_NORM_MAX;
}

/**
 * Cosine distance of the vectors at words a and b with norms na and nb: in single precision
 * when both norms are in range; else (squares past ~1.8e19 overflow in f32, below ~1e-19
 * they vanish; cosine has no magnitude limit) in f64 (cosineWide).
 */
// @ts-ignore: decorator
@inline function cosineAt(a: u32, na: f32, b: u32, nb: f32, dim: u32): f32 {
  if (cosineNormInRange(na) && cosineNormInRange(nb)) return cosineDistance(dot(a, b, dim) / (na * nb));
  return cosineWide(a, b, dim);
}

/** Cosine distance in f64, components in order, rounded to f32 once. */
function cosineWide(a: u32, b: u32, dim: u32): f32 {
  let d: f64 = 0, sa: f64 = 0, sb: f64 = 0;
  for (let i: u32 = 0; i < dim; i++) {
    const x = <f64>fword(a + i), y = <f64>fword(b + i);
    d += x * y;
    sa += x * x;
    sb += y * y;
  }
  const denom = Math.sqrt(sa) * Math.sqrt(sb);
  return cosineDistance(denom > 0 ? <f32>(d / denom) : 0);
}

/** The metric's distance between the vectors at words a and b (norms used by cosine only). */
export function distance(metric: u32, a: u32, an: f32, b: u32, bn: f32, dim: u32): f32 {
  if (metric == METRIC_COSINE) return cosineAt(a, an, b, bn, dim);
  if (metric == METRIC_EUCLIDEAN) return squaredL2(a, b, dim);
  return manhattan(a, b, dim);
}

// ---- Graph access (src/vector/layout.ts) ---------------------------------------------------

const G_DIM: u32 = 1, G_METRIC: u32 = 2, G_M: u32 = 3, G_M0: u32 = 4, G_EFC: u32 = 5, G_RECORD: u32 = 6, G_VEC: u32 = 7, G_CHUNK0: u32 = 13;
const R_CREATED: u32 = 0, R_DELETED: u32 = 1, R_ELEMENT: u32 = 2, R_LEVEL: u32 = 3, R_UPPER: u32 = 4, R_NORM: u32 = 5;
const R_Q_STEP: u32 = 6, R_Q_ERROR: u32 = 7, R_Q_NORM: u32 = 8, R_SQUARES: u32 = 9, R_N0: u32 = 10;
const S_BATCH: u32 = 12, S_BATCH_CAP: u32 = 13, S_WITHIN_RECORDS: u32 = 14;
const E_CHUNK_SHIFT: u32 = 16, W_RANKED: u32 = 0, W_RECORD: u32 = 1;
const S_TAG: u32 = 0, S_VISITED: u32 = 1, S_VISITED_CAP: u32 = 2, S_CAND: u32 = 3, S_RES: u32 = 5, S_OUT: u32 = 7, S_QUERY: u32 = 8, S_SEL: u32 = 10;

// Memory ordering (src/vector/graph.ts header): JS loads the entry point and then the count
// with Atomics.load before calling a search, and passes both in; every word read here
// belongs to a point below that count (written before the count's store, so these plain
// loads are ordered after that acquire) or is a neighbour list / created / deleted word,
// which may race with the writer and is right with any value it can read: every list entry
// is a point ID (those >= count are skipped), list counts are clamped. The writes here go
// to the calling thread's own scratch, except in insert (writer only), which fills the new
// point's lists and links it from its neighbours before JS publishes it.

// @ts-ignore: decorator
@inline function word(i: u32): u32 {
  return load<u32>(<usize>i << 2);
}
// @ts-ignore: decorator
@inline function setWord(i: u32, v: u32): void {
  store<u32>(<usize>i << 2, v);
}
// @ts-ignore: decorator
@inline function fword(i: u32): f32 {
  return load<f32>(<usize>i << 2);
}
// @ts-ignore: decorator
@inline function setF(i: u32, v: f32): void {
  store<f32>(<usize>i << 2, v);
}

/** Word offset of point p's record: chunk c = floor(log2(p + 1)) holds points [2^c - 1, 2^(c+1) - 1). */
// @ts-ignore: decorator
@inline function record(root: u32, p: u32): u32 {
  const c: u32 = 31 - clz<u32>(p + 1);
  return word(root + G_CHUNK0 + c) + (p + 1 - (<u32>1 << c)) * word(root + G_RECORD) + word(root + G_VEC);
}

// @ts-ignore: decorator
@inline function links(root: u32, rec: u32, layer: u32): u32 {
  return layer == 0 ? rec + R_N0 : word(rec + R_UPPER) + (layer - 1) * (word(root + G_M) + 1);
}

// @ts-ignore: decorator
@inline function visible(rec: u32, snapshot: u32): bool {
  const created = word(rec + R_CREATED);
  const deleted = word(rec + R_DELETED);
  return created != 0 && created <= snapshot && (deleted == 0 || snapshot < deleted);
}

// @ts-ignore: decorator
@inline function toPoint(root: u32, q: u32, qn: f32, rec: u32): f32 {
  return distance(word(root + G_METRIC), q, qn, rec - word(root + G_VEC), fword(rec + R_NORM), word(root + G_DIM));
}

// ---- Heaps of [f32 distance, u32 point] pairs (twin.ts) -------------------------------------
// Both orders are total (candidates: distance, point; results: distance, element, point), so
// every correct heap pops the same sequence: these sift with a hole (the moving pair stays in
// locals) and replace the top in one sift where the twins push and pop; outputs are the same.

/** Result order tie-break (equal distances): element, then point. Rare, so not inlined. */
function resTieWorse(root: u32, pa: u32, pb: u32): bool {
  const ea = word(record(root, pa) + R_ELEMENT), eb = word(record(root, pb) + R_ELEMENT);
  return ea != eb ? ea > eb : pa > pb;
}

/** Whether result (da, pa) ranks after (db, pb). */
// @ts-ignore: decorator
@inline function resAfter(root: u32, da: f32, pa: u32, db: f32, pb: u32): bool {
  return da != db ? da > db : resTieWorse(root, pa, pb);
}

// @ts-ignore: decorator
@inline function candBefore(da: f32, pa: u32, db: f32, pb: u32): bool {
  return da < db || (da == db && pa < pb);
}

// @ts-ignore: decorator
@inline function put(h: u32, i: u32, d: f32, p: u32): void {
  setF(h + 2 * i, d);
  setWord(h + 2 * i + 1, p);
}

// @ts-ignore: decorator
@inline function move(h: u32, to: u32, from: u32): void {
  store<u64>(<usize>(h + 2 * to) << 2, load<u64>(<usize>(h + 2 * from) << 2));
}

function candPush(h: u32, n: u32, d: f32, p: u32): u32 {
  let i = n;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (!candBefore(d, p, fword(h + 2 * parent), word(h + 2 * parent + 1))) break;
    move(h, i, parent);
    i = parent;
  }
  put(h, i, d, p);
  return n + 1;
}

/** Sift (d, p) down from the hole at the top of a candidate heap of n pairs. */
// @ts-ignore: decorator
@inline function candSift(h: u32, n: u32, d: f32, p: u32): void {
  let i: u32 = 0;
  while (true) {
    let c: u32 = 2 * i + 1;
    if (c >= n) break;
    let cd = fword(h + 2 * c), cp = word(h + 2 * c + 1);
    if (c + 1 < n) {
      const rd = fword(h + 2 * c + 2), rp = word(h + 2 * c + 3);
      if (candBefore(rd, rp, cd, cp)) { c++; cd = rd; cp = rp; }
    }
    if (!candBefore(cd, cp, d, p)) break;
    put(h, i, cd, cp);
    i = c;
  }
  put(h, i, d, p);
}

function candPop(h: u32, n: u32): u32 {
  n--;
  if (n > 0) candSift(h, n, fword(h + 2 * n), word(h + 2 * n + 1));
  return n;
}

function resPush(root: u32, h: u32, n: u32, d: f32, p: u32): u32 {
  let i = n;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (!resAfter(root, d, p, fword(h + 2 * parent), word(h + 2 * parent + 1))) break;
    move(h, i, parent);
    i = parent;
  }
  put(h, i, d, p);
  return n + 1;
}

/**
 * Whether (da, a) ranks after (db, b) in a max-heap of [distance, id] pairs ordered by
 * distance, ties broken per heap kind: T u8, a search's result heap (ids are points, ties by
 * their elements, then points; ctx = graph root); T u16, withinTop's heap (ids are positions
 * of element IDs at word ctx, ties by those IDs).
 */
// @ts-ignore: decorator
@inline function pairAfter<T>(ctx: u32, da: f32, a: u32, db: f32, b: u32): bool {
  if (sizeof<T>() == 1) return resAfter(ctx, da, a, db, b);
  return da != db ? da > db : word(ctx + a) > word(ctx + b);
}

/** Sift (d, p) down from the hole at the top of a max-heap of n pairs (order: pairAfter<T>). */
function pairSift<T>(ctx: u32, h: u32, n: u32, d: f32, p: u32): void {
  let i: u32 = 0;
  while (true) {
    let c: u32 = 2 * i + 1;
    if (c >= n) break;
    let cd = fword(h + 2 * c), cp = word(h + 2 * c + 1);
    if (c + 1 < n) {
      const rd = fword(h + 2 * c + 2), rp = word(h + 2 * c + 3);
      if (pairAfter<T>(ctx, rd, rp, cd, cp)) { c++; cd = rd; cp = rp; }
    }
    if (!pairAfter<T>(ctx, cd, cp, d, p)) break;
    put(h, i, cd, cp);
    i = c;
  }
  put(h, i, d, p);
}

function resPop(root: u32, h: u32, n: u32): u32 {
  n--;
  if (n > 0) pairSift<u8>(root, h, n, fword(h + 2 * n), word(h + 2 * n + 1));
  return n;
}

/**
 * Add (d, p) to a result heap of n pairs that may hold at most `cap`: pushed while there is
 * room, else it replaces the worst when it ranks before it (= push, then pop the worst).
 */
// @ts-ignore: decorator
@inline function resOffer(root: u32, h: u32, n: u32, cap: u32, d: f32, p: u32): u32 {
  if (n < cap) return resPush(root, h, n, d, p);
  if (resAfter(root, fword(h), word(h + 1), d, p)) pairSift<u8>(root, h, n, d, p);
  return n;
}

function nextTag(s: u32): u32 {
  let tag = word(s + S_TAG) + 1;
  if (tag == 0) {
    memory.fill(<usize>word(s + S_VISITED) << 2, 0, <usize>word(s + S_VISITED_CAP) << 2);
    tag = 1;
  }
  setWord(s + S_TAG, tag);
  return tag;
}

// Search loops specialized per metric (T: u8 cosine, u16 euclidean, u32 manhattan; sizeof<T>()
// is a compile-time constant), so the distance is inlined and a non-cosine search never loads
// a point's norm (the header's cache line) for a point it only measures.
// @ts-ignore: decorator
@inline function pointDistance<T>(q: u32, qn: f32, rec: u32, vec: u32, dim: u32): f32 {
  if (sizeof<T>() == 1) return cosineAt(q, qn, rec - vec, fword(rec + R_NORM), dim);
  if (sizeof<T>() == 2) return squaredL2(q, rec - vec, dim);
  return manhattan(q, rec - vec, dim);
}

let greedyD: f32 = 0;
/** Sum of the words loaded to start cache misses early (kept so the loads stay). */
let touched: u32 = 0;
function greedyT<T>(root: u32, q: u32, qn: f32, cur: u32, curD: f32, layer: u32, count: u32): u32 {
  const mMax = word(root + G_M);
  const vec = word(root + G_VEC), dim = word(root + G_DIM);
  let changed = true;
  while (changed) {
    changed = false;
    const list = links(root, record(root, cur), layer);
    let n = word(list);
    if (n > mMax) n = mMax;
    for (let j: u32 = 0; j < n; j++) {
      const e = word(list + 1 + j);
      if (e >= count) continue;
      const d = pointDistance<T>(q, qn, record(root, e), vec, dim);
      if (d < curD) { curD = d; cur = e; changed = true; }
    }
  }
  greedyD = curD;
  return cur;
}

function layerSearchT<T>(root: u32, s: u32, q: u32, qn: f32, from: u32, starts: u32, ef: u32, layer: u32, count: u32, snapshot: u32): u32 {
  const cand = word(s + S_CAND), res = word(s + S_RES), visited = word(s + S_VISITED);
  const batch = word(s + S_SEL); // 2 * M0 words: free while a layer search runs
  const tag = nextTag(s);
  const mMax = layer == 0 ? word(root + G_M0) : word(root + G_M);
  const vec = word(root + G_VEC), dim = word(root + G_DIM);
  let nc: u32 = 0, nr: u32 = 0;
  for (let i: u32 = 0; i < starts; i++) {
    const p = word(from + 2 * i + 1), d = fword(from + 2 * i);
    if (word(visited + p) == tag) continue;
    setWord(visited + p, tag);
    nc = candPush(cand, nc, d, p);
    if (snapshot == 0 || visible(record(root, p), snapshot)) nr = resOffer(root, res, nr, ef, d, p);
  }
  while (nc > 0) {
    const cd = fword(cand), c = word(cand + 1);
    if (nr >= ef && cd > fword(res)) break;
    nc = candPop(cand, nc);
    const list = links(root, record(root, c), layer);
    let n = word(list);
    if (n > mMax) n = mMax;
    // First the unvisited neighbours (marked now) and a load of every cache line of their
    // vectors: WebAssembly has no prefetch instruction, and these independent loads start
    // all the batch's cache misses at once instead of one vector after another (measured:
    // 0.88x -> 1.09x hnswlib-node's QPS at ef 64; loading only each vector's first line
    // gained nothing).
    let fresh: u32 = 0, touch: u32 = 0;
    for (let j: u32 = 0; j < n; j++) {
      const e = word(list + 1 + j);
      if (e >= count || word(visited + e) == tag) continue;
      setWord(visited + e, tag);
      const rec = record(root, e);
      for (let w: u32 = rec - vec; w < rec; w += 16) touch += word(w);
      setWord(batch + 2 * fresh, e);
      setWord(batch + 2 * fresh + 1, rec);
      fresh++;
    }
    touched += touch;
    for (let j: u32 = 0; j < fresh; j++) {
      const e = word(batch + 2 * j), rec = word(batch + 2 * j + 1);
      const d = pointDistance<T>(q, qn, rec, vec, dim);
      if (nr < ef || d < fword(res)) {
        nc = candPush(cand, nc, d, e);
        if (snapshot == 0 || visible(rec, snapshot)) nr = resOffer(root, res, nr, ef, d, e);
      }
    }
  }
  return nr;
}

function greedy(root: u32, q: u32, qn: f32, cur: u32, curD: f32, layer: u32, count: u32): u32 {
  const metric = word(root + G_METRIC);
  if (metric == METRIC_COSINE) return greedyT<u8>(root, q, qn, cur, curD, layer, count);
  if (metric == METRIC_EUCLIDEAN) return greedyT<u16>(root, q, qn, cur, curD, layer, count);
  return greedyT<u32>(root, q, qn, cur, curD, layer, count);
}

function layerSearch(root: u32, s: u32, q: u32, qn: f32, from: u32, starts: u32, ef: u32, layer: u32, count: u32, snapshot: u32): u32 {
  const metric = word(root + G_METRIC);
  if (metric == METRIC_COSINE) return layerSearchT<u8>(root, s, q, qn, from, starts, ef, layer, count, snapshot);
  if (metric == METRIC_EUCLIDEAN) return layerSearchT<u16>(root, s, q, qn, from, starts, ef, layer, count, snapshot);
  return layerSearchT<u32>(root, s, q, qn, from, starts, ef, layer, count, snapshot);
}

function drainSorted(root: u32, s: u32, n: u32): void {
  const res = word(s + S_RES), out = word(s + S_OUT);
  for (let i = <i32>n - 1; i >= 0; i--) {
    store<u64>(<usize>(out + 2 * <u32>i) << 2, load<u64>(<usize>res << 2));
    resPop(root, res, <u32>i + 1);
  }
}

/** Approximate top-k (twin.ts search): [distance, element] pairs at S_OUT; returns how many. */
export function search(root: u32, s: u32, k: u32, ef: u32, snapshot: u32, count: u32, entry: u32): u32 {
  if (count == 0 || k == 0) return 0;
  const q = word(s + S_QUERY), dim = word(root + G_DIM);
  const qn: f32 = word(root + G_METRIC) == METRIC_COSINE ? norm(q, dim) : 0;
  let cur = entry;
  const erec = record(root, cur);
  let curD = toPoint(root, q, qn, erec);
  for (let layer = word(erec + R_LEVEL); layer > 0; layer--) {
    cur = greedy(root, q, qn, cur, curD, layer, count);
    curD = greedyD;
  }
  const out = word(s + S_OUT);
  setF(out, curD);
  setWord(out + 1, cur);
  const n = layerSearch(root, s, q, qn, out, 1, ef < k ? k : ef, 0, count, snapshot);
  drainSorted(root, s, n);
  const m = n < k ? n : k;
  for (let i: u32 = 0; i < m; i++) setWord(out + 2 * i + 1, word(record(root, word(out + 2 * i + 1)) + R_ELEMENT));
  return m;
}

function searchExactT<T>(root: u32, s: u32, k: u32, snapshot: u32, count: u32): u32 {
  const q = word(s + S_QUERY), dim = word(root + G_DIM), vec = word(root + G_VEC);
  const qn: f32 = sizeof<T>() == 1 ? norm(q, dim) : 0;
  const res = word(s + S_RES);
  let nr: u32 = 0;
  for (let p: u32 = 0; p < count; p++) {
    const rec = record(root, p);
    if (!visible(rec, snapshot)) continue;
    const d = pointDistance<T>(q, qn, rec, vec, dim);
    if (nr < k || d <= fword(res)) nr = resOffer(root, res, nr, k, d, p);
  }
  drainSorted(root, s, nr);
  const out = word(s + S_OUT);
  for (let i: u32 = 0; i < nr; i++) setWord(out + 2 * i + 1, word(record(root, word(out + 2 * i + 1)) + R_ELEMENT));
  return nr;
}

/** Exact top-k (twin.ts searchExact). */
export function searchExact(root: u32, s: u32, k: u32, snapshot: u32, count: u32): u32 {
  if (k == 0) return 0;
  const metric = word(root + G_METRIC);
  if (metric == METRIC_COSINE) return searchExactT<u8>(root, s, k, snapshot, count);
  if (metric == METRIC_EUCLIDEAN) return searchExactT<u16>(root, s, k, snapshot, count);
  return searchExactT<u32>(root, s, k, snapshot, count);
}

// ---- int8 copies (layout.ts: the record's int8 copy; docs/vector.md §3) ----------------------

/** Bytes of an int8 copy: dim in whole cache lines. */
// @ts-ignore: decorator
@inline function compactBytes(dim: u32): u32 {
  return ((dim + 63) >> 6) << 6;
}

/** An f32 no smaller than the non-negative `v` (1e-6 above it before rounding to nearest). */
// @ts-ignore: decorator
@inline function roundUp(v: f64): f32 {
  return <f32>(v * 1.000001);
}

/** max |x_i| of the dim f32 at word x. */
function magnitude(x: u32, dim: u32): f64 {
  let m: f64 = 0;
  for (let i: u32 = 0; i < dim; i++) {
    const a = Math.abs(<f64>fword(x + i));
    if (a > m) m = a;
  }
  return m;
}

// What quantizeTo() measured: ||x - s c|| and ||s c|| (exact in f64 up to rounding), sum x_i^2.
let qError: f64 = 0, qNorm: f64 = 0, qSquares: f64 = 0;

/**
 * The int8 copy of the dim f32 at word x into the bytes at word c (zero past dim):
 * c_i = nearest(x_i / step) with step = f32(max |x_i| / 127); returns step.
 */
function quantizeTo(x: u32, dim: u32, c: u32): f64 {
  const step = <f64><f32>(magnitude(x, dim) / 127);
  const bytes = <usize>c << 2;
  let error: f64 = 0, norm2: f64 = 0, squares: f64 = 0;
  for (let i: u32 = 0; i < dim; i++) {
    const v = <f64>fword(x + i);
    let q: f64 = step > 0 ? nearest<f64>(v / step) : 0;
    if (q > 127) q = 127;
    if (q < -127) q = -127;
    store<i8>(bytes + i, <i8>q);
    const r = v - step * q;
    error += r * r;
    norm2 += (step * q) * (step * q);
    squares += v * v;
  }
  for (let i: u32 = dim; i < compactBytes(dim); i++) store<i8>(bytes + i, 0);
  qError = Math.sqrt(error);
  qNorm = Math.sqrt(norm2);
  qSquares = squares;
  return step;
}

/** Word offset of point p's int8 copy: after its chunk's records, in point order (layout.ts). */
// @ts-ignore: decorator
@inline function compactOf(root: u32, p: u32, words: u32): u32 {
  const c: u32 = 31 - clz<u32>(p + 1);
  return word(root + G_CHUNK0 + c) + (<u32>1 << c) * word(root + G_RECORD) + (p + 1 - (<u32>1 << c)) * words;
}

/** Writer: the int8 copy of point p and its bounds, from its vector. */
export function quantize(root: u32, p: u32): void {
  const dim = word(root + G_DIM), rec = record(root, p);
  const step = quantizeTo(rec - word(root + G_VEC), dim, compactOf(root, p, compactBytes(dim) >> 2));
  setF(rec + R_Q_STEP, <f32>step);
  setF(rec + R_Q_ERROR, roundUp(qError));
  setF(rec + R_Q_NORM, roundUp(qNorm));
  setF(rec + R_SQUARES, <f32>qSquares);
}

/** Integer dot product of two int8 copies of `bytes` bytes (a multiple of 16). */
// @ts-ignore: decorator
@inline function dot8(a: u32, b: u32, bytes: u32): i32 {
  const pa = <usize>a << 2, pb = <usize>b << 2;
  let c0 = i32x4.splat(0), c1 = i32x4.splat(0);
  for (let o: usize = 0; o < <usize>bytes; o += 16) {
    const x = v128.load(pa + o), y = v128.load(pb + o);
    c0 = i32x4.add(c0, i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(x), i16x8.extend_low_i8x16_s(y)));
    c1 = i32x4.add(c1, i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(x), i16x8.extend_high_i8x16_s(y)));
  }
  const c = i32x4.add(c0, c1);
  return i32x4.extract_lane(c, 0) + i32x4.extract_lane(c, 1) + i32x4.extract_lane(c, 2) + i32x4.extract_lane(c, 3);
}

// The query's side of the bound (withinTopT): its int8 step, ||q - t a||, ||q||, sum q_i^2,
// and the slack for the kernels' rounding at this dimension (withinSlack).
let wStep: f64 = 0, wError: f64 = 0, wNorm: f64 = 0, wSquares: f64 = 0, wSlackRelative: f64 = 0, wSlackCosine: f64 = 0;

/**
 * The slack of the bound (beyond) at dimension `dim`: above the f32 kernels' rounding, which
 * grows with the terms each of the 16 partial sums adds: |error| <= (dim / 16 + 5) u sum |t_i|
 * (u = 2^-24), about 2^-24 * 1029 = 6e-5 relative at 16,384. The fixed 2e-5 and 1e-5 covered
 * dimensions up to ~2,600 only.
 */
function withinSlack(dim: u32): void {
  const summed = (<f64>dim / 16 + 8) * 5.960464477539063e-8;
  wSlackRelative = 2e-5 + 4 * summed;
  wSlackCosine = 1e-5 + 2 * summed;
}

/**
 * Whether the point at `rec` is certain to be farther than `worst` (an exact distance this
 * metric's kernel computed) from the query, by its int8 copy: q.x = t s (a.c) + e with
 * |e| <= ||q|| ||x - s c|| + ||q - t a|| ||s c|| (Cauchy-Schwarz), so
 *   euclidean: sum (q_i - x_i)^2 >= ||q||^2 + ||x||^2 - 2 (t s (a.c) + |e|),
 *   cosine:    (1 - cos) / 2 >= (1 - (t s (a.c) + |e|) / (|q| |x|)) / 2,
 * less a slack far above the rounding of the f32 kernels and of the stored f32 words
 * (withinSlack: relative 2e-5 of ||q||^2 + ||x||^2, 1e-5 absolute for cosine, plus the
 * summation error at this dimension). Exact: a point it
 * skips would not have entered the top k (its distance is above the k-th, not tied).
 */
// @ts-ignore: decorator
@inline function beyond<T>(rec: u32, q8: u32, xc: u32, bytes: u32, qn: f32, worst: f32): bool {
  const dot = <f64>dot8(q8, xc, bytes);
  const estimate = wStep * <f64>fword(rec + R_Q_STEP) * dot;
  const error = wNorm * <f64>fword(rec + R_Q_ERROR) + wError * <f64>fword(rec + R_Q_NORM);
  if (sizeof<T>() == 2) {
    const xs = <f64>fword(rec + R_SQUARES);
    return wSquares + xs - 2 * (estimate + error) - wSlackRelative * (wSquares + xs) > <f64>worst;
  }
  // A pair that cosineAt measures in f64 is measured: the slack is that of the f32 path.
  const xn = fword(rec + R_NORM);
  if (!(cosineNormInRange(qn) && cosineNormInRange(xn))) return false;
  const denom = <f64>qn * <f64>xn;
  return (1 - (estimate + error) / denom) * 0.5 - wSlackCosine > <f64>worst;
}


// ---- *_within: exact top-k of given elements ------------------------------------------------
function withinTopT<T>(root: u32, elements: u32, s: u32, n: u32, snapshot: u32, count: u32, k: u32): u32 {
  const q = word(s + S_QUERY), dim = word(root + G_DIM), vec = word(root + G_VEC);
  const qn: f32 = sizeof<T>() == 1 ? norm(q, dim) : 0;
  const batch = word(s + S_BATCH), status = batch + word(s + S_BATCH_CAP), h = word(s + S_RES);
  const slotMask: u32 = (<u32>1 << E_CHUNK_SHIFT) - 1;
  // Cosine and euclidean bound candidates by their int8 copies (beyond); manhattan measures all.
  const bounded = sizeof<T>() != 4;
  const q8 = q + ((dim + 15) & ~15), bytes = compactBytes(dim), compactW = bytes >> 2;
  if (bounded) {
    wStep = quantizeTo(q, dim, q8);
    wError = <f64>roundUp(qError);
    wNorm = <f64>roundUp(Math.sqrt(qSquares));
    wSquares = qSquares;
    withinSlack(dim);
  }
  let nr: u32 = 0, records: u32 = 0;
  for (let i: u32 = 0; i < n; i++) {
    const id = word(batch + i);
    let st = W_RECORD;
    // The chunk pointer is published with a release store (vector-elements.ts): acquire it.
    const chunk = atomic.load<u32>(<usize>(elements + 1 + (id >>> E_CHUNK_SHIFT)) << 2);
    if (chunk != 0) {
      const pair = chunk + 2 * (id & slotMask);
      const p = word(pair) - 1;
      // A pair may be stale or torn: it is used only when its point is published (below the
      // count loaded by the caller), belongs to this element and is visible.
      if (word(pair + 1) == root && p < count) {
        const rec = record(root, p);
        if (word(rec + R_ELEMENT) == id && visible(rec, snapshot)) {
          st = W_RANKED;
          if (!(bounded && nr == k && beyond<T>(rec, q8, compactOf(root, p, compactW), bytes, qn, fword(h)))) {
            const d = pointDistance<T>(q, qn, rec, vec, dim);
            if (nr < k) {
              // Push: sift up from the end.
              let j = nr++;
              while (j > 0) {
                const parent = (j - 1) >> 1;
                if (!pairAfter<u16>(batch, d, i, fword(h + 2 * parent), word(h + 2 * parent + 1))) break;
                move(h, j, parent);
                j = parent;
              }
              put(h, j, d, i);
            } else if (pairAfter<u16>(batch, fword(h), word(h + 1), d, i)) pairSift<u16>(batch, h, nr, d, i);
          }
        }
      }
    }
    setWord(status + i, st);
    records += st; // W_RECORD is 1, W_RANKED 0
  }
  setWord(s + S_WITHIN_RECORDS, records);
  // Heap sort in place: ascending (distance, element) pairs [d, position] at S_RES.
  for (let end = nr; end > 1; end--) {
    const d = fword(h + 2 * (end - 1)), p = word(h + 2 * (end - 1) + 1);
    move(h, end - 1, 0);
    pairSift<u16>(batch, h, end - 1, d, p);
  }
  return nr;
}

/**
 * `*_within` (twin.ts withinTop): of the n element IDs at S_BATCH, those whose point in the
 * graph at `root` holds their vector at `snapshot` (found through the element map at
 * `elements`) get status W_RANKED, the others W_RECORD (u32 statuses after the IDs); the k
 * nearest of the ranked, ascending by (distance, element), go to S_RES as pairs
 * [distance, position in the batch]. `count` is the graph's point count, loaded by the
 * caller with an acquire. Returns how many pairs.
 */
export function withinTop(root: u32, elements: u32, s: u32, n: u32, snapshot: u32, count: u32, k: u32): u32 {
  if (k == 0) return 0;
  const metric = word(root + G_METRIC);
  if (metric == METRIC_COSINE) return withinTopT<u8>(root, elements, s, n, snapshot, count, k);
  if (metric == METRIC_EUCLIDEAN) return withinTopT<u16>(root, elements, s, n, snapshot, count, k);
  return withinTopT<u32>(root, elements, s, n, snapshot, count, k);
}

export function visibleCount(root: u32, snapshot: u32, count: u32): u32 {
  let n: u32 = 0;
  for (let p: u32 = 0; p < count; p++) if (visible(record(root, p), snapshot)) n++;
  return n;
}

function select(root: u32, c: u32, n: u32, m: u32, out: u32): u32 {
  if (n <= m) {
    for (let i: u32 = 0; i < n; i++) setWord(out + i, word(c + 2 * i + 1));
    return n;
  }
  const vec = word(root + G_VEC), metric = word(root + G_METRIC), dim = word(root + G_DIM);
  let kept: u32 = 0;
  for (let i: u32 = 0; i < n && kept < m; i++) {
    const p = word(c + 2 * i + 1), d = fword(c + 2 * i);
    const rec = record(root, p);
    let good = true;
    for (let j: u32 = 0; j < kept; j++) {
      const r = record(root, word(out + j));
      if (distance(metric, rec - vec, fword(rec + R_NORM), r - vec, fword(r + R_NORM), dim) < d) { good = false; break; }
    }
    if (good) setWord(out + kept++, p);
  }
  return kept;
}

function sortPairs(c: u32, n: u32): void {
  for (let i: i32 = 1; i < <i32>n; i++) {
    const d = fword(c + 2 * <u32>i), p = word(c + 2 * <u32>i + 1);
    let j: i32 = i - 1;
    while (j >= 0 && (fword(c + 2 * <u32>j) > d || (fword(c + 2 * <u32>j) == d && word(c + 2 * <u32>j + 1) > p))) {
      store<u64>(<usize>(c + 2 * <u32>j + 2) << 2, load<u64>(<usize>(c + 2 * <u32>j) << 2));
      j--;
    }
    setF(c + 2 * <u32>(j + 1), d);
    setWord(c + 2 * <u32>(j + 1) + 1, p);
  }
}

function link(root: u32, s: u32, e: u32, p: u32, layer: u32): void {
  const erec = record(root, e);
  const list = links(root, erec, layer);
  const mMax = layer == 0 ? word(root + G_M0) : word(root + G_M);
  const n = word(list);
  if (n < mMax) {
    setWord(list + 1 + n, p);
    atomic.store<u32>(<usize>list << 2, n + 1);
    return;
  }
  const vec = word(root + G_VEC), metric = word(root + G_METRIC), dim = word(root + G_DIM);
  const sel = word(s + S_SEL);
  const en = fword(erec + R_NORM);
  // Start the cache misses of all the list's vectors at once (see layerSearchT).
  let touch: u32 = 0;
  for (let j: u32 = 0; j < n; j++) {
    const xr = record(root, word(list + 1 + j));
    for (let w: u32 = xr - vec; w < xr; w += 16) touch += word(w);
  }
  touched += touch;
  for (let j: u32 = 0; j <= n; j++) {
    const x = j < n ? word(list + 1 + j) : p;
    const xr = record(root, x);
    setF(sel + 2 * j, distance(metric, erec - vec, en, xr - vec, fword(xr + R_NORM), dim));
    setWord(sel + 2 * j + 1, x);
  }
  sortPairs(sel, n + 1);
  const kept = sel + 2 * (n + 1);
  const m = select(root, sel, n + 1, mMax, kept);
  for (let j: u32 = 0; j < m; j++) setWord(list + 1 + j, word(kept + j));
  atomic.store<u32>(<usize>list << 2, m);
}

/** Writer: link the written, unpublished point p into the graph (twin.ts insert). */
export function insert(root: u32, s: u32, p: u32, entry: u32, top: u32): void {
  const prec = record(root, p);
  const q = prec - word(root + G_VEC), qn = fword(prec + R_NORM);
  const level = word(prec + R_LEVEL);
  const m = word(root + G_M), efc = word(root + G_EFC);
  let cur = entry;
  let curD = toPoint(root, q, qn, record(root, cur));
  for (let layer = top; layer > level; layer--) {
    cur = greedy(root, q, qn, cur, curD, layer, p);
    curD = greedyD;
  }
  const out = word(s + S_OUT), sel = word(s + S_SEL);
  setF(out, curD);
  setWord(out + 1, cur);
  let starts: u32 = 1;
  for (let layer = <i32>(level < top ? level : top); layer >= 0; layer--) {
    const n = layerSearch(root, s, q, qn, out, starts, efc, <u32>layer, p, 0);
    drainSorted(root, s, n);
    const kept = select(root, out, n, m, sel);
    const list = links(root, prec, <u32>layer);
    for (let j: u32 = 0; j < kept; j++) setWord(list + 1 + j, word(sel + j));
    setWord(list, kept);
    for (let j: u32 = 0; j < kept; j++) link(root, s, word(list + 1 + j), p, <u32>layer);
    starts = n;
  }
}
