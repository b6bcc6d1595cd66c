// The embedded handle's query() parses answers natively when no digit run could be an
// integer past 2^53 (src/embedded/database.ts parseAnswer), and with the exact parser
// otherwise: both must give the same values.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../dist/src/index.js';
import { parseAnswer, toPlain } from '../dist/src/embedded/database.js';
import { parseJson } from '../dist/src/protocol/json.js';

const exact = (text: string): unknown => toPlain(parseJson(text));

describe('parseAnswer', () => {
  it('gives what the exact parser gives, for any JSON', () => {
    fc.assert(fc.property(fc.jsonValue({ maxDepth: 4 }), (value) => {
      const text = JSON.stringify(value);
      expect(parseAnswer(text)).toEqual(exact(text));
    }), { numRuns: 2000 });
  });

  it('keeps integers past 2^53 exact, -0 as -0, and __proto__ as an own key', () => {
    for (const text of [
      '{"a":9007199254740993,"b":-9007199254740993,"c":9007199254740991}',
      '{"a":-0,"b":-0.0,"c":[0.0,-0.0]}',
      '{"__proto__":{"x":1},"y":[{"__proto__":2}]}',
      '{"s":"digits in a string: 12345678901234567890","n":1}',
    ]) {
      const fast = parseAnswer(text);
      expect(fast).toEqual(exact(text));
      expect(Object.is((exact(text) as Record<string, unknown>)['b'], (fast as Record<string, unknown>)['b'])).toBe(true);
    }
    expect(parseAnswer('{"a":9007199254740993}')).toEqual({ a: 9007199254740993n });
    expect(Object.is((parseAnswer('{"a":-0}') as { a: number }).a, -0)).toBe(true);
    const proto = parseAnswer('{"__proto__":{"x":1}}') as Record<string, unknown>;
    expect(Object.getOwnPropertyNames(proto)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(proto)).toBe(Object.prototype);
  });

  it('query() answers with those values, and errors still throw with their code', async () => {
    const db = await openDatabase();
    try {
      const big = 2n ** 53n + 1n;
      await db.query({ request_type: 'write', query: { write: { entries: [{ query: { name: 'n', root: { add_n: { label: 'Big', properties: [
        ['big', { value: { i64: big } }], ['small', { value: { i64: 42n } }],
      ] } } } }], returns: [] } } });
      const answer = await db.query({ request_type: 'read', query: { read: { entries: [{ query: { name: 'r', root: { value_map: { input: {
        nodes_where: { predicate: { eq: { left: { property: '$label' }, right: { constant: { string: 'Big' } } } } },
      } } } } }], returns: ['r'] } } });
      expect(answer).toEqual({ r: [{ $id: 0, $label: 'Big', big, small: 42 }] });
      const bad = { request_type: 'read', query: { read: { entries: [], returns: ['missing'] } } };
      const raw = await db.queryRaw(bad);
      const { error, msg } = JSON.parse(raw.body) as { error: string; msg: string };
      await expect(db.query(bad)).rejects.toMatchObject({ code: error, message: msg, status: raw.status });
    } finally {
      await db.close();
    }
  });
});
