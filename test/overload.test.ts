// Load shedding and thread failure (issue 10): every queue between threads has a bound and
// sheds the NEW request with 503 server_overloaded + Retry-After before anything of it
// runs; a reader thread that dies is replaced and its requests answered; a writer thread
// that dies answers what it never started as failed and what it started as uncertain.
// Servers run in-process from dist/ (`npm test` builds first) so bounds can be lowered.
import { execFile } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { HttpFrontEnd } from '../dist/src/server/http.js';
import { ReaderPool } from '../dist/src/server/reader-pool.js';
import { answeredJob } from './helpers/jobs.js';
import { monotonicMs } from '../dist/src/clock.js';
import { eventually } from './helpers/eventually.js';
import { WriterThread } from '../dist/src/server/writer.js';
import { startServer, type RunningServer, type ServerOptions } from '../dist/src/server/server.js';
import { Committer, MemoryStorage } from '../dist/src/durability/durable.js';
import { Store } from '../dist/src/store/store.js';
import { Topology } from '../dist/src/store/topology.js';
import { executeRequest, noFlags } from '../dist/src/exec/request.js';
import type { QueryJob, QuerySink } from '../dist/src/server/job.js';
import { addN, count, q, read, write } from './helpers/requests.js';
import { meshWrite, slowMeshRead } from './helpers/mesh.js';

const RETRY_AFTER = '1';
/** How long the deliberately slow read holds its thread (the query deadline cuts it). */
const SLOW_MS = 2000;

interface Answer {
  status: number;
  retryAfter: string | null;
  text: string;
}

