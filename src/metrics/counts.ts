// Counters and histograms kept in typed arrays by the thread that counts (a few increments
// per request: no label hashing, no shared memory), turned into prom-client's JSON form only
// when a scrape asks (toJson), so that threads can post them to the one that merges them
// (exposition.ts). Nothing here loads prom-client: request paths never do.

/** One metric as prom-client's Registry#getMetricsAsJSON gives it: plain data, so it can be posted between threads. */
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

/** Prometheus's text exposition format (version 0.0.4), which prom-client renders. */
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** A status code's class, the `status` label: 2xx to 5xx. */
export const STATUS_CLASSES = ['2xx', '3xx', '4xx', '5xx'] as const;
export function statusClass(status: number): number {
  return status < 300 ? 0 : status < 400 ? 1 : status < 500 ? 2 : 3;
}

/** Seconds from a request's first byte to its answer: 0.25 ms to 30 s (the default deadlines). */
export const DURATION_BUCKETS: readonly number[] = [0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** A counter with a fixed set of label combinations, each counted at its index. */
export class CounterSet {
  private readonly counts: Float64Array;
  constructor(readonly name: string, readonly help: string, private readonly labels: readonly Record<string, string>[]) {
    this.counts = new Float64Array(labels.length);
  }

  inc(index: number): void {
    this.counts[index]!++;
  }

  /** Label combinations never counted are left out (prom-client does the same). */
  toJson(): MetricJson {
    const values: SampleJson[] = [];
    this.labels.forEach((labels, i) => { if (this.counts[i]! > 0) values.push({ value: this.counts[i]!, labels }); });
    return { name: this.name, help: this.help, type: 'counter', values, aggregator: 'sum' };
  }
}

/** The label combinations of several labels, first label varying slowest: index = ((i0 * n1) + i1) * n2 + ... */
export function labelGrid(grid: Record<string, readonly string[]>): Record<string, string>[] {
  let out: Record<string, string>[] = [{}];
  for (const [name, values] of Object.entries(grid)) out = out.flatMap((labels) => values.map((v) => ({ ...labels, [name]: v })));
  return out;
}

/** A histogram of durations, one per value of one label. */
export class DurationHistogram {
  /** Per label value: a count per bucket (not cumulative), the last one past the largest bound. */
  private readonly buckets: Float64Array;
  private readonly sums: Float64Array;
  private readonly width = DURATION_BUCKETS.length + 1;
  constructor(readonly name: string, readonly help: string, private readonly label: string, private readonly values: readonly string[]) {
    this.buckets = new Float64Array(values.length * this.width);
    this.sums = new Float64Array(values.length);
  }

  observe(index: number, seconds: number): void {
    let b = 0;
    while (b < DURATION_BUCKETS.length && seconds > DURATION_BUCKETS[b]!) b++;
    this.buckets[index * this.width + b]!++;
    this.sums[index]! += seconds;
  }

  toJson(): MetricJson {
    const out: SampleJson[] = [];
    const width = this.width;
    this.values.forEach((value, i) => {
      let count = 0;
      for (let b = 0; b < width; b++) count += this.buckets[i * width + b]!;
      if (count === 0) return;
      let cumulative = 0;
      for (let b = 0; b < width; b++) {
        cumulative += this.buckets[i * width + b]!;
        out.push({ value: cumulative, metricName: `${this.name}_bucket`, labels: { le: b < DURATION_BUCKETS.length ? DURATION_BUCKETS[b]! : '+Inf', [this.label]: value } });
      }
      out.push({ value: this.sums[i]!, metricName: `${this.name}_sum`, labels: { [this.label]: value } });
      out.push({ value: count, metricName: `${this.name}_count`, labels: { [this.label]: value } });
    });
    return { name: this.name, help: this.help, type: 'histogram', values: out, aggregator: 'sum' };
  }
}

/** A counter or gauge read at the scrape (summed over threads by the merge). */
export function sampledJson(type: 'counter' | 'gauge', name: string, help: string, value: number): MetricJson {
  return { name, help, type, values: [{ value, labels: {} }], aggregator: 'sum' };
}
