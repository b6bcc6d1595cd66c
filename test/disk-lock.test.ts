// The disk writer lock: one writer per directory while the holder lives, however long its
// thread is blocked, and free the moment it dies (kill -9 included). Holders and probes run
// in child processes (test/fixtures/lock-holder.mjs) on the built dist/ code.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { DiskWriter } from '../src/durability/disk-storage.js';
import { SvcError } from '../src/protocol/errors.js';

const fixture = new URL('./fixtures/lock-holder.mjs', import.meta.url).pathname;
/** How long the holder's thread blocks: past the old lock's 10 s stale interval. */
const blockMs = 12_000;
/** How often the second process tries to open the directory meanwhile. */
const probeEveryMs = 250;
/** How soon after kill -9 of the holder a new writer must get in. */
const takeoverMs = 1_000;
/** How long a line from a fixture may take (process start + build imports). */
const lineTimeoutMs = 15_000;

const dirs: string[] = [];
const children: ChildProcessWithoutNullStreams[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'svcdb-lock-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
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
      expect(tries).toEqual([expect.stringMatching(`^refused .*locked by a writer: process ${h.child.pid} on `), 'done']);
      const err = (() => { try { DiskWriter.open(dir).close(); return null; } catch (e) { return e; } })();
      expect(err).toBeInstanceOf(SvcError);
      expect((err as SvcError).code).toBe('storage_error');
      expect((err as SvcError).msg).toContain(`process ${h.child.pid} on `);
      h.send('close');
      expect(await h.next()).toBe('closed');
      expect(await h.exited).toBe(0);
      DiskWriter.open(dir).close();
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
      opened!.close();
    });
  });
}
