// The reader pool (ARCHITECTURE.md §3): Piscina threads that decode, plan, execute and
// serialize requests against a shared-memory snapshot.
//
// Why requests are coalesced (notes/measured.md, this 2-core machine): a Piscina task
// costs ~22 us of CPU per hop, and one task per HTTP request cuts throughput to 1/4 of
// bare uWS. So the main thread does not hand requests to Piscina one by one:
//
//   - It keeps its own FIFO of complete requests and counts tasks in flight.
//   - At most one task per worker thread is in flight, plus (with several threads) one spare
//     costly request (a search or a read past the inline work cap: it runs alone) waiting in
//     a busy thread's port, so that thread does not idle between two of them. When a request
//     arrives and a thread is idle, it goes out at once as a task of one: at low load a
//     read costs exactly one hop, no timer, no waiting for company.
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
// `dispatch: 'per-request'` turns coalescing off (a task of one request each, from the
// same FIFO) so benchmarks can show the difference.
//
// Bounds (limits.ts): the FIFO holds at most readerQueueRequestsMax requests and
// readerQueueBodyBytesMax body bytes; a request past either is shed (503, queue-bound.ts).
// Piscina's own queue stays empty: at most one task per thread, and one spare, are ever handed to it.
//
// Deadlines: each reader cuts its query at the deadline cooperatively (src/query-guard.ts, a
// check at most ~1 ms of work apart). What it cannot cut is time it does not run: a major
// garbage collection of a heavy query's working set (100-180 ms on this 2-core machine
// under the query torture), or a spare task waiting in the port behind a running one. So
// the pool also watches the clock: a read still unanswered limits.deadlineAnswerGraceMs after
// its deadline, queued or running, is answered `500 query_deadline_exceeded` here, and
// whatever its reader answers later is dropped (a write the reader would forward to the
// writer is then never run: the writer skips a settled job). One timer, armed for the
// earliest such moment; tasks in flight are at most threads + 1.
//
// A thread that dies (heap limit, a bug) is replaced by Piscina (minThreads = threads) and
// the task's promise rejects. The requests of a dead batch are collateral: each is retried
// once, alone (reads change nothing; a batch's bodies are sent as copies, so the main
// thread still has them). A request that fails alone answers 500 internal_error.
import assert from 'node:assert/strict';
import { Piscina } from 'piscina';
import { limits, type LimitOverrides } from '../limits.js';
import { BUILD_IDENTITY } from '../build-identity.js';
import type { StoreShared } from '../store/store.js';
import { Topology } from '../store/topology.js';
import { TextMemory } from '../text/memory.js';
import {
  bodyToTransfer, describeError, ownedBody, encodeFlags, failJob, FORWARD_TO_WRITER, isReaderLoaded, isReaderSlots, type ClaimedSlots, type QueryJob, type ReaderSlots, type QuerySink, type ReadTaskResult, type SwappableReadTask,
} from './job.js';
import { QueueBound, shed } from './queue-bound.js';
import { SvcError } from '../protocol/errors.js';
import { DeadlineTimer, OverdueAnswers } from './deadline-watch.js';
import type { ReaderWorkerData } from './reader-worker.js';
import { monotonicMs } from '../clock.js';

export type ReadDispatch = 'coalesce' | 'per-request';

/** A task handed to a thread: its requests and when the pool answers them itself if still unanswered. */
interface RunningTask {
  readonly jobs: QueryJob[];
  /** monotonicMs() past which its unanswered requests are answered here (Infinity: none left to watch). */
  answerByMs: number;
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
  /** Lower bounds than limits.ts (tests). */
  limits?: LimitOverrides<'readerQueueRequestsMax' | 'readerQueueBodyBytesMax' | 'readerThreadHeapMbMax' | 'deadlineAnswerGraceMs' | 'readerRestartDelayMsMin' | 'readerRestartDelayMsMax'>;
}

const START_TIMEOUT_MS_DEFAULT = 30_000;

type ThreadPool = Piscina<SwappableReadTask, ReadTaskResult>;

