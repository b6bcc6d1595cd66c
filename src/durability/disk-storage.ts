// Disk storage for one database directory: the single-writer lock, recovery (newest
// snapshot that verifies + replay of every later WAL frame), the WAL append that precedes
// every commit, group commit with retry, verified snapshot rotation, and read-only
// followers of the same directory. The rules are in docs/durability.md.
import { accessSync, closeSync, constants, cpSync, existsSync, fsyncSync, mkdirSync, openSync, readdirSync, rmSync, unlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';
import { Store, type RedoBatch } from '../store/store.js';
import { acquireWriterLock, LOCK_FILE } from './disk-lock.js';
import { Backoff } from './backoff.js';
import { healthy, HealthSignal, writeNotApplied, type DurableStorage, type RecoveryReport, type StorageHealth } from './durable.js';
import { fsyncDir } from './format.js';
import { listSnapshots, readSnapshotFile, snapshotName, writeSnapshot } from './snapshot.js';
import { SnapshotThread } from './snapshot-thread.js';
import type { StoreCut } from '../store/store.js';
import { DURABLE_MARK_FILE, DurableMark, readDurableMark } from './durable-mark.js';
import { corruption, FrameTooLarge, listSegments, newestIntactEpoch, scanSegment, truncateTornTail, WalWriter } from './wal.js';
// Every writer-side store gets an index runtime (it registers itself with the store).
import '../index/runtime.js';
import { monotonicMs } from '../clock.js';

export type { RecoveryReport } from './durable.js';

export interface DiskOptions {
  /** Snapshot once this many WAL bytes were written since the last snapshot. */
  snapshotWalBytes: number;
}

export const defaultDiskOptions: DiskOptions = { snapshotWalBytes: 64 * 1024 * 1024 };

// ---------------------------------------------------------------- can the writer write here?

/**
 * Why a writer could not write in `dir`, or null when it can: the directory is created if
 * missing, a probe file is created and removed in it, and the files a writer appends to
 * (the lock and the WAL segments) must be writable. A read-only mount (EROFS) or missing
 * permission (EACCES/EPERM) becomes one sentence naming the place, instead of whichever
 * open fails first deep inside recovery. Other errors are left to the normal path.
 */
export function unwritableReason(dir: string): string | null {
  // What was being tried, for the message: the probe stands for the directory itself.
  let doing = `create ${dir}`;
  try {
    mkdirSync(dir, { recursive: true });
    doing = `write to ${dir}`;
    const probe = join(dir, `.svcdb-write-probe-${process.pid}`);
    closeSync(openSync(probe, 'w'));
    unlinkSync(probe);
    for (const name of readdirSync(dir)) {
      if (name !== LOCK_FILE && !/^wal-\d{10}\.log$/.test(name)) continue;
      doing = `write to ${join(dir, name)}`;
      accessSync(join(dir, name), constants.W_OK);
    }
    return null;
  } catch (err) {
    return explainUnwritable(doing, dir, (err as NodeJS.ErrnoException).code);
  }
}

/** The sentence for an errno `code` met while trying to `doing` in `dir`; null when it is not about write access. */
export function explainUnwritable(doing: string, dir: string, code: string | undefined): string | null {
  if (code === 'EROFS') return `cannot ${doing}: the file system is read-only (EROFS)`;
  if (code === 'EACCES' || code === 'EPERM') {
    return `cannot ${doing}: permission denied (${code}); the server must be able to create, write and remove files in ${dir}`;
  }
  return null;
}

// ---------------------------------------------------------------- recovery

interface Recovered {
  store: Store;
  report: RecoveryReport;
  /** The last segment and where its good frames end (the writer continues or rotates). */
  tail: { file: string; firstEpoch: number; end: number; lastEpoch: number; tornBytes: number } | null;
  /**
   * Bytes of the segments replayed (all of each, up to its good end): the log the next
   * snapshot would cover. Not only the last segment's: snapshots that failed or were cut
   * short by a crash each leave a segment behind.
   */
  walBytes: number;
}

/**
 * The store as the directory holds it: the newest snapshot that verifies, then every later
 * WAL frame in epoch order. Damage is refused with the file and offset (storage_error),
 * except a torn tail of the last segment (the last write of a crash), which is reported in
 * `tail.tornBytes` for the writer to cut. A corrupt newest snapshot is gone around only
 * when an older one and the WAL after it reach at least the corrupt one's epoch. Changes
 * nothing on disk.
 *
 * `salvage` (svc repair): instead of refusing, stop at the first damage and report it.
 */
function recover(dir: string, salvage = false, untilEpoch = Infinity): Recovered & { damage: SvcError | null; newestEpochSeen: number } {
  const warnings: string[] = [];
  let store: Store | null = null;
  let snapshotEpoch = 0;
  /** Epoch recovery must reach: the newest snapshot that failed to verify. */
  let mustReach = 0;
  let firstDamage: SvcError | null = null;
  for (const snap of listSnapshots(dir)) {
    try {
      const loaded = readSnapshotFile(snap.file);
      // The name decides what pruning deletes later: a snapshot holding another epoch than
      // its name says (a copied or renamed file) would have newer snapshots and the WAL
      // deleted as covered by it (as object storage checks too).
      if (loaded.epoch !== snap.epoch) {
        throw new SvcError('storage_error', `storage error: snapshot ${snap.file} holds epoch ${loaded.epoch}, its name says ${snap.epoch}`);
      }
      store = loaded.store;
      snapshotEpoch = snap.epoch;
      break;
    } catch (err) {
      // Format version errors and anything that is not a storage_error (a bug, a local
      // failure such as EMFILE) stop recovery: never fall back on an unknown error.
      if (!(err instanceof SvcError) || err.code !== 'storage_error') throw err;
      firstDamage ??= err;
      mustReach = Math.max(mustReach, snap.epoch);
      warnings.push(err.msg);
    }
  }
  store ??= Store.create();
  store.captureRedo = false;
  // What a snapshot holds is durable (it was fsynced): a follower's bound starts there.
  const until = Math.max(untilEpoch, store.committedEpoch());
  let replayed = 0;
  let damage: SvcError | null = null;
  const segments = listSegments(dir);
  // What the files' names and intact parts show was committed once (for svc repair's count).
  let newestEpochSeen = Math.max(mustReach, store.committedEpoch(), ...segments.map((s) => s.firstEpoch - 1));
  let tail: Recovered['tail'] = null;
  let walBytes = 0;
  /** Segments after the damage that were not scanned (svc repair counts their frames). */
  let unscannedFrom = segments.length;
  for (let i = 0; i < segments.length && damage === null; i++) {
    const segment = segments[i]!;
    const next = segments[i + 1];
    const last = next === undefined;
    // A segment whose successor starts at or before the next epoch we need holds nothing new.
    if (next !== undefined && next.firstEpoch <= store.committedEpoch() + 1) continue;
    if (segment.firstEpoch > store.committedEpoch() + 1) {
      // After snapshots that failed to load, the gap is theirs: say so, or the message
      // blames an intact segment and hides the damaged snapshot.
      const because = firstDamage === null ? '' : ` (a newer snapshot did not load: ${firstDamage.msg.replace(/^storage error: /, '')})`;
      damage = corruption(segment.file, 0, `WAL gap: the store is at epoch ${store.committedEpoch()}, this segment starts at ${segment.firstEpoch}${because}`);
      unscannedFrom = i;
      break;
    }
    const target = store;
    const scan = scanSegment(segment.file, 0, 0, (batch) => {
      if (batch.epoch <= target.committedEpoch()) return;
      target.applyRedo(batch);
      replayed++;
    }, until);
    if (store.committedEpoch() >= until && until !== Infinity && scan.ending === 'clean') {
      // A follower stops at the writer's durable mark: it goes on from here later.
      tail = { file: segment.file, firstEpoch: segment.firstEpoch, end: scan.end, lastEpoch: scan.lastEpoch, tornBytes: 0 };
      walBytes += scan.end;
      break;
    }
    newestEpochSeen = Math.max(newestEpochSeen, scan.lastEpoch);
    walBytes += scan.end;
    if (scan.ending !== 'clean' && !(scan.ending === 'torn' && last)) unscannedFrom = i + 1;
    if (scan.ending === 'corrupt') {
      damage = scan.problem!;
      if (salvage) newestEpochSeen = Math.max(newestEpochSeen, scan.damagedEpoch, newestIntactEpoch(segment.file, scan.end + 1));
    }
    else if (scan.ending === 'torn' && !last) damage = corruption(segment.file, scan.end, 'a damaged frame in a segment that is not the newest');
    else if (last) {
      tail = { file: segment.file, firstEpoch: segment.firstEpoch, end: scan.end, lastEpoch: scan.lastEpoch, tornBytes: scan.size - scan.end };
    }
  }
  if (salvage && damage !== null) {
    // What the segments past the damage hold was committed too: count it as lost.
    for (const segment of segments.slice(unscannedFrom)) newestEpochSeen = Math.max(newestEpochSeen, newestIntactEpoch(segment.file, 32));
  }
  if (damage === null && store.committedEpoch() < mustReach) {
    damage = new SvcError('storage_error', `${firstDamage!.msg}; the older snapshots and the WAL reach only epoch ${store.committedEpoch()}`);
  }
  if (damage !== null && !salvage) {
    throw new SvcError('storage_error', `${damage.msg}. Every file was left as it is; \`svc repair --disk DIR\` keeps a copy and recovers what precedes the damage`);
  }
  const report: RecoveryReport = {
    snapshotEpoch, replayedBatches: replayed, truncatedBytes: tail?.tornBytes ?? 0, epoch: store.committedEpoch(),
    ...(warnings.length > 0 ? { warnings } : {}),
  };
  return { store, report, tail, walBytes, damage, newestEpochSeen };
}

export interface RepairReport {
  /** Where the untouched copy of the damaged directory was put. */
  copy: string;
  /** The epoch the repaired directory holds. */
  epoch: number;
  /** The damage found, or null when there was none (nothing was changed then). */
  damage: string | null;
  /** The newest epoch any intact file or frame showed: lost = newestEpochSeen - epoch. */
  newestEpochSeen: number;
}

/**
 * `svc repair --disk DIR`: copy DIR aside whole, then rebuild it from what precedes the
 * first damage: a new snapshot of the recovered store and an empty WAL. Takes the writer
 * lock, so it cannot run beside a writer.
 */
export async function repairDirectory(dir: string, copyTo: string): Promise<RepairReport> {
  if (!existsSync(dir)) throw new SvcError('storage_error', `storage error: ${dir} does not exist`);
  const release = acquireWriterLock(dir, () => undefined);
  try {
    const recovered = recover(dir, true);
    if (recovered.damage === null) {
      return { copy: '', epoch: recovered.store.committedEpoch(), damage: null, newestEpochSeen: recovered.newestEpochSeen };
    }
    // cpSync overwrites and merges into an existing directory (its errorOnExist needs force:
    // false): the copy must be DIR's files alone, and must not replace an earlier copy.
    if (existsSync(copyTo)) throw new SvcError('storage_error', `storage error: ${copyTo} already exists; give --copy-to a path that does not`);
    cpSync(dir, copyTo, { recursive: true, force: false, errorOnExist: true, filter: (src) => !src.endsWith('writer.lock') });
    // The copy is the only place the damaged files are kept once DIR is rebuilt: durable first.
    for (const name of readdirSync(copyTo)) {
      const fd = openSync(join(copyTo, name), 'r');
      try { fsyncSync(fd); } finally { closeSync(fd); }
    }
    fsyncDir(copyTo);
    fsyncDir(join(copyTo, '..'));
    const store = recovered.store;
    const epoch = store.committedEpoch();
    writeSnapshot(dir, store);
    for (const segment of listSegments(dir)) unlinkSync(segment.file);
    for (const snap of listSnapshots(dir)) if (snap.epoch !== epoch) unlinkSync(snap.file);
    // The old writer's durable mark may be past the repaired epoch: the next writer writes it anew.
    rmSync(join(dir, DURABLE_MARK_FILE), { force: true });
    fsyncDir(dir);
    return { copy: copyTo, epoch, damage: recovered.damage?.msg ?? null, newestEpochSeen: recovered.newestEpochSeen };
  } finally {
    release();
  }
}

// ---------------------------------------------------------------- writer

interface Waiter { epoch: number; resolve: () => void; reject: (err: SvcError) => void }

export class DiskWriter implements DurableStorage {
  readonly store: Store;
  readonly report: RecoveryReport;
  private readonly healthSignal = new HealthSignal();
  private wal: WalWriter;
  /** The durable epoch for followers of the directory (durable-mark.ts). */
  private mark!: DurableMark;
  private markFailed = false;
  private releaseLock: (() => void) | null;
  /** Newest epoch logged, and newest made durable (fsynced). */
  private loggedEpoch: number;
  private durableEpoch: number;
  private waiters: Waiter[] = [];
  private flushScheduled = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private readonly flushBackoff = new Backoff();
  /** Set while fsync fails (new writes are refused) or after the lock was lost (for good). */
  private unavailable: SvcError | null = null;
  /** The last WAL append failed (disk full, I/O error), until one succeeds: not ready meanwhile. */
  private appendFailure: SvcError | null = null;
  private fenced: SvcError | null = null;
  private walBytesSinceSnapshot = 0;
  private lastSnapshotEpoch: number;
  private snapshotProblem: string | null = null;
  /** Why the last snapshot failed (the error alone; snapshotProblem is the health text). */
  private snapshotFailure: string | null = null;
  private readonly snapshotThread = new SnapshotThread();
  /** The snapshot being written, if any (one at a time). */
  private snapshotRunning: Promise<boolean> | null = null;
  private snapshotNotBefore = 0;
  private readonly snapshotBackoff = new Backoff(limits.snapshotRetryFirstMs, limits.snapshotRetryMaxMs);
  private closed = false;

  private constructor(readonly dir: string, readonly options: DiskOptions) {
    mkdirSync(dir, { recursive: true });
    this.releaseLock = acquireWriterLock(dir, (err) => {
      // Someone removed or took over the lock: nothing more is acknowledged from here.
      this.fence(new SvcError('writer_fenced_commit_outcome_unknown', `writer fenced: lost the writer lock on ${dir}: ${err.message}`));
    });
    try {
      const { store, report, tail, walBytes } = recover(dir);
      for (const warning of report.warnings ?? []) process.stderr.write(`svcdb: recovery: ${warning}\n`);
      if (tail !== null && tail.tornBytes > 0) {
        // The one thing recovery may drop: the last frame of the last segment, cut short.
        truncateTornTail(tail.file, tail.end);
        process.stderr.write(`svcdb: recovery dropped a torn tail of ${tail.tornBytes} bytes (an unacknowledged write cut short by a crash)\n`);
      }
      this.store = store;
      this.report = report;
      store.captureRedo = true;
      store.publishOnCommit = false;
      const epoch = store.committedEpoch();
      // Continue the last segment when its frames end exactly where the store is; else
      // start a new one (its predecessors stay until a snapshot covers them).
      // Frames a crashed process wrote but never fsynced are replayed as durable: they must be
      // made so (the operating system could still lose them) before followers are told.
      // Continuing the segment fsyncs it (WalWriter); a segment left behind is fsynced here.
      if (tail !== null && (tail.lastEpoch === epoch || (tail.lastEpoch === 0 && tail.firstEpoch === epoch + 1))) {
        this.wal = new WalWriter(dir, tail.firstEpoch, tail.end, tail.lastEpoch);
      } else {
        if (tail !== null) {
          const fd = openSync(tail.file, 'r+');
          try { fsyncSync(fd); } finally { closeSync(fd); }
        }
        this.wal = new WalWriter(dir, epoch + 1);
      }
      this.loggedEpoch = this.durableEpoch = epoch;
      this.mark = new DurableMark(dir, epoch);
      this.lastSnapshotEpoch = report.snapshotEpoch;
      this.walBytesSinceSnapshot = walBytes;
      this.cleanStaleTemps();
    } catch (err) {
      this.releaseLock();
      this.releaseLock = null;
      throw err;
    }
  }

  static open(dir: string, options: DiskOptions = defaultDiskOptions): DiskWriter {
    // Absolute, so every message naming a file names it exactly (and can be redacted).
    const absolute = resolve(dir);
    const unwritable = unwritableReason(absolute);
    if (unwritable !== null) throw new SvcError('storage_error', `storage error: ${unwritable}`);
    return new DiskWriter(absolute, options);
  }

  /** Snapshot temp files left by a writer killed while writing one. */
  private cleanStaleTemps(): void {
    for (const name of readdirSync(this.dir)) if (/^snapshot-\d{10}\.bin\.tmp$/.test(name)) rmSync(join(this.dir, name), { force: true });
  }

  health(): StorageHealth {
    if (this.fenced) return { ready: false, problem: this.fenced.msg };
    if (this.unavailable) return { ready: false, problem: this.unavailable.msg };
    if (this.appendFailure) return { ready: false, problem: this.appendFailure.msg };
    return this.snapshotProblem === null ? healthy : { ready: true, problem: this.snapshotProblem };
  }

  onHealthChange(listener: (health: StorageHealth) => void): () => void {
    return this.healthSignal.on(listener);
  }

  private healthChanged(): void {
    const h = this.health();
    process.stderr.write(`svcdb: storage ${h.ready ? 'ready' : 'NOT READY'}${h.problem ? `: ${h.problem}` : ''}\n`);
    this.healthSignal.update(h);
  }

  logBatch(batch: RedoBatch): void {
    if (this.closed) throw new SvcError('database_closed', 'database is closed');
    if (this.fenced) throw this.fenced;
    if (this.unavailable) throw writeNotApplied(this.unavailable.msg);
    const before = this.wal.bytes;
    try {
      this.wal.append(batch);
    } catch (err) {
      // The batch rolls back (its error answers it); until an append succeeds again (a full
      // disk freed), writes cannot be made durable: not ready, said once in the log.
      // A batch too large to log is refused alone: the storage itself is fine.
      if (this.appendFailure === null && err instanceof SvcError && !(err instanceof FrameTooLarge)) {
        this.appendFailure = err;
        this.healthChanged();
      }
      throw err;
    }
    if (this.appendFailure !== null) {
      this.appendFailure = null;
      this.healthChanged();
    }
    this.walBytesSinceSnapshot += this.wal.bytes - before;
    this.loggedEpoch = batch.epoch;
  }

  sync(): Promise<void> {
    if (this.fenced) return Promise.reject(this.fenced);
    const epoch = this.loggedEpoch;
    if (epoch <= this.durableEpoch) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.waiters.push({ epoch, resolve, reject });
      this.scheduleFlush();
    });
  }

  /** Group commit: everything logged until the flush runs shares its fsync. */
  private scheduleFlush(): void {
    if (this.flushScheduled || this.retryTimer !== null) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  /** fsync, publish and answer; on failure refuse new writes and retry with backoff. */
  private flush(): void {
    if (this.fenced) return;
    const epoch = this.loggedEpoch;
    try {
      this.wal.sync();
    } catch (err) {
      const first = this.unavailable === null;
      this.unavailable = err instanceof SvcError ? err : new SvcError('storage_error', `storage error: ${String(err)}`);
      if (first) this.healthChanged();
      this.retryTimer = setTimeout(() => {
        this.retryTimer = null;
        this.flush();
      }, this.flushBackoff.next());
      return;
    }
    this.flushBackoff.reset();
    this.markDurable(epoch);
    if (this.unavailable !== null) {
      this.unavailable = null;
      this.healthChanged();
    }
    this.maybeSnapshot();
  }

  private markDurable(epoch: number): void {
    this.durableEpoch = Math.max(this.durableEpoch, epoch);
    this.store.publish(this.durableEpoch);
    try {
      this.mark.write(this.durableEpoch);
    } catch (err) {
      // Followers then lag (they apply up to the last mark they read); the writer is fine.
      if (!this.markFailed) process.stderr.write(`svcdb: writing ${DURABLE_MARK_FILE} failed (followers of ${this.dir} stop advancing): ${(err as Error).message}\n`);
      this.markFailed = true;
    }
    const still: Waiter[] = [];
    for (const w of this.waiters) {
      if (w.epoch <= this.durableEpoch) w.resolve();
      else still.push(w);
    }
    this.waiters = still;
  }

  private fence(err: SvcError): void {
    if (this.fenced) return;
    this.fenced = err;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.reject(err);
    this.healthChanged();
  }

  /** Snapshot when enough WAL accumulated, unless one runs or a failed one waits out its backoff. */
  private maybeSnapshot(): void {
    if (this.snapshotRunning !== null || this.closed) return;
    if (this.walBytesSinceSnapshot < this.options.snapshotWalBytes || monotonicMs() < this.snapshotNotBefore) return;
    void this.snapshot();
  }

  /**
   * Snapshot the store as of now (between batches, right after a flush: everything
   * committed is durable). The writer thread only cuts the store and starts a new WAL
   * segment; the snapshot itself is written and read back elsewhere while writes go on.
   * Once it verified, what the PREVIOUS snapshot covers is deleted: the newest two
   * snapshots and the WAL after the older one stay, so recovery can fall back past a
   * damaged newest one. Resolves false when it failed (retried later with backoff).
   */
  private snapshot(): Promise<boolean> {
    const epoch = this.store.committedEpoch();
    if (epoch === this.lastSnapshotEpoch) return Promise.resolve(true);
    if (epoch !== this.durableEpoch) throw new SvcError('internal_error', 'internal error: snapshot of a store that is not durable');
    const cut = this.store.cut();
    const job = (async () => {
      try {
        if (this.wal.lastEpoch !== 0) {
          // The new segment first: if it cannot be made, the old one goes on.
          const next = new WalWriter(this.dir, epoch + 1);
          this.wal.close();
          this.wal = next;
        }
        this.walBytesSinceSnapshot = 0;
        await this.writeSnapshotFile(cut, join(this.dir, snapshotName(epoch)));
      } finally {
        this.store.releaseCut(cut);
      }
      const previous = this.lastSnapshotEpoch;
      this.lastSnapshotEpoch = epoch;
      this.prune(previous);
    })();
    this.snapshotRunning = job.then(() => {
      this.snapshotBackoff.reset();
      if (this.snapshotProblem !== null) {
        this.snapshotProblem = null;
        this.healthChanged();
      }
      return true;
    }, (err: unknown) => {
      this.snapshotFailure = (err as Error).message.replace(/^storage error: /, '');
      const problem = `snapshot failed, retrying later (the WAL keeps every write): ${this.snapshotFailure}`;
      const changed = this.snapshotProblem !== problem;
      this.snapshotProblem = problem;
      this.snapshotNotBefore = monotonicMs() + this.snapshotBackoff.next();
      if (changed) this.healthChanged();
      return false;
    }).finally(() => { this.snapshotRunning = null; });
    return this.snapshotRunning;
  }

  /** Write and verify the snapshot file of `cut` on the snapshot thread (writes go on meanwhile). */
  private writeSnapshotFile(cut: StoreCut, file: string): Promise<number> {
    return this.snapshotThread.write(this.store.shared, cut, file);
  }

  /** Remove snapshots older than `keep` and WAL segments holding only epochs <= `keep`. */
  private prune(keep: number): void {
    try {
      const segments = listSegments(this.dir);
      for (let i = 0; i + 1 < segments.length; i++) {
        if (segments[i + 1]!.firstEpoch - 1 <= keep) unlinkSync(segments[i]!.file);
      }
      for (const snap of listSnapshots(this.dir)) if (snap.epoch < keep) unlinkSync(snap.file);
      fsyncDir(this.dir);
    } catch (err) {
      // Leftovers are harmless: recovery skips what a newer snapshot covers.
      process.stderr.write(`svcdb: removing files older snapshots cover failed: ${(err as Error).message}\n`);
    }
  }

  async close(): Promise<void> {
    if (this.releaseLock === null) return;
    this.closed = true;
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    let problem: SvcError | null = this.fenced;
    try {
      if (problem === null) {
        // One last try to make the waiting writes durable; otherwise their outcome is unknown.
        try {
          this.wal.sync();
          this.markDurable(this.loggedEpoch);
        } catch (err) {
          problem = new SvcError('writer_fenced_commit_outcome_unknown',
            `writer stopped before every write was durable: ${(err as Error).message}`);
          this.fence(problem);
        }
      }
      if (this.snapshotRunning !== null) await this.snapshotRunning;
      if (problem === null && !(await this.snapshot())) {
        problem = new SvcError('storage_error',
          `storage error: the snapshot at stop failed; the WAL keeps every write, so the next start replays them: ${this.snapshotFailure ?? 'unknown reason'}`);
      }
      if (this.fenced === null) this.wal.close();
      else this.wal.abandon();
    } finally {
      await this.snapshotThread.close();
      try { this.mark.close(); } catch { /* closed with the process anyway */ }
      try { this.releaseLock(); } catch { /* lock already gone */ }
      this.releaseLock = null;
    }
    if (problem !== null) throw problem;
  }
}

