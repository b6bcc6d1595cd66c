// `npm run bench -- gateway [--duration S] [--connections N]`: what the cloud gateway
// (src/gateway/, docs/gateway.md) costs, in one run on loopback:
//   1. point lookups straight to the writer server (the baseline);
//   2. the same through the gateway to a database whose only server is that writer (reads
//      fall back to the writer; no x-svc-require-writer, which would move them off the
//      writer's inline path onto its writer thread): the gateway's own cost;
//   3. the same through the gateway to 2 reader servers (the cloud topology);
//   4. the same as 2 through `svc gateway` processes on a SQLite control-plane store, with
//      --threads 1 and --threads 2 (gateway-threads.ts): what a second gateway thread gives;
// each at one connection (latency: the p50 the gateway adds) and at N connections
// (throughput). Rate limits are set high so every request is admitted: the Redis decision
// is part of the measured path. Then 5. rate-limiter decisions per second against Redis.
//
// Needs wrk and redis-server on PATH. The gateway of 2 and 3 runs in this process (idle
// while wrk runs in its own); servers and the gateways of 4 are separate processes.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { ControlPlane, DatabaseRoute, KeyGrant } from '../src/cloud/control-plane.js';
import { openControlPlane } from '../src/cloud/open.js';
import { keyHashOf, startGateway, type Gateway } from '../src/gateway/gateway.js';
import { RedisRateLimiter } from '../src/gateway/rate-limiter.js';
import { parseWrk, wrkScript, type LoadResult } from './loadgen.js';
import { pointLookup } from './queries.js';
import { repoRoot, startListening, svcdbMain, type RunningProcess } from './servers.js';
import { fmtInt, fmtUs, hasCommand, log, sleep, table } from './util.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: number): number => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const durationSec = flag('duration', 8);
const connections = flag('connections', 32);
const nodes = 1000;
const HIGH = { perSecond: 10_000_000, burst: 10_000_000 };
/** Keys have the shape of generated API keys (src/cloud/secrets.ts), or the gateway answers 401 without a lookup. */
const API_KEY = 'svc_bench_readers_key_0000000000000000000000000';
const DATABASE_ID = 'db_bench';
/** A database served by the writer alone (same server as the baseline). */
const WRITER_ONLY_KEY = 'svc_bench_writer_only_key_000000000000000000000';
const WRITER_ONLY_ID = 'db_writer_only';

/** The highest rate limit a store accepts (src/cloud/sql-store.ts ratePerSecondMax): never reached here. */
const STORE_HIGH = { perSecond: 1_000_000, burst: 60_000_000 };

/**
 * A SQLite control-plane store with one database served by `writerUrl` alone, for the
 * gateway process (its threads each open the store; the in-process gateway's function
 * control plane cannot cross threads). Returns the store location, database ID and key.
 */
async function benchStore(dir: string, writerUrl: string): Promise<{ location: string; databaseId: string; secret: string }> {
  const location = `sqlite:${join(dir, 'control-plane.sqlite')}`;
  const store = await openControlPlane(location);
  try {
    const workspace = await store.createWorkspace('bench', 'Growth');
    await store.setPlanAllowance('Growth', { readsPerMonth: Number.MAX_SAFE_INTEGER, writesPerMonth: Number.MAX_SAFE_INTEGER });
    const db = await store.createDatabase({ workspaceId: workspace.id, name: 'writer-only', readerCount: 0 }, 'http://gateway.invalid');
    await store.setDatabaseBackends(db.id, { writerUrl, readerUrls: [] });
    await store.setDatabaseStatus(db.id, 'Active');
    await store.setRateLimitOverride(db.id, STORE_HIGH);
    const { secret } = await store.createApiKey(db.id, 'bench', 'read');
    return { location, databaseId: db.id, secret };
  } finally {
    await store.close();
  }
}

/** CPU seconds (user + system, every thread) a process has used, from /proc (Linux). */
function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
  } catch {
    return NaN;
  }
}

