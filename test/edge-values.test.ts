// Values at the edges of the wire format, end to end through the embedded handle (the same
// decode/plan/exec/store as the server): strings UTF-8 cannot hold (lone surrogates) and
// the sign of zero.
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../src/index.js';
import { decodeRecord, encodeRecord } from '../src/store/record-codec.js';
import { F32, StringArray, type Value } from '../src/protocol/value.js';
import { addN, count, nodes, q, read, write } from './helpers/requests.js';
import { tempDirs } from './helpers/temp-dirs.js';
import { spawnServer } from './helpers/server.js';

const tempDir = tempDirs('edge-values');

const LONE = /^invalid query JSON: lone surrogate \\u[0-9A-F]{4} in a string: the string cannot be represented in UTF-8 at line \d+ column \d+$/;

/** JSON text of a request; `NEG_ZERO` string tokens become the number token given. */
function text(request: unknown, negativeZero = '-0'): string {
  return JSON.stringify(request).replaceAll('"NEG_ZERO"', negativeZero);
}

describe('lone surrogates are rejected wherever a string can appear', () => {
  const valuesOf = (label: string) => read([q('v', { values: { input: { nodes_where: { predicate: {
    eq: { left: { property: '$label' }, right: { constant: { string: label } } } } } }, properties: ['s'] } })], ['v']);

  // JSON.stringify escapes a lone surrogate as \udXXX, so every body below carries one as
  // an escape; one request per place the decoder reads a string.
  const places: [string, unknown][] = [
    ['a label', write([q('x', addN('L\ud800'))], [])],
    ['a property name', write([q('x', addN('L', [['p\udc00', { value: { i64: 1 } }]]))], [])],
    ['a string value', write([q('x', addN('L', [['s', { value: { string: 'a\ud800b' } }]]))], [])],
    ['a string_array item', write([q('x', addN('L', [['s', { value: { string_array: ['ok', '\udfff'] } }]]))], [])],
    ['an object value key', write([q('x', addN('L', [['o', { value: { object: { 'k\ud800': { i64: 1 } } } }]]))], [])],
    ['a predicate constant', valuesOf('\ud83d')],
    ['a parameter name', read([q('c', count(nodes('all')))], ['c'], { parameters: { 'p\ud800': 1 } })],
    ['a parameter value', read([q('c', count(nodes('all')))], ['c'], { parameters: { p: '\udc00' } })],
    ['a key inside a parameter value', read([q('c', count(nodes('all')))], ['c'], { parameters: { p: { '\ud800': 1 } } })],
    ['a typed parameter declaration name', read([q('c', count(nodes('all')))], ['c'], { parameters: { p: 1 }, parameter_types: { p: 'i64', '\ud800': 'i64' } })],
    ['query_name', read([q('c', count(nodes('all')))], ['c'], { query_name: 'dash\ud800board' })],
    ['an entry name and returns', read([q('c\ud800', count(nodes('all')))], ['c\ud800'])],
    ['an unknown top-level key', read([q('c', count(nodes('all')))], ['c'], { 'x\ud800': true })],
  ];

  for (const [place, request] of places) {
    it(`in ${place}: 400 invalid_query_json, nothing written`, async () => {
      const db = await openDatabase();
      const { status, body } = await db.queryRaw(request);
      const error = JSON.parse(body) as { error: string; msg: string };
      expect([status, error.error]).toEqual([400, 'invalid_query_json']);
      expect(error.msg).toMatch(LONE);
      expect(await db.query(read([q('c', count(nodes('all')))], ['c']))).toEqual({ c: 0 });
    });
  }

  it('a raw lone surrogate in a request given as a string is rejected too', async () => {
    const db = await openDatabase();
    const body = JSON.stringify(write([q('x', addN('L', [['s', { value: { string: 'RAW' } }]]))], [])).replace('RAW', 'a\ud800');
    expect(body).toContain('\ud800'); // raw, not escaped
    const { status, body: answer } = await db.queryRaw(body);
    expect(status).toBe(400);
    expect(JSON.parse(answer).msg).toMatch(LONE);
  });

  it('paired surrogates (escaped or raw) are one character: stored, compared and rendered as such', async () => {
    const db = await openDatabase();
    const escaped = '{"request_type":"write","query":{"write":{"entries":[{"query":{"name":"x","root":{"add_n":{"label":"\\ud83d\\ude00",'
      + '"properties":[["s",{"value":{"string":"\\uD83D\\uDE00!"}}]]}}}}],"returns":[]}}}';
    expect((await db.queryRaw(escaped)).status).toBe(200);
    // Raw in the query, escaped in the stored write: the same character.
    expect(await db.query(valuesOf('😀'))).toEqual({ v: [{ s: '😀!' }] });
    const { body } = await db.queryRaw(read([q('l', { label: { input: nodes('all') } })], ['l']));
    expect(body).toBe('{"l":["😀"]}');
  });
});

