// The flood scenario (issue 10, "no query can take the server down"): does a server busy
// with pathological reads still answer a point lookup and /healthz quickly?
//
// On the HTTP server of http.ts, after every other scenario (it adds data):
//   1. load a complete bipartite 300x300 subgraph (DenseA -> DenseB, 90,000 DENSE edges);
//   2. idle reference: one client alternates the `point` scenario's lookups and GET /healthz
//      (10 ms apart) for the run's duration and records every latency;
//   3. flood: a child process (flood-client.ts, pinned like the load generator) keeps
//      `connections` connections busy with the bodies of queries.ts floodBodies (3-hop
//      `both` counts on the dense subgraph and from the busiest node, out.in.out, a repeat of
//      10,000 hops) while the same client measures the same way again.
// Reported as flood / idle ratios of lookup p50 and p99 and of /healthz p99, with what the
// flood's requests got back (answers, deadline errors, 503s, no answer).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Graph } from './graph.js';
import { denseEdges, denseNodes, floodBodies, idsOfLabel, pointLookup } from './queries.js';
import type { RunningProcess } from './servers.js';
import { foreignLoadMeter, log, sleep, waitForQuiet } from './util.js';

export interface FloodSettings {
  durationSec: number;
  /** Flood connections. */
  connections: number;
  /** CPU list for the flood process (taskset), or null. */
  cpus: string | null;
  waitIdleMs: number;
  threshold: number;
}

/** Latencies of one measuring run, ms. Requests without a 200 answer count with the time they took. */
export interface ProbeRun {
  lookupMs: number[];
  healthzMs: number[];
  /** Lookups / healthz requests answered with anything but 200, or not at all within PROBE_TIMEOUT_MS. */
  failed: number;
  /** Share of the machine used by other processes during the run (0..1). */
  foreign: number | null;
}

export interface FloodResult {
  connections: number;
  durationSec: number;
  idle: ProbeRun;
  flood: ProbeRun;
  /** What the flood's requests got: "200", "500 query_deadline_exceeded", "0 no answer", ... */
  floodAnswers: Record<string, number>;
  floodRequests: number;
  /** GET /healthz right after the flood answered 200 within PROBE_TIMEOUT_MS. */
  answersAfter: boolean;
}

const DENSE_SIDE = 300;
const PROBE_PAUSE_MS = 10;
/** A probe that gets no answer within this is counted as failed (with this latency). */
const PROBE_TIMEOUT_MS = 5_000;
/** The flood runs this long before the probe starts measuring. */
const FLOOD_RAMP_MS = 300;
const floodClient = fileURLToPath(new URL('./flood-client.js', import.meta.url));

export const percentile = (xs: number[], p: number): number => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

async function timed(url: string, path: string, body: string | null): Promise<{ ok: boolean; ms: number }> {
  const t0 = performance.now();
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), PROBE_TIMEOUT_MS);
  try {
    const res = await fetch(`${url}${path}`, body === null ? { signal: abort.signal }
      : { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: abort.signal });
    await res.arrayBuffer();
    return { ok: res.status === 200, ms: performance.now() - t0 };
  } catch {
    return { ok: false, ms: performance.now() - t0 };
  } finally {
    clearTimeout(timer);
  }
}

/** One client, one request at a time: a lookup, /healthz, a pause, for `durationMs`. */
async function probe(url: string, lookups: string[], durationMs: number, pids: number[]): Promise<ProbeRun> {
  const meter = foreignLoadMeter(pids);
  const run: ProbeRun = { lookupMs: [], healthzMs: [], failed: 0, foreign: null };
  const until = performance.now() + durationMs;
  for (let i = 0; performance.now() < until; i++) {
    const l = await timed(url, '/v2/query', lookups[i % lookups.length]!);
    run.lookupMs.push(l.ms);
    const h = await timed(url, '/healthz', null);
    run.healthzMs.push(h.ms);
    run.failed += (l.ok ? 0 : 1) + (h.ok ? 0 : 1);
    await sleep(PROBE_PAUSE_MS);
  }
  run.foreign = meter.stop();
  return run;
}

