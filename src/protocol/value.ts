// Runtime values (values.md §2-§3). One JS representation per tagged variant, chosen
// so that the variant is recoverable from the JS value alone:
//   null -> null        bool -> boolean        i64 -> bigint       f64 -> number
//   f32 -> F32          date_time -> DateTime  string -> string    bytes -> Uint8Array
//   i64_array -> BigInt64Array   f64_array -> Float64Array   f32_array -> Float32Array
//   string_array -> StringArray  array -> Value[]            object -> Map<string, Value>
// Objects are Maps so that member names such as "__proto__" are ordinary keys.

export class F32 {
  readonly value: number;
  constructor(value: number) { this.value = Math.fround(value); }
}

export class DateTime {
  /** Milliseconds since the Unix epoch, UTC. */
  readonly ms: number;
  constructor(ms: number) { this.ms = ms; }
}

export class StringArray {
  readonly items: string[];
  constructor(items: string[]) { this.items = items; }
}

export type ValueObject = Map<string, Value>;

export type Value =
  | null | boolean | bigint | number | F32 | DateTime | string | Uint8Array
  | BigInt64Array | Float64Array | Float32Array | StringArray | Value[] | ValueObject;

export type ValueTag =
  | 'null' | 'bool' | 'i64' | 'f64' | 'f32' | 'date_time' | 'string' | 'bytes'
  | 'i64_array' | 'f64_array' | 'f32_array' | 'string_array' | 'array' | 'object';

export function tagOf(v: Value): ValueTag {
  switch (typeof v) {
    case 'boolean': return 'bool';
    case 'bigint': return 'i64';
    case 'number': return 'f64';
    case 'string': return 'string';
  }
  if (v === null) return 'null';
  if (v instanceof F32) return 'f32';
  if (v instanceof DateTime) return 'date_time';
  if (v instanceof Uint8Array) return 'bytes';
  if (v instanceof BigInt64Array) return 'i64_array';
  if (v instanceof Float64Array) return 'f64_array';
  if (v instanceof Float32Array) return 'f32_array';
  if (v instanceof StringArray) return 'string_array';
  if (Array.isArray(v)) return 'array';
  return 'object';
}

export const I64_MIN = -(1n << 63n);
export const I64_MAX = (1n << 63n) - 1n;

/** Numeric value of i64/f64/f32 as a JS number or bigint (exact), else undefined. */
export function numericOf(v: Value): number | bigint | undefined {
  if (typeof v === 'bigint' || typeof v === 'number') return v;
  if (v instanceof F32) return v.value;
  return undefined;
}
