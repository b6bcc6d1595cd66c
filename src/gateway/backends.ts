// The backend servers (writers and readers) the gateway forwards to: one undici Pool of
// keep-alive connections per server, an outstanding-request count per server (for least-
// outstanding reader choice), and a health poller that asks each server's `/readyz`.
//
// Health: a server is eligible until it is known to fail. A new server is polled at once;
// after that every `healthIntervalMs`. It is marked failing when /readyz answers anything
// but 200, when a connection to it is refused, or after `pollTimeoutsToFail` polls in a
// row got no answer in time (one slow answer on a busy machine is not a dead server).
// Only a passing poll brings it back, so a killed reader stops getting requests at the
// first refused connection instead of at the next poll.
//
// Ejection (outlier detection): a reader that passes its health check but answers queries
// with server faults (`serverFault` below) `limits.gatewayReaderFaultsToEject` times in a
// row is ejected for `gatewayReaderEjectionMs`, doubled for each ejection since its last
// clean answer (at most `gatewayReaderEjectionMaxMs`). A health poll does not end an
// ejection (its /readyz passes; its queries fail); the time running out does, and the next
// answer decides again. At most half of a database's readers (at least one) are ejected at
// once. Writers are never ejected: nothing else can take their requests.
import type { Logger } from 'pino';
import { Pool } from 'undici';
import { limits } from '../limits.js';
import { monotonicMs } from '../clock.js';

/** Polls in a row without an answer in time before a server counts as failing. */
const pollTimeoutsToFail = 3;

function isTimeout(err: unknown): boolean {
  const e = err as { name?: string; code?: string };
  return e.name === 'TimeoutError' || e.name === 'AbortError' || e.code === 'UND_ERR_ABORTED' || e.code === 'UND_ERR_HEADERS_TIMEOUT';
}

/**
 * Whether a forwarding error proves the server is down (nothing listens, or no route to
 * it), as opposed to one connection closing under a request (retried elsewhere, but no
 * reason to stop choosing the server).
 */
export function provesDown(err: unknown): boolean {
  const code = errorCode(err);
  return code === 'ECONNREFUSED' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'UND_ERR_CONNECT_TIMEOUT';
}

/**
 * The connection was never made, so the request was not sent: refused, or the connect timed
 * out. (EHOSTUNREACH and ENETUNREACH can also end an established keep-alive connection after
 * the request went out.)
 */
export function provesNotSent(err: unknown): boolean {
  const code = errorCode(err);
  return code === 'ECONNREFUSED' || code === 'UND_ERR_CONNECT_TIMEOUT';
}

function errorCode(err: unknown): string | undefined {
  return (err as { code?: string; cause?: { code?: string } }).code ?? (err as { cause?: { code?: string } }).cause?.code;
}

/**
 * Error codes that say the server, not the query, failed (protocol/errors.md): a reader
 * answering these keeps failing whatever it is sent. Query-content failures (also 500, e.g.
 * invalid_query, node_not_found), deadlines and `server_overloaded` (back-pressure: least-
 * outstanding routing already sends less to a busy server) are not faults.
 */
const SERVER_FAULT_CODES: ReadonlySet<string> = new Set([
  'internal_error', 'storage_error', 'database_closed', 'invalid_configuration',
  'migration_required', 'writer_migration_required', 'unsupported_index_storage_version',
]);

/** Longest 5xx body read for its error code; a longer one is no error envelope of a server. */
const FAULT_BODY_BYTES_MAX = 64 * 1024;

/**
 * Whether an answer shows a server fault: a 5xx whose `error` code is one of
 * SERVER_FAULT_CODES, or a 5xx that is no error envelope at all (something between the
 * gateway and the server, or a broken server). Only 5xx bodies are ever parsed.
 */
export function serverFault(status: number, body: Buffer): boolean {
  if (status < 500) return false;
  if (body.byteLength > FAULT_BODY_BYTES_MAX) return true;
  let code: unknown;
  try {
    code = (JSON.parse(body.toString('utf8')) as { error?: unknown } | null)?.error;
  } catch {
    return true;
  }
  return typeof code !== 'string' || SERVER_FAULT_CODES.has(code);
}

