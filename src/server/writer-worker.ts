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
import { executeRequest, execOptions } from '../exec/request.js';
import { Store, type StoreShared } from '../store/store.js';
import { scheduleHeapTrim } from '../store/heap-trim.js';
import { DiskFollower, type RecoveryReport } from '../durability/disk-storage.js';
import { openWriterStorage } from '../durability/open.js';
import { Committer, type DurableStorage, type StorageHealth } from '../durability/durable.js';
import { ObjectFollower, type ObjectStorageOptions } from '../durability/object-storage.js';
import { decodeFlags } from './job.js';
import { testStall } from './test-stall.js';
import { WriteClaims } from './write-claims.js';

/** `workerData` of the writer thread (structured-cloned: plain data only). */
export interface WriterWorkerData {
  queryTimeoutMs: number;
  queryMemoryBytes: number;
  /** Disk storage directory, or null for memory (or object storage). */
  diskPath: string | null;
  snapshotWalBytes?: number;
  /** Object storage (S3) instead of a directory. */
  objectStorage?: ObjectStorageOptions | null;
  /** Reader server: follow the storage read-only, polling every refreshMs. */
  follow?: { refreshMs: number } | null;
  /**
   * One i64: the id of the last request this thread began to run. If the thread dies, the
   * main thread knows which unanswered requests never started (writer.ts onStopped).
   */
  started: SharedArrayBuffer;
  /** write-claims.ts: whether this thread starts a request or the main thread's deadline watch answered it. */
  claims: SharedArrayBuffer;
  /** limits.writerUndurableAcksMax, or lower (tests). */
  undurableAcksMax: number;
}

/** One request for the writer; ids grow with arrival order, the order requests run in. */
export interface WriterQuery {
  id: number;
  body: Uint8Array;
  flags: number;
  receivedAtMs: number;
}

/** Main thread -> writer. */
export type WriterRequest =
  /** The requests one turn of the main thread's event loop sent, in id order (writer.ts). */
  | { kind: 'queries'; queries: WriterQuery[] }
  /** Finish everything received before this, then exit. */
  | { kind: 'close' };

/** Writer -> main thread. */
export type WriterReply =
  | { kind: 'ready'; shared: StoreShared; recovery: RecoveryReport | null; health: StorageHealth }
  /** `body` is UTF-8 JSON; its buffer is transferred. `retryAfterSeconds`: a shed request. */
  | { kind: 'result'; id: number; status: number; body: Uint8Array; retryAfterSeconds?: number }
  /** Request `id` was passed over: the main thread's deadline watch had answered it (write-claims.ts). */
  | { kind: 'skipped'; id: number }
  /** Follower only: the store was replaced (reloaded from a newer snapshot). */
  | { kind: 'swap'; shared: StoreShared; epoch: number }
  /** The storage's health changed (not ready: writes are refused; /readyz answers 503). */
  | { kind: 'health'; health: StorageHealth }
  /** `problem`: the stop was not clean (e.g. the final snapshot failed). */
  | { kind: 'closed'; problem: string | null };

const port = parentPort;
if (port === null) throw new Error('writer-worker.ts must run in a worker thread');
const data = workerData as WriterWorkerData;
const encoder = new TextEncoder();
const started = new BigInt64Array(data.started);
const claims = WriteClaims.attach(data.claims);
/** SVCDB_TEST_WRITER_STALL (test-stall.ts): hold this thread before a marked request. */
const stall = testStall('SVCDB_TEST_WRITER_STALL');

function reply(message: WriterReply, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(message, transfer);
}

function sendResult(id: number, status: number, text: string, retryAfterSeconds?: number): void {
  // TextEncoder allocates a fresh, unpooled buffer: safe to transfer.
  const body = encoder.encode(text);
  const result: WriterReply = retryAfterSeconds === undefined
    ? { kind: 'result', id, status, body }
    : { kind: 'result', id, status, body, retryAfterSeconds };
  reply(result, [body.buffer as ArrayBuffer]);
}

/**
 * Before running request `id` (ids grow with arrival order, which is the order they run
 * in): false when the main thread's deadline watch answered it already (skip it).
 */
function markStarted(id: number, body: Uint8Array): boolean {
  stall?.(body);
  if (!claims.start(id)) {
    reply({ kind: 'skipped', id });
    return false;
  }
  Atomics.store(started, 0, BigInt(id));
  return true;
}

