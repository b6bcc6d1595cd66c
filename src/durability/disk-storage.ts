// Disk storage for one database directory: the single-writer lock, recovery (newest whole
// snapshot + replay of later WAL records), the WAL append that precedes every commit,
// group fsync, snapshot rotation, and read-only followers of the same directory.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import lockfile from 'proper-lockfile';
import { SvcError } from '../protocol/errors.js';
import { Store, type RedoBatch } from '../store/store.js';
import { acquireWriterLock } from './disk-lock.js';
import { listSnapshots, readSnapshot, writeSnapshot } from './snapshot.js';
import { listSegments, readSegment, WalWriter } from './wal.js';

export interface DiskOptions {
  /** Snapshot once the current WAL segment holds this many bytes. */
  snapshotWalBytes: number;
}

export const defaultDiskOptions: DiskOptions = { snapshotWalBytes: 64 * 1024 * 1024 };

export interface RecoveryReport {
  snapshotEpoch: number;
  replayedBatches: number;
  truncatedBytes: number;
  epoch: number;
}

/** Load the newest readable snapshot, then apply every later WAL record. */
function recover(dir: string, readOnly: boolean): { store: Store; report: RecoveryReport; segmentEnds: Map<string, number> } {
  let store: Store | null = null;
  let snapshotEpoch = 0;
  for (const snap of listSnapshots(dir)) {
    try {
      store = readSnapshot(snap.file);
      snapshotEpoch = snap.epoch;
      break;
    } catch (err) {
      if (err instanceof SvcError && err.code !== 'storage_error') throw err; // version errors are final
      // A damaged snapshot: fall back to an older one (its WAL may still be there).
    }
  }
  store ??= Store.create();
  store.captureRedo = false;
  let replayedBatches = 0, truncatedBytes = 0;
  const segmentEnds = new Map<string, number>();
  for (const segment of listSegments(dir)) {
    const { batches, end, truncatedBytes: torn } = readSegment(segment.file, readOnly);
    segmentEnds.set(segment.file, end);
    truncatedBytes += torn;
    for (const batch of batches) {
      if (batch.epoch <= store.committedEpoch()) continue;
      if (batch.epoch !== store.committedEpoch() + 1) {
        throw new SvcError('storage_error', `storage error: WAL gap: expected epoch ${store.committedEpoch() + 1}, found ${batch.epoch} in ${segment.file}`);
      }
      store.applyRedo(batch);
      replayedBatches++;
    }
  }
  return { store, report: { snapshotEpoch, replayedBatches, truncatedBytes, epoch: store.committedEpoch() }, segmentEnds };
}

// ---------------------------------------------------------------- single-writer lock

interface Holder { pid: number; host: string; since: string }

function acquireLock(dir: string, onLost: (err: Error) => void): () => void {
  const lockPath = join(dir, 'writer.lock');
  const holderFile = join(dir, 'writer.pid');
  const tryLock = () => lockfile.lockSync(dir, { lockfilePath: lockPath, stale: 10_000, update: 2_000, realpath: false, onCompromised: onLost });
  let release: () => void;
  try {
    release = tryLock();
  } catch (err) {
    if ((err as { code?: string }).code !== 'ELOCKED') throw err;
    const holder = readHolder(holderFile);
    const alive = holder !== null && holder.host === hostname() && processAlive(holder.pid);
    if (alive || holder === null) {
      const who = holder ? `process ${holder.pid} on ${holder.host} (since ${holder.since})` : 'another process';
      throw new SvcError('storage_error', `storage error: ${dir} is locked by a writer: ${who}`);
    }
    // The holder died without releasing (kill -9): its lock is ours to take.
    rmSync(lockPath, { recursive: true, force: true });
    release = tryLock();
  }
  const holder: Holder = { pid: process.pid, host: hostname(), since: new Date().toISOString() };
  // Written whole or not at all: a process killed here must not leave half a file behind.
  writeFileSync(`${holderFile}.tmp`, JSON.stringify(holder));
  renameSync(`${holderFile}.tmp`, holderFile);
  return () => {
    try { unlinkSync(holderFile); } catch { /* gone */ }
    release();
  };
}

function readHolder(file: string): Holder | null {
  if (!existsSync(file)) return null;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Holder;
  } catch {
    return null;
  }
}

