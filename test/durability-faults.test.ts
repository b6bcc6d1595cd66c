// Fault injection on disk storage: damage is refused with every file intact (or gone
// around without loss), a torn tail is the only thing dropped, svc repair keeps a copy and
// says what it lost, a failing fsync makes the writer refuse new writes and retry until
// every waiting write is durable, and failed snapshots are retried and reported.
import { createHash } from 'node:crypto';
import { appendFileSync, copyFileSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openDatabase, SvcError, type Database } from '../src/index.js';
import { DiskWriter, repairDirectory } from '../src/durability/disk-storage.js';
import type { StorageHealth } from '../src/durability/durable.js';
import { executeRequest, noFlags } from '../src/exec/request.js';
import { snapshotFaults } from '../src/durability/snapshot.js';
import { walFaults } from '../src/durability/wal.js';
import { limits } from '../src/limits.js';
import { addN, count, i64, nodes, q, read, write } from './helpers/requests.js';
import { tempDirs } from './helpers/temp-dirs.js';
import { eventually } from './helpers/eventually.js';

const tempDir = tempDirs('faults');
afterEach(() => {
  walFaults.failSyncs = walFaults.failAppends = 0;
  snapshotFaults.failWrites = 0;
  snapshotFaults.buildIdentity = null;
});

const countAll = read([q('c', count(nodes('all')))], ['c']);
const addOne = (n: number) => write([q('x', addN('U', [['n', i64(n)]]))], ['x']);
const dataFiles = (dir: string) => readdirSync(dir).filter((f) => /^(wal|snapshot)-/.test(f)).sort();
const walFiles = (dir: string) => dataFiles(dir).filter((f) => f.startsWith('wal-')).map((f) => join(dir, f));
const snapshotNames = (dir: string) => dataFiles(dir).filter((f) => f.startsWith('snapshot-'));

/** A disk database (a snapshot due every 300 WAL bytes) given writes 0..n-1 while every snapshot fails. */
async function writeWhileSnapshotsFail(dir: string, n: number): Promise<Database> {
  const db = await openDatabase({ storage: 'disk', path: dir, snapshotWalBytes: 300 });
  snapshotFaults.failWrites = 1000;
  for (let i = 0; i < n; i++) await db.query(addOne(i));
  return db;
}

/** The files a crash would leave: the data files, without the lock (its holder is gone). */
function crashCopy(dir: string): string {
  const copy = tempDir();
  for (const f of dataFiles(dir)) copyFileSync(join(dir, f), join(copy, f));
  return copy;
}

function hashes(dir: string): Map<string, string> {
  return new Map(dataFiles(dir).map((f) => [f, createHash('sha256').update(readFileSync(join(dir, f))).digest('hex')]));
}

async function openFails(dir: string): Promise<SvcError> {
  const err = await openDatabase({ storage: 'disk', path: dir }).then(async (db) => { await db.close(); return null; }, (e: unknown) => e);
  expect(err, 'the damaged directory opened').toBeInstanceOf(SvcError);
  return err as SvcError;
}

async function values(db: Database): Promise<number[]> {
  const out = await db.query(read([q('v', { values: { input: nodes('all'), properties: ['n'] } })], ['v'])) as { v: { n: number }[] };
  return out.v.map((r) => r.n).sort((a, b) => a - b);
}

/** A directory whose newest segment holds `n` frames after a snapshot (writes 0..n-1). */
async function walWith(n: number, options: { snapshotWalBytes?: number } = {}): Promise<string> {
  const dir = tempDir();
  let db = await openDatabase({ storage: 'disk', path: dir });
  await db.close(); // a snapshot first, so the next frames sit alone in one segment
  db = await openDatabase({ storage: 'disk', path: dir, ...options });
  for (let i = 0; i < n; i++) await db.query(addOne(i));
  return crashCopy(dir);
}

/** Byte offsets of the frames of a segment (16-byte headers, payload padded to 8). */
function frameOffsets(file: string): number[] {
  const bytes = readFileSync(file);
  const out: number[] = [];
  for (let at = 32; at + 16 <= bytes.length;) {
    out.push(at);
    at += 16 + ((bytes.readUInt32LE(at) + 7) & ~7);
  }
  return out;
}

