// The write-ahead log: one frame per committed write batch (its RedoBatch), in segment
// files `wal-<firstEpoch>.log`. Layout (little-endian):
//
//   segment header (32 bytes): "SVCDBWAL" | u32 formatVersion | u32 firstEpoch |
//                              u32 reserved x3 | u32 crc32(bytes 0..28)
//   frame header   (16 bytes): u32 payloadLength | u32 epoch |
//                              u32 crc32(payloadLength, epoch) | u32 crc32(payload)
//   payload: msgpackr(RedoBatch), then zero padding to a multiple of 8 bytes.
//
// Everything recovery trusts is checksummed: the header checksum covers a frame's length
// and epoch, so a flipped bit in a length cannot make the rest of the log look like a torn
// tail. Epochs run on by one from frame to frame, across segments.
//
// Reading tells three endings apart (scanSegment):
//   clean    the file ends at a frame boundary;
//   torn     the last write of a crash, cut short: after the last good frame there is
//            less than a frame header, or a frame whose checksummed length runs past the
//            end of the file. Only the last segment may end so, and only that tail may be
//            dropped;
//   corrupt  anything else: a frame whose whole extent is there but fails a checksum (even
//            the last one), a zero-filled region, a frame out of epoch order, a bad segment
//            header. Recovery stops and names the file and offset; nothing is changed.
import { closeSync, fstatSync, fsyncSync, ftruncateSync, openSync, readSync, writeSync } from 'node:fs';
import { basename, join } from 'node:path';
import { crc32 } from 'node:zlib';
import { Packr } from 'msgpackr';
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';
import type { RedoBatch } from '../store/store.js';
import { checkFormatVersion, epochFileName, fsyncDir, listEpochFiles, storageFormatVersion } from './format.js';

const MAGIC = Buffer.from('SVCDBWAL');
const SEGMENT_HEADER_BYTES = 32;
const FRAME_HEADER_BYTES = 16;
const FRAME_ALIGN = 8;
const packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false });

export const segmentName = (firstEpoch: number) => epochFileName('wal', firstEpoch, 'log');

/** Segment files in `dir`, oldest first, with the first epoch each may hold. */
export function listSegments(dir: string): { file: string; firstEpoch: number }[] {
  return listEpochFiles(dir, 'wal', 'log').map(({ file, epoch }) => ({ file, firstEpoch: epoch }));
}

/** A storage_error that names where the damage is; recovery refuses to start on it. */
export function corruption(file: string, offset: number, what: string): SvcError {
  return new SvcError('storage_error', `storage error: ${file} is corrupt at byte ${offset}: ${what}`);
}

export function segmentHeader(firstEpoch: number): Buffer {
  const header = Buffer.alloc(SEGMENT_HEADER_BYTES);
  MAGIC.copy(header, 0);
  header.writeUInt32LE(storageFormatVersion, 8);
  header.writeUInt32LE(firstEpoch, 12);
  header.writeUInt32LE(crc32(header.subarray(0, 28)), 28);
  return header;
}

const padded = (n: number) => (n + FRAME_ALIGN - 1) & ~(FRAME_ALIGN - 1);

/** A batch whose log record exceeds walFrameBytesMax: that batch's fault, not the storage's. */
export class FrameTooLarge extends SvcError {}

export function encodeFrame(batch: RedoBatch): Buffer {
  const payload = packr.pack(batch);
  if (payload.length > limits.walFrameBytesMax) {
    throw new FrameTooLarge('storage_error', `storage error: a write batch's log record of ${payload.length} bytes exceeds ${limits.walFrameBytesMax}`);
  }
  const frame = Buffer.alloc(FRAME_HEADER_BYTES + padded(payload.length));
  frame.writeUInt32LE(payload.length, 0);
  frame.writeUInt32LE(batch.epoch, 4);
  frame.writeUInt32LE(crc32(frame.subarray(0, 8)), 8);
  frame.writeUInt32LE(crc32(payload), 12);
  payload.copy(frame, FRAME_HEADER_BYTES);
  return frame;
}

// ---------------------------------------------------------------- reading

export interface SegmentScan {
  /** The frames' batches (empty when scanSegment was given onBatch). */
  batches: RedoBatch[];
  /** Epoch of the last good frame (0: none). */
  lastEpoch: number;
  /** Offset after the last good frame. */
  end: number;
  /** How the segment ends after `end`. */
  ending: 'clean' | 'torn' | 'corrupt';
  /** When corrupt: what and where. */
  problem: SvcError | null;
  /** Bytes in the file (what was scanned). */
  size: number;
  /** Segment header's first epoch (0 if the header is torn). */
  firstEpoch: number;
  /**
   * When corrupt at a whole frame whose own header checksum holds and names the epoch
   * expected next: that epoch (the files show it was committed); else 0.
   */
  damagedEpoch: number;
}

