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
