// Where the microseconds of one 1-hop rows request go, in process (issue 13: "1-hop with
// rows"): the body the bench sends (bench/queries.ts oneHopRowsParam: `value_map` of at
// most 100 out-neighbours over FOLLOWS, the start ID as a parameter, one per request at
// random) through executeRequest exactly as the server's inline-read path calls it
// (src/server/inline-reads.ts), on the 100k/1M bench graph.
//
// Usage: node dist/bench/rows-profile.js [--rounds 7] [--ms 400] [--baseline DIST]
//   [--profile FILE.cpuprofile] [--alloc] [--requests 4000] [--scenario 1hop_rows|point_param]
// Timing: median CPU microseconds per request (process.cpuUsage: this thread plus V8's
// helper threads) of `rounds` rounds; with --baseline (another build's `dist`, e.g. of the
// commit before a change) the two builds alternate within every round and every answer
// of both is compared first. --profile: a CPU profile (node:inspector) of `requests`
// requests, its self time summed per function and per source file. --alloc: V8's
// sampling heap profiler over `requests` requests, counting objects that died young too:
// the bytes each function allocates per request (the garbage a server's scavenges collect).
// --scenario point_param: the parameterized point lookup instead of the 1-hop rows.
import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Store } from '../src/store/store.js';
import { executeRequest, execOptions, noFlags } from '../src/exec/request.js';
import { limits } from '../src/limits.js';
import { generateGraph, rng } from './graph.js';
import { addEdgesChunk, addNodesChunk, fill, oneHopRowsParam, pointLookupParam } from './queries.js';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '7' },
    ms: { type: 'string', default: '400' },
    baseline: { type: 'string' },
    profile: { type: 'string' },
    requests: { type: 'string', default: '4000' },
    alloc: { type: 'boolean', default: false },
    scenario: { type: 'string', default: '1hop_rows' },
  },
});

interface Build { Store: typeof Store; executeRequest: typeof executeRequest; execOptions: typeof execOptions }
type Request = (body: string) => string;

const graph = generateGraph();
const nodes = graph.spec.nodes;

function open(build: Build): Request {
  const store = build.Store.create();
  const load = (body: string): void => {
    const out = build.executeRequest(store, body, noFlags, 'writer');
    if (!('status' in out) || out.status !== 200) throw new Error(`load failed: ${JSON.stringify(out).slice(0, 300)}`);
  };
  for (let i = 0; i < nodes; i += 25_000) load(addNodesChunk(graph, i, Math.min(nodes, i + 25_000)));
  for (let e = 0; e < graph.spec.edges; e += 50_000) load(addEdgesChunk(graph, e, Math.min(graph.spec.edges, e + 50_000)));
  const inline = build.execOptions({ queryTimeoutMs: 30_000, inlineWorkMax: limits.inlineReadWorkMax });
  return (body) => {
    const out = build.executeRequest(store, body, noFlags, 'reader', inline);
    if (!('status' in out)) throw new Error('forwarded to the pool');
    if (out.status !== 200) throw new Error(`request failed: ${out.body.slice(0, 300)}`);
    return out.body;
  };
}

async function importBuild(dist: string): Promise<Build> {
  const at = (path: string): string => pathToFileURL(resolve(dist, path)).href;
  const [s, r] = await Promise.all([import(at('src/store/store.js')), import(at('src/exec/request.js'))]);
  return { Store: s.Store, executeRequest: r.executeRequest, execOptions: r.execOptions };
}

const self = open({ Store, executeRequest, execOptions });
const base = args.baseline === undefined ? null : open(await importBuild(args.baseline));
const random = rng(0x1407);
const BODIES = 16_384; // more distinct bodies than the plan cache holds, as the bench's random starts
const templates = { '1hop_rows': oneHopRowsParam, point_param: pointLookupParam } as const;
if (!(args.scenario in templates)) throw new Error(`--scenario: one of ${Object.keys(templates).join(', ')}`);
const template = templates[args.scenario as keyof typeof templates](nodes);
const bodies = Array.from({ length: BODIES }, () => fill(template, [Math.floor(random() * nodes)]));

let sink = 0, rows = 0;
for (const body of bodies.slice(0, 2048)) {
  const mine = self(body);
  rows += (mine.match(/"\$id"/g) ?? []).length;
  if (base !== null && base(body) !== mine) throw new Error(`answers differ for ${body}:\n${base(body).slice(0, 400)}\n${mine.slice(0, 400)}`);
}
console.log(`${rows / 2048} rows per request on average${base === null ? '' : '; 2,048 answers equal to the baseline\'s'}`);

/** CPU nanoseconds per request over about `ms` ms of CPU. */
function time(run: Request, ms: number): number {
  let calls = 0, i = 0, used = 0;
  const t0 = process.cpuUsage();
  while (used < ms * 1000) {
    for (let k = 0; k < 64; k++) {
      sink += run(bodies[i]!).length;
      if (++i === BODIES) i = 0;
    }
    calls += 64;
    const t = process.cpuUsage(t0);
    used = t.user + t.system;
  }
  return (used * 1000) / calls;
}

const inspector = (): ((method: string, params?: object) => Promise<unknown>) => {
  const session = new Session();
  session.connect();
  return (method, params) => new Promise((done, fail) => session.post(method, params ?? {}, (err, res) => (err ? fail(err) : done(res))));
};