async function startRedis(dir: string): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const socket = join(dir, 'redis.sock');
  const child: ChildProcess = spawn('redis-server', ['--port', '0', '--unixsocket', socket, '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  for (let i = 0; i < 500 && !existsSync(socket); i++) await sleep(10);
  if (!existsSync(socket)) throw new Error('redis-server did not start');
  return { url: `unix://${socket}`, pid: child.pid!, stop: async () => { child.kill('SIGTERM'); await exited; } };
}

/** A control plane that knows one database and one key (the store is not what is measured). */
function benchControlPlane(writerUrl: string, readerUrls: string[]): ControlPlane {
  const grants = new Map<string, KeyGrant>([
    [keyHashOf(API_KEY), { keyId: 'key_bench', databaseId: DATABASE_ID, workspaceId: 'ws_bench', permission: 'read_write' }],
    [keyHashOf(WRITER_ONLY_KEY), { keyId: 'key_writer', databaseId: WRITER_ONLY_ID, workspaceId: 'ws_bench', permission: 'read_write' }],
  ]);
  const routes = new Map<string, DatabaseRoute>([
    [DATABASE_ID, { id: DATABASE_ID, workspaceId: 'ws_bench', status: 'Active', writerUrl, readerUrls, rateLimit: HIGH }],
    [WRITER_ONLY_ID, { id: WRITER_ONLY_ID, workspaceId: 'ws_bench', status: 'Active', writerUrl, readerUrls: [], rateLimit: HIGH }],
  ]);
  return {
    grantForKeyHash: async (h) => grants.get(h) ?? null,
    database: async (id) => routes.get(id) ?? null,
    allowance: async () => ({ readsAllowed: true, writesAllowed: true }),
    recordUsage: async () => {},
    close: async () => {},
  };
}

async function wrk(url: string, bodies: string[], headers: Record<string, string>, conns: number, dir: string): Promise<LoadResult> {
  const script = join(dir, `load-${Math.random().toString(36).slice(2)}.lua`);
  writeFileSync(script, wrkScript(bodies, headers));
  const argv = ['-t', String(Math.min(2, conns)), '-c', String(conns), '-d', `${durationSec}s`, '--timeout', '10s', '--latency', '-s', script, `${url}/v2/query`];
  const out = await new Promise<string>((resolve, reject) => {
    execFile('wrk', argv, { maxBuffer: 1 << 20 }, (err, stdout, stderr) => (err ? reject(new Error(`wrk failed: ${stderr}`)) : resolve(stdout)));
  });
  return parseWrk(out);
}

async function post(url: string, body: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  const res = await fetch(`${url}/v2/query`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: res.status, text: await res.text() };
}

/** Decisions per second of one limiter with `concurrency` decisions in flight, for `seconds`. */
async function limiterDecisions(redisUrl: string, concurrency: number, seconds: number): Promise<number> {
  const limiter = new RedisRateLimiter({ redisUrl, decisionTimeoutMs: 1000, keyPrefix: 'bench:' });
  await limiter.connect(2000);
  let decisions = 0;
  const end = performance.now() + seconds * 1000;
  const worker = async (w: number): Promise<void> => {
    while (performance.now() < end) {
      await limiter.take(`db_${w % 16}`, HIGH);
      decisions++;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  const elapsed = (performance.now() - started) / 1000;
  await limiter.close();
  return decisions / elapsed;
}

async function main(): Promise<void> {
  if (!hasCommand('wrk') || !hasCommand('redis-server')) {
    log('gateway bench: needs wrk and redis-server on PATH (apt-get install -y wrk redis-server); skipped');
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'svcdb-bench-gateway-'));
  const dataDir = join(dir, 'data');
  const processes: RunningProcess[] = [];
  let gateway: Gateway | null = null;
  let redis: { url: string; pid: number; stop(): Promise<void> } | null = null;
  try {
    redis = await startRedis(dir);
    const writer = await startListening('writer', svcdbMain, ['serve', '--host', '127.0.0.1', '--port', '0', '--readers', '1', '--disk', dataDir], { cpus: null, startTimeoutMs: 30_000 });
    processes.push(writer);
    const seed = JSON.stringify({
      request_type: 'write',
      query: { write: { entries: Array.from({ length: nodes }, (_, i) => ({ query: { name: `n${i}`, root: { add_n: { label: 'User', properties: [['name', { value: { string: `user_${i}` } }], ['age', { value: { i64: 20 + (i % 50) } }]] } } } })), returns: [] } },
    });
    const seeded = await post(writer.url, seed);
    if (seeded.status !== 200) throw new Error(`seeding failed: ${seeded.status} ${seeded.text}`);
    const readerArgs = ['serve', '--host', '127.0.0.1', '--port', '0', '--readers', '1', '--disk', dataDir, '--mode', 'reader', '--refresh-ms', '100'];
    for (let i = 0; i < 2; i++) processes.push(await startListening(`reader${i + 1}`, svcdbMain, readerArgs, { cpus: null, startTimeoutMs: 30_000 }));
    const readers = processes.slice(1);
    const bodies = Array.from({ length: nodes }, (_, i) => pointLookup(i));
    for (const r of readers) {
      for (let tries = 0; ; tries++) {
        const answer = await post(r.url, bodies[nodes - 1]!);
        if (answer.status === 200 && answer.text.includes('user_')) break;
        if (tries > 200) throw new Error(`${r.name} did not catch up: ${answer.text}`);
        await sleep(50);
      }
    }

    gateway = await startGateway({
      controlPlane: benchControlPlane(writer.url, readers.map((r) => r.url)), redisUrl: redis.url,
      logDestination: new Writable({ write: (_c, _e, done) => done() }),
    });
    const auth = { Authorization: `Bearer ${API_KEY}`, 'x-svc-tenant-id': DATABASE_ID };
    const check = await post(gateway.url, bodies[0]!, auth);
    if (check.status !== 200) throw new Error(`gateway answered ${check.status}: ${check.text}`);

    // `svc gateway` processes, CPU from /proc like the servers': one thread (what the CLI
    // runs as users start it, V8 flags included, to compare the second thread with) and two.
    const storeSetup = await benchStore(dir, writer.url);
    // TLS: the test suite's self-signed certificate (test/fixtures/tls); wrk does not verify it.
    const tlsArgs = ['--tls-cert', `${repoRoot}test/fixtures/tls/gateway-cert.pem`, '--tls-key', `${repoRoot}test/fixtures/tls/gateway-key.pem`];
    const gatewayProcess = async (threads: number, tls = false): Promise<RunningProcess> => {
      const p = await startListening(`gateway --threads ${threads}${tls ? ' (TLS)' : ''}`, svcdbMain, ['gateway', '--threads', String(threads), '--host', '127.0.0.1', '--port', '0',
        '--store', storeSetup.location, '--redis-url', redis!.url, ...(tls ? tlsArgs : [])], { cpus: null, startTimeoutMs: 30_000 });
      processes.push(p);
      // (This process's fetch does not trust the TLS gateway's certificate: wrk's error count checks it.)
      if (!tls) {
        const check = await post(p.url, bodies[0]!, threadedAuth);
        if (check.status !== 200) throw new Error(`${p.name} answered ${check.status}: ${check.text}`);
      }
      return p;
    };
    const threadedAuth = { Authorization: `Bearer ${storeSetup.secret}`, 'x-svc-tenant-id': storeSetup.databaseId };
    const oneThread = await gatewayProcess(1);
    const twoThreads = await gatewayProcess(2);
    const oneThreadTls = await gatewayProcess(1, true);

    log(`\n## Gateway overhead: point lookups over ${nodes} nodes, ${durationSec} s per run, loopback, load generator wrk`);
    /** CPU seconds the gateway of a run has used so far (this process, or the gateway process). */
    const inProcessCpu = (): number => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
    const runs: Array<[string, string, Record<string, string>, (() => number) | null]> = [
      ['writer directly', writer.url, {}, null],
      ['gateway -> writer', gateway.url, { Authorization: `Bearer ${WRITER_ONLY_KEY}`, 'x-svc-tenant-id': WRITER_ONLY_ID }, inProcessCpu],
      ['gateway -> 2 readers', gateway.url, auth, inProcessCpu],
      ['gateway process, 1 thread -> writer', oneThread.url, threadedAuth, () => cpuSeconds(oneThread.pid)],
      ['gateway process, 2 threads -> writer', twoThreads.url, threadedAuth, () => cpuSeconds(twoThreads.pid)],
      ['gateway process, 1 thread, TLS -> writer', oneThreadTls.url, threadedAuth, () => cpuSeconds(oneThreadTls.pid)],
    ];
    const rows: string[][] = [];
    const results = new Map<string, LoadResult>();
    // CPU per request of each process (robust on a shared machine, where latency mostly
    // measures how long each of the four processes waits for a core).
    const redisPid = redis.pid;
    const backendPids = processes.filter((p) => p !== oneThread && p !== twoThreads && p !== oneThreadTls).map((p) => p.pid);
    const perRequestUs = (seconds: number, requests: number): string => (Number.isFinite(seconds) ? `${((seconds * 1e6) / requests).toFixed(0)} us` : 'n/a');
    for (const conns of [1, connections]) {
      for (const [name, url, headers, gatewayCpu] of runs) {
        const gatewayBefore = gatewayCpu?.() ?? 0;
        const backendsBefore = backendPids.reduce((a, pid) => a + cpuSeconds(pid), 0);
        const redisBefore = cpuSeconds(redisPid);
        const r = await wrk(url, bodies, headers, conns, dir);
        const gatewaySeconds = (gatewayCpu?.() ?? 0) - gatewayBefore;
        const backendSeconds = backendPids.reduce((a, pid) => a + cpuSeconds(pid), 0) - backendsBefore;
        const redisSeconds = cpuSeconds(redisPid) - redisBefore;
        results.set(`${name}@${conns}`, r);
        rows.push([name, String(conns), fmtInt(r.rps), fmtUs(r.p50us), fmtUs(r.p99us), String(r.errors),
          gatewayCpu === null ? '-' : perRequestUs(gatewaySeconds, r.requests), perRequestUs(backendSeconds, r.requests),
          gatewayCpu === null ? '-' : perRequestUs(redisSeconds, r.requests)]);
      }
    }
    log(table(['path', 'connections', 'requests/s', 'p50', 'p99', 'errors', 'gateway CPU/req', 'servers CPU/req', 'Redis CPU/req'], rows));
    for (const conns of [1, connections]) {
      const base = results.get(`writer directly@${conns}`)!;
      const same = results.get(`gateway -> writer@${conns}`)!;
      log(`at ${conns} connection(s): the gateway in front of the same writer costs ${((1 - same.rps / base.rps) * 100).toFixed(1)} % throughput and adds ${fmtUs(same.p50us - base.p50us)} at p50`);
      const one = results.get(`gateway process, 1 thread -> writer@${conns}`)!;
      const two = results.get(`gateway process, 2 threads -> writer@${conns}`)!;
      const tls = results.get(`gateway process, 1 thread, TLS -> writer@${conns}`)!;
      log(`at ${conns} connection(s): TLS gives the one-thread gateway process ${(tls.rps / one.rps).toFixed(2)}x its plain-HTTP requests/s (${tls.errors} errors)`);
      log(`at ${conns} connection(s): a gateway process with 2 threads costs ${((1 - two.rps / base.rps) * 100).toFixed(1)} % throughput and adds ${fmtUs(two.p50us - base.p50us)} at p50 (${(two.rps / one.rps).toFixed(2)}x the requests/s of the same process with 1 thread)`);
    }

    log('\n## Rate-limiter decisions per second (one gateway process, Redis on a Unix socket, 16 buckets)');
    const limiterRows: string[][] = [];
    for (const concurrency of [1, 16, 64]) {
      limiterRows.push([String(concurrency), fmtInt(await limiterDecisions(redis.url, concurrency, 3))]);
    }
    log(table(['decisions in flight', 'decisions/s'], limiterRows));
  } finally {
    await gateway?.close();
    for (const p of processes.reverse()) await p.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
