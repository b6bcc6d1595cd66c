// The HTTP surface of the real server (envelope.md §1, §6, §11; errors.md §1, §3),
// run as a child process on a random loopback port exactly as users start it.
import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRequestFlags } from '../src/protocol/headers.js';
import { SvcError } from '../src/protocol/errors.js';
import { HttpFrontEnd } from '../src/server/http.js';
import type { QueryJob, QuerySink } from '../src/server/job.js';
import { runCli, spawnServer, startLine, type SpawnedServer } from './helpers/server.js';
import { countNodesBody } from './helpers/requests.js';
import { exchange } from './helpers/raw-http.js';
import { eventually } from './helpers/eventually.js';

const BODY_BYTES_MAX = 16 * 1024 * 1024;
const HEALTH_READY = '{"index_runtime":"ready","mode":"writer","ready":true,"storage":"ok"}';
const BOOLEAN_HEADERS = ['x-svc-warm', 'x-svc-require-writer', 'x-svc-await-durable'] as const;

let labelCounter = 0;
/** A label no other test uses, so tests sharing one server do not see each other's nodes. */
function freshLabel(): string {
  return `HttpTest${process.pid}_${++labelCounter}`;
}

function addNodes(label: string, count = 1): string {
  const entries = Array.from({ length: count }, (_, i) => ({
    query: { name: `n${i}`, root: { add_n: { label, properties: [['seq', { value: { i64: i } }]] } } },
  }));
  return JSON.stringify({ request_type: 'write', query: { write: { entries, returns: entries.map((e) => e.query.name) } } });
}

interface Answer {
  status: number;
  contentType: string | null;
  text: string;
}

async function post(server: SpawnedServer, body: string | Uint8Array | ReadableStream<Uint8Array>, headers: Record<string, string> = {}): Promise<Answer> {
  const init: RequestInit & { duplex?: 'half' } = { method: 'POST', body, headers };
  if (body instanceof ReadableStream) init.duplex = 'half';
  const res = await fetch(`${server.url}/v2/query`, init);
  return { status: res.status, contentType: res.headers.get('content-type'), text: await res.text() };
}

async function request(server: SpawnedServer, method: string, path: string): Promise<Answer> {
  const res = await fetch(`${server.url}${path}`, { method });
  return { status: res.status, contentType: res.headers.get('content-type'), text: await res.text() };
}

function errorOf(answer: Answer): { error: string; msg: string } {
  const parsed = JSON.parse(answer.text) as { error: string; msg: string };
  expect(Object.keys(parsed).sort(), `error envelope has exactly error and msg: ${answer.text}`).toEqual(['error', 'msg']);
  return parsed;
}

/** `length` bytes: a valid read request padded with trailing whitespace (still valid JSON). */
function paddedRead(label: string, length: number): Uint8Array {
  const json = Buffer.from(countNodesBody(label));
  const body = Buffer.alloc(length, 0x20);
  json.copy(body);
  return body;
}

describe('parseRequestFlags (stage 1)', () => {
  const parse = (headers: Record<string, string>) => parseRequestFlags((name) => headers[name]);

  it('absent headers are null, true/1/false/0 in any case are booleans', () => {
    expect(parse({})).toEqual({ warm: null, requireWriter: null, awaitDurable: null });
    expect(parse({ 'x-svc-warm': 'TRUE', 'x-svc-require-writer': '0', 'x-svc-await-durable': 'False' }))
      .toEqual({ warm: true, requireWriter: false, awaitDurable: false });
    expect(parse({ 'x-svc-warm': '1', 'x-svc-require-writer': 'tRuE', 'x-svc-await-durable': 'FALSE' }))
      .toEqual({ warm: true, requireWriter: true, awaitDurable: false });
  });

  it('x-svc-tenant-id is ignored', () => {
    expect(parse({ 'x-svc-tenant-id': 'anything at all' })).toEqual({ warm: null, requireWriter: null, awaitDurable: null });
  });

  it('any other value throws invalid_request_option 400 naming the header', () => {
    for (const header of BOOLEAN_HEADERS) {
      for (const value of ['', 'yes', 'truth', ' true', '10', 'falsey']) {
        let caught: unknown;
        try { parse({ [header]: value }); } catch (err) { caught = err; }
        expect(caught, `${header}: ${JSON.stringify(value)}`).toBeInstanceOf(SvcError);
        expect(caught).toMatchObject({ code: 'invalid_request_option', status: 400, message: `${header} must be true or false` });
      }
    }
  });

  it('a value that is not text gets the UTF-8 message', () => {
    expect(() => parse({ 'x-svc-warm': 'tr\u00fce' })).toThrow('x-svc-warm must be a UTF-8 boolean header');
  });

  it('the first bad header in table order decides', () => {
    expect(() => parse({ 'x-svc-await-durable': 'x', 'x-svc-warm': 'y' })).toThrow('x-svc-warm must be true or false');
  });
});

