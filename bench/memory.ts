// `npm run bench -- memory [--quick] [--readers N] [--read-seconds S] [--no-breakdown]
//   [--no-clean] [--pin] [--only SCENARIO]... [--node-flag FLAG]...`:
// where the server's resident memory goes with the bench graph loaded (issue 13 item 5).
//
// 1. The store alone: the bench graph loaded in this process through the same requests,
//    then every buffer's used bytes and the topology's use (Topology.memoryUsage), per node
//    and per edge.
// 2. `svc serve` started as the HTTP bench starts it (the launcher's node flags, the same
//    loader and chunks): VmRSS empty, after the load and after the read scenarios (each
//    driven for --read-seconds by the bench's load generator), split by /proc/<pid>/smaps
//    into the shared buffers (a growable SharedArrayBuffer or shared WebAssembly.Memory is
//    an accessible mapping followed by the reserved rest of its maximum: regions of >= 1
//    GiB), code (file-backed), glibc malloc and the rest (V8 heaps, stacks).
// 3. The same with the server under --inspect: each thread's V8 heap (main, writer,
//    readers; NodeWorker reaches the worker threads) as it is and after a full collection
//    on that thread (its live data). The inspector costs memory of its own, so the
//    headline figures are those of step 2.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { createRequire } from 'node:module';
import { defaultGraphSpec, generateGraph, pickStartIds, type Graph } from './graph.js';
import { defaultChunking, loadSvcdb } from './load.js';
import { loadChunks } from './queries.js';
import { executeRequest, noFlags } from '../src/exec/request.js';
import { M_HEAP_USED, NODE_WORDS, EDGE_WORDS, Store } from '../src/store/store.js';
import { drive, wrkAvailable } from './loadgen.js';
import { httpScenarios } from './scenarios.js';
import { launcher, post, repoRoot, svcdbMain } from './servers.js';
import { log, procMemory, sleep, table } from './util.js';
import { rng } from './seeded-random.js';

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    nodes: { type: 'string' },
    edges: { type: 'string' },
    readers: { type: 'string', default: '1' },
    'read-seconds': { type: 'string', default: '2' },
    'no-breakdown': { type: 'boolean', default: false },
    'no-clean': { type: 'boolean', default: false },
    /** Only these read scenarios (repeatable; default all), e.g. to compare throughput under two flags. */
    only: { type: 'string', multiple: true, default: [] },
    /** Pin the server to CPU 0 and the load generator to CPU 1 (as `npm run bench` does). */
    pin: { type: 'boolean', default: false },
    /** A V8/Node flag for the server process (repeatable), to compare settings. */
    'node-flag': { type: 'string', multiple: true, default: [] },
  },
});
const quick = opt.quick!;
const spec = {
  ...defaultGraphSpec,
  nodes: Number(opt.nodes ?? (quick ? 10_000 : defaultGraphSpec.nodes)),
  edges: Number(opt.edges ?? (quick ? 100_000 : defaultGraphSpec.edges)),
};
const MiB = 1024 * 1024;

/** The part of the `ws` client used here (ws ships no types; it is installed as a dependency of the dev tools). */
interface Socket {
  on(event: 'message', listener: (data: Buffer) => void): void;
  once(event: 'open' | 'error', listener: (arg?: unknown) => void): void;
  send(text: string): void;
  close(): void;
}
const WebSocket = createRequire(import.meta.url)('ws') as new (url: string) => Socket;

interface Server {
  child: ChildProcess;
  pid: number;
  url: string;
  inspectorUrl: string | null;
  stop(): Promise<void>;
}

async function startServer(readers: number, inspect: boolean): Promise<Server> {
  const start = launcher(svcdbMain);
  const flags = [...start.flags, ...opt['node-flag']!, ...(inspect ? ['--inspect=127.0.0.1:0'] : [])];
  const [cmd, pre] = opt.pin ? ['taskset', ['-c', '0', process.execPath]] : [process.execPath, []];
  const child = spawn(cmd, [...pre, ...flags, svcdbMain, 'serve', '--host', '127.0.0.1', '--port', '0', '--readers', String(readers)],
    { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...start.env } });
  let out = '', err = '';
  const found = await new Promise<{ url: string; inspectorUrl: string | null }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${out}${err}`)), 30_000);
    const check = (): void => {
      const m = /listening on (http:\/\/[^\s)]+)/.exec(out);
      const i = /Debugger listening on (ws:\/\/\S+)/.exec(err);
      if (m && (!inspect || i)) { clearTimeout(timer); resolve({ url: m[1]!.replace(/\/$/, ''), inspectorUrl: i?.[1] ?? null }); }
    };
    child.stdout!.on('data', (d: Buffer) => { out += d.toString(); check(); });
    child.stderr!.on('data', (d: Buffer) => { err += d.toString(); check(); });
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited with ${code}:\n${out}${err}`)); });
  });
  child.removeAllListeners('exit');
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    child, pid: child.pid!, ...found,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
    },
  };
}

