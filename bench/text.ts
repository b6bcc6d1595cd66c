// `npm run bench -- text [--quick] [--docs N] [--corpus man|zipf] [--seconds S]`: the text
// engine (issue 12 item 6), in-process on one thread, against minisearch and flexsearch on
// the same documents, all in one run so that the ratios hold even when the machine is busy:
//   * corpus: N (default 100k) paragraphs of the Debian manual pages installed on the machine
//     (/usr/share/man/man{1..8}/*.gz, troff stripped; real English), in path order. Without
//     them (CI installs none) a message says so and a seeded Zipf corpus of the same size
//     stands in (`--corpus zipf` forces it).
//   * build: time to index every document (svcdb: one TextPartition, analyzer `standard`,
//     positions off, 1000 documents per epoch); memory: svcdb's TextMemory.usedBytes(), the
//     peers' JS heap growth after a forced collection.
//   * 1-, 2- and 4-term top-10 QPS (median of 3 interleaved rounds per engine): queries drawn from the corpus vocabulary with mixed
//     frequencies (each term from the 100 most frequent, ranks 100-5000, or rarer with df >= 2,
//     one third each). svcdb: BM25 top-10 with dynamic pruning; minisearch: its BM25 over OR,
//     sorted, first 10 (it scores every match); flexsearch: `suggest: true` (its OR-like
//     mode, its own ranking), limit 10.
//   * a check: on 300 queries, svcdb's pruned top-10 equals its exhaustive top-10 (pruning
//     is exact), and the postings scored per query with and without pruning.
// Prints a table of ratios; writes dist/bench/text.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import MiniSearch from 'minisearch';
import FlexSearch from 'flexsearch';
import { analyze, TextMemory, TextPartition, textSearchCounters, textSearchOptions } from '../src/text/index.js';
import { MAN_ROOT, manCorpus, queriesOf, zipfCorpus } from './text-data.js';
import { fmtMs, fmtOps, fmtRatio, log, table } from './util.js';

const { values: opt } = parseArgs({
  options: {
    text: { type: 'boolean', default: true },
    quick: { type: 'boolean', default: false },
    docs: { type: 'string' },
    corpus: { type: 'string' },
    seconds: { type: 'string' },
  },
  allowPositionals: true,
});
const quick = opt.quick!;
const DOCS = Number(opt.docs ?? 100_000);
/** Seconds per engine and round; ROUNDS interleaved rounds, medians reported. */
const SECONDS = Number(opt.seconds ?? (quick ? 0.4 : 1));
const ROUNDS = 3;
const QUERIES_PER_CLASS = 1000;

/** Queries per second of `run` over `queries`, cycling for SECONDS (after a short warm-up). */
function qps(queries: string[], run: (q: string) => number): number {
  let sink = 0;
  for (let i = 0; i < Math.min(200, queries.length); i++) sink += run(queries[i]!);
  const until = performance.now() + SECONDS * 1000;
  let n = 0;
  const started = performance.now();
  while (performance.now() < until) {
    for (let i = 0; i < 50; i++) sink += run(queries[(n + i) % queries.length]!);
    n += 50;
  }
  const elapsed = (performance.now() - started) / 1000;
  if (sink === -1) log('');
  return n / elapsed;
}

const gc = (): void => {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g) { g(); g(); }
};
const heapUsed = (): number => { gc(); return process.memoryUsage().heapUsed; };

// ------------------------------------------------------------------ main

let corpusName = `${DOCS} paragraphs of the Debian manual pages in ${MAN_ROOT}`;
let docs = opt.corpus === 'zipf' ? null : manCorpus(DOCS);
if (docs === null) {
  if (opt.corpus !== 'zipf') log(`text bench: no manual pages at ${MAN_ROOT} with ${DOCS} paragraphs (install e.g. the 'manpages' and 'man-db' Debian packages); using the seeded Zipf corpus instead`);
  corpusName = `${DOCS} documents of a seeded Zipf corpus`;
  docs = zipfCorpus(DOCS);
}
const totalTerms = docs.reduce((a, d) => a + analyze(d, 'standard').length, 0);
log(`text bench: ${corpusName}, ${(totalTerms / docs.length).toFixed(1)} terms per document on average`);

// svcdb build
gc();
const tm = TextMemory.create();
let t0 = performance.now();
const part = TextPartition.create(tm, { analyzer: 'standard', positions: false });
for (let i = 0; i < docs.length; i++) part.insert(i, docs[i]!, 1 + Math.floor(i / 1000));
const svcBuildMs = performance.now() - t0;
const snapshot = 1 + Math.floor((docs.length - 1) / 1000);
const svcBytes = tm.usedBytes();

// minisearch build
let h0 = heapUsed();
t0 = performance.now();
const mini = new MiniSearch<{ id: number; text: string }>({ fields: ['text'], storeFields: [] });
mini.addAll(docs.map((text, id) => ({ id, text })));
const miniBuildMs = performance.now() - t0;
const miniBytes = heapUsed() - h0;

