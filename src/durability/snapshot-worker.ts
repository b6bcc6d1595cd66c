// The snapshot thread: writes a snapshot of the LIVE shared store as of one epoch while
// the writer thread goes on committing (sectionsAt reads the store like a reader at that
// epoch), so a snapshot never stalls writes. One job at a time, in bounded memory.
import { parentPort } from 'node:worker_threads';
import { sectionsAt } from '../store/snapshot-sections.js';
import type { StoreCut } from '../store/store.js';
import type { StoreShared } from '../store/store.js';
import { snapshotFaults, writeSnapshotFile } from './snapshot.js';
import { assertSameInstall } from '../build-identity.js';

export interface SnapshotJob {
  id: number; shared: StoreShared; cut: StoreCut; file: string; injectFailure: boolean;
  /** The server's BUILD_IDENTITY: this thread starts on the first snapshot, maybe after an upgrade. */
  buildIdentity: string;
}
export type SnapshotJobResult = { id: number; bytes: number; error: null } | { id: number; bytes: 0; error: string };

const port = parentPort;
if (port === null) throw new Error('snapshot-worker.ts must run in a worker thread');
port.on('message', (job: SnapshotJob) => {
  let result: SnapshotJobResult;
  snapshotFaults.failWrites = job.injectFailure ? 1 : 0;
  try {
    assertSameInstall(job.buildIdentity, 'snapshot thread');
    result = { id: job.id, bytes: writeSnapshotFile(job.file, job.cut.epoch, sectionsAt(job.shared, job.cut)), error: null };
  } catch (err) {
    result = { id: job.id, bytes: 0, error: err instanceof Error ? err.message : String(err) };
  }
  port.postMessage(result);
});