/** What starting threads takes besides the store (the pool keeps no reference to a store swapped out). */
type StartOptions = Omit<ReaderPoolOptions, 'shared'>;

/** Reader threads being started: `loaded` settles as launchThreads says; cancel() ends them. */
interface Launch {
  readonly pool: ThreadPool;
  /** The object Piscina clones for each thread it starts, replacements included (swapStore updates it). */
  readonly workerData: ReaderWorkerData;
  readonly loaded: Promise<ThreadPool>;
  cancel(): Promise<void>;
}

/** Where a launch tells of the reader slots its threads claimed (ReaderPool.slotsClaimed). */
interface ThreadSlots {
  /** A thread claimed slots (loading, or attaching to a swapped store): those of the start once it succeeded. */
  claimed(slots: ReaderSlots): void;
  /** The start failed and its threads have exited: these had loaded (their slots are free to go). */
  gone(threads: readonly ReaderSlots[]): void;
}

/**
 * A Piscina pool of options.threads reader threads attached to `shared` (store swap
 * `generation`): `loaded` resolves
 * once every thread has loaded and attached, and rejects with the first failure (`what`:
 * its cause) after destroying the pool. `slots` hears of every thread that loads in it for
 * its life, with the reader slots it claimed.
 */
function launchThreads(options: StartOptions, shared: StoreShared, generation: number, what: string, slots: ThreadSlots): Launch {
  const workerData: ReaderWorkerData = {
    shared, role: options.role ?? 'reader', queryTimeoutMs: options.queryTimeoutMs, queryMemoryBytes: options.queryMemoryBytes, buildIdentity: BUILD_IDENTITY, generation,
  };
  const pool: ThreadPool = new Piscina<SwappableReadTask, ReadTaskResult>({
    // Not reader-worker.js itself: see reader-worker-entry.cts.
    filename: new URL('./reader-worker-entry.cjs', import.meta.url).href,
    minThreads: options.threads,
    maxThreads: options.threads,
    // Fixed size: never retire an idle thread (it would re-attach on the next burst).
    idleTimeout: Number.POSITIVE_INFINITY,
    // A second task goes to a thread only as the pool's one spare costly request (hasRoom):
    // it waits in the thread's port, so the thread starts it the moment the first ends.
    concurrentTasksPerWorker: 2,
    resourceLimits: { maxOldGenerationSizeMb: options.limits?.readerThreadHeapMbMax ?? limits.readerThreadHeapMbMax, maxYoungGenerationSizeMb: limits.workerThreadYoungGenerationMb },
    workerData,
  });
  const startTimeoutMs = options.startTimeoutMs ?? START_TIMEOUT_MS_DEFAULT;
  // Threads that loaded before the start succeeded (or failed): told of once it did.
  let started = false;
  const early: ReaderSlots[] = [];
  pool.on('message', (message: unknown) => {
    if (!isReaderSlots(message)) return;
    if (started) slots.claimed(message);
    else early.push(message);
  });
  let fail: (err: Error) => Promise<void> = async () => undefined;
  const loaded = new Promise<ThreadPool>((resolve, reject) => {
    let loaded = 0;
    fail = (err: Error): Promise<void> => {
      cleanup();
      // The other threads may fail the same way meanwhile: their errors are this one's.
      pool.on('error', () => undefined);
      reject(err);
      // destroy() settles once the threads exited: only then may their slots go to others.
      return pool.destroy().finally(() => slots.gone(early.splice(0)));
    };
    const timer = setTimeout(() => {
      void fail(new Error(`${what}: ${options.threads - loaded} of ${options.threads} threads did not start within ${startTimeoutMs} ms`));
    }, startTimeoutMs);
    // Each thread posts READER_LOADED once reader-worker.js is loaded and attached (Piscina
    // reports its first threads as created before that; a thread whose code fails to load
    // ends with the error: onError).
    const onLoaded = (message: unknown): void => {
      if (!isReaderLoaded(message)) return;
      loaded++;
      if (loaded < options.threads) return;
      cleanup();
      started = true;
      for (const thread of early.splice(0)) slots.claimed(thread);
      resolve(pool);
    };
    const onError = (err: unknown): void => void fail(new Error(`${what}: ${describeError(err)}`));
    const cleanup = (): void => {
      clearTimeout(timer);
      pool.off('message', onLoaded);
      pool.off('error', onError);
    };
    pool.on('message', onLoaded);
    pool.on('error', onError);
  });
  return { pool, workerData, loaded, cancel: () => fail(new Error(`${what}: cancelled`)) };
}

