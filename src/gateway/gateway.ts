// The managed-cloud gateway (issue 14, docs/gateway.md): one uWebSockets.js front end that
// authenticates `POST /v2/query` with an API key and a database ID, admits it through the
// database's token bucket in Redis, and forwards the raw body to the database's writer or
// one of its readers over pooled keep-alive connections (undici).
//
// The checks run in one fixed order (docs/gateway.md "Order of checks"); each failure is
// answered `{error, msg}` and nothing after it runs. Everything before the rate limiter
// costs no token (SPEC "Cloud request rate limit" 4). Control-plane answers come from
// brief caches (cache.ts), so a request on the hot path reaches no store.
//
// uWS rules (as in src/server/http.ts): headers are read synchronously in the handler; an
// answer given later registers onAborted first and is corked; a response is never touched
// after its abort.
import { hash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { pino, type DestinationStream, type Logger } from 'pino';
import type { Dispatcher } from 'undici';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import type { Allowance, ControlPlane, DatabaseRoute, KeyGrant, UsageKind } from '../cloud/control-plane.js';
import { apiKeyPattern } from '../cloud/secrets.js';
import { withoutApiKeys } from '../cloud/log.js';
import { limits } from '../limits.js';
import { databaseIdPattern, HEADER_AWAIT_DURABLE, HEADER_REQUIRE_WRITER, HEADER_TENANT_ID, HEADER_WARM, parseRequestFlags, type RequestFlags } from '../protocol/headers.js';
import { parseJson, type JsonValue } from '../protocol/json.js';
import { SvcError } from '../protocol/errors.js';
import { assertNativeUws, closedForConflictingLength, endAsTheSocketDrains, framingChecked, statusLine, uws } from '../server/uws.js';
import { DrainTracker } from '../server/drain.js';
import { closeApp, listenOn, listenPort, stopListening } from '../server/listen.js';
import { Backend, BackendRegistry, provesDown, provesNotSent } from './backends.js';
import { ExpiringCache, LookupSlots } from './cache.js';
import { GatewayError } from './errors.js';
import { GatewayMetrics } from './gateway-metrics.js';
import { sampledJson, type MetricsJson } from '../metrics/counts.js';
import { answerMetrics, metricsRenderer } from '../metrics/render.js';
import { RedisRateLimiter } from './rate-limiter.js';
import { UsageMeter } from './usage.js';
import { monotonicMs } from '../clock.js';

export type AuthScheme = 'bearer' | 'raw';

export interface GatewayOptions {
  controlPlane: ControlPlane;
  /** Redis shared by every gateway replica: `redis://host:port` or `unix:///path.sock`. */
  redisUrl: string;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0 (a free port). */
  port?: number;
  /** The address clients use, for GET /v2/metadata; default http(s)://<host>:<port>. */
  publicUrl?: string;
  /** Serve HTTPS with this certificate chain and private key (PEM files); default plain HTTP. */
  tls?: GatewayTls;
  /** Header that carries the API key; default Authorization. */
  authHeader?: string;
  /** `bearer`: `Bearer <key>`; `raw`: the key alone. Default bearer. */
  authScheme?: AuthScheme;
  /** Environment variable clients read the key from (metadata document); default SVC_API_KEY. */
  queryAuthEnv?: string;
  /** Wall-clock deadline of a request, from arrival to the backend's answer (ms). */
  queryTimeoutMs?: number;
  /** Longest wait for Redis's rate-limit decision (ms). */
  rateLimitDecisionMs?: number;
  /** Prefix of the Redis bucket keys. */
  rateLimitKeyPrefix?: string;
  /** How long a control-plane answer is reused (ms); default 1000. */
  cacheTtlMs?: number;
  /** How long after the store last confirmed them keys, routes and allowances outlive its failures (ms); default limits.gatewayControlPlaneStaleMs. */
  controlPlaneStaleMs?: number;
  /** How often each backend's /readyz is polled (ms); default 1000. */
  healthIntervalMs?: number;
  /** A reader's first ejection after repeated server faults (ms); default limits.gatewayReaderEjectionMs. */
  readerEjectionMs?: number;
  /** How often metered usage is sent to the control plane (ms); default 5000. */
  usageFlushMs?: number;
  connectionsPerBackend?: number;
  /** Where the structured (pino) log goes; default stderr. */
  logDestination?: DestinationStream;
  /** Default info. */
  logLevel?: pino.Level;
  /** One log line per /v2/query request (info level). Default off. */
  accessLog?: boolean;
  /** Backend answer bytes held at once; default limits.gatewayBufferedResponseBytesMax (tests lower it). */
  bufferedResponseBytesMax?: number;
  /** Request body bytes held at once; default limits.gatewayBufferedBodyBytesMax (tests lower it). */
  bufferedBodyBytesMax?: number;
  /** Body bytes allocated ahead of their arrival; default limits.gatewayUnfilledBodyBytesMax (tests lower it). */
  unfilledBodyBytesMax?: number;
  /** Body bytes of one database's requests held at once; default limits.gatewayDatabaseBodyBytesMax (tests lower it). */
  databaseBodyBytesMax?: number;
  /** Control-plane lookups at once; default limits.gatewayControlPlaneLookupsMax (tests lower it). */
  controlPlaneLookupsMax?: number;
  /**
   * Listen with SO_REUSEPORT beside the gateway's other threads (gateway-threads.ts), on a
   * port bindSharedPort chose (the first thread binds it under the port's lock). Default false: the port is taken
   * exclusively, so a second gateway on a taken port fails instead of sharing it silently.
   */
  sharedPort?: boolean;
  /**
   * This gateway's thread number when it is one of several on a port (gateway-threads.ts,
   * 1 = the main thread): every log line carries it as `thread`. Absent: no such field.
   */
  thread?: number;
  /**
   * The process-wide counts of held request-body and answer bytes, shared by every thread
   * of the gateway (gateway-threads.ts, sharedByteCounts()): the bounds above are then the
   * process's, as with one thread. Absent: counts of this gateway alone.
   */
  sharedByteCounts?: SharedByteCounts;
}

/** Shared memory for ByteBudget counts (structured-cloned to worker threads as shared). */
export interface SharedByteCounts {
  requestBodies: SharedArrayBuffer;
  /** Body bytes allocated ahead of their arrival (gatewayUnfilledBodyBytesMax). */
  unfilledBodies: SharedArrayBuffer;
  /** Each database's body bytes (gatewayDatabaseBodyBytesMax), one Int32 per DatabaseBodyShares slot. */
  databaseBodies: SharedArrayBuffer;
  responses: SharedArrayBuffer;
}

export function sharedByteCounts(): SharedByteCounts {
  return {
    requestBodies: new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT),
    unfilledBodies: new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT),
    databaseBodies: new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT * DATABASE_BODY_SLOTS),
    responses: new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT),
  };
}

/**
 * Bytes held against a bound: request bodies, or backend answers. The count is one Int32,
 * in shared memory when the gateway has several threads, so the bound holds for the
 * process. A take adds first and takes it back when the sum passes the bound (one atomic
 * add, no compare-and-swap loop); two takes racing at the bound may then both be refused,
 * never both admitted past it.
 */
class ByteBudget {
  private readonly count: Int32Array;
  private readonly index: number;

  /** `shared`: the counts of every thread, this one's at Int32 `index`; absent, a count of its own. */
  constructor(readonly max: number, shared: SharedArrayBuffer | undefined, index = 0) {
    // Room for the bound plus the takes in flight on top of it, inside an Int32.
    if (!Number.isSafeInteger(max) || max < 0 || max > 2 ** 30) throw new Error(`a gateway byte bound must be an integer from 0 to 2^30, got ${max}`);
    this.count = shared === undefined ? new Int32Array(1) : new Int32Array(shared);
    this.index = shared === undefined ? 0 : index;
  }

  get held(): number {
    return Atomics.load(this.count, this.index);
  }

  /** Count `bytes` if the total stays within the bound. */
  tryTake(bytes: number): boolean {
    if (bytes === 0) return true;
    if (Atomics.add(this.count, this.index, bytes) + bytes > this.max) {
      Atomics.sub(this.count, this.index, bytes);
      return false;
    }
    return true;
  }

  give(bytes: number): void {
    if (bytes !== 0) Atomics.sub(this.count, this.index, bytes);
  }
}

/** Slots of DatabaseBodyShares: 16 KiB of counts when shared between threads. */
const DATABASE_BODY_SLOTS = 4096;