async function post(url: string, body: string | Uint8Array, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${url}/v2/query`, { method: 'POST', body, headers });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), text: await res.text() };
}

function errorOf(answer: Answer): { error: string; msg: string } {
  return JSON.parse(answer.text) as { error: string; msg: string };
}

function expectShed(answer: Answer, queue: RegExp): void {
  expect(answer.status, answer.text).toBe(503);
  expect(answer.retryAfter, 'a shed request carries Retry-After').toBe(RETRY_AFTER);
  const err = errorOf(answer);
  expect(err.error).toBe('server_overloaded');
  expect(err.msg).toMatch(/^server overloaded: .* is full \(.*\); retry later$/);
  expect(err.msg).toMatch(queue);
}

let labelCounter = 0;
const freshLabel = (): string => `Shed${process.pid}_${++labelCounter}`;

const addNode = (label: string): string => JSON.stringify(write([q('n', addN(label))], ['n']));
const countLabel = (label: string): string => JSON.stringify(read([q('c', count({ nodes_where: { predicate: {
  eq: { left: { property: '$label' }, right: { constant: { string: label } } },
} } }))], ['c']));

/** A read that would run for minutes; the server's query deadline stops it after SLOW_MS. */
const slowRead = slowMeshRead;

/** `length` bytes: `json` padded with trailing spaces (still the same request). */
function padded(json: string, length: number): Uint8Array {
  const body = Buffer.alloc(length, 0x20);
  Buffer.from(json).copy(body);
  return body;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function startMeshServer(options: ServerOptions): Promise<RunningServer> {
  const server = await startServer({ port: 0, readers: 1, inlineReads: false, queryTimeoutMs: SLOW_MS, ...options });
  const loaded = await post(server.url, meshWrite);
  expect(loaded.status, loaded.text).toBe(200);
  return server;
}

/** Start the slow read and give it time to reach its thread (wrapped: an async function would wait for it). */
async function occupy(url: string, headers: Record<string, string> = {}): Promise<{ answer: Promise<Answer> }> {
  const answer = post(url, slowRead, headers);
  await sleep(400);
  return { answer };
}

async function expectDeadline(slow: Promise<Answer>): Promise<void> {
  const answer = await slow;
  expect(answer.status, answer.text).toBe(500);
  expect(errorOf(answer).error).toBe('query_deadline_exceeded');
}

describe('the reader queue', () => {
  let server: RunningServer;

  beforeAll(async () => {
    server = await startMeshServer({ limits: { readerQueueRequestsMax: 2, readerQueueBodyBytesMax: 64 * 1024 } });
  });

  afterAll(async () => {
    await server.close();
  });

  it('sheds the request past readerQueueRequestsMax with 503, and a shed write leaves no trace', async () => {
    const label = freshLabel();
    const slow = await occupy(server.url);
    const queued = [post(server.url, countLabel(label)), post(server.url, countLabel(label))];
    await sleep(300);
    const shedWrite = await post(server.url, addNode(label)); // writes pass the reader queue too
    expectShed(shedWrite, /the reader queue is full \(2 requests waiting\)/);
    for (const answer of await Promise.all(queued)) expect(answer.text).toBe('{"c":0}');
    await expectDeadline(slow.answer);
    expect((await post(server.url, countLabel(label))).text, 'the shed write did not run').toBe('{"c":0}');
    expect((await post(server.url, addNode(label))).status, 'the queue accepts again once it drained').toBe(200);
    expect((await post(server.url, countLabel(label))).text).toBe('{"c":1}');
  });

  it('sheds the request whose body would pass readerQueueBodyBytesMax', async () => {
    const label = freshLabel();
    const slow = await occupy(server.url);
    const small = post(server.url, padded(countLabel(label), 40 * 1024));
    await sleep(300);
    expectShed(await post(server.url, padded(addNode(label), 30 * 1024)), /the reader queue is full \(40960 body bytes waiting/);
    expect((await small).text).toBe('{"c":0}');
    await expectDeadline(slow.answer);
    expect((await post(server.url, countLabel(label))).text).toBe('{"c":0}');
  });

  it('bounds the reads relayed by every front-end thread together (--http-threads 3)', async () => {
    const threaded = await startMeshServer({ httpThreads: 3, limits: { readerQueueRequestsMax: 2 } });
    try {
      const label = freshLabel();
      const slow = await occupy(threaded.url);
      // Concurrent requests open connections of their own, which Linux spreads over the threads.
      const answers = await Promise.all(Array.from({ length: 8 }, () => post(threaded.url, countLabel(label))));
      const answered = answers.filter((a) => a.status === 200);
      expect(answered.map((a) => a.text)).toEqual(['{"c":0}', '{"c":0}']);
      const shed = answers.filter((a) => a.status !== 200);
      expect(shed).toHaveLength(6);
      for (const answer of shed) expectShed(answer, /the reader queue is full \(2 requests waiting\)/);
      await expectDeadline(slow.answer);
    } finally {
      await threaded.close();
    }
  });

  it('bounds the per-request dispatch the same way', async () => {
    const perRequest = await startMeshServer({ readDispatch: 'per-request', limits: { readerQueueRequestsMax: 1 } });
    try {
      const label = freshLabel();
      const slow = await occupy(perRequest.url);
      const queued = post(perRequest.url, countLabel(label));
      await sleep(300);
      expectShed(await post(perRequest.url, addNode(label)), /the reader queue is full \(1 request waiting\)/);
      expect((await queued).text).toBe('{"c":0}');
      await expectDeadline(slow.answer);
      expect((await post(perRequest.url, countLabel(label))).text).toBe('{"c":0}');
    } finally {
      await perRequest.close();
    }
  });
});

describe('the writer queue', () => {
  let server: RunningServer;

  beforeAll(async () => {
    // readers: 2 so the writes' trip through a reader is never what waits.
    // The slow read's body (~30 KB) counts too: 100 KB leaves room for it and one 40 KiB write.
    server = await startMeshServer({ readers: 2, limits: { writerPendingRequestsMax: 3, writerPendingBodyBytesMax: 100_000 } });
  });

  afterAll(async () => {
    await server.close();
  });

  it('sheds the write past writerPendingRequestsMax before it runs', async () => {
    const [kept, shedLabel] = [freshLabel(), freshLabel()];
    const slow = await occupy(server.url, { 'x-svc-require-writer': 'true' }); // pending 1, running
    const accepted = [post(server.url, addNode(kept)), post(server.url, addNode(kept))]; // pending 2 and 3
    await sleep(300);
    expectShed(await post(server.url, addNode(shedLabel)), /the writer queue is full \(3 requests in progress\)/);
    for (const answer of await Promise.all(accepted)) expect(answer.status, answer.text).toBe(200);
    await expectDeadline(slow.answer);
    expect((await post(server.url, countLabel(kept))).text).toBe('{"c":2}');
    expect((await post(server.url, countLabel(shedLabel))).text, 'the shed write did not run').toBe('{"c":0}');
  });

  it('sheds the write whose body would pass writerPendingBodyBytesMax', async () => {
    const label = freshLabel();
    const slow = await occupy(server.url, { 'x-svc-require-writer': 'true' });
    const accepted = post(server.url, padded(addNode(label), 40 * 1024));
    await sleep(300);
    const shedLabel = freshLabel();
    const waitingBytes = slowRead.length + 40 * 1024;
    expect(waitingBytes + 70 * 1024).toBeGreaterThan(100_000);
    expectShed(await post(server.url, padded(addNode(shedLabel), 70 * 1024)), new RegExp(`the writer queue is full \\(${waitingBytes} body bytes in progress`));
    expect((await accepted).status).toBe(200);
    await expectDeadline(slow.answer);
    expect((await post(server.url, countLabel(label))).text).toBe('{"c":1}');
    expect((await post(server.url, countLabel(shedLabel))).text).toBe('{"c":0}');
  });
});

describe('writes answered before they are durable', () => {
  it('past writerUndurableAcksMax are shed before they run; awaited writes still go through', async () => {
    const store = Store.create();
    store.publishOnCommit = false; // storage that is behind: readers see a batch once it is durable
    let resolveSync = (): void => undefined;
    const durable = new Promise<void>((resolve) => { resolveSync = resolve; }).then(() => store.publish(store.committedEpoch()));
    const storage = Object.assign(new MemoryStorage(store), { sync: () => durable });
    const committer = new Committer(storage, { queryTimeoutMs: 30_000 }, 2);
    const noWait = { ...noFlags, awaitDurable: false };
    const label = freshLabel();
    for (let i = 0; i < 2; i++) expect(committer.execute(addNode(label), noWait)).toMatchObject({ status: 200 });
    const shed = committer.execute(addNode(label), noWait);
    expect(shed).toMatchObject({ status: 503, retryAfterSeconds: 1 });
    expect(JSON.parse((shed as { body: string }).body)).toMatchObject({ error: 'server_overloaded' });
    const awaited = committer.execute(addNode(label), noFlags);
    expect('then' in awaited, 'a write that awaits durability is not bounded here').toBe(true);
    resolveSync();
    expect(await awaited).toMatchObject({ status: 200 });
    const counted = executeRequest(store, countLabel(label), noFlags, 'writer');
    expect(counted).toMatchObject({ status: 200, body: '{"c":3}' }); // two early acks + the awaited one
    expect(committer.execute(addNode(label), noWait), 'durable again: the bound has room').toMatchObject({ status: 200 });
  });
});

describe('the HTTP front end', () => {
  const echo: QuerySink = { submit: (job: QueryJob) => job.responder.respond(200, `{"bytes":${job.body.byteLength}}`) };

  it('sheds requests past earlyQueueRequestsMax / earlyQueueBodyBytesMax before the threads are up', async () => {
    const front = new HttpFrontEnd({ mode: 'writer', limits: { earlyQueueRequestsMax: 2, earlyQueueBodyBytesMax: 1000 } });
    const url = `http://127.0.0.1:${await front.listen('127.0.0.1', 0)}`;
    try {
      const waiting = [post(url, '{"a":1}'), post(url, padded('{}', 600))];
      await sleep(300);
      expectShed(await post(url, '{"b":2}'), /the queue of requests waiting for the server to start is full \(2 requests waiting\)/);
      front.attach({ readers: echo, writer: echo });
      expect((await Promise.all(waiting)).map((a) => a.text)).toEqual(['{"bytes":7}', '{"bytes":600}']);

      const front2 = new HttpFrontEnd({ mode: 'writer', limits: { earlyQueueBodyBytesMax: 1000 } });
      const url2 = `http://127.0.0.1:${await front2.listen('127.0.0.1', 0)}`;
      try {
        const first = post(url2, padded('{}', 600));
        await sleep(300);
        expectShed(await post(url2, padded('{}', 600)), /\(600 body bytes waiting, a request of 600 more would pass 1000\)/);
        front2.attach({ readers: echo, writer: echo });
        expect((await first).text).toBe('{"bytes":600}');
      } finally {
        front2.stopAccepting();
        front2.closeAllSockets();
      }
    } finally {
      front.stopAccepting();
      front.closeAllSockets();
    }
  });

  it('reserves a body\'s announced length as it arrives: connections that announce large bodies and trickle hold little', async () => {
    // Answers with the body's length and a checksum, so a grown buffer is checked byte for byte.
    const sum: QuerySink = { submit: (job: QueryJob) => {
      let hash = 0;
      for (const byte of job.body) hash = (hash * 31 + byte) >>> 0;
      job.responder.respond(200, `{"bytes":${job.body.byteLength},"hash":${hash}}`);
    } };
    const front = new HttpFrontEnd({ mode: 'writer', limits: { receivingBodyBytesMax: 10 * 1024 * 1024 } });
    const port = await front.listen('127.0.0.1', 0);
    const url = `http://127.0.0.1:${port}`;
    front.attach({ readers: sum, writer: sum });
    const tricklers: Socket[] = [];
    try {
      // Two connections announce 4 MiB each and send a byte: 8 MiB held if reserved up front.
      for (let i = 0; i < 2; i++) {
        const socket = connect(port, '127.0.0.1');
        socket.on('error', () => undefined);
        socket.write(`POST /v2/query HTTP/1.1\r\nHost: x\r\nContent-Length: ${4 * 1024 * 1024}\r\n\r\n `);
        tricklers.push(socket);
      }
      await sleep(300);
      const honest = new Uint8Array(3 * 1024 * 1024).map((_, i) => 0x20 + (i % 90));
      let hash = 0;
      for (const byte of honest) hash = (hash * 31 + byte) >>> 0;
      const answer = await post(url, honest);
      expect(answer.status, answer.text).toBe(200);
      expect(answer.text).toBe(`{"bytes":${honest.byteLength},"hash":${hash}}`);
    } finally {
      for (const socket of tricklers) socket.destroy();
      front.stopAccepting();
      front.closeAllSockets();
    }
  });

  it('allocates announced bodies ahead only up to receivingUnfilledBytesMax; past it their buffers grow as bytes arrive, and every body arrives whole', async () => {
    const front = new HttpFrontEnd({ mode: 'writer', limits: { receivingUnfilledBytesMax: 1_000_000 } });
    const port = await front.listen('127.0.0.1', 0);
    front.attach({ readers: echo, writer: echo });
    const length = 400_000;
    const uploads = Array.from({ length: 3 }, () => {
      const socket = connect(port, '127.0.0.1');
      let answer = '';
      socket.setEncoding('utf8').on('data', (d: string) => { answer += d; });
      socket.on('error', () => undefined);
      socket.write(`POST /v2/query HTTP/1.1\r\nHost: x\r\nContent-Length: ${length}\r\n\r\n${' '.repeat(100)}`);
      return { socket, answer: () => answer };
    });
    try {
      // Two buffers of 400 000 fit the 1 000 000 ahead; the third grows as its bytes come.
      await eventually(() => front.receiving.received === 300, 'the first bytes of all three arrived');
      expect(front.receiving.unfilled).toBe(2 * (length - 100));
      for (const upload of uploads) upload.socket.write(' '.repeat(length - 100));
      await eventually(() => uploads.every((u) => u.answer().endsWith(`{"bytes":${length}}`)), 'all three answered whole');
      expect(front.receiving).toEqual({ received: 0, unfilled: 0 });
      // A body dropped half way gives back what it held ahead.
      const dropped = connect(port, '127.0.0.1');
      dropped.on('error', () => undefined);
      dropped.write(`POST /v2/query HTTP/1.1\r\nHost: x\r\nContent-Length: ${length}\r\n\r\n${' '.repeat(1000)}`);
      await eventually(() => front.receiving.unfilled === length - 1000, 'held ahead');
      dropped.destroy();
      await eventually(() => front.receiving.unfilled === 0 && front.receiving.received === 0, 'released when the client left');
    } finally {
      for (const upload of uploads) upload.socket.destroy();
      front.stopAccepting();
      front.closeAllSockets();
    }
  });

  it('sheds a body that would pass receivingBodyBytesMax while others are still being received', async () => {
    const front = new HttpFrontEnd({ mode: 'writer', limits: { receivingBodyBytesMax: 100_000 } });
    const url = `http://127.0.0.1:${await front.listen('127.0.0.1', 0)}`;
    front.attach({ readers: echo, writer: echo });
    try {
      let finish = (): void => undefined;
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new Uint8Array(60_000).fill(0x20)); // chunked: counted as it arrives
          finish = () => { controller.enqueue(new Uint8Array(10).fill(0x20)); controller.close(); };
        },
      });
      const slowUpload = fetch(`${url}/v2/query`, { method: 'POST', body: stream, duplex: 'half' } as RequestInit);
      await sleep(200);
      expectShed(await post(url, padded('{}', 50_000)), /the buffer of request bodies being received is full \(60000 bytes held, \d+ more would pass 100000\)/);
      finish();
      expect(await (await slowUpload).text()).toBe('{"bytes":60010}');
      expect((await post(url, padded('{}', 50_000))).text, 'released once complete').toBe('{"bytes":50000}');
      expect(front.pending).toBe(0);
    } finally {
      front.stopAccepting();
      front.closeAllSockets();
    }
  });
});

