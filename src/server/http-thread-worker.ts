// One extra front-end thread (http-threads.ts): a uWS app of its own on the server's port
// (SO_REUSEPORT: Linux hands each new connection to one of the listening threads), with the
// same HttpFrontEnd as the main thread. It runs the reads it may run itself (inline-reads.ts,
// on its own attachment of the shared store, writer servers only) and answers
// /v2/explain, /healthz and /readyz; every other query goes to the main thread over this
// thread's port, which hands it to the reader pool or the writer thread and sends the answer
// back. So all queue bounds stay where they are, one per queue for the whole server.
import { parentPort, workerData } from 'node:worker_threads';
import { trimHeapWhenIdle } from '../store/heap-trim.js';
import { Store } from '../store/store.js';
import { explainer } from './explain.js';
import { HttpFrontEnd } from './http.js';
import type { FrontThreadData, ToFrontThread, ToMainThread } from './http-threads.js';
import { InlineReads } from './inline-reads.js';
import { bodyToTransfer, encodeFlags, routedTo, type QueryJob, type QuerySink } from './job.js';
import { RequestLog, type QueryRoute } from './request-log.js';
import { MetricsRelay } from '../metrics/threads.js';

const port = parentPort;
if (port === null) throw new Error('http-thread-worker.ts must run in a worker thread');
const data = workerData as FrontThreadData;

let store = Store.attach(data.shared);
// Inline reads leave per-request garbage here as on the main thread: given back when idle.
const idleTrim = trimHeapWhenIdle();
const requestLog = RequestLog.create({ ...data.log, httpThread: data.httpThread });
const front = new HttpFrontEnd({ mode: data.mode, limits: data.limits, requestLog, receivingBytes: data.receivingBytes, databaseId: data.databaseId });
front.storageReady = data.storageReady;

/** Relayed queries waiting for the main thread's answer, by relay id. */
const relayed = new Map<number, QueryJob>();
let nextRelayId = 1;

function post(message: ToMainThread, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(message, transfer);
}

/** A sink on the main thread: the reader pool or the writer thread. The body moves there. */
function relayTo(target: 'pool' | 'writer'): QuerySink {
  return {
    submit(job: QueryJob): void {
      if (job.responder.settled) return;
      const id = nextRelayId++;
      relayed.set(id, job);
      const transfer = bodyToTransfer(job);
      post({
        kind: 'query', id, target, body: job.body, flags: encodeFlags(job.flags),
        receivedAtMs: job.receivedAtMs ?? 0, costly: job.costly === true,
      }, [transfer]);
    },
  };
}

// A scrape on this thread: the main thread merges every thread's metrics.
const metricsRelay = new MetricsRelay(post);
front.metricsSource = () => metricsRelay.ask();

const toPool = relayTo('pool');
const toWriter = relayTo('writer');
// Reader servers swap their store under the follower, so they keep the pool path (server.ts).
const reads = data.inlineReads
  ? routedTo('inline', new InlineReads(store, toPool, toWriter, { queryTimeoutMs: data.queryTimeoutMs, queryMemoryBytes: data.queryMemoryBytes }))
  : toPool;
front.attach({ readers: reads, writer: toWriter }, explainer(() => store));

port.on('message', (message: ToFrontThread) => {
  switch (message.kind) {
    case 'answer': {
      const job = relayed.get(message.id);
      if (job === undefined) return;
      relayed.delete(message.id);
      (job as QueryJob & { route?: QueryRoute | null }).route = message.route;
      job.responder.respond(message.status, message.body, message.retryAfterSeconds);
      return;
    }
    case 'health':
      front.storageReady = message.ready;
      return;
    case 'swap':
      store = Store.attach(message.shared);
      return;
    case 'stop-accepting':
      front.stopAccepting();
      void front.drained(message.drainTimeoutMs).then((drained) => post({ kind: 'drained', drained }));
      return;
    case 'collect-metrics':
      post({ kind: 'metrics', id: message.id, json: front.metrics.toJson() });
      return;
    case 'metrics-text':
      metricsRelay.answered(message.id, message.text);
      return;
    case 'close':
      idleTrim.stop();
      front.closeAllSockets();
      void (requestLog?.flush() ?? Promise.resolve()).then(() => port.close());
      return;
  }
});

front.listen(data.host, data.port, true).then(
  () => post({ kind: 'listening' }),
  (err: unknown) => post({ kind: 'failed', message: err instanceof Error ? err.message : String(err) }),
);