describe('HttpFrontEnd before the threads are up', () => {
  it('readyz answers 503 with ready:false until attached, and queries wait for the attach', async () => {
    const front = new HttpFrontEnd({ mode: 'writer' });
    const port = await front.listen('127.0.0.1', 0);
    const url = `http://127.0.0.1:${port}`;
    try {
      const notReady = '{"index_runtime":"ready","mode":"writer","ready":false,"storage":"ok"}';
      const readyz = await fetch(`${url}/readyz`);
      expect(readyz.status).toBe(503);
      expect(await readyz.text()).toBe(notReady);
      const healthz = await fetch(`${url}/healthz`);
      expect(healthz.status, 'liveness is always 200').toBe(200);
      expect(await healthz.text()).toBe(notReady);

      const early = fetch(`${url}/v2/query`, { method: 'POST', body: '{"early":true}' });
      await new Promise((r) => setTimeout(r, 50));
      const sink = (name: string): QuerySink => ({
        submit(job: QueryJob) {
          job.responder.respond(200, `{"body":${JSON.stringify(new TextDecoder().decode(job.body))},"via":"${name}"}`);
        },
      });
      front.attach({ readers: sink('readers'), writer: sink('writer') });
      expect(await (await early).text()).toBe('{"body":"{\\"early\\":true}","via":"readers"}');
      expect((await fetch(`${url}/readyz`)).status).toBe(200);

      const pinned = await fetch(`${url}/v2/query`, { method: 'POST', body: '{}', headers: { 'x-svc-require-writer': 'true' } });
      expect(await pinned.text()).toBe('{"body":"{}","via":"writer"}');
      expect(pinned.headers.get('content-type')).toBe('application/json');
      expect(front.pending).toBe(0);

      front.stopAccepting();
      expect(front.ready, 'not ready once stopping').toBe(false);
    } finally {
      front.stopAccepting();
      front.closeAllSockets();
    }
  });
});

describe('HttpFrontEnd: request framing', () => {
  it('closes a connection whose Content-Length headers disagree, running nothing: a request hidden in the body is not served', async () => {
    const front = new HttpFrontEnd({ mode: 'writer' });
    const port = await front.listen('127.0.0.1', 0);
    const bodies: string[] = [];
    const sink: QuerySink = { submit(job: QueryJob) { bodies.push(new TextDecoder().decode(job.body)); job.responder.respond(200, '{}'); } };
    front.attach({ readers: sink, writer: sink });
    try {
      const hidden = 'POST /v2/query HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\n"hidden"';
      const outer = `{}${hidden}`;
      // uWS frames by the first length; a proxy framing by the last would see one request.
      expect(await exchange(port, `POST /v2/query HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: ${outer.length}\r\n\r\n${outer}`)).toBe('');
      expect(bodies).toEqual([]);
      // On every other route and method too (each would answer, then serve the hidden request).
      for (const [method, path] of [['GET', '/healthz'], ['GET', '/readyz'], ['GET', '/metrics'], ['GET', '/v2/query'], ['POST', '/nowhere']]) {
        const answer = await exchange(port, `${method} ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: ${hidden.length}\r\n\r\n${hidden}`);
        expect(answer, `${method} ${path}`).toBe('');
      }
      expect(bodies).toEqual([]);
      // The same length twice is one length.
      const same = await exchange(port, 'POST /v2/query HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}');
      expect(same).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(bodies).toEqual(['{}']);
      expect(front.pending).toBe(0);
    } finally {
      front.stopAccepting();
      front.closeAllSockets();
    }
  });
});

