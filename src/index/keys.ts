// Index keys (indexes.md §8.1-§8.2): the 64-bit key an indexed value is filed under, and
// which values an index accepts.
//
// A key is (k0, k1), two u32 words, compared as one unsigned 64-bit number. It is NOT the
// value: readers re-check every candidate against the query's predicate on the element's
// visible version (exec/index-scan.ts), so a key only has to be
//   equality lane: equal for equal values (values.md §7.1): a 64-bit hash of a canonical
//                  form; distinct values share a key with probability ~2^-64, and the
//                  re-check removes such a stranger;
//   range lane:    monotone: a < b (values.md §7.2) implies key(a) <= key(b), and all
//                  numerics < all date_times < all strings (the order of §8.2). A range
//                  [lo, hi] of values is then found among the keys [key(lo), key(hi)].
import { SvcError } from '../protocol/errors.js';
import { DateTime, F32, StringArray, type Value } from '../protocol/value.js';
import { limits } from '../limits.js';

export interface IndexKey { k0: number; k1: number }

const TWO_32 = 4294967296;
const TWO_53 = 9007199254740992;
const f64 = new Float64Array(1);
const f64Words = new Uint32Array(f64.buffer);
// Little-endian hosts (all Node targets): word 1 holds the sign and exponent.
const HI = 1, LO = 0;

// ------------------------------------------------------------------ equality lane

/** Two independent 32-bit lanes of a multiplicative hash over u32 words. */
class Hasher {
  a = 0;
  b = 0;
  bytes = 0;

  reset(): Hasher {
    this.a = 0x9e3779b9 | 0;
    this.b = 0x85ebca6b | 0;
    this.bytes = 0;
    return this;
  }

  word(w: number): void {
    this.a = Math.imul(this.a ^ w, 0x01000193) ^ (this.a >>> 15);
    this.b = Math.imul((this.b + w) | 0, 0x2c1b3c6d) ^ (this.b >>> 13);
    this.bytes += 4;
  }

  finish(out: IndexKey): IndexKey {
    let a = this.a ^ this.bytes, b = this.b ^ Math.imul(this.bytes, 0x27d4eb2f);
    a = Math.imul(a ^ (a >>> 16), 0x85ebca6b); a = Math.imul(a ^ (a >>> 13), 0xc2b2ae35); a ^= a >>> 16;
    b = Math.imul(b ^ (b >>> 15), 0x2c1b3c6d); b = Math.imul(b ^ (b >>> 12), 0x297a2d39); b ^= b >>> 15;
    out.k0 = (a ^ Math.imul(b, 0x9e3779b1)) >>> 0;
    out.k1 = b >>> 0;
    return out;
  }
}

const enum EqTag { Bool = 1, Int = 2, Float = 3, BigInt = 4, DateTime = 5, String = 6, Bytes = 7, I64Array = 8, F64Array = 9, F32Array = 10, StringArray = 11 }

/**
 * A number's canonical form, so that equal numbers hash alike whatever their variant:
 * integers up to 2^53 as integers (-0 is 0), other values as their f64 bits, and an i64
 * that no f64 holds exactly by its own 64 bits (no f64 can equal it).
 */
function hashNumber(h: Hasher, v: number | bigint): void {
  let x: number;
  if (typeof v === 'bigint') {
    if (v >= -TWO_53 && v <= TWO_53) x = Number(v);
    else {
      x = Number(v);
      if (BigInt(x) !== v) {
        h.word(EqTag.BigInt);
        h.word(Number(BigInt.asUintN(32, v >> 32n)));
        h.word(Number(BigInt.asUintN(32, v)));
        return;
      }
    }
  } else x = v;
  if (Number.isInteger(x) && x >= -TWO_53 && x <= TWO_53) {
    h.word(EqTag.Int);
    h.word(Math.floor(x / TWO_32) | 0);
    h.word(x >>> 0);
    return;
  }
  f64[0] = x;
  h.word(EqTag.Float);
  h.word(f64Words[HI]!);
  h.word(f64Words[LO]!);
}

