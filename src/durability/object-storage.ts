// Object storage: the bucket is the system of record (layout in object-bucket.ts).
//
// Writer: every group commit uploads the frames of the batches committed since the last
// upload as ONE immutable object `wal/<first>-<last>.log` (a wal.ts segment: same header,
// same frames), and the writes of the group are acknowledged, and published to readers
// (store.publish), only after that PUT succeeded: readers never see a batch the bucket
// does not hold. Uploads are strictly one after another, so the bucket always holds a
// gap-free prefix of the history and key order is epoch order. Snapshots (snapshot.ts
// format) are uploaded as `snapshots/<epoch>.bin` and read back and verified whole; then
// what the PREVIOUS snapshot covers is deleted, so a follower up to one snapshot interval
// behind can still tail WAL objects.
//
// Outages: a failed group upload is retried with the same key and bytes (a retry of a
// PUT that did land meets If-None-Match's 412 and a byte comparison) with bounded
// exponential backoff, until it succeeds or the writer is fenced or closed. Meanwhile
// the writer is not ready and refuses new writes before they apply (storage_error), and
// the waiting writes are never told they failed: they might still land. Only a lost lock
// or a close ends the wait, with writer_fenced_commit_outcome_unknown.
//
// The local working directory only stages files so that snapshot.ts and wal.ts read and
// write them unchanged: a snapshot is written there and uploaded (in parts when large), a
// downloaded object is streamed there and read. The pending group lives in memory until
// its PUT succeeds.
//
// Recovery (writer open, follower open and reload) = newest snapshot object that reads
// whole + every later WAL object in epoch order through store.applyRedo. Only an object
// proven torn (downloaded completely, wrong framing, the newest) is removed, by the writer
// that holds the lock; a download or local failure fails the open and removes nothing.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { SvcError } from '../protocol/errors.js';
import { Store, type RedoBatch } from '../store/store.js';
import { HealthSignal, type DurableStorage, type RecoveryReport, type StorageHealth } from './durable.js';
import { limits } from '../limits.js';
import { backoffMs } from './backoff.js';
import { processAlive } from './process-alive.js';
import { Bucket, parseWalKey, WriterLock, type ObjectStorageOptions, type SnapshotObject, type WalObject } from './object-bucket.js';
import { readSnapshot, SnapshotCutShort, snapshotName } from './snapshot.js';
import { SnapshotThread } from './snapshot-thread.js';
import { encodeFrame, scanSegment, segmentHeader } from './wal.js';
// Every writer-side store gets an index runtime (it registers itself with the store).
import '../index/runtime.js';
import { monotonicMs } from '../clock.js';

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
/** Temp staging dirs are `svcdb-s3-<pid>-XXXXXX`: the pid tells a dead writer's leftovers. */
const STAGING_DIR_PREFIX = 'svcdb-s3-';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Remove staging dirs in `parent` left by processes of this host that are gone (kill -9
 * skips the cleanup at close). A live pid, even a reused one, keeps its dir.
 */
export function removeDeadStagingDirs(parent: string = tmpdir()): string[] {
  const removed: string[] = [];
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return removed; // no temp dir to tidy is no reason to refuse to open
  }
  for (const name of names) {
    const m = /^svcdb-s3-(\d+)-/.exec(name);
    if (m === null || processAlive(Number(m[1]))) continue;
    try {
      rmSync(join(parent, name), { recursive: true, force: true });
      removed.push(name);
    } catch { /* another process is removing it too */ }
  }
  return removed;
}

/** The working directory: the given one, or a fresh temp dir removed on close. */
function workDir(options: ObjectStorageOptions): { dir: string; owned: boolean } {
  if (options.cacheDir) {
    mkdirSync(options.cacheDir, { recursive: true });
    return { dir: options.cacheDir, owned: false };
  }
  removeDeadStagingDirs();
  return { dir: mkdtempSync(join(tmpdir(), `${STAGING_DIR_PREFIX}${process.pid}-`)), owned: true };
}

/** Read `bytes` with wal.ts's reader (via a staging file). Null if not whole. */
function decodeWalObject(dir: string, object: WalObject, bytes: Uint8Array, uri: string): RedoBatch[] | null {
  const file = join(dir, `download-${randomUUID()}.log`);
  writeFileSync(file, bytes);
  try {
    const scan = scanSegment(file);
    // Damage (a whole frame failing its checksum, zeros) is never an interrupted upload:
    // refuse, naming the object, and delete nothing. Only a cut-short object may be torn.
    if (scan.ending === 'corrupt') throw new SvcError('storage_error', scan.problem!.msg.replace(file, uri));
    const { batches, end } = scan;
    const whole = end === bytes.byteLength && batches.length === object.lastEpoch - object.firstEpoch + 1
      && batches.every((b, i) => b.epoch === object.firstEpoch + i);
    return whole ? batches : null;
  } finally {
    unlinkSync(file);
  }
}

type Fetched = RedoBatch[] | 'missing' | 'incomplete';

/**
 * A download of another length than the object's listing (WAL and snapshot objects never
 * change once written) failed on the way and says nothing about the object: wait before
 * attempt `attempt + 1`, or, after the last, fail. Taken for a torn upload, it had the
 * newest acknowledged write deleted (a probe for WAL objects, a review's for snapshots).
 */
async function afterShortDownload(bucket: Bucket, key: string, got: number, listed: number, attempt: number): Promise<void> {
  if (attempt >= INCOMPLETE_READ_ATTEMPTS) {
    throw new SvcError('storage_error', `storage error: downloading s3://${bucket.name}/${key} gave ${got} bytes, its listing says ${listed}`);
  }
  await sleep(INCOMPLETE_RETRY_MS * attempt);
}

