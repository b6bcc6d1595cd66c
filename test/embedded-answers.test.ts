// The embedded handle's query() parses answers natively when no digit run could be an
// integer past 2^53 (src/embedded/database.ts parseAnswer), and with the exact parser
// otherwise: both must give the same values. And it checks what the server checks: body
// size, bounds, modes and options, and writes a request object as exactly as its text.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { openDatabase, SvcError } from '../dist/src/index.js';
import { parseAnswer, requestText, toPlain } from '../dist/src/embedded/database.js';
import { limits } from '../dist/src/limits.js';
import { parseJson, type JsonValue } from '../dist/src/protocol/json.js';
import { addN, count, i64, nodes, q, read, str, write } from './helpers/requests.js';

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

describe('the embedded handle checks what the server checks', () => {
  const tooLargeAnswer = `{"error":"invalid_request_body","msg":"failed to read request body: length limit exceeded (the maximum is ${limits.bodyBytesMax} bytes)"}`;
  const countAll = read([q('c', count(nodes('all')))], ['c']);

  it('refuses bodies over the body limit in UTF-8 bytes, as the server does, writing nothing', async () => {
    const db = await openDatabase();
    try {
      const ascii = write([q('x', addN('U', [['s', str('x'.repeat(limits.bodyBytesMax))]]))], ['x']);
      expect(await db.queryRaw(ascii)).toEqual({ status: 400, body: tooLargeAnswer });
      // 9 Mi characters, 18 MiB of UTF-8: under the limit in characters, over it in bytes.
      const wide = write([q('x', addN('U', [['s', str('é'.repeat(9 * 1024 * 1024))]]))], ['x']);
      expect(await db.queryRaw(JSON.stringify(wide))).toEqual({ status: 400, body: tooLargeAnswer });
      expect(await db.query(countAll)).toEqual({ c: 0 });
      // Just under it is a body like any other.
      const under = write([q('x', addN('U', [['s', str('x'.repeat(limits.bodyBytesMax - 200))]]))], ['x']);
      expect((await db.queryRaw(under)).status).toBe(200);
    } finally {
      await db.close();
    }
  });

  it('refuses bounds svc serve would refuse (a NaN deadline would be none), and unknown or storage-less modes', async () => {
    const refused = async (options: Record<string, unknown>, what: RegExp) => {
      const err = await openDatabase(options as never).then(() => null, (e: unknown) => e);
      expect(err, JSON.stringify(options)).toBeInstanceOf(SvcError);
      expect((err as SvcError).code).toBe('invalid_configuration');
      expect((err as SvcError).msg).toMatch(what);
    };
    await refused({ queryTimeoutMs: Number.NaN }, /`queryTimeoutMs` must be an integer from 1 to 86400000, not NaN/);
    await refused({ queryTimeoutMs: '300' }, /`queryTimeoutMs` must be an integer .*, not "300"/);
    await refused({ queryTimeoutMs: 0 }, /queryTimeoutMs/);
    await refused({ queryMemoryMb: Number.NaN }, /queryMemoryMb/);
    await refused({ queryMemoryMb: 0 }, /queryMemoryMb/);
    await refused({ queryMemoryMb: -1 }, /queryMemoryMb/);
    await refused({ snapshotWalBytes: Number.NaN }, /snapshotWalBytes/);
    await refused({ refreshMs: -1 }, /refreshMs/);
    await refused({ mode: 'raeder' }, /unknown mode `raeder`/);
    await refused({ mode: 'reader' }, /mode 'reader' follows a writer's storage/);
    const db = await openDatabase({ queryTimeoutMs: 86_400_000, queryMemoryMb: 1 });
    try {
      const err = await db.query(countAll, { timeoutMs: Number.NaN }).then(() => null, (e: unknown) => e);
      expect((err as SvcError).code).toBe('invalid_request_option');
      expect((err as SvcError).msg).toMatch(/`timeoutMs` must be an integer from 1 to 86400000, not NaN/);
      for (const awaitDurable of ['true', 1, 'yes']) {
        const bad = await db.query(countAll, { awaitDurable: awaitDurable as never }).then(() => null, (e: unknown) => e);
        expect((bad as SvcError).code, String(awaitDurable)).toBe('invalid_request_option');
        expect((bad as SvcError).status).toBe(400);
      }
      expect(await db.query(countAll, { timeoutMs: 5_000, awaitDurable: false })).toEqual({ c: 0 });
    } finally {
      await db.close();
    }
  });

  it('writes bigints and -0 of a request object exactly, and never takes a string for them', async () => {
    const db = await openDatabase();
    try {
      const lookalike = '\u0000big:42';
      const props: [string, unknown][] = [
        ['s', str(lookalike)], ['t', str(`${lookalike}"`)], [lookalike, i64(7)],
        ['b', i64(9223372036854775807n)], ['z', { value: { f64: -0 } }],
      ];
      const object = write([q('x', addN('U', props))], ['x']);
      expect((await db.queryRaw(object)).status).toBe(200);
      const answer = await db.queryRaw(read([q('m', { value_map: { input: nodes('all') } })], ['m']));
      expect(answer.status).toBe(200);
      const row = (parseJson(answer.body) as Map<string, JsonValue[]>).get('m')![0] as Map<string, JsonValue>;
      expect(row.get('s')).toBe(lookalike);
      expect(row.get('t')).toBe(`${lookalike}"`);
      expect(row.get(lookalike)).toBe(7n);
      expect(row.get('b')).toBe(9223372036854775807n);
      expect(Object.is(row.get('z'), -0)).toBe(true);
      // The same request as text gives the same node.
      const again = await db.queryRaw(requestText(object));
      expect(again.status).toBe(200);
      const rows = (parseJson((await db.queryRaw(read([q('m', { value_map: { input: nodes('all') } })], ['m']))).body) as Map<string, JsonValue[]>).get('m')!;
      expect(rows).toHaveLength(2);
      const withoutId = (m: JsonValue) => [...(m as Map<string, JsonValue>)].filter(([k]) => k !== '$id');
      expect(withoutId(rows[1]!)).toEqual(withoutId(rows[0]!));
    } finally {
      await db.close();
    }
  });

  it('answers a value that is not JSON as the server answers an empty body; a cycle is invalid_query_json', async () => {
    const db = await openDatabase();
    try {
      const empty = await db.queryRaw('');
      expect(empty.status).toBe(400);
      for (const value of [undefined, () => 1, Symbol('s')]) expect(await db.queryRaw(value)).toEqual(empty);
      const cyclic: Record<string, unknown> = { request_type: 'read' };
      cyclic['self'] = cyclic;
      const err = await db.queryRaw(cyclic).then(() => null, (e: unknown) => e);
      expect((err as SvcError).code).toBe('invalid_query_json');
    } finally {
      await db.close();
    }
  });
});