/** A Piscina pool of reader threads, and what the reader pool keeps of it. */
interface Threads {
  readonly pool: ThreadPool;
  /** What Piscina clones for each thread it starts in it: its store follows swapStore. */
  readonly workerData: ReaderWorkerData;
  /** Tasks sent to it and not settled yet. */
  tasks: number;
  /**
   * Once replaced by a new pool: the IDs its threads had then. Destroying a pool drops its
   * threads from `pool.threads` before they exit, so until its destroy() settled (it waits
   * for their exit) those threads count as alive: their reader slots stay theirs.
   */
  retiredThreadIds: number[] | null;
  destroyed: boolean;
}

export class ReaderPool implements QuerySink {
  readonly threads: number;
  readonly dispatch: ReadDispatch;
  /** The threads tasks go to (replaced as a whole by startNewThreads); null: every thread is gone. */
  private active: Threads | null;
  /** Pools replaced or given up, destroyed once their tasks settled (retire). */
  private readonly retiring = new Set<Threads>();
  /** What starting a new pool needs, and how the last starts went (restartIfGone). */
  private readonly startOptions: StartOptions;
  private readonly restartDelayMsMin: number;
  private readonly restartDelayMsMax: number;
  private readonly restart = { timer: null as NodeJS.Timeout | null, launch: null as Launch | null, failures: 0, done: 0, lastFailure: null as string | null };
  private readonly forward: QuerySink;
  /** Complete requests waiting for an idle thread. */
  private queue: QueryJob[] = [];
  private readonly queueBound: QueueBound;
  /** Requests of a batch whose thread died, each to run again alone (before the queue). */
  private retries: QueryJob[] = [];
  /** Requests per task: limits.readBatchRequestsMax, or 1 per request. */
  private readonly batchRequestsMax: number;
  /** Tasks sent and not yet returned (or failed). */
  private busy = 0;
  /** Those tasks (the deadline watch looks at them). */
  private readonly running = new Set<RunningTask>();
  /** When a read is overdue, and the answer the pool then gives it itself. */
  private readonly overdue: OverdueAnswers;
  /** The deadline watch's timer. */
  private readonly overdueTimer = new DeadlineTimer(() => this.answerOverdue());
  /** Each reader thread's slots in the current store (threadId -> slots), as its messages and tasks report them. */
  private readonly slots = new Map<number, ClaimedSlots>();
  private closed = false;
  /** Store swaps so far, and the current store once there was one. */
  private generation = 0;
  private current: StoreShared;

  private constructor(launch: Launch, options: ReaderPoolOptions) {
    const { shared, ...startOptions } = options;
    this.startOptions = startOptions;
    this.restartDelayMsMin = options.limits?.readerRestartDelayMsMin ?? limits.readerRestartDelayMsMin;
    this.restartDelayMsMax = options.limits?.readerRestartDelayMsMax ?? limits.readerRestartDelayMsMax;
    this.threads = options.threads;
    this.dispatch = options.dispatch;
    this.forward = options.forward;
    this.current = shared;
    this.queueBound = new QueueBound(
      'the reader queue',
      options.limits?.readerQueueRequestsMax ?? limits.readerQueueRequestsMax,
      options.limits?.readerQueueBodyBytesMax ?? limits.readerQueueBodyBytesMax,
    );
    this.batchRequestsMax = options.dispatch === 'per-request' ? 1 : limits.readBatchRequestsMax;
    this.overdue = new OverdueAnswers(options.queryTimeoutMs, options.limits?.deadlineAnswerGraceMs);
    this.active = this.watched(launch);
  }

