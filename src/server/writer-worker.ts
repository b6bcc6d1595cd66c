// The writer thread (ARCHITECTURE.md §3): the only thread that mutates the store.
// It creates the store, posts its shared buffers to the main thread (which hands them to
// the reader pool), then executes requests one at a time in arrival order. Message
// events are delivered one by one and executeRequest is synchronous, so batches are
// serial by construction; no locks.
import { parentPort, workerData } from 'node:worker_threads';
import { executeRequest, type ExecOptions } from '../exec/request.js';
import { Store, type StoreShared } from '../store/store.js';
import { decodeFlags } from './job.js';

/** `workerData` of the writer thread (structured-cloned: plain data only). */
export interface WriterWorkerData {
  queryTimeoutMs: number;
}

/** Main thread -> writer. */
export type WriterRequest =
  | { kind: 'query'; id: number; body: Uint8Array; flags: number }
  /** Finish everything received before this, then exit. */
  | { kind: 'close' };

/** Writer -> main thread. */
export type WriterReply =
  | { kind: 'ready'; shared: StoreShared }
  /** `body` is UTF-8 JSON; its buffer is transferred. */
  | { kind: 'result'; id: number; status: number; body: Uint8Array }
  | { kind: 'closed' };

const port = parentPort;
if (port === null) throw new Error('writer-worker.ts must run in a worker thread');
const exec: ExecOptions = { queryTimeoutMs: (workerData as WriterWorkerData).queryTimeoutMs };
const store = Store.create();
const encoder = new TextEncoder();

function reply(message: WriterReply, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(message, transfer);
}

port.on('message', (message: WriterRequest) => {
  if (message.kind === 'close') {
    reply({ kind: 'closed' });
    port.close(); // nothing else keeps this thread alive: it exits
    return;
  }
  const outcome = executeRequest(store, message.body, decodeFlags(message.flags), 'writer', exec);
  const status = 'forward' in outcome ? 500 : outcome.status;
  const text = 'forward' in outcome
    ? '{"error":"internal_error","msg":"internal error: the writer was asked to forward a request"}'
    : outcome.body;
  // TextEncoder allocates a fresh, unpooled buffer: safe to transfer.
  const body = encoder.encode(text);
  reply({ kind: 'result', id: message.id, status, body }, [body.buffer as ArrayBuffer]);
});

reply({ kind: 'ready', shared: store.shared });
