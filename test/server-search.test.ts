// Vector and text indexes in the real server: searches run on reader threads (their own
// kernel instances over the shared vector memory, their own views of the text memory) while
// the writer inserts, and a --disk server keeps the indexes across kill -9 and a clean restart.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { spawnServer, type SpawnedServer } from './helpers/server.js';
import { q, read, write } from './helpers/requests.js';

const dirs: string[] = [];
afterAll(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

async function post(server: SpawnedServer, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${server.url}/v2/query`, { method: 'POST', body: JSON.stringify(body), headers });
  return { status: res.status, json: JSON.parse(await res.text()) as Record<string, unknown> };
}

const spec = { node_vector: { label: 'Doc', property: 'v', dimension: 4, metric: 'euclidean' } };
const doc = (i: number) => q(null, { add_n: { label: 'Doc', properties: [['n', { value: { i64: i } }], ['v', { value: { f32_array: [i, 0, 0, 0] } }]] } });
const nearest = (x: number, k = 3) => read([q('r', { vector_search_nodes: { label: 'Doc', property: 'v', query_vector: { expr: { param: 'x' } }, k: { literal: k } } })], ['r'], { parameters: { x: [x, 0, 0, 0] } });

/**
 * The ID of the node whose `prop` is `value`. Nodes written by concurrent requests get IDs
 * in the order the writer received them, which concurrent connections do not fix (a server
 * with several front-end threads receives them on different threads), so the test looks
 * them up instead of assuming that order.
 */
async function idOf(server: SpawnedServer, prop: string, value: Record<string, unknown>): Promise<number> {
  const answer = await post(server, read([q('r', { id: { input: { nodes_where: { predicate: { eq: { left: { property: prop }, right: { constant: value } } } } } } })], ['r']));
  const ids = answer.json['r'] as number[];
  expect(ids, JSON.stringify(answer.json)).toHaveLength(1);
  return ids[0]!;
}

async function waitActive(server: SpawnedServer, operationId: string): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    const s = (await post(server, read([q('r', { get_index_operation: { operation_id: operationId } })], ['r']))).json['r'] as Record<string, string>;
    if (s['status'] === 'succeeded') return;
    if (s['status'] === 'blocked' || s['status'] === 'aborted') throw new Error(`index operation ended ${JSON.stringify(s)}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error('index build did not finish');
}

describe('svc serve with a vector index', () => {
  it('searches on reader threads while the writer inserts, and the index survives kill -9 and a clean restart on disk', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svcdb-vector-'));
    dirs.push(dir);
    let server = await spawnServer(['--disk', dir, '--readers', '2']);
    try {
      expect((await post(server, write(Array.from({ length: 500 }, (_, i) => doc(i)), []))).status).toBe(200);
      const receipt = (await post(server, write([q('r', { create_index: { spec, if_not_exists: true } })], ['r']))).json['r'] as Record<string, string>;
      await waitActive(server, receipt['operation_id']!);
      // Reads on the reader pool race writes of new points; every answer is exact for its snapshot.
      const writes = Promise.all(Array.from({ length: 20 }, (_, b) => post(server, write(Array.from({ length: 25 }, (_, i) => doc(500 + b * 25 + i)), []))));
      const reads = await Promise.all(Array.from({ length: 60 }, (_, i) => post(server, nearest(i * 7 + 1))));
      for (const [i, r] of reads.entries()) {
        expect(r.status).toBe(200);
        const rows = r.json['r'] as { $id: number; $distance: number }[];
        const x = i * 7 + 1;
        // Nodes 0..999 hold v = [id, 0, 0, 0]; the nearest to x are x, then x-1 / x+1 (ties by id).
        expect(rows[0]).toEqual({ $distance: 0, $id: x });
        expect(rows.slice(1).map((row) => row.$distance)).toEqual([1, 1]);
      }
      expect((await writes).every((w) => w.status === 200)).toBe(true);
      const doc999 = await idOf(server, 'n', { i64: 999 });
      expect((await post(server, nearest(999, 1))).json['r']).toEqual([{ $distance: 0, $id: doc999 }]);
      // A planning error from a reader thread.
      const missing = await post(server, read([q('r', { vector_search_nodes: { label: 'Nope', property: 'v', query_vector: { value: { f32_array: [1, 0, 0, 0] } }, k: { literal: 1 } } })], ['r']));
      expect(missing).toMatchObject({ status: 400, json: { error: 'index_not_found' } });
      await server.stop('SIGKILL');
      server = await spawnServer(['--disk', dir, '--readers', '2']);
      const doc998 = await idOf(server, 'n', { i64: 998 });
      const doc997 = await idOf(server, 'n', { i64: 997 });
      expect(await idOf(server, 'n', { i64: 999 }), 'IDs survive kill -9').toBe(doc999);
      expect((await post(server, nearest(998, 1))).json['r']).toEqual([{ $distance: 0, $id: doc998 }]);
      expect((await post(server, write([q(null, { set_property: { input: { nodes: { reference: { ids: [doc998] } } }, name: 'v', value: { value: { f32_array: [5000, 0, 0, 0] } } } })], []))).status).toBe(200);
      expect((await server.stop()).code).toBe(0);
      server = await spawnServer(['--disk', dir, '--readers', '1']);
      expect((await post(server, nearest(5000, 1))).json['r']).toEqual([{ $distance: 0, $id: doc998 }]);
      // Ties are ordered by ID.
      expect((await post(server, nearest(998, 2))).json['r']).toEqual([doc997, doc999].sort((a, b) => a - b).map((id) => ({ $distance: 1, $id: id })));
      expect((await post(server, read([q('r', { count: { input: { nodes_where: { predicate: { eq: { left: { property: 'n' }, right: { constant: { i64: 3 } } } } } } } })], ['r']))).json['r']).toBe(1);
    } finally {
      await server.stop();
    }
  });
});

