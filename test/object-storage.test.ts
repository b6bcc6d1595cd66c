// Object storage against s3rver (started here on a free loopback port): the embedded
// writer and reader, outages of the S3 server under a write load (retry, health, what
// each answer promised), the lease, multipart snapshots, staging dirs, a follower stuck at
// a batch it cannot apply, kill -9 of `svc serve --storage-uri`, reader servers following
// a writer server (including a reload from a newer snapshot), and the writer lock.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeleteObjectsCommand, GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { createServer, request as httpRequest } from 'node:http';
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openDatabase, type OpenOptions } from '../src/index.js';
import { defaultObjectWriterOptions, ObjectFollower, ObjectWriter } from '../src/durability/object-storage.js';
import { Bucket } from '../src/durability/object-bucket.js';
import type { StorageHealth } from '../src/durability/durable.js';
import { encodeFrame, segmentHeader } from '../src/durability/wal.js';
import type { RedoBatch } from '../src/store/store.js';
import { executeRequest } from '../src/exec/request.js';
import { errorBody, SvcError } from '../src/protocol/errors.js';
import { cliPath } from './helpers/server.js';
import { killS3rver, s3Credentials, startS3rver, type S3rverInstance } from './helpers/s3rver.js';
import { addN, count, i64, nodes, q, read, write } from './helpers/requests.js';
import { eventually } from './helpers/eventually.js';
import { limits } from '../src/limits.js';

const credentials = s3Credentials;
const awsEnv = { AWS_ACCESS_KEY_ID: credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey };
const countAll = read([q('c', count(nodes('all')))], ['c']);
const addOne = (n: number) => write([q('x', addN('U', [['n', i64(n)]]))], ['x']);

let s3: S3rverInstance;
let endpoint = '';
let client: S3Client;
const dataDir = mkdtempSync(join(tmpdir(), 'svcdb-s3rver-'));

beforeAll(async () => {
  const started = await startS3rver(dataDir);
  s3 = started.server;
  const port = started.port;
  endpoint = `http://127.0.0.1:${port}`;
  process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';
  client = new S3Client({
    endpoint, region: 'us-east-1', forcePathStyle: true, credentials,
    requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED',
  });
});

afterAll(async () => {
  client?.destroy();
  await s3?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

async function keys(prefix: string): Promise<string[]> {
  const out = await client.send(new ListObjectsV2Command({ Bucket: 'bucket', Prefix: `${prefix}/` }));
  return (out.Contents ?? []).map((o) => o.Key!.slice(prefix.length + 1)).sort();
}

const s3Options = (prefix: string, extra: Partial<OpenOptions> = {}): OpenOptions =>
  ({ storage: 's3', uri: `s3://bucket/${prefix}`, endpointUrl: endpoint, region: 'us-east-1', credentials, ...extra });

/** A fresh open of `prefix`: how many nodes it holds. */
async function countOnReopen(prefix: string): Promise<unknown> {
  const db = await openDatabase(s3Options(prefix));
  try {
    return await db.query(countAll);
  } finally {
    await db.close();
  }
}

// ---------------------------------------------------------------- spawned servers

interface Served {
  url: string;
  child: ChildProcess;
  stderr(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** `svc serve --port 0 --readers 1 --storage-uri s3://bucket/<prefix> ...`, once it printed its start line. */
function serve(prefix: string, args: string[] = []): Promise<Served> {
  return spawnServe(['--storage-uri', `s3://bucket/${prefix}`, '--s3-endpoint-url', endpoint, '--s3-region', 'us-east-1', ...args]);
}

async function spawnServe(args: string[]): Promise<Served> {
  const child = spawn(process.execPath, [cliPath, 'serve', '--port', '0', '--readers', '1', ...args],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...awsEnv } });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { err += d; });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`no start line\n${out}\n${err}`)); }, 20_000);
    const onData = (): void => {
      const m = /^svcdb listening on (http:\/\/\S+) \(storage: (s3|disk) /.exec(out);
      if (m === null) return;
      clearTimeout(timer);
      resolve(m[1]!);
    };
    child.stdout!.on('data', onData);
    void exited.then(() => { clearTimeout(timer); reject(new Error(`server exited during start-up\n${out}\n${err}`)); });
  });
  return {
    url, child, stderr: () => err,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const res = await fetch(`${url}/v2/query`, { method: 'POST', body: JSON.stringify(body), headers });
  return { status: res.status, body: await res.text() };
}

async function countOn(url: string): Promise<number> {
  const res = await post(url, countAll);
  expect(res.status).toBe(200);
  return (JSON.parse(res.body) as { c: number }).c;
}

const originalSend = S3Client.prototype.send;
const pad = (epoch: number) => String(epoch).padStart(10, '0');
/** The 16-byte WAL segment header (wal.ts). */

/** One write through an ObjectWriter as the server's writer thread does it: apply (logBatch), then wait for durability. */
async function writeThrough(writer: ObjectWriter, request: unknown): Promise<{ status: number; body: string }> {
  const epoch = writer.store.committedEpoch();
  const flags = { warm: null, requireWriter: null, awaitDurable: null };
  const outcome = executeRequest(writer.store, JSON.stringify(request), flags, 'writer', { queryTimeoutMs: 10_000, logBatch: (b) => writer.logBatch(b) });
  if ('forward' in outcome) throw new Error('the writer was asked to forward');
  if (writer.store.committedEpoch() === epoch) return outcome;
  try {
    await writer.sync();
    return outcome;
  } catch (err) {
    const e = err as SvcError;
    return { status: e.status, body: errorBody(e) };
  }
}

/** Two nodes and an edge per write, so a half-applied write would show. */
const pairBatch = (k: number) => write([
  q('a', addN('B', [['k', i64(k)]])),
  q('b', addN('B', [['k', i64(k)]])),
  q(null, { add_e: { input: { nodes: { reference: { var: 'a' } } }, label: 'PAIR', to: { var: 'b' }, properties: [] } }),
], []);
const pairAudit = read([
  q('k', { values: { input: nodes('all'), properties: ['k'] } }),
  q('e', count({ edges: { reference: 'all' } })),
], ['k', 'e']);

// ---------------------------------------------------------------- embedded

