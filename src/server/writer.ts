// Main-thread side of the writer thread (writer-worker.ts): start it, get the store's
// shared buffers, send it jobs and route its answers back.
//
// The requests of one turn of the event loop go to the thread in one postMessage (sent
// from setImmediate, after uWS delivered what one poll returned): one message per request
// cost the HTTP thread ~16 % of its time under a write load (docs/benchmarks.md "Where a
// write's server CPU goes"). Each is answered on its own as soon as it commits. Jobs are
// tagged with an id and run in id order.
//
// Bounds (limits.ts): requests sent and not answered yet (waiting, running, or committed
// and waiting for durability) are at most writerPendingRequestsMax, with at most
// writerPendingBodyBytesMax body bytes; a request past either is shed (503) before it is
// sent, so a shed write never runs. The thread's heap is capped (writerThreadHeapMbMax).
//
// Deadlines: the writer runs requests in arrival order, so one behind a long batch waits
// (the batch is cut at its own deadline, but a rollback, a snapshot step or a long garbage
// collection runs past it). A request still unstarted limits.deadlineAnswerGraceMs after its
// deadline is answered `500 query_deadline_exceeded` here, and the writer passes over it:
// write-claims.ts decides, with one compare-and-swap, whether it starts or is answered.
// The writer itself refuses a write that starts past its deadline (exec/request.ts).
//
// If the thread dies, its unanswered requests split in two: those it never started
// (answered 500 internal_error: nothing happened) and those it had started (a write among
// them may have committed, and may even be durable: answered 409
// writer_fenced_commit_outcome_unknown, never as failed). Then onFatal stops the server;
// a restart recovers every durable write (memory storage loses everything, as at any stop).
import { Worker } from 'node:worker_threads';
import { limits, type LimitOverrides } from '../limits.js';
import { errorBody, SvcError } from '../protocol/errors.js';
import type { StoreShared } from '../store/store.js';
import type { RecoveryReport } from '../durability/disk-storage.js';
import type { StorageHealth } from '../durability/durable.js';
import type { ObjectStorageOptions } from '../durability/object-storage.js';
import { bodyToTransfer, encodeFlags, failJob, type QueryJob, type QuerySink } from './job.js';
import { QueueBound } from './queue-bound.js';
import { DeadlineTimer, OverdueAnswers } from './deadline-watch.js';
import { WriteClaims } from './write-claims.js';
import type { WriterQuery, WriterReply, WriterRequest, WriterWorkerData } from './writer-worker.js';
import { monotonicMs } from '../clock.js';

export interface WriterOptions {
  /** Cooperative deadline per query. */
  queryTimeoutMs: number;
  /** Memory budget per query (bytes). */
  queryMemoryBytes: number;
  /** Disk storage directory (WAL + snapshots), or null for memory. */
  diskPath: string | null;
  /** Object storage instead of a directory. */
  objectStorage?: ObjectStorageOptions | null;
  /** Snapshot after this many WAL bytes (disk and object storage). */
  snapshotWalBytes?: number;
  /** Reader server: the thread follows the storage instead of writing it. */
  follow?: { refreshMs: number } | null;
  /** Follower only: the store was replaced; readers must move to these buffers. */
  onSwap?: (shared: StoreShared) => void;
  /** The writer thread died after start-up: the server cannot take writes any more. */
  onFatal: (err: Error) => void;
  /** The storage's health changed (not ready: /readyz answers 503, writes are refused). */
  onHealth?: (health: StorageHealth) => void;
  startTimeoutMs?: number;
  /** Lower bounds than limits.ts (tests). */
  limits?: LimitOverrides<'writerPendingRequestsMax' | 'writerPendingBodyBytesMax' | 'writerUndurableAcksMax' | 'writerThreadHeapMbMax' | 'deadlineAnswerGraceMs'>;
}

