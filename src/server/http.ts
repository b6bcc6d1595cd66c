// The HTTP front end (ARCHITECTURE.md §3, main thread): uWebSockets.js only.
//
// Per request the main thread does O(1) work besides copying the body: parse the
// execution headers (stage 1 of envelope.md §6), read the body up to the limit
// (stage 2), hand the raw bytes to a reader worker or the writer thread, and write back
// the bytes they return. No JSON is parsed or built here.
//
// uWS rules this file follows (notes/packages.md, uWS docs):
// - HttpRequest is stack-allocated: every header is read synchronously in the handler.
// - A response answered later than the handler's return must register onAborted first,
//   and must not be touched after the abort.
// - Writes outside the handler's synchronous part are corked (one syscall per answer).
// - uWS has no body-size option: the bytes are counted in onData.
// - Query answers are written with tryEnd, never end: end() buffers whatever the socket
//   does not take, and a client that sends requests but never reads its answers grew the
//   server by every answer (GBs in minutes). tryEnd writes what the socket takes; the rest
//   stays this answer's, sent as the socket drains (onWritable), and uWS reads no further
//   request on the connection meanwhile. A client that stops reading holds one answer
//   until the idle timeout closes its connection.
import assert from 'node:assert/strict';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { limits, type LimitOverrides } from '../limits.js';
import { asSvcError, bodyError, bodyTooLargeError, errorBody, overloadError, SvcError } from '../protocol/errors.js';
import {
  HEADER_AWAIT_DURABLE, HEADER_REQUIRE_WRITER, HEADER_TENANT_ID, HEADER_WARM, parseRequestFlags, type RequestFlags,
} from '../protocol/headers.js';
import { allocTransferable, describeError, type QueryJob, type QueryResponder, type QuerySink } from './job.js';
import { QueueBound, shed } from './queue-bound.js';
import { answerMetrics } from '../metrics/render.js';
import { QueryMetrics } from './query-metrics.js';
import type { QueryRoute, RequestLog } from './request-log.js';
import { DrainTracker } from './drain.js';
import { closeApp, listenOn, listenPort, stopListening } from './listen.js';
import { closedForConflictingLength, endAsTheSocketDrains, framingChecked, statusLine, uws } from './uws.js';
import { monotonicMs } from '../clock.js';

/**
 * `POST /v2/explain`: the access paths of a request's plan (decode + plan, nothing executed;
 * server.ts). Bounded by the body limit, so it runs on this thread. Never throws.
 */
export type Explainer = (body: Uint8Array) => { status: number; body: string };

/** `writer`: a read/write server. `reader`: a read-only replica following disk or object storage. */
export type ServerMode = 'writer' | 'reader';

/** Where complete query jobs go. */
export interface QueryRoutes {
  /** Every request not pinned to the writer: the reader pool. */
  readers: QuerySink;
  /** Requests with `x-svc-require-writer: true` (writer mode only): the writer thread. */
  writer: QuerySink;
}

const JSON_TYPE = 'application/json';
const MISDIRECTED_STATUS_LINE = statusLine(421);
/** First allocation of a body buffer that grows by doubling (no Content-Length, or no room to allocate it ahead). */
const BODY_CHUNKED_INITIAL_BYTES = 64 * 1024;


// Stage-1 header scratch. A handler runs synchronously to completion on the one main
// thread, so module-level slots are safe and save a closure and an object per request.
// `req.getHeader` cannot tell an absent header from an empty one (it returns '' for
// both); an empty execution header is present and invalid, so walk the headers once.
let seenWarm: string | undefined;
let seenRequireWriter: string | undefined;
let seenAwaitDurable: string | undefined;
/** x-svc-tenant-id: only a server bound to a database (FrontEndOptions.databaseId) reads it. */
let seenTenantId: string | undefined;
let seenContentLength: string | undefined;
/** Content-Length given twice with different values: closed at once (uws.ts closedForConflictingLength). */
let conflictingContentLength = false;

