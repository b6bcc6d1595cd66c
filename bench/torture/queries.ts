// The query torture (`npm run torture -- --queries`; issue 10, "no query can take the
// server down"). Black box, like the storage torture: the built server as child processes,
// HTTP on 127.0.0.1, nothing imported from src/.
//
// Three servers, all with `--query-timeout-ms T` and default memory settings:
//   memory  in-memory store holding the dense graphs (complete bipartite 300x300 and
//           1000x1000, a random dense graph), loaded with batched writes;
//   disk    `--disk DIR` holding the 300x300 graph and the writer client's writes;
//   fuzz    in-memory store seeded by replaying the conformance corpus (runtime/) in order:
//           fuzzed write bodies go here, so they cannot wipe the dense graphs.
// For --seconds (default 120, --quick 20) the harness throws concurrently:
//   pathological  the shapes of query-shapes.ts (3-4 hop both / out.in.out counts and rows,
//                 repeat x10000, dedup, order_by, group_count, value_map, paths,
//                 shortest_path, union/coalesce fan-out, for_each, ...) at memory and disk;
//   deep          random op chains of depth 1-8 on the dense graphs (memory);
//   fuzz          mutated corpus bodies and random JSON (reads: memory or fuzz; writes: fuzz);
// while low-rate probes time point lookups and GET /healthz (memory, disk; healthz on fuzz)
// and a writer client makes acknowledged writes on disk (add_n with a sequence number).
//
// It fails on: a server exit, heap exhaustion in a server's output, a request without an
// answer, any answer (of any status, a 503 included) slower than T + 100 ms measured here,
// a 5xx other than 500 query_deadline_exceeded / 500 invalid_query (budgets and limits;
// for fuzz bodies also the other codes a query's content can cause) / 503 server_overloaded
// with Retry-After, a server that does not answer right after the flood, and an
// acknowledged write missing after the run or after kill -9 and a restart of the disk server.
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { corpusDir, fuzzBody, loadCorpus, type CorpusBody } from './fuzz.js';
import { mustStart, removeTemp, seeded, sleep, tempDir, type Exit, type Random, type Server } from './lib.js';
import {
  loadGraph, pathologicalShapes, pointLookup, randomTraversal, readSeqs, seqWrite,
  type GraphSpec, type LoadedGraph, type Post,
} from './query-shapes.js';

// ---------------------------------------------------------------- options and report

export interface QueryTortureOptions {
  /** Length of the flood, seconds (setup and checks come on top). */
  seconds: number;
  seed: number;
  quick: boolean;
  verbose: boolean;
  /** `--query-timeout-ms` of every server; an answer later than this + slackMs fails. */
  queryTimeoutMs: number;
  /** How much later than the deadline an answer may come (default SLACK_MS). */
  slackMs?: number;
  /** Graphs of the memory server (default: bipartite 300x300 and 1000x1000, a random dense graph). */
  graphs?: GraphSpec[];
  /** The disk server's graph (default bipartite 300x300). */
  diskGraph?: GraphSpec;
  /** Concurrent connections per kind of client (defaults below). */
  clients?: Partial<Clients>;
  /** Replay and fuzz the conformance corpus (default true when it is found). */
  fuzz?: boolean;
  out(line: string): void;
}

interface Clients {
  /** Pathological shapes at the memory server. */
  pathological: number;
  /** Pathological shapes at the disk server. */
  pathologicalDisk: number;
  deep: number;
  fuzz: number;
}

const CLIENTS_DEFAULT: Clients = { pathological: 4, pathologicalDisk: 1, deep: 2, fuzz: 2 };
/** How much later than the deadline an answer may arrive (queueing, transfer, this client). */
export const SLACK_MS = 100;
const PROBE_MEMORY_INTERVAL_MS = 25;
const PROBE_DISK_INTERVAL_MS = 50;
const PROBE_FUZZ_INTERVAL_MS = 100;
const WRITE_PAUSE_MS = 5;
/** Pause of a client after a 503. */
const SHED_PAUSE_MS = 50;
/** Bytes of an answer kept to read its error code; the rest is counted, not stored. */
const ANSWER_HEAD_BYTES = 16 * 1024;

export const DEFAULT_GRAPHS: GraphSpec[] = [
  { kind: 'bipartite', a: 300, b: 300 },
  { kind: 'bipartite', a: 1000, b: 1000 },
  { kind: 'random', nodes: 3000, edges: 150_000, seed: 0x70e7 },
];

