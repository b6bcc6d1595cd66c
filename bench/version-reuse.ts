// Reuse of property-version space under updates (src/store/version-reuse.ts), in process,
// alone with `node dist/bench/version-reuse.js [--quick]`. Two workloads the free lists
// must serve without the heap or the time per update creeping up round after round:
//   - records that grow: one string property grows by 8 bytes per update, so no version
//     fits the block its element left; only merged free blocks can serve them;
//   - large records of varied sizes (4-24 KiB), each update beside a small new node that
//     stays, so freed blocks do not merge into one: a version must find a block that fits
//     among many too small for it.
// Every figure is a ratio to a reference measured in the same run: the heap to the live
// records, a round's growth to what it wrote, a round's time to the first round's.
import { Store } from '../src/store/store.js';
import { rng } from './seeded-random.js';
import { log, table } from './util.js';

const quick = process.argv.includes('--quick');
const MiB = 1024 * 1024;
const BATCH = 100;

/** Bytes of the heap's live versions: each node's current version, header + its values as JSON (within 4 bytes of the codec's for these one-string records). */
function liveBytes(store: Store, ids: number[]): number {
  const at = store.committedEpoch();
  let bytes = 0;
  for (const id of ids) bytes += 16 + JSON.stringify(store.nodeRecord(id, at).values).length;
  return bytes;
}

function growing(): string[][] {
  const NODES = quick ? 2_000 : 10_000, ROUNDS = 30;
  const store = Store.create();
  const key = store.names.intern('text'), label = store.names.intern('Doc');
  store.beginWrite();
  const ids = Array.from({ length: NODES }, () => store.addNode(label, { keys: [key], values: [''] }));
  store.commit();
  let written = 0;
  const t0 = performance.now();
  for (let round = 1; round <= ROUNDS; round++) {
    for (let b = 0; b < NODES; b += BATCH) {
      store.beginWrite();
      for (let i = b; i < Math.min(NODES, b + BATCH); i++) {
        store.setNodeRecord(ids[i]!, { keys: [key], values: ['x'.repeat(round * 8)] });
        written += 16 + round * 8 + 8;
      }
      store.commit();
    }
  }
  const ms = performance.now() - t0;
  const live = liveBytes(store, ids), heap = store.propertyHeapBytes();
  return [[`records that grow (${NODES} nodes x ${ROUNDS} rounds)`, `${(heap / MiB).toFixed(1)} MiB`, `${(heap / live).toFixed(2)}x live`, `${(written / MiB).toFixed(1)} MiB written`, `${((ms * 1000) / (NODES * ROUNDS)).toFixed(1)} us per update`]];
}

function varied(): string[][] {
  const DOCS = quick ? 5_000 : 20_000, ROUNDS = quick ? 4 : 8;
  const random = rng(7);
  const store = Store.create();
  const key = store.names.intern('text'), label = store.names.intern('Doc');
  store.beginWrite();
  const ids = Array.from({ length: DOCS }, () => store.addNode(label, { keys: [key], values: ['x'.repeat(5000)] }));
  store.commit();
  // The small nodes are live too (their versions are what keeps the freed ones apart).
  const all = [...ids];
  const rows: string[][] = [];
  let firstMs = 0;
  for (let round = 1; round <= ROUNDS; round++) {
    const heapBefore = store.propertyHeapBytes();
    let written = 0;
    const t0 = performance.now();
    for (let b = 0; b < DOCS; b += BATCH) {
      store.beginWrite();
      for (let i = b; i < Math.min(DOCS, b + BATCH); i++) {
        const chars = 4200 + Math.floor(random() * 20_000);
        store.setNodeRecord(ids[Math.floor(random() * DOCS)]!, { keys: [key], values: ['x'.repeat(chars)] });
        all.push(store.addNode(label, { keys: [key], values: [`s${i}`] })); // stays: its version sits between freed ones
        written += 16 + chars + 8;
      }
      store.commit();
    }
    const ms = performance.now() - t0;
    if (round === 1) firstMs = ms;
    const grew = store.propertyHeapBytes() - heapBefore;
    rows.push([`varied large records, round ${round} (${DOCS} updates)`, `${(store.propertyHeapBytes() / MiB).toFixed(1)} MiB`, `grew ${((100 * grew) / written).toFixed(1)} % of written`, `${(written / MiB).toFixed(1)} MiB written`, `${((ms * 1000) / DOCS).toFixed(1)} us per update (${(ms / firstMs).toFixed(2)}x round 1)`]);
  }
  const live = liveBytes(store, all);
  rows.push(['varied large records, at the end', `${(store.propertyHeapBytes() / MiB).toFixed(1)} MiB`, `${(store.propertyHeapBytes() / live).toFixed(2)}x live`, '', '']);
  return rows;
}

log(`version reuse, in process${quick ? ' (--quick)' : ''}`);
log(table(['workload', 'property heap', 'vs reference', 'written', 'time'], [...growing(), ...varied()]));
