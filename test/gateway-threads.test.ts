// `svc gateway --threads 2` (src/gateway/gateway-threads.ts, docs/gateway.md "Threads"):
// two whole gateways on one port, Linux spreading connections over them. The built CLI
// against a real writer server, a real redis-server and the control plane's SQLite store
// (every thread opens its own connection to it). Every request sent on a connection of its
// own, so the kernel picks a thread for each; the access log's `thread` field tells which
// thread answered. The library tests at the end import the build, since worker threads run
// dist/src/gateway/gateway-thread-worker.js.
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openControlPlane, type ControlPlaneStore } from '../src/cloud/open.js';
import { spawnBackend, spawnCli, type SpawnedBackend } from './helpers/backend-server.js';
import { tempDir } from './helpers/cli.js';
import { eventually } from './helpers/eventually.js';
import { startPostgres, type PostgresCluster } from './helpers/postgres.js';
import { startRedis, type RedisServer } from './helpers/redis.js';
import { runCli } from './helpers/server.js';
import { expectBucketBound } from './helpers/token-bucket.js';

let redis: RedisServer;
let writer: SpawnedBackend;
let gateway: SpawnedBackend | undefined;
const stopped: SpawnedBackend[] = [];
let storeLocation: string;
/** The usage-metered database: effectively unlimited rate. */
let databaseId: string;
let workspaceId: string;
let secret: string;
/** A database of its own workspace with a small bucket. */
let limitedId: string;
let limitedSecret: string;
const LIMITED = { perSecond: 1, burst: 20 };
/** A third workspace, for the shutdown test's usage. */
let shutdownId: string;
let shutdownWorkspaceId: string;
let shutdownSecret: string;
/** A fourth, for the failing thread's usage. */
let crashId: string;
let crashWorkspaceId: string;
let crashSecret: string;

const label = `GwThreads${process.pid}`;
const write = JSON.stringify({ request_type: 'write', query: { write: { entries: [{ query: { name: 'n', root: { add_n: { label, properties: [] } } } }], returns: ['n'] } } });
const count = JSON.stringify({ request_type: 'read', query: { read: { entries: [{ query: { name: 'c', root: { count: { input: { nodes_where: { predicate: { eq: { left: { property: '$label' }, right: { constant: { string: label } } } } } } } } } }], returns: ['c'] } } });

interface Answer {
  status: number;
  text: string;
}

/** One request on a connection of its own (no keep-alive): the kernel picks a thread for it. */
function fresh(url: string, path: string, method: 'GET' | 'POST', headers: Record<string, string> = {}, body = ''): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, { method, agent: false, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => { text += d; }).on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const auth = (key: string, tenant: string): Record<string, string> => ({ authorization: `Bearer ${key}`, 'x-svc-tenant-id': tenant });

/** Resolves with the error code of a TCP connect to the port, or 'connected'. */
function tryConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => { socket.destroy(); resolve('connected'); });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
  });
}

interface AccessLine {
  thread?: number;
  databaseId?: string;
  status?: number;
  msg?: string;
}

/** The access log's query lines of a database (JSON lines on the gateway's stderr). */
function queryLines(g: SpawnedBackend, database: string): AccessLine[] {
  return g.stderr().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as AccessLine)
    .filter((l) => l.msg === 'query' && l.databaseId === database);
}

function startThreadedGateway(extra: string[] = []): Promise<SpawnedBackend> {
  return spawnCli(
    ['gateway', '--threads', '2', '--port', '0', '--store', storeLocation, '--redis-url', redis.url, '--access-log', '--health-interval-ms', '200', ...extra],
    /^svc gateway listening on (http:\/\/\S+) \(.*, threads: 2\)$/m,
  );
}

/** Reads and writes the store has counted for a workspace this month. */
async function usageOf(workspace: string, location = storeLocation): Promise<{ reads: number; writes: number }> {
  const store = await openControlPlane(location);
  try {
    const usage = await store.usage(workspace);
    return { reads: usage.reads, writes: usage.writes };
  } finally {
    await store.close();
  }
}

