// propertyOfEncoded (index builds read one property without decoding the record) and
// decodeRecordInPlace (the store's reads) must answer exactly what decodeRecord (msgpackr)
// and recordGet answer, for every value kind, also on bytes in shared memory at an offset
// (where the store keeps records). The store's record cache answers what the records hold.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DECODE_WHOLE, decodeRecord, decodeRecordInPlace, encodeRecord, propertyOfEncoded, recordGet, recordJsonInPlace } from '../src/store/record-codec.js';
import { renderValue } from '../src/protocol/json.js';
import { DateTime, F32, StringArray, type Value } from '../src/protocol/value.js';
import { Store } from '../src/store/store.js';
import { limits } from '../src/limits.js';

const scalar: fc.Arbitrary<Value> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.bigInt({ min: -(1n << 63n), max: (1n << 63n) - 1n }),
  fc.constantFrom(0n, 1n, -1n, 127n, 128n, -32n, -33n, 255n, 256n, 65535n, 65536n, 2n ** 31n, -(2n ** 31n), 2n ** 32n),
  fc.double(),
  fc.constantFrom(0, -0, 1.5, 2 ** 40, -3, 127, 128, 65536, 2 ** 31, -(2 ** 31) - 1, Number.MAX_VALUE, NaN, Infinity),
  fc.double().map((x) => new F32(Math.fround(x))),
  fc.integer({ min: -8.64e15, max: 8.64e15 }).map((ms) => new DateTime(ms)),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  // Mostly ASCII, with every character that needs an escape and some that do not: the
  // rendering's one-pass path for plain ASCII (fixstr, str8) and its way back to the general one.
  fc.string({ unit: fc.constantFrom('a', 'Z', ' ', '~', '\x7f', '"', '\\', '\x00', '\x1f', '\n', 'é'), maxLength: 300 }),
  fc.string({ unit: 'binary', maxLength: 8 }), // lone surrogates included
  fc.string({ minLength: 1000, maxLength: 1100 }), // around the short-string bound
  fc.string({ minLength: 30, maxLength: 300 }),
);
const value: fc.Arbitrary<Value> = fc.oneof(
  { weight: 6, arbitrary: scalar },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }) },
  { weight: 1, arbitrary: fc.array(fc.double(), { maxLength: 4 }).map((xs) => Float64Array.from(xs)) },
  { weight: 1, arbitrary: fc.array(fc.string({ maxLength: 5 }), { maxLength: 4 }).map((xs) => new StringArray(xs)) },
  { weight: 1, arbitrary: fc.array(scalar, { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.array(fc.tuple(fc.string({ maxLength: 4 }), scalar), { maxLength: 3 }).map((kv) => new Map(kv)) },
);
/** A record: distinct key ids (some above one byte), each with a value. */
const record = fc.uniqueArray(fc.oneof(fc.nat(130), fc.nat(70_000)), { maxLength: 20 }).chain((keys) =>
  fc.array(value, { minLength: keys.length, maxLength: keys.length }).map((values) => ({ keys, values })));

const same = (a: Value | undefined, b: Value | undefined): boolean => {
  if (typeof a === 'number' && typeof b === 'number') return Object.is(a, b);
  if (a instanceof F32 && b instanceof F32) return Object.is(a.value, b.value);
  return fc.stringify(a) === fc.stringify(b) && (a === null ? b === null : a?.constructor === b?.constructor);
};

describe('propertyOfEncoded', () => {
  it('reads every key (and absent keys) as decodeRecord + recordGet does, in shared memory at an offset', () => {
    fc.assert(fc.property(record, fc.nat(64), (r, offset) => {
      const bytes = encodeRecord(r);
      const shared = new Uint8Array(new SharedArrayBuffer(bytes.length + offset + 8), 0);
      shared.set(bytes, offset);
      const decoded = decodeRecord(bytes);
      for (const keyId of [...r.keys, 70_001, 131]) {
        const got = propertyOfEncoded(shared, offset, offset + bytes.length, keyId);
        const want = recordGet(decoded, keyId);
        if (got === DECODE_WHOLE) continue; // the caller decodes; only scalars must be read here
        if (!same(got, want)) throw new Error(`key ${keyId}: ${fc.stringify(got)} vs ${fc.stringify(want)}`);
      }
    }), { numRuns: 2000 });
  });

  it('reads scalars and short strings itself (the build path), and leaves the rest to the decoder', () => {
    const r = { keys: [1, 300, 70_000, 5, 6, 7], values: [5n, 'u1@bench.io', 'é\u{1f600}', new Uint8Array([1]), 'a\ud800', 2.5] as Value[] };
    const bytes = encodeRecord(r);
    const at = (k: number) => propertyOfEncoded(bytes, 0, bytes.length, k);
    expect(at(1)).toBe(5n);
    expect(at(300)).toBe('u1@bench.io');
    expect(at(70_000)).toBe('é\u{1f600}');
    expect(at(5)).toBe(DECODE_WHOLE);
    expect(at(6)).toBe(DECODE_WHOLE); // a lone surrogate: msgpackr decides what it reads back
    expect(at(7)).toBe(2.5); // found past a value it does not decode
    expect(at(8)).toBe(undefined);
    expect(propertyOfEncoded(bytes, 0, 0, 1)).toBe(undefined); // the empty record
    expect(propertyOfEncoded(bytes, 0, bytes.length - 1, 7)).toBe(DECODE_WHOLE); // cut short
  });
});

describe('decodeRecordInPlace', () => {
  it('decodes every record as decodeRecord does, in shared memory at an offset', () => {
    fc.assert(fc.property(fc.array(record, { minLength: 1, maxLength: 3 }), fc.nat(64), (records, offset) => {
      for (const r of records) { // consecutive records: the keys array shared with the last one must not leak
        const bytes = encodeRecord(r);
        const shared = new Uint8Array(new SharedArrayBuffer(bytes.length + offset + 8), 0);
        shared.set(bytes, offset);
        const want = decodeRecord(bytes);
        const got = decodeRecordInPlace(shared, offset, offset + bytes.length);
        expect(got.keys).toEqual(want.keys);
        expect(got.keys).toEqual(r.keys);
        if (got.values.length !== want.values.length) throw new Error('value count');
        got.values.forEach((v, i) => {
          if (!same(v, want.values[i])) throw new Error(`value ${i}: ${fc.stringify(v)} vs ${fc.stringify(want.values[i])}`);
        });
      }
    }), { numRuns: 2000 });
  });

  it('reads -0, 64-bit integers and strings around the short-string bound; the empty record is shared', () => {
    const r = { keys: [3, 1, 200], values: [-0, -(1n << 63n), 'x'.repeat(1030)] as Value[] };
    const bytes = encodeRecord(r);
    const got = decodeRecordInPlace(bytes, 0, bytes.length);
    expect(Object.is(got.values[0], -0)).toBe(true);
    expect(got.values[1]).toBe(-(1n << 63n));
    expect(got.values[2]).toBe('x'.repeat(1030));
    expect(decodeRecordInPlace(bytes, 0, 0)).toBe(decodeRecord(new Uint8Array(0)));
  });
});

describe('recordJsonInPlace', () => {
  it('renders each value as renderValue renders the decoded one, or leaves the record to the decoder', () => {
    let rendered = 0;
    fc.assert(fc.property(record, fc.nat(64), (r, offset) => {
      const bytes = encodeRecord(r);
      const shared = new Uint8Array(new SharedArrayBuffer(bytes.length + offset + 8), 0);
      shared.set(bytes, offset);
      const want = decodeRecord(bytes);
      const keys: number[] = [], json: string[] = [];
      const count = recordJsonInPlace(shared, offset, offset + bytes.length, keys, json);
      if (count < 0) return; // the caller decodes and renders
      rendered++;
      expect(keys.slice(0, count)).toEqual(want.keys);
      const renderOrNull = (v: Value): string | null => { try { return renderValue(v); } catch { return null; } };
      want.values.forEach((v, i) => { expect(json[i]).toBe(renderOrNull(v)); });
    }), { numRuns: 3000 });
    expect(rendered).toBeGreaterThan(100); // the in-place path was taken, not only the fallback
  });

  it('takes the decoder for what it does not read in place', () => {
    const render = (values: Value[]): number => {
      const bytes = encodeRecord({ keys: values.map((_, i) => i), values });
      return recordJsonInPlace(bytes, 0, bytes.length, [], []);
    };
    expect(render([5n, 'a "b"', 2.5, true, null, -(1n << 63n), new F32(0.5)])).toBe(7);
    for (const v of [new Uint8Array([1]), new DateTime(0), 'a\ud800', 'x'.repeat(1030), new Float64Array([1])] as Value[]) expect(render([1n, v])).toBe(-1);
  });
});

describe('record cache (Store.recordAt)', () => {
  it('answers every version of every node exactly, read in any order, through slot collisions and admissions', () => {
    const store = Store.create();
    const label = (() => { store.beginWrite(); const l = store.names.intern('N'); const k = store.names.intern('k'); store.commit(); return [l, k] as const; })();
    const nodes = 3 * limits.recordCacheEntriesMax; // more records than slots: slots collide
    let epoch = store.beginWrite();
    for (let i = 0; i < nodes; i++) store.addNode(label[0], { keys: [label[1]], values: [BigInt(i)] });
    store.commit();
    const first = epoch;
    epoch = store.beginWrite();
    for (let i = 0; i < nodes; i += 2) store.setNodeRecord(i, { keys: [label[1]], values: [`v${i}`] });
    store.commit();
    const random = fc.sample(fc.nat(nodes - 1), { numRuns: 2 * nodes, seed: 7 });
    const at = store.beginRead();
    try {
      for (const i of [...random, ...random.slice(0, 1000)]) {
        expect(store.nodeRecord(i, first).values[0]).toBe(BigInt(i));
        expect(store.nodeRecord(i, at).values[0]).toBe(i % 2 === 0 ? `v${i}` : BigInt(i));
        expect(store.nodeRecord(i, at).values[0]).toBe(i % 2 === 0 ? `v${i}` : BigInt(i)); // misses in a row admit
      }
    } finally {
      store.endRead();
    }
    expect(at).toBe(epoch);
  });
});
