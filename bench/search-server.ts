// `npm run bench -- vector` (second part, after vector.ts): vector and text indexes in the
// real server (issues 11 and 12), on the same Gaussian mixture as vector.ts
// (bench/vector-data.ts) and the text bench's corpus (bench/text-data.ts: manual-page
// paragraphs, or a seeded Zipf corpus):
//   load      N documents with a D-dimension vector and a text written over HTTP into a
//             --disk server, then each index's build (create_index to `succeeded`), timed;
//   recovery  a clean stop (snapshot with the graphs) and the time until a new server on the
//             directory listens: the graphs are loaded, not built again;
//   search    vector_search_nodes top-10 over HTTP with distinct query vectors (queries not
//             in the data, as parameters: one query text, the way clients send it), with 1
//             and 2 reader threads, each against a point lookup by id on the same server
//             (the reference of the same run); throughput and p50/p99;
//   within    vector_search_nodes_within over 10k candidates (the out-neighbours of one hub
//             node), top-10, in the same server;
//   text      text_search_nodes top-10 for 2-term queries drawn from the corpus vocabulary
//             (parameters), 1 and 2 reader threads.
// Results go to dist/bench/vector-server.json. Options: --quick (20k points, short runs),
// --n N, --dimension D, --duration S, --connections C.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { drive, wrkAvailable, type LoadResult } from './loadgen.js';
import { post, startListening, svcdbMain, type RunningProcess } from './servers.js';
import { mixture } from './vector-data.js';
import { manCorpus, queriesOf, zipfCorpus } from './text-data.js';
import { fmtMs, fmtOps, fmtRatio, fmtUs, log, table } from './util.js';

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    n: { type: 'string' }, dimension: { type: 'string' }, duration: { type: 'string' }, connections: { type: 'string' },
    queries: { type: 'string' }, rounds: { type: 'string' }, 'ef-construction': { type: 'string' },
  },
  allowPositionals: true,
});
const N = Number(opt.n ?? (opt.quick ? 20_000 : 100_000));
const D = Number(opt.dimension ?? 128);
const DURATION = Number(opt.duration ?? (opt.quick ? 3 : 10));
const CONNECTIONS = Number(opt.connections ?? 32);
const WITHIN = Math.min(10_000, N);
const BATCH = 500;
const spec = { dimension: D, clusters: 100, spread: 1, seed: 42 };
const tool = wrkAvailable() ? 'wrk' : 'autocannon';

const data = mixture(spec, N, 1);
const queries = mixture(spec, 512, 2);
const vectorOf = (m: Float32Array, i: number): number[] => Array.from(m.subarray(i * D, (i + 1) * D));
const texts = manCorpus(N) ?? zipfCorpus(N);
const textQueries = queriesOf(512, texts, 2, 11);

const writeBody = (entries: unknown[]) => JSON.stringify({ request_type: 'write', query: { write: { entries, returns: [] } } });
const readBody = (root: unknown, parameters?: unknown) => JSON.stringify({ request_type: 'read', query: { read: { entries: [{ query: { name: 'r', root } }], returns: ['r'] } }, ...(parameters === undefined ? {} : { parameters }) });

