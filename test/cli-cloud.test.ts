// Cloud targets ([enterprise.<instance>]), `svc sync`, `svc update` and `--help`, through
// the built CLI against a node:http server in this process that plays the gateway and the
// npm registry. Nothing here touches the network.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'smol-toml';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { freePort, svc, tempDir } from './helpers/cli.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

let server: Server;
let base: string;
let seen: Seen[] = [];
/** What the fake gateway's /v2/metadata returns. */
let metadata: Record<string, unknown> = {};
/** What the fake registry's /svcdb/latest returns (null = 404). */
let latest: string | null = null;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (d: string) => { body += d; }).on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      const json = (status: number, value: unknown): void => {
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
      };
      if (req.url === '/gw/v2/query') {
        const auth = req.headers.authorization ?? req.headers['x-api-key'];
        if (auth === undefined) return json(400, { error: 'invalid_request', msg: 'missing authentication header' });
        if (auth === 'Bearer bad' || auth === 'bad') return json(401, { error: 'unauthorized', msg: 'invalid API key' });
        if (req.headers['x-svc-warm'] === 'true') return res.writeHead(204).end();
        // An ID beyond 2^53 must be printed exactly as sent.
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"node_count":7,"ids":[18446744073709551615]}');
        return;
      }
      if (req.url === '/gw/v2/metadata') return json(200, metadata);
      if (req.url === '/gw/readyz') return json(200, { ready: true });
      if (req.url === '/registry/svcdb/latest') return latest === null ? json(404, { error: 'Not found' }) : json(200, { name: 'svcdb', version: latest });
      if (req.url === '/html-registry/svcdb/latest') return res.writeHead(200, { 'content-type': 'text/html' }).end('<html>a captive portal</html>');
      json(404, { error: 'not_found', msg: req.url });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');
  base = `http://127.0.0.1:${address.port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  seen = [];
});

const readRequest = '{"request_type":"read","query":{"read":{"entries":[{"query":{"name":"node_count","root":{"count":{"input":{"nodes":{"reference":"all"}}}}}}],"returns":["node_count"]}}}';

function cloudProject(table: string, extra = ''): string {
  const dir = tempDir('cloud');
  writeFileSync(join(dir, 'svc.toml'), `# my project\n[project]\nname = "cloudy"\n\n[local.dev]\nport = 6969\n\n${table}\n${extra}`);
  return dir;
}

