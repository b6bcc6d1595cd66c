// The client: sends a request object to `POST <baseUrl>/v2/query` (or to an in-process
// database) and returns the parsed response, or throws SvcClientError.
//
//   const client = new Client({ baseUrl: 'http://localhost:6969', apiKey: process.env.SVC_API_KEY });
//   const { friends } = await client.query(batch, { retry: { attempts: 3, baseDelayMs: 50 } });
//
// Headers (envelope.md §1, §11): `Content-Type: application/json`; the API key in
// `authHeader` (default `Authorization`) as `Bearer <key>` or raw; `x-svc-tenant-id` when a
// tenant is set; `x-svc-warm: true` / `x-svc-require-writer: true` when asked;
// `x-svc-await-durable: true|false` only when given. Only status 200 is success. With a
// retry policy (opt-in), `409 transaction_conflict` answers are retried, and so is `503
// server_overloaded` (the server shed the request before running any of it), waiting at
// least its Retry-After.

import { isPlainObject, parseResponseJson, writeJson, type WireObject } from './json.js';
import { SvcClientError, errorFromResponse } from './errors.js';
import type { WireRequest } from './batch.js';
import { withoutCredentials } from '../url-credentials.js';

/** The longest Retry-After honoured (a far date would stall the caller). */
const RETRY_AFTER_MS_MAX = 60_000;

export interface RetryOptions {
  /** Maximum number of attempts in total, including the first (≥ 1). */
  attempts: number;
  /** Delay before the first retry; doubles on each further retry, with jitter. */
  baseDelayMs: number;
  /** Cap for one delay (default 10 000 ms). */
  maxDelayMs?: number;
}

/** The subset of `fetch` the client uses (the global fetch fits). */
export type FetchLike = (url: string, init: {
  method: string;
  headers: Record<string, string>;
  body: string;
  signal?: AbortSignal;
}) => Promise<{ status: number; statusText: string; text(): Promise<string>; headers?: { get(name: string): string | null } }>;

export interface ClientOptions {
  /** Default `http://localhost:6969`. */
  baseUrl?: string;
  apiKey?: string;
  /** Sent as `x-svc-tenant-id` (the cloud gateway's database ID). */
  tenantId?: string;
  /** Header carrying the API key; default `Authorization`. */
  authHeader?: string;
  /** `bearer` sends `Bearer <key>`, `raw` sends the key unchanged. Default `bearer`. */
  authScheme?: 'bearer' | 'raw';
  /** Replaces the global fetch (tests, proxies, custom agents). */
  fetch?: FetchLike;
  /** Default retry policy for 409 and `503 server_overloaded` answers; off unless given. */
  retry?: RetryOptions;
}

export interface QueryOptions {
  /** `x-svc-warm: true` (reads only). */
  warm?: boolean;
  /** `x-svc-require-writer: true`. */
  requireWriter?: boolean;
  /** `x-svc-await-durable: true|false` (true for writes only). */
  awaitDurable?: boolean;
  /** Overrides the client's tenant for this request. */
  tenantId?: string;
  /** Retry on 409 and `503 server_overloaded` for this request (`false` disables the client default). */
  retry?: RetryOptions | false;
  /** Parameter values for a batch builder (instead of `batch.withParams(...)`). */
  params?: { readonly [name: string]: unknown };
  signal?: AbortSignal;
}

/** Anything with a request: a batch builder. */
export interface RequestSource {
  toRequest(values?: { readonly [name: string]: unknown }): WireRequest;
}
/** A batch builder, a request object, or request body text. */
export type QueryInput = RequestSource | WireRequest | WireObject | string;

export interface OpenEmbeddedOptions {
  storage?: 'memory';
  queryTimeoutMs?: number;
}

interface Answer {
  status: number;
  statusText: string;
  body: string;
  /** Retry-After in milliseconds (from seconds or an HTTP date; at most RETRY_AFTER_MS_MAX). */
  retryAfterMs?: number;
}

interface Transport {
  send(body: string, options: QueryOptions): Promise<Answer>;
  close(): Promise<void>;
}

const HEADER_WARM = 'x-svc-warm';
const HEADER_REQUIRE_WRITER = 'x-svc-require-writer';
const HEADER_AWAIT_DURABLE = 'x-svc-await-durable';
const HEADER_TENANT_ID = 'x-svc-tenant-id';

class HttpTransport implements Transport {
  private readonly url: string;

  /** The URL as messages show it: without a user name or password. */
  private readonly shownUrl: string;

  constructor(private readonly options: ClientOptions) {
    this.url = `${(options.baseUrl ?? 'http://localhost:6969').replace(/\/+$/, '')}/v2/query`;
    this.shownUrl = withoutCredentials(this.url);
  }

