// Snapshot export and load on the benchmark graph (100k nodes, 1M edges), alone with
// `node dist/bench/snapshot-sections.js`: the whole-buffer copy on the writer thread
// (Store.exportSections) against sectionsAt read chunk by chunk, with the extra memory
// each needs (process.memoryUsage().arrayBuffers above the store's own buffers), and the
// writer's stall when another thread exports while it commits.
import { Worker } from 'node:worker_threads';
import { crc32 } from 'node:zlib';
import { executeRequest, noFlags } from '../src/exec/request.js';
import { loadSections, sectionsAt } from '../src/store/snapshot-sections.js';
import { Store } from '../src/store/store.js';
import { generateGraph } from './graph.js';
import { loadChunks } from './queries.js';
import { log, table } from './util.js';

const ROUNDS = 3;
const MiB = 1024 * 1024;
const extraMiB = () => process.memoryUsage().arrayBuffers / MiB;

function write(store: Store, body: string): void {
  const out = executeRequest(store, body, noFlags, 'writer');
  if (!('status' in out) || out.status !== 200) throw new Error(`load failed: ${JSON.stringify(out).slice(0, 300)}`);
}

function timeIt(f: () => void): number {
  const t0 = performance.now();
  f();
  return performance.now() - t0;
}

async function main(): Promise<void> {
  const graph = generateGraph();
  const store = Store.create();
  for (const chunk of loadChunks(graph, 25_000, 50_000)) write(store, chunk.body);
  // Some history: property updates and deletions, so versions and deleted entries exist.
  for (let i = 0; i < 200; i++) {
    write(store, JSON.stringify({ request_type: 'write', query: { write: { entries: [
      { query: { root: { set_property: { input: { nodes: { reference: { ids: [i * 37] } } }, name: 'age', value: { value: { i64: i } } } } } },
      { query: { root: { drop_edge_by_id: { edges: { ids: [i * 4999] } } } } },
    ], returns: [] } } }));
  }
  const cut = store.cut();
  log(`graph: ${cut.nodeSlots} nodes, ${cut.edgeSlots} edges, heap ${(cut.heapUsed / MiB).toFixed(1)} MiB, epoch ${cut.epoch}`);

  const rows: string[][] = [];
  let oldBytes = 0;
  {
    const times: number[] = [];
    let peak = 0;
    for (let r = 0; r < ROUNDS; r++) {
      global.gc?.();
      const base = extraMiB();
      let sections: Map<string, Uint8Array> | null = null;
      times.push(timeIt(() => { sections = store.exportSections(); }));
      peak = Math.max(peak, extraMiB() - base);
      oldBytes = [...sections!.values()].reduce((n, b) => n + b.byteLength, 0);
      sections = null;
    }
    rows.push(['exportSections (writer thread, whole copies)', `${Math.min(...times).toFixed(0)} ms`, `${(oldBytes / MiB).toFixed(1)} MiB`, `${peak.toFixed(1)} MiB`]);
  }
  {
    const firstPass: number[] = [], total: number[] = [];
    let peak = 0, bytes = 0, sum = 0;
    for (let r = 0; r < ROUNDS; r++) {
      global.gc?.();
      const base = extraMiB();
      const t0 = performance.now();
      const sections = sectionsAt(store.shared, cut);
      firstPass.push(performance.now() - t0);
      bytes = 0;
      for (const section of sections) {
        for (const chunk of section.chunks()) {
          sum = crc32(chunk, sum); // stands for the consumer (checksum + file write)
          bytes += chunk.byteLength;
          peak = Math.max(peak, extraMiB() - base);
        }
      }
      total.push(performance.now() - t0);
    }
    rows.push(['sectionsAt: topology size pass', `${Math.min(...firstPass).toFixed(0)} ms`, '', '']);
    rows.push(['sectionsAt + every chunk (+ crc32 of it)', `${Math.min(...total).toFixed(0)} ms`, `${(bytes / MiB).toFixed(1)} MiB`, `${peak.toFixed(1)} MiB`]);
    if (bytes > oldBytes) throw new Error(`sectionsAt gave ${bytes} bytes, more than the ${oldBytes} of exportSections`);
  }
  {
    // Chunks as a file reader would hand them over: already in memory, 4 MiB at a time.
    const chunked = sectionsAt(store.shared, cut).map((section) => {
      const chunks = Array.from(section.chunks(), (chunk) => chunk.slice()); // copied while each is valid
      return { name: section.name, byteLength: section.byteLength, chunks: () => chunks };
    });
    const times: number[] = [];
    for (let r = 0; r < ROUNDS; r++) times.push(timeIt(() => { loadSections(chunked); }));
    rows.push(['StoreLoader from the chunks', `${Math.min(...times).toFixed(0)} ms`, '', '']);
    const whole = store.exportSections();
    const old: number[] = [];
    for (let r = 0; r < ROUNDS; r++) old.push(timeIt(() => { Store.fromSections(whole); }));
    rows.push(['fromSections (whole sections in memory)', `${Math.min(...old).toFixed(0)} ms`, '', '']);
  }
  log(table(['step', 'time (min of 3)', 'bytes', 'peak extra memory'], rows));

  // The writer goes on while a worker exports: its batches during the export, against the
  // same loop for as long without an export (the machine is shared: compare, do not trust one).
  const addEdge = (n: number) => write(store, JSON.stringify({ request_type: 'write', query: { write: { entries: [
    { query: { root: { add_e: { input: { nodes: { reference: { ids: [n % 1000] } } }, label: 'FOLLOWS', to: { ids: [(n * 7) % 1000] }, properties: [] } } } },
  ], returns: [] } } }));
  const writeUntil = async (stop: () => boolean) => {
    let batches = 0, slowest = 0;
    const t0 = performance.now();
    while (!stop()) {
      slowest = Math.max(slowest, timeIt(() => addEdge(batches)));
      batches++;
      if (batches % 64 === 0) await new Promise((r) => setImmediate(r));
    }
    return { batches, ms: performance.now() - t0, slowest };
  };
  const worker = new Worker(new URL('./snapshot-export-worker.js', import.meta.url), { workerData: { shared: store.shared, cut: store.cut() } });
  let exportMs = -1;
  worker.once('message', (ms: number) => { exportMs = ms; });
  const during = await writeUntil(() => exportMs >= 0);
  await worker.terminate();
  const until = performance.now() + during.ms;
  const alone = await writeUntil(() => performance.now() >= until);
  const perSecond = (r: typeof during) => (r.batches / r.ms * 1000).toFixed(0);
  log(`worker export ${exportMs.toFixed(0)} ms; writer meanwhile ${perSecond(during)} batches/s (slowest ${during.slowest.toFixed(1)} ms), alone ${perSecond(alone)} batches/s (slowest ${alone.slowest.toFixed(1)} ms)`);
}

await main();
