// The adjacency's lock-free read protocol across threads (topology.ts header): while the
// writer grows ONE hub's block from 4 entries past 64k (by a size class again and again, in
// small committed batches, with deletions and rolled-back batches in between), readers on
// other threads navigate the hub at the snapshot each read begins with, on the query
// engine's JS path and on the kernels, and must see exactly the edges committed at that
// snapshot: the right count, each edge once, with the neighbour the writer wrote.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { Store } from '../dist/src/store/store.js';
import { grownCapacity } from '../dist/src/store/topology.js';

type ReaderResult = { reads: number; mixedInvisible: number; errors: number; violations: string[]; epochs: number; lengths: number[] };

const READERS = 2;
/** Committed hub edges to reach: the block's capacity goes 4, 5, 6, 7, 8, 10, ... 81920. */
const HUB_EDGES = 70_000;
const EDGES_MAX = 200_000;
const EPOCHS_MAX = 20_000;
/** The writer's batches are spread over about this long, so that readers see many epochs. */
const WRITE_MS = 5_000;
const BATCHES_EXPECTED = HUB_EDGES / 24.5; // batch sizes are 1..48
const empty = { keys: [], values: [] };

/** Capacity of a block holding `len` entries (its size class, topology.ts). */
const capacityOf = (len: number): number => {
  let cap = grownCapacity(0);
  while (cap < len) cap = grownCapacity(cap);
  return cap;
};

describe('hub growth across threads', () => {
  it('readers see exactly the committed edges of a hub whose block grows many times', async () => {
    const store = Store.create();
    const label = store.names.intern('E');
    const nodeLabel = store.names.intern('N');
    const sab = (n: number) => new SharedArrayBuffer(n * 4);
    const tables = { edgeCreated: sab(EDGES_MAX), edgeDeleted: sab(EDGES_MAX), liveAt: sab(EPOCHS_MAX) };
    const edgeCreated = new Int32Array(tables.edgeCreated), edgeDeleted = new Int32Array(tables.edgeDeleted);
    const liveAt = new Int32Array(tables.liveAt);
    const stop = new Int32Array(sab(2)); // [stop, readers started]

    // The hub is node 0; every edge e goes from the hub to node e + 1 (IDs advance in step,
    // rolled back or not).
    store.beginWrite();
    const hub = store.addNode(nodeLabel, empty);
    store.commit();
    expect(hub).toBe(0);

    const readers = Array.from({ length: READERS }, (_, i) => new Worker(new URL('./fixtures/hub-growth-reader.mjs', import.meta.url), {
      workerData: { shared: store.shared, hub, label, kernel: true, stop: stop.buffer, ...tables },
    }));
    const results = readers.map((w) => new Promise<ReaderResult>((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    }));
    // Let the readers start before the block grows.
    while (Atomics.load(stop, 1) < READERS) await new Promise((r) => setTimeout(r, 5));
    const nap = new Int32Array(sab(1));

    const live: number[] = [];
    let committed = 0, batches = 0, rollbacks = 0, deletions = 0, rng = 12345;
    const random = (n: number) => {
      rng = (rng * 1103515245 + 12345) >>> 0;
      return (rng >>> 8) % n;
    };
    const addEdges = (count: number, epoch: number, record: boolean) => {
      for (let j = 0; j < count; j++) {
        const node = store.addNode(nodeLabel, empty);
        const edge = store.reserveEdgeSlot();
        if (node !== edge + 1) throw new Error(`node ${node} for edge ${edge}`);
        store.addEdge(edge, label, hub, node, empty);
        if (record) {
          Atomics.store(edgeCreated, edge, epoch);
          live.push(edge);
        }
      }
    };
    const started = Date.now();
    while (committed < HUB_EDGES) {
      batches++;
      const epoch = store.beginWrite();
      const count = 1 + random(48);
      addEdges(count, epoch, true);
      committed += count;
      if (batches % 5 === 0 && live.length > 1) {
        const at = random(live.length - 1);
        const edge = live[at]!;
        live[at] = live[live.length - 1]!;
        live.pop();
        store.deleteEdge(edge);
        Atomics.store(edgeDeleted, edge, epoch);
        deletions++;
      }
      // Stored before the commit publishes the epoch (readers Atomics.load VISIBLE first).
      Atomics.store(liveAt, epoch, live.length);
      store.commit();

      if (batches % 7 === 0) {
        // A batch that appends (often across a move to a larger block) and deletes, then rolls back.
        store.beginWrite();
        addEdges(1 + random(40), 0, false);
        if (live.length > 0) store.deleteEdge(live[random(live.length)]!);
        store.rollback();
        rollbacks++;
      }
      // Paced (sleeping, not spinning: the readers need the cores).
      const ahead = started + (batches * WRITE_MS) / BATCHES_EXPECTED - Date.now();
      if (ahead >= 1) Atomics.wait(nap, 0, 0, ahead);
    }
    const writeMs = Date.now() - started;
    // Reads at the final epoch too.
    await new Promise((r) => setTimeout(r, 100));
    Atomics.store(stop, 0, 1);
    const seen = await Promise.all(results);
    const lengths = new Set(seen.flatMap((r) => r.lengths));
    const capacities = new Set([...lengths].filter((l) => l > 0).map(capacityOf));
    console.log(`hub growth: ${batches} batches (${rollbacks} rolled back, ${deletions} deletions) in ${writeMs} ms; `
      + `reads ${seen.map((r) => r.reads).join('/')} (newest entry mixed and invisible: ${seen.map((r) => r.mixedInvisible).join('/')}), epochs ${seen.map((r) => r.epochs).join('/')}, `
      + `${lengths.size} lengths over capacities ${[...capacities].sort((a, b) => a - b).join(',')}`);
    for (const r of seen) {
      expect(r.violations).toEqual([]);
      expect(r.errors).toBe(0);
      expect(r.reads).toBeGreaterThan(50);
      expect(r.epochs).toBeGreaterThan(200);
    }
    expect(store.topology.length(store.topology.dir(hub), 0)).toBe(committed);
    // The readers saw the block at many sizes, across many moves to a larger block.
    expect(capacities.size).toBeGreaterThanOrEqual(6);
    expect(Math.max(...lengths)).toBeGreaterThan(32_768);
  }, 30_000);
});
