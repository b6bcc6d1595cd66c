// Helpers shared by the reference unit tests and the differential tests: running a request
// body (text) on the reference, strict comparison of plain JSON values, and printing them.
import { decodeRequest } from '../../src/protocol/decode.js';
import { SvcError } from '../../src/protocol/errors.js';
import { ReferenceDb } from './interpreter.js';

export interface Outcome { status: number; body: unknown }

/** Decode (the shared decoder; its errors are stage-3 400s) and run on the reference. */
export function runReference(db: ReferenceDb, body: string): Outcome {
  let request;
  try {
    request = decodeRequest(body);
  } catch (e) {
    if (e instanceof SvcError) return { status: e.status, body: new Map<string, unknown>([['error', e.code], ['msg', e.message]]) };
    throw e;
  }
  return db.query(request);
}

/** The error code of a failure body (a Map from parseJson or from the reference). */
export function errorCode(body: unknown): unknown {
  return body instanceof Map ? body.get('error') : undefined;
}

/**
 * Strict equality of plain JSON values: bigint vs number matters (integer vs float
 * tokens), numbers compare with Object.is (so -0 ≠ 0), Map keys must agree in order.
 */
export function plainEqual(a: unknown, b: unknown): boolean {
  if (typeof a === 'number' && typeof b === 'number') return Object.is(a, b);
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) return a === b;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => plainEqual(x, b[i]));
  }
  if (a instanceof Map && b instanceof Map) {
    if (a.size !== b.size) return false;
    const ka = [...a.keys()];
    const kb = [...b.keys()];
    return ka.every((k, i) => k === kb[i] && plainEqual(a.get(k), b.get(k)));
  }
  return false;
}

/** JSON text of a plain value; floats always show a fraction or exponent (`2.0`). */
export function showPlain(v: unknown): string {
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number') {
    if (Object.is(v, -0)) return '-0.0';
    return Number.isInteger(v) && Math.abs(v) < 1e16 ? `${v}.0` : String(v);
  }
  if (Array.isArray(v)) return `[${v.map(showPlain).join(',')}]`;
  if (v instanceof Map) return `{${[...v].map(([k, x]) => `${JSON.stringify(k)}:${showPlain(x)}`).join(',')}}`;
  return JSON.stringify(v) ?? String(v);
}