/** A job sent to the thread; its body has moved there, so its size is kept here. */
interface SentJob {
  readonly id: number;
  readonly job: QueryJob;
  readonly bodyBytes: number;
  /** monotonicMs() past which the watch answers it if it has not started (Infinity: no arrival time). */
  readonly answerByMs: number;
}

/** The answer to requests the writer thread had not started when it died. */
const WRITER_FAILED = 'the writer thread failed; see the server log';

const START_TIMEOUT_MS_DEFAULT = 30_000;
/**
 * How long a stop waits for the writer to make everything durable and write its final
 * snapshot before terminating it (the WAL still holds every write then). A snapshot of a
 * multi-GB store takes tens of seconds on this class of machine.
 */
const CLOSE_TIMEOUT_MS = 10 * 60_000;

export class WriterThread implements QuerySink {
  /** The store's buffers (a follower replaces them when it reloads from a snapshot). */
  shared: StoreShared;
  /** What recovery found when the writer opened disk storage. */
  readonly recovery: RecoveryReport | null;
  /** The storage's health as the writer thread last reported it. */
  health: StorageHealth;
  /** Set when the writer's stop was not clean (e.g. its final snapshot failed). */
  closeProblem: string | null = null;
  private readonly worker: Worker;
  private readonly pending = new Map<number, SentJob>();
  private readonly pendingBound: QueueBound;
  /** Who decides each request's fate: the writer by starting it, or the deadline watch. */
  private readonly claims: WriteClaims;
  /** When a request is overdue, and the answer the watch then gives it. */
  private readonly overdue: OverdueAnswers;
  private readonly overdueTimer = new DeadlineTimer(() => this.answerOverdue());
  /** The id of the last request the thread began to run (it writes, we read after it died). */
  private readonly started: BigInt64Array;
  private nextId = 1;
  /** Requests of this turn not sent yet (flushOutbox). */
  private outbox: SentJob[] = [];
  /** Set when the thread stopped (closed or crashed): new jobs fail at once. */
  private stopped: string | null = null;
  private closing: Promise<void> | null = null;

  private constructor(
    worker: Worker, started: BigInt64Array, claims: WriteClaims, shared: StoreShared, recovery: RecoveryReport | null, health: StorageHealth, options: WriterOptions,
  ) {
    this.worker = worker;
    this.started = started;
    this.claims = claims;
    this.overdue = new OverdueAnswers(options.queryTimeoutMs, options.limits?.deadlineAnswerGraceMs);
    this.pendingBound = new QueueBound(
      'the writer queue',
      pendingRequestsMax(options),
      options.limits?.writerPendingBodyBytesMax ?? limits.writerPendingBodyBytesMax,
      'in progress',
    );
    this.shared = shared;
    this.recovery = recovery;
    this.health = health;
    worker.on('message', (reply: WriterReply) => this.onReply(reply, options));
    worker.on('error', (err: Error) => this.onStopped(`writer thread failed: ${err.message}`, options));
    worker.on('exit', (code: number) => this.onStopped(`writer thread exited with code ${code}`, options));
  }

