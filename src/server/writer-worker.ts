// The writer thread (ARCHITECTURE.md §3): the only thread that mutates the store.
// It creates the store, posts its shared buffers to the main thread (which hands them to
// the reader pool), then executes requests one at a time in arrival order. Message
// events are delivered one by one and executeRequest is synchronous, so batches are
// serial by construction; no locks.
import { parentPort, workerData } from 'node:worker_threads';
import { executeRequest, type ExecOptions } from '../exec/request.js';
import { Store, type StoreShared } from '../store/store.js';
import { defaultDiskOptions, DiskWriter, type RecoveryReport } from '../durability/disk-storage.js';
import { errorBody, SvcError } from '../protocol/errors.js';
import { decodeFlags } from './job.js';

/** `workerData` of the writer thread (structured-cloned: plain data only). */
export interface WriterWorkerData {
  queryTimeoutMs: number;
  /** Disk storage directory, or null for memory. */
  diskPath: string | null;
  snapshotWalBytes?: number;
}

/** Main thread -> writer. */
export type WriterRequest =
  | { kind: 'query'; id: number; body: Uint8Array; flags: number }
  /** Finish everything received before this, then exit. */
  | { kind: 'close' };

/** Writer -> main thread. */
export type WriterReply =
  | { kind: 'ready'; shared: StoreShared; recovery: RecoveryReport | null }
  /** `body` is UTF-8 JSON; its buffer is transferred. */
  | { kind: 'result'; id: number; status: number; body: Uint8Array }
  | { kind: 'closed' };

const port = parentPort;
if (port === null) throw new Error('writer-worker.ts must run in a worker thread');
const data = workerData as WriterWorkerData;
const disk = data.diskPath === null ? null
  : DiskWriter.open(data.diskPath, { ...defaultDiskOptions, snapshotWalBytes: data.snapshotWalBytes ?? defaultDiskOptions.snapshotWalBytes });
const store = disk?.store ?? Store.create();
const exec: ExecOptions = { queryTimeoutMs: data.queryTimeoutMs, ...(disk ? { logBatch: (b) => disk.logBatch(b) } : {}) };
const encoder = new TextEncoder();

function reply(message: WriterReply, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(message, transfer);
}

function sendResult(id: number, status: number, text: string): void {
  // TextEncoder allocates a fresh, unpooled buffer: safe to transfer.
  const body = encoder.encode(text);
  reply({ kind: 'result', id, status, body }, [body.buffer as ArrayBuffer]);
}

// Group commit: answers of committed writes wait here until one fsync covers all of them.
// Message events are delivered back to back, so everything that arrived while the last
// fsync ran commits in memory first and then shares the next fsync (scheduled with
// setImmediate, which runs after the queued messages).
const awaitingDurable: { id: number; status: number; text: string }[] = [];
let flushScheduled = false;

function flush(): void {
  flushScheduled = false;
  if (disk === null) return;
  const waiting = awaitingDurable.splice(0);
  try {
    disk.sync();
    for (const w of waiting) sendResult(w.id, w.status, w.text);
  } catch (err) {
    const e = err instanceof SvcError ? err : new SvcError('storage_error', `storage error: ${String(err)}`);
    for (const w of waiting) sendResult(w.id, e.status, errorBody(e));
  }
  try {
    disk.maybeSnapshot();
  } catch (err) {
    process.stderr.write(`svcdb: snapshot failed (the WAL keeps every write): ${String(err)}\n`);
  }
}

port.on('message', (message: WriterRequest) => {
  if (message.kind === 'close') {
    flush();
    disk?.close();
    reply({ kind: 'closed' });
    port.close(); // nothing else keeps this thread alive: it exits
    return;
  }
  const flags = decodeFlags(message.flags);
  const epoch = store.committedEpoch();
  const outcome = executeRequest(store, message.body, flags, 'writer', exec);
  const status = 'forward' in outcome ? 500 : outcome.status;
  const text = 'forward' in outcome
    ? '{"error":"internal_error","msg":"internal error: the writer was asked to forward a request"}'
    : outcome.body;
  const committed = store.committedEpoch() !== epoch;
  if (disk !== null && committed) {
    if (!flushScheduled) {
      flushScheduled = true;
      setImmediate(flush);
    }
    // x-svc-await-durable: false acknowledges after apply; otherwise after fsync.
    if (flags.awaitDurable !== false) {
      awaitingDurable.push({ id: message.id, status, text });
      return;
    }
  }
  sendResult(message.id, status, text);
});

reply({ kind: 'ready', shared: store.shared, recovery: disk?.report ?? null });
