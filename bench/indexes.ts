// `npm run bench -- indexes` (or `--indexes`): secondary indexes (issue 9 item 7).
//
// The benchmark's standard graph (100k User nodes, 1M FOLLOWS edges) plus N extra `User`
// nodes (default 1M) with a unique string `email` ("u<i>@bench.io") and an i64 `age`
// ((i * 7919) % 100, 0..99, 1% of the extra nodes per value). Figures, each a ratio to a
// reference measured in the same run, alternating A/B rounds:
//   1. HTTP: indexed equality lookup (nodes_where $label == User and email == $email,
//      value_map name/email/age) vs point lookup by ID (nodes reference param $id,
//      same value_map), the same extra nodes, wrk with the same c / duration / pinning.
//   2. in-process: `id(limit 100 (nodes_where $label == User and age between a and a))`
//      with the range index vs the same predicate wrapped in an `or` of one (the planner
//      does not look into `or`: full scan); also the same without `limit` as `count`.
//   3. in-process: nodes_where email == e with the unique equality index vs the `or` scan.
//   4. build time of the email (unique equality) and age (range) indexes over the N extra
//      nodes: create_index -> get_index_operation 'succeeded' (polling every 2 ms); memory
//      per entry from IndexEntries.stats() (words held / entries) and the topology heap
//      growth over the build.
//   5. write throughput: batches of 100 add_n (for_each) with name+email+age on a label
//      without indexes (`Plain`) vs on `User` (unique email + age range), same batch shape,
//      alternating rounds: over HTTP (one client, sequential POSTs), in-process with an
//      event-loop turn between batches (index maintenance runs in setImmediate slices, as
//      between a server's requests), and in-process as a tight await loop (no turn).
// Options: --extra N (default 1e6), --quick (10k/100k graph, 100k extra, short runs),
// --duration S (HTTP runs, default 8), --connections C (64), --no-pin, --no-http,
// --no-inprocess, --rounds R (A/B rounds, default 3).
import { availableParallelism, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { openDatabase, type Database } from '../src/index.js';
import { T_HEAP_USED } from '../src/store/topology.js';
import { defaultGraphSpec, generateGraph } from './graph.js';
import { loadSvcdb } from './load.js';
import { drive, wrkAvailable, type LoadResult } from './loadgen.js';
import { post, startSvcdb, type RunningProcess } from './servers.js';
import { fmtMs, fmtOps, fmtRatio, fmtUs, foreignLoadMeter, hasCommand, log, machineBusy, procMemory, sleep, table } from './util.js';

const { values: opt } = parseArgs({
  options: {
    indexes: { type: 'boolean', default: true },
    quick: { type: 'boolean', default: false },
    extra: { type: 'string' },
    duration: { type: 'string' },
    warmup: { type: 'string' },
    connections: { type: 'string', default: '64' },
    rounds: { type: 'string', default: '3' },
    'no-pin': { type: 'boolean', default: false },
    'no-http': { type: 'boolean', default: false },
    'no-inprocess': { type: 'boolean', default: false },
  },
  allowPositionals: true,
});

const quick = opt.quick!;
const spec = { ...defaultGraphSpec, ...(quick ? { nodes: 10_000, edges: 100_000 } : {}) };
const EXTRA = Number(opt.extra ?? (quick ? 100_000 : 1_000_000));
const durationSec = Number(opt.duration ?? (quick ? 3 : 8));
const warmupSec = Number(opt.warmup ?? (quick ? 1 : 2));
const connections = Number(opt.connections);
const ROUNDS = Number(opt.rounds);
const pin = !opt['no-pin'] && availableParallelism() >= 2 && hasCommand('taskset');
const tool: 'wrk' | 'autocannon' = wrkAvailable() ? 'wrk' : 'autocannon';
const WRITE_BATCH = 100;

// ------------------------------------------------------------------ request bodies

const email = (i: number): string => `u${i}@bench.io`;
const ageOf = (i: number): number => (i * 7919) % 100;
const withParams = (req: unknown, params: Record<string, unknown>): string => {
  const head = JSON.stringify(req);
  return `${head.slice(0, -1)},"parameters":${JSON.stringify(params)}}`;
};
const readOne = (root: unknown): unknown => ({ request_type: 'read', query: { read: { entries: [{ query: { name: 'r', root } }], returns: ['r'] } } });
const writeOne = (root: unknown): unknown => ({ request_type: 'write', query: { write: { entries: [{ query: { name: 'r', root } }], returns: ['r'] } } });
const labelIs = (label: string): unknown => ({ eq: { left: { property: '$label' }, right: { constant: { string: label } } } });
const userAnd = (p: unknown): unknown => ({ and: { predicates: [labelIs('User'), p] } });
/** The same predicate hidden from the planner: an `or` of one is never looked into. */
const hidden = (p: unknown): unknown => ({ or: { predicates: [p] } });
const PROPS = ['name', 'email', 'age'];

/** (1) indexed equality: value_map of the User with email = $email. */
const eqLookup = (e: string, scan = false): string => {
  const pred = userAnd({ eq: { left: { property: 'email' }, right: { param: 'email' } } });
  return withParams(readOne({ value_map: { input: { nodes_where: { predicate: scan ? hidden(pred) : pred } }, properties: PROPS } }), { email: e });
};
/** (1) reference: value_map of the node with ID $id. */
const idLookup = (id: number): string =>
  withParams(readOne({ value_map: { input: { nodes: { reference: { param: 'id' } } }, properties: PROPS } }), { id: [id] });
/** (2) range: ids of the first 100 Users with age between a and a (ascending ID). */
const rangeLimit = (a: number, scan = false): string => {
  const pred = userAnd({ between: { value: { property: 'age' }, min: { constant: { i64: a } }, max: { constant: { i64: a } } } });
  return JSON.stringify(readOne({ id: { input: { limit: { input: { nodes_where: { predicate: scan ? hidden(pred) : pred } }, count: { literal: 100 } } } } }));
};
/** (2, context) the same range without a limit, counted. */
const rangeCount = (a: number, scan = false): string => {
  const pred = userAnd({ between: { value: { property: 'age' }, min: { constant: { i64: a } }, max: { constant: { i64: a } } } });
  return JSON.stringify(readOne({ count: { input: { nodes_where: { predicate: scan ? hidden(pred) : pred } } } }));
};
const eqSpec = { node_equality: { label: 'User', property: 'email', unique: true } };
const rangeSpec = { node_range: { label: 'User', property: 'age', direction: 'asc' } };
const createIndex = (s: unknown): string => JSON.stringify(writeOne({ create_index: { spec: s, if_not_exists: true } }));
const getOperation = (id: string): string => JSON.stringify(readOne({ get_index_operation: { operation_id: id } }));

/** Extra users [from, to) through for_each, `label` and email prefix chosen by the caller. */
function usersChunk(from: number, to: number, label = 'User', prefix = 'u'): string {
  const rows: string[] = [];
  for (let i = from; i < to; i++) rows.push(`{"name":"x_${i}","email":"${prefix}${i}@bench.io","age":${ageOf(i)}}`);
  const entries = [{ for_each: { param: 'rows', body: [{ query: { root: { add_n: { label, properties: [
    ['name', { expr: { param: 'name' } }],
    ['email', { expr: { param: 'email' } }],
    ['age', { expr: { param: 'age' } }],
  ] } } } }] } }];
  const head = JSON.stringify({ request_type: 'write', query: { write: { entries, returns: [] } } });
  return `${head.slice(0, -1)},"parameters":{"rows":[${rows.join(',')}]}}`;
}

type Send = (body: string) => Promise<{ status: number; body: string }>;

async function must(send: Send, body: string, what: string): Promise<string> {
  const r = await send(body);
  if (r.status !== 200) throw new Error(`${what}: status ${r.status}: ${r.body.slice(0, 400)}`);
  return r.body;
}

async function loadAll(send: Send, where: string): Promise<{ graphMs: number; extraMs: number; firstExtraId: number }> {
  const graph = generateGraph(spec);
  const g = await loadSvcdb(graph, send);
  const t0 = performance.now();
  const CHUNK = 25_000;
  for (let i = 0; i < EXTRA; i += CHUNK) await must(send, usersChunk(i, Math.min(EXTRA, i + CHUNK)), 'extra users');
  const extraMs = performance.now() - t0;
  // The extra users' IDs: graph nodes are 0..nodes-1, the extras follow in order (checked).
  const first = JSON.parse(await must(send, eqLookup(email(0)), 'first extra')) as { r: unknown[] };
  const probe = JSON.parse(await must(send, withParams(readOne({ id: { input: { nodes_where: { predicate: userAnd({ eq: { left: { property: 'email' }, right: { param: 'email' } } }) } } } }), { email: email(0) }), 'probe')) as { r: number[] };
  if (first.r.length !== 1 || probe.r[0] !== spec.nodes) throw new Error(`unexpected first extra id ${JSON.stringify(probe.r)}`);
  log(`  ${where}: graph ${spec.nodes}/${spec.edges} in ${fmtMs(g.totalMs)}, ${EXTRA} extra users in ${fmtMs(extraMs)}`);
  return { graphMs: g.totalMs, extraMs, firstExtraId: spec.nodes };
}

async function buildIndex(send: Send, s: unknown, pollMs = 2): Promise<{ ms: number; status: Record<string, unknown> }> {
  const t0 = performance.now();
  const receipt = (JSON.parse(await must(send, createIndex(s), 'create_index')) as { r: { kind: string; operation_id: string } }).r;
  if (receipt.kind !== 'accepted') throw new Error(`create_index: ${JSON.stringify(receipt)}`);
  for (;;) {
    const st = (JSON.parse(await must(send, getOperation(receipt.operation_id), 'get_index_operation')) as { r: Record<string, unknown> }).r;
    if (st['status'] === 'succeeded') return { ms: performance.now() - t0, status: st };
    if (st['status'] === 'aborted' || st['status'] === 'blocked') throw new Error(`index build ${st['status']}: ${JSON.stringify(st)}`);
    await sleep(pollMs);
  }
}

const pct = (x: number | null | undefined): string => (typeof x === 'number' ? `${(x * 100).toFixed(0)}%` : '-');
const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]!; };

