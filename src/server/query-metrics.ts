// The queries a front-end thread answered, counted for GET /metrics (metrics.ts): a few
// typed-array increments per request. Kept apart from metrics.ts so that the request path
// never loads prom-client: the main thread loads it at the first scrape.
import type { QueryRoute } from './request-log.js';

/** One metric as Registry#getMetricsAsJSON gives it: plain data, so it can be posted between threads. */
export interface MetricJson {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram' | 'summary';
  values: SampleJson[];
  aggregator: string;
}
export interface SampleJson {
  value: number;
  labels: Record<string, string | number>;
  /** A histogram's series: name_bucket, name_sum, name_count. */
  metricName?: string;
}
export type MetricsJson = MetricJson[];

/** Where an answered query ran; `none`: answered before it was routed (a bad request, a shed one). */
type RouteLabel = QueryRoute | 'none';
const ROUTES: readonly RouteLabel[] = ['inline', 'pool', 'writer', 'explain', 'none'];
const CLASSES = ['2xx', '3xx', '4xx', '5xx'] as const;

/** Seconds from the request's first byte to its answer: 0.25 ms to 30 s (the default deadline). */
const DURATION_BUCKETS = [0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** The queries one front-end thread answered. */
export class QueryMetrics {
  /**
   * Counted in typed arrays, handed to prom-client only at a scrape (toJson): a prom-client
   * counter child's inc() and a histogram child's observe() hash their labels on every call,
   * ~120 and ~190 ns here, and a request costs the server ~10 us in all.
   */
  private readonly answered = new Float64Array(ROUTES.length * CLASSES.length);
  private readonly gone = new Float64Array(ROUTES.length);
  /** Per route: a count per bucket (not cumulative), the last one past the largest bound. */
  private readonly buckets = new Float64Array(ROUTES.length * (DURATION_BUCKETS.length + 1));
  private readonly seconds = new Float64Array(ROUTES.length);

  /** One query answered with `status` (null: its client went away first) after `seconds`. */
  record(route: QueryRoute | null, status: number | null, seconds: number): void {
    const r = route === null ? ROUTES.length - 1 : routeIndex(route);
    if (status === null) {
      this.gone[r]!++;
      return;
    }
    const c = status < 300 ? 0 : status < 400 ? 1 : status < 500 ? 2 : 3;
    this.answered[r * CLASSES.length + c]!++;
    let b = 0;
    while (b < DURATION_BUCKETS.length && seconds > DURATION_BUCKETS[b]!) b++;
    this.buckets[r * (DURATION_BUCKETS.length + 1) + b]!++;
    this.seconds[r]! += seconds;
  }

  /** These counts as prom-client's Registry#getMetricsAsJSON would give them (for mergedMetrics). */
  toJson(): MetricsJson {
    const answered: SampleJson[] = [];
    const gone: SampleJson[] = [];
    const duration: SampleJson[] = [];
    const width = DURATION_BUCKETS.length + 1;
    ROUTES.forEach((route, r) => {
      CLASSES.forEach((status, c) => {
        const value = this.answered[r * CLASSES.length + c]!;
        if (value > 0) answered.push({ value, labels: { route, status } });
      });
      if (this.gone[r]! > 0) gone.push({ value: this.gone[r]!, labels: { route } });
      let count = 0;
      for (let b = 0; b < width; b++) count += this.buckets[r * width + b]!;
      if (count === 0) return;
      let cumulative = 0;
      for (let b = 0; b < width; b++) {
        cumulative += this.buckets[r * width + b]!;
        duration.push({ value: cumulative, metricName: `${DURATION}_bucket`, labels: { le: b < DURATION_BUCKETS.length ? DURATION_BUCKETS[b]! : '+Inf', route } });
      }
      duration.push({ value: this.seconds[r]!, metricName: `${DURATION}_sum`, labels: { route } });
      duration.push({ value: count, metricName: `${DURATION}_count`, labels: { route } });
    });
    return [
      { name: 'svc_queries_total', help: 'Queries (POST /v2/query and /v2/explain) answered, by where they ran and the status class of the answer', type: 'counter', values: answered, aggregator: 'sum' },
      { name: 'svc_queries_abandoned_total', help: 'Queries whose client went away before the answer', type: 'counter', values: gone, aggregator: 'sum' },
      { name: DURATION, help: 'Time from a query\'s first byte to its answer, by where it ran', type: 'histogram', values: duration, aggregator: 'sum' },
    ];
  }
}

const DURATION = 'svc_query_duration_seconds';

function routeIndex(route: QueryRoute): number {
  switch (route) {
    case 'inline': return 0;
    case 'pool': return 1;
    case 'writer': return 2;
    default: return 3;
  }
}

