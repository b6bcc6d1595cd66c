// What `svc serve` tells its operator (docs/cli.md): the warning for a non-loopback bind,
// one-line start-up and stop failures with their exit codes, and the request and
// slow-query logs (JSON lines on stderr; stdout keeps only the start-up line).
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { limits } from '../src/limits.js';
import { describe, expect, it, vi } from 'vitest';
import { isLoopbackHost, noAuthenticationWarning } from '../src/cli/bind-address.js';
import { RequestLog } from '../src/server/request-log.js';
import { cliPath, runCli, spawnServer, type SpawnedServer } from './helpers/server.js';
import { tempDirs } from './helpers/temp-dirs.js';

const tempDir = tempDirs('serve-ops');

const readAll = JSON.stringify({ request_type: 'read', query: { read: { entries: [{ query: { name: 'c', root: { count: { input: { nodes: { reference: 'all' } } } } } }], returns: ['c'] } } });

function addNodes(count: number, label = 'Op'): string {
  const entries = Array.from({ length: count }, (_, i) => ({ query: { name: `n${i}`, root: { add_n: { label, properties: [['i', { value: { i64: i } }]] } } } }));
  return JSON.stringify({ request_type: 'write', query: { write: { entries, returns: [] } } });
}

async function post(server: SpawnedServer, body: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  const res = await fetch(`${server.url}/v2/query`, { method: 'POST', body, headers });
  return { status: res.status, text: await res.text() };
}

/** The JSON lines on the server's stderr once there are `count` of them (the log writes asynchronously). */
async function logLines(server: SpawnedServer, count: number, timeoutMs = 5_000): Promise<Record<string, unknown>[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lines = server.stderr().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    if (lines.length >= count || Date.now() > deadline) return lines;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('svc serve: bind address', () => {
  it('--host 0.0.0.0 warns on stderr that the server has no authentication; stdout keeps only the start-up line', async () => {
    const server = await spawnServer(['--host', '0.0.0.0', '--readers', '1']);
    try {
      expect(server.stdout().trim().split('\n')).toHaveLength(1);
      expect(server.stderr()).toMatch(/^svc serve: warning: listening on 0\.0\.0\.0 \(every network interface\): the local server has no authentication; /m);
    } finally {
      await server.stop();
    }
  });

  it('the default loopback bind prints no warning', async () => {
    const server = await spawnServer(['--readers', '1']);
    try {
      expect(server.stderr()).not.toMatch(/warning/);
    } finally {
      await server.stop();
    }
  });

  it('tells loopback from everything else, IPv6 included', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]', '::ffff:127.0.0.1']) expect(isLoopbackHost(host), host).toBe(true);
    for (const host of ['0.0.0.0', '::', '[::]', '192.168.1.5', '10.0.0.1', 'fe80::1', 'db.example.com', '']) {
      expect(isLoopbackHost(host), host).toBe(false);
      expect(noAuthenticationWarning(host), host).toMatch(/no authentication/);
    }
    expect(noAuthenticationWarning('::')).toMatch(/^listening on :: \(every network interface\)/);
  });
});

