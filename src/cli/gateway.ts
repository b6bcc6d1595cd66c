// `svc gateway`: the managed cloud's front door (docs/gateway.md) in the foreground until
// SIGTERM/SIGINT. It reads keys, routes and allowances from the control plane's store
// (the same --store as `svc cloud serve`; SQLite for one gateway on a laptop, PostgreSQL
// for replicas) and keeps its token buckets in Redis.
//
// No secret is taken from a flag: a password in --redis-url or --store would show in
// `ps`; put it in SVC_REDIS_URL / SVC_CONTROL_PLANE_STORE instead (both are read when the
// flag is absent).
import { resolve } from 'node:path';
import { Option, type Command } from 'commander';
import { limits } from '../limits.js';
import { action, CliError } from './errors.js';
import { integerOption } from './options.js';

const storeEnv = 'SVC_CONTROL_PLANE_STORE';
const redisEnv = 'SVC_REDIS_URL';
const defaultPort = 8080;

interface GatewayFlags {
  host: string;
  port: number;
  store?: string;
  redisUrl?: string;
  publicUrl?: string;
  tlsCert?: string;
  tlsKey?: string;
  authHeader: string;
  authScheme: 'bearer' | 'raw';
  authEnv: string;
  queryTimeoutMs?: number;
  cacheTtlMs: number;
  controlPlaneStaleMs: number;
  healthIntervalMs: number;
  usageFlushMs: number;
  accessLog?: boolean;
  threads: number;
}

export function registerGateway(program: Command): void {
  program
    .command('gateway')
    .description('run the cloud gateway: API keys, per-database rate limits (Redis), routing to each database\'s writer and readers')
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--port <port>', 'port to listen on (0 = any free port)', integerOption('port', 0, 65535), defaultPort)
    .option('--store <location>', `control-plane store: SQLite file (or sqlite:<path>) or postgres://... (default ${storeEnv}, else svc-cloud.sqlite)`)
    .option('--redis-url <url>', `Redis for the shared token buckets: redis://host:port or unix:///path.sock (default ${redisEnv}, else redis://127.0.0.1:6379)`)
    .option('--public-url <url>', 'the address clients use, for GET /v2/metadata (default http(s)://<host>:<port>)')
    .option('--tls-cert <file>', 'serve HTTPS: the certificate chain (PEM); needs --tls-key')
    .option('--tls-key <file>', 'the private key of --tls-cert (PEM, unencrypted)')
    .option('--auth-header <name>', 'header that carries the API key', 'Authorization')
    .addOption(new Option('--auth-scheme <scheme>', 'bearer ("Bearer <key>") or raw (the key alone)').choices(['bearer', 'raw']).default('bearer'))
    .option('--auth-env <variable>', 'the environment variable clients keep the key in (metadata document)', 'SVC_API_KEY')
    .option('--query-timeout-ms <ms>', 'deadline of a request at the gateway; past it 408 query_timeout (default 30000)', integerOption('query-timeout-ms', 1, limits.queryTimeoutMsMax))
    .option('--cache-ttl-ms <ms>', 'how long keys, routes and allowances are reused before the store is asked again', integerOption('cache-ttl-ms', 0, 600_000), 1000)
    .option('--control-plane-stale-ms <ms>', 'how long keys, routes and allowances the store confirmed keep working while it is down (0: not at all)',
      integerOption('control-plane-stale-ms', 0, 86_400_000), limits.gatewayControlPlaneStaleMs)
    .option('--health-interval-ms <ms>', 'how often every backend\'s /readyz is polled', integerOption('health-interval-ms', 50, 600_000), 1000)
    .option('--usage-flush-ms <ms>', 'how often metered usage is written to the store', integerOption('usage-flush-ms', 100, 3_600_000), 5000)
    .option('--access-log', 'one JSON line per query on stderr (keys never appear)')
    .option('--threads <n>', 'gateway threads on the port, each a whole gateway (Linux spreads connections over them); about one core each',
      integerOption('threads', 1, limits.gatewayThreadsMax), 1)
    .action(action('gateway', async (flags: GatewayFlags) => {
      await runGateway(flags);
    }));
}

async function runGateway(flags: GatewayFlags): Promise<void> {
  if ((flags.tlsCert === undefined) !== (flags.tlsKey === undefined)) {
    throw new CliError('--tls-cert and --tls-key go together: give both to serve HTTPS, or neither');
  }
  // Loaded here: the gateway, the store drivers and uWS are not needed by other commands.
  const { startGatewayThreads } = await import('../gateway/gateway-threads.js');
  const { openControlPlane, describeStoreLocation } = await import('../cloud/open.js');
  const store = flags.store ?? process.env[storeEnv] ?? 'svc-cloud.sqlite';
  const redisUrl = flags.redisUrl ?? process.env[redisEnv] ?? 'redis://127.0.0.1:6379';
  const controlPlane = await openControlPlane(store);
  let stopping = false;
  let gateway;
  try {
    // One thread is startGateway alone, exactly as before --threads existed.
    gateway = await startGatewayThreads({
      threads: flags.threads, controlPlane, storeLocation: store,
      redisUrl, host: flags.host, port: flags.port,
      ...(flags.publicUrl === undefined ? {} : { publicUrl: flags.publicUrl }),
      ...(flags.tlsCert === undefined ? {} : { tls: { certFile: resolve(flags.tlsCert), keyFile: resolve(flags.tlsKey!) } }),
      authHeader: flags.authHeader, authScheme: flags.authScheme, queryAuthEnv: flags.authEnv,
      ...(flags.queryTimeoutMs === undefined ? {} : { queryTimeoutMs: flags.queryTimeoutMs }),
      cacheTtlMs: flags.cacheTtlMs, controlPlaneStaleMs: flags.controlPlaneStaleMs, healthIntervalMs: flags.healthIntervalMs, usageFlushMs: flags.usageFlushMs,
      accessLog: flags.accessLog === true,
      // A thread died: the others are closed already (usage flushed, port released); exit
      // non-zero so a supervisor restarts the whole gateway instead of it running short.
      onFatal: (err) => {
        stopping = true;
        process.stderr.write(`svc gateway: ${err.message}\n`);
        void controlPlane.close().finally(() => process.exit(1));
      },
    });
  } catch (err) {
    await controlPlane.close();
    throw new CliError(`cannot start the gateway: ${(err as Error).message}`);
  }
  const threads = flags.threads > 1 ? `, threads: ${flags.threads}` : '';
  process.stdout.write(`svc gateway listening on ${gateway.url} (store: ${describeStoreLocation(store)}, redis: ${describeRedis(redisUrl)}${threads})\n`);

  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void (async () => {
      await gateway.close();
      await controlPlane.close();
      process.exit(0);
    })();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  await new Promise<never>(() => {}); // runs until a signal
}

/** The Redis address without its password. */
function describeRedis(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparsable URL)';
  }
}
