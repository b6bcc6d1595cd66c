// JSON text in and out for the client, without the precision loss of JSON.stringify /
// JSON.parse (envelope.md §3.4, §12):
//
// * writeJson emits a `bigint` as a bare integer token of any length, so i64 values and
//   IDs beyond 2^53 reach the server exactly.
// * parseResponseJson keeps integer tokens exact: safe integers become numbers, larger
//   ones bigints; every other number token is a double. Objects are plain objects whose
//   members are defined with Object.defineProperty, so a key such as "__proto__" is an
//   ordinary member and never touches the prototype.
//
// Both work with an explicit stack instead of recursion: a long builder chain nests one
// object per step, and the depth of the tree must not be bounded by the JS call stack.

/** A wire JSON value as the builders produce it (bigint = exact integer token). */
export type WireJson = null | boolean | number | bigint | string | readonly WireJson[] | WireObject;
export type WireObject = { readonly [key: string]: WireJson };

/** Deepest container nesting either function accepts (guards against cycles, too). */
export const jsonDepthMax = 100_000;

type WriteFrame =
  | { readonly items: readonly unknown[]; index: number }
  | { readonly object: Readonly<Record<string, unknown>>; readonly keys: readonly string[]; index: number };

/**
 * JSON text of `value`. `bigint` becomes an exact integer token; members whose value is
 * `undefined` are skipped (and `undefined` array items become `null`), like JSON.stringify.
 * Non-finite numbers, functions, symbols and non-plain objects are refused.
 */
export function writeJson(value: unknown): string {
  let out = '';
  const stack: WriteFrame[] = [];
  let pending: unknown = value;
  let hasPending = true;
  for (;;) {
    if (hasPending) {
      hasPending = false;
      if (Array.isArray(pending)) {
        out += '[';
        stack.push({ items: pending, index: 0 });
      } else if (isPlainObject(pending)) {
        const object = pending;
        out += '{';
        stack.push({ object, keys: Object.keys(object).filter((k) => object[k] !== undefined), index: 0 });
      } else {
        out += writeScalar(pending);
      }
      if (stack.length > jsonDepthMax) throw new RangeError(`JSON nesting deeper than ${jsonDepthMax} levels (cyclic value?)`);
    }
    const top = stack[stack.length - 1];
    if (top === undefined) return out;
    if ('items' in top) {
      if (top.index < top.items.length) {
        if (top.index > 0) out += ',';
        const item = top.items[top.index++];
        pending = item === undefined ? null : item;
        hasPending = true;
      } else {
        out += ']';
        stack.pop();
      }
    } else if (top.index < top.keys.length) {
      if (top.index > 0) out += ',';
      const key = top.keys[top.index++]!;
      out += JSON.stringify(key) + ':';
      pending = top.object[key];
      hasPending = true;
    } else {
      out += '}';
      stack.pop();
    }
  }
}

function writeScalar(v: unknown): string {
  switch (typeof v) {
    case 'string': return JSON.stringify(v);
    case 'boolean': return v ? 'true' : 'false';
    case 'bigint': return v.toString();
    case 'number':
      if (!Number.isFinite(v)) throw new TypeError(`cannot write ${v} as JSON: numbers must be finite`);
      // JSON.stringify drops the sign of -0; the integer token -0 keeps it where a float is read.
      return Object.is(v, -0) ? '-0' : JSON.stringify(v);
    case 'object':
      if (v === null) return 'null';
      throw new TypeError(`cannot write a ${v.constructor?.name ?? 'non-plain object'} as JSON`);
    default:
      throw new TypeError(`cannot write a ${typeof v} as JSON`);
  }
}

/** A plain object: created by `{}`, `Object.create(null)` or a JSON parse. */
export function isPlainObject(v: unknown): v is Readonly<Record<string, unknown>> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** Sets `key` as an own enumerable member, even for "__proto__". */
export function defineMember(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

// ---------------------------------------------------------------------------------------
// Parsing

type ParseFrame =
  | { readonly array: unknown[] }
  | { readonly object: Record<string, unknown>; key: string | null };

const numberToken = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
const whitespace = /[ \t\n\r]*/y;

/**
 * Parses a response body. Integer tokens beyond ±(2^53 − 1) become bigint, other numbers
 * doubles; objects are plain objects (own members only). Throws SyntaxError on bad JSON.
 */
export function parseResponseJson(text: string): unknown {
  let pos = 0;
  const stack: ParseFrame[] = [];
  let result: unknown;

  const skipWs = (): void => {
    whitespace.lastIndex = pos;
    whitespace.exec(text);
    pos = whitespace.lastIndex;
  };
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at offset ${pos}`);
  };
  const readString = (): string => {
    const start = pos;
    pos++;
    for (;;) {
      const c = text.charCodeAt(pos);
      if (Number.isNaN(c)) fail('unterminated string');
      if (c === 0x22) break;
      pos += c === 0x5c ? 2 : 1;
    }
    pos++;
    return JSON.parse(text.slice(start, pos)) as string;
  };
  /** Delivers a finished value to the enclosing container (or as the result). */
  const deliver = (value: unknown): void => {
    const top = stack[stack.length - 1];
    if (top === undefined) result = value;
    else if ('array' in top) top.array.push(value);
    else {
      defineMember(top.object, top.key!, value);
      top.key = null;
    }
  };

  for (;;) {
    skipWs();
    // Read one value, or open a container.
    const c = text[pos];
    let value: unknown;
    let opened = false;
    if (c === '{' || c === '[') {
      pos++;
      const frame: ParseFrame = c === '{' ? { object: {}, key: null } : { array: [] };
      stack.push(frame);
      if (stack.length > jsonDepthMax) fail('nesting too deep');
      opened = true;
      skipWs();
      if (text[pos] === (c === '{' ? '}' : ']')) {
        pos++;
        stack.pop();
        value = 'array' in frame ? frame.array : frame.object;
        opened = false;
      } else if ('object' in frame) {
        if (text[pos] !== '"') fail('expected a member name');
        frame.key = readString();
        skipWs();
        if (text[pos] !== ':') fail('expected `:`');
        pos++;
        continue;
      } else {
        continue;
      }
    } else if (c === '"') {
      value = readString();
    } else if (text.startsWith('true', pos)) {
      value = true; pos += 4;
    } else if (text.startsWith('false', pos)) {
      value = false; pos += 5;
    } else if (text.startsWith('null', pos)) {
      value = null; pos += 4;
    } else {
      numberToken.lastIndex = pos;
      const m = numberToken.exec(text);
      if (m === null) fail('expected a value');
      const token = m![0];
      pos += token.length;
      if (m![1] === undefined && m![2] === undefined) {
        const n = Number(token);
        value = Number.isSafeInteger(n) ? n : BigInt(token);
      } else {
        value = Number(token);
      }
    }
    if (!opened) deliver(value);
    // Close finished containers and move to the next member/item.
    for (;;) {
      const top = stack[stack.length - 1];
      skipWs();
      if (top === undefined) {
        if (pos !== text.length) fail('unexpected text after the document');
        return result;
      }
      const close = 'array' in top ? ']' : '}';
      if (text[pos] === ',') {
        pos++;
        if ('object' in top) {
          skipWs();
          if (text[pos] !== '"') fail('expected a member name');
          top.key = readString();
          skipWs();
          if (text[pos] !== ':') fail('expected `:`');
          pos++;
        }
        break;
      }
      if (text[pos] !== close) fail(`expected \`,\` or \`${close}\``);
      pos++;
      stack.pop();
      deliver('array' in top ? top.array : top.object);
    }
  }
}
