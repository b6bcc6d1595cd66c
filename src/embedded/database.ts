// The embedded handle: the same decode/plan/exec/store as the server, in the caller's
// thread, without HTTP. Answers are exactly what the server would send.
import { NegativeZeroInteger, parseJson, type JsonValue } from '../protocol/json.js';
import { bodyTooLargeError, errorBody, SvcError } from '../protocol/errors.js';
import { defaultExecOptions, executeRequest, execOptions, explainRequest, noFlags, type ExplainedSource, type QueryBounds, type RequestFlags } from '../exec/request.js';
import { limits } from '../limits.js';
import { DiskFollower } from '../durability/disk-storage.js';
import type { StorageHealth } from '../durability/durable.js';
import { Committer } from '../durability/durable.js';
import { ObjectFollower, type ObjectStorageOptions } from '../durability/object-storage.js';
import { openWriterStorage } from '../durability/open.js';
import type { IndexRuntime } from '../index/runtime.js';
import type { TextAnalyzer } from '../protocol/index-spec.js';
import { ANALYZERS } from '../text/analyze.js';
import { monotonicMs } from '../clock.js';

export interface OpenOptions {
  /**
   * 'memory' (default; nothing survives close), 'disk' (WAL + snapshots under `path`) or
   * 's3' (snapshots + WAL objects in the bucket prefix `uri`).
   */
  storage?: 'memory' | 'disk' | 's3';
  /** Directory of a disk database. */
  path?: string;
  /** Object storage: `s3://bucket/prefix`. */
  uri?: string;
  /** Object storage: an S3-compatible endpoint (default AWS). */
  endpointUrl?: string;
  /** Object storage: region (default AWS_REGION or us-east-1). */
  region?: string;
  /** Object storage: explicit credentials (default the AWS_* environment / SDK chain). */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Object storage: local working directory (default a temp directory). */
  cacheDir?: string;
  /**
   * Object storage reader: look for new writes at most this often (ms) before a query;
   * default 0 (before every query, like a disk reader).
   */
  refreshMs?: number;
  /** 'writer' (default; holds the storage's writer lock) or 'reader' (read-only, follows the writer). */
  mode?: 'writer' | 'reader';
  /** Cooperative deadline per query, default 30 s. */
  queryTimeoutMs?: number;
  /** Memory budget per query in MiB, default limits.queryMemoryBytesMax (128 MiB). */
  queryMemoryMb?: number;
  /**
   * Text indexes created through this handle: the analyzer (default `standard`: split on
   * non-alphanumeric characters, lower-case; `standard_stem_en` adds English stemming,
   * `whitespace_lowercase` splits on whitespace only) and whether postings keep term
   * positions (default false). Part of each index's definition (conflict fields
   * `text_analyzer`, `text_positions_enabled`); the wire always uses the defaults.
   */
  textAnalyzer?: TextAnalyzer;
  textPositions?: boolean;
  /** Disk / object storage writer: snapshot when the WAL reaches this many bytes. */
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

/** What a query without options is given (checked by identity: nothing to validate). */
const NO_OPTIONS: QueryOptions = Object.freeze({});
const ROUTING_OPTIONS = ['warm', 'requireWriter', 'tenantId', 'headers'] as const;

/** Attempts at a placeholder no string of the request holds (each a fresh random one). */
const PLACEHOLDER_ATTEMPTS = 8;

/**
 * JSON text of a request object: bigint values become exact integer tokens and -0 the token
 * `-0` (JSON.stringify writes `0`), as in a body written by hand. They are written as a
 * placeholder string and then replaced; the placeholder is random and used only when the
 * text holds it exactly as often as it was written, so no string of the request is ever
 * taken for one. A value that is not JSON (undefined, a function) is an empty body, which
 * the decoder answers as the server does.
 */
export function requestText(request: unknown): string {
  if (typeof request === 'string') return request;
  for (let attempt = 0; attempt < PLACEHOLDER_ATTEMPTS; attempt++) {
    const placeholder = `\u0000exact-${Math.random().toString(36).slice(2)}:`;
    let written = 0;
    let text: string | undefined;
    try {
      text = JSON.stringify(request, (_k, v: unknown) => {
        if (typeof v === 'bigint') return written++, `${placeholder}${v}`;
        if (v === 0 && 1 / v < 0) return written++, `${placeholder}-0`;
        return v;
      });
    } catch (err) {
      // A cycle, or a toJSON that throws: not a request the server could have been sent.
      throw new SvcError('invalid_query_json', `invalid query JSON: the request object cannot be written as JSON (${err instanceof Error ? err.message : String(err)})`);
    }
    if (text === undefined) return '';
    if (written === 0) return text;
    const quoted = JSON.stringify(placeholder).slice(0, -1); // `"\u0000exact-...:`
    if (text.split(quoted).length - 1 !== written) continue; // a string holds it too: another one
    return text.replaceAll(new RegExp(`${escapeRegExp(quoted)}(-?\\d+)"`, 'g'), '$1');
  }
  throw new SvcError('internal_error', 'internal error: no placeholder for exact integers');
}

function escapeRegExp(s: string): string {
  return s.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&');
}

/** Bodies over limits.bodyBytesMax UTF-8 bytes are refused as the server refuses them (400). */
function tooLarge(body: string): boolean {
  return body.length > limits.bodyBytesMax / 3 && Buffer.byteLength(body, 'utf8') > limits.bodyBytesMax;
}

/** `value`, when it is an integer in [min, max]; else `code` (invalid_configuration for the handle's options) naming it. */
function integerSetting(name: string, value: number | undefined, min: number, max: number, code: 'invalid_configuration' | 'invalid_request_option' = 'invalid_configuration'): number | undefined {
  if (value === undefined || (Number.isSafeInteger(value) && value >= min && value <= max)) return value;
  throw new SvcError(code, `\`${name}\` must be an integer from ${min} to ${max}, not ${typeof value === 'number' ? String(value) : JSON.stringify(value) ?? typeof value}`);
}

/** A response value as plain JS: safe integers as numbers, larger ones as bigint. */
export function toPlain(v: JsonValue): unknown {
  if (typeof v === 'bigint') return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
  if (v instanceof NegativeZeroInteger) return -0;
  if (Array.isArray(v)) return v.map(toPlain);
  if (v instanceof Map) {
    const out: Record<string, unknown> = {};
    for (const [k, item] of v) Object.defineProperty(out, k, { value: toPlain(item), enumerable: true, writable: true, configurable: true });
    return out;
  }
  return v;
}

/**
 * A digit run of 16 or more may be an integer past 2^53, which JSON.parse would round; an
 * answer without one (almost all) is parsed natively, ~8x faster than the exact parser.
 * Both give the same values: integers within 2^53 as numbers, -0 as -0, keys as own data
 * properties (`__proto__` included) in the same order.
 */
const POSSIBLY_UNSAFE_INTEGER = /\d{16}/;

/** An answer's text as plain JS (toPlain's values). */
export function parseAnswer(body: string): unknown {
  return POSSIBLY_UNSAFE_INTEGER.test(body) ? toPlain(parseJson(body)) : JSON.parse(body);
}

/** An answer as an object; a failure thrown as SvcError with the answer's code, message and status. */
function parsedAnswer({ status, body }: { status: number; body: string }): Record<string, unknown> {
  const parsed = parseAnswer(body) as Record<string, unknown>;
  if (status !== 200) throw new SvcError(parsed['error'] as never, String(parsed['msg']), status);
  return parsed;
}

const NO_CALL_OPTIONS = { flags: noFlags, timeoutMs: undefined };

/**
 * A call's flags and deadline, checked as the server checks its headers: gateway and
 * routing options are refused, `awaitDurable` must be a boolean, `timeoutMs` in range.
 */
function callOptions(options: QueryOptions): { flags: RequestFlags; timeoutMs: number | undefined } {
  if (options === NO_OPTIONS) return NO_CALL_OPTIONS;
  for (const key of ROUTING_OPTIONS) {
    if (options[key] !== undefined) {
      throw new SvcError('invalid_request', `invalid request: \`${key}\` is a gateway/routing option and is not valid for an embedded database`);
    }
  }
  const awaitDurable = options.awaitDurable;
  if (awaitDurable !== undefined && typeof awaitDurable !== 'boolean') {
    throw new SvcError('invalid_request_option', `invalid request option: \`awaitDurable\` must be true or false, not ${JSON.stringify(awaitDurable) ?? typeof awaitDurable}`);
  }
  const timeoutMs = integerSetting('timeoutMs', options.timeoutMs, 1, limits.queryTimeoutMsMax, 'invalid_request_option');
  const flags: RequestFlags = awaitDurable === undefined ? noFlags : { warm: null, requireWriter: null, awaitDurable };
  return { flags, timeoutMs };
}

/** Where a handle's store lives: a writer (memory, disk or bucket) or a read-only follower. */
type Backing =
  | { kind: 'writer'; committer: Committer }
  | { kind: 'follower'; follower: DiskFollower }
  | { kind: 'object-follower'; follower: ObjectFollower; refreshMs: number; refreshedAt: number };

export class Database {
  private backing: Backing | null;
  private readonly bounds: QueryBounds;

