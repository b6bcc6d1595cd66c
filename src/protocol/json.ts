// Strict JSON in and out (envelope.md §7, §12; values.md §3).
//
// parseJson is a hand-written RFC 8259 parser that keeps what JSON.parse throws away:
// integer tokens become exact bigints (any length) and every other number token becomes
// a double, so callers can tell `5` from `5.0` (the integer token `-0` is its own value,
// NEGATIVE_ZERO_INTEGER, because a bigint has no sign to keep); objects are Maps (insertion
// order kept, "__proto__" is an ordinary key) and a duplicated key is an error. A string
// holding a lone surrogate (escaped like `"\ud800"`, or raw in string input) is rejected:
// it has no UTF-8 form, so the store could only keep a replacement character for it. It is iterative, with
// an explicit stack, so nesting depth is bounded only by `depthMax`, never by the JS
// call stack. Error details follow the reference's parser wording:
// `<what> at line L column C` (column counted in UTF-8 bytes, 1-based).
//
// The writer renders runtime values as plain JSON the way the reference does: f64 always
// with a fraction or exponent (`30.0`, `1e-7`), f32 widened to double, date-times as
// RFC 3339 with milliseconds, object members sorted byte-wise by UTF-8 key.

import { SvcError, jsonError } from './errors.js';
import { DateTime, F32, StringArray, type Value } from './value.js';
import { limits } from '../limits.js';

export type JsonObject = Map<string, JsonValue>;
export type JsonValue = null | boolean | bigint | number | string | NegativeZeroInteger | JsonValue[] | JsonObject;

/**
 * The integer token `-0`. It is an integer (0) wherever an integer is read, but where an
 * integer token is read as a float (`{"f64": -0}`, an `f64` parameter) it is -0.0, so the
 * sign a bigint cannot hold is kept here. There is one instance, NEGATIVE_ZERO_INTEGER.
 */
export class NegativeZeroInteger {
  static readonly instance = new NegativeZeroInteger();
  /** Its text, and what sets it apart from `{}` for the type checker. */
  readonly token = '-0';
  private constructor() {}
}

export const NEGATIVE_ZERO_INTEGER = NegativeZeroInteger.instance;

// ---------------------------------------------------------------------------------------
// Parsing

// ignoreBOM: true keeps a leading U+FEFF in the text, where it is rejected as not a value.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The text being parsed; cleared after each parse so a large body is not retained. */
let src = '';
/** Cursor hand-off from the string/number readers. */
let pos = 0;
/** Estimated bytes the parse may still build (parseJson's structureBytesMax). */
let structureLeft = Infinity;
let structureMax = Infinity;
/**
 * What one container and one element cost V8 to hold, roughly: an array that grows by push
 * gets 17 slots at its first element, a Map a hash table of its own, and an element is its
 * slot plus the value (a bigint or a string is an object). Retained heap per item of a
 * 100k-item array, measured in the test that keeps these honest (test/json.test.ts): `{}`
 * ~194 B, `{"a":1}` and `[1]` ~222 B, a row of three members ~337 B, an object of 16 small
 * (large) integers ~1,430 (1,680) B, a small integer or a short string 36-38 B. The
 * estimate only has to be within a small factor, and not below (with 128 B and 16 B, 1.7 M
 * `{}` in 5.1 MB built 345 MB under a 256 MiB bound); a 16 MiB body of nested one-element
 * arrays built 1.5 GB and killed the reader threads (a probe).
 */
const CONTAINER_BYTES_ESTIMATE = 200;
const ELEMENT_BYTES_ESTIMATE = 40;
/** An object member's entry in its Map (key, value and hash-table slots, as the table doubles): on top of its element. */
const MEMBER_BYTES_ESTIMATE = 56;

/**
 * Parses one JSON document. Integer tokens become `bigint` (exact), other number tokens
 * `number`, objects `Map`s in document order. Containers nested deeper than `depthMax`,
 * duplicate keys, invalid UTF-8 and anything RFC 8259 forbids throw `jsonError`.
 */