// ------------------------------------------------------------------ /proc/<pid>/smaps

interface Mapping { start: number; end: number; rssBytes: number; name: string; reservedOnly: boolean }

function mappings(pid: number): Mapping[] {
  const out: Mapping[] = [];
  let current: Mapping | null = null;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      current = { start: parseInt(head[1]!, 16), end: parseInt(head[2]!, 16), rssBytes: 0, name: head[3]!, reservedOnly: line.includes(' ---p ') };
      out.push(current);
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && current) current.rssBytes = Number(rss[1]) * 1024;
  }
  return out;
}

/**
 * Known reservations (maximum lengths, store.ts, dictionary.ts, limits.ts): a growable
 * SharedArrayBuffer reserves its maxByteLength, a shared WebAssembly.Memory its maximum
 * plus guard pages; the committed part and the rest are adjacent mappings.
 */
const RESERVATIONS: [bytes: number, name: string][] = [
  [(1 << 26) * 20, 'nodes (5 words per node)'],
  [(1 << 27) * 24, 'edges (6 words per edge)'],
  // 4 GiB maximum; V8 reserves 6 GiB for it (a buffer of 4 GiB or more gets guard regions).
  [6 * 1024 * MiB, 'property heap'],
  [256 * MiB, 'dictionary bytes'],
  [(1 << 22) * 4, 'dictionary ends'],
];

interface Region { reservedBytes: number; rssBytes: number; name: string }

/**
 * Regions: an accessible anonymous mapping and the inaccessible (reserved) mappings right
 * after it. Regions of >= 1 GiB are the shared buffers and WebAssembly memories.
 */
function smapsSummary(pid: number): { buffers: Region[]; codeBytes: number; mallocBytes: number; otherAnonBytes: number; totalBytes: number } {
  const all = mappings(pid);
  const regions: Region[] = [];
  let last: Mapping | null = null, region: Region | null = null;
  for (const m of all) {
    if (m.name !== '') { last = null; continue; }
    if (last !== null && last.end === m.start && region !== null && m.reservedOnly) { region.reservedBytes += m.end - m.start; region.rssBytes += m.rssBytes; }
    else regions.push(region = { reservedBytes: m.end - m.start, rssBytes: m.rssBytes, name: '' });
    last = m;
  }
  const buffers = regions.filter((r) => r.reservedBytes >= 1024 * MiB && r.rssBytes > 0).sort((a, b) => b.rssBytes - a.rssBytes);
  for (const b of buffers) {
    const known = RESERVATIONS.find(([bytes]) => Math.abs(b.reservedBytes - bytes) < 2 * MiB);
    // The three shared WebAssembly memories (maximum 4 GiB, reserved with guard regions): the
    // topology holds the adjacency; the vector and text memories hold 64-128 KiB without indexes.
    b.name = known?.[1] ?? (b.reservedBytes >= 8 * 1024 * MiB ? 'WebAssembly memory (topology; vectors, texts)' : `${(b.reservedBytes / 2 ** 30).toFixed(2)} GiB reservation`);
  }
  const codeBytes = all.filter((m) => m.name.startsWith('/')).reduce((s, m) => s + m.rssBytes, 0);
  const totalBytes = all.reduce((s, m) => s + m.rssBytes, 0);
  const bufferBytes = buffers.reduce((s, m) => s + m.rssBytes, 0);
  // glibc malloc: the main thread's brk heap, and one 64 MiB-reserved arena per thread that mallocs.
  const mallocBytes = all.filter((m) => m.name === '[heap]').reduce((s, m) => s + m.rssBytes, 0)
    + regions.filter((r) => r.reservedBytes === 64 * MiB).reduce((s, r) => s + r.rssBytes, 0);
  return { buffers, codeBytes, mallocBytes, otherAnonBytes: totalBytes - bufferBytes - codeBytes - mallocBytes, totalBytes };
}