/**
 * Each database's share of the gateway's body bound: the bytes of the bodies a database's
 * requests (by their x-svc-tenant-id) are sending count against gatewayDatabaseBodyBytesMax
 * as well, so one database's clients, however many connections they trickle bodies over,
 * cannot hold the whole bound and starve the others. A database's bytes count in the slot
 * its ID hashes to; two databases in one slot share one share (a tighter bound for both,
 * never a looser one). A request with a key that is not valid for the database it names is
 * answered 401 or 403 as soon as the key is looked up, releasing what it held.
 */
class DatabaseBodyShares {
  private readonly budgets: (ByteBudget | undefined)[] = new Array(DATABASE_BODY_SLOTS);

  constructor(private readonly max: number, private readonly shared: SharedArrayBuffer | undefined) {}

  of(databaseId: string): ByteBudget {
    // FNV-1a over the ID's UTF-16 units (IDs are ASCII: databaseIdPattern).
    let hash = 0x811c9dc5;
    for (let i = 0; i < databaseId.length; i++) hash = Math.imul(hash ^ databaseId.charCodeAt(i), 0x01000193);
    const slot = (hash >>> 0) % DATABASE_BODY_SLOTS;
    return (this.budgets[slot] ??= new ByteBudget(this.max, this.shared, slot));
  }
}

export interface Gateway {
  readonly port: number;
  /** http(s)://<host>:<port> as listened on. */
  readonly url: string;
  /** Lookups sent to the control plane per cache (tests: the hot path reaches no store). */
  readonly controlPlaneLookups: () => { grants: number; routes: number; allowances: number };
  /** Bytes held now: request bodies (reserved) and backend answers (tests: nothing leaks). */
  readonly bufferedBytes: () => { requestBodies: number; unfilledBodies: number; responses: number };
  /** Flush metered usage now (tests; close() flushes too). */
  flushUsage(): Promise<void>;
  /** This gateway's own metrics as prom-client JSON (gateway-threads.ts merges several threads'). */
  metricsJson(): MetricsJson;
  /** What GET /metrics answers; default this gateway's metrics and the process's. */
  serveMetricsWith(source: () => Promise<string>): void;
  close(): Promise<void>;
}

const JSON_TYPE = 'application/json';
/** Key characters accepted in the auth header: base64url/base64 and the usual token punctuation. */
const keyPattern = /^[A-Za-z0-9._~+/=-]{1,512}$/;

/** What a backend answered, passed to the client unchanged. */
interface UpstreamAnswer {
  readonly status: number;
  readonly body: Buffer;
  readonly contentType: string;
  readonly retryAfter: string | null;
}

/**
 * A request's wall-clock deadline, and the upstream requests to cancel when it passes.
 * (Cheaper than an AbortController per request: no EventTarget, no AbortSignal.) It has no
 * timer of its own: every deadline of a gateway is the same time after arrival, so they
 * expire in arrival order, and one DeadlineQueue timer serves them all.
 */
class Deadline {
  expired = false;
  /** performance.now() at which it passes. */
  readonly atMs: number;
  private listeners: (() => void)[] = [];
  private readonly queue: DeadlineQueue;
  // The queue's links (arrival order); `queued` false once cleared or expired.
  queued = true;
  prev: Deadline | null = null;
  next: Deadline | null = null;

  constructor(queue: DeadlineQueue) {
    this.queue = queue;
    this.atMs = performance.now() + queue.ms;
    queue.add(this);
  }

  notify(listener: () => void): void {
    this.listeners.push(listener);
  }

  forget(listener: () => void): void {
    const at = this.listeners.indexOf(listener);
    if (at >= 0) this.listeners.splice(at, 1);
  }

  clear(): void {
    this.queue.remove(this);
    this.listeners.length = 0;
  }

  /** Called by the queue, unlinked already. */
  expire(): void {
    this.expired = true;
    const listeners = this.listeners;
    this.listeners = [];
    for (const listener of listeners) listener();
  }
}

/**
 * The deadlines of one gateway, oldest first, with one timer set for the oldest. A request
 * adds and removes its deadline in O(1) and allocates no timer; the timer is re-armed only
 * when it fires (about once per deadline length while requests finish in time).
 */
class DeadlineQueue {
  readonly ms: number;
  private head: Deadline | null = null;
  private tail: Deadline | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly fire = (): void => this.expireDue();

  constructor(ms: number) {
    this.ms = ms;
  }

  add(deadline: Deadline): void {
    deadline.prev = this.tail;
    if (this.tail !== null) this.tail.next = deadline;
    else this.head = deadline;
    this.tail = deadline;
    if (this.timer === null) this.arm(this.ms);
  }

  remove(deadline: Deadline): void {
    if (!deadline.queued) return;
    deadline.queued = false;
    if (deadline.prev !== null) deadline.prev.next = deadline.next;
    else this.head = deadline.next;
    if (deadline.next !== null) deadline.next.prev = deadline.prev;
    else this.tail = deadline.prev;
    deadline.prev = null;
    deadline.next = null;
  }

  private arm(ms: number): void {
    // Unreferenced: a request in flight keeps the process alive through its sockets.
    this.timer = setTimeout(this.fire, Math.max(1, Math.ceil(ms)));
    this.timer.unref();
  }

  private expireDue(): void {
    this.timer = null;
    const now = performance.now();
    while (this.head !== null && this.head.atMs <= now) {
      const due = this.head;
      this.remove(due);
      due.expire();
    }
    if (this.head !== null && this.timer === null) this.arm(this.head.atMs - now);
  }
}

/**
 * No answer from a backend for this database: no answer at all (connection refused, reset,
 * closed), or a 421 from a server bound to another database (`misdirected`).
 */
class UpstreamFailure extends Error {
  readonly backend: Backend;
  /** Nothing listens there (connection refused): stop choosing the server. */
  readonly down: boolean;
  /**
   * The server serves another database (421 misdirected_request): the route is stale and
   * nothing ran. The server itself is fine (its own database's routes still use it), so it
   * is only skipped for this request and the cached route is dropped.
   */
  readonly misdirected: boolean;
  /** The connection was never made: the request was not sent (safe to retry, even a write). */
  readonly notSent: boolean;
  constructor(backend: Backend, cause: Error, misdirected = false) {
    super(cause.message);
    this.backend = backend;
    this.down = !misdirected && provesDown(cause);
    this.notSent = !misdirected && provesNotSent(cause);
    this.misdirected = misdirected;
  }
}

/** PEM files of the gateway's TLS certificate chain and its (unencrypted) private key. */
export interface GatewayTls {
  certFile: string;
  keyFile: string;
}

/**
 * The uWS app: plain, or TLS with the given files. Node's TLS first reads and pairs them, so
 * a missing file, a file that is not PEM or a key of another certificate is refused at start
 * with what is wrong (uWS itself only says "App construction failed").
 */
function createApp(tls: GatewayTls | undefined): TemplatedApp {
  if (tls === undefined) return uws.App();
  const read = (file: string, what: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new Error(`cannot read the TLS ${what} ${file}: ${(err as Error).message}`);
    }
  };
  const cert = read(tls.certFile, 'certificate');
  const key = read(tls.keyFile, 'private key');
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    throw new Error(`the TLS certificate ${tls.certFile} and key ${tls.keyFile} are not usable: ${(err as Error).message}`);
  }
  return uws.SSLApp({ cert_file_name: tls.certFile, key_file_name: tls.keyFile });
}

/**
 * What a backend bound to another database answers (`svc serve --database-id`). Only
 * svc serve's binding check answers 421, and by RFC 9110 it means "not the server for this
 * request" whoever sends it, so the status alone decides; the body is not read.
 */
const MISDIRECTED_STATUS = 421;
/** At most one log line per backend this often about misdirected answers (a stale route repeats per request). */
const MISDIRECTED_LOG_INTERVAL_MS = 1000;

/** A body with nothing (yet, or any more); shared, never written (Buffer.alloc(0) costs ~0.2 us each). */
const EMPTY_BODY: Buffer = Buffer.alloc(0);

/**
 * The outer JSON decode (SPEC "Cloud request rate limit" 4): the backend's own JSON parser
 * (so a body it would refuse as JSON, a duplicated key say, is refused here, before a token
 * is taken), and the request type. The backend decodes the body again in full. JSON.parse
 * was ~0.25 us cheaper per point lookup but kept the last of duplicated keys: a read key's
 * `"request_type":"read","request_type":"write"` got 403 instead of 400.
 */
