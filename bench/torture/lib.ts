// Black-box fault-injection harness: starts the built server (`node dist/src/cli/main.js
// serve ...`) as a child process, drives a seeded write load whose batches make partial
// application detectable, kills it, damages its files, and audits what a restart shows.
// Nothing here imports src/: only the binary, HTTP on 127.0.0.1 and the files on disk.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, watch } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { rng } from '../graph.js';
import { benchNodeFlags, keepServerLog, launcher } from '../servers.js';

// ---------------------------------------------------------------- paths, rng, temp dirs

/** The repository root (this file runs from bench/torture/ under vitest and dist/bench/torture/ when built). */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    dir = dirname(dir);
  }
  throw new Error('repository root (package.json) not found above bench/torture');
}

export const cliPath = (): string => join(repoRoot(), 'dist/src/cli/main.js');

export interface Random {
  next(): number;
  int(lo: number, hiInclusive: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
}

export function seeded(seed: number): Random {
  const next = rng(seed);
  return {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (items) => items[Math.floor(next() * items.length)]!,
    chance: (p) => next() < p,
  };
}

/** Mix a run seed with scenario and round numbers into a round seed (printed for reproduction). */
export const roundSeed = (seed: number, scenario: number, round: number): number =>
  (Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) + Math.imul(scenario + 1, 0xc2b2ae35) + Math.imul(round + 1, 0x27d4eb2f)) >>> 0;

const temps = new Set<string>();
export function tempDir(tag: string): string {
  const d = mkdtempSync(join(tmpdir(), `svcdb-torture-${tag}-`));
  temps.add(d);
  return d;
}
export function removeTemp(d: string): void {
  rmSync(d, { recursive: true, force: true });
  temps.delete(d);
}
export function removeAllTemps(): void {
  for (const d of [...temps]) removeTemp(d);
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- server processes

export interface Exit { code: number | null; signal: NodeJS.Signals | null }

export interface Server {
  url: string;
  pid: number;
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<Exit>;
  alive(): boolean;
  /** SIGKILL now (synchronous send), resolve on exit. */
  kill9(): Promise<Exit>;
  /** SIGTERM and wait up to `ms`; SIGKILL after that. Resolves the exit and whether it needed the SIGKILL. */
  stop(ms?: number): Promise<Exit & { forced: boolean }>;
}

export type StartOutcome =
  | { kind: 'listening'; server: Server; ms: number }
  | { kind: 'exited'; exit: Exit; stdout: string; stderr: string; ms: number }
  | { kind: 'timeout'; stdout: string; stderr: string; ms: number };

/** `svc serve --host 127.0.0.1 --port 0 ...args`: resolves at its listening line, its exit, or the timeout (then killed). */
export async function startServer(args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<StartOutcome> {
  const t0 = performance.now();
  // Node flags as `svc serve` starts (its launcher line), then the bench's debugging hooks.
  const start = launcher(cliPath());
  const nodeFlags = [...start.flags, ...benchNodeFlags()];
  const child = spawn(process.execPath, [...nodeFlags, cliPath(), 'serve', '--host', '127.0.0.1', '--port', '0', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...start.env, ...opts.env },
  });
  keepServerLog('server', child.pid, [child.stdout!, child.stderr!]);
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; if (out.length > 200_000) out = out.slice(-100_000); });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { err += d; if (err.length > 200_000) err = err.slice(-100_000); });
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const alive = (): boolean => child.exitCode === null && child.signalCode === null;
  const server: Server = {
    url: '', pid: child.pid ?? -1, child, stdout: () => out, stderr: () => err, exited, alive,
    kill9: () => { if (alive()) child.kill('SIGKILL'); return exited; },
    stop: async (ms = 10_000) => {
      if (!alive()) return { ...(await exited), forced: false };
      child.kill('SIGTERM');
      const t = await Promise.race([exited, sleep(ms).then(() => null)]);
      if (t !== null) return { ...t, forced: false };
      child.kill('SIGKILL');
      return { ...(await exited), forced: true };
    },
  };
  const timeoutMs = opts.timeoutMs ?? 30_000;
  return new Promise<StartOutcome>((resolve) => {
    let done = false;
    const finish = (o: StartOutcome): void => { if (!done) { done = true; clearTimeout(timer); resolve(o); } };
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      void exited.then(() => finish({ kind: 'timeout', stdout: out, stderr: err, ms: performance.now() - t0 }));
    }, timeoutMs);
    child.stdout!.on('data', () => {
      const m = /listening on (http:\/\/[^\s)]+)/.exec(out);
      if (m) { server.url = m[1]!.replace(/\/$/, ''); finish({ kind: 'listening', server, ms: performance.now() - t0 }); }
    });
    void exited.then((exit) => {
      // Let the pipes drain so the message is complete.
      setTimeout(() => finish({ kind: 'exited', exit, stdout: out, stderr: err, ms: performance.now() - t0 }), 50);
    });
  });
}

