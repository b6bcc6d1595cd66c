// What a bulk load leaves in memory (issue 13 item 5, docs/benchmarks.md "Memory"): the
// bench's own load (its power-law graph, sent in its chunks) into a store, then the sizes
// that made the server's RSS twice its data: adjacency blocks that doubled, superseded
// blocks nobody reused, decoded records twice their size, a heap kept after the load.
import { getHeapStatistics } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { defaultGraphSpec, generateGraph } from '../bench/graph.js';
import { loadChunks } from '../bench/queries.js';
import { executeRequest, noFlags } from '../src/exec/request.js';
import { trimHeapNow } from '../src/store/heap-trim.js';
import { decodeRecord, encodeRecord } from '../src/store/record-codec.js';
import { Store } from '../src/store/store.js';
import { ADJ_WORDS } from '../src/store/topology.js';

const NODES = 10_000, EDGES = 100_000;

function loadBenchGraph(): Store {
  const store = Store.create();
  const graph = generateGraph({ ...defaultGraphSpec, nodes: NODES, edges: EDGES });
  // The bench's chunks (25k nodes, 50k edges per request), smaller so that the load takes
  // many batches like the full-size one (20 edge batches).
  for (const chunk of loadChunks(graph, 2_500, 5_000)) {
    const out = executeRequest(store, chunk.body, noFlags, 'writer');
    if (!('status' in out) || out.status !== 200) throw new Error(JSON.stringify(out).slice(0, 500));
  }
  return store;
}

describe('memory after a bulk load', () => {
  it('keeps the adjacency within a fixed factor of its live entries', () => {
    const store = loadBenchGraph();
    const u = store.topology.memoryUsage();
    const liveEntryBytes = 2 * EDGES * ADJ_WORDS * 4;
    expect(u.entryBytes).toBe(liveEntryBytes);
    // Blocks hold their entries plus the unused tail of their size class and a capacity
    // word and sentinel each: 1.22x here. Doubling capacities made it 1.53x.
    expect(u.blockBytes).toBeLessThan(1.3 * u.entryBytes);
    // Superseded blocks left over (free for reuse, or waiting for readers): 24% here, 18%
    // on the full bench graph; without reuse they were more than the live entries.
    expect(u.freeBytes + u.retiredBytes).toBeLessThan(0.3 * u.entryBytes);
    // Everything the heap handed out, against the data: 1.44x (1.64x with doubling).
    expect(u.heapBytes - u.headerBytes).toBeLessThan(1.5 * (u.entryBytes + u.directoryBytes));
    expect(u.otherBytes).toBe(0); // no scratch and no index: nothing unaccounted
  });

  it('decodes records into exact-length arrays that share their keys', () => {
    const records = Array.from({ length: 3 }, (_, i) => decodeRecord(encodeRecord({ keys: [3, 5, 8], values: [`n${i}`, BigInt(i), i + 0.5] })));
    expect(records[1]!.keys).toBe(records[0]!.keys);
    expect(records[2]!.keys).toBe(records[0]!.keys);
    expect(records.map((r) => r.values)).toEqual([['n0', 0n, 0.5], ['n1', 1n, 1.5], ['n2', 2n, 2.5]]);
    const other = decodeRecord(encodeRecord({ keys: [3, 6], values: [1n, 'x'] }));
    expect(other.keys).toEqual([3, 6]);
    expect(records[0]!.keys).toEqual([3, 5, 8]); // not overwritten by the next record's keys
  });

  it('gives the heap back once the request garbage of a bulk load is dead', () => {
    // The garbage of a large write body: rows parsed into objects, dead once it ran.
    let rows: unknown[] | null = [];
    for (let i = 0; i < 400_000; i++) rows.push({ s: `user_${i}`, d: BigInt(i), m: new Map([['k', i]]) });
    expect(rows.length).toBe(400_000);
    const before = getHeapStatistics().total_heap_size;
    rows = null;
    trimHeapNow();
    const after = getHeapStatistics().total_heap_size;
    expect(before).toBeGreaterThan(64 * 1024 * 1024);
    expect(after).toBeLessThan(before / 2);
  });
});
