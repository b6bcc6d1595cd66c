// The cloud gateway (issue 14, docs/gateway.md) in front of real svcdb server processes:
// one writer and two readers following its disk directory, a second database on its own
// server, a real redis-server for the shared token buckets, and an in-memory control plane.
// Each backend runs with --log-requests, so a test can count which server answered.
import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway, type GatewayOptions } from '../src/gateway/gateway.js';
import { provesDown, provesNotSent } from '../src/gateway/backends.js';
import { limits } from '../src/limits.js';
import { MemoryControlPlane } from './helpers/memory-control-plane.js';
import { startRedis, type RedisServer } from './helpers/redis.js';
import { expectBucketBound } from './helpers/token-bucket.js';
import { spawnBackend as spawnServer, type SpawnedBackend as SpawnedServer } from './helpers/backend-server.js';
import { countNodesBody } from './helpers/requests.js';
import { eventually } from './helpers/eventually.js';
import { exchange } from './helpers/raw-http.js';

/** A request body of `count` chunks of `chunkBytes` spaces, sent chunked (no Content-Length). */
function chunkedSpaces(chunkBytes: number, count: number): ReadableStream<Uint8Array> {
  const chunk = new Uint8Array(chunkBytes).fill(0x20);
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent >= count) controller.close();
      else { sent++; controller.enqueue(chunk); }
    },
  });
}

const MiB = 1024 * 1024;
const FAULTS_TO_EJECT = limits.gatewayReaderFaultsToEject;
/** Rate limit high enough never to interfere with the functional tests. */
const UNLIMITED = { perSecond: 100_000, burst: 100_000 };

let redis: RedisServer;
let dataDir: string;
let writer: SpawnedServer;
let readers: SpawnedServer[] = [];
let otherWriter: SpawnedServer;
let cp: MemoryControlPlane;
let gateway: Gateway;
let keyA: string; // read-write key of database db_a
let readKeyA: string; // read-only key of database db_a
let keyB: string; // read-write key of database db_b
const gateways: Gateway[] = [];

async function gatewayWith(options: Partial<GatewayOptions> = {}): Promise<Gateway> {
  const g = await startGateway({
    controlPlane: cp, redisUrl: redis.url, healthIntervalMs: 200, logDestination: process.env['GATEWAY_TEST_LOG'] === '1' ? process.stderr : discard(), ...options,
  });
  gateways.push(g);
  return g;
}

function discard(): Writable {
  return new Writable({ write: (_chunk, _enc, done) => done() });
}

let labelCounter = 0;
const freshLabel = (): string => `Gw${process.pid}_${++labelCounter}`;

function addNode(label: string): string {
  return JSON.stringify({
    request_type: 'write',
    query: { write: { entries: [{ query: { name: 'n', root: { add_n: { label, properties: [] } } } }], returns: ['n'] } },
  });
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

async function post(g: Gateway | string, body: string | Uint8Array, headers: Record<string, string>): Promise<Answer> {
  const base = typeof g === 'string' ? g : g.url;
  const res = await fetch(`${base}/v2/query`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

const auth = (key: string, tenant: string, extra: Record<string, string> = {}): Record<string, string> =>
  ({ authorization: `Bearer ${key}`, 'x-svc-tenant-id': tenant, ...extra });

/** The value of one sample line (`name{labels} value`) of GET /metrics text, or 0 when absent. */
function metricValue(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

function errorOf(answer: Answer): { error: string; msg: string } {
  const parsed = JSON.parse(answer.text) as { error: string; msg: string };
  expect(Object.keys(parsed).sort()).toEqual(['error', 'msg']);
  return parsed;
}

/** Query requests a backend logged (--log-requests: one line per request). */
function served(server: SpawnedServer): number {
  return server.stderr().split('\n').filter((line) => line.includes('"msg":"query"')).length;
}

/**
 * Wait until every backend's log count stopped moving (async log writes have landed): the
 * same counts over three checks 150 ms apart (one was too short on a loaded machine).
 */
async function settledCounts(servers: SpawnedServer[]): Promise<number[]> {
  let before = servers.map(served);
  for (let still = 0; still < 3;) {
    await new Promise((r) => setTimeout(r, 150));
    const now = servers.map(served);
    still = now.every((n, i) => n === before[i]) ? still + 1 : 0;
    before = now;
  }
  return before;
}

const extraServers: SpawnedServer[] = [];

beforeAll(async () => {
  redis = await startRedis();
  dataDir = mkdtempSync(join(tmpdir(), 'svcdb-gateway-'));
  writer = await spawnServer(['--disk', dataDir, '--readers', '1', '--log-requests']);
  const readerArgs = ['--disk', dataDir, '--mode', 'reader', '--refresh-ms', '50', '--readers', '1', '--log-requests'];
  readers = await Promise.all([spawnServer(readerArgs), spawnServer(readerArgs)]);
  otherWriter = await spawnServer(['--readers', '1', '--log-requests']);

  cp = new MemoryControlPlane();
  cp.addWorkspace('ws_a', 'Growth');
  cp.addWorkspace('ws_b', 'Idea');
  cp.addDatabase({ id: 'db_a', workspaceId: 'ws_a', writerUrl: writer.url, readerUrls: readers.map((r) => r.url), rateLimit: UNLIMITED });
  cp.addDatabase({ id: 'db_b', workspaceId: 'ws_b', writerUrl: otherWriter.url, readerUrls: [], rateLimit: UNLIMITED });
  keyA = cp.addKey('db_a', 'read_write').secret;
  readKeyA = cp.addKey('db_a', 'read').secret;
  keyB = cp.addKey('db_b', 'read_write').secret;
  gateway = await gatewayWith();
}, 120_000);

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.close()));
  await Promise.all([writer, ...readers, otherWriter].filter((s) => s !== undefined).map((s) => s.stop()));
  await Promise.all(extraServers.map((s) => s.stop()));
  await redis?.dispose();
  if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
});

describe('routing', () => {
  it('sends writes to the writer and reads to the readers, spreading reads over both', async () => {
    const servers = [writer, ...readers];
    const before = await settledCounts(servers);
    const label = freshLabel();
    const written = await post(gateway, addNode(label), auth(keyA, 'db_a'));
    expect(written.status, written.text).toBe(200);
    let after = await settledCounts(servers);
    expect(after[0]! - before[0]!).toBe(1);
    expect(after[1]! + after[2]! - before[1]! - before[2]!).toBe(0);

    // Concurrent reads: least-outstanding choice with rotating ties uses both readers.
    const reads = await Promise.all(Array.from({ length: 20 }, () => post(gateway, countNodesBody(label), auth(keyA, 'db_a'))));
    for (const r of reads) expect(r.status, r.text).toBe(200);
    const mid = after;
    after = await settledCounts(servers);
    expect(after[0]! - mid[0]!, 'reads reached the writer').toBe(0);
    expect(after[1]! - mid[1]!, 'reader 1 got no read').toBeGreaterThan(0);
    expect(after[2]! - mid[2]!, 'reader 2 got no read').toBeGreaterThan(0);
    expect(after[1]! + after[2]! - mid[1]! - mid[2]!).toBe(20);
  });

  it('reads its own writes with x-svc-require-writer: true, and that read runs on the writer', async () => {
    for (let i = 0; i < 5; i++) {
      const label = freshLabel();
      const before = await settledCounts([writer, ...readers]);
      expect((await post(gateway, addNode(label), auth(keyA, 'db_a'))).status).toBe(200);
      const read = await post(gateway, countNodesBody(label), auth(keyA, 'db_a', { 'x-svc-require-writer': 'true' }));
      expect(read.status, read.text).toBe(200);
      expect(read.text).toBe('{"n":1}');
      const after = await settledCounts([writer, ...readers]);
      expect(after[0]! - before[0]!).toBe(2);
      expect(after[1]! + after[2]! - before[1]! - before[2]!).toBe(0);
    }
  });

  it('passes backend error statuses and bodies through unchanged', async () => {
    const body = JSON.stringify({ request_type: 'read', query: { read: { entries: [], returns: ['missing'] } } });
    const direct = await post(writer.url, body, {});
    const viaGateway = await post(gateway, body, auth(keyA, 'db_a', { 'x-svc-require-writer': 'true' }));
    expect(direct.status).toBeGreaterThanOrEqual(400);
    expect(viaGateway.status).toBe(direct.status);
    expect(viaGateway.text).toBe(direct.text);
  });

  it('routes around a reader that was killed, and answers 503 when no backend is left', async () => {
    const doomed = await spawnServer(['--disk', dataDir, '--mode', 'reader', '--refresh-ms', '50', '--readers', '1', '--log-requests']);
    extraServers.push(doomed);
    cp.addDatabase({ id: 'db_kill', workspaceId: 'ws_a', writerUrl: writer.url, readerUrls: [doomed.url, readers[0]!.url], rateLimit: UNLIMITED });
    const key = cp.addKey('db_kill', 'read').secret;
    const label = freshLabel();
    const warmUp = await Promise.all(Array.from({ length: 6 }, () => post(gateway, countNodesBody(label), auth(key, 'db_kill'))));
    for (const r of warmUp) expect(r.status).toBe(200);
    await eventually(() => served(doomed) > 0, 'the reader to be killed served some of the first reads');
    await doomed.stop('SIGKILL');
    // Every read still succeeds: a connection error moves it to the other reader at once.
    const before = await settledCounts([readers[0]!, writer]);
    for (let i = 0; i < 10; i++) {
      const r = await post(gateway, countNodesBody(label), auth(key, 'db_kill'));
      expect(r.status, r.text).toBe(200);
    }
    await eventually(() => served(readers[0]!) - before[0]! >= 10, 'the other reader logged the 10 reads');
    const after = await settledCounts([readers[0]!, writer]);
    expect(after[0]! - before[0]!).toBe(10);
    expect(after[1]! - before[1]!).toBe(0);

    // No backend at all: 503 database_unavailable.
    const closedPort = `http://127.0.0.1:${await freePort()}`;
    cp.addDatabase({ id: 'db_gone', workspaceId: 'ws_a', writerUrl: closedPort, readerUrls: [], rateLimit: UNLIMITED });
    const goneKey = cp.addKey('db_gone').secret;
    const gone = await post(gateway, countNodesBody(label), auth(goneKey, 'db_gone'));
    expect(gone.status).toBe(503);
    expect(errorOf(gone).error).toBe('database_unavailable');
  });

  it('takes only a connection never made for a request not sent: unreachable hosts can also end a connection the request went out on', () => {
    const failure = (code: string, nested: boolean): Error => Object.assign(new Error(code), nested ? { cause: { code } } : { code });
    for (const nested of [false, true]) {
      expect([provesDown(failure('ECONNREFUSED', nested)), provesNotSent(failure('ECONNREFUSED', nested))]).toEqual([true, true]);
      expect([provesDown(failure('UND_ERR_CONNECT_TIMEOUT', nested)), provesNotSent(failure('UND_ERR_CONNECT_TIMEOUT', nested))]).toEqual([true, true]);
      expect([provesDown(failure('EHOSTUNREACH', nested)), provesNotSent(failure('EHOSTUNREACH', nested))]).toEqual([true, false]);
      expect([provesDown(failure('ECONNRESET', nested)), provesNotSent(failure('ECONNRESET', nested))]).toEqual([false, false]);
    }
  });

  it('tells a write that was not sent (503, safe to retry) from one sent to a writer that failed before answering (502 write_outcome_unknown)', async () => {
    const refused = `http://127.0.0.1:${await freePort()}`;
    cp.addDatabase({ id: 'db_refused', workspaceId: 'ws_a', writerUrl: refused, readerUrls: [], rateLimit: UNLIMITED });
    const notSent = await post(gateway, addNode(freshLabel()), auth(cp.addKey('db_refused').secret, 'db_refused'));
    expect(notSent.status).toBe(503);
    expect(errorOf(notSent)).toMatchObject({ error: 'database_unavailable', msg: expect.stringContaining('the write was not sent') });
    // A writer that takes the request and dies before answering.
    const dying = createServer((req) => req.socket.destroy());
    await new Promise<void>((resolve) => dying.listen(0, '127.0.0.1', () => resolve()));
    try {
      const port = (dying.address() as { port: number }).port;
      cp.addDatabase({ id: 'db_dying', workspaceId: 'ws_a', writerUrl: `http://127.0.0.1:${port}`, readerUrls: [], rateLimit: UNLIMITED });
      const lost = await post(gateway, addNode(freshLabel()), auth(cp.addKey('db_dying').secret, 'db_dying'));
      expect(lost.status).toBe(502);
      expect(errorOf(lost)).toMatchObject({ error: 'write_outcome_unknown', msg: expect.stringContaining('may have been applied') });
    } finally {
      dying.close();
    }
  });
});