  constructor(backing: Backing, bounds: QueryBounds) {
    this.backing = backing;
    this.bounds = bounds;
  }

  /** Status and exact response text, as the server would send them. */
  async queryRaw(request: unknown, options: QueryOptions = NO_OPTIONS): Promise<{ status: number; body: string }> {
    const backing = this.openBacking();
    const { flags, timeoutMs } = callOptions(options);
    const body = requestText(request);
    if (tooLarge(body)) return { status: 400, body: errorBody(bodyTooLargeError(limits.bodyBytesMax)) };
    // The committer holds this handle's bounds: given no timeout, it reuses its options object.
    if (backing.kind === 'writer') return backing.committer.execute(body, flags, timeoutMs);
    const exec = execOptions({ queryTimeoutMs: timeoutMs ?? this.bounds.queryTimeoutMs, queryMemoryBytes: this.bounds.queryMemoryBytes });
    if (backing.kind === 'follower' || monotonicMs() - backing.refreshedAt >= backing.refreshMs) {
      await this.refresh(backing);
      if (backing.kind === 'object-follower') backing.refreshedAt = monotonicMs();
    }
    return this.finish(executeRequest(backing.follower.store, body, flags, 'replica', exec));
  }

  /**
   * A read request's status and exact response text, answered in this call (no promise, no
   * turn of the event loop), as queryRaw would answer it. Writer handles only: a write
   * request is answered `invalid_request` without being executed (its answer waits until
   * it is durable: use queryRaw), and a reader handle throws `invalid_request` (it catches
   * up with its storage asynchronously before each query). A write is refused before it is
   * planned (envelope.md §6: a write the mode cannot take fails before planning). Reads see
   * the published epoch, as queryRaw's. One difference: queryRaw sheds any call with
   * `awaitDurable: false` once the handle has too many writes answered before they are
   * durable (server_overloaded), reads included; this call answers reads regardless, as a
   * server's readers do. The query's deadline applies; the caller's thread runs the whole
   * query.
   */
  queryRawSync(request: unknown, options: QueryOptions = NO_OPTIONS): { status: number; body: string } {
    const backing = this.openBacking();
    if (backing.kind !== 'writer') {
      throw new SvcError('invalid_request', 'invalid request: querySync needs a writer handle; a reader catches up with its storage before each query(), which is asynchronous');
    }
    const { flags, timeoutMs } = callOptions(options);
    const body = requestText(request);
    if (tooLarge(body)) return { status: 400, body: errorBody(bodyTooLargeError(limits.bodyBytesMax)) };
    return backing.committer.executeRead(body, flags, timeoutMs);
  }

