// Tagged property values (values.md §2) and how plain JS values become them (§10).
//
// Inside the operation tree every literal is an externally tagged value: `{"i64": 7}`,
// `{"string": "Porto"}`, the bare string `"null"`, … Callers pass ordinary JS values and
// `tag` picks the variant exactly like the official TypeScript client; the explicit
// helpers (`i64`, `f64`, `f32`, `bytes`, `dateTime`, the typed arrays) force a variant.

import { defineMember, isPlainObject, type WireJson, type WireObject } from './json.js';
import { QueryBuildError } from './errors.js';
import { rfc3339Ms } from '../protocol/date-time.js';

/** A value whose tag was chosen explicitly (see the helpers below). */
export class TaggedValue {
  constructor(readonly json: WireJson) {}
}

/** What a caller may pass where a tagged value is expected. */
export type JsValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | Date
  | Uint8Array
  | TaggedValue
  | readonly JsValue[]
  | { readonly [key: string]: JsValue };

const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;
const U64_MAX = (1n << 64n) - 1n;

/** An integer as a wire token: a number while it is exact, a bigint beyond 2^53. */
function integerToken(n: number | bigint, what: string, min: bigint, max: bigint): number | bigint {
  if (typeof n === 'number' && !Number.isInteger(n)) throw new QueryBuildError(`${what} must be an integer, got ${n}`);
  const big = BigInt(n);
  if (big < min || big > max) throw new QueryBuildError(`${what} ${big} is out of range [${min}, ${max}]`);
  return typeof n === 'number' && Number.isSafeInteger(n) ? n : big;
}

/** Validates a signed 64-bit integer (number, bigint or decimal string). */
export function i64Token(v: number | bigint | string, what = 'i64 value'): number | bigint {
  if (typeof v === 'string') {
    if (!/^-?\d+$/.test(v)) throw new QueryBuildError(`${what} must be a decimal integer, got ${JSON.stringify(v)}`);
    return integerToken(BigInt(v), what, I64_MIN, I64_MAX);
  }
  return integerToken(v, what, I64_MIN, I64_MAX);
}

/** Validates an element ID (unsigned 64-bit, envelope.md §10). */
export function idToken(v: number | bigint): number | bigint {
  return integerToken(v, 'element ID', 0n, U64_MAX);
}

function finite(n: number, what: string): number {
  if (typeof n !== 'number' || !Number.isFinite(n)) throw new QueryBuildError(`${what} must be a finite number, got ${String(n)}`);
  return n;
}

function epochMs(v: Date | number | string): number {
  // A string must be RFC 3339 with its offset, as the server reads one: Date.parse would read
  // one without an offset in the machine's time zone, and move February 30th to March 2nd.
  const ms = v instanceof Date ? v.getTime() : typeof v === 'string' ? rfc3339Ms(v) : v;
  if (typeof ms !== 'number' || !Number.isSafeInteger(ms)) {
    throw new QueryBuildError(`date_time must be a Date, integer epoch milliseconds or an RFC 3339 date-time with its offset (e.g. 2025-03-01T08:00:00Z), got ${typeof v === 'string' ? JSON.stringify(v) : String(v)}`);
  }
  return ms;
}

const tagged = (variant: string, payload: WireJson): TaggedValue => new TaggedValue({ [variant]: payload });

// ---------------------------------------------------------------------------------------
// Explicit helpers (one per variant)

export const i64 = (v: number | bigint | string): TaggedValue => tagged('i64', i64Token(v));
export const f64 = (v: number): TaggedValue => tagged('f64', finite(v, 'f64 value'));
/** Written as given; the server narrows it to single precision. */
export const f32 = (v: number): TaggedValue => tagged('f32', finite(v, 'f32 value'));
export const dateTime = (v: Date | number | string): TaggedValue => tagged('date_time', epochMs(v));
export const bytes = (v: Uint8Array | readonly number[]): TaggedValue =>
  tagged('bytes', Array.from(v, (b) => {
    if (!Number.isInteger(b) || b < 0 || b > 255) throw new QueryBuildError(`bytes must be integers 0..255, got ${b}`);
    return b;
  }));
export const i64Array = (v: readonly (number | bigint | string)[]): TaggedValue => tagged('i64_array', v.map((x) => i64Token(x)));
export const f64Array = (v: readonly number[]): TaggedValue => tagged('f64_array', v.map((x) => finite(x, 'f64_array item')));
export const f32Array = (v: readonly number[]): TaggedValue => tagged('f32_array', v.map((x) => finite(x, 'f32_array item')));
export const stringArray = (v: readonly string[]): TaggedValue => tagged('string_array', [...v]);
/** Heterogeneous array: members are tagged one by one. */
export const arrayValue = (v: readonly JsValue[]): TaggedValue => tagged('array', v.map(tag));
export const objectValue = (v: { readonly [key: string]: JsValue }): TaggedValue => tagged('object', tagMembers(v));
export const nullValue = (): TaggedValue => new TaggedValue('null');

/** All value helpers in one namespace. */
export const V = {
  i64, f64, f32, dateTime, bytes, i64Array, f64Array, f32Array, stringArray,
  array: arrayValue, object: objectValue, null: nullValue,
  /** The tag the client infers for a plain value (values.md §10). */
  infer: (v: JsValue): TaggedValue => new TaggedValue(tag(v)),
} as const;

// ---------------------------------------------------------------------------------------
// Inference (values.md §10)

function tagMembers(v: { readonly [key: string]: JsValue }): WireObject {
  const out: Record<string, WireJson> = {};
  for (const key of Object.keys(v)) defineMember(out, key, tag(v[key]!));
  return out;
}

/** The tagged wire value for a plain JS value, choosing the variant like the official client. */
export function tag(v: JsValue): WireJson {
  if (v === null) return 'null';
  if (v instanceof TaggedValue) return v.json;
  switch (typeof v) {
    case 'boolean': return { bool: v };
    case 'string': return { string: v };
    case 'bigint': return { i64: i64Token(v) };
    case 'number':
      finite(v, 'number value');
      return Number.isInteger(v) ? { i64: i64Token(v) } : { f64: v };
    default: break;
  }
  if (v instanceof Date) return { date_time: epochMs(v) };
  if (v instanceof Uint8Array) return bytes(v).json;
  if (Array.isArray(v)) {
    const items = v as readonly JsValue[];
    if (items.every((x) => typeof x === 'string')) return { string_array: [...items] as string[] };
    // Whole numbers and bigints (the only way to write integers past 2^53) are i64s.
    if (items.length > 0 && items.every((x) => typeof x === 'bigint' || (typeof x === 'number' && Number.isInteger(x)))) {
      return { i64_array: (items as readonly (number | bigint)[]).map((x) => i64Token(x)) };
    }
    if (items.every((x) => typeof x === 'number' && Number.isFinite(x))) return { f64_array: [...(items as readonly number[])] };
    return { array: items.map(tag) };
  }
  if (isPlainObject(v)) return { object: tagMembers(v as { readonly [key: string]: JsValue }) };
  throw new QueryBuildError(`cannot use ${describe(v)} as a property value`);
}

export function describe(v: unknown): string {
  if (v === undefined) return 'undefined';
  if (typeof v === 'object' && v !== null) return `a ${v.constructor?.name ?? 'object'}`;
  return `a ${typeof v}`;
}
