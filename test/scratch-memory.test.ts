// Kernel scratch is bounded by the query, not the store: the topology heap's
// bump pointer refuses what does not fit without moving, a thread's scratch is bounded and
// reused, shortest_path's table grows with what it visits (same answers as the protocol's
// BFS, on kernels and JS twins).
import { afterEach, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { executeRequest, noFlags } from '../src/exec/request.js';
import { limits } from '../src/limits.js';
import { SvcError } from '../src/protocol/errors.js';
import { setTraversalKernel } from '../src/store/kernels.js';
import { emptyRecord } from '../src/store/record-codec.js';
import { ScratchArena } from '../src/store/scratch-arena.js';
import { Store } from '../src/store/store.js';

afterEach(() => setTraversalKernel(true));

/** A store with `nodes` nodes and the given edges (label X), built through the store API. */
function graph(nodes: number, edges: readonly (readonly [number, number])[]): Store {
  const store = Store.create();
  store.beginWrite();
  const n = store.names.intern('N'), x = store.names.intern('X');
  for (let i = 0; i < nodes; i++) store.addNode(n, emptyRecord);
  for (const [src, dst] of edges) store.addEdge(store.reserveEdgeSlot(), x, src, dst, emptyRecord);
  store.commit();
  return store;
}

function read(store: Store, root: unknown): { status: number; body: string } {
  const out = executeRequest(store, JSON.stringify({ request_type: 'read', query: { read: { entries: [{ query: { name: 'r', root } }], returns: ['r'] } } }), noFlags, 'reader');
  if (!('status' in out)) throw new Error('unexpected forward');
  return out;
}

const pathQuery = (source: number, target: number, direction: string) =>
  ({ shortest_path: { source: { ids: [source] }, target: { ids: [target] }, direction, max_depth: 1_000_000 } });

/** The protocol's one-sided BFS (neighbours ascending, first discovery fixes the predecessor). */
function referencePath(nodes: number, edges: readonly (readonly [number, number])[], source: number, target: number, direction: string): number[] {
  const adj: number[][] = Array.from({ length: nodes }, () => []);
  for (const [s, d] of edges) {
    if (direction !== 'in') adj[s]!.push(d);
    if (direction !== 'out') adj[d]!.push(s);
  }
  for (const list of adj) list.sort((p, q) => p - q);
  const pred = new Int32Array(nodes).fill(-2);
  pred[source] = -1;
  const queue = [source];
  for (let i = 0; i < queue.length && pred[target] === -2; i++) {
    for (const next of adj[queue[i]!]!) if (pred[next] === -2) { pred[next] = queue[i]!; queue.push(next); }
  }
  if (pred[target] === -2) return [];
  const path: number[] = [];
  for (let v = target; v !== -1; v = pred[v]!) path.push(v);
  return path.reverse();
}

/** Text of the node IDs a neighbourhood read returns for every node (adjacency intact?). */
const neighbourhood = (store: Store, nodes: number) =>
  read(store, { id: { input: { both: { input: { nodes: { reference: { ids: Array.from({ length: nodes }, (_, i) => i) } } } } } } }).body;

describe('topology heap bump pointer', () => {
  it('a scratch request past the heap bound fails, leaves HEAP_USED as it was, and cannot wrap onto directories', () => {
    const edges = Array.from({ length: 200 }, (_, i) => [i % 50, (i * 7 + 1) % 50] as const);
    const store = graph(50, edges);
    const topo = store.topology;
    const before = neighbourhood(store, 50);
    const used = topo.heapUsed();
    // Requests whose end a u32 add would wrap to a small value, or that pass the bound.
    for (const words of [2 ** 32 - used + 16, 2 ** 32 - used, limits.topologyWordsMax - used + 1, limits.topologyWordsMax]) {
      expect(() => topo.reserveScratch(words)).toThrowError(/adjacency heap is full/);
      expect(topo.heapUsed()).toBe(used);
    }
    // Near the bound: the failing request leaves the pointer where it was, never past the limit.
    const real = topo.words[0]!;
    Atomics.store(topo.words, 0, limits.topologyWordsMax - 8);
    expect(() => topo.reserveScratch(16)).toThrowError(SvcError);
    expect(topo.heapUsed()).toBe(limits.topologyWordsMax - 8);
    Atomics.store(topo.words, 0, real);
    // The heap still serves scratch and adjacency, and nothing was overwritten.
    const at = topo.reserveScratch(1024);
    expect(at).toBe(used);
    topo.words.fill(0xffffffff, at, at + 1024);
    expect(neighbourhood(store, 50)).toBe(before);
    store.beginWrite();
    store.addEdge(store.reserveEdgeSlot(), store.names.intern('X'), 3, 4, emptyRecord);
    store.commit();
    expect(topo.heapUsed()).toBeGreaterThan(used + 1024);
    expect(neighbourhood(store, 50)).toBe(neighbourhood(graph(50, [...edges, [3, 4]]), 50));
  });
});

describe('per-thread scratch arena', () => {
  it('gives back what a query took, reuses it, and refuses more than its limit without reserving it', () => {
    const store = graph(1, []);
    const topo = store.topology;
    const arena = new ScratchArena(topo, 4 << 20);
    const mark = arena.mark();
    const a = arena.take(1000), b = arena.takeZeroed(70_000);
    expect(b).not.toBe(a);
    expect(topo.words.subarray(b, b + 70_000).every((w) => w === 0)).toBe(true);
    const reserved = arena.reservedBytes, heap = topo.heapUsed();
    expect(() => arena.take(1 << 20)).toThrowError(/scratchBytesPerThreadMax/);
    expect(arena.reservedBytes).toBe(reserved);
    expect(topo.heapUsed()).toBe(heap);
    arena.release(mark);
    expect(arena.idle()).toBe(true);
    // The next query gets the same words; nothing new is reserved.
    expect(arena.take(1000)).toBe(a);
    expect(arena.takeZeroed(70_000)).toBe(b);
    expect(topo.heapUsed()).toBe(heap);
    expect(arena.reservedBytes).toBeLessThanOrEqual(4 << 20);
  });

  it('a shortest_path needing more scratch than the per-thread limit is invalid_query naming it; the thread keeps working', () => {
    // A hub with 40 000 out-edges, and a target with three in-neighbours (so the search grows
    // the forward side first): the hub's layer needs a table for 40 000 nodes (2 MiB).
    const hub = 40_000, target = hub + 4;
    const edges = Array.from({ length: hub }, (_, i) => [0, i + 1] as const);
    const store = graph(hub + 5, [...edges, [hub + 1, target], [hub + 2, target], [hub + 3, target]]);
    const topo = store.topology;
    for (const kernel of [true, false]) {
      setTraversalKernel(kernel);
      topo['arena'] = new ScratchArena(topo, 1 << 20);
      const failed = read(store, pathQuery(0, target, 'out'));
      expect(failed.status).toBe(500);
      expect(JSON.parse(failed.body)).toMatchObject({ error: 'invalid_query' });
      expect(failed.body).toContain('scratchBytesPerThreadMax');
      expect(topo.scratch().idle()).toBe(true);
      expect(JSON.parse(read(store, pathQuery(hub + 1, target, 'out')).body).r).toEqual([hub + 1, target]);
    }
    topo['arena'] = null;
  });

  it('queries leave the arena idle and reuse its segments: no growth of the heap from one query to the next', () => {
    const n = 3000;
    const edges = Array.from({ length: 3 * n }, (_, i) => [i % n, (i * 7919 + 13) % n] as const);
    const store = graph(n, edges);
    const topo = store.topology;
    const queries = [pathQuery(1, 2999, 'both'), pathQuery(5, 17, 'out'),
      { count: { input: { dedup: { input: { repeat: { input: { nodes: { reference: { ids: [1] } } }, config: { traversal: { root: { out: { input: 'context' } } }, times: 4, emit: 'none', max_depth: 4 } } } } } } }];
    for (const q of queries) expect(read(store, q).status).toBe(200);
    const heap = topo.heapUsed(), reserved = topo.scratch().reservedBytes;
    for (let round = 0; round < 3; round++) {
      for (const q of queries) {
        expect(read(store, q).status).toBe(200);
        expect(topo.scratch().idle()).toBe(true);
      }
    }
    expect(topo.heapUsed()).toBe(heap);
    expect(topo.scratch().reservedBytes).toBe(reserved);
  });
});

describe('shortest_path state grows with the search', () => {
  it('matches the protocol BFS on graphs large enough to grow the table, the queues and the sort buffer (kernels and JS twins)', () => {
    fc.assert(fc.property(
      fc.integer({ min: 600, max: 3000 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.constantFrom('out', 'in', 'both'),
      (n, degree, seed, direction) => {
        let x = seed | 1;
        const rand = (m: number) => { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; return (x >>> 0) % m; };
        const edges: (readonly [number, number])[] = [];
        for (let i = 0; i < n * degree; i++) edges.push([rand(n), rand(n)]);
        // Two hubs (more entries than the first sort buffer and queue) and a long tail.
        for (let i = 0; i < 700; i++) edges.push([0, rand(n)], [rand(n), 1]);
        for (let i = n - 40; i < n - 1; i++) edges.push([i, i + 1]);
        const store = graph(n, edges);
        for (const [source, target] of [[2, n - 1], [0, 1], [rand(n), rand(n)], [n - 1, 3]] as const) {
          const expected = referencePath(n, edges, source, target, direction);
          for (const kernel of [true, false]) {
            setTraversalKernel(kernel);
            const got = JSON.parse(read(store, pathQuery(source, target, direction)).body).r as number[];
            expect(got, `${kernel ? 'kernel' : 'JS'} ${direction} ${source}->${target}`).toEqual(expected);
          }
        }
      },
    ), { numRuns: 25 });
  });
});

describe('entryCount', () => {
  it('counts past 2^32 entries exactly (a wrapped count undersized the navigation output)', () => {
    // One node with 1,024 out-edges, listed 4,194,305 times: 2^32 + 1,024 entries.
    const store = graph(1025, Array.from({ length: 1024 }, (_, i) => [0, i + 1] as const));
    const topo = store.topology, arena = topo.scratch(), kernels = topo.kernels();
    const rows = 4_194_305;
    const mark = arena.mark();
    try {
      const queue = arena.takeZeroed(rows); // every row is node 0
      expect(kernels.entryCount(queue, rows, 1)).toBe(2 ** 32 + 1024);
    } finally {
      arena.release(mark);
    }
  });
});

