// `svc cloud serve` as a process (the built dist/), with its store in PostgreSQL (a
// throwaway cluster) and the databases' data on s3rver: start-up refuses a missing token,
// a database created with `svc cloud database create --wait` is Active and serves writes,
// SIGTERM stops every server it started, and a restart brings the database back on the
// data it had. Logs never hold the admin token or a key. `npm run build` first.
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { provisionerLockKey } from '../src/cloud/postgres-driver.js';
import { svc, tempDir } from './helpers/cli.js';
import { startPostgres, type PostgresCluster } from './helpers/postgres.js';
import { cliPath } from './helpers/server.js';
import { s3Credentials, startS3rver, type S3rverInstance } from './helpers/s3rver.js';
import { addN, count, i64, nodes, q, read, write } from './helpers/requests.js';
import { eventually, slowly } from './helpers/eventually.js';

const adminToken = 'serve-test-admin-token-0123456789';
const awsEnv = { AWS_ACCESS_KEY_ID: s3Credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3Credentials.secretAccessKey, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' };

let s3: S3rverInstance;
let s3Endpoint = '';
let cluster: PostgresCluster;
let storeUrl = '';
let dir = '';

beforeAll(async () => {
  dir = tempDir('cloud-serve');
  const started = await startS3rver(join(dir, 's3'));
  s3 = started.server;
  s3Endpoint = `http://127.0.0.1:${started.port}`;
  cluster = await startPostgres();
  storeUrl = await cluster.createDatabase('control_plane');
});

afterAll(async () => {
  await cluster?.stop();
  await s3?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface ControlPlaneProcess {
  url: string;
  child: ChildProcess;
  stderr(): string;
  stop(): Promise<number | null>;
}

function startControlPlane(env: Record<string, string | undefined>): Promise<ControlPlaneProcess> {
  const child = spawn(process.execPath, [cliPath, 'cloud', 'serve', '--store', storeUrl, '--storage', 's3://bucket/tenants',
    '--s3-endpoint-url', s3Endpoint, '--s3-region', 'us-east-1', '--port', '0', '--gateway-url', 'https://gateway.example.com/'],
  { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...awsEnv, ...env } });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { err += d; });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`no start line\n${out}\n${err}`)); }, 30_000);
    child.stdout!.on('data', () => {
      const match = /^svc cloud listening on (http:\/\/\S+) /m.exec(out);
      if (match === null) return;
      clearTimeout(timer);
      resolve({
        url: match[1]!, child, stderr: () => err,
        stop: async () => {
          if (child.exitCode === null) child.kill('SIGTERM');
          return exited;
        },
      });
    });
    void exited.then((code) => { clearTimeout(timer); reject(new Error(`svc cloud serve exited (${code})\n${out}\n${err}`)); });
  });
}

