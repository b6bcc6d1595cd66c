// The reader pool (ARCHITECTURE.md §3): Piscina threads that decode, plan, execute and
// serialize requests against a shared-memory snapshot.
//
// Why requests are coalesced (notes/measured.md, this 2-core machine): a Piscina task
// costs ~22 us of CPU per hop, and one task per HTTP request cuts throughput to 1/4 of
// bare uWS. So the main thread does not hand requests to Piscina one by one:
//
//   - It keeps its own FIFO of complete requests and counts tasks in flight.
//   - At most one task per worker thread is in flight. When a request arrives and a
//     thread is idle, it goes out at once as a task of one: at low load a read costs
//     exactly one hop, no timer, no waiting for company.
//   - When every thread is busy, requests wait in the FIFO. The moment a task comes
//     back, everything that queued meanwhile (up to limits.readBatchRequestsMax) leaves
//     as ONE task. Under load the batch size grows by itself with the arrival rate, so
//     the per-task cost is shared by many requests; when load drops it shrinks to 1.
//   - Bodies travel as transferred ArrayBuffers (no copy); answers come back as one
//     transferred buffer per task (reader-worker.ts).
//
// The price: requests in one batch run one after the other on one thread, so a slow
// read delays the others of its batch (head-of-line blocking within a batch).
//
// `dispatch: 'per-request'` turns coalescing off (one Piscina task per request, Piscina's
// own queue) so benchmarks can show the difference.
import assert from 'node:assert/strict';
import { Piscina } from 'piscina';
import { limits } from '../limits.js';
import type { StoreShared } from '../store/store.js';
import {
  describeError, encodeFlags, failJob, FORWARD_TO_WRITER, type QueryJob, type QuerySink, type ReadTask, type ReadTaskResult,
} from './job.js';
import type { ReaderWorkerData } from './reader-worker.js';

export type ReadDispatch = 'coalesce' | 'per-request';

/**
 * A read task after the store was swapped (reader servers only): it carries the current
 * store, and a thread still on an older generation attaches to it before running the
 * requests. Until the first swap tasks carry nothing extra, so writer servers pay nothing.
 */
export interface SwappableReadTask extends ReadTask {
  generation?: number;
  shared?: StoreShared;
}

export interface ReaderPoolOptions {
  shared: StoreShared;
  threads: number;
  dispatch: ReadDispatch;
  /** Cooperative deadline per query. */
  queryTimeoutMs: number;
  /** Memory budget per query (bytes). */
  queryMemoryBytes: number;
  /** Where requests a reader may not run go (the writer thread). */
  forward: QuerySink;
  /** 'reader' (default) on a writer server; 'replica' on a read-only server (writes answer 503). */
  role?: ReaderWorkerData['role'];
  /** Give up if the threads are not up after this long. */
  startTimeoutMs?: number;
}

const START_TIMEOUT_MS_DEFAULT = 30_000;

export class ReaderPool implements QuerySink {
  readonly threads: number;
  readonly dispatch: ReadDispatch;
  private readonly pool: Piscina<SwappableReadTask, ReadTaskResult>;
  private readonly forward: QuerySink;
  /** Complete requests waiting for an idle thread (coalesce mode). */
  private queue: QueryJob[] = [];
  /** Tasks sent and not yet returned. */
  private busy = 0;
  private closed = false;
  /** Store swaps so far, and the current store once there was one. */
  private generation = 0;
  private current: StoreShared;

  private constructor(pool: Piscina<SwappableReadTask, ReadTaskResult>, options: ReaderPoolOptions) {
    this.pool = pool;
    this.threads = options.threads;
    this.dispatch = options.dispatch;
    this.forward = options.forward;
    this.current = options.shared;
  }

