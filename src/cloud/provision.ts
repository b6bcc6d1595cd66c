// Provisioning: a database's writer and reader servers. A new database is recorded as
// Provisioning; the provisioner starts its writer (`svc serve --mode writer` on the
// database's own storage prefix), waits for its /readyz, then starts the readers
// (`--mode reader`, following the same prefix), waits for theirs, records the URLs and
// sets the status Active, or Failed with the reason.
//
// Where the servers run is a hook: BackendRuntime. ProcessRuntime (below) runs them as
// child processes on this host, on loopback and free ports. Running them elsewhere (a
// container scheduler, VMs, systemd on other hosts) is another BackendRuntime whose
// start() returns the server's reachable base URL and a stop(); the provisioner needs
// nothing else, and the gateway only ever sees the URLs in the store. Such a runtime
// should start every server with `--database-id <spec.databaseId>` as ProcessRuntime
// does: the binding is what keeps a stale route from reaching another database's data.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { processAlive } from '../durability/process-alive.js';
import { serverProcess } from '../server/launch.js';
import type { ControlPlaneStore, Database } from './admin-store.js';
import type { Logger } from './log.js';
import { monotonicMs } from '../clock.js';

export type BackendRole = 'writer' | 'reader';

/** Where a database's data lives: under an S3 prefix, or a local directory (a laptop). */
export type StorageRoot =
  | { readonly kind: 's3'; readonly bucket: string; readonly prefix: string; readonly endpointUrl?: string; readonly region?: string }
  | { readonly kind: 'directory'; readonly path: string };

export interface BackendSpec {
  readonly databaseId: string;
  readonly role: BackendRole;
  /** 0 for the writer; 0..N-1 for readers. */
  readonly ordinal: number;
  /** The database's storage: `s3://bucket/<root prefix>/databases/<id>` or a directory. */
  readonly storage: { readonly kind: 's3'; readonly uri: string; readonly endpointUrl?: string; readonly region?: string } | { readonly kind: 'directory'; readonly path: string };
}

export interface RunningBackend {
  /** Base URL the gateway reaches the server at, without a trailing slash. */
  readonly url: string;
  /** The process ID, when the server is a process of this host (diagnostics, tests). */
  readonly pid?: number;
  /** Settles when the server ended, whether stopped or by itself. */
  readonly exited: Promise<void>;
  /** Stops the server (graceful, then forced) and resolves once it is gone. */
  stop(): Promise<void>;
}

/** The hook for running database servers somewhere: this host's processes, or elsewhere. */
export interface BackendRuntime {
  /** Starts one server; resolves once its URL is known (readiness is checked separately). */
  start(spec: BackendSpec): Promise<RunningBackend>;
}

// ---------------------------------------------------------------- this host's processes

export interface ProcessRuntimeOptions {
  /** The built `svc` entry point; default the one beside this module. */
  readonly cliPath?: string;
  /** Reader threads per server (`svc serve --readers`). */
  readonly threadsPerServer?: number;
  /** How often readers poll the storage for new writes. */
  readonly readerRefreshMs?: number;
  /** Extra environment for the servers (object-storage credentials come from AWS_*). */
  readonly env?: NodeJS.ProcessEnv;
  readonly startTimeoutMs?: number;
  /**
   * A directory for one PID file per running server. A control plane killed without a
   * chance to stop its servers (SIGKILL, OOM) leaves them running, holding the storage's
   * writer lock; the next one calls reapOrphans() to stop them before starting new ones.
   */
  readonly pidDir?: string;
  readonly logger?: Logger;
}

const stopGraceMs = 10_000;

/** The command line of a process (Linux /proc), or null. */
function commandLineOf(pid: number): string[] | null {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return null;
  }
}
/**
 * Variables of the control plane's own environment a database server never gets: the
 * admin token and the store's address would let code running in a database server (or
 * anyone reading its /proc/<pid>/environ) administer every workspace.
 */
const controlPlaneOnlyVariables = new Set(['SVC_CLOUD_ADMIN_TOKEN', 'SVC_CONTROL_PLANE_STORE', 'SVC_REDIS_URL']);
/** Names that usually hold credentials; AWS_* stays, as the servers' object storage needs it. */
const credentialName = /TOKEN|PASSWORD|SECRET/i;

/**
 * The environment a database server inherits from the control plane: everything but the
 * control plane's own secrets. `extra` (ProcessRuntimeOptions.env) is given on purpose and
 * passes whole.
 */
