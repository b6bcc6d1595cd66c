// The write-ahead log: one record per committed write batch (its RedoBatch), framed as
//   [u32 payloadLength][u32 crc32(payload)][payload = msgpackr(RedoBatch)]
// in segment files `wal-<firstEpoch>.log`, each starting with a 16-byte header
//   "SVCDBWAL" [u32 formatVersion][u32 reserved].
// A record is whole or it is not there: recovery stops at the first frame whose length
// runs past the end or whose checksum fails, and truncates the file there.
import { closeSync, fsyncSync, openSync, readFileSync, statSync, ftruncateSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { Packr } from 'msgpackr';
import { SvcError } from '../protocol/errors.js';
import type { RedoBatch } from '../store/store.js';
import { checkFormatVersion, epochFileName, listEpochFiles, storageFormatVersion } from './format.js';

const MAGIC = Buffer.from('SVCDBWAL');
const HEADER_BYTES = 16;
const FRAME_BYTES = 8;
const packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false });

export const segmentName = (firstEpoch: number) => epochFileName('wal', firstEpoch, 'log');

/** Segment files in `dir`, oldest first, with the first epoch each may hold. */
export function listSegments(dir: string): { file: string; firstEpoch: number }[] {
  return listEpochFiles(dir, 'wal', 'log').map(({ file, epoch }) => ({ file, firstEpoch: epoch }));
}

export function encodeFrame(batch: RedoBatch): Buffer {
  const payload = packr.pack(batch);
  const frame = Buffer.allocUnsafe(FRAME_BYTES + payload.length);
  frame.writeUInt32LE(payload.length, 0);
  frame.writeUInt32LE(crc32(payload), 4);
  payload.copy(frame, FRAME_BYTES);
  return frame;
}

/** Appends frames to the newest segment; `sync()` makes everything appended durable. */
export class WalWriter {
  private fd: number;
  private unsynced = 0;
  bytesWritten = 0;
  readonly file: string;

  constructor(dir: string, firstEpoch: number) {
    this.file = join(dir, segmentName(firstEpoch));
    this.fd = openSync(this.file, 'a');
    if (statSync(this.file).size === 0) {
      const header = Buffer.alloc(HEADER_BYTES);
      MAGIC.copy(header, 0);
      header.writeUInt32LE(storageFormatVersion, 8);
      this.write(header);
      this.sync();
    }
    this.bytesWritten = statSync(this.file).size;
  }

  private write(bytes: Buffer): void {
    let done = 0;
    while (done < bytes.length) done += writeSync(this.fd, bytes, done, bytes.length - done);
    this.unsynced += bytes.length;
    this.bytesWritten += bytes.length;
  }

  append(batch: RedoBatch): void {
    const before = this.bytesWritten;
    try {
      this.write(encodeFrame(batch));
    } catch (err) {
      // Cut any partial frame so later appends start on a record boundary.
      try { ftruncateSync(this.fd, before); } catch { /* recovery truncates a torn tail anyway */ }
      this.bytesWritten = before;
      throw new SvcError('storage_error', `storage error: WAL append failed: ${(err as Error).message}`);
    }
  }

  /** fsync if anything was appended since the last sync (group commit calls this once per group). */
  sync(): void {
    if (this.unsynced === 0) return;
    try {
      fsyncSync(this.fd);
    } catch (err) {
      throw new SvcError('storage_error', `storage error: WAL fsync failed: ${(err as Error).message}`);
    }
    this.unsynced = 0;
  }

  close(): void {
    this.sync();
    closeSync(this.fd);
    this.fd = -1;
  }
}

/**
 * Read the whole records of a segment from byte `from` on. A torn or corrupt tail is cut
 * off (the file is truncated to the last whole record) unless `readOnly`, so a
 * half-written batch is never applied and the next append starts on a clean boundary.
 * Returns the offset after the last whole record, where the next read continues.
 */
export function readSegment(file: string, readOnly: boolean, from = 0): { batches: RedoBatch[]; end: number; truncatedBytes: number } {
  const bytes = readFileSync(file);
  if (bytes.length < HEADER_BYTES) {
    if (!readOnly && bytes.length > 0) truncateTo(file, 0);
    return { batches: [], end: 0, truncatedBytes: readOnly ? 0 : bytes.length };
  }
  if (!bytes.subarray(0, 8).equals(MAGIC)) throw new SvcError('storage_error', `storage error: ${file} is not a svcdb WAL segment`);
  checkFormatVersion(bytes.readUInt32LE(8), file);
  const batches: RedoBatch[] = [];
  let at = Math.max(from, HEADER_BYTES);
  while (at + FRAME_BYTES <= bytes.length) {
    const length = bytes.readUInt32LE(at);
    const sum = bytes.readUInt32LE(at + 4);
    const end = at + FRAME_BYTES + length;
    if (end > bytes.length) break;
    const payload = bytes.subarray(at + FRAME_BYTES, end);
    if (crc32(payload) !== sum) break;
    batches.push(packr.unpack(payload) as RedoBatch);
    at = end;
  }
  const torn = bytes.length - at;
  if (torn > 0 && !readOnly) truncateTo(file, at);
  return { batches, end: at, truncatedBytes: readOnly ? 0 : torn };
}

function truncateTo(file: string, length: number): void {
  const fd = openSync(file, 'r+');
  try {
    ftruncateSync(fd, length);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