  /** Start the threads; resolves once every one has attached to the store. */
  static async start(options: ReaderPoolOptions): Promise<ReaderPool> {
    if (!Number.isInteger(options.threads) || options.threads < 1) {
      throw new Error(`reader threads must be a positive integer, got ${options.threads}`);
    }
    // The first threads load before the pool exists: what they claimed is recorded once it does.
    let readers: ReaderPool | null = null;
    const first: ReaderSlots[] = [];
    const slots: ThreadSlots = {
      claimed: (thread) => (readers === null ? first.push(thread) : readers.slotsClaimed(thread)),
      gone: () => undefined, // the server does not start
    };
    // Not `options` itself: what launchThreads keeps for the pool's life must not hold a store
    // that a swap replaces.
    const { shared, ...startOptions } = options;
    const launch = launchThreads(startOptions, shared, 0, 'reader pool failed to start', slots);
    await launch.loaded;
    readers = new ReaderPool(launch, options);
    for (const thread of first) readers.slotsClaimed(thread);
    return readers;
  }

  /** A pool's record, listening to its threads: deaths between tasks, replacements, threads gone. */
  private watched({ pool, workerData }: Launch): Threads {
    const threads: Threads = { pool, workerData, tasks: 0, retiredThreadIds: null, destroyed: false };
    pool.on('error', (err: unknown) => {
      // A thread died between tasks (a death during a task rejects the task instead).
      process.stderr.write(`svcdb: reader thread failed: ${describeError(err)}\n`);
    });
    // A replacement starts once Piscina has dropped the dead thread: free the dead one's slot.
    pool.on('workerCreate', () => this.freeDeadReaderSlots());
    // Piscina starts a replacement right after it drops a thread, if it still does.
    pool.on('workerDestroy', () => setImmediate(() => {
      if (this.active === threads) this.restartIfGone();
      // A retired pool that lost its last thread (it replaces none): what waits in its queue
      // would never run; destroying it fails those tasks, which are then retried.
      else if (threads.retiredThreadIds !== null && pool.threads.length === 0) this.destroyRetired(threads);
    }));
    return threads;
  }

  /**
   * Threads that are gone: Piscina replaces a thread that dies only until one replacement
   * fails while loading (its code, or the install check of build-identity.ts); from then on
   * that pool replaces none, and once its last thread died every read would wait in it
   * until its deadline. So when the pool has fewer threads than it should, a whole new pool
   * is started here, after limits.readerRestartDelayMsMin and twice as long after each
   * start that fails, up to limits.readerRestartDelayMsMax. The new pool takes every task
   * from its start on; the old one is destroyed once its tasks settled. A pool left with no
   * thread is given up at once: tasks waiting in its queue for a thread that will never
   * come are failed, so retried (their bodies never left), and reads are answered 503
   * server_overloaded at once until the new pool is up (run()).
   */
  private restartIfGone(): void {
    const active = this.active;
    if (this.closed || (active !== null && active.pool.threads.length >= this.threads)) return;
    if (active !== null && active.pool.threads.length === 0) {
      this.active = null;
      this.retire(active);
    }
    if (this.restart.timer !== null || this.restart.launch !== null) return;
    const delayMs = Math.min(this.restartDelayMsMax, this.restartDelayMsMin * 2 ** this.restart.failures);
    this.restart.timer = setTimeout(() => {
      this.restart.timer = null;
      void this.startNewThreads();
    }, delayMs);
  }