describe('object storage, embedded', () => {
  it('a writer keeps every write across close and reopen; group commit; snapshots prune covered objects', async () => {
    let db = await openDatabase(s3Options('emb', { snapshotWalBytes: 4096 }));
    for (let i = 0; i < 10; i++) await db.query(addOne(i));
    // 30 concurrent writes share uploads: far fewer WAL objects than writes.
    const before = (await keys('emb')).filter((k) => k.startsWith('wal/')).length;
    await Promise.all(Array.from({ length: 30 }, (_, i) => db.query(addOne(100 + i))));
    const after = (await keys('emb')).filter((k) => k.startsWith('wal/')).length;
    expect(after - before).toBeLessThan(10);
    expect(await keys('emb')).toContain('writer.lock');
    await db.close();
    const layout = await keys('emb');
    expect(layout).not.toContain('writer.lock');
    expect(layout.filter((k) => k.startsWith('snapshots/')).length).toBeGreaterThanOrEqual(1);
    expect(layout.every((k) => /^(snapshots\/\d{10}\.bin|wal\/\d{10}-\d{10}\.log)$/.test(k))).toBe(true);

    db = await openDatabase(s3Options('emb'));
    expect(await db.query(countAll)).toEqual({ c: 40 });
    // New IDs continue after the recovered ones.
    expect(await db.query(addOne(999))).toEqual({ x: [{ $id: 40 }] });
    await db.close();
    db = await openDatabase(s3Options('emb'));
    expect(await db.query(countAll)).toEqual({ c: 41 });
    await db.close();
  });

  it('many small snapshots: only the newest two and the WAL after the older survive; recovery is exact', async () => {
    const db = await openDatabase(s3Options('emb-snap', { snapshotWalBytes: 1 }));
    for (let i = 0; i < 12; i++) await db.query(addOne(i));
    // Snapshots run beside the uploads: the layout is checked once they are done (the stop's
    // snapshot prunes as every one does).
    await db.close();
    const layout = await keys('emb-snap');
    const snaps = layout.filter((k) => k.startsWith('snapshots/'));
    expect(snaps.length).toBeLessThanOrEqual(3);
    expect(snaps.length).toBeGreaterThanOrEqual(2);
    const oldest = Number(/\d{10}/.exec(snaps[0]!)![0]);
    for (const w of layout.filter((k) => k.startsWith('wal/'))) expect(Number(/-(\d{10})/.exec(w)![1])).toBeGreaterThan(oldest);
    const again = await openDatabase(s3Options('emb-snap'));
    expect(await again.query(countAll)).toEqual({ c: 12 });
    await again.close();
  });

  it('WAL objects are bounded in bytes (walObjectBytesMax): frames waiting together go in several groups', async () => {
    const bound = limits.walObjectBytesMax;
    const setBound = (bytes: number) => { (limits as { walObjectBytesMax: number }).walObjectBytesMax = bytes; };
    setBound(200); // a few frames of this write
    try {
      const db = await openDatabase(s3Options('wal-bound'));
      // Concurrent writes wait for one upload together: group commit would put them in one object.
      await Promise.all(Array.from({ length: 24 }, (_, i) => db.query(addOne(i))));
      const wal = (await keys('wal-bound')).filter((k) => k.startsWith('wal/'));
      const sizes = await Promise.all(wal.map(async (k) => (await client.send(new HeadObjectCommand({ Bucket: 'bucket', Key: `wal-bound/${k}` }))).ContentLength!));
      for (const size of sizes) expect(size).toBeLessThanOrEqual(200 + 16); // + the segment header
      expect(wal.length).toBeGreaterThanOrEqual(8);
      // The groups follow each other: epoch after epoch.
      const ranges = wal.map((k) => /(\d{10})-(\d{10})/.exec(k)!.slice(1).map(Number) as [number, number]);
      for (let i = 1; i < ranges.length; i++) expect(ranges[i]![0]).toBe(ranges[i - 1]![1] + 1);
      expect(ranges.at(-1)![1] - ranges[0]![0] + 1).toBeGreaterThanOrEqual(24);
      await db.close();
      expect(await countOnReopen('wal-bound')).toEqual({ c: 24 });
    } finally {
      setBound(bound);
    }
  });

  it('a snapshot whose cut holds batches still uploading leaves nothing due: an idle writer does not look for snapshots again and again', async () => {
    const writerProto = ObjectWriter.prototype as unknown as { putImmutable(key: string, body: Uint8Array): Promise<string>; maybeSnapshot(): Promise<void> };
    const put = writerProto.putImmutable;
    let groups = 0;
    vi.spyOn(writerProto, 'putImmutable').mockImplementation(async function (this: unknown, key: string, body: Uint8Array) {
      if (groups++ === 0) await new Promise((r) => setTimeout(r, 300)); // the writes below are logged meanwhile
      return put.call(this, key, body);
    });
    const putFile = Bucket.prototype.putFile;
    vi.spyOn(Bucket.prototype, 'putFile').mockImplementation(async function (this: Bucket, ...args: Parameters<Bucket['putFile']>) {
      await new Promise((r) => setTimeout(r, 500)); // the snapshot ends after their group is uploaded
      return putFile.apply(this, args);
    });
    const looks = vi.spyOn(writerProto, 'maybeSnapshot');
    const db = await openDatabase(s3Options('snap-idle', { snapshotWalBytes: 1 }));
    try {
      const first = db.query(addOne(0));
      await new Promise((r) => setTimeout(r, 50));
      await Promise.all([first, db.query(addOne(1)), db.query(addOne(2))]);
      await new Promise((r) => setTimeout(r, 1_500)); // every snapshot due is taken
      const before = looks.mock.calls.length;
      await new Promise((r) => setTimeout(r, 1_000));
      expect(looks.mock.calls.length - before, 'looks for a snapshot in an idle second').toBe(0);
    } finally {
      vi.restoreAllMocks();
      await db.close();
    }
    expect(await countOnReopen('snap-idle')).toEqual({ c: 3 });
  });

  it('writes are not held behind a snapshot: one runs beside the uploads', async () => {
    const putFile = Bucket.prototype.putFile;
    let snapshotsStarted = 0;
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => { release = resolve; });
    vi.spyOn(Bucket.prototype, 'putFile').mockImplementation(async function (this: Bucket, ...args: Parameters<Bucket['putFile']>) {
      snapshotsStarted++;
      await held; // the snapshot's upload hangs until the writes below are answered
      return putFile.apply(this, args);
    });
    const db = await openDatabase(s3Options('snap-beside', { snapshotWalBytes: 1 }));
    try {
      await db.query(addOne(0)); // its group makes a snapshot due: it starts, and hangs
      await eventually(() => snapshotsStarted === 1, 'the snapshot is uploading');
      const within10s = <T>(p: Promise<T>) => Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the write waited for the snapshot')), 10_000))]);
      for (let i = 1; i <= 3; i++) expect(await within10s(db.query(addOne(i)))).toEqual({ x: [{ $id: i }] });
      expect(snapshotsStarted, 'one snapshot at a time').toBe(1);
      // Released, it ends; the WAL uploaded past its cut makes one more due, which is taken.
      // Then, idle, nothing is due: no snapshot looks again and again (one once spun a core).
      const proto = ObjectWriter.prototype as unknown as { maybeSnapshot(): Promise<void> };
      const looks = vi.spyOn(proto, 'maybeSnapshot');
      release();
      await eventually(() => snapshotsStarted === 2, 'the next snapshot, of the writes made during the first');
      await new Promise((r) => setTimeout(r, 1_000));
      const idleLooks = looks.mock.calls.length;
      await new Promise((r) => setTimeout(r, 1_000));
      expect(looks.mock.calls.length - idleLooks, 'looks for a snapshot in an idle second').toBe(0);
      expect(snapshotsStarted).toBe(2);
    } finally {
      release();
      vi.restoreAllMocks();
      await db.close();
    }
    expect(await countOnReopen('snap-beside')).toEqual({ c: 4 });
  });

  it('a reader handle follows the writer (also past pruned WAL) and refuses writes; a second writer is refused', async () => {
    const writer = await openDatabase(s3Options('emb-follow', { snapshotWalBytes: 1 }));
    await writer.query(addOne(0));
    const reader = await openDatabase(s3Options('emb-follow', { mode: 'reader' }));
    expect(await reader.query(countAll)).toEqual({ c: 1 });
    // Each write snapshots and prunes: the reader is soon more than an interval behind.
    for (let i = 1; i < 6; i++) await writer.query(addOne(i));
    expect(await reader.query(countAll)).toEqual({ c: 6 });
    const refused = await reader.queryRaw(addOne(7));
    expect(refused.status).toBe(503);
    expect(refused.body).toContain('writer_mode_required');
    await expect(openDatabase(s3Options('emb-follow'))).rejects.toThrow(/locked by a writer: process \d+/);
    await writer.query(addOne(6), { awaitDurable: false });
    await writer.close();
    expect(await reader.query(countAll)).toEqual({ c: 7 });
    await reader.close();
  });
});