/** Whether a process with this id runs on this host (EPERM: it does, as another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as { code?: string }).code === 'EPERM';
  }
}

// ---------------------------------------------------------------- writer

export class DiskWriter {
  readonly store: Store;
  readonly report: RecoveryReport;
  private wal: WalWriter;
  private releaseLock: (() => void) | null;
  /** After a failed fsync nothing more is acknowledged as durable (like a database panic). */
  private failed: SvcError | null = null;

  private constructor(readonly dir: string, readonly options: DiskOptions) {
    mkdirSync(dir, { recursive: true });
    this.releaseLock = acquireWriterLock(dir, (err) => {
      // Someone removed or replaced the lock file: stop acknowledging writes from this process.
      this.failed = new SvcError('storage_error', `storage error: lost the writer lock on ${dir}: ${err.message}`);
    });
    try {
      const { store, report } = recover(dir, false);
      this.store = store;
      this.report = report;
      store.captureRedo = true;
      this.wal = new WalWriter(dir, store.committedEpoch() + 1);
    } catch (err) {
      this.releaseLock();
      this.releaseLock = null;
      throw err;
    }
  }

  static open(dir: string, options: DiskOptions = defaultDiskOptions): DiskWriter {
    return new DiskWriter(dir, options);
  }

  /** Called with the batch before it is published: a failed append rolls the batch back. */
  logBatch(batch: RedoBatch): void {
    if (this.failed) throw this.failed;
    this.wal.append(batch);
  }

  /** Make every logged batch durable (one fsync for the whole group). */
  sync(): void {
    if (this.failed) throw this.failed;
    try {
      this.wal.sync();
    } catch (err) {
      this.failed = err instanceof SvcError ? err : new SvcError('storage_error', `storage error: ${(err as Error).message}`);
      throw this.failed;
    }
  }

  /** Snapshot when the WAL segment has grown past the threshold (between batches). */
  maybeSnapshot(): void {
    if (this.wal.bytesWritten >= this.options.snapshotWalBytes) this.snapshot();
  }

  /** Write a snapshot, start a new WAL segment and drop the files the snapshot covers. */
  snapshot(): void {
    this.sync();
    const epoch = writeSnapshot(this.dir, this.store);
    this.wal.close();
    this.wal = new WalWriter(this.dir, epoch + 1);
    for (const segment of listSegments(this.dir)) if (segment.firstEpoch <= epoch) unlinkSync(segment.file);
    for (const snap of listSnapshots(this.dir)) if (snap.epoch < epoch) unlinkSync(snap.file);
  }

  close(): void {
    if (this.releaseLock === null) return;
    try {
      // A clean shutdown snapshots; if that fails (disk full) the WAL still holds everything.
      if (this.failed === null) {
        try { this.snapshot(); } catch { /* keep the WAL */ }
      }
      this.wal.close();
    } finally {
      try { this.releaseLock(); } catch { /* lock already gone */ }
      this.releaseLock = null;
    }
  }
}

// ---------------------------------------------------------------- read-only follower

/** A read-only copy of a directory that another process writes; `refresh()` catches up. */
export class DiskFollower {
  store: Store;
  /** What the first load found. */
  readonly report: RecoveryReport;
  private segmentEnds: Map<string, number>;

  private constructor(readonly dir: string) {
    if (!existsSync(dir)) throw new SvcError('storage_error', `storage error: ${dir} does not exist`);
    const { store, segmentEnds, report } = recover(dir, true);
    this.store = store;
    this.report = report;
    this.segmentEnds = segmentEnds;
  }

  static open(dir: string): DiskFollower {
    return new DiskFollower(dir);
  }

  /** Apply WAL records written since the last refresh; reload if a snapshot replaced them. */
  refresh(): void {
    const epoch = this.store.committedEpoch();
    const segments = listSegments(this.dir);
    const newest = listSnapshots(this.dir)[0];
    const covered = segments.length > 0 && segments[0]!.firstEpoch <= epoch + 1;
    if (!covered && newest !== undefined && newest.epoch > epoch) {
      const { store, segmentEnds } = recover(this.dir, true);
      this.store = store;
      this.segmentEnds = segmentEnds;
      return;
    }
    for (const segment of segments) {
      const from = this.segmentEnds.get(segment.file) ?? 0;
      const { batches, end } = readSegment(segment.file, true, from);
      this.segmentEnds.set(segment.file, end);
      for (const batch of batches) {
        if (batch.epoch <= this.store.committedEpoch()) continue;
        if (batch.epoch !== this.store.committedEpoch() + 1) return; // a later refresh will find the gap filled or a snapshot
        this.store.applyRedo(batch);
      }
    }
  }
}
