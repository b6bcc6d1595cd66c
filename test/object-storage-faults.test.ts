// Local faults of object storage: a full staging disk (node:fs mocked) and snapshot writes
// failing on the snapshot thread (snapshotFaults):
// a snapshot download that fails is not evidence against the snapshot (the open fails with
// storage_error and every object stays), a snapshot that cannot be written is retried
// with backoff while the writer stays ready, and an uploaded snapshot is read back and
// verified before anything older is deleted (Bucket.putFile spied to store damaged bytes).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { ObjectWriter } from '../src/durability/object-storage.js';
import { Bucket } from '../src/durability/object-bucket.js';
import { limits } from '../src/limits.js';
import { snapshotFaults } from '../src/durability/snapshot.js';
import { executeRequest } from '../src/exec/request.js';
import { addN, count, i64, nodes, q, read, write } from './helpers/requests.js';
import { s3Credentials, startS3rver, type S3rverInstance } from './helpers/s3rver.js';

/**
 * failAfterBytes: staging writes of downloaded snapshots fail after this many bytes (null: off).
 */
const fault = { failAfterBytes: null as number | null };

vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  const createWriteStream = ((path: string, options?: unknown) => {
    const failAfter = fault.failAfterBytes;
    if (failAfter === null || !/download-[^/]*\.bin$/.test(String(path))) return fs.createWriteStream(path, options as never);
    let written = 0;
    const stream = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        written += chunk.byteLength;
        if (written > failAfter) {
          callback(Object.assign(new Error(`ENOSPC: no space left on device, write`), { code: 'ENOSPC' }));
          return;
        }
        callback();
      },
    });
    return Object.assign(stream, { bytesWritten: 0 });
  }) as typeof fs.createWriteStream;
  return { ...fs, default: { ...fs, createWriteStream }, createWriteStream };
});

let s3: S3rverInstance;
let client: S3Client;
let endpoint = '';
const dataDir = mkdtempSync(join(tmpdir(), 'svcdb-s3rver-dl-'));

beforeAll(async () => {
  const started = await startS3rver(dataDir);
  s3 = started.server;
  endpoint = `http://127.0.0.1:${started.port}`;
  process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';
  client = new S3Client({
    endpoint, region: 'us-east-1', forcePathStyle: true, credentials: s3Credentials,
    requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED',
  });
});