function collectHeader(key: string, value: string): void {
  // uWS gives lowercase keys and keeps repeats; the first occurrence counts.
  if (key === 'content-length') {
    if (seenContentLength === undefined) seenContentLength = value;
    else if (value !== seenContentLength) conflictingContentLength = true;
    return;
  }
  if (key.length < 10 || key.charCodeAt(0) !== 120 /* x */) return;
  if (key === HEADER_WARM) { if (seenWarm === undefined) seenWarm = value; }
  else if (key === HEADER_REQUIRE_WRITER) { if (seenRequireWriter === undefined) seenRequireWriter = value; }
  else if (key === HEADER_AWAIT_DURABLE) { if (seenAwaitDurable === undefined) seenAwaitDurable = value; }
  else if (key === HEADER_TENANT_ID) { if (seenTenantId === undefined) seenTenantId = value; }
}

function seenHeader(name: string): string | undefined {
  if (name === HEADER_WARM) return seenWarm;
  if (name === HEADER_REQUIRE_WRITER) return seenRequireWriter;
  if (name === HEADER_AWAIT_DURABLE) return seenAwaitDurable;
  return undefined;
}

/** Stage 1, first half: the headers into the scratch slots above (one walk). */
function collectHeaders(req: HttpRequest): void {
  seenWarm = seenRequireWriter = seenAwaitDurable = seenTenantId = seenContentLength = undefined;
  conflictingContentLength = false;
  req.forEach(collectHeader);
}

/** The body of a request until its bytes arrived (shared: one allocation less per request). */
const NO_BODY = new Uint8Array(0);

/** One `POST /v2/query` from the handler to its answer. It is its own job and responder. */
class PendingQuery implements QueryJob, QueryResponder {
  body: Uint8Array = NO_BODY;
  readonly flags: RequestFlags;
  /** `POST /v2/explain` (answered by the front end's explainer), not `/v2/query`. */
  readonly explain: boolean;
  readonly responder: QueryResponder = this;
  settled = false;
  /** The answer is being written as the socket drains (HttpFrontEnd.answerWriting). */
  private writing = false;
  receivedAtMs = 0;
  costly = false;
  private aborted = false;
  private readonly front: HttpFrontEnd;
  private readonly res: HttpResponse;
  /** Content-Length, or -1 when not announced. */
  private readonly expected: number;
  private received = 0;
  private buffer: Uint8Array | null = null;
  /** `body` is a view of the front end's scratch buffer (valid during dispatch only). */
  private bodyInScratch = false;
  /** Body bytes received so far, counted in the front end's receiving total (kept by HttpFrontEnd). */
  reservedBytes = 0;
  /** Bytes of `buffer` allocated ahead of their arrival, counted in the front end's unfilled total. */
  unfilledBytes = 0;
  /** Request/slow-query log (request-log.ts): null when both are off. */
  private readonly log: RequestLog | null;
  /** performance.now() at the handler (the log's and the metrics' durations). */
  private readonly startedMs: number;
  /** Set by the sinks that take the job (server.ts); null until dispatched. */
  route: QueryRoute | null = null;
  /**
   * The start of the body, copied when the body left for another thread (the slow-query
   * log shows it); a body answered on this thread is read in place, never copied.
   */
  private queryPrefix: Uint8Array | null = null;

  constructor(front: HttpFrontEnd, res: HttpResponse, flags: RequestFlags, expected: number, explain: boolean) {
    this.explain = explain;
    this.front = front;
    this.res = res;
    this.flags = flags;
    this.expected = expected;
    this.log = front.requestLog;
    this.startedMs = performance.now();
  }

  onAborted(): void {
    this.aborted = true;
    this.buffer = null;
    this.front.releaseReceiving(this);
    if (!this.settled) this.logFinished(null, null);
    this.settle();
    this.answerWritten(); // the client went away: nothing more will be written
  }

  /** The answer's last byte went to the socket, or the client went away (WrittenListener). */
  answerWritten(): void {
    if (!this.writing) return;
    this.writing = false;
    this.front.answerWritten();
  }

