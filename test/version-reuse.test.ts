// Reuse of the property heap's unreachable versions (src/store/version-reuse.ts): in one
// thread, that the space comes back and the answers stay exact; across threads, that no
// reader ever reads a version whose space was reused under it, while the writer updates,
// deletes, rolls back and publishes late (as durable storage does).
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { NODE_WORDS, N_PROPS, Store, V_LENGTH, versionWordsOf, type RedoBatch } from '../dist/src/store/store.js';
// A const enum: its values come from the source (the build inlines them).
import { RedoKind } from '../src/store/store.js';

const EDGE_DELETED: number = RedoKind.EdgeDeleted;
import { loadSections, sectionsAt } from '../dist/src/store/snapshot-sections.js';
import { VersionReuse } from '../dist/src/store/version-reuse.js';
import type { Topology } from '../dist/src/store/topology.js';
import { defaultExecOptions, executeRequest, noFlags } from '../dist/src/exec/request.js';
// The index runtime (create_index in the barrier case below).
import '../dist/src/index/runtime.js';
import { rng } from '../bench/seeded-random.js';

const padOf = (n: number) => 'p'.repeat((n * 7) % 41);
/** Bytes a version of `record` takes in the heap: header and bytes, padded to a word (store.ts). */
const versionBytes = (store: Store, node: number) => {
  const heap = new Uint32Array(store.shared.heap), ptr = new Uint32Array(store.shared.nodes)[node * NODE_WORDS + N_PROPS]!;
  return versionWordsOf(heap[(ptr >>> 2) + V_LENGTH]!) * 4;
};

/** A store of 40 nodes with one property `k` each (`n0....`, 20 characters), and a maker of such records. */
function fortyNodes(): { store: Store; rec: (v: string) => { keys: number[]; values: string[] } } {
  const store = Store.create();
  const k = store.names.intern('k'), label = store.names.intern('N');
  const rec = (v: string) => ({ keys: [k], values: [v] });
  store.beginWrite();
  for (let i = 0; i < 40; i++) store.addNode(label, rec(`n${i}`.padEnd(20, '.')));
  store.commit();
  return { store, rec };
}

/**
 * The writer's free lists alone, with no reads or cuts held (what is retired is free at the
 * next batch); `wordsAt` gives each version's words.
 */
function unheldReuse(): { reuse: VersionReuse; wordsAt: Map<number, number> } {
  let sequence = 0;
  const topology = { retireSequence: () => ++sequence, oldestReadSequence: () => Number.POSITIVE_INFINITY } as unknown as Topology;
  const wordsAt = new Map<number, number>();
  return { reuse: new VersionReuse(topology, (ptr) => wordsAt.get(ptr)!, () => Number.POSITIVE_INFINITY), wordsAt };
}