export function parseJson(input: Uint8Array | Buffer | string, depthMax: number = limits.jsonDepthMax, structureBytesMax = Infinity): JsonValue {
  src = typeof input === 'string' ? input : decodeUtf8(input);
  structureLeft = structureMax = structureBytesMax;
  try {
    return parseDocument(src, depthMax);
  } finally {
    src = '';
  }
}

/** The parse would build more than structureBytesMax (estimated): refused before it does. */
function structureTooLarge(): never {
  throw new SvcError('invalid_request_body', `failed to read request body: its JSON holds more arrays, objects and values than ${structureMax / (1024 * 1024)} MiB of memory can hold (the limit bodyStructureBytesMax)`);
}

/**
 * A request body's bytes as the text the parser reads: invalid UTF-8 throws (the decoder's
 * error), and a leading BOM is kept, so it is refused like any character that starts no
 * value (a decoder skips it unless told not to). For every place that turns a body into text
 * before parsing it (the plan cache, inline reads, the gateway's outer decode): a body
 * is then the same text at every size and on every path.
 */
export function bodyText(bytes: Uint8Array): string {
  // Views on shared memory are not accepted by every TextDecoder; copy those.
  return utf8.decode((bytes.buffer instanceof ArrayBuffer ? bytes : new Uint8Array(bytes)) as Uint8Array);
}

function decodeUtf8(bytes: Uint8Array | Buffer): string {
  try {
    return bodyText(bytes);
  } catch {
    const at = firstInvalidUtf8(bytes);
    let line = 1;
    let lineStart = 0;
    for (let i = 0; i < at; i++) {
      if (bytes[i] === 0x0a) { line++; lineStart = i + 1; }
    }
    throw jsonError(`invalid UTF-8 at line ${line} column ${at - lineStart + 1}`);
  }
}

/** Offset of the first byte that does not start a well-formed UTF-8 sequence. */
function firstInvalidUtf8(b: Uint8Array | Buffer): number {
  const n = b.length;
  let i = 0;
  while (i < n) {
    const c = b[i]!;
    if (c < 0x80) { i++; continue; }
    let need: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) need = 1;
    else if (c === 0xe0) { need = 2; lo = 0xa0; }
    else if (c === 0xed) { need = 2; hi = 0x9f; }
    else if (c >= 0xe1 && c <= 0xef) need = 2;
    else if (c === 0xf0) { need = 3; lo = 0x90; }
    else if (c === 0xf4) { need = 3; hi = 0x8f; }
    else if (c >= 0xf1 && c <= 0xf3) need = 3;
    else return i;
    if (i + need >= n) return i;
    const c1 = b[i + 1]!;
    if (c1 < lo || c1 > hi) return i;
    for (let k = 2; k <= need; k++) {
      const ck = b[i + k]!;
      if (ck < 0x80 || ck > 0xbf) return i;
    }
    i += need + 1;
  }
  return n;
}

function fail(what: string, at: number): never {
  const s = src;
  const end = Math.min(at, s.length);
  let line = 1;
  let lineStart = 0;
  for (let i = s.indexOf('\n'); i !== -1 && i < end; i = s.indexOf('\n', i + 1)) {
    line++;
    lineStart = i + 1;
  }
  const column = Buffer.byteLength(s.slice(lineStart, end), 'utf8') + 1;
  throw jsonError(`${what} at line ${line} column ${column}`);
}

function skipWs(s: string, i: number): number {
  for (;;) {
    const c = s.charCodeAt(i);
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
    else return i;
  }
}