async function fetchWal(bucket: Bucket, dir: string, object: WalObject): Promise<Fetched> {
  for (let attempt = 1; ; attempt++) {
    const info = await bucket.get(object.key);
    if (info === null) return 'missing';
    if (info.bytes.byteLength !== object.bytes) {
      await afterShortDownload(bucket, object.key, info.bytes.byteLength, object.bytes, attempt);
      continue;
    }
    const batches = decodeWalObject(dir, object, info.bytes, `s3://${bucket.name}/${object.key}`);
    if (batches !== null) return batches;
    if (attempt >= INCOMPLETE_READ_ATTEMPTS) return 'incomplete';
    await sleep(INCOMPLETE_RETRY_MS * attempt);
  }
}

interface Replay {
  /** Key of the last object fully applied (or skipped as covered). */
  lastKey: string | undefined;
  /**
   * Why it stopped early: the next object starts after a gap, vanished, is torn, or holds
   * a batch the store cannot apply (`applyError`; the batches before it in the object are
   * applied, the store is back at the last whole batch).
   */
  stop: 'end' | 'gap' | 'missing' | 'incomplete' | 'unappliable' | 'overlap';
  stoppedAt?: WalObject;
  /** For 'overlap': the key of the object before it that holds some of its epochs. */
  overlapped?: string;
  applyError?: unknown;
  /** The object it stopped at is the newest one listed. */
  stoppedAtLast: boolean;
  replayed: number;
  bytes: number;
  objects: number;
}

/** applyRedo, leaving the store at its last committed batch when it throws. */
function applyBatch(store: Store, batch: RedoBatch): void {
  try {
    store.applyRedo(batch);
  } catch (err) {
    // A throw may leave the batch open (or applyRedo already rolled it back, in which case
    // rollback() reports "no batch open": nothing to undo).
    try { store.rollback(); } catch { /* already rolled back */ }
    throw err;
  }
}

/** Apply `objects` (sorted) to `store` in epoch order, downloading a few ahead. */
async function replayWal(bucket: Bucket, dir: string, store: Store, objects: WalObject[], lastKey: string | undefined): Promise<Replay> {
  const result: Replay = { lastKey, stop: 'end', stoppedAtLast: false, replayed: 0, bytes: 0, objects: 0 };
  const pending = objects.filter((o) => o.lastEpoch > store.committedEpoch());
  for (const o of objects) if (o.lastEpoch <= store.committedEpoch()) result.lastKey = o.key;
  // One writer's objects follow each other (the next starts after the last one's end; only
  // a snapshot may cover part of one): two objects that share epochs are two histories, a
  // writer's upload that landed after another took over. Replayed, they merged silently
  // (a review's probe): refused, every object kept.
  const lastEpochs = lastKey === undefined ? undefined : parseWalKey(lastKey);
  let before: { key: string; lastEpoch: number } | undefined = lastEpochs === undefined ? undefined : { key: lastKey!, ...lastEpochs };
  for (const object of objects) {
    if (before !== undefined && object.lastEpoch > store.committedEpoch() && object.firstEpoch <= before.lastEpoch) {
      result.stop = 'overlap';
      result.stoppedAt = object;
      result.overlapped = before.key;
      return result;
    }
    before = object;
  }
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
        try {
          applyBatch(store, batch);
        } catch (err) {
          result.stop = 'unappliable';
          result.stoppedAt = object;
          result.applyError = err;
          result.stoppedAtLast = i === pending.length - 1;
          return result;
        }
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
  /** The newest snapshot object, when it downloaded whole and is shorter than it says: torn. */
  tornSnapshot: string | null;
  /** The newest snapshot object, when it is whole and damaged (gone around; its epoch is covered). */
  damagedSnapshot: string | null;
}

/**
 * Download a snapshot object to the staging dir and read it. Null if it is gone; 'torn'
 * if it downloaded completely (as many bytes as its listing says) and is shorter than its
 * own table says (an upload that never finished); the storage_error, when it is whole and
 * still does not read (damage: never removed). A download or local failure and any other
 * error propagate: they say nothing about the object.
 */
async function fetchSnapshot(bucket: Bucket, dir: string, snapshot: SnapshotObject): Promise<Store | 'torn' | SvcError | null> {
  const { key } = snapshot;
  const file = join(dir, `download-${randomUUID()}.bin`);
  try {
    for (let attempt = 1; ; attempt++) {
      const got = await bucket.getToFile(key, file);
      if (got === null) return null;
      if (got.bytes === snapshot.bytes) break;
      await afterShortDownload(bucket, key, got.bytes, snapshot.bytes, attempt);
    }
    try {
      return readSnapshot(file);
    } catch (err) {
      if (err instanceof SnapshotCutShort) return 'torn';
      if (err instanceof SvcError && err.code === 'storage_error') return new SvcError('storage_error', err.msg.replace(file, `s3://${bucket.name}/${key}`));
      throw err; // version errors are final; anything else is a bug or a local problem
    }
  } finally {
    rmSync(file, { force: true });
  }
}