/** Reads a file in bounded pieces through one reusable buffer. */
class FileReader {
  private buffer = Buffer.allocUnsafe(1 << 20);
  constructor(readonly fd: number) {}

  /** `length` bytes at `offset` (a view valid until the next call). */
  read(offset: number, length: number): Buffer {
    if (length > this.buffer.length) this.buffer = Buffer.allocUnsafe(Math.max(length, this.buffer.length * 2));
    let done = 0;
    while (done < length) {
      const n = readSync(this.fd, this.buffer, done, length - done, offset + done);
      if (n === 0) break;
      done += n;
    }
    return this.buffer.subarray(0, done);
  }
}

interface FrameHead { length: number; epoch: number; payloadSum: number }

/** The frame header at `at` if its own checksum holds and its length is possible. */
function frameHeadAt(reader: FileReader, at: number, size: number): FrameHead | null {
  if (at + FRAME_HEADER_BYTES > size) return null;
  const h = reader.read(at, FRAME_HEADER_BYTES);
  if (crc32(h.subarray(0, 8)) !== h.readUInt32LE(8)) return null;
  const length = h.readUInt32LE(0);
  if (length === 0 || length > limits.walFrameBytesMax) return null;
  return { length, epoch: h.readUInt32LE(4), payloadSum: h.readUInt32LE(12) };
}

/**
 * The newest epoch after `after` of a whole, checksummed frame starting anywhere past
 * `from` (0: none); with `first`, stops at the first one found. A damaged frame with such
 * a frame after it is not a torn tail. Scans in 1 MiB windows; only on the failure path.
 */
function laterFrameEpoch(reader: FileReader, from: number, size: number, after: number, first: boolean): number {
  // Frames are 8-byte aligned (the segment header is 32 bytes, frames are padded).
  const window = 1 << 20;
  let newest = 0;
  for (let base = padded(from); base + FRAME_HEADER_BYTES <= size; base += window) {
    const bytes = Buffer.from(reader.read(base, Math.min(window + FRAME_HEADER_BYTES, size - base)));
    for (let i = 0; i + FRAME_HEADER_BYTES <= bytes.length && i < window; i += FRAME_ALIGN) {
      const epoch = bytes.readUInt32LE(i + 4);
      if (epoch <= Math.max(after, newest) || crc32(bytes.subarray(i, i + 8)) !== bytes.readUInt32LE(i + 8)) continue;
      const head = frameHeadAt(reader, base + i, size);
      if (head === null || base + i + FRAME_HEADER_BYTES + padded(head.length) > size) continue;
      if (crc32(reader.read(base + i + FRAME_HEADER_BYTES, head.length)) !== head.payloadSum) continue;
      newest = epoch;
      if (first) return newest;
    }
  }
  return newest;
}

/** The newest intact epoch past byte `from` of a segment (svc repair's count of what it loses). */
export function newestIntactEpoch(file: string, from: number): number {
  const fd = openSync(file, 'r');
  try {
    return laterFrameEpoch(new FileReader(fd), from, fstatSync(fd).size, 0, false);
  } finally {
    closeSync(fd);
  }
}

function allZero(reader: FileReader, from: number, size: number): boolean {
  for (let at = from; at < size; at += 1 << 20) {
    const chunk = reader.read(at, Math.min(1 << 20, size - at));
    for (let i = 0; i < chunk.length; i++) if (chunk[i] !== 0) return false;
  }
  return true;
}

/**
 * Scan a segment from byte `from` (0 = from the header; a follower continues where it
 * stopped). `afterEpoch` is the epoch the first frame must follow (0: the header's).
 * Decodes the frames and classifies the ending; never changes the file. `untilEpoch`: stop
 * (ending clean, `end` at its start) at the first whole frame of a later epoch.
 */