describe('a reader thread that dies', () => {
  const marker = `crash-${process.pid}-${Date.now()}-reader`;
  const crashRead = JSON.stringify(read([q('c', count({ nodes_where: { predicate: {
    eq: { left: { property: '$label' }, right: { constant: { string: marker } } },
  } } }))], ['c']));
  let stderr: string[] = [];

  beforeAll(() => {
    // Read by each reader thread when it starts (reader-worker.ts): workers started from now on.
    process.env['SVCDB_TEST_READER_CRASH'] = marker;
    const write = process.stderr.write.bind(process.stderr);
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array, ...rest: unknown[]) => {
      stderr.push(String(chunk));
      return (write as (c: string | Uint8Array, ...r: unknown[]) => boolean)(chunk, ...rest);
    });
  });

  afterEach(() => {
    stderr = [];
  });

  afterAll(() => {
    delete process.env['SVCDB_TEST_READER_CRASH'];
    vi.restoreAllMocks();
  });

  interface Answered { status: number; body: string }

  /** A job answered through a promise, like http.ts would answer a client. */
  function job(body: string): { job: QueryJob; answer: Promise<Answered> } {
    let done: (a: Answered) => void = () => undefined;
    const answer = new Promise<Answered>((resolve) => { done = resolve; });
    const responder = {
      settled: false,
      respond(status: number, reply: Uint8Array | string) {
        if (this.settled) return;
        this.settled = true;
        done({ status, body: typeof reply === 'string' ? reply : Buffer.from(reply).toString('utf8') });
      },
    };
    const bytes = Buffer.from(body);
    const own = new Uint8Array(new ArrayBuffer(bytes.byteLength)); // its own buffer, as http.ts allocates
    own.set(bytes);
    return { job: { body: own, flags: noFlags, responder }, answer };
  }

  it('that dies in its very first read leaves no reader slot behind, however often the killer is sent again', async () => {
    const store = Store.create();
    executeRequest(store, addNode(freshLabel()), noFlags, 'writer');
    const forward: QuerySink = { submit: (j) => j.responder.respond(200, '{}') };
    const pool = await ReaderPool.start({
      shared: store.shared, threads: 1, dispatch: 'per-request', queryTimeoutMs: 30_000, queryMemoryBytes: 64 * 1024 * 1024, forward,
      limits: { readerThreadHeapMbMax: 128 },
    });
    try {
      // Each killer is the first read of its thread (the one loaded after the last died).
      for (let i = 0; i < 3; i++) {
        const killer = job(crashRead);
        pool.submit(killer.job);
        expect((await killer.answer).status).toBe(500);
      }
      await eventually(() => store.topology.readsInProgress() + store.textMemory().readsInProgress() === 0, 'the dead threads\' slots are freed');
    } finally {
      await pool.close();
    }
  });

  it('after a store swap: a thread dying in its first read of the new store leaves no slot, and threads started for it claim one slot each', async () => {
    const first = Store.create();
    const pool = await ReaderPool.start({
      shared: first.shared, threads: 1, dispatch: 'per-request', queryTimeoutMs: 30_000, queryMemoryBytes: 64 * 1024 * 1024,
      forward: { submit: (j) => j.responder.respond(200, '{}') },
      limits: { readerThreadHeapMbMax: 128, readerRestartDelayMsMin: 50, readerRestartDelayMsMax: 50 },
    });
    const ask = async (body: string): Promise<Answered> => { const j = job(body); pool.submit(j.job); return await j.answer; };
    /** Slots claimed in `store`'s topology: the index a fresh claim gets (they are taken lowest first). */
    const claimed = (store: Store): number => {
      const probe = Topology.attach(store.shared.topology);
      probe.beginRead();
      const slot = probe.readerSlotIndex;
      probe.releaseReaderSlot();
      return slot;
    };
    try {
      const label = freshLabel();
      const reloaded = Store.create(); // a reader server reloaded its store
      executeRequest(reloaded, addNode(label), noFlags, 'writer');
      pool.swapStore(reloaded.shared);
      // The killer is the thread's first read of the new store.
      expect((await ask(crashRead)).status).toBe(500);
      await eventually(() => pool.threadsAlive === 1 && reloaded.topology.readsInProgress() + reloaded.textMemory().readsInProgress() === 0, 'its announcements in the new store are freed');
      // A whole new set of threads, started for the new store (the replacement fails to load).
      process.env['SVCDB_TEST_READER_CRASH'] = 'too short'; // a replacement refuses to start with it
      expect((await ask(crashRead)).status).toBe(500);
      await eventually(() => pool.threadsAlive === 0, 'the replacement failed');
      process.env['SVCDB_TEST_READER_CRASH'] = marker;
      await eventually(() => pool.restarts.done === 1, 'a new set of threads started');
      const loaded = claimed(reloaded);
      expect((await ask(countLabel(label))).body).toBe('{"c":1}');
      expect(claimed(reloaded), 'its thread reads with the slot it claimed as it loaded').toBe(loaded);
    } finally {
      process.env['SVCDB_TEST_READER_CRASH'] = marker;
      await pool.close();
    }
  });

  it('after a store swap keeps no reference to the store it replaced, through a restarted set of threads too', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const swapped: WeakRef<object>[] = [];
    const pool = await (async () => {
      const first = Store.create();
      swapped.push(new WeakRef(first.shared));
      return await ReaderPool.start({
        shared: first.shared, threads: 1, dispatch: 'per-request', queryTimeoutMs: 30_000, queryMemoryBytes: 64 * 1024 * 1024,
        forward: { submit: (j) => j.responder.respond(200, '{}') },
        limits: { readerThreadHeapMbMax: 128, readerRestartDelayMsMin: 50, readerRestartDelayMsMax: 50 },
      });
    })();
    const ask = async (body: string): Promise<Answered> => { const j = job(body); pool.submit(j.job); return await j.answer; };
    try {
      // A reader server reloads its store...
      pool.swapStore((() => { const store = Store.create(); swapped.push(new WeakRef(store.shared)); return store.shared; })());
      // ...its threads are replaced by a whole new set (the replacement fails to load)...
      process.env['SVCDB_TEST_READER_CRASH'] = 'too short';
      expect((await ask(crashRead)).status).toBe(500);
      await eventually(() => pool.threadsAlive === 0, 'the replacement failed');
      process.env['SVCDB_TEST_READER_CRASH'] = marker;
      await eventually(() => pool.restarts.done === 1, 'a new set of threads started');
      // ...and reloads again.
      pool.swapStore(Store.create().shared);
      for (let i = 0; i < 5; i++) { await sleep(20); gc(); }
      expect(swapped.map((ref) => ref.deref() === undefined), 'each store swapped out can be collected').toEqual([true, true]);
    } finally {
      process.env['SVCDB_TEST_READER_CRASH'] = marker;
      await pool.close();
    }
  });

  it('is replaced; the others of its batch are retried alone and answered; the killer answers a generic 500', async () => {
    const store = Store.create();
    const label = freshLabel();
    executeRequest(store, addNode(label), noFlags, 'writer');
    const forwarded: QueryJob[] = [];
    const forward: QuerySink = { submit: (j) => { forwarded.push(j); j.responder.respond(200, '{"forwarded":true}'); } };
    const pool = await ReaderPool.start({
      shared: store.shared, threads: 1, dispatch: 'coalesce', queryTimeoutMs: 30_000, queryMemoryBytes: 64 * 1024 * 1024, forward,
      limits: { readerThreadHeapMbMax: 128 }, // dies in a fraction of a second
    });
    try {
      // The first goes out alone at once; the rest queue behind it and leave as ONE batch.
      const first = job(countLabel(label));
      const batch = [job(countLabel(label)), job(crashRead), job(countLabel(label)), job(addNode(label))];
      pool.submit(first.job);
      for (const b of batch) pool.submit(b.job);
      expect(pool.queued).toBe(4);

      expect(await first.answer).toEqual({ status: 200, body: '{"c":1}' });
      const [before, killer, after, aWrite] = await Promise.all(batch.map((b) => b.answer));
      expect(before).toEqual({ status: 200, body: '{"c":1}' });
      expect(after).toEqual({ status: 200, body: '{"c":1}' });
      expect(aWrite, 'a collateral write is still forwarded to the writer').toEqual({ status: 200, body: '{"forwarded":true}' });
      expect(forwarded).toHaveLength(1);
      expect(killer!.status).toBe(500);
      expect(JSON.parse(killer!.body)).toEqual({
        error: 'internal_error', msg: 'internal error: a reader thread failed while running this request; see the server log',
      });
      const log = stderr.join('');
      expect(log).toMatch(/svcdb: reader thread failed running a batch of 4 requests \(each is retried alone\): .*memory limit/);
      expect(log).toMatch(/svcdb: reader thread failed running one request alone \(answered 500 internal_error\): .*memory limit/);

      expect(pool.tasksInFlight, 'no task is counted twice or lost').toBe(0);
      // The thread died inside a read (the test hook announces one first): its reader slot
      // is freed, or superseded adjacency blocks would never be reused again.
      for (let i = 0; i < 100 && store.topology.readsInProgress() + store.textMemory().readsInProgress() > 0; i++) await sleep(20);
      expect(store.topology.readsInProgress()).toBe(0);
      expect(store.textMemory().readsInProgress(), 'its text-memory slot too').toBe(0);
      // Piscina starts the replacement asynchronously; reads wait for it.
      const later = await Promise.all([job(countLabel(label)), job(countLabel(label))].map((b) => { pool.submit(b.job); return b.answer; }));
      expect(later).toEqual([{ status: 200, body: '{"c":1}' }, { status: 200, body: '{"c":1}' }]);
      expect(pool.threadsAlive).toBe(1);
      expect(pool.tasksInFlight).toBe(0);
    } finally {
      await pool.close();
    }
  });

  it('a reader thread whose code fails to load fails the start with the cause, instead of a pool that answers nothing', async () => {
    const store = Store.create();
    const marker = process.env['SVCDB_TEST_READER_CRASH'];
    process.env['SVCDB_TEST_READER_CRASH'] = 'short'; // reader-worker.ts throws while loading
    try {
      const forward: QuerySink = { submit: () => undefined };
      const started = ReaderPool.start({ shared: store.shared, threads: 2, dispatch: 'coalesce', queryTimeoutMs: 5_000, queryMemoryBytes: 1 << 20, forward });
      await expect(started).rejects.toThrow('reader pool failed to start: SVCDB_TEST_READER_CRASH must be at least 16 characters');
    } finally {
      if (marker === undefined) delete process.env['SVCDB_TEST_READER_CRASH'];
      else process.env['SVCDB_TEST_READER_CRASH'] = marker; // this block's own marker
    }
  });

  /**
   * A store with one node of a fresh label and a pool of `threads` readers on it (each reads
   * the environment of its start: SVCDB_TEST_READER_CRASH / _STALL), a thread killed by the
   * crash marker dying fast; `ask` answers a body through the pool.
   */
  async function poolOnOneNode(threads: number, readerRestartDelayMsMin: number, readerRestartDelayMsMax = readerRestartDelayMsMin): Promise<{ pool: ReaderPool; label: string; ask(body: string): Promise<Answered> }> {
    const store = Store.create();
    const label = freshLabel();
    executeRequest(store, addNode(label), noFlags, 'writer');
    const pool = await ReaderPool.start({
      shared: store.shared, threads, dispatch: 'coalesce', queryTimeoutMs: 30_000, queryMemoryBytes: 64 * 1024 * 1024, forward: { submit: () => undefined },
      limits: { readerThreadHeapMbMax: 128, readerRestartDelayMsMin, readerRestartDelayMsMax },
    });
    const ask = (body: string): Promise<Answered> => {
      const j = job(body);
      pool.submit(j.job);
      return j.answer;
    };
    return { pool, label, ask };
  }

  it('threads whose replacements fail to load: reads are answered 503 at once, and a new pool is started (with backoff) once threads load again', async () => {
    const { pool, label, ask } = await poolOnOneNode(1, 50, 200);
    const marker = process.env['SVCDB_TEST_READER_CRASH'];
    try {
      process.env['SVCDB_TEST_READER_CRASH'] = 'short'; // threads started from now on fail to load
      // A read sent the moment the killer is answered waits in Piscina's queue for the
      // replacement, which then fails to load: it must not wait there until its deadline.
      let early: Promise<Answered> | null = null;
      const killed = await ask(crashRead).then((answer) => {
        early = ask(countLabel(label));
        return answer;
      });
      expect(killed.status).toBe(500);
      // Piscina's replacement fails to load, and Piscina then replaces no thread of that pool.
      await eventually(() => pool.threadsAlive === 0, 'the replacement failed', { intervalMs: 20 });
      const earlyAnswer = await early!;
      expect(earlyAnswer.status, earlyAnswer.body).toBe(503);
      expect(pool.tasksInFlight, 'no task is left waiting for a thread').toBe(0);
      const started = Date.now();
      const refused = await ask(countLabel(label));
      expect(Date.now() - started, 'answered at once, not at the 30 s deadline').toBeLessThan(5_000);
      expect(refused.status).toBe(503);
      expect(JSON.parse(refused.body)).toEqual({
        error: 'server_overloaded',
        msg: 'server overloaded: no reader thread is running (new ones are being started; the server log says why they stopped); retry later',
      });
      // The pool's own starts fail the same way, and are tried again.
      await eventually(() => pool.restarts.failures >= 2, 'two starts failed', { intervalMs: 20 });
      expect(pool.restarts.lastFailure).toMatch(/reader threads failed to start: SVCDB_TEST_READER_CRASH must be at least 16 characters/);
      process.env['SVCDB_TEST_READER_CRASH'] = marker; // threads load again
      await eventually(() => pool.restarts.done === 1, 'a new pool started', { intervalMs: 20 });
      expect(pool.restarts).toEqual({ done: 1, failures: 0, lastFailure: null });
      expect(pool.threadsAlive).toBe(1);
      expect(await ask(countLabel(label))).toEqual({ status: 200, body: '{"c":1}' });
      // The new pool replaces a thread that dies as a fresh pool does.
      expect((await ask(crashRead)).status).toBe(500);
      expect(await ask(countLabel(label))).toEqual({ status: 200, body: '{"c":1}' });
      expect(pool.restarts.done).toBe(1);
      expect(pool.tasksInFlight).toBe(0);
      const log = stderr.join('');
      expect(log).toMatch(/svcdb: 1 of 1 reader threads are gone and not replaced; starting a new pool of 1/);
      expect(log).toMatch(/svcdb: reader threads failed to start: SVCDB_TEST_READER_CRASH must be at least 16 characters \(start 2 in a row to fail; the next is tried later\)/);
    } finally {
      process.env['SVCDB_TEST_READER_CRASH'] = marker;
      await pool.close();
    }
  }, 30_000);

  it('a new pool started beside threads that are still running reads lets those reads finish', async () => {
    const stall = `stall-${process.pid}-${Date.now()}-reader`;
    const marker = process.env['SVCDB_TEST_READER_CRASH'];
    process.env['SVCDB_TEST_READER_STALL'] = `4000:${stall}`; // read by each thread as it starts
    let pool: ReaderPool | null = null;
    try {
      const started = await poolOnOneNode(3, 400);
      pool = started.pool;
      const { label, ask } = started;
      process.env['SVCDB_TEST_READER_CRASH'] = 'short';
      expect((await ask(crashRead)).status).toBe(500);
      await eventually(() => pool!.threadsAlive <= 2, 'the dead thread is dropped', { timeoutMs: 10_000, intervalMs: 5 });
      expect(pool.threadsAlive, 'the replacement failed to load; two threads are left').toBe(2);
      process.env['SVCDB_TEST_READER_CRASH'] = marker; // the new pool (in 400 ms) loads
      // Two 4 s reads on the two threads left, running when the new pool takes over.
      const stalled = [ask(countLabel(`${stall}-1`)), sleep(300).then(() => ask(countLabel(`${stall}-2`)))];
      expect(await Promise.all(stalled)).toEqual([{ status: 200, body: '{"c":0}' }, { status: 200, body: '{"c":0}' }]);
      expect(pool.restarts.done).toBe(1);
      expect(pool.threadsAlive).toBe(3);
      expect(await ask(countLabel(label))).toEqual({ status: 200, body: '{"c":1}' });
      expect(pool.tasksInFlight).toBe(0);
    } finally {
      process.env['SVCDB_TEST_READER_CRASH'] = marker;
      delete process.env['SVCDB_TEST_READER_STALL'];
      await pool?.close();
    }
  }, 30_000);

  it('a replaced pool whose last thread dies fails the reads still waiting in its queue, and they are run by the new pool', async () => {
    const stall = `stall-${process.pid}-${Date.now()}-queued`;
    const marker = process.env['SVCDB_TEST_READER_CRASH'];
    process.env['SVCDB_TEST_READER_STALL'] = `4000:${stall}`; // long enough for the new pool to load on a loaded machine (0.5-0.7 s seen)
    let pool: ReaderPool | null = null;
    try {
      const started = await poolOnOneNode(3, 300);
      pool = started.pool;
      const { label, ask } = started;
      process.env['SVCDB_TEST_READER_CRASH'] = 'short';
      expect((await Promise.all([ask(crashRead), ask(crashRead)])).map((a) => a.status)).toEqual([500, 500]);
      await eventually(() => pool!.threadsAlive <= 1, 'the dead threads are dropped', { timeoutMs: 10_000, intervalMs: 5 });
      expect(pool.threadsAlive, 'two replacements failed to load; one thread is left').toBe(1);
      // One thread takes two tasks (one in its port); the third waits in Piscina's queue
      // (the thread Piscina starts for it fails to load).
      const stalled = ask(countLabel(`${stall}-1`));
      const inPort = ask(countLabel(label));
      const queued = ask(countLabel(label));
      process.env['SVCDB_TEST_READER_CRASH'] = marker; // the new pool loads
      await eventually(() => pool!.restarts.done > 0, 'the new pool is up', { timeoutMs: 10_000, intervalMs: 10 });
      expect(pool.restarts.done, 'the new pool took over while the old thread still runs').toBe(1);
      // The replaced pool's last thread dies: Piscina replaces none there.
      const retiring = (pool as unknown as { retiring: Set<{ pool: { threads: { terminate(): Promise<number> }[] } }> }).retiring;
      expect(retiring.size).toBe(1);
      for (const threads of retiring) await Promise.all(threads.pool.threads.map((thread) => thread.terminate()));
      expect((await stalled).status, 'its body went to the thread that died: not retried').toBe(500);
      expect((await inPort).status).toBe(500);
      expect(await queued, 'never left the queue: retried on the new pool').toEqual({ status: 200, body: '{"c":1}' });
      await eventually(() => pool!.tasksInFlight === 0 && retiring.size === 0, 'every task settled and the replaced pool destroyed', { timeoutMs: 1_000, intervalMs: 10 });
      expect(pool.tasksInFlight).toBe(0);
      expect(retiring.size, 'the replaced pool was destroyed').toBe(0);
      expect(await ask(countLabel(label))).toEqual({ status: 200, body: '{"c":1}' });
    } finally {
      process.env['SVCDB_TEST_READER_CRASH'] = marker;
      delete process.env['SVCDB_TEST_READER_STALL'];
      await pool?.close();
    }
  }, 30_000);

  it('closing the pool while replacement threads still load their code ends the threads, not the process', async () => {
    // The fixture closes pools at random moments of their replacements' load for 10 s; with
    // the threads loading their code through require(), it died within that on 6 runs of 6.
    const fixture = fileURLToPath(new URL('./fixtures/reader-pool-close-race.mjs', import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, [fixture, '10000'], { timeout: 60_000 });
    expect(stdout).toMatch(/^closed [1-9]\d* pools during a load of \d+ ms\n$/);
  }, 70_000);

  it('one costly request may wait in a busy thread as a spare task; cheap ones wait for an idle thread, in order; one thread holds no spare', async () => {
    const store = Store.create();
    const label = freshLabel();
    executeRequest(store, addNode(label), noFlags, 'writer');
    const forward: QuerySink = { submit: (j) => j.responder.respond(500, 'unexpected') };
    const costly = () => { const j = job(countLabel(label)); j.job.costly = true; return j; };
    for (const threads of [2, 1]) {
      const pool = await ReaderPool.start({ shared: store.shared, threads, dispatch: 'coalesce', queryTimeoutMs: 30_000, queryMemoryBytes: 64 * 1024 * 1024, forward });
      try {
        const busy = Array.from({ length: threads }, () => job(countLabel(label)));
        const spare = costly(), cheap = job(countLabel(label)), later = costly();
        for (const b of busy) pool.submit(b.job);
        expect([pool.tasksInFlight, pool.queued]).toEqual([threads, 0]);
        pool.submit(spare.job);
        expect([pool.tasksInFlight, pool.queued], `${threads} threads: the spare goes out`).toEqual(threads > 1 ? [threads + 1, 0] : [1, 1]);
        pool.submit(cheap.job);
        pool.submit(later.job);
        expect([pool.tasksInFlight, pool.queued], `${threads} threads: one spare in all; the costly one queues behind the cheap one`).toEqual(threads > 1 ? [threads + 1, 2] : [1, 3]);
        const answers = await Promise.all([...busy, spare, cheap, later].map((j) => j.answer));
        expect(answers).toEqual(Array.from({ length: threads + 3 }, () => ({ status: 200, body: '{"c":1}' })));
        expect(pool.tasksInFlight).toBe(0);
      } finally {
        await pool.close();
      }
    }
  });

  it('over HTTP: the killer answers 500, the server keeps both threads and answers reads', async () => {
    const server = await startMeshServer({ readers: 2, limits: { readerThreadHeapMbMax: 128 } });
    try {
      const label = freshLabel();
      expect((await post(server.url, addNode(label))).status).toBe(200);
      const killed = await post(server.url, crashRead);
      expect(killed.status).toBe(500);
      expect(errorOf(killed)).toEqual({
        error: 'internal_error', msg: 'internal error: a reader thread failed while running this request; see the server log',
      });
      for (let i = 0; i < 4; i++) expect((await post(server.url, countLabel(label))).text).toBe('{"c":1}');
      // Two threads again: two slow reads run side by side, not one after the other.
      const started = performance.now();
      await Promise.all([expectDeadline(post(server.url, slowRead)), expectDeadline(post(server.url, slowRead))]);
      expect(performance.now() - started, 'two slow reads in parallel').toBeLessThan(2 * SLOW_MS);
    } finally {
      await server.close();
    }
  });
});