beforeAll(async () => {
  redis = await startRedis();
  writer = await spawnBackend(['--readers', '1']);
  storeLocation = `sqlite:${join(tempDir('gateway-threads'), 'control-plane.sqlite')}`;
  const store: ControlPlaneStore = await openControlPlane(storeLocation);
  try {
    const addDatabase = async (workspace: string, name: string): Promise<string> => {
      const db = await store.createDatabase({ workspaceId: workspace, name, readerCount: 0 }, 'http://gateway.invalid');
      await store.setDatabaseBackends(db.id, { writerUrl: writer.url, readerUrls: [] });
      await store.setDatabaseStatus(db.id, 'Active');
      return db.id;
    };
    workspaceId = (await store.createWorkspace('metered', 'Growth')).id;
    databaseId = await addDatabase(workspaceId, 'main');
    await store.setRateLimitOverride(databaseId, { perSecond: 100_000, burst: 100_000 });
    secret = (await store.createApiKey(databaseId, 'app', 'read_write')).secret;
    const limitedWorkspace = (await store.createWorkspace('limited', 'Growth')).id;
    limitedId = await addDatabase(limitedWorkspace, 'limited');
    await store.setRateLimitOverride(limitedId, LIMITED);
    limitedSecret = (await store.createApiKey(limitedId, 'app', 'read')).secret;
    shutdownWorkspaceId = (await store.createWorkspace('shutdown', 'Growth')).id;
    shutdownId = await addDatabase(shutdownWorkspaceId, 'shutdown');
    await store.setRateLimitOverride(shutdownId, { perSecond: 100_000, burst: 100_000 });
    shutdownSecret = (await store.createApiKey(shutdownId, 'app', 'read')).secret;
    crashWorkspaceId = (await store.createWorkspace('crash', 'Growth')).id;
    crashId = await addDatabase(crashWorkspaceId, 'crash');
    await store.setRateLimitOverride(crashId, { perSecond: 100_000, burst: 100_000 });
    crashSecret = (await store.createApiKey(crashId, 'app', 'read')).secret;
  } finally {
    await store.close();
  }
  gateway = await startThreadedGateway(['--usage-flush-ms', '100']);
}, 120_000);

afterAll(async () => {
  await gateway?.stop();
  await Promise.all(stopped.map((g) => g.stop()));
  await writer?.stop();
  await redis?.dispose();
});

