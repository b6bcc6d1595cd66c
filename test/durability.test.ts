// Disk storage: restart, torn and corrupt WAL tails, the single-writer lock, read-only
// handles, format versions, a full file system and kill -9 during a write load.
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { openDatabase, SvcError } from '../src/index.js';
import { addN, count, i64, nodes, q, read, str, write } from './helpers/requests.js';
import { dropWriterLock } from './helpers/writer-lock.js';
import { tempDirs } from './helpers/temp-dirs.js';

const tempDir = tempDirs('disk');

const countAll = read([q('c', count(nodes('all')))], ['c']);
const addOne = (n: number) => write([q('x', addN('U', [['n', i64(n)]]))], ['x']);
const walFiles = (dir: string) => readdirSync(dir).filter((f) => f.startsWith('wal-')).sort().map((f) => join(dir, f));

describe('disk storage', () => {
  it('keeps every acknowledged write across a clean restart', async () => {
    const dir = tempDir();
    let db = await openDatabase({ storage: 'disk', path: dir });
    for (let i = 0; i < 20; i++) await db.query(addOne(i));
    await db.close();
    db = await openDatabase({ storage: 'disk', path: dir });
    expect(await db.query(countAll)).toEqual({ c: 20 });
    const { body } = await db.queryRaw(read([q('v', { values: { input: nodes([0, 19]), properties: ['n'] } })], ['v']));
    expect(body).toBe('{"v":[{"n":0},{"n":19}]}');
    // New IDs continue after the recovered ones.
    expect(await db.query(addOne(99))).toEqual({ x: [{ $id: 20 }] });
    await db.close();
  });

  it('a snapshot keeps only the visible property versions: a restart drops superseded ones', async () => {
    const setS = (id: number, i: number) => write([q(null, { set_property: { input: nodes([id]), name: 's', value: str(`${i}`.padEnd(2048, 'x')) } })], []);
    /** Two nodes; node 0 gets `updates` versions of ~2 KiB, node 1 gets 50 and is dropped. */
    const snapshotAfter = async (dir: string, updates: number) => {
      const db = await openDatabase({ storage: 'disk', path: dir });
      await db.query(write([q('a', addN('U', [['s', str('')]])), q('b', addN('U', [['s', str('')]]))], []));
      for (let i = 0; i < updates; i++) await db.query(setS(0, i));
      for (let i = 0; i < 50; i++) await db.query(setS(1, i));
      await db.query(write([q(null, { drop: { input: nodes([1]) } })], []));
      await db.close();
      const snapshots = readdirSync(dir).filter((f) => f.startsWith('snapshot-'));
      expect(snapshots).toHaveLength(1);
      return statSync(join(dir, snapshots[0]!)).size;
    };
    const once = await snapshotAfter(tempDir(), 1);
    const dir = tempDir();
    // 249 more versions (~500 KiB) were written, and the snapshot holds none of them.
    expect(await snapshotAfter(dir, 200)).toBe(once);
    const db = await openDatabase({ storage: 'disk', path: dir });
    const { body } = await db.queryRaw(read([q('v', { values: { input: nodes('all'), properties: ['s'] } })], ['v']));
    expect(body).toBe(`{"v":[{"s":"${'199'.padEnd(2048, 'x')}"}]}`);
    await db.query(setS(0, 7));
    await db.close();
  });

  it('recovers from the WAL alone when the process stops without closing', async () => {
    const dir = tempDir();
    const db = await openDatabase({ storage: 'disk', path: dir });
    for (let i = 0; i < 5; i++) await db.query(addOne(i));
    // No close(): simulate the process dying by letting go of the lock as the kernel would.
    dropWriterLock(dir);
    const again = await openDatabase({ storage: 'disk', path: dir });
    expect(await again.query(countAll)).toEqual({ c: 5 });
    await again.close();
  });

  it('a torn tail (partial last record) is truncated, never half-applied', async () => {
    const dir = tempDir();
    let db = await openDatabase({ storage: 'disk', path: dir });
    await db.close(); // start from a snapshot so the next records sit alone in one segment
    db = await openDatabase({ storage: 'disk', path: dir });
    for (let i = 0; i < 3; i++) await db.query(addOne(i));
    const wal = walFiles(dir).at(-1)!;
    const full = statSync(wal).size;
    writeFileSync(join(dir, 'writer.pid'), JSON.stringify({ pid: 2 ** 22 + 7, host: (await import('node:os')).hostname(), since: 'test' }));
    for (let cut = 1; cut < 40; cut += 7) {
      const copy = tempDir();
      for (const f of readdirSync(dir)) if (!f.startsWith('writer.')) writeFileSync(join(copy, f), readFileSync(join(dir, f)));
      truncateSync(join(copy, wal.split('/').at(-1)!), full - cut);
      const recovered = await openDatabase({ storage: 'disk', path: copy });
      expect(await recovered.query(countAll)).toEqual({ c: 2 });
      expect(statSync(join(copy, wal.split('/').at(-1)!)).size).toBeLessThan(full - cut + 1);
      await recovered.close();
    }
  });

  it('a flipped byte in the last, acknowledged record is refused, not dropped', async () => {
    const dir = tempDir();
    let db = await openDatabase({ storage: 'disk', path: dir });
    await db.close();
    db = await openDatabase({ storage: 'disk', path: dir });
    for (let i = 0; i < 3; i++) await db.query(addOne(i));
    dropWriterLock(dir);
    const wal = walFiles(dir).at(-1)!;
    const bytes = readFileSync(wal);
    // The last frame's start: frames follow the 32-byte header, 16-byte headers + padded payloads.
    let last = 32;
    for (let at = 32; at + 16 <= bytes.length; at += 16 + ((bytes.readUInt32LE(at) + 7) & ~7)) last = at;
    bytes[last + 18] ^= 0xff; // inside its payload: the frame is whole but fails its checksum
    writeFileSync(wal, bytes);
    const err = await openDatabase({ storage: 'disk', path: dir }).then(() => null, (e: unknown) => e);
    expect((err as SvcError).code).toBe('storage_error');
    expect((err as SvcError).msg).toContain(`is corrupt at byte ${last}`);
    expect(readFileSync(wal)).toEqual(bytes);
  });

  it('a second writer is refused with an error naming the holder', async () => {
    const dir = tempDir();
    const db = await openDatabase({ storage: 'disk', path: dir });
    const err = await openDatabase({ storage: 'disk', path: dir }).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(SvcError);
    expect((err as SvcError).code).toBe('storage_error');
    expect((err as SvcError).msg).toContain(`process ${process.pid}`);
    await db.close();
    const next = await openDatabase({ storage: 'disk', path: dir });
    await next.close();
  });

  it('a reader handle follows the writer and refuses writes with 503 writer_mode_required', async () => {
    const dir = tempDir();
    const db = await openDatabase({ storage: 'disk', path: dir, snapshotWalBytes: 2048 });
    await db.query(addOne(1));
    const reader = await openDatabase({ storage: 'disk', path: dir, mode: 'reader' });
    expect(await reader.query(countAll)).toEqual({ c: 1 });
    for (let i = 0; i < 40; i++) await db.query(addOne(i)); // crosses several snapshots
    expect(await reader.query(countAll)).toEqual({ c: 41 });
    const { status, body } = await reader.queryRaw(addOne(5));
    expect(status).toBe(503);
    expect(JSON.parse(body).error).toBe('writer_mode_required');
    await db.close();
  });

  it('a reader handle applies only batches the writer made durable: a frame in the WAL before its fsync stays invisible there', async () => {
    const dir = tempDir();
    const db = await openDatabase({ storage: 'disk', path: dir });
    await db.query(addOne(0));
    const reader = await openDatabase({ storage: 'disk', path: dir, mode: 'reader' });
    let early = 0;
    for (let i = 1; i <= 50; i++) {
      // The frame is written at once; the fsync that makes it durable (and answers the
      // write) runs on a later turn of the event loop, after the reader's query.
      let acknowledged = false;
      const pending = db.query(addOne(i)).then(() => { acknowledged = true; });
      const seen = (await reader.query(countAll)) as { c: number };
      if (seen.c > i && !acknowledged) early++;
      await pending;
    }
    expect(early, 'batches the reader showed before they were durable').toBe(0);
    expect(await reader.query(countAll), 'the reader catches up once they are').toEqual({ c: 51 });
    await reader.close();
    await db.close();
  });

  it('refuses a newer storage format and asks for a migration of an older one', async () => {
    const dir = tempDir();
    const db = await openDatabase({ storage: 'disk', path: dir });
    await db.query(addOne(1));
    await db.close();
    const snap = readdirSync(dir).find((f) => f.startsWith('snapshot-'))!;
    const bytes = readFileSync(join(dir, snap));
    for (const [version, code] of [[99, 'unsupported_index_storage_version'], [0, 'migration_required']] as const) {
      bytes.writeUInt32LE(version, 8);
      bytes.writeUInt32LE(crc32(bytes.subarray(0, 28)), 28); // a genuine file of that version
      writeFileSync(join(dir, snap), bytes);
      const err = await openDatabase({ storage: 'disk', path: dir }).then(() => null, (e: unknown) => e);
      expect((err as SvcError).code).toBe(code);
    }
  });

  it('a full file system answers storage_error and loses nothing acknowledged', async (ctx) => {
    const dir = tempDir();
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir], { stdio: 'ignore' });
    } catch {
      ctx.skip(); // needs root (mount); CI runs as root
      return;
    }
    try {
      const data = join(dir, 'db');
      mkdirSync(data);
      writeFileSync(join(dir, 'filler'), Buffer.alloc(700 * 1024));
      const db = await openDatabase({ storage: 'disk', path: data, snapshotWalBytes: 1 << 30 });
      const big = 'x'.repeat(20_000);
      let acknowledged = 0;
      let failure: SvcError | null = null;
      for (let i = 0; i < 200 && failure === null; i++) {
        const { status, body } = await db.queryRaw(write([q('x', addN('U', [['n', i64(i)], ['pad', { value: { string: big } }]]))], ['x']));
        if (status === 200) acknowledged++;
        else failure = new SvcError(JSON.parse(body).error, JSON.parse(body).msg, status);
      }
      expect(failure?.code).toBe('storage_error');
      expect(failure?.status).toBe(500);
      expect(await db.query(countAll)).toEqual({ c: acknowledged });
      rmSync(join(dir, 'filler'));
      await db.query(addOne(-1));
      await db.close();
      const again = await openDatabase({ storage: 'disk', path: data });
      expect(await again.query(countAll)).toEqual({ c: acknowledged + 1 });
      await again.close();
    } finally {
      execFileSync('umount', [dir]);
    }
  });
});