describe('svc serve: start-up', () => {
  it('prints exactly one start-up line naming the real port and reader count', async () => {
    const server = await spawnServer(['--readers', '1']);
    try {
      const lines = server.stdout().split('\n').filter((l) => l !== '');
      expect(lines).toHaveLength(1);
      const match = startLine.exec(lines[0]!);
      expect(match?.[2]).toBe('127.0.0.1');
      expect(Number(match?.[3])).toBeGreaterThan(0);
      expect(match?.[4]).toBe('memory');
      expect(match?.[5]).toBe('1');
      expect((await request(server, 'GET', '/healthz')).status).toBe(200);
    } finally {
      expect((await server.stop()).code).toBe(0);
    }
  });

  it('exits 1 with a clear message when the port is taken', async () => {
    const first = await spawnServer();
    try {
      const second = await runCli(['serve', '--port', String(first.port)]);
      expect(second.code).toBe(1);
      expect(second.stderr).toMatch(/cannot listen on 127\.0\.0\.1:\d+/);
      expect(second.stdout).not.toMatch(/listening/);
    } finally {
      await first.stop();
    }
  });

  it('refuses to run on the uWebSockets.js JS fallback (exit 1, says why)', async () => {
    const result = await runCli(['serve', '--port', '0'], { UWS_USE_FALLBACK: '1' });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/native binary/);
    expect(result.stdout).not.toMatch(/svcdb listening/);
  });

  it('rejects a bad --readers value', async () => {
    const result = await runCli(['serve', '--port', '0', '--readers', '0']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/readers must be an integer/);
  });
});

