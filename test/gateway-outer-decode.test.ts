// The gateway's outer JSON decode (src/gateway/outer-decode.ts, gateway.ts outerRequestType):
// the byte-walking fast path must never accept a body JSON.parse refuses, nor classify one
// differently; when unsure it gives up and the full decode answers (same errors as before).
// Checked differentially against JSON.parse on hand-picked edge cases and on generated
// bodies with random mutations.
import { describe, expect, it } from 'vitest';
import { GatewayError } from '../src/gateway/errors.js';
import { outerRequestType } from '../src/gateway/gateway.js';
import { quickRequestType } from '../src/gateway/outer-decode.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** What the full decode makes of a body: the request type, or 'error'. */
function oracle(body: Uint8Array): 'read' | 'write' | 'error' {
  let doc: unknown;
  try {
    doc = JSON.parse(utf8.decode(body));
  } catch {
    return 'error';
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return 'error';
  const t = (doc as Record<string, unknown>)['request_type'];
  return t === 'read' || t === 'write' ? t : 'error';
}

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);

function agrees(body: Uint8Array): void {
  const quick = quickRequestType(body);
  const expected = oracle(body);
  if (quick !== null) expect(quick, `fast path on ${JSON.stringify(Buffer.from(body).toString('latin1'))}`).toBe(expected);
  // And the public function answers exactly what the full decode says.
  let got: string;
  try {
    got = outerRequestType(body);
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe('invalid_query_json');
    got = 'error';
  }
  expect(got).toBe(expected);
}

