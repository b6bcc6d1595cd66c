// Object storage: the bucket is the system of record (layout in object-bucket.ts).
//
// Writer: every group commit uploads the frames of the batches committed since the last
// upload as ONE immutable object `wal/<first>-<last>.log` (a wal.ts segment: same header,
// same frames), and the writes of the group are acknowledged only after that PUT
// succeeded. Uploads are strictly one after another, so the bucket always holds a gap-free
// prefix of the history and key order is epoch order. Snapshots (snapshot.ts format) are
// uploaded as `snapshots/<epoch>.bin`; then what the PREVIOUS snapshot covers is deleted,
// so a follower up to one snapshot interval behind can still tail WAL objects.
//
// The local working directory only stages files so that snapshot.ts and wal.ts read and
// write them unchanged: a snapshot is written there and uploaded, a downloaded object is
// written there and read. The pending group lives in memory until its PUT succeeds: a
// batch that was never uploaded was never acknowledged (except x-svc-await-durable: false,
// which by definition may be lost).
//
// Recovery (writer open, follower open and reload) = newest snapshot object that reads
// whole + every later WAL object in epoch order through store.applyRedo.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { SvcError } from '../protocol/errors.js';
import { Store, type RedoBatch } from '../store/store.js';
import type { RecoveryReport } from './disk-storage.js';
import { Bucket, WriterLock, type ObjectStorageOptions, type WalObject } from './object-bucket.js';
import { readSnapshot, snapshotName, writeSnapshot } from './snapshot.js';
import { encodeFrame, readSegment, segmentHeader } from './wal.js';

export { parseStorageUri, type ObjectStorageOptions } from './object-bucket.js';

export interface ObjectWriterOptions {
  /** Snapshot once the WAL objects since the last snapshot hold this many bytes. */
  snapshotWalBytes: number;
  /** ... or once there are this many of them (each costs a GET at recovery). */
  snapshotWalObjects: number;
  /** Writer lock lease: a lock not renewed for this long is taken over. */
  leaseMs: number;
}

export const defaultObjectWriterOptions: ObjectWriterOptions = {
  snapshotWalBytes: 64 * 1024 * 1024,
  snapshotWalObjects: 10_000,
  leaseMs: 30_000,
};

/** WAL objects downloaded ahead of the one being applied. */
const DOWNLOAD_AHEAD = 8;
/**
 * A listed object may still be being written on some servers (s3rver lists a key as soon
 * as its file exists): an object shorter than its key says is read again this often.
 */
const INCOMPLETE_READ_ATTEMPTS = 5;
const INCOMPLETE_RETRY_MS = 40;
/** A follower that finds the chain broken while opening retries the whole load. */
const LOAD_ATTEMPTS = 3;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The working directory: the given one, or a fresh temp dir removed on close. */
function workDir(options: ObjectStorageOptions): { dir: string; owned: boolean } {
  if (options.cacheDir) {
    mkdirSync(options.cacheDir, { recursive: true });
    return { dir: options.cacheDir, owned: false };
  }
  return { dir: mkdtempSync(join(tmpdir(), 'svcdb-s3-')), owned: true };
}

/** Read `bytes` with wal.ts's reader (via a staging file). Null if not whole. */
function decodeWalObject(dir: string, object: WalObject, bytes: Uint8Array): RedoBatch[] | null {
  const file = join(dir, `download-${randomUUID()}.log`);
  writeFileSync(file, bytes);
  try {
    const { batches, end } = readSegment(file, true);
    const whole = end === bytes.byteLength && batches.length === object.lastEpoch - object.firstEpoch + 1
      && batches.every((b, i) => b.epoch === object.firstEpoch + i);
    return whole ? batches : null;
  } catch (err) {
    if (err instanceof SvcError && err.code === 'storage_error') return null; // torn header
    throw err; // format version errors are final
  } finally {
    unlinkSync(file);
  }
}

type Fetched = RedoBatch[] | 'missing' | 'incomplete';

async function fetchWal(bucket: Bucket, dir: string, object: WalObject): Promise<Fetched> {
  for (let attempt = 1; ; attempt++) {
    const info = await bucket.get(object.key);
    if (info === null) return 'missing';
    const batches = decodeWalObject(dir, object, info.bytes);
    if (batches !== null) return batches;
    if (attempt >= INCOMPLETE_READ_ATTEMPTS) return 'incomplete';
    await sleep(INCOMPLETE_RETRY_MS * attempt);
  }
}

