// Counts over navigation on the kernels (src/exec/navigation-counts.ts): count(dedup(chain))
// level by level with a node bitset, and distinct neighbours of the last step of a count.
// Checked against a model computed from the edge list, and against the JS twin (kernels
// off), on random multigraphs (parallel edges, self-loops, labels) with dropped edges and
// nodes, on a reader whose snapshot is older than the writer's committed batches.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { execOptions, executeRequest, noFlags } from '../src/exec/request.js';
import { setTraversalKernel } from '../src/store/kernels.js';
import { Store } from '../src/store/store.js';

type Dir = 'out' | 'in' | 'both';
interface Edge { src: number; dst: number; label: string; alive: boolean }
interface Model { nodes: boolean[]; edges: Edge[] }
interface Step { dir: Dir; label: string | null }
interface Query { start: number[]; steps: Step[]; dedup: boolean }

const LABELS = ['X', 'Y'];

function run(store: Store, request: unknown, role: 'writer' | 'replica' = 'writer'): string {
  const out = executeRequest(store, JSON.stringify(request), noFlags, role);
  if (!('status' in out) || out.status !== 200) throw new Error(JSON.stringify(out));
  return out.body;
}
const write = (entries: unknown[]) => ({ request_type: 'write', query: { write: { entries: entries.map((root) => ({ query: { root } })), returns: [] } } });
const nodesRef = (ids: number[]) => ({ nodes: { reference: { ids } } });

/** Adds `count` nodes, then the edges, in one batch (edge IDs follow model.edges). */
function addGraph(store: Store, model: Model, count: number, edges: Omit<Edge, 'alive'>[]): void {
  const ops: unknown[] = [];
  for (let i = 0; i < count; i++) {
    ops.push({ add_n: { label: 'N', properties: [] } });
    model.nodes.push(true);
  }
  for (const e of edges) {
    ops.push({ add_e: { input: nodesRef([e.src]), label: e.label, to: { ids: [e.dst] }, properties: [] } });
    model.edges.push({ ...e, alive: true });
  }
  if (ops.length > 0) run(store, write(ops));
}

/** Drops edges by ID and nodes (with their edges), in one batch. */
function drop(store: Store, model: Model, edgeIds: number[], nodeIds: number[]): void {
  const ops: unknown[] = [];
  for (const id of new Set(edgeIds)) {
    if (!model.edges[id]!.alive) continue;
    ops.push({ drop_edge_by_id: { input: null, edges: { ids: [id] } } });
    model.edges[id]!.alive = false;
  }
  for (const id of new Set(nodeIds)) {
    if (!model.nodes[id]) continue;
    ops.push({ drop: { input: nodesRef([id]) } });
    model.nodes[id] = false;
    for (const e of model.edges) if (e.src === id || e.dst === id) e.alive = false;
  }
  if (ops.length > 0) run(store, write(ops));
}

const copy = (m: Model): Model => ({ nodes: [...m.nodes], edges: m.edges.map((e) => ({ ...e })) });

function neighbours(m: Model, node: number, step: Step): Set<number> {
  const out = new Set<number>();
  for (const e of m.edges) {
    if (!e.alive || (step.label !== null && e.label !== step.label)) continue;
    if (step.dir !== 'in' && e.src === node) out.add(e.dst);
    if (step.dir !== 'out' && e.dst === node) out.add(e.src);
  }
  return out;
}

/** What the query answers on the model: walks to the last level, or its distinct nodes. */
function expected(m: Model, q: Query): number {
  const start = q.start.filter((id) => id < m.nodes.length && m.nodes[id]);
  if (q.dedup) {
    let level = new Set(start);
    for (const step of q.steps) {
      const next = new Set<number>();
      for (const node of level) for (const n of neighbours(m, node, step)) next.add(n);
      level = next;
    }
    return level.size;
  }
  let walks = new Map<number, number>();
  for (const id of start) walks.set(id, (walks.get(id) ?? 0) + 1);
  for (const step of q.steps) {
    const next = new Map<number, number>();
    for (const [node, w] of walks) for (const n of neighbours(m, node, step)) next.set(n, (next.get(n) ?? 0) + w);
    walks = next;
  }
  return [...walks.values()].reduce((a, b) => a + b, 0);
}

function body(q: Query): unknown {
  let chain: unknown = nodesRef(q.start);
  for (const s of q.steps) chain = { [s.dir]: s.label === null ? { input: chain } : { input: chain, label: s.label } };
  const root = { count: { input: q.dedup ? { dedup: { input: chain } } : chain } };
  return { request_type: 'read', query: { read: { entries: [{ query: { name: 'r', root } }], returns: ['r'] } } };
}

function answer(store: Store, q: Query, role: 'writer' | 'replica'): { kernel: number; js: number } {
  const request = body(q);
  const kernel = (JSON.parse(run(store, request, role)) as { r: number }).r;
  setTraversalKernel(false);
  try {
    return { kernel, js: (JSON.parse(run(store, request, role)) as { r: number }).r };
  } finally {
    setTraversalKernel(true);
  }
}