// ------------------------------------------------------------------ the inspector

interface ThreadHeap { thread: string; heapUsed: number; heapTotal: number; external: number; liveUsed: number; liveTotal: number }

/** A minimal CDP client: the main thread's session plus every worker's through NodeWorker. */
class Inspector {
  private nextId = 1;
  private readonly pending = new Map<string, (result: unknown) => void>();
  readonly workers = new Map<string, string>(); // sessionId -> title

  private constructor(private readonly ws: Socket) {
    ws.on("message", (data: Buffer) => this.onMessage(JSON.parse(data.toString()) as Record<string, unknown>, null));
  }

  static async connect(url: string): Promise<Inspector> {
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => { ws.once('open', () => resolve()); ws.once('error', (e) => reject(e as Error)); });
    const ins = new Inspector(ws);
    await ins.call(null, 'NodeWorker.enable', { waitForDebuggerOnStart: false });
    await sleep(300); // attachedToWorker events arrive after the reply
    return ins;
  }

  private onMessage(msg: Record<string, unknown>, session: string | null): void {
    if (msg.method === 'NodeWorker.attachedToWorker') {
      const p = msg.params as { sessionId: string; workerInfo: { title: string; workerId: string } };
      this.workers.set(p.sessionId, `${p.workerInfo.title || 'worker'} #${p.workerInfo.workerId}`);
      return;
    }
    if (msg.method === 'NodeWorker.detachedFromWorker') {
      this.workers.delete((msg.params as { sessionId: string }).sessionId);
      return;
    }
    if (msg.method === 'NodeWorker.receivedMessageFromWorker') {
      const p = msg.params as { sessionId: string; message: string };
      this.onMessage(JSON.parse(p.message) as Record<string, unknown>, p.sessionId);
      return;
    }
    if (typeof msg.id === 'number') {
      const key = `${session ?? ''}:${msg.id}`;
      const done = this.pending.get(key);
      this.pending.delete(key);
      done?.(msg.error !== undefined ? { error: msg.error } : msg.result);
    }
  }

  call(session: string | null, method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    const id = this.nextId++;
    const result = new Promise<unknown>((resolve) => this.pending.set(`${session ?? ''}:${id}`, resolve));
    const message = JSON.stringify({ id, method, params });
    if (session === null) this.ws.send(message);
    else this.ws.send(JSON.stringify({ id: this.nextId++, method: 'NodeWorker.sendMessageToWorker', params: { sessionId: session, message } }));
    return result;
  }

  /**
   * The thread's process.memoryUsage() (its own isolate's heap), after a full collection
   * when `collect` (gc() through --expose-gc set at run time, with the inspector's `require`:
   * HeapProfiler.collectGarbage gets no answer from worker threads).
   */
  private async usage(session: string | null, collect: boolean): Promise<{ heapUsed: number; heapTotal: number; external: number }> {
    const gc = collect ? "require('v8').setFlagsFromString('--expose-gc'); require('vm').runInNewContext('gc')();" : '';
    const r = await this.call(session, 'Runtime.evaluate', {
      expression: `(() => { ${gc} return JSON.stringify(process.memoryUsage()); })()`, returnByValue: true, includeCommandLineAPI: true,
    }) as { result?: { value?: string } };
    return JSON.parse(r.result?.value ?? '{}') as { heapUsed: number; heapTotal: number; external: number };
  }

  /** Every thread's heap as it is, then after a full collection on that thread. */
  async heaps(): Promise<ThreadHeap[]> {
    const out: ThreadHeap[] = [];
    for (const [session, thread] of [[null, 'main (HTTP)'] as const, ...this.workers.entries()]) {
      const before = await this.usage(session, false);
      const after = await this.usage(session, true);
      out.push({ thread, heapUsed: before.heapUsed, heapTotal: before.heapTotal, external: before.external, liveUsed: after.heapUsed, liveTotal: after.heapTotal });
    }
    return out;
  }

  close(): void { this.ws.close(); }
}

// ------------------------------------------------------------------ the run

const mib = (b: number): string => (b / MiB).toFixed(1);

