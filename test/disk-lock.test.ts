// The disk writer lock: one writer per directory while the holder lives, however long its
// thread is blocked, and free the moment it dies (kill -9 included). Holders and probes run
// in child processes (test/fixtures/lock-holder.mjs) on the built dist/ code.
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { DiskWriter } from '../src/durability/disk-storage.js';
import { SvcError } from '../src/protocol/errors.js';
import { tempDirs } from './helpers/temp-dirs.js';

const fixture = new URL('./fixtures/lock-holder.mjs', import.meta.url).pathname;
/** How long the holder's thread blocks: past the old lock's 10 s stale interval. */
const blockMs = 12_000;
/** How often the second process tries to open the directory meanwhile. */
const probeEveryMs = 250;
/** How soon after kill -9 of the holder a new writer must get in. */
const takeoverMs = 1_000;
/** How long a line from a fixture may take (process start + build imports). */
const lineTimeoutMs = 15_000;
/** How long the writer may take to notice that its lock file was replaced (check every 1 s). */
const lossNoticedMs = 3_000;
/** A pid above Linux's pid_max (2^22): never a running process. */
const deadPid = 2 ** 22 + 7;

const tempDir = tempDirs('lock');
const children: ChildProcessWithoutNullStreams[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

interface Fixture {
  child: ChildProcessWithoutNullStreams;
  /** Every line printed so far. */
  lines: string[];
  /** The next line not yet consumed (waits for it). */
  next(): Promise<string>;
  send(line: string): void;
  exited: Promise<number | null>;
}

function run(args: string[], env: NodeJS.ProcessEnv = process.env): Fixture {
  const child = spawn(process.execPath, [fixture, ...args], { env });
  children.push(child);
  const lines: string[] = [];
  let consumed = 0;
  let waiter: (() => void) | null = null;
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
  createInterface({ input: child.stdout }).on('line', (line) => {
    lines.push(line);
    waiter?.();
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => { waiter?.(); resolve(code); }));
  return {
    child, lines, exited,
    send: (line) => child.stdin.write(`${line}\n`),
    next: () => new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no line from ${args.join(' ')} within ${lineTimeoutMs} ms; got ${JSON.stringify(lines)}; stderr ${stderr}`)), lineTimeoutMs);
      const check = (): void => {
        if (consumed < lines.length) {
          clearTimeout(timer);
          waiter = null;
          resolve(lines[consumed++]!);
        } else if (child.exitCode !== null || child.signalCode !== null) {
          clearTimeout(timer);
          reject(new Error(`${args.join(' ')} exited (${child.exitCode ?? child.signalCode}) after ${JSON.stringify(lines)}; stderr ${stderr}`));
        }
      };
      waiter = check;
      check();
    }),
  };
}

async function holder(dir: string, thread: 'main' | 'worker'): Promise<Fixture> {
  const f = run(['hold', dir, ...(thread === 'worker' ? ['worker'] : [])]);
  expect(await f.next()).toBe(`open ${f.child.pid}`);
  return f;
}

async function probe(dir: string, forMs: number, everyMs: number): Promise<string[]> {
  const p = run(['probe', dir, String(forMs), String(everyMs)]);
  await p.exited;
  return p.lines;
}

for (const thread of ['main', 'worker'] as const) {
  describe(`disk writer lock (holder's writer on the ${thread} thread)`, () => {
    it('refuses a second writer in another process and in this one, naming the holder', async () => {
      const dir = tempDir();
      const h = await holder(dir, thread);
      const tries = await probe(dir, 0, 0);
      // The kernel holds the lock for the writer's own descriptor: no helper process that
      // could be killed (or outlive it) runs beside it.
      const helpers = spawnSync('pgrep', ['-P', String(h.child.pid)], { encoding: 'utf8' });
      expect(helpers.stdout, 'child processes of the holder').toBe('');
      expect(tries).toEqual([expect.stringMatching(`^refused .*locked by a writer: process ${h.child.pid} on `), 'done']);
      const err = await openError(dir);
      expect(err).toBeInstanceOf(SvcError);
      expect((err as SvcError).code).toBe('storage_error');
      expect((err as SvcError).msg).toContain(`process ${h.child.pid} on `);
      h.send('close');
      expect(await h.next()).toBe('closed');
      expect(await h.exited).toBe(0);
      await DiskWriter.open(dir).close();
    });

    it(`stays exclusive while the holder's thread is blocked for ${blockMs} ms`, async () => {
      const dir = tempDir();
      const h = await holder(dir, thread);
      h.send(`block ${blockMs}`);
      const tries = await probe(dir, blockMs, probeEveryMs);
      expect(tries.filter((l) => !l.startsWith('refused ')), 'the second process got in').toEqual(['done']);
      expect(tries.length).toBeGreaterThan(blockMs / probeEveryMs / 2);
      expect(await h.next()).toBe('unblocked');
      // The holder never lost the lock, so it still acknowledges.
      h.send('sync');
      expect(await h.next()).toBe('synced');
    });

    it(`frees the lock within ${takeoverMs} ms of kill -9 of the holder`, async () => {
      const dir = tempDir();
      const h = await holder(dir, thread);
      h.send(`block ${blockMs}`); // dies blocked: nothing of its own runs on the way out
      h.child.kill('SIGKILL');
      await h.exited;
      const killedAt = Date.now();
      let opened: DiskWriter | null = null;
      while (opened === null && Date.now() - killedAt < takeoverMs) {
        try { opened = DiskWriter.open(dir); } catch { /* not yet */ }
      }
      expect(opened, `no writer got in within ${takeoverMs} ms of the kill`).not.toBeNull();
      await opened!.close();
    });
  });
}

/** DiskWriter.open's error, or null if it opened (then closed again). */
async function openError(dir: string): Promise<SvcError | null> {
  try {
    await DiskWriter.open(dir).close();
    return null;
  } catch (err) {
    expect(err).toBeInstanceOf(SvcError);
    return err as SvcError;
  }
}

describe('disk writer lock', () => {
  it('reports the loss when the lock file is replaced while held, and the writer stops acknowledging', async () => {
    const dir = tempDir();
    const writer = DiskWriter.open(dir);
    await writer.sync();
    // A new inode at the path is no longer the one we locked: a second writer could lock it.
    writeFileSync(join(dir, 'writer.lock.new'), '');
    renameSync(join(dir, 'writer.lock.new'), join(dir, 'writer.lock'));
    const since = Date.now();
    let err: unknown = null;
    while (err === null && Date.now() - since < lossNoticedMs) {
      await new Promise((r) => setTimeout(r, 100));
      try { await writer.sync(); } catch (e) { err = e; }
    }
    expect(err, `no loss reported within ${lossNoticedMs} ms`).toBeInstanceOf(SvcError);
    expect((err as SvcError).msg).toContain('lost the writer lock');
    await writer.close().catch(() => undefined);
  });

  it('a process the writer spawned does not keep the lock after the writer releases it', async () => {
    const dir = tempDir();
    const writer = DiskWriter.open(dir);
    const child = spawn('sleep', ['30']);
    try {
      expect((await openError(dir))?.msg).toContain(`process ${process.pid}`);
      await writer.close();
      expect(child.exitCode).toBeNull();
      expect(await openError(dir)).toBeNull();
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('waits briefly for a holder whose recorded process is gone, then opens', async () => {
    const dir = tempDir();
    mkdirSync(dir, { recursive: true });
    // A lock held by an exiting process (here: flock(1) about to finish) whose record is stale.
    const exiting = spawn('flock', ['--exclusive', join(dir, 'writer.lock'), 'sleep', '0.3']);
    children.push(exiting as unknown as ChildProcessWithoutNullStreams);
    while (spawnSync('flock', ['--exclusive', '--nonblock', join(dir, 'writer.lock'), 'true']).status === 0) { /* not locked yet */ }
    writeFileSync(join(dir, 'writer.pid'), JSON.stringify({ pid: deadPid, host: hostname(), since: 'test' }));
    expect(await openError(dir)).toBeNull();
  });

  it('refuses, after the retry, a lock whose holder left no record of itself', async () => {
    const dir = tempDir();
    const stranger = spawn('flock', ['--exclusive', join(dir, 'writer.lock'), 'sleep', '30']);
    children.push(stranger as unknown as ChildProcessWithoutNullStreams);
    while (spawnSync('flock', ['--exclusive', '--nonblock', join(dir, 'writer.lock'), 'true']).status === 0) { /* not locked yet */ }
    expect((await openError(dir))?.msg).toContain('locked by a writer: another process (it has not recorded itself');
    writeFileSync(join(dir, 'writer.pid'), JSON.stringify({ pid: deadPid, host: hostname(), since: 'test' }));
    expect((await openError(dir))?.msg).toContain(`writer.pid names process ${deadPid} on ${hostname()}, which is not running`);
  });

  it('removes the lock directory an older version (proper-lockfile) left behind, unless its holder runs', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'writer.lock'));
    writeFileSync(join(dir, 'writer.pid'), JSON.stringify({ pid: process.pid, host: hostname(), since: 'test' }));
    expect((await openError(dir))?.msg).toContain(`process ${process.pid}`);
    writeFileSync(join(dir, 'writer.pid'), JSON.stringify({ pid: deadPid, host: hostname(), since: 'test' }));
    expect(await openError(dir)).toBeNull();
    expect(statSync(join(dir, 'writer.lock')).isFile()).toBe(true);
  });

  it('without flock(1) on PATH, refuses with a storage_error saying what to install', async () => {
    const dir = tempDir();
    const h = run(['hold', dir], { PATH: '' });
    expect(await h.next()).toMatch(/^refused storage error: .*flock\(1\).*install util-linux/);
  });
});
