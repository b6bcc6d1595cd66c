// Indexes from the command line and over HTTP: POST /v2/explain (writer and reader
// servers; /v2/query answers unchanged), `svc query --explain`, and `svc query --wait`
// (polling index operations with progress on stderr; exit 2 on a blocked build). Also the
// progress renderer on a TTY and on a pipe.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { svc, tempDir } from './helpers/cli.js';
import { spawnServer, type SpawnedServer } from './helpers/server.js';
import { q, read, write } from './helpers/requests.js';
import { startServer, type RunningServer } from '../dist/src/server/server.js';
import { findReceipts, pollRequest, ProgressRenderer, waitForOperations, type OperationStatus, type Receipt } from '../src/cli/index-wait.js';
import { CliError } from '../src/cli/errors.js';

const str = (s: string) => ({ value: { string: s } });
const person = (props: [string, unknown][]) => q(null, { add_n: { label: 'Person', properties: props } });
const createIndex = (kind: string, fields: Record<string, unknown>, name = 'r') =>
  q(name, { create_index: { spec: { [kind]: fields }, if_not_exists: true } });
const byEmail = (email: string) => read([q('r', { id: { input: { nodes_where: { predicate: { and: { predicates: [
  { eq: { left: { property: '$label' }, right: { constant: { string: 'Person' } } } },
  { eq: { left: { property: 'email' }, right: { constant: { string: email } } } },
] } } } } } })], ['r']);

async function post(url: string, path: string, body: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: res.status, text: await res.text() };
}