  /** Stage 2. `chunk` is only valid during this call: copy it. */
  onData(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.settled) return; // rejected already: uWS discards the rest of the body
    const size = chunk.byteLength;
    const total = this.received + size;
    if (total > limits.bodyBytesMax) {
      this.buffer = null;
      this.front.releaseReceiving(this);
      this.fail(bodyTooLargeError(limits.bodyBytesMax));
      return;
    }
    if (isLast && this.buffer === null && size > 0 && size <= this.front.bodyScratch.byteLength) {
      // The whole body in one chunk, small enough to run inline: read in the front end's
      // scratch buffer (an ArrayBuffer per request cost ~0.4 us); a job that outlives the
      // dispatch, or leaves the thread, gets a buffer of its own first (ownBody).
      this.body = this.front.bodyScratch.subarray(0, size);
      this.body.set(new Uint8Array(chunk));
      this.bodyInScratch = true;
      this.received = size;
    } else if (size > 0) {
      const room = this.room(total, size, isLast);
      if (room === null) return; // shed: answered 503
      room.set(new Uint8Array(chunk), this.received);
      this.received = total;
    }
    if (!isLast) return;
    const buffer = this.buffer;
    this.buffer = null;
    this.front.releaseReceiving(this); // from here on the queue that takes the job counts it
    if (buffer !== null) this.body = this.received === buffer.byteLength ? buffer : buffer.subarray(0, this.received);
    this.receivedAtMs = monotonicMs();
    this.front.dispatch(this);
    if (!this.settled) this.ownBody(); // still waiting somewhere: the next request reuses the scratch
  }

  /**
   * The body buffer, with room for `total` bytes. Never larger than the body limit. Null
   * when the front end holds too many body bytes already: the request was shed.
   *
   * The receiving bound counts the bytes that arrived, not the buffer. Counting the
   * announced length let a few connections that announce 16 MiB and send a byte now and then
   * hold the whole bound, shedding every honest body (a probe: 400 B/s did it). A body with
   * a Content-Length gets one buffer of that length (not zeroed: only written pages become
   * resident) while the bytes allocated ahead of their arrival stay within
   * receivingUnfilledBytesMax; past it, and without a length, the buffer grows by doubling
   * as bytes arrive. Growing every buffer so left a load's 1-3 MB bodies as freed buffers of
   * every size in the malloc heap (+21 MiB of RSS after the bench's load).
   */
  private room(total: number, size: number, isLast: boolean): Uint8Array | null {
    const refused = this.front.reserveReceiving(this, total);
    if (refused !== null) return this.shedBody(refused);
    if (this.unfilledBytes > 0) this.front.fillUnfilled(this, size);
    const buffer = this.buffer;
    if (buffer !== null && total <= buffer.byteLength) return buffer;
    let capacity: number;
    if (buffer === null && isLast) capacity = total; // whole body in one chunk
    else if (buffer === null && this.expected > total && this.front.reserveUnfilled(this, this.expected - total)) capacity = this.expected;
    else {
      const most = this.expected >= total ? this.expected : limits.bodyBytesMax;
      capacity = Math.min(most, Math.max(total, 2 * (buffer?.byteLength ?? 0), BODY_CHUNKED_INITIAL_BYTES));
    }
    let grown: Uint8Array;
    try {
      // Unpooled and not zeroed: the whole ArrayBuffer is ours to transfer to a worker.
      grown = allocTransferable(capacity);
    } catch (err) {
      // Out of memory (or address space, under strict overcommit): shed this one body.
      return this.shedBody(overloadError('memory for request bodies', `${capacity} bytes could not be allocated (${describeError(err)})`));
    }
    if (buffer !== null) grown.set(buffer.subarray(0, this.received));
    this.buffer = grown;
    return grown;
  }

  private shedBody(err: SvcError): null {
    this.buffer = null;
    this.front.releaseReceiving(this);
    shed(this, err);
    return null;
  }

  ownBody(): void {
    // The shared empty body must not travel: a transfer would detach it for every request.
    if (this.body === NO_BODY) this.body = new Uint8Array(0);
    if (!this.bodyInScratch) return;
    this.bodyInScratch = false;
    const owned = allocTransferable(this.body.byteLength);
    owned.set(this.body);
    this.body = owned;
  }

  bodyLeaving(): void {
    if (this.log !== null && this.queryPrefix === null) this.queryPrefix = this.log.prefixOf(this.body);
  }

  fail(err: SvcError): void {
    this.respond(err.status, errorBody(err));
  }

  respond(status: number, body: Uint8Array | string, retryAfterSeconds?: number): void {
    if (this.settled) return;
    if (!this.aborted) {
      const res = this.res;
      res.cork(() => {
        res.writeStatus(statusLine(status)).writeHeader('Content-Type', JSON_TYPE);
        if (retryAfterSeconds !== undefined) res.writeHeader('Retry-After', String(retryAfterSeconds));
        // While draining, each client is told to close its connection after this answer.
        if (this.front.closing) res.writeHeader('Connection', 'close');
        // An answer larger than the socket takes at once is written as it drains; until its
        // last byte is out it counts as being written, and a stop waits for it (drained()).
        if (!endAsTheSocketDrains(res, body, this)) {
          this.writing = true;
          this.front.answerWriting();
        }
      });
    }
    this.logFinished(status, body);
    this.settle();
  }

  /** `status` null: the client went away first. Counted in the metrics, and logged when a log is on. */
  private logFinished(status: number | null, answer: Uint8Array | string | null): void {
    const durationMs = performance.now() - this.startedMs;
    this.front.metrics.record(this.route, status, durationMs / 1000);
    const log = this.log;
    if (log === null) return;
    log.finished({
      status, answer, durationMs, bodyBytes: this.received,
      route: this.route, queryPrefix: this.queryPrefix ?? (this.body.buffer.byteLength > 0 ? this.body : null),
    });
  }

  private settle(): void {
    if (this.settled) return;
    this.settled = true;
    this.front.finished();
  }
}

