// Metrics across worker threads (servers' front-end threads, gateway threads): the thread
// that answers for the process asks each worker for its counts at a scrape. Both thread
// protocols carry the same two messages: `{ kind: 'collect-metrics', id }` to a worker and
// `{ kind: 'metrics', id, json }` back.
import type { Worker } from 'node:worker_threads';
import type { MetricsJson } from './counts.js';

/** How long a scrape waits for a thread's counts (a thread busy past it is left out of that scrape). */
const COLLECT_TIMEOUT_MS = 1_000;

export interface MetricsReply {
  kind: 'metrics';
  id: number;
  json: MetricsJson;
}

let nextId = 1;

/** Every live worker's counts, asked for at once. */
export function collectThreadMetrics(workers: readonly { worker: Worker; post(message: { kind: 'collect-metrics'; id: number }): void }[]): Promise<MetricsJson[]> {
  return Promise.all(workers.map(({ worker, post }) => new Promise<MetricsJson | null>((resolve) => {
    const id = nextId++;
    const done = (json: MetricsJson | null): void => {
      clearTimeout(timer);
      worker.off('message', onMessage);
      worker.off('exit', onExit);
      resolve(json);
    };
    const onMessage = (message: { kind?: string; id?: number; json?: MetricsJson }): void => {
      if (message.kind === 'metrics' && message.id === id) done(message.json!);
    };
    const onExit = (): void => done(null);
    const timer = setTimeout(() => done(null), COLLECT_TIMEOUT_MS);
    worker.on('message', onMessage);
    worker.once('exit', onExit);
    post({ kind: 'collect-metrics', id });
  }))).then((parts) => parts.filter((p): p is MetricsJson => p !== null));
}

/**
 * A worker thread's side of a scrape it received: it asks the main thread
 * (`{ kind: 'metrics-request', id }`), which answers `{ kind: 'metrics-text', id, text }`
 * (null: the merge failed) through answered().
 */
export class MetricsRelay {
  private readonly waiting = new Map<number, (text: string | null) => void>();
  private nextRequest = 1;
  constructor(private readonly post: (message: { kind: 'metrics-request'; id: number }) => void) {}

  /** The merged metrics text, from the main thread. */
  ask(): Promise<string> {
    return new Promise((resolve, reject) => {
      const id = this.nextRequest++;
      this.waiting.set(id, (text) => (text === null ? reject(new Error('the main thread could not collect the metrics')) : resolve(text)));
      this.post({ kind: 'metrics-request', id });
    });
  }

  answered(id: number, text: string | null): void {
    const waiting = this.waiting.get(id);
    this.waiting.delete(id);
    waiting?.(text);
  }
}

/** The main thread's side: answer a worker's 'metrics-request' with the merged text. */
export function answerMetricsRequest(id: number, merged: () => Promise<string>, post: (message: { kind: 'metrics-text'; id: number; text: string | null }) => void): void {
  merged().then((text) => post({ kind: 'metrics-text', id, text }), () => post({ kind: 'metrics-text', id, text: null }));
}
