// One HTTP exchange for the CLI, on node:http / node:https (loading fetch's undici costs a
// CLI run ~0.15 s more). One connection per exchange, closed afterwards, so the process
// exits as soon as the command is done. A transport failure (refused, unknown host,
// reset, timeout) becomes an Unreachable error carrying a short reason such as
// `ECONNREFUSED`, so each command can phrase its own "cannot reach ..." message.
// Redirects are not followed: the status is reported as received.
import { request as httpRequestRaw, type IncomingMessage } from 'node:http';
import { request as httpsRequestRaw } from 'node:https';
import { CliError, messageOf } from './errors.js';

export interface HttpResponse {
  readonly status: number;
  /** A response header (lower-case name), or null. */
  header(name: string): string | null;
  readonly text: string;
}

export interface HttpRequest {
  readonly method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string;
  /** Whole-exchange limit; none when 0 or absent. */
  readonly timeoutMs?: number;
}

export class Unreachable extends Error {
  constructor(readonly url: string, readonly reason: string) {
    super(`cannot reach ${url} (${reason})`);
    this.name = 'Unreachable';
  }
}

export function httpRequest(url: string, request: HttpRequest = {}): Promise<HttpResponse> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return Promise.reject(new Unreachable(url, 'not a valid URL'));
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return Promise.reject(new Unreachable(url, `unsupported protocol ${parsed.protocol}`));
  const send = parsed.protocol === 'https:' ? httpsRequestRaw : httpRequestRaw;
  const body = request.body === undefined ? undefined : Buffer.from(request.body, 'utf8');
  const headers: Record<string, string> = { connection: 'close', ...request.headers };
  if (body !== undefined) headers['content-length'] = String(body.length);
  const timeoutMs = request.timeoutMs ?? 0;

  return new Promise<HttpResponse>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const fail = (reason: string): void => {
      if (timer !== undefined) clearTimeout(timer);
      reject(new Unreachable(url, reason));
    };
    let req: ReturnType<typeof send>;
    try {
      req = send(parsed, { method: request.method ?? 'GET', headers, agent: false }, (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', (err: NodeJS.ErrnoException) => fail(err.code ?? err.message));
        res.on('end', () => {
          if (timer !== undefined) clearTimeout(timer);
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({
            status: res.statusCode ?? 0,
            text,
            header: (name: string) => {
              const value = res.headers[name.toLowerCase()];
              return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
            },
          });
        });
      });
    } catch (err) {
      // Invalid header values are refused synchronously (the message names the header, not its value).
      reject(new CliError(`cannot send the request to ${url}: ${messageOf(err)}`));
      return;
    }
    req.on('error', (err: NodeJS.ErrnoException) => fail(err.code ?? err.message));
    if (timeoutMs > 0) {
      timer = setTimeout(() => {
        req.destroy();
        fail(`no answer within ${timeoutMs} ms`);
      }, timeoutMs);
    }
    req.end(body);
  });
}

/** `http://host:port` with IPv6 brackets; a wildcard bind address is reached on loopback. */
export function localBaseUrl(host: string, port: number): string {
  const reach = host === '0.0.0.0' ? '127.0.0.1' : host === '::' || host === '[::]' ? '::1' : host;
  const bare = reach.startsWith('[') && reach.endsWith(']') ? reach.slice(1, -1) : reach;
  return `http://${bare.includes(':') ? `[${bare}]` : bare}:${port}`;
}
