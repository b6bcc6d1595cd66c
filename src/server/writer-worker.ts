// The writer thread (ARCHITECTURE.md §3): the only thread that mutates the store.
// It creates the store, posts its shared buffers to the main thread (which hands them to
// the reader pool), then executes requests one at a time in arrival order. Message
// events are delivered one by one and executeRequest is synchronous, so batches are
// serial by construction; no locks.
//
// On a reader server (`follow`) the same thread slot holds a follower instead: it owns
// the store the readers attached to and extends it by replaying what the writer
// elsewhere appended (disk directory or bucket), polling every refreshMs. When the
// follower had to reload from a newer snapshot it posts the new store's buffers
// ('swap') and the main thread moves the reader pool onto them.
import { parentPort, workerData } from 'node:worker_threads';
import { executeRequest, type ExecOptions } from '../exec/request.js';
import { Store, type StoreShared } from '../store/store.js';
import { defaultDiskOptions, DiskFollower, DiskWriter, type RecoveryReport } from '../durability/disk-storage.js';
import {
  defaultObjectWriterOptions, ObjectFollower, ObjectWriter, type ObjectStorageOptions,
} from '../durability/object-storage.js';
import { errorBody, SvcError } from '../protocol/errors.js';
import { decodeFlags } from './job.js';