/** A start that must succeed; throws with the server's output otherwise. */
export async function mustStart(args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<Server> {
  const o = await startServer(args, opts);
  if (o.kind === 'listening') return o.server;
  throw new Error(`server did not start (${describeStart(o)})`);
}

export function describeStart(o: StartOutcome): string {
  if (o.kind === 'listening') return `listening at ${o.server.url}`;
  const text = (o.stderr + o.stdout).trim().split('\n').slice(0, 8).join(' | ').slice(0, 900);
  if (o.kind === 'timeout') return `no listening line within ${o.ms.toFixed(0)} ms: ${text}`;
  return `exited with code ${o.exit.code} signal ${o.exit.signal}: ${text}`;
}

/** A Node stack trace in the output ("    at f (file:line)"): a crash, not a refusal. */
export const hasStackTrace = (text: string): boolean => /\n\s+at .+(\.js|\.ts|node:)/.test(text);

// ---------------------------------------------------------------- HTTP

export interface Answer { status: number; body: string }

/** POST /v2/query with a time bound; status 0 = no answer (connection refused/reset, timeout). */
export async function post(url: string, body: unknown, headers: Record<string, string> = {}, timeoutMs = 15_000): Promise<Answer> {
  try {
    const res = await fetch(`${url}/v2/query`, {
      method: 'POST', headers: { 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs),
    });
    return { status: res.status, body: await res.text() };
  } catch (err) {
    return { status: 0, body: String((err as Error).cause ?? (err as Error).message) };
  }
}

export async function getStatus(url: string, path: string, timeoutMs = 3_000): Promise<Answer> {
  try {
    const res = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(timeoutMs) });
    return { status: res.status, body: await res.text() };
  } catch (err) {
    return { status: 0, body: String((err as Error).message) };
  }
}

export const errorCode = (a: Answer): string => {
  try { return String((JSON.parse(a.body) as { error?: string }).error ?? ''); } catch { return ''; }
};

// ---------------------------------------------------------------- request builders

type Json = unknown;
export const writeReq = (entries: Json[], returns: string[] = [], parameters?: Record<string, Json>): Json =>
  ({ request_type: 'write', query: { write: { entries, returns } }, ...(parameters ? { parameters } : {}) });
export const readReq = (entries: Json[], returns: string[]): Json => ({ request_type: 'read', query: { read: { entries, returns } } });
export const entry = (name: string | null, root: Json): Json => ({ query: { name, root } });
export const lit = (v: number | string): Json => (typeof v === 'number' ? { value: { i64: v } } : { value: { string: v } });
export const nodeIds = (ids: number[]): Json => ({ nodes: { reference: { ids } } });
export const nodeVar = (name: string): Json => ({ nodes: { reference: { var: name } } });
export const wherePropEq = (prop: string, v: number): Json =>
  ({ nodes_where: { predicate: { eq: { left: { property: prop }, right: { constant: { i64: v } } } } } });
/** A node ID no test ever reaches. */
export const MISSING_ID = 900_000_000_000;

// ---------------------------------------------------------------- the pair workload

/**
 * Batch k adds nodes a (r=0) and b (r=1) and an edge a -> b, all carrying k. About one
 * batch in eight introduces a new node label, edge label and property key (named after k),
 * so dictionary growth is part of what a crash can tear. Everything follows from (seed, k).
 */
