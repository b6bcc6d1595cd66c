// The embedded handle: the same decode/plan/exec/store as the server, in the caller's
// thread, without HTTP. Answers are exactly what the server would send.
import { parseJson, type JsonValue } from '../protocol/json.js';
import { SvcError } from '../protocol/errors.js';
import { defaultExecOptions, executeRequest, type RequestFlags } from '../exec/request.js';
import { Store } from '../store/store.js';

export interface OpenOptions {
  /** Only 'memory' so far; 'disk' and 's3' arrive with durability (issue 4). */
  storage?: 'memory';
  /** Cooperative deadline per query, default 30 s. */
  queryTimeoutMs?: number;
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

export class Database {
  private store: Store | null;
  private readonly queryTimeoutMs: number;

  constructor(store: Store, queryTimeoutMs: number) {
    this.store = store;
    this.queryTimeoutMs = queryTimeoutMs;
  }

  /** Status and exact response text, as the server would send them. */
  async queryRaw(request: unknown, options: QueryOptions = {}): Promise<{ status: number; body: string }> {
    if (this.store === null) throw new SvcError('database_closed', 'database is closed');
    for (const key of ['warm', 'requireWriter', 'tenantId', 'headers'] as const) {
      if (options[key] !== undefined) {
        throw new SvcError('invalid_request', `invalid request: \`${key}\` is a gateway/routing option and is not valid for an embedded database`);
      }
    }
    const flags: RequestFlags = { warm: null, requireWriter: null, awaitDurable: options.awaitDurable ?? null };
    const outcome = executeRequest(this.store, requestText(request), flags, 'writer', { queryTimeoutMs: options.timeoutMs ?? this.queryTimeoutMs });
    if ('forward' in outcome) throw new SvcError('internal_error', 'internal error: embedded writer asked to forward');
    return outcome;
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

  async close(): Promise<void> {
    this.store = null;
  }
}

export async function openDatabase(options: OpenOptions = {}): Promise<Database> {
  const storage = options.storage ?? 'memory';
  if (storage !== 'memory') {
    throw new SvcError('invalid_configuration', `storage \`${String(storage)}\` is not available yet; use 'memory'`);
  }
  return new Database(Store.create(), options.queryTimeoutMs ?? defaultExecOptions.queryTimeoutMs);
}