export function outerRequestType(body: Uint8Array): 'read' | 'write' {
  let doc: JsonValue;
  try {
    doc = parseJson(body, limits.jsonDepthMax, limits.bodyStructureBytesMax);
  } catch (err) {
    if (err instanceof SvcError) throw new GatewayError('invalid_query_json', err.message);
    throw err;
  }
  if (!(doc instanceof Map)) {
    throw new GatewayError('invalid_query_json', 'invalid query JSON: the request must be a JSON object');
  }
  const requestType = doc.get('request_type');
  if (requestType === 'read' || requestType === 'write') return requestType;
  const shown = typeof requestType === 'string' ? JSON.stringify(requestType)
    : requestType === undefined ? 'nothing'
      : typeof requestType === 'bigint' ? 'number' : Array.isArray(requestType) ? 'array' : requestType instanceof Map ? 'object' : typeof requestType;
  throw new GatewayError('invalid_query_json', `invalid query JSON: request_type must be "read" or "write", got ${shown}`);
}

/** The key in an auth header value, or a 400. */
export function keyFromHeader(value: string | undefined, headerName: string, scheme: AuthScheme): string {
  if (value === undefined || value === '') {
    throw new GatewayError('invalid_auth_header', `missing ${headerName} header: send ${scheme === 'bearer' ? `${headerName}: Bearer <API key>` : `${headerName}: <API key>`}`);
  }
  let key = value;
  if (scheme === 'bearer') {
    // RFC 9110: the scheme is case-insensitive; one or more spaces before the token.
    const match = /^bearer +(\S+) *$/i.exec(value);
    if (match === null) throw new GatewayError('invalid_auth_header', `malformed ${headerName} header: expected "Bearer <API key>"`);
    key = match[1]!;
  } else {
    key = value.trim();
  }
  if (!keyPattern.test(key)) throw new GatewayError('invalid_auth_header', `malformed ${headerName} header: the API key has characters or a length no key has`);
  return key;
}

export function keyHashOf(key: string): string {
  // One-shot: no Hash object per request.
  return hash('sha256', key, 'hex');
}

/**
 * The hash to look up, or 401 for a key no key has the shape of (secrets.ts): such a key
 * costs no store lookup, so random strings cannot reach the store.
 */
function hashOfWellFormedKey(key: string): string {
  if (!apiKeyPattern.test(key)) throw new GatewayError('invalid_api_key', 'invalid API key: no such key, or it was revoked');
  return keyHashOf(key);
}

/** One POST /v2/query from the handler to its answer. */
class GatewayRequest {
  readonly res: HttpResponse;
  readonly startedMs = performance.now();
  readonly keyHash: string;
  readonly tenantId: string;
  /** Execution headers as received (validated later, after authentication). */
  readonly warmHeader: string | undefined;
  readonly requireWriterHeader: string | undefined;
  readonly awaitDurableHeader: string | undefined;
  /** Headers for the log (secrets redacted by pino); null when the access log is off. */
  readonly logHeaders: Record<string, string> | null;
  aborted = false;
  settled = false;
  /**
   * The request's wall-clock deadline, from its arrival: it bounds receiving the body (a
   * slow sender holds its body reservation no longer) as well as the backends' answers.
   */
  readonly deadline: Deadline;
  /** The deadline passed before the whole body arrived: answered 408, nothing kept. */
  bodyTimedOut = false;
  /**
   * Upstream requests not settled yet. The deadline outlives the client's answer until
   * they settle: warming answers at the first 2xx, and the slower targets are still
   * cancelled at the deadline instead of running unbounded.
   */
  sendsOutstanding = 0;
  /** Over limits.gatewayBodyBytesMax (announced or counted): answered 413, nothing kept. */
  tooLarge = false;
  body: Buffer = EMPTY_BODY;
  /** Body bytes counted against the gateway's body bound, as they arrived. */
  reservedBytes = 0;
  /** The body's next bytes would pass the gateway's body bound: answered 503, nothing kept. */
  overloaded = false;
  /** ...its database's share of that bound (the bound itself had room). */
  overShare = false;
  /** The share of the database the request names, which its reservedBytes count against too. */
  bodyShare: ByteBudget | null = null;
  /** Backend answer bytes of this request counted against the gateway's response bound. */
  responseBytes = 0;
  private received = 0;
  /** Content-Length, or null (chunked). */
  private expected: number | null = null;
  /** The body's buffer at its Content-Length, when allocated ahead (within gatewayUnfilledBodyBytesMax). */
  private fixed: Buffer | null = null;
  /** Otherwise copies of its chunks, joined once complete. */
  private chunks: Buffer[] | null = null;
  /** Bytes of `fixed` allocated ahead of their arrival, counted in the gateway's unfilled budget. */
  unfilledBytes = 0;
  private bodyComplete = false;
  private bodyWaiter: (() => void) | null = null;
  // For the access log.
  databaseId: string | null = null;
  keyId: string | null = null;
  requestType: UsageKind | null = null;
  backendUrl: string | null = null;

  constructor(res: HttpResponse, keyHash: string, tenantId: string, headers: CollectedHeaders, logHeaders: Record<string, string> | null, deadlines: DeadlineQueue) {
    this.res = res;
    this.deadline = new Deadline(deadlines);
    this.keyHash = keyHash;
    this.tenantId = tenantId;
    this.warmHeader = headers.warm;
    this.requireWriterHeader = headers.requireWriter;
    this.awaitDurableHeader = headers.awaitDurable;
    this.logHeaders = logHeaders;
  }

  /** Content-Length as announced (null: chunked), already known to be within the limit. */
  startBody(expected: number | null): void {
    this.expected = expected;
    this.chunks = [];
  }

  /**
   * `chunk` is valid only during this call: copy it. `reserve` counts the body's bytes as they
   * arrive against the gateway's bound, false when they do not fit. A body with a Content-Length
   * that does not arrive in one chunk gets one buffer of that length if `unfilled` (bytes
   * allocated ahead of their arrival) has room, else its chunks are kept and joined at the end:
   * connections announcing 2 MiB and sending a byte cannot make the gateway allocate without bound.
   */
  onData(chunk: ArrayBuffer, isLast: boolean, bodyBytesMax: number, reserve: (bytes: number) => boolean, unfilled: ByteBudget): void {
    if (this.bodyComplete) return;
    if (!this.tooLarge) {
      const size = chunk.byteLength;
      const total = this.received + size;
      if (total > bodyBytesMax || (this.expected !== null && total > this.expected)) {
        // Stop keeping bytes now; uWS reads and drops the rest.
        this.tooLarge = true;
        this.fixed = null;
        this.chunks = null;
      } else if (size > 0 && !reserve(size)) {
        this.overloaded = true;
        this.discardBody();
        return;
      } else if (size > 0) {
        if (this.fixed === null && this.received === 0 && !isLast && this.expected !== null && unfilled.tryTake(this.expected - total)) {
          this.unfilledBytes = this.expected - total;
          try {
            this.fixed = Buffer.allocUnsafe(this.expected);
          } catch {
            // Out of memory (or address space, under strict overcommit): keep chunks instead.
            unfilled.give(this.unfilledBytes);
            this.unfilledBytes = 0;
          }
        } else if (this.unfilledBytes > 0) {
          const filled = Math.min(size, this.unfilledBytes);
          this.unfilledBytes -= filled;
          unfilled.give(filled);
        }
        if (this.fixed !== null) this.fixed.set(new Uint8Array(chunk), this.received);
        else this.chunks!.push(Buffer.from(new Uint8Array(chunk).slice()));
        this.received = total;
      }
    }
    if (!isLast && !this.tooLarge) return;
    if (!this.tooLarge) {
      this.body = this.fixed !== null ? this.fixed.subarray(0, this.received)
        : this.chunks!.length === 1 ? this.chunks![0]! : Buffer.concat(this.chunks!, this.received);
    }
    this.fixed = null;
    this.chunks = null;
    this.finishBody();
  }

  /** Whether the body is complete, too large, or dropped (client gone, answered already). */
  get bodyDone(): boolean {
    return this.bodyComplete;
  }

  /** Resolves when the body is complete, too large, or the client went away. */
  bodyArrived(): Promise<void> | void {
    if (this.bodyComplete) return;
    return new Promise((resolve) => { this.bodyWaiter = resolve; });
  }