export interface PairSpec { k: number; la: string; lb: string; le: string; key: string | null; pad: number }

export function pairSpec(seed: number, k: number, padBytes = 0): PairSpec {
  const r = seeded((seed ^ Math.imul(k + 1, 0x2545f491)) >>> 0);
  const fresh = r.chance(0.125);
  return {
    k,
    la: fresh ? `La${k}` : r.pick(['B', 'C']),
    lb: fresh ? `Lb${k}` : 'B',
    le: fresh ? `E${k}` : r.pick(['PAIR', 'LINK']),
    key: fresh || r.chance(0.1) ? `p${k}` : null,
    pad: padBytes,
  };
}

export function pairRequest(s: PairSpec): Json {
  const aProps: [string, Json][] = [['k', lit(s.k)], ['r', lit(0)]];
  if (s.key !== null) aProps.push([s.key, lit(`v${s.k}`)]);
  if (s.pad > 0) aProps.push(['pad', lit('x'.repeat(s.pad))]);
  const eProps: [string, Json][] = [['k', lit(s.k)]];
  if (s.key !== null) eProps.push([s.key, lit(s.k * 3)]);
  return writeReq([
    entry('a', { add_n: { label: s.la, properties: aProps } }),
    entry('b', { add_n: { label: s.lb, properties: [['k', lit(s.k)], ['r', lit(1)]] } }),
    entry(null, { add_e: { input: nodeVar('a'), label: s.le, to: { var: 'b' }, properties: eProps } }),
  ], ['a', 'b']);
}

export interface Dump { nodes: Record<string, unknown>[]; edges: Record<string, unknown>[] }

export const dumpRequest = readReq([
  entry('n', { value_map: { input: { nodes: { reference: 'all' } } } }),
  entry('e', { edge_properties: { input: { edges: { reference: 'all' } } } }),
], ['n', 'e']);

export async function dump(url: string): Promise<Dump> {
  const a = await post(url, dumpRequest, {}, 60_000);
  if (a.status !== 200) throw new Error(`dump failed: ${a.status} ${a.body.slice(0, 300)}`);
  const body = JSON.parse(a.body) as { n: Record<string, unknown>[]; e: Record<string, unknown>[] };
  return { nodes: body.n, edges: body.e };
}

/** Problems with a dump of the pair workload: partial or malformed batches, missing acknowledged ones, unknown ones. */
export function checkPairs(d: Dump, seed: number, sent: ReadonlySet<number>, acked: ReadonlySet<number>, padBytes = 0): string[] {
  const problems: string[] = [];
  const byK = new Map<number, { nodes: Record<string, unknown>[]; edges: Record<string, unknown>[] }>();
  const slot = (k: number) => { let s = byK.get(k); if (!s) { s = { nodes: [], edges: [] }; byK.set(k, s); } return s; };
  for (const n of d.nodes) {
    if (typeof n['k'] !== 'number') { problems.push(`node without k: ${JSON.stringify(n).slice(0, 200)}`); continue; }
    slot(n['k']).nodes.push(n);
  }
  for (const e of d.edges) {
    if (typeof e['k'] !== 'number') { problems.push(`edge without k: ${JSON.stringify(e).slice(0, 200)}`); continue; }
    slot(e['k']).edges.push(e);
  }
  for (const [k, got] of [...byK].sort((x, y) => x[0] - y[0])) {
    if (!sent.has(k)) problems.push(`batch ${k} present but never sent`);
    const s = pairSpec(seed, k, padBytes);
    const a = got.nodes.find((n) => n['r'] === 0), b = got.nodes.find((n) => n['r'] === 1);
    if (got.nodes.length !== 2 || a === undefined || b === undefined || got.edges.length !== 1) {
      problems.push(`batch ${k} partly present: ${got.nodes.length} node(s) ${got.nodes.map((n) => `r=${String(n['r'])}`).join(',')}, ${got.edges.length} edge(s)`);
      continue;
    }
    const expectA: Record<string, unknown> = { $label: s.la, k, r: 0, ...(s.key !== null ? { [s.key]: `v${k}` } : {}), ...(s.pad > 0 ? { pad: 'x'.repeat(s.pad) } : {}) };
    const expectB: Record<string, unknown> = { $label: s.lb, k, r: 1 };
    const expectE: Record<string, unknown> = { $label: s.le, k, ...(s.key !== null ? { [s.key]: k * 3 } : {}) };
    const e = got.edges[0]!;
    for (const [what, actual, expected] of [['node a', a, expectA], ['node b', b, expectB], ['edge', e, expectE]] as const) {
      const diff = propDiff(actual, expected);
      if (diff) problems.push(`batch ${k} ${what} differs: ${diff}`);
    }
    if (e['$from'] !== a['$id'] || e['$to'] !== b['$id']) problems.push(`batch ${k} edge connects ${String(e['$from'])}->${String(e['$to'])}, not a ${String(a['$id'])} -> b ${String(b['$id'])}`);
  }
  const missing = [...acked].filter((k) => !byK.has(k)).sort((x, y) => x - y);
  if (missing.length > 0) problems.push(`${missing.length} acknowledged batch(es) missing: ${listShort(missing)} (of ${acked.size} acknowledged)`);
  return problems;
}

