// Kernel vs JS twin (run by `npm run bench` after disk.ts, or alone with
// `node dist/bench/kernels.js`): each WebAssembly traversal kernel must beat its JS twin to
// stay (docs/architecture.md §4). Separate tinybench phases minutes apart drift by ±50 % on
// this shared machine, so this is an interleaved A/B on one database: short rounds that
// alternate kernel and JS (in alternating order), medians of each side.
import { openDatabase } from '../src/index.js';
import { setTraversalKernel } from '../src/store/kernels.js';
import { generateGraph, pickStartIds } from './graph.js';
import { loadSvcdb } from './load.js';
import * as q from './queries.js';
import { log, table } from './util.js';

const ROUNDS = 16;
const ROUND_MS = 250;

async function main(): Promise<void> {
  const graph = generateGraph();
  const db = await openDatabase({ storage: 'memory' });
  await loadSvcdb(graph, (body) => db.queryRaw(body));
  const ids = Array.from(pickStartIds(graph, 512));
  const workloads: [string, string, string[]][] = [
    ['shortest_path between start ids', 'expandOrdered + expandLayer + hasSuccessorAt', ids.map((id, i) => q.shortestPath(id, ids[(i * 7 + 3) % ids.length]!))],
    ['3-hop repeat + dedup + count', 'entryCount + expandRows', ids.map(q.threeHopRepeatDedupCount)],
    ['2-hop out.out.dedup.count', 'keepUnmarked + entryCount + reachUnmarked + clearMarks', ids.map(q.twoHopDedupCount)],
    ['1-hop out count', 'distinctNeighbourCount', ids.map(q.oneHopCount)],
  ];
  const rows: string[][] = [];
  for (const [title, kernels, bodies] of workloads) {
    const ops = { kernel: [] as number[], js: [] as number[] };
    for (let round = 0; round < ROUNDS; round++) {
      for (const side of round % 2 === 0 ? (['kernel', 'js'] as const) : (['js', 'kernel'] as const)) {
        setTraversalKernel(side === 'kernel');
        let n = 0;
        const started = performance.now();
        while (performance.now() - started < ROUND_MS) {
          const res = await db.queryRaw(bodies[n % bodies.length]!);
          if (res.status !== 200) throw new Error(res.body);
          n++;
        }
        if (round > 0) ops[side].push(n / ((performance.now() - started) / 1000)); // round 0 warms up
      }
    }
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;
    const kernel = median(ops.kernel), js = median(ops.js);
    rows.push([title, kernels, kernel.toFixed(0), js.toFixed(0), `${(kernel / js).toFixed(2)}x`, kernel > js ? 'kernel stays' : 'KERNEL LOSES: remove it']);
  }
  setTraversalKernel(true);
  await db.close();
  log(`kernels: interleaved A/B, ${ROUNDS - 1} rounds of ${ROUND_MS} ms per side, medians (ops/s)`);
  log(table(['workload', 'kernels', 'kernel ops/s', 'JS ops/s', 'kernel / JS', 'verdict'], rows));
}

await main();
