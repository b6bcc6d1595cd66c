// Snapshots read from the live shared memory as of one epoch (sectionsAt) while the writer
// goes on, and loaded chunk by chunk (StoreLoader), must hold exactly the store of that
// epoch: the same answers as a store that executed only the batches up to it.
import { Worker } from 'node:worker_threads';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { executeRequest, noFlags } from '../src/exec/request.js';
import { HEAP_HEADER_BYTES, M_HEAP_RECLAIMABLE, M_HEAP_USED, Store, type StoreCut } from '../src/store/store.js';
import { ADJ_WORDS, A_CREATED, CHUNK_NODES, CHUNK_SHIFT, CHUNK_TABLE, DIR_IN, DIR_OUT, DIR_WORDS, NEVER, T_HEAP_USED } from '../src/store/topology.js';
import { loadSections, optionalSectionNames, sectionsAt, snapshotSectionNames, StoreLoader, type SectionSource } from '../src/store/snapshot-sections.js';
import { rng } from '../bench/seeded-random.js';
import { limits } from '../src/limits.js';

/** Every section a writer store exports: the required ones, then the index catalog. */
// 'vectors' and 'texts' appear only with an active vector or text index (test/vector-index.test.ts, test/text-index.test.ts).
const allSectionNames: string[] = [...snapshotSectionNames, ...optionalSectionNames.filter((n) => n !== 'vectors' && n !== 'texts')];

// ------------------------------------------------------------------ requests

type Op =
  | ['node', string, number]
  | ['edge', number, number, string, number | null]
  | ['set', number, number]
  | ['setEdge', number, number]
  | ['relabel', number, string]
  | ['dropEdge', number]
  | ['dropNode', number];
/** One write request; `fail` appends an entry that fails, so the whole batch rolls back. */
interface Batch { ops: Op[]; fail: boolean }

const ids = (id: number) => ({ ids: [id] });
const i64 = (n: number) => ({ value: { i64: n } });

function entryOf(op: Op): unknown {
  switch (op[0]) {
    case 'node': return { add_n: { label: op[1], properties: [['v', i64(op[2])], ['s', { value: { string: `s${op[2]}` } }]] } };
    case 'edge': return { add_e: { input: { nodes: { reference: ids(op[1]) } }, label: op[3], to: ids(op[2]), properties: op[4] === null ? [] : [['w', i64(op[4])]] } };
    case 'set': return { set_property: { input: { nodes: { reference: ids(op[1]) } }, name: 'v', value: i64(op[2]) } };
    case 'setEdge': return { set_property: { input: { edges: { reference: ids(op[1]) } }, name: 'w', value: i64(op[2]) } };
    case 'relabel': return { set_property: { input: { nodes: { reference: ids(op[1]) } }, name: '$label', value: { value: { string: op[2] } } } };
    case 'dropEdge': return { drop_edge_by_id: { edges: ids(op[1]) } };
    case 'dropNode': return { drop: { input: { nodes: { reference: ids(op[1]) } } } };
  }
}

const batchBody = (batch: Batch): string => JSON.stringify({ request_type: 'write', query: { write: {
  entries: [
    ...batch.ops.map((op) => ({ query: { root: entryOf(op) } })),
    ...(batch.fail ? [
      { query: { name: 'doomed', root: { add_n: { label: 'F', properties: [] } } } },
      { query: { root: { add_e: { input: { nodes: { reference: { var: 'doomed' } } }, label: 'X', to: ids(999_999), properties: [] } } } },
    ] : []),
  ],
  returns: [],
} } });

/** Execute a batch; it may fail (missing IDs, the failing entry): the store then rolls it back. */
function apply(store: Store, batch: Batch): void {
  const out = executeRequest(store, batchBody(batch), noFlags, 'writer');
  if (!('status' in out)) throw new Error('unexpected forward');
  if (batch.fail) expect(out.status).toBe(500);
}

