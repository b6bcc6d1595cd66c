// The on-disk format version shared by snapshots and WAL segments. A layout change is a
// versioned format change (STYLE.md): older files need a migration, newer ones are refused.
import { SvcError } from '../protocol/errors.js';

export const storageFormatVersion = 1;

export function checkFormatVersion(found: number, file: string): void {
  if (found > storageFormatVersion) {
    throw new SvcError('unsupported_index_storage_version',
      `storage format version ${found} in ${file} is newer than this server supports (${storageFormatVersion}); upgrade svcdb`);
  }
  if (found < storageFormatVersion) {
    throw new SvcError('migration_required',
      `storage format version ${found} in ${file} needs a migration to version ${storageFormatVersion}`);
  }
}