describe('WAL damage', () => {
  it('a flipped byte in a frame followed by intact frames is refused, naming the file and offset, and changes no file', async () => {
    const dir = await walWith(50);
    const wal = walFiles(dir).at(-1)!;
    const frames = frameOffsets(wal);
    expect(frames.length).toBe(50);
    for (const [where, offset] of [['header', frames[20]! + 1], ['payload', frames[20]! + 20]] as const) {
      const copy = crashCopy(dir);
      const target = join(copy, wal.split('/').at(-1)!);
      const bytes = readFileSync(target);
      bytes[offset] ^= 0x40;
      writeFileSync(target, bytes);
      const before = hashes(copy);
      const err = await openFails(copy);
      expect(err.code, where).toBe('storage_error');
      expect(err.msg).toContain(wal.split('/').at(-1)!);
      expect(err.msg).toContain(`byte ${frames[20]}`);
      expect(err.msg).toContain('svc repair');
      expect(hashes(copy)).toEqual(before);
    }
  });

  it('a zero-filled region after the last frame is refused, not mistaken for a torn tail', async () => {
    const dir = await walWith(5);
    appendFileSync(walFiles(dir).at(-1)!, Buffer.alloc(4096));
    const before = hashes(dir);
    expect((await openFails(dir)).msg).toMatch(/zero bytes/);
    expect(hashes(dir)).toEqual(before);
  });

  it('a zero-filled last frame is refused too', async () => {
    const dir = await walWith(5);
    const wal = walFiles(dir).at(-1)!;
    const frames = frameOffsets(wal);
    const bytes = readFileSync(wal);
    bytes.fill(0, frames[4]!);
    writeFileSync(wal, bytes);
    expect((await openFails(dir)).msg).toContain(`byte ${frames[4]}`);
  });

  it('a tail cut anywhere inside the last frame drops exactly that frame', async () => {
    const dir = await walWith(6);
    const wal = walFiles(dir).at(-1)!;
    const frames = frameOffsets(wal);
    const size = statSync(wal).size;
    for (const cut of [frames[5]! + 1, frames[5]! + 15, frames[5]! + 17, size - 1]) {
      const copy = crashCopy(dir);
      truncateSync(join(copy, wal.split('/').at(-1)!), cut);
      const db = await openDatabase({ storage: 'disk', path: copy });
      expect(await values(db)).toEqual([0, 1, 2, 3, 4]);
      await db.query(addOne(9)); // appends after the cut and survives
      await db.close();
      const again = await openDatabase({ storage: 'disk', path: copy });
      expect(await values(again)).toEqual([0, 1, 2, 3, 4, 9]);
      await again.close();
    }
  });

  it('damage at the end of a segment that is not the newest is refused when that segment is needed, ignored when a snapshot covers it', async () => {
    const dir = tempDir();
    const db = await openDatabase({ storage: 'disk', path: dir, snapshotWalBytes: 600 });
    for (let i = 0; i < 30; i++) await db.query(addOne(i));
    await db.close();
    const copy = crashCopy(dir);
    const segments = walFiles(copy);
    expect(segments.length).toBeGreaterThanOrEqual(2); // the previous generation's WAL is kept
    // Damage the last frame of the older segment: a later segment proves it is not a torn tail.
    const older = segments[0]!;
    const frames = frameOffsets(older);
    const bytes = readFileSync(older);
    bytes[frames.at(-1)! + 18] ^= 0x01;
    writeFileSync(older, bytes);
    // The newest snapshot covers that segment, so it is not needed: recovery still opens.
    const covered = crashCopy(copy);
    const opened = await openDatabase({ storage: 'disk', path: covered });
    expect(await values(opened)).toEqual(Array.from({ length: 30 }, (_, i) => i));
    await opened.close();
    // Without the newest snapshot the segment is needed, and a later segment proves its end
    // is damage, not a torn tail.
    const snaps = snapshotNames(copy);
    rmSync(join(copy, snaps.at(-1)!));
    const before = hashes(copy);
    const err = await openFails(copy);
    expect(err.msg).toContain(`${older.split('/').at(-1)!} is corrupt at byte ${frames.at(-1)}`);
    expect(err.msg).toMatch(/fails its checksum/);
    expect(hashes(copy)).toEqual(before);
  });
});

