// The control plane end to end on loopback: the admin API (src/cloud/admin-api.ts) over a
// SQLite store, provisioning real `svc serve` processes (the built dist/) on s3rver, and
// the `svc cloud ...` commands against it. `npm run build` first.
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControlPlaneStore } from '../src/cloud/admin-store.js';
import { startAdminApi, type RunningAdminApi } from '../src/cloud/admin-api.js';
import { createCloudLogger } from '../src/cloud/log.js';
import { openControlPlane } from '../src/cloud/open.js';
import { ProcessRuntime, Provisioner, type BackendRuntime } from '../src/cloud/provision.js';
import { serverMallocEnvironment, serverNodeFlags } from '../src/server/launch.js';
import { apiKeyHash, apiKeyPattern } from '../src/cloud/secrets.js';
import { svc, tempDir } from './helpers/cli.js';
import { cliPath } from './helpers/server.js';
import { s3Credentials, startS3rver, type S3rverInstance } from './helpers/s3rver.js';
import { addN, count, i64, nodes, q, read, write } from './helpers/requests.js';
import { eventually, slowly } from './helpers/eventually.js';

const adminToken = 'test-admin-token-0123456789abcdef';
const awsEnv = { AWS_ACCESS_KEY_ID: s3Credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3Credentials.secretAccessKey, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' };
const rootPrefix = 'cloud-test';
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';

let s3: S3rverInstance;
let s3Endpoint = '';
let dir = '';
let store: ControlPlaneStore;
let provisioner: Provisioner;
let api: RunningAdminApi;
let logText = '';

beforeAll(async () => {
  dir = tempDir('cloud-provision');
  const started = await startS3rver(join(dir, 's3'));
  s3 = started.server;
  s3Endpoint = `http://127.0.0.1:${started.port}`;
  store = await openControlPlane(join(dir, 'control-plane.sqlite'));
  const destination = new Writable({ write(chunk: Buffer, _enc, done) { logText += chunk.toString('utf8'); done(); } });
  const logger = createCloudLogger('test', { destination });
  const runtime = new ProcessRuntime({ cliPath, env: awsEnv, readerRefreshMs: 100, logger });
  provisioner = new Provisioner(store, runtime, {
    storage: { kind: 's3', bucket: 'bucket', prefix: rootPrefix, endpointUrl: s3Endpoint, region: 'us-east-1' },
    readyTimeoutMs: 30_000, restartDelayMs: 200, logger,
  });
  api = await startAdminApi({ store, provisioner, adminToken, gatewayUrl: 'http://gateway.test:8080', logger });
});

afterAll(async () => {
  await api?.close();
  await provisioner?.close();
  await store?.close();
  await s3?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function admin(method: string, path: string, body?: unknown, token: string | null = adminToken): Promise<{ status: number; json: any }> {
  const headers: Record<string, string> = {};
  if (token !== null) headers['authorization'] = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${api.url}/admin/v1/${path}`, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  return { status: res.status, json: text === '' ? null : JSON.parse(text) };
}

async function countOn(url: string): Promise<number> {
  const res = await post(url, read([q('c', count(nodes('all')))], ['c']));
  expect(res.status, res.body).toBe(200);
  return (JSON.parse(res.body) as { c: number }).c;
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const res = await fetch(`${url}/v2/query`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } });
  return { status: res.status, body: await res.text() };
}

describe('admin API authentication', () => {
  it('refuses requests without the admin token, with a malformed header or a wrong token', async () => {
    expect(await admin('GET', 'workspaces', undefined, null)).toMatchObject({ status: 401, json: { error: 'missing_admin_token' } });
    expect(await admin('GET', 'workspaces', undefined, 'wrong-token-0123456789abcdef')).toMatchObject({ status: 401, json: { error: 'invalid_admin_token' } });
    expect(await admin('GET', 'workspaces', undefined, adminToken.slice(0, -1))).toMatchObject({ status: 401, json: { error: 'invalid_admin_token' } });
    const raw = await fetch(`${api.url}/admin/v1/workspaces`, { headers: { authorization: adminToken } });
    expect(raw.status).toBe(401);
    expect(await raw.json()).toMatchObject({ error: 'malformed_authorization' });
    // Refused before the body is read: nothing was created.
    expect(await admin('POST', 'workspaces', { name: 'sneaky', plan: 'Idea' }, 'nope-nope-nope-nope-nope-nope')).toMatchObject({ status: 401 });
    expect((await store.listWorkspaces()).map((w) => w.name)).not.toContain('sneaky');
    expect((await fetch(`${api.url}/health`)).status).toBe(200);
    // The scheme is case-insensitive (RFC 9110), as at the gateway.
    expect((await fetch(`${api.url}/admin/v1/workspaces`, { headers: { authorization: `bearer ${adminToken}` } })).status).toBe(200);
  });

  it('answers 400 to a malformed percent-encoding in the path (not 500)', async () => {
    expect(await admin('GET', 'databases/%E0%A4%A')).toMatchObject({ status: 400, json: { error: 'invalid_request' } });
  });

  it('will not start with a missing or short token', async () => {
    await expect(startAdminApi({ store, provisioner, adminToken: '', gatewayUrl: 'http://g' })).rejects.toThrow(/SVC_CLOUD_ADMIN_TOKEN/);
    await expect(startAdminApi({ store, provisioner, adminToken: 'short', gatewayUrl: 'http://g' })).rejects.toThrow(/shorter/);
  });
});

describe('admin API', () => {
  it('workspaces: create, plan change, usage; validation errors are 400, unknown ids 404', async () => {
    const created = await admin('POST', 'workspaces', { name: 'Acme', plan: 'Idea' });
    expect(created).toMatchObject({ status: 201, json: { name: 'Acme', plan: 'Idea' } });
    const id = created.json.id as string;
    expect(await admin('PATCH', `workspaces/${id}`, { plan: 'Growth' })).toMatchObject({ status: 200, json: { plan: 'Growth' } });
    await store.recordUsage(id, 'read', 4);
    expect(await admin('GET', `workspaces/${id}/usage`)).toMatchObject({ status: 200, json: { reads: 4, writes: 0, allowance: { reads_per_month: 250_000_000 } } });
    expect(await admin('GET', `workspaces/${id}/usage?month=2020-02`)).toMatchObject({ status: 200, json: { month: '2020-02', reads: 0, writes: 0 } });
    expect(await admin('GET', `workspaces/${id}/usage?month=2020-13`)).toMatchObject({ status: 400 });
    expect(await admin('POST', 'workspaces', { name: 'x', plan: 'Gold' })).toMatchObject({ status: 400, json: { error: 'invalid_request' } });
    expect(await admin('POST', 'workspaces', { plan: 'Idea' })).toMatchObject({ status: 400 });
    expect((await fetch(`${api.url}/admin/v1/workspaces`, { method: 'POST', headers: { authorization: `Bearer ${adminToken}` }, body: '{' })).status).toBe(400);
    expect(await admin('GET', 'workspaces/ws_nope')).toMatchObject({ status: 404, json: { error: 'not_found' } });
    expect(await admin('POST', 'workspaces', { name: 'big', plan: 'Idea', padding: 'x'.repeat(70 * 1024) })).toMatchObject({ status: 413, json: { error: 'payload_too_large' } });
    expect(await admin('DELETE', 'plans')).toMatchObject({ status: 404 });
    expect(await admin('PUT', 'plans/Idea', { reads_per_month: 5, writes_per_month: 6 })).toMatchObject({ status: 200, json: { name: 'Idea', reads_per_month: 5, writes_per_month: 6 } });
  });

  it('provisions a database (writer + 1 reader on its own prefix), serves a write back through the reader, and stops both on delete', async () => {
    const workspace = (await admin('POST', 'workspaces', { name: 'Prov', plan: 'Startup' })).json;
    const created = await admin('POST', 'databases', { workspace_id: workspace.id, name: 'Orders', readers: 1 });
    expect(created).toMatchObject({ status: 202, json: { status: 'Provisioning', endpoint: 'http://gateway.test:8080', rate_limit: { per_second: 10, burst: 20 } } });
    const id = created.json.id as string;
    expect(created.json.slug).toMatch(/^orders-[a-z0-9]{6}$/);

    const active = await eventually(async () => {
      const got = (await admin('GET', `databases/${id}`)).json;
      if (got.status === 'Failed') throw new Error(`provisioning failed: ${got.status_detail}`);
      return got.status === 'Active' ? got : null;
    }, 'the database is Active', { ...slowly, timeoutMs: 60_000 });
    expect(active.writer_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(active.reader_urls).toHaveLength(1);
    expect(provisioner.running(id).sort()).toEqual([active.writer_url, ...active.reader_urls].sort());
    const route = await store.database(id);
    expect(route).toMatchObject({ status: 'Active', writerUrl: active.writer_url, readerUrls: active.reader_urls });

    // A write through the writer is read back through the reader.
    const written = await post(active.writer_url, write([q('x', addN('Order', [['n', i64(1)]]))], ['x']));
    expect(written.status, written.body).toBe(200);
    const readerUrl = active.reader_urls[0] as string;
    await eventually(async () => {
      const res = await post(readerUrl, read([q('c', count(nodes('all')))], ['c']));
      expect(res.status, res.body).toBe(200);
      return (JSON.parse(res.body) as { c: number }).c === 1 ? true : null;
    }, 'the reader sees the write', slowly);
    const readyz = await (await fetch(`${readerUrl}/readyz`)).json();
    expect(readyz).toMatchObject({ mode: 'reader', ready: true });

    // A reader killed -9 leaves the route at once, then comes back (a new process and
    // port) following the same data.
    const killed = provisioner.backend(id, 'reader', 0)!;
    expect(killed.url).toBe(readerUrl);
    process.kill(killed.pid!, 'SIGKILL');
    await killed.exited;
    const restarted = await eventually(async () => {
      const route = await store.database(id);
      return route !== null && route.readerUrls.length === 1 && route.readerUrls[0] !== readerUrl ? route.readerUrls[0]! : null;
    }, 'the reader is restarted', slowly);
    const again = await post(restarted, read([q('c', count(nodes('all')))], ['c']));
    expect(again.status, again.body).toBe(200);
    expect(JSON.parse(again.body)).toEqual({ c: 1 });
    expect(logText).toContain('server exited unexpectedly');
    expect((await store.database(id))!.writerUrl).toBe(active.writer_url);

    // The data is under this database's own prefix.
    const client = new S3Client({ endpoint: s3Endpoint, region: 'us-east-1', forcePathStyle: true, credentials: s3Credentials });
    try {
      const listed = await client.send(new ListObjectsV2Command({ Bucket: 'bucket', Prefix: `${rootPrefix}/` }));
      const keys = (listed.Contents ?? []).map((o) => o.Key!);
      expect(keys.length).toBeGreaterThan(0);
      for (const key of keys) expect(key.startsWith(`${rootPrefix}/databases/`)).toBe(true);
      expect(keys.some((k) => k.startsWith(`${rootPrefix}/databases/${id}/`))).toBe(true);
    } finally {
      client.destroy();
    }

    // Keys: the secret once, never in the list.
    const key = await admin('POST', `databases/${id}/keys`, { name: 'app', permission: 'read_write' });
    expect(key.status).toBe(201);
    expect(key.json.secret).toMatch(apiKeyPattern);
    expect(await store.grantForKeyHash(apiKeyHash(key.json.secret))).toMatchObject({ databaseId: id, permission: 'read_write' });
    const keys = await admin('GET', `databases/${id}/keys`);
    expect(keys.json.keys).toEqual([key.json.key]);
    expect(JSON.stringify(keys.json)).not.toContain(key.json.secret);
    expect(await admin('POST', `databases/${id}/keys`, { name: 'x', permission: 'admin' })).toMatchObject({ status: 400 });

    // Delete: keys stop granting, the servers stop.
    expect((await admin('DELETE', `databases/${id}`)).status).toBe(204);
    expect(provisioner.running(id)).toEqual([]);
    expect(await store.grantForKeyHash(apiKeyHash(key.json.secret))).toBeNull();
    expect(await admin('GET', `databases/${id}`)).toMatchObject({ status: 404 });
    for (const url of [active.writer_url, restarted]) {
      await expect(fetch(`${url}/readyz`)).rejects.toThrow();
    }

    // Secrets never reach the logs: not the key, not the admin token (nor the bad ones tried).
    expect(logText).toContain('database active');
    expect(logText).not.toContain(key.json.secret);
    expect(logText).not.toContain(key.json.secret.slice(4, 24));
    expect(logText).not.toContain(adminToken);
    expect(logText).not.toContain('wrong-token-0123456789abcdef');
  }, 180_000);

  it('a writer killed -9 leaves the route (writes refused, not timed out) and comes back on its data', async () => {
    const workspace = (await admin('POST', 'workspaces', { name: 'WriterKill', plan: 'Idea' })).json;
    const id = (await admin('POST', 'databases', { workspace_id: workspace.id, name: 'w', readers: 0 })).json.id as string;
    const active = await eventually(async () => {
      const got = (await admin('GET', `databases/${id}`)).json;
      return got.status === 'Active' ? got : null;
    }, 'the database is Active', { ...slowly, timeoutMs: 60_000 });
    expect((await post(active.writer_url, write([q('x', addN('W', [['n', i64(1)]]))], ['x']))).status).toBe(200);

    const writer = provisioner.backend(id, 'writer')!;
    process.kill(writer.pid!, 'SIGKILL');
    await writer.exited;
    await eventually(async () => ((await store.database(id))!.writerUrl === null ? true : null), 'the writer leaves the route', { ...slowly, timeoutMs: 5_000 });
    const back = await eventually(async () => {
      const url = (await store.database(id))!.writerUrl;
      return url !== null && url !== active.writer_url ? url : null;
    }, 'a new writer is in the route', { ...slowly, timeoutMs: 120_000 });
    expect(await post(back, read([q('c', count(nodes('all')))], ['c']))).toEqual({ status: 200, body: '{"c":1}' });
    expect((await store.database(id))!.status).toBe('Active');
    expect((await admin('DELETE', `databases/${id}`)).status).toBe(204);
  }, 180_000);

  it('a database deleted while it is still provisioning ends Deleted, with no server left running', async () => {
    const workspace = (await admin('POST', 'workspaces', { name: 'Hasty', plan: 'Idea' })).json;
    const id = (await admin('POST', 'databases', { workspace_id: workspace.id, name: 'brief', readers: 1 })).json.id as string;
    expect((await admin('DELETE', `databases/${id}`)).status).toBe(204);
    expect(provisioner.running(id)).toEqual([]);
    // Whatever had started (the log names each server's URL) is gone.
    const startedUrls = logText.split('\n').filter((l) => l.includes(id) && l.includes('"msg":"server started"'))
      .map((l) => (JSON.parse(l) as { url: string }).url);
    for (const url of startedUrls) await expect(fetch(`${url}/readyz`)).rejects.toThrow();
    const record = await store.databaseRecord(id);
    expect(record).toMatchObject({ status: 'Deleted', writerUrl: null, readerUrls: [] });
    // Provisioning again is refused for a deleted database.
    await provisioner.provision(id);
    expect((await store.databaseRecord(id))!.status).toBe('Deleted');
    expect(provisioner.running(id)).toEqual([]);
  }, 120_000);

  it('local-directory storage (a laptop without S3): the reader follows the writer\'s directory', async () => {
    const local = new Provisioner(store, new ProcessRuntime({ cliPath, readerRefreshMs: 100 }), { storage: { kind: 'directory', path: join(dir, 'local') } });
    try {
      const workspace = await store.createWorkspace('Laptop', 'Idea');
      const database = await store.createDatabase({ workspaceId: workspace.id, name: 'local', readerCount: 1 }, 'http://g');
      await local.provision(database.id);
      const route = await store.database(database.id);
      expect(route).toMatchObject({ status: 'Active' });
      expect((await post(route!.writerUrl!, write([q('x', addN('L', [['n', i64(2)]]))], ['x']))).status).toBe(200);
      await eventually(async () => {
        const res = await post(route!.readerUrls[0]!, read([q('c', count(nodes('all')))], ['c']));
        return res.body === '{"c":1}' ? true : null;
      }, 'the reader sees the write', slowly);
      expect(local.storageOf((await store.databaseRecord(database.id))!)).toEqual({ kind: 'directory', path: join(dir, 'local', 'databases', database.id) });

      // Every server is bound to its database (--database-id): a request labelled with
      // another database's ID (a stale gateway route) is refused and not run.
      for (const [role, url] of [['writer', route!.writerUrl!], ['reader', route!.readerUrls[0]!]] as const) {
        const refused = await post(url, read([q('c', count(nodes('all')))], ['c']), { 'x-svc-tenant-id': 'db_someone_else' });
        expect(refused.status, `${role}: ${refused.body}`).toBe(421);
        expect(JSON.parse(refused.body)).toMatchObject({ error: 'misdirected_request' });
        const own = await post(url, read([q('c', count(nodes('all')))], ['c']), { 'x-svc-tenant-id': database.id });
        expect(own, role).toEqual({ status: 200, body: '{"c":1}' });
        const server = local.backend(database.id, role, 0)!;
        const commandLine = readFileSync(`/proc/${server.pid!}/cmdline`, 'utf8').split('\0');
        expect(commandLine[commandLine.indexOf('--database-id') + 1], role).toBe(database.id);
      }
    } finally {
      await local.close();
    }
  }, 120_000);

  it('database servers do not inherit the admin token, the store\'s address or other credentials', async () => {
    const planted: Record<string, string> = {
      SVC_CLOUD_ADMIN_TOKEN: 'planted-admin-token-0123456789', SVC_CONTROL_PLANE_STORE: 'postgres://cp:pw@db/cp', SVC_REDIS_URL: 'redis://planted:6379',
      PGPASSWORD: 'planted-pg-password', GITHUB_TOKEN: 'planted-gh-token', MY_SECRET_THING: 'planted-secret',
      AWS_SESSION_TOKEN: 'planted-aws-session', SVC_PLANTED_HARMLESS: 'kept',
    };
    const saved = Object.fromEntries(Object.keys(planted).map((name) => [name, process.env[name]]));
    Object.assign(process.env, planted);
    const runtime = new ProcessRuntime({ cliPath, readerRefreshMs: 100 });
    let server: Awaited<ReturnType<ProcessRuntime['start']>> | undefined;
    try {
      server = await runtime.start({ databaseId: 'db_env', role: 'writer', ordinal: 0, storage: { kind: 'directory', path: join(dir, 'env-test') } });
      const environ = readFileSync(`/proc/${server.pid!}/environ`, 'utf8').split('\0');
      const names = new Set(environ.map((entry) => entry.slice(0, entry.indexOf('='))));
      for (const name of ['SVC_CLOUD_ADMIN_TOKEN', 'SVC_CONTROL_PLANE_STORE', 'SVC_REDIS_URL', 'PGPASSWORD', 'GITHUB_TOKEN', 'MY_SECRET_THING']) {
        expect(names.has(name), name).toBe(false);
      }
      // Object storage still works (AWS_*), and harmless settings pass.
      expect(environ).toContain('AWS_SESSION_TOKEN=planted-aws-session');
      expect(environ).toContain('SVC_PLANTED_HARMLESS=kept');
      // The launcher's glibc settings and node flags (src/server/launch.ts), as svc start gives them.
      for (const [name, value] of Object.entries(serverMallocEnvironment)) expect(environ).toContain(`${name}=${value}`);
      const commandLine = readFileSync(`/proc/${server.pid!}/cmdline`, 'utf8').split('\0');
      for (const flag of serverNodeFlags) expect(commandLine.slice(1, commandLine.indexOf('serve'))).toContain(flag);
    } finally {
      await server?.stop();
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  }, 60_000);

  it('a database whose servers cannot start becomes Failed with the reason', async () => {
    const workspace = (await admin('POST', 'workspaces', { name: 'Broken', plan: 'Idea' })).json;
    const badRuntime = new ProcessRuntime({ cliPath: join(dir, 'no-such-cli.js'), logger: undefined });
    const badProvisioner = new Provisioner(store, badRuntime, { storage: { kind: 'directory', path: join(dir, 'data') }, readyTimeoutMs: 5_000 });
    const database = await store.createDatabase({ workspaceId: workspace.id, name: 'doomed', readerCount: 1 }, 'http://g');
    await badProvisioner.provision(database.id);
    const record = await store.databaseRecord(database.id);
    expect(record!.status).toBe('Failed');
    expect(record!.statusDetail).toMatch(/writer server exited during start-up/);
    expect(badProvisioner.running(database.id)).toEqual([]);

    // An operator provisions it again, through the API (with this API's provisioner, whose servers start).
    expect((await admin('POST', `databases/${database.id}/provision`)).status).toBe(202);
    const active = await eventually(async () => {
      const got = (await admin('GET', `databases/${database.id}`)).json;
      if (got.status === 'Failed') throw new Error(`provisioning again failed: ${got.status_detail}`);
      return got.status === 'Active' ? got : null;
    }, 'the database is Active after provisioning again', { ...slowly, timeoutMs: 60_000 });
    expect((await post(active.writer_url, write([q('x', addN('Again', [['n', i64(1)]]))], ['x']))).status).toBe(200);
    // Only a Failed database is provisioned again.
    expect(await admin('POST', `databases/${database.id}/provision`)).toMatchObject({ status: 409, json: { error: 'conflict' } });
    expect((await admin('POST', 'databases/db_00000000000000000000/provision')).status).toBe(404);
    expect((await admin('DELETE', `databases/${database.id}`)).status).toBe(204);
  }, 90_000);

  it('a stop does not wait out the delay before restarting a crashed server', async () => {
    const workspace = (await admin('POST', 'workspaces', { name: 'Waiting', plan: 'Idea' })).json;
    const runtime = new ProcessRuntime({ cliPath, readerRefreshMs: 100 });
    const restartDelayMs = 60_000;
    const own = new Provisioner(store, runtime, { storage: { kind: 'directory', path: join(dir, 'waiting-data') }, readyTimeoutMs: 30_000, restartDelayMs });
    const database = await store.createDatabase({ workspaceId: workspace.id, name: 'waiting', readerCount: 0 }, 'http://g');
    try {
      await own.provision(database.id);
      const writer = own.backend(database.id, 'writer')!;
      process.kill(writer.pid!, 'SIGKILL');
      await writer.exited;
      await eventually(async () => ((await store.database(database.id))!.writerUrl === null ? true : null), 'the writer leaves the route', { ...slowly, timeoutMs: 5_000 });
    } finally {
      const stopStarted = Date.now();
      await own.close();
      expect(Date.now() - stopStarted, 'the stop ended the restart wait instead of sleeping through it').toBeLessThan(restartDelayMs / 4);
    }
    expect(own.running(database.id)).toEqual([]);
  }, 120_000);

  it('a restored database whose servers cannot start yet (storage down at the restart) is tried again until Active, not left Failed', async () => {
    const workspace = (await admin('POST', 'workspaces', { name: 'Restored', plan: 'Idea' })).json;
    const storage = { kind: 'directory' as const, path: join(dir, 'restore-data') };
    const runtime = new ProcessRuntime({ cliPath, readerRefreshMs: 100 });
    const first = new Provisioner(store, runtime, { storage, readyTimeoutMs: 30_000 });
    const database = await store.createDatabase({ workspaceId: workspace.id, name: 'kept', readerCount: 1 }, 'http://g');
    await first.provision(database.id);
    const before = (await store.databaseRecord(database.id))!;
    expect(before.status).toBe('Active');
    expect((await post(before.writerUrl!, write([q('x', addN('Kept', [['n', i64(1)]]))], ['x']))).status).toBe(200);
    await first.close(); // the control plane stops (its servers with it)

    // After the restart the first three server starts fail, as with storage still down.
    let failing = 3;
    const flaky: BackendRuntime = {
      start: async (spec) => {
        if (failing > 0) {
          failing--;
          throw new Error(`${spec.role} server exited during start-up: storage error: injected outage`);
        }
        return runtime.start(spec);
      },
    };
    const second = new Provisioner(store, flaky, { storage, readyTimeoutMs: 30_000, restartDelayMs: 100, restartDelayMaxMs: 400 });
    try {
      const { restored } = await second.restoreAll();
      const details: (string | null)[] = [];
      let done = false;
      void restored.then(() => { done = true; });
      while (!done) {
        const record = (await store.databaseRecord(database.id))!;
        expect(record.status, record.statusDetail ?? '').not.toBe('Failed');
        details.push(record.statusDetail);
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(failing).toBe(0);
      expect(details.some((d) => d !== null && /^attempt \d failed, trying again in \d+ ms: .*injected outage/.test(d))).toBe(true);
      const after = (await store.databaseRecord(database.id))!;
      expect(after).toMatchObject({ status: 'Active', statusDetail: null });
      expect(await countOn(after.writerUrl!)).toBe(1);
    } finally {
      await second.close();
    }
  }, 90_000);
});

describe('svc cloud commands', () => {
  it('create a workspace, a database and a key through the admin API; the token comes only from the environment', async () => {
    const cwd = join(dir, 'cli');
    mkdirSync(cwd);
    const env = { SVC_CLOUD_ADMIN_TOKEN: adminToken, SVC_CLOUD_ADMIN_URL: api.url };
    const noToken = await svc(cwd, ['cloud', 'workspace', 'list'], { SVC_CLOUD_ADMIN_URL: api.url });
    expect(noToken.code).toBe(1);
    expect(noToken.stderr).toContain('SVC_CLOUD_ADMIN_TOKEN');
    const badToken = await svc(cwd, ['cloud', 'workspace', 'list'], { ...env, SVC_CLOUD_ADMIN_TOKEN: 'x'.repeat(30) });
    expect(badToken.code).toBe(1);
    expect(badToken.stderr).toContain('401');

    const ws = await svc(cwd, ['cloud', 'workspace', 'create', '--name', 'CLI Co', '--plan', 'Startup'], env);
    expect(ws.code, ws.stderr).toBe(0);
    const workspace = JSON.parse(ws.stdout) as { id: string; plan: string };
    expect(workspace.plan).toBe('Startup');
    const plan = await svc(cwd, ['cloud', 'workspace', 'update', workspace.id, '--plan', 'Growth'], env);
    expect(JSON.parse(plan.stdout)).toMatchObject({ plan: 'Growth' });

    // Readers 0 and an override: created through the API without waiting for servers.
    const db = await svc(cwd, ['cloud', 'database', 'create', '--workspace', workspace.id, '--name', 'cli-db', '--readers', '0', '--rate-per-second', '3', '--burst', '4'], env);
    expect(db.code, db.stderr).toBe(0);
    const database = JSON.parse(db.stdout) as { id: string; rate_limit: unknown };
    expect(database.rate_limit).toEqual({ per_second: 3, burst: 4 });

    const key = await svc(cwd, ['cloud', 'key', 'create', '--database', database.id, '--permission', 'read'], env);
    expect(key.code, key.stderr).toBe(0);
    const secret = (JSON.parse(key.stdout) as { secret: string }).secret;
    expect(secret).toMatch(apiKeyPattern);
    expect(key.stderr).toContain('shown this once');
    // Nothing is written to a project file: svc.toml never holds keys.
    expect(readdirSync(cwd)).toEqual([]);
    const listed = await svc(cwd, ['cloud', 'key', 'list', '--database', database.id], env);
    expect(listed.stdout).not.toContain(secret);
    expect(JSON.parse(listed.stdout)).toMatchObject({ keys: [{ permission: 'read', revoked_at: null }] });

    const deleted = await svc(cwd, ['cloud', 'database', 'delete', database.id], env);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect((await svc(cwd, ['cloud', 'database', 'get', database.id], env)).stderr).toContain('404');
  }, 180_000);
});
