// `npm run bench`: generate the power-law graph, load it into svcdb (in-process and over
// HTTP) and graphology, run the in-process and HTTP scenarios, check the goals and print
// a compact table. Results also go to dist/bench/results.json.
//
// Options (after `npm run bench --`):
//   --quick              10k nodes / 100k edges, 3 s runs (smoke test of the harness)
//   --nodes N --edges M  graph size (default 100000 / 1000000)
//   --duration S         seconds per measured HTTP run (default 8), --warmup S (default 2)
//   --connections C      (default 64)   --threads T  wrk threads (default 1)
//   --readers N          svcdb reader threads (default 1 when pinned, else CPU count)
//   --no-pin             do not pin server (CPU 0) and load generator (CPU 1) with taskset
//   --tool wrk|autocannon  (default wrk when installed)
//   --no-http / --no-inprocess   run only one half
//   --scenarios K,K      only these HTTP scenarios (keys as in the table: point, point_rand,
//                        point_param, ...); the first one's bodies drive the bare server
//   --start-ids K        rotating start ids (default 512)
//   --flood-connections C  connections of pathological reads in the flood scenario (default 8;
//                        0 skips it): point lookups and /healthz idle vs under the flood
//   --wait-idle S        before each timed run wait up to S s (default 30) for other work
//                        on the machine to stop (2 cores: any neighbour skews the numbers)
//   --patience S         stop waiting and repeating S s (default 300) after the start; later
//                        runs are measured as they come and flagged when disturbed
//   --threshold P        a run during which other processes used more than P% of the
//                        machine (default 10) is repeated, up to --attempts (default 3)
//                        times; the least disturbed run is kept and its share reported
import { writeFileSync } from 'node:fs';
import { availableParallelism, cpus, totalmem } from 'node:os';
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { openDatabase, type Database } from '../src/index.js';
import { defaultGraphSpec, degreeSummary, generateGraph, neighbourhoodSizes, pickStartIds, type DegreeSummary } from './graph.js';
import { writeCharts } from './chart.js';
import { describeFlood, floodRows } from './flood.js';
import { runHttp, type HttpOutcome } from './http.js';
import { runEnginePhase, runPeerPhase } from './inprocess.js';
import { defaultChunking, loadGraphology, loadSvcdb, type LoadReport } from './load.js';
import { wrkAvailable } from './loadgen.js';
import { goals, httpScenarios, inProcessScenarios, type Results } from './scenarios.js';
import { repoRoot, svcdbAvailable } from './servers.js';
import { fmtMs, fmtOps, fmtRatio, fmtUs, hasCommand, log, procMemory, setPatienceDeadline, table } from './util.js';

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    nodes: { type: 'string' },
    edges: { type: 'string' },
    duration: { type: 'string' },
    warmup: { type: 'string' },
    connections: { type: 'string', default: '64' },
    threads: { type: 'string', default: '1' },
    readers: { type: 'string' },
    'no-pin': { type: 'boolean', default: false },
    tool: { type: 'string' },
    'no-http': { type: 'boolean', default: false },
    'no-inprocess': { type: 'boolean', default: false },
    scenarios: { type: 'string' },
    'start-ids': { type: 'string', default: '512' },
    'flood-connections': { type: 'string', default: '8' },
    'wait-idle': { type: 'string', default: '30' },
    patience: { type: 'string', default: '300' },
    attempts: { type: 'string', default: '3' },
    threshold: { type: 'string', default: '10' },
  },
});

const quick = opt.quick!;
const spec = {
  ...defaultGraphSpec,
  nodes: Number(opt.nodes ?? (quick ? 10_000 : defaultGraphSpec.nodes)),
  edges: Number(opt.edges ?? (quick ? 100_000 : defaultGraphSpec.edges)),
};
const pin = !opt['no-pin'] && availableParallelism() >= 2 && hasCommand('taskset');
const waitIdleMs = Number(opt['wait-idle']) * 1000;
const tool: 'wrk' | 'autocannon' = opt.tool === 'autocannon' || opt.tool === 'wrk' ? opt.tool : wrkAvailable() ? 'wrk' : 'autocannon';

/** A full GC between phases (npm runs us without --expose-gc). */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

/** Change of this process's RSS since `before` MiB (garbage included, so only indicative). */
function delta(before: number): string {
  const d = (procMemory(process.pid)?.rssMiB ?? 0) - before;
  return `${d >= 0 ? '+' : ''}${d.toFixed(0)} MiB`;
}