describe('svc serve: HTTP surface', () => {
  let server: SpawnedServer;

  beforeAll(async () => {
    server = await spawnServer(['--readers', '2']);
  });

  afterAll(async () => {
    const exit = await server.stop();
    expect(exit.code, `server stderr: ${server.stderr()}`).toBe(0);
  });

  describe('health routes', () => {
    it.each(['/healthz', '/readyz'])('GET %s answers 200 with the health body', async (path) => {
      const answer = await request(server, 'GET', path);
      expect(answer.status).toBe(200);
      expect(answer.contentType).toBe('application/json');
      expect(answer.text).toBe(HEALTH_READY);
    });
  });

  describe('unknown paths and wrong methods', () => {
    it.each([
      ['GET', '/'], ['GET', '/nope'], ['POST', '/v2/queryx'], ['POST', '/v2/query/extra'], ['GET', '/v1/query'], ['POST', '/healthz/x'],
    ])('%s %s answers 404 with an empty body', async (method, path) => {
      const answer = await request(server, method, path);
      expect(answer.status).toBe(404);
      expect(answer.text).toBe('');
    });

    it.each([
      ['GET', '/v2/query'], ['PUT', '/v2/query'], ['DELETE', '/v2/query'], ['PATCH', '/v2/query'],
      ['POST', '/healthz'], ['PUT', '/readyz'], ['DELETE', '/healthz'],
    ])('%s %s answers 405 with an empty body', async (method, path) => {
      const answer = await request(server, method, path);
      expect(answer.status).toBe(405);
      expect(answer.text).toBe('');
    });
  });

  describe('execution headers (stage 1)', () => {
    const badValues = ['yes', 'no', '2', '-1', 'tru', 'truee', 't', 'f', 'on', 'true,false', 'null', ''];

    for (const header of BOOLEAN_HEADERS) {
      it.each(badValues)(`${header}: %j answers 400 invalid_request_option`, async (value) => {
        const answer = await post(server, countNodesBody(freshLabel()), { [header]: value });
        expect(answer.status).toBe(400);
        expect(answer.contentType).toBe('application/json');
        expect(errorOf(answer)).toEqual({ error: 'invalid_request_option', msg: `${header} must be true or false` });
      });
    }

    it('a bad header wins over an undecodable body (stage 1 before stage 3)', async () => {
      const answer = await post(server, '{not json', { 'x-svc-warm': 'maybe' });
      expect(answer.status).toBe(400);
      expect(errorOf(answer)).toEqual({ error: 'invalid_request_option', msg: 'x-svc-warm must be true or false' });
    });

    it('a bad header wins over an oversized body (stage 1 before stage 2)', async () => {
      const answer = await post(server, new Uint8Array(BODY_BYTES_MAX + 1), { 'x-svc-await-durable': 'sure' });
      expect(answer.status).toBe(400);
      expect(errorOf(answer)).toEqual({ error: 'invalid_request_option', msg: 'x-svc-await-durable must be true or false' });
    });

    it('header names are case-insensitive', async () => {
      const answer = await post(server, countNodesBody(freshLabel()), { 'X-Svc-Warm': 'nope' });
      expect(answer.status).toBe(400);
      expect(errorOf(answer).msg).toBe('x-svc-warm must be true or false');
    });

    it.each([
      ['x-svc-warm', 'TRUE'], ['x-svc-warm', 'True'], ['x-svc-warm', '1'], ['x-svc-warm', '0'], ['x-svc-warm', 'FALSE'],
      ['x-svc-require-writer', 'TRUE'], ['x-svc-require-writer', '1'], ['x-svc-require-writer', '0'], ['x-svc-require-writer', 'fAlSe'],
      ['x-svc-await-durable', '0'], ['x-svc-await-durable', 'False'],
    ])('%s: %s is accepted on a read', async (header, value) => {
      const label = freshLabel();
      expect((await post(server, addNodes(label, 2))).status).toBe(200);
      const answer = await post(server, countNodesBody(label), { [header]: value });
      expect(answer.status, answer.text).toBe(200);
      expect(JSON.parse(answer.text)).toEqual({ n: 2 });
    });

    it.each([['x-svc-await-durable', 'TRUE'], ['x-svc-await-durable', '1'], ['x-svc-warm', '0'], ['x-svc-require-writer', 'True']])(
      '%s: %s is accepted on a write', async (header, value) => {
        const answer = await post(server, addNodes(freshLabel()), { [header]: value });
        expect(answer.status, answer.text).toBe(200);
      },
    );

    it('x-svc-tenant-id is accepted whatever its value', async () => {
      for (const value of ['', 'tenant-a', 'not a boolean', 'true']) {
        const answer = await post(server, countNodesBody(freshLabel()), { 'x-svc-tenant-id': value });
        expect(answer.status, `${value}: ${answer.text}`).toBe(200);
      }
    });

    it('warm on a write and await-durable on a read answer 400 (stage 4)', async () => {
      const warmWrite = await post(server, addNodes(freshLabel()), { 'x-svc-warm': 'true' });
      expect(warmWrite.status).toBe(400);
      expect(errorOf(warmWrite)).toEqual({ error: 'invalid_request_option', msg: 'x-svc-warm is only valid for read requests' });
      const durableRead = await post(server, countNodesBody(freshLabel()), { 'x-svc-await-durable': '1' });
      expect(durableRead.status).toBe(400);
      expect(errorOf(durableRead)).toEqual({ error: 'invalid_request_option', msg: 'x-svc-await-durable is only valid for write requests' });
    });
  });

  describe('request body (stage 2)', () => {
    it('a body of 16 MiB + 1 byte answers 400 invalid_request_body', async () => {
      const answer = await post(server, paddedRead(freshLabel(), BODY_BYTES_MAX + 1));
      expect(answer.status).toBe(400);
      expect(answer.contentType).toBe('application/json');
      const err = errorOf(answer);
      expect(err.error).toBe('invalid_request_body');
      expect(err.msg.startsWith('failed to read request body:')).toBe(true);
    });

    it('a body of exactly 16 MiB (whitespace-padded valid JSON) is accepted', async () => {
      const label = freshLabel();
      expect((await post(server, addNodes(label, 3))).status).toBe(200);
      const answer = await post(server, paddedRead(label, BODY_BYTES_MAX));
      expect(answer.text).not.toContain('invalid_request_body');
      expect(answer.status, answer.text).toBe(200);
      expect(JSON.parse(answer.text)).toEqual({ n: 3 });
    });

    it('a chunked upload (no Content-Length) over the limit answers 400 invalid_request_body', async () => {
      let sent = 0;
      const chunk = new Uint8Array(1024 * 1024).fill(0x20);
      const stream = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent > BODY_BYTES_MAX + chunk.length) controller.close();
          else {
            sent += chunk.length;
            controller.enqueue(chunk);
          }
        },
      });
      const answer = await post(server, stream);
      expect(answer.status).toBe(400);
      expect(errorOf(answer).error).toBe('invalid_request_body');
    });

    it('a chunked upload under the limit is read completely', async () => {
      const label = freshLabel();
      expect((await post(server, addNodes(label))).status).toBe(200);
      const bytes = new TextEncoder().encode(countNodesBody(label));
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(bytes.subarray(0, 10));
          controller.enqueue(bytes.subarray(10));
          controller.close();
        },
      });
      const answer = await post(server, stream);
      expect(answer.status, answer.text).toBe(200);
      expect(JSON.parse(answer.text)).toEqual({ n: 1 });
    });

    it('the connection stays usable after an over-limit answer', async () => {
      const big = await post(server, new Uint8Array(BODY_BYTES_MAX + 1));
      expect(big.status).toBe(400);
      const health = await request(server, 'GET', '/healthz');
      expect(health.status).toBe(200);
    });

    it('an empty or undecodable body answers 400 invalid_query_json', async () => {
      for (const body of ['', '{', '[]', '{"request_type":"read"}']) {
        const answer = await post(server, body);
        expect(answer.status, body).toBe(400);
        expect(answer.contentType).toBe('application/json');
        expect(errorOf(answer).error).toBe('invalid_query_json');
      }
    });

    it('Content-Type is not checked', async () => {
      const answer = await post(server, countNodesBody(freshLabel()), { 'content-type': 'text/plain' });
      expect(answer.status, answer.text).toBe(200);
    });
  });

  describe('queries', () => {
    it('a write then a read sees the write', async () => {
      const label = freshLabel();
      const write = await post(server, addNodes(label, 3));
      expect(write.status, write.text).toBe(200);
      expect(write.contentType).toBe('application/json');
      expect(Object.keys(JSON.parse(write.text) as object).sort()).toEqual(['n0', 'n1', 'n2']);
      const read = await post(server, countNodesBody(label));
      expect(read.status, read.text).toBe(200);
      expect(read.contentType).toBe('application/json');
      expect(read.text).toBe('{"n":3}');
    });

    it('x-svc-require-writer: true reads on the writer thread and sees every acknowledged write', async () => {
      const label = freshLabel();
      expect((await post(server, addNodes(label, 2))).status).toBe(200);
      const read = await post(server, countNodesBody(label), { 'x-svc-require-writer': 'true' });
      expect(read.status, read.text).toBe(200);
      expect(read.text).toBe('{"n":2}');
    });

    it('many concurrent reads are each answered with their own result', async () => {
      const labels = Array.from({ length: 8 }, () => freshLabel());
      for (let i = 0; i < labels.length; i++) expect((await post(server, addNodes(labels[i]!, i + 1))).status).toBe(200);
      const reads = Array.from({ length: 400 }, (_, i) => i % labels.length);
      const answers = await Promise.all(reads.map((i) => post(server, countNodesBody(labels[i]!))));
      answers.forEach((answer, k) => {
        expect(answer.status, answer.text).toBe(200);
        expect(answer.text).toBe(`{"n":${reads[k]! + 1}}`);
      });
    });

    it('concurrent writes (forwarded by readers to the writer) all commit', async () => {
      const label = freshLabel();
      const writes = await Promise.all(Array.from({ length: 100 }, () => post(server, addNodes(label))));
      for (const w of writes) expect(w.status, w.text).toBe(200);
      const ids = writes.map((w) => (JSON.parse(w.text) as { n0: [{ $id: number }] }).n0[0].$id);
      expect(new Set(ids).size).toBe(100);
      const read = await post(server, countNodesBody(label));
      expect(read.text).toBe('{"n":100}');
    });

    it('mixed concurrent reads, writes and writer-pinned reads are all answered', async () => {
      const label = freshLabel();
      const work: Promise<Answer>[] = [];
      for (let i = 0; i < 150; i++) {
        if (i % 3 === 0) work.push(post(server, addNodes(label)));
        else if (i % 3 === 1) work.push(post(server, countNodesBody(label)));
        else work.push(post(server, countNodesBody(label), { 'x-svc-require-writer': '1' }));
      }
      const answers = await Promise.all(work);
      for (const a of answers) expect(a.status, a.text).toBe(200);
      expect((await post(server, countNodesBody(label))).text).toBe('{"n":50}');
    });
  });
});