  private async startNewThreads(): Promise<void> {
    const alive = this.threadsAlive;
    if (this.closed || alive >= this.threads) return;
    process.stderr.write(`svcdb: ${this.threads - alive} of ${this.threads} reader threads are gone and not replaced; starting a new pool of ${this.threads}\n`);
    const generation = this.generation;
    const launch = launchThreads(this.startOptions, this.current, generation, 'reader threads failed to start', {
      claimed: (thread) => this.slotsClaimed(thread),
      gone: (threads) => this.freeSlotsOf(threads, generation),
    });
    this.restart.launch = launch;
    let fresh: ThreadPool;
    try {
      fresh = await launch.loaded;
    } catch (err) {
      this.restart.launch = null;
      if (this.closed) return;
      this.restart.failures++;
      this.restart.lastFailure = describeError(err);
      process.stderr.write(`svcdb: ${this.restart.lastFailure} (start ${this.restart.failures} in a row to fail; the next is tried later)\n`);
      this.restartIfGone();
      return;
    }
    this.restart.launch = null;
    if (this.closed) {
      await fresh.destroy();
      return;
    }
    const old = this.active;
    this.active = this.watched(launch);
    this.restart.failures = 0;
    this.restart.lastFailure = null;
    this.restart.done++;
    if (old !== null) this.retire(old);
    this.pump();
  }

  /**
   * A pool tasks no longer go to: destroyed once its tasks settled (not Piscina's close(),
   * which can end threads with tasks still running). A pool without threads is destroyed
   * now: its tasks are waiting in its queue, and destroying fails them.
   */
  private retire(threads: Threads): void {
    threads.retiredThreadIds = threads.pool.threads.map((worker) => worker.threadId);
    this.retiring.add(threads);
    if (threads.tasks === 0 || threads.retiredThreadIds.length === 0) this.destroyRetired(threads);
  }

  private destroyRetired(threads: Threads): void {
    if (threads.destroyed) return;
    threads.destroyed = true;
    void threads.pool.destroy().finally(() => {
      this.retiring.delete(threads);
      this.freeDeadReaderSlots();
    });
  }

  /** Whole pools started because threads were gone (restartIfGone), and the last start's failure. */
  get restarts(): { done: number; failures: number; lastFailure: string | null } {
    return { done: this.restart.done, failures: this.restart.failures, lastFailure: this.restart.lastFailure };
  }

  /** Requests waiting for a thread. */
  get queued(): number {
    return this.queue.length;
  }

  /** Tasks handed to the threads and not returned yet. */
  get tasksInFlight(): number {
    return this.busy;
  }

  /** Threads alive or starting (Piscina replaces one that died). */
  get threadsAlive(): number {
    return this.active === null ? 0 : this.active.pool.threads.length;
  }

  submit(job: QueryJob): void {
    if (this.closed) {
      failJob(job, 'reader pool is closed');
      return;
    }
    // A request that leaves at once (a thread is idle) never waits: only the FIFO is bounded.
    if (this.hasRoom(job) && this.queue.length === 0 && this.retries.length === 0) {
      this.run([job]);
      return;
    }
    if (!this.queueBound.admit(job, job.body.byteLength)) return;
    this.queue.push(job);
    this.overdueTimer.armBy(this.overdue.atMs(job));
    if (this.hasRoom(job)) this.pump();
  }

  /** Reads this pool answered itself past their deadline (health and tests). */
  get answeredOverdue(): number {
    return this.overdue.answered;
  }

  /**
   * Answer every read past its deadline + grace that nothing answered yet: in tasks in
   * flight and in the queues (they never run then: takeBatch drops answered requests).
   * Then arm the watch for the next such moment.
   */
  private answerOverdue(): void {
    const now = monotonicMs();
    let next = Number.POSITIVE_INFINITY;
    for (const task of this.running) {
      if (task.answerByMs > now) {
        next = Math.min(next, task.answerByMs);
        continue;
      }
      task.answerByMs = Number.POSITIVE_INFINITY;
      for (const job of task.jobs) this.overdue.answer(job);
    }
    for (const job of this.retries) {
      const by = this.overdue.atMs(job);
      if (by <= now) this.overdue.answer(job);
      else next = Math.min(next, by);
    }
    // The FIFO is in arrival order (up to relays from other HTTP threads): the first request
    // not due yet ends the scan.
    for (const job of this.queue) {
      if (job.responder.settled) continue;
      const by = this.overdue.atMs(job);
      if (by > now) {
        next = Math.min(next, by);
        break;
      }
      this.overdue.answer(job);
    }
    this.overdueTimer.armBy(next);
  }