describe('lone surrogates and invalid UTF-8 over HTTP: the same answer on every path', () => {
  it('inline reads, reader threads and the writer thread all answer 400 invalid_query_json', async () => {
    const server = await spawnServer(['--readers', '1']);
    try {
      const post = async (body: string | Uint8Array, headers: Record<string, string> = {}) => {
        const res = await fetch(`${server.url}/v2/query`, { method: 'POST', body, headers });
        return { status: res.status, ...(await res.json() as { error: string; msg: string }) };
      };
      const lone = JSON.stringify(read([q('c', count(nodes('all')))], ['c'], { query_name: 'x\ud800' }));
      expect(lone).toContain('\\ud800');
      const padded = lone + ' '.repeat(5000); // too large to run inline: a reader thread
      const write1 = JSON.stringify(write([q('x', addN('L\udc00'))], []));
      for (const [body, headers] of [[lone, {}], [padded, {}], [lone, { 'x-svc-require-writer': 'true' }], [write1, {}]] as const) {
        const answer = await post(body, headers);
        expect([answer.status, answer.error]).toEqual([400, 'invalid_query_json']);
        expect(answer.msg).toMatch(LONE);
      }
      // A surrogate encoded in UTF-8 bytes (ED A0 80) is invalid UTF-8 on every path too.
      const bytes = new TextEncoder().encode(lone.replace('x\\ud800', 'x@'));
      const at = bytes.indexOf(0x40);
      const invalid = new Uint8Array([...bytes.subarray(0, at), 0xed, 0xa0, 0x80, ...bytes.subarray(at + 1)]);
      const invalidPadded = new Uint8Array([...invalid, ...new Uint8Array(5000).fill(0x20)]);
      for (const [body, headers] of [[invalid, {}], [invalidPadded, {}], [invalid, { 'x-svc-require-writer': 'true' }]] as const) {
        const answer = await post(body, headers);
        expect([answer.status, answer.error]).toEqual([400, 'invalid_query_json']);
        expect(answer.msg).toBe(`invalid query JSON: invalid UTF-8 at line 1 column ${at + 1}`);
      }
      // A leading byte order mark is no JSON whitespace: rejected at every size and path (a
      // text decoder strips it unless told not to, and small bodies are decoded to text).
      const countAll = JSON.stringify(read([q('c', count(nodes('all')))], ['c']));
      const bom = new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode(countAll)]);
      const bomPadded = new Uint8Array([...bom, ...new Uint8Array(5000).fill(0x20)]);
      const bomWrite = new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode(JSON.stringify(write([q('x', addN('L'))], [])))]);
      for (const [body, headers] of [[bom, {}], [bomPadded, {}], [bom, { 'x-svc-require-writer': 'true' }], [bomWrite, {}]] as const) {
        const answer = await post(body, headers);
        expect([answer.status, answer.error, answer.msg]).toEqual([400, 'invalid_query_json', 'invalid query JSON: expected value at line 1 column 1']);
      }
      const counted = await fetch(`${server.url}/v2/query`, { method: 'POST', body: JSON.stringify(read([q('c', count(nodes('all')))], ['c'])) });
      expect(await counted.json()).toEqual({ c: 0 });
    } finally {
      await server.stop();
    }
  });
});