// ---------------------------------------------------------------- read-only follower

/** Attempts to open a directory whose writer is rotating files meanwhile. */
const FOLLOWER_OPEN_ATTEMPTS = 5;
const FOLLOWER_OPEN_RETRY_MS = 100;
/**
 * Refreshes that must find the same damage, over at least FOLLOWER_DAMAGE_CONFIRM_MS,
 * before a follower believes it (a frame still being written). The time matters to a
 * follower refreshed before every query (the embedded reader), whose refreshes can be
 * microseconds apart.
 */
const FOLLOWER_DAMAGE_STRIKES = 3;
const FOLLOWER_DAMAGE_CONFIRM_MS = 1000;

/** A read-only copy of a directory that another process writes; `refresh()` catches up. */
export class DiskFollower {
  store: Store;
  /** What the first load found. */
  readonly report: RecoveryReport;
  /** Where the next frame is read: segment, offset and the epoch it must follow. */
  private position: { file: string; end: number } | null;
  private stopped: SvcError | null = null;
  private damage: { at: string; strikes: number; sinceMs: number } | null = null;

  /** The writer's durable mark as last read (docs/durability.md §4): frames past it wait. */
  private durableMark = 0;

  private constructor(readonly dir: string, loaded: Recovered) {
    this.store = loaded.store;
    this.report = loaded.report;
    this.position = loaded.tail === null ? null : { file: loaded.tail.file, end: loaded.tail.end };
  }

