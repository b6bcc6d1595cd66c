// `svc stop <instance>`: SIGTERM to the server recorded in the pid file, wait for it to
// drain and exit, remove the pid and state files. Idempotent: an instance that is not
// running (no pid file, or a stale one) is reported and the command still succeeds.
import { existsSync, statSync } from 'node:fs';
import type { Command } from 'commander';
import { action, CliError } from './errors.js';
import { holdInstanceLock, inspect, isAlive, PidFileIsDirectory, removeRunFiles } from './instance-state.js';
import { checkInstanceName, findLocalInstance, loadProject, type LocalInstance } from './project.js';
import { integerOption } from './options.js';
import { monotonicMs } from '../clock.js';

interface StopOptions {
  timeoutMs: number;
}

const pollIntervalMs = 50;
const killWaitMs = 5_000;
/** How much longer than one stop another waits for the instance lock. */
const lockSlackMs = 5_000;

export function registerStop(program: Command): void {
  program
    .command('stop')
    .description('stop a local instance started with `svc start` (SIGTERM, then wait); succeeds when it is already stopped')
    .argument('<instance>', 'a [local.<instance>] table of svc.toml')
    .option('--timeout-ms <ms>', 'how long to wait for a graceful exit before SIGKILL', integerOption('timeout-ms', 1, 600_000), 30_000)
    .action(action('stop', async (name: string, options: StopOptions) => {
      await stop(name, options);
    }));
}

async function stop(name: string, options: StopOptions): Promise<void> {
  const project = loadProject();
  const instance = findLocalInstance(project, checkInstanceName(name), 'stop');
  // No state directory: nothing svc started can be running, and no lock is needed.
  if (!existsSync(instance.stateDir) || !statSync(instance.stateDir).isDirectory()) {
    process.stdout.write(`${name} is not running\n`);
    return;
  }
  // Waits out a start or stop at work (a stop waits for its server up to its timeout and the kill).
  const release = await holdInstanceLock(instance, options.timeoutMs + killWaitMs + lockSlackMs);
  try {
    await stopHolding(instance, name, options);
  } finally {
    release();
  }
}

async function stopHolding(instance: LocalInstance, name: string, options: StopOptions): Promise<void> {
  let live;
  try {
    live = inspect(instance);
  } catch (err) {
    if (!(err instanceof PidFileIsDirectory)) throw err;
    process.stderr.write(`svc stop: ${err.message}\n`);
    process.stdout.write(`${name} is not running\n`);
    return;
  }
  if (live.status === 'stopped') {
    removeRunFiles(instance);
    const stale = live.stalePid === null ? '' : ` (removed a stale pid file for pid ${live.stalePid})`;
    process.stdout.write(`${name} is not running${stale}\n`);
    return;
  }

  const pid = live.pid;
  signal(pid, 'SIGTERM');
  let killed = false;
  if (!(await waitForExit(pid, options.timeoutMs))) {
    process.stderr.write(`svc stop: ${name} (pid ${pid}) did not exit within ${options.timeoutMs} ms; sending SIGKILL\n`);
    signal(pid, 'SIGKILL');
    killed = true;
    if (!(await waitForExit(pid, killWaitMs))) throw new CliError(`${name} (pid ${pid}) is still running after SIGKILL`);
  }
  removeRunFiles(instance);
  const storage = live.state?.storage;
  const note = storage === 'memory' ? '; its in-memory data is discarded' : '';
  process.stdout.write(`${name} stopped (pid ${pid}${killed ? ', killed' : ''})${note}\n`);
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw new CliError(`cannot signal pid ${pid}: ${(err as Error).message}`);
  }
}

async function waitForExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = monotonicMs() + timeoutMs;
  while (isAlive(pid)) {
    if (monotonicMs() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, pollIntervalMs));
  }
  return true;
}