/** Newest snapshot object that reads whole (past a torn newest one), then the WAL after it. */
async function load(bucket: Bucket, dir: string): Promise<Loaded> {
  let store: Store | null = null;
  let snapshotEpoch = 0;
  let tornSnapshot: string | null = null;
  let damagedNewest: { key: string; epoch: number; problem: string } | null = null;
  const snapshots = await bucket.listSnapshots();
  for (const [i, snap] of snapshots.entries()) {
    const fetched = await fetchSnapshot(bucket, dir, snap);
    if (fetched === null) continue; // deleted since the listing: an older one will do
    if (fetched === 'torn' && i === 0) {
      // Still being written, or its upload was interrupted: the previous snapshot and its
      // WAL are kept for exactly this.
      tornSnapshot = snap.key;
      continue;
    }
    if (fetched instanceof SvcError && i === 0) {
      // Whole and damaged: gone around through the previous snapshot and the WAL, as on
      // disk, if they reach its epoch (checked below); kept either way.
      damagedNewest = { key: snap.key, epoch: snap.epoch, problem: fetched.msg };
      continue;
    }
    if (fetched === 'torn' || fetched instanceof SvcError || fetched.committedEpoch() !== snap.epoch) {
      // An older snapshot damaged after it was whole is corruption, not a torn upload: stop
      // and keep every object.
      const what = fetched === 'torn' ? 'is cut short' : fetched instanceof SvcError ? `does not read: ${fetched.msg}` : `holds epoch ${fetched.committedEpoch()}`;
      throw new SvcError('storage_error', `storage error: cannot recover ${bucket.uri}: snapshot s3://${bucket.name}/${snap.key} ${what}`);
    }
    store = fetched;
    snapshotEpoch = snap.epoch;
    break;
  }
  store ??= Store.create();
  // Everything loaded is in the bucket, hence durable: readers may see it all.
  store.publish(store.committedEpoch());
  store.captureRedo = false;
  const replay = await replayWal(bucket, dir, store, await bucket.listWal(), undefined);
  if (replay.stop === 'unappliable') throw replay.applyError; // a bug or a damaged history: never skipped
  if (damagedNewest !== null) {
    // The damaged snapshot may hold batches whose WAL objects never landed (a snapshot makes
    // the batches it holds durable): without them, refuse rather than lose them.
    if (store.committedEpoch() < damagedNewest.epoch) {
      throw new SvcError('storage_error', `storage error: cannot recover ${bucket.uri}: the newest snapshot s3://${bucket.name}/${damagedNewest.key} is damaged (${damagedNewest.problem}), and the previous snapshot with the WAL reaches epoch ${store.committedEpoch()} of its ${damagedNewest.epoch}; every object is kept`);
    }
    process.stderr.write(`svcdb: going around a damaged snapshot in ${bucket.uri}, kept as it is: ${damagedNewest.problem}\n`);
  }
  return {
    store,
    report: { snapshotEpoch, replayedBatches: replay.replayed, truncatedBytes: 0, epoch: store.committedEpoch() },
    lastKey: replay.lastKey,
    replay,
    tornSnapshot,
    damagedSnapshot: damagedNewest?.key ?? null,
  };
}

function describeStop(bucket: Bucket, replay: Replay, epoch: number): string {
  const at = replay.stoppedAt ? `s3://${bucket.name}/${replay.stoppedAt.key}` : 'the WAL';
  switch (replay.stop) {
    case 'gap': return `WAL gap: expected epoch ${epoch + 1}, ${at} starts at ${replay.stoppedAt?.firstEpoch}`;
    case 'overlap': return `two WAL histories: ${at} holds epochs of s3://${bucket.name}/${replay.overlapped} (a writer's upload that landed after another writer took over); every object is kept, remove the one that is not wanted`;
    case 'missing': return `${at} vanished while it was read (another writer?)`;
    case 'incomplete': return `${at} does not hold the epochs its name says (torn or damaged)`;
    case 'unappliable': return `a batch of ${at} cannot be applied: ${replay.applyError instanceof Error ? replay.applyError.message : String(replay.applyError)}`;
    case 'end': return 'no problem';
  }
}

// ---------------------------------------------------------------- writer

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

export class ObjectWriter implements DurableStorage {
  readonly store: Store;
  readonly report: RecoveryReport;
  readonly uri: string;
  private readonly bucket: Bucket;
  private readonly lock: WriterLock;
  private readonly dir: string;
  private readonly ownsDir: boolean;
  private readonly options: ObjectWriterOptions;
  /** Frames of committed batches not taken by an upload yet, and their epoch range. */
  private frames: Buffer[] = [];
  private framesFirst = 0;
  private framesLast = 0;
  /** Epoch of the newest logged batch (uploaded or not). */
  private loggedEpoch: number;
  /** Highest epoch that is in the bucket (WAL object or snapshot), hence published. */
  private durable: number;
  private waiters: { epoch: number; resolve: () => void; reject: (err: SvcError) => void }[] = [];
  /** The upload loop, while it runs. */
  private loop: Promise<void> | null = null;
  /** Ends the backoff sleep of a retry early (close, fencing). */
  private wake: (() => void) | null = null;
  private lastSnapshotEpoch: number;
  /** The epoch of the running snapshot's cut, else of the last snapshot: WAL past it counts towards the next. */
  private snapshotCutEpoch: number;
  private walBytesSinceSnapshot: number;
  private walObjectsSinceSnapshot: number;
  /** The snapshot being taken (the loop's, close()'s or snapshot()'s: one at a time). */
  private snapshotting: Promise<boolean> | null = null;
  private readonly snapshotThread = new SnapshotThread();
  /** A snapshot key whose upload read back damaged and stayed in place: the next upload of it replaces it. */
  private damagedUpload: string | null = null;
  /** The key of a damaged snapshot found at open that could not be moved aside: never written over. */
  damagedInPlace: string | null = null;
  /** Why the last group upload failed, until one succeeds: not ready, new writes refused. */
  private uploadProblem: string | null = null;
  private snapshotProblem: string | null = null;
  private snapshotFailures = 0;
  private snapshotRetryAt = 0;
  /** The lock is lost or another writer wrote our keys: nothing more is uploaded, ever. */
  private fenced: SvcError | null = null;
  /** Set once batches were abandoned undurable (fenced, or closed first): what their waiters got. */
  private abandoned: SvcError | null = null;
  private closing: Promise<void> | null = null;
  private readonly healthSignal = new HealthSignal();

