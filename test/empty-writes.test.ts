// A write request that changes nothing takes no epoch and logs nothing (epochs bound the
// database's life, docs/limits.md epochMax), and its answer, like a failed write's, waits
// until the batches it read are durable (durable.ts Committer.execute).
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/index.js';
import { Store } from '../src/store/store.js';
import { SvcError } from '../src/protocol/errors.js';
import { Committer, MemoryStorage, type Answer } from '../src/durability/durable.js';
import { executeRequest, noFlags } from '../src/exec/request.js';
import { walFaults } from '../src/durability/wal.js';
import { addN, count, i64, nodes, q, read, write } from './helpers/requests.js';
import { tempDirs } from './helpers/temp-dirs.js';

const tempDir = tempDirs('empty-writes');
afterEach(() => { walFaults.failSyncs = 0; });

const addOne = (n: number) => write([q('x', addN('U', [['n', i64(n)]]))], ['x']);
const countAll = read([q('c', count(nodes('all')))], ['c']);
/** Writes that change nothing: a set on no element, and a write request that only reads. */
const setOnMissing = write([q(null, { set_property: { input: nodes([999]), name: 'n', value: i64(1) } })], []);
const countInWrite = write([q('c', count(nodes('all')))], ['c']);
/**
 * A write that fails after its batch began (the edge's endpoint does not exist): rolled back.
 * Its label is a name the store holds already: a new name would be logged by the next batch.
 */
const edgeToNowhere = write([q('e', { add_e: { input: nodes([0]), label: 'U', to: { ids: [999] }, properties: [] } })], ['e']);

/** A body as the wire carries it. */
const text = (body: unknown): string => JSON.stringify(body);
const walBytes = (dir: string) => readdirSync(dir).filter((f) => f.startsWith('wal-')).reduce((sum, f) => sum + statSync(join(dir, f)).size, 0);