  headers(q: QueryOptions): Record<string, string> {
    const { apiKey, authHeader = 'Authorization', authScheme = 'bearer' } = this.options;
    const headers: Record<string, string> = { 'Content-Type': 'application/json' };
    if (apiKey !== undefined && apiKey !== '') {
      // fetch would refuse it with the whole header value, the key, in its message.
      if (!headerText.test(apiKey)) throw new SvcClientError({ status: 0, msg: 'the API key holds a character an HTTP header cannot carry (a line break, a control character or a non-ASCII letter); nothing was sent' });
      headers[authHeader] = authScheme === 'raw' ? apiKey : `Bearer ${apiKey}`;
    }
    const tenant = q.tenantId ?? this.options.tenantId;
    if (tenant !== undefined) {
      if (!headerText.test(tenant)) throw new SvcClientError({ status: 0, msg: `the tenant ID ${JSON.stringify(tenant)} holds a character an HTTP header cannot carry; nothing was sent` });
      headers[HEADER_TENANT_ID] = tenant;
    }
    if (q.warm === true) headers[HEADER_WARM] = 'true';
    if (q.requireWriter === true) headers[HEADER_REQUIRE_WRITER] = 'true';
    if (q.awaitDurable !== undefined) headers[HEADER_AWAIT_DURABLE] = q.awaitDurable ? 'true' : 'false';
    return headers;
  }

  async send(body: string, q: QueryOptions): Promise<Answer> {
    let res: Awaited<ReturnType<FetchLike>>;
    let text: string;
    const fetch = this.options.fetch ?? (globalThis as { fetch?: FetchLike }).fetch;
    if (fetch === undefined) throw new TypeError('no fetch available: pass `fetch` in the client options');
    const headers = this.headers(q);
    let sent = false;
    try {
      res = await fetch(this.url, { method: 'POST', headers, body, ...(q.signal ? { signal: q.signal } : {}) });
      sent = true;
      text = await res.text();
    } catch (err) {
      throw new SvcClientError({ status: 0, msg: failureMessage(err, this.shownUrl, sent), cause: err });
    }
    const retryAfter = res.headers?.get('retry-after') ?? null;
    const answer: Answer = { status: res.status, statusText: res.statusText, body: text };
    if (retryAfter !== null) {
      // Seconds, or an HTTP date (RFC 9110 §10.2.3).
      const at = /^\d{1,6}$/.test(retryAfter) ? Date.now() + Number(retryAfter) * 1000 : Date.parse(retryAfter);
      if (!Number.isNaN(at)) answer.retryAfterMs = Math.min(Math.max(0, at - Date.now()), RETRY_AFTER_MS_MAX);
    }
    return answer;
  }

  async close(): Promise<void> {}
}

/** The embedded handle's surface this transport needs (src/embedded/database.ts). */
interface EmbeddedDatabase {
  queryRaw(request: string, options: { awaitDurable?: boolean }): Promise<{ status: number; body: string }>;
  close(): Promise<void>;
}

class EmbeddedTransport implements Transport {
  private db: Promise<EmbeddedDatabase> | null = null;
  private closed = false;

  constructor(private readonly options: OpenEmbeddedOptions) {}

  private open(): Promise<EmbeddedDatabase> {
    // Loaded on first use so that the HTTP client never pulls in the engine.
    this.db ??= import('../index.js').then(({ openDatabase }) => openDatabase({
      storage: this.options.storage ?? 'memory',
      ...(this.options.queryTimeoutMs === undefined ? {} : { queryTimeoutMs: this.options.queryTimeoutMs }),
    }));
    return this.db;
  }

  async send(body: string, q: QueryOptions): Promise<Answer> {
    for (const key of ['warm', 'requireWriter', 'tenantId'] as const) {
      if (q[key] !== undefined) {
        throw new SvcClientError({
          status: 400, code: 'invalid_request',
          msg: `invalid request: \`${key}\` is a gateway/routing option and is not valid for an embedded database`,
        });
      }
    }
    // Not a fresh, empty database opened in its place.
    if (this.closed) throw new SvcClientError({ status: 500, code: 'database_closed', msg: 'database is closed' });
    const db = await this.open();
    try {
      const { status, body: text } = await db.queryRaw(body, q.awaitDurable === undefined ? {} : { awaitDurable: q.awaitDurable });
      return { status, statusText: '', body: text };
    } catch (err) {
      const e = err as { code?: unknown; status?: unknown; message?: unknown };
      throw new SvcClientError({
        status: typeof e.status === 'number' ? e.status : 500,
        code: typeof e.code === 'string' ? e.code : undefined,
        msg: typeof e.message === 'string' ? e.message : String(err),
        cause: err,
      });
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.db !== null) await (await this.db).close();
    this.db = null;
  }
}

