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
// nothing else, and the gateway only ever sees the URLs in the store.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import type { ControlPlaneStore, Database } from './admin-store.js';
import type { Logger } from './log.js';

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
  readonly logger?: Logger;
}

const stopGraceMs = 10_000;
/** Lines of a server's stderr kept to explain a failed start. */
const stderrTailLines = 20;

export class ProcessRuntime implements BackendRuntime {
  private readonly cliPath: string;

  constructor(private readonly options: ProcessRuntimeOptions = {}) {
    this.cliPath = options.cliPath ?? join(fileURLToPath(new URL('.', import.meta.url)), '../cli/main.js');
  }

  start(spec: BackendSpec): Promise<RunningBackend> {
    const args = [this.cliPath, 'serve', '--host', '127.0.0.1', '--port', '0', '--mode', spec.role,
      '--readers', String(this.options.threadsPerServer ?? 1)];
    if (spec.storage.kind === 's3') {
      args.push('--storage-uri', spec.storage.uri);
      if (spec.storage.endpointUrl !== undefined) args.push('--s3-endpoint-url', spec.storage.endpointUrl);
      if (spec.storage.region !== undefined) args.push('--s3-region', spec.storage.region);
    } else {
      args.push('--disk', spec.storage.path);
    }
    if (spec.role === 'reader') args.push('--refresh-ms', String(this.options.readerRefreshMs ?? 200));
    const child: ChildProcess = spawn(process.execPath, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...this.options.env },
    });
    const log = this.options.logger?.child({ databaseId: spec.databaseId, role: spec.role, ordinal: spec.ordinal, pid: child.pid });
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
        resolve({ url: match[1]!, exited, stop });
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
  readonly logger?: Logger;
}

interface DatabaseServers {
  backends: RunningBackend[];
  /** Set by deprovision(): a provisioning still under way stops what it started. */
  cancelled: boolean;
  /** Settles when the provisioning ended (Active, Failed or cancelled). */
  done: Promise<void>;
}

const readyPollMs = 100;
const readyProbeTimeoutMs = 2_000;

/** Polls `GET <url>/readyz` until it answers 200. */
export async function waitUntilReady(url: string, timeoutMs: number, server?: RunningBackend): Promise<void> {
  let gone = false;
  void server?.exited.then(() => { gone = true; });
  const until = Date.now() + timeoutMs;
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
    if (Date.now() > until) throw new Error(`${url} not ready within ${timeoutMs} ms (${last})`);
    await new Promise((r) => setTimeout(r, readyPollMs));
  }
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
   */
  provision(databaseId: string): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the provisioner is shut down'));
    if (this.servers.has(databaseId)) return this.servers.get(databaseId)!.done;
    const entry: DatabaseServers = { backends: [], cancelled: false, done: Promise.resolve() };
    this.servers.set(databaseId, entry);
    entry.done = this.run(databaseId, entry);
    return entry.done;
  }

  private async run(databaseId: string, entry: DatabaseServers): Promise<void> {
    const log = this.options.logger?.child({ databaseId });
    const started = Date.now();
    try {
      const database = await this.store.databaseRecord(databaseId);
      if (database === null || database.status === 'Deleted') throw new Error('the database does not exist (any more)');
      const storage = this.storageOf(database);
      log?.info({ readers: database.readerCount }, 'provisioning');

      // The writer first: it creates the storage layout the readers follow.
      const writer = await this.runtime.start({ databaseId, role: 'writer', ordinal: 0, storage });
      entry.backends.push(writer);
      await waitUntilReady(writer.url, this.readyTimeoutMs, writer);
      if (entry.cancelled) return;

      const readers = await Promise.all(Array.from({ length: database.readerCount }, async (_, ordinal) => {
        const reader = await this.runtime.start({ databaseId, role: 'reader', ordinal, storage });
        entry.backends.push(reader);
        await waitUntilReady(reader.url, this.readyTimeoutMs, reader);
        return reader;
      }));
      if (entry.cancelled) return;

      await this.store.setDatabaseBackends(databaseId, { writerUrl: writer.url, readerUrls: readers.map((r) => r.url) });
      await this.store.setDatabaseStatus(databaseId, 'Active');
      log?.info({ writerUrl: writer.url, readerUrls: readers.map((r) => r.url), ms: Date.now() - started }, 'database active');
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      log?.error({ reason }, 'provisioning failed');
      await Promise.all(entry.backends.map((b) => b.stop()));
      entry.backends = [];
      if (!entry.cancelled) {
        this.servers.delete(databaseId);
        await this.store.setDatabaseStatus(databaseId, 'Failed', reason).catch(() => undefined);
      }
    }
  }

  /** URLs of the servers running for a database (tests, diagnostics). */
  running(databaseId: string): string[] {
    return (this.servers.get(databaseId)?.backends ?? []).map((b) => b.url);
  }

  /** Stops the database's servers (deletion); waits for a provisioning under way to stop. */
  async deprovision(databaseId: string): Promise<void> {
    const entry = this.servers.get(databaseId);
    if (entry === undefined) return;
    entry.cancelled = true;
    await entry.done;
    await Promise.all(entry.backends.map((b) => b.stop()));
    this.servers.delete(databaseId);
    this.options.logger?.info({ databaseId }, 'servers stopped');
  }

  /**
   * After a restart of the control plane: starts the servers of every database that was
   * Provisioning or Active (their data is in the storage; the old processes are gone).
   */
  async restoreAll(): Promise<void> {
    const databases = await this.store.listDatabases();
    await Promise.all(databases
      .filter((d) => d.status === 'Active' || d.status === 'Provisioning')
      .map(async (d) => {
        await this.store.setDatabaseStatus(d.id, 'Provisioning');
        await this.provision(d.id);
      }));
  }

  /** Shutdown: stops every server this provisioner started. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.servers.keys()].map((id) => this.deprovision(id)));
  }
}