describe('a write that changes nothing', () => {
  it('takes no epoch; the next write takes the next one', () => {
    const store = Store.create();
    expect(executeRequest(store, text(addOne(1)), noFlags, 'writer')).toMatchObject({ status: 200 });
    const epoch = store.committedEpoch();
    for (const body of [setOnMissing, countInWrite, setOnMissing]) {
      expect(executeRequest(store, text(body), noFlags, 'writer')).toMatchObject({ status: 200 });
      expect(store.committedEpoch(), text(body)).toBe(epoch);
    }
    expect(executeRequest(store, text(countInWrite), noFlags, 'writer')).toEqual({ status: 200, body: '{"c":1}' });
    expect(executeRequest(store, text(addOne(2)), noFlags, 'writer')).toMatchObject({ status: 200 });
    expect(store.committedEpoch()).toBe(epoch + 1);
  });

  it('logs nothing on disk, and the log recovers across it without a gap', async () => {
    const dir = tempDir();
    let db = await openDatabase({ storage: 'disk', path: dir });
    await db.query(addOne(1));
    const bytes = walBytes(dir);
    for (let i = 0; i < 20; i++) await db.query(i % 2 === 0 ? setOnMissing : countInWrite);
    expect(walBytes(dir), 'no frame for a write that changed nothing').toBe(bytes);
    expect(await db.query(addOne(2))).toEqual({ x: [{ $id: 1 }] });
    expect(walBytes(dir)).toBeGreaterThan(bytes);
    await db.close();
    db = await openDatabase({ storage: 'disk', path: dir });
    expect(await db.query(countAll)).toEqual({ c: 2 });
    await db.close();
  });

  it('is answered once the batches it read are durable, as is a write that failed', async () => {
    const store = Store.create();
    store.publishOnCommit = false; // as on disk: readers see a batch once it is durable
    const waiting: (() => void)[] = [];
    const makeDurable = (): void => {
      store.publish(store.committedEpoch());
      for (const resolve of waiting.splice(0)) resolve();
    };
    const storage = Object.assign(new MemoryStorage(store), { sync: () => new Promise<void>((resolve) => { waiting.push(resolve); }) });
    const committer = new Committer(storage, { queryTimeoutMs: 30_000 });
    const added = committer.execute(text(addOne(1)), noFlags) as Promise<Answer>;
    const epoch = store.committedEpoch();
    const settled: string[] = [];
    const counted = (committer.execute(text(countInWrite), noFlags) as Promise<Answer>);
    const failed = (committer.execute(text(edgeToNowhere), noFlags) as Promise<Answer>);
    expect(typeof (counted as { then?: unknown }).then, 'it read a batch that is not durable yet').toBe('function');
    expect(typeof (failed as { then?: unknown }).then).toBe('function');
    void counted.then(() => settled.push('counted'));
    void failed.then(() => settled.push('failed'));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(settled, 'answered before the batch it read was durable').toEqual([]);
    makeDurable();
    expect(await added).toMatchObject({ status: 200 });
    expect(await counted).toEqual({ status: 200, body: '{"c":1}' });
    expect(JSON.parse((await failed).body)).toMatchObject({ error: 'node_not_found' });
    // Everything durable: answered within the call.
    expect(committer.execute(text(countInWrite), noFlags)).toEqual({ status: 200, body: '{"c":1}' });
    expect(committer.execute(text(setOnMissing), noFlags)).toEqual({ status: 200, body: '{}' });
    expect(store.committedEpoch(), 'only the add took an epoch').toBe(epoch);
  });

  it('with x-svc-await-durable: false is answered at once, and reads see what it showed', () => {
    const store = Store.create();
    store.publishOnCommit = false;
    const storage = Object.assign(new MemoryStorage(store), { sync: () => new Promise<void>(() => undefined) }); // never durable
    const committer = new Committer(storage, { queryTimeoutMs: 30_000 });
    void committer.execute(text(addOne(1)), noFlags);
    const answer = committer.execute(text(countInWrite), { ...noFlags, awaitDurable: false });
    expect(answer).toEqual({ status: 200, body: '{"c":1}' });
    expect(committer.executeRead(text(countAll), noFlags)).toEqual({ status: 200, body: '{"c":1}' });
  });

  it('is refused at once while the storage cannot make what it read durable, never answered "may or may not"', async () => {
    const notApplied = { error: 'storage_error', msg: expect.stringMatching(/^storage error: storage unavailable, the write was not applied/) };
    const db = await openDatabase({ storage: 'disk', path: tempDir() });
    await db.query(addOne(1));
    walFaults.failSyncs = 1_000_000; // an outage that lasts
    const waiting = db.queryRaw(addOne(2));
    await new Promise((resolve) => setTimeout(resolve, 20)); // its fsync failed: the storage is not ready
    for (const body of [countInWrite, setOnMissing, edgeToNowhere]) {
      const answer = await Promise.race([db.queryRaw(body), new Promise<'no answer'>((resolve) => setTimeout(() => resolve('no answer'), 2000))]);
      expect(answer === 'no answer' ? answer : { status: answer.status, ...JSON.parse(answer.body) }, text(body)).toEqual({ status: 500, ...notApplied });
    }
    walFaults.failSyncs = 0;
    expect((await waiting).status).toBe(200);
    expect(await db.query(countAll)).toEqual({ c: 2 });
    await db.close();
  }, 20_000);

  it('waiting when its storage is fenced is refused, not answered "may or may not have happened"', async () => {
    const store = Store.create();
    store.publishOnCommit = false;
    let fence = (): void => undefined;
    const fenced = new Promise<void>((_, reject) => { fence = () => reject(new SvcError('writer_fenced_commit_outcome_unknown', 'writer fenced')); });
    fenced.catch(() => undefined);
    const storage = Object.assign(new MemoryStorage(store), { sync: () => fenced });
    const committer = new Committer(storage, { queryTimeoutMs: 30_000 });
    const added = committer.execute(text(addOne(1)), noFlags) as Promise<Answer>;
    const waiting = [countInWrite, edgeToNowhere].map((body) => committer.execute(text(body), noFlags) as Promise<Answer>);
    fence();
    expect(JSON.parse((await added).body).error, 'the committed write: its outcome is unknown').toBe('writer_fenced_commit_outcome_unknown');
    for (const answer of await Promise.all(waiting)) {
      expect({ status: answer.status, ...JSON.parse(answer.body) }).toEqual({ status: 500, error: 'storage_error', msg: 'storage error: storage unavailable, the write was not applied (writer fenced)' });
    }
  });
});
