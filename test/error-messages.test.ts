// What an error body may tell a client (docs/protocol-choices.md, "Error messages"): no
// stack, no file-system path, no bucket URI, no text of an arbitrary exception. Those go
// to the server log (stderr) under a reference the client's message repeats.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openDatabase } from '../src/index.js';
import {
  asSvcError, errorBody, forClient, internalErrorFor, redactInternals, SvcError,
} from '../src/protocol/errors.js';
import { Store } from '../src/store/store.js';
import { WalWriter } from '../src/durability/wal.js';
import { explainUnwritable, unwritableReason } from '../src/durability/disk-storage.js';
import { addN, count, nodes, q, read, write } from './helpers/requests.js';
import { tempDirs } from './helpers/temp-dirs.js';

const tempDir = tempDirs('error-messages');

/** Everything written to stderr while `run` runs (and still shown nowhere else). */
async function stderrOf<T>(run: () => T | Promise<T>): Promise<{ result: T; log: string }> {
  let log = '';
  const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    log += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    return true;
  });
  try {
    return { result: await run(), log };
  } finally {
    spy.mockRestore();
  }
}

/** An exception the way Node's fs throws one: path in the message, a stack with file URLs. */
function fsLikeError(path: string): Error {
  const err = new Error(`EACCES: permission denied, open '${path}'`) as NodeJS.ErrnoException;
  err.code = 'EACCES';
  err.path = path;
  err.stack = `Error: ${err.message}\n    at Object.openSync (node:fs:573:18)\n    at WalWriter.open (file:///srv/svcdb/dist/src/durability/wal.js:300:9)`;
  return err;
}