const all = { reference: 'all' };
const dumpEntries = [
  ['nodes', { value_map: { input: { nodes: all } } }],
  ['edges', { edge_properties: { input: { edges: all } } }],
  ['node_count', { count: { input: { nodes: all } } }],
  ['edge_count', { count: { input: { edges: all } } }],
  ['a_count', { count: { input: { nodes_where: { predicate: { eq: { left: { property: '$label' }, right: { constant: { string: 'A' } } } } } } } }],
  ...['out', 'in', 'both', 'out_e', 'in_e'].flatMap((op) => [undefined, 'X'].map((label) =>
    [`${op}_${label ?? 'any'}`, { id: { input: { [op]: { input: { nodes: all }, ...(label === undefined ? {} : { label }) } } } }])),
  ['two_hops', { id: { input: { out: { input: { in: { input: { nodes: all } } } } } } }],
  ['repeat', { id: { input: { dedup: { input: { repeat: { input: { nodes: all }, config: { traversal: { root: { out: { input: 'context' } } }, times: 2, emit: 'none', max_depth: 2 } } } } } } }],
] as const;
const dumpBody = JSON.stringify({ request_type: 'read', query: { read: {
  entries: dumpEntries.map(([name, root]) => ({ query: { name, root } })),
  returns: dumpEntries.map(([name]) => name),
} } });

/** Everything a reader can ask, as one comparable text. */
function dump(store: Store): string {
  const out = executeRequest(store, dumpBody, noFlags, 'reader');
  if (!('status' in out)) throw new Error('unexpected forward');
  expect(out.status, out.body).toBe(200);
  return out.body;
}

// ------------------------------------------------------------------ sections

/** A section's bytes, concatenated (small stores only). */
function bytesOf(section: SectionSource): Uint8Array {
  const out = new Uint8Array(section.byteLength);
  let at = 0;
  for (const chunk of section.chunks()) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  expect(at, `section ${section.name}`).toBe(section.byteLength);
  return out;
}

const exportOf = (sections: SectionSource[]): Map<string, Uint8Array> => new Map(sections.map((s) => [s.name, bytesOf(s)]));

function expectSameSections(actual: Map<string, Uint8Array>, expected: Map<string, Uint8Array>): void {
  expect([...actual.keys()]).toEqual([...expected.keys()]);
  for (const [name, bytes] of expected) {
    const got = actual.get(name)!;
    expect(got.byteLength, `length of section ${name}`).toBe(bytes.byteLength);
    if (Buffer.compare(got, bytes) !== 0) expect(got.findIndex((b, i) => b !== bytes[i]), `first differing byte of section ${name}`).toBe(-1);
  }
}

/**
 * Every node's out and in entries in a topology image, checking that each block is tight
 * (capacity = length) and ends in a never-visible sentinel.
 */
function adjacencyOf(bytes: Uint8Array, nodeSlots: number): number[][][] {
  const words = new Uint32Array(bytes.slice().buffer);
  expect(words[T_HEAP_USED]).toBe(words.length);
  const nodes: number[][][] = [];
  for (let node = 0; node < nodeSlots; node++) {
    const chunk = words[CHUNK_TABLE + (node >>> CHUNK_SHIFT)]!;
    const dir = chunk + (node & (CHUNK_NODES - 1)) * DIR_WORDS;
    nodes.push([DIR_OUT, DIR_IN].map((which) => {
      if (chunk === 0) return [];
      const block = words[dir + which]!, length = words[dir + which + 1]!;
      if (length === 0) return [];
      expect(words[block - 1], `capacity of node ${node}'s block`).toBe(length);
      expect(words[block + length * ADJ_WORDS + A_CREATED], `sentinel of node ${node}'s block`).toBe(NEVER);
      return [...words.subarray(block, block + length * ADJ_WORDS)];
    }));
  }
  return nodes;
}