describe('a request that cannot be sent to the writer thread', () => {
  it('is answered 500 and gives its place in the queue back', async () => {
    const writer = await WriterThread.start({ queryTimeoutMs: 5_000, queryMemoryBytes: 64 * 1024 * 1024, diskPath: null, onFatal: () => undefined });
    try {
      const worker = (writer as unknown as { worker: { postMessage: (...args: unknown[]) => void } }).worker;
      const post = worker.postMessage;
      worker.postMessage = () => { throw new Error('could not clone'); };
      const lost = answeredJob(addNode(freshLabel()), monotonicMs());
      writer.submit(lost.job); // sent with the turn's other requests, after this turn
      const answer = await lost.answer;
      worker.postMessage = post;
      expect(answer.status).toBe(500);
      expect(JSON.parse(answer.body).msg).toBe('internal error: the request could not be sent to the writer thread: could not clone');
      expect(writer.pendingRequests).toBe(0);
      const next = answeredJob(addNode(freshLabel()), monotonicMs());
      writer.submit(next.job);
      expect((await next.answer).status).toBe(200);
      expect(lost.offered()).toBe(1);
    } finally {
      await writer.close();
    }
  });
});

describe('requests sent to the writer thread', () => {
  it('go in one message per turn of the event loop, each answered on its own, in order', async () => {
    const writer = await WriterThread.start({ queryTimeoutMs: 5_000, queryMemoryBytes: 64 * 1024 * 1024, diskPath: null, onFatal: () => undefined });
    try {
      const worker = (writer as unknown as { worker: { postMessage: (message: { kind: string; queries?: unknown[] }, ...rest: unknown[]) => void } }).worker;
      const post = worker.postMessage.bind(worker);
      const sent: number[] = [];
      worker.postMessage = (message, ...rest) => { sent.push(message.queries?.length ?? 0); post(message, ...rest); };
      const label = freshLabel();
      const turn = Array.from({ length: 5 }, () => answeredJob(addNode(label), monotonicMs()));
      for (const { job } of turn) writer.submit(job);
      const answers = await Promise.all(turn.map((j) => j.answer));
      expect(answers.map((a) => JSON.parse(a.body))).toEqual([0, 1, 2, 3, 4].map((id) => ({ n: [{ $id: id }] })));
      const next = answeredJob(countLabel(label), monotonicMs());
      writer.submit(next.job);
      expect((await next.answer).body).toBe('{"c":5}');
      expect(sent).toEqual([5, 1]);
    } finally {
      await writer.close();
    }
  });
});