  /** The newest epoch this follower may apply: the writer's durable mark (Infinity: no mark). */
  private readMark(): number {
    const mark = readDurableMark(this.dir);
    if (mark === null) return Infinity;
    if (mark !== undefined) this.durableMark = mark;
    return this.durableMark;
  }

  /** Open (retrying while the writer rotates files under us). */
  static async open(dir: string): Promise<DiskFollower> {
    dir = resolve(dir);
    if (!existsSync(dir)) throw new SvcError('storage_error', `storage error: ${dir} does not exist`);
    let mark: number | null = 0;
    const loaded = await loadRetrying(dir, async () => {
      mark = await settledDurableMark(dir);
      return mark === null ? Infinity : mark;
    });
    const follower = new DiskFollower(dir, loaded);
    follower.durableMark = mark ?? 0;
    return follower;
  }

  health(): StorageHealth {
    return this.stopped === null ? healthy : { ready: false, problem: this.stopped.msg };
  }

  /**
   * Apply WAL frames written since the last refresh. Returns true when the store was
   * replaced (the writer already deleted the WAL this follower needed: reloaded from the
   * newest snapshot). A batch that cannot be applied stops the follower for good: it keeps
   * serving its last epoch and reports the problem; it never skips a batch.
   */
  async refresh(): Promise<boolean> {
    if (this.stopped !== null) throw this.stopped;
    try {
      return await this.catchUp();
    } catch (err) {
      this.stopped = err instanceof SvcError ? err : new SvcError('storage_error', `storage error: ${String(err)}`);
      process.stderr.write(`svcdb: follower stopped at epoch ${this.store.committedEpoch()}: ${this.stopped.msg}\n`);
      throw this.stopped;
    }
  }