describe('object storage, indexes', () => {
  const poll = (operation_id: string) => ({ request_type: 'read', query: { read: { entries: [{ query: { name: 'op', root: { get_index_operation: { operation_id } } } }], returns: ['op'] } } });
  const byKPredicate = (k: number) => ({ and: { predicates: [
    { eq: { left: { property: '$label' }, right: { constant: { string: 'N' } } } },
    { eq: { left: { property: 'k' }, right: { constant: { i64: k } } } }] } });
  const byK = (k: number) => read([q('r', { id: { input: { nodes_where: { predicate: byKPredicate(k) } } } })], ['r']);
  it('the catalog and an active index survive a restart, and a following reader uses the index', async () => {
    let db = await openDatabase(s3Options('emb-index', { snapshotWalBytes: 2048 }));
    await db.query({ request_type: 'write', query: { write: { entries: Array.from({ length: 50 }, (_, i) => ({ query: { name: null, root: { add_n: { label: 'N', properties: [['k', { value: { i64: i % 5 } }]] } } } })), returns: [] } } });
    const receipt = await db.query({ request_type: 'write', query: { write: { entries: [{ query: { name: 'r', root: { create_index: { spec: { node_equality: { label: 'N', property: 'k' } }, if_not_exists: true } } } }], returns: ['r'] } } }) as { r: { operation_id: string } };
    for (let i = 0; (await db.query(poll(receipt.r.operation_id)) as { op: { status: string } }).op.status !== 'succeeded'; i++) {
      expect(i).toBeLessThan(500);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const reader = await openDatabase(s3Options('emb-index', { mode: 'reader' }));
    expect(await reader.query(byK(3))).toEqual({ r: [3, 8, 13, 18, 23, 28, 33, 38, 43, 48] });
    expect(reader.explain(byK(3))[0]!.access).toBe('index_eq');
    await db.close();
    await reader.close();
    db = await openDatabase(s3Options('emb-index'));
    expect(db.explain(byK(3))[0]!.access).toBe('index_eq');
    expect(await db.query(byK(4))).toEqual({ r: [4, 9, 14, 19, 24, 29, 34, 39, 44, 49] });
    expect((await db.query(poll(receipt.r.operation_id)) as { op: { status: string } }).op.status).toBe('succeeded');
    await db.close();
  });

  it('a vector index survives a restart with its graph from the snapshot, and a following reader searches it', async () => {
    const near = (x: number) => read([q('r', { vector_search_nodes: { label: 'V', property: 'v', query_vector: { value: { f32_array: [x, 0] } }, k: { literal: 2 } } })], ['r']);
    let db = await openDatabase(s3Options('emb-vector', { snapshotWalBytes: 4096 }));
    await db.query({ request_type: 'write', query: { write: { entries: Array.from({ length: 40 }, (_, i) => ({ query: { name: null, root: { add_n: { label: 'V', properties: [['v', { value: { f32_array: [i, 0] } }]] } } } })), returns: [] } } });
    const receipt = await db.query({ request_type: 'write', query: { write: { entries: [{ query: { name: 'r', root: { create_index: { spec: { node_vector: { label: 'V', property: 'v', dimension: 2, metric: 'euclidean' } }, if_not_exists: true } } } }], returns: ['r'] } } }) as { r: { operation_id: string } };
    for (let i = 0; (await db.query(poll(receipt.r.operation_id)) as { op: { status: string } }).op.status !== 'succeeded'; i++) {
      expect(i).toBeLessThan(500);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const reader = await openDatabase(s3Options('emb-vector', { mode: 'reader' }));
    expect(await reader.query(near(7.25))).toEqual({ r: [{ $distance: 0.0625, $id: 7 }, { $distance: 0.5625, $id: 8 }] });
    await db.close();
    await reader.close();
    db = await openDatabase(s3Options('emb-vector'));
    expect(await db.query(near(39))).toEqual({ r: [{ $distance: 0, $id: 39 }, { $distance: 1, $id: 38 }] });
    await db.close();
  });
});

describe('object storage, failures', () => {
  it('a writer removes objects torn by an interrupted upload and carries on from the whole history', async () => {
    let db = await openDatabase(s3Options('torn'));
    for (let i = 0; i < 3; i++) await db.query(addOne(i));
    await db.close(); // snapshot at epoch 4
    // What a writer killed mid-PUT can leave on a server whose PUTs are not atomic.
    const torn = ['torn/wal/0000000005-0000000007.log', 'torn/snapshots/0000000009.bin'];
    for (const Key of torn) await client.send(new PutObjectCommand({ Bucket: 'bucket', Key, Body: Buffer.from('SVCDB') }));
    db = await openDatabase(s3Options('torn'));
    expect(await db.query(countAll)).toEqual({ c: 3 });
    const layout = await keys('torn');
    for (const k of torn) expect(layout).not.toContain(k.slice('torn/'.length));
    expect(await db.query(addOne(3))).toEqual({ x: [{ $id: 3 }] });
    await db.close();
    db = await openDatabase(s3Options('torn'));
    expect(await db.query(countAll)).toEqual({ c: 4 });
    await db.close();
  });

  it('a whole newest snapshot that is damaged is gone around and kept aside, never removed; without the WAL to its epoch nothing opens', async () => {
    const flipMiddleByte = async (Key: string): Promise<void> => {
      const got = await client.send(new GetObjectCommand({ Bucket: 'bucket', Key }));
      const bytes = Buffer.from(await got.Body!.transformToByteArray());
      bytes[bytes.length >> 1] ^= 0x01;
      await client.send(new PutObjectCommand({ Bucket: 'bucket', Key, Body: bytes }));
    };
    const snapshotsOf = async (prefix: string) => (await keys(prefix)).filter((k) => /^snapshots\/\d{10}\.bin$/.test(k)).sort();
    for (const prefix of ['snapdmg', 'snapdmg-nowal', 'snapdmg-stuck']) {
      const db = await openDatabase(s3Options(prefix, { snapshotWalBytes: 1 }));
      for (let i = 0; i < 6; i++) await db.query(addOne(i));
      await db.close();
    }
    // The previous snapshot and the WAL reach the damaged one's epoch: it is gone around,
    // and kept under another name (the next snapshot of that epoch takes its key).
    const newest = (await snapshotsOf('snapdmg')).at(-1)!;
    await flipMiddleByte(`snapdmg/${newest}`);
    let db = await openDatabase(s3Options('snapdmg'));
    expect(await db.query(countAll)).toEqual({ c: 6 });
    const layout = await keys('snapdmg');
    expect(layout.filter((k) => k.startsWith(`${newest}.damaged-`))).toHaveLength(1);
    expect(await db.query(addOne(6))).toEqual({ x: [{ $id: 6 }] });
    await db.close();
    db = await openDatabase(s3Options('snapdmg'));
    expect(await db.query(countAll)).toEqual({ c: 7 });
    await db.close();

    // It cannot be moved aside (a copy is limited to 5 GB): the open still succeeds, the
    // damaged snapshot stays as it is, and no snapshot is written over it (a review).
    const stuck = (await snapshotsOf('snapdmg-stuck')).at(-1)!;
    await flipMiddleByte(`snapdmg-stuck/${stuck}`);
    const damagedBytes = Buffer.from(await (await client.send(new GetObjectCommand({ Bucket: 'bucket', Key: `snapdmg-stuck/${stuck}` }))).Body!.transformToByteArray());
    const copy = vi.spyOn(Bucket.prototype, 'copy').mockRejectedValue(new Error('EntityTooLarge'));
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      db = await openDatabase(s3Options('snapdmg-stuck'));
      expect(await db.query(countAll)).toEqual({ c: 6 });
      await db.close(); // its stop snapshot is of the damaged one's epoch: not taken
      const after = Buffer.from(await (await client.send(new GetObjectCommand({ Bucket: 'bucket', Key: `snapdmg-stuck/${stuck}` }))).Body!.transformToByteArray());
      expect(after.equals(damagedBytes)).toBe(true);
      db = await openDatabase(s3Options('snapdmg-stuck'));
      expect(await db.query(addOne(6))).toEqual({ x: [{ $id: 6 }] });
      await db.close(); // a later epoch: its snapshot has a key of its own
    } finally {
      copy.mockRestore();
      stderr.mockRestore();
    }
    db = await openDatabase(s3Options('snapdmg-stuck'));
    expect(await db.query(countAll)).toEqual({ c: 7 });
    await db.close();

    // Without the WAL after the previous snapshot (a snapshot makes the batches it holds
    // durable, before their WAL objects land), going around it would lose them: refused.
    const [previous, damaged] = (await snapshotsOf('snapdmg-nowal')).slice(-2);
    const previousEpoch = Number(/(\d{10})/.exec(previous!)![1]);
    const wal = (await keys('snapdmg-nowal')).filter((k) => k.startsWith('wal/') && Number(/-(\d{10})\.log$/.exec(k)![1]) > previousEpoch);
    expect(wal.length).toBeGreaterThan(0);
    await client.send(new DeleteObjectsCommand({ Bucket: 'bucket', Delete: { Objects: wal.map((k) => ({ Key: `snapdmg-nowal/${k}` })) } }));
    await flipMiddleByte(`snapdmg-nowal/${damaged}`);
    const before = await keys('snapdmg-nowal');
    await expect(openDatabase(s3Options('snapdmg-nowal'))).rejects.toThrow(/cannot recover s3:\/\/bucket\/snapdmg-nowal: the newest snapshot .* is damaged .* reaches epoch \d+ of its \d+; every object is kept/);
    expect((await keys('snapdmg-nowal')).filter((k) => k !== 'writer.lock')).toEqual(before.filter((k) => k !== 'writer.lock'));
  });

  /** Run `fn` with an endpoint whose GETs of keys under `part` answer half the body, with a Content-Length to match. */
  async function viaShortGets(part: string, fn: (endpointUrl: string) => Promise<void>): Promise<void> {
    const upstream = new URL(endpoint);
    const proxy = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c)).on('end', () => {
        const forward = httpRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (up) => {
          const body: Buffer[] = [];
          up.on('data', (c: Buffer) => body.push(c)).on('end', () => {
            let bytes = Buffer.concat(body);
            const headers = { ...up.headers };
            if (req.method === 'GET' && (req.url ?? '').includes(part) && up.statusCode === 200) {
              bytes = bytes.subarray(0, bytes.length >> 1);
              headers['content-length'] = String(bytes.length);
            }
            res.writeHead(up.statusCode ?? 502, headers);
            res.end(bytes);
          });
        });
        forward.end(Buffer.concat(chunks));
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      await fn(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}`);
    } finally {
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  }

  it('a WAL object that downloads shorter than its listing is a failed download, not a torn upload: nothing is removed', async () => {
    const server = await serve('shortget');
    expect((await post(server.url, addOne(0))).status).toBe(200);
    await server.stop('SIGKILL');
    await viaShortGets('/wal/', async (endpointUrl) => {
      await expect(openDatabase({ ...s3Options('shortget'), endpointUrl })).rejects.toThrow(/gave \d+ bytes, its listing says \d+/);
    });
    expect((await keys('shortget')).filter((k) => k.startsWith('wal/'))).not.toHaveLength(0);
    const db = await openDatabase(s3Options('shortget'));
    expect(await db.query(countAll)).toEqual({ c: 1 });
    await db.close();
  }, 60_000);

  it('a snapshot that downloads shorter than its listing is a failed download, not a torn upload: it is not deleted with the batches only it holds', async () => {
    let db = await openDatabase(s3Options('shortsnap', { snapshotWalBytes: 1 }));
    for (let i = 0; i < 6; i++) await db.query(addOne(i));
    await db.close();
    // The newest snapshot alone holds its batches (a snapshot makes them durable before
    // their WAL objects land): the WAL after the previous one is gone.
    const snapshots = (await keys('shortsnap')).filter((k) => /^snapshots\/\d{10}\.bin$/.test(k)).sort();
    const previousEpoch = Number(/(\d{10})/.exec(snapshots.at(-2)!)![1]);
    const wal = (await keys('shortsnap')).filter((k) => k.startsWith('wal/') && Number(/-(\d{10})\.log$/.exec(k)![1]) > previousEpoch);
    expect(wal.length).toBeGreaterThan(0);
    await client.send(new DeleteObjectsCommand({ Bucket: 'bucket', Delete: { Objects: wal.map((k) => ({ Key: `shortsnap/${k}` })) } }));
    const before = (await keys('shortsnap')).filter((k) => k !== 'writer.lock');
    await viaShortGets('/snapshots/', async (endpointUrl) => {
      await expect(openDatabase({ ...s3Options('shortsnap'), endpointUrl })).rejects.toThrow(/gave \d+ bytes, its listing says \d+/);
    });
    expect((await keys('shortsnap')).filter((k) => k !== 'writer.lock')).toEqual(before);
    expect(await countOnReopen('shortsnap')).toEqual({ c: 6 });
  }, 60_000);

  it('a WAL upload whose bytes change on the way is refused by a server that checks Content-MD5, retried, and stored whole', async () => {
    // A proxy that flips one byte of the first WAL object's body and then checks
    // Content-MD5 as S3 does (400 BadDigest on a mismatch, no check without the header).
    const upstream = new URL(endpoint);
    let flipped = 0, refused = 0;
    const proxy = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c)).on('end', () => {
        const body = Buffer.concat(chunks);
        if (req.method === 'PUT' && (req.url ?? '').includes('/wal/') && flipped === 0 && body.length > 0) {
          body[body.length - 3] ^= 0x10;
          flipped++;
        }
        const md5 = req.headers['content-md5'];
        if (typeof md5 === 'string' && createHash('md5').update(body).digest('base64') !== md5) {
          refused++;
          res.writeHead(400, { 'content-type': 'application/xml' });
          res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>BadDigest</Code><Message>The Content-MD5 you specified did not match what we received.</Message></Error>');
          return;
        }
        const forward = httpRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        });
        forward.end(body);
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      const viaProxy = { ...s3Options('md5'), endpointUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}` };
      const db = await openDatabase(viaProxy);
      for (let i = 0; i < 3; i++) await db.query(addOne(i));
      await db.close();
    } finally {
      stderr.mockRestore();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
    expect(flipped).toBe(1);
    expect(refused).toBe(1);
    const db = await openDatabase(s3Options('md5'));
    expect(await db.query(countAll)).toEqual({ c: 3 });
    await db.close();
  }, 60_000);

  it('a torn WAL object that is not the newest stops recovery with storage_error', async () => {
    let db = await openDatabase(s3Options('torn-mid'));
    await db.query(addOne(0));
    await db.close();
    await client.send(new PutObjectCommand({ Bucket: 'bucket', Key: 'torn-mid/wal/0000000003-0000000003.log', Body: Buffer.from('SVCDBWAL') }));
    db = await openDatabase(s3Options('torn-mid'));
    await db.query(addOne(1));
    await db.close();
    // The writer removed the torn object; a damaged object in the middle is another story.
    await client.send(new PutObjectCommand({ Bucket: 'bucket', Key: 'torn-mid/wal/0000000004-0000000004.log', Body: Buffer.from('SVCDBWAL') }));
    await client.send(new PutObjectCommand({ Bucket: 'bucket', Key: 'torn-mid/wal/0000000005-0000000005.log', Body: Buffer.from('SVCDBWAL') }));
    await expect(openDatabase(s3Options('torn-mid'))).rejects.toThrow(/cannot recover s3:\/\/bucket\/torn-mid: .*does not hold the epochs/);
  });

  it('a damaged (not cut short) newest WAL object is refused, named, and kept', async () => {
    let db = await openDatabase(s3Options('rot'));
    await db.query(addOne(0));
    await db.close();
    const snapshot = (await keys('rot')).filter((k) => k.startsWith('snapshots/')).at(-1)!;
    const epoch = Number(/(\d{10})\.bin$/.exec(snapshot)![1]);
    const key = `wal/${String(epoch + 1).padStart(10, '0')}-${String(epoch + 1).padStart(10, '0')}.log`;
    const body = Buffer.concat([segmentHeader(epoch + 1), encodeFrame({ epoch: epoch + 1, nodeSlots: 1, edgeSlots: 0, names: [], ops: [] })]);
    body[body.length - 9] ^= 0x20; // inside the payload: the object is whole, its frame fails its checksum
    await client.send(new PutObjectCommand({ Bucket: 'bucket', Key: `rot/${key}`, Body: body }));
    await expect(openDatabase(s3Options('rot'))).rejects.toThrow(new RegExp(`s3://bucket/rot/${key.replace(/\./g, '\\.')} is corrupt at byte 32`));
    expect(await keys('rot')).toContain(key);
  });

  it('two WAL objects that share epochs are two histories: refused, both named, every object kept', async () => {
    const db = await openDatabase(s3Options('twohist'));
    await db.query(addOne(0));
    await db.close();
    const snapshot = (await keys('twohist')).filter((k) => k.startsWith('snapshots/')).at(-1)!;
    const epoch = Number(/(\d{10})\.bin$/.exec(snapshot)![1]);
    // One writer's group of epoch + 1, and another's of epoch + 1 and + 2 (an upload that
    // landed after a takeover): replayed, the second history's epoch + 2 followed the first's.
    const frame = (e: number, nodeSlots: number) => encodeFrame({ epoch: e, nodeSlots, edgeSlots: 0, names: [], ops: [] });
    const ours = `wal/${pad(epoch + 1)}-${pad(epoch + 1)}.log`;
    const theirs = `wal/${pad(epoch + 1)}-${pad(epoch + 2)}.log`;
    await client.send(new PutObjectCommand({ Bucket: 'bucket', Key: `twohist/${ours}`, Body: Buffer.concat([segmentHeader(epoch + 1), frame(epoch + 1, 1)]) }));
    await client.send(new PutObjectCommand({ Bucket: 'bucket', Key: `twohist/${theirs}`, Body: Buffer.concat([segmentHeader(epoch + 1), frame(epoch + 1, 7), frame(epoch + 2, 9)]) }));
    const before = (await keys('twohist')).filter((k) => k !== 'writer.lock');
    await expect(openDatabase(s3Options('twohist'))).rejects.toThrow(
      `cannot recover s3://bucket/twohist: two WAL histories: s3://bucket/twohist/${theirs} holds epochs of s3://bucket/twohist/${ours}`);
    await expect(ObjectFollower.open(s3Options('twohist') as never)).rejects.toThrow(/two WAL histories/);
    expect((await keys('twohist')).filter((k) => k !== 'writer.lock')).toEqual(before);
  });

  /**
   * A writer (lease 900 ms) whose next WAL PUT ends after the lease ran out, its renewals
   * failing meanwhile; `during` runs while that PUT hangs. Returns the write's answer
   * promise, the writer and a function that lets renewals through again.
   */
  async function uploadPastTheLease(prefix: string, during: () => Promise<void>) {
    const writer = await ObjectWriter.open({ uri: `s3://bucket/${prefix}`, endpointUrl: endpoint, region: 'us-east-1', credentials }, { ...defaultObjectWriterOptions, leaseMs: 900 });
    const lockProto = Object.getPrototypeOf((writer as unknown as { lock: object }).lock) as { renew(): Promise<void> };
    const writerProto = ObjectWriter.prototype as unknown as { putImmutable(key: string, body: Uint8Array): Promise<string> };
    expect((await writeThrough(writer, pairBatch(0))).status).toBe(200);
    const renew = lockProto.renew;
    let renewals = false;
    vi.spyOn(lockProto, 'renew').mockImplementation(function (this: unknown) { return renewals ? renew.call(this) : Promise.resolve(); });
    const put = writerProto.putImmutable;
    let delayed = 0;
    vi.spyOn(writerProto, 'putImmutable').mockImplementation(async function (this: unknown, key: string, body: Uint8Array) {
      if (delayed++ === 0) {
        await new Promise((r) => setTimeout(r, 1_200));
        await during();
      }
      return put.call(this, key, body);
    });
    const answer = writeThrough(writer, pairBatch(1));
    return { writer, answer, letRenewalsThrough: () => { renewals = true; } };
  }

  it('a WAL group whose upload ends after the lease ran out waits until the lock is confirmed ours, then is acknowledged', async () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const { writer, answer, letRenewalsThrough } = await uploadPastTheLease('lapse-kept', async () => undefined);
    try {
      let settled = false;
      void answer.then(() => { settled = true; });
      await eventually(() => writer.health().ready === false, 'not ready while the lock cannot be confirmed');
      expect(writer.health().problem).toContain('was uploaded after the writer lock\'s lease ran out');
      await new Promise((r) => setTimeout(r, 500));
      expect(settled, 'not acknowledged while the lock cannot be confirmed').toBe(false);
      letRenewalsThrough(); // nobody took the lock: the renewal finds it ours
      expect((await answer).status).toBe(200);
      await eventually(() => writer.health().ready, 'ready again');
    } finally {
      vi.restoreAllMocks();
      stderr.mockRestore();
      await writer.close().catch(() => undefined);
    }
    expect(await countOnReopen('lapse-kept')).toEqual({ c: 4 });
  }, 30_000);

  it('a WAL group whose upload ends after another writer took the lock is not acknowledged: fenced, 409 outcome unknown', async () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    // While the PUT hangs and renewals fail, the lease runs out and a successor takes the
    // lock; then renewals get through again, and the first one reads the successor's id.
    let renewalsBack = () => undefined as void;
    const takeOver = async () => {
      const successor = { id: 'successor', pid: 1, host: 'elsewhere', since: new Date().toISOString() };
      await client.send(new PutObjectCommand({ Bucket: 'bucket', Key: 'lapse-taken/writer.lock', Body: JSON.stringify(successor) }));
      renewalsBack();
    };
    const { writer, answer, letRenewalsThrough } = await uploadPastTheLease('lapse-taken', takeOver);
    renewalsBack = letRenewalsThrough;
    try {
      const answered = await answer;
      expect(answered.status).toBe(409);
      expect(JSON.parse(answered.body)).toMatchObject({ error: 'writer_fenced_commit_outcome_unknown' });
      expect(answered.body).toContain('taken over by process 1 on elsewhere');
    } finally {
      vi.restoreAllMocks();
      stderr.mockRestore();
      await writer.close().catch(() => undefined);
    }
  }, 30_000);

  it('an outage of 1.5-4 s under a write load: not ready during it, ready after, no restart needed; 200s durable, errors absent', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svcdb-s3rver-down-'));
    let { server: own, port } = await startS3rver(dir);
    const storage = { uri: 's3://bucket/outage', endpointUrl: `http://127.0.0.1:${port}`, region: 'us-east-1', credentials };
    const logged: string[] = [];
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      logged.push(String(chunk));
      return true;
    });
    const writer = await ObjectWriter.open(storage, { ...defaultObjectWriterOptions, snapshotWalBytes: 20_000 });
    const changes: StorageHealth[] = [];
    writer.onHealthChange((h) => changes.push(h));
    const answers = new Map<number, { status: number; body: string; startedAt: number; answeredAt: number }>();
    let next = 0;
    let stopAt = Infinity;
    let measured = '';
    try {
      // Open loop, as many clients would send: a write every 4 ms whatever the answers so far.
      const inFlight: Promise<void>[] = [];
      const load = (async () => {
        while (Date.now() < stopAt) {
          const k = next++;
          const startedAt = Date.now();
          inFlight.push(writeThrough(writer, pairBatch(k)).then((res) => { answers.set(k, { ...res, startedAt, answeredAt: Date.now() }); }));
          await new Promise((r) => setTimeout(r, 4));
        }
        await Promise.all(inFlight);
      })();
      await new Promise((r) => setTimeout(r, 300));
      expect(writer.health()).toEqual({ ready: true, problem: null });
      const outageMs = 1500 + Math.random() * 2500;
      const downAt = Date.now();
      await killS3rver(own);
      let sawNotReady = false;
      while (Date.now() - downAt < outageMs) {
        if (!writer.health().ready) sawNotReady = true;
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(sawNotReady, 'the writer reported not ready during the outage').toBe(true);
      expect(writer.health().problem).toMatch(/ECONNREFUSED|failed/);
      ({ server: own } = await startS3rver(dir, port));
      const upAt = Date.now();
      await eventually(async () => writer.health().ready, 'the writer is ready again', { timeoutMs: 10_000 });
      const readyAfterMs = Date.now() - upAt;
      // Writes taken again: some started after recovery and were answered 200.
      const before = next;
      await eventually(async () => [...answers].some(([k, a]) => k >= before && a.status === 200), 'a new write succeeds', { timeoutMs: 10_000 });
      stopAt = Date.now() + 200;
      await load;
      measured = `outage ${Math.round(outageMs)} ms, ready ${readyAfterMs} ms after restart, ${answers.size} writes`;

      const ok = [...answers].filter(([, a]) => a.status === 200).map(([k]) => k);
      const refused = [...answers].filter(([, a]) => a.status !== 200);
      for (const [k, a] of refused) {
        expect(a.status, `write ${k}: ${a.body}`).toBe(500);
        expect(JSON.parse(a.body).error, `write ${k}`).toBe('storage_error');
        expect(JSON.parse(a.body).msg, `write ${k}`).toMatch(/storage unavailable .*the write was not applied/);
      }
      expect(refused.length, 'writes during the outage were refused').toBeGreaterThan(0);
      // Writes pending when storage went away waited through the outage and then succeeded.
      expect([...answers.values()].some((a) => a.status === 200 && a.startedAt < downAt + 200 && a.answeredAt > upAt)).toBe(true);
      // One line when it went down, one when it came back: no line per retry.
      expect(logged.filter((l) => /upload to s3:\/\/bucket\/outage failed/.test(l)).length).toBe(1);
      expect(logged.filter((l) => /answers again after \d+ failed upload attempts/.test(l)).length).toBe(1);
      expect(changes.some((h) => !h.ready)).toBe(true);
      expect(changes.at(-1)).toEqual({ ready: true, problem: null });
      expect(writer.durableEpoch).toBe(writer.store.committedEpoch());
      expect(writer.store.visibleEpoch()).toBe(writer.durableEpoch);
      await writer.close();

      // After a restart: exactly the writes answered 200, each whole.
      const db = await openDatabase({ storage: 's3', ...storage });
      const { k, e } = await db.query(pairAudit) as { k: { k: number }[]; e: number };
      await db.close();
      const perBatch = new Map<number, number>();
      for (const row of k) perBatch.set(row.k, (perBatch.get(row.k) ?? 0) + 1);
      for (const [b, n] of perBatch) expect(n, `batch ${b} is partly present`).toBe(2);
      expect(e).toBe(perBatch.size);
      expect([...perBatch.keys()].sort((a, b) => a - b)).toEqual(ok.sort((a, b) => a - b));
    } finally {
      stopAt = 0;
      stderr.mockRestore();
      if (measured !== '') console.log(measured);
      await writer.close();
      await own.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('an outage longer than the lease: the writer keeps its lock if nobody took it, and is fenced (409 outcome unknown) if someone did', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svcdb-s3rver-lease-'));
    let { server: first, port } = await startS3rver(dir);
    const at = (p: number, prefix: string) => ({ uri: `s3://bucket/${prefix}`, endpointUrl: `http://127.0.0.1:${p}`, region: 'us-east-1', credentials });
    const lease = { ...defaultObjectWriterOptions, leaseMs: 900 };
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    let second: S3rverInstance | null = null;
    try {
      // Nobody took it: after the outage the writer renews its own lock and goes on.
      const keeper = await ObjectWriter.open(at(port, 'lease-keep'), lease);
      expect((await writeThrough(keeper, pairBatch(0))).status).toBe(200);
      await killS3rver(first);
      const waiting = writeThrough(keeper, pairBatch(1));
      await new Promise((r) => setTimeout(r, 1500));
      ({ server: first } = await startS3rver(dir, port));
      expect((await waiting).status).toBe(200);
      expect((await writeThrough(keeper, pairBatch(2))).status).toBe(200);
      expect(keeper.health().ready).toBe(true);
      await keeper.close();

      // Someone did: a second writer reaches the bucket through another endpoint while the
      // first is cut off, and takes the expired lock over.
      const old = await ObjectWriter.open(at(port, 'lease-fence'), lease);
      expect((await writeThrough(old, pairBatch(0))).status).toBe(200);
      await killS3rver(first);
      const stranded = writeThrough(old, pairBatch(1));
      await new Promise((r) => setTimeout(r, 1200));
      const other = await startS3rver(dir);
      second = other.server;
      const successor = await ObjectWriter.open(at(other.port, 'lease-fence'), lease);
      expect((await writeThrough(successor, pairBatch(100))).status).toBe(200);
      ({ server: first } = await startS3rver(dir, port));
      const res = await stranded;
      expect(res.status).toBe(409);
      expect(JSON.parse(res.body).error).toBe('writer_fenced_commit_outcome_unknown');
      expect(old.health().ready).toBe(false);
      expect(old.health().problem).toMatch(/lost the writer lock .*taken over by process/);
      expect((await writeThrough(old, pairBatch(2))).status).toBe(500);
      await old.close();
      await successor.close();
      const db = await openDatabase({ storage: 's3', ...at(port, 'lease-fence') });
      const { k } = await db.query(pairAudit) as { k: { k: number }[] };
      await db.close();
      expect(k.map((r) => r.k).sort((a, b) => a - b)).toEqual([0, 0, 100, 100]);
    } finally {
      stderr.mockRestore();
      await first.close().catch(() => undefined);
      await second?.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('close() during an outage answers the waiting writes writer_fenced_commit_outcome_unknown, never a failure', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svcdb-s3rver-close-'));
    const { server: own, port } = await startS3rver(dir);
    const storage = { uri: 's3://bucket/close-down', endpointUrl: `http://127.0.0.1:${port}`, region: 'us-east-1', credentials };
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      const writer = await ObjectWriter.open(storage);
      expect((await writeThrough(writer, pairBatch(0))).status).toBe(200);
      await killS3rver(own);
      const pending = writeThrough(writer, pairBatch(1));
      await eventually(async () => !writer.health().ready, 'the writer notices the outage');
      const refused = await writeThrough(writer, pairBatch(2));
      expect(refused.status).toBe(500);
      expect(JSON.parse(refused.body).msg).toMatch(/the write was not applied/);
      // Still waiting: a retry may land it.
      const raced = await Promise.race([pending, new Promise((r) => setTimeout(() => r('waiting'), 300))]);
      expect(raced).toBe('waiting');
      await writer.close();
      const res = await pending;
      expect(res.status).toBe(409);
      expect(JSON.parse(res.body).error).toBe('writer_fenced_commit_outcome_unknown');
      // Never published: readers of this store did not see the undurable batch.
      expect(writer.store.visibleEpoch()).toBe(writer.durableEpoch);
      expect(writer.store.committedEpoch()).toBeGreaterThan(writer.durableEpoch);
    } finally {
      stderr.mockRestore();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('object storage, large objects, staging and followers', () => {
  it('a snapshot over the part threshold goes up as a multipart upload and loads back exactly', async () => {
    const sent: string[] = [];
    const send = vi.spyOn(S3Client.prototype, 'send').mockImplementation(function (this: S3Client, command: unknown, ...rest: unknown[]) {
      sent.push((command as { constructor: { name: string } }).constructor.name);
      return (originalSend as (...args: unknown[]) => unknown).call(this, command, ...rest);
    } as never);
    const storage = { uri: 's3://bucket/multipart', endpointUrl: endpoint, region: 'us-east-1', credentials };
    try {
      const writer = await ObjectWriter.open({ ...storage, multipartThresholdBytes: 4096, multipartPartBytes: 4096 });
      for (let i = 0; i < 20; i++) expect((await writeThrough(writer, pairBatch(i))).status).toBe(200);
      await writer.close(); // snapshot at close
    } finally {
      send.mockRestore();
    }
    const parts = sent.filter((n) => n === 'UploadPartCommand').length;
    expect(sent).toContain('CreateMultipartUploadCommand');
    expect(sent).toContain('CompleteMultipartUploadCommand');
    expect(parts, 'the snapshot spans several parts').toBeGreaterThanOrEqual(2);
    const snaps = (await keys('multipart')).filter((k) => k.startsWith('snapshots/'));
    expect(snaps).toHaveLength(1);
    const head = await client.send(new HeadObjectCommand({ Bucket: 'bucket', Key: `multipart/${snaps[0]}` }));
    expect(head.ContentLength!).toBeGreaterThan(4096 * (parts - 1));

    const again = await ObjectWriter.open(storage);
    try {
      expect(again.report.snapshotEpoch).toBe(Number(/\d{10}/.exec(snaps[0]!)![0]));
      expect(again.report.replayedBatches).toBe(0);
      const audit = executeRequest(again.store, JSON.stringify(pairAudit), { warm: null, requireWriter: null, awaitDurable: null }, 'writer');
      const { k, e } = JSON.parse((audit as { body: string }).body) as { k: { k: number }[]; e: number };
      expect(e).toBe(20);
      expect(k.map((r) => r.k).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => [i, i]).flat());
    } finally {
      await again.close();
    }
  });

  it('staging dirs carry the pid; those of dead processes are removed at open, live ones kept', async () => {
    const deadPid = await new Promise<number>((resolve) => {
      const child = spawn(process.execPath, ['-e', '']);
      child.once('exit', () => resolve(child.pid!));
    });
    const dead = join(tmpdir(), `svcdb-s3-${deadPid}-leftover`);
    const live = join(tmpdir(), `svcdb-s3-${process.pid}-keep`);
    for (const d of [dead, live]) {
      mkdirSync(d, { recursive: true });
      writeFileSync(join(d, 'download-x.bin'), 'staged');
    }
    const mine = () => readdirSync(tmpdir()).filter((n) => n.startsWith(`svcdb-s3-${process.pid}-`) && n !== `svcdb-s3-${process.pid}-keep`);
    const before = mine().length;
    const writer = await ObjectWriter.open({ uri: 's3://bucket/staging', endpointUrl: endpoint, region: 'us-east-1', credentials });
    try {
      expect(existsSync(dead), 'the dead process\'s staging dir is removed').toBe(false);
      expect(existsSync(live), 'a live process\'s staging dir is kept').toBe(true);
      expect(mine().length, 'the writer stages in svcdb-s3-<pid>-*').toBe(before + 1);
    } finally {
      await writer.close();
      rmSync(live, { recursive: true, force: true });
    }
    expect(mine().length).toBe(before);
  });

  it('a follower reports not ready at a damaged WAL object, and at one cut short that newer ones follow; a new one opened there too', async () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      for (const damage of ['flip', 'cut'] as const) {
        const prefix = `follow-${damage}`;
        const storage = { uri: `s3://bucket/${prefix}`, endpointUrl: endpoint, region: 'us-east-1', credentials };
        const writer = await ObjectWriter.open(storage);
        for (let i = 0; i < 3; i++) expect((await writeThrough(writer, pairBatch(i))).status).toBe(200);
        const follower = await ObjectFollower.open(storage);
        try {
          const epoch = follower.store.committedEpoch();
          for (let i = 3; i < 5; i++) expect((await writeThrough(writer, pairBatch(i))).status).toBe(200);
          await writer.sync();
          const wal = (await keys(prefix)).filter((k) => k.startsWith('wal/')).sort();
          const next = wal.find((k) => Number(/^wal\/(\d{10})-/.exec(k)![1]) === epoch + 1)!;
          const Key = `${prefix}/${next}`;
          const bytes = Buffer.from(await (await client.send(new GetObjectCommand({ Bucket: 'bucket', Key }))).Body!.transformToByteArray());
          if (damage === 'flip') bytes[bytes.length - 5] ^= 0x01;
          await client.send(new PutObjectCommand({ Bucket: 'bucket', Key, Body: damage === 'flip' ? bytes : bytes.subarray(0, bytes.length - 30) }));
          await follower.refresh().catch(() => false);
          expect(follower.store.committedEpoch(), damage).toBe(epoch);
          expect(follower.health().ready, damage).toBe(false);
          expect(follower.health().problem, damage).toContain(next);
          if (damage === 'cut') {
            const opened = await ObjectFollower.open(storage);
            try {
              expect(opened.health().ready).toBe(false);
              expect(opened.health().problem).toContain(next);
            } finally {
              opened.close();
            }
          }
        } finally {
          follower.close();
          await writer.close().catch(() => undefined);
        }
      }
    } finally {
      stderr.mockRestore();
    }
  });

  it('a follower stops at a batch it cannot apply: keeps its epoch, reports not ready once, never applies past it', async () => {
    const storage = { uri: 's3://bucket/stuck', endpointUrl: endpoint, region: 'us-east-1', credentials };
    const writer = await ObjectWriter.open(storage);
    for (let i = 0; i < 3; i++) expect((await writeThrough(writer, pairBatch(i))).status).toBe(200);
    await writer.close();
    const logged: string[] = [];
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      logged.push(String(chunk));
      return true;
    });
    const follower = await ObjectFollower.open(storage);
    try {
      const changes: boolean[] = [];
      follower.onHealthChange((h) => changes.push(h.ready));
      const epoch = follower.store.committedEpoch();
      const visible = follower.store.visibleEpoch();
      const walObject = async (e: number, batch: RedoBatch) => {
        const body = Buffer.concat([segmentHeader(e), encodeFrame(batch)]);
        await client.send(new PutObjectCommand({ Bucket: 'bucket', Key: `stuck/wal/${pad(e)}-${pad(e)}.log`, Body: body }));
      };
      const empty = (e: number): RedoBatch => ({ epoch: e, nodeSlots: 0, edgeSlots: 0, names: [], ops: [] });
      // A dictionary id the store cannot give: applyRedo throws mid-batch.
      await walObject(epoch + 1, { ...empty(epoch + 1), names: [[999, 'bogus']] });
      await walObject(epoch + 2, empty(epoch + 2));
      for (let i = 0; i < 3; i++) expect(await follower.refresh()).toBe(false);
      expect(follower.store.committedEpoch(), 'nothing past the bad batch is applied').toBe(epoch);
      expect(follower.store.visibleEpoch()).toBe(visible);
      expect(follower.health().ready).toBe(false);
      expect(follower.health().problem).toMatch(/stopped following s3:\/\/bucket\/stuck at epoch \d+: a batch of .*0000000\d+-\d+\.log cannot be applied: .*dictionary id 999 \(`bogus`\) does not line up/);
      expect(logged.filter((l) => /stopped following/.test(l)).length, 'logged once').toBe(1);
      // Reads still answer from the last good epoch.
      const res = executeRequest(follower.store, JSON.stringify(countAll), { warm: null, requireWriter: null, awaitDurable: null }, 'replica');
      expect(JSON.parse((res as { body: string }).body)).toEqual({ c: 6 });
      // Once the batch is fixed, a refresh resumes from exactly there.
      await walObject(epoch + 1, empty(epoch + 1));
      expect(await follower.refresh()).toBe(false);
      expect(follower.store.committedEpoch()).toBe(epoch + 2);
      expect(follower.health()).toEqual({ ready: true, problem: null });
      expect(changes).toEqual([false, true]);
    } finally {
      stderr.mockRestore();
      follower.close();
    }
  });
});