/** `workerData` of the writer thread (structured-cloned: plain data only). */
export interface WriterWorkerData {
  queryTimeoutMs: number;
  /** Disk storage directory, or null for memory (or object storage). */
  diskPath: string | null;
  snapshotWalBytes?: number;
  /** Object storage (S3) instead of a directory. */
  objectStorage?: ObjectStorageOptions | null;
  /** Reader server: follow the storage read-only, polling every refreshMs. */
  follow?: { refreshMs: number } | null;
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
  /** Follower only: the store was replaced (reloaded from a newer snapshot). */
  | { kind: 'swap'; shared: StoreShared; epoch: number }
  | { kind: 'closed' };

const port = parentPort;
if (port === null) throw new Error('writer-worker.ts must run in a worker thread');
const data = workerData as WriterWorkerData;
const encoder = new TextEncoder();

function reply(message: WriterReply, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(message, transfer);
}

function sendResult(id: number, status: number, text: string): void {
  // TextEncoder allocates a fresh, unpooled buffer: safe to transfer.
  const body = encoder.encode(text);
  reply({ kind: 'result', id, status, body }, [body.buffer as ArrayBuffer]);
}

function asStorageError(err: unknown): SvcError {
  return err instanceof SvcError ? err : new SvcError('storage_error', `storage error: ${String(err)}`);
}

const snapshotWalBytes = data.snapshotWalBytes;
if (data.follow) await runFollower(data.follow.refreshMs);
else if (data.objectStorage) await runObjectWriter(data.objectStorage);
else runWriter();

// ---------------------------------------------------------------- memory or disk writer

function runWriter(): void {
  const disk = data.diskPath === null ? null
    : DiskWriter.open(data.diskPath, { ...defaultDiskOptions, snapshotWalBytes: snapshotWalBytes ?? defaultDiskOptions.snapshotWalBytes });
  const store = disk?.store ?? Store.create();
  const exec: ExecOptions = { queryTimeoutMs: data.queryTimeoutMs, ...(disk ? { logBatch: (b) => disk.logBatch(b) } : {}) };

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
      const e = asStorageError(err);
      for (const w of waiting) sendResult(w.id, e.status, errorBody(e));
    }
    try {
      disk.maybeSnapshot();
    } catch (err) {
      process.stderr.write(`svcdb: snapshot failed (the WAL keeps every write): ${String(err)}\n`);
    }
  }

  port!.on('message', (message: WriterRequest) => {
    if (message.kind === 'close') {
      flush();
      disk?.close();
      reply({ kind: 'closed' });
      port!.close(); // nothing else keeps this thread alive: it exits
      return;
    }
    const flags = decodeFlags(message.flags);
    const epoch = store.committedEpoch();
    const { status, text } = execute(store, message, flags, exec);
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
}

function execute(store: Store, message: { body: Uint8Array }, flags: ReturnType<typeof decodeFlags>, exec: ExecOptions): { status: number; text: string } {
  const outcome = executeRequest(store, message.body, flags, 'writer', exec);
  if ('forward' in outcome) {
    return { status: 500, text: '{"error":"internal_error","msg":"internal error: the writer was asked to forward a request"}' };
  }
  return { status: outcome.status, text: outcome.body };
}

// ---------------------------------------------------------------- object storage writer

async function runObjectWriter(storage: ObjectStorageOptions): Promise<void> {
  const writer = await ObjectWriter.open(storage, {
    ...defaultObjectWriterOptions,
    snapshotWalBytes: snapshotWalBytes ?? defaultObjectWriterOptions.snapshotWalBytes,
  });
  const store = writer.store;
  const exec: ExecOptions = { queryTimeoutMs: data.queryTimeoutMs, logBatch: (b) => writer.logBatch(b) };
  let closing = false;

  port!.on('message', (message: WriterRequest) => {
    if (message.kind === 'close') {
      if (closing) return;
      closing = true;
      // Answers still waiting for their upload are sent as it completes, before 'closed'.
      void writer.close().catch((err: unknown) => {
        process.stderr.write(`svcdb: closing object storage failed: ${String(err)}\n`);
      }).then(() => {
        reply({ kind: 'closed' });
        port!.close();
      });
      return;
    }
    const flags = decodeFlags(message.flags);
    const epoch = store.committedEpoch();
    const { status, text } = execute(store, message, flags, exec);
    if (store.committedEpoch() === epoch) {
      sendResult(message.id, status, text);
      return;
    }
    // Group commit: writer.sync() resolves once the PUT of the group holding this batch
    // succeeded; writes committed while a PUT runs share the next one.
    const durable = writer.sync();
    if (flags.awaitDurable === false) {
      durable.catch(() => undefined); // the next acknowledged write reports a failure
      sendResult(message.id, status, text);
      return;
    }
    durable.then(
      () => sendResult(message.id, status, text),
      (err: unknown) => {
        const e = asStorageError(err);
        sendResult(message.id, e.status, errorBody(e));
      },
    );
  });

  reply({ kind: 'ready', shared: store.shared, recovery: writer.report });
}

// ---------------------------------------------------------------- follower (reader server)

interface Following {
  readonly store: Store;
  readonly report: RecoveryReport | null;
  /** Catch up; true when the store was replaced. */
  refresh(): Promise<boolean>;
  close(): void;
}

async function openFollowing(): Promise<Following> {
  if (data.objectStorage) {
    const f = await ObjectFollower.open(data.objectStorage);
    return {
      get store() { return f.store; },
      report: f.report,
      refresh: () => f.refresh(),
      close: () => f.close(),
    };
  }
  if (data.diskPath === null) throw new Error('a reader server needs --disk or --storage-uri to follow');
  const f = DiskFollower.open(data.diskPath);
  return {
    get store() { return f.store; },
    report: f.report,
    refresh: () => {
      const before = f.store;
      f.refresh();
      return Promise.resolve(f.store !== before);
    },
    close: () => undefined,
  };
}

async function runFollower(refreshMs: number): Promise<void> {
  const following = await openFollowing();
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  let closing = false;
  let lastProblem = '';

  const tick = async (): Promise<void> => {
    try {
      const before = following.store.committedEpoch();
      if (await following.refresh()) {
        const epoch = following.store.committedEpoch();
        reply({ kind: 'swap', shared: following.store.shared, epoch });
        process.stderr.write(`svcdb: reader reloaded from snapshot (epoch ${before} -> ${epoch}): the WAL after epoch ${before} was already pruned\n`);
      }
      lastProblem = '';
    } catch (err) {
      // Keep serving the last good state; say so once per distinct problem.
      const problem = err instanceof Error ? err.message : String(err);
      if (problem !== lastProblem) process.stderr.write(`svcdb: refresh failed (serving epoch ${following.store.committedEpoch()}): ${problem}\n`);
      lastProblem = problem;
    }
  };
  const schedule = (): void => {
    if (closing) return;
    timer = setTimeout(() => {
      timer = null;
      running = tick().finally(() => {
        running = null;
        schedule();
      });
    }, refreshMs);
  };

  port!.on('message', (message: WriterRequest) => {
    if (message.kind === 'close') {
      if (closing) return;
      closing = true;
      if (timer !== null) clearTimeout(timer);
      void Promise.resolve(running).then(() => {
        following.close();
        reply({ kind: 'closed' });
        port!.close();
      });
      return;
    }
    // The front end of a reader server sends nothing here; answer like a replica anyway.
    const outcome = executeRequest(following.store, message.body, decodeFlags(message.flags), 'replica', { queryTimeoutMs: data.queryTimeoutMs });
    if ('forward' in outcome) sendResult(message.id, 500, '{"error":"internal_error","msg":"internal error: a replica was asked to forward"}');
    else sendResult(message.id, outcome.status, outcome.body);
  });

  reply({ kind: 'ready', shared: following.store.shared, recovery: following.report });
  schedule();
}