export interface FrontEndOptions {
  mode: ServerMode;
  /**
   * One Int32 counting the body bytes being received, shared by every front-end thread of
   * the server so limits.receivingBodyBytesMax bounds them all together; default: this
   * front end's own.
   */
  receivingBytes?: Int32Array;
  /** Lower bounds than limits.ts (tests). */
  limits?: LimitOverrides<'receivingBodyBytesMax' | 'receivingUnfilledBytesMax' | 'earlyQueueRequestsMax' | 'earlyQueueBodyBytesMax'>;
  /** Request and slow-query logging; null or absent: off. */
  requestLog?: RequestLog | null;
  /**
   * The one database this server serves (`svc serve --database-id`): a query or explain
   * whose x-svc-tenant-id names another is answered 421 misdirected_request and never run.
   * Null or absent: unbound, the header is ignored (envelope.md §11).
   */
  databaseId?: string | null;
}

export class HttpFrontEnd {
  readonly mode: ServerMode;
  /** Where a body that may run inline (at most limits.planCacheBodyBytesMax) is read, one request at a time. */
  readonly bodyScratch = new Uint8Array(limits.planCacheBodyBytesMax);
  /** True from close() on: readyz says not ready, answers close their connection. */
  closing = false;
  private readonly app: TemplatedApp;
  private listenSocket: us_listen_socket | null = null;
  private routes: QueryRoutes | null = null;
  private explainer: Explainer | null = null;
  /** Jobs that arrived before the threads were up (listening starts first). */
  private early: QueryJob[] = [];
  private readonly earlyBound: QueueBound;
  /** Body bytes allocated for requests still being received, by every front-end thread (word 0). */
  private readonly receivingBytes: Int32Array;
  private readonly receivingBytesMax: number;
  private readonly receivingUnfilledBytesMax: number;
  /** Query requests accepted and not finished, answers still being written (PendingQuery.respond). */
  private readonly drain = new DrainTracker();
  /** False while the storage cannot make writes durable (the writer thread says so). */
  storageReady = true;
  readonly requestLog: RequestLog | null;
  /** The queries this thread answered (query-metrics.ts). */
  readonly metrics = new QueryMetrics();
  /** The whole server's metrics text for GET /metrics (set by the server; null: not yet). */
  metricsSource: (() => Promise<string>) | null = null;
  /** FrontEndOptions.databaseId. */
  private readonly databaseId: string | null;
  /** The 421 answer's body, built once: a refusal allocates nothing per request. */
  private readonly misdirectedBody: string;

