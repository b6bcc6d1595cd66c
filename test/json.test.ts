import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import {
  parseJson, renderValue, renderJsonValue, writeF64, writeString, compareKeys, formatDateTime,
  NEGATIVE_ZERO_INTEGER, NegativeZeroInteger, type JsonValue,
} from '../src/protocol/json.js';
import { SvcError } from '../src/protocol/errors.js';
import { DateTime, F32, StringArray, type Value } from '../src/protocol/value.js';
import { limits } from '../src/limits.js';

const enc = new TextEncoder();

/** Sign of the byte-wise comparison of two strings' UTF-8 encodings. */
function byteCompare(a: string, b: string): number {
  const x = enc.encode(a);
  const y = enc.encode(b);
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return x[i]! < y[i]! ? -1 : 1;
  return Math.sign(x.length - y.length);
}

/** The SvcError thrown by f (fails the test if none or another kind). */
function caught(f: () => unknown): SvcError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(SvcError);
    return e as SvcError;
  }
  throw new Error('expected an error');
}

function rejects(text: string | Uint8Array, pattern?: RegExp, depthMax?: number): SvcError {
  const e = caught(() => parseJson(text, depthMax));
  expect(e.code).toBe('invalid_query_json');
  expect(e.status).toBe(400);
  expect(e.message.startsWith('invalid query JSON: ')).toBe(true);
  expect(e.message).toMatch(/ at line \d+ column \d+$/);
  if (pattern) expect(e.message).toMatch(pattern);
  return e;
}

/** Structural agreement of a parseJson result with a JSON.parse result (bigint by value). */
function agrees(a: JsonValue, b: unknown): boolean {
  if (typeof a === 'bigint') return typeof b === 'number' && Number(a) === b;
  if (a instanceof NegativeZeroInteger) return Object.is(b, -0);
  if (typeof a === 'number') return typeof b === 'number' && Object.is(a, b);
  if (a === null || typeof a !== 'object') return a === b;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((x, i) => agrees(x, b[i]));
  }
  if (b === null || typeof b !== 'object' || Array.isArray(b)) return false;
  const keys = Object.keys(b);
  if (keys.length !== a.size) return false;
  for (const [k, x] of a) {
    if (!Object.prototype.hasOwnProperty.call(b, k)) return false;
    if (!agrees(x, (b as Record<string, unknown>)[k])) return false;
  }
  return true;
}

/** Exact structural equality of two parse results (token kinds and member order included). */
function same(a: JsonValue, b: JsonValue): boolean {
  if (typeof a !== typeof b) return false;
  if (a instanceof NegativeZeroInteger || b instanceof NegativeZeroInteger) return a === b;
  if (typeof a === 'number') return Object.is(a, b);
  if (a === null || typeof a !== 'object') return a === b;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]!));
  if (!(b instanceof Map) || a.size !== b.size) return false;
  const ea = [...a];
  const eb = [...b];
  return ea.every(([k, x], i) => k === eb[i]![0] && same(x, eb[i]![1]));
}