  /** Runs once the answer is written whole, or the client left before: releases what it held. */
  answerWritten: (() => void) | null = null;

  onAborted(): void {
    this.aborted = true;
    this.discardBody();
    const written = this.answerWritten;
    this.answerWritten = null;
    written?.();
  }

  /** Keep no more of the body (answered already, or the client left); later chunks are dropped. */
  discardBody(): void {
    this.fixed = null;
    this.chunks = null;
    this.body = EMPTY_BODY;
    if (!this.bodyComplete) this.finishBody();
  }

  private finishBody(): void {
    this.bodyComplete = true;
    const waiter = this.bodyWaiter;
    this.bodyWaiter = null;
    if (waiter !== null) waiter();
  }

  /** Headers sent to the backend: the body's type and the execution headers, unchanged. */
  upstreamHeaders(warm: boolean): Record<string, string> {
    const headers: Record<string, string> = { 'content-type': JSON_TYPE, [HEADER_TENANT_ID]: this.tenantId };
    if (warm) headers[HEADER_WARM] = 'true';
    if (this.requireWriterHeader !== undefined) headers[HEADER_REQUIRE_WRITER] = this.requireWriterHeader;
    if (this.awaitDurableHeader !== undefined) headers[HEADER_AWAIT_DURABLE] = this.awaitDurableHeader;
    return headers;
  }
}

interface CollectedHeaders {
  auth: string | undefined;
  tenant: string | undefined;
  warm: string | undefined;
  requireWriter: string | undefined;
  awaitDurable: string | undefined;
  contentLength: string | undefined;
  /** Content-Length given twice with different values (uws.ts closedForConflictingLength). */
  conflictingContentLength: boolean;
}

/**
 * Walk the headers once: `req.getHeader` cannot tell an absent header from an empty one,
 * and an empty execution header is present and invalid. The first occurrence counts.
 */
function collectHeaders(req: HttpRequest, authHeaderLower: string): CollectedHeaders {
  const seen: CollectedHeaders = { auth: undefined, tenant: undefined, warm: undefined, requireWriter: undefined, awaitDurable: undefined, contentLength: undefined, conflictingContentLength: false };
  req.forEach((key, value) => {
    if (key === authHeaderLower) { if (seen.auth === undefined) seen.auth = value; }
    else if (key === HEADER_TENANT_ID) { if (seen.tenant === undefined) seen.tenant = value; }
    else if (key === HEADER_WARM) { if (seen.warm === undefined) seen.warm = value; }
    else if (key === HEADER_REQUIRE_WRITER) { if (seen.requireWriter === undefined) seen.requireWriter = value; }
    else if (key === HEADER_AWAIT_DURABLE) { if (seen.awaitDurable === undefined) seen.awaitDurable = value; }
    else if (key === 'content-length') {
      if (seen.contentLength === undefined) seen.contentLength = value;
      else if (value !== seen.contentLength) seen.conflictingContentLength = true;
    }
  });
  return seen;
}

/** Validate the execution headers (stage 1 of the server, here after authentication). */
function requestFlags(request: GatewayRequest): RequestFlags {
  try {
    return parseRequestFlags((name) => (name === HEADER_WARM ? request.warmHeader
      : name === HEADER_REQUIRE_WRITER ? request.requireWriterHeader
        : name === HEADER_AWAIT_DURABLE ? request.awaitDurableHeader : undefined));
  } catch (err) {
    throw new GatewayError('invalid_request_option', (err as Error).message);
  }
}

/**
 * One upstream request's undici handler. It implements undici's own (legacy) dispatch
 * handler interface, onConnect/onHeaders/onData/onComplete/onError, which the client calls
 * directly: the newer onRequestStart/onResponse* interface is adapted to it inside undici
 * by a wrapper per request that also turns the raw header list into an object twice
 * (headers and trailers). Here the two headers the gateway passes on are read from the raw
 * list, and the handler is one object per request instead of a set of closures.
 */
class UpstreamCall implements Dispatcher.DispatchHandler {
  private readonly chunks: Buffer[] = [];
  private length = 0;
  private keepBody = true;
  private status = 0;
  private contentType = JSON_TYPE;
  private retryAfter: string | null = null;
  private abort: ((err?: Error) => void) | null = null;
  private settled = false;

  constructor(
    private readonly server: GatewayServer,
    private readonly backend: Backend,
    private readonly request: GatewayRequest,
    private readonly deadline: Deadline,
    private readonly keepSuccessBody: boolean,
    private readonly resolve: (answer: UpstreamAnswer) => void,
    private readonly reject: (err: Error) => void,
  ) {}

  /**
   * At the deadline: answer 408 now, and cancel the upstream request if it started (or as
   * soon as it starts, when it still waits for a connection).
   */
  readonly onDeadline = (): void => {
    this.abort?.(new Error('gateway deadline'));
    if (this.settle()) {
      this.releaseHeld();
      this.reject(this.server.timeoutError());
    }
  };

  private settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    this.backend.outstanding--;
    this.deadline.forget(this.onDeadline);
    const request = this.request;
    request.sendsOutstanding--;
    // The last straggler of an answered request: nothing is left for the deadline to cancel.
    if (request.settled && request.sendsOutstanding === 0) this.deadline.clear();
    return true;
  }

  /** Bytes of this answer no one will send: give them back to the gateway's bound. */
  private releaseHeld(): void {
    this.server.responseBudget.give(this.length);
    this.request.responseBytes -= this.length;
    this.length = 0;
    this.chunks.length = 0;
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abort = abort;
    if (this.settled) abort(new Error('gateway deadline'));
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    this.status = statusCode;
    // A misdirected answer is never passed on: nothing of it is kept.
    this.keepBody = statusCode !== MISDIRECTED_STATUS && (this.keepSuccessBody || statusCode < 200 || statusCode >= 300);
    // Content-Type and Retry-After, each passed on when it occurs once (as undici's header
    // object gives a string only then); values as latin1, as undici decodes them.
    let contentType: string | null = null;
    let contentTypes = 0;
    let retryAfter: string | null = null;
    let retryAfters = 0;
    for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
      const name = rawHeaders[i]!;
      if (name.length === 12 && name.toString('latin1').toLowerCase() === 'content-type') {
        contentTypes++;
        contentType = rawHeaders[i + 1]!.toString('latin1');
      } else if (name.length === 11 && name.toString('latin1').toLowerCase() === 'retry-after') {
        retryAfters++;
        retryAfter = rawHeaders[i + 1]!.toString('latin1');
      }
    }
    if (contentTypes === 1) this.contentType = contentType!;
    if (retryAfters === 1) this.retryAfter = retryAfter;
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.settled || !this.keepBody) return true;
    const size = chunk.byteLength;
    if (!this.server.responseBudget.tryTake(size)) {
      // Settled first: abort() calls onError at once, which would count it as a failed backend.
      if (this.settle()) {
        this.releaseHeld();
        // A read can be sent again; a write has run on the backend, so no code that says
        // "retry" fits it (server_overloaded promises nothing ran).
        this.reject(this.request.requestType === 'write'
          ? new GatewayError('write_outcome_unknown', 'the gateway holds too many backend answer bytes to take this write\'s answer; the write may have been applied: check before sending it again')
          : new GatewayError('server_overloaded', 'the gateway holds too many backend answer bytes to take this answer; retry later'));
      }
      this.abort?.(new Error('gateway response budget'));
      return true;
    }
    this.request.responseBytes += size;
    this.chunks.push(chunk);
    this.length += size;
    return true;
  }

  onComplete(): void {
    if (!this.settle()) return;
    if (this.status === MISDIRECTED_STATUS) {
      this.releaseHeld();
      this.server.misdirected(this.backend, this.request);
      this.reject(new UpstreamFailure(this.backend, new Error('the backend serves another database (421)'), true));
      return;
    }
    const chunks = this.chunks;
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.length);
    // A warming straggler finishing after the client was answered: nothing will send it.
    if (this.request.settled) this.releaseHeld();
    this.resolve({ status: this.status, body, contentType: this.contentType, retryAfter: this.retryAfter });
  }

  onError(err: Error): void {
    if (!this.settle()) return;
    this.releaseHeld();
    this.reject(this.deadline.expired ? this.server.timeoutError() : new UpstreamFailure(this.backend, err));
  }
}

