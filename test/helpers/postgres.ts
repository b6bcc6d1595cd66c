// A throwaway PostgreSQL cluster for tests: initdb into a temp directory, `postgres` on a
// free loopback port with trust authentication, one database per call of createDatabase,
// and stop() removes it all. PostgreSQL refuses to run as root, so as root the cluster
// runs as the `postgres` user of Debian's package (else `nobody`).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './cli.js';

export interface PostgresCluster {
  readonly port: number;
  /** A new empty database; its postgres:// URL. */
  createDatabase(name: string): Promise<string>;
  /** Stops the server (fast shutdown: every session ends), waits `downMs`, starts it again on the same data and port. */
  restart(downMs: number): Promise<void>;
  stop(): Promise<void>;
}

const superuser = 'svc_test';

/** The directory of initdb and postgres: PATH, else Debian's /usr/lib/postgresql/<n>/bin. */
export function postgresBinDir(): string | null {
  for (const dir of (process.env['PATH'] ?? '').split(':')) {
    if (dir !== '' && existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'postgres'))) return dir;
  }
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
  for (const version of versions) {
    const dir = join(root, version, 'bin');
    if (existsSync(join(dir, 'initdb'))) return dir;
  }
  return null;
}

function userIds(name: string): { uid: number; gid: number } | null {
  for (const line of readFileSync('/etc/passwd', 'utf8').split('\n')) {
    const fields = line.split(':');
    if (fields[0] === name && fields.length >= 4) return { uid: Number(fields[2]), gid: Number(fields[3]) };
  }
  return null;
}

export async function startPostgres(startTimeoutMs = 30_000): Promise<PostgresCluster> {
  const bin = postgresBinDir();
  if (bin === null) throw new Error('PostgreSQL is not installed (initdb not found): apt-get install postgresql (.ci/run does)');
  const runAs = process.getuid?.() === 0 ? (userIds('postgres') ?? userIds('nobody')) : null;
  const dir = mkdtempSync(join(tmpdir(), 'svc-pg-'));
  if (runAs !== null) chownSync(dir, runAs.uid, runAs.gid);
  const dataDir = join(dir, 'data');
  const ids = runAs === null ? {} : { uid: runAs.uid, gid: runAs.gid };
  execFileSync(join(bin, 'initdb'), ['-D', dataDir, '-U', superuser, '-A', 'trust', '-E', 'UTF8', '--no-sync', '--no-locale'],
    { ...ids, stdio: ['ignore', 'ignore', 'pipe'], cwd: dir });
  const port = await freePort();
  const adminUrl = `postgres://${superuser}@127.0.0.1:${port}/postgres`;
  let child!: ChildProcess;
  let exited!: Promise<void>;
  const launch = async (): Promise<void> => {
    // fsync off and a small footprint: the cluster lives for one test file.
    child = spawn(join(bin, 'postgres'), ['-D', dataDir, '-p', String(port), '-h', '127.0.0.1', '-k', dir,
      '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'shared_buffers=16MB', '-c', 'max_connections=40'],
    { ...ids, stdio: ['ignore', 'ignore', 'pipe'], cwd: dir });
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    const started = child;
    exited = new Promise<void>((resolve) => started.once('exit', () => resolve()));
    const until = Date.now() + startTimeoutMs;
    for (;;) {
      const client = new pg.Client({ connectionString: adminUrl });
      try {
        await client.connect();
        await client.query('SELECT 1');
        await client.end();
        return;
      } catch (err) {
        await client.end().catch(() => undefined);
        if (started.exitCode !== null || Date.now() > until) {
          started.kill('SIGKILL');
          rmSync(dir, { recursive: true, force: true });
          throw new Error(`PostgreSQL did not start: ${err instanceof Error ? err.message : String(err)}\n${stderr}`);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  };
  const halt = async (): Promise<void> => {
    // SIGINT: PostgreSQL's fast shutdown (ends sessions, no wait for clients).
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
    const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(killer);
  };
  await launch();

  return {
    port,
    async createDatabase(name: string): Promise<string> {
      if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`database name ${name} is not a plain identifier`);
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end();
      }
      return `postgres://${superuser}@127.0.0.1:${port}/${name}`;
    },
    async restart(downMs: number): Promise<void> {
      await halt();
      await new Promise((r) => setTimeout(r, downMs));
      await launch();
    },
    async stop(): Promise<void> {
      await halt();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