if (args.alloc) {
  for (let i = 0; i < 3000; i++) sink += self(bodies[i]!).length; // warm-up
  const post = inspector();
  await post('HeapProfiler.enable');
  await post('HeapProfiler.startSampling', { samplingInterval: 256, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  const n = Number(args.requests);
  for (let i = 0; i < n; i++) sink += self(bodies[(i * 7) % BODIES]!).length;
  const { profile } = await post('HeapProfiler.stopSampling') as { profile: { head: AllocationNode } };
  summarizeAllocations(profile.head, n);
} else if (args.profile !== undefined) {
  for (let i = 0; i < 3000; i++) sink += self(bodies[i]!).length; // warm-up
  const post = inspector();
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 50 });
  await post('Profiler.start');
  const n = Number(args.requests);
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) sink += self(bodies[(i * 7) % BODIES]!).length;
  const c = process.cpuUsage(c0);
  const { profile } = await post('Profiler.stop') as { profile: Profile };
  writeFileSync(args.profile, JSON.stringify(profile));
  summarize(profile, (c.user + c.system) / n);
} else {
  const runs: [string, Request][] = base === null ? [['this build', self]] : [['baseline', base], ['this build', self]];
  for (const [, run] of runs) time(run, 300);
  const samples = runs.map(() => [] as number[]);
  for (let r = 0; r < Number(args.rounds); r++) runs.forEach(([, run], k) => samples[k]!.push(time(run, Number(args.ms))));
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  console.log(`${args.rounds} interleaved rounds of ${args.ms} ms CPU, median CPU us per request (min..max)`);
  runs.forEach(([name], k) => {
    const xs = samples[k]!;
    console.log(`${(median(xs) / 1000).toFixed(1).padStart(7)} us  (${(Math.min(...xs) / 1000).toFixed(1)}..${(Math.max(...xs) / 1000).toFixed(1)})  ${name}`);
  });
  if (base !== null) {
    const ratios = samples[0]!.map((a, i) => a / samples[1]![i]!);
    console.log(`baseline / this build per round: ${ratios.map((x) => x.toFixed(2)).join(' ')}, median ${median(ratios).toFixed(2)}`);
  }
}
if (sink === 0) console.log('');

interface Profile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }[];
  samples: number[];
  timeDeltas: number[];
}

/** Self time per function and per file, as a share of the profile and in us per request. */
function summarize(p: Profile, cpuUsPerRequest: number): void {
  // The profiler's own stop (a native `dispatch` under node:inspector's post) is no request's time.
  const profiler = new Set(p.nodes.filter((n) => n.callFrame.url === 'node:inspector').flatMap((n) => n.children ?? []));
  const self = new Map<number, number>();
  let total = 0;
  p.samples.forEach((id, i) => {
    if (profiler.has(id)) return;
    const d = p.timeDeltas[i]!;
    self.set(id, (self.get(id) ?? 0) + d);
    total += d;
  });
  const byFn = new Map<string, number>(), byFile = new Map<string, number>();
  for (const node of p.nodes) {
    const t = self.get(node.id) ?? 0;
    if (t === 0) continue;
    const file = node.callFrame.url.replace(/^.*\/dist\//, '') || '(native)';
    const fn = `${node.callFrame.functionName || '(anonymous)'} ${file}:${node.callFrame.lineNumber + 1}`;
    byFn.set(fn, (byFn.get(fn) ?? 0) + t);
    byFile.set(file, (byFile.get(file) ?? 0) + t);
  }
  const perRequest = (t: number): string => `${((t / total) * cpuUsPerRequest).toFixed(2).padStart(7)} us ${((100 * t) / total).toFixed(1).padStart(5)}%`;
  console.log(`profile: ${cpuUsPerRequest.toFixed(1)} CPU us per request (during profiling), self time:`);
  console.log('by file:');
  for (const [k, t] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, 20)) console.log(`${perRequest(t)}  ${k}`);
  console.log('by function:');
  for (const [k, t] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, 45)) console.log(`${perRequest(t)}  ${k}`);
}

interface AllocationNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: AllocationNode[];
}

/** Bytes allocated per request by each function (sampled), largest first. */
function summarizeAllocations(head: AllocationNode, requests: number): void {
  const byFn = new Map<string, number>();
  let total = 0;
  const nameOf = (node: AllocationNode): string => {
    const file = node.callFrame.url.replace(/^.*\/dist\//, '') || '(native)';
    return `${node.callFrame.functionName || '(anonymous)'} ${file}:${node.callFrame.lineNumber + 1}`;
  };
  // A native function (Map, join, ...) is named with its caller: which Map is what matters.
  const visit = (node: AllocationNode, caller: string): void => {
    const name = nameOf(node);
    if (node.selfSize > 0) {
      const fn = node.callFrame.url === '' ? `${name} <- ${caller}` : name;
      byFn.set(fn, (byFn.get(fn) ?? 0) + node.selfSize);
      total += node.selfSize;
    }
    for (const child of node.children) visit(child, name);
  };
  visit(head, '(root)');
  console.log(`allocated ${(total / requests).toFixed(0)} bytes per request (sampled), by function:`);
  for (const [k, b] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`${(b / requests).toFixed(0).padStart(7)} B  ${k}`);
}