async function post(url: string, body: string): Promise<string> {
  const res = await fetch(`${url}/v2/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(60_000) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`flood setup: ${res.status} ${text.slice(0, 300)}`);
  return text;
}

/** The node with the most edges (in + out) of the generated graph: node IDs are its indexes. */
function busiest(g: Graph): number {
  let best = 0;
  for (let i = 1; i < g.spec.nodes; i++) if (g.outDegree[i]! + g.inDegree[i]! > g.outDegree[best]! + g.inDegree[best]!) best = i;
  return best;
}

export async function runFlood(p: RunningProcess, graph: Graph, startIds: Uint32Array, s: FloodSettings): Promise<FloodResult> {
  await post(p.url, denseNodes('DenseA', DENSE_SIDE));
  await post(p.url, denseNodes('DenseB', DENSE_SIDE));
  const a = (JSON.parse(await post(p.url, idsOfLabel('DenseA'))) as { r: number[] }).r;
  const b = (JSON.parse(await post(p.url, idsOfLabel('DenseB'))) as { r: number[] }).r;
  for (let i = 0; i < a.length; i += 100) await post(p.url, denseEdges(a.slice(i, i + 100), b));
  const lookups = Array.from(startIds, (id) => pointLookup(id));
  const durationMs = s.durationSec * 1000;

  await waitForQuiet(s.waitIdleMs, s.threshold);
  const idle = await probe(p.url, lookups, durationMs, [p.pid]);

  const dir = mkdtempSync(join(tmpdir(), 'svcdb-flood-'));
  try {
    const file = join(dir, 'bodies.json');
    writeFileSync(file, JSON.stringify(floodBodies(a, busiest(graph))));
    await waitForQuiet(s.waitIdleMs, s.threshold);
    const args = [floodClient, p.url, file, String(s.connections), String(FLOOD_RAMP_MS + durationMs)];
    const [cmd, argv] = s.cpus !== null ? ['taskset', ['-c', s.cpus, process.execPath, ...args]] : [process.execPath, args];
    const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    await sleep(FLOOD_RAMP_MS);
    // The flood process is ours: its CPU is not "other load".
    const flood = await probe(p.url, lookups, durationMs, [p.pid, child.pid ?? -1]);
    await exited;
    const summary = JSON.parse(stdout.trim().split('\n').pop() || '{"requests":0,"answers":{}}') as { requests: number; answers: Record<string, number> };
    const answersAfter = (await timed(p.url, '/healthz', null)).ok;
    return { connections: s.connections, durationSec: s.durationSec, idle, flood, floodAnswers: summary.answers, floodRequests: summary.requests, answersAfter };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const ms = (x: number): string => (Number.isNaN(x) ? '-' : x >= 1000 ? `${(x / 1000).toFixed(2)} s` : x >= 10 ? `${x.toFixed(1)} ms` : `${x.toFixed(2)} ms`);
const ratio = (x: number, ref: number): string => (Number.isFinite(x / ref) ? `${(x / ref).toFixed(x / ref >= 100 ? 0 : x / ref >= 10 ? 1 : 2)}x` : 'n/a');

/** Rows for the report table: figure, idle, under the flood, flood / idle. */
export function floodRows(r: FloodResult): string[][] {
  // A probe that timed out counts with the timeout: the figure is then a lower bound.
  const shown = (x: number): string => (x >= PROBE_TIMEOUT_MS ? `>= ${ms(x)} (no answer)` : ms(x));
  const row = (name: string, idle: number[], flood: number[], p: number): string[] => {
    const i = percentile(idle, p), f = percentile(flood, p);
    return [name, shown(i), shown(f), `${f >= PROBE_TIMEOUT_MS ? '>= ' : ''}${ratio(f, i)}`];
  };
  return [
    row('point lookup p50', r.idle.lookupMs, r.flood.lookupMs, 50),
    row('point lookup p99', r.idle.lookupMs, r.flood.lookupMs, 99),
    row('GET /healthz p99', r.idle.healthzMs, r.flood.healthzMs, 99),
  ];
}

export function describeFlood(r: FloodResult): string {
  const answers = Object.entries(r.floodAnswers).sort((x, y) => y[1] - x[1]).map(([k, n]) => `${k}: ${n}`).join(', ') || 'none';
  return `flood: ${r.connections} connections for ${r.durationSec} s, ${r.floodRequests} requests (${answers}); probes without a 200 within ${PROBE_TIMEOUT_MS / 1000} s: idle ${r.idle.failed}, flood ${r.flood.failed} (of ${r.flood.lookupMs.length * 2}); /healthz right after: ${r.answersAfter ? 'answered' : 'NO ANSWER'}`;
}

export const logFlood = (r: FloodResult): void => {
  for (const [name, idle, flood, x] of floodRows(r)) log(`  flood ${name}: idle ${idle}, under the flood ${flood} (${x})`);
  log(`  ${describeFlood(r)}`);
};