describe('svc query against a cloud gateway', () => {
  it('sends <gateway_url>/v2/query with Authorization: Bearer <key> and x-svc-tenant-id, and prints the body exactly', async () => {
    const dir = cloudProject(`[enterprise.prod]\ngateway_url = "${base}/gw/"\ndatabase_id = "db_1"\n`);
    const r = await svc(dir, ['query', 'prod', '--json', readRequest], { SVC_API_KEY: 'k-shell' });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('{\n  "node_count": 7,\n  "ids": [\n    18446744073709551615\n  ]\n}\n');
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ method: 'POST', url: '/gw/v2/query', body: readRequest });
    expect(seen[0]!.headers).toMatchObject({ authorization: 'Bearer k-shell', 'x-svc-tenant-id': 'db_1', 'content-type': 'application/json' });
  });

  it('a missing key names the variable and says it is required for cloud query authentication', async () => {
    const dir = cloudProject(`[enterprise.prod]\ngateway_url = "${base}/gw"\n`);
    const r = await svc(dir, ['query', 'prod', '--json', readRequest]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('SVC_API_KEY is not set: it is required for cloud query authentication of "prod"');
    expect(seen).toHaveLength(0);
  });

  it('reads the key from the shell first, then the project-root .env', async () => {
    const dir = cloudProject(`[enterprise.prod]\ngateway_url = "${base}/gw"\n`);
    writeFileSync(join(dir, '.env'), 'SVC_API_KEY=k-dotenv\n');
    expect((await svc(dir, ['query', 'prod', '--json', readRequest])).code).toBe(0);
    expect((await svc(dir, ['query', 'prod', '--json', readRequest], { SVC_API_KEY: 'k-shell' })).code).toBe(0);
    expect(seen.map((s) => s.headers.authorization)).toEqual(['Bearer k-dotenv', 'Bearer k-shell']);
  });

  it('query_auth_header / query_auth_scheme = "raw" / query_auth_env from svc.toml', async () => {
    const dir = cloudProject(`[enterprise.prod]\ngateway_url = "${base}/gw"\nquery_auth_header = "X-Api-Key"\nquery_auth_scheme = "raw"\nquery_auth_env = "MY_DB_KEY"\n`);
    const missing = await svc(dir, ['query', 'prod', '--json', readRequest], { SVC_API_KEY: 'unused' });
    expect(missing.stderr).toContain('MY_DB_KEY is not set: it is required for cloud query authentication');
    const r = await svc(dir, ['query', 'prod', '--json', readRequest], { MY_DB_KEY: 'raw-key' });
    expect(r.code).toBe(0);
    expect(seen[0]!.headers['x-api-key']).toBe('raw-key');
    expect(seen[0]!.headers.authorization).toBeUndefined();
  });

  it('precedence: flag > environment > .env > svc.toml > default', async () => {
    const dir = cloudProject(`[enterprise.prod]\ngateway_url = "${base}/gw"\nquery_auth_scheme = "raw"\n`);
    const env = { SVC_API_KEY: 'k' };
    await svc(dir, ['query', 'prod', '--json', readRequest], env); // svc.toml: raw
    writeFileSync(join(dir, '.env'), 'SVC_PROD_QUERY_AUTH_SCHEME=bearer\n');
    await svc(dir, ['query', 'prod', '--json', readRequest], env); // .env beats svc.toml
    await svc(dir, ['query', 'prod', '--json', readRequest], { ...env, SVC_PROD_QUERY_AUTH_SCHEME: 'raw' }); // environment beats .env
    await svc(dir, ['query', 'prod', '--json', readRequest, '--auth-scheme', 'bearer'], { ...env, SVC_PROD_QUERY_AUTH_SCHEME: 'raw' }); // flag beats all
    expect(seen.map((s) => s.headers.authorization)).toEqual(['k', 'Bearer k', 'k', 'Bearer k']);
  });

  it('--warm answered 204 prints nothing and exits 0; --compact prints one line', async () => {
    const dir = cloudProject(`[enterprise.prod]\ngateway_url = "${base}/gw"\n`);
    const warm = await svc(dir, ['query', 'prod', '--json', readRequest, '--warm'], { SVC_API_KEY: 'k' });
    expect(warm.code).toBe(0);
    expect(warm.stdout).toBe('');
    expect(seen[0]!.headers['x-svc-warm']).toBe('true');
    const compact = await svc(dir, ['query', 'prod', '--json', readRequest, '--compact'], { SVC_API_KEY: 'k' });
    expect(compact.stdout).toBe('{"node_count":7,"ids":[18446744073709551615]}\n');
  });

  it('a rejected key prints `Query failed with HTTP 401: <body>` and exits 1', async () => {
    const dir = cloudProject(`[enterprise.prod]\ngateway_url = "${base}/gw"\n`);
    const r = await svc(dir, ['query', 'prod', '--json', readRequest], { SVC_API_KEY: 'bad' });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('Query failed with HTTP 401: {"error":"unauthorized","msg":"invalid API key"}\n');
  });

  it('an unreachable gateway names the endpoint and hints at gateway_url, the network and svc sync', async () => {
    const port = await freePort();
    const dir = cloudProject(`[enterprise.prod]\ngateway_url = "http://127.0.0.1:${port}"\n`);
    const r = await svc(dir, ['query', 'prod', '--json', readRequest], { SVC_API_KEY: 'k' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`cannot reach cloud instance "prod" at http://127.0.0.1:${port}/v2/query (ECONNREFUSED)`);
    expect(r.stderr).toContain('Check gateway_url in [enterprise.prod]');
    expect(r.stderr).toContain('run `svc sync prod`');
  });

  it('a missing gateway_url is an error; --host/--port are refused for a cloud instance', async () => {
    const dir = cloudProject('[enterprise.prod]\nquery_auth_scheme = "bearer"\n');
    const r = await svc(dir, ['query', 'prod', '--json', readRequest], { SVC_API_KEY: 'k' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('gateway_url is missing for cloud instance "prod"');
    const flags = await svc(dir, ['query', 'prod', '--json', readRequest, '--port', '7000'], { SVC_API_KEY: 'k' });
    expect(flags.stderr).toContain('--host and --port apply to local instances');
  });

  it('status probes <gateway_url>/readyz', async () => {
    const dir = cloudProject(`[enterprise.prod]\ngateway_url = "${base}/gw"\n`);
    const r = await svc(dir, ['status', 'prod', '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ instance: 'prod', kind: 'enterprise', status: 'ready', gateway_url: `${base}/gw` });
  });
});

describe('svc sync', () => {
  it('writes the metadata settings into [enterprise.<instance>] and keeps the rest of svc.toml', async () => {
    const table = `[enterprise.prod]\ngateway_url = "${base}/gw" # the gateway\nquery_auth_scheme = "raw"\n\n# trailing comment of prod\n`;
    const dir = cloudProject(table, '[enterprise.other]\ngateway_url = "https://other.example.com"\n');
    metadata = {
      gateway_url: `${base}/gw`,
      query_auth_header: 'Authorization',
      query_auth_scheme: 'bearer',
      query_auth_env: 'PROD_KEY',
      database_id: 'db_42',
      plan: 'Growth',
    };
    const r = await svc(dir, ['sync', 'prod'], { SVC_API_KEY: 'k-sync' });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('database_id = "db_42" (added)');
    expect(r.stdout).toContain('query_auth_scheme = "bearer" (was "raw")');
    expect(seen[0]).toMatchObject({ method: 'GET', url: '/gw/v2/metadata' });
    expect(seen[0]!.headers.authorization).toBe('k-sync'); // sent with the configured scheme (raw)

    const text = readFileSync(join(dir, 'svc.toml'), 'utf8');
    expect(text.startsWith('# my project\n[project]\nname = "cloudy"\n\n[local.dev]\nport = 6969\n\n[enterprise.prod]\n')).toBe(true);
    expect(text).toContain('# trailing comment of prod');
    expect(text, 'an unchanged value keeps its line and comment').toContain(`gateway_url = "${base}/gw" # the gateway\n`);
    expect(text).toContain('[enterprise.other]\ngateway_url = "https://other.example.com"\n');
    const config = parse(text) as { enterprise: Record<string, Record<string, unknown>> };
    expect(config.enterprise.prod).toEqual({
      gateway_url: `${base}/gw`, query_auth_header: 'Authorization', query_auth_scheme: 'bearer', query_auth_env: 'PROD_KEY', database_id: 'db_42',
    });

    // The synced settings are used: the key now comes from PROD_KEY, the tenant from database_id.
    const q = await svc(dir, ['query', 'prod', '--json', readRequest], { PROD_KEY: 'p' });
    expect(q.code).toBe(0);
    expect(seen[1]!.headers).toMatchObject({ authorization: 'Bearer p', 'x-svc-tenant-id': 'db_42' });
  });

  it('--gateway-url creates a missing table; --dry-run writes nothing; a local instance is refused', async () => {
    const dir = cloudProject('');
    metadata = { database_id: 'db_7' };
    const before = readFileSync(join(dir, 'svc.toml'), 'utf8');
    const dry = await svc(dir, ['sync', 'staging', '--gateway-url', `${base}/gw`, '--dry-run']);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain('Would update [enterprise.staging]');
    expect(readFileSync(join(dir, 'svc.toml'), 'utf8')).toBe(before);

    expect((await svc(dir, ['sync', 'staging', '--gateway-url', `${base}/gw`])).code).toBe(0);
    const config = parse(readFileSync(join(dir, 'svc.toml'), 'utf8')) as { enterprise: Record<string, Record<string, unknown>> };
    // The table keeps the gateway it was made with (the metadata named none), so it can be used.
    expect(config.enterprise.staging).toEqual({ gateway_url: `${base}/gw`, database_id: 'db_7' });
    expect((await svc(dir, ['query', 'staging', '--json', readRequest], { SVC_API_KEY: 'k' })).code).toBe(0);
    expect(seen.at(-1)!.headers).toMatchObject({ authorization: 'Bearer k', 'x-svc-tenant-id': 'db_7' });

    const local = await svc(dir, ['sync', 'dev']);
    expect(local.code).toBe(1);
    expect(local.stderr).toContain('`svc sync` refreshes cloud instances');
    const missing = await svc(dir, ['sync', 'nowhere']);
    expect(missing.stderr).toContain('no [enterprise.nowhere] table');
    // Unreachable: the hint does not send the user back to the command that failed.
    const down = await svc(dir, ['sync', 'staging', '--gateway-url', `http://127.0.0.1:${await freePort()}`]);
    expect(down.code).toBe(1);
    expect(down.stderr).toContain('cannot reach the gateway of cloud instance "staging"');
    expect(down.stderr).not.toContain('run `svc sync');
  });
});

describe('cloud settings a header cannot carry', () => {
  it('are refused before anything is written or sent, in one line, and the key is never printed', async () => {
    const dir = cloudProject(`[enterprise.prod]\ngateway_url = "${base}/gw"\n`);
    const before = readFileSync(join(dir, 'svc.toml'), 'utf8');
    // A gateway whose metadata names a database ID the gateway itself would refuse.
    metadata = { database_id: 'db\u0001x' };
    const synced = await svc(dir, ['sync', 'prod'], { SVC_API_KEY: 'k' });
    expect(synced.code).toBe(1);
    expect(synced.stderr).toMatch(/^svc sync: .*database_id must be 1-128 letters, digits, "\.", "_" or "-", got "db\\u0001x"\n$/);
    expect(readFileSync(join(dir, 'svc.toml'), 'utf8')).toBe(before);
    for (const [args, env] of [
      [['query', 'prod', '--json', readRequest, '--database-id', 'db x'], { SVC_API_KEY: 'k' }],
      [['query', 'prod', '--json', readRequest], { SVC_API_KEY: 'sekrét€key' }],
    ] as const) {
      const r = await svc(dir, [...args], env);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr.split('\n').filter(Boolean), r.stderr).toHaveLength(1);
      expect(r.stderr).not.toContain('unexpected error');
      expect(r.stderr).not.toContain('sekrét');
    }
  });
});

describe('svc update', () => {
  it('offline: says it could not check and exits 0', async () => {
    const port = await freePort();
    const r = await svc(tempDir('update'), ['update'], { SVC_UPDATE_REGISTRY: `http://127.0.0.1:${port}` });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Installed: svc \d+\.\d+\.\d+\n/);
    expect(r.stdout).toContain('Could not check for updates: cannot reach');
    expect(r.stdout).toContain('Nothing was changed');
  });

  it('reports a newer version and how to upgrade; up to date; not published', async () => {
    const cwd = tempDir('update');
    latest = '99.0.0';
    const newer = await svc(cwd, ['update', '--registry', `${base}/registry`]);
    expect(newer.code).toBe(0);
    expect(newer.stdout).toContain('A newer version is available: svcdb 99.0.0.');
    expect(newer.stdout).toContain('npm install -g svcdb@latest');
    latest = '0.0.1';
    expect((await svc(cwd, ['update'], { SVC_UPDATE_REGISTRY: `${base}/registry` })).stdout).toContain('is up to date');
    latest = null;
    const unpublished = await svc(cwd, ['update', '--registry', `${base}/registry`]);
    expect(unpublished.code).toBe(0);
    expect(unpublished.stdout).toContain('svcdb is not published on');
  });

  it('never prints a registry URL\'s credentials; an answer without a version is not "cannot reach"', async () => {
    const cwd = tempDir('update');
    latest = '0.0.1';
    const withCredentials = `${base.replace('http://', 'http://user:s3cr3t@')}/registry`;
    const upToDate = await svc(cwd, ['update', '--registry', withCredentials]);
    expect(upToDate.stdout).toContain('is up to date (latest on http://***@127.0.0.1:');
    const down = await svc(cwd, ['update'], { npm_config_registry: `http://user:s3cr3t@127.0.0.1:${await freePort()}/` });
    expect(down.stdout).toContain('cannot reach http://***@127.0.0.1:');
    for (const r of [upToDate, down]) expect(r.stdout + r.stderr).not.toContain('s3cr3t');
    const html = await svc(cwd, ['update', '--registry', `${base}/html-registry`]);
    expect(html.code).toBe(0);
    expect(html.stdout).toContain(`Could not check for updates: ${base}/html-registry/svcdb/latest answered without a version`);
  });
});

describe('--help', () => {
  it('every command has help', async () => {
    const cwd = tempDir('help');
    const top = await svc(cwd, ['--help']);
    expect(top.code).toBe(0);
    const commands = ['serve', 'init', 'start', 'stop', 'status', 'query', 'sync', 'update'];
    const results = await Promise.all(commands.map((command) => svc(cwd, [command, '--help'])));
    commands.forEach((command, i) => {
      expect(top.stdout).toContain(`  ${command} `);
      expect(results[i]!.code, command).toBe(0);
      expect(results[i]!.stdout, command).toContain(`Usage: svc ${command}`);
    });
  });

  it('an unknown option or command fails with a non-zero exit', async () => {
    const cwd = tempDir('help');
    expect((await svc(cwd, ['query', 'dev', '--nope'])).code).not.toBe(0);
    expect((await svc(cwd, ['frobnicate'])).code).not.toBe(0);
  });
});