describe('svc gateway --threads 2', () => {
  it('answers every request over many connections correctly, from both threads, and meters each admitted request once', async () => {
    const url = gateway!.url;
    const wrote = await fresh(url, '/v2/query', 'POST', auth(secret, databaseId), write);
    expect(wrote.status, wrote.text).toBe(200);
    const reads = 200;
    const answers: Answer[] = [];
    // 25 connections at a time, each request on a connection of its own.
    for (let sent = 0; sent < reads; sent += 25) {
      answers.push(...await Promise.all(Array.from({ length: 25 }, () => fresh(url, '/v2/query', 'POST', auth(secret, databaseId), count))));
    }
    for (const a of answers) expect(a).toEqual({ status: 200, text: '{"c":1}' });

    // The access log (pino, asynchronous) lands shortly; every request has one line.
    const lines = await eventually(() => { const l = queryLines(gateway!, databaseId); return l.length === reads + 1 ? l : null; }, 'every query logged');
    const byThread = new Map<number, number>();
    for (const l of lines) {
      expect(l.status).toBe(200);
      byThread.set(l.thread!, (byThread.get(l.thread!) ?? 0) + 1);
    }
    expect([...byThread.keys()].sort()).toEqual([1, 2]);
    expect(byThread.get(1)!, 'thread 1 served some').toBeGreaterThan(10);
    expect(byThread.get(2)!, 'thread 2 served some').toBeGreaterThan(10);

    // Each thread meters and flushes (every 100 ms) its own counts: together exactly one per
    // admitted request, and still that after several more flushes (nothing counted twice).
    await eventually(async () => { const u = await usageOf(workspaceId); return u.reads === reads && u.writes === 1; }, 'usage flushed');
    await new Promise((r) => setTimeout(r, 500));
    expect(await usageOf(workspaceId)).toEqual({ reads, writes: 1 });

    // GET /metrics on any connection (either thread): both threads' counts, merged.
    const bad = await fresh(url, '/v2/query', 'POST', auth('svc_not-a-key', databaseId), count);
    expect(bad.status).toBe(401);
    const scrapes = await Promise.all(Array.from({ length: 10 }, () => fresh(url, '/metrics', 'GET')));
    for (const m of scrapes) {
      expect(m.status).toBe(200);
      const value = (series: string): number => Number(m.text.split('\n').find((l) => l.startsWith(`${series} `))?.slice(series.length + 1) ?? 0);
      // Earlier tests of this file sent requests too: at least this test's, all 2xx of one kind each.
      expect(value('svc_gateway_requests_total{type="read",status="2xx"}')).toBeGreaterThanOrEqual(reads);
      expect(value('svc_gateway_requests_total{type="write",status="2xx"}')).toBeGreaterThanOrEqual(1);
      expect(value('svc_gateway_errors_total{code="invalid_api_key"}')).toBeGreaterThanOrEqual(1);
      expect(value('svc_gateway_request_duration_seconds_count{type="read"}')).toBe(value('svc_gateway_requests_total{type="read",status="2xx"}')
        + value('svc_gateway_requests_total{type="read",status="4xx"}') + value('svc_gateway_requests_total{type="read",status="5xx"}'));
      expect(value('process_resident_memory_bytes')).toBeGreaterThan(0);
    }
    const first = scrapes[0]!.text.split('\n').find((l) => l.startsWith('svc_gateway_requests_total{type="read",status="2xx"}'));
    for (const m of scrapes) expect(m.text).toContain(first);
  });

  it('answers /health, /readyz and /v2/metadata on every connection', async () => {
    const url = gateway!.url;
    const answers = await Promise.all(Array.from({ length: 20 }, () => Promise.all([
      fresh(url, '/health', 'GET'),
      fresh(url, '/readyz', 'GET'),
      fresh(url, '/v2/metadata', 'GET', { authorization: `Bearer ${secret}` }),
    ])));
    for (const [health, ready, metadata] of answers) {
      expect(health).toEqual({ status: 200, text: '{"status":"ok"}' });
      expect(ready).toEqual({ status: 200, text: '{"rate_limiter":"ok","ready":true}' });
      expect(metadata.status).toBe(200);
      expect(JSON.parse(metadata.text)).toMatchObject({ gateway_url: url, database_id: databaseId });
    }
  });

  it('admits exactly the bucket\'s burst from a burst over many connections spread over both threads', async () => {
    const url = gateway!.url;
    const burst = 60;
    const outerStart = performance.now();
    let firstAnswerMs = Infinity;
    let lastSentMs = 0;
    const answers = await Promise.all(Array.from({ length: burst }, () => {
      lastSentMs = performance.now();
      return fresh(url, '/v2/query', 'POST', auth(limitedSecret, limitedId), count).then((a) => {
        firstAnswerMs = Math.min(firstAnswerMs, performance.now());
        return a;
      });
    }));
    const outerSec = (performance.now() - outerStart) / 1000;
    const innerSec = Math.max(0, (lastSentMs - firstAnswerMs) / 1000);
    const admitted = answers.filter((a) => a.status === 200);
    const limited = answers.filter((a) => a.status === 429);
    expect(admitted.length + limited.length, 'every answer is 200 or 429').toBe(burst);
    for (const a of admitted) expect(a.text).toBe('{"c":1}');
    for (const a of limited) expect(JSON.parse(a.text)).toMatchObject({ error: 'rate_limited' });
    expectBucketBound(admitted.length, LIMITED, outerSec, innerSec);
    // Both threads took part: each answered some of the burst.
    const lines = await eventually(() => { const l = queryLines(gateway!, limitedId); return l.length === burst ? l : null; }, 'every query logged');
    expect(new Set(lines.map((l) => l.thread))).toEqual(new Set([1, 2]));
    expect(lines.filter((l) => l.status === 200).length).toBe(admitted.length);
  });

  it('on SIGTERM stops both threads, flushes every thread\'s usage and exits 0', async () => {
    // Usage is flushed only at the stop here: each thread's final flush must land.
    const g = await startThreadedGateway(['--usage-flush-ms', '3600000']);
    stopped.push(g);
    const port = Number(new URL(g.url).port);
    const reads = 60;
    const answers = await Promise.all(Array.from({ length: reads }, () => fresh(g.url, '/v2/query', 'POST', auth(shutdownSecret, shutdownId), count)));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const lines = await eventually(() => { const l = queryLines(g, shutdownId); return l.length === reads ? l : null; }, 'every query logged');
    expect(new Set(lines.map((l) => l.thread))).toEqual(new Set([1, 2]));
    expect(await usageOf(shutdownWorkspaceId)).toEqual({ reads: 0, writes: 0 });

    const exit = await g.stop('SIGTERM');
    expect(exit, g.stderr()).toEqual({ code: 0, signal: null });
    const closed = g.stderr().split('\n').filter((l) => l.includes('"msg":"gateway closed"')).map((l) => (JSON.parse(l) as AccessLine).thread);
    expect(closed.sort()).toEqual([1, 2]);
    expect(await tryConnect(port)).toBe('ECONNREFUSED');
    expect(await usageOf(shutdownWorkspaceId)).toEqual({ reads, writes: 0 });
  });

  it('refuses a thread count out of range or a store the threads cannot share, with a clear message', async () => {
    for (const bad of ['0', '65', 'two', '-1']) {
      const r = await runCli(['gateway', '--threads', bad, '--port', '0']);
      expect(r.code, bad).not.toBe(0);
      expect(r.stderr).toContain('threads must be an integer from 1 to 64.');
    }
    const memory = await runCli(['gateway', '--threads', '2', '--port', '0', '--store', ':memory:', '--redis-url', redis.url]);
    expect(memory.code).not.toBe(0);
    expect(memory.stderr).toContain('not :memory:');
  });
});