class GatewayServer {
  private readonly options: GatewayOptions;
  private readonly app: TemplatedApp;
  private listenSocket: us_listen_socket | null = null;
  private readonly log: Logger;
  private readonly authHeaderName: string;
  private readonly authHeaderLower: string;
  private readonly authScheme: AuthScheme;
  private readonly queryTimeoutMs: number;
  private readonly deadlines: DeadlineQueue;
  private readonly bodyBytesMax = limits.gatewayBodyBytesMax;
  private readonly accessLog: boolean;
  readonly grants: ExpiringCache<KeyGrant | null>;
  readonly routes: ExpiringCache<DatabaseRoute | null>;
  readonly allowances: ExpiringCache<Allowance>;
  readonly limiter: RedisRateLimiter;
  private readonly backends: BackendRegistry;
  readonly usage: UsageMeter;
  /** Request body bytes held (reserved), against limits.gatewayBufferedBodyBytesMax. */
  readonly bodyBudget: ByteBudget;
  /** Request body bytes allocated ahead of their arrival, against limits.gatewayUnfilledBodyBytesMax. */
  readonly unfilledBudget: ByteBudget;
  /** Request body bytes held per database, against limits.gatewayDatabaseBodyBytesMax. */
  private readonly databaseBodyShares: DatabaseBodyShares;
  /** Backend answer bytes held, against limits.gatewayBufferedResponseBytesMax. */
  readonly responseBudget: ByteBudget;
  /** Requests received and not answered, answers still being written: close() waits for both. */
  private readonly drain = new DrainTracker();
  /** What this thread answered (GET /metrics). */
  readonly metrics = new GatewayMetrics();
  /** What GET /metrics answers (gateway-threads.ts replaces it with the merge of every thread's). */
  metricsSource: () => Promise<string> = () => this.localMetrics();
  private readonly renderMetrics = metricsRenderer();
  private closing = false;
  publicUrl = '';
  localUrl = '';

  constructor(options: GatewayOptions) {
    // First: a TLS set-up that cannot work refuses the start before anything else is made.
    const app = createApp(options.tls);
    this.options = options;
    this.authHeaderName = options.authHeader ?? 'Authorization';
    this.authHeaderLower = this.authHeaderName.toLowerCase();
    this.authScheme = options.authScheme ?? 'bearer';
    this.queryTimeoutMs = options.queryTimeoutMs ?? limits.gatewayQueryTimeoutMs;
    this.deadlines = new DeadlineQueue(this.queryTimeoutMs);
    this.accessLog = options.accessLog ?? false;
    this.responseBudget = new ByteBudget(options.bufferedResponseBytesMax ?? limits.gatewayBufferedResponseBytesMax, options.sharedByteCounts?.responses);
    this.bodyBudget = new ByteBudget(options.bufferedBodyBytesMax ?? limits.gatewayBufferedBodyBytesMax, options.sharedByteCounts?.requestBodies);
    this.unfilledBudget = new ByteBudget(options.unfilledBodyBytesMax ?? limits.gatewayUnfilledBodyBytesMax, options.sharedByteCounts?.unfilledBodies);
    this.databaseBodyShares = new DatabaseBodyShares(options.databaseBodyBytesMax ?? limits.gatewayDatabaseBodyBytesMax, options.sharedByteCounts?.databaseBodies);
    this.log = pino({
      level: options.logLevel ?? 'info',
      base: options.thread === undefined ? { component: 'gateway', pid: process.pid } : { component: 'gateway', pid: process.pid, thread: options.thread },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      // The key travels in one header; the log never holds it (docs/gateway.md "Logs").
      // Code never logs a key on purpose; this catches headers logged whole.
      redact: {
        paths: ['req.headers.authorization', `req.headers[${JSON.stringify(this.authHeaderLower)}]`, 'req.headers.cookie', 'key', 'apiKey'],
        censor: '[redacted]',
      },
    }, options.logDestination ?? pino.destination({ fd: 2, sync: false }));

    const ttlMs = options.cacheTtlMs ?? 1000;
    const slots = new LookupSlots(options.controlPlaneLookupsMax ?? limits.gatewayControlPlaneLookupsMax);
    const cacheBase = {
      ttlMs, entriesMax: limits.gatewayCacheEntriesMax, lookupTimeoutMs: limits.gatewayControlPlaneTimeoutMs, slots,
      staleMs: Math.max(ttlMs, options.controlPlaneStaleMs ?? limits.gatewayControlPlaneStaleMs),
      onStale: (what: string, err: Error) => this.log.warn({ err, what },
        `control-plane lookup failed; serving the ${what} the store last confirmed (stale) while it stays down`),
    };
    const cp = options.controlPlane;
    this.grants = new ExpiringCache({ ...cacheBase, what: 'API key', lookup: (hash) => cp.grantForKeyHash(hash) });
    this.routes = new ExpiringCache({ ...cacheBase, what: 'database route', lookup: (id) => cp.database(id) });
    this.allowances = new ExpiringCache({ ...cacheBase, what: 'workspace allowance', lookup: (id) => cp.allowance(id) });
    const limiterOptions = {
      redisUrl: options.redisUrl,
      decisionTimeoutMs: options.rateLimitDecisionMs ?? limits.gatewayRateLimitDecisionMs,
      ...(options.rateLimitKeyPrefix === undefined ? {} : { keyPrefix: options.rateLimitKeyPrefix }),
    };
    this.limiter = new RedisRateLimiter(limiterOptions);
    this.backends = new BackendRegistry({
      healthIntervalMs: options.healthIntervalMs ?? 1000,
      healthTimeoutMs: limits.gatewayHealthTimeoutMs,
      connectionsPerBackend: options.connectionsPerBackend ?? limits.gatewayUpstreamConnectionsMax,
      forgetAfterMs: 10 * 60_000,
      readerEjectionMs: options.readerEjectionMs ?? limits.gatewayReaderEjectionMs,
      log: this.log,
    });
    this.usage = new UsageMeter(cp, options.usageFlushMs ?? 5000, this.log);

    app.any('/v2/query', (res, req) => {
      if (req.getMethod() === 'post') this.onQuery(res, req); // checks the framing in its header walk
      else if (!closedForConflictingLength(res, req)) methodNotAllowed(res, 'POST');
    });
    app.any('/v2/metadata', framingChecked((res, req) => {
      if (req.getMethod() !== 'get') methodNotAllowed(res, 'GET');
      else this.onMetadata(res, req);
    }));
    app.any('/health', framingChecked((res, req) => {
      if (req.getMethod() !== 'get') methodNotAllowed(res, 'GET');
      else res.writeStatus('200 OK').writeHeader('Content-Type', JSON_TYPE).end('{"status":"ok"}');
    }));
    app.any('/metrics', framingChecked((res, req) => {
      if (req.getMethod() !== 'get') methodNotAllowed(res, 'GET');
      else answerMetrics(res, this.metricsSource(), (err) => this.log.error({ err }, 'metrics failed'));
    }));
    app.any('/readyz', framingChecked((res, req) => {
      if (req.getMethod() !== 'get') methodNotAllowed(res, 'GET');
      else this.onReadyz(res);
    }));
    app.any('/*', framingChecked((res) => {
      const e = new GatewayError('not_found', 'no such endpoint; queries go to POST /v2/query');
      res.writeStatus(statusLine(e.status)).writeHeader('Content-Type', JSON_TYPE).end(e.body());
    }));
    this.app = app;
  }

  async start(): Promise<number> {
    const host = this.options.host ?? '127.0.0.1';
    const shared = this.options.sharedPort === true;
    this.listenSocket = await listenOn(this.app, host, this.options.port ?? 0, shared);
    const port = listenPort(this.listenSocket);
    this.localUrl = `${this.options.tls === undefined ? 'http' : 'https'}://${host.includes(':') ? `[${host}]` : host}:${port}`;
    this.publicUrl = (this.options.publicUrl ?? this.localUrl).replace(/\/+$/, '');
    // Not fatal: without Redis every query is answered 503 rate_limit_unavailable and
    // readyz says so, until the client reconnects on its own.
    if (!(await this.limiter.connect(2000))) this.log.warn('Redis is not reachable yet; queries answer 503 rate_limit_unavailable until it is');
    this.log.info({ port, authHeader: this.authHeaderName, authScheme: this.authScheme }, 'gateway listening');
    return port;
  }

