// GET /metrics of a server or a gateway, with prom-client: the counts every thread keeps in
// typed arrays (counts.ts), posted as prom-client's JSON to the thread that answers for the
// process, merged there with prom-client's AggregatorRegistry (counters, gauges and histograms
// summed over threads) together with the process metrics, and rendered as Prometheus text.
// This module is loaded at the first scrape: a process nobody scrapes never loads prom-client.
import { AggregatorRegistry, collectDefaultMetrics, Registry } from 'prom-client';
import type { MetricsJson } from './counts.js';

/**
 * The process metrics (CPU, resident memory, file descriptors, event-loop delay, GC; the
 * `nodejs_*` heap figures are the calling thread's), started on the first call.
 */
export function processMetrics(): () => Promise<MetricsJson> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return async () => (await registry.getMetricsAsJSON()) as unknown as MetricsJson;
}

/** The exposition text of several threads' metrics merged. */
export async function mergedMetrics(parts: MetricsJson[]): Promise<string> {
  return AggregatorRegistry.aggregate(parts).metrics();
}