describe('ejection of a reader that answers server faults', () => {
  it('sends a faulted read on to another backend, ejects the reader after repeated faults, and tries it again when the ejection ends', async () => {
    const faulty = await faultyServer();
    const logged: string[] = [];
    const log = new Writable({ write: (chunk, _enc, done) => { logged.push(String(chunk)); done(); } });
    try {
      cp.addDatabase({ id: 'db_faulty', workspaceId: 'ws_a', writerUrl: writer.url, readerUrls: [faulty.url, readers[0]!.url], rateLimit: UNLIMITED });
      const key = cp.addKey('db_faulty', 'read').secret;
      const g = await gatewayWith({ readerEjectionMs: 1_500, logDestination: log });
      const label = freshLabel();
      const read = async (): Promise<void> => {
        const r = await post(g, countNodesBody(label), auth(key, 'db_faulty'));
        // The faulty reader's answers never reach the client: the read went on to the other reader.
        expect(r.status, r.text).toBe(200);
        expect(JSON.parse(r.text)).toEqual({ n: 0 });
      };
      // Reads alternate their first choice between the two idle readers, so the faulty one
      // meets every other read at least until it is ejected.
      for (let i = 0; i < 12; i++) await read();
      expect(faulty.received()).toBe(FAULTS_TO_EJECT);
      const ejections = (): number => logged.filter((line) => line.includes('ejected')).length;
      expect(ejections()).toBe(1);
      // Ejected: no read reaches it (its /readyz keeps passing, which does not end an ejection).
      for (let i = 0; i < 6; i++) await read();
      expect(faulty.received()).toBe(FAULTS_TO_EJECT);

      // When the ejection ends, reads reach it again; still faulty, it is ejected again.
      await eventually(async () => { await read(); return faulty.received() > FAULTS_TO_EJECT; }, 'the reader gets reads again after its ejection');
      await eventually(async () => { await read(); return ejections() === 2; }, 'the reader is ejected a second time');
      expect(faulty.received()).toBe(2 * FAULTS_TO_EJECT);
      const second = logged.filter((line) => line.includes('ejected')).map((line) => JSON.parse(line) as { ejectedMs: number });
      expect(second.map((e) => e.ejectedMs)).toEqual([1_500, 3_000]); // doubled

      // Query-content errors (500 invalid_query and the like) are not faults: healed, the
      // reader answers them and is not ejected for them.
      faulty.heal();
      await eventually(async () => { await read(); return faulty.received() > 2 * FAULTS_TO_EJECT; }, 'the healed reader gets reads again');
      faulty.answerQueryErrors();
      const start = faulty.received();
      for (let i = 0; i < 4 * FAULTS_TO_EJECT; i++) {
        const r = await post(g, countNodesBody(label), auth(key, 'db_faulty'));
        if (r.status !== 200) expect(errorOf(r).error).toBe('invalid_query');
      }
      expect(faulty.received() - start).toBeGreaterThanOrEqual(2 * FAULTS_TO_EJECT - 1);
      expect(ejections()).toBe(2);
      // GET /metrics counts them too.
      const metrics = await (await fetch(`${g.url}/metrics`)).text();
      expect(metricValue(metrics, 'svc_gateway_reader_ejections_total')).toBe(2);
      expect(metricValue(metrics, 'svc_gateway_backend_server_faults_total')).toBe(2 * FAULTS_TO_EJECT);
    } finally {
      faulty.close();
    }
  });

  it('passes the last fault through when every backend of a read answers one, and never ejects a writer', async () => {
    const faultyReader = await faultyServer('reader');
    const faultyWriter = await faultyServer('writer');
    try {
      cp.addDatabase({ id: 'db_allfaulty', workspaceId: 'ws_a', writerUrl: faultyWriter.url, readerUrls: [faultyReader.url], rateLimit: UNLIMITED });
      const key = cp.addKey('db_allfaulty', 'read').secret;
      const g = await gatewayWith({ readerEjectionMs: 60_000 });
      for (let i = 0; i < 3 * FAULTS_TO_EJECT; i++) {
        const r = await post(g, countNodesBody('Any'), auth(key, 'db_allfaulty'));
        // The reader first, then the writer, whose fault is the answer.
        expect(r.status).toBe(500);
        expect(errorOf(r)).toEqual({ error: 'internal_error', msg: 'injected fault (writer)' });
      }
      // The only reader is ejected after its faults; the writer keeps every read.
      expect(faultyReader.received()).toBe(FAULTS_TO_EJECT);
      expect(faultyWriter.received()).toBe(3 * FAULTS_TO_EJECT);
    } finally {
      faultyReader.close();
      faultyWriter.close();
    }
  });
});

