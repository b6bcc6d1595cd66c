// Snapshots: the store as of one epoch in one file, written and read in bounded chunks.
// Layout (little-endian):
//
//   header (32 bytes): "SVCDBSNP" | u32 formatVersion | u32 epoch | u32 sectionCount |
//                      u32 crc32(section table) | u32 reserved | u32 crc32(bytes 0..28)
//   section table: sectionCount entries of 64 bytes:
//                      name (40 bytes, UTF-8, zero-padded) | u64 offset | u64 byteLength |
//                      u32 crc32(section bytes) | u32 reserved
//   section bytes, back to back in table order.
//
// Written to `<name>.tmp`, fsynced, renamed, the directory fsynced, and then read back and
// verified whole (every checksum) before the caller may delete anything older.
import { closeSync, fstatSync, fsyncSync, openSync, readSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';
import type { Store } from '../store/store.js';
import { sectionsAt, StoreLoader, type SectionSource } from '../store/snapshot-sections.js';
import { checkFormatVersion, epochFileName, fsyncDir, listEpochFiles, storageFormatVersion } from './format.js';

const MAGIC = Buffer.from('SVCDBSNP');
const HEADER_BYTES = 32;
const ENTRY_BYTES = 64;
const NAME_BYTES = 40;

export const snapshotName = (epoch: number) => epochFileName('snapshot', epoch, 'bin');

/** Snapshot files in `dir`, newest first. */
export function listSnapshots(dir: string): { file: string; epoch: number }[] {
  return listEpochFiles(dir, 'snapshot', 'bin').reverse();
}

/** A storage_error naming the file and the byte where a snapshot is damaged. */
function damaged(file: string, offset: number, what: string): SvcError {
  return new SvcError('storage_error', `storage error: snapshot ${file} is corrupt at byte ${offset}: ${what}`);
}

/**
 * A snapshot shorter than its own header and table say: an upload or a write that never
 * finished (object storage tells these from damage to a whole file, which is never removed).
 */
export class SnapshotCutShort extends SvcError {}

function cutShort(file: string, offset: number, what: string): SvcError {
  return new SnapshotCutShort('storage_error', `storage error: snapshot ${file} is cut short at byte ${offset}: ${what}`);
}

function writeAll(fd: number, bytes: Uint8Array, position: number): void {
  let done = 0;
  while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done, position + done);
}

function readExactly(fd: number, buffer: Uint8Array, length: number, position: number): boolean {
  let done = 0;
  while (done < length) {
    const n = readSync(fd, buffer, done, length - done, position + done);
    if (n === 0) return false;
    done += n;
  }
  return true;
}

/**
 * Fault injection for tests: the next N snapshot writes fail part way, as a full disk would;
 * a build identity other than null is what the snapshot thread is told the server runs
 * (build-identity.ts), as if the install had been replaced since the start.
 */
export const snapshotFaults: { failWrites: number; buildIdentity: string | null } = { failWrites: 0, buildIdentity: null };

interface TableEntry { name: string; offset: number; byteLength: number; sum: number }

/**
 * Write `sections` (the store at `epoch`) as snapshot file `file`: temp file, fsync,
 * rename, directory fsync, then read back and verify. Returns the file's size.
 */
export function writeSnapshotFile(file: string, epoch: number, sections: SectionSource[]): number {
  if (sections.length > limits.snapshotSectionsMax) throw new SvcError('internal_error', 'internal error: too many snapshot sections');
  const temp = `${file}.tmp`;
  const tableBytes = sections.length * ENTRY_BYTES;
  const entries: TableEntry[] = [];
  const fd = openSync(temp, 'w');
  let size = 0;
  try {
    let at = HEADER_BYTES + tableBytes;
    for (const section of sections) {
      if (Buffer.byteLength(section.name) > NAME_BYTES) throw new SvcError('internal_error', `internal error: section name ${section.name} is too long`);
      let sum = 0, written = 0;
      if (snapshotFaults.failWrites > 0 && section.name === 'heap') {
        snapshotFaults.failWrites--;
        throw new Error('injected snapshot write failure (ENOSPC)');
      }
      for (const chunk of section.chunks()) {
        writeAll(fd, chunk, at + written);
        sum = crc32(chunk, sum);
        written += chunk.byteLength;
      }
      if (written !== section.byteLength) {
        throw new SvcError('internal_error', `internal error: snapshot section ${section.name} gave ${written} bytes, announced ${section.byteLength}`);
      }
      entries.push({ name: section.name, offset: at, byteLength: written, sum });
      at += written;
    }
    size = at;
    const table = Buffer.alloc(tableBytes);
    entries.forEach((e, i) => {
      const base = i * ENTRY_BYTES;
      table.write(e.name, base, NAME_BYTES, 'utf8');
      table.writeBigUInt64LE(BigInt(e.offset), base + 40);
      table.writeBigUInt64LE(BigInt(e.byteLength), base + 48);
      table.writeUInt32LE(e.sum, base + 56);
    });
    const header = Buffer.alloc(HEADER_BYTES);
    MAGIC.copy(header, 0);
    header.writeUInt32LE(storageFormatVersion, 8);
    header.writeUInt32LE(epoch, 12);
    header.writeUInt32LE(entries.length, 16);
    header.writeUInt32LE(crc32(table), 20);
    header.writeUInt32LE(crc32(header.subarray(0, 28)), 28);
    writeAll(fd, header, 0);
    writeAll(fd, table, HEADER_BYTES);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    try { unlinkSync(temp); } catch { /* already gone */ }
    if (err instanceof SvcError) throw err;
    throw new SvcError('storage_error', `storage error: snapshot write failed: ${(err as Error).message}`);
  }
  closeSync(fd);
  try {
    renameSync(temp, file);
    fsyncDir(join(file, '..'));
  } catch (err) {
    try { unlinkSync(temp); } catch { /* already gone */ }
    throw new SvcError('storage_error', `storage error: snapshot rename failed: ${(err as Error).message}`);
  }
  // Read back: a snapshot that cannot be verified must not replace anything.
  verifySnapshotFile(file);
  return size;
}

