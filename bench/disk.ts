// Durability benchmark (run by `npm run bench` after run.ts, or alone with
// `node dist/bench/disk.js`):
//   1. single add_n writes over HTTP at c=1 and c=64, memory vs --disk (group commit), wrk;
//   2. bulk load of the 100k-node / 1M-edge graph into an embedded disk database;
//   3. restart to ready: reopening that database (snapshot + WAL replay), embedded and server.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../src/index.js';
import { generateGraph } from './graph.js';
import { loadSvcdb } from './load.js';
import { drive, wrkAvailable } from './loadgen.js';
import { addUser } from './queries.js';
import { post, startListening, svcdbMain } from './servers.js';
import { fmtMs, fmtOps, fmtUs, log, table, timed } from './util.js';

const WRITE_BODIES = Array.from({ length: 256 }, (_, i) => addUser(i));
const DURATION_SEC = 6;
const RESTART_GOAL_MS = 200;
const GROUP_COMMIT_GOAL_RPS = 5_000;

async function writeScenario(storageArgs: string[], connections: number) {
  const server = await startListening('svcdb', svcdbMain, ['serve', '--host', '127.0.0.1', '--port', '0', '--readers', '1', ...storageArgs], { cpus: '0', startTimeoutMs: 60_000 });
  try {
    const probe = await post(server.url, WRITE_BODIES[0]!);
    if (probe.status !== 200) throw new Error(`write probe failed: ${probe.status} ${probe.body}`);
    return await drive(server.url, WRITE_BODIES, { connections, threads: 1, durationSec: DURATION_SEC, cpus: '1' }, wrkAvailable() ? 'wrk' : 'autocannon');
  } finally {
    await server.stop();
  }
}

async function restartServer(dir: string): Promise<number> {
  const started = performance.now();
  const server = await startListening('svcdb', svcdbMain, ['serve', '--host', '127.0.0.1', '--port', '0', '--readers', '1', '--disk', dir], { cpus: null, startTimeoutMs: 120_000 });
  const ms = performance.now() - started;
  await server.stop();
  return ms;
}

export async function runDiskBench(): Promise<void> {
  const scratch = mkdtempSync(join(tmpdir(), 'svcdb-bench-disk-'));
  try {
    log('durability: single add_n writes over HTTP (server on CPU 0, wrk on CPU 1) ...');
    const rows: string[][] = [];
    const results = new Map<string, number>();
    for (const [name, args] of [['memory', []], ['disk', ['--disk', join(scratch, 'writes')]]] as const) {
      for (const c of [1, 64]) {
        if (name === 'disk') rmSync(join(scratch, 'writes'), { recursive: true, force: true });
        const r = await writeScenario([...args], c);
        results.set(`${name}/${c}`, r.rps);
        rows.push([name, String(c), fmtOps(r.rps), fmtUs(r.p50us), fmtUs(r.p99us), String(r.errors)]);
      }
    }
    log(table(['storage', 'connections', 'writes/s', 'p50', 'p99', 'errors'], rows));

    log('durability: bulk load of the 100k/1M graph into an embedded disk database ...');
    const graph = generateGraph();
    const dir = join(scratch, 'graph');
    const db = await openDatabase({ storage: 'disk', path: dir });
    const load = await loadSvcdb(graph, (body) => db.queryRaw(body));
    const close = await timed(() => db.close());
    log(`  loaded in ${fmtMs(load.totalMs)} (edges ${fmtMs(load.edgesMs)}); clean close with snapshot ${fmtMs(close.ms)}`);

    const reopen = await timed(() => openDatabase({ storage: 'disk', path: dir }));
    const count = await reopen.value.query({ request_type: 'read', query: { read: { entries: [
      { query: { name: 'e', root: { count: { input: { edges: { reference: 'all' } } } } } }], returns: ['e'] } } });
    await reopen.value.close();
    const serverMs = await restartServer(dir);
    log(`  restart to ready: embedded open ${fmtMs(reopen.ms)} (${String(count.e)} edges), server start to listening ${fmtMs(serverMs)}`);

    const groupCommit = results.get('disk/64') ?? 0;
    log(table(['goal', 'target', 'measured', 'verdict'], [
      ['group commit, disk writes at c=64', `>= ${fmtOps(GROUP_COMMIT_GOAL_RPS)}/s`, `${fmtOps(groupCommit)}/s`,
        groupCommit >= GROUP_COMMIT_GOAL_RPS ? 'met' : `MISSED (${Math.round((groupCommit / GROUP_COMMIT_GOAL_RPS) * 100)}% of target)`],
      ['restart to ready, 100k/1M graph (embedded open)', `<= ${RESTART_GOAL_MS} ms`, fmtMs(reopen.ms),
        reopen.ms <= RESTART_GOAL_MS ? 'met' : `MISSED (${fmtMs(reopen.ms - RESTART_GOAL_MS)} over)`],
    ]));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await runDiskBench();
}
