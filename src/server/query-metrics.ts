// The queries a front-end thread answered, for GET /metrics (src/metrics/): by where they ran
// and the class of their status, and how long they took.
import { CounterSet, DurationHistogram, labelGrid, statusClass, STATUS_CLASSES, type MetricsJson } from '../metrics/counts.js';
import type { QueryRoute } from './request-log.js';

/** Where an answered query ran; `none`: answered before it was routed (a bad request, a shed one). */
const ROUTES: readonly (QueryRoute | 'none')[] = ['inline', 'pool', 'writer', 'explain', 'none'];
const NONE = ROUTES.length - 1;

export class QueryMetrics {
  private readonly answered = new CounterSet('svc_queries_total',
    'Queries (POST /v2/query and /v2/explain) answered, by where they ran and the status class of the answer',
    labelGrid({ route: ROUTES, status: STATUS_CLASSES }));
  private readonly gone = new CounterSet('svc_queries_abandoned_total', 'Queries whose client went away before the answer', labelGrid({ route: ROUTES }));
  private readonly duration = new DurationHistogram('svc_query_duration_seconds', 'Time from a query\'s first byte to its answer, by where it ran', 'route', ROUTES);

  /** One query answered with `status` (null: its client went away first) after `seconds`. */
  record(route: QueryRoute | null, status: number | null, seconds: number): void {
    const r = route === null ? NONE : routeIndex(route);
    if (status === null) {
      this.gone.inc(r);
      return;
    }
    this.answered.inc(r * STATUS_CLASSES.length + statusClass(status));
    this.duration.observe(r, seconds);
  }

  toJson(): MetricsJson {
    return [this.answered.toJson(), this.gone.toJson(), this.duration.toJson()];
  }
}

function routeIndex(route: QueryRoute): number {
  switch (route) {
    case 'inline': return 0;
    case 'pool': return 1;
    case 'writer': return 2;
    default: return 3;
  }
}