// ---------------------------------------------------------------- servers

describe('svc serve --storage-uri', () => {
  const batch = (k: number) => write([
    q('a', addN('B', [['k', i64(k)]])),
    q('b', addN('B', [['k', i64(k)]])),
    q(null, { add_e: { input: { nodes: { reference: { var: 'a' } } }, label: 'PAIR', to: { var: 'b' }, properties: [] } }),
  ], []);
  const audit = read([
    q('k', { values: { input: nodes('all'), properties: ['k'] } }),
    q('e', count({ edges: { reference: 'all' } })),
  ], ['k', 'e']);

  const rounds = Number(process.env['SVCDB_S3_SOAK_ROUNDS'] ?? 4);
  it(`keeps every acknowledged batch whole over ${rounds} kills -9 during a concurrent write load`, async () => {
    const acknowledged = new Set<number>();
    let next = 0;
    for (let round = 0; round < rounds; round++) {
      // Small snapshots on odd rounds, so kills also land around snapshot uploads and pruning.
      const server = await serve('crash', round % 2 === 1 ? ['--snapshot-wal-bytes', '2000'] : []);
      const stopAt = Date.now() + 200 + Math.random() * 300;
      const load = Array.from({ length: 8 }, async () => {
        while (Date.now() < stopAt + 100) {
          const k = next++;
          try {
            const res = await post(server.url, batch(k));
            if (res.status === 200) acknowledged.add(k);
          } catch {
            return; // the server is gone
          }
        }
      });
      await new Promise((r) => setTimeout(r, Math.max(0, stopAt - Date.now())));
      await server.stop('SIGKILL');
      await Promise.all(load);
      const check = await serve('crash');
      const res = await post(check.url, audit);
      expect(await check.stop()).toBe(0);
      expect(res.status, res.body).toBe(200);
      const { k, e } = JSON.parse(res.body) as { k: { k: number }[]; e: number };
      const perBatch = new Map<number, number>();
      for (const row of k) perBatch.set(row.k, (perBatch.get(row.k) ?? 0) + 1);
      for (const [b, n] of perBatch) expect(n, `batch ${b} is partly present`).toBe(2);
      expect(e).toBe(perBatch.size);
      for (const b of acknowledged) expect(perBatch.has(b), `acknowledged batch ${b} is missing after round ${round}`).toBe(true);
    }
    expect(acknowledged.size).toBeGreaterThan(rounds * 8);
  }, 30_000 + rounds * 6_000);

  it('a reader server follows a writer server, reloads past pruned WAL, and refuses writes with 503', async () => {
    const writer = await serve('follow', ['--snapshot-wal-bytes', '1']);
    const fast = await serve('follow', ['--mode', 'reader', '--refresh-ms', '100', '--readers', '2']);
    // Its first poll comes after the writes below: by then the WAL it needs is pruned.
    const slow = await serve('follow', ['--mode', 'reader', '--refresh-ms', '4000']);
    const walObjects = async (): Promise<string[]> => (await keys('follow')).filter((key) => key.startsWith('wal/'));
    try {
      let neededBySlow: string[] = [];
      for (let i = 0; i < 5; i++) {
        expect((await post(writer.url, addOne(i))).status).toBe(200);
        if (i === 0) neededBySlow = await walObjects(); // the first write's WAL, which the slow reader has not read
      }
      // On a busy machine a snapshot's pruning can lag the writes: wait for it (the slow
      // reader must find that WAL gone, not read it).
      expect(neededBySlow.length).toBeGreaterThan(0);
      await eventually(async () => !(await walObjects()).some((key) => neededBySlow.includes(key)), 'the first write\'s WAL is pruned');
      await eventually(async () => (await countOn(fast.url)) === 5, 'the fast reader sees 5 nodes');
      await eventually(async () => (await countOn(slow.url)) === 5, 'the slow reader sees 5 nodes');
      expect(slow.stderr()).toMatch(/reloaded from snapshot/);

      for (const r of [fast, slow]) {
        const health = await fetch(`${r.url}/healthz`);
        expect(await health.json()).toEqual({ index_runtime: 'ready', mode: 'reader', ready: true, storage: 'ok' });
        const ready = await fetch(`${r.url}/readyz`);
        expect(ready.status).toBe(200);
        expect(await ready.text()).toContain('"mode":"reader"');
        const w = await post(r.url, addOne(9));
        expect(w.status).toBe(503);
        expect(JSON.parse(w.body).error).toBe('writer_mode_required');
        const pinned = await post(r.url, countAll, { 'x-svc-require-writer': 'true' });
        expect(pinned.status).toBe(503);
        expect(JSON.parse(pinned.body)).toEqual({ error: 'invalid_request_option', msg: 'request requires a writer but this server is read-only' });
      }
      // Still following after the swap.
      expect((await post(writer.url, addOne(5))).status).toBe(200);
      await eventually(async () => (await countOn(fast.url)) === 6, 'the fast reader sees 6 nodes');
    } finally {
      await Promise.all([fast.stop(), slow.stop(), writer.stop()]);
    }
  });

  it('refuses a second writer on the same prefix while the first runs, and takes over after it stops', async () => {
    const first = await serve('lock');
    try {
      await expect(serve('lock')).rejects.toThrow(/locked by a writer: process \d+ on/);
    } finally {
      expect(await first.stop()).toBe(0);
    }
    const second = await serve('lock');
    expect(await second.stop()).toBe(0);
  });
});