/** Load through the streaming loader, sections in the given order. */
function load(sections: SectionSource[], order: number[]): Store {
  const loader = new StoreLoader();
  for (const i of order) {
    const sink = loader.section(sections[i]!.name, sections[i]!.byteLength);
    for (const chunk of sections[i]!.chunks()) sink.write(chunk);
    sink.end();
  }
  return loader.finish();
}

// ------------------------------------------------------------------ generators

const nodeLabel = fc.constantFrom('A', 'B', 'C');
const edgeLabel = fc.constantFrom('X', 'Y');
const id = fc.nat(14);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.tuple(fc.constant('node' as const), nodeLabel, fc.nat(99)) },
  { weight: 6, arbitrary: fc.tuple(fc.constant('edge' as const), id, id, edgeLabel, fc.option(fc.nat(99), { nil: null })) },
  { weight: 2, arbitrary: fc.tuple(fc.constant('set' as const), id, fc.nat(99)) },
  { weight: 1, arbitrary: fc.tuple(fc.constant('setEdge' as const), fc.nat(40), fc.nat(99)) },
  { weight: 2, arbitrary: fc.tuple(fc.constant('relabel' as const), id, nodeLabel) },
  { weight: 2, arbitrary: fc.tuple(fc.constant('dropEdge' as const), fc.nat(40)) },
  { weight: 1, arbitrary: fc.tuple(fc.constant('dropNode' as const), id) },
);
const batchArb: fc.Arbitrary<Batch> = fc.record({ ops: fc.array(opArb, { minLength: 1, maxLength: 3 }), fail: fc.nat(4).map((n) => n === 0) });
const seedBatch: Batch = { ops: Array.from({ length: 8 }, (_, i): Op => ['node', 'ABC'[i % 3]!, i]), fail: false };