describe('TLS (--tls-cert, --tls-key)', () => {
  // test/fixtures/tls: a self-signed certificate for localhost and 127.0.0.1, valid 100 years,
  // with its key, and an unrelated key (openssl req -x509 -newkey rsa:2048 -nodes -days 36500
  // -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1; openssl genrsa).
  const fixture = (name: string): string => fileURLToPath(new URL(`./fixtures/tls/${name}`, import.meta.url));
  const tls = { certFile: fixture('gateway-cert.pem'), keyFile: fixture('gateway-key.pem') };
  const ca = readFileSync(tls.certFile);

  /** POST over HTTPS trusting only `trusted`. */
  function httpsPost(url: string, body: string, headers: Record<string, string>, trusted: Buffer): Promise<{ status: number; text: string }> {
    return new Promise((resolve, reject) => {
      const req = httpsRequest(`${url}/v2/query`, { method: 'POST', ca: trusted, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => { text += d; });
        res.on('end', () => resolve({ status: res.statusCode!, text }));
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  it('serves queries over HTTPS with the configured certificate; plain HTTP gets no answer there', async () => {
    const g = await gatewayWith({ tls });
    expect(g.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const label = freshLabel();
    const answer = await httpsPost(g.url, countNodesBody(label), auth(keyA, 'db_a'), ca);
    expect(answer.status, answer.text).toBe(200);
    expect(JSON.parse(answer.text)).toEqual({ n: 0 });
    // The client checked the certificate against the one configured: another CA is refused.
    const otherCa = readFileSync(fixture('other-key.pem')); // not a certificate at all: trusts nothing
    await expect(httpsPost(g.url, countNodesBody(label), auth(keyA, 'db_a'), otherCa)).rejects.toThrow();
    await expect(fetch(`${g.url.replace('https:', 'http:')}/health`)).rejects.toThrow();
    const metadata = await new Promise<string>((resolve, reject) => {
      httpsRequest(`${g.url}/v2/metadata`, { ca, headers: auth(keyA, 'db_a') }, (res) => {
        let text = '';
        res.on('data', (d: Buffer) => { text += d.toString(); });
        res.on('end', () => resolve(text));
      }).on('error', reject).end();
    });
    expect(JSON.parse(metadata)).toMatchObject({ gateway_url: g.url });
  });

  it('refuses to start with a key of another certificate or a file it cannot read, saying which', async () => {
    const base = { controlPlane: cp, redisUrl: redis.url, logDestination: discard() };
    await expect(startGateway({ ...base, tls: { ...tls, keyFile: fixture('other-key.pem') } }))
      .rejects.toThrow(/the TLS certificate .*gateway-cert\.pem and key .*other-key\.pem are not usable: .*key values mismatch/);
    await expect(startGateway({ ...base, tls: { ...tls, certFile: '/nonexistent/cert.pem' } }))
      .rejects.toThrow(/cannot read the TLS certificate \/nonexistent\/cert\.pem: ENOENT/);
  });
});

describe('warming', () => {
  it('runs a warm read on the writer and every reader and answers 204; with require-writer only on the writer', async () => {
    const servers = [writer, ...readers];
    await eventually(async () => (await Promise.all(readers.map(async (r) => (await fetch(`${r.url}/readyz`)).status))).every((s) => s === 200), 'readers are ready');
    const before = await settledCounts(servers);
    const warm = await post(gateway, countNodesBody('Anything'), auth(keyA, 'db_a', { 'x-svc-warm': 'true' }));
    expect(warm.status, warm.text).toBe(204);
    expect(warm.text).toBe('');
    let after = await settledCounts(servers);
    expect(after.map((n, i) => n - before[i]!)).toEqual([1, 1, 1]);

    const writerOnly = await post(gateway, countNodesBody('Anything'), auth(readKeyA, 'db_a', { 'x-svc-warm': '1', 'x-svc-require-writer': 'true' }));
    expect(writerOnly.status, writerOnly.text).toBe(204);
    const mid = after;
    after = await settledCounts(servers);
    expect(after.map((n, i) => n - mid[i]!)).toEqual([1, 0, 0]);
  });

  it('answers 204 at the first success and still cancels a stalled target at the deadline', async () => {
    const stalled = await stallingServer();
    try {
      cp.addDatabase({ id: 'db_warmslow', workspaceId: 'ws_a', writerUrl: writer.url, readerUrls: [stalled.url], rateLimit: UNLIMITED });
      const key = cp.addKey('db_warmslow', 'read').secret;
      const g = await gatewayWith({ queryTimeoutMs: 3_000 });
      await eventually(async () => {
        await post(g, countNodesBody('Warm'), auth(key, 'db_warmslow', { 'x-svc-warm': 'true' }));
        return stalled.received() > 0;
      }, 'the stalled reader got a warm read');
      const started = performance.now();
      const received = stalled.received();
      const warm = await post(g, countNodesBody('Warm'), auth(key, 'db_warmslow', { 'x-svc-warm': 'true' }));
      expect(warm.status, warm.text).toBe(204);
      expect(performance.now() - started, 'answered at the first success, not at the 3 s deadline').toBeLessThan(1_500);
      await eventually(() => stalled.received() > received, 'the stalled reader got the warm read');
      // The gateway hung up on the stalled reader at the deadline; it did not wait for ever.
      await eventually(() => stalled.cancelled() >= stalled.received(), 'the stalled warm reads are cancelled', { timeoutMs: 8_000 });
    } finally {
      stalled.close();
    }
  });

  it('refuses a warm write with 400 before any backend runs it', async () => {
    const before = await settledCounts([writer]);
    const answer = await post(gateway, addNode(freshLabel()), auth(keyA, 'db_a', { 'x-svc-warm': 'true' }));
    expect(answer.status).toBe(400);
    expect(errorOf(answer).error).toBe('invalid_request_option');
    expect(await settledCounts([writer])).toEqual(before);
  });

  it('refuses a read with x-svc-await-durable: true like the backend does, before any backend runs it', async () => {
    const servers = [writer, ...readers];
    const before = await settledCounts(servers);
    const body = countNodesBody('Durable');
    const direct = await post(writer.url, body, { 'x-svc-await-durable': 'true' });
    const answer = await post(gateway, body, auth(keyA, 'db_a', { 'x-svc-await-durable': 'true' }));
    expect(answer.status).toBe(direct.status);
    expect(errorOf(answer)).toEqual(errorOf(direct));
    const after = await settledCounts(servers);
    expect(after.map((n, i) => n - before[i]!), 'only the direct request reached a backend').toEqual([1, 0, 0]);
  });
});

describe('gateway error codes', () => {
  it('answers every authentication and header failure with its status and code', async () => {
    const read = countNodesBody('X');
    const cases: Array<[string, Record<string, string>, number, string]> = [
      ['no Authorization', { 'x-svc-tenant-id': 'db_a' }, 400, 'invalid_auth_header'],
      ['empty Authorization', { authorization: '', 'x-svc-tenant-id': 'db_a' }, 400, 'invalid_auth_header'],
      ['Basic scheme', { authorization: `Basic ${keyA}`, 'x-svc-tenant-id': 'db_a' }, 400, 'invalid_auth_header'],
      ['Bearer without key', { authorization: 'Bearer', 'x-svc-tenant-id': 'db_a' }, 400, 'invalid_auth_header'],
      ['key with bad characters', { authorization: 'Bearer a"b', 'x-svc-tenant-id': 'db_a' }, 400, 'invalid_auth_header'],
      ['no tenant', { authorization: `Bearer ${keyA}` }, 400, 'invalid_tenant_id'],
      ['empty tenant', { authorization: `Bearer ${keyA}`, 'x-svc-tenant-id': '' }, 400, 'invalid_tenant_id'],
      ['two tenants in one header', { authorization: `Bearer ${keyA}`, 'x-svc-tenant-id': 'db_a, db_b' }, 400, 'invalid_tenant_id'],
      ['unknown key', auth('svc_not_a_real_key', 'db_a'), 401, 'invalid_api_key'],
      ['key of another database', auth(keyB, 'db_a'), 403, 'permission_denied'],
      ['bad execution header', auth(keyA, 'db_a', { 'x-svc-warm': 'maybe' }), 400, 'invalid_request_option'],
    ];
    for (const [what, headers, status, code] of cases) {
      const answer = await post(gateway, read, headers);
      expect(answer.status, what).toBe(status);
      expect(errorOf(answer).error, what).toBe(code);
    }
    // lowercase scheme is the same scheme (RFC 9110)
    expect((await post(gateway, read, { authorization: `bearer ${keyA}`, 'x-svc-tenant-id': 'db_a' })).status).toBe(200);
  });

  it('answers 403 to a write with a read key, and 400 invalid_query_json to bodies the outer decode refuses', async () => {
    const denied = await post(gateway, addNode(freshLabel()), auth(readKeyA, 'db_a'));
    expect(denied.status).toBe(403);
    expect(errorOf(denied).error).toBe('permission_denied');
    // A write dressed as a read (JSON.parse keeps the last duplicate key, the server refuses
    // duplicates) never runs: the writer refuses the body, and nothing was added.
    const label = freshLabel();
    const disguised = addNode(label).replace('{"request_type":"write"', '{"request_type":"write","request_type":"read"');
    expect(disguised).toContain('"request_type":"read"');
    const sneaked = await post(gateway, disguised, auth(readKeyA, 'db_a', { 'x-svc-require-writer': 'true' }));
    expect(sneaked.status).toBe(400);
    expect((await post(writer.url, countNodesBody(label), {})).text).toBe('{"n":0}');
    // The outer decode is the backend's JSON parser: a duplicated key is refused there, before
    // the key's permission is judged (JSON.parse kept the last: 403) or a token is taken.
    for (const duplicated of [disguised, countNodesBody(label).replace('{"request_type":"read"', '{"request_type":"read","request_type":"write"')]) {
      const answer = await post(gateway, duplicated, auth(readKeyA, 'db_a'));
      expect(answer.status, duplicated).toBe(400);
      expect(errorOf(answer)).toMatchObject({ error: 'invalid_query_json', msg: expect.stringContaining('duplicate key "request_type"') });
    }
    // A leading byte order mark is refused as the backend refuses it (docs/protocol-choices.md).
    for (const body of ['', 'not json', '[]', '{"request_type":"maybe"}', '{"query":{}}', '\xff', `\ufeff${countNodesBody(label)}`]) {
      const answer = await post(gateway, body, auth(keyA, 'db_a'));
      expect(answer.status, body).toBe(400);
      expect(errorOf(answer).error, body).toBe('invalid_query_json');
    }
  });

  it('answers 413 payload_too_large over 2 MiB without parsing, announced or streamed', async () => {
    const big = new Uint8Array(2 * MiB + 1).fill(0x20); // whitespace: not even valid JSON
    const announced = await post(gateway, big, auth(keyA, 'db_a'));
    expect(announced.status).toBe(413);
    expect(errorOf(announced).error).toBe('payload_too_large');
    // exactly 2 MiB is not too large: it is parsed (and refused as JSON)
    const limit = await post(gateway, new Uint8Array(2 * MiB).fill(0x20), auth(keyA, 'db_a'));
    expect(errorOf(limit).error).toBe('invalid_query_json');
    // chunked, no Content-Length
    const res = await fetch(`${gateway.url}/v2/query`, { method: 'POST', body: chunkedSpaces(256 * 1024, 12), headers: auth(keyA, 'db_a'), duplex: 'half' } as RequestInit);
    expect(res.status).toBe(413);
    expect((await res.json() as { error: string }).error).toBe('payload_too_large');
  });

  it('answers 402 tenant_disabled when the workspace allowance is used up, per kind', async () => {
    cp.addWorkspace('ws_broke');
    cp.addDatabase({ id: 'db_broke', workspaceId: 'ws_broke', writerUrl: writer.url, readerUrls: [], rateLimit: UNLIMITED });
    const key = cp.addKey('db_broke').secret;
    cp.allowances.set('ws_broke', { readsAllowed: true, writesAllowed: false });
    const g = await gatewayWith({ cacheTtlMs: 50 });
    expect((await post(g, countNodesBody('X'), auth(key, 'db_broke'))).status).toBe(200);
    const write = await post(g, addNode(freshLabel()), auth(key, 'db_broke'));
    expect(write.status).toBe(402);
    expect(errorOf(write).error).toBe('tenant_disabled');
    cp.allowances.set('ws_broke', { readsAllowed: false, writesAllowed: false });
    await new Promise((r) => setTimeout(r, 100));
    const read = await post(g, countNodesBody('X'), auth(key, 'db_broke'));
    expect(read.status).toBe(402);
    expect(errorOf(read).error).toBe('tenant_disabled');
  });

  it('answers 408 query_timeout at the gateway deadline when a backend stalls', async () => {
    const stalled = await stallingServer();
    try {
      cp.addDatabase({ id: 'db_slow', workspaceId: 'ws_a', writerUrl: stalled.url, readerUrls: [], rateLimit: UNLIMITED });
      const key = cp.addKey('db_slow').secret;
      const g = await gatewayWith({ queryTimeoutMs: 300 });
      const started = performance.now();
      const answer = await post(g, countNodesBody('X'), auth(key, 'db_slow'));
      const elapsed = performance.now() - started;
      expect(answer.status).toBe(408);
      expect(errorOf(answer).error).toBe('query_timeout');
      expect(elapsed).toBeGreaterThanOrEqual(290);
      expect(elapsed).toBeLessThan(5000);
    } finally {
      stalled.close();
    }
  });

  it('answers 503 database_unavailable while a database is provisioning, 503 control_plane_unavailable when the store is down', async () => {
    cp.addDatabase({ id: 'db_new', workspaceId: 'ws_a', status: 'Provisioning', writerUrl: null, readerUrls: [], rateLimit: UNLIMITED });
    const key = cp.addKey('db_new').secret;
    const provisioning = await post(gateway, countNodesBody('X'), auth(key, 'db_new'));
    expect(provisioning.status).toBe(503);
    expect(errorOf(provisioning).error).toBe('database_unavailable');

    const freshKey = cp.addKey('db_a').secret; // never looked up: not in any cache
    cp.failure = new Error('store is down');
    try {
      const down = await post(gateway, countNodesBody('X'), auth(freshKey, 'db_a'));
      expect(down.status).toBe(503);
      expect(errorOf(down).error).toBe('control_plane_unavailable');
    } finally {
      cp.failure = null;
    }
  });

  it('keeps serving keys, routes and allowances the store confirmed while it is down, for the stale bound only', async () => {
    const logged: string[] = [];
    const log = new Writable({ write: (chunk, _enc, done) => { logged.push(String(chunk)); done(); } });
    const g = await gatewayWith({ cacheTtlMs: 200, controlPlaneStaleMs: 5_000, logDestination: log });
    const seen = cp.addKey('db_a', 'read').secret;
    const unseen = cp.addKey('db_a', 'read').secret;
    const body = countNodesBody('Stale');
    expect((await post(g, body, auth(seen, 'db_a'))).status).toBe(200);
    const confirmed = Date.now();
    cp.failure = new Error('store is down');
    try {
      await new Promise((r) => setTimeout(r, 300)); // past the TTL
      const before = g.controlPlaneLookups();
      const startedAt = Date.now();
      // The key seen before works on; each entry is asked for again at most once per TTL.
      for (let i = 0; i < 10; i++) {
        const r = await post(g, body, auth(seen, 'db_a'));
        expect(r.status, r.text).toBe(200);
      }
      const after = g.controlPlaneLookups();
      const ttls = 1 + Math.ceil((Date.now() - startedAt) / 200);
      expect(after.grants - before.grants).toBeLessThanOrEqual(ttls);
      expect(after.routes - before.routes).toBeLessThanOrEqual(ttls);
      expect(logged.filter((l) => l.includes('serving the API key the store last confirmed'))).toHaveLength(1);
      // A key never seen gets no stale grace.
      const fresh = await post(g, body, auth(unseen, 'db_a'));
      expect(fresh.status).toBe(503);
      expect(errorOf(fresh).error).toBe('control_plane_unavailable');
      // Past the stale bound (counted from the store's last answer): 503 as well.
      await new Promise((r) => setTimeout(r, Math.max(0, confirmed + 5_200 - Date.now())));
      const expired = await post(g, body, auth(seen, 'db_a'));
      expect(expired.status).toBe(503);
      expect(errorOf(expired).error).toBe('control_plane_unavailable');
      const metrics = await (await fetch(`${g.url}/metrics`)).text();
      expect(metricValue(metrics, 'svc_gateway_control_plane_stale_answers_total')).toBeGreaterThanOrEqual(10);
      expect(metricValue(metrics, 'svc_gateway_errors_total{code="control_plane_unavailable"}')).toBe(2);
    } finally {
      cp.failure = null;
    }
    expect((await post(g, body, auth(seen, 'db_a'))).status).toBe(200);
  });

  it('serves a stale entry at once while a refresh of a failing store hangs', async () => {
    const slow = new SlowControlPlane(0);
    slow.addWorkspace('ws_a', 'Growth');
    slow.addDatabase({ id: 'db_a', workspaceId: 'ws_a', writerUrl: writer.url, readerUrls: [], rateLimit: UNLIMITED });
    const { secret } = slow.addKey('db_a', 'read');
    const g = await gatewayWith({ controlPlane: slow, cacheTtlMs: 100, controlPlaneStaleMs: 60_000 });
    const body = countNodesBody('StaleSlow');
    expect((await post(g, body, auth(secret, 'db_a'))).status).toBe(200);
    slow.delayMs = 5_000; // longer than the lookup timeout (2 s): the store hangs
    await new Promise((r) => setTimeout(r, 150));
    // The first request after the TTL waits for the refresh, which times out: stale value.
    const first = await post(g, body, auth(secret, 'db_a'));
    expect(first.status, first.text).toBe(200);
    // From then on, requests take the stale value at once, even while the next refresh hangs.
    await new Promise((r) => setTimeout(r, 150));
    const started = Date.now();
    for (let i = 0; i < 5; i++) expect((await post(g, body, auth(secret, 'db_a'))).status).toBe(200);
    expect(Date.now() - started).toBeLessThan(1_500);
  });

  it('keeps a failing store\'s error text out of the answer (the log has it), and answers a gateway bug 500 internal_error', async () => {
    let output = '';
    const capture = new Writable({ write: (chunk: Buffer, _enc, done) => { output += chunk.toString(); done(); } });
    const g = await gatewayWith({ logDestination: capture });
    const freshKey = cp.addKey('db_a').secret;
    cp.failure = new Error('connect ECONNREFUSED 10.1.2.3:5432 user=cp_admin');
    try {
      const down = await post(g, countNodesBody('X'), auth(freshKey, 'db_a'));
      expect(down.status).toBe(503);
      expect(errorOf(down)).toEqual({ error: 'control_plane_unavailable', msg: 'the API key could not be looked up; retry later' });
    } finally {
      cp.failure = null;
    }
    await eventually(() => output.includes('cp_admin'), 'the cause was logged');
    // A route the rate limiter cannot use (no rate at all) trips an assertion: a bug, not an outage.
    cp.addDatabase({ id: 'db_norate', workspaceId: 'ws_a', writerUrl: writer.url, readerUrls: [], rateLimit: { perSecond: 0, burst: 0 } });
    const key = cp.addKey('db_norate').secret;
    const bug = await post(g, countNodesBody('X'), auth(key, 'db_norate'));
    expect(bug.status).toBe(500);
    expect(errorOf(bug)).toEqual({ error: 'internal_error', msg: 'internal gateway error; see the gateway log' });
  });

  it('answers 404 on unknown paths and 405 on a wrong method', async () => {
    expect((await fetch(`${gateway.url}/v1/query`)).status).toBe(404);
    const get = await fetch(`${gateway.url}/v2/query`);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
  });
});

describe('isolation', () => {
  it('a key of one database never reaches another, whatever the headers say', async () => {
    const label = freshLabel();
    const keys: Record<string, string> = { keyA, readKeyA, keyB, unknown: 'svc_unknown_key_0123456789' };
    const tenants = ['db_a', 'db_b', 'db_none', 'DB_A', 'db_a ', ' db_b'];
    const bodies = { read: countNodesBody(label), write: addNode(label) };
    const before = await settledCounts([writer, ...readers, otherWriter]);
    let reachedA = 0;
    let reachedB = 0;
    const writes = { db_a: 0, db_b: 0 };
    for (const [keyName, key] of Object.entries(keys)) {
      for (const tenant of tenants) {
        for (const [kind, body] of Object.entries(bodies)) {
          for (const extra of [{}, { 'x-svc-require-writer': 'true' }, { 'x-svc-warm': 'true' }] as Record<string, string>[]) {
            const answer = await post(gateway, body, { authorization: `Bearer ${key}`, 'x-svc-tenant-id': tenant, ...extra });
            const trimmed = tenant.trim();
            const owner: 'db_a' | 'db_b' | null = key === keyB ? 'db_b' : key === keyA || key === readKeyA ? 'db_a' : null;
            const allowed = owner !== null && owner === trimmed && !(kind === 'write' && keyName === 'readKeyA') &&
              !(kind === 'write' && 'x-svc-warm' in extra);
            const what = `${keyName} -> ${JSON.stringify(tenant)} ${kind} ${JSON.stringify(extra)}`;
            if (allowed) {
              expect([200, 204], what).toContain(answer.status);
              if (owner === 'db_a') reachedA += 'x-svc-warm' in extra && !('x-svc-require-writer' in extra) ? 3 : 1;
              else reachedB += 1;
              if (kind === 'write') writes[owner]++;
            } else {
              expect(answer.status, what).toBeGreaterThanOrEqual(400);
              expect(answer.status, what).toBeLessThan(500);
            }
          }
        }
      }
    }
    const after = await settledCounts([writer, ...readers, otherWriter]);
    const deltaA = after[0]! + after[1]! + after[2]! - before[0]! - before[1]! - before[2]!;
    expect(deltaA, 'requests that reached database A').toBe(reachedA);
    expect(after[3]! - before[3]!, 'requests that reached database B').toBe(reachedB);
    // Repeated headers (fetch merges them, so over a raw socket): the first one counts, and
    // the key must match it.
    const twice = (key: string, first: string, second: string): Promise<number> => rawStatus(gateway.port,
      `POST /v2/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nx-svc-tenant-id: ${first}\r\nx-svc-tenant-id: ${second}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(bodies.read)}\r\nConnection: close\r\n\r\n${bodies.read}`);
    expect(await twice(keyB, 'db_a', 'db_b')).toBe(403);
    expect(await twice(keyA, 'db_b', 'db_a')).toBe(403);
    expect(await twice(keyB, 'db_b', 'db_a')).toBe(200);
    reachedB += 1;
    // B's data never saw A's label: its writes went to B's own server only.
    const onB = await post(otherWriter.url, countNodesBody(label), {});
    const onA = await post(writer.url, countNodesBody(label), {});
    expect(writes.db_a).toBeGreaterThan(0);
    expect(writes.db_b).toBeGreaterThan(0);
    expect(JSON.parse(onB.text)).toEqual({ n: writes.db_b });
    expect(JSON.parse(onA.text)).toEqual({ n: writes.db_a });
  });
});

describe('isolation: backends bound to their database (svc serve --database-id)', () => {
  it('a stale route to another database\'s server never returns that database\'s data: 503, or another eligible backend answers', async () => {
    const boundA = await spawnServer(['--readers', '1', '--log-requests', '--database-id', 'db_bound_a']);
    extraServers.push(boundA);
    const boundB = await spawnServer(['--readers', '1', '--log-requests', '--database-id', 'db_bound_b']);
    extraServers.push(boundB);
    cp.addDatabase({ id: 'db_bound_a', workspaceId: 'ws_a', writerUrl: boundA.url, readerUrls: [], rateLimit: UNLIMITED });
    // B's route is stale: its writer's address is A's server.
    cp.addDatabase({ id: 'db_bound_b', workspaceId: 'ws_b', writerUrl: boundA.url, readerUrls: [], rateLimit: UNLIMITED });
    const keyBoundA = cp.addKey('db_bound_a', 'read_write').secret;
    const keyBoundB = cp.addKey('db_bound_b', 'read_write').secret;
    let logText = '';
    const g = await gatewayWith({ cacheTtlMs: 60_000, logDestination: new Writable({ write: (chunk: Buffer, _enc, done) => { logText += chunk.toString('utf8'); done(); } }) });

    const label = freshLabel();
    expect((await post(g, addNode(label), auth(keyBoundA, 'db_bound_a'))).status).toBe(200);
    const countA = await post(g, countNodesBody(label), auth(keyBoundA, 'db_bound_a'));
    expect(JSON.parse(countA.text)).toEqual({ n: 1 });

    // Every kind of request for B: 503 database_unavailable, never A's answer, nothing run on A.
    const routeLookups = g.controlPlaneLookups().routes;
    for (const [body, extra] of [
      [countNodesBody(label), {}], [countNodesBody(label), { 'x-svc-require-writer': 'true' }], [countNodesBody(label), { 'x-svc-warm': 'true' }], [addNode(label), {}],
    ] as [string, Record<string, string>][]) {
      const answer = await post(g, body, auth(keyBoundB, 'db_bound_b', extra));
      expect(answer.status, `${JSON.stringify(extra)} ${answer.text}`).toBe(503);
      expect(errorOf(answer).error).toBe('database_unavailable');
      expect(answer.text).not.toContain('misdirected');
    }
    // The stale route is not kept for the TTL (60 s here): each request above looked it up again.
    expect(g.controlPlaneLookups().routes - routeLookups).toBe(4);
    expect(JSON.parse((await post(boundA.url, countNodesBody(label), {})).text), 'the write for B did not run on A').toEqual({ n: 1 });
    // A's server still serves A at once: it was not marked failing for B's stale route.
    const stillA = await post(g, countNodesBody(label), auth(keyBoundA, 'db_bound_a'));
    expect(stillA.status, stillA.text).toBe(200);
    expect(JSON.parse(stillA.text)).toEqual({ n: 1 });

    // With another eligible backend, a read goes there: the stale reader (A's server) is
    // skipped and B's own writer answers with B's data.
    cp.addDatabase({ id: 'db_bound_b', workspaceId: 'ws_b', writerUrl: boundB.url, readerUrls: [boundA.url], rateLimit: UNLIMITED });
    for (let i = 0; i < 5; i++) {
      const answer = await post(g, countNodesBody(label), auth(keyBoundB, 'db_bound_b'));
      expect(answer.status, answer.text).toBe(200);
      expect(JSON.parse(answer.text), 'B\'s data, not A\'s').toEqual({ n: 0 });
    }
    // The route fixed in the control plane takes effect on the next request, not after the TTL.
    cp.addDatabase({ id: 'db_bound_b', workspaceId: 'ws_b', writerUrl: boundB.url, readerUrls: [], rateLimit: UNLIMITED });
    expect((await post(g, addNode(label), auth(keyBoundB, 'db_bound_b'))).status).toBe(200);
    expect(JSON.parse((await post(g, countNodesBody(label), auth(keyBoundB, 'db_bound_b'))).text)).toEqual({ n: 1 });
    expect(JSON.parse((await post(boundA.url, countNodesBody(label), {})).text)).toEqual({ n: 1 });

    // Logged (throttled per backend), naming the database and the server, never the key.
    await eventually(() => logText.includes('misdirected_request'), 'the gateway logged the misdirected answer');
    const line = logText.split('\n').find((l) => l.includes('misdirected_request'))!;
    expect(JSON.parse(line)).toMatchObject({ level: 'warn', databaseId: 'db_bound_b', backend: boundA.url });
    expect(logText).not.toContain(keyBoundB);
  });
});

describe('rate limits', () => {
  it('shares one bucket between two gateways: admitted = burst + rate x time within one token, 429 with Retry-After', async () => {
    const rate = { perSecond: 10, burst: 5 };
    cp.addDatabase({ id: 'db_rl', workspaceId: 'ws_a', writerUrl: writer.url, readerUrls: readers.map((r) => r.url), rateLimit: rate });
    const key = cp.addKey('db_rl', 'read').secret;
    const [g1, g2] = [gateway, await gatewayWith()];
    const body = countNodesBody('Rl');

    let admitted = 0;
    let limited = 0;
    const retryAfters = new Set<string>();
    let firstAnswerMs = 0;
    const windowMs = 2500;
    const startMs = performance.now();
    let lastSendMs = startMs;
    const client = async (g: Gateway): Promise<void> => {
      while (performance.now() - startMs < windowMs) {
        lastSendMs = performance.now();
        const answer = await post(g, body, auth(key, 'db_rl'));
        if (firstAnswerMs === 0) firstAnswerMs = performance.now();
        if (answer.status === 200) admitted++;
        else {
          expect(answer.status, answer.text).toBe(429);
          expect(errorOf(answer).error).toBe('rate_limited');
          expect(errorOf(answer).msg).toMatch(/rate limit exceeded/);
          retryAfters.add(answer.headers.get('retry-after') ?? 'missing');
          for (const name of answer.headers.keys()) expect(name).not.toMatch(/ratelimit/i);
          limited++;
        }
      }
    };
    await Promise.all([client(g1), client(g1), client(g2), client(g2)]);
    const endMs = performance.now();
    // Redis saw its first decision after startMs and its last before endMs (upper bound), and
    // its first before firstAnswerMs and its last after lastSendMs (lower bound).
    const outer = (endMs - startMs) / 1000;
    const inner = (lastSendMs - firstAnswerMs) / 1000;
    expectBucketBound(admitted, rate, outer, inner);
    expect(limited).toBeGreaterThan(0);
    // Retry-After is whole seconds; at 10/s a token is never more than 1 s away.
    expect([...retryAfters]).toEqual(['1']);
  });

  it('spends no token on requests refused at authentication, header validation, size or outer decode', async () => {
    // 0.001 tokens/s: nothing refills during the test, so the burst is all there is.
    cp.addDatabase({ id: 'db_tok', workspaceId: 'ws_a', writerUrl: writer.url, readerUrls: [], rateLimit: { perSecond: 0.001, burst: 4 } });
    const key = cp.addKey('db_tok', 'read').secret;
    const otherKey = cp.addKey('db_a').secret;
    const read = countNodesBody('Tok');
    const refusals: Array<[string | Uint8Array, Record<string, string>]> = [
      [read, { 'x-svc-tenant-id': 'db_tok' }],
      [read, { authorization: 'Basic x', 'x-svc-tenant-id': 'db_tok' }],
      [read, { authorization: `Bearer ${key}` }],
      [read, auth('svc_unknown_key', 'db_tok')],
      [read, auth(otherKey, 'db_tok')],
      [read, auth(key, 'db_tok', { 'x-svc-require-writer': 'yes' })],
      [addNode('Tok'), auth(key, 'db_tok')], // read key, write
      ['{', auth(key, 'db_tok')],
      ['{"request_type":"both"}', auth(key, 'db_tok')],
      [new Uint8Array(2 * MiB + 10), auth(key, 'db_tok')],
      [read, auth(key, 'db_tok', { 'x-svc-await-durable': 'true' })], // the backend refuses it as a header error
    ];
    for (let round = 0; round < 3; round++) {
      for (const [body, headers] of refusals) {
        const answer = await post(gateway, body, headers);
        expect(answer.status).toBeGreaterThanOrEqual(400);
        expect(answer.status).not.toBe(429);
      }
    }
    for (let i = 0; i < 3; i++) expect((await post(gateway, read, auth(key, 'db_tok'))).status).toBe(200);
    // a planning failure happens after admission: it costs the fourth token
    const bad = JSON.stringify({ request_type: 'read', query: { read: { entries: [], returns: ['missing'] } } });
    const planned = await post(gateway, bad, auth(key, 'db_tok'));
    expect(planned.status).toBe(400);
    expect(errorOf(planned).error).not.toBe('invalid_query_json');
    const empty = await post(gateway, read, auth(key, 'db_tok'));
    expect(empty.status).toBe(429);
    // an empty bucket at 0.001/s: the next token is ~1000 s away, said in whole seconds
    expect(Number(empty.headers.get('retry-after'))).toBeGreaterThan(900);
  });
});

describe('caching, metering, metadata, health', () => {
  it('answers repeated requests without asking the control plane, and a revoked key stops within the TTL', async () => {
    const cached = await gatewayWith({ cacheTtlMs: 60_000 });
    const brief = await gatewayWith({ cacheTtlMs: 300 });
    const { secret } = cp.addKey('db_a', 'read');
    const body = countNodesBody('Cache');
    expect((await post(cached, body, auth(secret, 'db_a'))).status).toBe(200);
    expect((await post(brief, body, auth(secret, 'db_a'))).status).toBe(200);
    const lookups = cached.controlPlaneLookups();
    expect(lookups).toEqual({ grants: 1, routes: 1, allowances: 1 });
    for (let i = 0; i < 30; i++) expect((await post(cached, body, auth(secret, 'db_a'))).status).toBe(200);
    expect(cached.controlPlaneLookups(), 'the hot path asked the control plane').toEqual(lookups);
    cp.revoke(secret);
    await new Promise((r) => setTimeout(r, 400));
    const revoked = await post(brief, body, auth(secret, 'db_a'));
    expect(revoked.status).toBe(401);
    expect(errorOf(revoked).error).toBe('invalid_api_key');
    // The price of caching, as documented: within its TTL a gateway still admits the key.
    expect((await post(cached, body, auth(secret, 'db_a'))).status).toBe(200);
  });

  it('meters admitted reads and writes per workspace and flushes them to the control plane', async () => {
    cp.addWorkspace('ws_meter');
    cp.addDatabase({ id: 'db_m1', workspaceId: 'ws_meter', writerUrl: writer.url, readerUrls: [], rateLimit: UNLIMITED });
    cp.addDatabase({ id: 'db_m2', workspaceId: 'ws_meter', writerUrl: writer.url, readerUrls: [], rateLimit: UNLIMITED });
    const k1 = cp.addKey('db_m1').secret;
    const k2 = cp.addKey('db_m2').secret;
    const g = await gatewayWith({ usageFlushMs: 60_000 });
    for (let i = 0; i < 3; i++) expect((await post(g, countNodesBody('M'), auth(k1, 'db_m1'))).status).toBe(200);
    for (let i = 0; i < 2; i++) expect((await post(g, countNodesBody('M'), auth(k2, 'db_m2'))).status).toBe(200);
    expect((await post(g, addNode('M'), auth(k2, 'db_m2'))).status).toBe(200);
    expect((await post(g, '{', auth(k2, 'db_m2'))).status).toBe(400); // not admitted: not metered
    expect(cp.usage.get('ws_meter/read')).toBeUndefined();
    await g.flushUsage();
    expect(cp.usage.get('ws_meter/read')).toBe(5);
    expect(cp.usage.get('ws_meter/write')).toBe(1);
  });

  it('serves GET /v2/metadata for svc sync: settings, and the database of a valid key', async () => {
    const g = await gatewayWith({ publicUrl: 'https://gw.example.com/', authHeader: 'X-Api-Key', authScheme: 'raw', queryAuthEnv: 'MY_KEY' });
    const anonymous = await fetch(`${g.url}/v2/metadata`);
    expect(anonymous.status).toBe(200);
    expect(await anonymous.json()).toEqual({
      gateway_url: 'https://gw.example.com', query_auth_header: 'X-Api-Key', query_auth_scheme: 'raw', query_auth_env: 'MY_KEY', database_id: null,
    });
    const withKey = await fetch(`${g.url}/v2/metadata`, { headers: { 'x-api-key': keyB } });
    expect((await withKey.json() as { database_id: string }).database_id).toBe('db_b');
    const badKey = await fetch(`${g.url}/v2/metadata`, { headers: { 'x-api-key': 'svc_nope' } });
    expect(badKey.status).toBe(401);
    // the raw scheme takes the key as the whole header value
    expect((await post(g, countNodesBody('X'), { 'x-api-key': keyB, 'x-svc-tenant-id': 'db_b' })).status).toBe(200);
    expect((await post(g, countNodesBody('X'), { 'x-api-key': `Bearer ${keyB}`, 'x-svc-tenant-id': 'db_b' })).status).toBe(400);
  });

  it('answers /health and /readyz', async () => {
    const health = await fetch(`${gateway.url}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    const ready = await fetch(`${gateway.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ rate_limiter: 'ok', ready: true });
  });
});

describe('bounded memory', () => {
  it('answers 503 server_overloaded to a backend answer over the gateway budget, and holds nothing after', async () => {
    const big = await bigAnswerServer(256 * 1024);
    try {
      cp.addDatabase({ id: 'db_big', workspaceId: 'ws_a', writerUrl: big.url, readerUrls: [], rateLimit: UNLIMITED });
      const key = cp.addKey('db_big').secret;
      const g = await gatewayWith({ bufferedResponseBytesMax: 64 * 1024 });
      const answer = await post(g, countNodesBody('X'), auth(key, 'db_big'));
      expect(answer.status, answer.text).toBe(503);
      expect(errorOf(answer).error, answer.text).toBe('server_overloaded');
      await eventually(() => g.bufferedBytes().responses === 0 && g.bufferedBytes().requestBodies === 0, 'the budget is back to zero');
      // An answer within the budget passes whole, and is released once sent.
      const roomy = await gatewayWith({ bufferedResponseBytesMax: 1024 * 1024 });
      const whole = await post(roomy, countNodesBody('X'), auth(key, 'db_big'));
      expect(whole.status).toBe(200);
      expect(whole.text.length).toBe(256 * 1024);
      expect(roomy.bufferedBytes().responses).toBe(0);
      // A write has run by then: not server_overloaded, which clients retry.
      const write = await post(g, addNode('X'), auth(key, 'db_big'));
      expect([write.status, errorOf(write).error], write.text).toEqual([502, 'write_outcome_unknown']);
      await eventually(() => g.bufferedBytes().responses === 0, 'released after the write too');
    } finally {
      big.close();
    }
  });

  it('an answer a client does not read yet stays counted until the socket took it, and is released when the client leaves', async () => {
    const size = 8 * MiB; // far more than a socket's buffers
    const big = await bigAnswerServer(size);
    try {
      cp.addDatabase({ id: 'db_slowread', workspaceId: 'ws_a', writerUrl: big.url, readerUrls: [], rateLimit: UNLIMITED });
      const key = cp.addKey('db_slowread').secret;
      const g = await gatewayWith({ bufferedResponseBytesMax: 64 * MiB });
      const body = countNodesBody('X');
      const request = `POST /v2/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nx-svc-tenant-id: db_slowread\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      for (const ending of ['reads it late', 'leaves'] as const) {
        const socket = connect(g.port, '127.0.0.1');
        socket.on('error', () => undefined);
        socket.pause();
        socket.write(request);
        await eventually(() => g.bufferedBytes().responses > 0, `${ending}: the answer is held while the client does not read`);
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(g.bufferedBytes().responses, ending).toBeGreaterThan(0);
        if (ending === 'leaves') {
          socket.destroy();
        } else {
          let received = 0;
          socket.on('data', (d: Buffer) => { received += d.length; });
          socket.resume();
          await eventually(() => received >= size, 'the whole answer arrives once the client reads');
          socket.destroy();
        }
        await eventually(() => g.bufferedBytes().responses === 0, `${ending}: released`);
      }
    } finally {
      big.close();
    }
  });

  it('close() waits until an answer still being written is written whole (a probe had a stop cut answers short)', async () => {
    const size = 8 * MiB;
    const big = await bigAnswerServer(size);
    try {
      cp.addDatabase({ id: 'db_closing', workspaceId: 'ws_a', writerUrl: big.url, readerUrls: [], rateLimit: UNLIMITED });
      const key = cp.addKey('db_closing').secret;
      const g = await gatewayWith({ bufferedResponseBytesMax: 64 * MiB });
      gateways.splice(gateways.indexOf(g), 1);
      const body = countNodesBody('X');
      const socket = connect(g.port, '127.0.0.1');
      socket.on('error', () => undefined);
      socket.pause();
      socket.write(`POST /v2/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nx-svc-tenant-id: db_closing\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      await eventually(() => g.bufferedBytes().responses > 0, 'the answer is being written');
      const closed = g.close();
      await new Promise((resolve) => setTimeout(resolve, 300));
      let received = 0;
      socket.on('data', (d: Buffer) => { received += d.length; });
      const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      socket.resume();
      await eventually(() => received >= size, 'the whole answer arrives while the gateway closes', { timeoutMs: 4_000 });
      await closed;
      socket.destroy();
      await ended;
    } finally {
      big.close();
    }
  });

  it('warming keeps no backend answer body: a large warm read fits a small budget', async () => {
    const big = await bigAnswerServer(256 * 1024);
    try {
      cp.addDatabase({ id: 'db_bigwarm', workspaceId: 'ws_a', writerUrl: big.url, readerUrls: [big.url], rateLimit: UNLIMITED });
      const key = cp.addKey('db_bigwarm').secret;
      const g = await gatewayWith({ bufferedResponseBytesMax: 64 * 1024 });
      const warm = await post(g, countNodesBody('X'), auth(key, 'db_bigwarm', { 'x-svc-warm': 'true' }));
      expect(warm.status, warm.text).toBe(204);
      await eventually(() => g.bufferedBytes().responses === 0, 'no answer bytes are held');
    } finally {
      big.close();
    }
  });

  it('allocates announced bodies ahead only up to unfilledBodyBytesMax; past it their chunks are kept, and both arrive whole', async () => {
    const g = await gatewayWith({ unfilledBodyBytesMax: 3 * MiB });
    const body = countNodesBody('Unfilled');
    const padded = body + ' '.repeat(2 * MiB - body.length);
    const uploads = [0, 1].map(() => {
      const socket = connect(g.port, '127.0.0.1');
      let reply = '';
      socket.setEncoding('latin1').on('data', (d: string) => { reply += d; });
      socket.on('error', () => undefined);
      socket.write(`POST /v2/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${keyA}\r\nx-svc-tenant-id: db_a\r\nContent-Length: ${padded.length}\r\n\r\n${padded.slice(0, 100)}`);
      return { socket, reply: () => reply };
    });
    try {
      await eventually(() => g.bufferedBytes().requestBodies === 200, 'the first bytes of both arrived');
      // One 2 MiB buffer fits the 3 MiB ahead; the other keeps its chunks.
      expect(g.bufferedBytes().unfilledBodies).toBe(padded.length - 100);
      for (const upload of uploads) upload.socket.write(padded.slice(100));
      await eventually(() => uploads.every((u) => u.reply().endsWith('{"n":0}')), 'both answered');
      expect(g.bufferedBytes()).toMatchObject({ requestBodies: 0, unfilledBodies: 0 });
    } finally {
      for (const upload of uploads) upload.socket.destroy();
    }
  });

  it('answers 408 query_timeout to a body still trickling in at the deadline, and releases its reservation', async () => {
    const g = await gatewayWith({ queryTimeoutMs: 400 });
    const socket = connect(g.port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    let reply = '';
    socket.on('data', (d: Buffer) => { reply += d.toString(); });
    socket.on('error', () => { /* the gateway may close the connection after answering */ });
    const started = performance.now();
    socket.write(`POST /v2/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${keyA}\r\nx-svc-tenant-id: db_a\r\nContent-Length: ${2 * MiB}\r\n\r\n{"request_type":`);
    const trickle = setInterval(() => { if (!socket.destroyed) socket.write(' '); }, 50);
    try {
      // The bytes that arrived are counted, not the 2 MiB announced: connections that announce
      // much and send little cannot hold the bound.
      await eventually(() => g.bufferedBytes().requestBodies >= 16 && g.bufferedBytes().requestBodies < 1024, 'the bytes received are counted');
      await eventually(() => reply.startsWith('HTTP/1.1 '), 'the gateway answered', { timeoutMs: 5000 });
      const elapsed = performance.now() - started;
      expect(reply).toMatch(/^HTTP\/1\.1 408 /);
      expect(reply).toContain('"error":"query_timeout"');
      expect(elapsed).toBeGreaterThanOrEqual(390);
      expect(elapsed).toBeLessThan(3000);
      expect(g.bufferedBytes().requestBodies).toBe(0);
      expect(g.bufferedBytes().unfilledBodies, 'the buffer allocated ahead is given back').toBe(0);
    } finally {
      clearInterval(trickle);
      socket.destroy();
    }
  });

  it('counts a chunked body as it arrives, not at the 2 MiB maximum, and refuses it at the gateway bound', async () => {
    const g = await gatewayWith({ bufferedBodyBytesMax: 4096 });
    const socket = connect(g.port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.on('error', () => { /* closed by the gateway after its answer */ });
    try {
      socket.write(`POST /v2/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${keyA}\r\nx-svc-tenant-id: db_a\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{"request_type":\r\n`);
      await eventually(() => g.bufferedBytes().requestBodies === 16, 'the 16 bytes received are counted');
    } finally {
      socket.destroy();
    }
    await eventually(() => g.bufferedBytes().requestBodies === 0, 'the abandoned body is released');
    // A chunked body past the bound: 503 server_overloaded, and nothing stays counted.
    const res = await fetch(`${g.url}/v2/query`, { method: 'POST', body: chunkedSpaces(1024, 8), headers: auth(keyA, 'db_a'), duplex: 'half' } as RequestInit);
    expect(res.status).toBe(503);
    expect((await res.json() as { error: string }).error).toBe('server_overloaded');
    await eventually(() => g.bufferedBytes().requestBodies === 0, 'the refused body is released');
  });

  it('gives each database a share of the body bound: one database trickling bodies cannot starve another', async () => {
    const g = await gatewayWith({ bufferedBodyBytesMax: 64 * 1024, databaseBodyBytesMax: 4096 });
    const sockets: Socket[] = [];
    try {
      // db_a's clients hold its whole share: four uploads of 100,000 bytes stalled after 1 KiB.
      for (let i = 0; i < 4; i++) {
        const socket = connect(g.port, '127.0.0.1');
        sockets.push(socket);
        socket.on('error', () => { /* closed by the gateway */ });
        await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
        socket.write(`POST /v2/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${keyA}\r\nx-svc-tenant-id: db_a\r\nContent-Length: 100000\r\n\r\n${' '.repeat(1024)}`);
      }
      await eventually(() => g.bufferedBytes().requestBodies === 4096, "db_a's 4 KiB are counted");
      // db_a's next body passes its share (the gateway's bound has room): 503 for db_a alone.
      const refused = await post(g, countNodesBody('X'), auth(keyA, 'db_a'));
      expect(refused.status).toBe(503);
      expect(errorOf(refused)).toEqual({ error: 'server_overloaded', msg: 'the gateway holds as many request bodies for database db_a as one database may; retry later' });
      const other = await post(g, countNodesBody('X'), auth(keyB, 'db_b'));
      expect(other.status, other.text).toBe(200);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
    await eventually(() => g.bufferedBytes().requestBodies === 0, 'the abandoned bodies are released');
    // Released, the share serves db_a again.
    const again = await post(g, countNodesBody('X'), auth(keyA, 'db_a'));
    expect(again.status, again.text).toBe(200);
  });

  it('looks up no key of the wrong format, and never runs more control-plane lookups at once than its bound', async () => {
    const slow = new SlowControlPlane(200);
    const g = await gatewayWith({ controlPlaneLookupsMax: 8, controlPlane: slow });
    // Wrong format (not svc_ + 43 base64url characters): 401 without asking the store.
    for (const key of ['svc_short', `svc_${'A'.repeat(44)}`, `key_${'A'.repeat(43)}`, 'x'.repeat(47)]) {
      const answer = await post(g, countNodesBody('X'), auth(key, 'db_a'));
      expect(answer.status, key).toBe(401);
      expect(errorOf(answer).error).toBe('invalid_api_key');
    }
    expect(slow.calls.grantForKeyHash).toBe(0);
    // A flood of well-formed unknown keys: at most 8 lookups at once, the rest refused at once.
    const flood = await Promise.all(Array.from({ length: 60 }, (_, i) =>
      post(g, countNodesBody('X'), auth(`svc_${String(i).padStart(43, 'Q')}`, 'db_a'))));
    const codes = flood.map((a) => `${a.status} ${errorOf(a).error}`);
    expect(slow.peakInFlight).toBeGreaterThan(0);
    expect(slow.peakInFlight).toBeLessThanOrEqual(8);
    expect(codes).toContain('401 invalid_api_key');
    expect(codes).toContain('503 control_plane_unavailable');
    expect(new Set(codes)).toEqual(new Set(['401 invalid_api_key', '503 control_plane_unavailable']));
  });
});

describe('clients that go away', () => {
  it('release what their request held: close() does not wait for uploads abandoned mid-body', async () => {
    const g = await gatewayWith();
    const port = g.port;
    for (let i = 0; i < 5; i++) {
      const socket = connect(port, '127.0.0.1');
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      socket.write(`POST /v2/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${keyA}\r\nx-svc-tenant-id: db_a\r\nContent-Length: 100000\r\n\r\n{"request_type":`);
      await new Promise((r) => setTimeout(r, 50));
      socket.destroy();
    }
    await new Promise((r) => setTimeout(r, 100));
    const started = performance.now();
    await g.close();
    gateways.splice(gateways.indexOf(g), 1);
    // a leaked in-flight request would hold close() for its 5 s drain timeout
    expect(performance.now() - started).toBeLessThan(2000);
  });
});

describe('logs', () => {
  it('never write a key or an Authorization header, in access lines, rejections or errors', async () => {
    let output = '';
    const capture = new Writable({ write: (chunk: Buffer, _enc, done) => { output += chunk.toString(); done(); } });
    const g = await gatewayWith({ logDestination: capture, accessLog: true, logLevel: 'debug' });
    const raw = await gatewayWith({ logDestination: capture, accessLog: true, authHeader: 'X-Api-Key', authScheme: 'raw' });
    const secrets = [keyA, readKeyA, keyB, 'svc_unknown_secret_123456'];
    const body = countNodesBody('Log');
    await post(g, body, auth(keyA, 'db_a'));
    await post(g, addNode('Log'), auth(readKeyA, 'db_a')); // 403
    await post(g, body, auth(keyB, 'db_a')); // 403 other database
    await post(g, body, auth('svc_unknown_secret_123456', 'db_a')); // 401
    await post(g, body, { authorization: `Bearer ${keyA}` }); // 400 no tenant
    await post(g, body, { authorization: `Basic ${keyA}`, 'x-svc-tenant-id': 'db_a' }); // 400 malformed
    await post(g, '{', auth(keyA, 'db_a'));
    await post(raw, body, { 'x-api-key': keyB, 'x-svc-tenant-id': 'db_b' });
    await post(raw, body, { 'x-api-key': keyB, 'x-svc-tenant-id': 'db_a' });
    // A key in the tenant header (a database ID's characters): with a key (403), and swapped (401).
    await post(g, body, { authorization: `Bearer ${keyA}`, 'x-svc-tenant-id': keyB });
    await post(g, body, { authorization: 'Bearer db_a', 'x-svc-tenant-id': readKeyA });
    await eventually(() => output.split('\n').filter((l) => l.includes('"msg":"query"')).length >= 11, 'eleven access lines were written');
    // The log is about the requests (so this test would notice an empty log)...
    expect(output).toContain('"status":403');
    expect(output).toContain('"error":"invalid_auth_header"');
    expect(output).toContain('"keyId":"key_1"');
    expect(output).toContain('[redacted]');
    // ...and holds no secret in any form.
    for (const secret of secrets) expect(output).not.toContain(secret);
    expect(output).not.toMatch(/bearer /i);
  });
});

describe('request framing', () => {
  it('closes a connection whose Content-Length headers disagree, with no answer: a request hidden in the body is not served', async () => {
    const body = countNodesBody('Framing');
    const hidden = `POST /v2/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${keyA}\r\nx-svc-tenant-id: db_a\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const outer = `{}${hidden}`;
    const framing = `Content-Length: 2\r\nContent-Length: ${outer.length}\r\n\r\n${outer}`;
    expect(await exchange(gateway.port, `POST /v2/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${keyA}\r\nx-svc-tenant-id: db_a\r\n${framing}`, 2000)).toBe('');
    // On every other route too.
    for (const [method, path] of [['GET', '/health'], ['GET', '/readyz'], ['GET', '/v2/metadata'], ['GET', '/v2/query'], ['POST', '/nowhere']]) {
      const answer = await exchange(gateway.port, `${method} ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: ${hidden.length}\r\n\r\n${hidden}`, 2000);
      expect(answer, `${method} ${path}`).toBe('');
    }
  });
});

describe('logs of requests whose client left', () => {
  it('show no status and no error: the client was answered nothing', async () => {
    let output = '';
    const capture = new Writable({ write: (chunk: Buffer, _enc, done) => { output += chunk.toString(); done(); } });
    const slow = new SlowControlPlane(300);
    slow.addWorkspace('ws_slow', 'Growth');
    slow.addDatabase({ id: 'db_slow', workspaceId: 'ws_slow', writerUrl: writer.url, readerUrls: [], rateLimit: UNLIMITED });
    const key = slow.addKey('db_slow', 'read').secret;
    const g = await gatewayWith({ controlPlane: slow, logDestination: capture, accessLog: true });
    const socket = connect(g.port, '127.0.0.1');
    socket.on('error', () => undefined);
    const body = countNodesBody('Gone');
    socket.write(`POST /v2/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nx-svc-tenant-id: db_slow\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    await eventually(() => slow.inFlight === 1, 'the key lookup started');
    socket.destroy();
    await eventually(() => output.includes('"msg":"query"'), 'the access line was written');
    const line = JSON.parse(output.split('\n').find((l) => l.includes('"msg":"query"'))!) as Record<string, unknown>;
    expect(line).toMatchObject({ status: null, aborted: true });
    expect(line['error']).toBeUndefined();
  });
});

describe('logs of rejected requests', () => {
  it('show only allowlisted headers: a key in a header the gateway does not read never reaches the log', async () => {
    let output = '';
    const capture = new Writable({ write: (chunk: Buffer, _enc, done) => { output += chunk.toString(); done(); } });
    const g = await gatewayWith({ logDestination: capture, accessLog: true });
    const misplaced = cp.addKey('db_a').secret;
    // The key in X-Api-Key while the gateway reads Authorization: 400, headers logged.
    const answer = await post(g, countNodesBody('X'), { 'x-api-key': misplaced, 'x-svc-tenant-id': 'db_a', 'x-forwarded-authorization': `Bearer ${misplaced}` });
    expect(answer.status).toBe(400);
    await eventually(() => output.includes('"msg":"query"'), 'the access line was written');
    expect(output).toContain('"x-svc-tenant-id":"db_a"');
    expect(output).not.toContain(misplaced);
    expect(output).not.toContain('x-api-key');
  });
});

describe('Redis down', () => {
  it('answers 503 rate_limit_unavailable (never admits blindly) and recovers when Redis is back', async () => {
    const body = countNodesBody('RedisDown');
    expect((await post(gateway, body, auth(keyA, 'db_a'))).status).toBe(200);
    const before = await settledCounts([writer, ...readers]);
    await redis.stop();
    try {
      for (let i = 0; i < 5; i++) {
        const answer = await post(gateway, body, auth(keyA, 'db_a'));
        expect(answer.status).toBe(503);
        // ioredis's own words (connection state, addresses) stay in the gateway log
        expect(errorOf(answer)).toEqual({ error: 'rate_limit_unavailable', msg: 'the rate limit could not be decided; retry with backoff' });
      }
      const ready = await fetch(`${gateway.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(await settledCounts([writer, ...readers]), 'a request reached a backend without a decision').toEqual(before);
    } finally {
      await redis.start();
    }
    await eventually(async () => (await post(gateway, body, auth(keyA, 'db_a'))).status === 200, 'the gateway admits again after Redis restarted', { timeoutMs: 15_000 });
  });

  it('answers 503 rate_limit_unavailable when Redis stalls past the decision bound', async () => {
    const g = await gatewayWith({ rateLimitDecisionMs: 100 });
    const body = countNodesBody('RedisStall');
    expect((await post(g, body, auth(keyA, 'db_a'))).status).toBe(200);
    const pid = redisPid();
    process.kill(pid, 'SIGSTOP');
    try {
      const started = performance.now();
      const answer = await post(g, body, auth(keyA, 'db_a'));
      expect(answer.status).toBe(503);
      expect(errorOf(answer).error).toBe('rate_limit_unavailable');
      expect(performance.now() - started).toBeLessThan(2000);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await eventually(async () => (await post(g, body, auth(keyA, 'db_a'))).status === 200, 'Redis answers again');
  });
});

function redisPid(): number {
  const pid = redis.pid();
  if (pid === null) throw new Error('redis-server is not running');
  return pid;
}

/** Send raw HTTP/1.1 bytes and return the status of the answer. */
function rawStatus(port: number, request: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(request));
    let reply = '';
    socket.on('data', (d) => {
      reply += d.toString();
      const match = /^HTTP\/1\.1 (\d{3})/.exec(reply);
      if (match !== null) { socket.destroy(); resolve(Number(match[1])); }
    });
    socket.on('error', reject);
  });
}

/** A TCP port nothing listens on (bound, then released). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A control plane whose key lookups each take `delayMs`, counting how many run at once. */
class SlowControlPlane extends MemoryControlPlane {
  inFlight = 0;
  peakInFlight = 0;
  constructor(public delayMs: number) {
    super();
  }

  override async grantForKeyHash(keyHash: string): ReturnType<MemoryControlPlane['grantForKeyHash']> {
    this.inFlight++;
    this.peakInFlight = Math.max(this.peakInFlight, this.inFlight);
    try {
      await new Promise((r) => setTimeout(r, this.delayMs));
      return await super.grantForKeyHash(keyHash);
    } finally {
      this.inFlight--;
    }
  }
}

/** A backend whose every query answer is 200 with `bytes` bytes of JSON (a large result). */
async function bigAnswerServer(bytes: number): Promise<{ url: string; close(): void }> {
  const body = `"${'x'.repeat(bytes - 2)}"`;
  const server: Server = createServer((req, res) => {
    if (req.url === '/readyz') { res.writeHead(200, { 'content-type': 'application/json' }).end('{"ready":true}'); return; }
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: () => { server.closeAllConnections(); server.close(); },
  };
}

/**
 * A backend whose /readyz passes but whose every query answer is `500 internal_error` (a
 * server fault) until `heal()`, then `{"n":0}`; after `answerQueryErrors()`, `500
 * invalid_query` (the query's fault, not the server's) every other query. Counts queries.
 */
async function faultyServer(name = 'reader'): Promise<{ url: string; received(): number; heal(): void; answerQueryErrors(): void; close(): void }> {
  let received = 0;
  let mode: 'fault' | 'healthy' | 'query_errors' = 'fault';
  const server: Server = createServer((req, res) => {
    if (req.url === '/readyz') { res.writeHead(200, { 'content-type': 'application/json' }).end('{"ready":true}'); return; }
    received++;
    req.resume();
    req.on('end', () => {
      const json = { 'content-type': 'application/json' };
      if (mode === 'fault') res.writeHead(500, json).end(JSON.stringify({ error: 'internal_error', msg: `injected fault (${name})` }));
      else if (mode === 'query_errors' && received % 2 === 0) res.writeHead(500, json).end('{"error":"invalid_query","msg":"unbound parameter"}');
      else res.writeHead(200, json).end('{"n":0}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    received: () => received,
    heal: () => { mode = 'healthy'; },
    answerQueryErrors: () => { mode = 'query_errors'; },
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: () => { server.closeAllConnections(); server.close(); },
  };
}

/**
 * A backend that answers /readyz but never answers a query (a stalled server); it counts
 * the queries it received and those whose connection the client closed.
 */
async function stallingServer(): Promise<{ url: string; received(): number; cancelled(): number; close(): void }> {
  let received = 0;
  let cancelled = 0;
  const server: Server = createServer((req, res) => {
    if (req.url === '/readyz') { res.writeHead(200, { 'content-type': 'application/json' }).end('{"ready":true}'); return; }
    received++;
    res.on('close', () => { cancelled++; }); // never answered: closed only by the client
    req.resume(); // read the body, never answer
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    received: () => received,
    cancelled: () => cancelled,
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: () => { server.closeAllConnections(); server.close(); },
  };
}
