// The plan cache (exec/request.ts) keys a body on its query text and the kinds of its
// parameters, not their values: one query text sent with other values must answer for
// those values, decode each value (and its errors) in stage 3, re-plan when the index
// catalog changes, and keep every stage of envelope.md §6 in its order.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../src/index.js';
import { executeRequest, noFlags, type RequestFlags } from '../src/exec/request.js';
import type { IndexRuntime } from '../src/index/runtime.js';
import { decodeRequest } from '../src/protocol/decode.js';
import { asSvcError, errorBody } from '../src/protocol/errors.js';
import { parametersSpan } from '../src/protocol/request-text.js';
import { Store } from '../src/store/store.js';
import { InlineReads } from '../src/server/inline-reads.js';
import type { QueryJob } from '../src/server/job.js';
import { addN, q, read, str, i64, write } from './helpers/requests.js';

const label = (l: string) => ({ eq: { left: { property: '$label' }, right: { constant: { string: l } } } });
const where = (l: string, p: unknown) => ({ and: { predicates: [label(l), p] } });
const eqParam = (property: string, param: string) => ({ eq: { left: { property }, right: { param } } });
/** `ids of P nodes with <property> == $v` as one text, with the parameters JSON spliced in as given. */
const lookupText = (property: string, params: string, extra = '') =>
  `{"request_type":"read","query":{"read":{"entries":[{"query":{"name":"r","root":{"id":{"input":{"nodes_where":{"predicate":${JSON.stringify(where('P', eqParam(property, 'v')))}}}}}}}],"returns":["r"]}}${extra},"parameters":${params}}`;

function onStore() {
  const store = Store.create();
  const exec = (body: string, flags: RequestFlags = noFlags, options?: Parameters<typeof executeRequest>[4]) => {
    const out = executeRequest(store, body, flags, 'writer', options);
    return 'status' in out ? { status: out.status, body: out.body } : out;
  };
  const ok = (request: unknown): Record<string, unknown> => {
    const out = exec(typeof request === 'string' ? request : JSON.stringify(request));
    if (!('status' in out) || out.status !== 200) throw new Error(JSON.stringify(out));
    return JSON.parse(out.body) as Record<string, unknown>;
  };
  /** Run index work to the end, slice by slice, as the committer does between batches. */
  const settleIndexes = () => {
    for (;;) {
      store.beginWrite();
      const result = (store.indexes as IndexRuntime).step();
      if (result === 'progress') store.commit();
      else { store.rollback(); return; }
    }
  };
  return { store, exec, ok, settleIndexes };
}

/** What decoding the body afresh answers (the reference for errors on cached query texts). */
function freshError(body: string): string {
  try {
    decodeRequest(body);
  } catch (err) {
    return errorBody(asSvcError(err));
  }
  throw new Error('decodes');
}