  /**
   * Whether `job` may go out now: a thread is idle, or it is costly (it runs alone), there
   * are several threads, and no thread holds a second task yet. That thread takes it the
   * moment its task ends, instead of idling while the answer travels back here and the next
   * task out (a round trip through two event loops, ~20 % of a 300 us search measured).
   * One spare task in all, not one per thread: a request waiting in the FIFO then still
   * finds a thread with a single task ahead of it, so no wait grows past one task's deadline;
   * and the spare task's own deadline counts from its arrival, as in the FIFO. Cheap
   * requests wait for an idle thread, so they still leave in batches.
   */
  private hasRoom(job: QueryJob | undefined): boolean {
    return this.busy < this.threads || (job?.costly === true && this.threads > 1 && this.busy < this.threads + 1);
  }

  /**
   * Serve every read that starts from now on from these buffers (a follower reloaded its
   * store). Tasks already running finish on the old store, which stays valid.
   */
  swapStore(shared: StoreShared): void {
    if (shared === this.current) return;
    this.generation++;
    this.current = shared;
    // Threads Piscina starts from now on (replacements) attach this store as they load, and
    // the pool keeps no reference to the old one (Piscina keeps the object, not a copy;
    // were it a copy, they would attach the old store and move to this one on their first task).
    for (const workerData of [this.active?.workerData, this.restart.launch?.workerData]) {
      if (workerData === undefined) continue;
      workerData.shared = shared;
      workerData.generation = this.generation;
    }
    this.slots.clear(); // slots of the old store no longer matter
  }

  /**
   * A thread claimed these slots in the store of `slots.generation`, as it loaded or attached
   * (launchThreads), before reading there. Recorded here, not only from its tasks' results,
   * so that a thread that dies in its first read of a store (a killer query sent again and
   * again) leaves no slot behind; freed at once if the thread is gone already.
   */
  slotsClaimed(slots: ReaderSlots): void {
    if (slots.generation !== this.generation) return; // a store swapped out since: its slots no longer matter
    this.recordSlots(slots);
    this.freeDeadReaderSlots();
  }

  /** A thread's slots in the current store, as reported (a slot not claimed yet keeps what was known). */
  private recordSlots(thread: ClaimedSlots): void {
    const known = this.slots.get(thread.threadId);
    const readerSlot = thread.readerSlot >= 0 ? thread.readerSlot : known?.readerSlot ?? -1;
    const textSlot = thread.textSlot >= 0 ? thread.textSlot : known?.textSlot ?? -1;
    if (readerSlot < 0 && textSlot < 0) return;
    if (known?.readerSlot === readerSlot && known.textSlot === textSlot) return; // the usual report: nothing new
    this.slots.set(thread.threadId, { threadId: thread.threadId, readerSlot, textSlot });
  }

  /** Give a thread's slots in the current store back: the thread is gone. */
  private freeSlots(thread: ClaimedSlots): void {
    if (thread.readerSlot >= 0) Topology.attach(this.current.topology).freeDeadReaderSlot(thread.readerSlot);
    if (thread.textSlot >= 0) TextMemory.attach(this.current.texts).freeDeadReaderSlot(thread.textSlot);
  }

  /** The slots of threads of a start that failed, which have exited (in the store of `generation`). */
  private freeSlotsOf(threads: readonly ReaderSlots[], generation: number): void {
    if (generation !== this.generation) return;
    for (const thread of threads) this.freeSlots(thread);
  }