interface Replay {
  /** Key of the last object fully applied (or skipped as covered). */
  lastKey: string | undefined;
  /** Why it stopped early: the next object starts after a gap, vanished, or is torn. */
  stop: 'end' | 'gap' | 'missing' | 'incomplete';
  stoppedAt?: WalObject;
  /** The object it stopped at is the newest one listed. */
  stoppedAtLast: boolean;
  replayed: number;
  bytes: number;
  objects: number;
}

/** Apply `objects` (sorted) to `store` in epoch order, downloading a few ahead. */
async function replayWal(bucket: Bucket, dir: string, store: Store, objects: WalObject[], lastKey: string | undefined): Promise<Replay> {
  const result: Replay = { lastKey, stop: 'end', stoppedAtLast: false, replayed: 0, bytes: 0, objects: 0 };
  const pending = objects.filter((o) => o.lastEpoch > store.committedEpoch());
  for (const o of objects) if (o.lastEpoch <= store.committedEpoch()) result.lastKey = o.key;
  const inFlight = new Map<number, Promise<Fetched>>();
  const request = (i: number) => {
    if (i < pending.length && !inFlight.has(i)) inFlight.set(i, fetchWal(bucket, dir, pending[i]!));
  };
  try {
    for (let i = 0; i < pending.length; i++) {
      const object = pending[i]!;
      if (object.firstEpoch > store.committedEpoch() + 1) {
        result.stop = 'gap';
        result.stoppedAt = object;
        return result;
      }
      for (let j = i; j < i + DOWNLOAD_AHEAD; j++) request(j);
      const fetched = await inFlight.get(i)!;
      inFlight.delete(i);
      if (fetched === 'missing' || fetched === 'incomplete') {
        result.stop = fetched;
        result.stoppedAt = object;
        result.stoppedAtLast = i === pending.length - 1;
        return result;
      }
      for (const batch of fetched) {
        if (batch.epoch <= store.committedEpoch()) continue;
        store.applyRedo(batch);
        result.replayed++;
      }
      result.lastKey = object.key;
      result.bytes += object.bytes;
      result.objects++;
    }
    return result;
  } finally {
    // Downloads started ahead of a stop: let them finish quietly.
    for (const p of inFlight.values()) p.catch(() => undefined);
  }
}

interface Loaded {
  store: Store;
  report: RecoveryReport;
  lastKey: string | undefined;
  replay: Replay;
  /** Snapshot objects newer than the one loaded that do not read whole. */
  tornSnapshots: string[];
}

/** Newest snapshot object that reads whole (older ones as fallback), then the WAL after it. */
async function load(bucket: Bucket, dir: string): Promise<Loaded> {
  let store: Store | null = null;
  let snapshotEpoch = 0;
  const tornSnapshots: string[] = [];
  for (const snap of await bucket.listSnapshots()) {
    const info = await bucket.get(snap.key);
    if (info === null) continue; // deleted since the listing: an older one will do
    const file = join(dir, `download-${randomUUID()}.bin`);
    writeFileSync(file, info.bytes);
    try {
      store = readSnapshot(file);
      snapshotEpoch = snap.epoch;
      break;
    } catch (err) {
      if (err instanceof SvcError && err.code !== 'storage_error') throw err; // version errors are final
      // Damaged or still being written: the previous snapshot and its WAL are kept for this.
      tornSnapshots.push(snap.key);
    } finally {
      unlinkSync(file);
    }
  }
  store ??= Store.create();
  store.captureRedo = false;
  const replay = await replayWal(bucket, dir, store, await bucket.listWal(), undefined);
  return {
    store,
    report: { snapshotEpoch, replayedBatches: replay.replayed, truncatedBytes: 0, epoch: store.committedEpoch() },
    lastKey: replay.lastKey,
    replay,
    tornSnapshots,
  };
}

function describeStop(bucket: Bucket, replay: Replay, epoch: number): string {
  const at = replay.stoppedAt ? `s3://${bucket.name}/${replay.stoppedAt.key}` : 'the WAL';
  switch (replay.stop) {
    case 'gap': return `WAL gap: expected epoch ${epoch + 1}, ${at} starts at ${replay.stoppedAt?.firstEpoch}`;
    case 'missing': return `${at} vanished while it was read (another writer?)`;
    case 'incomplete': return `${at} does not hold the epochs its name says (torn or damaged)`;
    case 'end': return 'no problem';
  }
}

// ---------------------------------------------------------------- writer

