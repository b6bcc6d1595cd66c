// A read kernel writes only inside the output it is given. The scratch it writes into is
// shared heap: the word after a full output can be a block or a directory chunk the writer
// owns. reachUnmarked once stored its prefetch sum there (found by review, 2026-11-28).
import { expect, it } from 'vitest';
import { executeRequest, noFlags } from '../src/exec/request.js';
import { Store } from '../src/store/store.js';
import { DIR_IN, DIR_OUT, Topology } from '../src/store/topology.js';

/** `nodes` nodes; node 0 -> 1..4, the others without edges. */
function hubOfFour(nodes: number): Topology {
  const topology = Topology.create();
  for (let n = 0; n < nodes; n++) topology.addNode(n);
  for (let d = 1; d <= 4; d++) {
    topology.append(0, DIR_OUT, d - 1, d, 0, 1);
    topology.append(d, DIR_IN, d - 1, 0, 0, 1);
  }
  return topology;
}

it('reachUnmarked leaves the word after a full output alone', () => {
  // Rows 0 and 5..12: the output fills on the first row, and the next group of rows has nothing to add.
  const topology = hubOfFour(20);
  topology.beginRead();
  try {
    const kernels = topology.kernels();
    const arena = topology.scratch();
    const marks = arena.takeZeroed(1);
    const rows = [0, 5, 6, 7, 8, 9, 10, 11, 12];
    const level = arena.take(rows.length);
    rows.forEach((row, i) => { topology.words[level + i] = row; });
    const bound = kernels.entryCount(level, rows.length, 1);
    expect(bound).toBe(4);
    const out = arena.take(bound + 1);
    topology.words[out + bound] = 0xdeadbeef; // the word after the room the caller takes
    expect(kernels.reachUnmarked(level, rows.length, 1, -1, 1, marks, out, bound)).toBe(4);
    expect(Array.from(topology.words.subarray(out, out + bound))).toEqual([1, 2, 3, 4]);
    expect(topology.words[out + bound]!.toString(16)).toBe('deadbeef');
    // Given less room than it needs, it traps rather than write past it.
    kernels.clearMarks(out, 4, marks);
    topology.words[out + 2] = 0xdeadbeef;
    expect(() => kernels.reachUnmarked(level, rows.length, 1, -1, 1, marks, out, 2)).toThrow(/unreachable/);
    expect(topology.words[out + 2]!.toString(16)).toBe('deadbeef');
  } finally {
    topology.endRead();
  }
});

function run(store: Store, request: unknown): string {
  const outcome = executeRequest(store, JSON.stringify(request), noFlags, 'writer');
  if (!('status' in outcome) || outcome.status !== 200) throw new Error(JSON.stringify(outcome).slice(0, 500));
  return outcome.body;
}
const write = (roots: unknown[]) => ({ request_type: 'write', query: { write: { entries: roots.map((root) => ({ query: { root } })), returns: [] } } });
const read = (root: unknown) => ({ request_type: 'read', query: { read: { entries: [{ query: { name: 'r', root } }], returns: ['r'] } } });
const nodes = (ids: number[]) => ({ nodes: { reference: { ids } } });
const addNodes = (n: number) => Array.from({ length: n }, () => ({ add_n: { label: 'N', properties: [] } }));

it('expandRows traps rather than write past the room it is given', () => {
  const topology = hubOfFour(8);
  topology.beginRead();
  try {
    const kernels = topology.kernels();
    const arena = topology.scratch();
    const input = arena.take(1);
    topology.words[input] = 0;
    const out = arena.take(5);
    expect(kernels.expandRows(input, 1, 1, -1, 1, out, 4, 0, 0)).toBe(4);
    expect(Array.from(topology.words.subarray(out, out + 4))).toEqual([1, 2, 3, 4]);
    topology.words[out + 3] = 0xdeadbeef;
    expect(() => kernels.expandRows(input, 1, 1, -1, 1, out, 3, 0, 0)).toThrow(/unreachable/);
    expect(topology.words[out + 3]!.toString(16)).toBe('deadbeef');
  } finally {
    topology.endRead();
  }
});

it('a distinct count from a hub and leaves does not change the adjacency of a node created after it', () => {
  const store = Store.create();
  const fan = 70_000;
  run(store, write(addNodes(70_020)));
  run(store, write(Array.from({ length: fan }, (_, i) => ({ add_e: { input: nodes([0]), label: 'E', to: { ids: [i + 1] }, properties: [] } }))));
  // A hub, then leaves: the hub fills the level's output (a scratch segment of its own, as
  // large as the output, at the top of the heap), the leaves come after.
  const distinct = read({ count: { input: { dedup: { input: { out: { input: nodes([0, 70_001, 70_002, 70_003, 70_004, 70_005, 70_006, 70_007, 70_008]) } } } } } });
  expect(JSON.parse(run(store, distinct)).r).toBe(fan);
  // Nodes past the directory's current chunk: the next chunk is taken from the heap right
  // after that segment; then an edge from the last of them.
  run(store, write(addNodes(81_920 - 70_020 + 1)));
  run(store, write([{ add_e: { input: nodes([81_920]), label: 'E', to: { ids: [5] }, properties: [] } }]));
  const outOfLast = read({ count: { input: { out: { input: nodes([81_920]) } } } });
  expect(JSON.parse(run(store, outOfLast)).r).toBe(1);
  run(store, distinct); // the same count, on the same scratch
  expect(JSON.parse(run(store, outOfLast)).r).toBe(1);
  run(store, write([{ add_e: { input: nodes([81_920]), label: 'E', to: { ids: [6] }, properties: [] } }]));
  expect(JSON.parse(run(store, outOfLast)).r).toBe(2);
  expect(JSON.parse(run(store, read({ count: { input: { out: { input: nodes([0]) } } } }))).r).toBe(fan);
});