function parseDocument(s: string, depthMax: number): JsonValue {
  const len = s.length;
  // Open containers, innermost last; keys[k] is the pending member name when frames[k]
  // is an object.
  const frames: (JsonValue[] | JsonObject)[] = [];
  const keys: string[] = [];
  let value: JsonValue = null;
  let i = skipWs(s, 0);

  for (;;) {
    // ---- read one value starting at i (whitespace already skipped)
    if (i >= len) fail('EOF while parsing a value', i);
    const c = s.charCodeAt(i);
    if (c === 0x22) {
      value = readString(s, i + 1);
      i = pos;
    } else if (c === 0x7b) {
      if (frames.length >= depthMax) fail('recursion limit exceeded', i);
      if ((structureLeft -= CONTAINER_BYTES_ESTIMATE) < 0) structureTooLarge();
      i = skipWs(s, i + 1);
      if (s.charCodeAt(i) === 0x7d) {
        value = new Map();
        i++;
      } else {
        const m: JsonObject = new Map();
        keys.push(readMemberKey(s, i, m, false));
        frames.push(m);
        i = pos;
        continue;
      }
    } else if (c === 0x5b) {
      if (frames.length >= depthMax) fail('recursion limit exceeded', i);
      if ((structureLeft -= CONTAINER_BYTES_ESTIMATE) < 0) structureTooLarge();
      i = skipWs(s, i + 1);
      if (s.charCodeAt(i) === 0x5d) {
        value = [];
        i++;
      } else {
        frames.push([]);
        keys.push('');
        continue;
      }
    } else if (c === 0x74) {
      if (s.charCodeAt(i + 1) !== 0x72 || s.charCodeAt(i + 2) !== 0x75 || s.charCodeAt(i + 3) !== 0x65) badIdent(s, i);
      value = true;
      i += 4;
    } else if (c === 0x66) {
      if (s.charCodeAt(i + 1) !== 0x61 || s.charCodeAt(i + 2) !== 0x6c || s.charCodeAt(i + 3) !== 0x73
        || s.charCodeAt(i + 4) !== 0x65) badIdent(s, i);
      value = false;
      i += 5;
    } else if (c === 0x6e) {
      if (s.charCodeAt(i + 1) !== 0x75 || s.charCodeAt(i + 2) !== 0x6c || s.charCodeAt(i + 3) !== 0x6c) badIdent(s, i);
      value = null;
      i += 4;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      value = readNumber(s, i);
      i = pos;
    } else {
      fail('expected value', i);
    }

    // ---- attach the completed value to its container, closing containers as they end
    for (;;) {
      const depth = frames.length;
      if (depth === 0) {
        i = skipWs(s, i);
        if (i < len) fail('trailing characters', i);
        return value;
      }
      const f = frames[depth - 1]!;
      if ((structureLeft -= ELEMENT_BYTES_ESTIMATE) < 0) structureTooLarge();
      i = skipWs(s, i);
      const d = s.charCodeAt(i);
      if (Array.isArray(f)) {
        f.push(value);
        if (d === 0x2c) {
          i = skipWs(s, i + 1);
          if (s.charCodeAt(i) === 0x5d) fail('trailing comma', i);
          break;
        }
        if (d === 0x5d) {
          i++;
          frames.pop();
          keys.pop();
          value = f;
          continue;
        }
        fail(i >= len ? 'EOF while parsing a list' : 'expected `,` or `]`', i);
      } else {
        if ((structureLeft -= MEMBER_BYTES_ESTIMATE) < 0) structureTooLarge();
        f.set(keys[depth - 1]!, value);
        if (d === 0x2c) {
          keys[depth - 1] = readMemberKey(s, skipWs(s, i + 1), f, true);
          i = pos;
          break;
        }
        if (d === 0x7d) {
          i++;
          frames.pop();
          keys.pop();
          value = f;
          continue;
        }
        fail(i >= len ? 'EOF while parsing an object' : 'expected `,` or `}`', i);
      }
    }
  }
}

function badIdent(s: string, i: number): never {
  // Point at the first character that departs from the literal, like the reference.
  const word = s.charCodeAt(i) === 0x74 ? 'true' : s.charCodeAt(i) === 0x66 ? 'false' : 'null';
  let k = 1;
  while (k < word.length && s.charCodeAt(i + k) === word.charCodeAt(k)) k++;
  fail(i + k >= s.length ? 'EOF while parsing a value' : 'expected ident', i + k);
}

/**
 * Reads `"key" :` at i (whitespace before it skipped) for object m, rejecting a duplicate;
 * leaves `pos` at the start of the member value (whitespace skipped).
 */
