// `svc serve`: run the server in the foreground until SIGTERM/SIGINT.
import { availableParallelism } from 'node:os';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { DEFAULT_HOST, DEFAULT_PORT, startServer, type RunningServer } from '../server/server.js';
import type { ReadDispatch } from '../server/reader-pool.js';
import { uwsNativeProblem } from '../server/uws.js';

interface ServeOptions {
  host: string;
  port: number;
  readers: number;
  readDispatch: ReadDispatch;
  disk?: string;
  queryTimeoutMs: number;
}

function integerOption(name: string, min: number, max: number): (value: string) => number {
  return (value: string) => {
    if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}.`);
    const n = Number(value);
    if (n < min || n > max) throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}.`);
    return n;
  };
}

function readDispatchOption(value: string): ReadDispatch {
  if (value !== 'coalesce' && value !== 'per-request') {
    throw new InvalidArgumentError('must be "coalesce" or "per-request".');
  }
  return value;
}

function fail(message: string): never {
  process.stderr.write(`svc serve: ${message}\n`);
  process.exit(1);
}

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run the server in the foreground (in-memory storage unless --disk) until SIGTERM/SIGINT')
    .option('--host <host>', 'address to bind', DEFAULT_HOST)
    .option('--port <port>', 'port to listen on (0 = any free port)', integerOption('port', 0, 65535), DEFAULT_PORT)
    .addOption(new Option('--readers <n>', 'reader threads').argParser(integerOption('readers', 1, 256)).default(availableParallelism(), 'CPU count'))
    .option('--disk <dir>', 'persist to this directory (write-ahead log + snapshots) instead of memory')
    .option('--query-timeout-ms <ms>', 'cooperative deadline per query', integerOption('query-timeout-ms', 1, 86_400_000), 30_000)
    .option('--read-dispatch <mode>', 'coalesce queued reads into one task per thread, or one task per request (benchmarks)', readDispatchOption, 'coalesce')
    .action(async (options: ServeOptions) => {
      await serve(options);
    });
}

async function serve(options: ServeOptions): Promise<void> {
  // Refuse the slow JS fallback before anything else (notes/packages.md).
  const problem = uwsNativeProblem();
  if (problem !== null) fail(problem);

  let server: RunningServer;
  try {
    server = await startServer({
      host: options.host,
      port: options.port,
      readers: options.readers,
      readDispatch: options.readDispatch,
      queryTimeoutMs: options.queryTimeoutMs,
      diskPath: options.disk ?? null,
      onFatal: (err) => fail(err.message),
    });
  } catch (err) {
    fail(err instanceof Error ? err.message : String(err));
  }

  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) {
      process.stderr.write(`svc serve: ${signal} again, exiting without draining\n`);
      process.exit(1);
    }
    stopping = true;
    server.close().then(
      () => process.exit(0),
      (err: unknown) => fail(`shutdown failed: ${err instanceof Error ? err.message : String(err)}`),
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  const recovered = server.recovery
    ? `, recovered epoch ${server.recovery.epoch} from snapshot ${server.recovery.snapshotEpoch} + ${server.recovery.replayedBatches} WAL batches`
    : '';
  process.stdout.write(`svcdb listening on ${server.url} (storage: ${server.storage}, readers: ${server.readers}, uws: native${recovered})\n`);
}
