// One S3-compatible bucket prefix as svcdb uses it: the key layout, the few S3 calls the
// object storage needs (put / get / list / delete, all mapped to storage_error), and the
// writer lock object.
//
// Layout under `s3://bucket/prefix`:
//   prefix/wal/<firstEpoch>-<lastEpoch>.log   one group commit: wal.ts segment framing
//   prefix/snapshots/<epoch>.bin                snapshot.ts file format
//   prefix/writer.lock                          JSON holder info of the live writer
// Epochs are zero-padded to 10 digits, so key order is epoch order (ListObjectsV2 with
// StartAfter returns exactly the objects a follower has not seen).
//
// The AWS SDK loads in ~0.5 s, so it is imported on first use: memory and disk servers
// never pay for it.
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { S3Client } from '@aws-sdk/client-s3';
import { SvcError } from '../protocol/errors.js';
import { processAlive } from './disk-storage.js';

/** Where object storage lives and how to reach it (plain data: crosses to worker threads). */
export interface ObjectStorageOptions {
  /** `s3://bucket/prefix` (the prefix may be empty or have several levels). */
  uri: string;
  /** S3-compatible endpoint (MinIO, s3rver, ...); absent means AWS itself. */
  endpointUrl?: string;
  /** Region for signing; default AWS_REGION, AWS_DEFAULT_REGION or us-east-1. */
  region?: string;
  /** Explicit credentials; absent means the SDK chain (AWS_ACCESS_KEY_ID etc.). */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Local working directory (staging of snapshots and downloaded objects); default a temp dir. */
  cacheDir?: string;
}

export interface StorageUri {
  bucket: string;
  /** No leading or trailing slash; '' for the bucket root. */
  prefix: string;
}

export function parseStorageUri(uri: string): StorageUri {
  const m = /^s3:\/\/([^/]+)(?:\/(.*))?$/.exec(uri);
  if (m === null) throw new SvcError('invalid_configuration', `storage URI \`${uri}\` is not of the form s3://bucket/prefix`);
  const prefix = (m[2] ?? '').replace(/^\/+|\/+$/g, '');
  if (prefix.split('/').some((part, i, all) => part === '' && all.length > 1)) {
    throw new SvcError('invalid_configuration', `storage URI \`${uri}\` has an empty path segment`);
  }
  return { bucket: m[1]!, prefix };
}

const EPOCH_DIGITS = 10;
const pad = (epoch: number) => String(epoch).padStart(EPOCH_DIGITS, '0');
/** Keys per DeleteObjects call (the S3 maximum). */
const DELETE_KEYS_MAX = 1000;

export interface WalObject {
  key: string;
  firstEpoch: number;
  lastEpoch: number;
  bytes: number;
}

export interface SnapshotObject {
  key: string;
  epoch: number;
}

export interface ObjectInfo {
  bytes: Uint8Array;
  etag: string | undefined;
  lastModified: Date | undefined;
}

/** S3 error fields the SDK sets (typed loosely by the SDK itself). */
interface S3ErrorShape {
  name?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
}

function statusOf(err: unknown): number | undefined {
  return (err as S3ErrorShape).$metadata?.httpStatusCode;
}

export class Bucket {
  readonly uri: string;
  readonly name: string;
  readonly prefix: string;
  private readonly client: S3Client;
  private readonly sdk: typeof import('@aws-sdk/client-s3');

  private constructor(uri: string, location: StorageUri, client: S3Client, sdk: typeof import('@aws-sdk/client-s3')) {
    this.uri = uri;
    this.name = location.bucket;
    this.prefix = location.prefix;
    this.client = client;
    this.sdk = sdk;
  }

