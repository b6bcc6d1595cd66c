// Where the microseconds of one point lookup go, in process (issue 13 item 2): the bodies
// clients send (bench/queries.ts: a random literal ID in the query text, or one query text
// with the ID in `parameters`) through executeRequest exactly as the server's inline-read
// path calls it (src/server/inline-reads.ts), and each stage of envelope.md §6 timed on its
// own over the same bodies: JSON parse, decode, plan, execute + render.
//
// Usage: node dist/bench/request-phases.js [--nodes 100000] [--rounds 5] [--ms 400]
//   [--only TEXT] [--baseline DIST]
// Every figure is the median of `rounds` interleaved rounds (all phases once per round), so
// a burst of load on the shared machine moves every phase of a round alike. --baseline
// names another build's `dist` directory (e.g. of the commit before a change): its
// executeRequest, on its own store, runs the whole-request phases in the same rounds, and
// the table gives this build / baseline.
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Store } from '../src/store/store.js';
import { executeRequest, execOptions, noFlags, planningCatalog } from '../src/exec/request.js';
import { decodeRequest } from '../src/protocol/decode.js';
import { parseJson } from '../src/protocol/json.js';
import { planRequest } from '../src/plan/plan.js';
import { currentView } from '../src/index/view.js';
import { limits } from '../src/limits.js';
import { generateGraph, rng } from './graph.js';
import { addNodesChunk, fill, pointLookupLiteral, pointLookupParam } from './queries.js';

const { values: args } = parseArgs({
  options: {
    nodes: { type: 'string', default: '100000' },
    rounds: { type: 'string', default: '5' },
    ms: { type: 'string', default: '400' },
    only: { type: 'string' },
    baseline: { type: 'string' },
  },
});
const nodes = Number(args.nodes);
const rounds = Number(args.rounds);
const roundMs = Number(args.ms);

type Execute = typeof executeRequest;
interface Build { Store: typeof Store; executeRequest: Execute; execOptions: typeof execOptions }

/** A store of a build holding the bench graph's nodes (with name, age, score): point lookups read no edge. */
function loadStore(build: Build): Store {
  const graph = generateGraph({ nodes, edges: 0, seed: 0x5eed, outExponent: 0.6, inExponent: 0.85 });
  const store = build.Store.create();
  for (let from = 0; from < nodes; from += 25_000) {
    const out = build.executeRequest(store, addNodesChunk(graph, from, Math.min(nodes, from + 25_000)), noFlags, 'writer');
    if (!('status' in out) || out.status !== 200) throw new Error(`load failed: ${JSON.stringify(out).slice(0, 300)}`);
  }
  return store;
}

async function importBuild(dist: string): Promise<Build> {
  const at = (path: string): string => pathToFileURL(resolve(dist, path)).href;
  const [storeModule, requestModule] = await Promise.all([import(at('src/store/store.js')), import(at('src/exec/request.js'))]);
  return { Store: storeModule.Store, executeRequest: requestModule.executeRequest, execOptions: requestModule.execOptions };
}

const self: Build = { Store, executeRequest, execOptions };
const store = loadStore(self);
const inline = execOptions({ queryTimeoutMs: 30_000, inlineWorkMax: limits.inlineReadWorkMax });
const baseline = args.baseline === undefined ? null : await importBuild(args.baseline);
const baselineStore = baseline === null ? null : loadStore(baseline);
const baselineInline = baseline?.execOptions({ queryTimeoutMs: 30_000, inlineWorkMax: limits.inlineReadWorkMax });
const random = rng(0x5eed);
// More distinct bodies than the plan cache holds (1,024), as on the 100k graph over HTTP.
const BODIES = 16_384;
const ids = Array.from({ length: BODIES }, () => Math.floor(random() * nodes));
const literal = pointLookupLiteral(nodes);
const param = pointLookupParam(nodes);
const literalBodies = ids.map((id) => fill(literal, [id]));
const paramBodies = ids.map((id) => fill(param, [id]));

const catalog = (() => {
  store.beginRead();
  try {
    return planningCatalog(currentView(store));
  } finally {
    store.endRead();
  }
})();

