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
// Objects larger than a part threshold go up as a multipart upload read from the staged
// file one part at a time, and downloads that can be large (snapshots) stream to a file,
// so memory stays bounded by one part whatever the store's size.
//
// The AWS SDK loads in ~0.5 s, so it is imported on first use: memory and disk servers
// never pay for it.
import { closeSync, createWriteStream, fstatSync, openSync, readSync } from 'node:fs';
import { hostname } from 'node:os';
import { createHash, randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { S3Client } from '@aws-sdk/client-s3';
import { SvcError } from '../protocol/errors.js';
import { processAlive } from './process-alive.js';
import { withoutCredentials } from '../url-credentials.js';
import { instant, msSince } from '../clock.js';

/** The Content-MD5 header of `body` (base64 of its MD5), which the server checks the bytes it received against. */
function contentMd5(body: Uint8Array): string {
  return createHash('md5').update(body).digest('base64');
}

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
  /** Files larger than this go up as multipart uploads; default MULTIPART_THRESHOLD_BYTES (tests set it small). */
  multipartThresholdBytes?: number;
  /** Part size of multipart uploads; default MULTIPART_PART_BYTES (S3 wants >= 5 MiB except the last part). */
  multipartPartBytes?: number;
}

export interface StorageUri {
  bucket: string;
  /** No leading or trailing slash; '' for the bucket root. */
  prefix: string;
}

export function parseStorageUri(uri: string): StorageUri {
  // Every storage message quotes the URI: one with credentials in it is refused, and never shown.
  const shown = withoutCredentials(uri);
  if (uri.includes('@')) {
    throw new SvcError('invalid_configuration', `storage URI \`${shown}\` holds credentials (or an @): give them in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the SDK's other sources), never in the URI`);
  }
  const m = /^s3:\/\/([^/]+)(?:\/(.*))?$/.exec(uri);
  if (m === null) throw new SvcError('invalid_configuration', `storage URI \`${shown}\` is not of the form s3://bucket/prefix`);
  if (!/^[A-Za-z0-9._-]+$/.test(m[1]!)) throw new SvcError('invalid_configuration', `storage URI \`${shown}\`: a bucket name has letters, digits, '.', '-' and '_' only`);
  const prefix = (m[2] ?? '').replace(/^\/+|\/+$/g, '');
  if (prefix.split('/').some((part, i, all) => part === '' && all.length > 1)) {
    throw new SvcError('invalid_configuration', `storage URI \`${shown}\` has an empty path segment`);
  }
  return { bucket: m[1]!, prefix };
}

const EPOCH_DIGITS = 10;
const pad = (epoch: number) => String(epoch).padStart(EPOCH_DIGITS, '0');

/** The epochs a WAL object's key names (`wal/<first>-<last>.log`), or undefined for another key. */
export function parseWalKey(key: string): { firstEpoch: number; lastEpoch: number } | undefined {
  const m = /wal\/(\d{10})-(\d{10})\.log$/.exec(key);
  return m === null ? undefined : { firstEpoch: Number(m[1]), lastEpoch: Number(m[2]) };
}
/** Keys per DeleteObjects call (the S3 maximum). */
const DELETE_KEYS_MAX = 1000;
/** Files above this go up in parts (one PUT holds at most 5 GiB on S3; parts also bound memory). */
export const MULTIPART_THRESHOLD_BYTES = 64 * 1024 * 1024;
/** Bytes per part, held in memory one at a time while uploading. */
export const MULTIPART_PART_BYTES = 32 * 1024 * 1024;
/** S3 limits: parts per upload, and the largest part (bigger files grow the part size up to it). */
const MULTIPART_PARTS_MAX = 10_000;
const MULTIPART_PART_BYTES_MAX = 5 * 1024 * 1024 * 1024;
/** A connection attempt abandoned after this long counts as a failed request (the SDK retries it). */
const S3_CONNECT_TIMEOUT_MS = 5_000;
/** A socket silent this long (a stalled server) fails its request instead of hanging forever. */
const S3_SOCKET_IDLE_TIMEOUT_MS = 30_000;

export interface WalObject {
  key: string;
  firstEpoch: number;
  lastEpoch: number;
  bytes: number;
}

export interface SnapshotObject {
  key: string;
  epoch: number;
  /** Its size as listed: a download of another length failed on the way. */
  bytes: number;
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
  private readonly multipartThresholdBytes: number;
  private readonly multipartPartBytes: number;

