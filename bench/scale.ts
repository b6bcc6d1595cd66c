// `npm run bench -- --scale`: the 5M-node / 50M-edge power-law graph on `svc serve --disk`.
//   1. bulk load over HTTP (for_each chunks, as bench/load.ts), edges/s, snapshots seen;
//   2. server VmRSS after the load next to the bytes the data needs (the snapshot size);
//   3. clean stop = final snapshot: its time and size;
//   4. restart to ready (spawn -> listening line -> /readyz 200);
//   5. write latency while a snapshot runs: a single-client durable add_n loop against a
//      restart with a small --snapshot-wal-bytes, snapshot windows found by watching the
//      directory (*.tmp appears -> the new snapshot file appears);
//   6. 1-hop / 2-hop count throughput on random start nodes, and the same on the small
//      graph (default 100k / 1M), as a ratio (how the cost grows with the graph).
// Options: --scale-nodes N --scale-edges M (default 5e6 / 5e7), --compare-nodes/--compare-edges
// (1e5 / 1e6), --quick (200k / 2M vs 20k / 200k, short runs), --duration S (traversal runs,
// default 8), --connections C (16), --snapshot-wal-bytes B (load; default the server's),
// --write-snapshot-wal-bytes B (step 5, default 256 KiB), --no-pin.
import { mkdtempSync, readdirSync, rmSync, statSync, watch } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { defaultGraphSpec, generateGraph, pickStartIds, type Graph } from './graph.js';
import { defaultChunking } from './load.js';
import { drive, wrkAvailable } from './loadgen.js';
import { addUser, loadChunks, oneHopCount, twoHopDedupCount } from './queries.js';
import { post, startListening, svcdbMain, type RunningProcess } from './servers.js';
import { fmtMs, fmtOps, hasCommand, log, procMemory, sleep, table } from './util.js';

const { values: opt } = parseArgs({
  options: {
    scale: { type: 'boolean', default: true },
    quick: { type: 'boolean', default: false },
    'scale-nodes': { type: 'string' },
    'scale-edges': { type: 'string' },
    'compare-nodes': { type: 'string' },
    'compare-edges': { type: 'string' },
    duration: { type: 'string' },
    connections: { type: 'string', default: '16' },
    'snapshot-wal-bytes': { type: 'string' },
    'write-snapshot-wal-bytes': { type: 'string', default: String(256 * 1024) },
    'no-pin': { type: 'boolean', default: false },
  },
});

const quick = opt.quick!;
const big = { nodes: Number(opt['scale-nodes'] ?? (quick ? 200_000 : 5_000_000)), edges: Number(opt['scale-edges'] ?? (quick ? 2_000_000 : 50_000_000)) };
const small = { nodes: Number(opt['compare-nodes'] ?? (quick ? 20_000 : 100_000)), edges: Number(opt['compare-edges'] ?? (quick ? 200_000 : 1_000_000)) };
const durationSec = Number(opt.duration ?? (quick ? 3 : 8));
const connections = Number(opt.connections);
const pin = !opt['no-pin'] && availableParallelism() >= 2 && hasCommand('taskset');
const tool: 'wrk' | 'autocannon' = wrkAvailable() ? 'wrk' : 'autocannon';

const MiB = 1024 * 1024;
const dirBytes = (dir: string, prefix: string): number =>
  readdirSync(dir).filter((f) => f.startsWith(prefix) && !f.endsWith('.tmp')).reduce((a, f) => a + statSync(join(dir, f)).size, 0);

function pct(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = Float64Array.from(xs).sort();
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
}

/** Servers still running: killed when this process exits (so a failed run leaves no orphan). */
const running = new Set<number>();
process.on('exit', () => { for (const pid of running) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } } });

async function serve(dir: string, extra: string[] = []): Promise<{ server: RunningProcess; listenMs: number; readyMs: number }> {
  const t0 = performance.now();
  const server = await startListening('svcdb', svcdbMain, ['serve', '--host', '127.0.0.1', '--port', '0', '--readers', '1', '--disk', dir, ...extra],
    { cpus: pin ? '0' : null, startTimeoutMs: 30 * 60_000 });
  running.add(server.pid);
  const listenMs = performance.now() - t0;
  for (let i = 0; i < 6000; i++) {
    const res = await fetch(`${server.url}/readyz`).catch(() => null);
    if (res?.status === 200) break;
    await sleep(10);
  }
  return { server, listenMs, readyMs: performance.now() - t0 };
}

/** Snapshot windows [start, end] seen in `dir`: a *.tmp appears, then a new snapshot-* file. */
function snapshotWatcher(dir: string): { windows: { start: number; end: number }[]; stop(): void } {
  const windows: { start: number; end: number }[] = [];
  const at0 = readdirSync(dir);
  const known = new Set(at0.filter((f) => f.startsWith('snapshot-') && !f.endsWith('.tmp')));
  const staleTmp = new Set(at0.filter((f) => f.endsWith('.tmp'))); // left by an earlier kill: not a running snapshot
  let open: number | null = null;
  const look = (): void => {
    const now = performance.now();
    let files: string[];
    try { files = readdirSync(dir); } catch { return; }
    if (open === null && files.some((f) => f.endsWith('.tmp') && !f.startsWith('writer.') && !staleTmp.has(f))) open = now;
    for (const f of files) {
      if (f.startsWith('snapshot-') && !f.endsWith('.tmp') && !known.has(f)) {
        known.add(f);
        windows.push({ start: open ?? now, end: now });
        open = null;
      }
    }
  };
  const w = watch(dir, () => look());
  const timer = setInterval(look, 5);
  return { windows, stop: () => { w.close(); clearInterval(timer); } };
}

/** SIGTERM and wait for the exit (a clean stop writes the final snapshot, which takes long at scale); SIGKILL only after `ms`. */
async function stopAndWait(server: RunningProcess, ms: number): Promise<number> {
  const t0 = performance.now();
  const gone = (): boolean => { try { process.kill(server.pid, 0); return false; } catch { return true; } };
  process.kill(server.pid, 'SIGTERM');
  while (!gone() && performance.now() - t0 < ms) await sleep(20);
  const took = performance.now() - t0;
  if (!gone()) log(`  !! the server did not stop within ${fmtMs(ms)}; killing it`);
  await server.stop();
  running.delete(server.pid);
  return took;
}

interface TraversalResult { oneHop: number; twoHop: number }

async function traversals(url: string, graph: Graph): Promise<TraversalResult> {
  const ids = Array.from(pickStartIds(graph, 512));
  const settings = { connections, threads: 1, durationSec, cpus: pin ? '1' : null };
  const one = await drive(url, ids.map(oneHopCount), settings, tool);
  const two = await drive(url, ids.map(twoHopDedupCount), settings, tool);
  if (one.errors + two.errors > 0) log(`  !! traversal errors: 1-hop ${one.errors}, 2-hop ${two.errors}`);
  return { oneHop: one.rps, twoHop: two.rps };
}

interface LoadOutcome { ms: number; edgesMs: number; nodesMs: number; edgesLoaded: number; error: string | null }

/** Load the graph chunk by chunk (as bench/load.ts), logging progress; a refused chunk ends the load and is reported. */
async function loadGraph(url: string, graph: Graph, progress: boolean): Promise<LoadOutcome> {
  const r: LoadOutcome = { ms: 0, edgesMs: 0, nodesMs: 0, edgesLoaded: 0, error: null };
  const step = defaultChunking.edgesPerChunk;
  let nextReport = 5_000_000;
  for (const chunk of loadChunks(graph, defaultChunking.nodesPerChunk, step)) {
    const t0 = performance.now();
    const res = await post(url, chunk.body);
    const ms = performance.now() - t0;
    if (res.status !== 200) {
      r.error = `chunk ${chunk.kind} refused after ${r.edgesLoaded.toLocaleString('en-US')} edges: ${res.status} ${res.body.slice(0, 200)}`;
      log(`  !! ${r.error}`);
      break;
    }
    if (chunk.kind === 'nodes') r.nodesMs += ms;
    else {
      r.edgesMs += ms;
      r.edgesLoaded = Math.min(graph.spec.edges, r.edgesLoaded + step);
      if (progress && r.edgesLoaded >= nextReport) {
        log(`    ${r.edgesLoaded.toLocaleString('en-US')} edges, ${fmtOps(r.edgesLoaded / (r.edgesMs / 1000))} edges/s so far`);
        nextReport += 5_000_000;
      }
    }
  }
  r.ms = r.nodesMs + r.edgesMs;
  return r;
}

