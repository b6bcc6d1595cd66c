// Kernel scratch per thread on a 10M-node graph (not part of `npm test` or `npm run bench`;
// run `node dist/bench/scratch-memory.js [nodes]`, ~3 GB of memory). A chain 0 -> 1 -> ...
// with a few random shortcuts: scratch must follow what a query visits, not the store.
import { executeRequest, noFlags } from '../src/exec/request.js';
import { setTraversalKernel } from '../src/store/kernels.js';
import { emptyRecord } from '../src/store/record-codec.js';
import { Store } from '../src/store/store.js';

const nodes = Number(process.argv[2] ?? 10_000_000);
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(2)} MiB`;

const t0 = performance.now();
const store = Store.create();
store.beginWrite();
const n = store.names.intern('N'), x = store.names.intern('X');
for (let i = 0; i < nodes; i++) store.addNode(n, emptyRecord);
for (let i = 0; i + 1 < nodes; i++) store.addEdge(store.reserveEdgeSlot(), x, i, i + 1, emptyRecord);
store.commit();
const topo = store.topology;
console.log(`built ${nodes} nodes, ${nodes - 1} edges in ${((performance.now() - t0) / 1000).toFixed(1)} s; topology heap ${mib(topo.heapUsed() * 4)}`);

const read = (root: unknown) => {
  const out = executeRequest(store, JSON.stringify({ request_type: 'read', query: { read: { entries: [{ query: { name: 'r', root } }], returns: ['r'] } } }), noFlags, 'reader');
  if (!('status' in out) || out.status !== 200) throw new Error(JSON.stringify(out));
  return out.body;
};
const path = (source: number, target: number) => ({ shortest_path: { source: { ids: [source] }, target: { ids: [target] }, direction: 'out', max_depth: 20_000_000 } });
const report = (what: string, run: () => string) => {
  const heap = topo.heapUsed();
  const started = performance.now();
  const body = run();
  console.log(`${what}: ${(performance.now() - started).toFixed(1)} ms, answer ${body.length > 80 ? `${body.length} bytes` : body}; ` +
    `scratch held by this thread ${mib(topo.scratch().reservedBytes)} (idle: ${topo.scratch().idle()}), heap +${mib((topo.heapUsed() - heap) * 4)}`);
};

console.log(`idle, before any query: scratch held ${mib(topo.scratch().reservedBytes)}`);
for (const kernel of [true, false]) {
  setTraversalKernel(kernel);
  const side = kernel ? 'kernel' : 'JS twin';
  report(`${side}: shortest_path 5000000 -> 5000003`, () => read(path(nodes / 2, nodes / 2 + 3)));
  report(`${side}: 3-hop repeat + dedup from 42`, () => read({ count: { input: { dedup: { input: { repeat: { input: { nodes: { reference: { ids: [42] } } }, config: { traversal: { root: { out: { input: 'context' } } }, times: 3, emit: 'none', max_depth: 3 } } } } } } }));
  report(`${side}: shortest_path 0 -> ${nodes - 1_000_001} (visits ~${((nodes - 1_000_000) / 1e6).toFixed(0)}M nodes)`, () => read(path(0, nodes - 1_000_001)));
  report(`${side}: shortest_path 5000000 -> 5000003 again`, () => read(path(nodes / 2, nodes / 2 + 3)));
}