  private constructor(uri: string, location: StorageUri, client: S3Client, sdk: typeof import('@aws-sdk/client-s3'), options: ObjectStorageOptions) {
    this.uri = uri;
    this.name = location.bucket;
    this.prefix = location.prefix;
    this.client = client;
    this.sdk = sdk;
    this.multipartThresholdBytes = options.multipartThresholdBytes ?? MULTIPART_THRESHOLD_BYTES;
    this.multipartPartBytes = options.multipartPartBytes ?? MULTIPART_PART_BYTES;
    if (!(this.multipartPartBytes >= 1 && this.multipartPartBytes <= MULTIPART_PART_BYTES_MAX && this.multipartThresholdBytes >= 0)) {
      throw new SvcError('invalid_configuration', `multipart part size ${this.multipartPartBytes} must be between 1 and ${MULTIPART_PART_BYTES_MAX} bytes`);
    }
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
      requestHandler: { connectionTimeout: S3_CONNECT_TIMEOUT_MS, socketTimeout: S3_SOCKET_IDLE_TIMEOUT_MS },
    });
    return new Bucket(options.uri, location, client, sdk, options);
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
   * (s3rver 3.7) ignore both. Returns the new ETag, or 'precondition' on a 412. The body
   * goes with its Content-MD5: S3 (and the compatible servers that check it) refuses a body
   * that changed on the way (BadDigest) instead of storing it.
   */
  async put(key: string, body: Uint8Array, condition: { ifNoneMatch?: boolean; ifMatch?: string } = {}): Promise<string | undefined | 'precondition'> {
    try {
      const out = await this.client.send(new this.sdk.PutObjectCommand({
        Bucket: this.name, Key: key, Body: body, ContentLength: body.byteLength, ContentMD5: contentMd5(body),
        ...(condition.ifNoneMatch ? { IfNoneMatch: '*' } : {}),
        ...(condition.ifMatch !== undefined ? { IfMatch: condition.ifMatch } : {}),
      }));
      return out.ETag;
    } catch (err) {
      if (statusOf(err) === 412) return 'precondition';
      throw this.fail('PUT', key, err);
    }
  }

  /** A server-side copy of the object at `from` (both keys within this bucket's prefix). */
  async copy(from: string, to: string): Promise<void> {
    try {
      await this.client.send(new this.sdk.CopyObjectCommand({ Bucket: this.name, Key: to, CopySource: `${this.name}/${encodeURIComponent(from).replace(/%2F/g, '/')}` }));
    } catch (err) {
      throw this.fail('COPY', from, err);
    }
  }

  /**
   * Keep a damaged object under `<key>.damaged-<ms>`, where no listing takes it for what it
   * was, for whoever looks into the damage; `key` is free afterwards. Returns the new key.
   * Fails (nothing removed) when the copy does: S3 copies at most 5 GB in one request.
   */
  async keepAside(key: string): Promise<string> {
    const aside = `${key}.damaged-${Date.now()}`;
    await this.copy(key, aside);
    await this.delete([key]);
    return aside;
  }

  /** The object, or null if there is none. */
  async get(key: string): Promise<ObjectInfo | null> {
    try {
      const out = await this.client.send(new this.sdk.GetObjectCommand({ Bucket: this.name, Key: key }));
      if (out.Body === undefined) return { bytes: new Uint8Array(0), etag: out.ETag, lastModified: out.LastModified };
      const bytes = await out.Body.transformToByteArray();
      if (out.ContentLength !== undefined && bytes.byteLength !== out.ContentLength) {
        throw new SvcError('storage_error', `storage error: downloading s3://${this.name}/${key} ended after ${bytes.byteLength} of ${out.ContentLength} bytes`);
      }
      return { bytes, etag: out.ETag, lastModified: out.LastModified };
    } catch (err) {
      if (statusOf(err) === 404 || (err as S3ErrorShape).name === 'NoSuchKey') return null;
      throw this.fail('GET', key, err);
    }
  }

  /**
   * Store the file at `path` under `key` (`If-None-Match: *` when `ifNoneMatch`), with
   * one PUT up to the multipart threshold and a multipart upload above it. Memory: the
   * whole file up to the threshold, one part above it. Returns 'precondition' on a 412.
   */
  async putFile(path: string, key: string, condition: { ifNoneMatch?: boolean } = {}): Promise<'stored' | 'precondition'> {
    const fd = openSync(path, 'r');
    try {
      const size = fstatSync(fd).size;
      if (size <= this.multipartThresholdBytes) {
        const put = await this.put(key, readRange(fd, 0, size), condition);
        return put === 'precondition' ? 'precondition' : 'stored';
      }
      return await this.putMultipart(fd, size, key, condition);
    } finally {
      closeSync(fd);
    }
  }

  private async putMultipart(fd: number, size: number, key: string, condition: { ifNoneMatch?: boolean }): Promise<'stored' | 'precondition'> {
    // More parts than S3 allows: grow them, whole MiB, rather than fail.
    const mib = 1024 * 1024;
    const fewest = Math.ceil(size / MULTIPART_PARTS_MAX);
    const partBytes = fewest <= this.multipartPartBytes ? this.multipartPartBytes : Math.ceil(fewest / mib) * mib;
    if (partBytes > MULTIPART_PART_BYTES_MAX) throw new SvcError('storage_error', `storage error: s3://${this.name}/${key}: ${size} bytes exceed what a multipart upload can hold`);
    let uploadId: string | undefined;
    try {
      const created = await this.client.send(new this.sdk.CreateMultipartUploadCommand({ Bucket: this.name, Key: key }));
      uploadId = created.UploadId;
      if (uploadId === undefined) throw new Error('CreateMultipartUpload returned no UploadId');
      const parts: { PartNumber: number; ETag: string }[] = [];
      for (let offset = 0, number = 1; offset < size; offset += partBytes, number++) {
        const body = readRange(fd, offset, Math.min(partBytes, size - offset));
        const out = await this.client.send(new this.sdk.UploadPartCommand({
          Bucket: this.name, Key: key, UploadId: uploadId, PartNumber: number, Body: body, ContentLength: body.byteLength, ContentMD5: contentMd5(body),
        }));
        if (out.ETag === undefined) throw new Error(`UploadPart ${number} returned no ETag`);
        parts.push({ PartNumber: number, ETag: out.ETag });
      }
      await this.client.send(new this.sdk.CompleteMultipartUploadCommand({
        Bucket: this.name, Key: key, UploadId: uploadId, MultipartUpload: { Parts: parts },
        ...(condition.ifNoneMatch ? { IfNoneMatch: '*' } : {}),
      }));
      return 'stored';
    } catch (err) {
      if (uploadId !== undefined) await this.abortMultipart(key, uploadId);
      if (statusOf(err) === 412) return 'precondition';
      throw this.fail('multipart PUT', key, err);
    }
  }

  /** Best effort: parts of an abandoned upload cost storage until a lifecycle rule removes them. */
  private async abortMultipart(key: string, uploadId: string): Promise<void> {
    try {
      await this.client.send(new this.sdk.AbortMultipartUploadCommand({ Bucket: this.name, Key: key, UploadId: uploadId }));
    } catch (err) {
      process.stderr.write(`svcdb: aborting multipart upload ${uploadId} of s3://${this.name}/${key} failed (its parts stay until a lifecycle rule removes them): ${(err as Error).message}\n`);
    }
  }

  /**
   * Stream the object into the file at `path` (created or replaced). Returns its size, or
   * null if there is none. A download cut short or a local write failure (disk full) is a
   * storage_error: the object may be fine, so nobody may judge it by a partial copy.
   */
  async getToFile(key: string, path: string): Promise<{ bytes: number } | null> {
    let out;
    try {
      out = await this.client.send(new this.sdk.GetObjectCommand({ Bucket: this.name, Key: key }));
    } catch (err) {
      if (statusOf(err) === 404 || (err as S3ErrorShape).name === 'NoSuchKey') return null;
      throw this.fail('GET', key, err);
    }
    const file = createWriteStream(path);
    try {
      const body = out.Body as Readable | undefined;
      if (body === undefined) await new Promise<void>((resolve, reject) => file.once('error', reject).end(resolve));
      else await pipeline(body, file);
    } catch (err) {
      file.destroy();
      const e = err as NodeJS.ErrnoException;
      throw new SvcError('storage_error', `storage error: downloading s3://${this.name}/${key} to ${path} failed: ${e.code ?? e.name}: ${e.message}`);
    }
    const bytes = file.bytesWritten;
    if (out.ContentLength !== undefined && bytes !== out.ContentLength) {
      throw new SvcError('storage_error', `storage error: downloading s3://${this.name}/${key} ended after ${bytes} of ${out.ContentLength} bytes`);
    }
    return { bytes };
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
      const epochs = parseWalKey(o.key);
      if (epochs !== undefined) out.push({ key: o.key, ...epochs, bytes: o.bytes });
    }
    return out.sort((a, b) => a.firstEpoch - b.firstEpoch || a.lastEpoch - b.lastEpoch);
  }

  /** Snapshot objects, newest first. */
  async listSnapshots(): Promise<SnapshotObject[]> {
    const out: SnapshotObject[] = [];
    for (const o of await this.list('snapshots/')) {
      const m = /snapshots\/(\d{10})\.bin$/.exec(o.key);
      if (m !== null) out.push({ key: o.key, epoch: Number(m[1]), bytes: o.bytes });
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

/** `length` bytes of the file at `offset` (a fresh buffer: the SDK may hold it while retrying). */
function readRange(fd: number, offset: number, length: number): Buffer {
  const buffer = Buffer.allocUnsafe(length);
  let done = 0;
  while (done < length) {
    const n = readSync(fd, buffer, done, length - done, offset + done);
    if (n === 0) throw new SvcError('storage_error', `storage error: staged file ended at ${offset + done} of ${offset + length} bytes`);
    done += n;
  }
  return buffer;
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
  /** Called once if the lock was taken over (another holder, or no lock object, read back). */
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
 * A writer writes only while its lease is this fresh: the rest of the lease is the margin
 * for a PUT still in flight and for clock skew against the server's LastModified, which a
 * successor measures the lease by.
 */
const LEASE_FRESH_FRACTION = 2 / 3;

/**
 * `prefix/writer.lock`: holder info, renewed every leaseMs/3. A new writer takes a lock
 * over when its holder is a dead process on this host (kill -9) or it was not renewed
 * for a lease. Creation uses `If-None-Match: *` and takeover/renewal `If-Match: <etag>`,
 * which make the lock exclusive on S3 and servers with conditional writes; s3rver 3.7
 * ignores both, so there a read-back after the write is the only (best-effort) check.
 *
 * An outage that stops renewals does not lose the lock by itself: the writer just may not
 * write (`ensureFresh()` is false) until a renewal reads the lock back as still ours. Only
 * seeing another holder (or no lock object) loses it for good.
 */
export class WriterLock {
  private timer: NodeJS.Timeout | null = null;
  /**
   * When the last successful renewal started (its PUT's LastModified is no earlier), on both
   * clocks: a step back of the wall clock must not keep a lease looking fresh, nor a
   * suspension, which stops the monotonic clock but not a rival's (clock.ts msSince).
   */
  private renewedAt = instant();
  /** The renewal in progress, awaited by release() so it cannot re-create a released lock. */
  private renewal: Promise<void> | null = null;
  private lost = false;

  private constructor(private readonly bucket: Bucket, private readonly holder: LockHolder, private readonly options: LockOptions) {}

  static async acquire(bucket: Bucket, options: LockOptions): Promise<WriterLock> {
    const holder: LockHolder = { id: randomUUID(), pid: process.pid, host: hostname(), since: new Date().toISOString() };
    const body = Buffer.from(JSON.stringify(holder));
    for (let attempt = 1; attempt <= LOCK_READ_ATTEMPTS; attempt++) {
      const startedAt = instant();
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
        lock.renewedAt = startedAt;
        lock.start();
        return lock;
      }
    }
    throw new SvcError('storage_error', `storage error: ${bucket.uri}: another writer is taking the lock at the same time`);
  }

  private start(): void {
    this.timer = setInterval(() => { void this.renewNow(); }, Math.max(10, Math.floor(this.options.leaseMs / 3)));
    this.timer.unref();
  }

  /** One renewal at a time; callers arriving meanwhile share it. */
  private renewNow(): Promise<void> {
    if (this.lost) return Promise.resolve();
    this.renewal ??= this.renew().finally(() => { this.renewal = null; });
    return this.renewal;
  }

  /** Whether our lease is fresh enough to write under. */
  get fresh(): boolean {
    return !this.lost && msSince(this.renewedAt) < this.options.leaseMs * LEASE_FRESH_FRACTION;
  }

  /**
   * Whether no other writer can have taken the lock yet: our last renewal (timed from before
   * it was sent) is younger than the lease a successor waits out. Checked after an upload
   * completes: one that ends past it may have landed after a successor's takeover, so it is
   * not acknowledged.
   */
  get held(): boolean {
    return !this.lost && msSince(this.renewedAt) < this.options.leaseMs;
  }

  /**
   * After an upload that ended when `held` was false: renew now. Our holder id still in the
   * lock object means no successor took over before the upload landed (a takeover rewrites
   * it): true. False when that cannot be told (storage unreachable) or the lock is lost
   * (another holder: onLost has been called).
   */
  async confirm(): Promise<boolean> {
    if (this.held) return true;
    await this.renewNow();
    return this.held;
  }

  /** True when we may write now: the lease is fresh, or a renewal made now succeeded. */
  async ensureFresh(): Promise<boolean> {
    if (this.fresh) return true;
    await this.renewNow();
    return this.fresh;
  }

  private loseLock(reason: string): void {
    if (this.lost) return;
    this.lost = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.options.onLost(reason);
  }

  private async renew(): Promise<void> {
    const startedAt = instant();
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
      this.renewedAt = startedAt;
    } catch {
      // Storage unreachable: try again next round. The lease may run out meanwhile, which
      // stops our writes (fresh is false) but proves nothing about a successor: the next
      // renewal that gets through reads the holder and decides.
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