describe('plan cache: one query text, other parameter values', () => {
  it('answers for each request\'s values, not the first one\'s (index lookup, id lookup, limit, typed and untyped)', () => {
    const { exec, ok, settleIndexes } = onStore();
    ok(write(Array.from({ length: 50 }, (_, i) => q(null, addN('P', [['email', str(`p${i}@x`)], ['k', i64(i % 7)]]))), []));
    ok(write([q('r', { create_index: { spec: { node_equality: { label: 'P', property: 'email', unique: true } }, if_not_exists: false } })], ['r']));
    settleIndexes();
    for (const i of [3, 17, 3, 49, 0, 17]) {
      expect(ok(lookupText('email', JSON.stringify({ v: `p${i}@x` })))['r']).toEqual([i]);
      expect(ok(lookupText('email', JSON.stringify({ v: `p${i}@x` }), ',"parameter_types":{"v":"string"}'))['r']).toEqual([i]);
      // Whitespace inside the parameters is the value's, not the query's.
      expect(ok(lookupText('email', `{ "v" :\n "p${i}@x" }`))['r']).toEqual([i]);
      const byId = (id: number) => read([q('r', { values: { input: { nodes: { reference: { param: 'id' } } }, properties: ['email'] } })], ['r'], { parameters: { id: [id] } });
      expect(ok(byId(i))['r']).toEqual([{ email: `p${i}@x` }]);
    }
    const limited = (n: number) => read([q('r', { id: { input: { limit: { input: { nodes_where: { predicate: label('P') } }, count: { expr: { param: 'n' } } } } } })], ['r'], { parameters: { n } });
    expect(ok(limited(2))['r']).toEqual([0, 1]);
    expect(ok(limited(4))['r']).toEqual([0, 1, 2, 3]);
    expect(ok(limited(1))['r']).toEqual([0]);
    // A null parameters member binds nothing: the run-time error, then values again.
    expect(JSON.parse((exec(lookupText('email', 'null')) as { body: string }).body).error).toBe('invalid_query');
    expect(ok(lookupText('email', '{"v":"p5@x"}'))['r']).toEqual([5]);
  });

  it('writes with parameters write each request\'s values', () => {
    const { ok } = onStore();
    const add = (rows: unknown[]) => write([{ for_each: { param: 'rows', body: [q(null, addN('W', [['n', { expr: { param: 'n' } }]]))] } }], [], { parameters: { rows } });
    ok(add([{ n: 1 }, { n: 2 }]));
    ok(add([{ n: 30 }]));
    ok(add([{ n: 'x' }, { n: 4.5 }, { n: null }]));
    expect(ok(read([q('r', { values: { input: { nodes_where: { predicate: label('W') } }, properties: ['n'] } })], ['r']))['r']).toEqual([1, 2, 30, 'x', 4.5, null].map((n) => ({ n })));
  });

  it('decodes and answers other parameter kinds on the same text (i64, f64, string, null, array)', () => {
    const { ok } = onStore();
    ok(write([q(null, addN('P', [['k', i64(5)]])), q(null, addN('P', [['k', str('5')]])), q(null, addN('P', [['k', { value: { f64: 2.5 } }]]))], []));
    expect(ok(lookupText('k', '{"v":5}'))['r']).toEqual([0]);
    expect(ok(lookupText('k', '{"v":"5"}'))['r']).toEqual([1]);
    expect(ok(lookupText('k', '{"v":5.0}'))['r']).toEqual([0]); // i64 5 and f64 5.0 are equal
    expect(ok(lookupText('k', '{"v":2.5}'))['r']).toEqual([2]);
    expect(ok(lookupText('k', '{"v":null}'))['r']).toEqual([]);
    expect(ok(lookupText('k', '{"v":[5]}'))['r']).toEqual([]);
    expect(ok(lookupText('k', '{"v":5}'))['r']).toEqual([0]);
    // Typed: the declared type decides, per request.
    expect(ok(lookupText('k', '{"v":5}', ',"parameter_types":{"v":"f64"}'))['r']).toEqual([0]);
    expect(ok(lookupText('k', '{"v":2.5}', ',"parameter_types":{"v":"f64"}'))['r']).toEqual([2]);
  });

  it('a parameter decoding error on a cached text is the fresh body\'s error, and wins over option checks', () => {
    const { exec, ok } = onStore();
    ok(write([q(null, addN('P', [['k', i64(5)]]))], []));
    const typed = (v: string) => lookupText('k', `{"v":${v}}`, ',"parameter_types":{"v":"i64"}');
    expect(ok(typed('5'))['r']).toEqual([0]);
    for (const bad of [typed('"x"'), typed('5.5'), typed('{"a":}'), lookupText('k', '{"v":1,"v":2}'), lookupText('k', '{"w":1}', ',"parameter_types":{"v":"i64"}'), lookupText('k', '[1]')]) {
      const out = exec(bad);
      expect(out).toEqual({ status: 400, body: freshError(bad) });
      // Stage 3 before stage 4: the parameter error, not the option error of `warm` ... on a
      // read that asks for durability.
      expect(exec(bad, { ...noFlags, awaitDurable: true })).toEqual({ status: 400, body: freshError(bad) });
    }
    // A valid value on the same text: the option error (stage 4) as for any read.
    const optionError = exec(typed('6'), { ...noFlags, awaitDurable: true }) as { status: number; body: string };
    expect([optionError.status, JSON.parse(optionError.body).error]).toEqual([400, 'invalid_request_option']);
    expect(ok(typed('5'))['r']).toEqual([0]);
  });

  it('planning errors are never cached and still come after decoding and option checks', () => {
    const { exec } = onStore();
    const bad = (n: number) => JSON.stringify(read([q('', { id: { input: { nodes: { reference: { param: 'id' } } } } })], [], { parameters: { id: [n] } }));
    for (const n of [1, 2, 1]) expect(JSON.parse((exec(bad(n)) as { body: string }).body).error).toBe('invalid_empty_name');
    expect(JSON.parse((exec(bad(3), { ...noFlags, awaitDurable: true }) as { body: string }).body).error).toBe('invalid_request_option');
    // A parameter that does not parse: decoding (stage 3) first.
    const broken = bad(1).replace('"parameters":{"id":[1]}', '"parameters":{"id":[1,]}');
    expect(exec(broken)).toEqual({ status: 400, body: freshError(broken) });
  });

  it('re-plans when the index catalog changes: an index made after the plan is used, a dropped one is not', () => {
    const { exec, ok, settleIndexes } = onStore();
    ok(write(Array.from({ length: 30 }, (_, i) => q(null, addN('P', [['email', str(`p${i}@x`)]]))), []));
    // Inline runs take only plans with a static cost bound: a scan is sent to the pool, an
    // index lookup runs. So the outcome shows which plan the cache handed out.
    const inline = { queryTimeoutMs: 30_000, inlineWorkMax: 10_000 };
    const look = (i: number) => exec(lookupText('email', JSON.stringify({ v: `p${i}@x` })), noFlags, inline);
    expect(look(1)).toEqual({ forward: 'pool', unbounded: true });
    expect(look(2)).toEqual({ forward: 'pool', unbounded: true }); // cached: still a scan
    const spec = { node_equality: { label: 'P', property: 'email' } };
    ok(write([q('r', { create_index: { spec, if_not_exists: false } })], ['r']));
    settleIndexes();
    expect(look(3)).toEqual({ status: 200, body: '{"r":[3]}' });
    expect(look(4)).toEqual({ status: 200, body: '{"r":[4]}' });
    ok(write([q('r', { drop_index: { spec } })], ['r']));
    expect(look(5)).toEqual({ forward: 'pool', unbounded: true });
    settleIndexes();
    expect(look(6)).toEqual({ forward: 'pool', unbounded: true });
  });

  it('the HTTP thread remembers a query text sent to the pool for its catalog only: once an index bounds it, it runs inline', () => {
    const { store, ok, settleIndexes } = onStore();
    ok(write(Array.from({ length: 30 }, (_, i) => q(null, addN('P', [['email', str(`p${i}@x`)]]))), []));
    const pooled: QueryJob[] = [], answers: string[] = [];
    const inline = new InlineReads(store, { submit: (job) => { pooled.push(job); } }, { submit: () => { throw new Error('no writes here'); } }, { queryTimeoutMs: 30_000 });
    const look = (i: number) => inline.submit({
      body: new TextEncoder().encode(lookupText('email', JSON.stringify({ v: `p${i}@x` }))), flags: noFlags,
      responder: { settled: false, respond: (_status: number, text: Uint8Array | string) => { answers.push(String(text)); } },
    });
    look(1);
    look(2);
    expect([pooled.length, answers.length]).toEqual([2, 0]);
    ok(write([q('r', { create_index: { spec: { node_equality: { label: 'P', property: 'email' } }, if_not_exists: false } })], ['r']));
    settleIndexes();
    look(3);
    expect([pooled.length, answers]).toEqual([2, ['{"r":[3]}']]);
  });

  it('a `parameters` member first, with an inner member of that name later in the query, answers for each value', () => {
    const { ok } = onStore();
    // The last `"parameters":` in these texts is inside the query (an object constant).
    const text = (id: number) => JSON.stringify({ parameters: { id: [id] }, ...write([q('r', { id: { input: { set_property: {
      input: { nodes: { reference: { param: 'id' } } }, name: 'o', value: { value: { object: { parameters: { i64: 7 } } } } } } } })], ['r']) });
    ok(write([q(null, addN('P')), q(null, addN('P')), q(null, addN('P'))], []));
    for (const id of [0, 2, 1, 2]) expect(ok(text(id))['r']).toEqual([id]);
    const objects = ok(read([q('r', { values: { input: { nodes: { reference: 'all' } }, properties: ['o'] } })], ['r']))['r'];
    expect(objects).toEqual([{ o: { parameters: 7 } }, { o: { parameters: 7 } }, { o: { parameters: 7 } }]);
  });

  it('an escaped `parameters` member name keys on the whole text (each value its own entry)', async () => {
    const db = await openDatabase();
    await db.query(write([q(null, addN('P', [['email', str('a')]])), q(null, addN('P', [['email', str('b')]]))], []));
    const escaped = (v: string) => lookupText('email', JSON.stringify({ v })).replace('"parameters"', '"param\\u0065ters"');
    expect(await db.query(escaped('a'))).toEqual({ r: [0] });
    expect(await db.query(escaped('b'))).toEqual({ r: [1] });
    await db.close();
  });
});