describe('svc serve --disk: a directory it cannot write', () => {
  // Root ignores permission bits, so as root the server runs as nobody (uid 65534) instead;
  // where that is impossible (no setuid, or nobody cannot read the build) these tests skip.
  const asRoot = process.getuid?.() === 0;
  const nobody = { uid: 65534, gid: 65534 };
  const canDropRoot = !asRoot || spawnSync(process.execPath, [cliPath, '--version'], { ...nobody, cwd: '/', stdio: 'ignore' }).status === 0;

  async function serveAs(args: string[], cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const child = spawn(process.execPath, [cliPath, 'serve', '--port', '0', '--readers', '1', ...args], {
      cwd, stdio: ['ignore', 'pipe', 'pipe'], ...(asRoot ? nobody : {}),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
    clearTimeout(timer);
    return { code, stdout, stderr };
  }

  it.skipIf(!canDropRoot)('a read-only directory (0555) exits 1 with one line naming it, no stack', async () => {
    const root = tempDir();
    chmodSync(root, 0o755); // nobody must reach the directory to be refused by it
    const data = join(root, 'data');
    mkdirSync(data);
    chmodSync(data, 0o555);
    const result = await serveAs(['--disk', data], root);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(`svc serve: cannot write to ${data}: permission denied (EACCES); the server must be able to create, write and remove files in ${data}\n`);
  });

  it.skipIf(!canDropRoot)('a missing directory under a read-only parent, and a read-only writer.lock, are named exactly', async () => {
    const root = tempDir();
    chmodSync(root, 0o755);
    const parent = join(root, 'parent');
    mkdirSync(parent);
    chmodSync(parent, 0o555);
    const missing = await serveAs(['--disk', join(parent, 'db')], root);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(new RegExp(`^svc serve: cannot create ${join(parent, 'db')}: permission denied \\(EACCES\\)[^\\n]*\\n$`));

    const data = join(root, 'data');
    mkdirSync(data);
    chmodSync(data, 0o777);
    writeFileSync(join(data, 'writer.lock'), '');
    chmodSync(join(data, 'writer.lock'), 0o444);
    const lockOnly = await serveAs(['--disk', data], root);
    expect(lockOnly.code).toBe(1);
    expect(lockOnly.stderr).toMatch(new RegExp(`^svc serve: cannot write to ${join(data, 'writer.lock')}: permission denied \\(EACCES\\)[^\\n]*\\n$`));
  });
});

describe('svc serve --disk: a stop that is not clean', () => {
  it('a final snapshot that cannot be written exits 1 with one line saying so; the next start replays the WAL', async () => {
    const dir = join(tempDir(), 'db');
    const server = await spawnServer(['--disk', dir, '--readers', '1']);
    expect((await post(server, addNodes(3))).status).toBe(200);
    // Directories where the stop's snapshot files would go: rename() onto them fails, even for root.
    const taken = Array.from({ length: 8 }, (_, i) => join(dir, `snapshot-${String(i + 1).padStart(10, '0')}.bin`))
      .filter((file) => !readdirSync(dir).includes(file.slice(dir.length + 1)));
    for (const file of taken) mkdirSync(join(file, 'occupied'), { recursive: true });
    const exit = await server.stop('SIGTERM');
    expect(exit.code).toBe(1);
    const last = server.stderr().trimEnd().split('\n').at(-1)!;
    expect(last).toMatch(/^svc serve: the stop was not clean: storage error: the snapshot at stop failed; the WAL keeps every write, so the next start replays them: snapshot rename failed: /);
    expect(last).not.toMatch(/storage error: storage error/);

    for (const file of taken) rmSync(file, { recursive: true });
    const again = await spawnServer(['--disk', dir, '--readers', '1']);
    try {
      expect(JSON.parse((await post(again, readAll)).text)).toEqual({ c: 3 });
    } finally {
      expect((await again.stop()).code).toBe(0);
    }
  });
});

describe('svc serve: request and slow-query logs', () => {
  it('--log-requests writes one JSON line per query: time, status, duration, body bytes, error code, route', async () => {
    const server = await spawnServer(['--log-requests', '--slow-query-ms', '0', '--readers', '1']);
    try {
      const big = readAll + ' '.repeat(5000); // too large to run inline: the reader pool
      const answers = [
        await post(server, readAll),
        await post(server, '{"request_type": "rea'),
        await post(server, readAll, { 'x-svc-require-writer': 'true' }),
        await post(server, big),
        await post(server, addNodes(1)),
      ];
      expect(answers.map((a) => a.status)).toEqual([200, 400, 200, 200, 200]);
      const lines = await logLines(server, 5);
      expect(lines).toHaveLength(5);
      for (const line of lines) {
        expect(line['msg']).toBe('query');
        expect(line['level']).toBe('info');
        expect(Date.parse(line['time'] as string)).toBeGreaterThan(Date.now() - 60_000);
        expect(typeof line['duration_ms']).toBe('number');
        expect(line['duration_ms'] as number).toBeGreaterThanOrEqual(0);
        expect(line).not.toHaveProperty('query'); // bodies are the slow-query log's business
      }
      expect(lines.map((l) => [l['status'], l['body_bytes'], l['route'], l['error']])).toEqual([
        [200, readAll.length, 'pool', undefined], // `nodes all` has no static cost bound: never inline
        [400, 21, 'inline', 'invalid_query_json'],
        [200, readAll.length, 'writer', undefined],
        [200, big.length, 'pool', undefined],
        [200, addNodes(1).length, 'writer', undefined], // a write: forwarded to the writer
      ]);
      expect(server.stdout().trim().split('\n')).toHaveLength(1);
    } finally {
      await server.stop();
    }
  });

  it('--slow-query-ms N logs only requests that took N ms or more, with the first 256 bytes of the body', async () => {
    const server = await spawnServer(['--slow-query-ms', '1', '--readers', '1']);
    try {
      const slow = addNodes(3000, 'Slow'); // hundreds of ms of parsing and writing
      expect((await post(server, slow)).status).toBe(200);
      const [line] = await logLines(server, 1);
      expect(line).toMatchObject({ msg: 'slow query', level: 'warn', status: 200, body_bytes: slow.length, query_truncated: true });
      expect(line!['query']).toBe(slow.slice(0, 256));
      expect(line!['duration_ms'] as number).toBeGreaterThanOrEqual(1);
    } finally {
      await server.stop();
    }
  });

  it('the slow-query log is on by default (1000 ms) and --slow-query-ms 0 turns it off; neither logs fast requests', async () => {
    for (const args of [[], ['--slow-query-ms', '0']]) {
      const server = await spawnServer(['--readers', '1', ...args]);
      try {
        expect((await post(server, addNodes(20, 'Quick'))).status).toBe(200);
        expect((await post(server, readAll)).status).toBe(200);
        await new Promise((resolve) => setTimeout(resolve, 200));
        expect(await logLines(server, 1, 0)).toEqual([]);
      } finally {
        await server.stop();
      }
    }
    const help = await runCli(['serve', '--help']);
    expect(help.stdout).toMatch(/--slow-query-ms <ms>[^]*\(default: 1000\)/);
    expect(help.stdout).toMatch(/--log-requests/);
  });

  it('rejects a bad --slow-query-ms', async () => {
    const result = await runCli(['serve', '--port', '0', '--slow-query-ms', '-1']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/slow-query-ms must be an integer from 0 to 86400000/);
  });
});

describe('RequestLog (the lines themselves)', () => {
  function capture(options: { logRequests: boolean; slowQueryMs: number }) {
    const lines: Record<string, unknown>[] = [];
    const destination = { write: (line: string) => { lines.push(JSON.parse(line) as Record<string, unknown>); } };
    const log = RequestLog.create({ ...options, destination })!;
    return { log, lines };
  }
  const base = { durationMs: 1.23456, bodyBytes: 10, route: 'pool' as const, queryPrefix: null };

  it('is not created when both logs are off; a negative threshold is refused', () => {
    expect(RequestLog.create({ logRequests: false, slowQueryMs: 0 })).toBeNull();
    expect(() => RequestLog.create({ logRequests: true, slowQueryMs: -1 })).toThrow(/slowQueryMs/);
  });

  it('reads the error code from string and byte answers, marks a client that went away, rounds durations', () => {
    const { log, lines } = capture({ logRequests: true, slowQueryMs: 0 });
    log.finished({ ...base, status: 503, answer: '{"error":"writer_mode_required","msg":"..."}' });
    log.finished({ ...base, status: 500, answer: new TextEncoder().encode('{"error":"internal_error","msg":"x"}') });
    log.finished({ ...base, status: null, answer: null });
    expect(lines.map((l) => [l['status'], l['error'], l['client_gone'], l['duration_ms'], l['route']])).toEqual([
      [503, 'writer_mode_required', undefined, 1.235, 'pool'],
      [500, 'internal_error', undefined, 1.235, 'pool'],
      [null, undefined, true, 1.235, 'pool'],
    ]);
  });

  it('copies at most 256 body bytes and shows a cut character as U+FFFD', () => {
    const { log, lines } = capture({ logRequests: false, slowQueryMs: 5 });
    const body = new TextEncoder().encode(`${'x'.repeat(255)}é and more`);
    const prefix = log.prefixOf(body)!;
    expect(prefix.byteLength).toBe(256);
    body.fill(0x20); // the body moved on (transferred): the copy must not change
    log.finished({ ...base, status: 200, answer: '{}', durationMs: 4.9, bodyBytes: 266, queryPrefix: prefix });
    expect(lines).toEqual([]); // under the threshold
    log.finished({ ...base, status: 200, answer: '{}', durationMs: 5, bodyBytes: 266, queryPrefix: prefix });
    expect(lines[0]).toMatchObject({ msg: 'slow query', query: `${'x'.repeat(255)}\ufffd`, query_truncated: true });
  });

  it('writes at most slowQueryLogLinesPerSecondMax slow-query lines a second, then one line counting the rest', async () => {
    const max = limits.slowQueryLogLinesPerSecondMax;
    const { log, lines } = capture({ logRequests: false, slowQueryMs: 5 });
    // Under overload every request is slow: 10x the bound in one burst.
    for (let i = 0; i < 10 * max; i++) log.finished({ ...base, status: 200, answer: '{}', durationMs: 50, queryPrefix: new Uint8Array([0x7b, 0x7d]) });
    expect(lines.filter((l) => l['msg'] === 'slow query')).toHaveLength(max);
    await log.flush();
    expect(lines.filter((l) => l['left_out'] !== undefined)).toEqual([expect.objectContaining({ level: 'warn', left_out: 9 * max })]);
    // When the second ends the count is written and the next second starts afresh.
    vi.useFakeTimers();
    try {
      const timed = capture({ logRequests: false, slowQueryMs: 5 });
      for (let i = 0; i < max + 3; i++) timed.log.finished({ ...base, status: 200, answer: '{}', durationMs: 50, queryPrefix: null });
      vi.advanceTimersByTime(1_000);
      expect(timed.lines.filter((l) => l['left_out'] !== undefined)).toEqual([expect.objectContaining({ left_out: 3 })]);
      for (let i = 0; i < max; i++) timed.log.finished({ ...base, status: 200, answer: '{}', durationMs: 50, queryPrefix: null });
      expect(timed.lines.filter((l) => l['msg'] === 'slow query')).toHaveLength(2 * max);
    } finally {
      vi.useRealTimers();
    }
    // With --log-requests every request still has its line (past the bound, without the query).
    const both = capture({ logRequests: true, slowQueryMs: 5 });
    for (let i = 0; i < 2 * max; i++) both.log.finished({ ...base, status: 200, answer: '{}', durationMs: 50, queryPrefix: null });
    expect(both.lines).toHaveLength(2 * max);
    expect(both.lines.filter((l) => l['msg'] === 'slow query')).toHaveLength(max);
    await both.log.flush();
  });
});