export class Backend {
  readonly url: string;
  readonly pool: Pool;
  /**
   * Health polls go over their own connection: on the query pool a poll would wait behind
   * slow queries when every connection is busy, time out, and take a busy but healthy
   * server out of rotation.
   */
  private readonly healthPool: Pool;
  /** Requests sent and not yet answered. */
  outstanding = 0;
  /** null: not polled yet (eligible); false: failing its health check or a connection. */
  healthy: boolean | null = null;
  /** monotonicMs() of the last time a route named this server. */
  lastNamedMs = monotonicMs();
  /** monotonicMs() of the last log line about a misdirected answer from it (gateway.ts misdirected()). */
  lastMisdirectedLogMs = Number.NEGATIVE_INFINITY;
  /** Misdirected answers since that line, not logged one by one. */
  misdirectedUnlogged = 0;
  /** Server-fault answers in a row (ejection, above). */
  faultsInARow = 0;
  /** monotonicMs() at which its ejection ends; 0: not ejected. */
  ejectedUntilMs = 0;
  /** Ejections since its last clean answer (each doubles the next one's length). */
  ejectionsInARow = 0;
  private polling = false;
  private pollTimeoutsInARow = 0;

  constructor(url: string, connections: number) {
    this.url = url;
    this.pool = new Pool(url, {
      connections,
      pipelining: 1,
      // Below uWS's 10 s idle timeout: a connection the server is about to close is never
      // reused (that race would fail a request on a healthy server).
      keepAliveTimeout: 4_000,
      keepAliveMaxTimeout: 4_000,
      connect: { timeout: 2_000 },
    });
    this.healthPool = new Pool(url, { connections: 1, pipelining: 1, keepAliveTimeout: 4_000, keepAliveMaxTimeout: 4_000, connect: { timeout: 2_000 } });
  }

  async close(): Promise<void> {
    await Promise.all([this.pool.destroy().catch(() => {}), this.healthPool.destroy().catch(() => {})]);
  }

  get eligible(): boolean {
    return this.healthy !== false && (this.ejectedUntilMs === 0 || this.ejectionOver());
  }

  /** Whether its ejection has run out (then it is over: the next answers decide again). */
  private ejectionOver(): boolean {
    if (monotonicMs() < this.ejectedUntilMs) return false;
    this.ejectedUntilMs = 0;
    return true;
  }

  get ejected(): boolean {
    return this.ejectedUntilMs !== 0 && !this.ejectionOver();
  }

  /** GET /readyz; 200 = ready. */
  async poll(timeoutMs: number, log: Logger): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    const wasHealthy = this.healthy;
    try {
      const res = await this.healthPool.request({ path: '/readyz', method: 'GET', signal: AbortSignal.timeout(timeoutMs) });
      await res.body.dump();
      this.healthy = res.statusCode === 200;
      this.pollTimeoutsInARow = 0;
    } catch (err) {
      if (isTimeout(err)) {
        this.pollTimeoutsInARow++;
        if (this.pollTimeoutsInARow >= pollTimeoutsToFail) this.healthy = false;
      } else {
        this.healthy = false;
      }
    } finally {
      this.polling = false;
    }
    if (wasHealthy !== this.healthy && !(wasHealthy === null && this.healthy)) {
      log.warn({ backend: this.url, healthy: this.healthy }, this.healthy ? 'backend passes its health check again' : 'backend fails its health check');
    }
  }
}

export interface BackendRegistryOptions {
  healthIntervalMs: number;
  healthTimeoutMs: number;
  connectionsPerBackend: number;
  /** Servers no route named for this long are forgotten (their connections closed). */
  forgetAfterMs: number;
  /** A reader's first ejection (ms); doubled per further ejection up to limits.gatewayReaderEjectionMaxMs. */
  readerEjectionMs: number;
  log: Logger;
}

export class BackendRegistry {
  private readonly backends = new Map<string, Backend>();
  private readonly options: BackendRegistryOptions;
  private readonly timer: NodeJS.Timeout;
  /** Rotates the starting point of reader choice so ties do not always pick the first. */
  private nextTieBreak = 0;
  /** Since start (GET /metrics): server-fault answers, reader ejections, backends taken out by a failed connection. */
  serverFaults = 0;
  ejections = 0;
  connectionFailures = 0;