/** What a failure is about; the smoke test asserts per kind. */
export type FailureKind =
  | 'crash' // a server process exited during the run
  | 'heap' // a server printed heap exhaustion (FATAL ERROR / heap limit)
  | 'no-answer' // connection refused / reset, or no answer within the cap
  | 'slow' // an answer later than the deadline + SLACK_MS
  | 'unexpected-5xx' // a 5xx whose code is not an expected one (internal_error, ...)
  | 'bad-503' // 503 server_overloaded without Retry-After
  | 'unresponsive-after' // a server that does not answer promptly after the flood
  | 'lost-write' // an acknowledged write missing (after the run, after kill -9 + restart)
  | 'harness'; // the harness itself could not do its job (setup failed, ...)

export interface Failure { kind: FailureKind; server: string; category: string; what: string; detail: string }

export interface CategoryStats { requests: number; ok: number; client4xx: number; expected5xx: number; shed: number; failed: number; latenciesMs: number[] }

export interface ProbeStats { idle: number[]; flood: number[]; failedIdle: number; failedFlood: number }

export interface QueryTortureReport {
  seed: number;
  passed: boolean;
  failures: Failure[];
  /** Failures per kind (every failure, also those past the stored examples). */
  failureCounts: Map<FailureKind, number>;
  categories: Map<string, CategoryStats>;
  /** `${status} ${code}` -> count (status 0: no answer). */
  histogram: Map<string, number>;
  probes: Map<string, ProbeStats>;
  writes: { acked: number; sent: number; missingAfterRun: number | null; missingAfterRestart: number | null };
  graphs: { server: string; name: string; nodes: number; edges: number; loadMs: number }[];
  clientLagMs: { p99: number; max: number };
  seconds: number;
  slackMs: number;
}

// ---------------------------------------------------------------- HTTP with a stopwatch

interface Answer {
  status: number;
  code: string;
  msg: string;
  ms: number;
  bytes: number;
  retryAfter: string | null;
  /** Why there is no answer (status 0). */
  error: string;
}

function parseError(head: string): { code: string; msg: string } {
  try {
    const o = JSON.parse(head) as { error?: unknown; msg?: unknown };
    return { code: typeof o.error === 'string' ? o.error : '', msg: typeof o.msg === 'string' ? o.msg : '' };
  } catch {
    return { code: '', msg: head.slice(0, 200) };
  }
}

/**
 * One request, timed from before it is sent to the last byte of the answer; bodies are
 * counted, not kept. Own timer and controller: on Node 20 an AbortSignal.timeout() inside
 * AbortSignal.any() can be collected before it fires, and the request then hangs.
 */
async function timedRequest(url: string, path: string, body: Buffer | string | null, capMs: number, stop: AbortSignal): Promise<Answer> {
  const t0 = performance.now();
  const abort = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => { timedOut = true; abort.abort(); }, capMs);
  const onStop = (): void => abort.abort();
  if (stop.aborted) abort.abort(); else stop.addEventListener('abort', onStop, { once: true });
  try {
    const res = await fetch(`${url}${path}`, {
      method: body === null ? 'GET' : 'POST',
      ...(body !== null ? { body, headers: { 'content-type': 'application/json' } } : {}),
      signal: abort.signal,
    });
    const chunks: Uint8Array[] = [];
    let kept = 0, bytes = 0;
    const reader = res.body!.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      if (kept < ANSWER_HEAD_BYTES) { const part = value.subarray(0, ANSWER_HEAD_BYTES - kept); chunks.push(part); kept += part.byteLength; }
    }
    const ms = performance.now() - t0;
    const { code, msg } = res.status === 200 ? { code: '', msg: '' } : parseError(Buffer.concat(chunks).toString('utf8'));
    return { status: res.status, code, msg, ms, bytes, retryAfter: res.headers.get('retry-after'), error: '' };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    const why = timedOut ? `no answer within ${capMs} ms` : abort.signal.aborted ? 'cut at the end of the run' : `${e.cause?.code ?? e.name}: ${e.cause?.message ?? e.message}`;
    return { status: 0, code: '', msg: '', ms: performance.now() - t0, bytes: 0, retryAfter: null, error: why };
  } finally {
    clearTimeout(timer);
    stop.removeEventListener('abort', onStop);
  }
}

// ---------------------------------------------------------------- servers