let sink = 0;
function request(body: string): void {
  const out = executeRequest(store, body, noFlags, 'reader', inline);
  if (!('status' in out) || out.status !== 200) throw new Error(`lookup failed: ${JSON.stringify(out).slice(0, 300)}`);
  sink += out.body.length;
}
function baselineRequest(body: string): void {
  const out = baseline!.executeRequest(baselineStore!, body, noFlags, 'reader', baselineInline);
  if (!('status' in out) || out.status !== 200) throw new Error(`baseline lookup failed: ${JSON.stringify(out).slice(0, 300)}`);
  sink += out.body.length;
}

/** A phase: one call per body, bodies taken in turn. */
interface Phase { name: string; run: (i: number) => void }
const phases: Phase[] = [
  { name: 'literal: whole request (executeRequest, inline)', run: (i) => request(literalBodies[i]!) },
  { name: 'literal: JSON parse (parseJson)', run: (i) => { sink += parseJson(literalBodies[i]!) === null ? 0 : 1; } },
  { name: 'literal: parse + decode (decodeRequest)', run: (i) => { sink += decodeRequest(literalBodies[i]!).batch.entries.length; } },
  { name: 'literal: parse + decode + plan', run: (i) => { sink += planRequest(decodeRequest(literalBodies[i]!), catalog).classOf.size; } },
  { name: 'literal: one body repeated (plan cache hit: execute + render + key)', run: () => request(literalBodies[0]!) },
  { name: 'param: whole request (executeRequest, inline)', run: (i) => request(paramBodies[i]!) },
  { name: 'param: one body repeated (plan cache hit, same parameter)', run: () => request(paramBodies[0]!) },
  { name: 'param: parse + decode + plan (a miss)', run: (i) => { sink += planRequest(decodeRequest(paramBodies[i]!), catalog).classOf.size; } },
];
if (baseline !== null) {
  phases.unshift(
    { name: 'BASELINE literal: whole request', run: (i) => baselineRequest(literalBodies[i]!) },
    { name: 'BASELINE param: whole request', run: (i) => baselineRequest(paramBodies[i]!) },
    { name: 'BASELINE literal: one body repeated', run: () => baselineRequest(literalBodies[0]!) },
  );
}
const selected = args.only === undefined ? phases : phases.filter((p) => p.name.includes(args.only!));

/**
 * Nanoseconds of CPU per call of a phase over about `ms` milliseconds of CPU. CPU time
 * (process.cpuUsage: this thread plus V8's helper threads, e.g. concurrent GC) rather than
 * wall time: on the shared machine the process is often descheduled, which wall time
 * would count.
 */
function time(phase: Phase, ms: number): number {
  let calls = 0;
  let i = 0;
  const t0 = process.cpuUsage();
  const until = ms * 1000;
  let used = 0;
  while (used < until) {
    for (let k = 0; k < 256; k++) {
      phase.run(i);
      if (++i === BODIES) i = 0;
    }
    calls += 256;
    const t = process.cpuUsage(t0);
    used = t.user + t.system;
  }
  return (used * 1000) / calls;
}

for (const phase of selected) time(phase, 200); // warm-up: JIT and the plan cache
const samples = selected.map(() => [] as number[]);
for (let r = 0; r < rounds; r++) selected.forEach((phase, k) => samples[k]!.push(time(phase, roundMs)));
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
console.log(`${nodes} nodes, ${BODIES} distinct bodies per form, ${rounds} rounds of ${roundMs} ms of CPU, median CPU us/call (min..max)`);
for (let k = 0; k < selected.length; k++) {
  const xs = samples[k]!;
  console.log(`${(median(xs) / 1000).toFixed(2).padStart(8)} us  (${(Math.min(...xs) / 1000).toFixed(2)}..${(Math.max(...xs) / 1000).toFixed(2)})  ${selected[k]!.name}`);
}
if (baseline !== null) {
  const medianOf = (prefix: string): number => {
    const k = selected.findIndex((p) => p.name.startsWith(prefix));
    return k < 0 ? NaN : median(samples[k]!);
  };
  const ratio = (mine: string, base: string): string => (medianOf(base) / medianOf(mine)).toFixed(2);
  console.log(`speed-up vs baseline (baseline time / this build's time, medians of the same rounds):`);
  console.log(`  literal whole request ${ratio('literal: whole', 'BASELINE literal: whole')}x, param whole request ${ratio('param: whole', 'BASELINE param: whole')}x, one literal body repeated ${ratio('literal: one body', 'BASELINE literal: one')}x`);
}
if (sink === 0) console.log('');