describe('sectionsAt: the store as of a cut, while the writer goes on', () => {
  it('loads into a store answering like one that ran only the batches up to the cut, and both go on alike', () => {
    fc.assert(fc.property(
      fc.array(batchArb, { maxLength: 25 }), fc.array(batchArb, { maxLength: 25 }), fc.array(batchArb, { maxLength: 8 }),
      fc.integer({ min: 16, max: 64 }).map((n) => n * 4),
      fc.shuffledSubarray([...allSectionNames.keys()], { minLength: allSectionNames.length, maxLength: allSectionNames.length }),
      (before, after, later, chunkBytes, order) => {
        const live = Store.create(), upToCut = Store.create();
        for (const batch of [seedBatch, ...before]) { apply(live, batch); apply(upToCut, batch); }
        const cut: StoreCut = live.cut();
        expect(cut).toEqual(upToCut.cut());
        for (const batch of after) apply(live, batch);

        const sections = sectionsAt(live.shared, cut, chunkBytes);
        expect(sections.map((s) => s.name)).toEqual(allSectionNames);
        for (const s of sections) for (const chunk of s.chunks()) expect(chunk.byteLength).toBeLessThanOrEqual(chunkBytes);
        // The export depends on the state at the cut only: the store that stopped there gives the same bytes.
        expectSameSections(exportOf(sections), exportOf(sectionsAt(upToCut.shared, upToCut.cut())));

        const loaded = load(sections, order);
        expect(loaded.committedEpoch()).toBe(cut.epoch);
        expect(loaded.visibleEpoch()).toBe(cut.epoch);
        expect(dump(loaded)).toBe(dump(upToCut));
        // The loaded store is a writer store: relabels, appends to its tight blocks, deletions.
        for (const batch of later) { apply(loaded, batch); apply(upToCut, batch); }
        expect(dump(loaded)).toBe(dump(upToCut));
        // A loaded store (chains cut at the cut, deleted elements without a record) exports again.
        expect(dump(loadSections(sectionsAt(loaded.shared, loaded.cut(), chunkBytes)))).toBe(dump(upToCut));
      },
    ), { numRuns: 100 });
  });

  it('at the committed epoch of a stopped writer, holds what the whole-buffer export holds, with only the visible property versions', () => {
    fc.assert(fc.property(fc.array(batchArb, { maxLength: 30 }), (batches) => {
      const store = Store.create();
      for (const batch of [seedBatch, ...batches]) apply(store, batch);
      const fresh = exportOf(sectionsAt(store.shared, store.cut()));
      const whole = store.exportSections();
      for (const name of ['names.meta', 'names.ends', 'names.bytes']) {
        expectSameSections(new Map([[name, fresh.get(name)!]]), new Map([[name, whole.get(name)!]]));
      }
      const words = (bytes: Uint8Array) => new Uint32Array(bytes.slice().buffer);
      const [freshMeta, wholeMeta] = [words(fresh.get('meta')!), words(whole.get('meta')!)];
      // The heap's length is the compacted one, with nothing to reclaim; every other counter is the store's.
      expect(freshMeta[M_HEAP_USED]).toBe(fresh.get('heap')!.byteLength);
      expect(freshMeta[M_HEAP_RECLAIMABLE]).toBe(0);
      freshMeta[M_HEAP_USED] = wholeMeta[M_HEAP_USED]!;
      freshMeta[M_HEAP_RECLAIMABLE] = wholeMeta[M_HEAP_RECLAIMABLE]!;
      expect([...freshMeta]).toEqual([...wholeMeta.subarray(0, freshMeta.length)]);
      // Both topologies are compacted images (laid out differently): the same entries per node and direction.
      const nodeSlots = store.nodeSlots();
      expect(adjacencyOf(fresh.get('topology')!, nodeSlots)).toEqual(adjacencyOf(whole.get('topology')!, nodeSlots));

      // The exported heap: the reserved start, then exactly one version per visible node and
      // edge with a record, in row order, each the head of its chain and equal to the version
      // the live row points to (the newest: the writer stopped at the cut).
      const [freshHeap, wholeHeap] = [words(fresh.get('heap')!), words(whole.get('heap')!)];
      let next = HEAP_HEADER_BYTES;
      expect([...freshHeap.subarray(0, HEAP_HEADER_BYTES / 4)]).toEqual([0, 0, 0, 0]);
      for (const [name, rowWords, created, deleted, props] of [['nodes', 5, 2, 3, 4], ['edges', 6, 3, 4, 5]] as const) {
        const a = words(fresh.get(name)!), b = words(whole.get(name)!);
        expect(a.length).toBe(b.length);
        for (let row = 0; row < a.length; row += rowWords) {
          const expected = b[row + created] === 0 ? new Array(rowWords).fill(0) : [...b.subarray(row, row + rowWords)];
          const got = [...a.subarray(row, row + rowWords)];
          const live = expected[created] !== 0 && expected[deleted] === 0 ? expected[props]! : 0;
          if (name === 'nodes' && live !== 0) {
            // labelSince: the visible version's epoch (any epoch up to the cut reads the same
            // for the loaded store's readers), wherever the column moved since.
            expect(got[1], `nodes row ${row / rowWords} labelSince`).toBe(wholeHeap[(live >>> 2) + 1]);
            expect(got[1]).toBeLessThanOrEqual(store.committedEpoch());
            got[1] = expected[1]!;
          }
          if (live === 0) {
            expect(got[props], `${name} row ${row / rowWords}: no record exported`).toBe(0);
          } else {
            expect(got[props], `${name} row ${row / rowWords}: its version is the next one`).toBe(next);
            const length = wholeHeap[(live >>> 2) + 3]!;
            const versionWords = 4 + ((length + 3) >>> 2);
            expect([...freshHeap.subarray(next >>> 2, (next >>> 2) + versionWords)], `${name} row ${row / rowWords}: its version`)
              .toEqual([0, ...wholeHeap.subarray((live >>> 2) + 1, (live >>> 2) + versionWords)]);
            next += versionWords * 4;
          }
          got[props] = expected[props]!;
          expect(got, `${name} row ${row / rowWords}`).toEqual(expected);
        }
      }
      expect(fresh.get('heap')!.byteLength, 'nothing else in the exported heap').toBe(next);
    }), { numRuns: 60 });
  });

  it('leaves reusable space, superseded, deleted and rolled-back versions behind: the loaded heap holds only the visible records', () => {
    const store = Store.create();
    apply(store, seedBatch);
    for (let round = 0; round < 200; round++) {
      apply(store, { ops: [['set', round % 8, round], ['setEdge', 0, round]], fail: round % 5 === 0 });
      if (round === 50) apply(store, { ops: [['edge', 0, 1, 'X', 7], ['edge', 2, 3, 'Y', null]], fail: false });
    }
    apply(store, { ops: [['dropNode', 7], ['dropEdge', 1]], fail: false });
    const loaded = loadSections(sectionsAt(store.shared, store.cut()));
    expect(dump(loaded)).toBe(dump(store));
    // One version per visible node and edge with a record (the newest: the writer stopped).
    const heap = new Uint32Array(store.shared.heap), nodes = new Uint32Array(store.shared.nodes), edges = new Uint32Array(store.shared.edges);
    const versionBytes = (ptr: number) => (ptr === 0 ? 0 : 16 + ((heap[(ptr >>> 2) + 3]! + 3) & ~3));
    const at = store.committedEpoch();
    let visibleBytes = 0, records = 0;
    for (let slot = 0; slot < store.nodeSlots(); slot++) if (store.nodeExists(slot, at)) { visibleBytes += versionBytes(nodes[slot * 5 + 4]!); records++; }
    for (let slot = 0; slot < store.edgeSlots(); slot++) if (store.edgeExists(slot, at) && edges[slot * 6 + 5] !== 0) { visibleBytes += versionBytes(edges[slot * 6 + 5]!); records++; }
    expect(records).toBe(7 + 1);
    expect(loaded.propertyHeapBytes()).toBe(HEAP_HEADER_BYTES + visibleBytes);
    expect(store.propertyHeapBytes()).toBeGreaterThan(loaded.propertyHeapBytes());
    // The loaded store writes on, and exports again (node 7 and edge 1 now have no record at all).
    const later: Batch[] = [{ ops: [['set', 0, 1000], ['relabel', 1, 'C'], ['node', 'A', 5], ['edge', 8, 0, 'X', 3]], fail: false }, { ops: [['set', 2, 5]], fail: true }];
    for (const batch of later) { apply(loaded, batch); apply(store, batch); }
    const again = loadSections(sectionsAt(loaded.shared, loaded.cut()));
    expect(dump(again)).toBe(dump(store));
    expect(again.propertyHeapBytes()).toBeLessThan(loaded.propertyHeapBytes() + 200);
  });

  it('holds no topology reader slot for sections never read (a snapshot that failed before its topology section)', () => {
    const store = Store.create();
    apply(store, seedBatch);
    for (let i = 0; i <= limits.topologyReaderSlotsMax; i++) sectionsAt(store.shared, store.cut());
    // With every slot held, reads would go without one, and no superseded block be reused again.
    expect(store.topology.oldestReadSequence()).not.toBe(-Infinity);
    expect(store.topology.readsInProgress()).toBe(0);
  });

  it('cut() inside a write batch is internal_error; a cut ahead of the store is refused', () => {
    const store = Store.create();
    apply(store, seedBatch);
    const cut = store.cut();
    store.beginWrite();
    expect(() => store.cut()).toThrow(expect.objectContaining({ code: 'internal_error' }));
    store.rollback();
    expect(() => sectionsAt(store.shared, { ...cut, epoch: cut.epoch + 1 })).toThrow(expect.objectContaining({ code: 'internal_error' }));
    expect(() => sectionsAt(store.shared, { ...cut, nodeSlots: cut.nodeSlots + 1 })).toThrow(expect.objectContaining({ code: 'internal_error' }));
  });
});

