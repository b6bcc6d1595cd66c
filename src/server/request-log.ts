// The request log and the slow-query log (docs/cli.md, "Logs"): JSON lines on stderr,
// written by pino through an asynchronous destination (flushed at exit), so a logged
// request costs the main thread one small buffered write. Stdout stays for the start-up
// line. Timing is taken on the main thread by http.ts, from the request handler to the
// answer, so it includes queueing, the hop to a worker and back.
import { pino, type DestinationStream, type Logger } from 'pino';
import { limits } from '../limits.js';

/**
 * Which thread answered: the uWS thread itself, a reader-pool thread, or the writer thread;
 * `explain`: a POST /v2/explain, answered on the uWS thread.
 */
export type QueryRoute = 'inline' | 'pool' | 'writer' | 'explain';

export interface RequestLogOptions {
  /** One line per query request (`svc serve --log-requests`). */
  logRequests: boolean;
  /** A line for every request that took at least this long (ms); 0 turns it off. */
  slowQueryMs: number;
  /** Where lines go; default stderr. */
  destination?: DestinationStream;
  /** Which front-end thread logs (0: the main thread; http-threads.ts numbers the others). */
  httpThread?: number;
}

/** What the front end knows about one request when it ends. */
export interface FinishedQuery {
  /** HTTP status, or null when the client went away before the answer. */
  status: number | null;
  durationMs: number;
  bodyBytes: number;
  route: QueryRoute | null;
  /** The answer (its error code is read from it when status is not 200). */
  answer: Uint8Array | string | null;
  /** The request body or its first bytes (a copy, when the body left the thread). */
  queryPrefix: Uint8Array | null;
}

export const SLOW_QUERY_MS_DEFAULT = 1000;

const latin1 = new TextDecoder('latin1');
const utf8 = new TextDecoder('utf-8'); // not fatal: a cut multi-byte character becomes U+FFFD
/** `{"error":"code"` at the start of an error body (errors.md §1): codes are ASCII. */
const errorCodePattern = /^\{"error":"([a-z0-9_]+)"/;
/** Enough of an error body to hold `{"error":"<the longest code>"`. */
const ERROR_PREFIX_BYTES = 80;

function errorCodeOf(answer: Uint8Array | string | null): string | undefined {
  if (answer === null) return undefined;
  const head = typeof answer === 'string' ? answer.slice(0, ERROR_PREFIX_BYTES) : latin1.decode(answer.subarray(0, ERROR_PREFIX_BYTES));
  return errorCodePattern.exec(head)?.[1];
}

export class RequestLog {
  /** True when a request's body prefix may be needed (the slow-query log is on). */
  readonly wantsQueryPrefix: boolean;
  private readonly logRequests: boolean;
  private readonly slowQueryMs: number;
  private readonly httpThread: number;
  private readonly logger: Logger;
  /** Slow-query lines written in the current second, and those left out (limits.slowQueryLogLinesPerSecondMax). */
  private slowLines = 0;
  private slowLeftOut = 0;
  private slowWindow: NodeJS.Timeout | null = null;

  private constructor(options: RequestLogOptions) {
    this.logRequests = options.logRequests;
    this.slowQueryMs = options.slowQueryMs;
    this.httpThread = options.httpThread ?? 0;
    this.wantsQueryPrefix = options.slowQueryMs > 0;
    const destination = options.destination ?? pino.destination({ fd: 2, sync: false });
    this.logger = pino({
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    }, destination);
  }

  /** A log for these options, or null when both logs are off (no per-request cost then). */
  static create(options: RequestLogOptions): RequestLog | null {
    if (!Number.isInteger(options.slowQueryMs) || options.slowQueryMs < 0) {
      throw new Error(`slowQueryMs must be a non-negative integer, got ${options.slowQueryMs}`);
    }
    if (!options.logRequests && options.slowQueryMs === 0) return null;
    return new RequestLog(options);
  }

  /** The bytes of a body the slow-query log would show (a copy: the body moves to a worker). */
  prefixOf(body: Uint8Array): Uint8Array | null {
    return this.wantsQueryPrefix ? body.slice(0, limits.slowQueryLogBodyBytesMax) : null;
  }

  /**
   * Whether a slow query may have its line now: at most limits.slowQueryLogLinesPerSecondMax
   * a second; the rest are counted and summed up in one line when the second ends.
   */
  private slowLineAllowed(): boolean {
    if (this.slowWindow === null) {
      this.slowWindow = setTimeout(() => this.endSlowWindow(), 1000);
      this.slowWindow.unref();
    }
    if (this.slowLines < limits.slowQueryLogLinesPerSecondMax) {
      this.slowLines++;
      return true;
    }
    this.slowLeftOut++;
    return false;
  }

  /** The second's end (or the stop): one line counting the slow queries left out, and a new second. */
  private endSlowWindow(): void {
    clearTimeout(this.slowWindow ?? undefined);
    this.slowWindow = null;
    if (this.slowLeftOut > 0) this.logger.warn({ left_out: this.slowLeftOut, http_thread: this.httpThread }, 'slow queries not logged (more than limits.slowQueryLogLinesPerSecondMax in a second)');
    this.slowLines = 0;
    this.slowLeftOut = 0;
  }

  /** Called once per request, answered or abandoned. */
  finished(query: FinishedQuery): void {
    let slow = this.slowQueryMs > 0 && query.durationMs >= this.slowQueryMs;
    if (slow && !this.slowLineAllowed()) slow = false;
    if (!slow && !this.logRequests) return;
    const line: Record<string, unknown> = {
      status: query.status,
      duration_ms: Math.round(query.durationMs * 1000) / 1000,
      body_bytes: query.bodyBytes,
    };
    if (query.route !== null) line['route'] = query.route;
    line['http_thread'] = this.httpThread;
    if (query.status === null) line['client_gone'] = true;
    else if (query.status !== 200) {
      const code = errorCodeOf(query.answer);
      if (code !== undefined) line['error'] = code;
    }
    if (slow && query.queryPrefix !== null) {
      const shown = query.queryPrefix.subarray(0, limits.slowQueryLogBodyBytesMax);
      line['query'] = utf8.decode(shown);
      if (query.bodyBytes > shown.byteLength) line['query_truncated'] = true;
    }
    // One line per request: a slow one is a warning (and carries the query), others info.
    if (slow) this.logger.warn(line, 'slow query');
    else this.logger.info(line, 'query');
  }

  /** Write out what is buffered (the server's stop calls this), the count of slow queries left out too. */
  flush(): Promise<void> {
    if (this.slowWindow !== null) this.endSlowWindow();
    return new Promise((resolve) => this.logger.flush(() => resolve()));
  }
}