async function main(): Promise<void> {
  const scratch = mkdtempSync(join(tmpdir(), 'svcdb-scale-'));
  const started = performance.now();
  const startLoad = loadavg().map((x) => x.toFixed(1)).join(' ');
  try {
    log(`scale bench: ${big.nodes} nodes / ${big.edges} edges vs ${small.nodes} / ${small.edges}; ${tool}, c=${connections}, ${durationSec} s runs, ${pin ? 'server on CPU 0, load generator on CPU 1' : 'unpinned'}`);
    // ------------------------------------------------------------ big graph
    let t = performance.now();
    let graph: Graph | null = generateGraph({ ...defaultGraphSpec, ...big });
    log(`  generated in ${fmtMs(performance.now() - t)}`);
    const dir = join(scratch, 'big');
    const loadArgs = opt['snapshot-wal-bytes'] !== undefined ? ['--snapshot-wal-bytes', opt['snapshot-wal-bytes']] : [];
    let { server } = await serve(dir, loadArgs);
    const rssEmpty = server.memory()?.rssMiB ?? NaN;
    const during = snapshotWatcher(dir);
    const load = await loadGraph(server.url, graph, true);
    during.stop();
    const edgesPerSec = load.edgesLoaded / (load.edgesMs / 1000);
    const mem = server.memory();
    log(`  load: ${fmtMs(load.ms)} (nodes ${fmtMs(load.nodesMs)}, edges ${fmtMs(load.edgesMs)} = ${fmtOps(edgesPerSec)} edges/s), ${during.windows.length} snapshot(s) during the load; VmRSS ${mem?.rssMiB.toFixed(0)} MiB (empty ${rssEmpty.toFixed(0)} MiB, peak ${mem?.hwmMiB.toFixed(0)} MiB); WAL ${(dirBytes(dir, 'wal-') / MiB).toFixed(0)} MiB`);
    t = performance.now();
    const stopMs = await stopAndWait(server, 30 * 60_000);
    // The newest snapshot only: the previous generation is kept beside it (docs/durability.md).
    const newestSnapshot = readdirSync(dir).filter((f) => /^snapshot-\d{10}\.bin$/.test(f)).sort().at(-1);
    const snapshotBytes = newestSnapshot === undefined ? 0 : statSync(join(dir, newestSnapshot)).size;
    log(`  clean stop (final snapshot) ${fmtMs(stopMs)}; snapshot ${(snapshotBytes / MiB).toFixed(1)} MiB; files ${readdirSync(dir).join(' ')}`);

    const writeSnap = Number(opt['write-snapshot-wal-bytes']);
    let restarted: Awaited<ReturnType<typeof serve>>;
    try {
      restarted = await serve(dir, ['--snapshot-wal-bytes', String(writeSnap)]);
    } catch (err) {
      const msg = (err as Error).message.split('\n').slice(0, 2).join(' ').slice(0, 300);
      log('');
      log(`== scale: ${big.nodes.toLocaleString('en-US')} nodes / ${load.edgesLoaded.toLocaleString('en-US')} edges loaded of ${big.edges.toLocaleString('en-US')} on --disk: RESTART FAILED ==`);
      log('');
      log(table(['measure', 'value', 'goal', 'verdict'], [
        ...(load.error ? [['LOAD FAILED', load.error.slice(0, 160), 'all edges load', 'MISSED']] : []),
        ['bulk load, edges (for_each over HTTP, durable)', `${fmtOps(edgesPerSec)} edges/s (${fmtMs(load.edgesMs)}; nodes ${fmtMs(load.nodesMs)}; ${during.windows.length} snapshots during the load)`, '>= 1M edges/s', edgesPerSec >= 1e6 ? 'met' : 'MISSED'],
        ['snapshot size', `${(snapshotBytes / MiB).toFixed(0)} MiB`, '-', '-'],
        ['clean stop incl. final snapshot', fmtMs(stopMs), '-', '-'],
        ['server VmRSS after the load / snapshot size', `${mem?.rssMiB.toFixed(0)} MiB / ${(snapshotBytes / MiB).toFixed(0)} MiB = ${((mem?.rssMiB ?? NaN) * MiB / snapshotBytes).toFixed(2)}x (peak ${mem?.hwmMiB.toFixed(0)} MiB)`, '<= 1.5x', (mem?.rssMiB ?? NaN) * MiB / snapshotBytes <= 1.5 ? 'met' : 'MISSED'],
        ['restart to ready', `FAILED: ${msg}`, '<= 1 s per 10M edges', 'MISSED'],
      ]));
      process.exitCode = 1;
      return;
    }
    server = restarted.server;
    const rssRestart = server.memory()?.rssMiB ?? NaN;
    log(`  restart: listening after ${fmtMs(restarted.listenMs)}, /readyz 200 after ${fmtMs(restarted.readyMs)}; VmRSS ${rssRestart.toFixed(0)} MiB`);

    // Write latency while snapshots run.
    const watcher = snapshotWatcher(dir);
    const writes: { start: number; end: number }[] = [];
    const until = performance.now() + (quick ? 30_000 : 180_000);
    let errors = 0;
    for (let i = 0; i < 500_000 && performance.now() < until; i++) {
      const start = performance.now();
      const res = await post(server.url, addUser(i));
      if (res.status !== 200) errors++;
      writes.push({ start, end: performance.now() });
      if (watcher.windows.length >= 2 && performance.now() > watcher.windows[1]!.end + 1000) break;
    }
    watcher.stop();
    const overlaps = (w: { start: number; end: number }) => watcher.windows.some((s) => w.start < s.end && w.end > s.start);
    const inSnap = writes.filter(overlaps).map((w) => w.end - w.start);
    const outSnap = writes.filter((w) => !overlaps(w)).map((w) => w.end - w.start);
    const snapMs = watcher.windows.map((s) => s.end - s.start);
    log(`  files after the write loop: ${readdirSync(dir).join(' ')}`);
    log(`  writes: ${writes.length} (${errors} errors), ${watcher.windows.length} snapshot(s) of ${snapMs.map((m) => fmtMs(m)).join(', ')}; during snapshots n=${inSnap.length} p50 ${pct(inSnap, 0.5).toFixed(1)} ms p99 ${pct(inSnap, 0.99).toFixed(1)} ms max ${Math.max(...inSnap, 0).toFixed(1)} ms; otherwise p50 ${pct(outSnap, 0.5).toFixed(2)} ms p99 ${pct(outSnap, 0.99).toFixed(2)} ms`);

    log('  traversals on the big graph ...');
    const bigT = await traversals(server.url, graph);
    const rssAfter = server.memory()?.rssMiB ?? NaN;
    await stopAndWait(server, 30 * 60_000);
    rmSync(dir, { recursive: true, force: true });
    graph = null;

    // ------------------------------------------------------------ small graph
    const smallGraph = generateGraph({ ...defaultGraphSpec, ...small });
    const sdir = join(scratch, 'small');
    const s = (await serve(sdir)).server;
    const smallLoad = await loadGraph(s.url, smallGraph, false);
    if (smallLoad.error) throw new Error(`small graph load failed: ${smallLoad.error}`);
    log('  traversals on the small graph ...');
    const smallT = await traversals(s.url, smallGraph);
    await stopAndWait(s, 120_000);

    // ------------------------------------------------------------ report
    const restartPer10M = restarted.readyMs / (load.edgesLoaded / 1e7);
    const rssRatio = (mem?.rssMiB ?? NaN) * MiB / snapshotBytes;
    const p99Snap = pct(inSnap, 0.99);
    // Minimal encoding, for scale: an edge needs its two endpoints (2 x 4 B) and an entry in
    // the out- and in-adjacency (2 x 4 B); a node its label (4 B), age (8 B), score (8 B) and
    // name (~10 B of text).
    const minimalBytes = load.edgesLoaded * 16 + big.nodes * 30;
    const verdict = (ok: boolean): string => (ok ? 'met' : 'MISSED');
    log('');
    log(`== scale: ${big.nodes.toLocaleString('en-US')} nodes / ${load.edgesLoaded.toLocaleString('en-US')} edges loaded of ${big.edges.toLocaleString('en-US')} on --disk (compare ${small.nodes.toLocaleString('en-US')} / ${small.edges.toLocaleString('en-US')}) ==`);
    log('');
    log(table(['measure', 'value', 'goal', 'verdict'], [
      ...(load.error ? [['LOAD FAILED', load.error.slice(0, 160), 'all edges load', 'MISSED']] : []),
      ['bulk load, edges (for_each over HTTP, durable)', `${fmtOps(edgesPerSec)} edges/s (${fmtMs(load.edgesMs)}; nodes ${fmtMs(load.nodesMs)}; ${during.windows.length} snapshots during the load)`, '>= 1M edges/s', verdict(edgesPerSec >= 1e6)],
      ['snapshot size', `${(snapshotBytes / MiB).toFixed(0)} MiB (minimal encoding ~${(minimalBytes / MiB).toFixed(0)} MiB)`, '-', '-'],
      ['clean stop incl. final snapshot', fmtMs(stopMs), '-', '-'],
      ['restart to ready (spawn -> /readyz 200)', `${fmtMs(restarted.readyMs)} (listening ${fmtMs(restarted.listenMs)}) = ${fmtMs(restartPer10M)} per 10M edges`, '<= 1 s per 10M edges', verdict(restartPer10M <= 1000)],
      ['server VmRSS after the load / snapshot size', `${mem?.rssMiB.toFixed(0)} MiB / ${(snapshotBytes / MiB).toFixed(0)} MiB = ${rssRatio.toFixed(2)}x (after restart ${rssRestart.toFixed(0)} MiB, after traversals ${rssAfter.toFixed(0)} MiB)`, '<= 1.5x', verdict(rssRatio <= 1.5)],
      ['write p99 while a snapshot runs (c=1, durable add_n)', `${p99Snap.toFixed(1)} ms (n=${inSnap.length}, max ${Math.max(...inSnap, 0).toFixed(0)} ms; snapshots ${snapMs.map((m) => fmtMs(m)).join(', ') || 'none seen'}; outside p99 ${pct(outSnap, 0.99).toFixed(2)} ms)`, '<= 50 ms', inSnap.length === 0 ? 'not measured' : verdict(p99Snap <= 50)],
      ['1-hop count, random start nodes', `${fmtOps(bigT.oneHop)} req/s vs ${fmtOps(smallT.oneHop)} on the small graph: small/big = ${(smallT.oneHop / bigT.oneHop).toFixed(2)}x`, '-', '-'],
      ['2-hop dedup count, random start nodes', `${fmtOps(bigT.twoHop)} req/s vs ${fmtOps(smallT.twoHop)} on the small graph: small/big = ${(smallT.twoHop / bigT.twoHop).toFixed(2)}x`, '-', '-'],
    ]));
    log(`(${tool}, c=${connections}, ${durationSec} s per traversal run; start ids: 512 nodes with out-degree between p10 and p99 of each graph; total ${fmtMs(performance.now() - started)}; load average at start ${startLoad}, at end ${loadavg().map((x) => x.toFixed(1)).join(' ')} on ${availableParallelism()} cores: other work on the machine slows every number here)`);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

main().then(() => process.exit(process.exitCode ?? 0), (err: unknown) => {
  process.stderr.write(`scale bench failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
