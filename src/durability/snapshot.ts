// Snapshots: the used bytes of every store buffer in one file,
//   "SVCDBSNP" [u32 formatVersion][u32 sectionCount][u32 epoch][u32 reserved]
//   then per section: [u32 nameLength][name][u32 byteLength][u32 crc32][bytes]
// written to a temporary file, fsynced and renamed, so a snapshot on disk is whole.
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { SvcError } from '../protocol/errors.js';
import { Store } from '../store/store.js';
import { checkFormatVersion, epochFileName, listEpochFiles, storageFormatVersion } from './format.js';

const MAGIC = Buffer.from('SVCDBSNP');

export const snapshotName = (epoch: number) => epochFileName('snapshot', epoch, 'bin');

/** Snapshot files in `dir`, newest first. */
export function listSnapshots(dir: string): { file: string; epoch: number }[] {
  return listEpochFiles(dir, 'snapshot', 'bin').reverse();
}

function writeAll(fd: number, bytes: Uint8Array): void {
  let done = 0;
  while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done);
}

export function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try { fsyncSync(fd); } finally { closeSync(fd); }
}

/** Write a snapshot of `store` (writer thread, between batches); returns its epoch. */
export function writeSnapshot(dir: string, store: Store): number {
  const epoch = store.committedEpoch();
  const sections = store.exportSections();
  const file = join(dir, snapshotName(epoch));
  const temp = `${file}.tmp`;
  const fd = openSync(temp, 'w');
  try {
    const header = Buffer.alloc(24);
    MAGIC.copy(header, 0);
    header.writeUInt32LE(storageFormatVersion, 8);
    header.writeUInt32LE(sections.size, 12);
    header.writeUInt32LE(epoch, 16);
    writeAll(fd, header);
    for (const [name, bytes] of sections) {
      const nameBytes = Buffer.from(name);
      const head = Buffer.alloc(4 + nameBytes.length + 8);
      head.writeUInt32LE(nameBytes.length, 0);
      nameBytes.copy(head, 4);
      head.writeUInt32LE(bytes.byteLength, 4 + nameBytes.length);
      head.writeUInt32LE(crc32(bytes), 8 + nameBytes.length);
      writeAll(fd, head);
      writeAll(fd, bytes);
    }
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    try { unlinkSync(temp); } catch { /* already gone */ }
    throw new SvcError('storage_error', `storage error: snapshot write failed: ${(err as Error).message}`);
  }
  closeSync(fd);
  renameSync(temp, file);
  fsyncDir(dir);
  return epoch;
}

/** Load a snapshot; throws storage_error if it is not whole. */
export function readSnapshot(file: string): Store {
  const bytes = readFileSync(file);
  if (bytes.length < 24 || !bytes.subarray(0, 8).equals(MAGIC)) throw new SvcError('storage_error', `storage error: ${file} is not a svcdb snapshot`);
  checkFormatVersion(bytes.readUInt32LE(8), file);
  const count = bytes.readUInt32LE(12);
  const sections = new Map<string, Uint8Array>();
  let at = 24;
  for (let i = 0; i < count; i++) {
    if (at + 4 > bytes.length) throw new SvcError('storage_error', `storage error: ${file} is truncated`);
    const nameLength = bytes.readUInt32LE(at);
    const name = bytes.toString('utf8', at + 4, at + 4 + nameLength);
    at += 4 + nameLength;
    if (at + 8 > bytes.length) throw new SvcError('storage_error', `storage error: ${file} is truncated`);
    const length = bytes.readUInt32LE(at);
    const sum = bytes.readUInt32LE(at + 4);
    at += 8;
    if (at + length > bytes.length) throw new SvcError('storage_error', `storage error: ${file} is truncated`);
    const data = bytes.subarray(at, at + length);
    if (crc32(data) !== sum) throw new SvcError('storage_error', `storage error: section ${name} of ${file} fails its checksum`);
    sections.set(name, data);
    at += length;
  }
  return Store.fromSections(sections);
}
