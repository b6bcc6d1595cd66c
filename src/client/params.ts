// Request parameters (envelope.md §3): plain JSON values, optionally declared with types.
//
//   const params = defineParams({ city: 'string', ids: { array: 'i64' } });
//   readBatch(params).varAs('people', g().nWhere(P.eq('city', params.ref('city'))))…
//     .toRequest({ city: 'Oslo', ids: [1n, 2n] });
//
// Values are written the way the official client writes them (§3.4): i64 as bare integer
// tokens of any length (bigint allowed), f32 pre-rounded to single precision, date_time as
// an ISO-8601 UTC string with milliseconds, `{object: {...}}` declared as plain "object"
// with its members checked here; bytes parameters are refused.

import { defineMember, isPlainObject, type WireJson, type WireObject } from './json.js';
import { QueryBuildError } from './errors.js';
import { ParamExpr } from './expr.js';
import { TaggedValue, describe, i64Token } from './values.js';
import { rfc3339Ms } from '../protocol/date-time.js';

export type ParamScalarType = 'bool' | 'i64' | 'f64' | 'f32' | 'string' | 'date_time' | 'value' | 'object';
/** A parameter declaration. `bytes` cannot travel as JSON and is not accepted. */
export type ParamType = ParamScalarType | { readonly array: ParamType } | { readonly object: ParamDecls };
export type ParamDecls = { readonly [name: string]: ParamType };

/** Plain JSON a caller may pass as an untyped parameter (bigint and Date allowed). */
export type ParamJson = null | boolean | number | bigint | string | Date | readonly ParamJson[] | { readonly [key: string]: ParamJson };

/** The JS value accepted for a declaration. */
export type ParamValue<T extends ParamType> =
  T extends 'bool' ? boolean
  : T extends 'i64' ? number | bigint
  : T extends 'f64' | 'f32' ? number
  : T extends 'string' ? string
  : T extends 'date_time' ? Date | string | number
  : T extends 'value' ? ParamJson
  : T extends 'object' ? { readonly [key: string]: ParamJson }
  : T extends { readonly array: infer I extends ParamType } ? readonly ParamValue<I>[]
  : T extends { readonly object: infer O extends ParamDecls } ? ParamValues<O>
  : never;
export type ParamValues<D extends ParamDecls> = { readonly [K in keyof D]: ParamValue<D[K]> };

const F32_MAX = 3.4028234663852886e38;
const scalarTypes: ReadonlySet<string> = new Set(['bool', 'i64', 'f64', 'f32', 'string', 'date_time', 'value', 'object']);

/** Declared parameters: their wire types, references to them, and value encoding. */
export class ParamSchema<D extends ParamDecls> {
  /** `parameter_types` as written on the wire. */
  readonly types: WireObject;

  constructor(readonly decls: D) {
    const types: Record<string, WireJson> = {};
    for (const name of Object.keys(decls)) {
      if (name.length === 0) throw new QueryBuildError('parameter names must be non-empty');
      defineMember(types, name, wireType(decls[name]!, name));
    }
    this.types = types;
  }

  /** `{"param": name}` for a declared name. */
  ref<K extends keyof D & string>(name: K): ParamExpr {
    if (!Object.hasOwn(this.decls, name)) throw new QueryBuildError(`parameter '${name}' is not declared`);
    return new ParamExpr(name);
  }

  /** The `parameters` object: checks the name set and every value against its declaration. */
  encode(values: ParamValues<D> | undefined): WireObject {
    const given = (values ?? {}) as { readonly [name: string]: unknown };
    const missing = Object.keys(this.decls).filter((k) => !Object.hasOwn(given, k) || given[k] === undefined);
    const extra = Object.keys(given).filter((k) => !Object.hasOwn(this.decls, k) && given[k] !== undefined);
    if (missing.length > 0 || extra.length > 0) {
      throw new QueryBuildError(`parameters do not match their declarations (missing: [${missing.join(', ')}], undeclared: [${extra.join(', ')}])`);
    }
    const out: Record<string, WireJson> = {};
    for (const name of Object.keys(this.decls)) defineMember(out, name, encodeTyped(given[name], this.decls[name]!, name));
    return out;
  }
}

/** Declares typed parameters; the request then carries `parameter_types` (typed mode). */
export function defineParams<const D extends ParamDecls>(decls: D): ParamSchema<D> {
  return new ParamSchema(decls);
}

function wireType(t: ParamType, path: string): WireJson {
  if (typeof t === 'string') {
    if ((t as string) === 'bytes') throw new QueryBuildError(`parameter '${path}': bytes parameters cannot be sent as JSON`);
    if (!scalarTypes.has(t)) throw new QueryBuildError(`parameter '${path}': unknown type ${JSON.stringify(t)}`);
    return t;
  }
  if (isPlainObject(t) && 'array' in t) return { array: wireType(t.array, `${path}[]`) };
  if (isPlainObject(t) && 'object' in t) {
    for (const k of Object.keys(t.object)) wireType(t.object[k]!, `${path}.${k}`);
    return 'object';
  }
  throw new QueryBuildError(`parameter '${path}': invalid declaration ${describe(t)}`);
}