describe('svc serve --read-dispatch per-request', () => {
  it('answers reads and writes the same way without coalescing', async () => {
    const server = await spawnServer(['--read-dispatch', 'per-request', '--readers', '1']);
    try {
      const label = freshLabel();
      const writes = await Promise.all(Array.from({ length: 20 }, () => post(server, addNodes(label))));
      for (const w of writes) expect(w.status, w.text).toBe(200);
      const reads = await Promise.all(Array.from({ length: 50 }, () => post(server, countNodesBody(label))));
      for (const r of reads) expect(r.text).toBe('{"n":20}');
    } finally {
      expect((await server.stop()).code).toBe(0);
    }
  });
});

describe('svc serve: graceful stop', () => {
  function openSocket(port: number): Promise<Socket> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => resolve(socket));
      socket.once('error', reject);
    });
  }

  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('SIGTERM stops accepting, drains an in-flight request, then exits 0', async () => {
    const server = await spawnServer();
    const label = freshLabel();
    expect((await post(server, addNodes(label, 4))).status).toBe(200);
    const body = countNodesBody(label);

    // A request whose body is only half sent is in flight when the signal arrives.
    const socket = await openSocket(server.port);
    let received = '';
    socket.setEncoding('utf8').on('data', (d: string) => { received += d; });
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(`POST /v2/query HTTP/1.1\r\nHost: test\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 25)}`);
    const idle = await openSocket(server.port); // an idle keep-alive connection must not hold the exit
    await sleep(1_000); // the server has read the half body (a slow machine may take a while)

    server.child.kill('SIGTERM');
    // No new connections while draining: refused once the signal is handled.
    await eventually(async () => {
      try {
        (await openSocket(server.port)).destroy();
        return false;
      } catch (err) {
        return (err as { code?: string }).code === 'ECONNREFUSED';
      }
    }, 'new connections are refused', { timeoutMs: 10_000, intervalMs: 50 });
    await sleep(300);
    expect(server.child.exitCode, 'the server waits for the in-flight request').toBeNull();

    socket.write(body.slice(25));
    await closed; // answered, then the connection is closed because the server is stopping
    expect(received).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(received.toLowerCase()).toContain('content-type: application/json');
    expect(received.slice(received.indexOf('\r\n\r\n') + 4)).toBe('{"n":4}');

    const exit = await server.exited;
    expect(exit, server.stderr()).toEqual({ code: 0, signal: null });
    idle.destroy();
  });

  it('SIGINT with nothing in flight exits 0 promptly', async () => {
    const server = await spawnServer();
    const started = Date.now();
    expect(await server.stop('SIGINT')).toEqual({ code: 0, signal: null });
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

describe('svc serve --database-id: a server bound to one database', () => {
  let server: SpawnedServer;

  beforeAll(async () => {
    // Two front-end threads: the worker thread's front end must be bound too.
    server = await spawnServer(['--readers', '1', '--http-threads', '2', '--database-id', 'db_a']);
  });

  afterAll(async () => {
    const exit = await server.stop();
    expect(exit.code, `server stderr: ${server.stderr()}`).toBe(0);
  });

  /** One request on a connection of its own, so both front-end threads get some. */
  function postOnNewConnection(path: string, body: string, headers: Record<string, string>): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(`${server.url}${path}`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => { text += d; }).on('end', () => {
          resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'] ?? null, text });
        });
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  it('refuses a query or explain whose x-svc-tenant-id names another database: 421 misdirected_request', async () => {
    for (let i = 0; i < 6; i++) {
      for (const path of ['/v2/query', '/v2/explain']) {
        const answer = await postOnNewConnection(path, countNodesBody(freshLabel()), { 'x-svc-tenant-id': 'db_b' });
        expect(answer.status, answer.text).toBe(421);
        expect(answer.contentType).toBe('application/json');
        expect(errorOf(answer).error).toBe('misdirected_request');
      }
    }
  });

  it('never runs the refused request (a misdirected write adds nothing)', async () => {
    const label = freshLabel();
    const refused = await postOnNewConnection('/v2/query', addNodes(label, 3), { 'x-svc-tenant-id': 'db_b' });
    expect(refused.status).toBe(421);
    const counted = await postOnNewConnection('/v2/query', countNodesBody(label), { 'x-svc-tenant-id': 'db_a' });
    expect(counted.status, counted.text).toBe(200);
    expect(JSON.parse(counted.text)).toEqual({ n: 0 });
  });

  it('is checked before the execution headers and the body (stage 1, first)', async () => {
    const answer = await postOnNewConnection('/v2/query', '{not json', { 'x-svc-tenant-id': 'db_b', 'x-svc-warm': 'maybe' });
    expect(answer.status).toBe(421);
    expect(errorOf(answer).error).toBe('misdirected_request');
  });

  it('refuses an empty or differently cased ID too: only the exact ID passes', async () => {
    for (const value of ['', 'DB_A', 'db_ab', 'db_']) {
      const answer = await postOnNewConnection('/v2/query', countNodesBody(freshLabel()), { 'x-svc-tenant-id': value });
      expect(answer.status, `x-svc-tenant-id ${JSON.stringify(value)}: ${answer.text}`).toBe(421);
    }
  });

  it('answers a request naming its own database, or none (local tools), as any server does', async () => {
    const label = freshLabel();
    expect((await postOnNewConnection('/v2/query', addNodes(label, 2), { 'x-svc-tenant-id': 'db_a' })).status).toBe(200);
    for (let i = 0; i < 4; i++) {
      const own = await postOnNewConnection('/v2/query', countNodesBody(label), { 'x-svc-tenant-id': 'db_a' });
      expect(own.status, own.text).toBe(200);
      expect(JSON.parse(own.text)).toEqual({ n: 2 });
      const unlabelled = await postOnNewConnection('/v2/query', countNodesBody(label), {});
      expect(unlabelled.status, unlabelled.text).toBe(200);
      expect(JSON.parse(unlabelled.text)).toEqual({ n: 2 });
    }
  });

  it('an unbound server still ignores x-svc-tenant-id (envelope.md §11)', async () => {
    const unbound = await spawnServer(['--readers', '1', '--http-threads', '1']);
    try {
      const res = await fetch(`${unbound.url}/v2/query`, { method: 'POST', body: countNodesBody(freshLabel()), headers: { 'x-svc-tenant-id': 'db_b' } });
      expect(res.status).toBe(200);
    } finally {
      await unbound.stop();
    }
  });

  it('rejects a malformed --database-id', async () => {
    const result = await runCli(['serve', '--port', '0', '--database-id', 'not/an id']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/database-id/);
  });
});
