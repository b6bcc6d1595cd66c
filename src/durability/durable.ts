// Commit -> durable -> acknowledge, once, for memory, disk and object storage. The server's
// writer thread and the embedded handle both run writes through a Committer over a
// DurableStorage; only the storage differs.
//
// The rule (docs/durability.md): a batch is logged before it commits (a failed log rolls
// it back, so it is never visible); readers see it once it is durable (the storage
// publishes durable epochs), and its answer waits for that too. `x-svc-await-durable:
// false` is the documented exception: answered and published right after commit.
import { limits } from '../limits.js';
import { errorBody, forClient, overloadError, SvcError } from '../protocol/errors.js';
import { executeRequest, execOptions, logPending, type ExecOptions, type QueryBounds, type RequestFlags } from '../exec/request.js';
import type { RedoBatch, Store } from '../store/store.js';
import type { IndexRuntime } from '../index/runtime.js';

export interface RecoveryReport {
  snapshotEpoch: number;
  replayedBatches: number;
  truncatedBytes: number;
  epoch: number;
  /** Damage recovery went around without losing anything (e.g. a corrupt newest snapshot). */
  warnings?: string[];
}

export interface StorageHealth {
  /** False while committed batches cannot be made durable: new writes are refused. */
  ready: boolean;
  /** What is wrong (also when ready: e.g. snapshots failing while the WAL keeps everything). */
  problem: string | null;
}

export const healthy: StorageHealth = { ready: true, problem: null };

type HealthListener = (health: StorageHealth) => void;

/** Health listeners, called on every change of (ready, problem). */
export class HealthSignal {
  private listeners = new Set<HealthListener>();
  private last: StorageHealth = healthy;

  on(listener: HealthListener): () => void {
    this.listeners.add(listener);
    return () => { this.listeners.delete(listener); };
  }

  update(health: StorageHealth): void {
    if (health.ready === this.last.ready && health.problem === this.last.problem) return;
    this.last = health;
    for (const listener of this.listeners) {
      try { listener(health); } catch (err) {
        process.stderr.write(`svcdb: a storage health listener threw: ${String(err)}\n`);
      }
    }
  }
}

/** How committed batches become durable and visible. */
export interface DurableStorage {
  readonly store: Store;
  readonly report: RecoveryReport | null;
  /** Record the batch before it commits; a throw rolls it back, so it is never visible. */
  logBatch(batch: RedoBatch): void;
  /**
   * Resolves once every batch logged so far is durable and published to readers. Failures
   * of the storage are retried inside; it rejects only when the outcome can no longer be
   * known (the writer was fenced or closed first).
   */
  sync(): Promise<void>;
  health(): StorageHealth;
  /** Call `listener` on every change of health(); returns the unsubscribe function. */
  onHealthChange(listener: (health: StorageHealth) => void): () => void;
  /** Make everything durable, snapshot, release the storage. Throws if the stop was not clean. */
  close(): Promise<void>;
}

/** Memory: nothing to log, durable at commit. */
export class MemoryStorage implements DurableStorage {
  readonly report = null;
  constructor(readonly store: Store) {}
  onHealthChange(): () => void { return () => undefined; } // memory never changes health
  logBatch(): void { /* nothing survives a stop anyway */ }
  sync(): Promise<void> { return Promise.resolve(); }
  health(): StorageHealth { return healthy; }
  close(): Promise<void> { return Promise.resolve(); }
}

export interface Answer {
  status: number;
  body: string;
  /** Set on a 503 server_overloaded answer: the Retry-After header. */
  retryAfterSeconds?: number;
}

/** A write refused because the storage cannot make batches durable now: it changed nothing. */
export function writeNotApplied(problem: string | null): SvcError {
  return new SvcError('storage_error', `storage error: storage unavailable, the write was not applied${problem === null ? '' : ` (${problem})`}`);
}

/** An error as the client is answered it: what names the directory or bucket is logged, not sent (forClient). */
function clientAnswer(err: SvcError): Answer {
  const e = forClient(err);
  return { status: e.status, body: errorBody(e) };
}

