// GET /metrics of a process: its text (the given metrics and the process's own, merged) and
// the answer that sends it. prom-client (exposition.ts) is loaded at the first scrape: a
// process nobody scrapes never loads it.
import type { HttpResponse } from 'uWebSockets.js';
import { statusLine } from '../server/uws.js';
import { METRICS_CONTENT_TYPE, type MetricsJson } from './counts.js';

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

/** Answer a GET /metrics with `text` once it is ready (nothing if the client left; 500 if it failed). */
export function answerMetrics(res: HttpResponse, text: Promise<string>, logFailure: (err: unknown) => void): void {
  let aborted = false;
  res.onAborted(() => { aborted = true; });
  text.then((body) => {
    if (!aborted) res.cork(() => res.writeStatus('200 OK').writeHeader('Content-Type', METRICS_CONTENT_TYPE).end(body));
  }, (err: unknown) => {
    logFailure(err);
    if (!aborted) res.cork(() => res.writeStatus(statusLine(500)).end());
  });
}
