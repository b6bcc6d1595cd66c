// Starting and stopping the server processes the HTTP scenarios talk to.
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { procMemory } from './util.js';

/** Repository root (this file runs from dist/bench/). */
export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
export const svcdbMain = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
export const bareUwsMain = fileURLToPath(new URL('./bare-uws.js', import.meta.url));

/** What the `svc` launcher's #! line starts node with: environment assignments and node flags. */
export interface Launcher {
  env: Record<string, string>;
  flags: string[];
}

/**
 * The `svc` launcher's `#!/usr/bin/env -S [NAME=VALUE ...] node [flags]` line of `script`:
 * the server is measured as users start it (the flags and glibc settings size its memory,
 * src/server/launch.ts). Read from the script, not imported, so an A/B measures each build
 * with its own line.
 */
export function launcher(script: string): Launcher {
  if (!existsSync(script)) return { env: {}, flags: [] };
  const first = readFileSync(script, 'utf8').split('\n', 1)[0]!;
  const m = /^#!\/usr\/bin\/env -S (.*)$/.exec(first);
  const words = m ? m[1]!.trim().split(/\s+/) : [];
  const node = words.indexOf('node');
  const env: Record<string, string> = {};
  for (const word of words.slice(0, Math.max(node, 0))) {
    const eq = word.indexOf('=');
    if (eq > 0) env[word.slice(0, eq)] = word.slice(eq + 1);
  }
  return { env, flags: node < 0 ? [] : words.slice(node + 1) };
}

/** SVCDB_BENCH_NODE_FLAGS: node flags after the launcher's (a later V8 flag wins), for experiments such as --trace-gc. */
export function benchNodeFlags(): string[] {
  return (process.env.SVCDB_BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean);
}

/**
 * Debugging aid: with SVCDB_BENCH_SERVER_LOG=DIR, what `streams` print goes to
 * DIR/<name>-<pid>.log, each chunk after a wall-clock line (`@<Date.now()>`) that lines it
 * up with a client's timings. Nothing without the variable.
 */
export function keepServerLog(name: string, pid: number | undefined, streams: Readable[]): void {
  const logDir = process.env.SVCDB_BENCH_SERVER_LOG;
  if (!logDir) return;
  mkdirSync(logDir, { recursive: true });
  const file = `${logDir}/${name.replace(/[^\w.-]+/g, '_')}-${pid}.log`;
  for (const stream of streams) stream.on('data', (d: Buffer | string) => appendFileSync(file, `@${Date.now()}\n${String(d)}`));
}

export interface RunningProcess {
  name: string;
  pid: number;
  url: string;
  /** The command line, for the report. */
  command: string;
  memory(): { rssMiB: number; hwmMiB: number } | null;
  stop(): Promise<void>;
}

export interface SpawnOptions {
  /** CPU list for taskset (e.g. "0"), or null for no pinning. */
  cpus: string | null;
  startTimeoutMs?: number;
  /** Variables over the launcher's and this process's (an A/B of settings). */
  env?: Record<string, string>;
}

/** Spawn `node <script> <args>` and wait for its `... listening on http(s)://HOST:PORT` line. */
export async function startListening(name: string, script: string, args: string[], opts: SpawnOptions): Promise<RunningProcess> {
  const start = launcher(script);
  const nodeArgs = [...start.flags, ...benchNodeFlags(), script, ...args];
  // taskset execs node, so the child's PID is node's PID (needed for /proc/<pid>/status).
  const [cmd, argv] = opts.cpus !== null
    ? ['taskset', ['-c', opts.cpus, process.execPath, ...nodeArgs]]
    : [process.execPath, nodeArgs];
  const child: ChildProcess = spawn(cmd, argv, { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...start.env, ...opts.env } });
  const assignments = Object.entries({ ...start.env, ...opts.env }).map(([k, v]) => `${k}=${v}`);
  const command = [...assignments, opts.cpus !== null ? `taskset -c ${opts.cpus} node` : 'node', ...nodeArgs.map((a) => a.replace(repoRoot, ''))].join(' ');
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => { stderr += d.toString(); if (stderr.length > 20_000) stderr = stderr.slice(-10_000); });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${name}: no "listening on" line within ${opts.startTimeoutMs ?? 15000} ms\n${out}${stderr}`)), opts.startTimeoutMs ?? 15000);
    child.stdout!.on('data', (d: Buffer) => {
      if (out.length < 65_536) out += d.toString();
      const m = /listening on (https?:\/\/[^\s)]+)/.exec(out);
      if (m) { clearTimeout(timer); resolve(m[1]!.replace(/\/$/, '')); }
    });
    void exited.then((code) => { clearTimeout(timer); reject(new Error(`${name} exited with code ${code} before listening\n${out}${stderr}`)); });
  });
  child.stdout!.resume();
  keepServerLog(name, child.pid, [child.stdout!]); // e.g. node --trace-gc-nvp

  return {
    name, pid: child.pid!, url, command,
    memory: () => procMemory(child.pid!),
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 5000).unref());
      if ((await Promise.race([exited, timeout])) === 'timeout') {
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
}

export function svcdbAvailable(): boolean {
  return existsSync(svcdbMain);
}

export function startSvcdb(readers: number, cpus: string | null): Promise<RunningProcess> {
  return startListening('svcdb', svcdbMain, ['serve', '--host', '127.0.0.1', '--port', '0', '--readers', String(readers)], { cpus, startTimeoutMs: 30_000 });
}

export function startBareUws(cpus: string | null): Promise<RunningProcess> {
  return startListening('bare-uws', bareUwsMain, ['127.0.0.1', '0'], { cpus });
}

/** POST a JSON body; returns status and text. */
export async function post(url: string, body: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${url}/v2/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  return { status: res.status, body: await res.text() };
}