export function scanSegment(file: string, from = 0, afterEpoch = 0, onBatch?: (batch: RedoBatch) => void, untilEpoch = Infinity): SegmentScan {
  const fd = openSync(file, 'r');
  try {
    const reader = new FileReader(fd);
    const size = fstatSync(fd).size;
    const scan: SegmentScan = { batches: [], lastEpoch: 0, end: 0, ending: 'clean', problem: null, size, firstEpoch: 0, damagedEpoch: 0 };
    if (size < SEGMENT_HEADER_BYTES) {
      // A segment is created with its header in one write and fsynced before any frame: a
      // short one is the torn creation of an empty segment, unless it is zeros.
      scan.ending = size === 0 ? 'clean' : allZero(reader, 0, size) ? 'corrupt' : 'torn';
      if (scan.ending === 'corrupt') scan.problem = corruption(file, 0, 'the segment header is zero-filled');
      return scan;
    }
    const header = reader.read(0, SEGMENT_HEADER_BYTES);
    if (!header.subarray(0, 8).equals(MAGIC)) {
      scan.ending = 'corrupt';
      scan.problem = corruption(file, 0, 'not a svcdb WAL segment (bad magic)');
      return scan;
    }
    // An older format has no header checksum: its version decides first. A newer version
    // is believed only with a valid checksum (else it is a damaged byte).
    const version = header.readUInt32LE(8);
    if (version < storageFormatVersion) checkFormatVersion(version, file);
    if (crc32(header.subarray(0, 28)) !== header.readUInt32LE(28)) {
      scan.ending = 'corrupt';
      scan.problem = corruption(file, 0, 'the segment header fails its checksum');
      return scan;
    }
    checkFormatVersion(version, file);
    scan.firstEpoch = header.readUInt32LE(12);
    let expected = afterEpoch === 0 ? scan.firstEpoch : afterEpoch + 1;
    let at = Math.max(from, SEGMENT_HEADER_BYTES);
    scan.end = at;
    while (at < size) {
      const head = frameHeadAt(reader, at, size);
      const end = head === null ? -1 : at + FRAME_HEADER_BYTES + padded(head.length);
      const whole = head !== null && end <= size
        && crc32(reader.read(at + FRAME_HEADER_BYTES, head.length)) === head.payloadSum;
      if (!whole) {
        // A crash cuts the last write short: what follows the last good frame is shorter
        // than a frame header, or a frame whose (checksummed) length runs past the end of
        // the file. Anything else is damage, even at the very end: a frame whose whole
        // extent is there but fails its checksum, a header that fails its own, zeros.
        const cutShort = size - at < FRAME_HEADER_BYTES || (head !== null && end > size);
        if (cutShort) {
          scan.ending = 'torn';
        } else if (allZero(reader, at, size)) {
          scan.ending = 'corrupt';
          scan.problem = corruption(file, at, `${size - at} zero bytes where a frame should be`);
        } else if (laterFrameEpoch(reader, at + 1, size, expected - 1, true) > 0) {
          scan.ending = 'corrupt';
          scan.problem = corruption(file, at, `a damaged frame (epoch ${expected}) is followed by intact frames`);
        } else {
          scan.ending = 'corrupt';
          if (head !== null && head.epoch === expected) scan.damagedEpoch = head.epoch;
          scan.problem = corruption(file, at, head === null
            ? 'the frame header fails its checksum'
            : `the frame of epoch ${head.epoch} fails its checksum`);
        }
        return scan;
      }
      if (head.epoch !== expected) {
        scan.ending = 'corrupt';
        scan.problem = corruption(file, at, `frame holds epoch ${head.epoch}, expected ${expected}`);
        return scan;
      }
      // A follower stops before the frames the writer has not made durable yet.
      if (head.epoch > untilEpoch) return scan;
      // Decoded from a copy: msgpackr hands out binary values (the record bytes) as views
      // of its input, and the reader's buffer is reused for the next frame.
      const batch = packr.unpack(Buffer.from(reader.read(at + FRAME_HEADER_BYTES, head.length))) as RedoBatch;
      if (batch.epoch !== head.epoch) {
        scan.ending = 'corrupt';
        scan.problem = corruption(file, at, `record of epoch ${batch.epoch} in a frame of epoch ${head.epoch}`);
        return scan;
      }
      if (onBatch) onBatch(batch);
      else scan.batches.push(batch);
      scan.lastEpoch = head.epoch;
      expected++;
      at = end;
      scan.end = at;
    }
    return scan;
  } finally {
    closeSync(fd);
  }
}