/** Send headers announcing `length` body bytes and one byte of it; resolves with the status line received within `waitMs`, or null. */
/** Sends all of a body of `length` bytes but its last byte, and what the gateway answered within waitMs. */
function stalledUpload(port: number, headers: Record<string, string>, length: number, waitMs: number): Promise<{ status: string | null; close(): void }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
    socket.on('connect', () => socket.write(`POST /v2/query HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n${lines}Content-Length: ${length}\r\n\r\n{${' '.repeat(length - 2)}`));
    socket.on('data', (d: Buffer) => { received += d.toString('latin1'); });
    socket.on('error', () => undefined);
    setTimeout(() => {
      const match = /^HTTP\/1\.1 (\d{3})/.exec(received);
      resolve({ status: match === null ? null : match[1]!, close: () => socket.destroy() });
    }, waitMs);
  });
}

describe('gateway threads as a library (built)', () => {
  it.each([
    ['the gateway\'s body bound', { bufferedBodyBytesMax: 3 * 1024 * 1024 }],
    ['a database\'s share of it', { bufferedBodyBytesMax: 64 * 1024 * 1024, databaseBodyBytesMax: 3 * 1024 * 1024 }],
  ])('bound the request bodies the process holds, not each thread (%s): one 2 MiB body fits a 3 MiB bound, whichever thread holds it', async (_bound, bounds) => {
    const { startGatewayThreads } = await import('../dist/src/gateway/gateway-threads.js') as typeof import('../src/gateway/gateway-threads.js');
    const { openControlPlane: openBuilt } = await import('../dist/src/cloud/open.js') as typeof import('../src/cloud/open.js');
    const controlPlane = await openBuilt(storeLocation);
    const threads = await startGatewayThreads({
      threads: 2, controlPlane, storeLocation, redisUrl: redis.url, logLevel: 'warn', ...bounds,
      onFatal: () => undefined,
    });
    const uploads: { status: string | null; close(): void }[] = [];
    try {
      // Ten connections: with a bound per thread, two bodies would be held as soon as both
      // threads got one (all ten on one thread: 1 in 512).
      for (let i = 0; i < 10; i++) uploads.push(await stalledUpload(threads.port, auth(secret, databaseId), 2 * 1024 * 1024, i === 0 ? 300 : 150));
      const statuses = uploads.map((u) => u.status);
      expect(statuses.filter((s) => s === null), 'one body held, waiting for its bytes').toHaveLength(1);
      expect(statuses.filter((s) => s === '503'), 'the others refused at once').toHaveLength(9);
    } finally {
      for (const u of uploads) u.close();
      await threads.close();
      await controlPlane.close();
    }
  });

  it('a thread that dies takes the whole gateway down: both threads close and flush their usage, the port is released, onFatal is told', async () => {
    const { startGatewayThreads } = await import('../dist/src/gateway/gateway-threads.js') as typeof import('../src/gateway/gateway-threads.js');
    const { openControlPlane: openBuilt } = await import('../dist/src/cloud/open.js') as typeof import('../src/cloud/open.js');
    const controlPlane = await openBuilt(storeLocation);
    let fatal: Error | null = null;
    const threads = await startGatewayThreads({
      threads: 2, controlPlane, storeLocation, redisUrl: redis.url, logLevel: 'warn', usageFlushMs: 3_600_000,
      onFatal: (err) => { fatal = err; },
    });
    try {
      expect(threads.threads).toBe(2);
      const reads = 40;
      const before = await Promise.all(Array.from({ length: reads }, () => fresh(threads.url, '/v2/query', 'POST', auth(crashSecret, crashId), count)));
      expect(before.every((a) => a.status === 200)).toBe(true);
      expect(await usageOf(crashWorkspaceId)).toEqual({ reads: 0, writes: 0 });

      threads.failThreadForTest(2);
      const err = await eventually(() => fatal, 'onFatal called');
      expect(err.message).toContain('gateway thread 2 failed with an uncaught exception');
      // Not half alive: thread 1 closed too, so no connection reaches a gateway short of a thread.
      expect(await tryConnect(threads.port)).toBe('ECONNREFUSED');
      // Both threads flushed what they metered (the failing one while it closed).
      expect(await usageOf(crashWorkspaceId)).toEqual({ reads, writes: 0 });
      expect(() => threads.failThreadForTest(3)).toThrow('no worker thread 3');
    } finally {
      await threads.close();
      await controlPlane.close();
    }
  });
});