async function query(url: string, body: unknown): Promise<{ status: number; body: string }> {
  const res = await fetch(`${url}/v2/query`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return { status: res.status, body: await res.text() };
}

async function countOn(url: string): Promise<number> {
  const res = await query(url, read([q('c', count(nodes('all')))], ['c']));
  expect(res.status, res.body).toBe(200);
  return (JSON.parse(res.body) as { c: number }).c;
}

describe('svc cloud serve', () => {
  it('refuses to start without an admin token', async () => {
    const result = await svc(dir, ['cloud', 'serve', '--store', join(dir, 'x.sqlite'), '--storage', join(dir, 'data'), '--port', '0']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('SVC_CLOUD_ADMIN_TOKEN');
  });

  it('provisions with --wait, stops its servers on SIGTERM, and restores the databases on restart', async () => {
    const first = await startControlPlane({ SVC_CLOUD_ADMIN_TOKEN: adminToken });
    const env = { SVC_CLOUD_ADMIN_TOKEN: adminToken, SVC_CLOUD_ADMIN_URL: first.url };
    // A second control plane on the same store would start every database's servers twice.
    await expect(startControlPlane({ SVC_CLOUD_ADMIN_TOKEN: adminToken })).rejects.toThrow(/another `svc cloud serve` runs on the store/);
    const ws = await svc(dir, ['cloud', 'workspace', 'create', '--name', 'Serve', '--plan', 'Idea'], env);
    expect(ws.code, ws.stderr).toBe(0);
    const workspaceId = (JSON.parse(ws.stdout) as { id: string }).id;
    const created = await svc(dir, ['cloud', 'database', 'create', '--workspace', workspaceId, '--name', 'kept', '--readers', '1', '--wait'], env, 90_000);
    expect(created.code, created.stderr).toBe(0);
    const database = JSON.parse(created.stdout) as { id: string; status: string; endpoint: string; writer_url: string; reader_urls: string[] };
    expect(database).toMatchObject({ status: 'Active', endpoint: 'https://gateway.example.com' });
    const key = await svc(dir, ['cloud', 'key', 'create', '--database', database.id, '--permission', 'read_write'], env);
    const secret = (JSON.parse(key.stdout) as { secret: string }).secret;

    expect((await query(database.writer_url, write([q('x', addN('Kept', [['n', i64(7)]]))], ['x']))).status).toBe(200);
    await eventually(async () => (await countOn(database.reader_urls[0]!)) === 1 ? true : null, 'the reader sees the write', slowly);

    expect(await first.stop()).toBe(0);
    for (const url of [database.writer_url, ...database.reader_urls]) await expect(fetch(`${url}/readyz`)).rejects.toThrow();

    const second = await startControlPlane({ SVC_CLOUD_ADMIN_TOKEN: adminToken });
    try {
      const env2 = { ...env, SVC_CLOUD_ADMIN_URL: second.url };
      const restored = await eventually(async () => {
        const got = await svc(dir, ['cloud', 'database', 'get', database.id], env2);
        const record = JSON.parse(got.stdout) as typeof database;
        return record.status === 'Active' ? record : null;
      }, 'the database is Active again', { ...slowly, timeoutMs: 60_000 });
      expect(restored.writer_url).not.toBe(database.writer_url);
      expect(await countOn(restored.writer_url)).toBe(1);
      await eventually(async () => (await countOn(restored.reader_urls[0]!)) === 1 ? true : null, 'the restored reader has the data', slowly);
      const keys = await svc(dir, ['cloud', 'key', 'list', '--database', database.id], env2);
      expect(JSON.parse(keys.stdout)).toMatchObject({ keys: [{ permission: 'read_write', revoked_at: null }] });

      // Killed without a chance to stop its servers: they run on, orphaned, holding the
      // storage; the next control plane stops them (PID files in --run-dir) and starts its own.
      second.child.kill('SIGKILL');
      await second.stop();
      expect(await countOn(restored.writer_url)).toBe(1);
      const third = await startControlPlane({ SVC_CLOUD_ADMIN_TOKEN: adminToken });
      try {
        const env3 = { ...env, SVC_CLOUD_ADMIN_URL: third.url };
        const again = await eventually(async () => {
          const got = await svc(dir, ['cloud', 'database', 'get', database.id], env3);
          const record = JSON.parse(got.stdout) as typeof database;
          if (record.status === 'Failed') throw new Error(`restore failed: ${got.stdout}`);
          return record.status === 'Active' ? record : null;
        }, 'the database is Active a third time', { ...slowly, timeoutMs: 90_000 });
        for (const url of [restored.writer_url, ...restored.reader_urls]) await expect(fetch(`${url}/readyz`)).rejects.toThrow();
        expect(again.writer_url).not.toBe(restored.writer_url);
        expect(await countOn(again.writer_url)).toBe(1);
        expect(third.stderr()).toContain('stopping a server left running by a previous control plane');
      } finally {
        expect(await third.stop()).toBe(0);
      }
    } finally {
      await second.stop();
    }
    for (const text of [first.stderr(), second.stderr()]) {
      expect(text).toContain('"msg":"database active"');
      expect(text).not.toContain(adminToken);
      expect(text).not.toContain(secret.slice(4, 24));
    }
    // The store's URL carries no password here, but would be shown without one.
    expect(first.stderr()).toContain('control plane started');
  }, 300_000);

  it('a control plane whose lock session ends takes the lock again, also after a long store outage; when another process holds it, it stops and exits 1', async () => {
    const first = await startControlPlane({ SVC_CLOUD_ADMIN_TOKEN: adminToken });
    let dba = new pg.Client({ connectionString: storeUrl });
    await dba.connect();
    try {
      const holders = async (): Promise<number[]> => (await dba.query<{ pid: number }>(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = 0 AND objid = $1 AND granted", [provisionerLockKey])).rows.map((r) => r.pid);
      const [firstPid] = await holders();
      expect(firstPid).toBeDefined();
      // A PostgreSQL restart or a network cut ends the lock's session: the lock is free.
      await dba.query('SELECT pg_terminate_backend($1)', [firstPid]);
      await eventually(async () => {
        const now = await holders();
        return now.length === 1 && now[0] !== firstPid ? true : null;
      }, 'the control plane holds the lock again, on a new session', { ...slowly, timeoutMs: 20_000 });
      expect(first.stderr()).toContain('took the control-plane lock again');
      // Held again: a second control plane is still refused (a probe had it start, and fail every database).
      await expect(startControlPlane({ SVC_CLOUD_ADMIN_TOKEN: adminToken })).rejects.toThrow(/another `svc cloud serve` runs on the store/);

      // PostgreSQL down for 20 s (a restart, a fail-over): the control plane keeps its
      // servers and takes the lock again once the store answers (a review had it stop after 15 s).
      await dba.end().catch(() => undefined);
      await cluster.restart(20_000);
      expect(first.child.exitCode).toBeNull();
      dba = new pg.Client({ connectionString: storeUrl });
      await dba.connect();
      await eventually(async () => ((await holders()).length === 1 ? true : null), 'the lock is held again after the outage', { ...slowly, timeoutMs: 20_000 });
      expect(first.child.exitCode).toBeNull();
      expect(first.stderr()).toContain('the control-plane store does not answer');

      // This time another process takes the lock the moment it is free: the control plane stops.
      const [secondPid] = await holders();
      await dba.query('SELECT pg_terminate_backend($1)', [secondPid]);
      await dba.query('SELECT pg_advisory_lock($1)', [provisionerLockKey]); // granted once that session is gone
      const exited = await new Promise<number | null>((resolve) => {
        if (first.child.exitCode !== null) resolve(first.child.exitCode);
        else first.child.once('exit', (c) => resolve(c));
      });
      expect(exited).toBe(1);
      expect(first.stderr()).toContain('stopping this one and its servers');
      await dba.query('SELECT pg_advisory_unlock($1)', [provisionerLockKey]);
    } finally {
      await dba.end();
      if (first.child.exitCode === null) first.child.kill('SIGKILL');
    }
  }, 90_000);
});