  constructor(options: BackendRegistryOptions) {
    this.options = options;
    this.timer = setInterval(() => this.pollAll(), options.healthIntervalMs);
    this.timer.unref();
  }

  /** The backend for a base URL, created (and polled at once) on first use. */
  backend(url: string): Backend {
    let backend = this.backends.get(url);
    if (backend === undefined) {
      backend = new Backend(url, this.options.connectionsPerBackend);
      this.backends.set(url, backend);
      void backend.poll(this.options.healthTimeoutMs, this.options.log);
    }
    backend.lastNamedMs = monotonicMs();
    return backend;
  }

  /**
   * The eligible reader with the fewest outstanding requests, skipping `exclude`; null when
   * none is eligible.
   */
  pickReader(readerUrls: readonly string[], exclude: ReadonlySet<Backend> | null): Backend | null {
    const count = readerUrls.length;
    if (count === 0) return null;
    const start = this.nextTieBreak++ % count;
    let best: Backend | null = null;
    for (let i = 0; i < count; i++) {
      const candidate = this.backend(readerUrls[(start + i) % count]!);
      if (!candidate.eligible || (exclude !== null && exclude.has(candidate))) continue;
      if (best === null || candidate.outstanding < best.outstanding) best = candidate;
    }
    return best;
  }

  /**
   * A backend answered (any status). `readerUrls`: the route's readers when `backend` is one
   * of them, null for a writer (never ejected). Returns whether the answer is a server fault
   * (a read may then go to another backend).
   */
  noteAnswer(backend: Backend, status: number, body: Buffer, readerUrls: readonly string[] | null): boolean {
    if (!serverFault(status, body)) {
      backend.faultsInARow = 0;
      if (backend.ejectedUntilMs === 0) backend.ejectionsInARow = 0;
      return false;
    }
    this.serverFaults++;
    backend.faultsInARow++;
    if (readerUrls === null || backend.faultsInARow < limits.gatewayReaderFaultsToEject || backend.ejected) return true;
    let ejected = 0;
    for (const url of readerUrls) if (this.backends.get(url)?.ejected === true) ejected++;
    const ejectableMax = Math.max(1, Math.floor(readerUrls.length / 2));
    if (ejected >= ejectableMax) return true;
    const ms = Math.min(this.options.readerEjectionMs * 2 ** backend.ejectionsInARow, limits.gatewayReaderEjectionMaxMs);
    backend.ejectionsInARow++;
    this.ejections++;
    backend.faultsInARow = 0;
    backend.ejectedUntilMs = monotonicMs() + ms;
    this.options.log.warn({ backend: backend.url, status, ejectedMs: ms, ejectionsInARow: backend.ejectionsInARow },
      `reader answered ${limits.gatewayReaderFaultsToEject} server faults in a row; ejected, reads go to the other backends`);
    return true;
  }

  /** A connection to the server failed: stop choosing it until a health check passes. */
  markFailing(backend: Backend, reason: string): void {
    if (backend.healthy === false) return;
    this.connectionFailures++;
    backend.healthy = false;
    this.options.log.warn({ backend: backend.url, reason }, 'backend connection failed; routing around it until its health check passes');
  }

  /** Backends known now, and how many of them fail their health check or are ejected (GET /metrics). */
  census(): { known: number; failing: number; ejected: number } {
    let failing = 0, ejected = 0;
    for (const backend of this.backends.values()) {
      if (backend.healthy === false) failing++;
      else if (backend.ejected) ejected++;
    }
    return { known: this.backends.size, failing, ejected };
  }

  private pollAll(): void {
    const now = monotonicMs();
    for (const [url, backend] of this.backends) {
      if (now - backend.lastNamedMs > this.options.forgetAfterMs && backend.outstanding === 0) {
        this.backends.delete(url);
        void backend.close();
        continue;
      }
      void backend.poll(this.options.healthTimeoutMs, this.options.log);
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    const pools = [...this.backends.values()].map((b) => b.close());
    this.backends.clear();
    await Promise.all(pools);
  }
}

export const defaultConnectionsPerBackend = limits.gatewayUpstreamConnectionsMax;
