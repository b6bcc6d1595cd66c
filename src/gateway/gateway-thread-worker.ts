// One extra gateway thread (gateway-threads.ts): a whole gateway (gateway.ts) on the
// gateway's port beside the main thread's, with its own connection to the control-plane
// store, its own Redis connection, undici pools, caches, health view and usage meter.
// The main thread only tells it to flush usage or to close.
import { parentPort, workerData } from 'node:worker_threads';
import { openControlPlane } from '../cloud/open.js';
import { MetricsRelay } from '../metrics/threads.js';
import { startGateway, type Gateway } from './gateway.js';
import type { FromGatewayThread, GatewayThreadData, ToGatewayThread } from './gateway-threads.js';

const port = parentPort;
if (port === null) throw new Error('gateway-thread-worker.ts must run in a worker thread');
const data = workerData as GatewayThreadData;

function post(message: FromGatewayThread): void {
  port!.postMessage(message);
}

// The main thread migrated the store before starting this thread: this open finds the
// schema current and changes nothing.
const controlPlane = await openControlPlane(data.storeLocation);
let gateway: Gateway | null = null;
// A scrape on this thread: the main thread merges every thread's metrics.
const metricsRelay = new MetricsRelay(post);
const started = startGateway({ ...data.options, controlPlane }).then((g) => {
  gateway = g;
  g.serveMetricsWith(() => metricsRelay.ask());
});
let closing: Promise<void> | null = null;

/** Close the gateway (once it started: a close may arrive while it still starts) and the store. */
async function close(): Promise<void> {
  try {
    await started.catch(() => undefined);
    await gateway?.close();
  } finally {
    await controlPlane.close();
  }
}

/**
 * A bug's uncaught exception here must not end the thread with its sockets open: Node then
 * aborts the whole process (uv_loop_close() with uWS's handles still open, no usage
 * flushed). The thread tells the main thread, closes its gateway (flushing its usage) and
 * ends with exit code 1; the main thread then closes the others (gateway-threads.ts).
 */
process.on('uncaughtException', (err) => {
  if (process.exitCode === 1) return; // failing already
  process.exitCode = 1;
  post({ kind: 'fatal', message: err.stack ?? err.message });
  closing ??= close().finally(() => port.close());
});

port.on('message', (message: ToGatewayThread) => {
  switch (message.kind) {
    case 'flush-usage':
      void (gateway?.flushUsage() ?? Promise.resolve()).finally(() => post({ kind: 'usage-flushed' }));
      return;
    case 'close':
      closing ??= close().finally(() => {
        post({ kind: 'closed' });
        port.close(); // nothing else keeps the thread alive: it exits
      });
      return;
    case 'collect-metrics':
      if (gateway !== null) post({ kind: 'metrics', id: message.id, json: gateway.metricsJson() });
      return;
    case 'metrics-text':
      metricsRelay.answered(message.id, message.text);
      return;
    case 'fail-for-test':
      setImmediate(() => { throw new Error(`gateway thread ${data.options.thread} failed on purpose (test)`); });
      return;
  }
});

try {
  await started;
  post({ kind: 'listening' });
} catch (err) {
  await controlPlane.close().catch(() => undefined);
  post({ kind: 'failed', message: err instanceof Error ? err.message : String(err) });
  port.close();
}
