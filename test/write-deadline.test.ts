// A request queued in the writer thread past its deadline (src/server/writer.ts
// "Deadlines", write-claims.ts): the HTTP thread answers it `query_deadline_exceeded` at
// deadline + grace when the writer has not started it, and the writer then passes over it,
// so an answered write never commits. A writer that starts a request past its deadline
// refuses it (exec/request.ts). The writer is held with the SVCDB_TEST_WRITER_STALL hook
// (src/server/test-stall.ts), the way a long garbage collection or rollback holds it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WriterThread } from '../dist/src/server/writer.js';
import { WriteClaims } from '../dist/src/server/write-claims.js';
import { Store } from '../dist/src/store/store.js';
import { executeRequest, execOptions, noFlags } from '../dist/src/exec/request.js';
import { monotonicMs } from '../dist/src/clock.js';
import { answeredJob as job } from './helpers/jobs.js';
import { addN, count, q, read, write } from './helpers/requests.js';

const STALL_MS = 3_000;
const TIMEOUT_MS = 300;
const GRACE_MS = 50;
const marker = `stall-${process.pid}-${Date.now()}-writer`;
const OVERDUE = { error: 'query_deadline_exceeded', msg: 'db error: query deadline exceeded' };

const countLabel = (label: string): string => JSON.stringify(read([q('c', count({ nodes_where: { predicate: {
  eq: { left: { property: '$label' }, right: { constant: { string: label } } },
} } }))], ['c']));
const addNode = (label: string): string => JSON.stringify(write([q('n', addN(label))], ['n']));


async function settle(writer: WriterThread): Promise<void> {
  for (let i = 0; i < 200 && writer.pendingRequests > 0; i++) await new Promise((r) => setTimeout(r, 25));
  expect(writer.pendingRequests).toBe(0);
}

describe('writer requests past their deadline', () => {
  beforeAll(() => {
    // Read by the writer thread when it starts: writers started from now on.
    process.env['SVCDB_TEST_WRITER_STALL'] = `${STALL_MS}:${marker}`;
  });
  afterAll(() => {
    delete process.env['SVCDB_TEST_WRITER_STALL'];
  });

  it('are answered at deadline + grace when not started, and never run', async () => {
    const fatal: Error[] = [];
    const writer = await WriterThread.start({
      queryTimeoutMs: TIMEOUT_MS, queryMemoryBytes: 64 * 1024 * 1024, diskPath: null, onFatal: (err) => fatal.push(err),
      limits: { deadlineAnswerGraceMs: GRACE_MS },
    });
    try {
      const label = `Late${process.pid}`;
      const sent = monotonicMs();
      // The stalled write (held before it starts), a write and a read pinned to the writer
      // queued behind it, and a write without an arrival time (nothing to watch it by).
      const stalled = job(addNode(marker), sent);
      const queuedWrite = job(addNode(label), sent);
      const queuedRead = job(countLabel(label), sent, { requireWriter: true });
      const unwatched = job(addNode(label), undefined);
      for (const j of [stalled, queuedWrite, queuedRead, unwatched]) writer.submit(j.job);

      const answers = await Promise.all([stalled.answer, queuedWrite.answer, queuedRead.answer]);
      for (const a of answers) {
        expect([a.status, JSON.parse(a.body)]).toEqual([500, OVERDUE]);
        expect(a.atMs - sent).toBeGreaterThanOrEqual(TIMEOUT_MS + GRACE_MS);
        expect(a.atMs - sent, 'answered by the watch, not after the stall').toBeLessThan(STALL_MS / 2);
      }
      expect(writer.answeredOverdue).toBe(3);

      // Once the stall ends the writer passes over the three and runs the unwatched write.
      const last = await unwatched.answer;
      expect(last.status).toBe(200);
      await settle(writer);
      for (const j of [stalled, queuedWrite, queuedRead]) expect(j.offered(), 'the writer answered nothing more').toBe(1);

      // Neither answered write happened: one node of `label` (the unwatched write), none of the marker's.
      const check = job(countLabel(label), monotonicMs(), { requireWriter: true });
      writer.submit(check.job);
      expect(((await check.answer)).body).toBe('{"c":1}');
      const markerCount = job(countLabel(marker), undefined, { requireWriter: true });
      writer.submit(markerCount.job);
      // (The count carries the marker, so it is held too; it has no arrival time, so it runs after.)
      expect(((await markerCount.answer)).body).toBe('{"c":0}');
      expect(writer.answeredOverdue).toBe(3);
      expect(fatal).toHaveLength(0);
    } finally {
      await writer.close();
    }
  }, 20_000);

  it('a request the writer starts before the watch answers it is the writer\'s to answer', async () => {
    const writer = await WriterThread.start({
      queryTimeoutMs: TIMEOUT_MS, queryMemoryBytes: 64 * 1024 * 1024, diskPath: null, onFatal: () => undefined,
      limits: { deadlineAnswerGraceMs: GRACE_MS },
    });
    try {
      const label = `OnTime${process.pid}`;
      const w = job(addNode(label), monotonicMs());
      writer.submit(w.job);
      expect((await w.answer).status).toBe(200);
      await new Promise((r) => setTimeout(r, TIMEOUT_MS + 2 * GRACE_MS));
      expect(w.offered()).toBe(1);
      expect(writer.answeredOverdue).toBe(0);
    } finally {
      await writer.close();
    }
  });
});