function readMemberKey(s: string, i: number, m: JsonObject, afterComma: boolean): string {
  const c = s.charCodeAt(i);
  if (c !== 0x22) {
    if (i >= s.length) fail('EOF while parsing an object', i);
    fail(afterComma && c === 0x7d ? 'trailing comma' : 'key must be a string', i);
  }
  const key = readString(s, i + 1);
  if (m.has(key)) {
    const shown = key.length > 64 ? `${key.slice(0, 64)}...` : key;
    fail(`duplicate key ${JSON.stringify(shown)}`, i);
  }
  let j = skipWs(s, pos);
  if (s.charCodeAt(j) !== 0x3a) fail(j >= s.length ? 'EOF while parsing an object' : 'expected `:`', j);
  j = skipWs(s, j + 1);
  pos = j;
  return key;
}

/** Reads a string whose opening quote is just before `start`; `pos` ends after the closing quote. */
function readString(s: string, start: number): string {
  const len = s.length;
  let i = start;
  for (;;) {
    if (i >= len) fail('EOF while parsing a string', len);
    const c = s.charCodeAt(i);
    if (c === 0x22) {
      pos = i + 1;
      return s.slice(start, i);
    }
    if (c === 0x5c) break;
    if (c < 0x20) fail('control character (\\u0000-\\u001F) found while parsing a string', i);
    i = c >= 0xd800 && c <= 0xdfff ? afterRawSurrogate(s, i) : i + 1;
  }
  return readEscapedString(s, start, i);
}

const isHighSurrogate = (c: number): boolean => c >= 0xd800 && c <= 0xdbff;
const isLowSurrogate = (c: number): boolean => c >= 0xdc00 && c <= 0xdfff;

function failLoneSurrogate(unit: number, at: number): never {
  const hex = unit.toString(16).toUpperCase();
  fail(`lone surrogate \\u${hex} in a string: the string cannot be represented in UTF-8`, at);
}

/**
 * A raw surrogate at i (only string input can hold one: bytes went through a strict UTF-8
 * decoder). Returns the index after the pair it starts; a lone half is an error.
 */
function afterRawSurrogate(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (isHighSurrogate(c) && isLowSurrogate(s.charCodeAt(i + 1))) return i + 2;
  failLoneSurrogate(c, i);
}

/** The code unit of the four hex digits after `\\u` at i (i is at the backslash). */
function hexEscape(s: string, i: number): number {
  let code = 0;
  for (let k = 2; k < 6; k++) {
    const h = hexValue(s.charCodeAt(i + k));
    if (h < 0) fail(i + k >= s.length ? 'EOF while parsing a string' : 'invalid escape', i + k);
    code = (code << 4) | h;
  }
  return code;
}

/** Slow path: `i` is at the first backslash. Runs between escapes are sliced, not copied by char. */
function readEscapedString(s: string, start: number, i: number): string {
  const len = s.length;
  let out = s.slice(start, i);
  for (;;) {
    // s[i] is a backslash
    const e = s.charCodeAt(i + 1);
    switch (e) {
      case 0x22: out += '"'; break;
      case 0x5c: out += '\\'; break;
      case 0x2f: out += '/'; break;
      case 0x62: out += '\b'; break;
      case 0x66: out += '\f'; break;
      case 0x6e: out += '\n'; break;
      case 0x72: out += '\r'; break;
      case 0x74: out += '\t'; break;
      case 0x75: {
        const code = hexEscape(s, i);
        if (code >= 0xd800 && code <= 0xdfff) {
          // Only an escaped pair (high then low) is a character; JSON.parse would accept
          // a lone half, which UTF-8 (and so the store) cannot hold.
          if (!isHighSurrogate(code) || s.charCodeAt(i + 6) !== 0x5c || s.charCodeAt(i + 7) !== 0x75) failLoneSurrogate(code, i);
          const low = hexEscape(s, i + 6);
          if (!isLowSurrogate(low)) failLoneSurrogate(code, i);
          out += String.fromCharCode(code, low);
          i += 10;
        } else {
          out += String.fromCharCode(code);
          i += 4;
        }
        break;
      }
      default:
        fail(i + 1 >= len ? 'EOF while parsing a string' : 'invalid escape', i + 1);
    }
    i += 2;
    const run = i;
    for (;;) {
      if (i >= len) fail('EOF while parsing a string', len);
      const c = s.charCodeAt(i);
      if (c === 0x22) {
        pos = i + 1;
        return run === i ? out : out + s.slice(run, i);
      }
      if (c === 0x5c) break;
      if (c < 0x20) fail('control character (\\u0000-\\u001F) found while parsing a string', i);
      i = c >= 0xd800 && c <= 0xdfff ? afterRawSurrogate(s, i) : i + 1;
    }
    if (run !== i) out += s.slice(run, i);
  }
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const l = c | 0x20;
  if (l >= 0x61 && l <= 0x66) return l - 0x61 + 10;
  return -1;
}