  /** Start the thread; resolves when it has created the store. */
  static start(options: WriterOptions): Promise<WriterThread> {
    const started = new BigInt64Array(new SharedArrayBuffer(BigInt64Array.BYTES_PER_ELEMENT));
    // Every request in flight has a slot of its own: at most pendingRequestsMax are (write-claims.ts).
    const claims = WriteClaims.create(Math.max(1, pendingRequestsMax(options)));
    const workerData: WriterWorkerData = {
      queryTimeoutMs: options.queryTimeoutMs,
      queryMemoryBytes: options.queryMemoryBytes,
      diskPath: options.diskPath,
      objectStorage: options.objectStorage ?? null,
      follow: options.follow ?? null,
      ...(options.snapshotWalBytes !== undefined ? { snapshotWalBytes: options.snapshotWalBytes } : {}),
      started: started.buffer as SharedArrayBuffer,
      claims: claims.buffer,
      undurableAcksMax: options.limits?.writerUndurableAcksMax ?? limits.writerUndurableAcksMax,
    };
    const worker = new Worker(new URL('./writer-worker.js', import.meta.url), {
      workerData,
      name: 'svcdb-writer',
      resourceLimits: { maxOldGenerationSizeMb: options.limits?.writerThreadHeapMbMax ?? limits.writerThreadHeapMbMax, maxYoungGenerationSizeMb: limits.workerThreadYoungGenerationMb },
    });
    return new Promise((resolve, reject) => {
      const fail = (err: Error): void => {
        cleanup();
        void worker.terminate();
        reject(err);
      };
      const timer = setTimeout(
        () => fail(new Error(`writer thread did not start within ${options.startTimeoutMs ?? START_TIMEOUT_MS_DEFAULT} ms`)),
        options.startTimeoutMs ?? START_TIMEOUT_MS_DEFAULT,
      );
      const onMessage = (reply: WriterReply): void => {
        if (reply.kind !== 'ready') return;
        cleanup();
        resolve(new WriterThread(worker, started, claims, reply.shared, reply.recovery, reply.health, options));
      };
      const onError = (err: Error): void => fail(new Error(`writer thread failed to start: ${err.message}`));
      const onExit = (code: number): void => fail(new Error(`writer thread exited during start-up with code ${code}`));
      const cleanup = (): void => {
        clearTimeout(timer);
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
      };
      worker.on('message', onMessage);
      worker.on('error', onError);
      worker.on('exit', onExit);
    });
  }

  /** Requests the watch answered before the writer started them (health, metrics and tests). */
  get answeredOverdue(): number {
    return this.overdue.answered;
  }

  /** Requests sent to the writer thread and not answered yet. */
  get pendingRequests(): number {
    return this.pending.size;
  }

  submit(job: QueryJob): void {
    if (this.stopped !== null || this.closing !== null) {
      failJob(job, this.stopped !== null ? WRITER_FAILED : 'server is shutting down');
      return;
    }
    if (job.responder.settled) return; // client went away while its read looked at it
    const bodyBytes = job.body.byteLength;
    if (!this.pendingBound.admit(job, bodyBytes)) return;
    const id = this.nextId++;
    const sent: SentJob = { id, job, bodyBytes, answerByMs: this.overdue.atMs(job) };
    this.pending.set(id, sent);
    this.claims.queue(id);
    this.overdueTimer.armBy(sent.answerByMs);
    // The body leaves with this turn's message: it gets a buffer of its own now, while the
    // front end's scratch still holds it (the next request's once this call returns).
    bodyToTransfer(job);
    if (this.outbox.length === 0) setImmediate(this.flushOutbox);
    this.outbox.push(sent);
  }

  /** Send the requests of this turn to the thread, in one message. */
  private readonly flushOutbox = (): void => {
    const sent = this.outbox;
    if (sent.length === 0) return;
    this.outbox = [];
    if (this.stopped !== null) return; // onStopped answered every pending job
    const queries: WriterQuery[] = [];
    const transfer = new Set<ArrayBuffer>(); // two bodies may share a buffer: a transfer list names each once
    for (const { id, job } of sent) {
      queries.push({ id, body: job.body, flags: encodeFlags(job.flags), receivedAtMs: job.receivedAtMs ?? 0 });
      transfer.add(job.body.buffer as ArrayBuffer);
    }
    const message: WriterRequest = { kind: 'queries', queries };
    try {
      this.worker.postMessage(message, [...transfer]);
    } catch (err) {
      // Never sent (it could not be cloned or transferred, or memory ran out): they must not
      // keep their places in the queue, which only an answer from the thread gives back.
      for (const { id, job, bodyBytes } of sent) {
        if (!this.pending.delete(id)) continue;
        this.pendingBound.remove(bodyBytes);
        this.claims.answer(id);
        failJob(job, `the request could not be sent to the writer thread: ${(err as Error).message}`);
      }
    }
  };

