// The snapshot thread: writes a snapshot of the LIVE shared store as of one epoch while
// the writer thread goes on committing (sectionsAt reads the store like a reader at that
// epoch), so a snapshot never stalls writes. It also verifies a snapshot read back from
// object storage before anything older is deleted. One job at a time, in bounded memory.
import { parentPort } from 'node:worker_threads';
import { sectionsAt } from '../store/snapshot-sections.js';
import type { StoreCut } from '../store/store.js';
import type { StoreShared } from '../store/store.js';
import { snapshotFaults, verifySnapshotFile, writeSnapshotFile } from './snapshot.js';
import { assertSameInstall } from '../build-identity.js';
import { SvcError } from '../protocol/errors.js';

export type SnapshotJob = {
  kind: 'write'; id: number; shared: StoreShared; cut: StoreCut; file: string; injectFailure: boolean;
  /** The server's BUILD_IDENTITY: this thread starts on the first snapshot, maybe after an upgrade. */
  buildIdentity: string;
} | {
  /** Check every checksum of the snapshot file `file`; answers its epoch in `bytes`' place. */
  kind: 'verify'; id: number; file: string; buildIdentity: string;
};
/**
 * `value`: the written file's size, or the verified file's epoch. `damage`: a verify job's
 * verdict that the file is not a whole snapshot (`error` says where), as against a failure
 * to read it at all, which says nothing about the file.
 */
export type SnapshotJobResult = { id: number; value: number; error: null; damage: false } | { id: number; value: 0; error: string; damage: boolean };

const port = parentPort;
if (port === null) throw new Error('snapshot-worker.ts must run in a worker thread');
port.on('message', (job: SnapshotJob) => {
  let result: SnapshotJobResult;
  try {
    assertSameInstall(job.buildIdentity, 'snapshot thread');
    if (job.kind === 'verify') {
      result = { id: job.id, value: verifySnapshotFile(job.file), error: null, damage: false };
    } else {
      snapshotFaults.failWrites = job.injectFailure ? 1 : 0;
      result = { id: job.id, value: writeSnapshotFile(job.file, job.cut.epoch, sectionsAt(job.shared, job.cut)), error: null, damage: false };
    }
  } catch (err) {
    // verifySnapshotFile throws SvcError only for what it found in the file (damage, cut short, format).
    result = { id: job.id, value: 0, error: err instanceof Error ? err.message : String(err), damage: job.kind === 'verify' && err instanceof SvcError };
  }
  port.postMessage(result);
});
