// What a vector index accepts (indexes.md §7.3, §8.3): stored values and run-time query
// vectors become Float32Arrays of the index's dimension, or fail with the code the protocol
// names. Pure functions; the writer calls them on every indexed write, readers on every
// search's query vector.
import { dbError, queryError, SvcError } from '../protocol/errors.js';
import { F32, tagOf, type Value } from '../protocol/value.js';
import type { Metric } from '../protocol/index-spec.js';

/** The largest finite single-precision value (F of indexes.md §8.3). */
const F32_MAX = 3.4028234663852886e38;

/** The largest f32 not above x (x > 0): Math.fround rounds to nearest, which may go up. */
function f32AtMost(x: number): number {
  const f = Math.fround(x);
  if (f <= x) return f;
  // One step down in the f32 encoding (positive finite f: its bits minus one).
  const bits = new Float32Array([f]);
  new Uint32Array(bits.buffer)[0]! -= 1;
  return bits[0]!;
}

/**
 * Per-component magnitude limit (inclusive) that keeps every distance finite in single
 * precision: euclidean √(F / 8d), manhattan F / 4d, cosine none (indexes.md §8.3).
 */
export function componentLimit(metric: Metric, dimension: number): number {
  if (metric === 'euclidean') return f32AtMost(Math.sqrt(F32_MAX / (8 * dimension)));
  if (metric === 'manhattan') return f32AtMost(F32_MAX / (4 * dimension));
  return Infinity;
}

/** The numeric components of a numeric array value as doubles, or null when it is not one. */
function numericComponents(v: Value): ArrayLike<number> | null {
  if (v instanceof Float32Array || v instanceof Float64Array) return v;
  if (v instanceof BigInt64Array) return Array.from(v, Number);
  if (Array.isArray(v)) {
    const out = new Array<number>(v.length);
    for (let i = 0; i < v.length; i++) {
      const item = v[i]!;
      if (typeof item === 'number') out[i] = item;
      else if (typeof item === 'bigint') out[i] = Number(item);
      else if (item instanceof F32) out[i] = item.value;
      else return null;
    }
    return out;
  }
  return null;
}

/**
 * Checks against the index definition, in the order a write meets them: length, then each
 * component (finite, within the metric's limit, finite once in single precision), then the
 * cosine zero norm. All are `400` (errors.md: caused by a caller-supplied vector).
 */
function checkedVector(components: ArrayLike<number>, dimension: number, metric: Metric): Float32Array {
  if (components.length !== dimension) {
    throw dbError('invalid_vector_dimension', `Invalid vector dimension: expected ${dimension}, got ${components.length}`);
  }
  const limit = componentLimit(metric, dimension);
  const out = new Float32Array(dimension);
  let nonZero = false;
  for (let i = 0; i < dimension; i++) {
    const x = components[i]!;
    if (!Number.isFinite(x)) throw dbError('invalid_vector_component', `Invalid vector component at index ${i}: ${x} is not finite`);
    if (Math.abs(x) > limit) {
      throw dbError('vector_component_magnitude_exceeded', `Vector component magnitude exceeded at index ${i}: |${x}| is above the ${metric} limit ${limit} for dimension ${dimension}`);
    }
    const f = Math.fround(x);
    if (!Number.isFinite(f)) throw dbError('invalid_vector_component', `Invalid vector component at index ${i}: ${x} is not finite in single precision`);
    out[i] = f;
    if (f !== 0) nonZero = true;
  }
  // Only the zero vector has no direction: tiny components (squares that vanish in f32) are
  // measured in f64 by the kernels (docs/vector.md §3).
  if (metric === 'cosine' && !nonZero) throw dbError('zero_norm_cosine_vector', 'Zero-norm vector under the cosine metric');
  return out;
}

/** A stored value under a vector index (§8.3): a numeric array, else `500 invalid_query`. */
export function storedVector(v: Value, dimension: number, metric: Metric): Float32Array {
  const components = numericComponents(v);
  if (components === null) {
    throw new SvcError('invalid_query', `db error: Query error: a vector index accepts f32_array, f64_array, i64_array or an array of numbers, got ${tagOf(v)}`);
  }
  return checkedVector(components, dimension, metric);
}

/**
 * A query vector evaluated at run time (§7.3): any non-empty numeric array of finite
 * numbers (else `500 invalid_query`), then checked against the index like a stored value.
 */
export function queryVector(v: Value, dimension: number, metric: Metric): Float32Array {
  const components = numericComponents(v);
  if (components === null) throw queryError(`the query vector must be a numeric array, got ${tagOf(v)}`);
  if (components.length === 0) throw queryError('the query vector is empty');
  for (let i = 0; i < components.length; i++) {
    if (!Number.isFinite(components[i]!)) throw queryError(`the query vector's component ${i} is not finite`);
  }
  return checkedVector(components, dimension, metric);
}

/** Whether a planning-time literal is an acceptable query vector (§7.2 step 4): a non-empty f32_array of finite numbers. */
export function acceptableLiteralVector(v: Value): boolean {
  if (!(v instanceof Float32Array) || v.length === 0) return false;
  for (let i = 0; i < v.length; i++) if (!Number.isFinite(v[i]!)) return false;
  return true;
}