// ------------------------------------------------------------------ another thread


/** A random batch over a graph of about `nodes` nodes and `edges` edges, hitting old and new elements. */
function randomBatch(random: () => number, nodes: number, edges: number): Batch {
  const pick = (n: number) => Math.floor(random() * n);
  const ops: Op[] = [];
  for (let i = 0, n = 1 + pick(4); i < n; i++) {
    const r = random();
    if (r < 0.15) ops.push(['node', 'ABC'[pick(3)]!, pick(100)]);
    else if (r < 0.55) ops.push(['edge', pick(nodes), pick(nodes), 'XY'[pick(2)]!, random() < 0.5 ? null : pick(100)]);
    else if (r < 0.65) ops.push(['set', pick(nodes), pick(100)]);
    else if (r < 0.7) ops.push(['setEdge', pick(edges), pick(100)]);
    else if (r < 0.8) ops.push(['relabel', pick(nodes), 'ABC'[pick(3)]!]);
    else if (r < 0.95) ops.push(['dropEdge', pick(edges)]);
    else ops.push(['dropNode', pick(nodes)]);
  }
  return { ops, fail: random() < 0.2 };
}

interface WorkerResult { rounds: number; sections: [string, Uint8Array][]; mismatches: string[] }

describe('sectionsAt on another thread', () => {
  it('while the writer commits (and rolls back) gives the bytes of the same cut exported after the writer stopped', async () => {
    const fixture = new URL('./fixtures/export-sections.mjs', import.meta.url);
    expect(existsSync(new URL('../dist/src/store/snapshot-sections.js', import.meta.url)), 'run `npm run build` first').toBe(true);
    for (const seed of [1, 2]) {
      const random = rng(seed);
      const store = Store.create();
      const nodes = 3000, edges = 15_000;
      apply(store, { ops: Array.from({ length: nodes }, (_, i): Op => ['node', 'ABC'[i % 3]!, i]), fail: false });
      for (let i = 0; i < edges; i += 500) {
        apply(store, { ops: Array.from({ length: 500 }, (): Op => ['edge', Math.floor(random() * nodes), Math.floor(random() * nodes), 'XY'[i % 2]!, i % 3 === 0 ? i : null]), fail: false });
      }
      for (let i = 0; i < 300; i++) apply(store, randomBatch(random, nodes, edges));
      const cut = store.cut();

      // flags[0]: the worker started exporting; flags[1]: it finished.
      const flags = new Int32Array(new SharedArrayBuffer(8));
      const worker = new Worker(fixture, { workerData: { shared: store.shared, cut, flags, rounds: 8, chunkBytes: 4096 } });
      const result = new Promise<WorkerResult>((resolve, reject) => { worker.once('message', resolve); worker.once('error', reject); });
      expect(Atomics.wait(flags, 0, 0, 30_000)).not.toBe('timed-out');
      let during = 0;
      while (Atomics.load(flags, 1) === 0) {
        apply(store, randomBatch(random, nodes + during / 4, edges + during));
        during++;
      }
      const { rounds, sections, mismatches } = await result;
      await worker.terminate();
      expect(mismatches).toEqual([]);
      expect(rounds).toBe(8);
      // The writer really went on while the worker read (new epochs, relocated blocks, rollbacks).
      expect(during).toBeGreaterThan(20);
      expect(store.committedEpoch()).toBeGreaterThan(cut.epoch + 10);
      expectSameSections(new Map(sections), exportOf(sectionsAt(store.shared, cut)));
    }
  });
});