/**
 * Visible ASCII, space and tab: what a header value may hold as text (the rule of
 * protocol/headers.ts, written here so that the client loads no server module).
 */
const headerText = /^[\t\x20-\x7e]*$/;

/** Connection failures in which nothing reached the server. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * What a failed exchange means for the caller: whether the request can have reached the
 * server (a write may then have been applied: replaying it is not always safe). fetch's own
 * message may quote a header value; only its cause's code is shown.
 */
function failureMessage(err: unknown, url: string, answered: boolean): string {
  const name = (err as { name?: unknown }).name;
  const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
  const code = typeof cause?.code === 'string' ? cause.code : typeof (err as { code?: unknown }).code === 'string' ? (err as { code: string }).code : null;
  if (name === 'AbortError' || name === 'TimeoutError') {
    return `the request to ${url} was aborted (${name}) ${answered ? 'while its answer arrived' : 'before an answer'}: it may have reached the server, so a write may have been applied`;
  }
  if (!answered && code !== null && NOT_SENT.has(code)) return `cannot reach ${url} (${code}): nothing was sent`;
  return `no answer from ${url} (${code ?? (err instanceof Error ? err.name : 'failure')}): the request may have reached the server, so a write may have been applied`;
}

/** Waits `ms`, or rejects as soon as `signal` aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted === true) return Promise.reject(abortedWhileWaiting(signal));
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(abortedWhileWaiting(signal!));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function abortedWhileWaiting(signal: AbortSignal): SvcClientError {
  return new SvcClientError({ status: 0, msg: 'aborted while waiting to retry: the last attempt was answered and ran nothing', cause: signal.reason });
}

/** Delay before retry number `retry` (1-based): exponential, capped, jittered to [½, 1] of it. */
export function backoffDelayMs(retry: number, policy: RetryOptions, random: () => number = Math.random): number {
  const full = Math.min(policy.maxDelayMs ?? 10_000, policy.baseDelayMs * 2 ** (retry - 1));
  return full / 2 + (random() * full) / 2;
}

function isRequestSource(v: unknown): v is RequestSource {
  return typeof v === 'object' && v !== null && typeof (v as { toRequest?: unknown }).toRequest === 'function';
}

export class Client {
  private transport: Transport;
  private readonly retry: RetryOptions | undefined;

  constructor(options: ClientOptions = {}) {
    this.transport = new HttpTransport(options);
    this.retry = options.retry;
  }

  /**
   * A client over an in-process database (`openDatabase` of the engine, opened on the first
   * query), with the same `query` API. Gateway options (`warm`, `requireWriter`,
   * `tenantId`) are refused with `invalid_request`.
   */
  static embedded(options: OpenEmbeddedOptions & { retry?: RetryOptions } = {}): Client {
    const client = new Client(options.retry === undefined ? {} : { retry: options.retry });
    client.transport = new EmbeddedTransport(options);
    return client;
  }

  /**
   * Runs one request and returns the response object (one member per returned name).
   * Integers beyond 2^53 come back as bigint. Non-200 answers throw SvcClientError.
   */
  async query<T = Record<string, unknown>>(input: QueryInput, options: QueryOptions = {}): Promise<T> {
    const body = typeof input === 'string' ? input
      : isRequestSource(input) ? writeJson(input.toRequest(options.params))
      : writeJson(input);
    const policy = options.retry === false ? undefined : options.retry ?? this.retry;
    const attempts = policy === undefined ? 1 : Math.max(1, Math.floor(policy.attempts));
    for (let attempt = 1; ; attempt++) {
      const answer = await this.transport.send(body, options);
      if (answer.status === 200) return parseSuccess(answer.body) as T;
      const err = errorFromResponse(answer.status, answer.body, answer.statusText);
      // Only answers that say nothing ran: a conflict rolled back, or a request shed before it
      // ran. Not any 409: writer_fenced_commit_outcome_unknown may have committed.
      const retryable = (answer.status === 409 && err.code === 'transaction_conflict') || (answer.status === 503 && err.code === 'server_overloaded');
      if (!retryable || attempt >= attempts) throw err;
      await sleep(Math.max(backoffDelayMs(attempt, policy!), answer.retryAfterMs ?? 0), options.signal);
    }
  }

  /** Releases an embedded database (no-op over HTTP). */
  async close(): Promise<void> {
    await this.transport.close();
  }
}

function parseSuccess(body: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = parseResponseJson(body);
  } catch (err) {
    throw new SvcClientError({ status: 200, msg: `invalid JSON in a 200 response: ${(err as Error).message}`, body, cause: err });
  }
  if (!isPlainObject(parsed)) throw new SvcClientError({ status: 200, msg: 'a 200 response must be a JSON object', body });
  return parsed as Record<string, unknown>;
}
