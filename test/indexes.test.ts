// Index lifecycle and secondary indexes (indexes.md §1-§6, §8.1-§8.2) through the embedded
// handle: receipts, outcome tables, status objects, builds concurrent with writes, block /
// retry / abort / drop, unique and value errors rolling batches back, the commit barrier,
// restart mid-build on disk, and answers equal with and without an index.
import { describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../src/index.js';
import { tempDirs } from './helpers/temp-dirs.js';
import { limits } from '../src/limits.js';
import { executeRequest, noFlags } from '../src/exec/request.js';
import type { IndexRuntime } from '../src/index/runtime.js';
import { Store } from '../src/store/store.js';
import { q, read, str, i64, write } from './helpers/requests.js';

const newDir = tempDirs('indexes');
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const spec = (kind: string, fields: Record<string, unknown>) => ({ [kind]: fields });
const create = (s: unknown, ifNotExists = true) => write([q('r', { create_index: { spec: s, if_not_exists: ifNotExists } })], ['r']);
const drop = (s: unknown) => write([q('r', { drop_index: { spec: s } })], ['r']);
const control = (kind: string, id: string, type: 'read' | 'write' = kind === 'get_index_operation' ? 'read' : 'write') =>
  (type === 'read' ? read : write)([q('r', { [kind]: { operation_id: id } })], ['r']);

async function ok(db: Database, request: unknown): Promise<Record<string, unknown>> {
  const { status, body } = await db.queryRaw(request);
  if (status !== 200) throw new Error(`expected 200, got ${status} ${body}`);
  return JSON.parse(body) as Record<string, unknown>;
}

async function fails(db: Database, request: unknown): Promise<{ status: number; error: string; msg: string }> {
  const { status, body } = await db.queryRaw(request);
  const parsed = JSON.parse(body) as { error: string; msg: string };
  return { status, error: parsed.error, msg: parsed.msg };
}

type Status = { status: string; stage: string; attempt: number; blocker_code?: string; progress: Record<string, string>; operation_kind: string; index_id: string; generation: string };

async function poll(db: Database, id: string): Promise<Status> {
  return (await ok(db, control('get_index_operation', id)))['r'] as Status;
}

/** Poll until the operation is terminal or blocked. */
async function settle(db: Database, id: string): Promise<Status> {
  for (let i = 0; i < 2000; i++) {
    const s = await poll(db, id);
    if (s.status === 'succeeded' || s.status === 'aborted' || s.status === 'blocked') return s;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`operation ${id} did not settle`);
}

const people = (n: number, props: (i: number) => [string, unknown][]) =>
  write(Array.from({ length: n }, (_, i) => q(null, { add_n: { label: 'Person', properties: props(i) } })), []);

const whereEq = (label: string, property: string, value: unknown) => ({
  and: { predicates: [
    { eq: { left: { property: '$label' }, right: { constant: { string: label } } } },
    { eq: { left: { property }, right: value } },
  ] },
});
const ids = (predicate: unknown) => read([q('r', { id: { input: { nodes_where: { predicate } } } })], ['r']);
/** The same predicate hidden from the planner (an `or` of one): always a full scan. */
const scanned = (predicate: unknown) => ({ or: { predicates: [predicate] } });

describe('index DDL and lifecycle', () => {
  it('creates, reports and re-creates indexes exactly as the outcome tables say', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await ok(db, people(5, (i) => [['email', str(`p${i}@x`)], ['age', i64(20 + i)]]));
    const first = (await ok(db, create(spec('node_equality', { label: 'Person', property: 'email', unique: true }))))['r'] as Record<string, string>;
    expect(first).toMatchObject({ kind: 'accepted', index_id: '1', generation: '1' });
    expect(first['operation_id']).toMatch(uuid);
    const done = await settle(db, first['operation_id']!);
    expect(done).toMatchObject({ status: 'succeeded', stage: 'activate', attempt: 1, operation_kind: 'build', family: 'secondary', index_id: '1', generation: '1' });
    expect(Object.keys(done.progress).sort()).toEqual(['entities', 'input_bytes', 'output_bytes', 'output_operations']);
    expect(done.progress['output_operations']).toBe('5');
    expect(done.blocker_code).toBeUndefined();

    expect((await ok(db, create(spec('node_equality', { label: 'Person', property: 'email', unique: true }))))['r']).toEqual({ kind: 'already_active', index_id: '1', generation: '1' });
    expect(await fails(db, create(spec('node_equality', { label: 'Person', property: 'email', unique: true }), false))).toMatchObject({ status: 500, error: 'index_already_exists' });
    const conflict = await fails(db, create(spec('node_equality', { label: 'Person', property: 'email' })));
    expect(conflict).toMatchObject({ status: 500, error: 'index_definition_conflict' });
    expect(conflict.msg).toContain('unique');
    // A range index on the same label+property is another identity.
    const range = (await ok(db, create(spec('node_range', { label: 'Person', property: 'email' }))))['r'] as Record<string, string>;
    expect(range).toMatchObject({ kind: 'accepted', index_id: '2', generation: '1' });
    await settle(db, range['operation_id']!);

    // Drop, then re-create: same index id, generation + 1.
    const dropped = (await ok(db, drop(spec('node_equality', { label: 'Person', property: 'email', unique: true }))))['r'] as Record<string, string>;
    expect(dropped).toMatchObject({ kind: 'accepted', index_id: '1', generation: '1' });
    const dropStatus = await settle(db, dropped['operation_id']!);
    expect(dropStatus).toMatchObject({ status: 'succeeded', stage: 'finalize', operation_kind: 'drop' });
    expect(await fails(db, drop(spec('node_equality', { label: 'Person', property: 'email', unique: true })))).toMatchObject({ status: 500, error: 'index_not_found' });
    const again = (await ok(db, create(spec('node_equality', { label: 'Person', property: 'email', unique: true }))))['r'] as Record<string, string>;
    expect(again).toMatchObject({ kind: 'accepted', index_id: '1', generation: '2' });
    await settle(db, again['operation_id']!);

    expect(await fails(db, control('get_index_operation', '0190F3A2-5B7C-7D4E-9F10-2A3B4C5D6E7F'))).toMatchObject({ status: 400, error: 'invalid_index_operation_id' });
    expect(await fails(db, control('get_index_operation', '00000000-0000-0000-0000-000000000000'))).toMatchObject({ status: 400, error: 'invalid_index_operation_id' });
    expect(await fails(db, control('get_index_operation', '0190f3a2-5b7c-7d4e-9f10-2a3b4c5d6e7f'))).toMatchObject({ status: 500, error: 'index_operation_not_found' });
    const notAbortable = await fails(db, control('abort_index_operation', first['operation_id']!));
    expect(notAbortable).toMatchObject({ status: 500, error: 'index_operation_not_abortable' });
    expect(notAbortable.msg).toBe(`db error: Index operation ${first['operation_id']} is not abortable: successful or terminal build`);
    expect(await fails(db, control('abort_index_operation', dropped['operation_id']!))).toMatchObject({ status: 500, error: 'index_operation_not_abortable' });
    // Retrying a finished operation returns it unchanged.
    expect((await ok(db, control('retry_index_operation', first['operation_id']!)))['r']).toEqual(await poll(db, first['operation_id']!));
    expect(await fails(db, create(spec('node_equality', { label: '', property: 'email' })))).toMatchObject({ status: 400, error: 'invalid_empty_name' });
    expect(await fails(db, create(spec('node_equality', { label: '  ', property: 'email' })))).toMatchObject({ status: 500, error: 'invalid_configuration' });
    expect(await fails(db, create(spec('node_vector', { label: 'A', property: 'v', dimension: 0, metric: 'cosine' })))).toMatchObject({ status: 400, error: 'invalid_query_json' });
    // A float token is no integer, even when whole (values.md §2; a probe had 3.0 and 1e1 accepted).
    for (const token of ['3.0', '1e1']) {
      const body = JSON.stringify(create(spec('node_vector', { label: 'A', property: 'v', dimension: 7, metric: 'cosine' }))).replace('"dimension":7', `"dimension":${token}`);
      expect(body).toContain(`"dimension":${token}`);
      expect(await fails(db, body), token).toMatchObject({ status: 400, error: 'invalid_query_json', msg: expect.stringContaining('dimension: expected an integer >= 1') });
    }
    expect(await fails(db, create(spec('node_equality', { label: 'L'.repeat(65536), property: 'x' })))).toMatchObject({ status: 500, error: 'invalid_index_model' });
    // Dropping, then creating in the same request: the identity is busy while it drops.
    const busy = await fails(db, write([
      q('d', { drop_index: { spec: spec('node_range', { label: 'Person', property: 'email' }) } }),
      q('c', { create_index: { spec: spec('node_range', { label: 'Person', property: 'email' }), if_not_exists: true } }),
    ], ['d', 'c']));
    expect(busy).toMatchObject({ status: 500, error: 'index_busy' });
    expect(busy.msg).toContain('dropping');
    await db.close();
  });

  it('blocks a unique build over duplicates; retry after fixing the data succeeds; abort cleans up', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await ok(db, people(4, (i) => [['email', str(i < 2 ? 'same@x' : `p${i}@x`)]]));
    const r = (await ok(db, create(spec('node_equality', { label: 'Person', property: 'email', unique: true }))))['r'] as Record<string, string>;
    const blocked = await settle(db, r['operation_id']!);
    expect(blocked).toMatchObject({ status: 'blocked', blocker_code: 'uniqueness_violation' });
    // The index is not active: duplicates can still be written, lookups scan.
    expect(((await ok(db, ids(whereEq('Person', 'email', { constant: { string: 'same@x' } }))))['r'])).toEqual([0, 1]);
    // Still blocked when retried without a fix; then fix and retry.
    expect(((await ok(db, control('retry_index_operation', r['operation_id']!)))['r'] as Status).status).toBe('queued');
    expect(await settle(db, r['operation_id']!)).toMatchObject({ status: 'blocked', blocker_code: 'uniqueness_violation' });
    await ok(db, write([q(null, { set_property: { input: { nodes: { reference: { ids: [1] } } }, name: 'email', value: str('other@x') } })], []));
    await ok(db, control('retry_index_operation', r['operation_id']!));
    const done = await settle(db, r['operation_id']!);
    expect(done).toMatchObject({ status: 'succeeded', stage: 'activate' });
    expect(done.attempt).toBeGreaterThanOrEqual(2);

    // A range build over a null blocks with invalid_source_data; abort it.
    await ok(db, people(1, () => [['age', { value: 'null' }]]));
    const rr = (await ok(db, create(spec('node_range', { label: 'Person', property: 'age' }))))['r'] as Record<string, string>;
    expect(await settle(db, rr['operation_id']!)).toMatchObject({ status: 'blocked', blocker_code: 'invalid_source_data' });
    const aborting = (await ok(db, control('abort_index_operation', rr['operation_id']!)))['r'] as Status;
    expect(aborting.stage).toMatch(/^aborting_/);
    expect(await settle(db, rr['operation_id']!)).toMatchObject({ status: 'aborted', stage: 'aborting_finalize', operation_kind: 'build' });
    // Gone: creatable again (same id, next generation).
    const re = (await ok(db, create(spec('node_range', { label: 'Person', property: 'age' }))))['r'] as Record<string, string>;
    expect(re).toMatchObject({ kind: 'accepted', index_id: rr['index_id'], generation: '2' });
    await db.close();
  });

  it('a unique build blocks over a duplicate written behind its cursor while it scans', () => {
    // Driven slice by slice on a bare store, so the write lands between two known slices.
    const store = Store.create();
    const run = (request: unknown): Record<string, unknown> => {
      const out = executeRequest(store, JSON.stringify(request), noFlags, 'writer');
      if (!('status' in out) || out.status !== 200) throw new Error(JSON.stringify(out));
      return JSON.parse(out.body) as Record<string, unknown>;
    };
    const step = (): string => {
      store.beginWrite();
      const result = (store.indexes as IndexRuntime).step();
      store.commit();
      return result;
    };
    const slice = limits.indexBuildSliceElements;
    (limits as { indexBuildSliceElements: number }).indexBuildSliceElements = 20;
    try {
      run(people(100, (i) => [['email', str(`p${i}@x`)]]));
      const id = ((run(create(spec('node_equality', { label: 'Person', property: 'email', unique: true }))))['r'] as Record<string, string>)['operation_id']!;
      expect(step()).toBe('progress'); // slots 0..19 scanned
      // Slot 5 is behind the cursor (maintained by the write), slot 90 not scanned yet.
      run(write([q(null, { set_property: { input: { nodes: { reference: { ids: [5] } } }, name: 'email', value: str('p90@x') } })], []));
      while (step() === 'progress') { /* scan, catch up, validate */ }
      expect(run(control('get_index_operation', id))['r']).toMatchObject({ status: 'blocked', blocker_code: 'uniqueness_violation' });
    } finally {
      (limits as { indexBuildSliceElements: number }).indexBuildSliceElements = slice;
    }
  });

  it('a build activates its entries as one run (built in many slices), and answers like a scan', () => {
    const store = Store.create();
    const run = (request: unknown): Record<string, unknown> => {
      const out = executeRequest(store, JSON.stringify(request), noFlags, 'writer');
      if (!('status' in out) || out.status !== 200) throw new Error(JSON.stringify(out));
      return JSON.parse(out.body) as Record<string, unknown>;
    };
    const slice = limits.indexBuildSliceElements;
    (limits as { indexBuildSliceElements: number }).indexBuildSliceElements = 20;
    try {
      run(people(300, (i) => [['email', str(`p${i}@x`)]]));
      run(create(spec('node_equality', { label: 'Person', property: 'email', unique: true })));
      const runtime = store.indexes as IndexRuntime;
      for (;;) {
        store.beginWrite();
        const result = runtime.step();
        store.commit();
        if (result !== 'progress') break;
      }
      const physical = (runtime as unknown as { physical: Map<number, { entries: { stats(): { runs: number; entries: number } } }> }).physical;
      expect([...physical.values()].map((p) => p.entries.stats())).toEqual([{ entries: 300, liveEntries: 300, words: expect.any(Number), runs: 1 }]);
      for (const i of [0, 150, 299]) {
        const predicate = whereEq('Person', 'email', { constant: { string: `p${i}@x` } });
        expect(run(ids(predicate))['r']).toEqual([i]);
        expect(run(ids(scanned(predicate)))['r']).toEqual([i]);
      }
    } finally {
      (limits as { indexBuildSliceElements: number }).indexBuildSliceElements = slice;
    }
  });

  it('dropping a building index aborts it and answers existing_operation', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await ok(db, people(2, () => [['age', { value: 'null' }]]));
    const r = (await ok(db, create(spec('node_range', { label: 'Person', property: 'age' }))))['r'] as Record<string, string>;
    const busy = (await ok(db, drop(spec('node_range', { label: 'Person', property: 'age' }))))['r'];
    expect(busy).toEqual({ kind: 'existing_operation', operation_id: r['operation_id'] });
    const creating = await fails(db, create(spec('node_range', { label: 'Person', property: 'age' })));
    // Aborting (index_busy) until the abort finishes.
    if (creating.status !== 200) expect(creating).toMatchObject({ status: 500, error: 'index_busy' });
    expect(await settle(db, r['operation_id']!)).toMatchObject({ status: 'aborted' });
    await db.close();
  });
});