  /** This thread's metrics: its requests, backends and caches (summed over threads by the merge). */
  metricsJson(): MetricsJson {
    const backends = this.backends.census();
    const lookups = this.grants.lookupsStarted + this.routes.lookupsStarted + this.allowances.lookupsStarted;
    const stale = this.grants.staleAnswers + this.routes.staleAnswers + this.allowances.staleAnswers;
    return [
      ...this.metrics.toJson(),
      sampledJson('gauge', 'svc_gateway_requests_in_flight', 'Requests received and not answered yet', this.drain.inFlight),
      sampledJson('gauge', 'svc_gateway_backends', 'Backend servers the gateway knows (named by a route in the last 10 minutes)', backends.known),
      sampledJson('gauge', 'svc_gateway_backends_failing', 'Backends failing their health check or refusing connections', backends.failing),
      sampledJson('gauge', 'svc_gateway_readers_ejected', 'Readers ejected for answering server faults', backends.ejected),
      sampledJson('counter', 'svc_gateway_backend_server_faults_total', 'Backend answers that showed a server fault (a read then goes to another backend)', this.backends.serverFaults),
      sampledJson('counter', 'svc_gateway_reader_ejections_total', 'Reader ejections after repeated server faults', this.backends.ejections),
      sampledJson('counter', 'svc_gateway_backend_connection_failures_total', 'Backends taken out of rotation by a refused connection', this.backends.connectionFailures),
      sampledJson('counter', 'svc_gateway_control_plane_lookups_total', 'Lookups of keys, routes and allowances sent to the control-plane store', lookups),
      sampledJson('counter', 'svc_gateway_control_plane_stale_answers_total', 'Keys, routes and allowances served past their TTL because the store failed', stale),
    ];
  }

  /** This gateway's metrics and the process's, rendered (the one-thread GET /metrics). */
  private localMetrics(): Promise<string> {
    return this.renderMetrics([this.metricsJson()]);
  }

  private onReadyz(res: HttpResponse): void {
    const limiterUp = this.limiter.available;
    const ready = limiterUp && !this.closing;
    res.writeStatus(statusLine(ready ? 200 : 503)).writeHeader('Content-Type', JSON_TYPE)
      .end(`{"rate_limiter":"${limiterUp ? 'ok' : 'unavailable'}","ready":${ready}}`);
  }

  // ---------------------------------------------------------------- POST /v2/query

  private onQuery(res: HttpResponse, req: HttpRequest): void {
    const headers = collectHeaders(req, this.authHeaderLower);
    if (headers.conflictingContentLength) {
      res.close(); // as closedForConflictingLength (uws.ts) does for the other routes
      return;
    }
    const logHeaders = this.accessLog ? loggedHeaders(req, this.authHeaderLower) : null;
    let keyHash: string;
    try {
      const key = keyFromHeader(headers.auth, this.authHeaderName, this.authScheme);
      if (headers.tenant === undefined || headers.tenant === '') {
        throw new GatewayError('invalid_tenant_id', `missing ${HEADER_TENANT_ID} header: send the database ID`);
      }
      if (!databaseIdPattern.test(headers.tenant)) {
        throw new GatewayError('invalid_tenant_id', `malformed ${HEADER_TENANT_ID} header: a database ID has 1-128 letters, digits, ".", "_" or "-"`);
      }
      keyHash = hashOfWellFormedKey(key);
    } catch (err) {
      const e = err as GatewayError;
      res.writeStatus(statusLine(e.status)).writeHeader('Content-Type', JSON_TYPE).end(e.body());
      this.metrics.record(null, e.status, e.code, false, 0);
      if (logHeaders !== null) this.log.info({ databaseId: headers.tenant === undefined ? null : withoutApiKeys(headers.tenant), status: e.status, error: e.code, req: { headers: logHeaders } }, 'query');
      return;
    }
    const request = new GatewayRequest(res, keyHash, headers.tenant, headers, logHeaders, this.deadlines);
    this.drain.requestStarted();
    res.onAborted(() => request.onAborted());
    request.deadline.notify(() => {
      if (request.bodyDone) return;
      // A body still arriving at the deadline: answer now and release its reservation,
      // whatever step process() waits at (it finds bodyTimedOut and stops).
      request.bodyTimedOut = true;
      this.finish(request, new GatewayError('query_timeout', `the request body did not arrive within the gateway's deadline of ${this.queryTimeoutMs} ms`), null);
    });
    const announced = headers.contentLength === undefined ? null : Number(headers.contentLength);
    if (announced !== null && Number.isSafeInteger(announced) && announced > this.bodyBytesMax) {
      request.tooLarge = true; // keep nothing; uWS drops the body as it arrives
    } else {
      // Bodies count against the bound as their bytes arrive (counting the announced length
      // let one key's connections that announce 2 MiB and send a byte hold the whole bound: a
      // probe's other database got 503 for a 34-byte read); GatewayRequest.onData allocates.
      request.startBody(announced !== null && Number.isSafeInteger(announced) && announced >= 0 ? announced : null);
    }
    const share = this.databaseBodyShares.of(headers.tenant);
    request.bodyShare = share;
    const reserveChunk = (bytes: number): boolean => {
      if (request.settled || !this.bodyBudget.tryTake(bytes)) return false;
      if (!share.tryTake(bytes)) {
        this.bodyBudget.give(bytes);
        request.overShare = true;
        return false;
      }
      request.reservedBytes += bytes;
      return true;
    };
    res.onData((chunk, isLast) => request.onData(chunk, isLast, this.bodyBytesMax, reserveChunk, this.unfilledBudget));
    void this.process(request);
  }

  /** Everything after the synchronous header checks, in the documented order. */
  private async process(request: GatewayRequest): Promise<void> {
    try {
      // 401, 403: the key, and the database it is for.
      const grant = await this.grants.get(request.keyHash);
      if (grant === null) throw new GatewayError('invalid_api_key', 'invalid API key: no such key, or it was revoked');
      request.keyId = grant.keyId;
      if (grant.databaseId !== request.tenantId) {
        throw new GatewayError('permission_denied', `this API key is not valid for database ${request.tenantId}`);
      }
      request.databaseId = grant.databaseId;
      // Cached answers come back as values: no await (a microtask each) for them.
      const routeOrLookup = this.routes.get(grant.databaseId);
      const route = routeOrLookup instanceof Promise ? await routeOrLookup : routeOrLookup;
      if (route === null || route.status === 'Deleted' || route.workspaceId !== grant.workspaceId) {
        throw new GatewayError('invalid_api_key', 'invalid API key: its database no longer exists');
      }
      // 402 when the workspace may run nothing at all this month; the per-kind check
      // follows the outer decode, which tells reads from writes.
      const allowanceOrLookup = this.allowances.get(grant.workspaceId);
      const allowance = allowanceOrLookup instanceof Promise ? await allowanceOrLookup : allowanceOrLookup;
      if (!allowance.readsAllowed && !allowance.writesAllowed) throw tenantDisabled('reads and writes');
      // 400: the execution headers.
      const flags = requestFlags(request);
      // 413, before parsing anything.
      if (!request.bodyDone) await request.bodyArrived();
      if (request.aborted || request.bodyTimedOut) throw clientGone; // answered already
      if (request.overloaded) throw request.overShare ? overloadedByDatabaseBodies(request.tenantId) : overloadedByBodies();
      if (request.tooLarge) {
        throw new GatewayError('payload_too_large', `request body over ${this.bodyBytesMax} bytes (the gateway's limit)`);
      }
      // 400: outer JSON decode.
      const requestType = outerRequestType(request.body);
      request.requestType = requestType;
      // 403: a read key never runs a write.
      if (requestType === 'write' && grant.permission !== 'read_write') {
        throw new GatewayError('permission_denied', 'this API key may only read; writes need a read-write key');
      }
      if (requestType === 'write' ? !allowance.writesAllowed : !allowance.readsAllowed) {
        throw tenantDisabled(requestType === 'write' ? 'writes' : 'reads');
      }
      // The backend refuses these combinations with the same code (src/exec/request.ts);
      // refused here, before admission, they cost no token.
      if (requestType === 'write' && flags.warm === true) {
        throw new GatewayError('invalid_request_option', 'x-svc-warm is only valid for read requests');
      }
      if (requestType === 'read' && flags.awaitDurable === true) {
        throw new GatewayError('invalid_request_option', 'x-svc-await-durable is only valid for write requests');
      }
      if (route.status !== 'Active') {
        throw new GatewayError('database_unavailable', `database ${route.id} is ${route.status}, not Active; retry when it is`);
      }
      // Admission: one token; everything before this cost none.
      const decision = await this.limiter.take(route.id, route.rateLimit);
      if (!decision.admitted) {
        throw new GatewayError('rate_limited', `rate limit exceeded for database ${route.id}; retry after ${decision.retryAfterSeconds} s`, decision.retryAfterSeconds);
      }
      this.usage.add(grant.workspaceId, requestType);
      if (request.aborted) throw clientGone;
      const answer = await this.forward(request, route, flags, requestType);
      this.finish(request, null, answer);
    } catch (err) {
      if (err instanceof GatewayError) {
        this.logCause(err, request.databaseId ?? withoutApiKeys(request.tenantId));
        this.finish(request, err, null);
      } else {
        this.log.error({ err: (err as Error).message, stack: (err as Error).stack, databaseId: request.databaseId }, 'gateway bug while handling a query');
        this.finish(request, new GatewayError('internal_error', 'internal gateway error; see the gateway log'), null);
      }
    }
  }

