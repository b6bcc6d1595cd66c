// Worker for bench/snapshot-sections.ts: exports a cut of the live store (every chunk
// checksummed) and reports how long it took.
import { parentPort, workerData } from 'node:worker_threads';
import { crc32 } from 'node:zlib';
import { sectionsAt } from '../src/store/snapshot-sections.js';
import type { StoreCut, StoreShared } from '../src/store/store.js';

const { shared, cut } = workerData as { shared: StoreShared; cut: StoreCut };
const t0 = performance.now();
let sum = 0;
for (const section of sectionsAt(shared, cut)) for (const chunk of section.chunks()) sum = crc32(chunk, sum);
parentPort!.postMessage(performance.now() - t0 + (sum === -1 ? 1 : 0));
