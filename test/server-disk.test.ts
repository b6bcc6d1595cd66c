// `svc serve --disk`: acknowledged writes survive kill -9 of the whole server; a clean stop
// snapshots; group commit answers concurrent writers; await-durable is honoured.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnServer, type SpawnedServer } from './helpers/server.js';

const dirs: string[] = [];
afterEach(() => { for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true }); });

async function post(server: SpawnedServer, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${server.url}/v2/query`, { method: 'POST', body: JSON.stringify(body), headers });
  return { status: res.status, body: await res.text() };
}
const addNode = (n: number) => ({ request_type: 'write', query: { write: { entries: [
  { query: { name: 'x', root: { add_n: { label: 'U', properties: [['n', { value: { i64: n } }]] } } } }], returns: ['x'] } } });
const countAll = { request_type: 'read', query: { read: { entries: [
  { query: { name: 'c', root: { count: { input: { nodes: { reference: 'all' } } } } } }], returns: ['c'] } } };

describe('svc serve --disk', () => {
  it('keeps acknowledged writes across kill -9 and a clean restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svcdb-serve-'));
    dirs.push(dir);
    let server = await spawnServer(['--disk', dir, '--readers', '1']);
    expect(server.stdout()).toContain(`storage: disk ${dir}`);
    // 64 concurrent writers share fsyncs (group commit); each answer means durable.
    const answers = await Promise.all(Array.from({ length: 64 }, (_, i) => post(server, addNode(i))));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const fast = await post(server, addNode(1000), { 'x-svc-await-durable': 'false' });
    expect(fast.status).toBe(200);
    await server.stop('SIGKILL');
    server = await spawnServer(['--disk', dir, '--readers', '1']);
    expect(server.stdout()).toMatch(/recovered epoch \d+ from snapshot 0 \+ \d+ WAL batches/);
    expect(JSON.parse((await post(server, countAll)).body).c).toBeGreaterThanOrEqual(64);
    expect((await server.stop()).code).toBe(0);
    expect(readdirSync(dir).some((f) => f.startsWith('snapshot-'))).toBe(true);
    server = await spawnServer(['--disk', dir, '--readers', '1']);
    const after = JSON.parse((await post(server, countAll)).body).c;
    expect(after === 64 || after === 65).toBe(true);
    expect((await server.stop()).code).toBe(0);
  });

  it('refuses a second server on the same directory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svcdb-serve-'));
    dirs.push(dir);
    const server = await spawnServer(['--disk', dir]);
    try {
      await expect(spawnServer(['--disk', dir])).rejects.toThrow(/locked by a writer: process \d+/);
    } finally {
      await server.stop();
    }
  });
});

/** `work`, or an error naming `what` with the server's output once 30 s have passed. */
async function stalled<T>(work: Promise<T>, server: SpawnedServer, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      server.child.kill('SIGKILL');
      reject(new Error(`${what} took over 30 s\nstdout: ${server.stdout()}\nstderr: ${server.stderr()}`));
    }, 30_000);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('svc serve --disk under kill -9', () => {
  const rounds = Number(process.env.SVCDB_SOAK_ROUNDS ?? 20);
  const batch = (k: number) => ({ request_type: 'write', query: { write: { entries: [
    { query: { name: 'a', root: { add_n: { label: 'B', properties: [['k', { value: { i64: k } }]] } } } },
    { query: { name: 'b', root: { add_n: { label: 'B', properties: [['k', { value: { i64: k } }]] } } } },
    { query: { root: { add_e: { input: { nodes: { reference: { var: 'a' } } }, label: 'PAIR', to: { var: 'b' }, properties: [] } } } },
  ], returns: [] } } });
  const audit = { request_type: 'read', query: { read: { entries: [
    { query: { name: 'k', root: { values: { input: { nodes: { reference: 'all' } }, properties: ['k'] } } } },
    { query: { name: 'e', root: { count: { input: { edges: { reference: 'all' } } } } } },
  ], returns: ['k', 'e'] } } };

  it(`keeps every acknowledged batch whole over ${rounds} kills during a concurrent write load`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svcdb-crash-'));
    dirs.push(dir);
    const acknowledged = new Set<number>();
    let next = 0;
    for (let round = 0; round < rounds; round++) {
      const server = await spawnServer(['--disk', dir, '--readers', '1']);
      const stopAt = Date.now() + 100 + Math.random() * 300;
      const load = Array.from({ length: 8 }, async () => {
        while (Date.now() < stopAt) {
          const k = next++;
          try {
            const res = await post(server, batch(k));
            if (res.status === 200) acknowledged.add(k);
          } catch {
            return; // the server is gone
          }
        }
      });
      await new Promise((r) => setTimeout(r, Math.max(0, stopAt - Date.now() - 20)));
      await server.stop('SIGKILL');
      await Promise.all(load);
      const check = await spawnServer(['--disk', dir, '--readers', '1']);
      // Bounded, so a server that stops answering fails here with its log, not at the test's
      // timeout with nothing (a CI run once timed out in this test; not reproduced since).
      const { k, e } = JSON.parse((await stalled(post(check, audit), check, `round ${round}: the audit read`)).body) as { k: { k: number }[]; e: number };
      await stalled(check.stop(), check, `round ${round}: the clean stop`);
      const perBatch = new Map<number, number>();
      for (const row of k) perBatch.set(row.k, (perBatch.get(row.k) ?? 0) + 1);
      for (const [b, n] of perBatch) expect(n, `batch ${b} is partly present`).toBe(2);
      expect(e).toBe(perBatch.size);
      for (const b of acknowledged) expect(perBatch.has(b), `acknowledged batch ${b} is missing after round ${round}`).toBe(true);
    }
    expect(acknowledged.size).toBeGreaterThan(rounds);
  }, 60_000 + rounds * 5_000);
});