/** Executes requests on the writer's store and answers writes once they are durable. */
export class Committer {
  private readonly exec: ExecOptions;
  /**
   * Writes answered before they were durable (`x-svc-await-durable: false`) that are not
   * durable yet: the storage holds their frames in memory (object storage uploads in
   * groups). Writes that wait for durability are bounded where they are sent (writer.ts).
   */
  private undurableAcks = 0;

  constructor(
    readonly storage: DurableStorage,
    bounds: QueryBounds,
    private readonly undurableAcksMax: number = limits.writerUndurableAcksMax,
  ) {
    this.exec = execOptions({ ...bounds, logBatch: (batch) => storage.logBatch(batch) });
    // Builds that were running when the store was last stopped go on (index/runtime.ts).
    (storage.store.indexes as IndexRuntime | null)?.resumeAfterRecovery();
    this.scheduleIndexWork();
  }

  private indexWorkScheduled = false;
  private closed = false;

  /**
   * Index builds and drops run here, in slices between requests (index/runtime.ts step):
   * each slice is its own batch, logged and committed like a write, and the event loop
   * turns between slices, so a write waits for at most one slice.
   */
  scheduleIndexWork(delayMs = 0): void {
    if (this.indexWorkScheduled || this.closed) return;
    const runtime = this.storage.store.indexes as IndexRuntime | null;
    if (runtime === null || !runtime.hasWork()) return;
    this.indexWorkScheduled = true;
    const run = () => {
      this.indexWorkScheduled = false;
      if (this.closed) return;
      const result = this.runIndexSlice(runtime);
      if (result === 'progress') this.scheduleIndexWork();
      else if (result === 'waiting') this.scheduleIndexWork(limits.indexCleanupPollMs);
    };
    if (delayMs === 0) setImmediate(run);
    else setTimeout(run, delayMs).unref();
  }

  /**
   * After a write: on a store small enough that an index build takes a few slices, run the
   * index operations to their end now (at most limits.indexSynchronousWorkMs), so the
   * write's answer, which waits for their batches to be durable too, is followed by reads
   * that see the index active: what a client replaying create-then-search expects
   * (indexes.md §5.3 allows a server to build synchronously). Larger builds go on in the
   * background as ever.
   */
  private finishSmallIndexWork(): void {
    const store = this.storage.store;
    const runtime = store.indexes as IndexRuntime | null;
    if (runtime === null || !runtime.hasRunnableOperation()) return;
    if (Math.max(store.nodeSlots(), store.edgeSlots()) > limits.indexSynchronousBuildElements) return;
    const stop = performance.now() + limits.indexSynchronousWorkMs;
    while (runtime.hasRunnableOperation() && performance.now() < stop) {
      if (this.runIndexSlice(runtime) !== 'progress') return;
    }
  }

  /** One slice of index work in a batch of its own. */
  runIndexSlice(runtime: IndexRuntime): 'progress' | 'waiting' | 'idle' {
    const store = this.storage.store;
    if (!this.storage.health().ready) return 'waiting';
    store.beginWrite();
    let result: 'progress' | 'waiting' | 'idle';
    try {
      result = runtime.step();
      if (result === 'progress') logPending(store, (batch) => this.storage.logBatch(batch));
    } catch (err) {
      store.rollback();
      process.stderr.write(`svcdb: an index work slice failed: ${err instanceof Error ? err.message : String(err)}\n`);
      return 'waiting';
    }
    if (result !== 'progress') { store.rollback(); return result; }
    store.commit();
    // Durable in the background; readers see the slice once it is (the storage publishes).
    this.storage.sync().catch(() => undefined);
    return result;
  }

  /** Stop scheduling index work (the storage is closing). */
  stopIndexWork(): void {
    this.closed = true;
  }

