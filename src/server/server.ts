// Wires the HTTP front end, the writer thread and the reader pool (ARCHITECTURE.md §3).
//
// Start-up: listen first (so /readyz answers 503 instead of refusing connections while
// the store comes up), start the writer (it creates the store), start the readers on
// its shared buffers, then route queries. Queries that arrive before that wait.
//
// Stop: stop accepting, let every accepted query finish (answers close their
// connections), close the remaining idle sockets, stop the readers, then let the writer
// finish what it received and exit.
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { defaultExecOptions } from '../exec/request.js';
import { limits, type LimitOverrides } from '../limits.js';
import { unwritableReason } from '../durability/disk-storage.js';
import { explainer } from './explain.js';
import { HttpFrontEnd, sharedReceivingCounter, type ServerMode } from './http.js';
import { bindSharedPort } from './listen.js';
import { FrontThreads } from './http-threads.js';
import { describeError, routedTo } from './job.js';
import { RequestLog, SLOW_QUERY_MS_DEFAULT } from './request-log.js';
import { ReaderPool, type ReadDispatch } from './reader-pool.js';
import { assertNativeUws } from './uws.js';
import { WriterThread } from './writer.js';
import { InlineReads } from './inline-reads.js';
import { Store } from '../store/store.js';
import type { RecoveryReport } from '../durability/disk-storage.js';
import type { ObjectStorageOptions } from '../durability/object-storage.js';
import type { StoreShared } from '../store/store.js';
import { trimHeapWhenIdle } from '../store/heap-trim.js';
import { sampledJson } from '../metrics/counts.js';
import { metricsRenderer } from '../metrics/render.js';

export interface ServerOptions {
  /** Bind address, default 127.0.0.1. */
  host?: string;
  /** Port, default 6969; 0 picks a free one (see RunningServer.port). */
  port?: number;
  /** Reader threads, default os.availableParallelism(). */
  readers?: number;
  /**
   * Front-end threads, each a uWS app on the same port running cheap reads itself
   * (http-threads.ts); default: as many as reader threads. 1: the main thread alone.
   */
  httpThreads?: number;
  /** How reads reach the pool, default 'coalesce' (reader-pool.ts). */
  readDispatch?: ReadDispatch;
  /** Cooperative deadline per query. */
  queryTimeoutMs?: number;
  /** Memory budget per query in MiB (default limits.queryMemoryBytesMax). */
  queryMemoryMb?: number;
  /** Persist to this directory (WAL + snapshots); memory when absent. */
  diskPath?: string | null;
  /** Persist to an S3-compatible bucket instead (snapshots + WAL objects). */
  objectStorage?: ObjectStorageOptions | null;
  /** Snapshot once this many WAL bytes accumulated (disk and object storage). */
  snapshotWalBytes?: number;
  /**
   * 'writer' (default) or 'reader': a read-only server following the disk directory or
   * bucket another server writes; writes answer 503 writer_mode_required.
   */
  mode?: ServerMode;
  /** Run cheap reads on the uWS thread (writer servers), default true. */
  inlineReads?: boolean;
  /** Reader mode: poll the storage for new writes this often (ms), default 1000. */
  refreshMs?: number;
  /** How long close() waits for in-flight queries before closing their sockets. */
  drainTimeoutMs?: number;
  /** Called when the server can no longer work (the writer thread died). Default: log. */
  onFatal?: (err: Error) => void;
  /** Other values for the queue bounds and thread heaps of limits.ts (tests lower them). */
  limits?: LimitOverrides<ServerLimitName>;
  /** Log one JSON line per query request on stderr, default false. */
  logRequests?: boolean;
  /** Log requests that took at least this many ms (with the start of their body); 0 = off. Default 1000. */
  slowQueryMs?: number;
  /**
   * Bind the server to one database (`svc serve --database-id`, the cloud's provisioning):
   * requests whose x-svc-tenant-id names another are refused 421 misdirected_request.
   */
  databaseId?: string | null;
}