describe('parseJson: scalars and numbers', () => {
  it('parses literals and strings', () => {
    expect(parseJson('null')).toBe(null);
    expect(parseJson('true')).toBe(true);
    expect(parseJson(' \t\r\nfalse \n')).toBe(false);
    expect(parseJson('"Porto"')).toBe('Porto');
    expect(parseJson('""')).toBe('');
  });

  it('keeps the token kind: 5 vs 5.0 vs 5e0', () => {
    expect(parseJson('5')).toBe(5n);
    expect(parseJson('5.0')).toBe(5);
    expect(typeof parseJson('5.0')).toBe('number');
    expect(parseJson('5e0')).toBe(5);
    expect(parseJson('5E+0')).toBe(5);
    expect(parseJson('50e-1')).toBe(5);
    expect(parseJson('[5,5.0,5e0]')).toEqual([5n, 5, 5]);
  });

  it('reads integers of any length exactly', () => {
    expect(parseJson('0')).toBe(0n);
    expect(parseJson('999999999999999')).toBe(999999999999999n);
    expect(parseJson('-999999999999999')).toBe(-999999999999999n);
    expect(parseJson('9007199254740993')).toBe(9007199254740993n);
    expect(parseJson('9223372036854775807')).toBe(9223372036854775807n);
    expect(parseJson('-9223372036854775808')).toBe(-9223372036854775808n);
    expect(parseJson('18446744073709551617')).toBe(18446744073709551617n);
    expect(parseJson('-123456789012345678901234567890123456789')).toBe(-123456789012345678901234567890123456789n);
    // Up to a double's range: the 309 digits of the largest finite double.
    const largest = BigInt(Number.MAX_VALUE).toString();
    expect(parseJson(largest)).toBe(BigInt(largest));
    expect(parseJson(`-${largest}`)).toBe(-BigInt(largest));
  });

  it('rejects integer tokens past the range of a double, as it rejects 1e400', () => {
    rejects(`${'7'.repeat(5000)}`, /^invalid query JSON: number out of range at line 1 column 1$/);
    rejects(`[1, -1${'0'.repeat(400)}]`, /number out of range at line 1 column 5$/);
    // 2^1024 rounds to infinity; the largest double plus a little below half an ulp does not.
    rejects((1n << 1024n).toString(), /number out of range/);
    expect(parseJson((BigInt(Number.MAX_VALUE) + (1n << 969n)).toString())).toBe(BigInt(Number.MAX_VALUE) + (1n << 969n));
  });

  it('keeps the integer token -0 apart from 0 (a bigint has no sign)', () => {
    expect(parseJson('-0')).toBe(NEGATIVE_ZERO_INTEGER);
    expect(parseJson('[-0, 0, -0.0]')).toEqual([NEGATIVE_ZERO_INTEGER, 0n, -0]);
    expect(renderJsonValue(parseJson('{"a": -0}'))).toBe('{"a":-0}');
    rejects('-00', /trailing characters/);
  });

  it('reads other number tokens as doubles', () => {
    expect(Object.is(parseJson('-0.0'), -0)).toBe(true);
    expect(Object.is(parseJson('-0e5'), -0)).toBe(true);
    expect(parseJson('0.1')).toBe(0.1);
    expect(parseJson('-2.5e-3')).toBe(-0.0025);
    expect(parseJson('1.7976931348623157e308')).toBe(Number.MAX_VALUE);
    expect(parseJson('5e-324')).toBe(5e-324);
    expect(parseJson('1e-400')).toBe(0);
    expect(parseJson('123456789012345678901234567890.0')).toBe(1.2345678901234568e29);
  });

  it('rejects numbers that overflow to infinity', () => {
    rejects('1e400', /number out of range at line 1 column 1$/);
    rejects('-1e400', /number out of range/);
    rejects('[1, 2e999]', /number out of range at line 1 column 5$/);
  });

  it('rejects malformed numbers', () => {
    for (const bad of ['01', '-', '-a', '1.', '.5', '+1', '1e', '1e+', '1.e3', '0x10', '00', '-01', 'NaN',
      'Infinity', '-Infinity', '1_000', '[1.]', '[-]']) {
      rejects(bad);
    }
  });
});

describe('parseJson: strings', () => {
  it('decodes every escape', () => {
    expect(parseJson('"a\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti"')).toBe('a"b\\c/d\be\ff\ng\rh\ti');
    expect(parseJson('"\\u0041\\u00e9\\u00E9\\u4e2d"')).toBe('Aéé中');
    expect(parseJson('"\\n"')).toBe('\n');
    expect(parseJson('"x\\\\"')).toBe('x\\');
    expect(parseJson('"\\u0000"')).toBe('\u0000');
  });

  it('combines surrogate pairs, escaped or raw', () => {
    expect(parseJson('"\\ud83d\\ude00"')).toBe('😀');
    expect(parseJson('"\\uD83D\\uDE00!"')).toBe('😀!');
    expect(parseJson('"a\\n\\ud83d\\ude00\\u00e9"')).toBe('a\n😀é');
    expect(parseJson('"😀"')).toBe('😀');
    expect(parseJson('"x\\n😀"')).toBe('x\n😀');
    expect(parseJson(enc.encode('"😀 é"'))).toBe('😀 é');
    expect(parseJson('{"😀": "\\udbff\\udfff"}')).toEqual(new Map([['😀', '\u{10ffff}']]));
  });

  it('rejects lone surrogates (escaped or raw): UTF-8 cannot hold them', () => {
    const lone = /lone surrogate \\u[0-9A-F]{4} in a string: the string cannot be represented in UTF-8 at line \d+ column \d+$/;
    // JSON.parse accepts all of these; the store could only keep U+FFFD for them.
    expect(rejects('"\\ud800"', lone).message)
      .toBe('invalid query JSON: lone surrogate \\uD800 in a string: the string cannot be represented in UTF-8 at line 1 column 2');
    expect(rejects('"\\udc00"', lone).message).toMatch(/\\uDC00 .* column 2$/);
    expect(rejects('"ab\\ud83dx"', lone).message).toMatch(/\\uD83D .* column 4$/); // high, then no escape
    rejects('"\\ud83d"', lone); // high at the end
    rejects('"\\ud83d\\n"', lone); // high, then another escape
    rejects('"\\ud83d\\u0041"', lone); // high, then a non-surrogate escape
    rejects('"\\ud83d\\ud83d"', lone); // two highs
    rejects('"\\ude00\\ud83d"', lone); // a pair in the wrong order
    rejects('"\\ud83d\\ude00\\ude00"', lone); // a pair, then a lone low
    rejects('"\\ud83d\\u12"', /invalid escape/); // the second escape itself is bad
    // Raw lone halves can only come in string input (bytes are strictly decoded).
    expect(rejects('"a\ud800"', lone).message).toMatch(/\\uD800 .* column 3$/);
    rejects('"\udc00"', lone);
    rejects('"\ud83d\\ude00"', lone); // raw high + escaped low is no pair
    rejects('"\\ud83d\ude00"', lone); // escaped high + raw low is no pair
    rejects('"\\n\ud800"', lone); // after an escape
    // In keys and at any depth.
    rejects('{"\\ud800": 1}', lone);
    rejects('{"a": [1, {"b": ["x", "\\udfff"]}]}', lone);
    expect(rejects('{"a":1,\n "\\ud800":2}', lone).message).toMatch(/line 2 column 3$/);
  });

  it('rejects bad escapes and raw control characters', () => {
    rejects('"\\x"', /invalid escape at line 1 column 3$/);
    rejects('"\\u12"', /invalid escape/);
    rejects('"\\u12G4"', /invalid escape at line 1 column 6$/);
    rejects('"\\U0041"', /invalid escape/);
    rejects('"\\\'"', /invalid escape/);
    rejects('"a\tb"', /control character/);
    rejects('"a\nb"', /control character .* at line 1 column 3$/);
    rejects('"\u0000"', /control character/);
    rejects('"\\n\u001f"', /control character/);
    expect(parseJson('"\u007f"')).toBe('\u007f');
  });

  it('rejects unterminated strings', () => {
    rejects('"abc', /EOF while parsing a string at line 1 column 5$/);
    rejects('"abc\\', /EOF while parsing a string/);
    rejects('"abc\\u00', /EOF while parsing a string/);
    rejects('"a\\nb', /EOF while parsing a string/);
  });
});

