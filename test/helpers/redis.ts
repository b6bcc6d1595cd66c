// A real redis-server for gateway tests, on a Unix socket in a temporary directory (no
// port to collide with other test files). `.ci/run` installs redis-server when missing.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RedisServer {
  /** `unix:///.../redis.sock`, for the gateway's redisUrl. */
  readonly url: string;
  readonly socketPath: string;
  /** Stop it (SIGTERM) and wait for the exit; the directory stays so start() can reuse the path. */
  stop(): Promise<void>;
  /** Start again on the same socket (after stop()). */
  start(): Promise<void>;
  /** The server's process id (tests pause it with SIGSTOP), null when stopped. */
  pid(): number | null;
  /** Stop and remove the directory. */
  dispose(): Promise<void>;
}

export function redisServerAvailable(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

export async function startRedis(): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'svcdb-redis-'));
  const socketPath = join(dir, 'redis.sock');
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();

  const start = async (): Promise<void> => {
    const proc = spawn('redis-server', [
      '--port', '0', '--unixsocket', socketPath, '--unixsocketperm', '700',
      '--save', '', '--appendonly', 'no', '--dir', dir, '--loglevel', 'warning',
    ], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    proc.stdout!.on('data', (d: Buffer) => { output += d.toString(); });
    proc.stderr!.on('data', (d: Buffer) => { output += d.toString(); });
    child = proc;
    exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    const deadline = Date.now() + 10_000;
    while (!(await answersPing(socketPath))) {
      if (proc.exitCode !== null) throw new Error(`redis-server exited during start-up: ${output}`);
      if (Date.now() > deadline) throw new Error(`redis-server did not answer within 10 s: ${output}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  const stop = async (): Promise<void> => {
    const proc = child;
    child = null;
    if (proc === null || proc.exitCode !== null) return;
    proc.kill('SIGTERM');
    await exited;
  };

  await start();
  return {
    url: `unix://${socketPath}`,
    socketPath,
    stop,
    start,
    pid: () => child?.pid ?? null,
    dispose: async () => {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function answersPing(socketPath: string): Promise<boolean> {
  if (!existsSync(socketPath)) return Promise.resolve(false);
  return new Promise((resolve) => {
    const socket = connect(socketPath);
    let reply = '';
    socket.setTimeout(500, () => { socket.destroy(); resolve(false); });
    socket.on('error', () => resolve(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => {
      reply += d.toString();
      if (reply.includes('\r\n')) { socket.end(); resolve(reply.startsWith('+PONG')); }
    });
  });
}