describe('a batch of writer requests', () => {
  it('answers a write durable at commit (memory) before the next request of its batch runs', async () => {
    const marker = 'svcdb-batch-stall-marker';
    process.env['SVCDB_TEST_WRITER_STALL'] = `${SLOW_MS}:${marker}`;
    const writer = await WriterThread.start({ queryTimeoutMs: 5_000, queryMemoryBytes: 64 * 1024 * 1024, diskPath: null, onFatal: () => undefined });
    delete process.env['SVCDB_TEST_WRITER_STALL'];
    try {
      const first = answeredJob(addNode(freshLabel()), monotonicMs());
      const stalled = answeredJob(addNode(marker), monotonicMs());
      writer.submit(first.job);
      writer.submit(stalled.job); // the same turn: the same message
      const sentAt = monotonicMs();
      expect((await first.answer).status).toBe(200);
      expect(monotonicMs() - sentAt, 'answered before the stalled request ran').toBeLessThan(SLOW_MS / 2);
      expect((await stalled.answer).status).toBe(200);
    } finally {
      await writer.close();
    }
  });
});

describe('a writer thread that dies', () => {
  it('answers what it never started 500 and what it started 409 outcome unknown, then reports fatal', async () => {
    const fatal: Error[] = [];
    const writer = await WriterThread.start({ queryTimeoutMs: 5_000, queryMemoryBytes: 64 * 1024 * 1024, diskPath: null, onFatal: (err) => fatal.push(err) });
    const answers: Promise<{ status: number; body: string }>[] = [];
    const submit = (body: string, requireWriter: boolean): void => {
      answers.push(new Promise((resolve) => {
        const responder = {
          settled: false,
          respond(status: number, reply: Uint8Array | string) {
            this.settled = true;
            resolve({ status, body: typeof reply === 'string' ? reply : Buffer.from(reply).toString('utf8') });
          },
        };
        writer.submit({ body: new Uint8Array(Buffer.from(body)), flags: { ...noFlags, requireWriter }, responder });
      }));
    };
    expect((await new Promise<number>((resolve) => {
      writer.submit({ body: new Uint8Array(Buffer.from(meshWrite)), flags: noFlags, responder: { settled: false, respond: (s: number) => resolve(s) } });
    }))).toBe(200);
    submit(slowRead, true); // starts running at once and holds the thread
    submit(addNode(freshLabel()), false); // waits behind it: never starts
    await sleep(300);
    // The thread dies the way a heap-limit death or a crash ends it: from outside, mid-request.
    await (writer as unknown as { worker: { terminate(): Promise<number> } }).worker.terminate();
    const [running, waiting] = await Promise.all(answers);
    expect(running!.status).toBe(409);
    expect(JSON.parse(running!.body)).toEqual({
      error: 'writer_fenced_commit_outcome_unknown',
      msg: 'the writer thread failed after this request started: if it was a write, it may or may not have happened; see the server log',
    });
    expect(waiting!.status).toBe(500);
    expect(JSON.parse(waiting!.body)).toEqual({ error: 'internal_error', msg: 'internal error: the writer thread failed; see the server log' });
    expect(fatal).toHaveLength(1);
    submit(addNode(freshLabel()), false);
    expect((await answers[2])!.status, 'after the death: failed at once, generically').toBe(500);
    expect(JSON.parse((await answers[2])!.body).msg).toBe('internal error: the writer thread failed; see the server log');
  });
});
