// What `svc start` leaves in the state directory for one local instance, and whether the
// process it names is still our server:
//
//   <state_dir>/<name>.pid     the server's pid (text)
//   <state_dir>/<name>.json    RunState below (for status: port, storage, start time)
//   <state_dir>/<name>.log     the server's stdout and stderr (appended per start)
//   <state_dir>/<name>.lock    the pid of the svc start or stop at work on it (holdInstanceLock)
//   <state_dir>/data/<name>/   disk storage
//
// A pid file can outlive its process (kill -9, reboot), the pid can be reused by an
// unrelated process, and a copied project carries another project's pid file, so
// "running" means: the process exists, is not a zombie, and (where /proc exists) its
// command line is `... cli/main.js serve --started-by <this pid file> ...` (a server
// started by a svc from before that flag: without it). Anything else is a stale pid file.
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { processState } from '../durability/process-alive.js';
import { CliError } from './errors.js';
import type { LocalInstance, StorageMode } from './project.js';
import { monotonicMs } from '../clock.js';

export interface RunState {
  readonly pid: number;
  readonly host: string;
  readonly port: number;
  readonly url: string;
  readonly storage: StorageMode;
  /** Absolute path of the disk storage directory, null for memory. */
  readonly data_dir: string | null;
  readonly started_at: string;
  readonly log: string;
  readonly runtime: 'process';
}

export interface StatePaths {
  readonly pid: string;
  readonly state: string;
  readonly log: string;
  readonly data: string;
}

export function statePaths(instance: LocalInstance): StatePaths {
  return {
    pid: join(instance.stateDir, `${instance.name}.pid`),
    state: join(instance.stateDir, `${instance.name}.json`),
    log: join(instance.stateDir, `${instance.name}.log`),
    data: join(instance.stateDir, 'data', instance.name),
  };
}

export type Liveness =
  | { readonly status: 'running'; readonly pid: number; readonly state: RunState | null }
  | { readonly status: 'stopped'; readonly stalePid: number | null };

/** Reads the pid file and checks the process. Does not change any file. */
export function inspect(instance: LocalInstance): Liveness {
  const paths = statePaths(instance);
  const pid = readPid(paths.pid);
  if (pid === null) return { status: 'stopped', stalePid: null };
  if (!isServerProcess(pid, paths.pid)) return { status: 'stopped', stalePid: pid };
  return { status: 'running', pid, state: readState(paths.state, pid) };
}

export function writeRunFiles(instance: LocalInstance, state: RunState): void {
  const paths = statePaths(instance);
  mkdirSync(instance.stateDir, { recursive: true });
  writeAtomic(paths.state, `${JSON.stringify(state, null, 2)}\n`);
  writeAtomic(paths.pid, `${state.pid}\n`);
}

/**
 * Remove the pid and state files; with `pid`, only when the pid file still names that
 * process (a start that failed must not remove the files of the server another start
 * wrote meanwhile).
 */
export function removeRunFiles(instance: LocalInstance, pid?: number): void {
  const paths = statePaths(instance);
  if (pid !== undefined && readPid(paths.pid) !== pid) return;
  for (const file of [paths.pid, paths.state]) {
    try {
      rmSync(file, { force: true });
    } catch (err) {
      // state_dir is a file: nothing can be under it.
      if ((err as NodeJS.ErrnoException).code !== 'ENOTDIR') throw err;
    }
  }
}

function writeAtomic(path: string, text: string): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

const instanceLockPollMs = 100;

/**
 * Be the one `svc start` or `svc stop` at work on this instance until the returned function
 * is called. Two starts at once each found it stopped, each spawned a server, and the one
 * whose server could not bind removed the other's pid file, leaving a server svc stop could
 * not reach (a probe; once two servers even shared the port, each with half the writes); two
 * stops at once sent two SIGTERMs, which the server takes as "exit now, without draining".
 * The lock is a file created exclusively, holding the pid of its svc process; another waits
 * for it up to `timeoutMs`, then gives up. A lock whose svc process is gone is removed.
 */