function propDiff(actual: Record<string, unknown>, expected: Record<string, unknown>): string | null {
  const keys = new Set([...Object.keys(actual), ...Object.keys(expected)].filter((key) => !['$id', '$from', '$to'].includes(key)));
  const out: string[] = [];
  for (const key of [...keys].sort()) {
    const x = JSON.stringify(actual[key]), y = JSON.stringify(expected[key]);
    if (x !== y) out.push(`${key}: got ${(x ?? 'absent').slice(0, 40)}, want ${(y ?? 'absent').slice(0, 40)}`);
  }
  return out.length > 0 ? out.join('; ') : null;
}

export const listShort = (xs: number[], max = 12): string => (xs.length <= max ? xs.join(',') : `${xs.slice(0, max).join(',')},... (+${xs.length - max})`);

export interface LoadLog {
  sent: Set<number>;
  acked: Set<number>;
  /** k -> "status error" for batches answered with an error. */
  failed: Map<number, string>;
  /** Batches sent without an answer (connection reset by a kill). */
  unanswered: Set<number>;
  /** Batch k -> when it was answered 200 (performance.now()). */
  ackedAt: Map<number, number>;
}
export const newLoadLog = (): LoadLog => ({ sent: new Set(), acked: new Set(), failed: new Map(), unanswered: new Set(), ackedAt: new Map() });

/**
 * `clients` concurrent loops posting pair batches until `stop()`, `untilMs` (performance.now)
 * or `maxRequests` in total; a client stops at its first unanswered request (server gone).
 */
export async function pairLoad(url: string, seed: number, log: LoadLog, opts: {
  nextK: () => number; clients: number; maxRequests: number; untilMs: number; stop?: () => boolean; padBytes?: number;
  continueAfterNoAnswer?: boolean; pauseMs?: number;
}): Promise<void> {
  let budget = opts.maxRequests;
  const client = async (): Promise<void> => {
    while (budget > 0 && performance.now() < opts.untilMs && !(opts.stop?.() ?? false)) {
      budget--;
      const k = opts.nextK();
      log.sent.add(k);
      const a = await post(url, pairRequest(pairSpec(seed, k, opts.padBytes ?? 0)), {}, 10_000);
      if (a.status === 200) { log.acked.add(k); log.ackedAt.set(k, performance.now()); } else if (a.status === 0) {
        log.unanswered.add(k);
        if (!opts.continueAfterNoAnswer) return;
        await sleep(50);
      } else log.failed.set(k, `${a.status} ${errorCode(a)}`);
      if (opts.pauseMs) await sleep(opts.pauseMs);
    }
  };
  await Promise.all(Array.from({ length: opts.clients }, client));
}

// ---------------------------------------------------------------- exact-model dumps

/**
 * A dump as a sorted list of canonical strings: node = its properties (no $id), edge = its
 * properties plus the canonical form of both endpoints. For scenarios that know the exact
 * expected graph (every node carries a unique `u`).
 */
