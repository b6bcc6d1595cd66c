// Value semantics for the reference interpreter, written directly from
// /work/shared/protocol/values.md: equality (§7.1), predicate comparison (§7.2),
// the total sort order (§8), plain rendering (§3), and small helpers.
//
// Clarity over speed: every function is a direct transcription of one table.
import { DateTime, F32, StringArray, tagOf, type Value, type ValueTag } from '../../src/protocol/value.js';

/** A plain response value: bigint for integer tokens, number for the rest, Map for objects. */
export type Plain = null | boolean | bigint | number | string | Plain[] | Map<string, Plain>;

export class RefError extends Error {
  constructor(readonly code: string, msg: string, readonly status: number) {
    super(msg);
  }
}

/** A run-time query error: 500 invalid_query. */
export const queryError = (msg: string) => new RefError('invalid_query', `db error: Query error: ${msg}`, 500);
/** A planning error: always 400. */
export const planError = (code: string, msg: string) => new RefError(code, `planner error: ${msg}`, 400);

// ------------------------------------------------------------------ numbers

export function isNumeric(v: Value): v is bigint | number | F32 {
  return typeof v === 'bigint' || typeof v === 'number' || v instanceof F32;
}

function numberOf(v: bigint | number | F32): bigint | number {
  return v instanceof F32 ? v.value : v;
}

/** Exact comparison of two mathematical values; undefined when a NaN is involved. */
export function compareExact(a: bigint | number, b: bigint | number): -1 | 0 | 1 | undefined {
  if (typeof a === 'number' && Number.isNaN(a)) return undefined;
  if (typeof b === 'number' && Number.isNaN(b)) return undefined;
  if (typeof a === 'number' && typeof b === 'number') return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'bigint' && typeof b === 'bigint') return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'bigint') {
    const r = compareExact(b, a);
    return r === undefined ? undefined : (-r as -1 | 0 | 1);
  }
  // a is a number, b a bigint.
  const x = a as number;
  const y = b as bigint;
  if (x === Infinity) return 1;
  if (x === -Infinity) return -1;
  const floor = Math.floor(x);
  const fb = BigInt(floor);
  if (fb < y) return -1;
  if (fb > y) return 1;
  return x > floor ? 1 : 0;
}

/** Double-precision conversion used by arithmetic (values.md §5). */
export function toDouble(v: bigint | number | F32): number {
  const n = numberOf(v);
  return typeof n === 'bigint' ? Number(n) : n;
}

// ------------------------------------------------------------------ bytes-wise strings

const utf8 = new TextEncoder();

/** Byte-wise (UTF-8) comparison of two strings. */
export function compareStrings(a: string, b: string): -1 | 0 | 1 {
  if (a === b) return 0;
  const r = Buffer.compare(utf8.encode(a), utf8.encode(b));
  return r < 0 ? -1 : r > 0 ? 1 : 0;
}

export function sortedKeys(m: Map<string, unknown>): string[] {
  return [...m.keys()].sort(compareStrings);
}

// ------------------------------------------------------------------ equality (§7.1)

/** Equality as used by eq/neq/has/edge_has/is_in. Never throws. */
export function valuesEqual(a: Value, b: Value): boolean {
  if (isNumeric(a) && isNumeric(b)) return compareExact(numberOf(a), numberOf(b)) === 0;
  const ta = tagOf(a);
  if (ta !== tagOf(b)) return false;
  switch (ta) {
    case 'null': return true;
    case 'bool': case 'string': return a === b;
    case 'date_time': return (a as DateTime).ms === (b as DateTime).ms;
    case 'bytes': case 'i64_array': case 'f64_array': case 'f32_array': {
      const x = a as ArrayLike<number | bigint>;
      const y = b as ArrayLike<number | bigint>;
      if (x.length !== y.length) return false;
      for (let i = 0; i < x.length; i++) if (!(x[i] === y[i])) return false; // NaN !== NaN, -0 === 0
      return true;
    }
    case 'string_array': {
      const x = (a as StringArray).items;
      const y = (b as StringArray).items;
      return x.length === y.length && x.every((s, i) => s === y[i]);
    }
    case 'array': {
      const x = a as Value[];
      const y = b as Value[];
      return x.length === y.length && x.every((v, i) => structurallyEqual(v, y[i]!));
    }
    case 'object': {
      const x = a as Map<string, Value>;
      const y = b as Map<string, Value>;
      if (x.size !== y.size) return false;
      for (const [k, v] of x) {
        if (!y.has(k) || !structurallyEqual(v, y.get(k)!)) return false;
      }
      return true;
    }
    default: return false;
  }
}