/** A small deterministic PRNG (mulberry32). */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('outer JSON decode fast path', () => {
  it('agrees with JSON.parse on edge cases, and takes the fast path for ordinary bodies', () => {
    const fast = [
      '{"request_type":"read","query":{}}',
      ' \t\r\n{ "query" : [1, -0, 2.5e-3, 1E+2, true, false, null, "x\\u00e9\\n"], "request_type" : "write" } \n',
      '\ufeff{"request_type":"read"}',
      '{"request_type":"write","request_type":"read"}',
      '{"a":{"request_type":"write"},"request_type":"read"}',
      '{"s":"\\ud800 lone surrogate","request_type":"read"}',
      '{"é":"ü","request_type":"read"}',
      '{"request_type":"read","x":[[],{},[[]],{"":{}}]}',
    ];
    for (const text of fast) {
      expect(quickRequestType(bytes(text)), text).not.toBeNull();
      agrees(bytes(text));
    }
    const others = [
      '', ' ', '{', '}', '[]', '"read"', 'null', '{"request_type":"read"', '{"request_type":"read"}}', '{"request_type":"read"} x',
      '{"request_type":"read",}', '{,"request_type":"read"}', '{"request_type" "read"}', '{"request_type":"read" "a":1}',
      '{"request_type":"both"}', '{"request_type":"Read"}', '{"request_type":1}', '{"request_type":null}', '{}',
      '{"request_\\u0074ype":"read"}', '{"request_type":"re\\u0061d"}', '{"request_type":"write","request_type":"nope"}',
      '{"a":01,"request_type":"read"}', '{"a":1.,"request_type":"read"}', '{"a":.5,"request_type":"read"}', '{"a":-,"request_type":"read"}',
      '{"a":1e,"request_type":"read"}', '{"a":1e+,"request_type":"read"}', '{"a":+1,"request_type":"read"}', '{"a":0x1,"request_type":"read"}',
      '{"a":"\\x","request_type":"read"}', '{"a":"\\u12g4","request_type":"read"}', '{"a":"\t","request_type":"read"}',
      '{"a":tru,"request_type":"read"}', '{"a":nul,"request_type":"read"}', '{"a":[1,],"request_type":"read"}', '{"a":[,1],"request_type":"read"}',
      '{"a":[1 2],"request_type":"read"}', '{"a":{"b"},"request_type":"read"}', '{"a":{"b":1,},"request_type":"read"}',
      "{'request_type':'read'}", '{"request_type":"read"}\u0000', '\u00a0{"request_type":"read"}', '{"request_type":"read"}\f',
      '{"a":NaN,"request_type":"read"}', '{"a":Infinity,"request_type":"read"}', '{"a":[}],"request_type":"read"}', '{"a":{]},"request_type":"read"}',
      '\ufeff\ufeff{"request_type":"read"}',
    ];
    for (const text of others) agrees(bytes(text));
    // Bytes that are not UTF-8, and a BOM alone.
    agrees(Uint8Array.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]));
    agrees(Uint8Array.from([0xef, 0xbb, 0xbf]));
    agrees(Uint8Array.from([...bytes('{"request_type":"read","a":"'), 0xc3, 0x28, ...bytes('"}')]));
    agrees(Uint8Array.from([...bytes('{"request_type":"read","a":"'), 0xed, 0xa0, 0x80, ...bytes('"}')])); // an encoded surrogate
  });

  it('never accepts what JSON.parse refuses: generated bodies with random mutations', { timeout: 120_000 }, () => {
    const rnd = random(0x5eed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
    const strings = ['', 'a', 'read', 'write', 'request_type', 'é', '\\n', '\\u0041', '\\"', 'x y', '\\/', '\\\\'];
    const ws = ['', '', '', ' ', '\n', '\t', '\r\n  '];
    const value = (depth: number): string => {
      const r = rnd();
      if (depth > 3 || r < 0.45) {
        return pick(['0', '-0', '1', '-12.5', '3e7', '2E-2', '0.001', 'true', 'false', 'null', ...strings.map((s) => `"${s}"`)]);
      }
      if (r < 0.7) return `[${Array.from({ length: Math.floor(rnd() * 4) }, () => pick(ws) + value(depth + 1) + pick(ws)).join(',')}]`;
      return object(depth + 1, false);
    };
    const object = (depth: number, top: boolean): string => {
      const members = Array.from({ length: Math.floor(rnd() * 4) }, () => `"${pick(strings)}"${pick(ws)}:${pick(ws)}${value(depth)}`);
      if (top && rnd() < 0.9) {
        const type = pick(['"read"', '"write"', '"read"', '"write"', '"both"', '1', '"re\\u0061d"']);
        members.splice(Math.floor(rnd() * (members.length + 1)), 0, `"request_type"${pick(ws)}:${pick(ws)}${type}`);
      }
      return `{${pick(ws)}${members.join(`${pick(ws)},${pick(ws)}`)}${pick(ws)}}`;
    };
    const alphabet = [...'{}[]",:\\ -+.eE0123456789truefalsnu\t\n\r\u0000\u001f'].map((c) => c.charCodeAt(0)).concat([0xff, 0xc3, 0xa9, 0xef, 0xbb, 0xbf]);
    let fastTaken = 0;
    let mutantsFast = 0;
    for (let round = 0; round < 20_000; round++) {
      const text = pick(ws) + object(0, true) + pick(ws);
      const original = bytes(text);
      agrees(original);
      if (quickRequestType(original) !== null) fastTaken++;
      // Mutants of bodies the fast path takes are the near misses that matter: more of them.
      const mutants = quickRequestType(original) !== null ? 4 : 1;
      for (let k = 0; k < mutants; k++) {
        const mutant = Array.from(original);
        const edits = 1 + Math.floor(rnd() * 3);
        for (let e = 0; e < edits; e++) {
          const at = Math.floor(rnd() * (mutant.length + 1));
          const op = rnd();
          if (op < 0.4) mutant.splice(at, 1);
          else if (op < 0.7) mutant.splice(at, 0, pick(alphabet));
          else mutant[Math.min(at, mutant.length - 1)] = pick(alphabet);
        }
        const m = Uint8Array.from(mutant);
        agrees(m);
        if (quickRequestType(m) !== null) mutantsFast++;
      }
    }
    // The fast path is the common path for ordinary bodies, and mutants reach it too (so
    // the comparison above exercised it on near-miss inputs).
    expect(fastTaken).toBeGreaterThan(4_000); // of 20,000 (many are built to miss it)
    expect(mutantsFast).toBeGreaterThan(1_000);
  });
});
