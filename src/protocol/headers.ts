// Execution headers (envelope.md §11), parsed at stage 1 of request processing
// (envelope.md §6): before the body is read, so a malformed header wins over an
// oversized or undecodable body.
//
// The protocol layer imports nothing of the engine, so the flags type lives here;
// src/exec/request.ts has a structurally identical `RequestFlags`.
import { optionError } from './errors.js';

/** Execution headers after stage-1 parsing; null = header absent. */
export interface RequestFlags {
  warm: boolean | null;
  requireWriter: boolean | null;
  awaitDurable: boolean | null;
}

export const HEADER_WARM = 'x-svc-warm';
export const HEADER_REQUIRE_WRITER = 'x-svc-require-writer';
export const HEADER_AWAIT_DURABLE = 'x-svc-await-durable';
/**
 * The database a request is for. Telemetry label only (envelope.md §11: never validated,
 * never partitions data), except on a server bound to one database (`svc serve
 * --database-id`): there a value naming another database is refused 421
 * misdirected_request before anything else, so a stale gateway route cannot run one
 * database's request on another's server (docs/gateway.md "Binding backends").
 */
export const HEADER_TENANT_ID = 'x-svc-tenant-id';
/** A database ID as the gateway, `svc serve --database-id` and svc.toml's `database_id` accept it. */
export const databaseIdPattern = /^[A-Za-z0-9._-]{1,128}$/;

/** The headers stage 1 validates, in the order they are checked (first failure decides). */
export const executionHeaderNames: readonly string[] = [HEADER_WARM, HEADER_REQUIRE_WRITER, HEADER_AWAIT_DURABLE];

/**
 * Parse the execution headers. `get` receives a lowercase header name and returns the
 * value (the first one if repeated) or undefined when the header is absent; an empty
 * value is present and therefore invalid. Throws SvcError invalid_request_option (400).
 */
export function parseRequestFlags(get: (lowerName: string) => string | undefined): RequestFlags {
  return {
    warm: parseBooleanHeader(HEADER_WARM, get(HEADER_WARM)),
    requireWriter: parseBooleanHeader(HEADER_REQUIRE_WRITER, get(HEADER_REQUIRE_WRITER)),
    awaitDurable: parseBooleanHeader(HEADER_AWAIT_DURABLE, get(HEADER_AWAIT_DURABLE)),
  };
}

/** Visible ASCII, space and tab: what an HTTP header value may hold as text. */
const headerText = /^[\t\x20-\x7e]*$/;

/** `true`/`1`/`false`/`0`, compared case-insensitively (so `TRUE` is fine). */
export function parseBooleanHeader(name: string, value: string | undefined): boolean | null {
  if (value === undefined) return null;
  // The common spellings first, without allocating a lowercased copy.
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  // Only 4 and 5 letter values can still match; don't lowercase arbitrary long input.
  if (value.length === 4 || value.length === 5) {
    const lower = value.toLowerCase();
    if (lower === 'true') return true;
    if (lower === 'false') return false;
  }
  // The reference reads a header as text first (`to_str`), then as a boolean; a value
  // with bytes outside visible ASCII fails the first step with its own message.
  if (!headerText.test(value)) throw optionError(`${name} must be a UTF-8 boolean header`);
  throw optionError(`${name} must be true or false`);
}
