// The fast path of the gateway's outer JSON decode (SPEC "Cloud request rate limit" 4;
// gateway.ts outerRequestType): the gateway must refuse a body that is not JSON, and learn
// whether it is a read or a write, before admission. JSON.parse does both but builds the
// whole document (objects, interned property names) only to read one top-level field, and
// the backend parses the body again anyway; for a point lookup that tree costs more than the
// rest of the gateway's own JavaScript.
//
// quickRequestType() walks the UTF-8 bytes once, without building anything, and answers
// only when it is certain: the body is valid JSON (RFC 8259 grammar, the language
// JSON.parse accepts), its top level is an object, and the last top-level `request_type`
// member (JSON.parse keeps the last of duplicate names) is the plain string "read" or
// "write". In every other case it answers null and the caller runs the full JSON.parse
// path, which produces the same errors as before, word for word. So the fast path may give
// up on anything unusual (escapes in a top-level name or in the value, any error), but it
// must never accept a body JSON.parse refuses: test/gateway-outer-decode.test.ts checks it
// differentially against JSON.parse on generated and mutated bodies.
import { isUtf8 } from 'node:buffer';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;
const MINUS = 0x2d;

/** `request_type` as bytes. */
const REQUEST_TYPE = [0x72, 0x65, 0x71, 0x75, 0x65, 0x73, 0x74, 0x5f, 0x74, 0x79, 0x70, 0x65];
const READ = [0x72, 0x65, 0x61, 0x64];
const WRITE = [0x77, 0x72, 0x69, 0x74, 0x65];
const TRUE = [0x74, 0x72, 0x75, 0x65];
const FALSE = [0x66, 0x61, 0x6c, 0x73, 0x65];
const NULL = [0x6e, 0x75, 0x6c, 0x6c];

/** A byte after a backslash in a JSON string: " \ / b f n r t (u is handled apart). */
function simpleEscape(c: number): boolean {
  return c === QUOTE || c === BACKSLASH || c === 0x2f || c === 0x62 || c === 0x66 || c === 0x6e || c === 0x72 || c === 0x74;
}

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

function skipWhitespace(b: Uint8Array, i: number): number {
  const n = b.length;
  while (i < n) {
    const c = b[i]!;
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
    i++;
  }
  return i;
}

/** Whether b[start, end) holds exactly `word`. */
function equals(b: Uint8Array, start: number, end: number, word: readonly number[]): boolean {
  if (end - start !== word.length) return false;
  for (let k = 0; k < word.length; k++) if (b[start + k] !== word[k]) return false;
  return true;
}

// What the last scan saw (module state instead of an object per value; nothing here is
// reentrant or asynchronous).
/** The last string skipped had a backslash escape. */
let escaped = false;
const KIND_STRING = 1;
const KIND_OTHER = 2;
const KIND_OPEN = 3;
/** What parseValueStart() found. */
let kind = 0;

/**
 * The string starting at the quote b[i]: the index after its closing quote, or -1 when it is
 * not a valid JSON string. Sets `escaped` when it contains a backslash escape.
 */
function skipString(b: Uint8Array, i: number): number {
  const n = b.length;
  i++;
  escaped = false;
  while (i < n) {
    const c = b[i]!;
    if (c === QUOTE) return i + 1;
    if (c < 0x20) return -1; // control characters must be escaped
    if (c === BACKSLASH) {
      escaped = true;
      if (i + 1 >= n) return -1;
      const e = b[i + 1]!;
      if (e === 0x75) { // \uXXXX (any code unit, lone surrogates included, as JSON.parse accepts)
        if (i + 5 >= n || !isHex(b[i + 2]!) || !isHex(b[i + 3]!) || !isHex(b[i + 4]!) || !isHex(b[i + 5]!)) return -1;
        i += 6;
      } else if (simpleEscape(e)) {
        i += 2;
      } else {
        return -1;
      }
      continue;
    }
    i++; // any other byte: the body is valid UTF-8 (checked before), so any character >= U+0020
  }
  return -1;
}