const snapshotWalBytes = data.snapshotWalBytes;
if (data.follow) await runFollower(data.follow.refreshMs);
else await runWriter(await openWriterStorage({ diskPath: data.diskPath, objectStorage: data.objectStorage ?? null, ...(snapshotWalBytes !== undefined ? { snapshotWalBytes } : {}) }));

// ---------------------------------------------------------------- writer (memory, disk, object storage)

/**
 * Every request in arrival order through one Committer: writes are answered once durable
 * (group commit inside the storage), reads at once. Message events are delivered one by
 * one and execution is synchronous, so batches are serial by construction.
 */
async function runWriter(storage: DurableStorage): Promise<void> {
  storage.store.onBulkBatch = scheduleHeapTrim;
  const committer = new Committer(storage, { queryTimeoutMs: data.queryTimeoutMs, queryMemoryBytes: data.queryMemoryBytes }, data.undurableAcksMax);
  storage.onHealthChange((health) => reply({ kind: 'health', health }));
  let closing = false;

  const close = (): void => {
    if (closing) return;
    closing = true;
    committer.stopIndexWork();
    // Answers still waiting for durability are sent as close() settles them, before 'closed'.
    void storage.close().then(() => null, (err: unknown) => (err instanceof Error ? err.message : String(err)))
      .then(async (problem) => {
        await new Promise((resolve) => setImmediate(resolve));
        if (problem !== null) process.stderr.write(`svcdb: ${problem}\n`);
        reply({ kind: 'closed', problem });
        port!.close(); // nothing else keeps this thread alive: it exits
      });
  };
  port!.on('message', (message: WriterRequest) => {
    if (message.kind === 'close') {
      close();
      return;
    }
    // The batch in one task, so the writes of a turn share one fsync (group commit: the disk
    // storage syncs from setImmediate). An answer durable at commit (memory) is sent from
    // execute() itself, before the next request runs.
    for (const query of message.queries) {
      if (!markStarted(query.id, query.body)) continue;
      const answer = committer.execute(query.body, decodeFlags(query.flags), undefined, query.receivedAtMs);
      if ('then' in answer) void answer.then((a) => sendResult(query.id, a.status, a.body));
      else sendResult(query.id, answer.status, answer.body, answer.retryAfterSeconds);
    }
  });

  reply({ kind: 'ready', shared: storage.store.shared, recovery: storage.report, health: storage.health() });
}

// ---------------------------------------------------------------- follower (reader server)

interface Following {
  readonly store: Store;
  readonly report: RecoveryReport | null;
  /** Catch up; true when the store was replaced. */
  refresh(): Promise<boolean>;
  /** Not ready once the follower stopped at a batch it cannot apply. */
  health(): StorageHealth;
  close(): void;
}

async function openFollowing(): Promise<Following> {
  if (data.objectStorage) {
    const f = await ObjectFollower.open(data.objectStorage);
    return {
      get store() { return f.store; },
      report: f.report,
      refresh: () => f.refresh(),
      health: () => f.health(),
      close: () => f.close(),
    };
  }
  if (data.diskPath === null) throw new Error('a reader server needs --disk or --storage-uri to follow');
  const f = await DiskFollower.open(data.diskPath);
  return {
    get store() { return f.store; },
    report: f.report,
    refresh: () => f.refresh(),
    health: () => f.health(),
    close: () => undefined,
  };
}

async function runFollower(refreshMs: number): Promise<void> {
  const following = await openFollowing();
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  let closing = false;
  let lastProblem = '';
  let health = following.health();

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
    const now = following.health();
    if (now.ready !== health.ready || now.problem !== health.problem) {
      health = now;
      reply({ kind: 'health', health });
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
        reply({ kind: 'closed', problem: null });
        port!.close();
      });
      return;
    }
    // The front end of a reader server sends nothing here; answer like a replica anyway.
    for (const query of message.queries) {
      if (!markStarted(query.id, query.body)) continue;
      const outcome = executeRequest(following.store, query.body, decodeFlags(query.flags), 'replica', execOptions({
        queryTimeoutMs: data.queryTimeoutMs, queryMemoryBytes: data.queryMemoryBytes, receivedAtMs: query.receivedAtMs,
      }));
      if ('forward' in outcome) sendResult(query.id, 500, '{"error":"internal_error","msg":"internal error: a replica was asked to forward"}');
      else sendResult(query.id, outcome.status, outcome.body);
    }
  });

  reply({ kind: 'ready', shared: following.store.shared, recovery: following.report, health });
  schedule();
}