async function readScenarios(url: string, graph: Graph, seconds: number): Promise<void> {
  const ctx = { graph, startIds: pickStartIds(graph, 512) };
  for (const s of httpScenarios.filter((x) => !x.mutates && (opt.only!.length === 0 || opt.only!.includes(x.key)))) {
    const work = s.workload?.(ctx) ?? { bodies: s.bodies!(ctx) };
    const first = 'bodies' in work ? work.bodies[0]! : null;
    if (first !== null && (await post(url, first)).status !== 200) { log(`  ${s.key}: first body failed, skipped`); continue; }
    const r = await drive(url, work, { connections: 64, threads: 1, durationSec: seconds, cpus: opt.pin ? '1' : null }, wrkAvailable() ? 'wrk' : 'autocannon');
    log(`  ${s.key}: ${r.rps.toFixed(0)} req/s over ${seconds} s`);
  }
}

async function phaseReport(label: string, server: Server, ins: Inspector | null): Promise<void> {
  const rss = procMemory(server.pid)!;
  log(`\n== ${label}: VmRSS ${rss.rssMiB.toFixed(1)} MiB (VmHWM ${rss.hwmMiB.toFixed(1)} MiB)`);
  const s = smapsSummary(server.pid);
  log(table(['shared buffer (reserved)', 'resident MiB'], s.buffers.map((b) => [`${b.name} (${(b.reservedBytes / 2 ** 30).toFixed(2)} GiB)`, mib(b.rssBytes)])));
  log(`shared buffers ${mib(s.buffers.reduce((x, b) => x + b.rssBytes, 0))} MiB, code (file-backed) ${mib(s.codeBytes)} MiB, malloc (brk heap and thread arenas) ${mib(s.mallocBytes)} MiB, other anonymous (V8 heaps, stacks) ${mib(s.otherAnonBytes)} MiB`);
  if (ins === null) return;
  const heaps = await ins.heaps();
  log(table(['thread', 'heap used', 'heap total', 'external', 'live used (after GC)', 'heap total after GC'],
    heaps.map((h) => [h.thread, mib(h.heapUsed), mib(h.heapTotal), mib(h.external), mib(h.liveUsed), mib(h.liveTotal)])));
  const after = procMemory(server.pid)!;
  log(`VmRSS after the forced collections: ${after.rssMiB.toFixed(1)} MiB`);
}

async function run(inspect: boolean, graph: Graph): Promise<void> {
  const server = await startServer(Number(opt.readers), inspect);
  let ins: Inspector | null = null;
  try {
    await sleep(500);
    if (inspect) ins = await Inspector.connect(server.inspectorUrl!);
    log(`\n######## server pid ${server.pid}${inspect ? ' with --inspect (breakdown)' : ' (clean)'}, --readers ${opt.readers}`);
    await phaseReport('empty', server, ins);
    const load = await loadSvcdb(graph, (body) => post(server.url, body), defaultChunking);
    log(`loaded ${spec.nodes} nodes / ${spec.edges} edges in ${(load.totalMs / 1000).toFixed(1)} s (${load.requests} requests); VmRSS right after it ${procMemory(server.pid)!.rssMiB.toFixed(1)} MiB`);
    await sleep(1000);
    await phaseReport('after the load', server, ins);
    await readScenarios(server.url, graph, Number(opt['read-seconds']));
    // `npm run bench` reads VmRSS right after the last read scenario; this report a second later.
    log(`VmRSS right after the last read scenario: ${procMemory(server.pid)!.rssMiB.toFixed(1)} MiB`);
    await sleep(1000);
    await phaseReport('after the read scenarios', server, ins);
  } finally {
    ins?.close();
    await server.stop();
  }
}