describe('property version reuse', () => {
  it('a store updated, deleted from and rolled back keeps its heap near its live records, and answers exactly', () => {
    const store = Store.create();
    const keys = { owner: store.names.intern('owner'), n: store.names.intern('n'), pad: store.names.intern('pad') };
    const label = store.names.intern('N');
    const record = (node: number, n: number) => ({ keys: [keys.owner, keys.n, keys.pad], values: [node, n, padOf(n)] });
    const NODES = 50;
    store.beginWrite();
    for (let node = 0; node < NODES; node++) store.addNode(label, record(node, 0));
    store.commit();
    const random = rng(7);
    const version = new Array<number>(NODES).fill(0);
    let appended = 0;
    for (let batch = 0; batch < 3000; batch++) {
      store.beginWrite();
      const changed = new Map<number, number>();
      for (let k = 0; k < 4; k++) {
        const node = Math.floor(random() * NODES), n = (changed.get(node) ?? version[node]!) + 1;
        store.setNodeRecord(node, record(node, n));
        changed.set(node, n);
        appended += versionBytes(store, node);
      }
      // A node made and dropped again: its version is left by the deletion.
      const temporary = store.addNode(label, record(-1, batch % 50));
      if (batch % 3 === 0) store.deleteNode(temporary);
      if (random() < 0.2) {
        store.rollback();
      } else {
        store.commit();
        for (const [node, n] of changed) version[node] = n;
      }
    }
    const at = store.committedEpoch();
    for (let node = 0; node < NODES; node++) expect(store.nodeRecord(node, at).values).toEqual([node, version[node], padOf(version[node]!)]);
    // ~12,000 versions of the watched nodes were written, plus ~3,000 temporary nodes (two
    // thirds of them live); without reuse the heap would hold them all.
    expect(appended).toBeGreaterThan(300_000);
    const liveBytes = (() => {
      let bytes = 16;
      for (let node = 0; node < store.nodeSlots(); node++) if (store.nodeExists(node, at)) bytes += versionBytes(store, node);
      return bytes;
    })();
    expect(store.propertyHeapBytes()).toBeLessThan(liveBytes + appended / 10);
    // What it will reuse is reported for the metrics, and a snapshot leaves it behind.
    const reclaimable = new Uint32Array(store.shared.meta)[5]!;
    expect(reclaimable).toBeGreaterThan(0);
    expect(reclaimable).toBeLessThanOrEqual(store.propertyHeapBytes() - liveBytes);
    const loaded = loadSections(sectionsAt(store.shared, store.cut()));
    expect(loaded.propertyHeapBytes()).toBe(liveBytes);
    for (let node = 0; node < NODES; node++) expect(loaded.nodeRecord(node, at).values).toEqual(store.nodeRecord(node, at).values);
  });

  it('records that grow take the room their smaller versions left: free blocks merge with their free neighbours', () => {
    const store = Store.create();
    const k = store.names.intern('log'), label = store.names.intern('N');
    const NODES = 2000;
    store.beginWrite();
    for (let i = 0; i < NODES; i++) store.addNode(label, { keys: [k], values: [''] });
    store.commit();
    let written = 0;
    for (let round = 1; round <= 20; round++) {
      for (let first = 0; first < NODES; first += 500) {
        store.beginWrite();
        for (let i = first; i < first + 500; i++) {
          store.setNodeRecord(i, { keys: [k], values: ['x'.repeat(round * 8 + (i % 3))] });
          written += versionBytes(store, i);
        }
        store.commit();
      }
    }
    let live = 16;
    for (let i = 0; i < NODES; i++) live += versionBytes(store, i);
    for (let i = 0; i < NODES; i += 97) expect(store.nodeRecord(i, store.committedEpoch()).values).toEqual(['x'.repeat(160 + (i % 3))]);
    // Every version is larger than any before it, so no single freed block fits one; merged
    // ones do. What is over the live records is about the last batch's quarter, retired.
    expect(written).toBeGreaterThan(10 * live);
    expect(store.propertyHeapBytes()).toBeLessThan(1.5 * live);
  });

  it('deleted neighbours merge into one block, which a large record takes; the lists are swept of what merged away', () => {
    const store = Store.create();
    const k = store.names.intern('v'), label = store.names.intern('N');
    const NODES = 10_000;
    store.beginWrite();
    for (let i = 0; i < NODES; i++) store.addNode(label, { keys: [k], values: ['z'.repeat(i % 50)] });
    store.addNode(label, { keys: [k], values: ['keeps the heap end in place'] });
    store.commit();
    store.beginWrite();
    for (let i = 0; i < NODES; i++) store.deleteNode(i);
    store.commit();
    const heapBefore = store.propertyHeapBytes();
    const internals = store as unknown as { versionReuse: { listed: number; freeAt: Map<number, number>; sized: number[][]; large: number[][] } };
    // The next batch frees them (highest first, each absorbing the one after it): one block.
    store.beginWrite();
    const big = 'b'.repeat(200_000);
    store.addNode(label, { keys: [k], values: [big] });
    store.commit();
    expect(store.propertyHeapBytes()).toBe(heapBefore);
    expect(store.nodeRecord(NODES + 1, store.committedEpoch()).values).toEqual([big]);
    const reuse = internals.versionReuse;
    expect(reuse.freeAt.size).toBe(1);
    // 10,000 entries were listed, one per freed block; the sweep left the live ones.
    expect(reuse.listed).toBe([...reuse.sized, ...reuse.large].reduce((n, list) => n + list.length, 0));
    expect(reuse.listed).toBeLessThanOrEqual(2 * reuse.freeAt.size + 4096);
  });

  it('a large version finds a block that fits past thousands too small for it, looking at a bounded number', () => {
    const { reuse, wordsAt } = unheldReuse();
    // 3,000 free blocks of 1,100 words, each followed by a live one (no merging), then one of 4,000.
    const SMALL = 3000, GAP = 16;
    let bump = 16; // offset 0 means no version
    reuse.beginBatch(bump);
    for (let i = 0; i < SMALL; i++) {
      wordsAt.set(bump, 1100);
      reuse.supersede(bump);
      bump += (1100 + GAP) * 4;
    }
    const big = bump;
    wordsAt.set(big, 4000);
    reuse.supersede(big);
    bump += 4000 * 4;
    reuse.committed(1, 1);
    reuse.beginBatch(bump);
    expect(reuse.freeBytes).toBe((SMALL * 1100 + 4000) * 4);

    // Count the free blocks a take looks at: each is one lookup in the writer's map.
    const freeAt = (reuse as unknown as { freeAt: Map<number, number> }).freeAt;
    let lookups = 0;
    const get = freeAt.get.bind(freeAt);
    freeAt.get = (ptr: number) => { lookups++; return get(ptr); };
    // 1,150 words: the small blocks share its size class and none fits it.
    expect(reuse.take(1150)).toBe(big);
    expect(lookups, 'a take looks at a bounded number of blocks').toBeLessThan(100);
    // The rest of the big block is free, and the small blocks are all still there.
    expect(reuse.freeBytes).toBe((SMALL * 1100 + 4000 - 1150) * 4);
    lookups = 0;
    expect(reuse.take(2850)).toBe(big + 1150 * 4);
    expect(reuse.take(1150), 'nothing left that fits: append').toBe(-1);
    expect(lookups).toBeLessThan(300);
    const taken = new Set<number>();
    for (let i = 0; i < SMALL; i++) taken.add(reuse.take(1100));
    expect(taken.size, 'every small block is taken once by a version of its size').toBe(SMALL);
    expect(taken.has(-1)).toBe(false);
    expect(reuse.freeBytes).toBe(0);
  });

  it('a block freed after its free neighbours joins them, before and after it, whatever the order', () => {
    const { reuse, wordsAt } = unheldReuse();
    // Five neighbours of 100 words from offset 16, freed one batch at a time: 1, 0, 3, 2 (which
    // joins both its neighbours), 4; then one block of 500 words is all the free space.
    const at = (i: number) => 16 + i * 400;
    for (let i = 0; i < 5; i++) wordsAt.set(at(i), 100);
    let epoch = 0;
    for (const i of [1, 0, 3, 2, 4]) {
      reuse.beginBatch(at(5));
      reuse.supersede(at(i));
      reuse.committed(++epoch, epoch);
    }
    reuse.beginBatch(at(5));
    expect(reuse.freeBytes).toBe(5 * 400);
    expect(reuse.take(500)).toBe(at(0));
    expect(reuse.freeBytes).toBe(0);
  });

  it('never gives two live versions the same space: random sizes, updates, deletions, rollbacks and held reads', () => {
    const random = rng(23);
    const store = Store.create();
    const k = store.names.intern('v');
    // Many labels and records of every kind, small numbers and empty ones too: a version's
    // words are anything, and nothing may take them for free space.
    const labels = Array.from({ length: 40 }, (_, i) => store.names.intern(`L${i}`));
    const label = () => labels[Math.floor(random() * labels.length)]!;
    type Rec = { keys: number[]; values: (string | number)[] };
    const value = (n: number): Rec => {
      const r = random();
      if (r < 0.15) return { keys: [], values: [] };
      if (r < 0.4) return { keys: [k], values: [Math.floor(random() * 2000)] };
      if (r < 0.45) return { keys: [k], values: ['w'.repeat(4096 + Math.floor(random() * 8000))] };
      return { keys: [k], values: ['y'.repeat(Math.floor(random() * 120)) + `#${n}`] };
    };
    const expected = new Map<number, Rec>();
    const reader = Store.attach(store.shared);
    let reading = -1, readerExpected = new Map<number, Rec>();
    for (let batch = 0; batch < 4000; batch++) {
      store.beginWrite();
      const changes = new Map<number, Rec | null>();
      for (let c = 0, n = 1 + Math.floor(random() * 8); c < n; c++) {
        const r = random();
        const live = [...expected.keys()].filter((id) => !changes.has(id) || changes.get(id) !== null);
        if (r < 0.3 || live.length < 5) {
          const v = value(batch);
          changes.set(store.addNode(label(), v), v);
        } else if (r < 0.85) {
          const id = live[Math.floor(random() * live.length)]!, v = value(batch);
          store.setNodeRecord(id, v);
          changes.set(id, v);
        } else {
          const id = live[Math.floor(random() * live.length)]!;
          store.deleteNode(id);
          changes.set(id, null);
        }
      }
      if (random() < 0.1) store.rollback();
      else {
        store.commit();
        for (const [id, v] of changes) if (v === null) expected.delete(id); else expected.set(id, v);
      }
      if (reading < 0 && random() < 0.05) {
        reading = reader.beginRead();
        readerExpected = new Map(expected);
      } else if (reading >= 0 && random() < 0.1) {
        for (const [id, v] of readerExpected) expect(reader.nodeRecord(id, reading).values, `node ${id} at ${reading}`).toEqual(v.values);
        reader.endRead();
        reading = -1;
      }
    }
    const at = store.committedEpoch(), nodes = new Uint32Array(store.shared.nodes);
    const spans = [...expected.keys()].map((id) => [nodes[id * NODE_WORDS + N_PROPS]!, nodes[id * NODE_WORDS + N_PROPS]! + versionBytes(store, id)] as const).sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < spans.length; i++) expect(spans[i]![0], 'versions overlap').toBeGreaterThanOrEqual(spans[i - 1]![1]);
    expect(spans.at(-1)![1]).toBeLessThanOrEqual(store.propertyHeapBytes());
    for (const [id, v] of expected) expect(store.nodeRecord(id, at).values).toEqual(v.values);
  });

  it('counts a superseded version reclaimable once its successor is published, not before', () => {
    const store = Store.create();
    store.publishOnCommit = false; // as durable storage: visible once on disk
    const key = store.names.intern('v'), label = store.names.intern('N');
    store.beginWrite();
    const node = store.addNode(label, { keys: [key], values: ['first'] });
    store.commit();
    store.publish(store.committedEpoch());
    const firstBytes = versionBytes(store, node);
    store.beginWrite();
    store.setNodeRecord(node, { keys: [key], values: ['second'] });
    store.commit();
    expect(store.propertyHeapReclaimableBytes(), 'a read at the visible epoch still reads the first version').toBe(0);
    store.publish(store.committedEpoch());
    expect(store.propertyHeapReclaimableBytes()).toBe(firstBytes);
  });

  it('keeps a version while a read that may reach it runs, and while a cut older than its successor is held', () => {
    const store = Store.create();
    const key = store.names.intern('v');
    const label = store.names.intern('N');
    const setV = (v: string) => {
      store.beginWrite();
      store.setNodeRecord(0, { keys: [key], values: [v] });
      store.commit();
    };
    store.beginWrite();
    store.addNode(label, { keys: [key], values: ['a'.repeat(40)] });
    store.commit();
    const oldAt = store.committedEpoch();
    // An announced read at the old epoch, on another store attached to the same memory.
    const reader = Store.attach(store.shared);
    expect(reader.beginRead()).toBe(oldAt);
    const cut = store.cut();
    for (let i = 0; i < 200; i++) setV(`${i}`.padEnd(40, 'b'));
    expect(reader.nodeRecord(0, oldAt).values).toEqual(['a'.repeat(40)]);
    const heldBytes = store.propertyHeapBytes();
    // Every version since is held: the read may walk the chain through any of them.
    expect(heldBytes).toBeGreaterThan(200 * 56);
    reader.endRead();
    for (let i = 0; i < 200; i++) setV(`${i}`.padEnd(40, 'c'));
    // The read ended, but the cut (older than all of them) still holds them.
    expect(store.propertyHeapBytes()).toBeGreaterThan(heldBytes + 150 * 56);
    expect(loadSections(sectionsAt(store.shared, cut)).nodeRecord(0, oldAt).values).toEqual(['a'.repeat(40)]);
    store.releaseCut(cut);
    const released = store.propertyHeapBytes();
    for (let i = 0; i < 400; i++) setV(`${i}`.padEnd(40, 'd'));
    // Now the space comes back: 400 more versions fit in what the heap already had.
    expect(store.propertyHeapBytes()).toBe(released);
    expect(store.nodeRecord(0, store.committedEpoch()).values).toEqual(['399'.padEnd(40, 'd')]);
  });

  it('keeps the versions of a rolled-back batch while a read that began before the rollback runs', () => {
    const { store, rec } = fortyNodes();
    const reader = Store.attach(store.shared);
    const at = reader.beginRead();
    store.beginWrite();
    store.setNodeRecord(0, rec('rolled back'.padEnd(20, '.')));
    const rolledBack = new Uint32Array(store.shared.nodes)[4]!;
    store.rollback();
    // While the read runs, later batches do not get that space.
    const versions = (round: string, times = 1) => {
      store.beginWrite();
      const taken: number[] = [];
      for (let t = 0; t < times; t++) {
        for (let n = 0; n < 40; n++) {
          store.setNodeRecord(n, rec(`${round}${n}`.padEnd(20, '.')));
          taken.push(new Uint32Array(store.shared.nodes)[n * NODE_WORDS + N_PROPS]!);
        }
      }
      store.commit();
      return taken;
    };
    expect(versions('b')).not.toContain(rolledBack);
    expect(versions('c')).not.toContain(rolledBack);
    expect(reader.nodeRecord(0, at).values).toEqual(['n0'.padEnd(20, '.')]);
    reader.endRead();
    // The read ended: the space is reused (after the 80 blocks freed since, taken newest first).
    expect(versions('d', 3)).toContain(rolledBack);
  });

  it('the writer forgets what it cached of a rolled-back batch, whose space the next batch (of the same epoch) reuses', () => {
    const { store, rec } = fortyNodes();
    store.beginWrite();
    const pending = store.pendingEpoch();
    store.setNodeRecord(0, rec('rolled back'.padEnd(20, '.')));
    // Admitted to the writer's record cache at the third miss, as (offset, epoch of the batch).
    for (let i = 0; i < 3; i++) expect(store.nodeRecord(0, pending).values).toEqual(['rolled back'.padEnd(20, '.')]);
    const rolledBack = new Uint32Array(store.shared.nodes)[4]!;
    store.rollback();
    expect(store.beginWrite()).toBe(pending);
    const taken: number[] = [];
    for (let n = 1; n < 40; n++) {
      store.setNodeRecord(n, rec(`b${n}`.padEnd(20, '.')));
      taken.push(new Uint32Array(store.shared.nodes)[n * NODE_WORDS + N_PROPS]!);
      expect(store.nodeRecord(n, pending).values).toEqual([`b${n}`.padEnd(20, '.')]);
    }
    store.commit();
    expect(taken).toContain(rolledBack);
  });

  it('drops an edge named twice in one request once: its record is retired once, and the batch replays', () => {
    const store = Store.create();
    store.captureRedo = true;
    const log: RedoBatch[] = [];
    const options = { ...defaultExecOptions, logBatch: (batch: RedoBatch) => { log.push(batch); } };
    const run = (entries: unknown[], parameters?: unknown) => {
      const out = executeRequest(store, JSON.stringify({ request_type: 'write', query: { write: { entries, returns: [] } }, ...(parameters === undefined ? {} : { parameters }) }), noFlags, 'writer', options);
      expect(out).toMatchObject({ status: 200 });
    };
    const str = (v: string) => ({ value: { string: v } });
    const addN = (v: string) => ({ query: { root: { add_n: { label: 'N', properties: [['k', str(v)]] } } } });
    run([addN('a'.repeat(40)), addN('b'.repeat(40))]);
    run([{ query: { root: { add_e: { input: { nodes: { reference: { ids: [0] } } }, label: 'E', to: { ids: [1] }, properties: [['k', str('x'.repeat(40))]] } } } }]);
    run([{ query: { name: 'e', root: { edges: { reference: { ids: [0] } } } } }, { query: { root: { drop_edge_by_id: { input: null, edges: { param: 'es' } } } } },
      { query: { root: { drop_edge_by_id: { input: null, edges: { var: 'e' } } } } }], { es: [0, 0] });
    for (let i = 0; i < 40; i++) run([addN(String(i).padEnd(40, 'n'))]);
    // Every live node has a version of its own.
    const nodes = new Uint32Array(store.shared.nodes), seen = new Set<number>();
    for (let n = 0; n < store.nodeSlots(); n++) {
      expect(seen.has(nodes[n * NODE_WORDS + N_PROPS]!), `node ${n}'s version`).toBe(false);
      seen.add(nodes[n * NODE_WORDS + N_PROPS]!);
    }
    const replica = Store.create();
    for (const batch of log) replica.applyRedo(batch);
    const dump = (s: Store) => executeRequest(s, JSON.stringify({ request_type: 'read', query: { read: { entries: [
      { query: { name: 'v', root: { value_map: { input: { nodes: { reference: 'all' } }, properties: null } } } },
      { query: { name: 'e', root: { count: { input: { edges: { reference: 'all' } } } } } }], returns: ['v', 'e'] } } }), noFlags, 'reader');
    expect(dump(replica)).toEqual(dump(store));
    expect(JSON.stringify(dump(store))).toContain('\\"e\\":0');
    // A log written before the fix holds the deletion twice in that batch: it replays.
    const dropBatch = log.findIndex((b) => b.ops.some((op) => op[0] === EDGE_DELETED));
    const doubled = log.map((b, i) => (i !== dropBatch ? b : { ...b, ops: [...b.ops, ...b.ops.filter((op) => op[0] === EDGE_DELETED)] }));
    expect(doubled[dropBatch]!.ops.filter((op) => op[0] === EDGE_DELETED)).toHaveLength(2);
    const old = Store.create();
    for (const batch of doubled) old.applyRedo(batch);
    expect(dump(old)).toEqual(dump(store));
  });

  it('a write that commits at a barrier reads nothing of the elements it dropped before it, though a variable still names them', () => {
    const store = Store.create();
    const run = (entries: unknown[], returns: string[] = []) => {
      const out = executeRequest(store, JSON.stringify({ request_type: 'write', query: { write: { entries, returns } } }), noFlags, 'writer');
      expect(out).toMatchObject({ status: 200 });
      return (out as { body: string }).body;
    };
    const q = (name: string | null, root: unknown) => ({ query: name === null ? { root } : { name, root } });
    const addN = (v: string) => ({ add_n: { label: 'N', properties: [['k', { value: { string: v } }]] } });
    for (let i = 0; i < 20; i++) run([q(null, addN(`old${i}`.padEnd(20, '-')))]);
    // The drop commits at the index operation's barrier; 20 records of its size follow and
    // may take its record's space. Until 2026-11-27 the variable read the dropped record
    // back (this test then checked it was still intact); now no row of a dropped element
    // comes back to a later entry (var sources, select and inject leave it out; bind and
    // path, which could hold one elsewhere in a row, are refused in write batches), so
    // nothing reads that space after the drop.
    const body = run([
      q('n', { nodes: { reference: { ids: [0] } } }),
      q(null, { drop: { input: { nodes: { reference: { var: 'n' } } } } }),
      q(null, { create_index: { spec: { node_equality: { label: 'N', property: 'k', unique: false } }, if_not_exists: true } }),
      ...Array.from({ length: 20 }, (_, i) => q(null, addN(`new${i}`.padEnd(20, '+')))),
      q('v', { value_map: { input: { nodes: { reference: { var: 'n' } } }, properties: null } }),
      q('s', { count: { input: { select: { input: { nodes: { reference: { ids: [1] } } }, name: 'n' } } } }),
    ], ['v', 's']);
    expect(JSON.parse(body)).toEqual({ v: [], s: 0 });
  });

  it('readers on other threads never read a version whose space was reused under them', async () => {
    const store = Store.create();
    const keys = { owner: store.names.intern('owner'), n: store.names.intern('n'), pad: store.names.intern('pad') };
    const label = store.names.intern('N');
    const NODES = 40, VERSIONS = 20_000, READERS = 2;
    const record = (node: number, n: number) => ({ keys: [keys.owner, keys.n, keys.pad], values: [node, n, padOf(n)] });
    const committedAt = new Int32Array(new SharedArrayBuffer(NODES * VERSIONS * 4));
    const stop = new Int32Array(new SharedArrayBuffer(8)); // [stop, readers started]
    // Durable storage's way: batches become visible only when published, a few behind.
    store.publishOnCommit = false;
    store.beginWrite();
    for (let node = 0; node < NODES; node++) store.addNode(label, record(node, 0));
    store.commit();
    for (let node = 0; node < NODES; node++) committedAt[node * VERSIONS] = store.committedEpoch();
    store.publish(store.committedEpoch());

    const readers = Array.from({ length: READERS }, () => new Worker(new URL('./fixtures/version-reader.mjs', import.meta.url), {
      workerData: { shared: store.shared, nodes: NODES, versions: VERSIONS, keys, stop: stop.buffer, committedAt: committedAt.buffer },
    }));
    const results = readers.map((w) => new Promise<{ reads: number; errors: number; violations: string[] }>((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    }));
    while (Atomics.load(stop, 1) < READERS) await new Promise((r) => setTimeout(r, 5));

    const random = rng(11);
    const version = new Array<number>(NODES).fill(0);
    let batches = 0;
    const until = Date.now() + 3000;
    while (Date.now() < until && Math.max(...version) < VERSIONS - 10) {
      const epoch = store.beginWrite();
      const changed = new Map<number, number>();
      for (let k = 0, n = 1 + Math.floor(random() * 6); k < n; k++) {
        const node = Math.floor(random() * NODES), next = (changed.get(node) ?? version[node]!) + 1;
        store.setNodeRecord(node, record(node, next));
        changed.set(node, next);
      }
      const temporary = store.addNode(label, record(-1, batches % 30));
      if (random() < 0.5) store.deleteNode(temporary);
      if (random() < 0.15) {
        store.rollback();
      } else {
        // Recorded before the batch can become visible.
        for (const [node, n] of changed) Atomics.store(committedAt, node * VERSIONS + n, epoch);
        store.commit();
        for (const [node, n] of changed) version[node] = n;
        if (random() < 0.5) store.publish(Math.max(store.visibleEpoch(), epoch - Math.floor(random() * 4)));
      }
      batches++;
      if (batches % 64 === 0) await new Promise((r) => setImmediate(r));
    }
    store.publish(store.committedEpoch());
    Atomics.store(stop, 0, 1);
    const outcomes = await Promise.all(results);
    await Promise.all(readers.map((w) => w.terminate()));
    for (const { errors, violations } of outcomes) expect({ errors, violations }).toEqual({ errors: 0, violations: [] });
    for (const { reads } of outcomes) expect(reads).toBeGreaterThan(20);
    expect(batches).toBeGreaterThan(500);
    // The space was reused while they read: far less heap than the versions written.
    const written = version.reduce((a, b) => a + b, 0);
    expect(store.propertyHeapBytes()).toBeLessThan(written * 40);
  });
});