describe('a request that starts past its deadline', () => {
  it('is refused before it runs, write or read', () => {
    const store = Store.create();
    const options = (receivedAtMs: number) => execOptions({ queryTimeoutMs: TIMEOUT_MS, queryMemoryBytes: 64 * 1024 * 1024, receivedAtMs });
    const late = monotonicMs() - TIMEOUT_MS - 1;
    const before = store.committedEpoch();
    for (const body of [addNode('Late'), countLabel('Late')]) {
      const outcome = executeRequest(store, body, noFlags, 'writer', options(late));
      expect(outcome).toEqual({ status: 500, body: JSON.stringify(OVERDUE) });
    }
    expect(store.committedEpoch(), 'nothing was committed').toBe(before);
    // Decoding and planning errors come first (envelope.md §6): the deadline belongs to execution.
    const emptyLabel = executeRequest(store, addNode(''), noFlags, 'writer', options(late)) as { status: number; body: string };
    expect(emptyLabel.status).toBe(400);
    expect(JSON.parse(emptyLabel.body).error).toBe('invalid_empty_name');
    expect(executeRequest(store, '{"request_type":"write"', noFlags, 'writer', options(late))).toMatchObject({ status: 400 });
    // In time, the same write runs.
    expect(executeRequest(store, addNode('Late'), noFlags, 'writer', options(monotonicMs()))).toMatchObject({ status: 200 });
    expect(executeRequest(store, countLabel('Late'), noFlags, 'writer', options(monotonicMs()))).toEqual({ status: 200, body: '{"c":1}' });
  });
});

describe('write claims', () => {
  it('give each request to exactly one side, and reuse a slot for the id a whole ring later', () => {
    const claims = WriteClaims.create(4);
    const writerSide = WriteClaims.attach(claims.buffer);
    claims.queue(1);
    claims.queue(2);
    expect(writerSide.start(1)).toBe(true);
    expect(claims.answer(1), 'started: not the watch\'s').toBe(false);
    expect(claims.answer(2)).toBe(true);
    expect(writerSide.start(2), 'answered: never runs').toBe(false);
    expect(claims.answer(2), 'answered once').toBe(false);
    // id 6 takes id 2's slot once id 2 is done with; a stale claim for id 2 cannot take it.
    claims.queue(6);
    expect(writerSide.start(2)).toBe(false);
    expect(claims.answer(2)).toBe(false);
    expect(writerSide.start(6)).toBe(true);
    // Ids past the tag's 28 bits still claim.
    const big = 2 ** 40 + 3;
    claims.queue(big);
    expect(claims.answer(big)).toBe(true);
    expect(writerSide.start(big)).toBe(false);
  });
});
