// A real `svc serve` process (writer or reader mode) as a backend of the gateway tests.
// (server.ts's spawnServer accepts only the writer's start line.)
import { spawn } from 'node:child_process';
import { cliPath } from './server.js';

export interface SpawnedBackend {
  url: string;
  stdout(): string;
  stderr(): string;
  /** Signal it (default SIGTERM) unless it exited already, and resolve with how it exited. */
  stop(signal?: NodeJS.Signals): Promise<ProcessExit>;
}

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Spawn `node dist/src/cli/main.js <command...args>` and resolve once stdout matches `ready` (group 1: the URL). */
export async function spawnCli(args: string[], ready: RegExp, env: NodeJS.ProcessEnv = {}, startTimeoutMs = 30_000): Promise<SpawnedBackend> {
  const child = spawn(process.execPath, [cliPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { err += d; });
  const exited = new Promise<ProcessExit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`${args[0]} did not start: ${out} ${err}`)); }, startTimeoutMs);
    child.stdout!.on('data', () => {
      const match = ready.exec(out);
      if (match !== null) { clearTimeout(timer); resolve(match[1]!); }
    });
    void exited.then(() => { clearTimeout(timer); reject(new Error(`${args[0]} exited during start-up: ${out} ${err}`)); });
  });
  return {
    url,
    stdout: () => out,
    stderr: () => err,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return await exited;
    },
  };
}

/** `svc serve --port 0 ...args`, once it printed its start line. */
export function spawnBackend(args: string[]): Promise<SpawnedBackend> {
  return spawnCli(['serve', '--port', '0', ...args], /^svcdb listening on (http:\/\/\S+) /m);
}
