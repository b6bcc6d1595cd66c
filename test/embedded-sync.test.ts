// The embedded handle's synchronous reads (querySync / queryRawSync): the same answers as
// the asynchronous calls, writes refused before anything runs, the same option checks
// and deadline, and only on a writer handle.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase, SvcError, type Database } from '../src/index.js';
import { annKnowsBo, dumpAll, addN, count, nodes, q, read, str, write } from './helpers/requests.js';

const open: Database[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const db of open.splice(0)) await db.close().catch(() => undefined);
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function seeded(): Promise<Database> {
  const db = await openDatabase({ storage: 'memory' });
  open.push(db);
  await db.query(annKnowsBo);
  return db;
}


function thrown(fn: () => unknown): SvcError {
  try {
    fn();
  } catch (err) {
    if (err instanceof SvcError) return err;
    throw err;
  }
  throw new Error('expected the call to throw');
}

describe('querySync', () => {
  it('answers reads with the exact text queryRaw gives, parameters and failures included', async () => {
    const db = await seeded();
    const byParam = read([q('n', { value_map: { input: { nodes: { reference: { param: 'ids' } } }, properties: null } })], ['n'],
      { parameters: { ids: [1] }, parameter_types: { ids: { array: 'i64' } } });
    const bodies: unknown[] = [
      dumpAll,
      byParam,
      JSON.stringify(byParam),
      read([q('c', count(nodes('all')))], ['c']),
      read([q('x', { value_map: { input: nodes([0]), properties: ['nope'] } })], ['missing']), // a planning error
      '{"request_type":"read"', // a decode error
    ];
    for (const body of bodies) {
      const sync = db.queryRawSync(body);
      expect(sync).toEqual(await db.queryRaw(body));
    }
    expect(db.querySync(read([q('c', count(nodes('all')))], ['c']))).toEqual({ c: 2 });
    expect(db.queryRawSync('{"request_type":"read"').status).toBe(400);
  });

  it('sees every write whose query() has answered', async () => {
    const db = await seeded();
    for (let i = 0; i < 5; i++) {
      await db.query(write([q(null, addN('User', [['name', str(`u${i}`)]]))], []));
      expect(db.querySync(read([q('c', count(nodes('all')))], ['c']))).toEqual({ c: 3 + i });
    }
  });

  it('on disk, sees a write only once it is durable, as query() does', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svcdb-sync-'));
    dirs.push(dir);
    const db = await openDatabase({ storage: 'disk', path: dir });
    open.push(db);
    const countAll = read([q('c', count(nodes('all')))], ['c']);
    const pending = db.queryRaw(write([q(null, addN('User'))], []));
    // Committed, its frame not yet fsynced: not visible, to either call.
    expect(db.querySync(countAll)).toEqual({ c: 0 });
    expect(await db.query(countAll)).toEqual({ c: 0 });
    expect((await pending).status).toBe(200);
    expect(db.querySync(countAll)).toEqual({ c: 1 });
    // The documented exception: a write answered before it is durable is visible at once.
    const early = db.queryRaw(write([q(null, addN('User'))], []), { awaitDurable: false });
    expect(db.querySync(countAll)).toEqual({ c: 2 });
    await early;
  });

  it('refuses a write before planning it, its plan cached or not', async () => {
    const db = await seeded();
    // A write that fails planning: queryRaw names the planning error, querySync the refusal
    // (envelope.md §6: a write the mode cannot take is refused before planning).
    const unplannable = write([q('x', addN('User'))], ['missing']);
    expect(JSON.parse((await db.queryRaw(unplannable)).body).error).not.toBe('invalid_request');
    expect(JSON.parse(db.queryRawSync(unplannable).body).error).toBe('invalid_request');
    const add = write([q('x', addN('User', [['name', str('Di')]]))], ['x']);
    expect(await db.query(add)).toEqual({ x: [{ $id: 2 }] }); // its plan is cached now
    expect(JSON.parse(db.queryRawSync(add).body).error).toBe('invalid_request');
    expect(db.querySync(read([q('c', count(nodes('all')))], ['c']))).toEqual({ c: 3 });
  });

  it('refuses a write request with invalid_request and executes nothing of it', async () => {
    const db = await seeded();
    const before = await db.queryRaw(dumpAll);
    const add = write([q('x', addN('User', [['name', str('Cy')]]))], ['x']);
    const refused = db.queryRawSync(add);
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.body)).toMatchObject({ error: 'invalid_request' });
    expect(JSON.parse(refused.body).msg).toMatch(/querySync answers read requests/);
    const err = thrown(() => db.querySync(add));
    expect([err.status, err.code]).toEqual([400, 'invalid_request']);
    expect(await db.queryRaw(dumpAll)).toEqual(before);
    // The ID sequence was not touched either: the next node gets the ID after the seed's two.
    expect(await db.query(add)).toEqual({ x: [{ $id: 2 }] });
  });

  it('checks options as queryRaw does and keeps the deadline', async () => {
    const db = await openDatabase({ storage: 'memory' });
    open.push(db);
    const size = 2000;
    const rows = Array.from({ length: size }, (_, i) => ({ src: i, dst: (i + 1) % size }));
    await db.query(write([
      { for_each: { param: 'nodes', body: [q(null, addN('C'))] } },
      { for_each: { param: 'rows', body: [q(null, { add_e: { input: { nodes: { reference: { param: 'src' } } }, label: 'NEXT', to: { param: 'dst' }, properties: [] } })] } },
    ], [], { parameters: { nodes: rows.map(() => ({})), rows } }));
    const around = read([q('r', count({ repeat: { input: nodes([0]), config: {
      traversal: { root: { out: { input: 'context', label: 'NEXT' } } }, emit: 'all', max_depth: 9_000 } } }))], ['r']);
    const late = thrown(() => db.querySync(around, { timeoutMs: 1 }));
    expect([late.status, late.code]).toEqual([500, 'query_deadline_exceeded']);
    expect(thrown(() => db.querySync(around, { warm: true })).code).toBe('invalid_request');
    expect(thrown(() => db.querySync(around, { timeoutMs: 0 })).code).toBe('invalid_request_option');
    expect(thrown(() => db.querySync(around, { awaitDurable: true })).code).toBe('invalid_request_option');
    expect(db.querySync(read([q('c', count(nodes('all')))], ['c']), { timeoutMs: 5_000 })).toEqual({ c: size });
  });

  it('throws database_closed after close, and invalid_request on a reader handle', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svcdb-sync-'));
    dirs.push(dir);
    const writer = await openDatabase({ storage: 'disk', path: dir });
    await writer.query(write([q(null, addN('User'))], []));
    expect(writer.querySync(read([q('c', count(nodes('all')))], ['c']))).toEqual({ c: 1 });
    await writer.close();
    expect(thrown(() => writer.querySync(read([q('c', count(nodes('all')))], ['c']))).code).toBe('database_closed');
    const reader = await openDatabase({ storage: 'disk', path: dir, mode: 'reader' });
    open.push(reader);
    const err = thrown(() => reader.queryRawSync(read([q('c', count(nodes('all')))], ['c'])));
    expect([err.status, err.code]).toEqual([400, 'invalid_request']);
    expect(await reader.query(read([q('c', count(nodes('all')))], ['c']))).toEqual({ c: 1 });
  });
});
