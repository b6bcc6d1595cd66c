// `svc status <instance>`: a local instance is running or stopped (pid, port, storage,
// uptime, whether /readyz answers); a cloud instance is probed at <gateway_url>/readyz.
// Reporting is not failing: the exit code is 0 whatever the status, non-zero only when the
// status cannot be determined (no svc.toml, unknown instance, bad settings).
import type { Command } from 'commander';
import { action } from './errors.js';
import { resolveCloudSettings, type CloudFlags } from './cloud.js';
import { httpRequest, localBaseUrl, Unreachable } from './http.js';
import { formatDuration, inspect, statePaths } from './instance-state.js';
import { checkInstanceName, findInstance, loadProject, type LocalInstance, type Project, type EnterpriseInstance } from './project.js';

interface StatusOptions {
  json?: boolean;
}

const probeTimeoutMs = 2_000;

export function registerStatus(program: Command): void {
  program
    .command('status')
    .description('report whether an instance is running: pid, port, storage mode and uptime (local), or whether the gateway answers (cloud)')
    .argument('<instance>', 'a [local.<instance>] or [enterprise.<instance>] table of svc.toml')
    .option('--json', 'print one JSON object (fields in docs/cli.md)')
    .action(action('status', async (name: string, options: StatusOptions) => {
      const project = loadProject();
      const instance = findInstance(project, checkInstanceName(name));
      const report = instance.kind === 'local' ? await localStatus(instance) : await cloudStatus(project, instance);
      process.stdout.write(options.json === true ? `${JSON.stringify(report, null, 2)}\n` : render(report));
    }));
}

type Report = Record<string, string | number | boolean | null>;

async function localStatus(instance: LocalInstance): Promise<Report> {
  const live = inspect(instance);
  const paths = statePaths(instance);
  if (live.status === 'running') {
    const state = live.state;
    const url = state?.url ?? localBaseUrl(instance.host, instance.port);
    const startedAt = state?.started_at ?? null;
    const uptime = startedAt === null ? null : Math.max(0, Math.floor((Date.now() - Date.parse(startedAt)) / 1000));
    return {
      instance: instance.name,
      kind: 'local',
      status: 'running',
      pid: live.pid,
      host: state?.host ?? instance.host,
      port: state?.port ?? instance.port,
      url,
      storage: state?.storage ?? instance.storage,
      data_dir: state === null ? null : state.data_dir,
      started_at: startedAt,
      uptime_seconds: uptime,
      ready: await answersReady(`${url}/readyz`),
      log: paths.log,
      note: null,
    };
  }
  const url = localBaseUrl(instance.host, instance.port);
  const foreign = await answersAtAll(`${url}/readyz`);
  const notes: string[] = [];
  if (live.stalePid !== null) notes.push(`stale pid file for pid ${live.stalePid} (\`svc stop ${instance.name}\` removes it)`);
  if (foreign) notes.push(`something not started by \`svc start\` answers on ${url}`);
  return {
    instance: instance.name,
    kind: 'local',
    status: 'stopped',
    pid: null,
    host: instance.host,
    port: instance.port,
    url,
    storage: instance.storage,
    data_dir: instance.storage === 'disk' ? paths.data : null,
    started_at: null,
    uptime_seconds: null,
    ready: false,
    log: paths.log,
    note: notes.length === 0 ? null : notes.join('; '),
  };
}

async function cloudStatus(project: Project, instance: EnterpriseInstance): Promise<Report> {
  const flags: CloudFlags = {};
  const settings = resolveCloudSettings(project, instance, flags);
  const url = `${settings.gatewayUrl}/readyz`;
  let status: string;
  let httpStatus: number | null = null;
  let note: string | null = null;
  try {
    httpStatus = (await httpRequest(url, { timeoutMs: probeTimeoutMs })).status;
    status = httpStatus === 200 ? 'ready' : 'not_ready';
  } catch (err) {
    if (!(err instanceof Unreachable)) throw err;
    status = 'unreachable';
    note = `${err.reason}; check gateway_url and the network, or run \`svc sync ${instance.name}\``;
  }
  return {
    instance: instance.name,
    kind: 'enterprise',
    status,
    gateway_url: settings.gatewayUrl,
    database_id: settings.databaseId,
    http_status: httpStatus,
    note,
  };
}

function render(report: Report): string {
  const lines = [`${String(report.instance)}: ${String(report.status)}`];
  const skip = new Set(['instance', 'status']);
  for (const [key, value] of Object.entries(report)) {
    if (skip.has(key) || value === null) continue;
    const shown = key === 'uptime_seconds' && typeof value === 'number' ? formatDuration(value) : typeof value === 'boolean' ? (value ? 'yes' : 'no') : String(value);
    const label = key === 'uptime_seconds' ? 'uptime' : key.replace(/_/g, ' ');
    lines.push(`  ${label.padEnd(12)} ${shown}`);
  }
  return `${lines.join('\n')}\n`;
}

async function answersReady(url: string): Promise<boolean> {
  try {
    return (await httpRequest(url, { timeoutMs: probeTimeoutMs })).status === 200;
  } catch {
    return false;
  }
}

async function answersAtAll(url: string): Promise<boolean> {
  try {
    await httpRequest(url, { timeoutMs: 500 });
    return true;
  } catch {
    return false;
  }
}