  constructor(options: FrontEndOptions) {
    this.mode = options.mode;
    this.databaseId = options.databaseId ?? null;
    // The message names neither database: it is seen by whoever reached the wrong server.
    this.misdirectedBody = errorBody(new SvcError('misdirected_request',
      'misdirected request: this server serves another database than x-svc-tenant-id names; the request was not run'));
    this.earlyBound = new QueueBound(
      'the queue of requests waiting for the server to start',
      options.limits?.earlyQueueRequestsMax ?? limits.earlyQueueRequestsMax,
      options.limits?.earlyQueueBodyBytesMax ?? limits.earlyQueueBodyBytesMax,
    );
    this.receivingBytesMax = options.limits?.receivingBodyBytesMax ?? limits.receivingBodyBytesMax;
    this.receivingBytes = options.receivingBytes ?? sharedReceivingCounter();
    this.receivingUnfilledBytesMax = options.limits?.receivingUnfilledBytesMax ?? limits.receivingUnfilledBytesMax;
    assert(this.receivingUnfilledBytesMax <= 2 ** 30, 'receivingUnfilledBytesMax must be at most 1 GiB');
    // Counted in an Int32: the bound plus one body per thread racing past it must fit.
    assert(this.receivingBytesMax <= 2 ** 30, 'receivingBodyBytesMax must be at most 1 GiB');
    this.requestLog = options.requestLog ?? null;
    const app = uws.App();
    // One `any` handler per known path, dispatching on the method: no reliance on how
    // the router orders method-specific and `any` routes.
    app.any('/v2/query', (res, req) => {
      if (req.getMethod() === 'post') this.onQuery(res, req, false); // checks the framing in its header walk
      else if (!closedForConflictingLength(res, req)) methodNotAllowed(res, 'POST');
    });
    // Same body and headers as /v2/query; answers the plan's access paths instead.
    app.any('/v2/explain', (res, req) => {
      if (req.getMethod() === 'post') this.onQuery(res, req, true);
      else if (!closedForConflictingLength(res, req)) methodNotAllowed(res, 'POST');
    });
    app.any('/healthz', framingChecked((res, req) => {
      if (req.getMethod() !== 'get') methodNotAllowed(res, 'GET');
      else this.health(res, 200); // liveness: always 200
    }));
    app.any('/readyz', framingChecked((res, req) => {
      if (req.getMethod() !== 'get') methodNotAllowed(res, 'GET');
      else this.health(res, this.ready ? 200 : 503);
    }));
    app.any('/metrics', framingChecked((res, req) => {
      if (req.getMethod() !== 'get') methodNotAllowed(res, 'GET');
      else this.onMetrics(res);
    }));
    app.any('/*', framingChecked((res) => {
      res.writeStatus('404 Not Found').end();
    }));
    this.app = app;
  }

  /** Ready = the threads are attached, the storage can make writes durable, not shutting down. */
  get ready(): boolean {
    return this.routes !== null && !this.closing && this.storageReady;
  }

  /** Body bytes being received, and bytes allocated ahead of their arrival, over every front-end thread (tests, metrics). */
  get receiving(): { received: number; unfilled: number } {
    return { received: Atomics.load(this.receivingBytes, 0), unfilled: Atomics.load(this.receivingBytes, UNFILLED) };
  }

  /** Requests accepted and not yet answered or aborted. */
  get pending(): number {
    return this.drain.inFlight;
  }

  /**
   * Bind and resolve with the real port: exclusively, or, `shared`, beside the server's
   * other front-end threads, on a port the first bound under the port's lock (bindSharedPort).
   */
  async listen(host: string, port: number, shared = false): Promise<number> {
    this.listenSocket = await listenOn(this.app, host, port, shared);
    return listenPort(this.listenSocket);
  }

