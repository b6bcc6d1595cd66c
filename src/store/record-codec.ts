// Property records: the properties of one element version, encoded with msgpackr.
// Layout (msgpack array): [keyId, tag, payload, keyId, tag, payload, ...]. The tag keeps
// the variant exact (msgpack alone cannot tell i64 2 from f64 2.0, or a typed array
// from a list); nested objects are [name, tag, payload, ...] so member names such as
// "__proto__" are plain strings and never object keys.
import { Packr } from 'msgpackr';
import { DateTime, F32, StringArray, type Value } from '../protocol/value.js';
import { writeF64, writeInteger, writeString } from '../protocol/json.js';

const packr = new Packr({ useRecords: false, mapsAsObjects: false, int64AsType: 'bigint', moreTypes: false });

const enum Tag { Null, Bool, I64, F64, F32, DateTime, String, Bytes, I64Array, F64Array, F32Array, StringArray, Array, Object }

type Packed = unknown;

function bytesOf(view: ArrayBufferView): Uint8Array {
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

function pushValue(out: Packed[], v: Value): void {
  switch (typeof v) {
    case 'boolean': out.push(Tag.Bool, v); return;
    case 'bigint': out.push(Tag.I64, v); return;
    // msgpackr writes -0 as the integer 0; a string keeps the sign (Number('-0') is -0).
    case 'number': out.push(Tag.F64, Object.is(v, -0) ? '-0' : v); return;
    case 'string': out.push(Tag.String, v); return;
  }
  if (v === null) out.push(Tag.Null, 0);
  else if (v instanceof F32) out.push(Tag.F32, Object.is(v.value, -0) ? '-0' : v.value);
  else if (v instanceof DateTime) out.push(Tag.DateTime, v.ms);
  else if (v instanceof Uint8Array) out.push(Tag.Bytes, v);
  else if (v instanceof BigInt64Array) out.push(Tag.I64Array, bytesOf(v));
  else if (v instanceof Float64Array) out.push(Tag.F64Array, bytesOf(v));
  else if (v instanceof Float32Array) out.push(Tag.F32Array, bytesOf(v));
  else if (v instanceof StringArray) out.push(Tag.StringArray, v.items);
  else if (Array.isArray(v)) {
    const items: Packed[] = [];
    for (const item of v) pushValue(items, item);
    out.push(Tag.Array, items);
  } else {
    const members: Packed[] = [];
    for (const [k, item] of v) { members.push(k); pushValue(members, item); }
    out.push(Tag.Object, members);
  }
}

/** Copy raw bytes into a fresh aligned buffer (record bytes are not aligned). */
function aligned(bytes: Uint8Array): ArrayBuffer {
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return copy.buffer;
}

function readValue(tag: Tag, p: unknown): Value {
  switch (tag) {
    case Tag.Null: return null;
    case Tag.Bool: return p as boolean;
    case Tag.I64: return typeof p === 'bigint' ? p : BigInt(p as number);
    case Tag.F64: return Number(p);
    case Tag.F32: return new F32(Number(p));
    case Tag.DateTime: return new DateTime(Number(p));
    case Tag.String: return p as string;
    case Tag.Bytes: return new Uint8Array(aligned(p as Uint8Array));
    case Tag.I64Array: return new BigInt64Array(aligned(p as Uint8Array));
    case Tag.F64Array: return new Float64Array(aligned(p as Uint8Array));
    case Tag.F32Array: return new Float32Array(aligned(p as Uint8Array));
    case Tag.StringArray: return new StringArray((p as string[]).slice());
    case Tag.Array: {
      const items = p as unknown[];
      const out: Value[] = [];
      for (let i = 0; i < items.length; i += 2) out.push(readValue(items[i] as Tag, items[i + 1]));
      return out;
    }
    case Tag.Object: {
      const members = p as unknown[];
      const out = new Map<string, Value>();
      for (let i = 0; i < members.length; i += 3) out.set(members[i] as string, readValue(members[i + 1] as Tag, members[i + 2]));
      return out;
    }
  }
  throw new Error(`record codec: unknown tag ${tag}`);
}

/** Decoded properties of one element version: parallel key ids and values. */
export interface PropertyRecord {
  readonly keys: readonly number[];
  readonly values: readonly Value[];
}

export const emptyRecord: PropertyRecord = { keys: [], values: [] };

export function encodeRecord(record: PropertyRecord): Uint8Array {
  if (record.keys.length === 0) return new Uint8Array(0);
  const out: Packed[] = [];
  for (let i = 0; i < record.keys.length; i++) {
    out.push(record.keys[i]);
    pushValue(out, record.values[i]!);
  }
  return packr.pack(out) as Uint8Array;
}

/**
 * The keys of the record decoded last. Elements of one kind mostly carry the same keys in
 * the same order, so consecutive records share one keys array (never mutated: records are
 * read-only) instead of each holding a copy.
 */
let lastKeys: number[] = [];

export function decodeRecord(bytes: Uint8Array): PropertyRecord {
  if (bytes.byteLength === 0) return emptyRecord;
  const flat = packr.unpack(bytes) as unknown[];
  // Exact-length arrays: push() from [] reserves 17 slots at the first push, which made a
  // 3-property record 511 bytes of heap instead of ~250, and every thread caches up to
  // recordCacheEntriesMax of them (docs/benchmarks.md "Memory").
  const count = flat.length / 3;
  const values = new Array<Value>(count);
  let keys = lastKeys, sameKeys = keys.length === count;
  for (let i = 0, k = 0; i < flat.length; i += 3, k++) {
    if (sameKeys && keys[k] !== flat[i]) sameKeys = false;
    values[k] = readValue(flat[i + 1] as Tag, flat[i + 2]);
  }
  if (!sameKeys) {
    keys = new Array<number>(count);
    for (let i = 0, k = 0; i < flat.length; i += 3, k++) keys[k] = flat[i] as number;
    lastKeys = keys;
  }
  return { keys, values };
}

/** The value of key `keyId` in a record, or undefined when absent. */
export function recordGet(record: PropertyRecord, keyId: number): Value | undefined {
  const keys = record.keys;
  for (let i = 0; i < keys.length; i++) if (keys[i] === keyId) return record.values[i];
  return undefined;
}

// ---------------------------------------------------------------- one property, undecoded

/**
 * Returned by propertyOfEncoded when it cannot read the value itself (a payload other than
 * a scalar or a short string, or bytes it does not expect): decode the whole record instead.
 */
export const DECODE_WHOLE: unique symbol = Symbol('decode the whole record');

/** Strings longer than this (in bytes) are left to the whole-record decoder. */
const SHORT_STRING_BYTES = 1024;
const units = new Uint16Array(SHORT_STRING_BYTES);
const f64 = new Float64Array(1);
const f64Bytes = new Uint8Array(f64.buffer);
const f32 = new Float32Array(1);
const f32Bytes = new Uint8Array(f32.buffer);

/** Where the last readScalar stopped, and what it read. */
let at = 0;
/** A scalar read by readScalar; NOT_SCALAR when the item is a container, bin or ext. */
const NOT_SCALAR: unique symbol = Symbol('not a scalar');
type Scalar = number | bigint | string | boolean | null | typeof NOT_SCALAR;

/** The i64 of 8 big-endian bytes at p. */
function readI64(b: Uint8Array, p: number, signed: boolean): bigint {
  const hi = ((b[p]! << 24) | (b[p + 1]! << 16) | (b[p + 2]! << 8) | b[p + 3]!) >>> 0;
  const lo = ((b[p + 4]! << 24) | (b[p + 5]! << 16) | (b[p + 6]! << 8) | b[p + 7]!) >>> 0;
  const v = (BigInt(hi) << 32n) | BigInt(lo);
  return signed ? BigInt.asIntN(64, v) : v;
}

/**
 * UTF-8 bytes [p, end) as a string, or NOT_SCALAR when they are not well-formed or encode a
 * surrogate (msgpackr and this reader could then disagree: the whole decoder decides).
 */
function readUtf8(b: Uint8Array, p: number, end: number): string | typeof NOT_SCALAR {
  let n = 0;
  while (p < end) {
    const c = b[p]!;
    if (c < 0x80) { units[n++] = c; p++; continue; }
    if (c >= 0xc2 && c < 0xe0 && p + 1 < end) {
      const d = b[p + 1]!;
      if ((d & 0xc0) !== 0x80) return NOT_SCALAR;
      units[n++] = ((c & 0x1f) << 6) | (d & 0x3f);
      p += 2;
    } else if (c >= 0xe0 && c < 0xf0 && p + 2 < end) {
      const d = b[p + 1]!, e = b[p + 2]!;
      if ((d & 0xc0) !== 0x80 || (e & 0xc0) !== 0x80) return NOT_SCALAR;
      const u = ((c & 0x0f) << 12) | ((d & 0x3f) << 6) | (e & 0x3f);
      if (u < 0x800 || (u >= 0xd800 && u < 0xe000)) return NOT_SCALAR;
      units[n++] = u;
      p += 3;
    } else if (c >= 0xf0 && c < 0xf5 && p + 3 < end) {
      const d = b[p + 1]!, e = b[p + 2]!, f = b[p + 3]!;
      if ((d & 0xc0) !== 0x80 || (e & 0xc0) !== 0x80 || (f & 0xc0) !== 0x80) return NOT_SCALAR;
      const u = ((c & 0x07) << 18) | ((d & 0x3f) << 12) | ((e & 0x3f) << 6) | (f & 0x3f);
      if (u < 0x10000 || u > 0x10ffff) return NOT_SCALAR;
      units[n++] = 0xd800 + ((u - 0x10000) >> 10);
      units[n++] = 0xdc00 + ((u - 0x10000) & 0x3ff);
      p += 4;
    } else return NOT_SCALAR;
  }
  return String.fromCharCode.apply(null, units.subarray(0, n) as unknown as number[]);
}

/**
 * The msgpack item at b[p] if it is a scalar (nil, bool, int, float, short str), setting
 * `at` past it; NOT_SCALAR otherwise (`at` then undefined). 64-bit ints are bigints, the
 * other ints numbers, as msgpackr with int64AsType 'bigint' reads them.
 */
function readScalar(b: Uint8Array, p: number, end: number): Scalar {
  if (p >= end) return NOT_SCALAR;
  const c = b[p]!;
  if (c < 0x80) { at = p + 1; return c; }
  if (c >= 0xe0) { at = p + 1; return c - 0x100; }
  if (c >= 0xa0 && c < 0xc0) return readStr(b, p + 1, c & 0x1f, end);
  let need = 0;
  switch (c) {
    case 0xc0: at = p + 1; return null;
    case 0xc2: at = p + 1; return false;
    case 0xc3: at = p + 1; return true;
    case 0xcc: case 0xd0: need = 1; break;
    case 0xcd: case 0xd1: need = 2; break;
    case 0xce: case 0xd2: case 0xca: need = 4; break;
    case 0xcf: case 0xd3: case 0xcb: need = 8; break;
    case 0xd9: return p + 1 < end ? readStr(b, p + 2, b[p + 1]!, end) : NOT_SCALAR;
    case 0xda: return p + 2 < end ? readStr(b, p + 3, (b[p + 1]! << 8) | b[p + 2]!, end) : NOT_SCALAR;
    default: return NOT_SCALAR; // str32 (longer than SHORT_STRING_BYTES), bin, ext, containers
  }
  const q = p + 1;
  if (q + need > end) return NOT_SCALAR;
  at = q + need;
  switch (c) {
    case 0xcc: return b[q]!;
    case 0xcd: return (b[q]! << 8) | b[q + 1]!;
    case 0xce: return ((b[q]! << 24) | (b[q + 1]! << 16) | (b[q + 2]! << 8) | b[q + 3]!) >>> 0;
    case 0xd0: return (b[q]! << 24) >> 24;
    case 0xd1: return (((b[q]! << 8) | b[q + 1]!) << 16) >> 16;
    case 0xd2: return (b[q]! << 24) | (b[q + 1]! << 16) | (b[q + 2]! << 8) | b[q + 3]!;
    case 0xcf: return readI64(b, q, false);
    case 0xd3: return readI64(b, q, true);
    case 0xca: for (let i = 0; i < 4; i++) f32Bytes[3 - i] = b[q + i]!; return f32[0]!;
    default: for (let i = 0; i < 8; i++) f64Bytes[7 - i] = b[q + i]!; return f64[0]!; // 0xcb
  }
}

function readStr(b: Uint8Array, p: number, length: number, end: number): string | typeof NOT_SCALAR {
  if (length > SHORT_STRING_BYTES || p + length > end) return NOT_SCALAR;
  at = p + length;
  return readUtf8(b, p, at);
}

/** The end of the msgpack item at b[p] (any kind), or -1 when it runs past `end` or is unknown. */
function skipItem(b: Uint8Array, p: number, end: number): number {
  let pending = 1; // items still to skip (containers add their children)
  while (pending > 0) {
    if (p >= end) return -1;
    const c = b[p]!;
    pending--;
    if (c < 0x80 || c >= 0xe0 || c === 0xc0 || c === 0xc2 || c === 0xc3) { p += 1; continue; }
    if (c >= 0xa0 && c < 0xc0) { p += 1 + (c & 0x1f); continue; }
    if (c >= 0x90 && c < 0xa0) { pending += c & 0x0f; p += 1; continue; }
    if (c >= 0x80 && c < 0x90) { pending += 2 * (c & 0x0f); p += 1; continue; }
    const u8 = () => b[p + 1]!, u16 = () => (b[p + 1]! << 8) | b[p + 2]!;
    const u32 = () => ((b[p + 1]! << 24) | (b[p + 2]! << 16) | (b[p + 3]! << 8) | b[p + 4]!) >>> 0;
    switch (c) {
      case 0xcc: case 0xd0: p += 2; break;
      case 0xcd: case 0xd1: p += 3; break;
      case 0xce: case 0xd2: case 0xca: p += 5; break;
      case 0xcf: case 0xd3: case 0xcb: p += 9; break;
      case 0xd9: case 0xc4: p += 2 + u8(); break;
      case 0xda: case 0xc5: p += 3 + u16(); break;
      case 0xdb: case 0xc6: p += 5 + u32(); break;
      case 0xdc: pending += u16(); p += 3; break;
      case 0xdd: pending += u32(); p += 5; break;
      case 0xde: pending += 2 * u16(); p += 3; break;
      case 0xdf: pending += 2 * u32(); p += 5; break;
      case 0xd4: p += 3; break;
      case 0xd5: p += 4; break;
      case 0xd6: p += 6; break;
      case 0xd7: p += 10; break;
      case 0xd8: p += 18; break;
      case 0xc7: p += 3 + u8(); break;
      case 0xc8: p += 4 + u16(); break;
      case 0xc9: p += 6 + u32(); break;
      default: return -1;
    }
  }
  return p <= end ? p : -1;
}

/**
 * The value of key `keyId` in the encoded record b[start, end) (encodeRecord's bytes), or
 * undefined when absent, without decoding the rest: an index build reads one property of
 * every element, and decoding whole records was most of its time. DECODE_WHOLE when the
 * value is not a scalar or a short string, or anything is unexpected; the caller then
 * decodes the record (decodeRecord), which is the reference for every value. Reads the
 * bytes in place (shared memory is fine: nothing is handed to msgpackr).
 */
export function propertyOfEncoded(b: Uint8Array, start: number, end: number, keyId: number): Value | undefined | typeof DECODE_WHOLE {
  if (start === end) return undefined;
  const count = arrayHeader(b, start, end);
  if (count < 0 || count % 3 !== 0) return DECODE_WHOLE;
  let p = at;
  for (let i = 0; i < count; i += 3) {
    const key = readScalar(b, p, end);
    if (typeof key !== 'number') return DECODE_WHOLE;
    const tag = readScalar(b, at, end);
    if (typeof tag !== 'number') return DECODE_WHOLE;
    p = at;
    if (key !== keyId) {
      p = skipItem(b, p, end);
      if (p < 0) return DECODE_WHOLE;
      continue;
    }
    const value = scalarValue(tag, b, p, end);
    return value === NOT_SCALAR ? DECODE_WHOLE : value;
  }
  return undefined;
}

/** The length of the msgpack array whose header is at b[p], setting `at` past the header; -1 when it is no array. */
function arrayHeader(b: Uint8Array, p: number, end: number): number {
  const c = b[p]!;
  if (c >= 0x90 && c < 0xa0) { at = p + 1; return c & 0x0f; }
  if (c === 0xdc && p + 2 < end) { at = p + 3; return (b[p + 1]! << 8) | b[p + 2]!; }
  if (c === 0xdd && p + 4 < end) { at = p + 5; return ((b[p + 1]! << 24) | (b[p + 2]! << 16) | (b[p + 3]! << 8) | b[p + 4]!) >>> 0; }
  return -1;
}

/**
 * The value of a property with tag `tag` whose payload is at b[p], setting `at` past it, when
 * the payload is a scalar or a short string; NOT_SCALAR otherwise (the whole decoder decides).
 */
function scalarValue(tag: number, b: Uint8Array, p: number, end: number): Value | typeof NOT_SCALAR {
  switch (tag) {
    case Tag.Null: case Tag.Bool: case Tag.I64: case Tag.F64: case Tag.F32: case Tag.DateTime: case Tag.String: {
      const payload = readScalar(b, p, end);
      if (payload === NOT_SCALAR) return NOT_SCALAR;
      // The same conversions as readValue, on what msgpackr would have read.
      if (tag === Tag.I64 && typeof payload !== 'bigint' && typeof payload !== 'number') return NOT_SCALAR;
      if (tag === Tag.String && typeof payload !== 'string') return NOT_SCALAR;
      if (tag === Tag.Bool && typeof payload !== 'boolean') return NOT_SCALAR;
      return readValue(tag, payload);
    }
    default: return NOT_SCALAR;
  }
}

/**
 * The JSON literal of a short string (fixstr or str8) whose bytes are all ASCII needing no
 * escape (not a control character, `"` or `\`): the common case, in one pass and one string,
 * where the general path decodes the string, tests it for escapes and adds the quotes. Null
 * otherwise: the general path decides.
 */
function plainStringJson(b: Uint8Array, p: number, end: number): string | null {
  const c = b[p]!;
  let start: number, length: number;
  if (c >= 0xa0 && c < 0xc0) {
    start = p + 1;
    length = c & 0x1f;
  } else if (c === 0xd9 && p + 1 < end) {
    start = p + 2;
    length = b[p + 1]!;
  } else {
    return null;
  }
  if (start + length > end || length + 2 > units.length) return null;
  units[0] = 0x22;
  for (let i = 0; i < length; i++) {
    const x = b[start + i]!;
    if (x < 0x20 || x >= 0x80 || x === 0x22 || x === 0x5c) return null;
    units[i + 1] = x;
  }
  units[length + 1] = 0x22;
  at = start + length;
  return String.fromCharCode.apply(null, units.subarray(0, length + 2) as unknown as number[]);
}

/**
 * The response JSON of a scalar value (renderValue of what scalarValue reads) at b[p],
 * setting `at` past it; null when the item is not a plain scalar or short string.
 */
function scalarJson(tag: number, b: Uint8Array, p: number, end: number): string | null {
  if (tag === Tag.String) {
    const quoted = plainStringJson(b, p, end);
    if (quoted !== null) return quoted;
  }
  const c = b[p];
  if (tag === Tag.I64 && (c === 0xd3 || c === 0xcf) && p + 9 <= end) {
    // 64-bit ints (how every i64 is written) within 2^53 print from a double, no bigint.
    const hi = (b[p + 1]! << 24) | (b[p + 2]! << 16) | (b[p + 3]! << 8) | b[p + 4]!;
    if (c === 0xd3 ? hi >= -0x200000 && hi < 0x200000 : hi >= 0 && hi < 0x200000) {
      const lo = ((b[p + 5]! << 24) | (b[p + 6]! << 16) | (b[p + 7]! << 8) | b[p + 8]!) >>> 0;
      at = p + 9;
      return writeInteger(hi * 4294967296 + lo);
    }
  }
  switch (tag) {
    case Tag.Null: case Tag.Bool: case Tag.I64: case Tag.F64: case Tag.F32: case Tag.String: {
      const payload = readScalar(b, p, end);
      if (payload === NOT_SCALAR) return null;
      switch (tag) {
        case Tag.Null: return 'null';
        case Tag.Bool: return typeof payload === 'boolean' ? (payload ? 'true' : 'false') : null;
        // A number here is an int of at most 32 bits: its digits are the bigint's.
        case Tag.I64: return typeof payload === 'number' ? writeInteger(payload) : typeof payload === 'bigint' ? payload.toString() : null;
        case Tag.String: return typeof payload === 'string' ? writeString(payload) : null;
        default: return writeF64(Number(payload)); // F64, and F32 (renderValue writes its value as f64)
      }
    }
    default: return null;
  }
}

/**
 * The record b[start, end) as response JSON without decoding it (value_map rows,
 * exec/element-maps.ts): its key IDs into `keys` and each value's JSON into `json`, in
 * record order; the count, or -1 when a value is not a plain scalar or short string (the
 * caller decodes the record and renders its values instead).
 */
export function recordJsonInPlace(b: Uint8Array, start: number, end: number, keys: number[], json: string[]): number {
  if (start === end) return 0;
  const items = arrayHeader(b, start, end);
  if (items < 0 || items % 3 !== 0) return -1;
  const count = items / 3;
  let p = at;
  for (let k = 0; k < count; k++) {
    const key = readScalar(b, p, end);
    if (typeof key !== 'number') return -1;
    const tag = readScalar(b, at, end);
    if (typeof tag !== 'number') return -1;
    const text = scalarJson(tag, b, at, end);
    if (text === null) return -1;
    p = at;
    keys[k] = key;
    json[k] = text;
  }
  return p === end ? count : -1;
}

/** Key ids read by decodeRecordInPlace before it knows whether they repeat lastKeys. */
const keysRead: number[] = [];

/**
 * decodeRecord of the record b[start, end), read in place when every value is a scalar or a
 * short string (the reader propertyOfEncoded uses: no copy out of shared memory, no
 * msgpackr call, nothing allocated but the values array, the values and the record); any
 * other record is copied and decoded by decodeRecord, the reference for every value.
 */
export function decodeRecordInPlace(b: Uint8Array, start: number, end: number): PropertyRecord {
  if (start === end) return emptyRecord;
  const items = arrayHeader(b, start, end);
  if (items < 0 || items % 3 !== 0) return decodeRecord(b.slice(start, end));
  const count = items / 3;
  const values = new Array<Value>(count);
  let keys = lastKeys, sameKeys = keys.length === count;
  let p = at;
  for (let k = 0; k < count; k++) {
    const key = readScalar(b, p, end);
    if (typeof key !== 'number') return decodeRecord(b.slice(start, end));
    const tag = readScalar(b, at, end);
    if (typeof tag !== 'number') return decodeRecord(b.slice(start, end));
    const value = scalarValue(tag, b, at, end);
    if (value === NOT_SCALAR) return decodeRecord(b.slice(start, end));
    p = at;
    values[k] = value;
    keysRead[k] = key;
    if (sameKeys && keys[k] !== key) sameKeys = false;
  }
  if (p !== end) return decodeRecord(b.slice(start, end));
  if (!sameKeys) lastKeys = keys = keysRead.slice(0, count);
  return { keys, values };
}