export class ObjectWriter {
  readonly store: Store;
  readonly report: RecoveryReport;
  readonly uri: string;
  private readonly bucket: Bucket;
  private readonly lock: WriterLock;
  private readonly dir: string;
  private readonly ownsDir: boolean;
  private readonly options: ObjectWriterOptions;
  /** Frames of committed batches not uploaded yet, and their epoch range. */
  private frames: Buffer[] = [];
  private framesFirst = 0;
  private framesLast = 0;
  /** Epoch of the newest logged batch (uploaded or not). */
  private loggedEpoch: number;
  /** Highest epoch that is in the bucket (WAL object or snapshot). */
  private durableEpoch: number;
  private waiters: { epoch: number; resolve: () => void; reject: (err: SvcError) => void }[] = [];
  /** The upload loop, while it runs. */
  private loop: Promise<void> | null = null;
  private lastSnapshotEpoch: number;
  private walBytesSinceSnapshot: number;
  private walObjectsSinceSnapshot: number;
  /** After a failed upload or a lost lock nothing more is acknowledged. */
  private failed: SvcError | null = null;
  private closed = false;

  private constructor(bucket: Bucket, lock: WriterLock, dir: { dir: string; owned: boolean }, loaded: Loaded, options: ObjectWriterOptions) {
    this.bucket = bucket;
    this.uri = bucket.uri;
    this.lock = lock;
    this.dir = dir.dir;
    this.ownsDir = dir.owned;
    this.options = options;
    this.store = loaded.store;
    this.report = loaded.report;
    this.durableEpoch = loaded.store.committedEpoch();
    this.loggedEpoch = this.durableEpoch;
    this.lastSnapshotEpoch = loaded.report.snapshotEpoch;
    this.walBytesSinceSnapshot = loaded.replay.bytes;
    this.walObjectsSinceSnapshot = loaded.replay.objects;
    this.store.captureRedo = true;
  }

  /** Take the writer lock and recover the store from the bucket. */
  static async open(storage: ObjectStorageOptions, options: ObjectWriterOptions = defaultObjectWriterOptions): Promise<ObjectWriter> {
    const bucket = await Bucket.connect(storage);
    let writer: ObjectWriter | null = null;
    let lostBeforeOpen: string | null = null;
    let lock: WriterLock;
    try {
      lock = await WriterLock.acquire(bucket, {
        leaseMs: options.leaseMs,
        onLost: (reason) => {
          const err = new SvcError('storage_error', `storage error: lost the writer lock on ${bucket.uri}: ${reason}`);
          if (writer === null) lostBeforeOpen = reason;
          else writer.fail(err);
        },
      });
    } catch (err) {
      bucket.close();
      throw err;
    }
    const dir = workDir(storage);
    try {
      const loaded = await load(bucket, dir.dir);
      // Objects torn by an upload that never completed (a writer killed mid-PUT on a server
      // whose PUTs are not atomic, like s3rver) were never acknowledged: we hold the lock,
      // so remove them before our own history reuses their epochs. Real S3 never has any.
      const torn = [...loaded.tornSnapshots];
      if (loaded.replay.stop === 'incomplete' && loaded.replay.stoppedAtLast) torn.push(loaded.replay.stoppedAt!.key);
      else if (loaded.replay.stop !== 'end') {
        throw new SvcError('storage_error', `storage error: cannot recover ${bucket.uri}: ${describeStop(bucket, loaded.replay, loaded.store.committedEpoch())}`);
      }
      if (torn.length > 0) {
        process.stderr.write(`svcdb: removing objects of an interrupted upload from ${bucket.uri}: ${torn.join(', ')}\n`);
        await bucket.delete(torn);
      }
      if (lostBeforeOpen !== null) throw new SvcError('storage_error', `storage error: lost the writer lock on ${bucket.uri}: ${lostBeforeOpen}`);
      writer = new ObjectWriter(bucket, lock, dir, loaded, options);
      return writer;
    } catch (err) {
      try { await lock.release(); } catch { /* the lease runs out */ }
      if (dir.owned) rmSync(dir.dir, { recursive: true, force: true });
      bucket.close();
      throw err;
    }
  }