describe('svc serve with a text index', () => {
  it('searches on reader threads while the writer inserts, and the index survives kill -9 and a clean restart on disk', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svcdb-text-'));
    dirs.push(dir);
    const note = (i: number) => q(null, { add_n: { label: 'Note', properties: [['body', { value: { string: `note ${i} about topic${i % 7} and common words` } }]] } });
    const find = (text: string, k = 5) => read([q('r', { text_search_nodes: { label: 'Note', property: 'body', query_text: { expr: { param: 't' } }, k: { literal: k } } })], ['r'], { parameters: { t: text } });
    let server = await spawnServer(['--disk', dir, '--readers', '2']);
    try {
      expect((await post(server, write(Array.from({ length: 300 }, (_, i) => note(i)), []))).status).toBe(200);
      const receipt = (await post(server, write([q('r', { create_index: { spec: { node_text: { label: 'Note', property: 'body' } }, if_not_exists: true } })], ['r']))).json['r'] as Record<string, string>;
      await waitActive(server, receipt['operation_id']!);
      const writes = Promise.all(Array.from({ length: 10 }, (_, b) => post(server, write(Array.from({ length: 20 }, (_, i) => note(300 + b * 20 + i)), []))));
      const reads = await Promise.all(Array.from({ length: 40 }, (_, i) => post(server, find(`note ${i * 7} topic3`))));
      for (const [i, r] of reads.entries()) {
        expect(r, JSON.stringify(r.json)).toMatchObject({ status: 200 });
        const rows = r.json['r'] as { $id: number; $score: number }[];
        // The note's own number is its rarest term: it ranks first.
        expect(rows[0]!.$id).toBe(i * 7);
        for (let j = 1; j < rows.length; j++) expect(rows[j - 1]!.$score).toBeGreaterThanOrEqual(rows[j]!.$score);
      }
      expect((await writes).every((w) => w.status === 200)).toBe(true);
      const before = (await post(server, find('499 topic2'))).json['r'];
      expect((before as { $id: number }[])[0]!.$id).toBe(await idOf(server, 'body', { string: 'note 499 about topic2 and common words' }));
      await server.stop('SIGKILL');
      server = await spawnServer(['--disk', dir, '--readers', '2']);
      expect((await post(server, find('499 topic2'))).json['r']).toEqual(before);
      expect((await server.stop()).code).toBe(0);
      server = await spawnServer(['--disk', dir, '--readers', '1']);
      expect((await post(server, find('499 topic2'))).json['r']).toEqual(before);
    } finally {
      await server.stop();
    }
  });
});