// ------------------------------------------------------------------ loader errors

describe('StoreLoader', () => {
  const sectionsOf = () => {
    const store = Store.create();
    apply(store, seedBatch);
    apply(store, { ops: [['edge', 0, 1, 'X', 5], ['edge', 1, 2, 'Y', null], ['relabel', 2, 'C']], fail: false });
    return exportOf(sectionsAt(store.shared, store.cut()));
  };
  const loadBytes = (sections: Map<string, Uint8Array>): Store => {
    const loader = new StoreLoader();
    for (const [name, bytes] of sections) {
      const sink = loader.section(name, bytes.byteLength);
      sink.write(bytes);
      sink.end();
    }
    return loader.finish();
  };
  const codeOf = (f: () => unknown): string => {
    try { f(); } catch (err) { return (err as { code?: string }).code ?? String(err); }
    return 'no error';
  };

  it('loads whole sections (the control for the cases below)', () => {
    const sections = sectionsOf();
    expect(dump(loadBytes(sections))).toContain('"edge_count":2');
  });

  it('rejects a missing section', () => {
    for (const name of snapshotSectionNames) {
      const sections = sectionsOf();
      sections.delete(name);
      expect(codeOf(() => loadBytes(sections)), name).toBe('storage_error');
    }
  });

  it('rejects a short section at its end, a longer one at the write, an unfinished one at finish', () => {
    const sections = sectionsOf();
    const loader = new StoreLoader();
    const nodes = sections.get('nodes')!;
    const sink = loader.section('nodes', nodes.byteLength);
    sink.write(nodes.subarray(0, nodes.byteLength - 1));
    expect(codeOf(() => sink.end())).toBe('storage_error');
    const heap = loader.section('heap', 16);
    expect(codeOf(() => heap.write(new Uint8Array(20)))).toBe('storage_error');
    const partial = new StoreLoader();
    for (const [name, bytes] of sections) {
      const s = partial.section(name, bytes.byteLength);
      s.write(name === 'edges' ? bytes.subarray(0, 4) : bytes);
      if (name !== 'edges') s.end();
    }
    expect(codeOf(() => partial.finish())).toBe('storage_error');
  });

  it('rejects an unknown or duplicate section and lengths that do not fit the layout', () => {
    const loader = new StoreLoader();
    expect(codeOf(() => loader.section('bogus', 4))).toBe('storage_error');
    loader.section('heap', 16);
    expect(codeOf(() => loader.section('heap', 16))).toBe('storage_error');
    expect(codeOf(() => loader.section('nodes', 21))).toBe('storage_error');
    expect(codeOf(() => loader.section('topology', 100))).toBe('storage_error');
    expect(codeOf(() => loader.section('meta', 68))).toBe('storage_error');
  });

  it('rejects a topology section whose header disagrees with its length, and counters that disagree with sections', () => {
    const topologyLonger = sectionsOf();
    const topology = topologyLonger.get('topology')!;
    const longer = new Uint8Array(topology.byteLength + 4);
    longer.set(topology);
    topologyLonger.set('topology', longer);
    expect(codeOf(() => loadBytes(topologyLonger))).toBe('storage_error');

    const headerOff = sectionsOf();
    new DataView(headerOff.get('topology')!.buffer).setUint32(0, headerOff.get('topology')!.byteLength / 4 - 1, true);
    expect(codeOf(() => loadBytes(headerOff))).toBe('storage_error');

    const fewerNodes = sectionsOf();
    fewerNodes.set('nodes', fewerNodes.get('nodes')!.slice(0, 20));
    expect(codeOf(() => loadBytes(fewerNodes))).toBe('storage_error');

    const namesOff = sectionsOf();
    namesOff.set('names.bytes', namesOff.get('names.bytes')!.slice(1));
    expect(codeOf(() => loadBytes(namesOff))).toBe('storage_error');
  });

  it('loadSections and the old fromSections read the same store', () => {
    const store = Store.create();
    apply(store, seedBatch);
    apply(store, { ops: [['edge', 0, 1, 'X', 5], ['dropNode', 3], ['relabel', 2, 'C']], fail: false });
    expect(dump(loadSections(sectionsAt(store.shared, store.cut())))).toBe(dump(Store.fromSections(store.exportSections())));
  });
});
