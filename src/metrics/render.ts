// The Prometheus text of a process: the given metrics and the process's own, merged. prom-client
// (exposition.ts) is loaded at the first scrape: a process nobody scrapes never loads it.
import type { MetricsJson } from './counts.js';

export type RenderMetrics = (parts: MetricsJson[]) => Promise<string>;

/** A renderer for one process (its process metrics start with the first scrape). */
export function metricsRenderer(): RenderMetrics {
  let loaded: Promise<{ merge: (parts: MetricsJson[]) => Promise<string>; processJson: () => Promise<MetricsJson> }> | null = null;
  return async (parts) => {
    loaded ??= import('./exposition.js').then((m) => ({ merge: m.mergedMetrics, processJson: m.processMetrics() }));
    const { merge, processJson } = await loaded;
    return merge([await processJson(), ...parts]);
  };
}