interface Target {
  name: string;
  server: Server;
  args: string[];
  /** Exited during the run (recorded as a crash). */
  dead: boolean;
  /** Requests sent and not answered: id -> "category: what". */
  inFlight: Map<number, string>;
  /** The last requests that got no answer (the server may still be running them). */
  unanswered: string[];
}

const HEAP_TEXT = /heap limit|FATAL ERROR|JavaScript heap out of memory|Allocation failed/i;

/** Codes a well-formed expensive read may legitimately end with (budgets, limits, the deadline). */
const EXPECTED_500_QUERY = new Set(['query_deadline_exceeded', 'invalid_query']);
/** What a fuzzed body may also cause: errors of the query's own content (errors.md §4.3-4.4). */
const EXPECTED_500_FUZZ = new Set([
  ...EXPECTED_500_QUERY, 'node_not_found', 'unique_constraint_violation', 'unsupported_unique_index_value_type', 'invalid_vector_configuration',
  'index_lifecycle_unavailable', 'active_text_mutation_limit_exceeded', 'invalid_index_source_data', 'invalid_index_model',
  'invalid_secondary_index_value', 'identifier_exhausted', 'index_id_exhausted', 'vector_physical_id_exhausted', 'index_generation_exhausted',
  'index_revision_exhausted', 'index_operation_revision_exhausted', 'index_already_exists', 'index_definition_conflict', 'index_busy',
  'index_operation_not_found', 'index_operation_not_abortable', 'index_not_found', 'response_serialization_error', 'invalid_configuration',
]);

const invalidQueryClass = (msg: string): string =>
  /memory budget/i.test(msg) ? 'memory budget' : /exceed|limit|at most|too (many|long|deep|large)/i.test(msg) ? 'limit' : 'other';

const histogramKey = (a: Answer): string => {
  if (a.status === 0) return a.error.startsWith('no answer') ? '0 no answer within the cap' : `0 ${a.error.split(':')[0]}`;
  if (a.status === 200) return '200';
  if (a.code === 'invalid_query') return `${a.status} invalid_query (${invalidQueryClass(a.msg)})`;
  return `${a.status} ${a.code || '(no code)'}`;
};