describe('secondary index maintenance', () => {
  it('enforces unique indexes and index value rules, rolling the whole batch back', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await ok(db, people(3, (i) => [['name', str(['Ann', 'Bob', 'Carla'][i]!)]]));
    for (const s of [spec('node_equality', { label: 'Person', property: 'name', unique: true }), spec('node_range', { label: 'Person', property: 'age' }),
      spec('node_equality', { label: 'Person', property: 'tags' })]) {
      const r = (await ok(db, create(s)))['r'] as Record<string, string>;
      expect(await settle(db, r['operation_id']!)).toMatchObject({ status: 'succeeded' });
    }
    const before = (await ok(db, read([q('n', { count: { input: { nodes: { reference: 'all' } } } })], ['n'])))['n'];
    const dup = await fails(db, write([q(null, { add_n: { label: 'Person', properties: [['name', str('Dan')]] } }), q(null, { add_n: { label: 'Person', properties: [['name', str('Carla')]] } })], []));
    expect(dup).toMatchObject({ status: 500, error: 'unique_constraint_violation' });
    expect(dup.msg).toBe('db error: Unique constraint violated for Person.name on value "Carla": existing node 2, attempted node 4');
    expect((await ok(db, read([q('n', { count: { input: { nodes: { reference: 'all' } } } })], ['n'])))['n']).toBe(before);
    // Dan was rolled back: writing Dan again is fine, and null is allowed many times.
    await ok(db, write([q(null, { add_n: { label: 'Person', properties: [['name', str('Dan')]] } })], []));
    await ok(db, people(2, () => [['name', { value: 'null' }]]));
    expect(await fails(db, people(1, () => [['name', { value: { array: [{ i64: 1 }] } }]]))).toMatchObject({ status: 500, error: 'unsupported_unique_index_value_type' });
    expect(await fails(db, people(1, () => [['tags', { value: { object: {} } }]]))).toMatchObject({ status: 500, error: 'invalid_secondary_index_value' });
    for (const bad of [{ value: 'null' }, { value: { bool: true } }, { value: { bytes: [1] } }, { value: { f64: Number.NaN } }]) {
      if (typeof bad.value === 'object' && bad.value !== null && 'f64' in bad.value) continue; // NaN has no JSON literal
      expect(await fails(db, people(1, () => [['age', bad]]))).toMatchObject({ status: 500, error: 'invalid_secondary_index_value' });
    }
    // The key limit (limits.indexKeyBytesMax, 4,096) counts a string's UTF-8 bytes, on the
    // unique (name), range (age) and generic (tags) indexes alike.
    for (const property of ['name', 'age', 'tags']) {
      await ok(db, people(1, () => [[property, str('a'.repeat(4096))]]));
      await ok(db, people(1, () => [[property, str('é'.repeat(2048))]]));
      const over = await fails(db, people(1, () => [[property, str(`${'é'.repeat(2048)}a`)]]));
      expect(over, property).toMatchObject({ status: 500, error: 'invalid_secondary_index_value' });
      expect(over.msg).toContain('secondary index value of 4097 bytes exceeds the index key limit of 4096 bytes');
    }
    await ok(db, people(1, () => [['tags', { value: { string_array: ['a'.repeat(2000), 'b'.repeat(2000)] } }]]));
    // Setting a value owned by another node, and relabelling into a conflict, fail too.
    expect(await fails(db, write([q(null, { set_property: { input: { nodes: { reference: { ids: [0] } } }, name: 'name', value: str('Bob') } })], []))).toMatchObject({ error: 'unique_constraint_violation' });
    // Removing and re-adding within one batch is fine.
    await ok(db, write([
      q(null, { remove_property: { input: { nodes: { reference: { ids: [0] } } }, name: 'name' } }),
      q(null, { set_property: { input: { nodes: { reference: { ids: [1] } } }, name: 'name', value: str('Ann') } }),
    ], []));
    expect((await ok(db, ids(whereEq('Person', 'name', { constant: { string: 'Ann' } }))))['r']).toEqual([1]);
    expect((await ok(db, ids(whereEq('Person', 'name', { constant: { string: 'Bob' } }))))['r']).toEqual([]);
    await db.close();
  });

  it('answers equal with and without the index while builds run concurrently with writes', async () => {
    const db = await openDatabase({ storage: 'memory' });
    const n = 30_000;
    for (let start = 0; start < n; start += 5000) {
      await ok(db, people(5000, (i) => [['k', i64((start + i) % 97)], ['age', i64((start + i) % 50)]]));
    }
    const r = (await ok(db, create(spec('node_equality', { label: 'Person', property: 'k' }))))['r'] as Record<string, string>;
    const rr = (await ok(db, create(spec('node_range', { label: 'Person', property: 'age' }))))['r'] as Record<string, string>;
    // Writes while the builds run: move values, delete, add.
    for (let i = 0; i < 40; i++) {
      await ok(db, write([
        q(null, { set_property: { input: { nodes: { reference: { ids: [i * 700] } } }, name: 'k', value: i64(1000 + i) } }),
        q(null, { set_property: { input: { nodes: { reference: { ids: [i * 700 + 1] } } }, name: 'age', value: i64(77) } }),
        q(null, { drop: { input: { nodes: { reference: { ids: [i * 700 + 2] } } } } }),
        q(null, { add_n: { label: 'Person', properties: [['k', i64(5)], ['age', i64(7)]] } }),
      ], []));
    }
    expect(await settle(db, r['operation_id']!)).toMatchObject({ status: 'succeeded' });
    expect(await settle(db, rr['operation_id']!)).toMatchObject({ status: 'succeeded' });
    const check = async (predicate: unknown) => {
      expect(db.explain(ids(predicate))[0]!.access).not.toBe('scan');
      expect(db.explain(ids(scanned(predicate)))[0]!.access).toBe('scan');
      const indexed = (await ok(db, ids(predicate)))['r'];
      const full = (await ok(db, ids(scanned(predicate))))['r'];
      expect(indexed).toEqual(full);
      return indexed as number[];
    };
    expect((await check(whereEq('Person', 'k', { constant: { i64: 5 } }))).length).toBeGreaterThan(300);
    expect(await check(whereEq('Person', 'k', { constant: { f64: 1003 } }))).toEqual([2100]);
    const label = { eq: { left: { property: '$label' }, right: { constant: { string: 'Person' } } } };
    expect((await check({ and: { predicates: [label, { between: { value: { property: 'age' }, min: { constant: { i64: 7 } }, max: { constant: { f64: 9.5 } } } }] } })).length).toBeGreaterThan(1000);
    expect((await check({ and: { predicates: [label, { gt: { left: { property: 'age' }, right: { constant: { i64: 48 } } } }] } })).length).toBeGreaterThan(40);
    expect((await check({ and: { predicates: [label, { is_in: { value: { property: 'k' }, values: { constant: { array: [{ i64: 3 }, { f64: 4 }, { string: '3' }] } } } }] } })).length).toBeGreaterThan(100);
    await db.close();
  });

  it('a failure after the commit barrier keeps what was committed before it', async () => {
    const db = await openDatabase({ storage: 'memory' });
    const failing = write([
      q(null, { add_n: { label: 'Kept', properties: [] } }),
      q('r', { create_index: { spec: spec('node_equality', { label: 'Kept', property: 'x' }), if_not_exists: false } }),
      q(null, { create_index: { spec: spec('node_equality', { label: 'Kept', property: 'x' }), if_not_exists: false } }),
    ], ['r']);
    expect(await fails(db, failing)).toMatchObject({ status: 500, error: 'index_already_exists' });
    expect((await ok(db, read([q('n', { count: { input: { nodes: { reference: 'all' } } } })], ['n'])))['n']).toBe(1);
    await db.close();
  });
});

