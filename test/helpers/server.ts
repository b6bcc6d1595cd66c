// Runs the real, built server (`node dist/src/cli/main.js serve ...`) as a child process
// on a free loopback port. `npm test` builds first (the `pretest` script).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const cliPath = join(here, '../../dist/src/cli/main.js');

/** The one line `svc serve` prints when it is ready. */
export const startLine = /^svcdb listening on (http:\/\/([^\s:]+):(\d+)) \(storage: (memory|disk [^,]+)(?:, mode: reader)?, readers: (\d+), uws: native(, (?:recovered|following from) [^)]*)?\)$/;

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface SpawnedServer {
  url: string;
  port: number;
  child: ChildProcess;
  /** Everything printed so far. */
  stdout(): string;
  stderr(): string;
  exited: Promise<Exit>;
  /** Send a signal (default SIGTERM) and wait for the exit. */
  stop(signal?: NodeJS.Signals): Promise<Exit>;
}

export interface RunResult extends Exit {
  stdout: string;
  stderr: string;
}

function assertBuilt(): void {
  if (!existsSync(cliPath)) throw new Error(`${cliPath} is missing: run \`npm run build\` first (npm test does)`);
}

/** Start `svc serve --port 0 ...args` and resolve once it printed its start-up line. */
export async function spawnServer(args: string[] = [], env: NodeJS.ProcessEnv = {}, startTimeoutMs = 20_000): Promise<SpawnedServer> {
  assertBuilt();
  const child = spawn(process.execPath, [cliPath, 'serve', '--port', '0', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { err += d; });
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));

  const line = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server did not start within ${startTimeoutMs} ms\nstdout: ${out}\nstderr: ${err}`));
    }, startTimeoutMs);
    const onData = (): void => {
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      clearTimeout(timer);
      child.stdout!.off('data', onData);
      resolve(out.slice(0, nl));
    };
    child.stdout!.on('data', onData);
    void exited.then((e) => {
      clearTimeout(timer);
      reject(new Error(`server exited during start-up (code ${e.code}, signal ${e.signal})\nstdout: ${out}\nstderr: ${err}`));
    });
  });
  const match = startLine.exec(line);
  if (match === null) {
    child.kill('SIGKILL');
    throw new Error(`unexpected start-up line: ${JSON.stringify(line)}`);
  }
  return {
    url: match[1]!,
    port: Number(match[3]),
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** Run `svc ...args` to completion (for commands that are expected to exit). */
export async function runCli(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 20_000): Promise<RunResult> {
  assertBuilt();
  const child = spawn(process.execPath, [cliPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
  child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const exit = await new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  clearTimeout(timer);
  return { ...exit, stdout, stderr };
}
