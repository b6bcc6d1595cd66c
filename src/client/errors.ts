// Client-side errors: what a failed request looks like to the caller (errors.md §1–§2),
// and the error a builder throws when asked to produce something the protocol forbids.

import { isPlainObject, parseResponseJson, writeJson } from './json.js';

/** A request that did not answer 200, or that could not be sent at all (status 0). */
export class SvcClientError extends Error {
  /** HTTP status; 0 when no response arrived (network failure). */
  readonly status: number;
  /** The stable error code (`transaction_conflict`, …), or undefined when none was given. */
  readonly code: string | undefined;
  /** The human-readable message (not a contract). */
  readonly msg: string;
  /** The `details` member of the error body, kept opaque. */
  readonly details: unknown;
  /** The raw response body, when there was one. */
  readonly body: string | undefined;

  constructor(init: { status: number; code?: string | undefined; msg: string; details?: unknown; body?: string | undefined; cause?: unknown }) {
    super(init.code === undefined ? `HTTP ${init.status}: ${init.msg}` : `${init.code} (HTTP ${init.status}): ${init.msg}`,
      init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'SvcClientError';
    this.status = init.status;
    this.code = init.code;
    this.msg = init.msg;
    this.details = init.details;
    this.body = init.body;
  }

  /** `409`: a concurrent transaction won; replay only idempotent work. */
  get isConflict(): boolean { return this.status === 409; }
  /** `429`: a gateway's rate limit (the reference server never sends it). */
  get isRateLimited(): boolean { return this.status === 429; }
}

/** A builder was asked for a tree or request the protocol does not allow. */
export class QueryBuildError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'QueryBuildError';
  }
}

const nonEmptyString = (v: unknown): v is string => typeof v === 'string' && v.length > 0;

/**
 * Reads a non-200 answer the way errors.md §2 prescribes: the current `{error, msg}`
 * envelope, then the legacy `{error, code}` one, then `{code?, message|error}`, keeping
 * `details`; a body that is not a JSON object has no code and its text is the message.
 */
export function errorFromResponse(status: number, body: string, statusText = ''): SvcClientError {
  let parsed: unknown;
  try {
    parsed = parseResponseJson(body);
  } catch {
    parsed = undefined;
  }
  if (isPlainObject(parsed)) {
    const { error, msg, code, message, details } = parsed;
    if (nonEmptyString(error) && nonEmptyString(msg)) return new SvcClientError({ status, code: error, msg, details, body });
    if (nonEmptyString(error) && nonEmptyString(code)) return new SvcClientError({ status, code, msg: error, details, body });
    const text = message !== undefined ? message : error;
    return new SvcClientError({
      status,
      code: nonEmptyString(code) ? code : undefined,
      msg: typeof text === 'string' ? text : text === undefined || text === null ? fallbackMessage(status, '', statusText) : writeJson(text),
      details,
      body,
    });
  }
  return new SvcClientError({ status, msg: fallbackMessage(status, body, statusText), body });
}

function fallbackMessage(status: number, body: string, statusText: string): string {
  if (body.trim().length > 0) return body;
  if (statusText.length > 0) return statusText;
  return `unknown error with code: ${status}`;
}