  /** The inside story of a store or Redis failure: the log has it, the answer does not. */
  private logCause(err: GatewayError, databaseId: string | null): void {
    if (err.cause instanceof Error) this.log.warn({ code: err.code, cause: err.cause.message, databaseId }, err.message);
  }

  /** Answer (unless the client left), release the body, log. Exactly once per request. */
  private finish(request: GatewayRequest, error: GatewayError | null, answer: UpstreamAnswer | 'warmed' | null): void {
    if (request.settled) return;
    request.settled = true;
    if (request.sendsOutstanding === 0) request.deadline.clear();
    this.bodyBudget.give(request.reservedBytes);
    request.bodyShare?.give(request.reservedBytes);
    request.reservedBytes = 0;
    this.unfilledBudget.give(request.unfilledBytes);
    request.unfilledBytes = 0;
    request.discardBody(); // an early answer (401, 413...) while the body still streams in
    let status: number;
    if (error !== null) status = error.status;
    else if (answer === 'warmed') status = 204;
    else status = answer!.status;
    // The answer's bytes count against the response bound until the socket took them all
    // (endAsTheSocketDrains): a client that does not read holds its answer, not uWS.
    const heldBytes = request.responseBytes;
    request.responseBytes = 0;
    let writtenNow = true;
    if (!request.aborted) {
      const res = request.res;
      res.cork(() => {
        res.writeStatus(statusLine(status));
        if (error !== null) {
          res.writeHeader('Content-Type', JSON_TYPE);
          if (error.retryAfterSeconds !== undefined) res.writeHeader('Retry-After', String(error.retryAfterSeconds));
          res.end(error.body(), this.closing);
        } else if (answer === 'warmed') {
          res.endWithoutBody(0, this.closing);
        } else {
          res.writeHeader('Content-Type', answer!.contentType);
          if (answer!.retryAfter !== null) res.writeHeader('Retry-After', answer!.retryAfter);
          // While closing, the client is told to close its connection after this answer.
          if (this.closing) res.writeHeader('Connection', 'close');
          const release = (): void => {
            request.answerWritten = null;
            this.responseBudget.give(heldBytes);
            this.drain.answerWritten();
          };
          // Written as the socket drains; close() waits for the last byte (closing the
          // socket earlier cuts the answer short).
          writtenNow = endAsTheSocketDrains(res, answer!.body, release);
          if (!writtenNow) {
            request.answerWritten = release;
            this.drain.answerWriting();
          }
        }
      });
    }
    if (writtenNow) this.responseBudget.give(heldBytes);
    const ms = performance.now() - request.startedMs;
    this.metrics.record(request.requestType, status, error?.code ?? null, request.aborted, ms / 1000);
    if (this.accessLog) {
      const entry: Record<string, unknown> = {
        databaseId: request.databaseId ?? withoutApiKeys(request.tenantId), keyId: request.keyId, requestType: request.requestType,
        // A client that left got no status (clientGone is how process() stops, not an answer).
        status: request.aborted ? null : status, backend: request.backendUrl, ms: Math.round(ms * 1000) / 1000,
      };
      if (error !== null && error !== clientGone) entry['error'] = error.code;
      if (error !== null && status >= 400 && status < 404 && request.logHeaders !== null) entry['req'] = { headers: request.logHeaders };
      if (request.aborted) entry['aborted'] = true;
      this.log.info(entry, 'query');
    }
    this.drain.requestFinished();
  }

  // ---------------------------------------------------------------- routing

  private async forward(request: GatewayRequest, route: DatabaseRoute, flags: RequestFlags, requestType: UsageKind): Promise<UpstreamAnswer | 'warmed'> {
    const deadline = request.deadline;
    const toWriter = requestType === 'write' || flags.requireWriter === true;
    if (flags.warm === true) return await this.warm(request, route, toWriter, deadline);
    if (toWriter) {
      const writer = route.writerUrl === null ? null : this.backends.backend(route.writerUrl);
      if (writer === null || !writer.eligible) {
        throw new GatewayError('database_unavailable', `the writer of database ${route.id} is unavailable; retry later`);
      }
      try {
        return await this.send(writer, request, request.upstreamHeaders(false), deadline);
      } catch (err) {
        if (!(err instanceof UpstreamFailure)) throw err;
        if (err.misdirected) {
          throw new GatewayError('database_unavailable', `the writer of database ${route.id} is not at its recorded address; `
            + `the ${requestType} was not run; retry shortly (the route is being refreshed)`);
        }
        if (err.down) this.backends.markFailing(writer, err.message);
        if (err.notSent) {
          // The connection was never made: safe to retry.
          throw new GatewayError('database_unavailable', `the writer of database ${route.id} is unreachable; the ${requestType} was not sent; retry later`);
        }
        if (requestType === 'write') {
          // Sent, and no answer: it may have run. 503 would promise it did not (clients retry it).
          throw new GatewayError('write_outcome_unknown', `the writer of database ${route.id} failed before answering; the write may have been applied: check before sending it again`);
        }
        throw new GatewayError('database_unavailable', `the writer of database ${route.id} failed before answering; retry later`);
      }
    }
    return await this.read(request, route, deadline);
  }

  /**
   * A read on the least busy eligible reader; on a connection failure, a misdirected answer
   * or a server fault (backends.ts serverFault) the next one (reads have no effects, and a
   * gateway retry costs no token). With no eligible reader left, the writer answers: its
   * snapshot is at least as new as any reader's. When every backend answered a server
   * fault, the last of those answers passes through.
   */
  private async read(request: GatewayRequest, route: DatabaseRoute, deadline: Deadline): Promise<UpstreamAnswer> {
    const tried = new Set<Backend>();
    const headers = request.upstreamHeaders(false);
    let faulted: UpstreamAnswer | null = null;
    for (;;) {
      let target = this.backends.pickReader(route.readerUrls, tried);
      let readerUrls: readonly string[] | null = route.readerUrls;
      if (target === null && route.writerUrl !== null) {
        const writer = this.backends.backend(route.writerUrl);
        if (writer.eligible && !tried.has(writer)) target = writer;
        readerUrls = null;
      }
      if (target === null) {
        if (faulted !== null) return faulted;
        throw new GatewayError('database_unavailable', `no ready backend serves database ${route.id}; retry later`);
      }
      tried.add(target);
      let answer: UpstreamAnswer;
      try {
        answer = await this.send(target, request, headers, deadline);
      } catch (err) {
        if (!(err instanceof UpstreamFailure)) throw err;
        if (err.down) this.backends.markFailing(target, err.message);
        continue;
      }
      if (!this.backends.noteAnswer(target, answer.status, answer.body, readerUrls)) return answer;
      faulted = answer;
    }
  }