  private openBacking(): Backing {
    const backing = this.backing;
    if (backing === null) throw new SvcError('database_closed', 'database is closed');
    return backing;
  }

  /**
   * Catch a follower up. One that cannot apply what it finds (damaged WAL) keeps answering
   * from its last epoch, as a reader server does; health() says why it stopped following.
   */
  private async refresh(backing: Exclude<Backing, { kind: 'writer' }>): Promise<void> {
    try {
      await backing.follower.refresh();
    } catch {
      // The follower keeps the problem (health()) and wrote it to stderr once.
    }
  }

  /** Whether a reader still follows its storage (a writer, or memory, always is). */
  health(): StorageHealth {
    const backing = this.backing;
    if (backing === null) return { ready: false, problem: 'database is closed' };
    return backing.kind === 'writer' ? { ready: true, problem: null } : backing.follower.health();
  }

  private finish(outcome: ReturnType<typeof executeRequest>): { status: number; body: string } {
    if ('forward' in outcome) throw new SvcError('internal_error', 'internal error: embedded handle asked to forward');
    return outcome;
  }

  /**
   * Which access path (full scan or which index) each nodes_where / edges_where of a
   * request would use now; nothing is executed (docs/indexes.md).
   */
  explain(request: unknown): ExplainedSource[] {
    const backing = this.openBacking();
    const store = backing.kind === 'writer' ? backing.committer.storage.store : backing.follower.store;
    return explainRequest(store, requestText(request));
  }

  /** Parsed response object; failures throw SvcError with the answer's code, message and status (parseAnswer). */
  async query(request: unknown, options: QueryOptions = NO_OPTIONS): Promise<Record<string, unknown>> {
    return parsedAnswer(await this.queryRaw(request, options));
  }

