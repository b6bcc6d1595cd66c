// A small body is read into the front end's scratch buffer and run inline from there
// (src/server/http.ts); a request that waits for the reader pool or the writer must take
// its own copy first, or the next request's bytes would overwrite it. Many concurrent
// requests of the three routes, each checked against its own body.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServer, type SpawnedServer } from './helpers/server.js';
import { addN, i64, q, read, write, type Json } from './helpers/requests.js';

const NODES = 64;

async function post(url: string, body: Json): Promise<{ status: number; json: unknown }> {
  const r = await fetch(`${url}/v2/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, json: await r.json() };
}

const byId = (id: number) => read([q('r', { value_map: { input: { nodes: { reference: { ids: [id] } } }, properties: ['i'] } })], ['r']);
/** A scan: no static cost bound, so the HTTP thread sends it to the reader pool. */
const byScan = (i: number) => read([q('r', { id: { input: { nodes_where: { predicate: {
  eq: { left: { property: 'i' }, right: { constant: { i64: i } } },
} } } } })], ['r']);

describe('bodies read in the front end scratch buffer', () => {
  let server: SpawnedServer;
  beforeAll(async () => {
    server = await spawnServer(['--readers', '1']);
    const added = await post(server.url, write(Array.from({ length: NODES }, (_, i) => q(null, addN('N', [['i', i64(i)]]))), []));
    expect(added.status).toBe(200);
  }, 30_000);
  afterAll(async () => { await server.stop(); });

  it('answers inline reads, pooled scans and writes, interleaved, each from its own body', async () => {
    const requests: Promise<void>[] = [];
    for (let round = 0; round < 8; round++) {
      for (let k = 0; k < NODES; k++) {
        const route = (round + k) % 3;
        if (route === 0) {
          requests.push(post(server.url, byId(k)).then((r) => { expect(r).toEqual({ status: 200, json: { r: [{ i: k }] } }); }));
        } else if (route === 1) {
          requests.push(post(server.url, byScan(k)).then((r) => { expect(r).toEqual({ status: 200, json: { r: [k] } }); }));
        } else {
          const tag = round * NODES + k;
          requests.push(post(server.url, write([q('w', { id: { input: addN('W', [['tag', i64(tag)]]) } })], ['w'])).then((r) => {
            expect(r.status).toBe(200);
          }));
        }
      }
    }
    await Promise.all(requests);
    // Every write stored its own tag, once.
    const tags = await post(server.url, read([q('t', { values: { input: { nodes_where: { predicate: {
      eq: { left: { property: '$label' }, right: { constant: { string: 'W' } } },
    } } }, properties: ['tag'] } })], ['t']));
    expect(tags.status).toBe(200);
    const stored = (tags.json as { t: { tag: number }[] }).t.map((x) => x.tag).sort((a, b) => a - b);
    const expected: number[] = [];
    for (let round = 0; round < 8; round++) for (let k = 0; k < NODES; k++) if ((round + k) % 3 === 2) expected.push(round * NODES + k);
    expect(stored).toEqual(expected.sort((a, b) => a - b));
  }, 60_000);
});