describe('svc gateway --threads 2 on a PostgreSQL control-plane store', () => {
  let cluster: PostgresCluster | undefined;
  let pgGateway: SpawnedBackend | undefined;
  let location: string;
  let pgWorkspaceId: string;
  let pgDatabaseId: string;
  let pgSecret: string;

  beforeAll(async () => {
    cluster = await startPostgres();
    location = await cluster.createDatabase('gateway_threads');
    const store = await openControlPlane(location);
    try {
      pgWorkspaceId = (await store.createWorkspace('pg', 'Growth')).id;
      const db = await store.createDatabase({ workspaceId: pgWorkspaceId, name: 'main', readerCount: 0 }, 'http://gateway.invalid');
      pgDatabaseId = db.id;
      await store.setDatabaseBackends(db.id, { writerUrl: writer.url, readerUrls: [] });
      await store.setDatabaseStatus(db.id, 'Active');
      await store.setRateLimitOverride(db.id, { perSecond: 100_000, burst: 100_000 });
      pgSecret = (await store.createApiKey(db.id, 'app', 'read')).secret;
    } finally {
      await store.close();
    }
    pgGateway = await spawnCli(
      ['gateway', '--threads', '2', '--port', '0', '--store', location, '--redis-url', redis.url, '--access-log', '--usage-flush-ms', '100'],
      /^svc gateway listening on (http:\/\/\S+) \(.*, threads: 2\)$/m,
    );
  }, 120_000);

  afterAll(async () => {
    await pgGateway?.stop();
    await cluster?.stop();
  });

  it('each thread reads keys from and meters usage into PostgreSQL through its own pool: every request answered, counted once', async () => {
    const reads = 100;
    const answers = await Promise.all(Array.from({ length: reads }, () => fresh(pgGateway!.url, '/v2/query', 'POST', auth(pgSecret, pgDatabaseId), count)));
    for (const a of answers) expect(a).toEqual({ status: 200, text: '{"c":1}' });
    const lines = await eventually(() => { const l = queryLines(pgGateway!, pgDatabaseId); return l.length === reads ? l : null; }, 'every query logged');
    expect(new Set(lines.map((l) => l.thread))).toEqual(new Set([1, 2]));
    await eventually(async () => (await usageOf(pgWorkspaceId, location)).reads === reads, 'usage flushed');
    await new Promise((r) => setTimeout(r, 500));
    expect(await usageOf(pgWorkspaceId, location)).toEqual({ reads, writes: 0 });
    const exit = await pgGateway!.stop();
    expect(exit, pgGateway!.stderr()).toEqual({ code: 0, signal: null });
  });
});