/** Reads a number token at i; `pos` ends after it. */
function readNumber(s: string, i: number): bigint | number | NegativeZeroInteger {
  const start = i;
  let c = s.charCodeAt(i);
  const negative = c === 0x2d;
  if (negative) c = s.charCodeAt(++i);
  let int = 0;
  if (c === 0x30) {
    c = s.charCodeAt(++i);
  } else if (c >= 0x31 && c <= 0x39) {
    do {
      int = int * 10 + (c - 0x30);
      c = s.charCodeAt(++i);
    } while (c >= 0x30 && c <= 0x39);
  } else {
    fail(i >= s.length ? 'EOF while parsing a value' : 'invalid number', i);
  }
  let integral = true;
  if (c === 0x2e) {
    integral = false;
    c = s.charCodeAt(++i);
    if (!(c >= 0x30 && c <= 0x39)) fail(i >= s.length ? 'EOF while parsing a value' : 'invalid number', i);
    do c = s.charCodeAt(++i); while (c >= 0x30 && c <= 0x39);
  }
  if (c === 0x65 || c === 0x45) {
    integral = false;
    c = s.charCodeAt(++i);
    if (c === 0x2b || c === 0x2d) c = s.charCodeAt(++i);
    if (!(c >= 0x30 && c <= 0x39)) fail(i >= s.length ? 'EOF while parsing a value' : 'invalid number', i);
    do c = s.charCodeAt(++i); while (c >= 0x30 && c <= 0x39);
  }
  pos = i;
  if (integral) {
    // Up to 15 digits the running double is exact.
    const digits = i - start - (negative ? 1 : 0);
    if (negative && int === 0 && digits === 1) return NEGATIVE_ZERO_INTEGER;
    if (digits <= 15) return BigInt(negative ? -int : int);
    // Past a double's range an integer token is no number any type can hold: the reference
    // (serde_json) rejects it as it rejects 1e400.
    if (digits > 308 && !Number.isFinite(Number(s.slice(start, i)))) fail('number out of range', start);
    return BigInt(s.slice(start, i));
  }
  const v = Number(s.slice(start, i));
  if (v === Infinity || v === -Infinity) fail('number out of range', start);
  return v;
}

// ---------------------------------------------------------------------------------------
// Writing

/**
 * A double as the reference prints it: shortest round-trip digits, always with a
 * fraction or an exponent (`30.0`, `0.1`, `1e21`, `1e-7`, `1.5e300`, `-0.0`). Plain
 * notation is used for 1e-5 <= |n| < 1e16, exponent notation otherwise. NaN/±∞ -> `null`.
 */