/** Step 1: the store's buffers after the bench's load, in this process. */
function storeAccounting(graph: Graph): void {
  const store = Store.create();
  for (const chunk of loadChunks(graph, defaultChunking.nodesPerChunk, defaultChunking.edgesPerChunk)) {
    const out = executeRequest(store, chunk.body, noFlags, 'writer');
    if (!('status' in out) || out.status !== 200) throw new Error(`load failed: ${JSON.stringify(out).slice(0, 300)}`);
  }
  const t = store.topology.memoryUsage();
  const names = store.shared.names;
  const rows: [string, number, number][] = [
    ['nodes (20 B per node slot)', store.nodeSlots() * NODE_WORDS * 4, store.shared.nodes.byteLength],
    ['edges (24 B per edge slot)', store.edgeSlots() * EDGE_WORDS * 4, store.shared.edges.byteLength],
    ['property heap (node records; property-less edges keep none)', store.meta[M_HEAP_USED]!, store.shared.heap.byteLength],
    ['dictionary', names.ends.byteLength + names.bytes.byteLength, names.ends.byteLength + names.bytes.byteLength],
    ['topology: directory', t.directoryBytes, 0],
    ['topology: live adjacency entries (2 per edge, 20 B each)', t.entryBytes, 0],
    ['topology: unused tails of blocks, capacity words, sentinels', t.blockBytes - t.entryBytes, 0],
    ['topology: superseded blocks free for reuse / waiting for readers', t.freeBytes + t.retiredBytes, 0],
    ['topology: header, scratch, other', t.headerBytes + t.otherBytes, t.memoryBytes],
    ['vector and text memories (no index)', store.vectorMemory().memory.buffer.byteLength + store.textMemory().shared.memory.buffer.byteLength,
      store.vectorMemory().memory.buffer.byteLength + store.textMemory().shared.memory.buffer.byteLength],
  ];
  const used = rows.reduce((a, r) => a + r[1], 0), capacity = rows.reduce((a, r) => a + r[2], 0);
  log(`\n== the store after the bench's load (in this process): ${mib(used)} MiB used of ${mib(capacity)} MiB of buffers (untouched pages are not resident)`);
  log(table(['buffer', 'used MiB', 'buffer length MiB'], rows.map(([what, u, c]) => [what, mib(u), c === 0 ? '' : mib(c)])));
  const edgeBytes = store.edgeSlots() * EDGE_WORDS * 4 + t.blockBytes + t.freeBytes + t.retiredBytes;
  const nodeBytes = used - edgeBytes;
  log(`per node ${(nodeBytes / spec.nodes).toFixed(1)} B (slot, record, directory), per edge ${(edgeBytes / spec.edges).toFixed(1)} B (slot, two adjacency entries and their share of blocks)`);
  updatedHeap(store);
}

/**
 * The property heap under updates: two rounds of batches of set_property on random nodes
 * (the mix scenario's write), each writing a new version. The first round also changes
 * record sizes (the loaded scores are whole numbers, encoded shorter), whose old blocks
 * only smaller versions can take; the second is the steady state, against the first.
 */
function updatedHeap(store: Store): void {
  const batches = quick ? 20 : 100, perBatch = 1000;
  const random = rng(5);
  const round = (): number => {
    let written = 0;
    for (let b = 0; b < batches; b++) {
      const ids: number[] = [];
      const entries = Array.from({ length: perBatch }, () => {
        const id = Math.floor(random() * spec.nodes);
        ids.push(id);
        return { query: { root: { set_property: { input: { nodes: { reference: { ids: [id] } } }, name: 'score', value: { value: { f64: random() * 100 } } } } } };
      });
      const out = executeRequest(store, JSON.stringify({ request_type: 'write', query: { write: { entries, returns: [] } } }), noFlags, 'writer');
      if (!('status' in out) || out.status !== 200) throw new Error(`update failed: ${JSON.stringify(out).slice(0, 300)}`);
      const heap = new Uint32Array(store.shared.heap), nodes = new Uint32Array(store.shared.nodes);
      for (const id of ids) written += 16 + ((heap[(nodes[id * NODE_WORDS + 4]! >>> 2) + 3]! + 3) & ~3);
    }
    return written;
  };
  const before = store.propertyHeapBytes();
  const writtenFirst = round();
  const first = store.propertyHeapBytes();
  const writtenSecond = round();
  const second = store.propertyHeapBytes();
  log(`property heap under updates (set_property of score on random nodes, ${batches} batches of ${perBatch} per round): ${mib(before)} MiB before; `
    + `${mib(first)} MiB after round 1 (${mib(writtenFirst)} MiB of versions written); ${mib(second)} MiB after round 2 (${mib(writtenSecond)} MiB written): `
    + `round 2 grew the heap by ${((second - first) / writtenSecond * 100).toFixed(1)} % of what it wrote; ${mib(store.propertyHeapReclaimableBytes())} MiB reclaimable`);
}

async function main(): Promise<void> {
  const graph = generateGraph(spec);
  log(`graph ${spec.nodes} nodes / ${spec.edges} edges`);
  storeAccounting(graph);
  if (!opt['no-clean']) await run(false, graph);
  if (!opt['no-breakdown']) await run(true, graph);
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`memory bench failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
