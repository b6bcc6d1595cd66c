// The embedded handle: the same decode/plan/exec/store as the server, in the caller's
// thread, without HTTP. Answers are exactly what the server would send.
import { parseJson, type JsonValue } from '../protocol/json.js';
import { errorBody, SvcError } from '../protocol/errors.js';
import { defaultExecOptions, executeRequest, type RequestFlags } from '../exec/request.js';
import { Store } from '../store/store.js';
import { defaultDiskOptions, DiskFollower, DiskWriter } from '../durability/disk-storage.js';

export interface OpenOptions {
  /** 'memory' (default; nothing survives close) or 'disk' (WAL + snapshots under `path`). */
  storage?: 'memory' | 'disk';
  /** Directory of a disk database. */
  path?: string;
  /** 'writer' (default; holds the directory's lock) or 'reader' (read-only, follows the writer). */
  mode?: 'writer' | 'reader';
  /** Cooperative deadline per query, default 30 s. */
  queryTimeoutMs?: number;
  /** Disk writer: snapshot when the WAL segment reaches this many bytes. */
  snapshotWalBytes?: number;
}

export interface QueryOptions {
  /** Deadline for this query, overriding the handle's `queryTimeoutMs`. */
  timeoutMs?: number;
  /** Wait for durability (validated like the header; memory storage is durable on commit). */
  awaitDurable?: boolean;
  /** Gateway headers and routing options are not valid in-process; given, they are rejected. */
  warm?: boolean;
  requireWriter?: boolean;
  tenantId?: string;
  headers?: Record<string, string>;
}

/** JSON text of a request object; bigint values become exact integer tokens. */
export function requestText(request: unknown): string {
  if (typeof request === 'string') return request;
  return JSON.stringify(request, (_k, v: unknown) => (typeof v === 'bigint' ? `\u0000big:${v}` : v))
    .replace(/"\\u0000big:(-?\d+)"/g, '$1');
}

/** A response value as plain JS: safe integers as numbers, larger ones as bigint. */
export function toPlain(v: JsonValue): unknown {
  if (typeof v === 'bigint') return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
  if (Array.isArray(v)) return v.map(toPlain);
  if (v instanceof Map) {
    const out: Record<string, unknown> = {};
    for (const [k, item] of v) Object.defineProperty(out, k, { value: toPlain(item), enumerable: true, writable: true, configurable: true });
    return out;
  }
  return v;
}

/** Where a handle's store lives and how its writes become durable. */
type Backing =
  | { kind: 'memory'; store: Store }
  | { kind: 'disk'; writer: DiskWriter }
  | { kind: 'follower'; follower: DiskFollower };

export class Database {
  private backing: Backing | null;
  private readonly queryTimeoutMs: number;
  private syncScheduled = false;

  constructor(backing: Backing, queryTimeoutMs: number) {
    this.backing = backing;
    this.queryTimeoutMs = queryTimeoutMs;
  }

  /** Status and exact response text, as the server would send them. */
  async queryRaw(request: unknown, options: QueryOptions = {}): Promise<{ status: number; body: string }> {
    const backing = this.backing;
    if (backing === null) throw new SvcError('database_closed', 'database is closed');
    for (const key of ['warm', 'requireWriter', 'tenantId', 'headers'] as const) {
      if (options[key] !== undefined) {
        throw new SvcError('invalid_request', `invalid request: \`${key}\` is a gateway/routing option and is not valid for an embedded database`);
      }
    }
    const flags: RequestFlags = { warm: null, requireWriter: null, awaitDurable: options.awaitDurable ?? null };
    const queryTimeoutMs = options.timeoutMs ?? this.queryTimeoutMs;
    const body = requestText(request);
    if (backing.kind === 'follower') {
      backing.follower.refresh();
      return this.finish(executeRequest(backing.follower.store, body, flags, 'replica', { queryTimeoutMs }));
    }
    if (backing.kind === 'memory') return this.finish(executeRequest(backing.store, body, flags, 'writer', { queryTimeoutMs }));
    const writer = backing.writer;
    const epoch = writer.store.committedEpoch();
    const outcome = this.finish(executeRequest(writer.store, body, flags, 'writer', { queryTimeoutMs, logBatch: (b) => writer.logBatch(b) }));
    if (writer.store.committedEpoch() !== epoch) {
      // A write committed: acknowledge after fsync unless the caller opted out.
      if (options.awaitDurable === false) this.scheduleSync(writer);
      else {
        try {
          writer.sync();
        } catch (err) {
          const e = err instanceof SvcError ? err : new SvcError('storage_error', String(err));
          return { status: e.status, body: errorBody(e) };
        }
      }
      writer.maybeSnapshot();
    }
    return outcome;
  }

  private finish(outcome: ReturnType<typeof executeRequest>): { status: number; body: string } {
    if ('forward' in outcome) throw new SvcError('internal_error', 'internal error: embedded handle asked to forward');
    return outcome;
  }

  private scheduleSync(writer: DiskWriter): void {
    if (this.syncScheduled) return;
    this.syncScheduled = true;
    setImmediate(() => {
      this.syncScheduled = false;
      try { writer.sync(); } catch { /* the next acknowledged write reports the failure */ }
    });
  }

  /** Parsed response object; failures throw SvcError with `error`, `msg` and `status`. */
  async query(request: unknown, options: QueryOptions = {}): Promise<Record<string, unknown>> {
    const { status, body } = await this.queryRaw(request, options);
    const parsed = parseJson(body);
    if (status !== 200) {
      const o = parsed as Map<string, JsonValue>;
      throw new SvcError(o.get('error') as never, String(o.get('msg')), status);
    }
    return toPlain(parsed) as Record<string, unknown>;
  }

  /** Disk writer: snapshot, close the WAL and release the directory lock. */
  async close(): Promise<void> {
    const backing = this.backing;
    this.backing = null;
    if (backing?.kind === 'disk') backing.writer.close();
  }
}

export async function openDatabase(options: OpenOptions = {}): Promise<Database> {
  const storage = options.storage ?? 'memory';
  const timeout = options.queryTimeoutMs ?? defaultExecOptions.queryTimeoutMs;
  if (storage === 'memory') return new Database({ kind: 'memory', store: Store.create() }, timeout);
  if (storage !== 'disk') throw new SvcError('invalid_configuration', `unknown storage \`${String(storage)}\`; use 'memory' or 'disk'`);
  if (!options.path) throw new SvcError('invalid_configuration', "disk storage needs a `path`");
  if ((options.mode ?? 'writer') === 'reader') return new Database({ kind: 'follower', follower: DiskFollower.open(options.path) }, timeout);
  const writer = DiskWriter.open(options.path, { ...defaultDiskOptions, snapshotWalBytes: options.snapshotWalBytes ?? defaultDiskOptions.snapshotWalBytes });
  return new Database({ kind: 'disk', writer }, timeout);
}