describe('indexes on disk', () => {
  it('keeps the catalog and resumes an unfinished build after a restart', async () => {
    const path = newDir();
    let db = await openDatabase({ storage: 'disk', path });
    await ok(db, people(3000, (i) => [['k', i64(i % 10)]]));
    const done = (await ok(db, create(spec('node_equality', { label: 'Person', property: 'k' }))))['r'] as Record<string, string>;
    await settle(db, done['operation_id']!);
    await ok(db, people(5000, (i) => [['age', i64(i % 90)]]));
    // Small slices, so the second build is still running when the handle closes.
    const slice = limits.indexBuildSliceElements;
    (limits as { indexBuildSliceElements: number }).indexBuildSliceElements = 20;
    let running: Record<string, string>;
    try {
      running = (await ok(db, create(spec('node_range', { label: 'Person', property: 'age' }))))['r'] as Record<string, string>;
      expect((await poll(db, running['operation_id']!)).status).not.toBe('succeeded');
      await db.close();
    } finally {
      (limits as { indexBuildSliceElements: number }).indexBuildSliceElements = slice;
    }
    db = await openDatabase({ storage: 'disk', path });
    const resumed = await settle(db, running['operation_id']!);
    expect(resumed).toMatchObject({ status: 'succeeded', stage: 'activate' });
    expect((await poll(db, done['operation_id']!)).status).toBe('succeeded');
    const predicate = whereEq('Person', 'k', { constant: { i64: 3 } });
    expect((await ok(db, ids(predicate)))['r']).toEqual((await ok(db, ids(scanned(predicate))))['r']);
    expect((await ok(db, create(spec('node_equality', { label: 'Person', property: 'k' }))))['r']).toMatchObject({ kind: 'already_active', index_id: '1' });
    await db.close();
  });

  it('a build blocked before a restart scans again when retried after it', async () => {
    const path = newDir();
    let db = await openDatabase({ storage: 'disk', path });
    await ok(db, people(500, (i) => [['email', str(i === 7 ? 'p3@x' : `p${i}@x`)]]));
    const r = (await ok(db, create(spec('node_equality', { label: 'Person', property: 'email', unique: true }))))['r'] as Record<string, string>;
    expect(await settle(db, r['operation_id']!)).toMatchObject({ status: 'blocked', stage: 'validate', blocker_code: 'uniqueness_violation' });
    await db.close();
    db = await openDatabase({ storage: 'disk', path });
    expect(await poll(db, r['operation_id']!)).toMatchObject({ status: 'blocked', blocker_code: 'uniqueness_violation' });
    await ok(db, write([q(null, { set_property: { input: { nodes: { reference: { ids: [7] } } }, name: 'email', value: str('p7@x') } })], []));
    await ok(db, control('retry_index_operation', r['operation_id']!));
    expect(await settle(db, r['operation_id']!)).toMatchObject({ status: 'succeeded' });
    for (const v of ['p3@x', 'p7@x', 'p499@x']) {
      const predicate = whereEq('Person', 'email', { constant: { string: v } });
      expect((await ok(db, ids(predicate)))['r']).toEqual((await ok(db, ids(scanned(predicate))))['r']);
      expect(((await ok(db, ids(predicate)))['r'] as number[]).length).toBe(1);
    }
    expect(await fails(db, people(1, () => [['email', str('p7@x')]]))).toMatchObject({ error: 'unique_constraint_violation' });
    await db.close();
  });
});

