// Write batches undo exactly what they did (also when they fail half-way through an edge)
// and log exactly what replay needs (also names a failed batch interned first).
import { afterEach, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { defaultExecOptions, executeRequest, noFlags } from '../src/exec/request.js';
import { RedoKind, Store, type RedoBatch, type RedoOp } from '../src/store/store.js';
import { injectTopologyFault } from '../src/store/topology.js';

type Outcome = { status: number; body: string };

/** A writer store that keeps the redo of every committed batch, as disk storage would. */
function primary(): { store: Store; log: RedoBatch[]; run: (request: unknown) => Outcome } {
  const store = Store.create();
  store.captureRedo = true;
  const log: RedoBatch[] = [];
  let taken: RedoBatch | null = null;
  const options = { ...defaultExecOptions, logBatch: (batch: RedoBatch) => { taken = batch; } };
  const run = (request: unknown): Outcome => {
    taken = null;
    const out = executeRequest(store, JSON.stringify(request), noFlags, 'writer', options);
    if (!('status' in out)) throw new Error('unexpected forward');
    // logBatch runs before commit, and only a committed batch may enter the log.
    if (out.status === 200 && taken !== null) log.push(taken);
    return out;
  };
  return { store, log, run };
}

function mustRun(store: Store, request: unknown): string {
  const out = executeRequest(store, JSON.stringify(request), noFlags, 'writer');
  if (!('status' in out) || out.status !== 200) throw new Error(JSON.stringify(out));
  return out.body;
}

const write = (...entries: unknown[]) => ({ request_type: 'write', query: { write: { entries, returns: [] } } });
const entry = (root: unknown, name?: string) => ({ query: name === undefined ? { root } : { name, root } });
const ids = (list: number[]) => ({ nodes: { reference: { ids: list } } });
const addN = (label: string, props: [string, unknown][] = []) => ({ add_n: { label, properties: props } });
const addE = (from: unknown, label: string, to: unknown) => ({ add_e: { input: from, label, to, properties: [] } });
const i64 = (n: number) => ({ value: { i64: n } });

const ALL = { nodes: { reference: 'all' } }, EDGES = { edges: { reference: 'all' } };
const DUMP: Record<string, unknown> = {
  nodes: { value_map: { input: ALL, properties: null } },
  labels: { label: { input: ALL } },
  edges: { edge_properties: { input: EDGES } },
  edgeLabels: { label: { input: EDGES } },
  sources: { id: { input: { out_n: { input: EDGES } } } },
  targets: { id: { input: { in_n: { input: EDGES } } } },
  out: { id: { input: { out_e: { input: ALL, label: null } } } },
  in: { id: { input: { in_e: { input: ALL, label: null } } } },
  nodeCount: { count: { input: ALL } },
  edgeCount: { count: { input: EDGES } },
};
const dumpBody = JSON.stringify({ request_type: 'read', query: { read: {
  entries: Object.entries(DUMP).map(([name, root]) => entry(root, name)), returns: Object.keys(DUMP),
} } });

/** Every node and edge with its label and properties, and every adjacency list, as text. */
function dump(store: Store): string {
  const out = executeRequest(store, dumpBody, noFlags, 'reader');
  if (!('status' in out) || out.status !== 200) throw new Error(`dump failed: ${JSON.stringify(out)}`);
  return out.body;
}

function replay(log: RedoBatch[]): Store {
  const copy = Store.create();
  for (const batch of log) copy.applyRedo(batch);
  return copy;
}

const codeOf = (f: () => unknown): string => {
  try { f(); } catch (err) { return (err as { code?: string }).code ?? String(err); }
  return 'no error';
};

afterEach(() => injectTopologyFault(null));

describe('rollback of a batch that fails half-way through an edge', () => {
  it('an add_e whose second adjacency append fails leaves no half-made edge', () => {
    const { store, log, run } = primary();
    // A(0) -> B(1): A's out block has room for more; C(2) has no in block yet.
    expect(run(write(entry(addN('N'), 'a'), entry(addN('N'), 'b'), entry(addE({ nodes: { reference: { var: 'a' } } }, 'L', { var: 'b' })))).status).toBe(200);
    expect(run(write(entry(addN('N')))).status).toBe(200);
    const before = dump(store);
    // A -> C: the out append fits A's block, the in append must allocate C's block: fault.
    injectTopologyFault(0);
    const failed = run(write(entry(addE(ids([0]), 'L', { ids: [2] }))));
    injectTopologyFault(null);
    expect(failed.status).toBe(500);
    expect(failed.body).toContain('injected topology fault');
    expect(dump(store)).toBe(before);
    // The next batch reuses the failed batch's epoch and must publish only its own work.
    expect(run(write(entry(addN('N')))).status).toBe(200);
    expect(JSON.parse(dump(store)).edgeCount).toBe(1);
    expect(run(write(entry(addE(ids([0]), 'L', { ids: [2] }))))).toMatchObject({ status: 200 });
    expect(run(write(entry({ drop: { input: ids([0]) } })))).toMatchObject({ status: 200 });
    expect(dump(replay(log))).toBe(dump(store));
  });

  it('a drop whose second adjacency mark fails restores every edge', () => {
    const { store, log, run } = primary();
    expect(run(write(entry(addN('N')), entry(addN('N')), entry(addN('N')))).status).toBe(200);
    expect(run(write(entry(addE(ids([0]), 'L', { ids: [1, 2] }))))).toMatchObject({ status: 200 });
    const before = dump(store);
    // Dropping node 0 marks edge 0 out+in, then edge 1 out, then fails on edge 1 in.
    injectTopologyFault(3);
    const failed = run(write(entry({ drop: { input: ids([0]) } })));
    injectTopologyFault(null);
    expect(failed.status).toBe(500);
    expect(dump(store)).toBe(before);
    expect(run(write(entry(addN('N')))).status).toBe(200);
    expect(JSON.parse(dump(store)).edgeCount).toBe(2);
    expect(run(write(entry({ drop: { input: ids([0]) } })))).toMatchObject({ status: 200 });
    expect(JSON.parse(dump(store)).edgeCount).toBe(0);
    expect(dump(replay(log))).toBe(dump(store));
  });

  it('random batches failing at random topology changes roll back exactly and replay to the same graph', () => {
    let faults = 0;
    const nodeIds = 8;
    const opArb = fc.oneof(
      fc.tuple(fc.constant('node' as const), fc.constantFrom('A', 'B')),
      fc.tuple(fc.constant('edge' as const), fc.nat(nodeIds - 1), fc.nat(nodeIds - 1), fc.constantFrom('X', 'Y')),
      // Many edges from one node: its block doubles several times within a batch.
      fc.tuple(fc.constant('fan' as const), fc.nat(nodeIds - 1), fc.integer({ min: 2, max: 12 })),
      fc.tuple(fc.constant('dropEdge' as const), fc.nat(40)),
      fc.tuple(fc.constant('dropNode' as const), fc.nat(nodeIds - 1)),
      fc.tuple(fc.constant('relabel' as const), fc.nat(nodeIds - 1), fc.constantFrom('A', 'B', 'C')),
      fc.tuple(fc.constant('prop' as const), fc.nat(nodeIds - 1), fc.nat(100)),
    );
    type Op = typeof opArb extends fc.Arbitrary<infer T> ? T : never;
    const entriesOf = (ops: Op[]): unknown[] => ops.map((op) => {
      switch (op[0]) {
        case 'node': return entry(addN(op[1], [['k', i64(1)]]));
        case 'edge': return entry(addE(ids([op[1]]), op[3], { ids: [op[2]] }));
        case 'fan': return entry(addE(ids([op[1]]), 'F', { ids: Array.from({ length: op[2] }, (_, i) => (op[1] + i) % nodeIds) }));
        case 'dropEdge': return entry({ drop_edge_by_id: { edges: { ids: [op[1]] } } });
        case 'dropNode': return entry({ drop: { input: ids([op[1]]) } });
        case 'relabel': return entry({ set_property: { input: ids([op[1]]), name: '$label', value: { value: { string: op[2] } } } });
        case 'prop': return entry({ set_property: { input: ids([op[1]]), name: 'k', value: i64(op[2]) } });
      }
    });
    const batchArb = fc.record({ ops: fc.array(opArb, { minLength: 1, maxLength: 6 }), faultAfter: fc.option(fc.nat(6), { nil: null }) });
    fc.assert(fc.property(fc.array(batchArb, { minLength: 1, maxLength: 25 }), (batches) => {
      const { store, log, run } = primary();
      run(write(...Array.from({ length: nodeIds }, () => entry(addN('A')))));
      for (const batch of batches) {
        const before = dump(store);
        injectTopologyFault(batch.faultAfter);
        const out = run(write(...entriesOf(batch.ops)));
        injectTopologyFault(null);
        // Other failures (a dropped node as an edge's end) must roll back just as exactly.
        if (out.status !== 200) {
          expect(out.status === 500 || out.status === 400, out.body).toBe(true);
          if (out.body.includes('injected topology fault')) faults++;
          expect(dump(store)).toBe(before);
        }
      }
      // Replay logs only committed changes; whatever a failed batch left behind differs.
      expect(dump(replay(log))).toBe(dump(store));
      expect(run(write(entry({ drop: { input: ALL } })))).toMatchObject({ status: 200 });
      expect(JSON.parse(dump(store))).toMatchObject({ nodeCount: 0, edgeCount: 0, out: [], in: [] });
    }), { numRuns: 200 });
    // The generator must really fail batches half-way, not only run clean ones.
    expect(faults).toBeGreaterThan(50);
  });
});

describe('names in the redo', () => {
  const labelsAndProps = {
    request_type: 'read', query: { read: { entries: [
      entry({ value_map: { input: ALL, properties: null } }, 'n'),
      entry({ label: { input: ALL } }, 'l'),
      entry({ count: { input: { nodes_where: { predicate: { eq: { left: { property: '$label' }, right: { constant: { string: 'Fresh' } } } } } } } }, 'fresh'),
    ], returns: ['n', 'l', 'fresh'] } },
  };

  it('a committed batch reusing a name a failed batch interned replays to the same graph', () => {
    const { store, log, run } = primary();
    expect(run(write(entry(addN('Old', [['a', i64(1)]])))).status).toBe(200);
    // New label and key, then node_not_found: rolled back, but the names stay interned.
    const failed = run(write(entry(addN('Fresh', [['freshKey', i64(2)]]), 'x'), entry(addE({ nodes: { reference: { var: 'x' } } }, 'L', { ids: [999999] }))));
    expect(failed.status).toBe(500);
    expect(failed.body).toContain('node_not_found');
    const afterFailure = store.exportSections();
    expect(run(write(entry(addN('Fresh', [['a', i64(3)]]))))).toMatchObject({ status: 200 });
    expect(run(write(entry(addN('Newer', [['newerKey', i64(4)], ['freshKey', i64(5)]]))))).toMatchObject({ status: 200 });
    const copy = replay(log);
    expect(mustRun(copy, labelsAndProps)).toBe(mustRun(store, labelsAndProps));
    expect(dump(copy)).toBe(dump(store));
    // A snapshot taken after the failure already holds its names: the redo after it fits too.
    const fromSnapshot = Store.fromSections(afterFailure);
    for (const batch of log.slice(1)) fromSnapshot.applyRedo(batch);
    expect(dump(fromSnapshot)).toBe(dump(copy));
    // Ids line up too: the next new name gets the same id on both.
    for (const s of [store, copy]) mustRun(s, write(entry(addN('Last', [['lastKey', i64(6)]]))));
    expect(copy.names.idOf('Last')).toBe(store.names.idOf('Last'));
    expect(copy.names.idOf('lastKey')).toBe(store.names.idOf('lastKey'));
  });

  it('a failed redo handed out before rollback (WAL append failed) leaves its names to the next redo', () => {
    const store = Store.create();
    store.captureRedo = true;
    const log: RedoBatch[] = [];
    const failing = { ...defaultExecOptions, logBatch: () => { throw new Error('disk full'); } };
    const keeping = { ...defaultExecOptions, logBatch: (b: RedoBatch) => { log.push(b); } };
    expect(executeRequest(store, JSON.stringify(write(entry(addN('Lost', [['lostKey', i64(1)]])))), noFlags, 'writer', failing)).toMatchObject({ status: 500 });
    expect(executeRequest(store, JSON.stringify(write(entry(addN('Lost', [['lostKey', i64(2)]])))), noFlags, 'writer', keeping)).toMatchObject({ status: 200 });
    expect(log[0]!.names).toEqual([[0, 'Lost'], [1, 'lostKey']]);
    expect(dump(replay(log))).toBe(dump(store));
  });

  it('replay rejects names that do not line up, unknown ops and ops on missing elements with storage_error, changing nothing', () => {
    const { store, log, run } = primary();
    expect(run(write(entry(addN('A', [['k', i64(1)]])))).status).toBe(200);
    const batch = log[0]!;
    const fresh = () => Store.create();
    const variants: RedoBatch[] = [
      { ...batch, names: [[1, 'A'], [0, 'k']] },
      { ...batch, names: [[0, 'A']] }, // `k` (id 1) is used by the record but never named
      { ...batch, names: [[0, 'A'], [1, 'k'], [5, 'x']] },
      { ...batch, names: [[0, 'A'], [1, 'A']] },
      { ...batch, ops: [[99, 0] as unknown as RedoOp] },
      { ...batch, ops: [[RedoKind.EdgeDeleted, 0]] },
      { ...batch, ops: [[RedoKind.AddEdge, 0, 0, 0, 7, new Uint8Array()]] },
      { ...batch, ops: [[RedoKind.AddNode, 0, 9, new Uint8Array([0x90])]] },
    ];
    for (const v of variants) {
      const copy = fresh();
      const code = codeOf(() => copy.applyRedo(v));
      if (v.names.length === 1) {
        // A record key outside the dictionary is only found when the record is read.
        expect(code === 'storage_error' || code === 'no error', JSON.stringify(v.names)).toBe(true);
        continue;
      }
      expect(code, JSON.stringify(v, (_k, x) => (x instanceof Uint8Array ? [...x] : x))).toBe('storage_error');
      expect(copy.committedEpoch()).toBe(1);
      expect(dump(copy)).toBe(dump(fresh()));
    }
    // The untouched batch still applies.
    const copy = fresh();
    copy.applyRedo(batch);
    expect(dump(copy)).toBe(dump(store));
  });
});