/** The limits a server takes from ServerOptions.limits instead of limits.ts. */
export type ServerLimitName =
  | 'receivingBodyBytesMax' | 'receivingUnfilledBytesMax' | 'earlyQueueRequestsMax' | 'earlyQueueBodyBytesMax'
  | 'readerQueueRequestsMax' | 'readerQueueBodyBytesMax' | 'readerThreadHeapMbMax'
  | 'writerPendingRequestsMax' | 'writerPendingBodyBytesMax' | 'writerUndurableAcksMax' | 'writerThreadHeapMbMax';

export interface RunningServer {
  /** `http://host:port` with the real port. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly readers: number;
  /** Front-end threads (uWS apps on the port), the main thread's included. */
  readonly httpThreads: number;
  readonly readDispatch: ReadDispatch;
  /** 'memory', 'disk DIR' or 's3 URI'. */
  readonly storage: string;
  readonly mode: ServerMode;
  /** What recovery found (disk or object storage; a reader server: its first load). */
  readonly recovery: RecoveryReport | null;
  /** Graceful stop; idempotent. Rejects when the stop was not clean (e.g. the final snapshot failed). */
  close(): Promise<void>;
}

export const DEFAULT_HOST = '127.0.0.1';
export const DEFAULT_PORT = 6969;
const DRAIN_TIMEOUT_MS_DEFAULT = 30_000;
const REFRESH_MS_DEFAULT = 1000;
/** Reader threads beyond this help nobody and cost memory. */
const READERS_MAX = 256;
/** Front-end threads likewise (one per core is the most that helps). */
const HTTP_THREADS_MAX = 256;

