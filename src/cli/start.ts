// `svc start <instance>`: runs `svc serve` for a [local.<instance>] as a detached
// background process (the "process" runtime), records its pid, and waits until it prints
// its start-up line and /readyz answers 200.
//
// container_runtime: "docker" and "podman" are recognised but no svcdb container image is
// published yet. If the named runtime is not installed we stop and say how to fall back;
// if it is installed we say images are not published and use the process runtime.
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, closeSync, constants, fstatSync, mkdirSync, openSync, readSync, writeSync } from 'node:fs';
import { delimiter, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { action, CliError, messageOf } from './errors.js';
import { httpRequest, localBaseUrl, Unreachable } from './http.js';
import { holdInstanceLock, inspect, removeRunFiles, statePaths, writeRunFiles, type RunState } from './instance-state.js';
import { checkInstanceName, findLocalInstance, loadProject, type LocalInstance, type Project, type StorageMode } from './project.js';
import { noAuthenticationWarning } from './bind-address.js';
import { integerOption } from './options.js';
import { serverProcess } from '../server/launch.js';
import { monotonicMs } from '../clock.js';

interface StartOptions {
  disk?: boolean;
  waitTimeoutMs: number;
  logRequests?: boolean;
  slowQueryMs?: number;
}

const mainPath = fileURLToPath(new URL('./main.js', import.meta.url));
const pollIntervalMs = 100;
const logTailLines = 20;

export function registerStart(program: Command): void {
  program
    .command('start')
    .description('start a local instance in the background (svc serve), wait until it is ready and print its URL')
    .argument('<instance>', 'a [local.<instance>] table of svc.toml')
    .option('--disk', 'persist data under <state_dir>/data/<instance> (default: the instance\'s storage setting, "memory" unless set)')
    .option('--wait-timeout-ms <ms>', 'how long to wait for the instance to become ready', integerOption('wait-timeout-ms', 1, 600_000), 30_000)
    .option('--log-requests', 'passed to svc serve: one JSON line per query request in the instance log')
    .option('--slow-query-ms <ms>', 'passed to svc serve: log requests slower than this (0 = off; default 1000)', integerOption('slow-query-ms', 0, 86_400_000))
    .addHelpText('after', '\nThe pid file, the state file and the log (<instance>.log) are kept in the instance\'s state_dir (default .svc).')
    .action(action('start', async (name: string, options: StartOptions) => {
      await start(name, options);
    }));
}

async function start(name: string, options: StartOptions): Promise<void> {
  const project = loadProject();
  const instance = findLocalInstance(project, checkInstanceName(name), 'start');
  const note = checkContainerRuntime(project);
  if (note !== null) process.stderr.write(`${note}\n`);
  mkdirSync(instance.stateDir, { recursive: true });
  const release = await holdInstanceLock(instance, options.waitTimeoutMs);
  try {
    await startHolding(project, instance, name, options);
  } finally {
    release();
  }
}

/** The start itself, while this svc start holds the instance's lock. */
async function startHolding(project: Project, instance: LocalInstance, name: string, options: StartOptions): Promise<void> {
  const storage: StorageMode = options.disk === true ? 'disk' : instance.storage;
  const paths = statePaths(instance);
  const url = localBaseUrl(instance.host, instance.port);

  const live = inspect(instance);
  if (live.status === 'running') {
    const runningStorage = live.state?.storage ?? 'unknown';
    const runningUrl = live.state?.url ?? url;
    if (storage === 'disk' && runningStorage === 'memory') {
      throw new CliError(`${name} is already running with memory storage (pid ${live.pid}); stop it first with \`svc stop ${name}\`, then \`svc start ${name} --disk\``);
    }
    process.stdout.write(`${name} is already running at ${runningUrl} (pid ${live.pid}, storage: ${runningStorage})\n`);
    return;
  }
  if (live.stalePid !== null) removeRunFiles(instance);

  // Something else on the port would make the server fail to bind; say so directly.
  try {
    const probe = await httpRequest(`${url}/readyz`, { timeoutMs: 1000 });
    throw new CliError(
      `port ${instance.port} on ${instance.host} is already in use (${url}/readyz answered HTTP ${probe.status}) by a process svc did not start; ` +
      `stop it, or change port in [local.${name}] of ${project.configPath}`,
    );
  } catch (err) {
    if (!(err instanceof Unreachable)) throw err;
  }

  if (storage === 'disk') mkdirSync(paths.data, { recursive: true });
  const args = ['serve', '--started-by', paths.pid, '--host', instance.host, '--port', String(instance.port)];
  if (storage === 'disk') args.push('--disk', paths.data);
  if (instance.readers !== null) args.push('--readers', String(instance.readers));
  if (instance.queryTimeoutMs !== null) args.push('--query-timeout-ms', String(instance.queryTimeoutMs));
  if (instance.queryMemoryMb !== null) args.push('--query-memory-mb', String(instance.queryMemoryMb));
  if (options.logRequests === true) args.push('--log-requests');
  if (options.slowQueryMs !== undefined) args.push('--slow-query-ms', String(options.slowQueryMs));
  // svc serve says this too, but into the log; say it where the user is looking.
  const warning = noAuthenticationWarning(instance.host);
  if (warning !== null) process.stderr.write(`svc start: warning: ${warning}\n`);

  const logFd = openSync(paths.log, 'a');
  let logOffset: number;
  let child: ChildProcess;
  try {
    const server = serverProcess(mainPath, args, process.env);
    writeSync(logFd, `--- svc start ${name} at ${new Date().toISOString()}: ${[process.execPath, ...server.argv].join(' ')}\n`);
    logOffset = fstatSync(logFd).size;
    child = spawn(process.execPath, server.argv, { detached: true, stdio: ['ignore', logFd, logFd], cwd: project.root, env: server.env });
  } finally {
    closeSync(logFd);
  }
  const exit: { value: { code: number | null; signal: NodeJS.Signals | null } | null } = { value: null };
  child.once('exit', (code, signal) => { exit.value = { code, signal }; });
  const pid = await new Promise<number>((resolve, reject) => {
    child.once('spawn', () => resolve(child.pid!));
    child.once('error', (err) => reject(new CliError(`cannot start ${process.execPath}: ${messageOf(err)}`)));
  });

  const state: RunState = {
    pid,
    host: instance.host,
    port: instance.port,
    url,
    storage,
    data_dir: storage === 'disk' ? paths.data : null,
    started_at: new Date().toISOString(),
    log: paths.log,
    runtime: 'process',
  };
  try {
    writeRunFiles(instance, state);
  } catch (err) {
    // Without its pid file no svc stop could reach the server: stop it now.
    child.kill('SIGTERM');
    child.unref();
    throw err;
  }

  const deadline = monotonicMs() + options.waitTimeoutMs;
  for (;;) {
    const exited = exit.value;
    if (exited !== null) {
      removeRunFiles(instance, pid);
      throw new CliError(
        `${name} exited during start-up (${exited.signal ?? `exit code ${exited.code}`}). ` +
        `Last lines of ${relative(process.cwd(), paths.log) || paths.log}:\n${logTail(paths.log, logOffset)}`,
      );
    }
    if (logSince(paths.log, logOffset).includes('svcdb listening on ') && await isReady(url)) break;
    if (monotonicMs() > deadline) {
      child.kill('SIGTERM');
      removeRunFiles(instance, pid);
      throw new CliError(`${name} did not become ready within ${options.waitTimeoutMs} ms (stopped it). Last lines of ${paths.log}:\n${logTail(paths.log, logOffset)}`);
    }
    await sleep(pollIntervalMs);
  }
  child.unref();

  const logShown = relative(process.cwd(), paths.log) || paths.log;
  process.stdout.write(`${name} is running at ${url} (pid ${pid}, storage: ${storage}, log: ${logShown})\n`);
  if (storage === 'memory') process.stdout.write(`Storage is in memory: \`svc stop ${name}\` discards the data (\`svc start ${name} --disk\` persists it).\n`);
}

/**
 * null for the process runtime; a note when a container runtime is configured and
 * installed; a CliError when it is configured but not installed.
 */
export function checkContainerRuntime(project: Project): string | null {
  const runtime = project.containerRuntime;
  if (runtime === null || runtime === 'process') return null;
  if (findOnPath(runtime) === null) {
    throw new CliError(
      `container_runtime = "${runtime}" in [project] of ${project.configPath}, but \`${runtime}\` is not installed (not found on PATH). ` +
      `Install ${runtime}, or use the default process runtime: remove the container_runtime key or set container_runtime = "process".`,
    );
  }
  return `svc start: container_runtime = "${runtime}": svcdb container images are not published yet, so the instance runs with the process runtime ` +
    `(svc serve as a background process). Set container_runtime = "process" in [project] to silence this note.`;
}

function findOnPath(binary: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, binary);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

async function isReady(url: string): Promise<boolean> {
  try {
    return (await httpRequest(`${url}/readyz`, { timeoutMs: 1000 })).status === 200;
  } catch {
    return false;
  }
}

/** The log text written after `offset` (at most the last 64 KiB). */
function logSince(path: string, offset: number): string {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return '';
  }
  try {
    const size = fstatSync(fd).size;
    const from = Math.max(offset, size - 65536);
    const buffer = Buffer.alloc(Math.max(0, size - from));
    const read = readSync(fd, buffer, 0, buffer.length, from);
    return buffer.subarray(0, read).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

function logTail(path: string, offset: number): string {
  const lines = logSince(path, offset).trimEnd().split('\n');
  const tail = lines.slice(-logTailLines).map((l) => `  ${l}`).join('\n');
  return tail.trim() === '' ? '  (the log is empty)' : tail;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

