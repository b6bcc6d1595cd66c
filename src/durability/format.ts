// The on-disk format version shared by snapshots and WAL segments. A layout change is a
// versioned format change (STYLE.md): older files need a migration, newer ones are refused.
import { closeSync, fsyncSync, openSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { SvcError } from '../protocol/errors.js';

/**
 * 3: checksummed WAL frame headers and segment headers, snapshot header and section table
 * checksums, 64-bit section offsets and lengths. 2: adjacency in the topology memory.
 */
export const storageFormatVersion = 3;

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

/** Snapshots and WAL segments are named `<prefix>-<epoch, 10 digits>.<ext>`, so names sort by epoch. */
export const epochFileName = (prefix: string, epoch: number, ext: string): string =>
  `${prefix}-${String(epoch).padStart(10, '0')}.${ext}`;

/** Files of `dir` named by epochFileName(prefix, *, ext), oldest epoch first. */
export function listEpochFiles(dir: string, prefix: string, ext: string): { file: string; epoch: number }[] {
  const pattern = new RegExp(`^${prefix}-(\\d{10})\\.${ext}$`);
  return readdirSync(dir)
    .map((f) => pattern.exec(f))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ file: join(dir, m[0]), epoch: Number(m[1]) }))
    .sort((a, b) => a.epoch - b.epoch);
}

/** fsync a directory, so that names created, renamed or removed in it survive a crash. */
export function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try { fsyncSync(fd); } finally { closeSync(fd); }
}
