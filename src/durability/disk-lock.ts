// The single-writer lock of a disk database directory: a kernel flock(2) on DIR/writer.lock,
// held by a descriptor of the writer process itself.
//
// Why this shape:
// - A lease refreshed from the event loop (proper-lockfile's mtime, 10 s stale) is lost when
//   the writer's thread blocks for longer (a long snapshot): a second process then takes it
//   and two writers acknowledge the same epoch. A kernel lock has no timeout: it is held
//   until the descriptor's open file description is closed.
// - The kernel closes every descriptor of a process that dies, kill -9 included, so the lock
//   is free the moment the holder is gone; no takeover logic, no stale interval.
// - Node has no flock API, so flock(1) (util-linux) takes the lock for us: it is handed our
//   descriptor as its fd 3 and locks that open file description, then exits. flock(2) locks
//   belong to the open file description, not to the process that called flock, so the lock
//   stays with our descriptor (the `( flock -n 9 || exit 1; ... ) 9>file` idiom). There is no
//   helper process left running that could be killed, and no handshake: spawnSync gives the
//   exit status, so taking the lock is synchronous, from any thread.
// - Nobody else can release it: only a descriptor of the same open file description can, and
//   ours is opened close-on-exec (libuv opens every file O_CLOEXEC), so processes the writer
//   spawns later do not inherit it. A second opener in this same process opens its own file
//   description, which conflicts like another process's would.
// - writer.lock is never deleted: deleting a locked file would let the next opener create
//   and lock a new inode beside ours. Because someone else could still delete or replace it,
//   a timer compares the locked inode with the one the path names and reports a mismatch as a
//   lost lock (the writer then stops acknowledging). The timer only detects tampering; the
//   lock itself does not depend on the event loop.
import { spawnSync } from 'node:child_process';
import { closeSync, constants, existsSync, fstatSync, openSync, readFileSync, renameSync, rmdirSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { SvcError } from '../protocol/errors.js';
import { processAlive } from './process-alive.js';
import { monotonicMs } from '../clock.js';

export const LOCK_FILE = 'writer.lock';
export const HOLDER_FILE = 'writer.pid';

/**
 * How long to keep retrying while the holder record names no running process: a holder that
 * is exiting still holds the lock until the kernel has closed its descriptors, and a writer
 * that just took the lock writes its record a moment later.
 */
const TAKEOVER_RETRY_MS = 1_000;
/** Pause between those retries. */
const TAKEOVER_RETRY_STEP_MS = 10;
/** How often the lock file is checked to still be the inode we locked. */
const LOCK_CHECK_MS = 1_000;
/** Bound on one flock(1) run (it never waits for the lock: --nonblock). */
const FLOCK_RUN_TIMEOUT_MS = 10_000;
/** flock(1)'s exit status when the lock is taken (EX_TEMPFAIL; its default 1 is ambiguous). */
const FLOCK_CONFLICT_EXIT = 75;

/** The holder record, written by rename once the lock is held; read for error messages. */
export interface Holder { pid: number; host: string; since: string }

/**
 * Take the writer lock of `dir`, or throw `storage_error` naming the holder. Returns the
 * release function (idempotent). `onLost` is called at most once, if the lock file is removed
 * or replaced while held; the lock cannot otherwise be lost while this process lives.
 */
export function acquireWriterLock(dir: string, onLost: (err: Error) => void): () => void {
  const lockPath = join(dir, LOCK_FILE);
  const holderPath = join(dir, HOLDER_FILE);
  removeLegacyLockDir(dir, lockPath, holderPath);
  const deadline = monotonicMs() + TAKEOVER_RETRY_MS;
  let fd: number;
  for (;;) {
    fd = openSync(lockPath, constants.O_RDONLY | constants.O_CREAT, 0o644);
    let locked: boolean;
    try {
      locked = flockExclusive(fd, lockPath);
    } catch (err) {
      closeSync(fd);
      throw err;
    }
    // Locked, and still the file the path names (not one replaced while we opened it).
    if (locked && sameFile(fd, lockPath)) break;
    closeSync(fd);
    if (locked) {
      // Replaced between our open and flock: lock the new file instead, within the same bound.
      if (monotonicMs() >= deadline) throw new SvcError('storage_error', `storage error: ${lockPath} keeps being replaced; nothing may remove or replace it`);
      continue;
    }
    const holder = readHolder(holderPath);
    // Another host's pid cannot be checked here: treat it as running.
    const running = holder !== null && (holder.host !== hostname() || processAlive(holder.pid));
    if (running || monotonicMs() >= deadline) throw lockedError(dir, holder, running);
    sleepSync(TAKEOVER_RETRY_STEP_MS);
  }

  const holder: Holder = { pid: process.pid, host: hostname(), since: new Date().toISOString() };
  // Written whole or not at all: a process killed here must not leave half a file behind.
  writeFileSync(`${holderPath}.tmp`, JSON.stringify(holder));
  renameSync(`${holderPath}.tmp`, holderPath);

  let released = false;
  const check = setInterval(() => {
    if (sameFile(fd, lockPath)) return;
    clearInterval(check);
    onLost(new Error(`${lockPath} was removed or replaced while held, so it no longer keeps other writers out`));
  }, LOCK_CHECK_MS);
  check.unref(); // a held lock must not keep the process (or worker) alive

  return () => {
    if (released) return;
    released = true;
    clearInterval(check);
    // The record goes first, while we still hold the lock: afterwards it may be a successor's.
    try { unlinkSync(holderPath); } catch { /* gone */ }
    closeSync(fd); // the last descriptor of the open file description: the kernel unlocks
  };
}

/** flock(LOCK_EX | LOCK_NB) on `fd` through flock(1): true if locked, false if held elsewhere. */
function flockExclusive(fd: number, lockPath: string): boolean {
  const run = spawnSync('flock', ['--exclusive', '--nonblock', '--conflict-exit-code', String(FLOCK_CONFLICT_EXIT), '3'], {
    // Only the lock descriptor is passed (as fd 3); the child inherits nothing else.
    stdio: ['ignore', 'ignore', 'pipe', fd],
    env: { ...process.env, LC_ALL: 'C' },
    timeout: FLOCK_RUN_TIMEOUT_MS,
    killSignal: 'SIGKILL',
  });
  if (run.error !== undefined) {
    if ((run.error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new SvcError('storage_error', 'storage error: the disk writer lock needs flock(1), which is not on PATH: install util-linux (Debian/Ubuntu: apt-get install util-linux)');
    }
    throw new SvcError('storage_error', `storage error: could not run flock(1) on ${lockPath}: ${run.error.message}`);
  }
  if (run.status === 0) return true;
  if (run.status === FLOCK_CONFLICT_EXIT) return false;
  const why = run.stderr.toString().trim() || `exit status ${run.status ?? run.signal}`;
  throw new SvcError('storage_error', `storage error: flock(1) failed on ${lockPath}: ${why}`);
}

/** Whether `fd` is the file `path` names now (same device and inode). */
function sameFile(fd: number, path: string): boolean {
  try {
    const held = fstatSync(fd, { bigint: true });
    const named = statSync(path, { bigint: true, throwIfNoEntry: false });
    return named !== undefined && named.ino === held.ino && named.dev === held.dev;
  } catch {
    return false; // our descriptor was closed under us: nothing is locked any more
  }
}

function lockedError(dir: string, holder: Holder | null, running: boolean): SvcError {
  const who = holder === null
    ? 'another process (it has not recorded itself in writer.pid)'
    : running
      ? `process ${holder.pid} on ${holder.host} (since ${holder.since})`
      : `another process (writer.pid names process ${holder.pid} on ${holder.host}, which is not running)`;
  return new SvcError('storage_error', `storage error: ${dir} is locked by a writer: ${who}`);
}

/**
 * Earlier versions locked with proper-lockfile, whose lock is a directory at the same path; a
 * writer of such a version killed with -9 leaves it behind. It is removed unless its recorded
 * holder still runs (then that older writer is refused like any other).
 */
function removeLegacyLockDir(dir: string, lockPath: string, holderPath: string): void {
  const stat = statSync(lockPath, { throwIfNoEntry: false });
  if (stat === undefined || !stat.isDirectory()) return;
  const holder = readHolder(holderPath);
  const running = holder !== null && (holder.host !== hostname() || processAlive(holder.pid));
  if (running) throw lockedError(dir, holder, true);
  rmdirSync(lockPath);
}

function readHolder(file: string): Holder | null {
  if (!existsSync(file)) return null;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Holder;
  } catch {
    return null;
  }
}

/** Block this thread for `ms` (allowed on the main thread too in Node). */
function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
