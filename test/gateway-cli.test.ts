// `svc gateway` as users run it: the built CLI, the control plane's SQLite store (set up
// through its own API, as `svc cloud` would), a real redis-server and a real writer
// server; then `svc sync` and `svc query` of a project pointed at the gateway.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openControlPlane, type ControlPlaneStore } from '../src/cloud/open.js';
import { spawnBackend, spawnCli, type SpawnedBackend } from './helpers/backend-server.js';
import { svc, tempDir } from './helpers/cli.js';
import { startRedis, type RedisServer } from './helpers/redis.js';

let redis: RedisServer;
let writer: SpawnedBackend;
let gateway: SpawnedBackend | undefined;
let storePath: string;
let databaseId: string;
let secret: string;
let readSecret: string;
let workspaceId: string;

beforeAll(async () => {
  redis = await startRedis();
  writer = await spawnBackend(['--readers', '1']);
  storePath = join(tempDir('gateway-cli'), 'control-plane.sqlite');
  const store: ControlPlaneStore = await openControlPlane(`sqlite:${storePath}`);
  try {
    const workspace = await store.createWorkspace('acme', 'Growth');
    workspaceId = workspace.id;
    const db = await store.createDatabase({ workspaceId: workspace.id, name: 'main', readerCount: 0 }, 'http://gateway.invalid');
    databaseId = db.id;
    await store.setDatabaseBackends(db.id, { writerUrl: writer.url, readerUrls: [] });
    await store.setDatabaseStatus(db.id, 'Active');
    secret = (await store.createApiKey(db.id, 'ci', 'read_write')).secret;
    readSecret = (await store.createApiKey(db.id, 'reader', 'read')).secret;
  } finally {
    await store.close();
  }
  gateway = await spawnCli(
    ['gateway', '--port', '0', '--store', `sqlite:${storePath}`, '--redis-url', redis.url, '--usage-flush-ms', '100', '--access-log'],
    /^svc gateway listening on (http:\/\/\S+) /m,
  );
}, 120_000);

afterAll(async () => {
  await gateway?.stop();
  await writer?.stop();
  await redis?.dispose();
});

const write = '{"request_type":"write","query":{"write":{"entries":[{"query":{"name":"n","root":{"add_n":{"label":"CliUser","properties":[]}}}}],"returns":["n"]}}}';
const count = '{"request_type":"read","query":{"read":{"entries":[{"query":{"name":"users","root":{"count":{"input":{"nodes_where":{"predicate":{"eq":{"left":{"property":"$label"},"right":{"constant":{"string":"CliUser"}}}}}}}}}}],"returns":["users"]}}}';