export function serverEnvironment(inherited: NodeJS.ProcessEnv, extra: NodeJS.ProcessEnv | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(inherited)) {
    if (controlPlaneOnlyVariables.has(name)) continue;
    if (credentialName.test(name) && !name.startsWith('AWS_')) continue;
    env[name] = value;
  }
  return { ...env, ...extra };
}

/** Lines of a server's stderr kept to explain a failed start. */
const stderrTailLines = 20;

export class ProcessRuntime implements BackendRuntime {
  private readonly cliPath: string;

  constructor(private readonly options: ProcessRuntimeOptions = {}) {
    this.cliPath = options.cliPath ?? join(fileURLToPath(new URL('.', import.meta.url)), '../cli/main.js');
  }

  /**
   * Stops the servers a previous control plane left running (their PID files are still in
   * pidDir). Only processes that still run this runtime's `svc serve` are signalled, so a
   * PID reused by an unrelated process is left alone. Returns how many were stopped.
   */
  async reapOrphans(): Promise<number> {
    const dir = this.options.pidDir;
    if (dir === undefined) return 0;
    let names: string[];
    try {
      names = readdirSync(dir).filter((n) => n.endsWith('.pid'));
    } catch {
      return 0;
    }
    const orphans: number[] = [];
    for (const name of names) {
      const pid = Number(readFileSync(join(dir, name), 'utf8').trim());
      const command = Number.isInteger(pid) && pid > 0 ? commandLineOf(pid) : null;
      if (command !== null && command.includes(this.cliPath) && command.includes('serve')) orphans.push(pid);
      rmSync(join(dir, name), { force: true });
    }
    for (const pid of orphans) {
      this.options.logger?.warn({ serverPid: pid }, 'stopping a server left running by a previous control plane');
      try { process.kill(pid, 'SIGTERM'); } catch { /* already gone */ }
    }
    const until = monotonicMs() + stopGraceMs;
    while (orphans.some((pid) => processAlive(pid)) && monotonicMs() < until) await new Promise((r) => setTimeout(r, 100));
    for (const pid of orphans.filter((pid) => processAlive(pid))) {
      try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ }
    }
    return orphans.length;
  }

  start(spec: BackendSpec): Promise<RunningBackend> {
    // --database-id binds the server to its database: a gateway route gone stale (this
    // port reused by another database's server after a restart) gets 421, never the
    // other database's data (docs/gateway.md "Binding backends").
    const args = ['serve', '--host', '127.0.0.1', '--port', '0', '--mode', spec.role,
      '--readers', String(this.options.threadsPerServer ?? 1), '--database-id', spec.databaseId];
    if (spec.storage.kind === 's3') {
      args.push('--storage-uri', spec.storage.uri);
      if (spec.storage.endpointUrl !== undefined) args.push('--s3-endpoint-url', spec.storage.endpointUrl);
      if (spec.storage.region !== undefined) args.push('--s3-region', spec.storage.region);
    } else {
      args.push('--disk', spec.storage.path);
    }
    if (spec.role === 'reader') args.push('--refresh-ms', String(this.options.readerRefreshMs ?? 200));
    const server = serverProcess(this.cliPath, args, serverEnvironment(process.env, this.options.env));
    const child: ChildProcess = spawn(process.execPath, server.argv, { stdio: ['ignore', 'pipe', 'pipe'], env: server.env });
    const pidFile = this.options.pidDir === undefined || child.pid === undefined ? null
      : join(this.options.pidDir, `${spec.databaseId}.${spec.role}.${spec.ordinal}.${child.pid}.pid`);
    if (pidFile !== null) {
      mkdirSync(this.options.pidDir!, { recursive: true });
      writeFileSync(pidFile, `${child.pid}\n`);
    }
    const log = this.options.logger?.child({ databaseId: spec.databaseId, role: spec.role, ordinal: spec.ordinal, serverPid: child.pid });
    const stderrTail: string[] = [];
    let stdout = '';
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      for (const line of chunk.split('\n')) {
        if (line === '') continue;
        stderrTail.push(line);
        if (stderrTail.length > stderrTailLines) stderrTail.shift();
        log?.info({ line }, 'server stderr');
      }
    });
    const exited = new Promise<void>((resolve) => child.once('exit', (code, signal) => {
      if (pidFile !== null) rmSync(pidFile, { force: true });
      log?.info({ code, signal }, 'server exited');
      resolve();
    }));
    const stop = async (): Promise<void> => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const force = setTimeout(() => child.kill('SIGKILL'), stopGraceMs);
      await exited;
      clearTimeout(force);
    };
    const startTimeoutMs = this.options.startTimeoutMs ?? 30_000;
    return new Promise<RunningBackend>((resolve, reject) => {
      const timer = setTimeout(() => {
        void stop();
        reject(new Error(`${spec.role} server printed no start line within ${startTimeoutMs} ms: ${stderrTail.join(' | ')}`));
      }, startTimeoutMs);
      child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
        stdout += chunk;
        const match = /^svcdb listening on (http:\/\/\S+) /m.exec(stdout);
        if (match === null) return;
        clearTimeout(timer);
        child.stdout!.removeAllListeners('data');
        child.stdout!.resume();
        log?.info({ url: match[1] }, 'server started');
        resolve({ url: match[1]!, ...(child.pid !== undefined ? { pid: child.pid } : {}), exited, stop });
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`${spec.role} server exited during start-up: ${stderrTail.join(' | ') || '(no output)'}`));
      });
    });
  }
}