const pct = (xs: number[], p: number): number => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const maxOf = (xs: number[]): number => xs.reduce((m, x) => (x > m ? x : m), xs.length > 0 ? -Infinity : NaN);
const fmtMs = (ms: number): string => (Number.isNaN(ms) ? '-' : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(ms < 10 ? 1 : 0)} ms`);

// ---------------------------------------------------------------- the run

/** Servers of runs in progress, for killQueryServers (an interrupted run must not leave them behind). */
const live = new Set<Server>();

/** SIGKILL every server a run started and has not stopped yet (SIGINT handler). */
export function killQueryServers(): void {
  for (const s of live) if (s.alive()) s.child.kill('SIGKILL');
}

export async function runQueryTorture(opt: QueryTortureOptions): Promise<QueryTortureReport> {
  const out = opt.out;
  const clients: Clients = { ...CLIENTS_DEFAULT, ...opt.clients };
  const deadlineMs = opt.queryTimeoutMs;
  const slackMs = opt.slackMs ?? SLACK_MS;
  const slowMs = deadlineMs + slackMs;
  // How long a request may go unanswered before it counts as "no answer" (and is dropped).
  const capMs = deadlineMs + (opt.quick ? 3_000 : 10_000);
  const stopAll = new AbortController();
  setMaxListeners(0, stopAll.signal); // one listener per request in flight
  const failures: Failure[] = [];
  const failureCounts = new Map<FailureKind, number>();
  const categories = new Map<string, CategoryStats>();
  const histogram = new Map<string, number>();
  const probes = new Map<string, ProbeStats>();
  const graphsLoaded: QueryTortureReport['graphs'] = [];
  const writes: QueryTortureReport['writes'] = { acked: 0, sent: 0, missingAfterRun: null, missingAfterRestart: null };
  const targets: Target[] = [];
  let stopping = false;
  let nextRequest = 0;
  let floodStart = NaN;
  const lag = monitorEventLoopDelay({ resolution: 10 });

  const EXAMPLES_PER_KIND = 200;
  const fail = (f: Failure): void => {
    failureCounts.set(f.kind, (failureCounts.get(f.kind) ?? 0) + 1);
    if (failures.filter((x) => x.kind === f.kind).length < EXAMPLES_PER_KIND) failures.push(f);
    if (opt.verbose) out(`  !! ${f.kind} [${f.server}] ${f.category}: ${f.what}: ${f.detail.slice(0, 300)}`);
  };

  const start = async (name: string, args: string[]): Promise<Target> => {
    const server = await mustStart(args, { timeoutMs: 60_000 });
    live.add(server);
    void server.exited.then(() => live.delete(server));
    const t: Target = { name, server, args, dead: false, inFlight: new Map(), unanswered: [] };
    watchExit(t);
    targets.push(t);
    return t;
  };
  const watchExit = (t: Target): void => {
    const server = t.server;
    void server.exited.then((exit: Exit) => {
      if (stopping || t.server !== server) return;
      t.dead = true;
      // The suspects: what was in flight, and what went unanswered before (maybe still running).
      const suspects = [...t.inFlight.values(), ...t.unanswered.slice().reverse()].slice(0, 6).join(' | ') || 'none';
      const err = server.stderr().trim().split('\n');
      const fatal = err.find((l) => HEAP_TEXT.test(l));
      const tail = (fatal !== undefined ? [fatal.trim()] : err.slice(-6)).join(' | ').slice(0, 800);
      const when = Number.isNaN(floodStart) ? 'before the flood' : `${((performance.now() - floodStart) / 1000).toFixed(1)} s into the flood`;
      fail({ kind: 'crash', server: t.name, category: 'server', what: `exited ${when} (code ${exit.code}, signal ${exit.signal})`, detail: `in flight or unanswered: ${suspects}; stderr: ${tail}` });
    });
  };
  // Loading and auditing need the answer text (IDs, sequence numbers): a plain fetch. A
  // string is sent as it is (corpus bodies), anything else as JSON.
  const postText = (t: Target): Post => async (body, timeoutMs = 120_000) => {
    try {
      const res = await fetch(`${t.server.url}/v2/query`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs),
      });
      return { status: res.status, body: await res.text() };
    } catch (err) {
      return { status: 0, body: String((err as Error).message) };
    }
  };

  const stats = (category: string): CategoryStats => {
    let s = categories.get(category);
    if (s === undefined) { s = { requests: 0, ok: 0, client4xx: 0, expected5xx: 0, shed: 0, failed: 0, latenciesMs: [] }; categories.set(category, s); }
    return s;
  };

  /**
   * Send one request and judge its answer. `fuzz`: the body is fuzzed (more 5xx codes are
   * legitimate). Returns the answer (for probes and the writer).
   */
  const send = async (t: Target, category: string, what: string, path: string, body: Buffer | string | null, fuzz: boolean, excerpt?: () => string): Promise<Answer> => {
    const id = nextRequest++;
    t.inFlight.set(id, `${category}: ${what}`);
    const a = await timedRequest(t.server.url, path, body, capMs, stopAll.signal);
    t.inFlight.delete(id);
    if (a.status === 0) { t.unanswered.push(`${category}: ${what}`); if (t.unanswered.length > 16) t.unanswered.shift(); }
    const s = stats(category);
    s.requests++;
    s.latenciesMs.push(a.ms);
    const key = histogramKey(a);
    histogram.set(key, (histogram.get(key) ?? 0) + 1);
    const where = (): string => `${what}${excerpt ? `; body: ${excerpt().slice(0, 240)}` : ''}`;
    let failed = false;
    if (a.status === 0) {
      // A reset right before the exit event is the crash, not a separate failure.
      if (!t.dead) await sleep(200);
      if (!t.dead && !t.server.alive()) await sleep(500);
      if (!t.dead && !stopAll.signal.aborted) {
        fail({ kind: 'no-answer', server: t.name, category, what: where(), detail: `${a.error} after ${fmtMs(a.ms)}` });
        failed = true;
      }
    } else if (a.ms > slowMs) {
      const sentMs = performance.now() - a.ms;
      const sentAt = `${Number.isNaN(floodStart) || sentMs < floodStart ? 'before the flood' : `${((sentMs - floodStart) / 1000).toFixed(2)} s into the flood`} (Date.now() ${Math.round(Date.now() - a.ms)})`;
      fail({ kind: 'slow', server: t.name, category, what: where(), detail: `${a.status} ${a.code} after ${fmtMs(a.ms)} (deadline ${deadlineMs} ms + ${slackMs} ms), sent ${sentAt}` });
      failed = true;
    }
    if (a.status >= 500) {
      const shed = a.status === 503 && a.code === 'server_overloaded';
      const expected = shed || (a.status === 500 && (fuzz ? EXPECTED_500_FUZZ : EXPECTED_500_QUERY).has(a.code));
      if (!expected) {
        fail({ kind: 'unexpected-5xx', server: t.name, category, what: where(), detail: `${a.status} ${a.code || '(no code)'}: ${a.msg.slice(0, 300)}` });
        failed = true;
      } else if (shed && a.retryAfter === null) {
        fail({ kind: 'bad-503', server: t.name, category, what: where(), detail: '503 server_overloaded without a Retry-After header' });
        failed = true;
      }
      if (shed) s.shed++; else if (expected) s.expected5xx++;
    } else if (a.status === 200) s.ok++;
    else if (a.status >= 400) s.client4xx++;
    if (failed) s.failed++;
    // A shed client comes back soon, not at once: retrying in a tight loop would only
    // measure how fast this client can spin (it does not wait the whole Retry-After either).
    if (a.status === 503) await sleep(SHED_PAUSE_MS);
    return a;
  };

  out(`svcdb query torture: seed ${opt.seed}, ${opt.seconds} s flood, --query-timeout-ms ${deadlineMs} (answers must come within ${slowMs} ms); reproduce with --seed ${opt.seed}`);
  const dirs: string[] = [];
  let memory: Target | null = null, disk: Target | null = null, fuzzServer: Target | null = null;
  const timeoutArgs = ['--query-timeout-ms', String(deadlineMs)];
  const corpus = opt.fuzz === false ? null : corpusDir();
  const bodies = corpus === null ? null : loadCorpus(corpus);
  if (opt.fuzz !== false && bodies === null) out('  (conformance corpus not found next to the repository: no fuzz client)');
  const corpusAll: CorpusBody[] = bodies === null ? [] : [...bodies.runtime, ...bodies.jsonOnly];
  const memGraphs: LoadedGraph[] = [];
  let diskGraph: LoadedGraph | null = null;
  const acked = new Set<number>();
  const sent = new Set<number>();

  try {
    // ------------------------------------------------------------ setup (not timed against the deadline)
    const diskDir = tempDir('queries');
    dirs.push(diskDir);
    [memory, disk, fuzzServer] = await Promise.all([
      start('memory', timeoutArgs),
      start('disk', ['--disk', diskDir, '--readers', '1', ...timeoutArgs]),
      bodies !== null ? start('fuzz', ['--readers', '1', ...timeoutArgs]) : Promise.resolve(null),
    ]);
    out(`  servers: memory ${memory.server.url} (pid ${memory.server.pid}), disk ${disk.server.url} (pid ${disk.server.pid})${fuzzServer ? `, fuzz ${fuzzServer.server.url} (pid ${fuzzServer.server.pid})` : ''}`);
    const loadOn = async (t: Target, spec: GraphSpec): Promise<LoadedGraph> => {
      const t0 = performance.now();
      const g = await loadGraph(postText(t), spec);
      const ms = performance.now() - t0;
      graphsLoaded.push({ server: t.name, name: g.name, nodes: g.all.length, edges: g.edges, loadMs: ms });
      out(`  loaded ${g.name} on ${t.name} in ${fmtMs(ms)}`);
      return g;
    };
    const replay = async (t: Target): Promise<void> => {
      const t0 = performance.now();
      let ok = 0;
      for (const b of bodies!.runtime) if ((await postText(t)(b.text, 30_000)).status === 200) ok++;
      out(`  replayed the corpus (runtime/, ${bodies!.runtime.length} bodies, ${ok} answered 200) on ${t.name} in ${fmtMs(performance.now() - t0)}`);
    };
    await Promise.all([
      (async () => { for (const spec of opt.graphs ?? DEFAULT_GRAPHS) memGraphs.push(await loadOn(memory!, spec)); })(),
      (async () => { diskGraph = await loadOn(disk!, opt.diskGraph ?? { kind: 'bipartite', a: 300, b: 300 }); })(),
      fuzzServer !== null ? replay(fuzzServer) : Promise.resolve(),
    ]);
    const mem = memory, dsk = disk, fz = fuzzServer;
    const dg = diskGraph!;
    const lookupIds = memGraphs.flatMap((g) => g.all);

    // ------------------------------------------------------------ probes (idle reference, then under the flood)
    let phase: 'idle' | 'flood' = 'idle';
    let probing = true;
    const probeStats = (name: string): ProbeStats => {
      let p = probes.get(name);
      if (p === undefined) { p = { idle: [], flood: [], failedIdle: 0, failedFlood: 0 }; probes.set(name, p); }
      return p;
    };
    const probeLoop = async (t: Target, ids: number[], intervalMs: number, r: Random): Promise<void> => {
      let turn = 0;
      while (probing && !t.dead) {
        const lookup = ids.length > 0 && turn++ % 2 === 0;
        const name = `${lookup ? 'point lookup' : 'GET /healthz'} (${t.name})`;
        const body = lookup ? JSON.stringify(pointLookup(r.pick(ids))) : null;
        const current = phase;
        const a = await send(t, `probe ${name}`, name, lookup ? '/v2/query' : '/healthz', body, false);
        const p = probeStats(name);
        if (a.status === 200) (current === 'idle' ? p.idle : p.flood).push(a.ms);
        else if (current === 'idle') p.failedIdle++; else p.failedFlood++;
        await sleep(intervalMs);
      }
    };
    const probeSeed = (n: number): Random => seeded((opt.seed ^ Math.imul(n + 101, 0x9e3779b1)) >>> 0);
    const probesDone = Promise.all([
      probeLoop(mem, lookupIds, PROBE_MEMORY_INTERVAL_MS, probeSeed(1)),
      probeLoop(dsk, dg.all, PROBE_DISK_INTERVAL_MS, probeSeed(2)),
      ...(fz !== null ? [probeLoop(fz, [], PROBE_FUZZ_INTERVAL_MS, probeSeed(3))] : []),
    ]);
    const idleMs = opt.quick ? 600 : 3000;
    await sleep(idleMs);

    // ------------------------------------------------------------ the flood
    phase = 'flood';
    lag.enable();
    const t0 = performance.now();
    floodStart = t0;
    const until = t0 + opt.seconds * 1000;
    const running = (): boolean => performance.now() < until && !stopAll.signal.aborted;
    const clientSeed = (kind: number, i: number): Random => seeded((Math.imul(opt.seed ^ 0x5bd1e995, kind + 1) + Math.imul(i + 1, 0x27d4eb2f)) >>> 0);
    const loops: Promise<void>[] = [];
    const pathological = (t: Target, graphs: LoadedGraph[], r: Random) => async (): Promise<void> => {
      while (running() && !t.dead) {
        const shape = r.pick(pathologicalShapes), g = r.pick(graphs);
        const body = JSON.stringify(shape.build(g, r));
        await send(t, 'pathological', `${shape.name} on ${g.name}`, '/v2/query', body, false, () => body);
      }
    };
    for (let i = 0; i < clients.pathological; i++) loops.push(pathological(mem, memGraphs, clientSeed(1, i))());
    for (let i = 0; i < clients.pathologicalDisk; i++) loops.push(pathological(dsk, [dg], clientSeed(2, i))());
    for (let i = 0; i < clients.deep; i++) {
      const r = clientSeed(3, i);
      loops.push((async () => {
        while (running() && !mem.dead) {
          const g = r.pick(memGraphs);
          const { name, body } = randomTraversal(g, r);
          const text = JSON.stringify(body);
          await send(mem, 'deep', `${name} on ${g.name}`, '/v2/query', text, false, () => text);
        }
      })());
    }
    if (corpusAll.length > 0) {
      for (let i = 0; i < clients.fuzz; i++) {
        const r = clientSeed(4, i);
        loops.push((async () => {
          while (running()) {
            const f = fuzzBody(corpusAll, r);
            const writes = f.bytes.includes('write');
            const t = writes || r.chance(0.5) ? fz! : mem;
            if (t.dead) { if (fz!.dead && mem.dead) return; continue; }
            await send(t, 'fuzz', f.name, '/v2/query', f.bytes, true, () => f.bytes.toString('utf8'));
          }
        })());
      }
    }
    // The writer client: every acknowledged sequence number must survive.
    loops.push((async () => {
      let seq = 0;
      while (running() && !dsk.dead) {
        seq++;
        sent.add(seq);
        const a = await send(dsk, 'write (acknowledged)', `add_n seq ${seq}`, '/v2/query', JSON.stringify(seqWrite(seq)), false);
        if (a.status === 200) acked.add(seq);
        await sleep(WRITE_PAUSE_MS);
      }
    })());
    const progressEvery = opt.quick ? 5_000 : 15_000;
    const progress = setInterval(() => {
      const requests = [...categories.values()].reduce((n, s) => n + s.requests, 0);
      const failed = [...failureCounts].map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
      out(`  t=${((performance.now() - t0) / 1000).toFixed(0)} s: ${requests} requests; failures: ${failed}; ${targets.map((t) => `${t.name} ${t.dead ? 'DEAD' : 'up'}`).join(', ')}`);
    }, progressEvery);
    // Requests still running at the end get their cap; then everything left is cut.
    await sleep(Math.max(0, until - performance.now()));
    const grace = setTimeout(() => stopAll.abort(), capMs + 1000);
    await Promise.all(loops);
    clearInterval(progress);
    probing = false;
    await probesDone;
    clearTimeout(grace);
    lag.disable();
    out(`  flood over after ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    // ------------------------------------------------------------ after the flood
    const after = new AbortController(); // never aborted: each check has its cap
    await Promise.all([mem, dsk, ...(fz !== null ? [fz] : [])].filter((t) => !t.dead).map(async (t) => {
      const checks: [string, string | null][] = [['/healthz', null]];
      if (t !== fz) checks.push(['/v2/query', JSON.stringify(pointLookup((t === dsk ? dg.all : lookupIds)[0] ?? 0))]);
      for (const [path, body] of checks) {
        const a = await timedRequest(t.server.url, path, body, capMs, after.signal);
        if (a.status !== 200 || a.ms > slowMs) {
          fail({ kind: 'unresponsive-after', server: t.name, category: 'after the flood', what: `${body === null ? 'GET' : 'POST'} ${path}`, detail: `${a.status} ${a.code} ${a.error} after ${fmtMs(a.ms)}` });
        }
      }
    }));

    // ------------------------------------------------------------ acknowledged writes
    writes.acked = acked.size;
    writes.sent = sent.size;
    const audit = async (t: Target, when: string, timeoutMs: number): Promise<number | null> => {
      const a = await postText(t)(readSeqs(), timeoutMs);
      if (a.status !== 200) {
        // Not a lost write (yet): the files are read back after the restart in any case.
        fail({ kind: 'unresponsive-after', server: t.name, category: 'writes', what: `read-back ${when}`, detail: `cannot read the writes back: ${a.status} ${a.body.slice(0, 300)}` });
        return null;
      }
      const present = new Set((JSON.parse(a.body) as { r: { seq?: number }[] }).r.map((x) => x.seq));
      const missing = [...acked].filter((k) => !present.has(k)).sort((x, y) => x - y);
      const phantom = [...present].filter((k) => typeof k !== 'number' || !sent.has(k));
      if (missing.length > 0) {
        fail({ kind: 'lost-write', server: t.name, category: 'writes', what: `read-back ${when}`, detail: `${missing.length} of ${acked.size} acknowledged writes missing: seq ${missing.slice(0, 12).join(',')}${missing.length > 12 ? ',...' : ''}` });
      }
      if (phantom.length > 0) fail({ kind: 'lost-write', server: t.name, category: 'writes', what: `read-back ${when}`, detail: `${phantom.length} writes present that were never sent: ${phantom.slice(0, 8).join(',')}` });
      return missing.length;
    };
    if (!dsk.dead) writes.missingAfterRun = await audit(dsk, 'after the run', capMs);
    else out('  disk server is gone: no read-back before the restart');
    // kill -9 (whatever state it is in) and read everything back from the files.
    stopping = true;
    await dsk.server.kill9();
    const again = await start('disk (restarted)', dsk.args);
    writes.missingAfterRestart = await audit(again, 'after kill -9 and a restart', 60_000);
    out(`  writes: ${acked.size} acknowledged of ${sent.size} sent; missing after the run: ${writes.missingAfterRun ?? 'not checked'}, after kill -9 + restart: ${writes.missingAfterRestart ?? 'not checked'}`);
  } catch (err) {
    fail({ kind: 'harness', server: '-', category: 'harness', what: 'the run stopped', detail: (err as Error).stack?.split('\n').slice(0, 4).join(' | ') ?? String(err) });
  } finally {
    stopping = true;
    stopAll.abort();
    for (const t of targets) {
      const stopped = await t.server.stop(3_000);
      if (stopped.forced && !t.dead) out(`  (${t.name} did not stop within 3 s of SIGTERM: killed)`);
      // A server that printed heap exhaustion failed, whether it died of it or was stopped.
      const text = t.server.stderr() + t.server.stdout();
      if (HEAP_TEXT.test(text)) {
        const line = text.split('\n').find((l) => HEAP_TEXT.test(l)) ?? '';
        fail({ kind: 'heap', server: t.name, category: 'server', what: 'heap exhaustion in the server output', detail: line.trim().slice(0, 300) });
      }
    }
    for (const d of dirs) removeTemp(d);
  }
  lag.disable();
  const passed = failureCounts.size === 0;
  return {
    seed: opt.seed, passed, failures, failureCounts, categories, histogram, probes, writes, graphs: graphsLoaded,
    clientLagMs: { p99: lag.percentile(99) / 1e6, max: lag.max / 1e6 }, seconds: opt.seconds, slackMs,
  };
}