  private constructor(bucket: Bucket, lock: WriterLock, dir: { dir: string; owned: boolean }, loaded: Loaded, options: ObjectWriterOptions) {
    this.bucket = bucket;
    this.uri = bucket.uri;
    this.lock = lock;
    this.dir = dir.dir;
    this.ownsDir = dir.owned;
    this.options = options;
    this.store = loaded.store;
    this.report = loaded.report;
    this.durable = loaded.store.committedEpoch();
    this.loggedEpoch = this.durable;
    this.lastSnapshotEpoch = this.snapshotCutEpoch = loaded.report.snapshotEpoch;
    this.walBytesSinceSnapshot = loaded.replay.bytes;
    this.walObjectsSinceSnapshot = loaded.replay.objects;
    this.store.captureRedo = true;
    // Readers see a batch only once it is in the bucket (publish() after its upload).
    this.store.publishOnCommit = false;
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
          if (writer === null) lostBeforeOpen = reason;
          else writer.fence(`lost the writer lock on ${bucket.uri}: ${reason}`);
        },
      });
    } catch (err) {
      bucket.close();
      throw err;
    }
    let dir: { dir: string; owned: boolean } | null = null;
    try {
      dir = workDir(storage);
      const loaded = await load(bucket, dir.dir);
      // Objects torn by an upload that never completed (a writer killed mid-PUT on a server
      // whose PUTs are not atomic, like s3rver) were never acknowledged: we hold the lock,
      // so remove them before our own history reuses their epochs. Real S3 never has any.
      // Only the newest of each kind, downloaded whole and still unreadable, counts as torn.
      const torn = loaded.tornSnapshot !== null ? [loaded.tornSnapshot] : [];
      if (loaded.replay.stop === 'incomplete' && loaded.replay.stoppedAtLast) torn.push(loaded.replay.stoppedAt!.key);
      else if (loaded.replay.stop !== 'end') {
        throw new SvcError('storage_error', `storage error: cannot recover ${bucket.uri}: ${describeStop(bucket, loaded.replay, loaded.store.committedEpoch())}`);
      }
      if (lostBeforeOpen !== null) throw new SvcError('storage_error', `storage error: lost the writer lock on ${bucket.uri}: ${lostBeforeOpen}`);
      if (torn.length > 0 || loaded.damagedSnapshot !== null) {
        // Deleting is for the lock holder only: make sure the lease did not run out while loading.
        if (!(await lock.ensureFresh())) throw new SvcError('storage_error', `storage error: the writer lock on ${bucket.uri} could not be renewed; removing nothing`);
      }
      if (torn.length > 0) {
        process.stderr.write(`svcdb: removing objects of an interrupted upload from ${bucket.uri}: ${torn.join(', ')}\n`);
        await bucket.delete(torn);
      }
      writer = new ObjectWriter(bucket, lock, dir, loaded, options);
      if (loaded.damagedSnapshot !== null) {
        // Its key is the next snapshot's (the same epoch): kept aside. If it cannot be moved
        // (a copy is limited to 5 GB), it stays, and no snapshot is taken at its epoch: the
        // next write's epoch has another key.
        try {
          const aside = await bucket.keepAside(loaded.damagedSnapshot);
          process.stderr.write(`svcdb: kept the damaged snapshot s3://${bucket.name}/${loaded.damagedSnapshot} as s3://${bucket.name}/${aside}\n`);
        } catch (err) {
          writer.damagedInPlace = loaded.damagedSnapshot;
          process.stderr.write(`svcdb: the damaged snapshot s3://${bucket.name}/${loaded.damagedSnapshot} stays in place (moving it aside failed: ${errorText(err)}); no snapshot is taken at its epoch\n`);
        }
      }
      return writer;
    } catch (err) {
      try { await lock.release(); } catch { /* the lease runs out */ }
      if (dir?.owned) rmSync(dir.dir, { recursive: true, force: true });
      bucket.close();
      throw err;
    }
  }

  /** Highest epoch that is in the bucket; readers see exactly the batches up to it. */
  get durableEpoch(): number {
    return this.durable;
  }

  /**
   * Ready: uploads succeed, writes are taken. Not ready while the last group upload failed
   * (retrying), after the lock was lost, or once closing. A failing snapshot is a problem
   * but the writer stays ready: the WAL keeps every write.
   */
  health(): StorageHealth {
    if (this.fenced !== null) return { ready: false, problem: this.fenced.message };
    if (this.closing !== null) return { ready: false, problem: `storage ${this.uri} is closing` };
    if (this.uploadProblem !== null) return { ready: false, problem: this.uploadProblem };
    return { ready: true, problem: this.snapshotProblem };
  }

  /** Call `listener` on every change of health(); returns the unsubscribe function. */
  onHealthChange(listener: (health: StorageHealth) => void): () => void {
    return this.healthSignal.on(listener);
  }

  private healthChanged(): void {
    this.healthSignal.update(this.health());
  }

  /**
   * Called with the batch before it is published: a throw rolls the batch back. While
   * storage fails (or the lock is lost, or closing) new batches are refused here, so a
   * write answered with this error never happened.
   */
  logBatch(batch: RedoBatch): void {
    const refused = this.fenced?.message ?? (this.closing !== null ? `storage ${this.uri} is closing` : this.uploadProblem);
    if (refused !== null) {
      throw new SvcError('storage_error', `storage error: storage unavailable (${refused}); the write was not applied`);
    }
    if (batch.epoch !== this.loggedEpoch + 1) {
      throw new SvcError('internal_error', `internal error: WAL batch ${batch.epoch} logged after ${this.loggedEpoch}`);
    }
    if (this.frames.length === 0) this.framesFirst = batch.epoch;
    this.frames.push(encodeFrame(batch));
    this.framesLast = batch.epoch;
    this.loggedEpoch = batch.epoch;
  }

  /**
   * Resolves when every batch logged so far is in the bucket. Callers that arrive while
   * an upload runs share the next one (group commit); the first upload of a burst waits
   * for setImmediate so the requests already queued join it. A failing upload is retried,
   * so this waits through an outage; it rejects only with
   * writer_fenced_commit_outcome_unknown, when the lock is lost or the writer closes
   * before the batches are durable (they may or may not have landed).
   */
  sync(): Promise<void> {
    const epoch = this.loggedEpoch;
    if (epoch <= this.durable) return Promise.resolve();
    if (this.abandoned !== null) return Promise.reject(this.abandoned);
    return new Promise((resolve, reject) => {
      this.waiters.push({ epoch, resolve, reject });
      this.kick();
    });
  }

  private kick(): void {
    if (this.loop !== null || this.frames.length === 0 || this.abandoned !== null) return;
    this.loop = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.uploadLoop())
      .catch((err: unknown) => {
        // Only a bug gets here (uploadLoop catches storage failures): stop, say so.
        process.stderr.write(`svcdb: upload loop failed: ${String(err)}\n`);
        this.fence(`internal error in the upload loop: ${errorText(err)}`);
      })
      .finally(() => {
        this.loop = null;
        if (this.fenced !== null && this.loggedEpoch > this.durable) {
          this.abandon(`${this.fenced.message}: the write may or may not have happened`);
        }
        // Batches logged by continuations of the last acknowledgements, after the loop
        // looked for more: they need a loop of their own.
        this.kick();
      });
  }

  private async uploadLoop(): Promise<void> {
    while (this.frames.length > 0 && this.abandoned === null) {
      // Frames are one per epoch, in order: the group is the first ones up to the bound.
      let count = 1, bytes = this.frames[0]!.byteLength;
      while (count < this.frames.length && bytes + this.frames[count]!.byteLength <= limits.walObjectBytesMax) bytes += this.frames[count++]!.byteLength;
      const first = this.framesFirst;
      const last = first + count - 1;
      const body = Buffer.concat([segmentHeader(first), ...this.frames.slice(0, count)]);
      this.frames = this.frames.slice(count);
      this.framesFirst = last + 1;
      if (!(await this.uploadGroup(this.bucket.walKey(first, last), body))) {
        this.abandon(this.fenced !== null
          ? `${this.fenced.message}: the write may or may not have happened`
          : `storage ${this.uri} closed before the write was confirmed durable: it may or may not have happened`);
        return;
      }
      this.markDurable(last);
      if (last > this.snapshotCutEpoch) {
        this.walBytesSinceSnapshot += body.byteLength;
        this.walObjectsSinceSnapshot++;
      }
      // Beside the uploads, not before the next one: a snapshot of a large store takes
      // minutes to write, upload and read back, and every write waited for it (a review).
      void this.maybeSnapshot();
    }
  }

  /**
   * PUT one group, retrying the same key and bytes with backoff until it lands. False
   * when it gave up: fenced, or closing (one attempt each while closing).
   */
  private async uploadGroup(key: string, body: Buffer): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      if (this.fenced !== null) return false;
      let problem: string;
      try {
        if (!(await this.lock.ensureFresh())) {
          throw new SvcError('storage_error', `storage error: the writer lock on ${this.uri} could not be renewed within its lease; not writing until it is`);
        }
        if (await this.putImmutable(key, body) === 'conflict') {
          this.fence(`s3://${this.bucket.name}/${key} already exists with other contents: another writer wrote ${this.uri}`);
          return false;
        }
        // Fenced meanwhile (a snapshot runs beside the uploads and may find another writer).
        if (this.fenced !== null) return false;
        if (!(await this.lock.confirm())) {
          // The upload ended past the lease: it may have landed after another writer took
          // over, so its batches are not acknowledged until the lock is confirmed ours (a
          // retry PUTs the same bytes, which the bucket already holds). A lost lock fences.
          if (this.fenced !== null) return false;
          throw this.uploadedPastLease(key);
        }
        if (this.uploadProblem !== null) {
          process.stderr.write(`svcdb: storage ${this.uri} answers again after ${attempt - 1} failed upload attempts: ready\n`);
          this.uploadProblem = null;
          this.healthChanged();
        }
        return true;
      } catch (err) {
        problem = errorText(err);
      }
      if (this.uploadProblem === null) {
        process.stderr.write(`svcdb: upload to ${this.uri} failed, retrying until it succeeds; not ready, new writes refused: ${problem}\n`);
      }
      this.uploadProblem = problem;
      this.healthChanged();
      if (this.closing !== null) return false;
      await this.pause(backoffMs(attempt, limits.storageRetryFirstMs, limits.storageRetryMaxMs));
    }
  }

  /** Sleep `ms`, or less if close() or fencing wakes us. */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.wake = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
    });
  }

  /** Everything up to `epoch` is in the bucket: publish it and answer its waiters. */
  private markDurable(epoch: number): void {
    if (epoch <= this.durable) return;
    this.durable = epoch;
    this.store.publish(epoch);
    if (this.waiters.length === 0) return;
    const still: typeof this.waiters = [];
    for (const w of this.waiters) {
      if (w.epoch <= epoch) w.resolve();
      else still.push(w);
    }
    this.waiters = still;
  }

  /** Undurable batches will never be uploaded: tell their waiters the outcome is unknown. */
  private abandon(message: string): void {
    this.abandoned ??= new SvcError('writer_fenced_commit_outcome_unknown', message);
    this.frames = [];
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.reject(this.abandoned);
  }

  /** Stop writing for good: the lock is lost or another writer wrote our keys. */
  private fence(reason: string): void {
    if (this.fenced !== null) return;
    this.fenced = new SvcError('storage_error', `storage error: ${reason}`);
    process.stderr.write(`svcdb: writer fenced, nothing more is uploaded; not ready: ${reason}\n`);
    this.wake?.();
    if (this.loop === null) this.abandon(`${this.fenced.message}: the write may or may not have happened`);
    this.healthChanged();
  }

  /**
   * PUT an object that must not exist yet (`If-None-Match: *`: a second writer that slipped
   * past the lock cannot overwrite history on servers that honour it). A 412 after a retry
   * of our own PUT that did land is recognised by comparing the bytes.
   */
  private async putImmutable(key: string, body: Uint8Array): Promise<'stored' | 'conflict'> {
    const put = await this.bucket.put(key, body, { ifNoneMatch: true });
    if (put !== 'precondition') return 'stored';
    const existing = await this.bucket.get(key);
    if (existing !== null && Buffer.compare(Buffer.from(existing.bytes), Buffer.from(body)) === 0) return 'stored';
    return 'conflict';
  }

  /**
   * Snapshot when the WAL since the last one is big enough, unless one is running or a
   * failure asks to wait. Never rejects: a failure is the health problem, retried with backoff.
   */
  private async maybeSnapshot(): Promise<void> {
    const due = this.walBytesSinceSnapshot >= this.options.snapshotWalBytes || this.walObjectsSinceSnapshot >= this.options.snapshotWalObjects;
    if (!due || this.snapshotting !== null || this.closing !== null || monotonicMs() < this.snapshotRetryAt) return;
    try {
      // The WAL uploaded past its cut while it ran may make the next one due already; one
      // that took nothing (no new epoch) does not look again (it would spin).
      if (await this.snapshotOnce()) setImmediate(() => { void this.maybeSnapshot(); });
      if (this.snapshotProblem !== null) {
        process.stderr.write(`svcdb: snapshot of ${this.uri} succeeded again after ${this.snapshotFailures} failures\n`);
        this.snapshotProblem = null;
        this.snapshotFailures = 0;
        this.healthChanged();
      }
    } catch (err) {
      this.snapshotFailures++;
      const delayMs = backoffMs(this.snapshotFailures, limits.snapshotRetryFirstMs, limits.snapshotRetryMaxMs);
      this.snapshotRetryAt = monotonicMs() + delayMs;
      if (this.snapshotProblem === null) {
        process.stderr.write(`svcdb: snapshot of ${this.uri} failed, retrying with backoff (the WAL keeps every write): ${errorText(err)}\n`);
      }
      this.snapshotProblem = `snapshot failed ${this.snapshotFailures} times (the WAL keeps every write): ${errorText(err)}`;
      this.healthChanged();
    }
  }

  /** Upload a snapshot of the store now (waits for what is logged to be durable first). */
  async snapshot(): Promise<void> {
    await this.sync();
    await this.snapshotOnce();
  }

  /** Throws unless the writer lock's lease is fresh enough to write under (renewing it if need be). */
  private async requireFreshLease(): Promise<void> {
    if (!(await this.lock.ensureFresh())) {
      throw new SvcError('storage_error', `storage error: the writer lock on ${this.uri} could not be renewed within its lease`);
    }
  }

  /** An upload that ended past the lease, while the lock cannot be confirmed ours: not acknowledged (retried). */
  private uploadedPastLease(key: string): SvcError {
    return new SvcError('storage_error', `storage error: s3://${this.bucket.name}/${key} was uploaded after the writer lock's lease ran out, and the lock cannot be confirmed ours yet`);
  }

  /** Whether it took one (false: nothing new since the last). */
  private snapshotOnce(): Promise<boolean> {
    this.snapshotting ??= this.snapshotNow().finally(() => { this.snapshotting = null; });
    return this.snapshotting;
  }

  private async snapshotNow(): Promise<boolean> {
    if (this.fenced !== null) throw this.fenced;
    if (this.store.committedEpoch() === this.lastSnapshotEpoch) return false;
    await this.requireFreshLease();
    const epoch = this.store.committedEpoch();
    // A damaged snapshot found at open that could not be moved aside holds this epoch's key.
    if (this.bucket.snapshotKey(epoch) === this.damagedInPlace) return false;
    // Cut between batches; the snapshot thread writes it while writes go on. The WAL of
    // epochs past the cut counts towards the next snapshot (uploadLoop); if this one fails,
    // what it would have covered counts again.
    const walBytesAtCut = this.walBytesSinceSnapshot, walObjectsAtCut = this.walObjectsSinceSnapshot;
    this.walBytesSinceSnapshot = this.walObjectsSinceSnapshot = 0;
    this.snapshotCutEpoch = epoch;
    try {
      await this.uploadSnapshot(epoch);
    } catch (err) {
      this.snapshotCutEpoch = this.lastSnapshotEpoch;
      this.walBytesSinceSnapshot += walBytesAtCut;
      this.walObjectsSinceSnapshot += walObjectsAtCut;
      throw err;
    }
    return true;
  }

  /** Cut, write, upload and verify the snapshot of `epoch`, then prune what it covers. */
  private async uploadSnapshot(epoch: number): Promise<void> {
    const cut = this.store.cut();
    const file = join(this.dir, snapshotName(cut.epoch));
    let size: number;
    try {
      size = await this.snapshotThread.write(this.store.shared, cut, file);
    } finally {
      this.store.releaseCut(cut);
    }
    const key = this.bucket.snapshotKey(epoch);
    try {
      // The snapshot may hold batches whose group is not uploaded yet: once it is in the
      // bucket, read back and verified, they are durable (their WAL object follows and
      // overlaps, which recovery skips).
      // A copy of this epoch that read back damaged and could not be moved aside is ours to replace.
      const condition = key === this.damagedUpload ? {} : { ifNoneMatch: true };
      // Writing the file took a while: the lease must still be fresh for its upload.
      await this.requireFreshLease();
      if (await this.bucket.putFile(file, key, condition) === 'precondition') {
        // holdsSnapshot reads the object whole: that is its read-back.
        if (!(await this.holdsSnapshot(key, epoch))) {
          this.fence(`s3://${this.bucket.name}/${key} already exists and is not our snapshot: another writer wrote ${this.uri}`);
          throw this.fenced!;
        }
      } else {
        await this.verifyUploaded(key, epoch, size);
      }
    } finally {
      rmSync(file, { force: true });
    }
    // Fenced while it uploaded (it runs beside the WAL uploads): it acknowledges nothing.
    if (this.fenced !== null) throw this.fenced;
    if (!(await this.lock.confirm())) {
      // As for a WAL group (uploadGroup): not acknowledged, and nothing pruned.
      throw this.fenced ?? this.uploadedPastLease(key);
    }
    const previous = this.lastSnapshotEpoch;
    this.lastSnapshotEpoch = epoch;
    this.markDurable(epoch);
    // Keep one interval back: the previous snapshot and the WAL after it, so recovery can
    // fall back past a torn newest snapshot and followers behind by less than an
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
        process.stderr.write(`svcdb: deleting covered objects failed: ${errorText(err)}\n`);
      }
    }
  }

  /**
   * Read the uploaded snapshot back and check every checksum before anything relies on it
   * (its batches acknowledged, older objects deleted): uploads carry no checksum the
   * server checks (requestChecksumCalculation WHEN_REQUIRED, for S3-compatible servers),
   * so bytes changed on the way or at rest show only here. A damaged copy is kept aside as
   * `<key>.damaged-<ms>` and the snapshot fails, to be retried with backoff; the previous
   * snapshot and the WAL still hold every acknowledged write.
   */
  private async verifyUploaded(key: string, epoch: number, size: number): Promise<void> {
    const file = join(this.dir, `readback-${randomUUID()}.bin`);
    const where = `s3://${this.bucket.name}/${key}`;
    let problem: string;
    try {
      const got = await this.bucket.getToFile(key, file);
      if (got === null) {
        throw new SvcError('storage_error', `storage error: the snapshot ${where} was gone when read back after its upload`);
      }
      if (got.bytes !== size) {
        problem = `${got.bytes} bytes read back of the ${size} uploaded`;
      } else {
        const verdict = await this.snapshotThread.verify(file);
        if (typeof verdict === 'number') {
          if (verdict === epoch) {
            if (this.damagedUpload === key) this.damagedUpload = null;
            return;
          }
          problem = `it holds epoch ${verdict}, not ${epoch}`;
        } else {
          problem = verdict.msg.replace(/^storage error: /, '').replace(file, where);
        }
      }
    } finally {
      rmSync(file, { force: true });
    }
    // Kept aside; if that fails (a copy is limited to 5 GB), the damaged copy stays under
    // its key and the retry replaces it.
    let kept: string;
    try {
      kept = `kept as s3://${this.bucket.name}/${await this.bucket.keepAside(key)}`;
      this.damagedUpload = null;
    } catch (err) {
      this.damagedUpload = key;
      kept = `left in place, to be replaced by the retry (moving it aside failed: ${errorText(err)})`;
    }
    throw new SvcError('storage_error', `storage error: the snapshot ${where} read back damaged (${problem}); ${kept}, nothing older deleted`);
  }

  /**
   * After a 412: is the existing object our own snapshot of `epoch` (a retry of a PUT
   * that landed)? Its bytes may differ from ours (the published epoch in the meta
   * section moves on), but a whole snapshot of that epoch of our history is the same state.
   */
  private async holdsSnapshot(key: string, epoch: number): Promise<boolean> {
    const listed = (await this.bucket.listSnapshots()).find((snapshot) => snapshot.key === key);
    if (listed === undefined) return false;
    const fetched = await fetchSnapshot(this.bucket, this.dir, listed);
    return fetched instanceof Store && fetched.committedEpoch() === epoch;
  }

  /**
   * Upload what is pending (one attempt per group: a close does not wait out an outage),
   * snapshot, release the lock. Writes not durable by then are answered
   * writer_fenced_commit_outcome_unknown.
   */
  close(): Promise<void> {
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  private async closeOnce(): Promise<void> {
    let stopProblem: SvcError | null = null;
    this.healthChanged();
    this.wake?.();
    try {
      this.kick();
      while (this.loop !== null) await this.loop;
      // A snapshot started beside the uploads ends first (its outcome is its own: it may
      // make the last batches durable); the stop's snapshot is of everything.
      await this.snapshotting?.catch(() => undefined);
      if (this.loggedEpoch > this.durable) {
        this.abandon(`storage ${this.uri} closed before the write was confirmed durable: it may or may not have happened`);
      }
      if (this.fenced === null && this.abandoned === null) {
        try {
          await this.snapshotOnce();
        } catch (err) {
          stopProblem = new SvcError('storage_error', `storage error: the snapshot at stop failed (the WAL keeps every write): ${errorText(err)}`);
        }
      }
      try { await this.lock.release(); } catch { /* the lease runs out */ }
    } finally {
      await this.snapshotThread.close();
      if (this.ownsDir) rmSync(this.dir, { recursive: true, force: true });
      this.bucket.close();
    }
    if (stopProblem !== null) throw stopProblem;
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
  /** Set while a batch cannot be applied: following stopped there, the store serves what it had. */
  private stuck: string | null = null;
  private readonly healthSignal = new HealthSignal();

  private constructor(bucket: Bucket, dir: { dir: string; owned: boolean }, loaded: Loaded) {
    this.bucket = bucket;
    this.uri = bucket.uri;
    this.dir = dir.dir;
    this.ownsDir = dir.owned;
    this.store = loaded.store;
    this.report = loaded.report;
    this.lastKey = loaded.lastKey;
    // Opened at an object cut short that newer ones follow: not an upload in flight.
    if (loaded.replay.stop === 'incomplete' && !loaded.replay.stoppedAtLast) this.setStuck(this.stoppedAt(loaded.replay));
  }

  private stoppedAt(replay: Replay): string {
    return `stopped following ${this.uri} at epoch ${this.store.committedEpoch()}: ${describeStop(this.bucket, replay, this.store.committedEpoch())}`;
  }

  static async open(storage: ObjectStorageOptions): Promise<ObjectFollower> {
    const bucket = await Bucket.connect(storage);
    let dir: { dir: string; owned: boolean } | null = null;
    try {
      dir = workDir(storage);
      return new ObjectFollower(bucket, dir, await loadConsistent(bucket, dir.dir));
    } catch (err) {
      if (dir?.owned) rmSync(dir.dir, { recursive: true, force: true });
      bucket.close();
      throw err;
    }
  }

  /** Not ready once a batch could not be applied (reads would stay stale for good). */
  health(): StorageHealth {
    return this.stuck !== null ? { ready: false, problem: this.stuck } : { ready: true, problem: null };
  }

  onHealthChange(listener: (health: StorageHealth) => void): () => void {
    return this.healthSignal.on(listener);
  }

  /**
   * Apply the WAL objects written since the last refresh. Returns true when the store was
   * replaced instead (the follower fell more than a snapshot interval behind, so the WAL
   * it needed is gone and it reloaded from the newest snapshot): holders of the old
   * `store` must switch to the new one. A batch that cannot be applied stops following
   * there (health() not ready, logged once); later refreshes retry that same batch, never
   * one after it.
   */
  refresh(): Promise<boolean> {
    this.refreshing ??= this.refreshOnce().catch((err: unknown) => {
      // A damaged object, or storage it cannot reach: not ready while it lasts (it serves
      // what it has; a later refresh that gets through makes it ready again).
      this.setStuck(`cannot follow ${this.uri} past epoch ${this.store.committedEpoch()}: ${err instanceof Error ? err.message : String(err)}`);
      throw err;
    }).finally(() => { this.refreshing = null; });
    return this.refreshing;
  }

  private async refreshOnce(): Promise<boolean> {
    const objects = await this.bucket.listWal(this.lastKey);
    const replay = await replayWal(this.bucket, this.dir, this.store, objects, this.lastKey);
    this.lastKey = replay.lastKey;
    // A batch it cannot apply, two histories, or an object cut short that newer ones follow
    // (not an upload still in flight): stopped there, and says so.
    if (replay.stop === 'unappliable' || replay.stop === 'overlap' || (replay.stop === 'incomplete' && !replay.stoppedAtLast)) {
      this.setStuck(this.stoppedAt(replay));
      return false;
    }
    if (replay.stop === 'end') this.setStuck(null);
    if (replay.stop === 'end' || replay.stop === 'incomplete') return false; // torn: still being written
    // A gap or a vanished object: the writer deleted WAL we still needed.
    const newest = (await this.bucket.listSnapshots())[0];
    if (newest === undefined || newest.epoch <= this.store.committedEpoch()) return false;
    const loaded = await loadConsistent(this.bucket, this.dir);
    this.store = loaded.store;
    this.lastKey = loaded.lastKey;
    this.setStuck(null);
    return true;
  }

  private setStuck(problem: string | null): void {
    if (problem === this.stuck) return;
    if (problem !== null && this.stuck === null) process.stderr.write(`svcdb: ${problem}; serving the last good epoch; not ready\n`);
    if (problem === null) process.stderr.write(`svcdb: following ${this.uri} again at epoch ${this.store.committedEpoch()}: ready\n`);
    this.stuck = problem;
    this.healthSignal.update(this.health());
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
    if (attempt >= LOAD_ATTEMPTS || loaded.replay.stop === 'overlap') {
      throw new SvcError('storage_error', `storage error: cannot load ${bucket.uri}: ${describeStop(bucket, loaded.replay, loaded.store.committedEpoch())}`);
    }
  }
}