  /**
   * Warming (SPEC "Execution headers"): the read on every eligible backend (the writer and
   * the readers; only the writer with x-svc-require-writer), 204 as soon as one succeeds.
   * When all fail, the first target's answer in route order (writer first) is returned.
   */
  private warm(request: GatewayRequest, route: DatabaseRoute, writerOnly: boolean, deadline: Deadline): Promise<UpstreamAnswer | 'warmed'> {
    const targets: Backend[] = [];
    if (route.writerUrl !== null) targets.push(this.backends.backend(route.writerUrl));
    if (!writerOnly) for (const url of route.readerUrls) targets.push(this.backends.backend(url));
    const eligible = targets.filter((b) => b.eligible);
    if (eligible.length === 0) {
      return Promise.reject(new GatewayError('database_unavailable', `no ready backend of database ${route.id} to warm; retry later`));
    }
    const headers = request.upstreamHeaders(true);
    return new Promise((resolve, reject) => {
      const outcomes: (UpstreamAnswer | Error | undefined)[] = new Array(eligible.length);
      let pending = eligible.length;
      let done = false;
      const settleOne = (index: number, outcome: UpstreamAnswer | Error): void => {
        outcomes[index] = outcome;
        pending--;
        if (done) return;
        if (!(outcome instanceof Error) && outcome.status >= 200 && outcome.status < 300) {
          done = true;
          resolve('warmed');
          return;
        }
        if (pending > 0) return;
        done = true;
        const answered = outcomes.find((o): o is UpstreamAnswer => o !== undefined && !(o instanceof Error));
        if (answered !== undefined) resolve(answered);
        else reject(outcomes.find((o) => o instanceof GatewayError) ?? new GatewayError('database_unavailable', `every backend of database ${route.id} failed while warming; retry later`));
      };
      eligible.forEach((backend, index) => {
        const readerUrls = writerOnly || backend.url === route.writerUrl ? null : route.readerUrls;
        this.send(backend, request, headers, deadline, false).then((answer) => {
          this.backends.noteAnswer(backend, answer.status, answer.body, readerUrls);
          settleOne(index, answer);
        }, (err: Error) => {
          if (err instanceof UpstreamFailure && err.down) this.backends.markFailing(backend, err.message);
          settleOne(index, err);
        });
      });
    });
  }

  /**
   * One upstream request. Rejects with GatewayError query_timeout at the deadline,
   * server_overloaded when the answer would pass the gateway's bound of held answer bytes,
   * UpstreamFailure without an answer. See UpstreamCall for how it talks to undici.
   *
   * `keepSuccessBody` false (warming): a 2xx answer's body is dropped as it arrives, since
   * the client gets 204; error answers are kept, as one of them may be the answer.
   */
  private send(backend: Backend, request: GatewayRequest, headers: Record<string, string>, deadline: Deadline, keepSuccessBody = true): Promise<UpstreamAnswer> {
    if (deadline.expired) return Promise.reject(this.timeoutError());
    backend.outstanding++;
    request.sendsOutstanding++;
    request.backendUrl = backend.url;
    return new Promise<UpstreamAnswer>((resolve, reject) => {
      const call = new UpstreamCall(this, backend, request, deadline, keepSuccessBody, resolve, reject);
      deadline.notify(call.onDeadline);
      backend.pool.dispatch({ path: '/v2/query', method: 'POST', headers, body: request.body }, call);
    });
  }

  /**
   * A backend answered 421: the route that named it is stale (the server was restarted on
   * another port and this one reused by another database's server, or the database was
   * re-provisioned). Its answer is never the client's; the route is looked up again on
   * the next request. The server is not marked failing: it serves its own database fine.
   */
  misdirected(backend: Backend, request: GatewayRequest): void {
    const databaseId = request.databaseId;
    if (databaseId !== null) this.routes.forget(databaseId);
    const now = monotonicMs();
    if (now - backend.lastMisdirectedLogMs < MISDIRECTED_LOG_INTERVAL_MS) {
      backend.misdirectedUnlogged++;
      return;
    }
    backend.lastMisdirectedLogMs = now;
    const earlier = backend.misdirectedUnlogged;
    backend.misdirectedUnlogged = 0;
    this.log.warn({ databaseId, backend: backend.url, notLoggedSinceLastLine: earlier },
      'backend serves another database (421 misdirected_request): stale route dropped; the request goes to another backend or is answered 503');
  }

  timeoutError(): GatewayError {
    return new GatewayError('query_timeout', `query exceeded the gateway's deadline of ${this.queryTimeoutMs} ms`);
  }

  // ---------------------------------------------------------------- GET /v2/metadata

  /**
   * The document `svc sync` reads (docs/cli.md "The metadata document"). With a valid key
   * it names the key's database; without a key it carries the gateway settings only; a
   * malformed or unknown key is refused as on /v2/query.
   */
  private onMetadata(res: HttpResponse, req: HttpRequest): void {
    const headers = collectHeaders(req, this.authHeaderLower);
    let aborted = false;
    res.onAborted(() => { aborted = true; });
    const reply = (status: number, body: string): void => {
      if (aborted) return;
      res.cork(() => { res.writeStatus(statusLine(status)).writeHeader('Content-Type', JSON_TYPE).end(body); });
    };
    const document = (databaseId: string | null): string => JSON.stringify({
      gateway_url: this.publicUrl,
      query_auth_header: this.authHeaderName,
      query_auth_scheme: this.authScheme,
      query_auth_env: this.options.queryAuthEnv ?? 'SVC_API_KEY',
      database_id: databaseId,
    });
    void (async () => {
      try {
        if (headers.auth === undefined) {
          reply(200, document(null));
          return;
        }
        const grant = await this.grants.get(hashOfWellFormedKey(keyFromHeader(headers.auth, this.authHeaderName, this.authScheme)));
        if (grant === null) throw new GatewayError('invalid_api_key', 'invalid API key: no such key, or it was revoked');
        reply(200, document(grant.databaseId));
      } catch (err) {
        if (err instanceof GatewayError) this.logCause(err, null);
        else this.log.error({ err: (err as Error).message, stack: (err as Error).stack }, 'gateway bug while serving metadata');
        const e = err instanceof GatewayError ? err : new GatewayError('internal_error', 'internal gateway error; see the gateway log');
        reply(e.status, e.body());
      }
    })();
  }

  // ---------------------------------------------------------------- shutdown

  async close(drainTimeoutMs = 5000): Promise<void> {
    this.closing = true;
    this.listenSocket = stopListening(this.listenSocket);
    await this.drain.drained(drainTimeoutMs);
    closeApp(this.app);
    await this.usage.close();
    await Promise.all([this.backends.close(), this.limiter.close()]);
    this.log.info('gateway closed');
    this.log.flush?.();
  }
}

/**
 * Thrown when the client went away while its request waited: finish() still releases the
 * request's body reservation and in-flight count, and writes nothing.
 */
function overloadedByBodies(): GatewayError {
  return new GatewayError('server_overloaded', 'the gateway holds too many request bodies; retry later');
}

function overloadedByDatabaseBodies(databaseId: string): GatewayError {
  return new GatewayError('server_overloaded', `the gateway holds as many request bodies for database ${databaseId} as one database may; retry later`);
}

const clientGone = new GatewayError('query_timeout', 'the client closed the connection before the answer');

function tenantDisabled(what: string): GatewayError {
  return new GatewayError('tenant_disabled', `query processing disabled: the workspace's monthly allowance of ${what} is used up; change the plan or wait for the next month`);
}

/**
 * Headers the access log of rejected requests shows. An allowlist, not a denylist: a
 * client may send its key in any header (a misconfigured one, a proxy's), and only names
 * known to carry no secret are written. The auth header is shown as present, never its value.
 */
const loggedHeaderNames: ReadonlySet<string> = new Set([
  'content-type', 'content-length', 'user-agent', HEADER_TENANT_ID, HEADER_WARM, HEADER_REQUIRE_WRITER, HEADER_AWAIT_DURABLE,
]);

function loggedHeaders(req: HttpRequest, authHeaderLower: string): Record<string, string> {
  const out: Record<string, string> = {};
  req.forEach((key, value) => {
    if (key in out) return;
    if (key === authHeaderLower) out[key] = '[redacted]';
    else if (loggedHeaderNames.has(key)) out[key] = withoutApiKeys(value);
  });
  return out;
}

function methodNotAllowed(res: HttpResponse, allow: string): void {
  res.writeStatus('405 Method Not Allowed').writeHeader('Allow', allow).end();
}

/** Start a gateway; resolves once it listens (Redis may still be connecting). */
export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  assertNativeUws();
  const server = new GatewayServer(options);
  const port = await server.start();
  return {
    port,
    url: server.localUrl,
    controlPlaneLookups: () => ({
      grants: server.grants.lookupsStarted, routes: server.routes.lookupsStarted, allowances: server.allowances.lookupsStarted,
    }),
    bufferedBytes: () => ({ requestBodies: server.bodyBudget.held, unfilledBodies: server.unfilledBudget.held, responses: server.responseBudget.held }),
    flushUsage: () => server.usage.flush(),
    metricsJson: () => server.metricsJson(),
    serveMetricsWith: (source) => { server.metricsSource = source; },
    close: () => server.close(),
  };
}
