// The request body of `svc query` from --file or --json: read, then checked before it is
// sent, so the common mistakes get a message here instead of a round trip. The text that
// is sent is the text that was given (JSON.parse is only used to look at it), so integers
// beyond 2^53 and key order reach the server unchanged.
import { readFileSync } from 'node:fs';
import { CliError, messageOf } from './errors.js';

export type RequestType = 'read' | 'write';

export interface PreparedRequest {
  /** JSON text to send. */
  readonly body: string;
  readonly requestType: RequestType;
}

/** `--file <path>`; `-` reads standard input. */
export function readRequestFile(path: string): PreparedRequest {
  let text: string;
  try {
    text = path === '-' ? readFileSync(0, 'utf8') : readFileSync(path, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read --file ${path}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : messageOf(err)}`);
  }
  return checkRequestText(text, path === '-' ? 'standard input' : path);
}

/** Checks the envelope: an object with a valid request_type and a query of the same kind. */
export function checkRequestText(text: string, source: string): PreparedRequest {
  let request: unknown;
  try {
    request = JSON.parse(text);
  } catch (err) {
    throw new CliError(`${source} is not valid JSON: ${messageOf(err)}`);
  }
  if (typeof request !== 'object' || request === null || Array.isArray(request)) {
    throw new CliError(`${source}: a request must be a JSON object with "request_type" and "query", e.g. {"request_type": "read", "query": {"read": {"entries": [...], "returns": [...]}}}`);
  }
  const fields = request as Record<string, unknown>;
  const requestType = fields.request_type;
  if (requestType === undefined || requestType === null) {
    throw new CliError(`${source}: request_type is missing: it must be "read" or "write"`);
  }
  if (requestType !== 'read' && requestType !== 'write') {
    throw new CliError(`${source}: request_type must be "read" or "write" (lowercase), got ${JSON.stringify(requestType)}`);
  }
  const query = fields.query;
  if (query === undefined || query === null) {
    throw new CliError(`${source}: query is missing: a request needs "query": {"${requestType}": {"entries": [...], "returns": [...]}}`);
  }
  if (typeof query !== 'object' || Array.isArray(query)) {
    throw new CliError(`${source}: query must be an object with one key, "read" or "write", holding the batch; got ${describe(query)}`);
  }
  const variants = Object.keys(query);
  if (variants.length !== 1 || (variants[0] !== 'read' && variants[0] !== 'write')) {
    throw new CliError(`${source}: query must have exactly one key, "read" or "write", holding the batch; got ${variants.length === 0 ? 'no keys' : `keys ${variants.map((k) => JSON.stringify(k)).join(', ')}`}`);
  }
  if (variants[0] !== requestType) {
    throw new CliError(`${source}: request_type is "${requestType}" but the query holds a "${variants[0]}" batch; they must agree`);
  }
  return { body: text, requestType };
}

function describe(value: unknown): string {
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'string' ? 'a string' : typeof value;
}