export function canonical(d: Dump): string[] {
  const nodeById = new Map<unknown, string>();
  const out: string[] = [];
  for (const n of d.nodes) {
    const c = canon(n);
    nodeById.set(n['$id'], c);
    out.push(`N ${c}`);
  }
  for (const e of d.edges) out.push(`E ${canon(e)} ${nodeById.get(e['$from']) ?? `?${String(e['$from'])}`} -> ${nodeById.get(e['$to']) ?? `?${String(e['$to'])}`}`);
  return out.sort();
}

export function canon(o: Record<string, unknown>): string {
  const keys = Object.keys(o).filter((k) => !['$id', '$from', '$to'].includes(k)).sort();
  return `{${keys.map((k) => `${k}:${JSON.stringify(o[k])}`).join(',')}}`;
}

/** Differences between two canonical lists (multiset), as short lines. */
export function diffCanonical(actual: string[], expected: string[], max = 8): string[] {
  const count = (xs: string[]) => { const m = new Map<string, number>(); for (const x of xs) m.set(x, (m.get(x) ?? 0) + 1); return m; };
  const a = count(actual), e = count(expected);
  const lines: string[] = [];
  let extra = 0, missing = 0;
  for (const [x, n] of e) { const d = n - (a.get(x) ?? 0); if (d > 0) { missing += d; if (lines.length < max) lines.push(`missing ${x.slice(0, 160)}`); } }
  for (const [x, n] of a) { const d = n - (e.get(x) ?? 0); if (d > 0) { extra += d; if (lines.length < max) lines.push(`unexpected ${x.slice(0, 160)}`); } }
  if (missing + extra > 0) lines.unshift(`${missing} expected element(s) missing, ${extra} unexpected`);
  return lines;
}

// ---------------------------------------------------------------- files

/** sha256 of every regular file in `dir` except the writer lock files (taken and released by any start). */
export function hashDir(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const f of readdirSync(dir).sort()) {
    if (f.startsWith('writer.')) continue;
    const p = join(dir, f);
    if (!statSync(p).isFile()) continue;
    out.set(f, createHash('sha256').update(readFileSync(p)).digest('hex').slice(0, 16));
  }
  return out;
}

export function diffHashes(before: Map<string, string>, after: Map<string, string>): string[] {
  const out: string[] = [];
  for (const [f, h] of before) if (!after.has(f)) out.push(`${f} deleted`); else if (after.get(f) !== h) out.push(`${f} changed`);
  for (const f of after.keys()) if (!before.has(f)) out.push(`${f} created`);
  return out;
}

export function copyData(src: string, dst: string): void {
  for (const f of readdirSync(src)) {
    if (f.startsWith('writer.')) continue;
    cpSync(join(src, f), join(dst, f), { recursive: true });
  }
}

export const listing = (dir: string): string => {
  try {
    return readdirSync(dir).sort().map((f) => { try { return `${f}:${statSync(join(dir, f)).size}`; } catch { return f; } }).join(' ');
  } catch { return '(gone)'; }
};

/**
 * Call `hit(name)` as soon as a file whose name satisfies `match` appears in `dir`
 * (inotify through fs.watch, plus a 2 ms poll in case an event is missed). Returns a stop function.
 */
export function watchFor(dir: string, match: (name: string) => boolean, hit: (name: string) => void): () => void {
  let stopped = false;
  const fire = (name: string): void => { if (!stopped) { stopped = true; stop(); hit(name); } };
  let watcher: ReturnType<typeof watch> | null = null;
  try {
    watcher = watch(dir, (_event, name) => { if (name !== null && match(String(name))) fire(String(name)); });
    watcher.on('error', () => { /* poll continues */ });
  } catch { /* poll only */ }
  const poll = setInterval(() => {
    try { for (const f of readdirSync(dir)) if (match(f)) { fire(f); return; } } catch { /* dir gone */ }
  }, 2);
  const stop = (): void => { stopped = true; clearInterval(poll); watcher?.close(); };
  return stop;
}

// ---------------------------------------------------------------- file layouts (format version 2 as documented)