const REF = /\(ref ([0-9a-f]{8})/;

function expectNothingInternal(text: string): void {
  expect(text).not.toMatch(/\/srv\/|\/secret\/|file:\/\/|s3:\/\//);
  expect(text).not.toMatch(/\n\s+at |node:fs|\.js:\d+/);
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('internal errors', () => {
  it('an unexpected exception answers a generic internal_error with a reference; the log has the exception and its stack', async () => {
    const { result, log } = await stderrOf(() => asSvcError(fsLikeError('/secret/data/wal-0000000003.log')));
    expect([result.code, result.status]).toEqual(['internal_error', 500]);
    expect(result.message).toMatch(/^internal error: the request failed; see the server log \(ref [0-9a-f]{8}\)$/);
    expectNothingInternal(errorBody(result));
    const ref = REF.exec(result.message)![1]!;
    expect(log).toContain(`ref ${ref}`);
    expect(log).toContain("open '/secret/data/wal-0000000003.log'");
    expect(log).toContain('at WalWriter.open (file:///srv/svcdb/dist/src/durability/wal.js:300:9)');
  });

  it('internalErrorFor names where it happened in the log only, and any thrown value works', async () => {
    const { result, log } = await stderrOf(() => internalErrorFor('Terminating worker thread', 'reader task failed'));
    expect(result.message).not.toMatch(/worker|reader task/i);
    expect(log).toMatch(/^svcdb: internal error \(ref [0-9a-f]{8}\) reader task failed: Terminating worker thread\n$/);
  });

  it('a deep recursion is still the documented invalid_query, not an internal error', () => {
    const e = asSvcError(new RangeError('Maximum call stack size exceeded'));
    expect([e.code, e.message]).toEqual(['invalid_query', 'db error: Query error: query nested too deeply']);
  });

  it('a query that makes the store throw answers 500 without path or stack (embedded handle = the server threads\' code path)', async () => {
    const db = await openDatabase();
    vi.spyOn(Store.prototype, 'beginRead').mockImplementation(() => { throw fsLikeError('/secret/heap.bin'); });
    const { result, log } = await stderrOf(() => db.queryRaw(read([q('c', count(nodes('all')))], ['c'])));
    expect(result.status).toBe(500);
    const body = JSON.parse(result.body) as { error: string; msg: string };
    expect(body.error).toBe('internal_error');
    expectNothingInternal(result.body);
    expect(body.msg).not.toMatch(/EACCES|permission/);
    expect(log).toContain(REF.exec(body.msg)![1]!);
    expect(log).toContain('/secret/heap.bin');
  });
});

describe('storage errors', () => {
  it('forClient keeps what failed and drops paths, object URIs and stacks; the full text is logged', async () => {
    const original = new SvcError('storage_error',
      "storage error: cannot open WAL segment wal-0000000003.log: EACCES: permission denied, open '/secret/db dir/wal-0000000003.log'");
    const { result, log } = await stderrOf(() => forClient(original));
    expect(result.code).toBe('storage_error');
    expect(result.status).toBe(500);
    expect(result.message).toMatch(/^storage error: cannot open WAL segment wal-0000000003\.log: EACCES: permission denied, open '<path>' \(ref [0-9a-f]{8}; the server log has the details\)$/);
    expect(log).toContain(original.message);
    expect(log).toContain(REF.exec(result.message)![1]!);
  });

  it('redacts absolute paths, file:// and s3:// URIs wherever they stand, and stack frames', () => {
    expect(redactInternals('writer fenced: lost the writer lock on /secret/db: the lock file was removed.'))
      .toBe('writer fenced: lost the writer lock on <path>: the lock file was removed.');
    expect(redactInternals('storage error: S3 put s3://bucket/prefix/wal/1 failed: SlowDown: reduce your request rate'))
      .toBe('storage error: S3 put <path> failed: SlowDown: reduce your request rate');
    expect(redactInternals('storage error: downloading s3://b/k to /tmp/cache/k.part failed: ENOSPC: no space left on device'))
      .toBe('storage error: downloading <path> to <path> failed: ENOSPC: no space left on device');
    expect(redactInternals('internal error: boom\n    at f (file:///srv/x.js:1:2)\n    at g')).toBe('internal error: boom');
    expect(redactInternals('storage error: property heap is full')).toBe('storage error: property heap is full');
  });

  it('messages of other codes are left alone (they carry no operator detail)', () => {
    const e = new SvcError('invalid_query', 'db error: Query error: read/write mix in `a/b` at /x');
    expect(forClient(e)).toBe(e);
    const unchanged = new SvcError('storage_error', 'storage error: edge limit 134217728 reached');
    expect(forClient(unchanged)).toBe(unchanged);
  });

  it('a write refused while the WAL cannot be made durable says so without the path', async () => {
    const dir = tempDir();
    const db = await openDatabase({ storage: 'disk', path: dir });
    const secret = `${dir}/wal-0000000002.log`;
    // One failing fsync: the storage stays unavailable until the retry (100 ms later) works.
    vi.spyOn(WalWriter.prototype, 'sync').mockImplementationOnce(() => {
      throw new SvcError('storage_error', `storage error: WAL fsync failed: EIO: i/o error, fsync '${secret}'`);
    });
    const { result, log } = await stderrOf(async () => {
      const first = db.queryRaw(write([q('a', addN('A'))], ['a']));
      await new Promise((resolve) => setTimeout(resolve, 20)); // the group commit ran and failed
      const refused = await db.queryRaw(write([q('b', addN('B'))], ['b']));
      return { first: await first, refused };
    });
    expect(result.refused.status).toBe(500);
    const body = JSON.parse(result.refused.body) as { error: string; msg: string };
    expect(body.error).toBe('storage_error');
    expect(body.msg).toMatch(/^storage error: storage unavailable, the write was not applied \(storage error: WAL fsync failed: EIO: i\/o error, fsync '<path>'\) \(ref [0-9a-f]{8}; the server log has the details\)$/);
    expect(result.refused.body).not.toContain(dir);
    expect(log).toContain(secret);
    // The first write was retried and acknowledged once durable.
    expect(result.first.status).toBe(200);
    expect(await db.query(read([q('c', count(nodes('all')))], ['c']))).toEqual({ c: 1 });
    await db.close();
  });
});

describe('a data directory the writer cannot write', () => {
  it('says which place and why in one sentence (EROFS, EACCES, EPERM); other errors are not its business', () => {
    expect(explainUnwritable('write to /data/db', '/data/db', 'EROFS')).toBe('cannot write to /data/db: the file system is read-only (EROFS)');
    expect(explainUnwritable('write to /data/db/writer.lock', '/data/db', 'EACCES'))
      .toBe('cannot write to /data/db/writer.lock: permission denied (EACCES); the server must be able to create, write and remove files in /data/db');
    expect(explainUnwritable('create /data/db', '/data/db', 'EPERM')).toMatch(/^cannot create \/data\/db: permission denied \(EPERM\)/);
    expect(explainUnwritable('write to /data/db', '/data/db', 'ENOSPC')).toBeNull();
  });

  it('a writable directory passes (and is created when missing, without leaving the probe file)', async () => {
    const dir = `${tempDir()}/nested/db`;
    expect(unwritableReason(dir)).toBeNull();
    const { readdirSync } = await import('node:fs');
    expect(readdirSync(dir)).toEqual([]);
  });
});
