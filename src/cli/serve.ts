// `svc serve`: run the server in the foreground until SIGTERM/SIGINT.
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { DEFAULT_HOST, DEFAULT_PORT, startServer, type RunningServer } from '../server/server.js';
import type { ReadDispatch } from '../server/reader-pool.js';
import type { ServerMode } from '../server/http.js';
import { parseStorageUri, type ObjectStorageOptions } from '../durability/object-bucket.js';
import { uwsNativeProblem } from '../server/uws.js';
import { limits } from '../limits.js';
import { databaseIdPattern } from '../protocol/headers.js';
import { SLOW_QUERY_MS_DEFAULT } from '../server/request-log.js';
import { noAuthenticationWarning } from './bind-address.js';
import { integerOption } from './options.js';

interface ServeOptions {
  host: string;
  port: number;
  readers: number;
  httpThreads?: number;
  readDispatch: ReadDispatch;
  inlineReads: 'on' | 'off';
  disk?: string;
  storageUri?: string;
  s3EndpointUrl?: string;
  s3Region?: string;
  cacheDir?: string;
  mode: ServerMode;
  refreshMs: number;
  snapshotWalBytes?: number;
  queryTimeoutMs: number;
  queryMemoryMb: number;
  logRequests?: boolean;
  slowQueryMs: number;
  databaseId?: string;
}

function onOffOption(value: string): 'on' | 'off' {
  if (value !== 'on' && value !== 'off') throw new InvalidArgumentError('must be "on" or "off".');
  return value;
}

function readDispatchOption(value: string): ReadDispatch {
  if (value !== 'coalesce' && value !== 'per-request') {
    throw new InvalidArgumentError('must be "coalesce" or "per-request".');
  }
  return value;
}

/** The gateway's database-ID shape. */
function databaseIdOption(value: string): string {
  if (!databaseIdPattern.test(value)) throw new InvalidArgumentError('must be 1-128 letters, digits, ".", "_" or "-".');
  return value;
}

function modeOption(value: string): ServerMode {
  if (value !== 'writer' && value !== 'reader') throw new InvalidArgumentError('must be "writer" or "reader".');
  return value;
}

/** A message on one line (a nested error text may carry newlines). */
function oneLine(message: string): string {
  return message.replace(/\s*\n\s*/g, ' ');
}

function fail(message: string): never {
  process.stderr.write(`svc serve: ${message}\n`);
  process.exit(1);
}

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run the server in the foreground (in-memory storage unless --disk or --storage-uri) until SIGTERM/SIGINT')
    .option('--host <host>', 'address to bind', DEFAULT_HOST)
    .option('--port <port>', 'port to listen on (0 = any free port)', integerOption('port', 0, 65535), DEFAULT_PORT)
    .addOption(new Option('--readers <n>', 'reader threads').argParser(integerOption('readers', 1, 256)).default(availableParallelism(), 'CPU count'))
    .option('--http-threads <n>', 'front-end threads, each a uWS app on the port running cheap reads itself (default: as many as --readers)',
      integerOption('http-threads', 1, 256))
    .option('--disk <dir>', 'persist to this directory (write-ahead log + snapshots) instead of memory')
    .option('--storage-uri <uri>', 'persist to an S3-compatible bucket, s3://bucket/prefix (credentials: AWS_* variables or ./.env)')
    .option('--s3-endpoint-url <url>', 'S3-compatible endpoint (MinIO, s3rver, ...); default AWS')
    .option('--s3-region <region>', 'S3 region (default AWS_REGION or us-east-1)')
    .option('--cache-dir <dir>', 'object storage: local working directory (default a temp directory)')
    .option('--mode <mode>', 'writer, or reader: read-only, following --disk or --storage-uri written by a writer server', modeOption, 'writer')
    .option('--refresh-ms <ms>', 'reader mode: poll the storage for new writes this often', integerOption('refresh-ms', 1, limits.refreshMsMax), 1000)
    .option('--snapshot-wal-bytes <n>', 'snapshot once this many WAL bytes accumulated (default 64 MiB)', integerOption('snapshot-wal-bytes', 1, limits.snapshotWalBytesMax))
    .option('--query-timeout-ms <ms>', 'cooperative deadline per query', integerOption('query-timeout-ms', 1, limits.queryTimeoutMsMax), 30_000)
    .option('--query-memory-mb <mb>', 'memory budget per query: rows, sets, groups and the response it builds',
      integerOption('query-memory-mb', 1, limits.queryMemoryMbMax), limits.queryMemoryBytesMax / (1024 * 1024))
    .option('--inline-reads <on|off>', 'run reads with a static cost bound on the HTTP thread, under a ~1-2 ms work cap (writer servers)', onOffOption, 'on')
    .option('--read-dispatch <mode>', 'coalesce queued reads into one task per thread, or one task per request (benchmarks)', readDispatchOption, 'coalesce')
    .option('--log-requests', 'log one JSON line per query request on stderr (status, duration, body size, error code, route)')
    .option('--slow-query-ms <ms>', 'log requests slower than this on stderr, with the start of their body (0 = off)',
      integerOption('slow-query-ms', 0, 86_400_000), SLOW_QUERY_MS_DEFAULT)
    .option('--database-id <id>', 'serve only this database: refuse (421 misdirected_request) queries whose x-svc-tenant-id names another; '
      + 'requests without the header are answered (the cloud provisioning sets it)', databaseIdOption)
    // Set by `svc start`: the pid file that names this process. Not used here; it is how
    // svc status / stop tell their server from another program (instance-state.ts).
    .addOption(new Option('--started-by <pid-file>', 'the pid file of svc start that names this server').hideHelp())
    .action(async (options: ServeOptions) => {
      await serve(options);
    });
}