describe('parseJson: containers', () => {
  it('parses arrays and objects', () => {
    expect(parseJson('[]')).toEqual([]);
    expect(parseJson('{}')).toEqual(new Map());
    expect(parseJson('[ 1 , [ ] , { } , "x" ]')).toEqual([1n, [], new Map(), 'x']);
    const v = parseJson('{"b": 1, "a": [true, null], "c": {"d": 2.5}}');
    expect(v).toEqual(new Map<string, JsonValue>([['b', 1n], ['a', [true, null]], ['c', new Map([['d', 2.5]])]]));
    expect([...(v as Map<string, JsonValue>).keys()]).toEqual(['b', 'a', 'c']);
  });

  it('treats "__proto__" and friends as ordinary keys', () => {
    const v = parseJson('{"__proto__": {"polluted": 1}, "constructor": 2, "toString": 3}') as Map<string, JsonValue>;
    expect(v).toBeInstanceOf(Map);
    expect(v.get('__proto__')).toEqual(new Map([['polluted', 1n]]));
    expect(v.get('constructor')).toBe(2n);
    expect(v.get('toString')).toBe(3n);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    rejects('{"__proto__": 1, "__proto__": 2}', /duplicate key "__proto__"/);
  });

  it('rejects duplicate keys in any object, naming the key', () => {
    const e = rejects('{"a": 1, "a": 2}', /duplicate key "a" at line 1 column 10$/);
    expect(e.message).toBe('invalid query JSON: duplicate key "a" at line 1 column 10');
    rejects('{"x": [{"k": 1, "b": 0, "k": {}}]}', /duplicate key "k"/);
    rejects('{"p": {"q": {"r": 1, "r": 1}}}', /duplicate key "r"/);
    rejects('{"\\u0061": 1, "a": 2}', /duplicate key "a"/);
    rejects('{"": 1, "": 2}', /duplicate key ""/);
    expect(parseJson('[{"a": 1}, {"a": 2}]')).toEqual([new Map([['a', 1n]]), new Map([['a', 2n]])]);
    expect(parseJson('{"a": {"a": 1}}')).toEqual(new Map([['a', new Map([['a', 1n]])]]));
  });

  it('rejects malformed containers', () => {
    rejects('[1,]', /trailing comma/);
    rejects('{"a":1,}', /trailing comma/);
    rejects('[,1]', /expected value/);
    rejects('[1 2]', /expected `,` or `\]`/);
    rejects('{"a" 1}', /expected `:`/);
    rejects('{"a":1 "b":2}', /expected `,` or `\}`/);
    rejects('{a:1}', /key must be a string/);
    rejects("{'a':1}", /key must be a string/);
    rejects('{1:1}', /key must be a string/);
    rejects('[1', /EOF while parsing a list/);
    rejects('[1,', /EOF while parsing a value/);
    rejects('{"a":1', /EOF while parsing an object/);
    rejects('{"a"', /EOF while parsing an object/);
    rejects('{"a":', /EOF while parsing a value/);
    rejects('{', /EOF while parsing an object/);
    rejects('[}', /expected value/);
    rejects('{]', /key must be a string/);
  });
});