describe('crash recovery', () => {
  const pairsQuery = read([
    q('k', { values: { input: { nodes_where: { predicate: { eq: { left: { property: '$label' }, right: { constant: { string: 'B' } } } } } }, properties: ['k'] } }),
    q('e', { count: { input: { edges: { reference: 'all' } } } }),
  ], ['k', 'e']);

  it('kill -9 at random points loses no acknowledged write and never leaves half a batch', async () => {
    const dir = tempDir();
    const rounds = Number(process.env.SVCDB_SOAK_ROUNDS ?? 20);
    let next = 0;
    const acknowledged: number[] = [];
    for (let round = 0; round < rounds; round++) {
      const child = spawn(process.execPath, [new URL('./fixtures/crash-writer.mjs', import.meta.url).pathname, dir, String(next)], { stdio: ['ignore', 'pipe', 'inherit'] });
      const exited = new Promise((r) => child.once('exit', r));
      let acked = -1;
      let buffered = '';
      let firstAck: () => void = () => undefined;
      const acking = new Promise<void>((r) => { firstAck = r; });
      child.stdout.on('data', (chunk: Buffer) => {
        buffered += chunk.toString();
        const lines = buffered.split('\n');
        buffered = lines.pop()!;
        for (const line of lines) {
          if (line.startsWith('ack ')) {
            acked = Number(line.slice(4));
            acknowledged.push(acked);
            firstAck();
          }
        }
      });
      // Kill at a random moment of the write load (start-up time varies with machine load).
      await Promise.race([acking, exited]);
      await new Promise((r) => setTimeout(r, Math.random() * 250));
      child.kill('SIGKILL');
      await exited;
      const db = await openDatabase({ storage: 'disk', path: dir, mode: 'reader' });
      const { k, e } = await db.query(pairsQuery) as { k: { k: number }[]; e: number };
      const perBatch = new Map<number, number>();
      for (const row of k) perBatch.set(row.k, (perBatch.get(row.k) ?? 0) + 1);
      for (const [batch, n] of perBatch) expect(n, `batch ${batch} is partly present`).toBe(2);
      expect(e).toBe(perBatch.size);
      for (const b of acknowledged) expect(perBatch.has(b), `acknowledged batch ${b} is missing`).toBe(true);
      next = Math.max(next, acked + 1, ...perBatch.keys()) + 1;
    }
    expect(next).toBeGreaterThan(rounds);
  }, 60_000 + Number(process.env.SVCDB_SOAK_ROUNDS ?? 20) * 3_000);
});

