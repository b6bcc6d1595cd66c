// The whole managed-cloud topology on loopback, every part a real process: `svc cloud
// serve` (SQLite store, local-directory storage) provisions a database with a writer and
// two readers; `svc gateway` on the same store and a real redis-server answers the
// database's key. Plan Startup (10/s, burst 20) applies; revocation reaches the gateway
// within its cache TTL; neither process logs the key.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnCli, type SpawnedBackend } from './helpers/backend-server.js';
import { tempDir } from './helpers/cli.js';
import { startRedis, type RedisServer } from './helpers/redis.js';
import { runCli } from './helpers/server.js';

const adminToken = randomBytes(32).toString('hex');
let redis: RedisServer;
let controlPlane: SpawnedBackend | undefined;
let gateway: SpawnedBackend | undefined;
let adminEnv: Record<string, string>;
let databaseId: string;
let keyId: string;
let secret: string;

async function admin(args: string[]): Promise<Record<string, unknown>> {
  const r = await runCli(['cloud', ...args], adminEnv, 120_000);
  if (r.code !== 0) throw new Error(`svc cloud ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

async function query(body: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string; retryAfter: string | null }> {
  const res = await fetch(`${gateway!.url}/v2/query`, {
    method: 'POST', body, headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}`, 'x-svc-tenant-id': databaseId, ...headers },
  });
  return { status: res.status, text: await res.text(), retryAfter: res.headers.get('retry-after') };
}

const write = '{"request_type":"write","query":{"write":{"entries":[{"query":{"name":"n","root":{"add_n":{"label":"CloudUser","properties":[]}}}}],"returns":["n"]}}}';
const count = '{"request_type":"read","query":{"read":{"entries":[{"query":{"name":"c","root":{"count":{"input":{"nodes_where":{"predicate":{"eq":{"left":{"property":"$label"},"right":{"constant":{"string":"CloudUser"}}}}}}}}}}],"returns":["c"]}}}';

describe('svc cloud serve + svc gateway', () => {
  beforeAll(async () => {
    redis = await startRedis();
    const dir = tempDir('gateway-cloud');
    const store = `sqlite:${join(dir, 'control-plane.sqlite')}`;
    controlPlane = await spawnCli(
      ['cloud', 'serve', '--store', store, '--storage', join(dir, 'data'), '--run-dir', join(dir, 'run'), '--port', '0', '--gateway-url', 'http://127.0.0.1:1'],
      /^svc cloud listening on (http:\/\/\S+) /m, { SVC_CLOUD_ADMIN_TOKEN: adminToken },
    );
    adminEnv = { SVC_CLOUD_ADMIN_TOKEN: adminToken, SVC_CLOUD_ADMIN_URL: controlPlane.url };
    gateway = await spawnCli(['gateway', '--store', store, '--redis-url', redis.url, '--port', '0', '--access-log'], /^svc gateway listening on (http:\/\/\S+) /m);
    const workspace = await admin(['workspace', 'create', '--name', 'Acme', '--plan', 'Startup']);
    const database = await admin(['database', 'create', '--workspace', String(workspace['id']), '--name', 'orders', '--readers', '2', '--wait']);
    databaseId = String(database['id']);
    const created = await admin(['key', 'create', '--database', databaseId, '--name', 'backend', '--permission', 'read_write']);
    secret = String(created['secret']);
    keyId = String((created['key'] as Record<string, unknown>)['id']);
  }, 180_000);

  afterAll(async () => {
    await gateway?.stop();
    await controlPlane?.stop();
    await redis?.dispose();
  });

  it('writes, reads its writes, reads from the readers, warms, and rate-limits at the plan\'s burst', async () => {
    expect((await query(write)).status).toBe(200);
    const own = await query(count, { 'x-svc-require-writer': 'true' });
    expect(own.text).toBe('{"c":1}');
    // the readers follow the storage: eventually they see the write too
    const deadline = Date.now() + 20_000;
    let seen = '';
    while (Date.now() < deadline && seen !== '{"c":1}') {
      seen = (await query(count)).text;
      if (seen !== '{"c":1}') await new Promise((r) => setTimeout(r, 200));
    }
    expect(seen).toBe('{"c":1}');
    expect((await query(count, { 'x-svc-warm': 'true' })).status).toBe(204);

    // Startup: burst 20. Fired together, at most 20 + refill pass; the rest get 429.
    const answers = await Promise.all(Array.from({ length: 40 }, () => query(count)));
    const limited = answers.filter((a) => a.status === 429);
    expect(answers.every((a) => a.status === 200 || a.status === 429)).toBe(true);
    expect(limited.length).toBeGreaterThanOrEqual(10);
    for (const a of limited) {
      expect(a.retryAfter).toBe('1');
      expect(JSON.parse(a.text)).toMatchObject({ error: 'rate_limited' });
    }
  });

  it('refuses a revoked key within the cache TTL, and no log holds the key', async () => {
    await new Promise((r) => setTimeout(r, 2500)); // refill the bucket
    const r = await runCli(['cloud', 'key', 'revoke', keyId, '--database', databaseId], adminEnv);
    expect(r.code, r.stderr).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const refused = await query(count);
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.text)).toMatchObject({ error: 'invalid_api_key' });
    expect(gateway!.stderr()).toContain('"msg":"query"');
    expect(gateway!.stderr()).not.toContain(secret);
    expect(controlPlane!.stderr()).not.toContain(secret);
  });
});
