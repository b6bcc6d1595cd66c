// Several front-end threads on one port (http-threads.ts, `--http-threads N`): Linux
// spreads connections over them (SO_REUSEPORT). Each answers cheap reads itself and relays
// writes and costly reads to the main thread's writer and reader pool; the bounds stay one
// per server; a stop drains and closes every thread's listener and connections.
import { request as httpRequest } from 'node:http';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bindSharedPort } from '../dist/src/server/listen.js';
import { startServer } from '../dist/src/server/server.js';
import { spawnServer } from './helpers/server.js';
import { tempDirs } from './helpers/temp-dirs.js';
import { addN, count, nodes, q, read, write } from './helpers/requests.js';


interface Answer {
  status: number;
  text: string;
}

/** POST on a connection of its own (no keep-alive), so the kernel picks a thread for each. */
function postFresh(url: string, body: string, headers: Record<string, string> = {}, path = '/v2/query'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => { text += d; }).on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Resolves with the error code of a TCP connect to the port, or 'connected'. */
function tryConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => { socket.destroy(); resolve('connected'); });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
  });
}

const label = `Threads${process.pid}`;
const addNode = JSON.stringify(write([q('n', addN(label))], ['n']));
/** A label scan: no static cost bound, so never run inline (Plan.inlineSafe). */
const countLabel = JSON.stringify(read([q('c', count({ nodes_where: { predicate: {
  eq: { left: { property: '$label' }, right: { constant: { string: label } } },
} } }))], ['c']));
const lookup = (id: number): string => JSON.stringify(read([q('c', count(nodes([id])))], ['c']));

interface LogLine {
  status: number;
  route?: string;
  http_thread: number;
}

const tempDir = tempDirs('http-threads');