export function writeF64(n: number): string {
  const a = Math.abs(n);
  if (a >= 1e-5 && a < 1e16) {
    // JS prints this range in plain notation with the same shortest digits. JSON.stringify,
    // not String(n): String() goes through V8's number-string cache (see writeInteger).
    const s = JSON.stringify(n);
    return Number.isInteger(n) ? `${s}.0` : s;
  }
  if (n === 0) return Object.is(n, -0) ? '-0.0' : '0.0';
  if (a !== a || a === Infinity) return 'null';
  // "d.ddde±x" carries the shortest digits; re-lay them out.
  const e = n.toExponential();
  const ePos = e.indexOf('e');
  const negative = n < 0;
  const mantissa = e.slice(negative ? 1 : 0, ePos);
  const digits = mantissa.length > 1 ? mantissa[0]! + mantissa.slice(2) : mantissa;
  const exp = Number(e.slice(ePos + 1)); // n = d.ddd × 10^exp
  const sign = negative ? '-' : '';
  const kk = exp + 1; // position of the decimal point relative to the digits
  const len = digits.length;
  // The reference's layout rules (ryu); only the exponent branch is reachable from the
  // range test above, the others are kept so the function stands on its own.
  if (len <= kk && kk <= 16) return `${sign}${digits}${'0'.repeat(kk - len)}.0`;
  if (0 < kk && kk <= 16) return `${sign}${digits.slice(0, kk)}.${digits.slice(kk)}`;
  if (-5 < kk && kk <= 0) return `${sign}0.${'0'.repeat(-kk)}${digits}`;
  return len === 1 ? `${sign}${digits}e${exp}` : `${sign}${digits[0]}.${digits.slice(1)}e${exp}`;
}

/**
 * An integer (an element ID, a count) as JSON. JSON.stringify, not String() or a template:
 * those go through V8's number-string cache, which keeps each string alive past young
 * collections until a later number evicts it, so every ID rendered became old-generation
 * garbage (~0.5 MB/s of it at 90k point lookups/s, a full collection every second or two).
 */
export function writeInteger(n: number): string {
  return JSON.stringify(n);
}

/** Characters JSON.stringify escapes (or may: a surrogate can be unpaired). */
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/** A JSON string literal: JSON.stringify's, which is the string in quotes when no character needs escaping. */
export function writeString(s: string): string {
  return ESCAPED.test(s) ? JSON.stringify(s) : `"${s}"`;
}

/**
 * Byte-wise ascending order of the UTF-8 encodings (the reference's key order). UTF-16
 * code-unit order agrees except that surrogates (characters above U+FFFF) must sort after
 * U+E000–U+FFFF.
 */
export function compareKeys(a: string, b: string): number {
  if (a === b) return 0;
  const n = a.length < b.length ? a.length : b.length;
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x !== y) {
      if (x >= 0xd800 && y >= 0xd800) {
        x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
        y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
      }
      return x - y;
    }
  }
  return a.length - b.length;
}

/** 0000-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z in epoch milliseconds. */
const DATE_TIME_MS_MIN = -62167219200000;
const DATE_TIME_MS_MAX = 253402300799999;

/**
 * Epoch milliseconds as RFC 3339 UTC with three fractional digits (`2025-03-01T08:00:00.000Z`),
 * unquoted. Years outside 0000–9999 throw response_serialization_error.
 */
export function formatDateTime(ms: number): string {
  if (!Number.isSafeInteger(ms) || ms < DATE_TIME_MS_MIN || ms > DATE_TIME_MS_MAX) {
    throw new SvcError('response_serialization_error', 'json serialization error: date-time out of range');
  }
  return new Date(ms).toISOString();
}

/** A runtime value as plain response JSON (values.md §3). */
export function renderValue(v: Value): string {
  switch (typeof v) {
    case 'boolean': return v ? 'true' : 'false';
    case 'bigint': return v.toString();
    case 'number': return writeF64(v);
    case 'string': return writeString(v);
  }
  if (v === null) return 'null';
  if (v instanceof F32) return writeF64(v.value);
  if (v instanceof DateTime) return `"${formatDateTime(v.ms)}"`;
  if (v instanceof Uint8Array || v instanceof BigInt64Array) return `[${v.join(',')}]`;
  if (v instanceof Float64Array || v instanceof Float32Array) {
    let out = '[';
    for (let i = 0; i < v.length; i++) out += (i === 0 ? '' : ',') + writeF64(v[i]!);
    return `${out}]`;
  }
  if (v instanceof StringArray) {
    const items = v.items;
    let out = '[';
    for (let i = 0; i < items.length; i++) out += (i === 0 ? '' : ',') + writeString(items[i]!);
    return `${out}]`;
  }
  if (Array.isArray(v)) {
    let out = '[';
    for (let i = 0; i < v.length; i++) out += (i === 0 ? '' : ',') + renderValue(v[i]!);
    return `${out}]`;
  }
  const layout = layoutOf(v);
  if (layout === null) {
    const names = Array.from(v.keys());
    if (names.length > 1) names.sort(compareKeys);
    let out = '{';
    for (let i = 0; i < names.length; i++) {
      const k = names[i]!;
      out += `${i === 0 ? '' : ','}${JSON.stringify(k)}:${renderValue(v.get(k)!)}`;
    }
    return `${out}}`;
  }
  const { names, heads } = layout;
  if (names.length === 0) return '{}';
  let out = '';
  for (let i = 0; i < names.length; i++) out += heads[i]! + renderValue(v.get(names[i]!)!);
  return `${out}}`;
}