  /**
   * Answer every request past its deadline + grace that the writer has not started; it
   * never runs. Then arm the watch for the next such moment.
   */
  private answerOverdue(): void {
    const now = monotonicMs();
    // Requests start in id order (pending is in id order too): those up to the last one
    // started are the writer's to answer. The scan is of at most writerPendingRequestsMax
    // requests, and runs when the earliest unstarted deadline passes (about once per
    // request only when a backlog of requests with spread-out deadlines is overdue).
    const lastStarted = Number(Atomics.load(this.started, 0));
    let next = Number.POSITIVE_INFINITY;
    for (const sent of this.pending.values()) {
      if (sent.id <= lastStarted || sent.job.responder.settled) continue;
      if (sent.answerByMs > now) {
        next = Math.min(next, sent.answerByMs);
        continue;
      }
      // Lost only to a writer that started it a moment ago: its guard or its commit answers it.
      if (this.claims.answer(sent.id)) this.overdue.answer(sent.job);
    }
    this.overdueTimer.armBy(next);
  }

  /** Let the writer finish what it received, then stop it (terminate after a timeout). */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      if (this.stopped !== null) {
        resolve();
        return;
      }
      const timer = setTimeout(() => void this.worker.terminate(), CLOSE_TIMEOUT_MS);
      this.worker.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      this.flushOutbox(); // "everything received before this"
      const message: WriterRequest = { kind: 'close' };
      this.worker.postMessage(message);
    });
    return this.closing;
  }

  private onReply(reply: WriterReply, options: WriterOptions): void {
    if (reply.kind === 'health') {
      this.health = reply.health;
      options.onHealth?.(reply.health);
      return;
    }
    if (reply.kind === 'closed') {
      this.closeProblem = reply.problem;
      return;
    }
    if (reply.kind === 'swap') {
      this.shared = reply.shared;
      options.onSwap?.(reply.shared);
      return;
    }
    if (reply.kind !== 'result' && reply.kind !== 'skipped') return;
    const sent = this.pending.get(reply.id);
    if (sent === undefined) return;
    this.pending.delete(reply.id);
    this.pendingBound.remove(sent.bodyBytes);
    // A skipped request was answered by the watch; it only frees its place in the queue.
    if (reply.kind === 'result') sent.job.responder.respond(reply.status, reply.body, reply.retryAfterSeconds);
  }

  private onStopped(reason: string, options: WriterOptions): void {
    if (this.stopped !== null) return;
    this.stopped = reason;
    this.overdueTimer.close();
    // The thread wrote `started` before running each request and can write no more.
    const lastStarted = Number(Atomics.load(this.started, 0));
    let notStarted = 0;
    let uncertain = 0;
    const outcomeUnknown = new SvcError(
      'writer_fenced_commit_outcome_unknown',
      'the writer thread failed after this request started: if it was a write, it may or may not have happened; see the server log',
    );
    for (const [id, sent] of this.pending) {
      if (sent.job.responder.settled) continue; // answered by the deadline watch, or its client left
      if (id > lastStarted) {
        notStarted++;
        failJob(sent.job, WRITER_FAILED);
      } else {
        uncertain++;
        sent.job.responder.respond(outcomeUnknown.status, errorBody(outcomeUnknown));
      }
    }
    this.pending.clear();
    this.pendingBound.clear();
    if (notStarted + uncertain > 0) {
      process.stderr.write(`svcdb: ${reason}: ${notStarted} unanswered requests it had not started answered 500 internal_error, `
        + `${uncertain} it had started answered 409 writer_fenced_commit_outcome_unknown\n`);
    }
    // Exiting after a close request is the normal end, anything else is fatal.
    if (this.closing === null) options.onFatal(new Error(reason));
  }
}

function pendingRequestsMax(options: WriterOptions): number {
  return options.limits?.writerPendingRequestsMax ?? limits.writerPendingRequestsMax;
}
