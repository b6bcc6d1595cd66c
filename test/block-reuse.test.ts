// Superseded adjacency blocks are reused (epoch-based reclamation, topology.ts): a load
// that grows blocks stays near its live size, and a block is never reused while a read
// that began before it was superseded is still running.
import { describe, expect, it } from 'vitest';
import { executeRequest, noFlags } from '../src/exec/request.js';
import { Store } from '../src/store/store.js';
import { ADJ_WORDS, DIR_IN, DIR_OUT, grownCapacity, T_HEAP_USED } from '../src/store/topology.js';

const run = (store: Store, request: unknown): string => {
  const out = executeRequest(store, JSON.stringify(request), noFlags, 'writer');
  if (!('status' in out) || out.status !== 200) throw new Error(JSON.stringify(out));
  return out.body;
};
const write = (entries: unknown[]) => ({ request_type: 'write', query: { write: { entries, returns: [] } } });
const addNodes = (n: number) => write(Array.from({ length: n }, () => ({ query: { root: { add_n: { label: 'N', properties: [] } } } })));
/** One edge from every node of `from` to node `to`, in one batch. */
const fan = (from: number[], to: number) => write([{ query: { root: { add_e: { input: { nodes: { reference: { ids: from } } }, label: 'E', to: { ids: [to] }, properties: [] } } } }]);
const heapWords = (store: Store) => Atomics.load(store.topology.words, T_HEAP_USED);
const blockWords = (capacity: number) => 1 + (capacity + 1) * ADJ_WORDS;
/** The capacities a block takes as it grows to hold `entries` (its size classes, topology.ts). */
/** The capacity of node `node`'s in-block. */
const capacityOf = (store: Store, node: number): number => {
  const topo = store.topology, dir = topo.dir(node);
  return topo.words[topo.entries(dir, DIR_IN, topo.length(dir, DIR_IN)) - 1]!;
};
const capacitiesUpTo = (entries: number): number[] => {
  const out = [grownCapacity(0)];
  while (out[out.length - 1]! < entries) out.push(grownCapacity(out[out.length - 1]!));
  return out;
};

describe('superseded adjacency blocks', () => {
  it('are reused once no read can hold them: growing 200 blocks one after another to 64 entries costs about the final blocks', () => {
    const store = Store.create();
    const nodes = 200;
    run(store, addNodes(nodes + 1));
    const start = heapWords(store);
    // Node by node, as a load grouped by source sends them: node i's blocks of 4..56 are
    // superseded and free for node i+1's.
    for (let n = 0; n < nodes; n++) run(store, write(Array.from({ length: 64 }, () => ({ query: { root: { add_e: { input: { nodes: { reference: { ids: [n] } } }, label: 'E', to: { ids: [nodes] }, properties: [] } } } }))));
    const used = heapWords(store) - start;
    const outBlocks = (capacities: number[]) => nodes * capacities.reduce((a, c) => a + blockWords(c), 0);
    const targetCapacities = capacitiesUpTo(nodes * 64);
    const inBlocks = targetCapacities.reduce((a, c) => a + blockWords(c), 0); // the target's, all of its classes
    expect(capacitiesUpTo(64).at(-1)).toBe(64);
    expect(used).toBeLessThan(outBlocks([64]) * 1.3 + inBlocks);
    expect(used).toBeGreaterThanOrEqual(outBlocks([64]) + blockWords(targetCapacities.at(-1)!));
    expect(outBlocks(capacitiesUpTo(64))).toBeGreaterThan(outBlocks([64]) * 5); // what it was without reuse
    const counts = JSON.parse(run(store, { request_type: 'read', query: { read: { entries: [
      { query: { name: 'o', root: { count: { input: { out_e: { input: { nodes: { reference: { ids: Array.from({ length: nodes }, (_, i) => i) } } } } } } } } },
      { query: { name: 'i', root: { count: { input: { in_e: { input: { nodes: { reference: { ids: [nodes] } } } } } } } } },
    ], returns: ['o', 'i'] } } }));
    expect(counts).toEqual({ o: nodes * 64, i: nodes * 64 });
  });

  it('are not reused while a read that began before they were superseded runs', () => {
    const writer = Store.create();
    const nodes = 300;
    run(writer, addNodes(nodes + 1));
    const all = Array.from({ length: nodes }, (_, i) => i);
    for (let round = 0; round < 4; round++) run(writer, fan(all, nodes)); // blocks of 4, full
    // A read on another view of the store (as a reader thread has) begins now and holds
    // the current (4-entry) blocks' offsets.
    const reader = Store.attach(writer.shared);
    reader.beginRead();
    const held = all.map((n) => {
      const dir = reader.topology.dir(n);
      const len = reader.topology.length(dir, DIR_OUT);
      const block = reader.topology.entries(dir, DIR_OUT, len);
      return { block, bytes: reader.topology.words.slice(block, block + len * ADJ_WORDS) };
    });
    // The writer supersedes them (blocks of 8), then allocates far more than RECLAIM_EVERY
    // blocks of 4 and 8 for new nodes, which would reuse them if it could.
    for (let round = 0; round < 4; round++) run(writer, fan(all, nodes));
    run(writer, addNodes(400));
    const fresh = Array.from({ length: 400 }, (_, i) => nodes + 1 + i);
    for (let round = 0; round < 8; round++) run(writer, fan(fresh, nodes));
    for (const { block, bytes } of held) expect(reader.topology.words.slice(block, block + bytes.length)).toEqual(bytes);
    // Once the read ended, the writer reuses what it superseded meanwhile: 300 new blocks
    // of 4 take fresh heap only until the first scan of the reader slots.
    reader.endRead();
    run(writer, addNodes(300));
    const before = heapWords(writer), targetBefore = capacityOf(writer, nodes);
    const more = Array.from({ length: 300 }, (_, i) => nodes + 401 + i);
    for (let round = 0; round < 4; round++) run(writer, fan(more, nodes));
    // The target's in-block grows too (1,200 more entries), through classes nothing freed.
    const targetGrowth = capacitiesUpTo(capacityOf(writer, nodes)).filter((c) => c > targetBefore).reduce((a, c) => a + blockWords(c), 0);
    expect(heapWords(writer) - before - targetGrowth).toBeLessThan(300 * blockWords(4) / 2);
  });
});