function hashString(h: Hasher, s: string): void {
  h.word(s.length);
  for (let i = 0; i < s.length; i++) h.word(s.charCodeAt(i));
}

/**
 * UTF-8 bytes of `s`. Three per UTF-16 unit is an upper bound that needs no pass over the
 * string: only a string that might pass the key limit by it is measured.
 */
function utf8Bytes(s: string): number {
  return s.length * 3 <= limits.indexKeyBytesMax ? s.length * 3 : Buffer.byteLength(s, 'utf8');
}

/** Bytes of a key's canonical form (strings in UTF-8): what limits.indexKeyBytesMax bounds. */
function checkSize(bytes: number, unique: boolean): void {
  if (bytes > limits.indexKeyBytesMax) {
    throw new SvcError('invalid_secondary_index_value', `secondary index value of ${bytes} bytes exceeds the index key limit of ${limits.indexKeyBytesMax} bytes${unique ? ' (unique index)' : ''}`);
  }
}

/**
 * The equality key of `v`, written into `out`; null when `v` is null (not indexed). Generic
 * arrays and objects cannot be indexed: invalid_secondary_index_value, or
 * unsupported_unique_index_value_type under a unique index.
 */
const hasher = new Hasher();

export function equalityKey(v: Value, unique: boolean, out: IndexKey): IndexKey | null {
  const h = hasher.reset();
  switch (typeof v) {
    case 'boolean': h.word(EqTag.Bool); h.word(v ? 1 : 0); return h.finish(out);
    case 'bigint': case 'number': hashNumber(h, v); return h.finish(out);
    case 'string': checkSize(utf8Bytes(v), unique); h.word(EqTag.String); hashString(h, v); return h.finish(out);
  }
  if (v === null) return null;
  if (v instanceof F32) { hashNumber(h, v.value); return h.finish(out); }
  if (v instanceof DateTime) { h.word(EqTag.DateTime); hashNumber(h, v.ms); return h.finish(out); }
  if (v instanceof Uint8Array) {
    checkSize(v.length, unique);
    h.word(EqTag.Bytes); h.word(v.length);
    for (let i = 0; i < v.length; i++) h.word(v[i]!);
    return h.finish(out);
  }
  if (v instanceof BigInt64Array || v instanceof Float64Array || v instanceof Float32Array) {
    checkSize(v.length * 8, unique);
    h.word(v instanceof BigInt64Array ? EqTag.I64Array : v instanceof Float64Array ? EqTag.F64Array : EqTag.F32Array);
    h.word(v.length);
    for (let i = 0; i < v.length; i++) hashNumber(h, v[i]!);
    return h.finish(out);
  }
  if (v instanceof StringArray) {
    let bytes = 0;
    for (const s of v.items) bytes += s.length * 3 + 4;
    if (bytes > limits.indexKeyBytesMax) {
      bytes = 0;
      for (const s of v.items) bytes += Buffer.byteLength(s, 'utf8') + 4;
    }
    checkSize(bytes, unique);
    h.word(EqTag.StringArray); h.word(v.items.length);
    for (const s of v.items) hashString(h, s);
    return h.finish(out);
  }
  const what = Array.isArray(v) ? 'array' : 'object';
  if (unique) throw new SvcError('unsupported_unique_index_value_type', `unsupported unique index value type: ${what} values cannot be indexed by a unique index`);
  throw new SvcError('invalid_secondary_index_value', `invalid secondary index value: ${what} values cannot be indexed by an equality index`);
}

// ------------------------------------------------------------------ range lane

/** The range domains in their order (indexes.md §8.2), as the key's top two bits. */
export const enum RangeDomain { Numeric = 1, DateTime = 2, String = 3 }

/** Monotone 62-bit image of a double (-0 and 0 alike), under the domain bits. */
function orderedDouble(domain: RangeDomain, x: number, out: IndexKey): IndexKey {
  f64[0] = x === 0 ? 0 : x;
  let hi = f64Words[HI]!, lo = f64Words[LO]!;
  if (hi >>> 31) { hi = ~hi >>> 0; lo = ~lo >>> 0; } else hi = (hi | 0x80000000) >>> 0;
  // Drop the two lowest bits to make room for the domain: still monotone (non-decreasing).
  out.k1 = ((lo >>> 2) | ((hi & 3) << 30)) >>> 0;
  out.k0 = ((hi >>> 2) | (domain << 30)) >>> 0;
  return out;
}