describe('an empty body over HTTP', () => {
  it('is answered 400 on every path, again and again, and the server lives on', async () => {
    // The front end's shared empty body was transferred to the writer thread with the first
    // such request (detached for every later one), and the second crashed the server.
    const server = await spawnServer(['--readers', '1']);
    try {
      const post = async (headers: Record<string, string>) => {
        const res = await fetch(`${server.url}/v2/query`, { method: 'POST', body: '', headers });
        return { status: res.status, ...(await res.json() as { error: string; msg: string }) };
      };
      for (let i = 0; i < 3; i++) {
        for (const headers of [{ 'x-svc-require-writer': 'true' }, {}] as Record<string, string>[]) {
          expect(await post(headers), JSON.stringify(headers)).toEqual({
            status: 400, error: 'invalid_query_json', msg: 'invalid query JSON: EOF while parsing a value at line 1 column 1',
          });
        }
      }
      const res = await fetch(`${server.url}/v2/query`, { method: 'POST', body: JSON.stringify(read([q('c', count(nodes('all')))], ['c'])) });
      expect(await res.text()).toBe('{"c":0}');
    } finally {
      await server.stop();
    }
  });
});

describe('-0 keeps its sign', () => {
  const readBack = read([q('v', { value_map: { input: nodes([0]), properties: null } })], ['v']);

  it('written as the integer token -0 for f64, f32, f64_array and f32_array (and -0.0), rendered -0.0', async () => {
    const db = await openDatabase();
    for (const token of ['-0', '-0.0', '-0e0']) {
      const props: [string, unknown][] = [
        ['f', { value: { f64: 'NEG_ZERO' } }], ['g', { value: { f32: 'NEG_ZERO' } }],
        ['fa', { value: { f64_array: ['NEG_ZERO', 0] } }], ['ga', { value: { f32_array: [0, 'NEG_ZERO'] } }],
        ['nested', { value: { array: [{ f64: 'NEG_ZERO' }, { object: { z: { f32: 'NEG_ZERO' } } }] } }],
      ];
      expect((await db.queryRaw(text(write([q('x', addN('Z', props))], []), token))).status).toBe(200);
    }
    for (const id of [0, 1, 2]) {
      const { body } = await db.queryRaw(read([q('v', { value_map: { input: nodes([id]), properties: null } })], ['v']));
      expect(body).toBe(`{"v":[{"$id":${id},"$label":"Z","f":-0.0,"fa":[-0.0,0.0],"g":-0.0,"ga":[0.0,-0.0],"nested":[-0.0,{"z":-0.0}]}]}`);
    }
  });

  it('the integer token -0 is 0 where an integer is read (i64, date_time, plain parameters)', async () => {
    const db = await openDatabase();
    const props: [string, unknown][] = [['i', { value: { i64: 'NEG_ZERO' } }], ['d', { value: { date_time: 'NEG_ZERO' } }], ['p', { expr: { param: 'p' } }]];
    const request = text(write([q('x', addN('Z', props))], [], { parameters: { p: 'NEG_ZERO' } }));
    expect((await db.queryRaw(request)).status).toBe(200);
    expect((await db.queryRaw(readBack)).body).toBe('{"v":[{"$id":0,"$label":"Z","d":"1970-01-01T00:00:00.000Z","i":0,"p":0}]}');
  });

  it('parameters: plain -0.0, typed f64/f32 given -0 or -0.0 stay -0.0; typed i64 -0 is 0', async () => {
    const db = await openDatabase();
    const names = ['plain', 'f64', 'f32', 'f64f', 'f32f', 'i64'];
    const props = names.map((n): [string, unknown] => [n, { expr: { param: n } }]);
    const request = JSON.stringify(write([q('x', addN('Z', props))], [], {
      parameters: { plain: 'NEG_FLOAT', f64: 'NEG_ZERO', f32: 'NEG_ZERO', f64f: 'NEG_FLOAT', f32f: 'NEG_FLOAT', i64: 'NEG_ZERO' },
      parameter_types: { plain: 'value', f64: 'f64', f32: 'f32', f64f: 'f64', f32f: 'f32', i64: 'i64' },
    })).replaceAll('"NEG_ZERO"', '-0').replaceAll('"NEG_FLOAT"', '-0.0');
    expect((await db.queryRaw(request)).status).toBe(200);
    expect((await db.queryRaw(readBack)).body).toBe('{"v":[{"$id":0,"$label":"Z","f32":-0.0,"f32f":-0.0,"f64":-0.0,"f64f":-0.0,"i64":0,"plain":-0.0}]}');
  });

  it('survives a stop and restart on disk (the snapshot holds the encoded records)', async () => {
    const dir = tempDir();
    const props: [string, unknown][] = [['f', { value: { f64: 'NEG_ZERO' } }], ['g', { value: { f32: 'NEG_ZERO' } }], ['fa', { value: { f64_array: ['NEG_ZERO'] } }]];
    const expected = (id: number) => `{"v":[{"$id":${id},"$label":"Z","f":-0.0,"fa":[-0.0],"g":-0.0}]}`;
    let db = await openDatabase({ storage: 'disk', path: dir });
    expect((await db.queryRaw(text(write([q('x', addN('Z', props))], [])))).status).toBe(200);
    await db.close(); // snapshot at stop
    db = await openDatabase({ storage: 'disk', path: dir });
    expect((await db.queryRaw(readBack)).body).toBe(expected(0));
    expect((await db.queryRaw(text(write([q('x', addN('Z', props))], [])))).status).toBe(200);
    expect((await db.queryRaw(read([q('v', { value_map: { input: nodes([1]), properties: null } })], ['v']))).body).toBe(expected(1));
    await db.close();
  });

  it('compares equal to 0 (values.md §7.1) but groups and dedups apart from it (display text "-0", distinct values)', async () => {
    const db = await openDatabase();
    const add = (token: string) => db.queryRaw(text(write([q('x', addN('Z', [['f', { value: { f64: 'NEG_ZERO' } }]]))], []), token));
    for (const token of ['-0', '0', '0.0']) expect((await add(token)).status).toBe(200);
    const where = (constant: string) => text(read([q('ids', { id: { input: { nodes_where: { predicate: {
      eq: { left: { property: 'f' }, right: { constant: { f64: 'NEG_ZERO' } } } } } } } })], ['ids']), constant);
    expect(await db.query(where('-0'))).toEqual({ ids: [0, 1, 2] });
    expect(await db.query(where('0.0'))).toEqual({ ids: [0, 1, 2] });
    const groups = await db.queryRaw(read([q('g', { group_count: { input: nodes('all'), property: 'f' } })], ['g']));
    expect(groups.body).toBe('{"g":[{"count":1,"f":-0.0},{"count":2,"f":0.0}]}');
    const distinct = await db.queryRaw(read([q('d', { dedup: { input: { values: { input: nodes('all'), properties: ['f'] } } } })], ['d']));
    expect(distinct.body).toBe('{"d":[{"f":-0.0},{"f":0.0}]}');
  });
});