async function ok(url: string, body: string): Promise<Record<string, unknown>> {
  const r = await post(url, body);
  if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${r.body.slice(0, 300)}`);
  return JSON.parse(r.body) as Record<string, unknown>;
}

function serve(dir: string, readers: number): Promise<RunningProcess> {
  return startListening('svcdb', svcdbMain, ['serve', '--host', '127.0.0.1', '--port', '0', '--disk', dir, '--readers', String(readers)], { cpus: null, startTimeoutMs: 600_000 });
}

const dir = mkdtempSync(join(tmpdir(), 'svcdb-bench-vector-'));
const results: Record<string, unknown> = { n: N, dimension: D, tool, connections: CONNECTIONS, durationSec: DURATION };
try {
  // ---------------------------------------------------------------- load and build
  let server = await serve(dir, 1);
  const loadStart = performance.now();
  // Node 0 is the hub whose out-edges give the *_within candidates.
  await ok(server.url, writeBody([{ query: { name: null, root: { add_n: { label: 'Hub', properties: [] } } } }]));
  for (let at = 0; at < N; at += BATCH) {
    const entries = [];
    for (let i = at; i < Math.min(N, at + BATCH); i++) {
      entries.push({ query: { name: null, root: { add_n: { label: 'Doc', properties: [['n', { value: { i64: i } }], ['v', { value: { f32_array: vectorOf(data, i) } }], ['body', { value: { string: texts[i]! } }]] } } } });
    }
    await ok(server.url, writeBody(entries));
  }
  // Doc i is node i + 1; the hub links to the first WITHIN of them.
  await ok(server.url, writeBody([{ query: { name: null, root: { add_e: { input: { nodes: { reference: { ids: [0] } } }, label: 'H', to: { ids: Array.from({ length: WITHIN }, (_, i) => i + 1) }, properties: [] } } } }]));
  const loadMs = performance.now() - loadStart;
  /** Create an index and wait for its build; its time. */
  const build = async (spec: unknown): Promise<number> => {
    const start = performance.now();
    const create = { request_type: 'write', query: { write: { entries: [{ query: { name: 'r', root: { create_index: { spec, if_not_exists: true } } } }], returns: ['r'] } } };
    const receipt = (await ok(server.url, JSON.stringify(create)))['r'] as { operation_id: string };
    for (;;) {
      const s = (await ok(server.url, readBody({ get_index_operation: { operation_id: receipt.operation_id } })))['r'] as { status: string };
      if (s.status === 'succeeded') return performance.now() - start;
      if (s.status !== 'running' && s.status !== 'queued') throw new Error(`index build ended ${JSON.stringify(s)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const buildMs = await build({ node_vector: { label: 'Doc', property: 'v', dimension: D, metric: 'euclidean' } });
  const textBuildMs = await build({ node_text: { label: 'Doc', property: 'body' } });
  const loadedRss = server.memory()?.rssMiB ?? NaN;
  await server.stop(); // a clean stop writes a snapshot with the graphs

  // ---------------------------------------------------------------- recovery
  const recoveryStart = performance.now();
  server = await serve(dir, 1);
  const recoveryMs = performance.now() - recoveryStart;
  await server.stop();
  results['load'] = { loadMs, buildMs, textBuildMs, recoveryMs, loadedRssMiB: loadedRss };

  // ---------------------------------------------------------------- search, 1 and 2 readers
  const searchBodies = Array.from({ length: 512 }, (_, i) => readBody(
    { vector_search_nodes: { label: 'Doc', property: 'v', query_vector: { expr: { param: 'q' } }, k: { literal: 10 } } }, { q: vectorOf(queries, i) }));
  const lookupBodies = Array.from({ length: 512 }, (_, i) => readBody({ value_map: { input: { nodes: { reference: { ids: [1 + ((i * 7919) % N)] } } }, properties: ['n'] } }));
  const withinBodies = Array.from({ length: 64 }, (_, i) => readBody(
    { vector_search_nodes_within: { input: { out: { input: { nodes: { reference: { ids: [0] } } }, label: 'H' } }, label: 'Doc', property: 'v', query_vector: { expr: { param: 'q' } }, k: { literal: 10 } } }, { q: vectorOf(queries, i) }));
  const textBodies = textQueries.map((t) => readBody(
    { text_search_nodes: { label: 'Doc', property: 'body', query_text: { expr: { param: 't' } }, k: { literal: 10 } } }, { t }));
  const settings = { connections: CONNECTIONS, threads: 1, durationSec: DURATION, cpus: null };
  const runs: Record<string, Record<string, LoadResult>> = {};
  for (const readers of [1, 2]) {
    server = await serve(dir, readers);
    try {
      // Warm the readers (kernel instances, scratch) before measuring.
      await drive(server.url, searchBodies.slice(0, 64), { ...settings, durationSec: 1 }, tool);
      const lookup = await drive(server.url, lookupBodies, settings, tool);
      const search = await drive(server.url, searchBodies, settings, tool);
      const within = await drive(server.url, withinBodies, { ...settings, connections: Math.min(CONNECTIONS, 8) }, tool);
      const text = await drive(server.url, textBodies, settings, tool);
      runs[`readers${readers}`] = { lookup, search, within, text };
    } finally {
      await server.stop();
    }
  }
  results['runs'] = runs;

  const r1 = runs['readers1']!, r2 = runs['readers2']!;
  log(`\nVector and text indexes in the server: ${N} documents, ${D} f32 (Gaussian mixture) and a text each, --disk, ${tool} c=${CONNECTIONS}, ${DURATION} s per run`);
  log(table(['measure', 'value'], [
    ['load over HTTP (batches of 500 add_n)', fmtMs(loadMs)],
    ['vector index build (create_index to succeeded)', fmtMs(buildMs)],
    ['text index build', fmtMs(textBuildMs)],
    ['RSS after load and build', `${loadedRss.toFixed(0)} MiB`],
    ['recovery (clean stop, restart until listening; graphs and text partitions loaded)', fmtMs(recoveryMs)],
  ]));
  const rows: string[][] = [];
  for (const [name, pick] of [['point lookup by id (reference)', 'lookup'], ['vector_search_nodes k=10', 'search'], [`vector_search_nodes_within ${WITHIN} candidates, k=10`, 'within'], ['text_search_nodes 2 terms, k=10', 'text']] as const) {
    const a = r1[pick]!, b = r2[pick]!;
    rows.push([name, `${fmtOps(a.rps)}/s p50 ${fmtUs(a.p50us)} p99 ${fmtUs(a.p99us)}`, `${fmtOps(b.rps)}/s p50 ${fmtUs(b.p50us)} p99 ${fmtUs(b.p99us)}`, fmtRatio(b.rps / a.rps), fmtRatio(a.rps / r1.lookup.rps)]);
  }
  log(table(['request', '1 reader', '2 readers', '2 vs 1 reader', 'vs lookup (1 reader)'], rows));
  const errors = Object.values(runs).flatMap((r) => Object.values(r)).reduce((n, r) => n + r.errors, 0);
  if (errors > 0) log(`warning: ${errors} non-2xx answers or socket errors`);
  const out = fileURLToPath(new URL('../bench/', import.meta.url));
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'vector-server.json'), JSON.stringify(results, null, 2));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