function refuse(path: string, expected: string, v: unknown): never {
  throw new QueryBuildError(`parameter '${path}' expects ${expected}, got ${v === null ? 'null' : describe(v)}${typeof v === 'number' ? ` ${v}` : ''}`);
}

/** ISO-8601 UTC with milliseconds (`2025-03-01T07:00:00.000Z`). */
function isoDateTime(v: unknown, path: string): string {
  // A string must be RFC 3339 with its offset, as the server checks it: Date reads one
  // without an offset as local time, and moves February 30th to March 2nd.
  let d: Date | undefined;
  if (typeof v === 'string') {
    const ms = rfc3339Ms(v);
    if (ms === null) refuse(path, 'an RFC 3339 date-time with its offset (e.g. 2025-03-01T08:00:00Z)', v);
    d = new Date(ms!);
  } else {
    d = v instanceof Date ? v : typeof v === 'number' ? new Date(v) : undefined;
  }
  if (d === undefined || Number.isNaN(d.getTime())) refuse(path, 'a date-time (Date, ISO string or epoch milliseconds)', v);
  // RFC 3339 has four-digit years: toISOString writes others as +010000 or -000001.
  const year = d!.getUTCFullYear();
  if (year < 0 || year > 9999) refuse(path, 'a date-time in the years 0000-9999', v);
  return d!.toISOString();
}

/** Validates `v` against `t` and returns its wire form. */
export function encodeTyped(v: unknown, t: ParamType, path: string): WireJson {
  if (typeof t === 'string') {
    switch (t) {
      case 'bool':
        if (typeof v !== 'boolean') refuse(path, 'a boolean', v);
        return v as boolean;
      case 'i64':
        if (typeof v !== 'bigint' && !(typeof v === 'number' && Number.isInteger(v))) refuse(path, 'an integer', v);
        return i64Token(v as number | bigint, `parameter '${path}'`);
      case 'f64':
        if (typeof v !== 'number' || !Number.isFinite(v)) refuse(path, 'a finite number', v);
        return v as number;
      case 'f32':
        if (typeof v !== 'number' || !Number.isFinite(v) || Math.abs(v) > F32_MAX) refuse(path, 'a finite number within the f32 range', v);
        return Math.fround(v as number);
      case 'string':
        if (typeof v !== 'string') refuse(path, 'a string', v);
        return v as string;
      case 'date_time':
        return isoDateTime(v, path);
      case 'value':
        return encodeUntyped(v as ParamJson, path);
      case 'object':
        if (!isPlainObject(v)) refuse(path, 'an object', v);
        return encodeUntyped(v as ParamJson, path);
    }
  }
  if ('array' in t) {
    if (!Array.isArray(v)) refuse(path, 'an array', v);
    return (v as readonly unknown[]).map((item, i) => encodeTyped(item, t.array, `${path}[${i}]`));
  }
  if (!isPlainObject(v)) refuse(path, 'an object', v);
  const members = v as { readonly [k: string]: unknown };
  const out: Record<string, WireJson> = {};
  for (const k of Object.keys(members)) {
    if (!Object.hasOwn(t.object, k)) throw new QueryBuildError(`parameter '${path}' has undeclared member '${k}'`);
  }
  for (const k of Object.keys(t.object)) {
    if (members[k] === undefined && t.object[k] !== 'value') throw new QueryBuildError(`parameter '${path}' is missing member '${k}'`);
    defineMember(out, k, encodeTyped(members[k] ?? null, t.object[k]!, `${path}.${k}`));
  }
  return out;
}

/** An untyped parameter value as plain JSON (envelope.md §3.1). */
export function encodeUntyped(v: ParamJson, path: string): WireJson {
  if (v === null || typeof v === 'boolean' || typeof v === 'string' || typeof v === 'bigint') return v;
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) refuse(path, 'a finite number (JSON has no NaN/Infinity)', v);
    return v;
  }
  if (v instanceof Date) return isoDateTime(v, path);
  if (Array.isArray(v)) return (v as readonly ParamJson[]).map((item, i) => encodeUntyped(item, `${path}[${i}]`));
  if (isPlainObject(v)) {
    const out: Record<string, WireJson> = {};
    for (const k of Object.keys(v)) defineMember(out, k, encodeUntyped((v as { readonly [key: string]: ParamJson })[k]!, `${path}.${k}`));
    return out;
  }
  if (v instanceof Uint8Array) throw new QueryBuildError(`parameter '${path}': bytes cannot be sent as a JSON parameter`);
  if ((v as unknown) instanceof TaggedValue) throw new QueryBuildError(`parameter '${path}': parameters are plain JSON, not tagged values`);
  return refuse(path, 'a JSON value', v);
}

/** `parameters` for an untyped request. */
export function encodeUntypedParams(values: { readonly [name: string]: ParamJson }): WireObject {
  const out: Record<string, WireJson> = {};
  for (const name of Object.keys(values)) {
    if (name.length === 0) throw new QueryBuildError('parameter names must be non-empty');
    if (values[name] !== undefined) defineMember(out, name, encodeUntyped(values[name]!, name));
  }
  return out;
}