  /** Called with the batch before it is published: a throw rolls the batch back. */
  logBatch(batch: RedoBatch): void {
    if (this.failed) throw this.failed;
    if (this.closed) throw new SvcError('storage_error', 'storage error: object storage is closed');
    if (this.frames.length === 0) this.framesFirst = batch.epoch;
    else if (batch.epoch !== this.framesLast + 1) {
      throw new SvcError('internal_error', `internal error: WAL batch ${batch.epoch} logged after ${this.framesLast}`);
    }
    this.frames.push(encodeFrame(batch));
    this.framesLast = batch.epoch;
    this.loggedEpoch = batch.epoch;
  }

  /**
   * Resolves when every batch logged so far is in the bucket. Callers that arrive while
   * an upload runs share the next one (group commit); the first upload of a burst waits
   * for setImmediate so the requests already queued join it.
   */
  sync(): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    const epoch = this.loggedEpoch;
    if (epoch <= this.durableEpoch) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.waiters.push({ epoch, resolve, reject });
      this.kick();
    });
  }

  private kick(): void {
    if (this.loop !== null) return;
    this.loop = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.uploadLoop())
      .catch((err: unknown) => this.fail(new SvcError('storage_error', `storage error: ${String(err)}`)))
      .finally(() => {
        this.loop = null;
        // Batches logged by continuations of the last acknowledgements, after the loop
        // looked for more: they need a loop of their own.
        if (this.frames.length > 0 && this.failed === null) this.kick();
      });
  }

  private async uploadLoop(): Promise<void> {
    while (this.frames.length > 0 && this.failed === null) {
      const first = this.framesFirst;
      const last = this.framesLast;
      const body = Buffer.concat([segmentHeader(first), ...this.frames]);
      this.frames = [];
      try {
        await this.putImmutable(this.bucket.walKey(first, last), body);
      } catch (err) {
        this.fail(err instanceof SvcError ? err : new SvcError('storage_error', `storage error: ${String(err)}`));
        return;
      }
      this.durableEpoch = Math.max(this.durableEpoch, last);
      this.walBytesSinceSnapshot += body.byteLength;
      this.walObjectsSinceSnapshot++;
      this.settle();
      if (this.walBytesSinceSnapshot >= this.options.snapshotWalBytes || this.walObjectsSinceSnapshot >= this.options.snapshotWalObjects) {
        try {
          await this.snapshotNow();
        } catch (err) {
          process.stderr.write(`svcdb: snapshot failed (the WAL keeps every write): ${(err as Error).message}\n`);
        }
      }
    }
  }

  /** Answer the waiters whose batches are now durable. */
  private settle(): void {
    if (this.waiters.length === 0) return;
    const still: typeof this.waiters = [];
    for (const w of this.waiters) {
      if (w.epoch <= this.durableEpoch) w.resolve();
      else still.push(w);
    }
    this.waiters = still;
  }

  private fail(err: SvcError): void {
    this.failed ??= err;
    this.frames = [];
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.reject(this.failed);
  }

  /**
   * PUT an object that must not exist yet (`If-None-Match: *`: a second writer that slipped
   * past the lock cannot overwrite history on servers that honour it). A 412 after an SDK
   * retry of our own successful PUT is recognised by comparing the bytes.
   */
  private async putImmutable(key: string, body: Uint8Array): Promise<void> {
    const put = await this.bucket.put(key, body, { ifNoneMatch: true });
    if (put !== 'precondition') return;
    const existing = await this.bucket.get(key);
    if (existing !== null && Buffer.compare(Buffer.from(existing.bytes), Buffer.from(body)) === 0) return;
    throw new SvcError('storage_error', `storage error: s3://${this.bucket.name}/${key} already exists with other contents: another writer wrote this bucket`);
  }

  /** Upload a snapshot of the store now (between batches, in the upload loop or at close). */
  async snapshot(): Promise<void> {
    await this.sync();
    await this.snapshotNow();
  }

  private async snapshotNow(): Promise<void> {
    if (this.failed) throw this.failed;
    const epoch = this.store.committedEpoch();
    if (epoch === this.lastSnapshotEpoch) return;
    writeSnapshot(this.dir, this.store);
    const file = join(this.dir, snapshotName(epoch));
    try {
      await this.putImmutable(this.bucket.snapshotKey(epoch), readFileSync(file));
    } finally {
      rmSync(file, { force: true });
    }
    const previous = this.lastSnapshotEpoch;
    this.lastSnapshotEpoch = epoch;
    this.durableEpoch = Math.max(this.durableEpoch, epoch);
    this.walBytesSinceSnapshot = 0;
    this.walObjectsSinceSnapshot = 0;
    this.settle();
    // Keep one interval back: the previous snapshot and the WAL after it, so recovery can
    // fall back past a damaged newest snapshot and followers behind by less than an
    // interval keep tailing. Everything the previous snapshot covers goes.
    if (previous > 0) {
      try {
        const stale = [
          ...(await this.bucket.listSnapshots()).filter((s) => s.epoch < previous).map((s) => s.key),
          ...(await this.bucket.listWal()).filter((w) => w.lastEpoch <= previous).map((w) => w.key),
        ];
        if (stale.length > 0) await this.bucket.delete(stale);
      } catch (err) {
        // Leftovers are harmless: recovery skips what a snapshot covers.
        process.stderr.write(`svcdb: deleting covered objects failed: ${(err as Error).message}\n`);
      }
    }
  }

  /** Upload what is pending, snapshot, release the lock. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      try {
        await this.sync();
      } catch { /* already reported to the waiters */ }
      while (this.loop !== null) await this.loop;
      if (this.failed === null) {
        try {
          await this.snapshotNow();
        } catch (err) {
          process.stderr.write(`svcdb: snapshot at close failed (the WAL keeps every write): ${(err as Error).message}\n`);
        }
      }
      try { await this.lock.release(); } catch { /* the lease runs out */ }
    } finally {
      if (this.ownsDir) rmSync(this.dir, { recursive: true, force: true });
      this.bucket.close();
    }
  }
}