describe('svc gateway', () => {
  it('svc sync fills [enterprise.prod] from the gateway, then svc query writes and reads through it with the key', async () => {
    const dir = tempDir('gateway-project');
    writeFileSync(join(dir, 'svc.toml'), '[project]\nname = "acme"\n');
    const env = { SVC_API_KEY: secret };
    const synced = await svc(dir, ['sync', 'prod', '--gateway-url', gateway!.url], env);
    expect(synced.stderr).toBe('');
    expect(synced.code).toBe(0);
    const toml = readFileSync(join(dir, 'svc.toml'), 'utf8');
    expect(toml).toContain(`gateway_url = "${gateway!.url}"`);
    expect(toml).toContain(`database_id = "${databaseId}"`);
    expect(toml).not.toContain(secret);

    const written = await svc(dir, ['query', 'prod', '--compact', '--json', write], env);
    expect(written.stderr).toBe('');
    expect(written.code).toBe(0);
    const read = await svc(dir, ['query', 'prod', '--compact', '--json', count], env);
    expect(read.code).toBe(0);
    expect(read.stdout.trim()).toBe('{"users":1}');
    const warmed = await svc(dir, ['query', 'prod', '--warm', '--json', count], env);
    expect(warmed.code).toBe(0);
    expect(warmed.stdout).toBe('');

    // a read key cannot write; a wrong key is refused
    const denied = await svc(dir, ['query', 'prod', '--json', write], { SVC_API_KEY: readSecret });
    expect(denied.code).not.toBe(0);
    expect(denied.stderr + denied.stdout).toMatch(/HTTP 403.*permission_denied/s);
    const wrong = await svc(dir, ['query', 'prod', '--json', count], { SVC_API_KEY: 'svc_wrong_key' });
    expect(wrong.stderr + wrong.stdout).toMatch(/HTTP 401.*invalid_api_key/s);
  });

  it('records the admitted requests as the workspace\'s usage in the store, and logs no key', async () => {
    await new Promise((r) => setTimeout(r, 400)); // two flush intervals
    const store = await openControlPlane(`sqlite:${storePath}`);
    try {
      const usage = await store.usage(workspaceId);
      expect(usage.writes).toBe(1);
      expect(usage.reads).toBe(2); // the read and the warm read; refused requests are not usage
    } finally {
      await store.close();
    }
    const log = gateway!.stderr();
    expect(log).toContain('"msg":"query"');
    for (const s of [secret, readSecret, 'svc_wrong_key']) expect(log).not.toContain(s);
  });

  it('serves HTTPS with --tls-cert and --tls-key: svc sync and svc query reach it, trusting the certificate through NODE_EXTRA_CA_CERTS', async () => {
    const cert = fileURLToPath(new URL('./fixtures/tls/gateway-cert.pem', import.meta.url));
    const key = fileURLToPath(new URL('./fixtures/tls/gateway-key.pem', import.meta.url));
    const tlsGateway = await spawnCli(
      // Two threads: each makes its own TLS app on the shared port.
      ['gateway', '--port', '0', '--store', `sqlite:${storePath}`, '--redis-url', redis.url, '--tls-cert', cert, '--tls-key', key, '--threads', '2'],
      /^svc gateway listening on (https:\/\/\S+) /m,
    );
    try {
      const dir = tempDir('gateway-tls-project');
      writeFileSync(join(dir, 'svc.toml'), '[project]\nname = "acme"\n');
      const env = { SVC_API_KEY: secret, NODE_EXTRA_CA_CERTS: cert };
      const synced = await svc(dir, ['sync', 'prod', '--gateway-url', tlsGateway.url], env);
      expect(synced.stderr).toBe('');
      expect(synced.code).toBe(0);
      for (let i = 0; i < 4; i++) {
        const read = await svc(dir, ['query', 'prod', '--compact', '--json', count], env);
        expect(read.stderr).toBe('');
        expect(read.stdout.trim()).toMatch(/^\{"users":\d+\}$/);
      }
      // Without trusting the certificate, the client refuses the connection.
      const untrusted = await svc(dir, ['query', 'prod', '--json', count], { SVC_API_KEY: secret });
      expect(untrusted.code).not.toBe(0);
    } finally {
      await tlsGateway.stop();
    }
    // Half a TLS set-up is refused before anything starts.
    const half = await svc(tempDir('gateway-tls-half'), ['gateway', '--port', '0', '--store', `sqlite:${storePath}`, '--tls-cert', cert]);
    expect(half.code).not.toBe(0);
    expect(half.stderr).toContain('--tls-cert and --tls-key go together');
  });

  it('has help, listed with the other commands', async () => {
    const cwd = tempDir('gateway-help');
    const help = await svc(cwd, ['gateway', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: svc gateway');
    for (const flag of ['--store', '--redis-url', '--auth-header', '--auth-scheme', '--cache-ttl-ms', '--query-timeout-ms', '--tls-cert', '--tls-key', '--control-plane-stale-ms']) expect(help.stdout).toContain(flag);
    expect((await svc(cwd, ['--help'])).stdout).toContain('  gateway ');
  });

  it('stops on SIGTERM', async () => {
    const running = gateway!;
    gateway = undefined;
    await running.stop('SIGTERM');
    await expect(fetch(`${running.url}/health`)).rejects.toThrow();
  });
});
