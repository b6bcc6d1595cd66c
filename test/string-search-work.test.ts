// `contains`, `starts_with` and `ends_with` over long stored strings: their work is the
// characters scanned, not one unit per evaluation, and a long substring is searched in
// linear time (V8's includes() is O(text x pattern) for patterns past 250 characters: a
// 3,001-character pattern in a 9 MB string took 13 s in one call, out of reach of the
// deadline, and 28 s on the HTTP thread for two rows of an inline read).
import { describe, expect, it } from 'vitest';
import { Store } from '../src/store/store.js';
import { executeRequest, execOptions, noFlags } from '../src/exec/request.js';
import { stringContains } from '../src/exec/context.js';
import { addN, count, nodes, q, read, write, type Json } from './helpers/requests.js';

function storeWithText(text: string, copies: number): Store {
  const store = Store.create();
  const created = executeRequest(store, JSON.stringify(write(
    Array.from({ length: copies }, () => q(null, addN('B', [['big', { expr: { param: 'big' } }]]))), [], { parameters: { big: text } })), noFlags, 'writer');
  expect(created).toMatchObject({ status: 200 });
  return store;
}

const body = (predicate: Json, ids: number[]) => JSON.stringify(read([q('r', count({ where: { input: nodes(ids), predicate } }))], ['r']));
const contains = (substring: string) => ({ contains: { value: { property: 'big' }, substring: { constant: { string: substring } } } });

describe('string predicates over long strings', () => {
  it('search a long substring in linear time', () => {
    const store = storeWithText('a'.repeat(2_000_000), 1);
    const needle = 'a'.repeat(1500) + 'b' + 'a'.repeat(1500);
    const started = performance.now();
    const outcome = executeRequest(store, body(contains(needle), [0]), noFlags, 'reader', execOptions({ queryTimeoutMs: 10_000 }));
    expect(outcome).toEqual({ status: 200, body: '{"r":0}' });
    // includes() took ~3 s here; a linear scan of 2 M characters takes milliseconds.
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('find what includes() finds', () => {
    const cases: [string, string][] = [
      ['a'.repeat(600) + 'b' + 'a'.repeat(600), 'a'.repeat(300) + 'b' + 'a'.repeat(300)],
      ['xy'.repeat(400) + 'xz', 'xy'.repeat(200) + 'xz'],
      ['xy'.repeat(400) + 'x', 'xy'.repeat(200) + 'xz'],
      ['é😀'.repeat(300), '😀é'.repeat(140)],
      ['abc'.repeat(100), 'abc'.repeat(100)],
      ['short', 'a longer pattern than the text'],
      ['anything', ''],
    ];
    for (const [text, pattern] of cases) expect(stringContains(text, pattern), `${text.slice(0, 8)} / ${pattern.slice(0, 8)}`).toBe(text.includes(pattern));
  });

  it('charge the characters they scan, so an inline read over long strings goes to the pool', () => {
    const store = storeWithText('a'.repeat(4_000_000), 2);
    const inline = execOptions({ queryTimeoutMs: 10_000, inlineWorkMax: 10_000 });
    const pooled = execOptions({ queryTimeoutMs: 10_000 });
    const predicates: [string, Json][] = [
      ['contains', contains('b')],
      ['long contains', contains('b'.repeat(300))],
      ['starts_with', { starts_with: { value: { property: 'big' }, prefix: { constant: { string: 'a'.repeat(3_000_000) } } } }],
      ['ends_with', { ends_with: { value: { property: 'big' }, suffix: { constant: { string: 'a'.repeat(3_000_000) } } } }],
    ];
    for (const [name, predicate] of predicates) {
      expect(executeRequest(store, body(predicate, [0, 1]), noFlags, 'reader', inline), name).toEqual({ forward: 'pool' });
      expect(executeRequest(store, body(predicate, [0, 1]), noFlags, 'reader', pooled), name).toMatchObject({ status: 200 });
    }
    // Short strings stay inline.
    const small = storeWithText('abc', 2);
    expect(executeRequest(small, body(contains('b'), [0, 1]), noFlags, 'reader', inline)).toEqual({ status: 200, body: '{"r":2}' });
  });
});

describe('rendering long values', () => {
  it('charges the characters it renders, so an inline read of long strings goes to the pool', () => {
    const store = storeWithText('a'.repeat(1_000_000), 2);
    const inline = execOptions({ queryTimeoutMs: 10_000, inlineWorkMax: 10_000 });
    const values = JSON.stringify(read([q('r', { values: { input: nodes([0, 1]), properties: ['big'] } })], ['r']));
    expect(executeRequest(store, values, noFlags, 'reader', inline)).toEqual({ forward: 'pool' });
    expect(executeRequest(store, values, noFlags, 'reader', execOptions({ queryTimeoutMs: 10_000 }))).toMatchObject({ status: 200 });
    // Short values stay inline.
    const small = storeWithText('abc', 2);
    expect(executeRequest(small, values, noFlags, 'reader', inline)).toEqual({ status: 200, body: '{"r":[{"big":"abc"},{"big":"abc"}]}' });
  });
});

describe('decoding and comparing large records', () => {
  it('charges the bytes of the records it decodes and the keys dedup builds, so an inline read of large arrays goes to the pool', () => {
    const store = Store.create();
    const arr = Array.from({ length: 200_000 }, () => 7);
    const created = executeRequest(store, JSON.stringify(write(
      [0, 1, 2].map(() => q(null, addN('A', [['arr', { expr: { param: 'arr' } }]]))), [], { parameters: { arr } })), noFlags, 'writer');
    expect(created).toMatchObject({ status: 200 });
    const inline = execOptions({ queryTimeoutMs: 10_000, inlineWorkMax: 10_000 });
    const pooled = execOptions({ queryTimeoutMs: 10_000 });
    const order = JSON.stringify(read([q('r', { id: { input: { order_by: { input: nodes([0, 1, 2]), property: 'arr', order: 'asc' } } } })], ['r']));
    const dedup = JSON.stringify(read([q('r', count({ dedup: { input: { values: { input: nodes([0, 1, 2]), properties: ['arr'] } } } }))], ['r']));
    for (const [name, text, answer] of [['order_by', order, '{"r":[0,1,2]}'], ['dedup', dedup, '{"r":1}']] as const) {
      expect(executeRequest(store, text, noFlags, 'reader', inline), name).toEqual({ forward: 'pool' });
      expect(executeRequest(store, text, noFlags, 'reader', pooled), name).toEqual({ status: 200, body: answer });
    }
  });
});
