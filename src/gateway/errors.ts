// The error codes the gateway itself answers (docs/gateway.md "Error codes"). SPEC fixes
// rate_limited, rate_limit_unavailable, tenant_disabled, query_timeout and
// payload_too_large; it leaves the 400/401/403 authentication codes open, and these are
// our choice. Codes a backend server answers pass through the gateway unchanged, so a
// client sees one catalog (src/protocol/errors.ts) plus this one.

export type GatewayErrorCode =
  | 'invalid_auth_header' // 400: authentication header missing or malformed
  | 'invalid_tenant_id' // 400: x-svc-tenant-id missing or malformed
  | 'invalid_request_option' // 400: an execution header with a bad value; a warm write
  | 'invalid_query_json' // 400: the outer JSON decode failed (not an object, bad request_type)
  | 'invalid_api_key' // 401: no such key, revoked, or its database is gone
  | 'permission_denied' // 403: the key is for another database, or a read key sent a write
  | 'tenant_disabled' // 402: the workspace's monthly allowance is used up
  | 'payload_too_large' // 413: body over limits.gatewayBodyBytesMax
  | 'query_timeout' // 408: the gateway's deadline passed before the backend answered
  | 'rate_limited' // 429: the database's token bucket is empty
  | 'rate_limit_unavailable' // 503: Redis could not decide in time; fails closed
  | 'control_plane_unavailable' // 503: the key/route/allowance store could not answer
  | 'database_unavailable' // 503: no eligible backend (writer or ready reader)
  | 'server_overloaded' // 503: the gateway holds too many body or answer bytes (nothing ran, or a read)
  | 'write_outcome_unknown' // 502: a write was sent and its answer is lost (the writer failed before answering, or the gateway could not take the answer): it may have been applied
  | 'internal_error' // 500: a gateway bug (the detail is in the gateway log)
  | 'not_found'; // 404: no such endpoint

const statusOfCode: Readonly<Record<GatewayErrorCode, number>> = {
  invalid_auth_header: 400,
  invalid_tenant_id: 400,
  invalid_request_option: 400,
  invalid_query_json: 400,
  invalid_api_key: 401,
  permission_denied: 403,
  tenant_disabled: 402,
  payload_too_large: 413,
  query_timeout: 408,
  rate_limited: 429,
  rate_limit_unavailable: 503,
  control_plane_unavailable: 503,
  database_unavailable: 503,
  server_overloaded: 503,
  write_outcome_unknown: 502,
  internal_error: 500,
  not_found: 404,
};

export class GatewayError extends Error {
  readonly code: GatewayErrorCode;
  readonly status: number;
  /** Whole seconds for a Retry-After header, or undefined for none. */
  readonly retryAfterSeconds: number | undefined;

  /**
   * `cause`: what went wrong inside (a store's or Redis's error), for the gateway log only.
   * Its text may name hosts, users or SQL, so it never goes into the answer's `msg`.
   */
  constructor(code: GatewayErrorCode, msg: string, retryAfterSeconds?: number, cause?: Error) {
    super(msg, cause === undefined ? undefined : { cause });
    this.code = code;
    this.status = statusOfCode[code];
    this.retryAfterSeconds = retryAfterSeconds;
  }

  /** The wire envelope `{"error": code, "msg": text}` (SPEC "Errors"). */
  body(): string {
    return `{"error":${JSON.stringify(this.code)},"msg":${JSON.stringify(this.message)}}`;
  }
}

export function gatewayStatusOf(code: GatewayErrorCode): number {
  return statusOfCode[code];
}