  /** Start routing queries (the reader pool and writer thread are up). */
  attach(routes: QueryRoutes, explainer: Explainer | null = null): void {
    this.routes = routes;
    this.explainer = explainer;
    const early = this.early;
    this.early = [];
    this.earlyBound.clear();
    for (const job of early) if (!job.responder.settled) this.route(routes, job);
  }

  /** Stop accepting connections; existing ones are still served (and then closed). */
  stopAccepting(): void {
    this.closing = true;
    this.listenSocket = stopListening(this.listenSocket);
  }

  /**
   * Resolves when every accepted query has been answered (or aborted) and every answer's
   * last byte written (src/server/drain.ts), or at the timeout.
   */
  drained(timeoutMs: number): Promise<boolean> {
    return this.drain.drained(timeoutMs);
  }

  /** Close every remaining socket (idle keep-alive connections keep the loop alive). */
  closeAllSockets(): void {
    closeApp(this.app);
  }

  /** A body arrived completely: send the job to the thread that runs it. */
  dispatch(job: QueryJob): void {
    const routes = this.routes;
    if (routes !== null) this.route(routes, job);
    else if (this.earlyBound.admit(job, job.body.byteLength)) this.early.push(job);
  }

  /**
   * Count a request's body as `capacity` bytes received so far; the overload error when the
   * bodies being received would pass limits.receivingBodyBytesMax (nothing is counted then).
   */
  reserveReceiving(query: PendingQuery, capacity: number): SvcError | null {
    const more = capacity - query.reservedBytes;
    // Add first, then check: another thread may add at the same time, and taking ours back
    // when the sum is over keeps the bound exact (at worst both are refused).
    const held = Atomics.add(this.receivingBytes, 0, more);
    if (held + more > this.receivingBytesMax) {
      Atomics.sub(this.receivingBytes, 0, more);
      return overloadError('the buffer of request bodies being received', `${held} bytes held, ${more} more would pass ${this.receivingBytesMax}`);
    }
    query.reservedBytes = capacity;
    return null;
  }

  /** The request's body is complete (or dropped): it no longer counts as being received. */
  releaseReceiving(query: PendingQuery): void {
    const held = Atomics.sub(this.receivingBytes, 0, query.reservedBytes) - query.reservedBytes;
    query.reservedBytes = 0;
    assert(held >= 0, 'released more body bytes than were reserved');
    if (query.unfilledBytes > 0) this.fillUnfilled(query, query.unfilledBytes);
  }

  /**
   * Count `bytes` of a body's buffer as allocated ahead of their arrival, if the total stays
   * within limits.receivingUnfilledBytesMax; false (nothing counted) when it would not.
   */
  reserveUnfilled(query: PendingQuery, bytes: number): boolean {
    if (Atomics.add(this.receivingBytes, UNFILLED, bytes) + bytes > this.receivingUnfilledBytesMax) {
      Atomics.sub(this.receivingBytes, UNFILLED, bytes);
      return false;
    }
    query.unfilledBytes = bytes;
    return true;
  }

  /** `bytes` of a body's buffer allocated ahead arrived (or the body was dropped). */
  fillUnfilled(query: PendingQuery, bytes: number): void {
    const filled = Math.min(bytes, query.unfilledBytes);
    query.unfilledBytes -= filled;
    Atomics.sub(this.receivingBytes, UNFILLED, filled);
  }

  /** PendingQuery calls this exactly once, when answered or aborted. */
  finished(): void {
    this.drain.requestFinished();
  }

  /** An answer is larger than its socket took at once: it is written as the socket drains. */
  answerWriting(): void {
    this.drain.answerWriting();
  }

  /** Such an answer's last byte was written, or its client went away. */
  answerWritten(): void {
    this.drain.answerWritten();
  }

  private route(routes: QueryRoutes, job: QueryJob): void {
    if (job instanceof PendingQuery && job.explain) {
      job.route = 'explain';
      const explainer = this.explainer;
      if (explainer === null) job.fail(new SvcError('internal_error', 'internal error: this server has no explain handler'));
      else if (job.body.byteLength > limits.explainBodyBytesMax) {
        job.fail(bodyError(`explain takes bodies up to ${limits.explainBodyBytesMax} bytes (it runs on the thread that receives it); this one has ${job.body.byteLength}`));
      } else {
        const answer = explainer(job.body);
        job.respond(answer.status, answer.body);
      }
      return;
    }
    // Read-your-writes: the writer thread's snapshot includes every acknowledged write.
    // A read-only server has no writer; its readers answer 503 (envelope.md §6 stage 5)
    // after decoding, so the stage order holds.
    if (job.flags.requireWriter === true && this.mode === 'writer') routes.writer.submit(job);
    else routes.readers.submit(job);
  }