const caseArb = fc.integer({ min: 1, max: 40 }).chain((n) => {
  const node = fc.integer({ min: 0, max: n - 1 });
  const edge = fc.record({ src: node, dst: node, label: fc.constantFrom(...LABELS) });
  const more = fc.integer({ min: 0, max: 6 });
  return fc.record({
    n: fc.constant(n),
    edges: fc.array(edge, { maxLength: 160 }),
    // Later batches: dropped edges (by position in the first batch) and nodes, then new
    // nodes with edges that reach them (IDs the older snapshot has never seen).
    droppedEdges: fc.array(fc.nat(), { maxLength: 20 }),
    droppedNodes: fc.array(node, { maxLength: 3 }),
    added: more,
    laterEdges: fc.array(fc.record({ src: fc.nat(), dst: fc.nat(), label: fc.constantFrom(...LABELS) }), { maxLength: 30 }),
    queries: fc.array(fc.record({
      start: fc.uniqueArray(fc.integer({ min: 0, max: n + 6 }), { minLength: 1, maxLength: 4 }),
      steps: fc.array(fc.record({ dir: fc.constantFrom<Dir>('out', 'in', 'both'), label: fc.option(fc.constantFrom('X', 'Y', 'Unknown'), { freq: 2 }) }), { minLength: 1, maxLength: 3 }),
      dedup: fc.boolean(),
    }), { minLength: 1, maxLength: 8 }),
  });
});

describe('counts over navigation on the kernels', () => {
  it('equal the model and the JS path, at the reader\'s older snapshot and at the writer\'s newer one', () => {
    fc.assert(fc.property(caseArb, (c) => {
      const writer = Store.create();
      const model: Model = { nodes: [], edges: [] };
      addGraph(writer, model, c.n, c.edges);
      const reader = Store.attach(writer.shared);
      const old = copy(model);
      // Committed but not published: the reader keeps the first snapshot.
      writer.publishOnCommit = false;
      if (model.edges.length > 0) drop(writer, model, c.droppedEdges.map((i) => i % model.edges.length), c.droppedNodes);
      else drop(writer, model, [], c.droppedNodes);
      const total = c.n + c.added;
      const live = (id: number) => model.nodes[id] !== false;
      const later = c.laterEdges.map((e) => ({ src: e.src % total, dst: e.dst % total, label: e.label }));
      addGraph(writer, model, c.added, []);
      addGraph(writer, model, 0, later.filter((e) => live(e.src) && live(e.dst)));
      for (const q of c.queries) {
        const want = expected(old, q);
        expect(answer(reader, q, 'replica'), `reader ${JSON.stringify(q)}`).toEqual({ kernel: want, js: want });
      }
      writer.publish(writer.committedEpoch());
      for (const q of c.queries) {
        const now = expected(model, q);
        expect(answer(writer, q, 'writer'), `writer ${JSON.stringify(q)}`).toEqual({ kernel: now, js: now });
      }
    }), { numRuns: 150 });
  });

  it('levels wider than the kernel\'s groups of 8 nodes, counted again and again on one store', () => {
    // Node 0 -> 1..40 (X), each i -> i + 40 and i -> 0 (Y), a parallel edge 1 -> 41.
    const store = Store.create();
    const model: Model = { nodes: [], edges: [] };
    const edges: Omit<Edge, 'alive'>[] = [];
    for (let i = 1; i <= 40; i++) edges.push({ src: 0, dst: i, label: 'X' }, { src: i, dst: i + 40, label: 'Y' }, { src: i, dst: 0, label: 'Y' });
    edges.push({ src: 1, dst: 41, label: 'Y' });
    addGraph(store, model, 81, edges);
    const queries: Query[] = [
      { start: [0], steps: [{ dir: 'out', label: null }, { dir: 'out', label: null }], dedup: true },
      { start: [0], steps: [{ dir: 'out', label: 'X' }, { dir: 'out', label: 'Y' }, { dir: 'both', label: null }], dedup: true },
      { start: [0, 5, 45], steps: [{ dir: 'both', label: null }, { dir: 'in', label: null }], dedup: true },
      { start: [0], steps: [{ dir: 'out', label: null }, { dir: 'out', label: null }], dedup: false },
    ];
    for (let round = 0; round < 3; round++) {
      for (const q of queries) {
        const want = expected(model, q);
        expect(answer(store, q, 'writer'), `${round} ${JSON.stringify(q)}`).toEqual({ kernel: want, js: want });
      }
    }
    expect(expected(model, queries[0]!)).toBe(41); // the 40 ends and node 0
  });

  it('leave the node marks clear: the same count again, and after a query the inline work cap stopped', () => {
    const store = Store.create();
    const model: Model = { nodes: [], edges: [] };
    addGraph(store, model, 5, [{ src: 0, dst: 1, label: 'X' }, { src: 0, dst: 1, label: 'X' }, { src: 1, dst: 2, label: 'X' }, { src: 1, dst: 1, label: 'Y' }]);
    const q: Query = { start: [0, 1], steps: [{ dir: 'out', label: null }, { dir: 'both', label: null }], dedup: true };
    const want = expected(model, q);
    expect(want).toBe(3); // from {0, 1}: {1, 2} then {0, 1, 2}
    for (let i = 0; i < 3; i++) expect(answer(store, q, 'writer')).toEqual({ kernel: want, js: want });
    // Stopped between levels (work is charged before each level's kernel call).
    const stopped = executeRequest(store, JSON.stringify(body(q)), noFlags, 'writer', execOptions({ queryTimeoutMs: 10_000, inlineWorkMax: 4 }));
    expect(stopped).toEqual({ forward: 'pool' });
    expect(answer(store, q, 'writer')).toEqual({ kernel: want, js: want });
    const oneHop: Query = { start: [0], steps: [{ dir: 'out', label: 'X' }], dedup: false };
    expect(answer(store, oneHop, 'writer')).toEqual({ kernel: 1, js: 1 });
  });
});