/** Inside arrays/objects: the variant tags must agree too (i64 1 inside ≠ f64 1.0 inside). */
function structurallyEqual(a: Value, b: Value): boolean {
  return tagOf(a) === tagOf(b) && valuesEqual(a, b);
}

// ------------------------------------------------------------------ comparison (§7.2)

/** Ordering for gt/gte/lt/lte/between; undefined = not comparable (the atom is false). */
export function compareForPredicate(a: Value, b: Value): -1 | 0 | 1 | undefined {
  if (isNumeric(a) && isNumeric(b)) return compareExact(numberOf(a), numberOf(b));
  if (a instanceof DateTime && b instanceof DateTime) return a.ms < b.ms ? -1 : a.ms > b.ms ? 1 : 0;
  if (typeof a === 'string' && typeof b === 'string') return compareStrings(a, b);
  return undefined;
}

// ------------------------------------------------------------------ total order (§8)

const familyRank: Record<ValueTag, number> = {
  null: 0, bool: 1, i64: 2, f64: 2, f32: 2, date_time: 3, string: 4, bytes: 5, i64_array: 6,
  f64_array: 7, f32_array: 8, string_array: 9, array: 10, object: 11,
};

/** IEEE 754 totalOrder key of a double (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN). */
function totalOrderKey(x: number): bigint {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const bits = view.getBigUint64(0);
  const magnitude = bits & ((1n << 63n) - 1n);
  return bits >> 63n === 1n ? -magnitude - 1n : magnitude;
}

function cmp<T>(a: T, b: T): -1 | 0 | 1 {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Lexicographic element by element, then by length. */
function compareSequences<T>(x: ArrayLike<T>, y: ArrayLike<T>, each: (a: T, b: T) => number): number {
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) {
    const r = each(x[i]!, y[i]!);
    if (r !== 0) return r;
  }
  return cmp(x.length, y.length);
}

/** The total order of values.md §8 steps 2-3 (present values only, ascending). */
export function totalCompare(a: Value, b: Value): number {
  const ta = tagOf(a);
  const tb = tagOf(b);
  const fa = familyRank[ta];
  const fb = familyRank[tb];
  if (fa !== fb) return cmp(fa, fb);
  switch (ta) {
    case 'null': return 0;
    case 'bool': return cmp(a as boolean, b as boolean);
    case 'i64': case 'f64': case 'f32': {
      const x = numberOf(a as bigint | number | F32);
      const y = numberOf(b as bigint | number | F32);
      const xNaN = typeof x === 'number' && Number.isNaN(x);
      const yNaN = typeof y === 'number' && Number.isNaN(y);
      if (xNaN || yNaN) return cmp(xNaN ? 1 : 0, yNaN ? 1 : 0); // NaN after every other number
      return compareExact(x, y)!;
    }
    case 'date_time': return cmp((a as DateTime).ms, (b as DateTime).ms);
    case 'string': return compareStrings(a as string, b as string);
    case 'bytes': case 'i64_array': return compareSequences(a as ArrayLike<number | bigint>, b as ArrayLike<number | bigint>, cmp);
    case 'f64_array': case 'f32_array':
      return compareSequences(a as ArrayLike<number>, b as ArrayLike<number>, (x, y) => cmp(totalOrderKey(x), totalOrderKey(y)));
    case 'string_array': return compareSequences((a as StringArray).items, (b as StringArray).items, compareStrings);
    case 'array': return compareSequences(a as Value[], b as Value[], totalCompare);
    case 'object': {
      const x = a as Map<string, Value>;
      const y = b as Map<string, Value>;
      const kx = sortedKeys(x);
      const ky = sortedKeys(y);
      const n = Math.min(kx.length, ky.length);
      for (let i = 0; i < n; i++) {
        const rk = compareStrings(kx[i]!, ky[i]!);
        if (rk !== 0) return rk;
        const rv = totalCompare(x.get(kx[i]!)!, y.get(ky[i]!)!);
        if (rv !== 0) return rv;
      }
      return cmp(kx.length, ky.length);
    }
  }
}

/** §8 step 1 included: `undefined` (missing) sorts before every present value. */
export function compareSortKeys(a: Value | undefined, b: Value | undefined): number {
  if (a === undefined || b === undefined) return cmp(a === undefined ? 0 : 1, b === undefined ? 0 : 1);
  return totalCompare(a, b);
}

// ------------------------------------------------------------------ rendering (§3)

/** 0000-01-01T00:00:00.000Z .. 9999-12-31T23:59:59.999Z: RFC 3339 needs a four-digit year. */
const DATE_MIN = Date.parse('0000-01-01T00:00:00.000Z');
const DATE_MAX = Date.parse('9999-12-31T23:59:59.999Z');