describe('parametersSpan', () => {
  const jsonValue = fc.jsonValue({ maxDepth: 3 });
  const ws = fc.constantFrom('', ' ', '\n', '\t ', '\r\n');
  it('finds exactly the top-level parameters value in any member order and spacing, and nothing else', () => {
    fc.assert(fc.property(
      fc.dictionary(fc.string({ maxLength: 12 }), jsonValue, { maxKeys: 5 }), fc.option(jsonValue, { nil: undefined }), fc.nat(6), fc.array(ws, { minLength: 64, maxLength: 64 }),
      (members, params, at, spaces) => {
        delete (members as Record<string, unknown>)['parameters'];
        const entries: [string, unknown][] = Object.entries(members).map(([k, v]) => [k, { nested: { parameters: v } }]);
        if (params !== undefined) entries.splice(Math.min(at, entries.length), 0, ['parameters', params]);
        let w = 0;
        const sp = () => spaces[w++ % spaces.length]!;
        const text = `${sp()}{${entries.map(([k, v]) => `${sp()}${JSON.stringify(k)}${sp()}:${sp()}${JSON.stringify(v, null, w % 3 === 0 ? 1 : undefined)}${sp()}`).join(',')}}${sp()}`;
        const span = parametersSpan(text);
        if (params === undefined) expect(span).toBeNull();
        else {
          expect(span).not.toBeNull();
          expect(JSON.stringify(JSON.parse(text.slice(span![0], span![1])))).toBe(JSON.stringify(params));
          expect(text.slice(span![0], span![1])).toBe(text.slice(span![0], span![1]).trim());
        }
      },
    ), { numRuns: 2000 });
  });

  it('refuses texts that are not one object with one such member', () => {
    for (const text of ['', '[]', '{"parameters":1,"parameters":2}', '{"parameters":{"a":1}', '{"parameters":"x}', '{"a":1}x', '{"param\\u0065ters":{}}', '{"a" 1}']) {
      expect(parametersSpan(text)).toBeNull();
    }
    const at = (text: string, value: string) => [text.lastIndexOf(value), text.lastIndexOf(value) + value.length];
    for (const [text, value] of [['{"parameters":{"a":"}"}}', '{"a":"}"}'], ['{"x":"\\"parameters\\"","parameters":null}', 'null'], ['{"parameters" : -1.5e3 }', '-1.5e3']]) {
      expect(parametersSpan(text!)).toEqual(at(text!, value!));
    }
  });
});