describe('front-end threads (--http-threads 3)', () => {
  it('every thread answers reads itself, relays writes to the writer and costly reads to the pool; the stop closes every listener', async () => {
    const server = await spawnServer(['--readers', '1', '--http-threads', '3', '--log-requests']);
    const WRITES = 30;
    try {
      for (let i = 0; i < WRITES; i++) expect((await postFresh(server.url, addNode)).status).toBe(200);
      for (let i = 0; i < 30; i++) expect((await postFresh(server.url, lookup(i))).text).toBe('{"c":1}');
      for (let i = 0; i < 30; i++) expect((await postFresh(server.url, countLabel)).text).toBe(`{"c":${WRITES}}`);
      // Read-your-writes: pinned to the writer from any thread.
      for (let i = 0; i < 30; i++) {
        expect((await postFresh(server.url, countLabel, { 'x-svc-require-writer': 'true' })).text).toBe(`{"c":${WRITES}}`);
      }
      for (let i = 0; i < 30; i++) {
        expect((await postFresh(server.url, countLabel, {}, '/v2/explain')).text).toBe('{"sources":[{"access":"scan","operation":"nodes_where"}]}');
      }
    } finally {
      const exit = await server.stop();
      expect(exit.code, server.stderr()).toBe(0);
    }
    const lines = server.stderr().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as LogLine);
    expect(lines).toHaveLength(150);
    expect(lines.every((l) => l.status === 200)).toBe(true);
    const threadsOf = (route: string, from: number, to: number): number[] =>
      [...new Set(lines.slice(from, to).filter((l) => l.route === route).map((l) => l.http_thread))].sort();
    // 30 connections each: every thread (0 = the main thread) took some of every kind.
    expect(lines.slice(0, 30).every((l) => l.route === 'writer')).toBe(true);
    expect(threadsOf('writer', 0, 30)).toEqual([0, 1, 2]);
    expect(lines.slice(30, 60).every((l) => l.route === 'inline')).toBe(true);
    expect(threadsOf('inline', 30, 60)).toEqual([0, 1, 2]);
    expect(lines.slice(60, 90).every((l) => l.route === 'pool')).toBe(true);
    expect(threadsOf('pool', 60, 90)).toEqual([0, 1, 2]);
    expect(threadsOf('writer', 90, 120)).toEqual([0, 1, 2]);
    expect(threadsOf('explain', 120, 150)).toEqual([0, 1, 2]);
    expect(await tryConnect(server.port)).toBe('ECONNREFUSED');
  });

  it('a stop closes idle keep-alive connections on every thread and frees the port', async () => {
    const server = await startServer({ port: 0, readers: 1, httpThreads: 3 });
    // 24 concurrent keep-alive connections, left idle afterwards.
    const { Agent } = await import('node:http');
    const agent = new Agent({ keepAlive: true, maxSockets: 24 });
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => new Promise<Answer>((resolve, reject) => {
      const req = httpRequest(`${server.url}/v2/query`, { method: 'POST', agent }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => { text += d; }).on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      });
      req.on('error', reject);
      req.end(lookup(i));
    })));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const started = performance.now();
    await server.close();
    // Idle connections held by any thread would keep it alive until the 5 s terminate.
    expect(performance.now() - started).toBeLessThan(3000);
    agent.destroy();
    expect(await tryConnect(server.port)).toBe('ECONNREFUSED');
    expect(await bindSharedPort('127.0.0.1', server.port, async (port) => port), 'no thread still holds the port').toBe(server.port);
  });

  it('a port another server holds is refused before any thread starts', async () => {
    const first = await startServer({ port: 0, readers: 1, httpThreads: 2 });
    try {
      await expect(startServer({ port: first.port, readers: 1, httpThreads: 2 })).rejects.toThrow(/cannot listen on 127\.0\.0\.1:\d+ \(address in use/);
      await expect(startServer({ port: first.port, readers: 1, httpThreads: 1 })).rejects.toThrow(/cannot listen/);
    } finally {
      await first.close();
    }
  });

  it('a server started while another process is binding the same port is refused, not bound beside it', async () => {
    const port = await bindSharedPort('127.0.0.1', 0, async (chosen) => chosen);
    // Another process in the middle of binding the port: it holds the port's lock for 4 s.
    // A file, not -e: worker threads inherit the parent's flags, and --input-type breaks them.
    const script = join(tempDir(), 'bind.mjs');
    writeFileSync(script, `
      const { bindSharedPort } = await import(${JSON.stringify(new URL('../dist/src/server/listen.js', import.meta.url).href)});
      await bindSharedPort('127.0.0.1', ${port}, async () => { console.log('binding'); await new Promise((r) => setTimeout(r, 4000)); });
    `);
    const other = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await new Promise<void>((resolve, reject) => {
        other.stdout!.on('data', (d: Buffer) => { if (d.toString().includes('binding')) resolve(); });
        other.once('exit', (code) => reject(new Error(`the other process exited (${code}) before binding`)));
      });
      await expect(startServer({ port, readers: 1, httpThreads: 2 })).rejects.toThrow(/another svcdb process is binding it/);
    } finally {
      other.kill();
    }
    await new Promise((r) => other.once('exit', r));
    const after = await startServer({ port, readers: 1, httpThreads: 2 });
    expect(after.port, 'the lock went with the process').toBe(port);
    await after.close();
  });

  it('two multi-threaded servers on two addresses may use the same port number', async () => {
    const port = await bindSharedPort('127.0.0.1', 0, async (chosen) => chosen);
    const a = await startServer({ host: '127.0.0.1', port, readers: 1, httpThreads: 2 });
    try {
      const b = await startServer({ host: '127.0.0.2', port, readers: 1, httpThreads: 2 });
      expect(b.port).toBe(port);
      await b.close();
    } finally {
      await a.close();
    }
  });

  it('bounds the bodies being received by all threads together (limits.receivingBodyBytesMax)', async () => {
    const server = await startServer({ port: 0, readers: 1, httpThreads: 3, limits: { receivingBodyBytesMax: 100_000 } });
    const body = `${countLabel}${' '.repeat(60_000 - countLabel.length)}`;
    /** Announce a 60 000-byte body and send its first `sent` bytes; resolves with the raw answer. */
    const upload = (sent: number): { answer: Promise<string>; finish: () => void } => {
      const socket = connect(server.port, '127.0.0.1');
      let answer = '';
      const done = new Promise<string>((resolve) => {
        socket.setEncoding('utf8').on('data', (d: string) => {
          answer += d;
          if (/\r\n\r\n[\s\S]*\}$/.test(answer)) resolve(answer);
        });
        socket.on('close', () => resolve(answer));
      });
      socket.write(`POST /v2/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, sent)}`);
      // write, not end: uWS closes a connection whose client half-closed it.
      return { answer: done.finally(() => socket.destroy()), finish: () => { socket.write(body.slice(sent)); } };
    };
    try {
      // Bodies count as their bytes arrive: this one holds 59 999.
      const held = upload(59_999);
      await new Promise((resolve) => setTimeout(resolve, 300));
      // 11 more connections, spread over the threads, each sending 50 000 bytes: none fits
      // beside the bytes held (one may hold a first chunk for a while: it is counted too).
      const others = Array.from({ length: 11 }, () => upload(50_000));
      for (const other of others) {
        const answer = await other.answer;
        expect(answer).toMatch(/^HTTP\/1\.1 503 /);
        expect(answer).toMatch(/the buffer of request bodies being received is full \(\d+ bytes held, \d+ more would pass 100000\)/);
      }
      held.finish();
      expect(await held.answer).toMatch(/^HTTP\/1\.1 200 [\s\S]*\{"c":0\}$/);
    } finally {
      await server.close();
    }
  });

  it('on a reader server every thread relays reads to the pool, follows the writer and refuses writes', async () => {
    const dir = tempDir();
    const writer = await spawnServer(['--disk', dir, '--readers', '1']);
    try {
      for (let i = 0; i < 3; i++) expect((await postFresh(writer.url, addNode)).status).toBe(200);
      const reader = await spawnServer(['--disk', dir, '--mode', 'reader', '--refresh-ms', '50', '--readers', '1', '--http-threads', '3', '--log-requests']);
      try {
        for (let i = 0; i < 30; i++) expect((await postFresh(reader.url, countLabel)).text).toBe('{"c":3}');
        const refused = await postFresh(reader.url, addNode);
        expect(refused.status).toBe(503);
        expect(refused.text).toMatch(/^\{"error":"writer_mode_required"/);
        for (let i = 0; i < 2; i++) expect((await postFresh(writer.url, addNode)).status).toBe(200);
        let seen = '';
        for (let i = 0; i < 200 && seen !== '{"c":5}'; i++) {
          await new Promise((resolve) => setTimeout(resolve, 25));
          seen = (await postFresh(reader.url, countLabel)).text;
        }
        expect(seen).toBe('{"c":5}');
        for (let i = 0; i < 30; i++) expect((await postFresh(reader.url, countLabel)).text).toBe('{"c":5}');
      } finally {
        expect((await reader.stop()).code, reader.stderr()).toBe(0);
      }
      const lines = reader.stderr().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as LogLine);
      const reads = lines.filter((l) => l.status === 200);
      expect(reads.every((l) => l.route === 'pool')).toBe(true);
      expect([...new Set(reads.map((l) => l.http_thread))].sort()).toEqual([0, 1, 2]);
    } finally {
      await writer.stop();
    }
  });
});