describe('parseJson: depth limit', () => {
  const nest = (n: number, open = '[', close = ']', inner = '') => open.repeat(n) + inner + close.repeat(n);

  it('accepts exactly depthMax levels and rejects depthMax+1', () => {
    const max = limits.jsonDepthMax;
    expect(max).toBe(1024);
    expect(() => parseJson(nest(max))).not.toThrow();
    expect(() => parseJson(nest(max, '[', ']', '1'))).not.toThrow();
    rejects(nest(max + 1), /recursion limit exceeded at line 1 column 1025$/);
    rejects(nest(max + 1, '[', ']', '1'), /recursion limit exceeded/);
    const objects = (n: number) => '{"a":'.repeat(n - 1) + '{}' + '}'.repeat(n - 1);
    expect(() => parseJson(objects(max))).not.toThrow();
    rejects(objects(max + 1), /recursion limit exceeded/);
  });

  it('honours a custom depthMax, counting empty and mixed containers', () => {
    expect(parseJson('[[[]]]', 3)).toEqual([[[]]]);
    rejects('[[[[]]]]', /recursion limit exceeded/, 3);
    expect(parseJson('[{"a":[1]}]', 3)).toEqual([new Map([['a', [1n]]])]);
    rejects('[{"a":[{}]}]', /recursion limit exceeded/, 3);
    expect(parseJson('[[1],[2],[3]]', 2)).toEqual([[1n], [2n], [3n]]);
    expect(parseJson('7', 0)).toBe(7n);
    rejects('[]', /recursion limit exceeded/, 0);
  });

  it('rejects 20 000 open brackets cleanly (no stack overflow)', () => {
    rejects('['.repeat(20_000), /recursion limit exceeded/);
    rejects('{"a":'.repeat(20_000), /recursion limit exceeded/);
  });

  it('parses 100 000 levels when allowed, without recursion', () => {
    const deep = parseJson(nest(100_000, '[', ']', '0'), 200_000);
    let v: JsonValue = deep;
    let depth = 0;
    while (Array.isArray(v)) { v = v[0]!; depth++; }
    expect(depth).toBe(100_000);
    expect(v).toBe(0n);
  });
});

describe('parseJson: input hygiene', () => {
  it('rejects empty and whitespace-only input', () => {
    expect(rejects('').message).toBe('invalid query JSON: EOF while parsing a value at line 1 column 1');
    rejects('  \n ', /EOF while parsing a value at line 2 column 2$/);
    rejects(new Uint8Array(0), /EOF while parsing a value/);
  });

  it('matches the documented error for a truncated request', () => {
    const e = rejects('{"request_type": "read", "query": ');
    expect(e.message).toBe('invalid query JSON: EOF while parsing a value at line 1 column 35');
  });

  it('rejects trailing garbage', () => {
    rejects('1 2', /trailing characters at line 1 column 3$/);
    rejects('{} x', /trailing characters/);
    rejects('[1]]', /trailing characters/);
    rejects('nullx', /trailing characters/);
    rejects('"a""b"', /trailing characters/);
    rejects('1\u0000', /trailing characters/);
    expect(parseJson('[1] \n\t\r ')).toEqual([1n]);
  });

  it('accepts only RFC whitespace and rejects a BOM', () => {
    rejects('\u00a01', /expected value/);
    rejects('\u000b1', /expected value/);
    rejects('\u000c1', /expected value/);
    rejects('[1,\u20282]', /expected value/);
    rejects('\ufeff{}', /expected value at line 1 column 1$/);
    rejects(new Uint8Array([0xef, 0xbb, 0xbf, 0x7b, 0x7d]), /expected value/);
  });

  it('rejects malformed literals', () => {
    rejects('tru', /EOF while parsing a value/);
    rejects('nul', /EOF while parsing a value/);
    rejects('fals', /EOF while parsing a value/);
    rejects('[trUe]', /expected ident at line 1 column 4$/);
    rejects('True', /expected value/);
    rejects('nan', /expected ident/);
    rejects('undefined', /expected value/);
  });

  it('reports line and column (UTF-8 bytes) of the offending character', () => {
    rejects('[\n  1,\n  ?\n]', /expected value at line 3 column 3$/);
    rejects('{"é": 1,\n "ü": x}', /expected value at line 2 column 8$/);
    rejects('["😀", x]', /expected value at line 1 column 10$/);
  });

  it('parses bytes exactly like text', () => {
    const text = '{"name": "Zoë 😀", "n": [1, 2.5, -3e2], "s": "a\\"b"}';
    expect(same(parseJson(enc.encode(text)), parseJson(text))).toBe(true);
    const buf = Buffer.from(text);
    expect(same(parseJson(buf), parseJson(text))).toBe(true);
    const shared = new Uint8Array(new SharedArrayBuffer(buf.length));
    shared.set(buf);
    expect(same(parseJson(shared), parseJson(text))).toBe(true);
    const sub = enc.encode(`xx${text}yy`).subarray(2, 2 + buf.length);
    expect(same(parseJson(sub), parseJson(text))).toBe(true);
  });

  it('rejects invalid UTF-8 anywhere in byte input', () => {
    const bad = (bytes: number[]) => rejects(new Uint8Array(bytes), /invalid UTF-8/);
    expect(bad([0x22, 0xff, 0x22]).message).toBe('invalid query JSON: invalid UTF-8 at line 1 column 2');
    bad([0x22, 0xc0, 0x80, 0x22]); // overlong NUL
    bad([0x22, 0xe0, 0x80, 0x80, 0x22]); // overlong
    bad([0x22, 0xed, 0xa0, 0x80, 0x22]); // encoded surrogate
    bad([0x22, 0xf4, 0x90, 0x80, 0x80, 0x22]); // above U+10FFFF
    bad([0x22, 0xe2, 0x82, 0x22]); // truncated sequence
    bad([0x22, 0x80, 0x22]); // stray continuation
    bad([0x5b, 0x31, 0x5d, 0xf0, 0x9f]); // truncated at end, outside a string
    expect(bad([0x5b, 0x0a, 0x31, 0x2c, 0x0a, 0x20, 0xc3, 0x28, 0x5d]).message).toMatch(/line 3 column 2$/);
    expect(parseJson(new Uint8Array([0x22, 0xf0, 0x9f, 0x98, 0x80, 0x22]))).toBe('😀');
  });

  it('handles a large body', () => {
    const items = Array.from({ length: 20_000 }, (_, i) => ({ id: i, name: `node ${i}`, w: i / 7, tags: ['a', 'b\n'] }));
    const text = JSON.stringify({ items, blob: 'x'.repeat(1 << 20) });
    const v = parseJson(enc.encode(text));
    expect(agrees(v, JSON.parse(text))).toBe(true);
  });
});

