// The reader pool answers a read past its deadline itself (src/server/reader-pool.ts
// "Deadlines", limits.deadlineAnswerGraceMs): a reader thread that runs nothing for a while (a
// long garbage collection; here the SVCDB_TEST_READER_STALL hook of reader-worker.ts) cannot
// hold its request, or the requests queued behind it, past deadline + grace. What the
// reader answers later is dropped, and a write it would forward is never run.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReaderPool } from '../dist/src/server/reader-pool.js';
import { Store } from '../dist/src/store/store.js';
import { executeRequest, noFlags } from '../dist/src/exec/request.js';
import { monotonicMs } from '../dist/src/clock.js';
import type { QueryJob, QuerySink } from '../dist/src/server/job.js';
import { answeredJob as job } from './helpers/jobs.js';
import { addN, count, q, read, write } from './helpers/requests.js';

const STALL_MS = 4_000;
const TIMEOUT_MS = 300;
const GRACE_MS = 50;
const marker = `stall-${process.pid}-${Date.now()}-reader`;

const countLabel = (label: string): string => JSON.stringify(read([q('c', count({ nodes_where: { predicate: {
  eq: { left: { property: '$label' }, right: { constant: { string: label } } },
} } }))], ['c']));
const addNode = (label: string): string => JSON.stringify(write([q('n', addN(label))], ['n']));


/** One reader thread with the test's deadline and grace; writes it forwards are recorded and answered 200. */
async function startPool(store: Store): Promise<{ pool: ReaderPool; forwarded: QueryJob[] }> {
  const forwarded: QueryJob[] = [];
  const forward: QuerySink = { submit: (j) => { forwarded.push(j); j.responder.respond(200, '{"forwarded":true}'); } };
  const pool = await ReaderPool.start({
    shared: store.shared, threads: 1, dispatch: 'coalesce', queryTimeoutMs: TIMEOUT_MS, queryMemoryBytes: 64 * 1024 * 1024, forward,
    limits: { deadlineAnswerGraceMs: GRACE_MS },
  });
  return { pool, forwarded };
}

describe('reads past their deadline', () => {
  beforeAll(() => {
    // Read by each reader thread when it starts: pools started from now on.
    process.env['SVCDB_TEST_READER_STALL'] = `${STALL_MS}:${marker}`;
  });
  afterAll(() => {
    delete process.env['SVCDB_TEST_READER_STALL'];
  });

  it('are answered query_deadline_exceeded by the pool, running or queued; the late answer is dropped and a queued write never runs', async () => {
    const store = Store.create();
    const label = 'Deadline';
    executeRequest(store, addNode(label), noFlags, 'writer');
    const { pool, forwarded } = await startPool(store);
    try {
      const sent = monotonicMs();
      // A read that stalls its thread, a write the reader would forward (it would stall
      // too: both carry the marker), and a cheap read, queued behind the first.
      const stalled = job(countLabel(marker), sent);
      const write = job(addNode(marker), sent);
      const cheap = job(countLabel(label), sent);
      pool.submit(stalled.job);
      pool.submit(write.job);
      pool.submit(cheap.job);
      expect(pool.queued).toBe(2);

      const answers = await Promise.all([stalled.answer, write.answer, cheap.answer]);
      for (const a of answers) {
        expect(a.status).toBe(500);
        expect(JSON.parse(a.body)).toEqual({ error: 'query_deadline_exceeded', msg: 'db error: query deadline exceeded' });
        // Not after the stall: the pool answered them itself, at deadline + grace.
        expect(a.atMs - sent).toBeGreaterThanOrEqual(TIMEOUT_MS + GRACE_MS);
        expect(a.atMs - sent).toBeLessThan(STALL_MS / 2);
      }
      expect(pool.answeredOverdue).toBe(3);

      // The stalled reader finishes later: its answer is offered and dropped.
      for (let i = 0; i < 200 && pool.tasksInFlight > 0; i++) await new Promise((r) => setTimeout(r, 50));
      expect(pool.tasksInFlight).toBe(0);
      expect(stalled.offered()).toBe(2);
      // The queued ones never ran: the write was not forwarded to the writer.
      expect(write.offered()).toBe(1);
      expect(cheap.offered()).toBe(1);
      expect(forwarded).toHaveLength(0);

      // The pool serves on as before.
      const next = job(countLabel(label), monotonicMs());
      pool.submit(next.job);
      const answered = await next.answer;
      expect([answered.status, answered.body]).toEqual([200, '{"c":1}']);
      expect(pool.answeredOverdue).toBe(3);
    } finally {
      await pool.close();
    }
  }, 20_000);

  it('a write the reader forwards after the pool answered it is not run', async () => {
    const store = Store.create();
    const { pool, forwarded } = await startPool(store);
    try {
      const w = job(addNode(marker), monotonicMs());
      pool.submit(w.job); // runs at once, stalls, then its reader says "forward"
      const a = await w.answer;
      expect(a.status).toBe(500);
      for (let i = 0; i < 200 && pool.tasksInFlight > 0; i++) await new Promise((r) => setTimeout(r, 50));
      expect(pool.tasksInFlight).toBe(0);
      expect(forwarded).toHaveLength(0);
      // Without a deadline passing, a write goes to the writer as always.
      const fine = job(addNode('Fine'), monotonicMs());
      pool.submit(fine.job);
      expect((await fine.answer).body).toBe('{"forwarded":true}');
      expect(forwarded).toHaveLength(1);
    } finally {
      await pool.close();
    }
  }, 20_000);
});