describe('the store transaction log with index changes', () => {
  it('replay refuses unknown record kinds and malformed catalog changes, leaving the store as it was', async () => {
    const { Store } = await import('../src/store/store.js');
    await import('../src/index/runtime.js');
    const store = Store.create();
    const batch = (ops: unknown[]) => ({ epoch: store.committedEpoch() + 1, nodeSlots: 0, edgeSlots: 0, names: [], ops }) as never;
    const codeOf = (f: () => void) => { try { f(); return 'no error'; } catch (err) { return (err as { code: string }).code; } };
    expect(codeOf(() => store.applyRedo(batch([[99, 1]])))).toBe('storage_error');
    expect(codeOf(() => store.applyRedo(batch([[6, { bogus: 1 }]])))).toBe('storage_error');
    expect(codeOf(() => store.applyRedo(batch([[6, { record: 'nope' }]])))).toBe('storage_error');
    expect(store.committedEpoch()).toBe(1);
    // A well-formed change replays; the epoch moves by one.
    store.applyRedo(batch([[6, { nextIndexId: 5 }]]));
    expect(store.committedEpoch()).toBe(2);
    expect(codeOf(() => store.applyRedo(batch([[6, { nextIndexId: 3 }]])))).toBe('storage_error');
    expect(codeOf(() => store.applyRedo({ epoch: 7, nodeSlots: 0, edgeSlots: 0, names: [], ops: [] }))).toBe('internal_error');
  });
});

