// Property records: the properties of one element version, encoded with msgpackr.
// Layout (msgpack array): [keyId, tag, payload, keyId, tag, payload, ...]. The tag keeps
// the variant exact (msgpack alone cannot tell i64 2 from f64 2.0, or a typed array
// from a list); nested objects are [name, tag, payload, ...] so member names such as
// "__proto__" are plain strings and never object keys.
import { Packr } from 'msgpackr';
import { DateTime, F32, StringArray, type Value } from '../protocol/value.js';

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

export function decodeRecord(bytes: Uint8Array): PropertyRecord {
  if (bytes.byteLength === 0) return emptyRecord;
  const flat = packr.unpack(bytes) as unknown[];
  const keys: number[] = [];
  const values: Value[] = [];
  for (let i = 0; i < flat.length; i += 3) {
    keys.push(flat[i] as number);
    values.push(readValue(flat[i + 1] as Tag, flat[i + 2]));
  }
  return { keys, values };
}

/** The value of key `keyId` in a record, or undefined when absent. */
export function recordGet(record: PropertyRecord, keyId: number): Value | undefined {
  const keys = record.keys;
  for (let i = 0; i < keys.length; i++) if (keys[i] === keyId) return record.values[i];
  return undefined;
}
