// Main side of the snapshot thread (snapshot-worker.ts), started on first use and owned
// by one writer (disk or object storage).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { SvcError } from '../protocol/errors.js';
import type { StoreCut, StoreShared } from '../store/store.js';
import { snapshotFaults } from './snapshot.js';
import { BUILD_IDENTITY } from '../build-identity.js';
import type { SnapshotJob, SnapshotJobResult } from './snapshot-worker.js';

/** The worker script: beside this module when built; the build's when run from sources (tests). */
function workerUrl(): URL {
  const sibling = new URL('./snapshot-worker.js', import.meta.url);
  return existsSync(fileURLToPath(sibling)) ? sibling : new URL('../../dist/src/durability/snapshot-worker.js', import.meta.url);
}

/** A verify job's verdict: the file is not a whole snapshot (the message says where). */
export class SnapshotDamage extends SvcError {}

export class SnapshotThread {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (value: number) => void; reject: (err: SvcError) => void }>();

  /** Write snapshot file `file` of the store as of `cut` (fsynced, renamed, read back). Resolves with its size. */
  write(shared: StoreShared, cut: StoreCut, file: string): Promise<number> {
    // Fault injection crosses to the thread with the job (tests set it on this side).
    const injectFailure = snapshotFaults.failWrites > 0;
    if (injectFailure) snapshotFaults.failWrites--;
    return this.run((id) => ({ kind: 'write', id, shared, cut, file, injectFailure, buildIdentity: snapshotFaults.buildIdentity ?? BUILD_IDENTITY }));
  }

  /**
   * Check every checksum of snapshot file `file` (verifySnapshotFile), off the calling
   * thread: a large snapshot takes seconds to read. Resolves with its epoch, or with
   * SnapshotDamage naming what is wrong with the file; rejects (storage_error) when the
   * file could not be read, which says nothing about it.
   */
  async verify(file: string): Promise<number | SnapshotDamage> {
    try {
      return await this.run((id) => ({ kind: 'verify', id, file, buildIdentity: snapshotFaults.buildIdentity ?? BUILD_IDENTITY }));
    } catch (err) {
      if (err instanceof SnapshotDamage) return err;
      throw err;
    }
  }

  private run(job: (id: number) => SnapshotJob): Promise<number> {
    const worker = this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.ref(); // a running job keeps the process alive; an idle thread does not
      worker.postMessage(job(id));
    });
  }

  private start(): Worker {
    if (this.worker !== null) return this.worker;
    const worker = new Worker(workerUrl(), { name: 'svcdb-snapshot' });
    worker.on('message', (result: SnapshotJobResult) => {
      const waiter = this.pending.get(result.id);
      this.pending.delete(result.id);
      if (this.pending.size === 0) worker.unref();
      if (result.error === null) waiter?.resolve(result.value);
      // The worker's text is usually a storage_error message already: prefix it once.
      else {
        const message = result.error.startsWith('storage error: ') ? result.error : `storage error: ${result.error}`;
        waiter?.reject(result.damage ? new SnapshotDamage('storage_error', message) : new SvcError('storage_error', message));
      }
    });
    const failAll = (why: string): void => {
      this.worker = null;
      const waiters = [...this.pending.values()];
      this.pending.clear();
      for (const w of waiters) w.reject(new SvcError('storage_error', `storage error: the snapshot thread ${why}`));
    };
    worker.on('error', (err) => failAll(`failed: ${err.message}`));
    worker.on('exit', (code) => failAll(`exited with code ${code}`));
    worker.unref();
    this.worker = worker;
    return worker;
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = null;
    if (worker !== null) await worker.terminate();
  }
}