  /** querySync's answer parsed as query() parses it; the same refusals as queryRawSync. */
  querySync(request: unknown, options: QueryOptions = NO_OPTIONS): Record<string, unknown> {
    return parsedAnswer(this.queryRawSync(request, options));
  }

  /** Writers: make everything durable, snapshot, release the writer lock (throws if the stop was not clean). */
  async close(): Promise<void> {
    const backing = this.backing;
    this.backing = null;
    if (backing?.kind === 'writer') {
      backing.committer.stopIndexWork();
      await backing.committer.storage.close();
    }
    else if (backing?.kind === 'object-follower') backing.follower.close();
  }
}

export async function openDatabase(options: OpenOptions = {}): Promise<Database> {
  const storage = options.storage ?? 'memory';
  const mode = options.mode ?? 'writer';
  // The ranges of svc serve's options, checked as it checks them (a NaN deadline is none).
  const queryTimeoutMs = integerSetting('queryTimeoutMs', options.queryTimeoutMs, 1, limits.queryTimeoutMsMax);
  const queryMemoryMb = integerSetting('queryMemoryMb', options.queryMemoryMb, 1, limits.queryMemoryMbMax);
  const refreshMs = integerSetting('refreshMs', options.refreshMs, 0, limits.refreshMsMax);
  const snapshotWalBytes = integerSetting('snapshotWalBytes', options.snapshotWalBytes, 1, limits.snapshotWalBytesMax);
  const bounds: QueryBounds = {
    queryTimeoutMs: queryTimeoutMs ?? defaultExecOptions.queryTimeoutMs,
    queryMemoryBytes: queryMemoryMb !== undefined ? queryMemoryMb * 1024 * 1024 : limits.queryMemoryBytesMax,
  };
  if (storage !== 'memory' && storage !== 'disk' && storage !== 's3') {
    throw new SvcError('invalid_configuration', `unknown storage \`${String(storage)}\`; use 'memory', 'disk' or 's3'`);
  }
  if (mode !== 'writer' && mode !== 'reader') throw new SvcError('invalid_configuration', `unknown mode \`${String(mode)}\`; use 'writer' or 'reader'`);
  if (mode === 'reader' && storage === 'memory') {
    throw new SvcError('invalid_configuration', "mode 'reader' follows a writer's storage: give storage 'disk' with a `path`, or 's3' with a `uri`");
  }
  if (storage === 'disk' && !options.path) throw new SvcError('invalid_configuration', "disk storage needs a `path`");
  const objectStorage = storage === 's3' ? objectStorageOptions(options) : null;
  if (mode === 'reader') {
    if (objectStorage !== null) {
      const follower = await ObjectFollower.open(objectStorage);
      return new Database({ kind: 'object-follower', follower, refreshMs: refreshMs ?? 0, refreshedAt: monotonicMs() }, bounds);
    }
    return new Database({ kind: 'follower', follower: await DiskFollower.open(options.path!) }, bounds);
  }
  const durable = await openWriterStorage({
    diskPath: storage === 'disk' ? options.path! : null,
    objectStorage,
    ...(snapshotWalBytes !== undefined ? { snapshotWalBytes } : {}),
  });
  const runtime = durable.store.indexes as IndexRuntime | null;
  if (runtime !== null && (options.textAnalyzer !== undefined || options.textPositions !== undefined)) {
    const analyzer = options.textAnalyzer ?? 'standard';
    if (!ANALYZERS.includes(analyzer)) throw new SvcError('invalid_configuration', `unknown text analyzer \`${String(analyzer)}\`; use ${ANALYZERS.join(', ')}`);
    runtime.textDefaults = { analyzer, positions: options.textPositions ?? false };
  }
  return new Database({ kind: 'writer', committer: new Committer(durable, bounds) }, bounds);
}

function objectStorageOptions(options: OpenOptions): ObjectStorageOptions {
  if (!options.uri) throw new SvcError('invalid_configuration', 's3 storage needs a `uri` (s3://bucket/prefix)');
  return {
    uri: options.uri,
    ...(options.endpointUrl !== undefined ? { endpointUrl: options.endpointUrl } : {}),
    ...(options.region !== undefined ? { region: options.region } : {}),
    ...(options.credentials !== undefined ? { credentials: options.credentials } : {}),
    ...(options.cacheDir !== undefined ? { cacheDir: options.cacheDir } : {}),
  };
}
