// A write batch that is logged and committed is answered as committed, even when the work
// after its commit cannot be done (the topology heap full); the work of its commit that can
// fail is done before it is logged, where failing rolls it back (a review found a committed
// create_index answered 500 and a committed add_n answered storage_error).
import { afterEach, expect, it, vi } from 'vitest';
import { openDatabase } from '../src/index.js';
import { IndexEntries } from '../src/index/entries.js';
import { SvcError } from '../src/protocol/errors.js';
import { Topology } from '../src/store/topology.js';
import { addN, count, i64, nodes, q, read, str, write } from './helpers/requests.js';
import { buildIndex, ok } from './helpers/search-indexes.js';
import { limits } from '../src/limits.js';
import { tempDirs } from './helpers/temp-dirs.js';

const tempDir = tempDirs('commit-upkeep');
const addOne = (n: number) => write([q('x', addN('U', [['n', i64(n)]]))], ['x']);
const countAll = read([q('c', count(nodes('all')))], ['c']);
const createIndex = write([q('r', { create_index: { spec: { node_equality: { label: 'U', property: 'n' } }, if_not_exists: true } })], ['r']);

afterEach(() => {
  vi.restoreAllMocks();
});

it('a catalog change whose view cannot be written fails before it is logged: refused, and absent after a restart', async () => {
  const dir = tempDir();
  let db = await openDatabase({ storage: 'disk', path: dir });
  try {
    await db.query(addOne(1));
    // The allocation of the new catalog view fails (publishView was its writer before the fix).
    const allocateWords = Topology.prototype.allocateWords;
    let failed = 0;
    vi.spyOn(Topology.prototype, 'allocateWords').mockImplementation(function (this: Topology, words: number) {
      if (/\b(writeView|publishView)\b/.test(new Error().stack ?? '')) {
        failed++;
        throw new SvcError('storage_error', 'storage error: adjacency heap is full');
      }
      return allocateWords.call(this, words);
    });
    const refused = await db.queryRaw(JSON.stringify(createIndex));
    vi.restoreAllMocks();
    expect(failed).toBe(1);
    expect(refused.status).toBe(500);
    expect(JSON.parse(refused.body)).toEqual({ error: 'storage_error', msg: 'storage error: adjacency heap is full' });
    // Nothing of it was committed: the same request creates the index now.
    const created = await db.query(createIndex) as { r: { kind: string; generation: string } };
    expect(created.r).toMatchObject({ kind: 'accepted', generation: '1' });
  } finally {
    await db.close();
  }
  db = await openDatabase({ storage: 'disk', path: dir });
  try {
    expect(await db.query(countAll)).toEqual({ c: 1 });
    // One index, of the first generation, created by the second request.
    const again = await db.query(createIndex) as { r: { kind: string; generation?: string } };
    expect(['already_active', 'existing_operation']).toContain(again.r.kind);
    if (again.r.kind === 'already_active') expect(again.r.generation).toBe('1');
  } finally {
    await db.close();
  }
});

it('upkeep after a commit that cannot allocate is deferred: the write is answered 200, and kept', async () => {
  const dir = tempDir();
  let db = await openDatabase({ storage: 'disk', path: dir });
  const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  try {
    await db.query(addOne(1));
    await db.query(createIndex);
    // The next batch's merge of index entries runs out of topology heap after its commit.
    const pending = IndexEntries.prototype.pendingMaintenance;
    const maintain = IndexEntries.prototype.maintain;
    let failures = 1;
    vi.spyOn(IndexEntries.prototype, 'pendingMaintenance').mockImplementation(function (this: IndexEntries) { return failures > 0 || pending.call(this); });
    vi.spyOn(IndexEntries.prototype, 'maintain').mockImplementation(function (this: IndexEntries, ...args: Parameters<IndexEntries['maintain']>) {
      if (failures > 0) {
        failures--;
        throw new SvcError('storage_error', 'storage error: adjacency heap is full');
      }
      return maintain.apply(this, args);
    });
    // Wait until the index build's own batches are done, so the fault falls on this write.
    for (let i = 0; i < 200 && failures > 0; i++) {
      const answer = await db.queryRaw(JSON.stringify(addOne(2)));
      expect(answer.status, answer.body).toBe(200);
    }
    expect(failures).toBe(0);
    expect(stderr.mock.calls.map((c) => String(c[0])).join('')).toContain('index upkeep after a batch deferred: storage error: adjacency heap is full');
    expect(((await db.query(countAll)) as { c: number }).c).toBeGreaterThanOrEqual(2);
    await db.query(addOne(3)); // the deferred merge runs with this one
  } finally {
    stderr.mockRestore();
    await db.close();
  }
  db = await openDatabase({ storage: 'disk', path: dir });
  try {
    const lookup = read([q('c', count({ where: { input: nodes('all'), predicate: { eq: { left: { property: 'n' }, right: { constant: { i64: 3 } } } } } }))], ['c']);
    expect(await db.query(lookup)).toEqual({ c: 1 });
  } finally {
    await db.close();
  }
});

it('a deferred merge does not keep the rest of the upkeep from running: the per-batch text count starts again after each batch', async () => {
  const db = await openDatabase({ storage: 'memory' });
  const chars = limits.textMutationCharsMax;
  const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  try {
    await buildIndex(db, { node_equality: { label: 'Doc', property: 'n' } });
    await buildIndex(db, { node_text: { label: 'Doc', property: 'body' } });
    // Every merge of index entries fails from here on (the topology heap full).
    vi.spyOn(IndexEntries.prototype, 'pendingMaintenance').mockReturnValue(true);
    vi.spyOn(IndexEntries.prototype, 'maintain').mockImplementation(() => {
      throw new SvcError('storage_error', 'storage error: adjacency heap is full');
    });
    (limits as { textMutationCharsMax: number }).textMutationCharsMax = 100;
    // 60 characters a batch: under the bound each time, if each batch counts from zero.
    for (let i = 0; i < 4; i++) {
      await ok(db, write([q(null, { add_n: { label: 'Doc', properties: [['n', i64(i)], ['body', str(`${'x'.repeat(59)}${i}`)]] } })], []));
    }
    expect(await db.query(countAll)).toEqual({ c: 4 });
  } finally {
    (limits as { textMutationCharsMax: number }).textMutationCharsMax = chars;
    vi.restoreAllMocks();
    stderr.mockRestore();
    await db.close();
  }
});
