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

function dot(a: u32, b: u32, dim: u32): f32 {
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

function squaredL2(a: u32, b: u32, dim: u32): f32 {
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

function manhattan(a: u32, b: u32, dim: u32): f32 {
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

// @ts-ignore: decorator
@inline function cosineFrom(d: f32, na: f32, nb: f32): f32 {
  const denom = na * nb;
  let cos: f32 = denom > 0 ? d / denom : 0;
  if (cos != cos) cos = 0;
  if (cos > 1) cos = 1;
  if (cos < -1) cos = -1;
  return (<f32>1 - cos) * <f32>0.5;
}

/** The metric's distance between the vectors at words a and b (norms used by cosine only). */
export function distance(metric: u32, a: u32, an: f32, b: u32, bn: f32, dim: u32): f32 {
  if (metric == METRIC_COSINE) return cosineFrom(dot(a, b, dim), an, bn);
  if (metric == METRIC_EUCLIDEAN) return squaredL2(a, b, dim);
  return manhattan(a, b, dim);
}