/** Open a snapshot and check its header and section table; throws storage_error naming the damage. */
function openSnapshot(file: string): { fd: number; epoch: number; entries: TableEntry[] } {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    const header = Buffer.alloc(HEADER_BYTES);
    if (!readExactly(fd, header, HEADER_BYTES, 0)) throw cutShort(file, 0, `${size} bytes is shorter than the header`);
    if (!header.subarray(0, 8).equals(MAGIC)) throw damaged(file, 0, 'not a svcdb snapshot (bad magic)');
    // An older format has no header checksum: its version decides first. A newer version
    // is believed only with a valid checksum (else it is a damaged byte).
    const version = header.readUInt32LE(8);
    if (version < storageFormatVersion) checkFormatVersion(version, file);
    if (crc32(header.subarray(0, 28)) !== header.readUInt32LE(28)) throw damaged(file, 0, 'the header fails its checksum');
    checkFormatVersion(version, file);
    const count = header.readUInt32LE(16);
    if (count > limits.snapshotSectionsMax) throw damaged(file, 16, `${count} sections`);
    const table = Buffer.alloc(count * ENTRY_BYTES);
    if (!readExactly(fd, table, table.length, HEADER_BYTES)) throw cutShort(file, HEADER_BYTES, 'the section table is cut short');
    if (crc32(table) !== header.readUInt32LE(20)) throw damaged(file, HEADER_BYTES, 'the section table fails its checksum');
    const entries: TableEntry[] = [];
    let expected = HEADER_BYTES + table.length;
    for (let i = 0; i < count; i++) {
      const base = i * ENTRY_BYTES;
      const nameEnd = table.indexOf(0, base);
      const name = table.toString('utf8', base, nameEnd < 0 || nameEnd > base + NAME_BYTES ? base + NAME_BYTES : nameEnd);
      const offset = Number(table.readBigUInt64LE(base + 40));
      const byteLength = Number(table.readBigUInt64LE(base + 48));
      if (offset !== expected) throw damaged(file, HEADER_BYTES + base, `section ${name} starts at ${offset}, expected ${expected}`);
      expected = offset + byteLength;
      entries.push({ name, offset, byteLength, sum: table.readUInt32LE(base + 56) });
    }
    if (expected > size) throw cutShort(file, size, `the file has ${size} bytes, its table describes ${expected}`);
    if (expected !== size) throw damaged(file, expected, `the file has ${size} bytes, its table describes ${expected}`);
    return { fd, epoch: header.readUInt32LE(12), entries };
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/** Stream every section through `sink` in bounded chunks, checking each section's checksum. */
function streamSections(file: string, fd: number, entries: TableEntry[], sink: (entry: TableEntry) => ((chunk: Uint8Array) => void) | null): void {
  const buffer = Buffer.allocUnsafe(limits.snapshotChunkBytes);
  for (const entry of entries) {
    const write = sink(entry);
    let sum = 0;
    for (let done = 0; done < entry.byteLength;) {
      const n = Math.min(buffer.length, entry.byteLength - done);
      if (!readExactly(fd, buffer, n, entry.offset + done)) throw cutShort(file, entry.offset + done, `section ${entry.name} is cut short`);
      const chunk = buffer.subarray(0, n);
      sum = crc32(chunk, sum);
      write?.(chunk);
      done += n;
    }
    if (sum !== entry.sum) throw damaged(file, entry.offset, `section ${entry.name} fails its checksum`);
  }
}

/** Read a snapshot whole and check every checksum, without loading it. Returns its epoch. */
export function verifySnapshotFile(file: string): number {
  const { fd, epoch, entries } = openSnapshot(file);
  try {
    streamSections(file, fd, entries, () => null);
    return epoch;
  } finally {
    closeSync(fd);
  }
}

/** Load a snapshot into a new writer store; throws storage_error naming the damage. */
export function readSnapshotFile(file: string): { store: Store; epoch: number } {
  const { fd, epoch, entries } = openSnapshot(file);
  try {
    const loader = new StoreLoader();
    const sinks = new Map<string, { write(chunk: Uint8Array): void; end(): void }>();
    streamSections(file, fd, entries, (entry) => {
      const sink = loader.section(entry.name, entry.byteLength);
      sinks.set(entry.name, sink);
      return (chunk) => sink.write(chunk);
    });
    for (const sink of sinks.values()) sink.end();
    const store = loader.finish();
    if (store.committedEpoch() !== epoch) throw damaged(file, 12, `the header says epoch ${epoch}, the store holds ${store.committedEpoch()}`);
    return { store, epoch };
  } finally {
    closeSync(fd);
  }
}

/** Write a snapshot of `store` (writer thread, between batches) into `dir`; returns its epoch. */
export function writeSnapshot(dir: string, store: Store): number {
  const cut = store.cut();
  try {
    writeSnapshotFile(join(dir, snapshotName(cut.epoch)), cut.epoch, sectionsAt(store.shared, cut));
  } finally {
    store.releaseCut(cut);
  }
  return cut.epoch;
}

/** Load a snapshot; throws storage_error if it is not whole. */
export function readSnapshot(file: string): Store {
  return readSnapshotFile(file).store;
}