/** First 62 bits of the string's UTF-8 bytes, zero-padded: monotone in code point order. */
function orderedString(s: string, out: IndexKey): IndexKey {
  let hi = 0, lo = 0, n = 0;
  const put = (byte: number) => {
    if (n < 4) hi = (hi | (byte << (24 - 8 * n))) >>> 0;
    else lo = (lo | (byte << (24 - 8 * (n - 4)))) >>> 0;
    n++;
  };
  for (let i = 0; i < s.length && n < 8; i++) {
    let c = s.charCodeAt(i);
    if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d < 0xe000) { c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00); i++; }
    }
    if (c < 0x80) put(c);
    else if (c < 0x800) { put(0xc0 | (c >> 6)); if (n < 8) put(0x80 | (c & 63)); }
    else if (c < 0x10000) { put(0xe0 | (c >> 12)); if (n < 8) put(0x80 | ((c >> 6) & 63)); if (n < 8) put(0x80 | (c & 63)); }
    else {
      put(0xf0 | (c >> 18));
      if (n < 8) put(0x80 | ((c >> 12) & 63)); if (n < 8) put(0x80 | ((c >> 6) & 63)); if (n < 8) put(0x80 | (c & 63));
    }
  }
  out.k1 = ((lo >>> 2) | ((hi & 3) << 30)) >>> 0;
  out.k0 = ((hi >>> 2) | (RangeDomain.String << 30)) >>> 0;
  return out;
}

/** The range domain of a value, or 0 when it has none (it cannot be range-indexed or compared). */
export function rangeDomain(v: Value): RangeDomain | 0 {
  switch (typeof v) {
    case 'bigint': return RangeDomain.Numeric;
    case 'number': return Number.isNaN(v) ? 0 : RangeDomain.Numeric;
    case 'string': return RangeDomain.String;
  }
  if (v instanceof F32) return Number.isNaN(v.value) ? 0 : RangeDomain.Numeric;
  if (v instanceof DateTime) return RangeDomain.DateTime;
  return 0;
}

/** The range key of a value of domain `rangeDomain(v)` (callers check the domain first). */
export function rangeKeyOf(v: Value, out: IndexKey): IndexKey {
  if (typeof v === 'string') return orderedString(v, out);
  if (v instanceof DateTime) return orderedDouble(RangeDomain.DateTime, v.ms, out);
  return orderedDouble(RangeDomain.Numeric, typeof v === 'bigint' ? Number(v) : v instanceof F32 ? v.value : v as number, out);
}

/** The range key of a stored value; anything outside the three domains fails the write. */
export function rangeKey(v: Value, out: IndexKey): IndexKey {
  if (rangeDomain(v) === 0) {
    const what = v === null ? 'null' : typeof v === 'number' || v instanceof F32 ? 'NaN' : describe(v);
    throw new SvcError('invalid_secondary_index_value', `invalid secondary index value: a range index accepts numbers, date_times and strings, not ${what}`);
  }
  if (typeof v === 'string') checkSize(utf8Bytes(v), false);
  return rangeKeyOf(v, out);
}

/** The smallest and largest keys of a domain. */
export function domainBounds(domain: RangeDomain): [IndexKey, IndexKey] {
  return [{ k0: (domain << 30) >>> 0, k1: 0 }, { k0: ((domain << 30) | 0x3fffffff) >>> 0, k1: 0xffffffff }];
}

function describe(v: Value): string {
  if (typeof v === 'boolean') return 'a bool';
  if (v instanceof Uint8Array) return 'bytes';
  if (v instanceof StringArray || v instanceof BigInt64Array || v instanceof Float64Array || v instanceof Float32Array || Array.isArray(v)) return 'an array';
  return 'an object';
}