const pct = (x: number | null | undefined): string => (typeof x === 'number' ? `${(x * 100).toFixed(0)}%` : '-');

async function main(): Promise<void> {
  const started = performance.now();
  setPatienceDeadline(Date.now() + Number(opt.patience) * 1000);
  const cpuModel = cpus()[0]?.model ?? 'unknown CPU';
  const wrkVersion = wrkAvailable() ? (() => {
    try { return execFileSync('wrk', ['-v'], { encoding: 'utf8' }); } catch (e) { return String((e as { stdout?: string }).stdout ?? ''); }
  })().split('\n')[0]!.trim() : 'not installed';
  const git = (() => {
    try {
      const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: repoRoot, encoding: 'utf8' }).trim();
      const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'assembly'], { cwd: repoRoot, encoding: 'utf8' }).split('\n').filter(Boolean).length;
      return `${head}${dirty > 0 ? ` + ${dirty} uncommitted engine file(s)` : ''}`;
    } catch {
      return 'unknown revision';
    }
  })();
  log(`svcdb bench at ${git}: Node ${process.version}, ${availableParallelism()} cores (${cpuModel}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${wrkVersion}`);
  if (tool === 'autocannon') {
    log('wrk not found: falling back to autocannon (install wrk with `apt-get install -y wrk` for the reference numbers)');
  }

  // ---------------------------------------------------------------- graph
  const gen = performance.now();
  const graph = generateGraph(spec);
  const startIds = pickStartIds(graph, Number(opt['start-ids']));
  const genMs = performance.now() - gen;
  const outDeg = degreeSummary(graph.outDegree);
  const inDeg = degreeSummary(graph.inDegree);
  const startDeg = degreeSummary(Uint32Array.from(startIds, (id) => graph.outDegree[id]!));
  const dstr = (d: DegreeSummary): string => `min ${d.min} p50 ${d.p50} p90 ${d.p90} p99 ${d.p99} max ${d.max} mean ${d.mean.toFixed(1)}`;
  log(`graph: ${spec.nodes} nodes, ${spec.edges} edges, seed ${spec.seed}, Zipf out ${spec.outExponent} / in ${spec.inExponent}, generated in ${fmtMs(genMs)}`);
  log(`  out-degree ${dstr(outDeg)}; ${outDeg.zero} nodes without out-edges`);
  log(`  in-degree  ${dstr(inDeg)}`);
  const hood = neighbourhoodSizes(graph, startIds);
  const oneHopSizes = degreeSummary(hood.oneHop), twoHopSizes = degreeSummary(hood.twoHop);
  log(`  ${startIds.length} start ids (out-degree between p10 and p99), out-degree ${dstr(startDeg)}`);
  log(`    distinct 1-hop ${dstr(oneHopSizes)}`);
  log(`    distinct 2-hop ${dstr(twoHopSizes)}`);

  const results: Results = {};
  const loads: { name: string; report: LoadReport | { totalMs: number } }[] = [];
  let httpOutcome: HttpOutcome | undefined;

  // ---------------------------------------------------------------- in-process
  const measureOpts = { waitIdleMs, attempts: Number(opt.attempts), threshold: Number(opt.threshold) / 100 };
  if (!opt['no-inprocess']) {
    log('in-process: loading svcdb (embedded handle) ...');
    let db: Database | null = await openDatabase({ storage: 'memory' });
    const rssBefore = procMemory(process.pid)?.rssMiB ?? 0;
    const svcLoad = await loadSvcdb(graph, (body) => db!.queryRaw(body));
    loads.push({ name: 'svcdb in-process (db.queryRaw, JSON text)', report: svcLoad });
    log(`  ${fmtMs(svcLoad.totalMs)} (nodes ${fmtMs(svcLoad.nodesMs)}, edges ${fmtMs(svcLoad.edgesMs)}, ${svcLoad.requests} requests, slowest ${fmtMs(svcLoad.slowestMs)}); bench process RSS ${delta(rssBefore)}`);
    const inSettings = { timeMs: quick ? 300 : 1000, rounds: 3, warmupMs: quick ? 200 : 500, ...measureOpts };
    log('in-process: svcdb scenarios (tinybench) ...');
    const enginePhase = await runEnginePhase(inProcessScenarios, { graph, startIds, db }, inSettings);
    await db.close();
    db = null;
    collectGarbage();
    log('in-process: loading graphology MultiDirectedGraph ...');
    const rssBefore2 = procMemory(process.pid)?.rssMiB ?? 0;
    const peerLoad = loadGraphology(graph);
    loads.push({ name: 'graphology MultiDirectedGraph (addNode/addEdge)', report: { totalMs: peerLoad.ms } });
    log(`  ${fmtMs(peerLoad.ms)}; bench process RSS ${delta(rssBefore2)}`);
    log('in-process: graphology scenarios (tinybench) ...');
    results.inProcess = await runPeerPhase(inProcessScenarios, { graph, startIds, peer: peerLoad.graph }, enginePhase, inSettings);
    // Drop the peer before the HTTP half: this process stays idle there, but keep it small.
    (peerLoad as { graph: unknown }).graph = null;
    collectGarbage();
  }

  // ---------------------------------------------------------------- HTTP
  if (!opt['no-http']) {
    if (!svcdbAvailable()) {
      log('HTTP: dist/src/cli/main.js is missing (the server is not built yet); skipping the HTTP scenarios');
    } else {
      const readers = Number(opt.readers ?? (pin ? 1 : availableParallelism()));
      log(`HTTP: ${tool}, c=${opt.connections}, ${opt.threads} thread(s), ${pin ? 'server pinned to CPU 0, load generator to CPU 1' : 'unpinned'}, svcdb --readers ${readers}`);
      const keys = opt.scenarios?.split(',');
      const scenarios = keys === undefined ? httpScenarios : keys.map((key) => {
        const found = httpScenarios.find((x) => x.key === key);
        if (found === undefined) throw new Error(`--scenarios: no HTTP scenario ${key} (${httpScenarios.map((x) => x.key).join(', ')})`);
        return found;
      });
      httpOutcome = await runHttp(graph, { graph, startIds }, {
        connections: Number(opt.connections), threads: Number(opt.threads),
        durationSec: Number(opt.duration ?? (quick ? 3 : 8)), warmupSec: Number(opt.warmup ?? (quick ? 1 : 2)),
        cpus: pin ? '1' : null, serverCpus: pin ? '0' : null, readers, tool, chunking: defaultChunking, ...measureOpts,
        floodConnections: Number(opt['flood-connections']),
      }, scenarios);
      results.http = httpOutcome.results;
      loads.push({ name: 'svcdb over HTTP (POST /v2/query, sequential)', report: httpOutcome.load });
    }
  }

  // ---------------------------------------------------------------- report
  log('');
  log(`== results (${spec.nodes} nodes / ${spec.edges} edges, Node ${process.version}, ${availableParallelism()} cores) ==`);
  log('');
  log(table(['load', 'time', 'requests'], loads.map((l) => [l.name, fmtMs(l.report.totalMs), 'requests' in l.report ? String(l.report.requests) : '-'])));
  if (results.http) {
    log('');
    const h = results.http;
    log(table(['HTTP scenario', 'req/s', 'p50', 'p99', 'vs bare', 'errors', 'other load'], [
      ['bare uWS, fixed JSON (mean of the runs before and after svcdb)', fmtOps(h.bare.rps), fmtUs(h.bare.p50us), fmtUs(h.bare.p99us), '1.00x', String(h.bare.errors), pct(h.bareForeign)],
      ...(h.bareRuns ?? []).map((r, i) => [`  bare uWS, ${i === 0 ? 'before' : 'after'} the svcdb scenarios`, fmtOps(r.rps), fmtUs(r.p50us), fmtUs(r.p99us), fmtRatio(r.rps / h.bare.rps), String(r.errors), '-']),
      ...(h.bareBuilt ? [['bare uWS, bodies built per request (client cost)', fmtOps(h.bareBuilt.rps), fmtUs(h.bareBuilt.p50us), fmtUs(h.bareBuilt.p99us), fmtRatio(h.bareBuilt.rps / h.bare.rps), String(h.bareBuilt.errors), '-']] : []),
      ...h.rows.map((r) => [r.title, fmtOps(r.result.rps), fmtUs(r.result.p50us), fmtUs(r.result.p99us), fmtRatio(r.ratioToBare), String(r.result.errors), pct(r.foreign)]),
    ]));
    log(`server VmRSS: ${h.rssEmptyMiB?.toFixed(1)} MiB empty, ${h.rssLoadedMiB?.toFixed(1)} MiB after the load, ${h.rssSettledMiB?.toFixed(1)} MiB after the read scenarios, ${h.rssAfterMiB?.toFixed(1)} MiB at the end (VmHWM ${h.hwmMiB?.toFixed(1)} MiB)`);
    if (h.flood !== undefined) {
      log('');
      if ('error' in h.flood) log(`flood scenario failed: ${h.flood.error}`);
      else {
        log(table(['flood: one client while other connections send pathological reads', 'idle', 'under the flood', 'flood / idle'], floodRows(h.flood)));
        log(describeFlood(h.flood));
        log(`other load: idle ${pct(h.flood.idle.foreign)}, flood ${pct(h.flood.flood.foreign)}`);
      }
    }
  }
  if (results.inProcess) {
    log('');
    log(table(['in-process scenario', 'svcdb ops/s', 'peer', 'peer ops/s', 'svcdb/peer', 'verified', 'other load'], results.inProcess.map((r) => [
      r.title, fmtOps(r.engineOps), r.peerName ?? '-', r.peerOps !== undefined ? fmtOps(r.peerOps) : '-', r.ratio !== undefined ? fmtRatio(r.ratio) : '-', r.verified,
      `${pct(r.foreign)} / ${pct(r.peerForeign)}`,
    ])));
  }
  log('"other load" = CPU used by processes other than the bench, its load generator and the server during the timed run, as a share of the machine.');
  log('');
  const goalRows = goals.map((g) => {
    const v = g.measure(results);
    if (v === undefined) return [g.label, `${g.better === 'higher' ? '>=' : '<='} ${Number(g.target.toFixed(1))}${g.unit === 'x' ? 'x' : ' MiB'}`, 'not measured', '-'];
    const met = g.better === 'higher' ? v >= g.target : v <= g.target;
    const shown = g.unit === 'x' ? fmtRatio(v) : `${v.toFixed(1)} MiB`;
    const over = g.unit === 'x' ? `${fmtRatio(v / g.target)} the target` : `${(v - g.target).toFixed(1)} MiB over`;
    const verdict = met ? 'met' : g.better === 'higher' ? `MISSED (reached ${((v / g.target) * 100).toFixed(0)}% of target)` : `MISSED (${over})`;
    return [g.label, `${g.better === 'higher' ? '>=' : '<='} ${Number(g.target.toFixed(1))}${g.unit === 'x' ? 'x' : ' MiB'}`, shown, verdict];
  });
  log(table(['goal', 'target', 'measured', 'verdict'], goalRows));
  const limit = measureOpts.threshold;
  const disturbed = [
    ...(results.http && (results.http.bareForeign ?? 0) > limit ? ['HTTP bare uWS'] : []),
    ...(results.http?.rows ?? []).filter((r) => (r.foreign ?? 0) > limit).map((r) => `HTTP ${r.key}`),
    ...(results.inProcess ?? []).filter((r) => (r.foreign ?? 0) > limit || (r.peerForeign ?? 0) > limit).map((r) => `in-process ${r.key}`),
  ];
  if (disturbed.length > 0) {
    log(`!! disturbed by other processes (> ${(limit * 100).toFixed(0)}% of the machine) even after retries: ${disturbed.join(', ')}; re-run on a quiet machine`);
  }
  log('');
  log(`total bench time ${fmtMs(performance.now() - started)}`);

  const out = fileURLToPath(new URL('./results.json', import.meta.url));
  writeFileSync(out, JSON.stringify({
    date: new Date().toISOString(), revision: git, node: process.version, cores: availableParallelism(), cpu: cpuModel, wrk: wrkVersion, tool, pinned: pin,
    graph: { spec, outDegree: outDeg, inDegree: inDeg, startIds: startIds.length, startOutDegree: startDeg, startOneHop: oneHopSizes, startTwoHop: twoHopSizes },
    loads, results, serverCommand: httpOutcome?.serverCommand, bareCommand: httpOutcome?.bareCommand,
  }, null, 2));
  log(`results written to ${out}`);
  const about = `${spec.nodes} nodes / ${spec.edges} edges, ${quick ? '--quick, ' : ''}${git}, Node ${process.version}, ${pin ? 'pinned' : 'unpinned'}, c=${opt.connections}`;
  for (const file of writeCharts(results, dirname(out), about)) log(`chart written to ${file}`);
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