async function serve(options: ServeOptions): Promise<void> {
  // Refuse the slow JS fallback before anything else (notes/packages.md).
  const problem = uwsNativeProblem();
  if (problem !== null) fail(problem);

  // uWS reads an empty host as "every interface, any port".
  if (options.host.trim() === '') fail('--host must not be empty (default 127.0.0.1)');
  if (options.disk !== undefined && options.storageUri !== undefined) fail('use --disk or --storage-uri, not both');
  if (options.storageUri === undefined && (options.s3EndpointUrl ?? options.s3Region ?? options.cacheDir) !== undefined) {
    fail('--s3-endpoint-url, --s3-region and --cache-dir need --storage-uri');
  }
  if (options.mode === 'reader' && options.disk === undefined && options.storageUri === undefined) {
    fail('--mode reader follows a writer: give --disk DIR or --storage-uri s3://bucket/prefix');
  }
  let objectStorage: ObjectStorageOptions | null = null;
  if (options.storageUri !== undefined) {
    try {
      parseStorageUri(options.storageUri);
    } catch (err) {
      fail(err instanceof Error ? err.message : String(err));
    }
    // Credentials: the AWS_* environment, else a project .env (existing variables win).
    try {
      if (existsSync('.env')) process.loadEnvFile('.env');
    } catch (err) {
      fail(`cannot read .env: ${err instanceof Error ? err.message : String(err)}`);
    }
    objectStorage = {
      uri: options.storageUri,
      ...(options.s3EndpointUrl !== undefined ? { endpointUrl: options.s3EndpointUrl } : {}),
      ...(options.s3Region !== undefined ? { region: options.s3Region } : {}),
      ...(options.cacheDir !== undefined ? { cacheDir: resolve(options.cacheDir) } : {}),
    };
  }
  const warning = noAuthenticationWarning(options.host);
  if (warning !== null) process.stderr.write(`svc serve: warning: ${warning}\n`);

  let server: RunningServer;
  try {
    server = await startServer({
      host: options.host,
      port: options.port,
      readers: options.readers,
      ...(options.httpThreads !== undefined ? { httpThreads: options.httpThreads } : {}),
      readDispatch: options.readDispatch,
      inlineReads: options.inlineReads === 'on',
      queryTimeoutMs: options.queryTimeoutMs,
      queryMemoryMb: options.queryMemoryMb,
      // Absolute, so every message and log line names the exact place.
      diskPath: options.disk === undefined ? null : resolve(options.disk),
      objectStorage,
      mode: options.mode,
      refreshMs: options.refreshMs,
      ...(options.snapshotWalBytes !== undefined ? { snapshotWalBytes: options.snapshotWalBytes } : {}),
      logRequests: options.logRequests === true,
      slowQueryMs: options.slowQueryMs,
      databaseId: options.databaseId ?? null,
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
    // A stop that could not finish cleanly (e.g. the final snapshot failed) exits 1 with
    // one line; the data is safe in the WAL (the message says so), but a supervisor should know.
    server.close().then(
      () => process.exit(0),
      (err: unknown) => fail(oneLine(err instanceof Error ? err.message : String(err))),
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  const r = server.recovery;
  const recovered = r === null ? ''
    : server.mode === 'reader' ? `, following from epoch ${r.epoch}`
    : `, recovered epoch ${r.epoch} from snapshot ${r.snapshotEpoch} + ${r.replayedBatches} WAL batches`;
  const mode = server.mode === 'reader' ? ', mode: reader' : '';
  process.stdout.write(`svcdb listening on ${server.url} (storage: ${server.storage}${mode}, readers: ${server.readers}, uws: native${recovered})\n`);
}