  /** The handle's bounds, with a call's own deadline when it has one. */
  private execFor(timeoutMs: number | undefined, receivedAtMs: number): ExecOptions {
    return timeoutMs === undefined && receivedAtMs === 0 ? this.exec
      : execOptions({ queryTimeoutMs: timeoutMs ?? this.exec.queryTimeoutMs, queryMemoryBytes: this.exec.queryMemoryBytes, logBatch: this.exec.logBatch, receivedAtMs });
  }

  /**
   * A read request's answer, in this call (the embedded querySync); a write request is
   * answered invalid_request without being executed, since its answer waits for durability.
   */
  executeRead(body: string, flags: RequestFlags, timeoutMs?: number): Answer {
    const outcome = executeRequest(this.storage.store, body, flags, 'reads', this.execFor(timeoutMs, 0));
    if ('forward' in outcome) {
      return { status: 500, body: '{"error":"internal_error","msg":"internal error: a read was asked to forward"}' };
    }
    return outcome;
  }

  /** The answer now (reads, failures, memory) or once the write is durable. */
  execute(body: Uint8Array | string, flags: RequestFlags, timeoutMs?: number, receivedAtMs = 0): Answer | Promise<Answer> {
    if (flags.awaitDurable === false && this.undurableAcks >= this.undurableAcksMax) {
      // Shed before running (the header is only valid on writes): nothing of it happens.
      const err = overloadError('the writer\'s queue of writes answered before they are durable', `${this.undurableAcks} writes not durable yet`);
      return { status: err.status, body: errorBody(err), retryAfterSeconds: limits.overloadRetryAfterSeconds };
    }
    const store = this.storage.store;
    const before = store.committedEpoch();
    const batchesBefore = store.writeBatchesBegun();
    const outcome = executeRequest(store, body, flags, 'writer', this.execFor(timeoutMs, receivedAtMs));
    const readAsWriter = store.writeBatchesBegun() !== batchesBefore;
    if (store.committedEpoch() !== before) this.finishSmallIndexWork();
    this.scheduleIndexWork();
    if ('forward' in outcome) {
      return { status: 500, body: '{"error":"internal_error","msg":"internal error: the writer was asked to forward a request"}' };
    }
    const epoch = store.committedEpoch();
    if (epoch === before) {
      // Nothing committed. A write batch reads at the newest committed epoch, which readers
      // see only once it is durable: a write that changed nothing, or failed, may have read
      // batches that are not durable yet, so its answer waits for them as theirs do.
      if (!readAsWriter || store.visibleEpoch() === epoch) return outcome;
      if (flags.awaitDurable === false) {
        // Answered before what it read is durable, as the header allows: visible now as
        // well, as after a write with the header that committed.
        store.publish(epoch);
        return outcome;
      }
      // Storage that cannot make batches durable now would hold the answer for the whole
      // outage (and a fenced one never can): the request changed nothing, so it is refused
      // as new writes are then, never answered "may or may not have happened".
      const health = this.storage.health();
      if (!health.ready) return clientAnswer(writeNotApplied(health.problem));
      return this.storage.sync().then(() => outcome, (err: unknown) => clientAnswer(writeNotApplied(err instanceof Error ? err.message : String(err))));
    }
    // Visible already: durable at commit (memory), answered now.
    if (store.visibleEpoch() === epoch) return outcome;
    if (flags.awaitDurable === false) {
      const durable = this.storage.sync();
      // Answered before it is durable: visible now as well (the documented exception).
      store.publish(epoch);
      this.undurableAcks++;
      // A failure is reported by a later acknowledged write.
      const settled = (): void => { this.undurableAcks--; };
      durable.then(settled, settled);
      return outcome;
    }
    return this.answerOnceDurable(outcome);
  }

  /** `outcome` once every batch committed so far is durable, or the storage's error. */
  private answerOnceDurable(outcome: Answer): Promise<Answer> {
    return this.storage.sync().then(() => outcome, (err: unknown) => clientAnswer(err instanceof SvcError ? err : new SvcError('storage_error', `storage error: ${String(err)}`)));
  }
}