afterAll(async () => {
  client?.destroy();
  await s3?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const flags = { warm: null, requireWriter: null, awaitDurable: null };
const countAll = read([q('c', count(nodes('all')))], ['c']);

async function snapshotKeys(prefix: string): Promise<string[]> {
  const out = await client.send(new ListObjectsV2Command({ Bucket: 'bucket', Prefix: `${prefix}/snapshots/` }));
  return (out.Contents ?? []).map((o) => o.Key!).sort();
}

it('a snapshot whose download fails locally (ENOSPC) or midway is kept; the open fails with storage_error and succeeds later', async () => {
  const storage = { uri: 's3://bucket/dl', endpointUrl: endpoint, region: 'us-east-1', credentials: s3Credentials };
  const writer = await ObjectWriter.open(storage);
  for (let i = 0; i < 50; i++) {
    executeRequest(writer.store, JSON.stringify(write([q('x', addN('U', [['n', i64(i)]]))], ['x'])), flags, 'writer',
      { queryTimeoutMs: 10_000, logBatch: (b) => writer.logBatch(b) });
  }
  await writer.sync();
  await writer.close(); // the only snapshot
  const snapshots = await snapshotKeys('dl');
  expect(snapshots).toHaveLength(1);

  for (const failAfterBytes of [0, 100]) {
    fault.failAfterBytes = failAfterBytes;
    await expect(ObjectWriter.open(storage)).rejects.toMatchObject({ code: 'storage_error', message: expect.stringMatching(/ENOSPC/) });
    expect(await snapshotKeys('dl'), `a failed download (after ${failAfterBytes} bytes) deleted nothing`).toEqual(snapshots);
  }

  fault.failAfterBytes = null;
  const again = await ObjectWriter.open(storage);
  try {
    expect(again.report.snapshotEpoch).toBe(Number(/(\d{10})\.bin$/.exec(snapshots[0]!)![1]));
    const res = executeRequest(again.store, JSON.stringify(countAll), flags, 'writer');
    expect(JSON.parse((res as { body: string }).body)).toEqual({ c: 50 });
  } finally {
    await again.close();
  }
});

it('a snapshot that cannot be written is retried with backoff, not per group commit; the writer stays ready and says why', async () => {
  const storage = { uri: 's3://bucket/snapfail', endpointUrl: endpoint, region: 'us-east-1', credentials: s3Credentials };
  const logged: string[] = [];
  const stderr = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    logged.push(String(chunk));
    return true;
  });
  // A snapshot is due after every group.
  const writer = await ObjectWriter.open(storage, { snapshotWalBytes: 1, snapshotWalObjects: 1, leaseMs: 30_000 });
  const writeOne = async (n: number) => {
    const res = executeRequest(writer.store, JSON.stringify(write([q('x', addN('U', [['n', i64(n)]]))], ['x'])), flags, 'writer',
      { queryTimeoutMs: 10_000, logBatch: (b) => writer.logBatch(b) });
    expect((res as { status: number }).status).toBe(200);
    await writer.sync();
  };
  try {
    // The snapshot is written on its own thread: the fault crosses with each job.
    const injected = 1000;
    snapshotFaults.failWrites = injected;
    const startedAt = Date.now();
    for (let i = 0; i < 10; i++) await writeOne(i);
    // Ten groups, each due a snapshot: one attempt, then each backoff (>= half the first
    // delay) holds the next ones (a burst of ~100 ms makes that exactly one attempt).
    // An attempt counts here when its job is sent and in the health message when it has
    // failed: wait until the two agree (a slow burst may have sent a second one meanwhile).
    const reported = () => writer.health().problem?.includes(`snapshot failed ${injected - snapshotFaults.failWrites} times`) === true;
    for (let waited = 0; !reported() && waited < 5_000; waited += 20) await new Promise((r) => setTimeout(r, 20));
    const burstMs = Date.now() - startedAt;
    const failedAttempts = injected - snapshotFaults.failWrites;
    expect(failedAttempts).toBeGreaterThanOrEqual(1);
    expect(failedAttempts).toBeLessThanOrEqual(1 + Math.floor(burstMs / (limits.snapshotRetryFirstMs / 2)));
    expect(failedAttempts).toBeLessThan(10);
    expect(writer.health().ready).toBe(true);
    expect(writer.health().problem).toMatch(new RegExp(`snapshot failed ${failedAttempts} times .*ENOSPC`));
    expect(logged.filter((l) => /snapshot of s3:\/\/bucket\/snapfail failed, retrying with backoff/.test(l))).toHaveLength(1);

    // Past the backoff the next group tries again; with the disk back it succeeds.
    snapshotFaults.failWrites = 0;
    await new Promise((r) => setTimeout(r, limits.snapshotRetryFirstMs * 2 ** (failedAttempts - 1) + 50));
    await writeOne(10);
    // The snapshot runs after the group's writes were answered: wait for it.
    for (let waited = 0; writer.health().problem !== null && waited < 5_000; waited += 20) await new Promise((r) => setTimeout(r, 20));
    expect(writer.health()).toEqual({ ready: true, problem: null });
    expect(logged.filter((l) => new RegExp(`succeeded again after ${failedAttempts} failures`).test(l))).toHaveLength(1);
    expect((await snapshotKeys('snapfail')).length).toBeGreaterThanOrEqual(1);
  } finally {
    snapshotFaults.failWrites = 0;
    stderr.mockRestore();
    await writer.close();
  }
});

