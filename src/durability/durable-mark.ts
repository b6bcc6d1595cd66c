// The newest epoch a disk writer has made durable, for the followers of its directory.
//
// A write batch's WAL frame is in the file as soon as it is written, before the fsync of its
// group commit; the writer publishes the batch to its own readers only after that fsync. A
// follower reading the file could apply the frame earlier, and serve a batch an operating
// system crash could still take away (a consistency probe: 200 of 200 writes visible on a
// follower before their fsync). So after each fsync the writer overwrites this small file
// with the durable epoch, and followers apply frames up to it only (docs/durability.md §4).
// It is not fsynced itself: after a crash it can only be behind, and the writer rewrites it
// when it opens the directory again.
import { closeSync, openSync, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export const DURABLE_MARK_FILE = 'durable-epoch';

/** The writer's side: one 8-byte record `[epoch, ~epoch]` at offset 0, rewritten in place. */
export class DurableMark {
  private readonly fd: number;
  private readonly record = Buffer.alloc(8);

  constructor(dir: string, epoch: number) {
    this.fd = openSync(join(dir, DURABLE_MARK_FILE), 'w');
    this.write(epoch);
  }

  write(epoch: number): void {
    this.record.writeUInt32LE(epoch, 0);
    this.record.writeUInt32LE(~epoch >>> 0, 4);
    writeSync(this.fd, this.record, 0, 8, 0);
  }

  close(): void {
    closeSync(this.fd);
  }
}

/**
 * A follower's side: the durable epoch; null when there is no mark (a directory a writer
 * of an older version wrote: every whole frame is taken, as before); undefined when the
 * record was read while being rewritten (try again).
 */
export function readDurableMark(dir: string): number | null | undefined {
  let fd: number;
  try {
    fd = openSync(join(dir, DURABLE_MARK_FILE), 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  try {
    const record = Buffer.alloc(8);
    if (readSync(fd, record, 0, 8, 0) !== 8) return undefined;
    const epoch = record.readUInt32LE(0);
    return record.readUInt32LE(4) === (~epoch >>> 0) ? epoch : undefined;
  } finally {
    closeSync(fd);
  }
}