export async function holdInstanceLock(instance: LocalInstance, timeoutMs: number): Promise<() => void> {
  const path = join(instance.stateDir, `${instance.name}.lock`);
  const deadline = monotonicMs() + timeoutMs;
  for (;;) {
    try {
      const fd = openSync(path, 'wx');
      try {
        writeSync(fd, `${process.pid}\n`);
      } finally {
        closeSync(fd);
      }
      return () => rmSync(path, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let holder = 0;
    try {
      holder = Number(readFileSync(path, 'utf8').trim());
    } catch {
      continue; // removed meanwhile: try again
    }
    // An empty file is a lock being written this instant; a dead pid, a start that was killed.
    if (Number.isInteger(holder) && holder > 1 && !isAlive(holder)) {
      rmSync(path, { force: true });
      continue;
    }
    if (monotonicMs() > deadline) {
      throw new CliError(`another svc start or stop of ${instance.name} (pid ${holder}) has been at work on it for over ${timeoutMs} ms; if none is running, remove ${path}`);
    }
    await new Promise((resolve) => setTimeout(resolve, instanceLockPollMs));
  }
}

/** A pid file that is a directory: nothing svc started can be running under it (svc stop exits 0). */
export class PidFileIsDirectory extends CliError {}

function readPid(path: string): number | null {
  if (!existsSync(path)) return null;
  let text: string;
  try {
    text = readFileSync(path, 'utf8').trim();
  } catch (err) {
    // readFileSync's EISDIR names no path: say which one.
    if ((err as NodeJS.ErrnoException).code === 'EISDIR') throw new PidFileIsDirectory(`${path} is a directory, not a pid file; remove it`);
    throw err;
  }
  if (!/^\d{1,10}$/.test(text)) return null;
  const pid = Number(text);
  return pid > 1 ? pid : null;
}

function readState(path: string, pid: number): RunState | null {
  try {
    const state = JSON.parse(readFileSync(path, 'utf8')) as RunState;
    return state.pid === pid ? state : null;
  } catch {
    return null;
  }
}

/** The process exists, is not a zombie, and (with /proc) runs `serve` started for `pidFile`. */
export function isServerProcess(pid: number, pidFile: string): boolean {
  if (!processExists(pid)) return false;
  const proc = `/proc/${pid}`;
  if (!existsSync('/proc/self/stat')) return true; // no /proc: trust the signal probe
  try {
    const stat = readFileSync(`${proc}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    if (state === 'Z' || state === 'X') return false; // exited, not yet reaped by its new parent
    const argv = readFileSync(`${proc}/cmdline`, 'utf8').split('\0');
    // `<node> <...>/cli/main.js serve ...`: svc's own entry runs serve.
    const serve = argv.indexOf('serve');
    if (serve < 1 || !/[\\/]cli[\\/]main\.js$/.test(argv[serve - 1]!)) return false;
    const startedBy = argv.indexOf('--started-by');
    return startedBy < 0 || argv[startedBy + 1] === pidFile;
  } catch {
    return false; // vanished between the probes
  }
}

/** Alive in the signal sense (a zombie counts as dead where /proc tells). */
export function isAlive(pid: number): boolean {
  if (!processExists(pid)) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return !existsSync('/proc/self/stat');
  }
}

/** ESRCH: gone. EPERM: it exists but belongs to another user, so it is not a server we started. */
function processExists(pid: number): boolean {
  return processState(pid) === 'running';
}

/** "2h 3m 4s" */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const parts: string[] = [];
  if (d > 0) parts.push(`${d}d`);
  if (h > 0 || d > 0) parts.push(`${h}h`);
  if (m > 0 || h > 0 || d > 0) parts.push(`${m}m`);
  parts.push(`${s % 60}s`);
  return parts.join(' ');
}