// Objects rendered many times have few distinct key lists: every `value_map` row of a label
// has the same keys, in the same insertion order (the record's, then `$label`, `$id`). The
// sorted order and the quoted member heads of a key list are kept in a trie over its keys in
// insertion order, so a row costs one Map lookup per key instead of a sort and a
// JSON.stringify per key. The trie is bounded; objects beyond it take the sorting path.

/** A key list's members in output order: names sorted byte-wise, heads `{"name":` then `,"name":`. */
interface KeyLayout {
  readonly names: readonly string[];
  readonly heads: readonly string[];
}
interface LayoutNode {
  /** The key lists that continue this one, by their next key. */
  readonly next: Map<string, LayoutNode>;
  /** The keys so far (insertion order). */
  readonly keys: readonly string[];
  layout: KeyLayout | null;
}
const LAYOUT_NODES_MAX = 4096;
let layoutNodes = 1;
const layoutRoot: LayoutNode = { next: new Map(), keys: [], layout: null };

/** The trie node of the last object laid out: consecutive objects (rows) mostly share it. */
let lastLayoutNode: LayoutNode = layoutRoot;

/** Whether `v`'s key list is `node`'s (one comparison per key, no lookup). */
function hasKeysOf(v: Map<string, Value>, node: LayoutNode): boolean {
  const keys = node.keys;
  if (v.size !== keys.length) return false;
  let i = 0;
  for (const key of v.keys()) if (key !== keys[i++]) return false;
  return true;
}

/** The cached layout of an object's key list, or null when the trie is full. */
function layoutOf(v: Map<string, Value>): KeyLayout | null {
  if (lastLayoutNode.layout !== null && hasKeysOf(v, lastLayoutNode)) return lastLayoutNode.layout;
  let node = layoutRoot;
  for (const key of v.keys()) {
    let child = node.next.get(key);
    if (child === undefined) {
      if (layoutNodes >= LAYOUT_NODES_MAX) return null;
      layoutNodes++;
      child = { next: new Map(), keys: [...node.keys, key], layout: null };
      node.next.set(key, child);
    }
    node = child;
  }
  if (node.layout === null) {
    const names = [...node.keys].sort(compareKeys);
    node.layout = { names, heads: names.map((name, i) => `${i === 0 ? '{' : ','}${JSON.stringify(name)}:`) };
  }
  lastLayoutNode = node;
  return node.layout;
}

/** A parsed JSON value written back: bigint as an integer, number via writeF64, Map members in their order. */
export function renderJsonValue(v: JsonValue): string {
  switch (typeof v) {
    case 'boolean': return v ? 'true' : 'false';
    case 'bigint': return v.toString();
    case 'number': return writeF64(v);
    case 'string': return JSON.stringify(v);
  }
  if (v === null) return 'null';
  if (v instanceof NegativeZeroInteger) return '-0';
  if (Array.isArray(v)) {
    let out = '[';
    for (let i = 0; i < v.length; i++) out += (i === 0 ? '' : ',') + renderJsonValue(v[i]!);
    return `${out}]`;
  }
  let out = '{';
  let first = true;
  for (const [k, x] of v) {
    out += `${first ? '' : ','}${JSON.stringify(k)}:${renderJsonValue(x)}`;
    first = false;
  }
  return `${out}}`;
}