describe('record codec: -0 round trip', () => {
  it('keeps the sign of -0 in f64, f32, float arrays and nested values', () => {
    const values: Value[] = [-0, new F32(-0), new Float64Array([-0, 0]), new Float32Array([-0]), [-0, new F32(-0)],
      new Map<string, Value>([['z', -0]]), 0, new StringArray(['-0'])];
    const decoded = decodeRecord(encodeRecord({ keys: values.map((_, i) => i), values })).values;
    expect(Object.is(decoded[0], -0)).toBe(true);
    expect(Object.is((decoded[1] as F32).value, -0)).toBe(true);
    expect(Object.is((decoded[2] as Float64Array)[0], -0)).toBe(true);
    expect(Object.is((decoded[2] as Float64Array)[1], 0)).toBe(true);
    expect(Object.is((decoded[3] as Float32Array)[0], -0)).toBe(true);
    expect(Object.is((decoded[4] as Value[])[0], -0)).toBe(true);
    expect(Object.is(((decoded[4] as Value[])[1] as F32).value, -0)).toBe(true);
    expect(Object.is((decoded[5] as Map<string, Value>).get('z'), -0)).toBe(true);
    expect(Object.is(decoded[6], 0)).toBe(true);
    expect((decoded[7] as StringArray).items).toEqual(['-0']);
  });
});