export async function startServer(options: ServerOptions = {}): Promise<RunningServer> {
  assertNativeUws();
  const host = options.host ?? DEFAULT_HOST;
  const requestedPort = options.port ?? DEFAULT_PORT;
  const readers = options.readers ?? availableParallelism();
  const readDispatch = options.readDispatch ?? 'coalesce';
  const drainTimeoutMs = options.drainTimeoutMs ?? DRAIN_TIMEOUT_MS_DEFAULT;
  const queryTimeoutMs = options.queryTimeoutMs ?? defaultExecOptions.queryTimeoutMs;
  const queryMemoryBytes = options.queryMemoryMb !== undefined ? options.queryMemoryMb * 1024 * 1024 : limits.queryMemoryBytesMax;
  const onFatal = options.onFatal ?? ((err: Error) => process.stderr.write(`svcdb: ${err.message}\n`));
  if (!Number.isInteger(requestedPort) || requestedPort < 0 || requestedPort > 65535) {
    throw new Error(`port must be an integer from 0 to 65535, got ${requestedPort}`);
  }
  if (!Number.isInteger(readers) || readers < 1 || readers > READERS_MAX) {
    throw new Error(`readers must be an integer from 1 to ${READERS_MAX}, got ${readers}`);
  }
  const httpThreads = options.httpThreads ?? readers;
  if (!Number.isInteger(httpThreads) || httpThreads < 1 || httpThreads > HTTP_THREADS_MAX) {
    throw new Error(`httpThreads must be an integer from 1 to ${HTTP_THREADS_MAX}, got ${httpThreads}`);
  }
  const mode = options.mode ?? 'writer';
  const diskPath = options.diskPath ?? null;
  const objectStorage = options.objectStorage ?? null;
  if (diskPath !== null && objectStorage !== null) throw new Error('choose disk storage or object storage, not both');
  if (mode === 'reader' && diskPath === null && objectStorage === null) {
    throw new Error('a reader server follows disk or object storage: give it a directory or a storage URI');
  }
  const refreshMs = options.refreshMs ?? REFRESH_MS_DEFAULT;
  if (mode === 'writer' && diskPath !== null) {
    // Before anything listens or starts: one clear sentence instead of a failed open deep
    // inside the writer thread's recovery.
    const unwritable = unwritableReason(resolve(diskPath));
    if (unwritable !== null) throw new Error(unwritable);
  }
  const logOptions = { logRequests: options.logRequests ?? false, slowQueryMs: options.slowQueryMs ?? SLOW_QUERY_MS_DEFAULT };
  const requestLog = RequestLog.create(logOptions);

  const bounds = options.limits ?? {};
  // Shared by every front-end thread: one bound on the bodies being received.
  const receivingBytes = sharedReceivingCounter();
  const databaseId = options.databaseId ?? null;
  const front = new HttpFrontEnd({ mode, limits: bounds, requestLog, receivingBytes, databaseId });
  // Several threads share the port (SO_REUSEPORT): the first binds it under the port's lock.
  const port = httpThreads > 1
    ? await bindSharedPort(host, requestedPort, (chosen) => front.listen(host, chosen, true))
    : await front.listen(host, requestedPort);
  let writer: WriterThread | null = null;
  let pool: ReaderPool | null = null;
  let fronts: FrontThreads | null = null;
  // The store as the main thread sees it (inline reads, /v2/explain): attached once, and
  // again after a follower swapped the buffers (one topology reader slot per attach).
  let mainShared: StoreShared | null = null;
  // Writer servers run cheap reads on the uWS threads (bounded plans under a work cap, inline-reads.ts);
  // reader servers swap stores under their followers, so they keep the pool path.
  const inline = mode === 'writer' && (options.inlineReads ?? true);
  let mainStore: Store | null = null;
  let mainStoreShared: StoreShared | null = null;
  const mainThreadStore = (): Store => {
    if (mainStore === null || mainStoreShared !== mainShared) {
      mainStore = Store.attach(mainShared!);
      mainStoreShared = mainShared;
    }
    return mainStore;
  };
  try {
    // A reader server's follower may swap its store before the pool is up: the pool starts
    // on the buffers current then and catches up with later swaps below.
    let onSwap = (_shared: StoreShared): void => undefined;
    writer = await WriterThread.start({
      queryTimeoutMs, queryMemoryBytes, onFatal, diskPath, objectStorage,
      ...(options.snapshotWalBytes !== undefined ? { snapshotWalBytes: options.snapshotWalBytes } : {}),
      follow: mode === 'reader' ? { refreshMs } : null,
      onSwap: (shared) => onSwap(shared),
      onHealth: (health) => {
        front.storageReady = health.ready;
        fronts?.health(health.ready);
      },
      limits: bounds,
    });
    front.storageReady = writer.health.ready;
    const startShared = writer.shared;
    pool = await ReaderPool.start({
      shared: startShared, threads: readers, dispatch: readDispatch, queryTimeoutMs, queryMemoryBytes, forward: routedTo('writer', writer),
      role: mode === 'reader' ? 'replica' : 'reader', limits: bounds,
    });
    const readerPool = pool;
    onSwap = (shared) => {
      readerPool.swapStore(shared);
      fronts?.swapStore(shared);
      mainShared = shared;
    };
    mainShared = writer.shared;
    if (writer.shared !== startShared) readerPool.swapStore(writer.shared);
    if (httpThreads > 1) {
      const frontShared = writer.shared;
      const started = await FrontThreads.start({
        threads: httpThreads - 1, shared: frontShared, host, port, mode, inlineReads: inline,
        queryTimeoutMs, queryMemoryBytes, receivingBytes, storageReady: front.storageReady, databaseId,
        limits: bounds.receivingBodyBytesMax !== undefined ? { receivingBodyBytesMax: bounds.receivingBodyBytesMax } : {},
        log: logOptions, pool: routedTo('pool', pool), writer: routedTo('writer', writer), onFatal,
      });
      fronts = started;
      // A swap or a health change while they started reached no thread yet.
      if (mainShared !== frontShared) started.swapStore(mainShared);
      started.health(front.storageReady);
    }
  } catch (err) {
    front.stopAccepting();
    front.closeAllSockets();
    await fronts?.close();
    await pool?.close();
    await writer?.close();
    throw new Error(`svcdb failed to start: ${describeError(err)}`);
  }
  const toPool = routedTo('pool', pool);
  const toWriter = routedTo('writer', writer);
  const reads = inline ? routedTo('inline', new InlineReads(mainThreadStore(), toPool, toWriter, { queryTimeoutMs, queryMemoryBytes })) : toPool;
  front.attach({ readers: reads, writer: toWriter }, explainer(mainThreadStore));

  const startedPool = pool;
  const startedWriter = writer;
  const startedFronts = fronts;
  // GET /metrics on any front-end thread: this thread's gauges and process metrics, and every
  // front-end thread's query counts, merged (src/metrics/).
  const renderMetrics = metricsRenderer();
  const serverMetrics = async (): Promise<string> => {
    const store = mainThreadStore();
    return renderMetrics([
      [
        sampledJson('gauge', 'svc_reader_queue_requests', 'Requests waiting for a reader thread', startedPool.queued),
        sampledJson('gauge', 'svc_reader_tasks_in_flight', 'Read tasks handed to reader threads and not answered yet', startedPool.tasksInFlight),
        sampledJson('gauge', 'svc_reader_threads', 'Reader threads alive or starting (--readers when all is well)', startedPool.threadsAlive),
        sampledJson('counter', 'svc_reader_pool_restarts_total', 'New sets of reader threads started because threads were gone and not replaced', startedPool.restarts.done),
        sampledJson('counter', 'svc_reads_answered_overdue_total', 'Reads the reader pool answered query_deadline_exceeded itself, past their deadline + grace', startedPool.answeredOverdue),
        sampledJson('gauge', 'svc_writer_pending_requests', 'Requests sent to the writer thread and not answered yet', startedWriter.pendingRequests),
        sampledJson('counter', 'svc_writer_requests_answered_overdue_total', 'Writer requests answered query_deadline_exceeded before they started, past their deadline + grace (they never run)', startedWriter.answeredOverdue),
        sampledJson('gauge', 'svc_ready', '1 while the server answers /readyz with 200', front.ready ? 1 : 0),
        // A reader server's epoch against its writer's is how far it lags (in write batches).
        sampledJson('gauge', 'svc_store_visible_epoch', 'The newest committed (and, on durable storage, durable) write batch reads see', store.visibleEpoch()),
        sampledJson('gauge', 'svc_store_node_slots', 'Node slots ever allocated (an upper bound on the node count)', store.nodeSlots()),
        sampledJson('gauge', 'svc_store_edge_slots', 'Edge slots ever allocated (an upper bound on the edge count)', store.edgeSlots()),
        sampledJson('gauge', 'svc_store_property_heap_bytes', 'Property heap in use, reclaimable space included; writes fail with storage_error when it would pass limits.propertyHeapBytesMax', store.propertyHeapBytes()),
        sampledJson('gauge', 'svc_store_property_heap_reclaimable_bytes', 'Space of property versions no read can reach any more, which writes reuse before the heap grows (as of the last write batch)', store.propertyHeapReclaimableBytes()),
        sampledJson('gauge', 'svc_store_adjacency_heap_bytes', 'Adjacency memory in use, free blocks included; writes fail with storage_error at limits.topologyWordsMax words', store.adjacencyHeapBytes()),
      ],
      front.metrics.toJson(),
      ...(startedFronts === null ? [] : await startedFronts.collectMetrics()),
    ]);
  };
  front.metricsSource = serverMetrics;
  if (startedFronts !== null) startedFronts.serverMetrics = serverMetrics;
  // This thread's heap grows with its per-request garbage under load: given back when idle.
  const idleTrim = trimHeapWhenIdle();
  let closing: Promise<void> | null = null;
  const shutdown = async (): Promise<void> => {
    idleTrim.stop();
    front.stopAccepting();
    // The other threads' relayed queries still need the pool and the writer until they drained.
    await Promise.all([front.drained(drainTimeoutMs), startedFronts?.stopAccepting(drainTimeoutMs)]);
    front.closeAllSockets();
    await startedFronts?.close();
    await startedPool.close();
    await startedWriter.close();
    await requestLog?.flush();
    if (startedWriter.closeProblem !== null) throw new Error(`the stop was not clean: ${startedWriter.closeProblem}`);
  };
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    host,
    port,
    readers,
    httpThreads,
    readDispatch,
    storage: objectStorage ? `s3 ${objectStorage.uri}` : diskPath ? `disk ${diskPath}` : 'memory',
    mode,
    recovery: startedWriter.recovery,
    close: () => (closing ??= shutdown()),
  };
}