  private async catchUp(): Promise<boolean> {
    for (;;) {
      const epoch = this.store.committedEpoch();
      const segments = listSegments(this.dir);
      const current = this.position === null ? undefined : segments.find((s) => s.file === this.position!.file);
      if (current === undefined) {
        // Our segment is gone (or we had none): continue in the one holding epoch + 1.
        const holder = [...segments].reverse().find((s) => s.firstEpoch <= epoch + 1);
        if (holder === undefined || (segments.length > 0 && segments[0]!.firstEpoch > epoch + 1)) {
          const newest = listSnapshots(this.dir)[0];
          if (newest === undefined || newest.epoch <= epoch) return false; // nothing newer yet
          const loaded = await loadRetrying(this.dir, async () => this.readMark());
          this.store = loaded.store;
          this.position = loaded.tail === null ? null : { file: loaded.tail.file, end: loaded.tail.end };
          return true;
        }
        this.position = { file: holder.file, end: 0 };
      }
      const position = this.position!;
      const store = this.store;
      const until = Math.max(this.readMark(), store.committedEpoch());
      let scan;
      try {
        scan = scanSegment(position.file, position.end, position.end === 0 ? 0 : store.committedEpoch(), (batch) => {
          if (batch.epoch <= store.committedEpoch()) return;
          if (batch.epoch !== store.committedEpoch() + 1) throw corruption(position.file, position.end, `WAL gap: epoch ${batch.epoch} after ${store.committedEpoch()}`);
          store.applyRedo(batch);
        }, until);
      } catch (err) {
        if ((err as { code?: string }).code === 'ENOENT') continue; // rotated away meanwhile
        throw err;
      }
      position.end = scan.end;
      if (scan.ending === 'corrupt') {
        // A frame still being written can look damaged for a moment: believe it only when
        // the same damage is there on several refreshes.
        const at = `${position.file}:${scan.end}`;
        const now = monotonicMs();
        this.damage = this.damage?.at === at ? { ...this.damage, strikes: this.damage.strikes + 1 } : { at, strikes: 1, sinceMs: now };
        if (this.damage.strikes >= FOLLOWER_DAMAGE_STRIKES && now - this.damage.sinceMs >= FOLLOWER_DAMAGE_CONFIRM_MS) throw scan.problem!;
        return false;
      }
      this.damage = null;
      if (store.committedEpoch() >= until) return false; // the rest is not durable yet
      // Move on when a newer segment continues right after what we applied.
      const after = segments.find((s) => s.firstEpoch === store.committedEpoch() + 1 && s.file !== position.file);
      if (after === undefined) return false;
      this.position = { file: after.file, end: 0 };
    }
  }
}

/**
 * The writer's durable mark for a follower that has none yet: read again while it is torn
 * (a starting writer empties the file before it writes it), 0 if it stays so.
 */
async function settledDurableMark(dir: string): Promise<number | null> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const mark = readDurableMark(dir);
    if (mark !== undefined) return mark;
    await new Promise((r) => setTimeout(r, 5));
  }
  return 0;
}

/** recover(), retried while a writer rotates snapshots and segments under it (the follower's bound read anew each time). */
async function loadRetrying(dir: string, untilEpoch: () => Promise<number>): Promise<Recovered> {
  for (let attempt = 1; ; attempt++) {
    try {
      const loaded = recover(dir, false, await untilEpoch());
      loaded.store.publishOnCommit = true;
      return loaded;
    } catch (err) {
      const code = (err as { code?: string }).code;
      const transient = code === 'ENOENT' || (err instanceof SvcError && err.code === 'storage_error');
      if (!transient || attempt >= FOLLOWER_OPEN_ATTEMPTS) throw err;
      await new Promise((r) => setTimeout(r, FOLLOWER_OPEN_RETRY_MS * attempt));
    }
  }
}
