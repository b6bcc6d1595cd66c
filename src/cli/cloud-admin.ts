// `svc cloud ...`: the managed cloud's control plane.
//   svc cloud serve      runs the admin API and the provisioner (database servers as
//                        child processes of this host), with the store it is given;
//   svc cloud workspace | database | key | plan ...   call that admin API.
//
// The admin token comes only from the environment (SVC_CLOUD_ADMIN_TOKEN), never from a
// flag (it would show in `ps` and shell history) nor from svc.toml (a file that gets
// committed). The admin API's address: --admin-url, else SVC_CLOUD_ADMIN_URL, else
// http://127.0.0.1:7070. Answers are printed as JSON on stdout.
import { InvalidArgumentError, Option, type Command } from 'commander';
import { action, CliError } from './errors.js';
import { httpRequest, Unreachable, type HttpResponse } from './http.js';
import { integerOption } from './options.js';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ProvisionerLock } from '../cloud/sql-driver.js';
import { monotonicMs } from '../clock.js';

export const adminUrlEnv = 'SVC_CLOUD_ADMIN_URL';
export const defaultAdminPort = 7070;
export const defaultAdminUrl = `http://127.0.0.1:${defaultAdminPort}`;
/** Kept in step with src/cloud/admin-api.ts (not imported: this file loads fast). */
const adminTokenEnv = 'SVC_CLOUD_ADMIN_TOKEN';
/** The same variable and default as `svc gateway --store`, so both find one store. */
const storeEnv = 'SVC_CONTROL_PLANE_STORE';
const defaultStore = 'svc-cloud.sqlite';
const planChoices = ['Idea', 'Startup', 'Growth'];
const requestTimeoutMs = 30_000;
const waitPollMs = 500;
/** Waits between attempts to take a lost control-plane lock again: doubling from the first to the last. */
const lockRetakeDelayFirstMs = 250;
const lockRetakeDelayMaxMs = 5_000;

interface AdminFlags {
  adminUrl?: string;
}

function positiveNumberOption(name: string): (value: string) => number {
  return (value: string) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a positive number.`);
    return n;
  };
}

/** Calls the admin API; returns the parsed JSON answer (null for 204) or throws a CliError. */
async function callAdmin(flags: AdminFlags, method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<unknown> {
  const token = process.env[adminTokenEnv];
  if (token === undefined || token === '') throw new CliError(`set ${adminTokenEnv} to the control plane's admin token (it is never read from flags or svc.toml)`);
  const base = (flags.adminUrl ?? process.env[adminUrlEnv] ?? defaultAdminUrl).replace(/\/+$/, '');
  const url = `${base}/admin/v1/${path}`;
  let response: HttpResponse;
  try {
    response = await httpRequest(url, {
      method,
      headers: { authorization: `Bearer ${token}`, accept: 'application/json', ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      timeoutMs: requestTimeoutMs,
    });
  } catch (err) {
    if (err instanceof Unreachable) throw new CliError(`cannot reach the control plane at ${base} (${err.reason}): is \`svc cloud serve\` running? (--admin-url or ${adminUrlEnv})`);
    throw err;
  }
  if (response.status === 204) return null;
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(response.text);
  } catch {
    // Reported below with the status.
  }
  if (response.status >= 400) {
    const error = parsed as { error?: unknown; msg?: unknown } | null;
    const detail = typeof error?.error === 'string' ? `${error.error}: ${String(error.msg)}` : response.text.slice(0, 200);
    throw new CliError(`${method} ${url} answered ${response.status} (${detail})`);
  }
  return parsed;
}