describe('parseJson: agreement with JSON.parse (property)', () => {
  for (const stringUnit of ['grapheme-ascii', 'grapheme', 'binary'] as const) {
    it(`agrees on fc.json() documents (${stringUnit})`, () => {
      fc.assert(fc.property(fc.json({ stringUnit }), (text) => {
        const v = parseJson(text);
        expect(agrees(v, JSON.parse(text))).toBe(true);
        expect(same(parseJson(enc.encode(text)), v)).toBe(true);
        // Writing back preserves structure and token kinds.
        expect(same(parseJson(renderJsonValue(v)), v)).toBe(true);
      }), { numRuns: 300 });
    });
  }

  it('rejects a lone surrogate wherever JSON.stringify put it, as escape or raw', () => {
    fc.assert(fc.property(fc.jsonValue({ stringUnit: 'binary' }), fc.string({ unit: 'binary' }),
      fc.integer({ min: 0xd800, max: 0xdfff }), (value, s, unit) => {
        const escaped = JSON.stringify({ value, s: `${s}${String.fromCharCode(unit)}` }, null, 2);
        rejects(escaped, /lone surrogate/);
        const raw = JSON.stringify({ value, s: `${s}@` }, null, 2).replace(/@"\n}$/, `${String.fromCharCode(unit)}"\n}`);
        rejects(raw, /lone surrogate/);
      }), { numRuns: 200 });
  });

  it('accepts exactly what JSON.parse accepts on JSON-ish noise (duplicates aside)', () => {
    const token = fc.constantFrom('{', '}', '[', ']', ',', ':', '"', '\\', '0', '1', '9', '-', '+', '.', 'e', 'E',
      'true', 'false', 'null', 'u', 'n', ' ', '\n', '\t', '\u00a0', '"a"', '"b"', '\\u00e9', '\u0001', 'é', '😀');
    fc.assert(fc.property(fc.array(token, { maxLength: 24 }), (parts) => {
      const text = parts.join('');
      let expected: unknown;
      let ok = true;
      try { expected = JSON.parse(text); } catch { ok = false; }
      let got: JsonValue | undefined;
      let err: unknown;
      try { got = parseJson(text); } catch (e) { err = e; }
      if (err !== undefined) {
        expect(err).toBeInstanceOf(SvcError);
        if (!/duplicate key/.test((err as SvcError).message)) expect(ok).toBe(false);
      } else {
        expect(ok).toBe(true);
        expect(agrees(got!, expected)).toBe(true);
      }
    }), { numRuns: 3000 });
  });
});

describe('writeF64', () => {
  it('always prints a fraction or exponent, like the reference', () => {
    const cases: [number, string][] = [
      [30, '30.0'], [0, '0.0'], [-0, '-0.0'], [1, '1.0'], [-7, '-7.0'], [0.1, '0.1'], [2.5, '2.5'],
      [-0.0025, '-0.0025'], [1e-5, '0.00001'], [1.5e-5, '0.000015'], [1e-6, '1e-6'], [1.25e-6, '1.25e-6'],
      [1e-7, '1e-7'], [-1e-7, '-1e-7'], [5e-324, '5e-324'], [1e15, '1000000000000000.0'],
      [9007199254740993, '9007199254740992.0'], [9999999999999998, '9999999999999998.0'], [1e16, '1e16'],
      [1.2345e17, '1.2345e17'], [1e20, '1e20'], [1e21, '1e21'], [1.5e300, '1.5e300'], [-1.5e300, '-1.5e300'],
      [Number.MAX_VALUE, '1.7976931348623157e308'], [123456.789, '123456.789'], [0.30000000000000004, '0.30000000000000004'],
    ];
    for (const [n, s] of cases) expect(writeF64(n), String(n)).toBe(s);
  });

  it('writes non-finite values as null', () => {
    expect(writeF64(NaN)).toBe('null');
    expect(writeF64(Infinity)).toBe('null');
    expect(writeF64(-Infinity)).toBe('null');
  });

  it('round-trips every double with the shortest digits (property)', () => {
    fc.assert(fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (n) => {
      const s = writeF64(n);
      expect(s).toMatch(/^-?\d+(\.\d+)?(e-?\d+)?$/);
      expect(s).toMatch(/[.e]/);
      expect(Object.is(Number(s), n)).toBe(true);
      const digits = (x: string) => x.replace(/^-/, '').replace(/e.*$/, '').replace('.', '').replace(/^0+/, '').replace(/0+$/, '');
      expect(digits(s)).toBe(digits(String(n)));
      const v = parseJson(s);
      expect(typeof v).toBe('number');
      expect(Object.is(v, n)).toBe(true);
    }), { numRuns: 2000 });
  });
});

describe('compareKeys', () => {
  const byBytes = byteCompare;

  it('orders by UTF-8 bytes, non-BMP after U+E000–U+FFFF', () => {
    expect(compareKeys('a', 'b')).toBeLessThan(0);
    expect(compareKeys('b', 'a')).toBeGreaterThan(0);
    expect(compareKeys('a', 'a')).toBe(0);
    expect(compareKeys('', 'a')).toBeLessThan(0);
    expect(compareKeys('a', 'aa')).toBeLessThan(0);
    expect(compareKeys('Z', 'a')).toBeLessThan(0);
    expect(compareKeys('😀', '\uffff')).toBeGreaterThan(0); // JS '<' says the opposite
    expect('😀' < '\uffff').toBe(true);
    expect(compareKeys('\ue000', '😀')).toBeLessThan(0);
    expect(compareKeys('\ud7ff', '😀')).toBeLessThan(0);
    expect(compareKeys('😀', '😁')).toBeLessThan(0);
    expect(compareKeys('x😀', 'x\uff01')).toBeGreaterThan(0);
  });

  it('agrees with byte-wise comparison (property)', () => {
    const str = fc.string({ unit: 'binary', maxLength: 6 });
    fc.assert(fc.property(str, str, (a, b) => {
      expect(Math.sign(compareKeys(a, b))).toBe(byBytes(a, b));
    }), { numRuns: 3000 });
    const near = fc.string({ unit: fc.constantFrom('a', '\ud7ff', '\ue000', '\uffff', '😀', '𐀀', '\u{10ffff}'), maxLength: 4 });
    fc.assert(fc.property(near, near, (a, b) => {
      expect(Math.sign(compareKeys(a, b))).toBe(byBytes(a, b));
    }), { numRuns: 2000 });
  });
});

describe('formatDateTime and date-time rendering', () => {
  const outOfRange = (ms: number) => {
    const e = caught(() => renderValue(new DateTime(ms)));
    expect(e.code).toBe('response_serialization_error');
    expect(e.status).toBe(500);
    expect(e.message).toBe('json serialization error: date-time out of range');
  };

  it('renders RFC 3339 UTC with milliseconds', () => {
    expect(renderValue(new DateTime(1740816000000))).toBe('"2025-03-01T08:00:00.000Z"');
    expect(renderValue(new DateTime(0))).toBe('"1970-01-01T00:00:00.000Z"');
    expect(renderValue(new DateTime(-1))).toBe('"1969-12-31T23:59:59.999Z"');
    expect(renderValue(new DateTime(1234))).toBe('"1970-01-01T00:00:01.234Z"');
    expect(formatDateTime(951782400000)).toBe('2000-02-29T00:00:00.000Z');
  });

  it('covers years 0000 to 9999 exactly', () => {
    expect(renderValue(new DateTime(-62167219200000))).toBe('"0000-01-01T00:00:00.000Z"');
    expect(renderValue(new DateTime(253402300799999))).toBe('"9999-12-31T23:59:59.999Z"');
    expect(renderValue(new DateTime(-62135596800000))).toBe('"0001-01-01T00:00:00.000Z"');
    outOfRange(-62167219200001);
    outOfRange(253402300800000);
    outOfRange(8.64e15);
    outOfRange(NaN);
    outOfRange(Infinity);
    outOfRange(-Infinity);
    outOfRange(2 ** 53);
    outOfRange(0.5);
  });

  it('fails the whole rendering when nested', () => {
    outOfRange(1e300);
    expect(() => renderValue([1n, new Map<string, Value>([['t', new DateTime(-1e15)]])])).toThrow(SvcError);
  });
});

describe('renderValue', () => {
  it('renders every variant as plain JSON', () => {
    expect(renderValue(null)).toBe('null');
    expect(renderValue(true)).toBe('true');
    expect(renderValue(false)).toBe('false');
    expect(renderValue(7n)).toBe('7');
    expect(renderValue(-9223372036854775808n)).toBe('-9223372036854775808');
    expect(renderValue(9223372036854775807n)).toBe('9223372036854775807');
    expect(renderValue(30)).toBe('30.0');
    expect(renderValue(NaN)).toBe('null');
    expect(renderValue(new F32(0.1))).toBe('0.10000000149011612');
    expect(renderValue(new F32(2))).toBe('2.0');
    expect(renderValue(new F32(Infinity))).toBe('null');
    expect(renderValue('Porto "π"\n')).toBe('"Porto \\"π\\"\\n"');
    expect(renderValue('\ud800')).toBe('"\\ud800"');
    expect(renderValue(new Uint8Array([104, 105, 0, 255]))).toBe('[104,105,0,255]');
    expect(renderValue(Buffer.from('hi') as unknown as Uint8Array)).toBe('[104,105]');
    expect(renderValue(new Uint8Array(0))).toBe('[]');
    expect(renderValue(new BigInt64Array([3n, -1n, 9223372036854775807n]))).toBe('[3,-1,9223372036854775807]');
    expect(renderValue(new Float64Array([0.25, 1, -0, NaN, 1e-7]))).toBe('[0.25,1.0,-0.0,null,1e-7]');
    expect(renderValue(new Float32Array([0.1, 0.2]))).toBe('[0.10000000149011612,0.20000000298023224]');
    expect(renderValue(new Float32Array(0))).toBe('[]');
    expect(renderValue(new StringArray(['red', 'b"lue']))).toBe('["red","b\\"lue"]');
    expect(renderValue(new StringArray([]))).toBe('[]');
    expect(renderValue([])).toBe('[]');
    expect(renderValue([1n, 'x', null, [2.5, new F32(0.5)], new Uint8Array([1])])).toBe('[1,"x",null,[2.5,0.5],[1]]');
    expect(renderValue(new Map())).toBe('{}');
  });

  it('sorts object members byte-wise at every level', () => {
    const inner = new Map<string, Value>([['z', 1n], ['a', 2n]]);
    const obj = new Map<string, Value>([
      ['b', 1n], ['😀', 2n], ['\uffff', 3n], ['a', inner], ['B', 4n], ['', 5n], ['é', 6n], ['__proto__', 7n],
      ['list', [new Map<string, Value>([['y', 1n], ['x', 2n]])]],
    ]);
    const out = renderValue(obj);
    expect(out).toBe('{"":5,"B":4,"__proto__":7,"a":{"a":2,"z":1},"b":1,"list":[{"x":2,"y":1}],"é":6,"\uffff":3,"😀":2}');
    const keys = [...(parseJson(out) as Map<string, JsonValue>).keys()];
    expect(keys).toEqual([...keys].sort(byteCompare));
  });

  it('produces JSON that parses back to the same values', () => {
    const v = new Map<string, Value>([
      ['i', 123456789012345678n], ['f', 5], ['g', 0.1], ['s', 'x'], ['d', new DateTime(1740816000000)],
    ]);
    const back = parseJson(renderValue(v)) as Map<string, JsonValue>;
    expect(back.get('i')).toBe(123456789012345678n);
    expect(back.get('f')).toBe(5);
    expect(typeof back.get('f')).toBe('number');
    expect(back.get('g')).toBe(0.1);
    expect(back.get('d')).toBe('2025-03-01T08:00:00.000Z');
  });
});

describe('renderJsonValue and writeString', () => {
  it('writes bigints as integers, numbers with a fraction, members in their order', () => {
    const v = parseJson('{"b": 5, "a": 5.0, "c": [1e400e0]}'.replace('1e400e0', '-0.0'));
    expect(renderJsonValue(v)).toBe('{"b":5,"a":5.0,"c":[-0.0]}');
    expect(renderJsonValue(parseJson('[123456789012345678901234567890, 1e21, "\\u00e9", null, true, {}]')))
      .toBe('[123456789012345678901234567890,1e21,"é",null,true,{}]');
    expect(renderJsonValue(parseJson('{"__proto__": []}'))).toBe('{"__proto__":[]}');
  });

  it('writeString is a JSON string literal', () => {
    expect(writeString('a"b\\c\u0001')).toBe('"a\\"b\\\\c\\u0001"');
    expect(parseJson(writeString('😀\u00e9'))).toBe('😀é');
    expect(writeString('\ud800')).toBe('"\\ud800"'); // readable, but not accepted back (lone surrogate)
    expect(writeString('\u2028/\u007f\u001f')).toBe(JSON.stringify('\u2028/\u007f\u001f'));
    // What needs no escaping is quoted as it is: the same text as JSON.stringify's, always.
    fc.assert(fc.property(fc.string({ unit: 'binary', maxLength: 12 }), (x) => writeString(x) === JSON.stringify(x)), { numRuns: 5000 });
    fc.assert(fc.property(fc.string({ maxLength: 12 }), (x) => writeString(x) === JSON.stringify(x)), { numRuns: 5000 });
  });
});

describe('renderValue: objects', () => {
  // Reference: members sorted byte-wise by UTF-8 key, each `"key":value`, as values.md §3 says.
  const reference = (v: Map<string, Value>): string => {
    const members = [...v].sort((a, b) => compareKeys(a[0], b[0]));
    return `{${members.map(([k, x]) => `${JSON.stringify(k)}:${x instanceof Map ? reference(x) : renderValue(x)}`).join(',')}}`;
  };
  const keyArb = fc.oneof(fc.constantFrom('$id', '$label', 'name', 'age', 'a', 'b', '\u{1F600}', '\uE000', ''), fc.string({ maxLength: 4, unit: 'binary' }));
  const leafArb = fc.oneof(fc.string(), fc.integer().map(BigInt), fc.double({ noNaN: true }), fc.boolean(), fc.constant(null));
  const mapArb: fc.Arbitrary<Map<string, Value>> = fc.letrec<{ map: Map<string, Value> }>((tie) => ({
    map: fc.array(fc.tuple(keyArb, fc.oneof({ weight: 5, arbitrary: leafArb }, { weight: 1, arbitrary: tie('map') as fc.Arbitrary<Value> })), { maxLength: 6 })
      .map((members) => new Map(members)),
  })).map;

  it('renders members in byte-wise key order whatever the insertion order, the same on every render (cached key lists)', () => {
    // Enough distinct key lists to fill the key-list cache, so objects past it are covered too.
    fc.assert(fc.property(mapArb, (m) => {
      const want = reference(m);
      expect(renderValue(m)).toBe(want);
      expect(renderValue(m)).toBe(want);
      expect(renderValue(new Map([...m].reverse()))).toBe(want);
    }), { numRuns: 3000 });
  });
});

describe('parseJson: the memory a body may build (bodyStructureBytesMax)', () => {
  const structureError = (text: string, max: number): SvcError => {
    try {
      parseJson(text, limits.jsonDepthMax, max);
    } catch (err) {
      return err as SvcError;
    }
    throw new Error('parsed');
  };

  it('refuses, with invalid_request_body (400), a body whose containers and values pass the estimate', () => {
    const nested = Array.from({ length: 2_000 }, () => '['.repeat(50) + ']'.repeat(50)).join(',');
    const err = structureError(`[${nested}]`, 1024 * 1024);
    expect(err).toBeInstanceOf(SvcError);
    expect([err.code, err.status]).toEqual(['invalid_request_body', 400]);
    expect(err.msg).toBe('failed to read request body: its JSON holds more arrays, objects and values than 1 MiB of memory can hold (the limit bodyStructureBytesMax)');
    // Values count too: 100,000 numbers in one array.
    expect(structureError(`[${Array(100_000).fill(1).join(',')}]`, 1024 * 1024).code).toBe('invalid_request_body');
    // Under the estimate, and without a limit, the same texts parse.
    expect(() => parseJson(`[${nested}]`, limits.jsonDepthMax, 64 * 1024 * 1024)).not.toThrow();
    expect(() => parseJson(`[${nested}]`)).not.toThrow();
  });

  it('estimates no less than the heap V8 builds: each kind of body is refused under 0.9x of what it really holds', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const heldAfterCollection = (): number => {
      gc();
      gc();
      return getHeapStatistics().used_heap_size;
    };
    const items: Record<string, string> = {
      'empty objects': '{}',
      'one-member objects': '{"a":1}',
      'one-element arrays': '[1]',
      'nested arrays': '[[[[]]]]',
      'integers': '12',
      'short strings': '"ab"',
      'rows': '{"id":1,"name":"a","score":0.5}',
      'objects of 16 integers': `{${Array.from({ length: 16 }, (_, i) => `"k${i}":${i}`).join(',')}}`,
      'objects of 16 large integers': `{${Array.from({ length: 16 }, (_, i) => `"k${i}":12345678901234567`).join(',')}}`,
      'arrays of 16 large integers': `[${Array(16).fill('12345678901234567').join(',')}]`,
    };
    // In a function of its own: a loop's registers would keep the last parse alive into the
    // next measurement, which then counts it freed.
    const heapBuiltBy = (text: string): number => {
      const before = heldAfterCollection();
      const parsed = parseJson(text, limits.jsonDepthMax) as unknown[];
      const built = heldAfterCollection() - before;
      expect(parsed.length).toBe(100_000);
      return built;
    };
    for (const [kind, item] of Object.entries(items)) {
      const text = `[${Array(100_000).fill(item).join(',')}]`;
      const built = heapBuiltBy(text);
      expect(built, kind).toBeGreaterThan(100_000 * 20);
      expect(structureError(text, Math.floor(built * 0.9)).code, kind).toBe('invalid_request_body');
    }
  });

  it('lets request bodies of the ordinary kind build 256 MiB: a 16 MiB body of rows is far from it, one of nested arrays is refused', async () => {
    const { decodeRequest } = await import('../src/protocol/decode.js');
    const read = (parameters: string) => `{"request_type":"read","query":{"read":{"entries":[],"returns":[]}},"parameters":${parameters}}`;
    const rows = `{"rows":[${Array.from({ length: 200_000 }, (_, i) => `{"id":${i},"name":"user ${i} of many","score":${i / 7}}`).join(',')}]}`;
    expect(rows.length).toBeGreaterThan(12 * 1024 * 1024);
    expect(() => decodeRequest(read(rows))).not.toThrow();
    // 6 MB of nested one-element arrays: 3 M containers.
    const nested = `{"x":[${Array.from({ length: 3_000 }, () => '['.repeat(1_000) + ']'.repeat(1_000)).join(',')}]}`;
    expect(() => decodeRequest(read(nested))).toThrow(/bodyStructureBytesMax/);
  });
});