/** The number starting at b[i] (`-` or a digit): the index after it, or -1 when malformed. */
function skipNumber(b: Uint8Array, i: number): number {
  const n = b.length;
  if (b[i] === MINUS) i++;
  if (i >= n) return -1;
  if (b[i] === 0x30) {
    i++;
  } else if (b[i]! >= 0x31 && b[i]! <= 0x39) {
    while (i < n && isDigit(b[i]!)) i++;
  } else {
    return -1;
  }
  if (i < n && b[i] === 0x2e) { // fraction: at least one digit
    i++;
    if (i >= n || !isDigit(b[i]!)) return -1;
    while (i < n && isDigit(b[i]!)) i++;
  }
  if (i < n && (b[i] === 0x65 || b[i] === 0x45)) { // exponent: optional sign, at least one digit
    i++;
    if (i < n && (b[i] === 0x2b || b[i] === MINUS)) i++;
    if (i >= n || !isDigit(b[i]!)) return -1;
    while (i < n && isDigit(b[i]!)) i++;
  }
  return i;
}

const OBJECT = 1;
const ARRAY = 2;

/**
 * 'read' or 'write' when `body` is certainly a valid JSON object whose request_type is that
 * plain string; null when unsure (the caller then decodes it in full).
 */
export function quickRequestType(body: Uint8Array): 'read' | 'write' | null {
  if (!isUtf8(body)) return null;
  const b = body;
  const n = b.length;
  let i = 0;
  // TextDecoder drops one leading byte order mark before JSON.parse sees the text.
  if (n >= 3 && b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf) i = 3;
  i = skipWhitespace(b, i);
  if (b[i] !== OPEN_OBJECT) return null;
  const stack: number[] = [OBJECT];
  i++;
  let found: 'read' | 'write' | null = null;
  // Just after an opening bracket: the container may close at once.
  let first = true;
  for (;;) {
    // ---- a member (objects) or an element (arrays) is expected here, or the close
    i = skipWhitespace(b, i);
    if (i >= n) return null;
    if (stack[stack.length - 1] === OBJECT) {
      if (first && b[i] === CLOSE_OBJECT) {
        i++;
        stack.pop();
      } else {
        if (b[i] !== QUOTE) return null;
        const nameStart = i + 1;
        const after = skipString(b, i);
        if (after < 0) return null;
        let valueIsRequestType = false;
        if (stack.length === 1) {
          if (escaped) return null; // a top-level name with escapes might spell request_type
          valueIsRequestType = equals(b, nameStart, after - 1, REQUEST_TYPE);
        }
        i = skipWhitespace(b, after);
        if (b[i] !== COLON) return null;
        i = skipWhitespace(b, i + 1);
        if (i >= n) return null;
        const next = parseValueStart(b, i, stack);
        if (next < 0) return null;
        if (valueIsRequestType) {
          if (kind !== KIND_STRING || escaped) return null; // the full decode says what is wrong
          if (equals(b, i + 1, next - 1, READ)) found = 'read';
          else if (equals(b, i + 1, next - 1, WRITE)) found = 'write';
          else return null;
        }
        i = next;
        if (kind === KIND_OPEN) { first = true; continue; }
      }
    } else if (first && b[i] === CLOSE_ARRAY) {
      i++;
      stack.pop();
    } else {
      const next = parseValueStart(b, i, stack);
      if (next < 0) return null;
      i = next;
      if (kind === KIND_OPEN) { first = true; continue; }
    }
    // ---- after a value (or a closed container): `,`, the close, or the end of the text
    for (;;) {
      i = skipWhitespace(b, i);
      if (stack.length === 0) return i === n ? found : null;
      if (i >= n) return null;
      const c = b[i]!;
      const container = stack[stack.length - 1]!;
      if (c === COMMA) {
        i++;
        first = false;
        break;
      }
      if ((container === OBJECT && c === CLOSE_OBJECT) || (container === ARRAY && c === CLOSE_ARRAY)) {
        i++;
        stack.pop();
        continue;
      }
      return null;
    }
  }
}

/**
 * A value at b[i]: a scalar is skipped whole (index after it), `{` or `[` is pushed onto
 * `stack` (index after it); -1 when malformed. Sets `kind` (and `escaped` for strings).
 */
function parseValueStart(b: Uint8Array, i: number, stack: number[]): number {
  const c = b[i]!;
  if (c === QUOTE) { kind = KIND_STRING; return skipString(b, i); }
  if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
    stack.push(c === OPEN_OBJECT ? OBJECT : ARRAY);
    kind = KIND_OPEN;
    return i + 1;
  }
  kind = KIND_OTHER;
  if (c === MINUS || isDigit(c)) return skipNumber(b, i);
  const word = c === 0x74 ? TRUE : c === 0x66 ? FALSE : c === 0x6e ? NULL : null;
  if (word === null || !equals(b, i, i + word.length, word)) return -1;
  return i + word.length;
}
