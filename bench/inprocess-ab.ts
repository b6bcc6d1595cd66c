// Before/after of the in-process traversal scenarios in ONE process (issue 13 item 6):
// `node dist/bench/inprocess-ab.js <baseline root> [rounds] [ms]`, where <baseline root> is
// the `dist` directory of another build of svcdb (e.g. `git archive <rev>` built in /tmp).
// This build (B), the baseline (A) and graphology each hold the 100k/1M bench graph; rounds
// of tinybench (as bench/inprocess.ts times them) alternate A, B and graphology per
// scenario, so the three share every disturbance of the shared machine. Reported per
// scenario: medians of wall-clock ops/s and of ops per CPU second of this process (less
// sensitive to other processes on the cores), and the per-round ratios B/graphology and B/A.
// Every answer of A and B is compared before timing (and 1-hop / 2-hop with graphology).
// The `floor` row, count(nodes([id])), is what a request costs with (almost) nothing to
// execute: parsing is cached, so it is the plan-cache lookup, the read's setup and the
// rendering every scenario pays; graphology has no counterpart (its column shows the 2-hop
// peer's rate again, for the ratio of that floor to the 2-hop budget).
import { Bench } from 'tinybench';
import { generateGraph, pickStartIds } from './graph.js';
import { loadGraphology, loadSvcdb } from './load.js';
import * as q from './queries.js';
import { log, table } from './util.js';

interface Handle { queryRaw(body: string): Promise<{ status: number; body: string }> }
interface Rate { wall: number; cpu: number }

const [baselineRoot, roundsArg, msArg] = process.argv.slice(2);
if (baselineRoot === undefined) throw new Error('usage: node dist/bench/inprocess-ab.js <baseline dist root> [rounds] [ms]');
const rounds = Number(roundsArg ?? 7), roundMs = Number(msArg ?? 300);

async function open(root: string): Promise<Handle> {
  const { openDatabase } = await import(root) as { openDatabase(o: { storage: 'memory' }): Promise<Handle> };
  return openDatabase({ storage: 'memory' });
}

async function rate(fn: () => unknown): Promise<Rate> {
  const bench = new Bench({ time: roundMs, warmup: false, throws: true });
  bench.add('x', fn);
  const cpu0 = process.cpuUsage();
  await bench.run();
  const cpu = process.cpuUsage(cpu0);
  const task = bench.getTask('x')!;
  const result = task.result as { period: number };
  return { wall: 1000 / result.period, cpu: task.runs / ((cpu.user + cpu.system) / 1e6) };
}

/** count(nodes([id])): one source row, nothing to navigate. */
const nodeCount = (id: number): string => JSON.stringify({ request_type: 'read', query: { read: { entries: [{ query: { name: 'r', root: { count: { input: { nodes: { reference: { ids: [id] } } } } } } }], returns: ['r'] } } });

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const fmt = (x: number): string => (x >= 1e6 ? `${(x / 1e6).toFixed(2)}M` : `${(x / 1e3).toFixed(1)}k`);

async function main(): Promise<void> {
  const graph = generateGraph();
  const ids = Array.from(pickStartIds(graph, 512));
  const before = await open(`${baselineRoot}/src/index.js`);
  const after = await open(new URL('../src/index.js', import.meta.url).href);
  await loadSvcdb(graph, (b) => before.queryRaw(b));
  await loadSvcdb(graph, (b) => after.queryRaw(b));
  const peer = loadGraphology(graph).graph;
  const outCount = (key: string): number => { let n = 0; peer.forEachOutNeighbor(key, () => { n++; }); return n; };
  const twoHop = (key: string): number => {
    const seen = new Set<string>();
    peer.forEachOutNeighbor(key, (mid) => { peer.forEachOutNeighbor(mid, (far) => { seen.add(far); }); });
    return seen.size;
  };
  // The peer computations of bench/scenarios.ts.
  const scenarios: { key: string; bodies: string[]; peer: (() => unknown)[] }[] = [
    { key: 'point', bodies: ids.map(q.pointLookup), peer: ids.map((id) => () => ({ $id: id, ...peer.getNodeAttributes(String(id)) })) },
    { key: '1hop', bodies: ids.map(q.oneHopCount), peer: ids.map((id) => () => outCount(String(id))) },
    { key: '2hop', bodies: ids.map(q.twoHopDedupCount), peer: ids.map((id) => () => twoHop(String(id))) },
    { key: 'floor', bodies: ids.map(nodeCount), peer: ids.map((id) => () => twoHop(String(id))) },
  ];
  for (const s of scenarios) {
    for (let i = 0; i < ids.length; i++) {
      const a = await before.queryRaw(s.bodies[i]!), b = await after.queryRaw(s.bodies[i]!);
      if (a.status !== 200 || a.body !== b.body) throw new Error(`${s.key} case ${i}: baseline ${a.body} vs this build ${b.body}`);
      if (s.key !== 'point' && s.key !== 'floor' && (JSON.parse(b.body) as { r: unknown }).r !== s.peer[i]!()) throw new Error(`${s.key} case ${i}: graphology differs`);
    }
  }
  const engine = (db: Handle, bodies: string[]) => {
    let i = 0;
    return async () => {
      const r = await db.queryRaw(bodies[i]!);
      if (++i === bodies.length) i = 0;
      if (r.status !== 200) throw new Error(r.body);
    };
  };
  const cycle = (fns: (() => unknown)[]) => {
    let j = 0;
    return () => {
      fns[j]!();
      if (++j === fns.length) j = 0;
    };
  };
  const rows: string[][] = [];
  for (const s of scenarios) {
    const a: Rate[] = [], b: Rate[] = [], g: Rate[] = [];
    for (let round = 0; round <= rounds; round++) { // round 0 warms up
      const ra = await rate(engine(before, s.bodies)), rb = await rate(engine(after, s.bodies)), rg = await rate(cycle(s.peer));
      if (round > 0) { a.push(ra); b.push(rb); g.push(rg); }
    }
    for (const m of ['wall', 'cpu'] as const) {
      const bg = b.map((x, i) => x[m] / g[i]![m]), ag = a.map((x, i) => x[m] / g[i]![m]), ba = b.map((x, i) => x[m] / a[i]![m]);
      rows.push([s.key, m, fmt(median(a.map((x) => x[m]))), fmt(median(b.map((x) => x[m]))), fmt(median(g.map((x) => x[m]))),
        median(ag).toFixed(2), median(bg).toFixed(2), median(ba).toFixed(2), bg.map((x) => x.toFixed(2)).join(' ')]);
    }
  }
  log(`in-process A/B: baseline ${baselineRoot} (A) vs this build (B) vs graphology, ${rounds} interleaved rounds of ${roundMs} ms, medians`);
  log(table(['scenario', 'clock', 'A ops/s', 'B ops/s', 'graphology', 'A / g', 'B / g', 'B / A', 'B / g per round'], rows));
}

await main();
process.exit(0);