/** Cut a torn tail off the last segment (the one thing recovery may drop), durably. */
export function truncateTornTail(file: string, end: number): void {
  const fd = openSync(file, 'r+');
  try {
    ftruncateSync(fd, end);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

// ---------------------------------------------------------------- writing

/** Fault injection for tests: the next N fsyncs / appends fail as a failing disk would. */
export const walFaults = { failSyncs: 0, failAppends: 0 };

/**
 * Appends frames to one segment at explicit offsets. `sync()` makes everything appended
 * durable. Frames appended since the last good sync stay in memory: after a failed fsync
 * the kernel may have dropped the dirty pages while reporting them clean, so a retry
 * writes them again before it syncs again.
 */
export class WalWriter {
  private fd: number;
  readonly file: string;
  readonly firstEpoch: number;
  /** End of the last frame written (the next frame goes here). */
  private end: number;
  /** End of what the last successful fsync covered. */
  private syncedEnd: number;
  /** Frames after syncedEnd, in order, for a rewrite after a failed fsync. */
  private unsynced: Buffer[] = [];
  /** Epoch of the newest frame appended (0: none yet in this segment). */
  lastEpoch: number;

  /**
   * Open segment `firstEpoch` in `dir` for appending at `end` (an existing segment after
   * recovery, whose last frame holds `lastEpoch`), or create it (end = 0).
   */
  constructor(dir: string, firstEpoch: number, end = 0, lastEpoch = 0) {
    this.file = join(dir, segmentName(firstEpoch));
    this.firstEpoch = firstEpoch;
    this.lastEpoch = lastEpoch;
    const creating = end === 0;
    this.fd = openSync(this.file, creating ? 'w' : 'r+');
    try {
      if (creating) {
        writeAll(this.fd, segmentHeader(firstEpoch), 0);
        fsyncSync(this.fd);
        fsyncDir(dir); // the new name must survive a crash as well
        end = SEGMENT_HEADER_BYTES;
      } else {
        ftruncateSync(this.fd, end);
        fsyncSync(this.fd);
      }
    } catch (err) {
      closeSync(this.fd);
      throw new SvcError('storage_error', `storage error: cannot open WAL segment ${basename(this.file)}: ${(err as Error).message}`);
    }
    this.end = end;
    this.syncedEnd = end;
  }

  /** Bytes in the segment. */
  get bytes(): number {
    return this.end;
  }

  /** Write the batch's frame. A failure leaves the log as it was (the batch rolls back). */
  append(batch: RedoBatch): void {
    if (this.lastEpoch !== 0 && batch.epoch !== this.lastEpoch + 1) {
      throw new SvcError('internal_error', `internal error: WAL frame of epoch ${batch.epoch} after ${this.lastEpoch}`);
    }
    const frame = encodeFrame(batch);
    try {
      if (walFaults.failAppends > 0) {
        walFaults.failAppends--;
        writeAll(this.fd, frame.subarray(0, frame.length >>> 1), this.end); // half a frame lands
        throw new Error('injected append failure');
      }
      writeAll(this.fd, frame, this.end);
    } catch (err) {
      // Whatever part of the frame landed lies beyond `end`: the next frame overwrites it,
      // and a crash before that leaves it as a torn tail. Trim it when possible.
      try { ftruncateSync(this.fd, this.end); } catch { /* see above */ }
      throw new SvcError('storage_error', `storage error: WAL append failed: ${(err as Error).message}`);
    }
    this.end += frame.length;
    this.unsynced.push(frame);
    this.lastEpoch = batch.epoch;
  }

  /** fsync what was appended since the last sync. Throws storage_error; call again to retry. */
  sync(): void {
    if (this.unsynced.length === 0) return;
    try {
      if (walFaults.failSyncs > 0) {
        walFaults.failSyncs--;
        throw new Error('injected fsync failure (EIO)');
      }
      fsyncSync(this.fd);
    } catch (err) {
      // Write the frames again so the retry's fsync covers bytes we know are in the cache.
      this.rewriteUnsynced();
      throw new SvcError('storage_error', `storage error: WAL fsync failed: ${(err as Error).message}`);
    }
    this.unsynced = [];
    this.syncedEnd = this.end;
  }

  private rewriteUnsynced(): void {
    let at = this.syncedEnd;
    try {
      for (const frame of this.unsynced) {
        writeAll(this.fd, frame, at);
        at += frame.length;
      }
    } catch { /* the next retry writes them again */ }
  }

  /** Sync and close (a clean stop, or rotation to a new segment). */
  close(): void {
    if (this.fd < 0) return;
    this.sync();
    closeSync(this.fd);
    this.fd = -1;
  }

  /** Close without syncing (after an unrecoverable failure; recovery decides later). */
  abandon(): void {
    if (this.fd < 0) return;
    try { closeSync(this.fd); } catch { /* gone */ }
    this.fd = -1;
  }
}

function writeAll(fd: number, bytes: Uint8Array, position: number): void {
  let done = 0;
  while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done, position + done);
}
