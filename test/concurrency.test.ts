// Readers on other threads never wait for the writer and never observe half a batch.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { Store } from '../dist/src/store/store.js';
import { executeRequest, noFlags } from '../dist/src/exec/request.js';

const run = (store: Store, request: unknown) => {
  const out = executeRequest(store, JSON.stringify(request), noFlags, 'writer');
  if (!('status' in out) || out.status !== 200) throw new Error(JSON.stringify(out));
  return out.body;
};

describe('snapshot isolation across threads', () => {
  it('readers see whole batches only while the writer commits', async () => {
    const store = Store.create();
    run(store, { request_type: 'write', query: { write: { entries: [
      { query: { name: 'a', root: { add_n: { label: 'Anchor', properties: [['v', { value: { i64: 0 } }]] } } } },
    ], returns: [] } } });
    const durationMs = 1500;
    const readers = [0, 1].map(() => new Worker(new URL('./fixtures/invariant-reader.mjs', import.meta.url), {
      workerData: { shared: store.shared, durationMs },
    }));
    const results = readers.map((w) => new Promise<{ reads: number; violations: string[]; maxSeen: number }>((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    }));
    let batches = 0;
    const until = Date.now() + durationMs;
    while (Date.now() < until) {
      batches++;
      run(store, { request_type: 'write', query: { write: { entries: [
        { query: { name: 'x', root: { add_n: { label: 'P', properties: [['b', { value: { i64: batches } }]] } } } },
        { query: { name: 'y', root: { add_n: { label: 'P', properties: [['b', { value: { i64: batches } }]] } } } },
        { query: { root: { add_e: { input: { nodes: { reference: { var: 'x' } } }, label: 'L', to: { var: 'y' }, properties: [] } } } },
        { query: { root: { set_property: { input: { nodes: { reference: { ids: [0] } } }, name: 'v', value: { value: { i64: batches } } } } } },
      ], returns: [] } } });
      // A batch that fails half-way must not leak either.
      const failed = executeRequest(store, JSON.stringify({ request_type: 'write', query: { write: { entries: [
        { query: { name: 'z', root: { add_n: { label: 'P', properties: [] } } } },
        { query: { root: { add_e: { input: { nodes: { reference: { var: 'z' } } }, label: 'L', to: { ids: [999999] }, properties: [] } } } },
      ], returns: [] } } }), noFlags, 'writer');
      expect('status' in failed && failed.status).toBe(500);
      await new Promise((r) => setImmediate(r));
    }
    const seen = await Promise.all(results);
    for (const r of seen) {
      expect(r.violations).toEqual([]);
      expect(r.reads).toBeGreaterThan(10);
    }
    expect(batches).toBeGreaterThan(10);
    expect(Math.max(...seen.map((r) => r.maxSeen))).toBeGreaterThan(0);
  });
});