  private onQuery(res: HttpResponse, req: HttpRequest, explain: boolean): void {
    let flags: RequestFlags;
    collectHeaders(req); // stage 1 precedes the body (envelope.md §6)
    if (conflictingContentLength) {
      res.close(); // as closedForConflictingLength (uws.ts) does for the other routes
      return;
    }
    // Before the execution headers: another database's request is not this server's to
    // judge at all. An absent header passes (local tools talk to backends directly).
    // Answers given here, before the body is read, are counted as every other (route "none").
    if (this.databaseId !== null && seenTenantId !== undefined && seenTenantId !== this.databaseId) {
      res.writeStatus(MISDIRECTED_STATUS_LINE).writeHeader('Content-Type', JSON_TYPE).end(this.misdirectedBody, this.closing);
      this.metrics.record(null, 421, 0);
      return;
    }
    try {
      flags = parseRequestFlags(seenHeader);
    } catch (err) {
      const e = asSvcError(err);
      res.writeStatus(statusLine(e.status)).writeHeader('Content-Type', JSON_TYPE).end(errorBody(e));
      this.metrics.record(null, e.status, 0);
      return;
    }
    const length = seenContentLength ?? '';
    const expected = length === '' ? -1 : Number(length);
    if (expected > limits.bodyBytesMax) {
      // Announced too large: answer now, buffer nothing. uWS skips the unread body and
      // keeps the connection (closing it now could reset the client before it reads this).
      const e = bodyTooLargeError(limits.bodyBytesMax);
      res.writeStatus(statusLine(e.status)).writeHeader('Content-Type', JSON_TYPE).end(errorBody(e), this.closing);
      this.metrics.record(null, e.status, 0);
      return;
    }
    this.drain.requestStarted();
    const query = new PendingQuery(this, res, flags, Number.isSafeInteger(expected) ? expected : -1, explain);
    res.onAborted(() => query.onAborted());
    res.onData((chunk, isLast) => query.onData(chunk, isLast));
  }

  /**
   * GET /metrics: the whole server's metrics (every thread's, src/metrics/), from
   * `metricsSource`, which the server sets; 503 until then.
   */
  private onMetrics(res: HttpResponse): void {
    const source = this.metricsSource;
    if (source === null) {
      res.writeStatus(statusLine(503)).end();
      return;
    }
    answerMetrics(res, source(), (err) => process.stderr.write(`svcdb: metrics failed: ${err instanceof Error ? err.message : String(err)}\n`));
  }

  private health(res: HttpResponse, status: number): void {
    // Key order is byte-wise ascending like every response (envelope.md §7). `storage`
    // says whether writes can be made durable; details go to the server log. Index builds
    // and drops run on the writer only while storage is ready (durable.ts runIndexSlice),
    // so the index runtime is "ready" exactly then.
    const runtime = this.storageReady ? 'ready' : 'unavailable';
    const body = `{"index_runtime":"${runtime}","mode":"${this.mode}","ready":${this.ready},"storage":"${this.storageReady ? 'ok' : 'unavailable'}"}`;
    res.writeStatus(statusLine(status)).writeHeader('Content-Type', JSON_TYPE).end(body);
  }
}

/**
 * The receiving counters that front-end threads share (FrontEndOptions.receivingBytes):
 * [0] body bytes received and not complete yet, [UNFILLED] bytes allocated ahead of arrival.
 */
export function sharedReceivingCounter(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT));
}

const UNFILLED = 1;

function methodNotAllowed(res: HttpResponse, allow: string): void {
  res.writeStatus('405 Method Not Allowed').writeHeader('Allow', allow).end();
}
