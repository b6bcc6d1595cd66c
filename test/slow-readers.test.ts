// Answers to clients that read slowly or not at all (src/server/http.ts, tryEnd): an answer
// the socket does not take at once is sent as it drains, whole and in order, and a client
// that never reads holds at most its one answer in the server, not every answer it asks for.
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServer, type SpawnedServer } from './helpers/server.js';

const NODES = 20_000;
const PAD = 'x'.repeat(400);
/** value_map of every node: ~10 MB of answer, far more than a socket's buffers. */
const ALL_ROWS = JSON.stringify({ request_type: 'read', query: { read: { entries: [{ query: { name: 'a', root: { value_map: { input: { nodes: { reference: 'all' } } } } } }], returns: ['a'] } } });

const post = (body: string): string => `POST /v2/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const rssMb = (pid: number): number => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

/** The HTTP/1.1 answers (Content-Length framed) read from `socket` until `count` arrived. */
function readAnswers(socket: Socket, count: number): Promise<{ status: number; body: string }[]> {
  return new Promise((resolve, reject) => {
    let buffered = Buffer.alloc(0);
    const answers: { status: number; body: string }[] = [];
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        const headEnd = buffered.indexOf('\r\n\r\n');
        if (headEnd < 0) return;
        const head = buffered.subarray(0, headEnd).toString('latin1');
        const length = Number(/content-length: (\d+)/i.exec(head)![1]);
        if (buffered.length < headEnd + 4 + length) return;
        answers.push({ status: Number(head.split(' ')[1]), body: buffered.subarray(headEnd + 4, headEnd + 4 + length).toString('utf8') });
        buffered = buffered.subarray(headEnd + 4 + length);
        if (answers.length === count) resolve(answers);
      }
    });
    socket.on('error', reject);
    socket.on('close', () => reject(new Error(`closed after ${answers.length} of ${count} answers`)));
  });
}

describe('answers to slow readers', () => {
  let server: SpawnedServer;

  beforeAll(async () => {
    server = await spawnServer(['--readers', '1']);
    for (let first = 0; first < NODES; first += 2_000) {
      const entries = Array.from({ length: 2_000 }, (_, i) => ({ query: { name: null, root: { add_n: { label: 'Row', properties: [['n', { value: { i64: first + i } }], ['pad', { value: { string: PAD } }]] } } } }));
      const res = await fetch(`${server.url}/v2/query`, { method: 'POST', body: JSON.stringify({ request_type: 'write', query: { write: { entries, returns: [] } } }) });
      expect(res.status).toBe(200);
    }
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
  });

  it('a client that pauses reading gets the whole answer once it reads, and the connection then serves the next request', async () => {
    const socket = connect(server.port, '127.0.0.1');
    try {
      socket.pause();
      socket.write(post(ALL_ROWS));
      await sleep(1_000); // the server has written what the socket took; the rest waits
      const answers = readAnswers(socket, 1);
      socket.resume();
      const [big] = await answers;
      expect(big!.status).toBe(200);
      const rows = (JSON.parse(big!.body) as { a: { n: number }[] }).a;
      expect(rows).toHaveLength(NODES);
      expect(rows.map((r) => r.n).sort((a, b) => a - b)).toEqual(Array.from({ length: NODES }, (_, i) => i));
      const next = readAnswers(socket, 1);
      socket.write(post(JSON.stringify({ request_type: 'read', query: { read: { entries: [{ query: { name: 'c', root: { count: { input: { nodes: { reference: 'all' } } } } } }], returns: ['c'] } } })));
      expect(await next).toEqual([{ status: 200, body: `{"c":${NODES}}` }]);
    } finally {
      socket.destroy();
    }
  }, 30_000);

  it('clients that ask again and again without reading do not grow the server by every answer', async () => {
    const pid = server.child.pid!;
    const before = rssMb(pid);
    const sockets = Array.from({ length: 3 }, () => {
      const socket = connect(server.port, '127.0.0.1');
      socket.on('error', () => undefined);
      socket.pause(); // never reads
      return socket;
    });
    try {
      let peak = before;
      // 3 clients x 10 requests x ~10 MB: ~300 MB of answers asked for.
      for (let round = 0; round < 10; round++) {
        for (const socket of sockets) if (!socket.destroyed) socket.write(post(ALL_ROWS));
        await sleep(300);
        peak = Math.max(peak, rssMb(pid));
      }
      // With every answer buffered the server grew by ~300 MB; holding one answer per client, by far less.
      expect(peak - before, `RSS ${before.toFixed(0)} -> peak ${peak.toFixed(0)} MiB`).toBeLessThan(100);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
    // Still serving.
    const res = await fetch(`${server.url}/v2/query`, { method: 'POST', body: JSON.stringify({ request_type: 'read', query: { read: { entries: [{ query: { name: 'c', root: { count: { input: { nodes: { reference: 'all' } } } } } }], returns: ['c'] } } }) });
    expect(await res.text()).toBe(`{"c":${NODES}}`);
  }, 60_000);
});

describe.each([1, 2])('a stop while answers are still being written (--http-threads %i)', (threads) => {
  it('SIGTERM waits until every answer begun is written whole, then exits 0', async () => {
    const server = await spawnServer(['--readers', '1', '--http-threads', String(threads)]);
    try {
      for (let first = 0; first < NODES; first += 2_000) {
        const entries = Array.from({ length: 2_000 }, (_, i) => ({ query: { name: null, root: { add_n: { label: 'Row', properties: [['n', { value: { i64: first + i } }], ['pad', { value: { string: PAD } }]] } } } }));
        const res = await fetch(`${server.url}/v2/query`, { method: 'POST', body: JSON.stringify({ request_type: 'write', query: { write: { entries, returns: [] } } }) });
        expect(res.status).toBe(200);
      }
      // Several connections (spread over the threads), each with a ~10 MB answer the socket
      // takes only part of while the client does not read.
      const sockets = Array.from({ length: 4 }, () => connect(server.port, '127.0.0.1'));
      for (const socket of sockets) {
        socket.pause();
        socket.write(post(ALL_ROWS));
      }
      await sleep(1_000);
      const answers = sockets.map((socket) => readAnswers(socket, 1));
      const exit = server.stop('SIGTERM');
      await sleep(300); // the stop has begun; the answers are still half written
      for (const socket of sockets) socket.resume();
      for (const answer of answers) {
        const [big] = await answer;
        expect(big!.status).toBe(200);
        expect((JSON.parse(big!.body) as { a: unknown[] }).a).toHaveLength(NODES);
      }
      expect(await exit).toEqual({ code: 0, signal: null });
      for (const socket of sockets) socket.destroy();
    } finally {
      await server.stop('SIGKILL');
    }
  }, 60_000);
});