  /** Start the threads; resolves once every one has attached to the store. */
  static start(options: ReaderPoolOptions): Promise<ReaderPool> {
    if (!Number.isInteger(options.threads) || options.threads < 1) {
      return Promise.reject(new Error(`reader threads must be a positive integer, got ${options.threads}`));
    }
    const workerData: ReaderWorkerData = { shared: options.shared, role: options.role ?? 'reader', queryTimeoutMs: options.queryTimeoutMs, queryMemoryBytes: options.queryMemoryBytes };
    const pool = new Piscina<SwappableReadTask, ReadTaskResult>({
      filename: new URL('./reader-worker.js', import.meta.url).href,
      minThreads: options.threads,
      maxThreads: options.threads,
      // Fixed size: never retire an idle thread (it would re-attach on the next burst).
      idleTimeout: Number.POSITIVE_INFINITY,
      concurrentTasksPerWorker: 1,
      workerData,
    });
    const reader = new ReaderPool(pool, options);
    return new Promise((resolve, reject) => {
      let created = 0;
      const timer = setTimeout(() => {
        cleanup();
        void pool.destroy();
        reject(new Error(`reader pool: ${options.threads - created} of ${options.threads} threads did not start within ${options.startTimeoutMs ?? START_TIMEOUT_MS_DEFAULT} ms`));
      }, options.startTimeoutMs ?? START_TIMEOUT_MS_DEFAULT);
      // Piscina reports a worker once it has loaded reader-worker.js, i.e. attached.
      const onCreate = (): void => {
        created++;
        if (created < options.threads) return;
        cleanup();
        pool.on('error', (err: unknown) => {
          // A worker died; Piscina replaces it and its task's requests got a 500.
          process.stderr.write(`svcdb: reader thread failed: ${describeError(err)}\n`);
        });
        resolve(reader);
      };
      const onError = (err: unknown): void => {
        cleanup();
        void pool.destroy();
        reject(new Error(`reader pool failed to start: ${describeError(err)}`));
      };
      const cleanup = (): void => {
        clearTimeout(timer);
        pool.off('workerCreate', onCreate);
        pool.off('error', onError);
      };
      pool.on('workerCreate', onCreate);
      pool.on('error', onError);
    });
  }

  /** Requests waiting for a thread (coalesce mode). */
  get queued(): number {
    return this.queue.length;
  }

  submit(job: QueryJob): void {
    if (this.closed) {
      failJob(job, 'reader pool is closed');
      return;
    }
    if (this.dispatch === 'per-request') {
      this.run([job]);
      return;
    }
    this.queue.push(job);
    if (this.busy < this.threads) this.pump();
  }

  /**
   * Serve every read that starts from now on from these buffers (a follower reloaded its
   * store). Tasks already running finish on the old store, which stays valid.
   */
  swapStore(shared: StoreShared): void {
    if (shared === this.current) return;
    this.generation++;
    this.current = shared;
  }

  /** Stop the threads. Queued requests (normally none: the server drains first) get a 500. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const queue = this.queue;
    this.queue = [];
    for (const job of queue) failJob(job, 'server is shutting down');
    await this.pool.destroy();
  }

  /** Send queued requests while a thread is idle: all of them, up to the batch bound. */
  private pump(): void {
    while (this.busy < this.threads && this.queue.length > 0) {
      let jobs: QueryJob[];
      if (this.queue.length <= limits.readBatchRequestsMax) {
        jobs = this.queue;
        this.queue = [];
      } else {
        jobs = this.queue.splice(0, limits.readBatchRequestsMax);
      }
      // Clients that went away while queued: don't run their reads.
      if (jobs.some((job) => job.responder.settled)) jobs = jobs.filter((job) => !job.responder.settled);
      if (jobs.length > 0) this.run(jobs);
    }
  }

  private run(jobs: QueryJob[]): void {
    const count = jobs.length;
    const bodies = new Array<Uint8Array>(count);
    const flags = new Uint8Array(count);
    const transferList = new Array<ArrayBuffer>(count);
    for (let i = 0; i < count; i++) {
      const job = jobs[i]!;
      bodies[i] = job.body;
      flags[i] = encodeFlags(job.flags);
      // Each body owns its ArrayBuffer (http.ts allocates one per request): moving it is
      // free, copying a 16 MiB body is not.
      transferList[i] = job.body.buffer as ArrayBuffer;
    }
    this.busy++;
    const task: SwappableReadTask = this.generation === 0 ? { bodies, flags } : { bodies, flags, generation: this.generation, shared: this.current };
    this.pool.run(task, { transferList }).then(
      (result) => this.complete(jobs, result),
      (err: unknown) => this.failed(jobs, err),
    );
  }

  private complete(jobs: QueryJob[], result: ReadTaskResult): void {
    this.busy--;
    // Refill the idle thread before writing answers, so it works while we write.
    this.pump();
    const { index, bytes, returned } = result;
    assert.equal(index.length, 2 * jobs.length, 'reader task answered a different number of requests');
    let start = 0;
    let nextReturned = 0;
    for (let i = 0; i < jobs.length; i++) {
      const job = jobs[i]!;
      const status = index[2 * i]!;
      const end = index[2 * i + 1]!;
      if (status === FORWARD_TO_WRITER) {
        job.body = returned[nextReturned++]!; // the body came back with the verdict
        this.forward.submit(job);
      } else {
        job.responder.respond(status, bytes.subarray(start, end));
      }
      start = end;
    }
    assert.equal(nextReturned, returned.length, 'reader task returned bodies it did not forward');
  }

  private failed(jobs: QueryJob[], err: unknown): void {
    this.busy--;
    this.pump();
    const detail = `reader task failed: ${describeError(err)}`;
    for (const job of jobs) failJob(job, detail);
  }
}