  /**
   * Free the topology and text reader slots of threads that are gone. A thread that died
   * inside a read never ends it, and its slot would keep superseded adjacency blocks (or
   * text blocks) from being reused until a restart (architecture §3); text slots are held
   * for a thread's life, so each replaced thread would also keep one.
   */
  freeDeadReaderSlots(): void {
    // Closing: destroy() drops threads from their pools before they exited, and no read of
    // this store follows anyway.
    if (this.closed || this.slots.size === 0) return;
    const alive = new Set<number>();
    for (const threads of [this.active, ...this.retiring]) {
      if (threads === null) continue;
      for (const worker of threads.pool.threads) alive.add(worker.threadId);
      for (const id of threads.retiredThreadIds ?? []) alive.add(id);
    }
    // A set being started (its threads are told of once it started: restartIfGone).
    for (const worker of this.restart.launch?.pool.threads ?? []) alive.add(worker.threadId);
    for (const [threadId, slots] of this.slots) {
      if (alive.has(threadId)) continue;
      this.freeSlots(slots);
      this.slots.delete(threadId);
    }
  }

  /** Stop the threads. Queued requests (normally none: the server drains first) get a 500. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.overdueTimer.close();
    if (this.restart.timer !== null) clearTimeout(this.restart.timer);
    const launch = this.restart.launch;
    const waiting = [...this.retries, ...this.queue];
    this.retries = [];
    this.queue = [];
    this.queueBound.clear();
    for (const job of waiting) failJob(job, 'server is shutting down');
    const pools = [this.active, ...this.retiring].flatMap((threads) => (threads === null ? [] : [threads.pool]));
    await Promise.all([...pools.map((pool) => pool.destroy()), launch?.cancel()]);
  }

  /** Send waiting requests while a thread is idle: retries alone, then batches from the FIFO. */
  private pump(): void {
    while (this.hasRoom(this.retries.length > 0 ? undefined : this.queue[0])) {
      const retry = this.retries.shift();
      if (retry !== undefined) {
        if (!retry.responder.settled) this.run([retry]);
        continue;
      }
      if (this.queue.length === 0) return;
      const jobs = this.takeBatch();
      if (jobs.length > 0) this.run(jobs);
    }
  }

  /**
   * The next batch from the FIFO: up to batchRequestsMax requests and
   * limits.readBatchBodyBytesMax body bytes (at least one request, however large).
   * A request known to be costly (QueryJob.costly) goes alone and ends a batch: the answers
   * of a batch come back together, so a cheap read batched after it would wait for it.
   * Clients that went away while queued are dropped: their reads don't run.
   */
  private takeBatch(): QueryJob[] {
    const queue = this.queue;
    let taken = 0;
    let takenBytes = 0;
    while (taken < queue.length && taken < this.batchRequestsMax) {
      const job = queue[taken]!;
      const bytes = job.body.byteLength;
      if (taken > 0 && (job.costly === true || takenBytes + bytes > limits.readBatchBodyBytesMax)) break;
      if (job.costly === true) {
        taken = 1;
        takenBytes = bytes;
        break;
      }
      taken++;
      takenBytes += bytes;
    }
    let jobs: QueryJob[];
    if (taken === queue.length) {
      jobs = queue;
      this.queue = [];
    } else {
      jobs = queue.splice(0, taken);
    }
    for (const job of jobs) this.queueBound.remove(job.body.byteLength);
    if (jobs.some((job) => job.responder.settled)) jobs = jobs.filter((job) => !job.responder.settled);
    return jobs;
  }