it('an uploaded snapshot that reads back damaged is kept aside and fails the snapshot; nothing older is deleted, and the retry replaces it', async () => {
  const storage = { uri: 's3://bucket/readback', endpointUrl: endpoint, region: 'us-east-1', credentials: s3Credentials };
  const writer = await ObjectWriter.open(storage);
  const writeSome = async (from: number, n: number) => {
    for (let i = from; i < from + n; i++) {
      const res = executeRequest(writer.store, JSON.stringify(write([q('x', addN('U', [['n', i64(i)]]))], ['x'])), flags, 'writer',
        { queryTimeoutMs: 10_000, logBatch: (b) => writer.logBatch(b) });
      expect((res as { status: number }).status).toBe(200);
    }
    await writer.sync();
  };
  const keysUnder = async (dir: string) => {
    const out = await client.send(new ListObjectsV2Command({ Bucket: 'bucket', Prefix: `readback/${dir}/` }));
    return (out.Contents ?? []).map((o) => o.Key!).sort();
  };
  // The bytes S3 stores differ from those sent, once: the last section's last bytes flipped.
  let damagedUploads = 0;
  const damageNextSnapshotUpload = () => vi.spyOn(Bucket.prototype, 'putFile').mockImplementation(async function (this: Bucket, path, key, condition) {
    const bytes = readFileSync(path);
    if (damagedUploads === 0 && key.includes('/snapshots/')) {
      bytes[bytes.length - 2]! ^= 0xff;
      damagedUploads++;
    }
    return (await this.put(key, bytes, condition)) === 'precondition' ? 'precondition' : 'stored';
  });
  let reopened: ObjectWriter | null = null;
  try {
    await writeSome(0, 5);
    await writer.snapshot();
    const first = await keysUnder('snapshots');
    expect(first).toHaveLength(1);
    await writeSome(5, 5);
    const walBefore = await keysUnder('wal');
    damageNextSnapshotUpload();
    await expect(writer.snapshot()).rejects.toThrow(/storage error: the snapshot s3:\/\/bucket\/readback\/snapshots\/\S+ read back damaged \(.*fails its checksum\); kept as .*\.damaged-\d+, nothing older deleted/);
    expect(damagedUploads).toBe(1);
    vi.restoreAllMocks();
    const afterDamage = await keysUnder('snapshots');
    // The first snapshot stays; the damaged one is only under its aside name, no listing's snapshot.
    expect(afterDamage.filter((k) => k.endsWith('.bin'))).toEqual(first);
    expect(afterDamage.filter((k) => /\.bin\.damaged-\d+$/.test(k))).toHaveLength(1);
    expect(await keysUnder('wal')).toEqual(walBefore);
    // The retry uploads a whole snapshot under the same epoch's key.
    await writer.snapshot();
    expect((await keysUnder('snapshots')).filter((k) => k.endsWith('.bin'))).toHaveLength(2);

    // Damaged again, and this time it cannot be moved aside (a copy fails, as one over 5 GB
    // does): it stays under its key, and the retry at the same epoch replaces it instead of
    // taking it for another writer's (a review).
    await writeSome(10, 3);
    damagedUploads = 0;
    damageNextSnapshotUpload();
    vi.spyOn(Bucket.prototype, 'copy').mockRejectedValueOnce(new Error('EntityTooLarge'));
    await expect(writer.snapshot()).rejects.toThrow(/read back damaged .*left in place, to be replaced by the retry .*EntityTooLarge/);
    vi.restoreAllMocks();
    await writer.snapshot();
    expect(writer.health().ready).toBe(true);
    await writer.close();
    reopened = await ObjectWriter.open(storage);
    const res = executeRequest(reopened.store, JSON.stringify(countAll), flags, 'writer', { queryTimeoutMs: 10_000 });
    expect(JSON.parse((res as { body: string }).body)).toEqual({ c: 13 });
  } finally {
    vi.restoreAllMocks();
    await writer.close();
    await reopened?.close();
  }
});