describe('numbers and date-times at the edges of what a token may say', () => {
  const countAll = (extra: Record<string, unknown>) => read([q('c', count(nodes('all')))], ['c'], extra);

  it('an integer token past the range of a double is out of range, as 1e400 is, wherever a number can stand', async () => {
    const db = await openDatabase();
    const huge = `1${'0'.repeat(400)}`;
    const bodies = [
      text(write([q('x', addN('L', [['f', { value: { f64: 'NEG_ZERO' } }]]))], []), huge),
      text(write([q('x', addN('L', [['f', { value: { f64_array: [1, 'NEG_ZERO'] } }]]))], []), `-${huge}`),
      text(countAll({ parameters: { p: 'NEG_ZERO' } }), huge),
      text(countAll({ parameters: { p: 'NEG_ZERO' }, parameter_types: { p: 'f64' } }), huge),
    ];
    for (const body of bodies) {
      const { status, body: answer } = await db.queryRaw(body);
      expect(status).toBe(400);
      expect(JSON.parse(answer)).toMatchObject({ error: 'invalid_query_json', msg: expect.stringMatching(/^invalid query JSON: number out of range at line 1 column \d+$/) });
    }
    // The largest integer a double holds (309 digits) is still a number.
    const largest = BigInt(Number.MAX_VALUE).toString();
    expect(largest).toHaveLength(309);
    expect((await db.queryRaw(text(write([q('x', addN('L', [['f', { value: { f64: 'NEG_ZERO' } }]]))], ['x']), largest))).status).toBe(200);
    expect(await db.query(read([q('v', { values: { input: nodes('all'), properties: ['f'] } })], ['v']))).toEqual({ v: [{ f: Number.MAX_VALUE }] });
  });

  it('an f32 past the single-precision range is refused, not stored as an infinity that reads back as null', async () => {
    const db = await openDatabase();
    try {
      for (const value of [{ f32: 1e39 }, { f32: -3.5e38 }, { f32_array: [0.5, 1e39] }]) {
        const { status, body } = await db.queryRaw(JSON.stringify(write([q('x', addN('L', [['w', { value }]]))], ['x'])));
        expect(status).toBe(400);
        expect(JSON.parse(body)).toMatchObject({ error: 'invalid_query_json', msg: expect.stringMatching(/^invalid query JSON: .*f32(_array\[1\])?: number -?[0-9.e+]+ out of range for f32$/) });
      }
      // The largest f32 and a double that rounds to it are stored as that f32.
      const largest = 3.4028234663852886e38;
      for (const token of [largest, 3.4028235e38]) {
        expect((await db.queryRaw(JSON.stringify(write([q('x', addN('L', [['w', { value: { f32: token } }]]))], ['x'])))).status).toBe(200);
      }
      expect(await db.query(read([q('v', { values: { input: nodes('all'), properties: ['w'] } })], ['v']))).toEqual({ v: [{ w: largest }, { w: largest }] });
    } finally {
      await db.close();
    }
  });

  it('typed date_time parameters: RFC 3339 ranges, the offset included, and leap days of every year', async () => {
    const db = await openDatabase();
    const typed = (t: string) => db.queryRaw(JSON.stringify(countAll({ parameters: { t }, parameter_types: { t: 'date_time' } })));
    for (const t of ['2025-03-01T08:00:00+23:59', '2025-03-01T08:00:00-00:00', '0000-02-29T00:00:00Z', '2000-02-29T12:00:00.5Z', '2024-02-29 00:00:00z', '1999-12-31T23:59:60Z']) {
      expect((await typed(t)).status, t).toBe(200);
    }
    for (const t of ['2025-03-01T08:00:00+24:00', '2025-03-01T08:00:00+00:60', '2025-03-01T08:00:00+99:99', '1900-02-29T00:00:00Z', '0100-02-29T00:00:00Z', '2025-13-01T00:00:00Z', '2025-04-31T00:00:00Z']) {
      const { status, body } = await typed(t);
      expect([status, JSON.parse(body)], t).toEqual([400, { error: 'invalid_query_json', msg: "invalid query JSON: parameter 't' expected DATE_TIME, but received string" }]);
    }
  });

  it('var_min_size takes any non-negative integer token; past every row count it holds for none', async () => {
    const db = await openDatabase();
    await db.queryRaw(write([q('x', addN('L'))], []));
    const request = (size: string) => text(read([q('x', nodes('all')), q('y', count(nodes('all')), { var_min_size: ['x', 'NEG_ZERO'] })], ['y']), size);
    expect(await db.query(request('1'))).toEqual({ y: 1 });
    const skipped = await db.query(request('2')); // one node: the entry is skipped
    expect(skipped).not.toEqual({ y: 1 });
    for (const size of ['9007199254740993', '18446744073709551615']) expect(await db.query(request(size))).toEqual(skipped);
    expect(JSON.parse((await db.queryRaw(request('18446744073709551616'))).body)).toMatchObject({ error: 'invalid_query_json' });
  });
});