// ---------------------------------------------------------------- the provisioner

export interface ProvisionerOptions {
  readonly storage: StorageRoot;
  /** How long a server may take to answer /readyz 200 once started. */
  readonly readyTimeoutMs?: number;
  /**
   * First wait before restarting a server that exited by itself, or before provisioning a
   * restored database again; doubles up to restartDelayMaxMs.
   */
  readonly restartDelayMs?: number;
  readonly restartDelayMaxMs?: number;
  readonly logger?: Logger;
}

interface DatabaseServers {
  /** The slots: null while a server is starting or being restarted. */
  writer: RunningBackend | null;
  readers: (RunningBackend | null)[];
  /** Every server started and not yet stopped, slot or not (stopped on deprovision). */
  started: Set<RunningBackend>;
  /**
   * Aborted by deprovision(): a provisioning or restart under way stops what it started,
   * and a wait between provisioning attempts ends at once.
   */
  readonly cancel: AbortController;
  /** Settles when the first provisioning ended (Active, Failed or cancelled). */
  done: Promise<void>;
  /** Restarts under way (deprovision waits for them). */
  restarts: Set<Promise<void>>;
}

const readyPollMs = 100;
const readyProbeTimeoutMs = 2_000;

/** Polls `GET <url>/readyz` until it answers 200. */
export async function waitUntilReady(url: string, timeoutMs: number, server?: RunningBackend): Promise<void> {
  let gone = false;
  void server?.exited.then(() => { gone = true; });
  const until = monotonicMs() + timeoutMs;
  let last = 'no answer';
  for (;;) {
    if (gone) throw new Error(`${url} exited before it was ready`);
    try {
      const response = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(readyProbeTimeoutMs) });
      await response.arrayBuffer();
      if (response.status === 200) return;
      last = `status ${response.status}`;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    if (monotonicMs() > until) throw new Error(`${url} not ready within ${timeoutMs} ms (${last})`);
    await new Promise((r) => setTimeout(r, readyPollMs));
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export class Provisioner {
  private readonly servers = new Map<string, DatabaseServers>();
  private readonly readyTimeoutMs: number;
  private closed = false;

  constructor(
    private readonly store: ControlPlaneStore,
    private readonly runtime: BackendRuntime,
    private readonly options: ProvisionerOptions,
  ) {
    this.readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
  }

  /** The storage of one database: its own prefix (or subdirectory) under the root. */
  storageOf(database: Database): BackendSpec['storage'] {
    const root = this.options.storage;
    if (root.kind === 'directory') return { kind: 'directory', path: join(root.path, database.storagePrefix) };
    const prefix = root.prefix === '' ? database.storagePrefix : `${root.prefix}/${database.storagePrefix}`;
    return {
      kind: 's3',
      uri: `s3://${root.bucket}/${prefix}`,
      ...(root.endpointUrl !== undefined ? { endpointUrl: root.endpointUrl } : {}),
      ...(root.region !== undefined ? { region: root.region } : {}),
    };
  }

  /**
   * Starts the database's servers in the background; the returned promise settles when
   * the database is Active or Failed (callers that answer at once need not wait for it).
   * `untilActive` (a database restored after a restart, whose data exists): a failed
   * attempt is not final but tried again with growing delays (restartDelayMs doubling up to
   * restartDelayMaxMs, as a crashed server is), the status staying Provisioning with the
   * last failure in status_detail, until it is Active or deleted. A storage outage while
   * the control plane restarts must not leave a database Failed for good.
   */
  provision(databaseId: string, options: { untilActive?: boolean } = {}): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the provisioner is shut down'));
    const existing = this.servers.get(databaseId);
    if (existing !== undefined) return existing.done;
    const entry: DatabaseServers = {
      writer: null, readers: [], started: new Set(), cancel: new AbortController(), done: Promise.resolve(), restarts: new Set(),
    };
    this.servers.set(databaseId, entry);
    entry.done = this.run(databaseId, entry, options.untilActive === true);
    return entry.done;
  }

  /** Starts one server and waits until it is ready; stops it again if that fails. */
  private async startReady(entry: DatabaseServers, spec: BackendSpec): Promise<RunningBackend> {
    const backend = await this.runtime.start(spec);
    entry.started.add(backend);
    void backend.exited.then(() => entry.started.delete(backend));
    try {
      await waitUntilReady(backend.url, this.readyTimeoutMs, backend);
    } catch (err) {
      await backend.stop();
      throw err;
    }
    return backend;
  }

  private async run(databaseId: string, entry: DatabaseServers, untilActive: boolean): Promise<void> {
    const log = this.options.logger?.child({ databaseId });
    let delayMs = this.options.restartDelayMs ?? 1_000;
    const delayMaxMs = this.options.restartDelayMaxMs ?? 30_000;
    for (let attempt = 1; ; attempt++) {
      const failure = await this.attempt(databaseId, entry);
      if (failure === null || entry.cancel.signal.aborted || this.closed) return;
      if (!untilActive || failure.final) {
        this.servers.delete(databaseId);
        await this.store.setDatabaseStatus(databaseId, 'Failed', failure.reason).catch(() => undefined);
        return;
      }
      log?.warn({ attempt, retryInMs: delayMs, reason: failure.reason }, 'provisioning failed: trying again');
      await this.store.setDatabaseStatus(databaseId, 'Provisioning', `attempt ${attempt} failed, trying again in ${delayMs} ms: ${failure.reason}`)
        .catch((err: unknown) => log?.error({ reason: messageOf(err) }, 'recording the failed attempt failed'));
      try {
        await sleep(delayMs, undefined, { signal: entry.cancel.signal });
      } catch {
        return; // deprovisioned meanwhile
      }
      if (entry.cancel.signal.aborted || this.closed) return;
      delayMs = Math.min(delayMs * 2, delayMaxMs);
    }
  }

  /**
   * One provisioning attempt: null once Active (or cancelled), else why it failed, with
   * every server it started stopped again. `final`: trying again cannot help.
   */
  private async attempt(databaseId: string, entry: DatabaseServers): Promise<{ reason: string; final: boolean } | null> {
    const log = this.options.logger?.child({ databaseId });
    const started = monotonicMs();
    try {
      const database = await this.store.databaseRecord(databaseId);
      if (database === null || database.status === 'Deleted') return { reason: 'the database does not exist (any more)', final: true };
      const storage = this.storageOf(database);
      log?.info({ readers: database.readerCount }, 'provisioning');

      // The writer first: it creates the storage layout the readers follow.
      entry.writer = await this.startReady(entry, { databaseId, role: 'writer', ordinal: 0, storage });
      if (entry.cancel.signal.aborted) return null;
      // allSettled, not all: on a failure every reader still starting must have settled
      // (and be in entry.started) before the cleanup below stops them, or one would be left.
      const readers = await Promise.allSettled(Array.from({ length: database.readerCount },
        (_, ordinal) => this.startReady(entry, { databaseId, role: 'reader', ordinal, storage })));
      const failed = readers.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed !== undefined) throw failed.reason;
      entry.readers = readers.map((r) => (r as PromiseFulfilledResult<RunningBackend>).value);
      if (entry.cancel.signal.aborted) return null;

      await this.publish(databaseId, entry);
      await this.store.setDatabaseStatus(databaseId, 'Active');
      entry.readers.forEach((reader, ordinal) => this.supervise(databaseId, entry, reader!, 'reader', ordinal, storage));
      this.supervise(databaseId, entry, entry.writer, 'writer', 0, storage);
      log?.info({ writerUrl: entry.writer.url, readerUrls: entry.readers.map((r) => r!.url), ms: monotonicMs() - started }, 'database active');
      return null;
    } catch (err) {
      const reason = messageOf(err);
      log?.error({ reason }, 'provisioning failed');
      await Promise.all([...entry.started].map((b) => b.stop()));
      entry.writer = null;
      entry.readers = [];
      return { reason, final: false };
    }
  }

  /** Records the servers in their slots now, for the gateway. */
  private async publish(databaseId: string, entry: DatabaseServers): Promise<void> {
    const readerUrls = entry.readers.filter((r): r is RunningBackend => r !== null).map((r) => r.url);
    await this.store.setDatabaseBackends(databaseId, { writerUrl: entry.writer?.url ?? null, readerUrls });
  }

  /**
   * A server of an Active database that exits by itself (crash, OOM kill) is taken out of
   * the route at once, so the gateway stops sending it requests, and started again with
   * growing delays until it is ready; then it is put back. Its data is in the storage.
   */
  private supervise(databaseId: string, entry: DatabaseServers, backend: RunningBackend, role: BackendRole, ordinal: number, storage: BackendSpec['storage']): void {
    void backend.exited.then(() => {
      if (entry.cancel.signal.aborted || this.closed) return;
      const log = this.options.logger?.child({ databaseId, role, ordinal });
      log?.warn({ url: backend.url }, 'server exited unexpectedly: restarting it');
      const restart = (async () => {
        if (role === 'writer') entry.writer = null;
        else entry.readers[ordinal] = null;
        await this.publish(databaseId, entry).catch((err: unknown) => log?.error({ reason: messageOf(err) }, 'recording the exit failed'));
        let delayMs = this.options.restartDelayMs ?? 1_000;
        const delayMaxMs = this.options.restartDelayMaxMs ?? 30_000;
        while (!entry.cancel.signal.aborted && !this.closed) {
          try {
            await sleep(delayMs, undefined, { signal: entry.cancel.signal });
          } catch {
            return; // deprovisioned (or the control plane stops) meanwhile
          }
          if (entry.cancel.signal.aborted || this.closed) return;
          try {
            const replacement = await this.startReady(entry, { databaseId, role, ordinal, storage });
            if (entry.cancel.signal.aborted || this.closed) {
              await replacement.stop();
              return;
            }
            if (role === 'writer') entry.writer = replacement;
            else entry.readers[ordinal] = replacement;
            await this.publish(databaseId, entry);
            log?.info({ url: replacement.url }, 'server restarted');
            this.supervise(databaseId, entry, replacement, role, ordinal, storage);
            return;
          } catch (err) {
            log?.error({ reason: messageOf(err), retryInMs: Math.min(delayMs * 2, delayMaxMs) }, 'restart failed');
            delayMs = Math.min(delayMs * 2, delayMaxMs);
          }
        }
      })();
      entry.restarts.add(restart);
      void restart.finally(() => entry.restarts.delete(restart));
    });
  }

  /** URLs of the servers in their slots for a database (tests, diagnostics). */
  running(databaseId: string): string[] {
    const entry = this.servers.get(databaseId);
    if (entry === undefined) return [];
    return [entry.writer, ...entry.readers].filter((b): b is RunningBackend => b !== null).map((b) => b.url);
  }

  /** The server in a slot (tests, diagnostics): the writer, or reader `ordinal`. */
  backend(databaseId: string, role: BackendRole, ordinal = 0): RunningBackend | null {
    const entry = this.servers.get(databaseId);
    if (entry === undefined) return null;
    return (role === 'writer' ? entry.writer : entry.readers[ordinal]) ?? null;
  }

  /** Stops the database's servers (deletion); waits for a provisioning under way to stop. */
  async deprovision(databaseId: string): Promise<void> {
    const entry = this.servers.get(databaseId);
    if (entry === undefined) return;
    entry.cancel.abort();
    await entry.done;
    await Promise.all([...entry.started].map((b) => b.stop()));
    await Promise.all([...entry.restarts]);
    await Promise.all([...entry.started].map((b) => b.stop()));
    this.servers.delete(databaseId);
    this.options.logger?.info({ databaseId }, 'servers stopped');
  }

  /**
   * After a restart of the control plane: marks every database that was Provisioning or
   * Active as Provisioning again and starts its servers (their data is in the storage; the
   * old processes are gone), trying again until each is Active (`untilActive`: the storage
   * or the old servers' writer locks may take a while). Resolves once marked; `restored`
   * settles when all are done. A Failed database stays Failed until an operator provisions
   * it again (POST /admin/v1/databases/:id/provision).
   */
  async restoreAll(): Promise<{ readonly restored: Promise<void> }> {
    const databases = (await this.store.listDatabases()).filter((d) => d.status === 'Active' || d.status === 'Provisioning');
    // Marked before this resolves, so nobody reads the old run's URLs as Active meanwhile.
    for (const d of databases) await this.store.setDatabaseStatus(d.id, 'Provisioning');
    return { restored: Promise.all(databases.map((d) => this.provision(d.id, { untilActive: true }))).then(() => undefined) };
  }

  /** Shutdown: stops every server this provisioner started. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.servers.keys()].map((id) => this.deprovision(id)));
  }
}