// ------------------------------------------------------------------ in-process timing

interface Timing { ops: number; p50us: number; p99us: number; n: number }

/** Run `bodies` in rotation for `ms` (at least `minN` requests); ops/s and latency percentiles. */
async function timeLoop(db: Database, bodies: string[], ms: number, minN = 3): Promise<Timing> {
  const lat: number[] = [];
  const t0 = performance.now();
  let i = 0;
  while (performance.now() - t0 < ms || lat.length < minN) {
    const s = performance.now();
    const r = await db.queryRaw(bodies[i]!);
    lat.push(performance.now() - s);
    if (r.status !== 200) throw new Error(r.body.slice(0, 300));
    if (++i === bodies.length) i = 0;
  }
  const total = performance.now() - t0;
  lat.sort((a, b) => a - b);
  return { ops: (lat.length / total) * 1000, p50us: lat[Math.floor(lat.length * 0.5)]! * 1000, p99us: lat[Math.min(lat.length - 1, Math.floor(lat.length * 0.99))]! * 1000, n: lat.length };
}

interface AB { a: Timing[]; b: Timing[]; foreign: number | null }
/** Alternate A and B rounds; ratio = median(B ops) / median(A ops) with per-round ratios. */
async function alternate(run: (which: 'a' | 'b') => Promise<Timing>, warm = true): Promise<AB> {
  const out: AB = { a: [], b: [], foreign: null };
  if (warm) { await run('a'); await run('b'); } // warm-up of both paths
  const meter = foreignLoadMeter([]);
  for (let r = 0; r < ROUNDS; r++) {
    if (r % 2 === 0) { out.a.push(await run('a')); out.b.push(await run('b')); }
    else { out.b.push(await run('b')); out.a.push(await run('a')); }
  }
  out.foreign = meter.stop();
  return out;
}
const medOps = (ts: Timing[]): number => median(ts.map((t) => t.ops));
const medP = (ts: Timing[], k: 'p50us' | 'p99us'): number => median(ts.map((t) => t[k]));
const roundRatios = (ab: AB): string => ab.b.map((t, i) => fmtRatio(t.ops / ab.a[i]!.ops)).join(', ');

