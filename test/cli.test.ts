// `svc init local`, `svc start/status/stop` and `svc query` against a real local
// instance, all through the built CLI (npm test builds first).
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { spawn, spawnSync } from 'node:child_process';
import { delimiter, join } from 'node:path';
import { parse } from 'smol-toml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, svc, tempDir } from './helpers/cli.js';
import { eventually, slowly } from './helpers/eventually.js';
import { serverMallocEnvironment, serverNodeFlags } from '../src/server/launch.js';

describe('svc init local', () => {
  it('scaffolds svc.toml, the state directory, .gitignore, AGENTS.md and examples/request.json in an empty directory', async () => {
    const dir = tempDir('init');
    const r = await svc(dir, ['init', 'local']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('svc start dev');

    const config = parse(readFileSync(join(dir, 'svc.toml'), 'utf8')) as { project: Record<string, unknown>; local: Record<string, Record<string, unknown>> };
    expect(config.project.container_runtime).toBeUndefined(); // present only as a comment
    expect(readFileSync(join(dir, 'svc.toml'), 'utf8')).toContain('# container_runtime = "process"');
    expect(config.local.dev).toEqual({ host: '127.0.0.1', port: 6969, storage: 'memory', state_dir: '.svc' });
    expect(existsSync(join(dir, '.svc'))).toBe(true);

    const ignored = readFileSync(join(dir, '.gitignore'), 'utf8').split('\n');
    for (const entry of ['.svc/', '.env', 'target/', '*.log']) expect(ignored).toContain(entry);

    const agents = readFileSync(join(dir, 'AGENTS.md'), 'utf8');
    for (const command of ['svc start dev', 'svc query dev', 'svc stop dev', 'svc status dev']) expect(agents).toContain(command);

    const request = JSON.parse(readFileSync(join(dir, 'examples', 'request.json'), 'utf8')) as Record<string, unknown>;
    expect(request).toMatchObject({
      request_type: 'read',
      query: { read: { returns: ['node_count'], entries: [{ query: { name: 'node_count', root: { count: { input: { nodes_where: {
        predicate: { eq: { left: { property: '$label' }, right: { constant: { string: 'User' } } } },
      } } } } } }] } },
    });
    for (const languageFile of ['package.json', 'Cargo.toml', 'go.mod', 'pyproject.toml']) expect(existsSync(join(dir, languageFile))).toBe(false);
  });

  it('refuses a non-empty directory and leaves it untouched', async () => {
    const dir = tempDir('init-busy');
    writeFileSync(join(dir, 'notes.txt'), 'mine\n');
    const r = await svc(dir, ['init', 'local']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('is not empty (notes.txt)');
    expect(r.stderr).toContain('--force');
    expect(existsSync(join(dir, 'svc.toml'))).toBe(false);
  });

  it('--force writes into a non-empty directory and appends only the missing .gitignore entries', async () => {
    const dir = tempDir('init-force');
    writeFileSync(join(dir, '.gitignore'), 'node_modules/\n.env\n');
    const r = await svc(dir, ['init', 'local', '--force', '--name', 'db', '--port', '7001', '--disk']);
    expect(r.code).toBe(0);
    const ignore = readFileSync(join(dir, '.gitignore'), 'utf8');
    expect(ignore.startsWith('node_modules/\n.env\n')).toBe(true);
    expect(ignore.match(/^\.env$/gm)).toHaveLength(1);
    for (const entry of ['.svc/', 'target/', '*.log']) expect(ignore.split('\n')).toContain(entry);
    const config = parse(readFileSync(join(dir, 'svc.toml'), 'utf8')) as { local: Record<string, Record<string, unknown>> };
    expect(config.local.db).toMatchObject({ port: 7001, storage: 'disk' });
  });

  it('an empty directory may already hold .git', async () => {
    const dir = tempDir('init-git');
    mkdirSync(join(dir, '.git'));
    expect((await svc(dir, ['init', 'local'])).code).toBe(0);
  });

  it('rejects an unknown target and a bad instance name', async () => {
    const dir = tempDir('init-bad');
    const target = await svc(dir, ['init', 'cloud']);
    expect(target.code).toBe(1);
    expect(target.stderr).toContain('only `svc init local` is supported');
    const name = await svc(dir, ['init', 'local', '--name', 'a b']);
    expect(name.code).toBe(1);
    expect(name.stderr).toContain('invalid instance name');
  });
});

describe('a local instance: start, query, status, stop', () => {
  let dir: string;
  let port: number;
  const exampleQuery = ['query', 'dev', '--file', 'examples/request.json'];

  beforeAll(async () => {
    dir = tempDir('local');
    port = await freePort();
    expect((await svc(dir, ['init', 'local', '--port', String(port)])).code).toBe(0);
    const started = await svc(dir, ['start', 'dev']);
    expect(started.stderr).toBe('');
    expect(started.code).toBe(0);
    expect(started.stdout).toContain(`dev is running at http://127.0.0.1:${port} (pid `);
  });

  afterAll(async () => {
    await svc(dir, ['stop', 'dev']);
  });

  it('keeps the pid file and the log in the state directory; a second start reports the running instance', async () => {
    const pid = Number(readFileSync(join(dir, '.svc', 'dev.pid'), 'utf8'));
    expect(pid).toBeGreaterThan(1);
    // Started with the launcher's node flags and glibc settings (src/server/launch.ts), which
    // `node main.js serve` would not read from main.js's #! line.
    const commandLine = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    for (const flag of serverNodeFlags) expect(commandLine.slice(1, commandLine.indexOf('serve'))).toContain(flag);
    const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    for (const [name, value] of Object.entries(serverMallocEnvironment)) expect(environ).toContain(`${name}=${value}`);
    expect(readFileSync(join(dir, '.svc', 'dev.log'), 'utf8')).toContain(`svcdb listening on http://127.0.0.1:${port}`);
    const again = await svc(dir, ['start', 'dev']);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`dev is already running at http://127.0.0.1:${port} (pid ${pid}`);
  });

  it('status reports running, pid, port, storage and uptime (text and --json)', async () => {
    const text = await svc(dir, ['status', 'dev']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^dev: running\n/);
    expect(text.stdout).toMatch(/port\s+\d+/);
    expect(text.stdout).toMatch(/uptime\s+\d+s/);
    const json = await svc(dir, ['status', 'dev', '--json']);
    expect(json.code).toBe(0);
    const report = JSON.parse(json.stdout) as Record<string, unknown>;
    expect(report).toMatchObject({ instance: 'dev', kind: 'local', status: 'running', port, storage: 'memory', ready: true, url: `http://127.0.0.1:${port}` });
    expect(report.pid).toBe(Number(readFileSync(join(dir, '.svc', 'dev.pid'), 'utf8')));
    expect(report.uptime_seconds).toBeGreaterThanOrEqual(0);
  });

  it('query --file prints pretty JSON; -e with the DSL writes; --compact prints one line', async () => {
    const first = await svc(dir, exampleQuery);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(first.stdout).toBe('{\n  "node_count": 0\n}\n');

    const write = await svc(dir, ['query', 'dev', '-e', "writeBatch().varAs('ann', g().addN('User', { name: 'Ann' })).varAs('bob', g().addN('User', { name: 'Bob' })).returning(['ann', 'bob'])"]);
    expect(write.stderr).toBe('');
    expect(write.code).toBe(0);
    expect(JSON.parse(write.stdout)).toEqual({ ann: [{ $id: 0 }], bob: [{ $id: 1 }] });

    const compact = await svc(dir, [...exampleQuery, '--compact']);
    expect(compact.stdout).toBe('{"node_count":2}\n');
  });

  it('query --json and --ts-file (importing svcdb/client, or using the names in scope)', async () => {
    const json = await svc(dir, ['query', 'dev', '--compact', '--json', JSON.stringify({
      request_type: 'read',
      query: { read: { entries: [{ query: { name: 'names', root: { value_map: { input: { nodes: { reference: 'all' } }, properties: ['name'] } } } }], returns: ['names'] } },
    })]);
    expect(json.stderr).toBe('');
    expect(json.stdout).toBe('{"names":[{"name":"Ann"},{"name":"Bob"}]}\n');

    mkdirSync(join(dir, 'queries'), { recursive: true });
    writeFileSync(join(dir, 'queries', 'label.ts'), "export const label: string = 'User';\n");
    writeFileSync(join(dir, 'queries', 'users.ts'), [
      "import { readBatch, g, P } from 'svcdb/client';",
      "import { label } from './label.js';",
      'const wanted: readonly string[] = [\'name\'];',
      "export default readBatch().varAs('users', g().nWithLabel(label).where(P.eq('name', 'Bob')).valueMap(wanted)).returning(['users']);",
    ].join('\n'));
    const file = await svc(dir, ['query', 'dev', '--compact', '--ts-file', 'queries/users.ts']);
    expect(file.stderr).toBe('');
    expect(file.stdout).toBe('{"users":[{"name":"Bob"}]}\n');

    writeFileSync(join(dir, 'queries', 'scope.ts'), "export default readBatch().varAs('n', g().n().count()).returning(['n']);\n");
    const scoped = await svc(dir, ['query', 'dev', '--compact', '--ts-file', 'queries/scope.ts']);
    expect(scoped.stdout).toBe('{"n":2}\n');
  });

  it('--params gives parameter values to a -e batch (typed with defineParams or untyped with param)', async () => {
    const typed = await svc(dir, ['query', 'dev', '--compact', '--params', '{"who":"Ann"}', '-e',
      "readBatch(defineParams({ who: 'string' })).varAs('u', g().nWithLabel('User', P.eq('name', param('who'))).valueMap(['name'])).returning(['u'])"]);
    expect(typed.stderr).toBe('');
    expect(typed.stdout).toBe('{"u":[{"name":"Ann"}]}\n');
    const missing = await svc(dir, ['query', 'dev', '-e',
      "readBatch(defineParams({ who: 'string' })).varAs('u', g().nWithLabel('User', P.eq('name', param('who')))).returning(['u'])"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('cannot build the request');
  });

  it('--warm sends a read with the warm header and prints the 200 body of a local instance', async () => {
    const warm = await svc(dir, [...exampleQuery, '--warm', '--compact']);
    expect(warm.code).toBe(0);
    expect(warm.stdout).toBe('{"node_count":2}\n');
    const write = await svc(dir, ['query', 'dev', '--warm', '-e', "writeBatch().varAs('x', g().addN('X')).returning(['x'])"]);
    expect(write.code).toBe(1);
    expect(write.stderr).toContain('--warm applies to read requests only');
  });

  it('a request the server rejects prints `Query failed with HTTP <status>: <body>` and exits 1', async () => {
    const r = await svc(dir, ['query', 'dev', '--json', '{"request_type":"read","query":{"read":{"entries":[],"returns":[]}}}']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    const match = /^Query failed with HTTP 400: (.*)\n$/.exec(r.stderr);
    expect(match, r.stderr).not.toBeNull();
    expect(JSON.parse(match![1]!)).toMatchObject({ error: expect.any(String), msg: expect.any(String) });
  });

  it('checks the input before sending: one input, valid JSON, request_type, query', async () => {
    const cases: Array<[string[], string]> = [
      [[], 'a request is required: give exactly one of --file, --json, -e/--ts, --ts-file'],
      [['--json', '{}', '--file', 'examples/request.json'], '--file and --json are mutually exclusive'],
      [['--json', '{"request_type":'], '--json is not valid JSON'],
      [['--json', '{"request_type":"READ","query":{"read":{"entries":[],"returns":[]}}}'], 'request_type must be "read" or "write" (lowercase), got "READ"'],
      [['--json', '{"query":{"read":{}}}'], 'request_type is missing'],
      [['--json', '{"request_type":"read"}'], 'query is missing'],
      [['--json', '{"request_type":"read","query":{"write":{}}}'], 'request_type is "read" but the query holds a "write" batch'],
      [['--file', 'nope.json'], 'cannot read --file nope.json: no such file'],
      [['-e', "g().n().count()"], 'not a traversal; wrap it'],
      [['-e', "readBatch().varAs('n', g().addN('X'))"], 'contains the mutation `add_n`; use writeBatch()'],
      [['-e', "readBatch().varAs('n', g().n().count(1 2))"], '-e:1:'],
      [['--ts-file', 'missing.ts'], 'cannot read --ts-file missing.ts'],
    ];
    const results = await Promise.all(cases.map(([args]) => svc(dir, ['query', 'dev', ...args])));
    cases.forEach(([args, message], i) => {
      expect(results[i]!.code, args.join(' ')).toBe(1);
      expect(results[i]!.stderr, args.join(' ')).toContain(message);
    });
  });

  it('the --json examples of `svc query --help` and of AGENTS.md run as shown', async () => {
    const help = (await svc(dir, ['query', '--help'])).stdout + readFileSync(join(dir, 'AGENTS.md'), 'utf8');
    const examples = [...help.matchAll(/--json '([^']+)'/g)].map((m) => m[1]!);
    expect(examples.length).toBeGreaterThanOrEqual(3);
    for (const body of examples) {
      const wait = body.includes('"request_type":"write"') ? ['--wait'] : [];
      const r = await svc(dir, ['query', 'dev', ...wait, '--compact', '--json', body]);
      expect(r.code, `${body}: ${r.stderr}`).toBe(0);
      expect(r.stderr, body).not.toMatch(/fail|error/i);
    }
  });

  it('a pid file naming another instance\'s server (a copied project) or another program is stale: neither is stopped', async () => {
    const pid = Number(readFileSync(join(dir, '.svc', 'dev.pid'), 'utf8'));
    // A copy of this project on another port carries this instance's pid file.
    const copy = tempDir('copied');
    expect((await svc(copy, ['init', 'local', '--port', String(await freePort())])).code).toBe(0);
    writeFileSync(join(copy, '.svc', 'dev.pid'), `${pid}\n`);
    writeFileSync(join(copy, '.svc', 'dev.json'), readFileSync(join(dir, '.svc', 'dev.json')));
    expect(JSON.parse((await svc(copy, ['status', 'dev', '--json'])).stdout)).toMatchObject({ status: 'stopped', note: expect.stringContaining('stale pid file') });
    const stop = await svc(copy, ['stop', 'dev']);
    expect([stop.code, stop.stdout]).toEqual([0, `dev is not running (removed a stale pid file for pid ${pid})\n`]);
    expect(JSON.parse((await svc(dir, ['status', 'dev', '--json'])).stdout)).toMatchObject({ status: 'running', pid });
    // Another program whose command line has "serve" in it.
    const other = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', 'serve'], { stdio: 'ignore' });
    try {
      writeFileSync(join(copy, '.svc', 'dev.pid'), `${other.pid}\n`);
      expect((await svc(copy, ['stop', 'dev'])).stdout).toContain('removed a stale pid file');
      expect(other.exitCode, 'not signalled').toBeNull();
      expect(other.signalCode).toBeNull();
    } finally {
      other.kill();
    }
  });

  it('stop ends the instance; a second stop exits 0; status then reports stopped; query cannot reach it', async () => {
    const stopped = await svc(dir, ['stop', 'dev']);
    expect(stopped.code).toBe(0);
    expect(stopped.stdout).toMatch(/^dev stopped \(pid \d+\)/);
    expect(existsSync(join(dir, '.svc', 'dev.pid'))).toBe(false);

    const again = await svc(dir, ['stop', 'dev']);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe('dev is not running\n');

    const status = await svc(dir, ['status', 'dev', '--json']);
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ status: 'stopped', pid: null, port, storage: 'memory', uptime_seconds: null, ready: false });
    expect((await svc(dir, ['status', 'dev'])).stdout).toMatch(/^dev: stopped\n/);

    const query = await svc(dir, exampleQuery);
    expect(query.code).toBe(1);
    expect(query.stderr).toContain(`cannot reach local instance "dev" at http://127.0.0.1:${port}/v2/query (ECONNREFUSED)`);
    expect(query.stderr).toContain('start it with `svc start dev` and check it with `svc status dev`');

    // Outside a project, --host/--port address a server directly.
    const direct = await svc(tempDir('direct'), ['query', 'any', '--port', String(port), '--file', join(dir, 'examples', 'request.json')]);
    expect(direct.code).toBe(1);
    expect(direct.stderr).toContain(`cannot reach the server at http://127.0.0.1:${port}/v2/query`);
  });

  it('stop removes a stale pid file and exits 0', async () => {
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    writeFileSync(join(dir, '.svc', 'dev.pid'), `${dead.stdout}\n`);
    const status = await svc(dir, ['status', 'dev', '--json']);
    expect(JSON.parse(status.stdout)).toMatchObject({ status: 'stopped', note: expect.stringContaining('stale pid file') });
    const r = await svc(dir, ['stop', 'dev']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('removed a stale pid file');
    expect(existsSync(join(dir, '.svc', 'dev.pid'))).toBe(false);
  });
});

describe('svc start options', () => {
  it('--disk persists under .svc/data/<instance> across a restart', async () => {
    const dir = tempDir('disk');
    const port = await freePort();
    expect((await svc(dir, ['init', 'local', '--port', String(port)])).code).toBe(0);
    try {
      const started = await svc(dir, ['start', 'dev', '--disk']);
      expect(started.stdout).toContain('storage: disk');
      expect((await svc(dir, ['query', 'dev', '-e', "writeBatch().varAs('u', g().addN('User')).returning(['u'])"])).code).toBe(0);
      expect((await svc(dir, ['stop', 'dev'])).code).toBe(0);
      expect(existsSync(join(dir, '.svc', 'data', 'dev'))).toBe(true);
      expect((await svc(dir, ['start', 'dev', '--disk'])).code).toBe(0);
      const count = await svc(dir, ['query', 'dev', '--file', 'examples/request.json', '--compact']);
      expect(count.stdout).toBe('{"node_count":1}\n');
      expect(JSON.parse((await svc(dir, ['status', 'dev', '--json'])).stdout)).toMatchObject({ storage: 'disk', data_dir: join(dir, '.svc', 'data', 'dev') });
    } finally {
      await svc(dir, ['stop', 'dev']);
    }
  });

  it('--log-requests and --slow-query-ms reach svc serve (lines in the instance log); a non-loopback host warns on svc start', async () => {
    const dir = tempDir('logs');
    const port = await freePort();
    expect((await svc(dir, ['init', 'local', '--port', String(port)])).code).toBe(0);
    const config = join(dir, 'svc.toml');
    writeFileSync(config, readFileSync(config, 'utf8').replace('host = "127.0.0.1"', 'host = "0.0.0.0"'));
    try {
      const started = await svc(dir, ['start', 'dev', '--log-requests', '--slow-query-ms', '0']);
      expect(started.code).toBe(0);
      expect(started.stderr).toMatch(/^svc start: warning: listening on 0\.0\.0\.0 \(every network interface\): the local server has no authentication; /);
      expect((await svc(dir, ['query', 'dev', '--file', 'examples/request.json'])).code).toBe(0);
      const logFile = join(dir, '.svc', 'dev.log');
      let lines: Record<string, unknown>[] = [];
      for (let i = 0; i < 100 && lines.length === 0; i++) {
        lines = readFileSync(logFile, 'utf8').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
        if (lines.length === 0) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({ msg: 'query', status: 200, route: 'pool' }); // a label scan: not inline
      expect(readFileSync(logFile, 'utf8')).toContain('svc serve: warning: listening on 0.0.0.0');
    } finally {
      await svc(dir, ['stop', 'dev']);
    }
  });

  it('container_runtime: a missing runtime is an error with the fallback; an installed one falls back to the process runtime', async () => {
    const dir = tempDir('runtime');
    const port = await freePort();
    expect((await svc(dir, ['init', 'local', '--port', String(port)])).code).toBe(0);
    const config = join(dir, 'svc.toml');
    writeFileSync(config, readFileSync(config, 'utf8').replace('# container_runtime = "process"', 'container_runtime = "podman"'));

    const bin = join(dir, 'bin');
    mkdirSync(bin);
    const missing = await svc(dir, ['start', 'dev'], { PATH: bin });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('`podman` is not installed');
    expect(missing.stderr).toContain('remove the container_runtime key or set container_runtime = "process"');

    writeFileSync(join(bin, 'podman'), '#!/bin/sh\nexit 1\n');
    chmodSync(join(bin, 'podman'), 0o755);
    try {
      const installed = await svc(dir, ['start', 'dev'], { PATH: `${bin}${delimiter}${process.env.PATH ?? ''}` });
      expect(installed.code).toBe(0);
      expect(installed.stderr).toContain('container images are not published yet');
      expect(installed.stdout).toContain(`dev is running at http://127.0.0.1:${port}`);
    } finally {
      await svc(dir, ['stop', 'dev']);
    }
  });

  it('refuses an empty host or state_dir, and says in one line what is wrong with a state_dir that is a file', async () => {
    const dir = tempDir('paths');
    const port = await freePort();
    expect((await svc(dir, ['init', 'local', '--port', String(port)])).code).toBe(0);
    const config = join(dir, 'svc.toml');
    const original = readFileSync(config, 'utf8');
    const withLine = (key: 'host' | 'state_dir', value: string) => writeFileSync(config, original.replace(new RegExp(`^${key} = .*$`, 'm'), `${key} = ${value}`));
    withLine('host', '""');
    const host = await svc(dir, ['start', 'dev']);
    expect([host.code, host.stderr]).toEqual([1, `svc start: ${config}: [local.dev] host must not be empty (leave it out for the default)\n`]);
    withLine('state_dir', '" "');
    expect((await svc(dir, ['status', 'dev'])).stderr).toContain('state_dir must not be empty');
    writeFileSync(join(dir, 'afile'), 'not a directory\n');
    withLine('state_dir', '"afile"');
    const start = await svc(dir, ['start', 'dev']);
    expect(start.code).toBe(1);
    expect(start.stderr).toMatch(/^svc start: E[A-Z]+: [^\n]*afile[^\n]*\n$/);
    const stop = await svc(dir, ['stop', 'dev']);
    expect([stop.code, stop.stdout]).toEqual([0, 'dev is not running\n']);
    const serve = await svc(dir, ['serve', '--host', '', '--port', '0']);
    expect([serve.code, serve.stderr.trim()]).toEqual([1, 'svc serve: --host must not be empty (default 127.0.0.1)']);
  });

  it('two svc start at once start one server, and two svc stop stop it once; a failed start leaves no server behind', async () => {
    const dir = tempDir('race');
    const port = await freePort();
    expect((await svc(dir, ['init', 'local', '--port', String(port)])).code).toBe(0);
    const pidFile = join(dir, '.svc', 'dev.pid');
    try {
      const both = await Promise.all([svc(dir, ['start', 'dev']), svc(dir, ['start', 'dev'])]);
      expect(both.map((r) => r.code), both.map((r) => r.stderr).join('')).toEqual([0, 0]);
      const pid = Number(readFileSync(pidFile, 'utf8'));
      // One started it; the other waited for it and found it running.
      expect(both.map((r) => r.stdout).join('')).toContain(`dev is already running at http://127.0.0.1:${port} (pid ${pid}`);
      expect(serversStartedBy(pidFile)).toEqual([pid]);
      // Two stops at once: one stops it, the other waits and finds it stopped; the server got
      // one SIGTERM and drained (a second one means "exit now").
      const stops = await Promise.all([svc(dir, ['stop', 'dev']), svc(dir, ['stop', 'dev'])]);
      expect(stops.map((r) => r.code)).toEqual([0, 0]);
      expect(stops.map((r) => r.stdout).sort()).toEqual([`dev is not running\n`, `dev stopped (pid ${pid}); its in-memory data is discarded\n`]);
      expect(readFileSync(join(dir, '.svc', 'dev.log'), 'utf8')).not.toContain('again, exiting without draining');
      expect(serversStartedBy(pidFile)).toEqual([]);
    } finally {
      for (const pid of serversStartedBy(pidFile)) process.kill(pid, 'SIGKILL');
    }
    // Its state file cannot be written (a directory in the way): the start fails in one line
    // and stops the server it spawned, which no svc stop could have reached.
    mkdirSync(join(dir, '.svc', 'dev.json'));
    const failed = await svc(dir, ['start', 'dev'], {}, 20_000);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/^svc start: E[A-Z]+: [^\n]*dev\.json[^\n]*\n$/);
    await eventually(() => serversStartedBy(pidFile).length === 0, 'the spawned server is stopped', slowly);
  });

  it('a pid file that is a directory is one line naming it; svc stop still exits 0', async () => {
    const dir = tempDir('piddir');
    expect((await svc(dir, ['init', 'local', '--port', String(await freePort())])).code).toBe(0);
    const pidFile = join(dir, '.svc', 'dev.pid');
    mkdirSync(pidFile);
    const line = `${pidFile} is a directory, not a pid file; remove it\n`;
    const status = await svc(dir, ['status', 'dev']);
    expect([status.code, status.stderr]).toEqual([1, `svc status: ${line}`]);
    const start = await svc(dir, ['start', 'dev']);
    expect([start.code, start.stderr]).toEqual([1, `svc start: ${line}`]);
    const stop = await svc(dir, ['stop', 'dev']);
    expect([stop.code, stop.stdout, stop.stderr]).toEqual([0, 'dev is not running\n', `svc stop: ${line}`]);
  });

  it('reports a port that something else already uses, and config errors with the file and key', async () => {
    const dir = tempDir('busy');
    const port = await freePort();
    expect((await svc(dir, ['init', 'local', '--port', String(port)])).code).toBe(0);
    const other = tempDir('busy-other');
    expect((await svc(other, ['init', 'local', '--port', String(port)])).code).toBe(0);
    try {
      expect((await svc(other, ['start', 'dev'])).code).toBe(0);
      const r = await svc(dir, ['start', 'dev']);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`port ${port} on 127.0.0.1 is already in use`);
    } finally {
      await svc(other, ['stop', 'dev']);
    }
    const unknown = await svc(dir, ['status', 'nope']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('unknown instance "nope"');
    const config = join(dir, 'svc.toml');
    writeFileSync(config, readFileSync(config, 'utf8').replace(`port = ${port}`, `prot = ${port}`));
    const typo = await svc(dir, ['start', 'dev']);
    expect(typo.code).toBe(1);
    expect(typo.stderr).toContain('[local.dev]: unknown key "prot"');
    const noProject = await svc(tempDir('empty'), ['status', 'dev']);
    expect(noProject.code).toBe(1);
    expect(noProject.stderr).toContain('no svc.toml found');
  });
});

/** Pids of live `svc serve` processes started for `pidFile` (their command line names it). */
function serversStartedBy(pidFile: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (/\) [ZX] /.test(stat)) continue; // exited, not yet reaped
    } catch {
      continue; // gone meanwhile
    }
    const at = argv.indexOf('--started-by');
    if (argv.includes('serve') && at >= 0 && argv[at + 1] === pidFile) pids.push(Number(entry));
  }
  return pids;
}