  static async connect(options: ObjectStorageOptions): Promise<Bucket> {
    const location = parseStorageUri(options.uri);
    // The SDK warns on every start that it will need Node 22 from 2027; we pin it.
    process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';
    const sdk = await import('@aws-sdk/client-s3');
    const region = options.region ?? process.env['AWS_REGION'] ?? process.env['AWS_DEFAULT_REGION'] ?? 'us-east-1';
    const client = new sdk.S3Client({
      region,
      ...(options.endpointUrl ? { endpoint: options.endpointUrl, forcePathStyle: true } : {}),
      ...(options.credentials ? { credentials: options.credentials } : {}),
      // S3-compatible servers store aws-chunked framing verbatim otherwise (notes/packages.md).
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    return new Bucket(options.uri, location, client, sdk);
  }

  /** The full key of `relative` under the prefix. */
  key(relative: string): string {
    return this.prefix === '' ? relative : `${this.prefix}/${relative}`;
  }

  walKey(firstEpoch: number, lastEpoch: number): string {
    return this.key(`wal/${pad(firstEpoch)}-${pad(lastEpoch)}.log`);
  }

  snapshotKey(epoch: number): string {
    return this.key(`snapshots/${pad(epoch)}.bin`);
  }

  get lockKey(): string {
    return this.key('writer.lock');
  }

  private fail(what: string, key: string, err: unknown): SvcError {
    const e = err as S3ErrorShape;
    return new SvcError('storage_error', `storage error: S3 ${what} s3://${this.name}/${key} failed: ${e.name ?? 'Error'}: ${e.message ?? String(err)}`);
  }

  /**
   * Store `body` under `key`. `ifNoneMatch` creates only (S3 answers 412 if the key
   * exists); `ifMatch` replaces only that version. Servers without conditional writes
   * (s3rver 3.7) ignore both. Returns the new ETag, or 'precondition' on a 412.
   */
  async put(key: string, body: Uint8Array, condition: { ifNoneMatch?: boolean; ifMatch?: string } = {}): Promise<string | undefined | 'precondition'> {
    try {
      const out = await this.client.send(new this.sdk.PutObjectCommand({
        Bucket: this.name, Key: key, Body: body, ContentLength: body.byteLength,
        ...(condition.ifNoneMatch ? { IfNoneMatch: '*' } : {}),
        ...(condition.ifMatch !== undefined ? { IfMatch: condition.ifMatch } : {}),
      }));
      return out.ETag;
    } catch (err) {
      if (statusOf(err) === 412) return 'precondition';
      throw this.fail('PUT', key, err);
    }
  }

  /** The object, or null if there is none. */
  async get(key: string): Promise<ObjectInfo | null> {
    try {
      const out = await this.client.send(new this.sdk.GetObjectCommand({ Bucket: this.name, Key: key }));
      if (out.Body === undefined) return { bytes: new Uint8Array(0), etag: out.ETag, lastModified: out.LastModified };
      const bytes = await out.Body.transformToByteArray();
      return { bytes, etag: out.ETag, lastModified: out.LastModified };
    } catch (err) {
      if (statusOf(err) === 404 || (err as S3ErrorShape).name === 'NoSuchKey') return null;
      throw this.fail('GET', key, err);
    }
  }

  /** Every key (with its size) under `relative`, after `startAfter`, in key order. */
  async list(relative: string, startAfter?: string): Promise<{ key: string; bytes: number }[]> {
    const prefix = this.key(relative);
    const out: { key: string; bytes: number }[] = [];
    let token: string | undefined;
    do {
      let page;
      try {
        page = await this.client.send(new this.sdk.ListObjectsV2Command({
          Bucket: this.name, Prefix: prefix,
          ...(token !== undefined ? { ContinuationToken: token } : startAfter !== undefined ? { StartAfter: startAfter } : {}),
        }));
      } catch (err) {
        throw this.fail('LIST', prefix, err);
      }
      for (const o of page.Contents ?? []) if (o.Key !== undefined) out.push({ key: o.Key, bytes: o.Size ?? 0 });
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /** WAL objects after `startAfter` (a key), oldest first. Foreign keys are ignored. */
  async listWal(startAfter?: string): Promise<WalObject[]> {
    const out: WalObject[] = [];
    for (const o of await this.list('wal/', startAfter)) {
      const m = /wal\/(\d{10})-(\d{10})\.log$/.exec(o.key);
      if (m !== null) out.push({ key: o.key, firstEpoch: Number(m[1]), lastEpoch: Number(m[2]), bytes: o.bytes });
    }
    return out.sort((a, b) => a.firstEpoch - b.firstEpoch || a.lastEpoch - b.lastEpoch);
  }

  /** Snapshot objects, newest first. */
  async listSnapshots(): Promise<SnapshotObject[]> {
    const out: SnapshotObject[] = [];
    for (const o of await this.list('snapshots/')) {
      const m = /snapshots\/(\d{10})\.bin$/.exec(o.key);
      if (m !== null) out.push({ key: o.key, epoch: Number(m[1]) });
    }
    return out.sort((a, b) => b.epoch - a.epoch);
  }

  async delete(keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += DELETE_KEYS_MAX) {
      const chunk = keys.slice(i, i + DELETE_KEYS_MAX);
      try {
        const out = await this.client.send(new this.sdk.DeleteObjectsCommand({
          Bucket: this.name, Delete: { Objects: chunk.map((Key) => ({ Key })), Quiet: true },
        }));
        const first = out.Errors?.[0];
        if (first !== undefined) throw new Error(`${first.Code ?? 'Error'}: ${first.Message ?? ''} (${first.Key ?? ''})`);
      } catch (err) {
        throw this.fail('DELETE', chunk[0]!, err);
      }
    }
  }

  close(): void {
    this.client.destroy();
  }
}

// ---------------------------------------------------------------- writer lock object

interface LockHolder {
  /** Random per acquisition: tells our lock from a successor's. */
  id: string;
  pid: number;
  host: string;
  since: string;
}

export interface LockOptions {
  /** A lock not renewed for this long belongs to a dead writer. */
  leaseMs: number;
  /** Called once if the lock was taken over or could not be renewed for a whole lease. */
  onLost: (reason: string) => void;
}

/** Reads of a lock object that is being rewritten (s3rver shows it torn) retry this often. */
const LOCK_READ_ATTEMPTS = 5;
const LOCK_RETRY_MS = 50;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function parseHolder(bytes: Uint8Array): LockHolder | null {
  try {
    const h = JSON.parse(Buffer.from(bytes).toString('utf8')) as Partial<LockHolder>;
    return typeof h.id === 'string' && typeof h.pid === 'number' && typeof h.host === 'string' && typeof h.since === 'string'
      ? h as LockHolder : null;
  } catch {
    return null;
  }
}

/** The lock object and its holder, retrying torn reads; null when there is no lock. */
async function readLock(bucket: Bucket): Promise<{ holder: LockHolder | null; info: ObjectInfo } | null> {
  for (let attempt = 1; ; attempt++) {
    const info = await bucket.get(bucket.lockKey);
    if (info === null) return null;
    const holder = parseHolder(info.bytes);
    if (holder !== null || attempt >= LOCK_READ_ATTEMPTS) return { holder, info };
    await sleep(LOCK_RETRY_MS);
  }
}

/**
 * `prefix/writer.lock`: holder info, renewed every leaseMs/3. A new writer takes a lock
 * over when its holder is a dead process on this host (kill -9) or it was not renewed
 * for a lease. Creation uses `If-None-Match: *` and takeover/renewal `If-Match: <etag>`,
 * which make the lock exclusive on S3 and servers with conditional writes; s3rver 3.7
 * ignores both, so there a read-back after the write is the only (best-effort) check.
 */
export class WriterLock {
  private timer: NodeJS.Timeout | null = null;
  private renewedAt = Date.now();
  /** The renewal in progress, awaited by release() so it cannot re-create a released lock. */
  private renewal: Promise<void> | null = null;
  private lost = false;

  private constructor(private readonly bucket: Bucket, private readonly holder: LockHolder, private readonly options: LockOptions) {}

  static async acquire(bucket: Bucket, options: LockOptions): Promise<WriterLock> {
    const holder: LockHolder = { id: randomUUID(), pid: process.pid, host: hostname(), since: new Date().toISOString() };
    const body = Buffer.from(JSON.stringify(holder));
    for (let attempt = 1; attempt <= LOCK_READ_ATTEMPTS; attempt++) {
      const current = await readLock(bucket);
      let put: string | undefined | 'precondition';
      if (current === null) {
        put = await bucket.put(bucket.lockKey, body, { ifNoneMatch: true });
      } else {
        const h = current.holder;
        const age = Date.now() - (current.info.lastModified?.getTime() ?? 0);
        const deadHere = h !== null && h.host === hostname() && !processAlive(h.pid);
        if (!deadHere && age < options.leaseMs) {
          const who = h ? `process ${h.pid} on ${h.host} (since ${h.since})` : 'an unreadable holder';
          throw new SvcError('storage_error', `storage error: ${bucket.uri} is locked by a writer: ${who}`);
        }
        put = await bucket.put(bucket.lockKey, body, current.info.etag !== undefined ? { ifMatch: current.info.etag } : {});
      }
      if (put === 'precondition') continue; // someone else got there first: look again
      // Read back: on servers without conditional writes this catches most races.
      const check = await readLock(bucket);
      if (check?.holder?.id === holder.id) {
        const lock = new WriterLock(bucket, holder, options);
        lock.start();
        return lock;
      }
    }
    throw new SvcError('storage_error', `storage error: ${bucket.uri}: another writer is taking the lock at the same time`);
  }

  private start(): void {
    this.timer = setInterval(() => {
      if (this.renewal !== null || this.lost) return;
      this.renewal = this.renew().finally(() => { this.renewal = null; });
    }, Math.max(10, Math.floor(this.options.leaseMs / 3)));
    this.timer.unref();
  }

  private loseLock(reason: string): void {
    if (this.lost) return;
    this.lost = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.options.onLost(reason);
  }

  private async renew(): Promise<void> {
    try {
      const current = await readLock(this.bucket);
      if (this.lost) return;
      if (current?.holder?.id !== this.holder.id) {
        const h = current?.holder;
        this.loseLock(h ? `taken over by process ${h.pid} on ${h.host}` : 'the lock object is gone');
        return;
      }
      const put = await this.bucket.put(this.bucket.lockKey, Buffer.from(JSON.stringify(this.holder)),
        current.info.etag !== undefined ? { ifMatch: current.info.etag } : {});
      if (put === 'precondition') {
        this.loseLock('the lock object changed under us');
        return;
      }
      this.renewedAt = Date.now();
    } catch (err) {
      // A blip: try again next round; a whole lease without renewal means a successor may own it.
      if (Date.now() - this.renewedAt > this.options.leaseMs) this.loseLock(`not renewed for ${this.options.leaseMs} ms: ${(err as Error).message}`);
    }
  }

  /** Stop renewing and delete the lock object if it is still ours. */
  async release(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    if (this.lost) return;
    this.lost = true;
    await this.renewal;
    const current = await readLock(this.bucket);
    if (current?.holder?.id === this.holder.id) await this.bucket.delete([this.bucket.lockKey]);
  }
}