let writeSeq = 0;
/** Alternating rounds of 1.5 s of sequential write batches: a = label `Plain` (no index), b = `User`. */
function writeAB(send: Send, yieldTurn: boolean): Promise<AB> {
  return alternate(async (w) => {
    const t0 = performance.now();
    const lat: number[] = [];
    while (performance.now() - t0 < 1500 || lat.length < 5) {
      const from = writeSeq; writeSeq += WRITE_BATCH;
      const body = w === 'a' ? usersChunk(from, from + WRITE_BATCH, 'Plain', 'p') : usersChunk(from, from + WRITE_BATCH, 'User', 'w');
      const s = performance.now();
      await must(send, body, 'write batch');
      lat.push(performance.now() - s);
      if (yieldTurn) await new Promise<void>((r) => setImmediate(r));
    }
    lat.sort((a, b) => a - b);
    const total = performance.now() - t0;
    return { ops: ((lat.length * WRITE_BATCH) / total) * 1000, p50us: lat[lat.length >> 1]! * 1000, p99us: lat[Math.floor(lat.length * 0.99)]! * 1000, n: lat.length };
  });
}

// ------------------------------------------------------------------ main

async function main(): Promise<void> {
  const started = performance.now();
  const busy0 = await machineBusy(1000);
  log(`svcdb index bench: Node ${process.version}, ${availableParallelism()} cores, load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}, machine ${pct(busy0)} busy before the start`);
  log(`graph ${spec.nodes} nodes / ${spec.edges} edges + ${EXTRA} extra User nodes (unique email, age 0..99)`);
  const rows: string[][] = [];
  const goals: string[][] = [];
  const verdict = (ok: boolean, v: number, target: number, higher: boolean): string =>
    ok ? 'met' : higher ? `MISSED (${((v / target) * 100).toFixed(0)}% of target)` : `MISSED (${(v / target).toFixed(1)}x the target)`;

  // ---------------------------------------------------------------- HTTP (1)
  if (!opt['no-http']) {
    log(`HTTP: ${tool}, c=${connections}, ${durationSec} s runs after ${warmupSec} s warm-up, ${pin ? 'server pinned to CPU 0, load generator to CPU 1' : 'unpinned'}, svcdb --readers 1`);
    const server: RunningProcess = await startSvcdb(pin ? 1 : availableParallelism(), pin ? '0' : null);
    try {
      await sleep(500);
      const send: Send = (b) => post(server.url, b);
      const { firstExtraId } = await loadAll(send, 'HTTP load');
      const rssBefore = server.memory()?.rssMiB ?? NaN;
      const built = await buildIndex(send, eqSpec);
      const rssAfter = server.memory()?.rssMiB ?? NaN;
      const builtRange = await buildIndex(send, rangeSpec);
      const rssAfter2 = server.memory()?.rssMiB ?? NaN;
      log(`  email index built over HTTP in ${fmtMs(built.ms)} (server VmRSS ${rssBefore.toFixed(0)} -> ${rssAfter.toFixed(0)} MiB), age index in ${fmtMs(builtRange.ms)} (-> ${rssAfter2.toFixed(0)} MiB)`);
      // 4096 distinct extra users, spread over the id range; both scenarios read the same nodes.
      const picks = Array.from({ length: 4096 }, (_, k) => (k * 7_919_113) % EXTRA);
      const eqBodies = picks.map((i) => eqLookup(email(i)));
      const idBodies = picks.map((i) => idLookup(firstExtraId + i));
      const a0 = await post(server.url, eqBodies[0]!), b0 = await post(server.url, idBodies[0]!);
      if (a0.status !== 200 || b0.status !== 200 || a0.body !== b0.body) throw new Error(`eq and id lookups differ: ${a0.body} vs ${b0.body}`);
      log(`  answer: ${a0.body}`);
      const settings = { connections, threads: 1, durationSec, cpus: pin ? '1' : null };
      const runs: { id: LoadResult[]; eq: LoadResult[] } = { id: [], eq: [] };
      const meter = foreignLoadMeter([server.pid]);
      for (let r = 0; r < ROUNDS; r++) {
        for (const which of (r % 2 === 0 ? ['id', 'eq'] : ['eq', 'id']) as ('id' | 'eq')[]) {
          const bodies = which === 'id' ? idBodies : eqBodies;
          if (warmupSec > 0) await drive(server.url, bodies, { ...settings, durationSec: warmupSec }, tool);
          const res = await drive(server.url, bodies, settings, tool);
          runs[which].push(res);
          log(`  round ${r + 1} ${which}: ${res.rps.toFixed(0)} req/s, p50 ${fmtUs(res.p50us)}, p99 ${fmtUs(res.p99us)}${res.errors ? `, ${res.errors} ERRORS` : ''}`);
        }
      }
      const foreign = meter.stop();
      const m = (xs: LoadResult[], k: 'rps' | 'p50us' | 'p99us'): number => median(xs.map((x) => x[k]));
      const ratio = m(runs.eq, 'rps') / m(runs.id, 'rps');
      const per = runs.eq.map((e, i) => fmtRatio(e.rps / runs.id[i]!.rps)).join(', ');
      rows.push(['1. HTTP point lookup by ID (nodes ref param, value_map 3 props)', `${fmtOps(m(runs.id, 'rps'))} req/s`, `p50 ${fmtUs(m(runs.id, 'p50us'))}, p99 ${fmtUs(m(runs.id, 'p99us'))}`, '1.00x (reference)', pct(foreign)]);
      rows.push(['1. HTTP indexed eq lookup (email = param, value_map 3 props)', `${fmtOps(m(runs.eq, 'rps'))} req/s`, `p50 ${fmtUs(m(runs.eq, 'p50us'))}, p99 ${fmtUs(m(runs.eq, 'p99us'))}`, `${fmtRatio(ratio)} (rounds ${per})`, pct(foreign)]);
      goals.push(['indexed eq lookup vs ID lookup over HTTP', '>= 0.8x', fmtRatio(ratio), verdict(ratio >= 0.8, ratio, 0.8, true)]);
      rows.push([`4'. (HTTP) email unique eq index build, create -> succeeded`, fmtMs(built.ms), `server VmRSS +${(rssAfter - rssBefore).toFixed(0)} MiB`, '-', '-']);
      rows.push([`4'. (HTTP) age range index build, create -> succeeded`, fmtMs(builtRange.ms), `server VmRSS ${rssAfter2 - rssAfter >= 0 ? "+" : ""}${(rssAfter2 - rssAfter).toFixed(0)} MiB`, '-', '-']);
      // (5) over HTTP: one client, sequential POSTs, same batches as in-process.
      const hw = await writeAB(send, false);
      const hwRatio = medOps(hw.b) / medOps(hw.a);
      rows.push([`5. HTTP writes (1 client, sequential), batches of ${WRITE_BATCH} add_n, label without indexes`, `${fmtOps(medOps(hw.a))} nodes/s`, `p50 ${fmtUs(medP(hw.a, 'p50us'))}/batch`, '1.00x (reference)', pct(hw.foreign)]);
      rows.push([`5. same on User (unique email eq + age range index)`, `${fmtOps(medOps(hw.b))} nodes/s`, `p50 ${fmtUs(medP(hw.b, 'p50us'))}/batch`, `${fmtRatio(hwRatio)} (rounds ${roundRatios(hw)})`, pct(hw.foreign)]);
      goals.push(['writes with 2 indexes vs 0 on the label (HTTP)', '>= 0.7x', fmtRatio(hwRatio), verdict(hwRatio >= 0.7, hwRatio, 0.7, true)]);
    } finally {
      await server.stop();
    }
  }

  // ---------------------------------------------------------------- in-process (2-5)
  if (!opt['no-inprocess']) {
    log('in-process: loading (embedded handle) ...');
    const db = await openDatabase({ storage: 'memory' });
    const send: Send = (b) => db.queryRaw(b);
    const { firstExtraId } = await loadAll(send, 'in-process load');
    const store = (db as unknown as { backing: { committer: { storage: { store: { topology: { words: Uint32Array }; indexes: { physical: Map<number, { record: { definition?: unknown }; entries: { stats(): { entries: number; liveEntries: number; words: number; runs: number } } }> } } } } } }).backing.committer.storage.store;
    const heapWords = (): number => store.topology.words[T_HEAP_USED]!;

    // (4) builds
    const statsOf = (): { entries: number; words: number; runs: number }[] => [...store.indexes.physical.values()].map((p) => p.entries.stats());
    const h0 = heapWords(), rss0 = procMemory(process.pid)?.rssMiB ?? NaN;
    const eqBuild = await buildIndex(send, eqSpec);
    const h1 = heapWords();
    const eqStats = statsOf()[0]!;
    const rangeBuild = await buildIndex(send, rangeSpec);
    const h2 = heapWords(), rss2 = procMemory(process.pid)?.rssMiB ?? NaN;
    const rangeStats = statsOf()[1]!;
    log(`  email build ${fmtMs(eqBuild.ms)} ${JSON.stringify(eqBuild.status['progress'])}; stats ${JSON.stringify(eqStats)}; topology heap +${((h1 - h0) * 4 / 2 ** 20).toFixed(1)} MiB`);
    log(`  age build ${fmtMs(rangeBuild.ms)} ${JSON.stringify(rangeBuild.status['progress'])}; stats ${JSON.stringify(rangeStats)}; topology heap +${((h2 - h1) * 4 / 2 ** 20).toFixed(1)} MiB; process RSS ${rss0.toFixed(0)} -> ${rss2.toFixed(0)} MiB`);
    const perEntry = (s: { entries: number; words: number }): string => `${((s.words * 4) / s.entries).toFixed(1)} B/entry`;
    rows.push([`4. email unique eq index build (${fmtInt(eqStats.entries)} entries), create -> succeeded`, fmtMs(eqBuild.ms), `${perEntry(eqStats)} (stats), heap +${(((h1 - h0) * 4) / eqStats.entries).toFixed(1)} B/entry`, '-', '-']);
    rows.push([`4. age range index build (${fmtInt(rangeStats.entries)} entries), create -> succeeded`, fmtMs(rangeBuild.ms), `${perEntry(rangeStats)} (stats), heap +${(((h2 - h1) * 4) / rangeStats.entries).toFixed(1)} B/entry`, '-', '-']);
    const buildPerM = eqBuild.ms * (1_000_000 / EXTRA);
    goals.push([`1M-node equality index build${EXTRA !== 1_000_000 ? ` (scaled from ${fmtInt(EXTRA)})` : ''}`, '<= 2 s', fmtMs(buildPerM), verdict(buildPerM <= 2000, buildPerM, 2000, false)]);

    // explain: the plain predicates use the indexes, the hidden ones scan.
    const ex = (b: string): string => JSON.stringify(db.explain(JSON.parse(b)).map((x) => (x as { access: unknown }).access));
    log(`  explain: eq ${ex(eqLookup(email(1)))}, eq hidden ${ex(eqLookup(email(1), true))}, range ${ex(rangeLimit(5))}, range hidden ${ex(rangeLimit(5, true))}`);

    // (3) eq with vs without the index
    const picks = Array.from({ length: 512 }, (_, k) => (k * 7_919_113) % EXTRA);
    const eqIdx = picks.map((i) => eqLookup(email(i))), eqScan = picks.map((i) => eqLookup(email(i), true));
    for (let k = 0; k < 4; k++) {
      const [x, y] = [await db.queryRaw(eqIdx[k]!), await db.queryRaw(eqScan[k]!)];
      if (x.body !== y.body || !x.body.includes(email(picks[k]!))) throw new Error(`eq answers differ: ${x.body} vs ${y.body}`);
    }
    const eqAB = await alternate((w) => (w === 'a' ? timeLoop(db, eqScan, 1, 1) : timeLoop(db, eqIdx, 1000)), false);
    const eqRatio = medOps(eqAB.b) / medOps(eqAB.a);
    rows.push(['3. in-process eq email = e, full scan (`or` of one)', `${fmtOps(medOps(eqAB.a))} ops/s`, `p50 ${fmtUs(medP(eqAB.a, 'p50us'))}`, '1.00x (reference)', pct(eqAB.foreign)]);
    rows.push(['3. in-process eq email = e, unique eq index', `${fmtOps(medOps(eqAB.b))} ops/s`, `p50 ${fmtUs(medP(eqAB.b, 'p50us'))}`, `${fmtRatio(eqRatio)} (rounds ${roundRatios(eqAB)})`, pct(eqAB.foreign)]);

    // (2) range between a and a, limit 100 / count
    const ages = Array.from({ length: 100 }, (_, a) => a);
    for (const a of [0, 42, 99]) {
      const [x, y] = [await db.queryRaw(rangeLimit(a)), await db.queryRaw(rangeLimit(a, true))];
      if (x.body !== y.body) throw new Error(`range answers differ for ${a}`);
      const [c, d] = [await db.queryRaw(rangeCount(a)), await db.queryRaw(rangeCount(a, true))];
      if (c.body !== d.body) throw new Error(`range counts differ for ${a}: ${c.body} vs ${d.body}`);
    }
    const rIdx = ages.map((a) => rangeLimit(a)), rScan = ages.map((a) => rangeLimit(a, true));
    const rAB = await alternate((w) => (w === 'a' ? timeLoop(db, rScan, 1, 1) : timeLoop(db, rIdx, 1000)), false);
    const rRatio = medOps(rAB.b) / medOps(rAB.a);
    rows.push(['2. in-process id(limit 100 (age between a and a)), full scan', `${fmtOps(medOps(rAB.a))} ops/s`, `p50 ${fmtUs(medP(rAB.a, 'p50us'))}`, '1.00x (reference)', pct(rAB.foreign)]);
    rows.push(['2. in-process id(limit 100 (age between a and a)), range index', `${fmtOps(medOps(rAB.b))} ops/s`, `p50 ${fmtUs(medP(rAB.b, 'p50us'))}`, `${fmtRatio(rRatio)} (rounds ${roundRatios(rAB)})`, pct(rAB.foreign)]);
    goals.push(['range between + limit 100, index vs scan', '>= 100x', fmtRatio(rRatio), verdict(rRatio >= 100, rRatio, 100, true)]);
    const cIdx = ages.map((a) => rangeCount(a)), cScan = ages.map((a) => rangeCount(a, true));
    const cAB = await alternate((w) => (w === 'a' ? timeLoop(db, cScan, 1, 1) : timeLoop(db, cIdx, 1000)), false);
    const cRatio = medOps(cAB.b) / medOps(cAB.a);
    const matches = (JSON.parse((await db.queryRaw(cIdx[42]!)).body) as { r: number }).r;
    rows.push([`2'. in-process count(age between a and a) (~${fmtInt(matches)} rows), full scan`, `${fmtOps(medOps(cAB.a))} ops/s`, `p50 ${fmtUs(medP(cAB.a, 'p50us'))}`, '1.00x (reference)', pct(cAB.foreign)]);
    rows.push([`2'. in-process count(age between a and a), range index`, `${fmtOps(medOps(cAB.b))} ops/s`, `p50 ${fmtUs(medP(cAB.b, 'p50us'))}`, `${fmtRatio(cRatio)} (rounds ${roundRatios(cAB)})`, pct(cAB.foreign)]);

    // (5) writes: Plain (no index) vs User (2 indexes), batches of 100 add_n. `yieldTurn`:
    // let the event loop turn between batches (index maintenance runs in setImmediate
    // slices, durable.ts scheduleIndexWork; a server turns between requests anyway).
    const yieldAB = await writeAB(send, true);
    const tightAB = await writeAB(send, false);
    const wRatio = medOps(yieldAB.b) / medOps(yieldAB.a), tRatio = medOps(tightAB.b) / medOps(tightAB.a);
    rows.push([`5. in-process writes, batches of ${WRITE_BATCH} add_n (name, email, age), label without indexes, event loop turns between batches`, `${fmtOps(medOps(yieldAB.a))} nodes/s`, `p50 ${fmtUs(medP(yieldAB.a, 'p50us'))}/batch`, '1.00x (reference)', pct(yieldAB.foreign)]);
    rows.push([`5. same on User (unique email eq + age range index)`, `${fmtOps(medOps(yieldAB.b))} nodes/s`, `p50 ${fmtUs(medP(yieldAB.b, 'p50us'))}/batch`, `${fmtRatio(wRatio)} (rounds ${roundRatios(yieldAB)})`, pct(yieldAB.foreign)]);
    rows.push([`5'. in-process writes, tight loop (no event-loop turn between batches), label without indexes`, `${fmtOps(medOps(tightAB.a))} nodes/s`, `p50 ${fmtUs(medP(tightAB.a, 'p50us'))}/batch`, '1.00x (reference)', pct(tightAB.foreign)]);
    rows.push([`5'. same on User (2 indexes)`, `${fmtOps(medOps(tightAB.b))} nodes/s`, `p50 ${fmtUs(medP(tightAB.b, 'p50us'))}/batch`, `${fmtRatio(tRatio)} (rounds ${roundRatios(tightAB)})`, pct(tightAB.foreign)]);
    goals.push(['writes with 2 indexes vs 0 on the label (in-process, event loop turns)', '>= 0.7x', fmtRatio(wRatio), verdict(wRatio >= 0.7, wRatio, 0.7, true)]);
    goals.push(['same, tight in-process loop (maintenance starved)', '>= 0.7x', fmtRatio(tRatio), verdict(tRatio >= 0.7, tRatio, 0.7, true)]);
    void firstExtraId;
    await db.close();
  }

  log('');
  log(`== indexes (${spec.nodes}/${spec.edges} graph + ${fmtInt(EXTRA)} extra User nodes) ==`);
  log(table(['figure', 'rate / time', 'latency / memory', 'ratio to reference', 'other load'], rows));
  log('');
  log(table(['goal', 'target', 'measured', 'verdict'], goals));
  log(`total ${fmtMs(performance.now() - started)}; load average at the end ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
}

function fmtInt(n: number): string { return Math.round(n).toLocaleString('en-US'); }

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`index bench failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