describe('index catalog in the WAL', () => {
  const byN = (n: number) => ({ and: { predicates: [
    { eq: { left: { property: '$label' }, right: { constant: { string: 'U' } } } },
    { eq: { left: { property: 'n' }, right: { constant: { i64: n } } } }] } });
  const idsOf = (predicate: unknown) => read([q('r', { id: { input: { nodes_where: { predicate } } } })], ['r']);

  it('a crash at any frame boundary during and after a build recovers an index that answers like a scan; a flipped catalog frame is refused with every file intact', async () => {
    const dir = tempDir();
    let db = await openDatabase({ storage: 'disk', path: dir });
    await db.close(); // a snapshot first: the frames below sit alone in one segment
    db = await openDatabase({ storage: 'disk', path: dir });
    for (let i = 0; i < 20; i++) await db.query(addOne(i % 4));
    const receipt = await db.query(write([q('r', { create_index: { spec: { node_equality: { label: 'U', property: 'n' } }, if_not_exists: true } })], ['r'])) as { r: { operation_id: string } };
    const poll = read([q('op', { get_index_operation: { operation_id: receipt.r.operation_id } })], ['op']);
    for (let i = 0; ((await db.query(poll)) as { op: { status: string } }).op.status !== 'succeeded'; i++) {
      expect(i).toBeLessThan(500);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    for (let i = 20; i < 25; i++) await db.query(addOne(i % 4)); // maintained by the active index
    const crashed = crashCopy(dir); // the writer still runs: a kill -9 leaves these files
    await db.close();

    const wal = walFiles(crashed).at(-1)!.split('/').at(-1)!;
    const frames = frameOffsets(join(crashed, wal));
    expect(frames.length).toBeGreaterThan(25); // 25 writes plus the index's catalog batches
    // Every prefix of the log (a crash after any frame) opens, and whatever index state it
    // holds answers like a scan once its build (if any) has finished.
    for (const cut of [...frames.slice(19), statSync(join(crashed, wal)).size]) {
      const copy = crashCopy(crashed);
      truncateSync(join(copy, wal), cut);
      const again = await openDatabase({ storage: 'disk', path: copy });
      for (let i = 0; i < 500; i++) {
        const op = await again.queryRaw(poll);
        if (op.status !== 200 || /"status":"(succeeded|aborted|blocked)"/.test(op.body)) break;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      for (const n of [0, 3]) {
        expect((await again.query(idsOf(byN(n)))).r, `cut at ${cut}`).toEqual((await again.query(idsOf({ or: { predicates: [byN(n)] } }))).r);
      }
      await again.close();
    }
    // Nothing acknowledged is lost, and the index is active.
    const whole = await openDatabase({ storage: 'disk', path: crashCopy(crashed) });
    expect(await values(whole)).toEqual(Array.from({ length: 25 }, (_, i) => i % 4).sort((a, b) => a - b));
    expect(whole.explain(idsOf(byN(1)))[0]!.access).toBe('index_eq');
    await whole.close();

    // A flipped byte in the frame that created the index (frame 20), with intact frames after it.
    const damaged = crashCopy(crashed);
    const bytes = readFileSync(join(damaged, wal));
    bytes[frames[20]! + 20] ^= 0x40;
    writeFileSync(join(damaged, wal), bytes);
    const before = hashes(damaged);
    expect((await openFails(damaged)).code).toBe('storage_error');
    expect(hashes(damaged)).toEqual(before);
  });
});

describe('snapshot damage', () => {
  /** Two snapshot generations and the WAL after the older one; writes 0..n-1. */
  async function twoGenerations(n: number): Promise<string> {
    const dir = tempDir();
    const db = await openDatabase({ storage: 'disk', path: dir, snapshotWalBytes: 900 });
    for (let i = 0; i < n; i++) await db.query(addOne(i));
    await db.close(); // the stop's snapshot is the newest generation, the last periodic one the older
    const copy = crashCopy(dir);
    expect(snapshotNames(copy).length).toBe(2);
    return copy;
  }

  it('a damaged newest snapshot is gone around through the previous one and the WAL, losing nothing', async () => {
    for (const offset of [3, 9, 20, 40, 200, -10]) {
      const dir = await twoGenerations(40);
      const newest = join(dir, snapshotNames(dir).at(-1)!);
      const bytes = readFileSync(newest);
      bytes[offset < 0 ? bytes.length + offset : offset] ^= 0x10;
      writeFileSync(newest, bytes);
      const db = await openDatabase({ storage: 'disk', path: dir });
      expect(await values(db), `flip at ${offset}`).toEqual(Array.from({ length: 40 }, (_, i) => i));
      await db.close();
    }
  });

  it('when no older generation reaches its epoch, a damaged snapshot is refused with every file intact', async () => {
    const dir = await twoGenerations(40);
    const snaps = snapshotNames(dir);
    // Without the older snapshot's WAL, nothing reaches the newest snapshot's epoch.
    for (const wal of walFiles(dir)) rmSync(wal);
    const newest = join(dir, snaps.at(-1)!);
    const bytes = readFileSync(newest);
    bytes[bytes.length - 5] ^= 0x01;
    writeFileSync(newest, bytes);
    const before = hashes(dir);
    const err = await openFails(dir);
    expect(err.msg).toContain(snaps.at(-1)!);
    expect(err.msg).toMatch(/fails its checksum/);
    expect(hashes(dir)).toEqual(before);
  });

  it('when every snapshot is damaged the refusal names the snapshot damage, not only a WAL gap (a probe)', async () => {
    const dir = await twoGenerations(40);
    const snaps = snapshotNames(dir);
    for (const name of snaps) {
      const bytes = readFileSync(join(dir, name));
      bytes[bytes.length - 5] ^= 0x01;
      writeFileSync(join(dir, name), bytes);
    }
    const err = await openFails(dir);
    expect(err.msg).toMatch(/WAL gap/);
    expect(err.msg).toContain(snaps.at(-1)!);
    expect(err.msg).toMatch(/fails its checksum/);
  });

  it('svc repair counts the frames of the segments past a WAL gap as lost (a probe: it counted only up to the damaged snapshot)', async () => {
    const first = await twoGenerations(40);
    // Five writes past the newest snapshot, left in the WAL by a crash.
    const db = await openDatabase({ storage: 'disk', path: first });
    for (let i = 40; i < 45; i++) await db.query(addOne(i));
    const dir = crashCopy(first);
    await db.close();
    const lastWal = walFiles(dir).at(-1)!;
    const lastFrame = frameOffsets(lastWal).at(-1);
    // The newest epoch the files hold: the last frame's, or the newest snapshot's.
    const newest = lastFrame === undefined
      ? Number(/\d{10}/.exec(snapshotNames(dir).at(-1)!)![0])
      : readFileSync(lastWal).readUInt32LE(lastFrame + 4);
    for (const name of snapshotNames(dir)) {
      const bytes = readFileSync(join(dir, name));
      bytes[bytes.length - 5] ^= 0x01;
      writeFileSync(join(dir, name), bytes);
    }
    const report = await repairDirectory(dir, join(tempDir(), 'copy'));
    expect(report.damage).toMatch(/WAL gap/);
    expect(report.newestEpochSeen).toBe(newest);
  });

  it('a snapshot whose name says a newer epoch than it holds is refused, not trusted (a probe: pruning then deleted the WAL and the newer snapshots)', async () => {
    const dir = await twoGenerations(40);
    const newest = snapshotNames(dir).at(-1)!;
    const epoch = Number(/\d{10}/.exec(newest)![0]);
    const misnamed = `snapshot-${String(epoch + 1000).padStart(10, '0')}.bin`;
    copyFileSync(join(dir, newest), join(dir, misnamed));
    const before = hashes(dir);
    const err = await openFails(dir);
    expect(err.msg).toContain(misnamed);
    expect(err.msg).toMatch(/holds epoch/);
    expect(hashes(dir)).toEqual(before);
    // Without the stray file everything is there.
    rmSync(join(dir, misnamed));
    const db = await openDatabase({ storage: 'disk', path: dir });
    expect(await values(db)).toEqual(Array.from({ length: 40 }, (_, i) => i));
    await db.close();
  });
});

describe('svc repair', () => {
  it('keeps a copy, recovers what precedes the damage and counts what it lost', async () => {
    const dir = await walWith(50);
    const wal = walFiles(dir).at(-1)!;
    const frames = frameOffsets(wal);
    const bytes = readFileSync(wal);
    bytes[frames[30]! + 20] ^= 0xff;
    writeFileSync(wal, bytes);
    const before = hashes(dir);
    await openFails(dir);
    const copy = join(tempDir(), 'copy');
    const report = await repairDirectory(dir, copy);
    expect(hashes(copy)).toEqual(before);
    expect(report.damage).toContain(`byte ${frames[30]}`);
    const db = await openDatabase({ storage: 'disk', path: dir });
    expect(await values(db)).toEqual(Array.from({ length: 30 }, (_, i) => i));
    // What it could not recover: the damaged frame and the 19 intact ones after it.
    expect(report.newestEpochSeen - report.epoch).toBe(20);
    await db.query(addOne(99));
    await db.close();
    const again = await openDatabase({ storage: 'disk', path: dir });
    expect((await values(again)).at(-1)).toBe(99);
    await again.close();
  });

  it('counts a damaged last frame whose header names its epoch as lost (a probe: it said nothing was lost)', async () => {
    const dir = await walWith(5);
    const wal = walFiles(dir).at(-1)!;
    const last = frameOffsets(wal).at(-1)!;
    const bytes = readFileSync(wal);
    bytes[last + 20] ^= 0xff; // the payload: the frame header (and its epoch) still verifies
    writeFileSync(wal, bytes);
    await openFails(dir);
    const report = await repairDirectory(dir, join(tempDir(), 'copy'));
    expect(report.damage).toContain(`byte ${last}`);
    const db = await openDatabase({ storage: 'disk', path: dir });
    expect(await values(db)).toEqual([0, 1, 2, 3]);
    await db.close();
    // Write 4 was a whole frame on disk (a crash does not rot one): it is known to be lost.
    expect(report.newestEpochSeen - report.epoch).toBe(1);
  });

  it('refuses a --copy-to that exists instead of overwriting what it holds (a probe: an earlier copy was overwritten)', async () => {
    const dir = await walWith(5);
    const wal = walFiles(dir).at(-1)!;
    const bytes = readFileSync(wal);
    bytes[frameOffsets(wal)[2]! + 20] ^= 0xff;
    writeFileSync(wal, bytes);
    const before = hashes(dir);
    const copy = tempDir();
    const earlier = join(copy, wal.slice(wal.lastIndexOf('/') + 1));
    writeFileSync(earlier, 'an earlier copy');
    const err = await repairDirectory(dir, copy).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(SvcError);
    expect((err as SvcError).msg).toMatch(/already exists/);
    expect(readFileSync(earlier, 'utf8')).toBe('an earlier copy');
    expect(hashes(dir)).toEqual(before);
  });

  it('leaves a healthy directory alone', async () => {
    const dir = await walWith(3);
    const before = hashes(dir);
    const report = await repairDirectory(dir, join(tempDir(), 'copy'));
    expect(report.damage).toBeNull();
    expect(hashes(dir)).toEqual(before);
  });
});

describe('failing storage', () => {
  it('a failing fsync refuses new writes, retries, and acknowledges the waiting writes once durable', async () => {
    const dir = tempDir();
    const db = await openDatabase({ storage: 'disk', path: dir });
    await db.query(addOne(0));
    walFaults.failSyncs = 3;
    // Both commit in memory and wait for the fsync that keeps failing.
    const waiting = [db.queryRaw(addOne(1)), db.queryRaw(addOne(2))];
    await new Promise((r) => setTimeout(r, 5));
    // Not durable: readers do not see them yet, and a new write is refused before it applies.
    expect(await db.query(countAll)).toEqual({ c: 1 });
    const refused = await db.queryRaw(addOne(3));
    expect(refused.status).toBe(500);
    expect(JSON.parse(refused.body).error).toBe('storage_error');
    expect(JSON.parse(refused.body).msg).toMatch(/not applied/);
    const answers = await Promise.all(waiting);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    expect(walFaults.failSyncs).toBe(0);
    expect(await values(db)).toEqual([0, 1, 2]);
    await db.query(addOne(4));
    const copy = crashCopy(dir);
    await db.close();
    const again = await openDatabase({ storage: 'disk', path: copy });
    expect(await values(again)).toEqual([0, 1, 2, 4]);
    await again.close();
  });

  it('a failed append rolls the batch back and leaves the log appendable', async () => {
    const dir = tempDir();
    const db = await openDatabase({ storage: 'disk', path: dir });
    await db.query(addOne(0));
    walFaults.failAppends = 1;
    const failed = await db.queryRaw(addOne(1));
    expect(failed.status).toBe(500);
    expect(JSON.parse(failed.body).error).toBe('storage_error');
    await db.query(addOne(2));
    expect(await values(db)).toEqual([0, 2]);
    const copy = crashCopy(dir);
    await db.close();
    const again = await openDatabase({ storage: 'disk', path: copy });
    expect(await values(again)).toEqual([0, 2]);
    await again.close();
  });

  it('a failed append makes the storage not ready, said once in the log, until an append succeeds (a full disk freed)', async () => {
    const writer = DiskWriter.open(tempDir());
    const logged: string[] = [];
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => { logged.push(String(chunk)); return true; });
    const changes: StorageHealth[] = [];
    const stop = writer.onHealthChange((h) => changes.push(h));
    const writeOne = (n: number) => executeRequest(writer.store, JSON.stringify(addOne(n)), noFlags, 'writer', { queryTimeoutMs: 10_000, logBatch: (b) => writer.logBatch(b) });
    try {
      expect((writeOne(0) as { status: number }).status).toBe(200);
      walFaults.failAppends = 3;
      for (let i = 1; i <= 3; i++) expect((writeOne(i) as { body: string }).body).toContain('WAL append failed');
      expect(writer.health()).toMatchObject({ ready: false, problem: expect.stringContaining('WAL append failed') });
      expect(logged.filter((l) => l.includes('storage NOT READY'))).toHaveLength(1);
      expect((writeOne(4) as { status: number }).status).toBe(200);
      expect(writer.health()).toEqual({ ready: true, problem: null });
      expect(logged.filter((l) => /storage ready\n/.test(l))).toHaveLength(1);
      expect(changes.map((h) => h.ready)).toEqual([false, true]);
      await writer.sync();
    } finally {
      stop();
      stderr.mockRestore();
      await writer.close();
    }
  });

  it('a batch too large to log is refused alone: the storage stays ready (a probe: one such batch made it not ready)', async () => {
    const writer = DiskWriter.open(tempDir());
    const saved = limits.walFrameBytesMax;
    const writeBig = (n: number) => executeRequest(writer.store, JSON.stringify(write([q('x', addN('U', [['s', { value: { string: 'x'.repeat(n) } }]]))], ['x'])), noFlags, 'writer', { queryTimeoutMs: 10_000, logBatch: (b) => writer.logBatch(b) });
    try {
      (limits as { walFrameBytesMax: number }).walFrameBytesMax = 4096;
      expect((writeBig(10_000) as { body: string }).body).toContain('exceeds 4096');
      expect(writer.health()).toEqual({ ready: true, problem: null });
      expect((writeBig(10) as { status: number }).status).toBe(200);
      await writer.sync();
    } finally {
      (limits as { walFrameBytesMax: number }).walFrameBytesMax = saved;
      await writer.close();
    }
  });

  it('a failed snapshot is retried with backoff, not on every commit, and a failed stop snapshot is reported', async () => {
    const dir = tempDir();
    const db = await writeWhileSnapshotsFail(dir, 40);
    // 40 commits past the threshold, but retries wait out their backoff.
    expect(1000 - snapshotFaults.failWrites).toBeLessThan(10);
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    const err = await db.close().then(() => null, (e: unknown) => e);
    expect((err as SvcError).code).toBe('storage_error');
    expect((err as SvcError).msg).toMatch(/snapshot at stop failed/);
    snapshotFaults.failWrites = 0;
    const again = await openDatabase({ storage: 'disk', path: dir });
    expect(await values(again)).toEqual(Array.from({ length: 40 }, (_, i) => i));
    await again.close();
  });
});

describe('the log left by snapshots that failed', () => {
  it('counts toward the next snapshot whole after a restart, not only its newest segment', async () => {
    const dir = tempDir();
    // Each attempt starts a new segment before it writes the snapshot, as a crash mid-way would leave them.
    const db = await writeWhileSnapshotsFail(dir, 40);
    await db.close().catch(() => undefined); // its stop snapshot fails too
    snapshotFaults.failWrites = 0;
    const segments = walFiles(dir);
    expect(segments.length, 'several segments, no snapshot').toBeGreaterThan(2);
    expect(snapshotNames(dir)).toEqual([]);
    const sizes = segments.map((f) => statSync(f).size);
    const total = sizes.reduce((a, b) => a + b, 0), newest = sizes.at(-1)!;
    // A threshold the whole log passes and the newest segment with another write does not.
    const again = await openDatabase({ storage: 'disk', path: dir, snapshotWalBytes: total });
    expect(newest + 200, 'the newest segment alone stays below it').toBeLessThan(total);
    await again.query(addOne(40));
    await eventually(() => snapshotNames(dir).length > 0, 'a snapshot is written', { timeoutMs: 2_000, intervalMs: 20 });
    expect(snapshotNames(dir), 'the first write after the restart snapshots').toHaveLength(1);
    expect(await values(again)).toEqual(Array.from({ length: 41 }, (_, i) => i));
    await again.close();
  });
});

describe('a snapshot thread started after an upgrade in place', () => {
  it('refuses to write a snapshot when the installed files changed since the start, and the log keeps every write', async () => {
    const dir = tempDir();
    const db = await openDatabase({ storage: 'disk', path: dir, snapshotWalBytes: 300 });
    // The snapshot thread starts on the first snapshot; by then the install was replaced.
    snapshotFaults.buildIdentity = 'an install replaced since';
    for (let i = 0; i < 20; i++) await db.query(addOne(i));
    expect(snapshotNames(dir), 'no snapshot written').toEqual([]);
    const err = await db.close().then(() => null, (e: unknown) => e);
    expect((err as SvcError).code).toBe('storage_error');
    expect((err as SvcError).msg).toMatch(/snapshot at stop failed.*snapshot thread: svcdb's installed files changed since this server started/);
    snapshotFaults.buildIdentity = null;
    const again = await openDatabase({ storage: 'disk', path: dir });
    expect(await values(again)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    await again.close();
  });
});

describe('disk followers', () => {
  it('open while the writer snapshots constantly, and never skip a batch', async () => {
    const dir = tempDir();
    const db = await openDatabase({ storage: 'disk', path: dir, snapshotWalBytes: 400 });
    let writing = true;
    let written = 0;
    const load = (async () => {
      while (writing) await db.query(addOne(written++));
    })();
    try {
      for (let i = 0; i < 15; i++) {
        const reader = await openDatabase({ storage: 'disk', path: dir, mode: 'reader' });
        const seen = await values(reader);
        // A prefix of what was written: nothing skipped, nothing half there.
        expect(seen).toEqual(Array.from({ length: seen.length }, (_, k) => k));
        await reader.close();
      }
    } finally {
      writing = false;
      await load;
    }
    const reader = await openDatabase({ storage: 'disk', path: dir, mode: 'reader' });
    expect(await values(reader)).toEqual(Array.from({ length: written }, (_, k) => k));
    await reader.close();
    await db.close();
  });

  it('a follower that meets a damaged frame stops there and reports it, never skipping', async () => {
    const dir = tempDir();
    const db = await openDatabase({ storage: 'disk', path: dir });
    await db.close();
    const writer = await openDatabase({ storage: 'disk', path: dir });
    await writer.query(addOne(0));
    const reader = await openDatabase({ storage: 'disk', path: dir, mode: 'reader' });
    expect(await values(reader)).toEqual([0]);
    for (let i = 1; i < 6; i++) await writer.query(addOne(i));
    const wal = walFiles(dir).at(-1)!;
    const frames = frameOffsets(wal);
    const bytes = readFileSync(wal);
    bytes[frames[2]! + 20] ^= 0x01; // the frame of write 2, with intact frames after it
    writeFileSync(wal, bytes);
    // The damage must be seen on several refreshes over a second before the follower
    // believes it (a frame still being written looks damaged for a moment): five queries at
    // once refresh five times, and do not stop it.
    for (let i = 0; i < 5; i++) expect(await values(reader)).toEqual([0, 1]);
    expect(reader.health()).toEqual({ ready: true, problem: null });
    // Then it stops following, and still answers from what it applied, as a reader server
    // does: never skipping write 2, never failing the queries.
    await eventually(async () => {
      expect(await values(reader)).toEqual([0, 1]);
      return reader.health().ready ? null : true;
    }, 'the follower believes the damage', { timeoutMs: 10_000, intervalMs: 100 });
    expect(reader.health().problem).toContain(`byte ${frames[2]}`);
    expect(await values(reader)).toEqual([0, 1]);
    await writer.close();
    await reader.close();
  });
});