describe('svc serve --mode reader --disk', () => {
  it('follows a disk writer server in the same directory, also across a snapshot that replaced its segments', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svcdb-follow-'));
    const writer = await spawnServe(['--disk', dir, '--snapshot-wal-bytes', '1']);
    const fast = await spawnServe(['--disk', dir, '--mode', 'reader', '--refresh-ms', '50']);
    // Its first refresh comes 6 s after it opened: by then the segments it read are pruned.
    const slow = await spawnServe(['--disk', dir, '--mode', 'reader', '--refresh-ms', '6000']);
    const walSegments = (): string[] => readdirSync(dir).filter((name) => /^wal-\d{10}\.log$/.test(name));
    const readBySlow = walSegments();
    try {
      for (let i = 0; i < 4; i++) {
        expect((await post(writer.url, addOne(i))).status).toBe(200);
        await new Promise((r) => setTimeout(r, 150)); // each snapshot (on its own thread) finishes, so older segments get pruned
      }
      // On a busy machine a snapshot's pruning can lag the writes: wait for it (the slow
      // reader must find its segments gone, not read them).
      await eventually(() => !walSegments().some((name) => readBySlow.includes(name)), 'the segments the slow reader opened on are pruned');
      await eventually(async () => (await countOn(fast.url)) === 4, 'the fast disk reader sees 4 nodes');
      await eventually(async () => (await countOn(slow.url)) === 4, 'the slow disk reader sees 4 nodes');
      expect(slow.stderr()).toMatch(/reloaded from snapshot/);
      expect((await post(fast.url, addOne(9))).status).toBe(503);
      expect(await (await fetch(`${fast.url}/readyz`)).json()).toEqual({ index_runtime: 'ready', mode: 'reader', ready: true, storage: 'ok' });
    } finally {
      await Promise.all([fast.stop(), slow.stop(), writer.stop()]);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