  private run(jobs: QueryJob[]): void {
    const active = this.active;
    if (active === null) {
      // Every thread is gone and Piscina starts none (restartIfGone): a task would wait in
      // its queue until the deadline. Answer now; nothing of the request ran.
      const err = new SvcError('server_overloaded', 'server overloaded: no reader thread is running (new ones are being started; the server log says why they stopped); retry later');
      for (const job of jobs) shed(job, err);
      return;
    }
    const count = jobs.length;
    const bodies = new Array<Uint8Array>(count);
    const flags = new Uint8Array(count);
    const receivedAtMs = new Float64Array(count);
    // A request alone moves its body to the thread: free, where copying a 16 MiB body is
    // not (each body owns its ArrayBuffer: http.ts allocates one per request). A batch's
    // bodies are copied (at most limits.readBatchBodyBytesMax, or one body), so they
    // survive a thread that dies and can be retried.
    const transferList: ArrayBuffer[] = count === 1 ? [bodyToTransfer(jobs[0]!)] : [];
    for (let i = 0; i < count; i++) {
      const job = jobs[i]!;
      bodies[i] = ownedBody(job);
      flags[i] = encodeFlags(job.flags);
      receivedAtMs[i] = job.receivedAtMs ?? 0;
    }
    this.busy++;
    // The reader gives every request of a task the task's earliest deadline; so does the watch.
    let answerByMs = Number.POSITIVE_INFINITY;
    for (const job of jobs) answerByMs = Math.min(answerByMs, this.overdue.atMs(job));
    const running: RunningTask = { jobs, answerByMs };
    this.running.add(running);
    this.overdueTimer.armBy(answerByMs);
    const generation = this.generation;
    const task: SwappableReadTask = generation === 0 ? { bodies, flags, receivedAtMs } : { bodies, flags, receivedAtMs, generation, shared: this.current };
    active.tasks++;
    active.pool.run(task, { transferList }).then(
      (result) => {
        this.settled(active);
        this.running.delete(running);
        this.complete(jobs, result, generation);
      },
      (err: unknown) => {
        this.settled(active);
        this.running.delete(running);
        this.failed(jobs, err, active !== this.active);
      },
    );
  }

  /** A task of `threads` settled: the last one of a retired pool lets it be destroyed. */
  private settled(threads: Threads): void {
    threads.tasks--;
    if (threads.tasks === 0 && threads.retiredThreadIds !== null) this.destroyRetired(threads);
  }

  private complete(jobs: QueryJob[], result: ReadTaskResult, generation: number): void {
    this.busy--;
    // Refill the idle thread before writing answers, so it works while we write.
    this.pump();
    const { index, bytes, returned } = result;
    // A slot in the store of now only: one in a store swapped out since is of no concern.
    if (generation === this.generation) this.recordSlots(result);
    assert.equal(index.length, 2 * jobs.length, 'reader task answered a different number of requests');
    let start = 0;
    let nextReturned = 0;
    for (let i = 0; i < jobs.length; i++) {
      const job = jobs[i]!;
      const status = index[2 * i]!;
      const end = index[2 * i + 1]!;
      if (status === FORWARD_TO_WRITER) {
        job.body = returned[nextReturned++]!; // the body came back with the verdict
        // Answered already (past its deadline, or its client went away): never run it.
        if (!job.responder.settled) this.forward.submit(job);
      } else {
        job.responder.respond(status, bytes.subarray(start, end));
      }
      start = end;
    }
    assert.equal(nextReturned, returned.length, 'reader task returned bodies it did not forward');
  }

  /**
   * The task rejected: its thread died (Piscina starts a replacement) or the task threw.
   * A batch's requests are each retried alone; a request that failed alone gets a 500
   * that says nothing of the cause (the log has it). A task of a pool replaced since it
   * was sent (startNewThreads) is retried too: it may have waited in that pool's queue for
   * a thread that never came, and closing the pool failed it.
   */
  private failed(jobs: QueryJob[], err: unknown, replacedPool: boolean): void {
    this.busy--;
    this.freeDeadReaderSlots();
    if (this.closed) {
      for (const job of jobs) failJob(job, 'server is shutting down');
      return;
    }
    const detail = describeError(err);
    // A request alone moved its body to the thread; one that never left the queue of a pool
    // replaced or given up since still has it, and is retried.
    if (jobs.length === 1 && !(replacedPool && jobs[0]!.body.byteLength > 0)) {
      process.stderr.write(`svcdb: reader thread failed running one request alone (answered 500 internal_error): ${detail}\n`);
      failJob(jobs[0]!, 'a reader thread failed while running this request; see the server log');
    } else {
      const what = jobs.length === 1 ? 'one request of a pool given up or replaced since' : `a batch of ${jobs.length} requests`;
      process.stderr.write(`svcdb: reader thread failed running ${what} (each is retried alone): ${detail}\n`);
      for (const job of jobs) this.retries.push(job);
    }
    this.pump();
  }
}
