// Loading uWebSockets.js and proving it is the native build.
//
// The pinned package (@trufflesuite/uws-js-unofficial 20.30) ships native binaries for
// Node ABIs 93/108/115 (Node 16/18/20). On any other Node, or with UWS_USE_FALLBACK set,
// it silently returns a pure-JS shim built on `ws` that is several times slower and
// differs in details (notes/packages.md). The server refuses to run on it.
import { STATUS_CODES } from 'node:http';
import uwsModule, { type HttpRequest, type HttpResponse } from 'uWebSockets.js';

export const uws = uwsModule;

/**
 * Ends `res` with `body` as the socket takes it: tryEnd writes what the socket accepts
 * now, and the rest goes on each writable event; uWS buffers none of it (end() would
 * buffer it all) and reads no further request on the connection until it is written.
 * True when all of it was written now; otherwise `written` runs once the rest was. `res`
 * must have an onAborted handler (a client that stops reading is closed by the idle
 * timeout, and then the rest is never written).
 */
export function endAsTheSocketDrains(res: HttpResponse, body: Uint8Array | string, written?: WrittenListener | (() => void)): boolean {
  const total = typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength;
  if (res.tryEnd(body, total)[1]) return true;
  // Offsets are in bytes of the body: keep it as bytes from here on.
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  res.onWritable((offset) => {
    const [ok, done] = res.tryEnd(bytes.subarray(offset), total);
    if (done) {
      if (typeof written === 'function') written();
      else written?.answerWritten();
    }
    return ok;
  });
  return false;
}

/**
 * Told when an answer endAsTheSocketDrains could not write at once has been written whole:
 * an object that is there anyway (the server's request), or a closure where one is.
 */
export interface WrittenListener {
  answerWritten(): void;
}

/**
 * Content-Length given twice with different values: uWS frames the body by the first, a
 * proxy in front may frame it by the last, and the bytes between would be read as another
 * request (request smuggling, RFC 9112 §6.3). Such a connection is closed at once, without a
 * status (as uWS closes other malformed framing): an answer ended with "close" still lets
 * uWS parse those bytes as a request first. True when it closed. For the routes other than
 * the query routes, which check this in their own walk of the headers.
 */
export function closedForConflictingLength(res: HttpResponse, req: HttpRequest): boolean {
  let first: string | undefined;
  let conflicting = false;
  req.forEach((key, value) => {
    if (key !== 'content-length') return;
    if (first === undefined) first = value;
    else if (value !== first) conflicting = true;
  });
  if (conflicting) res.close();
  return conflicting;
}

/** `handler` for a route that reads no headers itself: after closedForConflictingLength. */
export function framingChecked(handler: (res: HttpResponse, req: HttpRequest) => void): (res: HttpResponse, req: HttpRequest) => void {
  return (res, req) => {
    if (!closedForConflictingLength(res, req)) handler(res, req);
  };
}

const statusLines = new Map<number, string>();
/** The status line uWS writeStatus() takes ("200 OK" etc.), built once per status. */
export function statusLine(status: number): string {
  let line = statusLines.get(status);
  if (line === undefined) {
    line = `${status} ${STATUS_CODES[status] ?? 'Unknown'}`;
    statusLines.set(status, line);
  }
  return line;
}

/** The Node ABI (process.versions.modules) of Node 20, the one the pinned binary serves. */
const NODE20_ABI = '115';

/** Why the loaded uWS is not the native binary, or null when it is. */
export function uwsNativeProblem(): string | null {
  // The shim only has App/_cfg/us_listen_socket_close/us_socket_local_port; the native
  // addon also exports SSLApp, getParts and the shared-data helpers.
  const exported = uwsModule as unknown as Record<string, unknown>;
  const native = typeof exported['getParts'] === 'function' && typeof exported['SSLApp'] === 'function';
  if (process.versions.modules !== NODE20_ABI) {
    return `uWebSockets.js has no native binary for Node ${process.version} (ABI ${process.versions.modules}); ` +
      `svcdb needs Node 20 (ABI ${NODE20_ABI}) and will not run on the slow JS fallback`;
  }
  if (!native) {
    return 'uWebSockets.js did not load its native binary and fell back to its JS shim ' +
      `(platform ${process.platform}-${process.arch}${process.env['UWS_USE_FALLBACK'] ? ', UWS_USE_FALLBACK is set' : ''}); ` +
      'svcdb will not run on the slow JS fallback';
  }
  return null;
}

/** Throw unless the native uWS is loaded. */
export function assertNativeUws(): void {
  const problem = uwsNativeProblem();
  if (problem !== null) throw new Error(problem);
}