// ---------------------------------------------------------------- report

const table = (header: string[], rows: string[][]): string[] => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)];
};

export function printReport(r: QueryTortureReport, out: (line: string) => void): void {
  out('\n== query torture: requests per category ==\n');
  const cats = [...r.categories].sort((a, b) => a[0].localeCompare(b[0]));
  for (const l of table(['category', 'requests', '200', '4xx', '5xx expected', '503 shed', 'failed', 'p50', 'p99', 'max'], cats.map(([name, s]) => [
    name, String(s.requests), String(s.ok), String(s.client4xx), String(s.expected5xx), String(s.shed), String(s.failed),
    fmtMs(pct(s.latenciesMs, 50)), fmtMs(pct(s.latenciesMs, 99)), fmtMs(maxOf(s.latenciesMs)),
  ]))) out(l);

  out('\n== status / code histogram (0 = no answer) ==\n');
  for (const l of table(['status code', 'answers'], [...r.histogram].sort((a, b) => b[1] - a[1]).map(([k, n]) => [k, String(n)]))) out(l);

  out('\n== probes: idle (before the flood) vs under the flood ==\n');
  const ratio = (a: number, b: number): string => (Number.isFinite(a / b) ? `${(a / b).toFixed(a / b >= 10 ? 0 : 2)}x` : '-');
  for (const l of table(['probe', 'idle p50', 'idle p99', 'flood p50', 'flood p99', 'flood max', 'flood p99 / idle p99', 'answered', 'not 200'], [...r.probes].sort((a, b) => a[0].localeCompare(b[0])).map(([name, p]) => [
    name, fmtMs(pct(p.idle, 50)), fmtMs(pct(p.idle, 99)), fmtMs(pct(p.flood, 50)), fmtMs(pct(p.flood, 99)), fmtMs(maxOf(p.flood)),
    ratio(pct(p.flood, 99), pct(p.idle, 99)), String(p.idle.length + p.flood.length), String(p.failedIdle + p.failedFlood),
  ]))) out(l);
  out(`(this client's event-loop delay during the flood: p99 ${fmtMs(r.clientLagMs.p99)}, max ${fmtMs(r.clientLagMs.max)}; latencies include it)`);
  if (r.clientLagMs.max > r.slackMs) out(`!! this client itself stalled for up to ${fmtMs(r.clientLagMs.max)} (2 cores shared with the servers): a 'slow' failure within that of the limit may be the client's`);

  out('\n== acknowledged writes (disk server) ==\n');
  const w = r.writes;
  out(`${w.acked} acknowledged of ${w.sent} sent; missing after the run: ${w.missingAfterRun ?? 'not checked'}; missing after kill -9 + restart: ${w.missingAfterRestart ?? 'not checked'}`);

  const kinds = [...r.failureCounts];
  if (kinds.length > 0) {
    out('\n== failures ==\n');
    for (const l of table(['kind', 'count'], kinds.map(([k, n]) => [k, String(n)]))) out(l);
    for (const [kind, n] of kinds) {
      const examples = r.failures.filter((f) => f.kind === kind);
      out(`\n[${kind}] ${n} failure(s)${n > 5 ? ', first 5' : ''}:`);
      for (const f of examples.slice(0, 5)) out(`  - [${f.server}] ${f.category}: ${f.what.slice(0, 400)} => ${f.detail.slice(0, 500)}`);
    }
  }
  out(`\nquery torture: ${r.passed ? 'PASS' : 'FAIL'} (seed ${r.seed}, ${r.seconds} s flood${r.passed ? '' : `; ${kinds.map(([k, n]) => `${k} ${n}`).join(', ')}`})`);
}

/** A fresh seed when none is given (printed for reproduction). */
export const freshSeed = (): number => (Date.now() ^ (process.pid << 8) ^ parseInt(randomUUID().slice(0, 8), 16)) >>> 0;
