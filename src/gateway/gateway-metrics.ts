// What one gateway thread answered, for its GET /metrics (src/metrics/): requests by type and
// status class, the gateway's own refusals by error code, durations, and abandoned requests.
// Typed-array counts (src/metrics/counts.ts): a few increments per request.
import { CounterSet, DurationHistogram, labelGrid, statusClass, STATUS_CLASSES, type MetricsJson } from '../metrics/counts.js';
import type { GatewayErrorCode } from './errors.js';

/** A request's type; `unknown`: answered before its body was decoded (auth, headers, size). */
const TYPES = ['read', 'write', 'unknown'] as const;
const UNKNOWN = TYPES.length - 1;

/** Every code a gateway answers with itself (errors.ts). */
const CODES: readonly GatewayErrorCode[] = [
  'invalid_auth_header', 'invalid_tenant_id', 'invalid_request_option', 'invalid_query_json', 'invalid_api_key',
  'permission_denied', 'tenant_disabled', 'payload_too_large', 'query_timeout', 'rate_limited', 'rate_limit_unavailable',
  'control_plane_unavailable', 'database_unavailable', 'server_overloaded', 'internal_error', 'not_found',
];
const codeIndex = new Map(CODES.map((code, i) => [code, i]));

export class GatewayMetrics {
  private readonly requests = new CounterSet('svc_gateway_requests_total',
    'Requests (POST /v2/query) answered, by request type and the status class of the answer (backend answers and the gateway\'s own)',
    labelGrid({ type: TYPES, status: STATUS_CLASSES }));
  private readonly refusals = new CounterSet('svc_gateway_errors_total',
    'Answers the gateway gave itself instead of a backend\'s, by error code (rate_limited, invalid_api_key, query_timeout, ...)',
    labelGrid({ code: CODES }));
  private readonly abandoned = new CounterSet('svc_gateway_requests_abandoned_total', 'Requests whose client went away before the answer', labelGrid({ type: TYPES }));
  private readonly duration = new DurationHistogram('svc_gateway_request_duration_seconds', 'Time from a request\'s arrival at the gateway to its answer, by request type', 'type', TYPES);

  /**
   * One request finished: its type (null before the body was decoded), the status sent,
   * the gateway's own error code if it answered itself, and whether the client had gone.
   */
  record(type: 'read' | 'write' | null, status: number, code: GatewayErrorCode | null, aborted: boolean, seconds: number): void {
    const t = type === 'read' ? 0 : type === 'write' ? 1 : UNKNOWN;
    if (aborted) {
      this.abandoned.inc(t);
      return;
    }
    this.requests.inc(t * STATUS_CLASSES.length + statusClass(status));
    if (code !== null) {
      const c = codeIndex.get(code);
      if (c !== undefined) this.refusals.inc(c);
    }
    this.duration.observe(t, seconds);
  }

  toJson(): MetricsJson {
    return [this.requests.toJson(), this.refusals.toJson(), this.abandoned.toJson(), this.duration.toJson()];
  }
}