// flexsearch build
h0 = heapUsed();
t0 = performance.now();
const flex = new FlexSearch.Index({ tokenize: 'strict' });
for (let i = 0; i < docs.length; i++) flex.add(i, docs[i]!);
const flexBuildMs = performance.now() - t0;
const flexBytes = heapUsed() - h0;

const outE = new Uint32Array(10), outS = new Float32Array(10);
const svc = (q: string): number => part.search(q, 10, snapshot, outE, outS);
const miniRun = (q: string): number => mini.search(q, { combineWith: 'OR' }).slice(0, 10).length;
const flexRun = (q: string): number => (flex.search(q, { limit: 10, suggest: true }) as unknown[]).length;

// Exactness of pruning on this corpus, and the work it saves.
const check = queriesOf(QUERIES_PER_CLASS, docs, 2, 7).slice(0, 300).concat(queriesOf(QUERIES_PER_CLASS, docs, 1, 8).slice(0, 100), queriesOf(QUERIES_PER_CLASS, docs, 4, 9).slice(0, 100));
let mismatches = 0, prunedPostings = 0, fullPostings = 0;
const e2 = new Uint32Array(10), s2 = new Float32Array(10);
for (const q of check) {
  textSearchCounters.scoredPostings = 0;
  const n = part.search(q, 10, snapshot, outE, outS);
  prunedPostings += textSearchCounters.scoredPostings;
  textSearchOptions.pruning = false;
  textSearchCounters.scoredPostings = 0;
  const n2 = part.search(q, 10, snapshot, e2, s2);
  fullPostings += textSearchCounters.scoredPostings;
  textSearchOptions.pruning = true;
  let same = n === n2;
  for (let i = 0; same && i < n; i++) same = outE[i] === e2[i] && outS[i] === s2[i];
  if (!same) mismatches++;
}

const rows: { terms: number; svc: number; mini: number; flex: number }[] = [];
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
for (const terms of [1, 2, 4]) {
  const queries = queriesOf(QUERIES_PER_CLASS, docs, terms, 100 + terms);
  // The engines alternate over ROUNDS rounds (the machine's load drifts; a ratio of medians
  // of interleaved rounds holds better than one long run each); each gets the same queries.
  const s: number[] = [], m: number[] = [], f: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    s.push(qps(queries, svc));
    m.push(qps(queries, miniRun));
    f.push(qps(queries, flexRun));
  }
  rows.push({ terms, svc: median(s), mini: median(m), flex: median(f) });
}

log('');
log(table(['measure', 'svcdb', 'minisearch', 'flexsearch', 'svcdb / minisearch', 'svcdb / flexsearch'], [
  ['build (ms)', fmtMs(svcBuildMs), fmtMs(miniBuildMs), fmtMs(flexBuildMs), fmtRatio(miniBuildMs / svcBuildMs) + ' faster', fmtRatio(flexBuildMs / svcBuildMs) + ' faster'],
  ['memory (MiB)', (svcBytes / 2 ** 20).toFixed(1), (miniBytes / 2 ** 20).toFixed(1), (flexBytes / 2 ** 20).toFixed(1), fmtRatio(svcBytes / miniBytes), fmtRatio(svcBytes / flexBytes)],
  ...rows.map((r) => [`${r.terms}-term top-10 QPS`, fmtOps(r.svc), fmtOps(r.mini), fmtOps(r.flex), fmtRatio(r.svc / r.mini), fmtRatio(r.svc / r.flex)]),
]));
log('');
log(`pruning: ${check.length} queries, ${mismatches} differ from the exhaustive search; postings scored per query ${(prunedPostings / check.length).toFixed(0)} with pruning vs ${(fullPostings / check.length).toFixed(0)} without (${fmtRatio(fullPostings / Math.max(1, prunedPostings))} fewer)`);
const two = rows.find((r) => r.terms === 2)!;
log(`goals: 2-term top-10 ${fmtOps(two.svc)} QPS (goal >= 5k: ${two.svc >= 5000 ? 'met' : 'NOT met'}), ${fmtRatio(two.svc / two.mini)} minisearch (goal >= 100x: ${two.svc >= 100 * two.mini ? 'met' : 'NOT met'}); build ${fmtMs(svcBuildMs)} (goal <= 3 s: ${svcBuildMs <= 3000 ? 'met' : 'NOT met'})`);
if ((globalThis as { gc?: unknown }).gc === undefined) log('(peer memory without --expose-gc is approximate)');

const out = fileURLToPath(new URL('./text.json', import.meta.url));
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, JSON.stringify({
  corpus: corpusName, docs: docs.length, termsPerDoc: totalTerms / docs.length, seconds: SECONDS,
  build: { svcdbMs: svcBuildMs, minisearchMs: miniBuildMs, flexsearchMs: flexBuildMs },
  memory: { svcdbBytes: svcBytes, minisearchHeapBytes: miniBytes, flexsearchHeapBytes: flexBytes },
  qps: rows, pruning: { queries: check.length, mismatches, prunedPostingsPerQuery: prunedPostings / check.length, fullPostingsPerQuery: fullPostings / check.length },
}, null, 2));
log(`wrote ${out}`);
if (mismatches > 0) process.exit(1);