// ---------------------------------------------------------------- follower

/** A read-only copy of a bucket prefix that a writer elsewhere appends to. */
export class ObjectFollower {
  store: Store;
  readonly report: RecoveryReport;
  readonly uri: string;
  private readonly bucket: Bucket;
  private readonly dir: string;
  private readonly ownsDir: boolean;
  private lastKey: string | undefined;
  private refreshing: Promise<boolean> | null = null;

  private constructor(bucket: Bucket, dir: { dir: string; owned: boolean }, loaded: Loaded) {
    this.bucket = bucket;
    this.uri = bucket.uri;
    this.dir = dir.dir;
    this.ownsDir = dir.owned;
    this.store = loaded.store;
    this.report = loaded.report;
    this.lastKey = loaded.lastKey;
  }

  static async open(storage: ObjectStorageOptions): Promise<ObjectFollower> {
    const bucket = await Bucket.connect(storage);
    const dir = workDir(storage);
    try {
      return new ObjectFollower(bucket, dir, await loadConsistent(bucket, dir.dir));
    } catch (err) {
      if (dir.owned) rmSync(dir.dir, { recursive: true, force: true });
      bucket.close();
      throw err;
    }
  }

  /**
   * Apply the WAL objects written since the last refresh. Returns true when the store was
   * replaced instead (the follower fell more than a snapshot interval behind, so the WAL
   * it needed is gone and it reloaded from the newest snapshot): holders of the old
   * `store` must switch to the new one.
   */
  refresh(): Promise<boolean> {
    this.refreshing ??= this.refreshOnce().finally(() => { this.refreshing = null; });
    return this.refreshing;
  }

  private async refreshOnce(): Promise<boolean> {
    const objects = await this.bucket.listWal(this.lastKey);
    const replay = await replayWal(this.bucket, this.dir, this.store, objects, this.lastKey);
    this.lastKey = replay.lastKey;
    if (replay.stop === 'end' || replay.stop === 'incomplete') return false; // torn: still being written
    // A gap or a vanished object: the writer deleted WAL we still needed.
    const newest = (await this.bucket.listSnapshots())[0];
    if (newest === undefined || newest.epoch <= this.store.committedEpoch()) return false;
    const loaded = await loadConsistent(this.bucket, this.dir);
    this.store = loaded.store;
    this.lastKey = loaded.lastKey;
    return true;
  }

  close(): void {
    if (this.ownsDir) rmSync(this.dir, { recursive: true, force: true });
    this.bucket.close();
  }
}

/** load(), retried while a concurrent snapshot deletes objects under it. */
async function loadConsistent(bucket: Bucket, dir: string): Promise<Loaded> {
  for (let attempt = 1; ; attempt++) {
    const loaded = await load(bucket, dir);
    if (loaded.replay.stop === 'end' || loaded.replay.stop === 'incomplete') return loaded;
    if (attempt >= LOAD_ATTEMPTS) {
      throw new SvcError('storage_error', `storage error: cannot load ${bucket.uri}: ${describeStop(bucket, loaded.replay, loaded.store.committedEpoch())}`);
    }
  }
}