export interface Region { file: string; kind: string; start: number; end: number }

/**
 * The regions of one persisted file, parsed with the layout docs/architecture.md §5
 * describes (snapshot: 24-byte header, per section [u32 nameLen][name][u32 len][u32 crc][bytes];
 * WAL: 16-byte header, frames [u32 len][u32 crc][payload]). A file that does not parse
 * (the format changed) yields one 'unparsed' region, so byte flips still cover it.
 */
export function fileRegions(path: string, lastSegment: boolean): Region[] {
  const file = basename(path);
  const bytes = readFileSync(path);
  const whole: Region[] = bytes.length > 0 ? [{ file, kind: `unparsed ${file.split('-')[0]}`, start: 0, end: bytes.length }] : [];
  if (file.startsWith('snapshot-') && file.endsWith('.bin')) {
    if (bytes.length < 24 || bytes.toString('latin1', 0, 8) !== 'SVCDBSNP') return whole;
    const out: Region[] = [{ file, kind: 'snapshot header', start: 0, end: 24 }];
    const count = bytes.readUInt32LE(12);
    let at = 24;
    for (let i = 0; i < count; i++) {
      if (at + 4 > bytes.length) return whole;
      const nameLength = bytes.readUInt32LE(at);
      const headEnd = at + 4 + nameLength + 8;
      if (headEnd > bytes.length) return whole;
      const length = bytes.readUInt32LE(at + 4 + nameLength);
      out.push({ file, kind: 'snapshot section table', start: at, end: headEnd });
      if (headEnd + length > bytes.length) return whole;
      if (length > 0) out.push({ file, kind: 'snapshot section data', start: headEnd, end: headEnd + length });
      at = headEnd + length;
    }
    return out;
  }
  if (file.startsWith('wal-') && file.endsWith('.log')) {
    if (bytes.length < 16 || bytes.toString('latin1', 0, 8) !== 'SVCDBWAL') return whole;
    const where = lastSegment ? 'last segment' : 'non-last segment';
    const out: Region[] = [{ file, kind: `WAL header (${where})`, start: 0, end: 16 }];
    const frames = walFrames(bytes);
    if (frames === null) return whole;
    frames.forEach((f, i) => {
      const pos = i === frames.length - 1 ? 'last frame' : 'earlier frame';
      out.push({ file, kind: `frame header, ${pos} (${where})`, start: f.start, end: f.start + 8 });
      if (f.end > f.start + 8) out.push({ file, kind: `frame payload, ${pos} (${where})`, start: f.start + 8, end: f.end });
    });
    return out;
  }
  return whole;
}

/** Whole frames of a WAL segment [start, end) or null when the bytes do not parse as frames. */
export function walFrames(bytes: Buffer): { start: number; end: number }[] | null {
  // docs/durability.md §2: a 32-byte segment header, frames of a 16-byte header
  // (length, epoch, two checksums) and a payload padded to 8 bytes.
  if (bytes.length < 32 || bytes.toString('latin1', 0, 8) !== 'SVCDBWAL') return null;
  const out: { start: number; end: number }[] = [];
  let at = 32;
  while (at + 16 <= bytes.length) {
    const end = at + 16 + ((bytes.readUInt32LE(at) + 7) & ~7);
    if (end > bytes.length) return null;
    out.push({ start: at, end });
    at = end;
  }
  return at === bytes.length ? out : null;
}

/** Persisted data files (snapshots and WAL segments), WAL segments in name order. */
export function dataFiles(dir: string): { snapshots: string[]; segments: string[]; other: string[] } {
  const files = readdirSync(dir).filter((f) => !f.startsWith('writer.') && statSync(join(dir, f)).isFile()).sort();
  return {
    snapshots: files.filter((f) => f.startsWith('snapshot-') && f.endsWith('.bin')),
    segments: files.filter((f) => f.startsWith('wal-') && f.endsWith('.log')),
    other: files.filter((f) => !(f.startsWith('snapshot-') && f.endsWith('.bin')) && !(f.startsWith('wal-') && f.endsWith('.log'))),
  };
}