export function formatDateTime(ms: number): string {
  if (!Number.isInteger(ms) || ms < DATE_MIN || ms > DATE_MAX) {
    throw new RefError('response_serialization_error', 'json serialization error: date-time out of range', 500);
  }
  return new Date(ms).toISOString();
}

function renderFloat(x: number): Plain {
  return Number.isFinite(x) ? x : null;
}

/** A stored value as plain response JSON. */
export function renderValue(v: Value): Plain {
  switch (tagOf(v)) {
    case 'null': return null;
    case 'bool': case 'string': case 'i64': return v as boolean | string | bigint;
    case 'f64': return renderFloat(v as number);
    case 'f32': return renderFloat((v as F32).value);
    case 'date_time': return formatDateTime((v as DateTime).ms);
    case 'bytes': return [...(v as Uint8Array)].map((b) => BigInt(b));
    case 'i64_array': return [...(v as BigInt64Array)];
    case 'f64_array': case 'f32_array': return [...(v as Float64Array | Float32Array)].map(renderFloat);
    case 'string_array': return [...(v as StringArray).items];
    case 'array': return (v as Value[]).map(renderValue);
    case 'object': return renderObject(v as Map<string, Value>);
  }
}

/** An object with members sorted byte-wise by key. */
export function renderObject(m: Map<string, Value>): Map<string, Plain> {
  const out = new Map<string, Plain>();
  for (const k of sortedKeys(m)) out.set(k, renderValue(m.get(k)!));
  return out;
}

export function sortedPlainObject(entries: [string, Plain][]): Map<string, Plain> {
  const m = new Map(entries);
  const out = new Map<string, Plain>();
  for (const k of sortedKeys(m)) out.set(k, m.get(k)!);
  return out;
}

// ------------------------------------------------------------------ identity keys

/** A text that is equal for two values exactly when they are identical (same variants). */
export function identityKey(v: Value): string {
  const t = tagOf(v);
  switch (t) {
    case 'null': return 'null';
    case 'bool': case 'i64': case 'f64': return `${t}:${String(v)}`;
    case 'f32': return `f32:${(v as F32).value}`;
    case 'date_time': return `date_time:${(v as DateTime).ms}`;
    case 'string': return `string:${JSON.stringify(v)}`;
    case 'bytes': case 'i64_array': case 'f64_array': case 'f32_array':
      return `${t}:[${Array.from(v as ArrayLike<number | bigint>).map(String).join(',')}]`;
    case 'string_array': return `string_array:${JSON.stringify((v as StringArray).items)}`;
    case 'array': return `array:[${(v as Value[]).map(identityKey).join(',')}]`;
    case 'object': {
      const m = v as Map<string, Value>;
      return `object:{${sortedKeys(m).map((k) => `${JSON.stringify(k)}:${identityKey(m.get(k)!)}`).join(',')}}`;
    }
  }
}

// ------------------------------------------------------------------ display text (group keys)

/**
 * A double in plain decimal without exponent, shortest round-trip digits, and without a
 * trailing ".0" (operations.md §12.10: "floats in shortest decimal without a trailing .0").
 */
export function plainDecimal(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return 'inf';
  if (x === -Infinity) return '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0' : '0';
  const sign = x < 0 ? '-' : '';
  const [mantissa, expText] = Math.abs(x).toExponential().split('e') as [string, string];
  const digits = mantissa.replace('.', '');
  const point = Number(expText) + 1; // decimal point position relative to the digits
  if (point <= 0) return `${sign}0.${'0'.repeat(-point)}${digits}`;
  if (point >= digits.length) return `${sign}${digits}${'0'.repeat(point - digits.length)}`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}

/** Display text of a resolved value for `group`/`group_count` (undefined = absent). */
export function displayText(v: Value | undefined): string {
  if (v === undefined || v === null) return 'null';
  const t = tagOf(v);
  switch (t) {
    case 'bool': return v ? 'true' : 'false';
    case 'i64': return (v as bigint).toString();
    case 'f64': return plainDecimal(v as number);
    case 'f32': return plainDecimal((v as F32).value);
    case 'string': return v as string;
    case 'date_time': return formatDateTime((v as DateTime).ms);
    default: {
      const length = t === 'object' ? (v as Map<string, Value>).size
        : t === 'string_array' ? (v as StringArray).items.length
        : (v as ArrayLike<unknown>).length;
      return `<${t}:${length}>`;
    }
  }
}

/** Rust-style `str::parse::<f64>()` used by aggregate_by for numeric strings. */
export function parseNumericString(s: string): number | undefined {
  if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(s)) return Number(s);
  if (/^[+-]?(inf|infinity)$/i.test(s)) return s.startsWith('-') ? -Infinity : Infinity;
  if (/^[+-]?nan$/i.test(s)) return NaN;
  return undefined;
}