function print(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

function adminUrlOption(): Option {
  return new Option('--admin-url <url>', `the control plane's admin API (default ${adminUrlEnv} or ${defaultAdminUrl})`);
}

export function registerCloudAdmin(program: Command): void {
  const cloud = program.command('cloud').description(`the managed cloud's control plane: workspaces, databases, API keys (admin token in ${adminTokenEnv})`);

  cloud.command('serve')
    .description('run the control plane: the admin API and the provisioner of database servers (child processes of this host)')
    .option('--store <location>', `control-plane store: SQLite file (or sqlite:<path>), or postgres://... shared with the gateways (default ${storeEnv}, else ${defaultStore}; a password belongs in ${storeEnv} or PGPASSWORD, not in a flag)`)
    .requiredOption('--storage <root>', 'where databases keep their data: s3://bucket/prefix (AWS_* credentials) or a local directory')
    .option('--s3-endpoint-url <url>', 'S3-compatible endpoint (MinIO, s3rver, ...); default AWS')
    .option('--s3-region <region>', 'S3 region')
    .option('--host <host>', 'address of the admin API', '127.0.0.1')
    .option('--port <port>', 'port of the admin API (0 = any free port)', integerOption('port', 0, 65535), defaultAdminPort)
    .option('--gateway-url <url>', 'the gateway\'s public base URL, recorded as each database\'s endpoint', 'http://127.0.0.1:8080')
    .option('--run-dir <dir>', 'PID files of the running database servers (to stop those a killed control plane left behind)', 'svc-cloud-run')
    .option('--threads-per-server <n>', 'reader threads of each database server', integerOption('threads-per-server', 1, 64), 1)
    .action(action('cloud serve', async (options: ServeFlags) => {
      await serveControlPlane(options);
    }));

  const workspace = cloud.command('workspace').description('workspaces: a name and a monthly plan shared by their databases');
  workspace.command('create').description('create a workspace')
    .requiredOption('--name <name>', 'workspace name')
    .addOption(new Option('--plan <plan>', 'monthly plan').choices(planChoices).makeOptionMandatory())
    .addOption(adminUrlOption())
    .action(action('cloud workspace create', async (o: AdminFlags & { name: string; plan: string }) => {
      print(await callAdmin(o, 'POST', 'workspaces', { name: o.name, plan: o.plan }));
    }));
  workspace.command('list').description('list workspaces').addOption(adminUrlOption())
    .action(action('cloud workspace list', async (o: AdminFlags) => print(await callAdmin(o, 'GET', 'workspaces'))));
  workspace.command('get').description('show a workspace').argument('<id>').addOption(adminUrlOption())
    .action(action('cloud workspace get', async (id: string, o: AdminFlags) => print(await callAdmin(o, 'GET', `workspaces/${encodeURIComponent(id)}`))));
  workspace.command('update').description('rename a workspace or change its plan').argument('<id>')
    .option('--name <name>', 'new name')
    .addOption(new Option('--plan <plan>', 'new monthly plan (its rate limit and allowance apply at once)').choices(planChoices))
    .addOption(adminUrlOption())
    .action(action('cloud workspace update', async (id: string, o: AdminFlags & { name?: string; plan?: string }) => {
      if (o.name === undefined && o.plan === undefined) throw new CliError('nothing to change: give --name and/or --plan');
      print(await callAdmin(o, 'PATCH', `workspaces/${encodeURIComponent(id)}`, { ...(o.name !== undefined ? { name: o.name } : {}), ...(o.plan !== undefined ? { plan: o.plan } : {}) }));
    }));
  workspace.command('delete').description('delete a workspace that has no databases').argument('<id>').addOption(adminUrlOption())
    .action(action('cloud workspace delete', async (id: string, o: AdminFlags) => {
      await callAdmin(o, 'DELETE', `workspaces/${encodeURIComponent(id)}`);
    }));
  workspace.command('usage').description('reads and writes of a month (default this month, UTC), and the plan\'s allowances').argument('<id>')
    .option('--month <YYYY-MM>', 'another month')
    .addOption(adminUrlOption())
    .action(action('cloud workspace usage', async (id: string, o: AdminFlags & { month?: string }) => {
      const month = o.month === undefined ? '' : `?month=${encodeURIComponent(o.month)}`;
      print(await callAdmin(o, 'GET', `workspaces/${encodeURIComponent(id)}/usage${month}`));
    }));

  const plan = cloud.command('plan').description('monthly allowances of the plans');
  plan.command('list').description('allowances of every plan').addOption(adminUrlOption())
    .action(action('cloud plan list', async (o: AdminFlags) => print(await callAdmin(o, 'GET', 'plans'))));
  plan.command('set').description('set a plan\'s monthly allowances').argument('<plan>')
    .requiredOption('--reads-per-month <n>', 'read requests per month', integerOption('reads-per-month', 0, Number.MAX_SAFE_INTEGER))
    .requiredOption('--writes-per-month <n>', 'write requests per month', integerOption('writes-per-month', 0, Number.MAX_SAFE_INTEGER))
    .addOption(adminUrlOption())
    .action(action('cloud plan set', async (name: string, o: AdminFlags & { readsPerMonth: number; writesPerMonth: number }) => {
      print(await callAdmin(o, 'PUT', `plans/${encodeURIComponent(name)}`, { reads_per_month: o.readsPerMonth, writes_per_month: o.writesPerMonth }));
    }));

  const database = cloud.command('database').description('databases: a writer and readers on their own storage prefix');
  database.command('create').description('create a database (status Provisioning until its servers are ready, then Active)')
    .requiredOption('--workspace <id>', 'workspace ID')
    .requiredOption('--name <name>', 'database name')
    .option('--readers <n>', 'reader servers', integerOption('readers', 0, 16), 1)
    .option('--rate-per-second <n>', 'override the plan\'s requests per second (with --burst)', positiveNumberOption('rate-per-second'))
    .option('--burst <n>', 'override the plan\'s burst (with --rate-per-second)', positiveNumberOption('burst'))
    .option('--wait', 'wait until the database is Active (exit 1 if it Failed)')
    .option('--wait-timeout-ms <ms>', 'with --wait: give up after this long', integerOption('wait-timeout-ms', 1, 3_600_000), 300_000)
    .addOption(adminUrlOption())
    .action(action('cloud database create', async (o: AdminFlags & { workspace: string; name: string; readers: number; ratePerSecond?: number; burst?: number; wait?: boolean; waitTimeoutMs: number }) => {
      if ((o.ratePerSecond === undefined) !== (o.burst === undefined)) throw new CliError('give --rate-per-second and --burst together');
      const body = {
        workspace_id: o.workspace, name: o.name, readers: o.readers,
        ...(o.ratePerSecond !== undefined ? { rate_limit: { per_second: o.ratePerSecond, burst: o.burst } } : {}),
      };
      let created = await callAdmin(o, 'POST', 'databases', body) as { id: string; status: string; status_detail?: string | null };
      if (o.wait === true) created = await waitForStatus(o, created.id, o.waitTimeoutMs);
      print(created);
      if (created.status === 'Failed') throw new CliError(`database ${created.id} failed to provision: ${created.status_detail ?? 'no reason given'}`);
    }));
  database.command('provision').description('start a Failed database\'s servers again on its data (status Provisioning, then Active or Failed)').argument('<id>')
    .option('--wait', 'wait until the database is Active (exit 1 if it Failed)')
    .option('--wait-timeout-ms <ms>', 'with --wait: give up after this long', integerOption('wait-timeout-ms', 1, 3_600_000), 300_000)
    .addOption(adminUrlOption())
    .action(action('cloud database provision', async (id: string, o: AdminFlags & { wait?: boolean; waitTimeoutMs: number }) => {
      let database = await callAdmin(o, 'POST', `databases/${encodeURIComponent(id)}/provision`) as { id: string; status: string; status_detail?: string | null };
      if (o.wait === true) database = await waitForStatus(o, database.id, o.waitTimeoutMs);
      print(database);
      if (database.status === 'Failed') throw new CliError(`database ${database.id} failed to provision: ${database.status_detail ?? 'no reason given'}`);
    }));
  database.command('list').description('list databases').option('--workspace <id>', 'only this workspace\'s').addOption(adminUrlOption())
    .action(action('cloud database list', async (o: AdminFlags & { workspace?: string }) => {
      print(await callAdmin(o, 'GET', o.workspace === undefined ? 'databases' : `databases?workspace_id=${encodeURIComponent(o.workspace)}`));
    }));
  database.command('get').description('show a database: status, endpoint, servers').argument('<id>').addOption(adminUrlOption())
    .action(action('cloud database get', async (id: string, o: AdminFlags) => print(await callAdmin(o, 'GET', `databases/${encodeURIComponent(id)}`))));
  database.command('delete').description('delete a database: revokes its keys and stops its servers (its stored data is kept)').argument('<id>').addOption(adminUrlOption())
    .action(action('cloud database delete', async (id: string, o: AdminFlags) => {
      await callAdmin(o, 'DELETE', `databases/${encodeURIComponent(id)}`);
    }));
  database.command('rate-limit').description('override the plan\'s rate limit of one database, or go back to the plan\'s').argument('<id>')
    .option('--per-second <n>', 'requests per second', positiveNumberOption('per-second'))
    .option('--burst <n>', 'burst capacity', positiveNumberOption('burst'))
    .option('--plan', 'remove the override: the plan\'s bucket applies')
    .addOption(adminUrlOption())
    .action(action('cloud database rate-limit', async (id: string, o: AdminFlags & { perSecond?: number; burst?: number; plan?: boolean }) => {
      const override = o.plan === true ? null : { per_second: o.perSecond, burst: o.burst };
      if (o.plan === true ? (o.perSecond !== undefined || o.burst !== undefined) : (o.perSecond === undefined || o.burst === undefined)) {
        throw new CliError('give --per-second and --burst, or --plan alone');
      }
      print(await callAdmin(o, 'PATCH', `databases/${encodeURIComponent(id)}`, { rate_limit: override }));
    }));

  const key = cloud.command('key').description('API keys of a database (the secret is shown once, at creation)');
  key.command('create').description('create an API key; prints its secret once')
    .requiredOption('--database <id>', 'database ID')
    .option('--name <name>', 'a name to recognise the key by', 'default')
    .addOption(new Option('--permission <permission>', 'what the key may run').choices(['read', 'read_write']).default('read'))
    .addOption(adminUrlOption())
    .action(action('cloud key create', async (o: AdminFlags & { database: string; name: string; permission: string }) => {
      print(await callAdmin(o, 'POST', `databases/${encodeURIComponent(o.database)}/keys`, { name: o.name, permission: o.permission }));
      process.stderr.write('svc cloud key create: the secret is shown this once; keep it in a secrets manager or an environment variable, never in svc.toml\n');
    }));
  key.command('list').description('list a database\'s keys (never their secrets)').requiredOption('--database <id>', 'database ID').addOption(adminUrlOption())
    .action(action('cloud key list', async (o: AdminFlags & { database: string }) => print(await callAdmin(o, 'GET', `databases/${encodeURIComponent(o.database)}/keys`))));
  key.command('revoke').description('revoke a key: requests with it are refused from the next gateway cache refresh on').argument('<key-id>')
    .requiredOption('--database <id>', 'database ID').addOption(adminUrlOption())
    .action(action('cloud key revoke', async (keyId: string, o: AdminFlags & { database: string }) => {
      print(await callAdmin(o, 'DELETE', `databases/${encodeURIComponent(o.database)}/keys/${encodeURIComponent(keyId)}`));
    }));
}

async function waitForStatus(flags: AdminFlags, id: string, timeoutMs: number): Promise<{ id: string; status: string; status_detail?: string | null }> {
  const until = monotonicMs() + timeoutMs;
  for (;;) {
    const database = await callAdmin(flags, 'GET', `databases/${encodeURIComponent(id)}`) as { id: string; status: string; status_detail?: string | null };
    if (database.status !== 'Provisioning') return database;
    if (monotonicMs() > until) throw new CliError(`database ${id} is still Provisioning after ${timeoutMs} ms (see \`svc cloud database get ${id}\`)`);
    await new Promise((r) => setTimeout(r, waitPollMs));
  }
}

// ---------------------------------------------------------------- svc cloud serve

interface ServeFlags {
  store?: string;
  storage: string;
  s3EndpointUrl?: string;
  s3Region?: string;
  host: string;
  port: number;
  gatewayUrl: string;
  runDir: string;
  threadsPerServer: number;
}

async function serveControlPlane(flags: ServeFlags): Promise<void> {
  // Loaded here: the store drivers and the provisioner are not needed by the client commands.
  const [{ openControlPlane, describeStoreLocation }, { Provisioner, ProcessRuntime }, { startAdminApi, adminTokenProblem }, { createCloudLogger }] = await Promise.all([
    import('../cloud/open.js'), import('../cloud/provision.js'), import('../cloud/admin-api.js'), import('../cloud/log.js'),
  ]);
  const token = process.env[adminTokenEnv];
  const problem = adminTokenProblem(token);
  if (problem !== null) throw new CliError(problem);
  let gatewayUrl: string;
  try {
    gatewayUrl = new URL(flags.gatewayUrl).toString().replace(/\/+$/, '');
  } catch {
    throw new CliError(`--gateway-url ${JSON.stringify(flags.gatewayUrl)} is not a URL`);
  }
  let storage: import('../cloud/provision.js').StorageRoot;
  if (flags.storage.startsWith('s3://')) {
    const match = /^s3:\/\/([^/]+)\/?(.*)$/.exec(flags.storage);
    if (match === null) throw new CliError(`--storage ${JSON.stringify(flags.storage)} is not s3://bucket/prefix`);
    storage = {
      kind: 's3', bucket: match[1]!, prefix: match[2]!.replace(/^\/+|\/+$/g, ''),
      ...(flags.s3EndpointUrl !== undefined ? { endpointUrl: flags.s3EndpointUrl } : {}),
      ...(flags.s3Region !== undefined ? { region: flags.s3Region } : {}),
    };
  } else {
    if (flags.s3EndpointUrl !== undefined || flags.s3Region !== undefined) throw new CliError('--s3-endpoint-url and --s3-region need --storage s3://...');
    const { resolve } = await import('node:path');
    storage = { kind: 'directory', path: resolve(flags.storage) };
  }

  const location = flags.store ?? process.env[storeEnv] ?? defaultStore;
  const logger = createCloudLogger('svc-cloud');
  let store: Awaited<ReturnType<typeof openControlPlane>>;
  try {
    store = await openControlPlane(location);
  } catch (err) {
    throw new CliError(`cannot open the control-plane store ${describeStoreLocation(location)}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const firstLock = await store.tryProvisionerLock();
  if (firstLock === null) {
    await store.close();
    throw new CliError(`another \`svc cloud serve\` runs on the store ${describeStoreLocation(location)}: one control plane per store (it starts the databases' servers)`);
  }
  let lock: ProvisionerLock = firstLock;

  const { resolve: resolvePath } = await import('node:path');
  const runtime = new ProcessRuntime({ threadsPerServer: flags.threadsPerServer, pidDir: resolvePath(flags.runDir), logger });
  // Servers of a previous run killed without stopping them hold the storages' writer locks.
  const reaped = await runtime.reapOrphans();
  if (reaped > 0) logger.warn({ reaped }, 'stopped servers left running by a previous control plane');
  const provisioner = new Provisioner(store, runtime, { storage, logger });
  // Databases that were running before a restart get their servers back; they are marked
  // Provisioning before the API answers, so no client reads the old run's URLs as Active.
  let restoring: Awaited<ReturnType<typeof provisioner.restoreAll>>;
  try {
    restoring = await provisioner.restoreAll();
  } catch (err) {
    await lock.release();
    await store.close();
    throw new CliError(`cannot restore the databases: ${err instanceof Error ? err.message : String(err)}`);
  }
  void restoring.restored.catch((err: unknown) => logger.error({ reason: err instanceof Error ? err.message : String(err) }, 'restoring databases failed'));
  let api: Awaited<ReturnType<typeof startAdminApi>>;
  try {
    api = await startAdminApi({ store, provisioner, adminToken: token!, gatewayUrl, host: flags.host, port: flags.port, logger });
  } catch (err) {
    await provisioner.close();
    await lock.release();
    await store.close();
    throw new CliError(`cannot start the admin API: ${err instanceof Error ? err.message : String(err)}`);
  }
  logger.info({ store: describeStoreLocation(location), storage: storage.kind === 's3' ? `s3://${storage.bucket}/${storage.prefix}` : storage.path }, 'control plane started');
  process.stdout.write(`svc cloud listening on ${api.url} (store: ${describeStoreLocation(location)})\n`);


  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (why: NodeJS.Signals | 'lock lost'): void => {
      if (stopping) return;
      stopping = true;
      if (why === 'lock lost') process.exitCode = 1;
      logger.info({ reason: why }, 'stopping: database servers, admin API, store');
      void (async () => {
        await api.close();
        await provisioner.close();
        await lock.release();
        await store.close();
        logger.flush();
        resolve();
      })();
    };
    // The lock lost while held (PostgreSQL: its session ended): take it again at once, and
    // go on trying while the store does not answer (the servers serve without it, and no
    // other control plane can take the lock meanwhile either). Only a lock held by another
    // process makes this one stop, servers and all, rather than run a second set of servers
    // for the same databases.
    const watch = (held: ProvisionerLock): void => {
      void held.lost.then(async (why) => {
        if (stopping) return;
        logger.error({ reason: why }, 'lost the control-plane lock: taking it again');
        let delayMs = lockRetakeDelayFirstMs;
        for (let attempt = 1; !stopping; attempt++) {
          try {
            const again = await store.tryProvisionerLock();
            if (again !== null) {
              if (stopping) { await again.release(); return; }
              lock = again;
              logger.warn({ attempt }, 'took the control-plane lock again');
              watch(again);
              return;
            }
            // Held: by a session of this process the store still keeps (ended by this
            // call; tried again at once), or by another control plane.
            if (await store.provisionerLockHolder() === 'another process') {
              logger.error('another `svc cloud serve` holds the control-plane lock: stopping this one and its servers');
              stop('lock lost');
              return;
            }
          } catch (err) {
            // Logged at attempts 1, 2, 4, 8...: an outage of minutes is a few lines.
            if ((attempt & (attempt - 1)) === 0) {
              logger.warn({ attempt, reason: err instanceof Error ? err.message : String(err) }, 'the control-plane store does not answer: the lock is taken again once it does');
            }
          }
          await sleep(delayMs);
          delayMs = Math.min(delayMs * 2, lockRetakeDelayMaxMs);
        }
      });
    };
    watch(lock);
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
}