describe('index scans within the query bounds', () => {
  it('candidates count against the memory budget: a wide range over an index fails like a scan would', async () => {
    const db = await openDatabase({ storage: 'memory', queryMemoryMb: 1 });
    for (let start = 0; start < 100_000; start += 20_000) await ok(db, people(20_000, (i) => [['age', i64((start + i) % 3)]]));
    const r = (await ok(db, create(spec('node_range', { label: 'Person', property: 'age' }))))['r'] as Record<string, string>;
    expect(await settle(db, r['operation_id']!)).toMatchObject({ status: 'succeeded' });
    const label = { eq: { left: { property: '$label' }, right: { constant: { string: 'Person' } } } };
    const wide = { and: { predicates: [label, { gte: { left: { property: 'age' }, right: { constant: { i64: 0 } } } }] } };
    // limit 1: one row, but 100k candidates held while they are sorted and checked.
    const first = read([q('n', { id: { input: { limit: { input: { nodes_where: { predicate: wide } }, count: { literal: 1 } } } } })], ['n']);
    expect(db.explain(first)[0]!.access).toBe('index_range');
    expect(await fails(db, first)).toMatchObject({ status: 500, error: 'invalid_query' });
    // A narrow range stays well inside the budget.
    const narrow = { and: { predicates: [label, { gte: { left: { property: 'age' }, right: { constant: { i64: 2 } } } }] } };
    expect((await ok(db, read([q('n', { count: { input: { nodes_where: { predicate: narrow } } } })], ['n'])))['n']).toBe(33_333);
    await db.close();
  });
});