describe('POST /v2/explain and svc query --explain / --wait', () => {
  let server: SpawnedServer;
  let cwd: string;
  const query = (args: string[]) => svc(cwd, ['query', 'any', '--host', '127.0.0.1', '--port', String(server.port), ...args]);

  beforeAll(async () => {
    server = await spawnServer(['--readers', '1']);
    cwd = tempDir('cli-index');
    const seeded = await post(server.url, '/v2/query', write([
      person([['email', str('ann@x')], ['name', str('Ann')]]),
      person([['email', str('bob@x')], ['name', str('Ann')]]),
      person([['email', str('cid@x')], ['name', str('Cid')]]),
    ], []));
    expect(seeded.status).toBe(200);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('--explain prints a scan before the index exists, and the index path after --wait built it', async () => {
    const before = await query(['--explain', '--compact', '--json', JSON.stringify(byEmail('bob@x'))]);
    expect(before.stderr).toBe('');
    expect(before.code).toBe(0);
    expect(JSON.parse(before.stdout)).toEqual({ sources: [{ operation: 'nodes_where', access: 'scan' }] });

    const built = await query(['--wait', '--compact', '--json', JSON.stringify(write([createIndex('node_equality', { label: 'Person', property: 'email' })], ['r']))]);
    expect(built.code).toBe(0);
    const receipt = (JSON.parse(built.stdout) as { r: { kind: string; operation_id: string } }).r;
    expect(receipt.kind).toBe('accepted');
    const lines = built.stderr.trim().split('\n');
    expect(lines[0]).toBe(`waiting for index operation: ${receipt.operation_id}`);
    expect(lines.at(-1)).toMatch(new RegExp(`^build of index \\d+ \\(${receipt.operation_id}\\) succeeded: 3 entities`));
    expect(built.stderr).not.toContain('\r'); // not a TTY: plain lines

    const after = await query(['--explain', '--json', JSON.stringify(byEmail('bob@x'))]);
    expect(after.code).toBe(0);
    expect(after.stdout).toContain('\n  "sources": [\n'); // pretty by default
    expect(JSON.parse(after.stdout)).toEqual({ sources: [{ operation: 'nodes_where', access: 'index_eq', index: 'Node equality index `Person.email`' }] });

    // Same request again with if_not_exists: already_active, nothing to wait for.
    const again = await query(['--wait', '--json', JSON.stringify(write([createIndex('node_equality', { label: 'Person', property: 'email' })], ['r']))]);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain('no index operation to wait for');
  });

  it('--wait exits 2 with the blocker_code when a unique build meets duplicates; other operations still settle', async () => {
    const r = await query(['--wait', '--compact', '--json', JSON.stringify(write([
      createIndex('node_equality', { label: 'Person', property: 'name', unique: true }, 'u'),
      createIndex('node_range', { label: 'Person', property: 'name' }, 'g'),
    ], ['u', 'g']))]);
    expect(r.code).toBe(2);
    const answer = JSON.parse(r.stdout) as Record<string, { operation_id: string }>;
    expect(r.stderr).toContain('waiting for 2 index operations');
    expect(r.stderr).toContain(`(${answer['u']!.operation_id}) blocked at stage validate: uniqueness_violation`);
    expect(r.stderr).toMatch(new RegExp(`\\(${answer['g']!.operation_id}\\) succeeded`));
    expect(r.stderr).toContain(`(${answer['u']!.operation_id}) is blocked: uniqueness_violation`);
    expect(r.stderr).toContain('retry_index_operation');
  });

  it('refuses --wait on a read and --explain with --wait or --warm', async () => {
    const onRead = await query(['--wait', '--json', JSON.stringify(byEmail('x'))]);
    expect(onRead.code).toBe(1);
    expect(onRead.stderr).toContain('--wait applies to write requests');
    const both = await query(['--explain', '--wait', '--json', JSON.stringify(write([], []))]);
    expect(both.code).toBe(1);
    expect(both.stderr).toContain('cannot be combined with --wait');
    const warm = await query(['--explain', '--warm', '--json', JSON.stringify(byEmail('x'))]);
    expect(warm.code).toBe(1);
    expect(warm.stderr).toContain('cannot be combined with --warm');
  });

  it('--explain of a request that fails to plan prints the error /v2/query gives, exit 1', async () => {
    const bad = read([q('r', { get_index_operation: { operation_id: 'NOT-A-UUID' } })], ['r']);
    const r = await query(['--explain', '--json', JSON.stringify(bad)]);
    expect(r.code).toBe(1);
    const viaQuery = await post(server.url, '/v2/query', bad);
    expect(viaQuery.status).toBe(400);
    expect(r.stderr.trim()).toBe(`Query failed with HTTP 400: ${viaQuery.text}`);
  });

  it('/v2/explain answers decode and plan errors like /v2/query, executes nothing, and leaves /v2/query answers unchanged', async () => {
    for (const body of ['nope', '{"request_type":"read"}', JSON.stringify(read([q('r', { get_index_operation: { operation_id: '00000000-0000-0000-0000-000000000000' } })], ['r']))]) {
      const [explained, queried] = [await post(server.url, '/v2/explain', body), await post(server.url, '/v2/query', body)];
      expect(explained.status).toBeGreaterThanOrEqual(400);
      expect(explained).toEqual(queried);
    }
    // A write is planned, not run.
    const add = write([person([['email', str('dan@x')]])], []);
    expect(JSON.parse((await post(server.url, '/v2/explain', add)).text)).toEqual({ sources: [] });
    expect(JSON.parse((await post(server.url, '/v2/query', byEmail('dan@x'))).text)).toEqual({ r: [] });
    // /v2/query answers are the same before and after explaining the request.
    const first = await post(server.url, '/v2/query', byEmail('bob@x'));
    expect((await post(server.url, '/v2/explain', byEmail('bob@x'))).status).toBe(200);
    const second = await post(server.url, '/v2/query', byEmail('bob@x'));
    expect(second).toEqual(first);
    expect(JSON.parse(first.text)).toEqual({ r: [1] });
    // It runs on the thread that received it: bodies over 256 KiB are refused, not planned.
    const padded = (bytes: number) => JSON.stringify(byEmail('bob@x')) + ' '.repeat(bytes - JSON.stringify(byEmail('bob@x')).length);
    expect((await post(server.url, '/v2/explain', padded(256 * 1024))).status).toBe(200);
    const large = await post(server.url, '/v2/explain', padded(256 * 1024 + 1));
    expect([large.status, JSON.parse(large.text)]).toEqual([400, {
      error: 'invalid_request_body', msg: `failed to read request body: explain takes bodies up to 262144 bytes (it runs on the thread that receives it); this one has ${256 * 1024 + 1}`,
    }]);
    // Only POST.
    const get = await fetch(`${server.url}/v2/explain`);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
  });
});

describe('POST /v2/explain on a reader server', () => {
  it('follows the writer: a scan before, the index after the build reached the reader', async () => {
    const dir = tempDir('explain-reader');
    const writer = await spawnServer(['--disk', dir, '--readers', '1']);
    let reader: RunningServer | null = null;
    try {
      expect((await post(writer.url, '/v2/query', write([person([['email', str('ann@x')]])], []))).status).toBe(200);
      reader = await startServer({ port: 0, readers: 1, diskPath: dir, mode: 'reader', refreshMs: 50 });
      expect(JSON.parse((await post(reader.url, '/v2/explain', byEmail('ann@x'))).text)).toEqual({ sources: [{ operation: 'nodes_where', access: 'scan' }] });
      const cwd = tempDir('explain-reader-cli');
      const built = await svc(cwd, ['query', 'any', '--port', String(writer.port), '--wait', '--json', JSON.stringify(write([createIndex('node_equality', { label: 'Person', property: 'email' })], ['r']))]);
      expect(built.code).toBe(0);
      let access = 'scan';
      for (let i = 0; i < 200 && access === 'scan'; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        access = (JSON.parse((await post(reader.url, '/v2/explain', byEmail('ann@x'))).text) as { sources: { access: string }[] }).sources[0]!.access;
      }
      expect(access).toBe('index_eq');
      expect(JSON.parse((await post(reader.url, '/v2/query', byEmail('ann@x'))).text)).toEqual({ r: [0] });
    } finally {
      await reader?.close();
      await writer.stop();
    }
  });
});

describe('index-wait helpers', () => {
  const receipt: Receipt = { operationId: '4f6d2b9e-8c1a-4e57-9a3d-0b7e6c2f1a85', kind: 'accepted', indexId: '3' };
  const running = (entities: string, stage = 'scan'): OperationStatus => ({
    status: 'running', operation_id: receipt.operationId, index_id: '3', generation: '1', operation_kind: 'build', family: 'secondary', stage, attempt: 1,
    progress: { entities, input_bytes: '0', output_operations: '0', output_bytes: '0' },
  });

  it('finds accepted / existing_operation receipts anywhere in an answer, once each', () => {
    const answer = {
      a: { kind: 'accepted', operation_id: 'x1', index_id: '1', generation: '1' },
      b: [{ kind: 'existing_operation', operation_id: 'x2' }, { kind: 'already_active', index_id: '2', generation: '1' }],
      c: { kind: 'accepted', operation_id: 'x1', index_id: '1', generation: '1' },
    };
    expect(findReceipts(answer)).toEqual([
      { operationId: 'x1', kind: 'accepted', indexId: '1' },
      { operationId: 'x2', kind: 'existing_operation', indexId: null },
    ]);
    expect(JSON.parse(pollRequest(findReceipts(answer)))).toMatchObject({
      request_type: 'read', query: { read: { returns: ['op0', 'op1'], entries: [{ query: { name: 'op0', root: { get_index_operation: { operation_id: 'x1' } } } }, {}] } },
    });
  });

  it('rewrites one line on a TTY and prints plain lines on a pipe', () => {
    const tty: string[] = [];
    const render = new ProgressRenderer({ isTTY: true, columns: 200, write: (t) => tty.push(t) > 0 });
    render.update([receipt], new Map([[receipt.operationId, running('1200')]]));
    render.update([receipt], new Map([[receipt.operationId, running('2500000', 'catch_up')]]));
    render.line('build of index 3 succeeded');
    expect(tty[0]).toMatch(/^\r\x1b\[2K. build of index 3: running scan, 1,200 entities$/);
    expect(tty[1]).toMatch(/^\r\x1b\[2K. build of index 3: running catch_up, 2,500,000 entities$/);
    expect(tty[2]).toBe('\r\x1b[2K'); // the transient line is erased before a permanent one
    expect(tty[3]).toBe('build of index 3 succeeded\n');

    const pipe: string[] = [];
    let now = 0;
    const plain = new ProgressRenderer({ isTTY: false, write: (t) => pipe.push(t) > 0 }, () => now);
    plain.update([receipt], new Map([[receipt.operationId, running('10')]]));
    now = 100;
    plain.update([receipt], new Map([[receipt.operationId, running('20')]])); // same stage, too soon: nothing
    now = 200;
    plain.update([receipt], new Map([[receipt.operationId, running('30', 'validate')]]));
    now = 5000;
    plain.update([receipt], new Map([[receipt.operationId, running('40', 'validate')]]));
    expect(pipe).toEqual([
      `build of index 3 (${receipt.operationId}) running at stage scan: 10 entities\n`,
      `build of index 3 (${receipt.operationId}) running at stage validate: 30 entities\n`,
      `build of index 3 (${receipt.operationId}) running at stage validate: 40 entities\n`,
    ]);
    expect(pipe.join('')).not.toContain('\r');
  });

  it('waitForOperations polls until every operation settled: 0 when all succeeded, a CliError with exit code 2 and the blocker otherwise', async () => {
    const other: Receipt = { operationId: '0190f3a2-5b7c-7d4e-9f10-2a3b4c5d6e7f', kind: 'existing_operation', indexId: null };
    const script = [
      { op0: running('0'), op1: { ...running('5'), operation_id: other.operationId, index_id: '4' } },
      { op0: { ...running('9', 'activate'), status: 'succeeded' }, op1: { ...running('7', 'validate'), operation_id: other.operationId, index_id: '4', status: 'blocked', blocker_code: 'uniqueness_violation' } },
    ];
    const sent: string[] = [];
    const err: string[] = [];
    const deps = (answers: unknown[]) => ({
      sink: { isTTY: false, write: (t: string) => err.push(t) > 0 },
      sleep: async () => undefined,
      send: async (body: string) => {
        sent.push(body);
        const text = JSON.stringify(answers.shift());
        return { status: 200, text, header: () => null };
      },
    });
    const failure = await waitForOperations([receipt, other], deps([...script])).then(() => null, (e: unknown) => e);
    expect(failure).toBeInstanceOf(CliError);
    expect((failure as CliError).exitCode).toBe(2);
    expect((failure as CliError).message).toContain(`build of index 4 (${other.operationId}) is blocked: uniqueness_violation`);
    expect(sent).toHaveLength(2);
    expect(err.join('')).toContain(`build of index 3 (${receipt.operationId}) succeeded: 9 entities`);

    // Settled operations are not polled again; all succeeded: resolves.
    sent.length = 0;
    await waitForOperations([receipt, other], deps([
      { op0: running('1'), op1: { ...running('1'), operation_id: other.operationId, status: 'succeeded' } },
      { op0: { ...running('2'), status: 'succeeded' } },
    ]));
    expect(sent.map((b) => (JSON.parse(b) as { query: { read: { returns: string[] } } }).query.read.returns)).toEqual([['op0', 'op1'], ['op0']]);

    // A failed poll: exit 1 with the server's answer.
    const polled = await waitForOperations([receipt], { sink: { isTTY: false, write: () => true }, send: async () => ({ status: 503, text: '{"error":"x"}', header: () => null }) })
      .then(() => null, (e: unknown) => e);
    expect((polled as CliError).exitCode).toBe(1);
    expect((polled as CliError).message).toContain('HTTP 503');
  });
});
