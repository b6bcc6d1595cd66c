// The reader thread's handler (reader-worker.ts) under Piscina: a thread that holds several
// tasks at once (the pool's spare costly task) must post each answer as soon as its task
// ends, not after the task that follows it in the thread's port.
import { Piscina } from 'piscina';
import { describe, expect, it } from 'vitest';
import { executeRequest, noFlags } from '../dist/src/exec/request.js';
import { encodeFlags, type ReadTaskResult } from '../dist/src/server/job.js';
import type { SwappableReadTask } from '../dist/src/server/job.js';
import type { ReaderWorkerData } from '../dist/src/server/reader-worker.js';
import { Store } from '../dist/src/store/store.js';
import { BUILD_IDENTITY } from '../dist/src/build-identity.js';
import { meshWrite, slowMeshRead } from './helpers/mesh.js';
import { count, nodes, q, read } from './helpers/requests.js';

/** The query deadline of the slow tasks: how long each one holds the thread. */
const DEADLINE_MS = 400;
const cheapRead = JSON.stringify(read([q('c', count(nodes([0, 1, 2])))], ['c']));

const task = (body: string): SwappableReadTask => ({
  bodies: [new TextEncoder().encode(body)],
  flags: Uint8Array.of(encodeFlags(noFlags)),
  // 0: the deadline counts from when the task starts.
  receivedAtMs: Float64Array.of(0),
});

const statusOf = (result: ReadTaskResult): number => result.index[0]!;

describe('reader thread', () => {
  it('posts the answer of a task before it starts the next task of its port', async () => {
    const store = Store.create();
    expect(executeRequest(store, meshWrite, noFlags, 'writer')).toMatchObject({ status: 200 });
    const workerData: ReaderWorkerData = { shared: store.shared, role: 'reader', queryTimeoutMs: DEADLINE_MS, queryMemoryBytes: 64 * 1024 * 1024, buildIdentity: BUILD_IDENTITY, generation: 0 };
    const pool = new Piscina<SwappableReadTask, ReadTaskResult>({
      filename: new URL('../dist/src/server/reader-worker-entry.cjs', import.meta.url).href,
      minThreads: 1, maxThreads: 1, idleTimeout: Number.POSITIVE_INFINITY,
      // Three at once: the cheap and the slow task below wait together in the port while
      // the first runs, so the thread takes both from one drain of its port.
      concurrentTasksPerWorker: 3,
      workerData,
    });
    try {
      const settledAt = new Map<string, number>();
      const run = (name: string, body: string): Promise<ReadTaskResult> =>
        pool.run(task(body)).then((result) => {
          settledAt.set(name, performance.now());
          return result;
        });
      const first = run('first', slowMeshRead);
      const cheap = run('cheap', cheapRead);
      const second = run('second', slowMeshRead);
      const [a, b, c] = await Promise.all([first, cheap, second]);
      expect([statusOf(a), statusOf(b), statusOf(c)]).toEqual([500, 200, 500]); // both slow ones hit the deadline
      // The cheap answer comes right after the first task, while the second one still
      // runs (it holds the thread for DEADLINE_MS); held back, it arrived with the second.
      expect(settledAt.get('second')! - settledAt.get('cheap')!).toBeGreaterThan(DEADLINE_MS / 2);
    } finally {
      await pool.destroy();
    }
  });

  it('refuses to run when its install is not the one the server started with (files replaced by an upgrade)', async () => {
    const store = Store.create();
    const workerData: ReaderWorkerData = { shared: store.shared, role: 'reader', queryTimeoutMs: DEADLINE_MS, queryMemoryBytes: 1 << 20, buildIdentity: 'an install replaced since', generation: 0 };
    const pool = new Piscina<SwappableReadTask, ReadTaskResult>({
      filename: new URL('../dist/src/server/reader-worker-entry.cjs', import.meta.url).href,
      minThreads: 1, maxThreads: 1, workerData,
    });
    try {
      const err = await new Promise<Error>((resolve) => {
        pool.once('error', resolve);
        setTimeout(() => resolve(new Error('the thread loaded and ran')), 10_000).unref();
      });
      expect(err.message).toMatch(/^reader thread: svcdb's installed files changed since this server started .*restart the server$/);
    } finally {
      pool.on('error', () => undefined); // its replacements fail the same way
      await pool.destroy();
    }
  });
});
