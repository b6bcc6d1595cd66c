// `svc sync <instance>`: fetches GET <gateway_url>/v2/metadata from a cloud gateway and
// writes the settings it returns into [enterprise.<instance>] of svc.toml, keeping the
// rest of the file unchanged. The metadata document (docs/cli.md) is a JSON object with
// any of gateway_url, query_auth_header, query_auth_scheme, query_auth_env, database_id
// (strings; null or absent = leave as is); other members are ignored.
//
// The request carries the API key when one is available (the variable named by
// query_auth_env, shell then .env), so a gateway may require it; without a key the request
// is sent unauthenticated.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { Option, type Command } from 'commander';
import { action, CliError } from './errors.js';
import { checkSetting, cloudHeaders, cloudHint, findApiKey, resolveCloudSettings, settingKeys, type CloudFlags, type SettingKey } from './cloud.js';
import { httpRequest, Unreachable } from './http.js';
import { checkInstanceName, loadProject, parseProject, type EnterpriseInstance } from './project.js';
import { integerOption } from './options.js';
import { setTableKeys } from './toml-edit.js';

interface SyncOptions extends CloudFlags {
  dryRun?: boolean;
  timeoutMs: number;
}

export function registerSync(program: Command): void {
  program
    .command('sync')
    .description('refresh the gateway and authentication settings of a cloud instance from <gateway_url>/v2/metadata into svc.toml')
    .argument('<instance>', 'an [enterprise.<instance>] table of svc.toml (created when --gateway-url is given and it does not exist)')
    .option('--gateway-url <url>', 'gateway to ask (default: gateway_url of the instance)')
    .option('--auth-header <name>', 'override query_auth_header for this request')
    .addOption(new Option('--auth-scheme <scheme>', 'override query_auth_scheme for this request').choices(['bearer', 'raw']))
    .option('--auth-env <variable>', 'override query_auth_env for this request')
    .option('--dry-run', 'print what would change without writing svc.toml')
    .option('--timeout-ms <ms>', 'give up after this long', integerOption('timeout-ms', 1, 600_000), 10_000)
    .action(action('sync', async (name: string, options: SyncOptions) => {
      await sync(name, options);
    }));
}

async function sync(name: string, options: SyncOptions): Promise<void> {
  checkInstanceName(name);
  const project = loadProject();
  if (project.local.has(name)) throw new CliError(`"${name}" is a local instance ([local.${name}]); \`svc sync\` refreshes cloud instances ([enterprise.${name}])`);
  let table = project.enterprise.get(name);
  const creating = table === undefined;
  if (table === undefined) {
    if (options.gatewayUrl === undefined) {
      throw new CliError(`no [enterprise.${name}] table in ${project.configPath}: add one with gateway_url = "<gateway URL>", or pass --gateway-url to create it`);
    }
    table = emptyTable(name);
  }
  const settings = resolveCloudSettings(project, table, { ...options, databaseId: undefined });
  const apiKey = findApiKey(project, settings);
  const url = `${settings.gatewayUrl}/v2/metadata`;

  let response;
  try {
    response = await httpRequest(url, { headers: { accept: 'application/json', ...cloudHeaders(settings, apiKey) }, timeoutMs: options.timeoutMs });
  } catch (err) {
    if (err instanceof Unreachable) throw new CliError(`cannot reach the gateway of cloud instance "${name}" at ${url} (${err.reason}).\nHint: ${cloudHint(name, project.configPath, true)}`);
    throw err;
  }
  if (response.status < 200 || response.status > 299) {
    const needsKey = apiKey === null && (response.status === 400 || response.status === 401 || response.status === 403)
      ? `\nNo API key was sent: set ${settings.authEnv} in the shell or in ${project.root}/.env.` : '';
    throw new CliError(`Sync failed with HTTP ${response.status}: ${response.text.trim() || '(no body)'}${needsKey}`, { bare: true });
  }

  const updates = parseMetadata(response.text, url);
  if (updates.length === 0) throw new CliError(`${url} returned none of ${settingKeys.join(', ')}; svc.toml is unchanged`);
  // A table made by this sync keeps the gateway it was made with, unless the metadata names another.
  if (creating && !updates.some(([key]) => key === 'gateway_url')) updates.unshift(['gateway_url', settings.gatewayUrl]);

  const current = currentValues(table);
  const changes = updates.map(([key, value]) => {
    const before = current[key];
    return { key, value, note: before === null ? 'added' : before === value ? 'unchanged' : `was ${JSON.stringify(before)}` };
  });
  const text = readFileSync(project.configPath, 'utf8');
  // Values that did not change keep their lines (and comments) as they are.
  const changed = updates.filter(([key, value]) => current[key] !== value);
  const edited = changed.length === 0 ? text : setTableKeys(text, ['enterprise', name], changed);
  verify(project.root, project.configPath, edited, name, updates);

  const verb = options.dryRun === true ? 'Would update' : 'Updated';
  process.stdout.write(`${verb} [enterprise.${name}] in ${project.configPath} from ${url}:\n`);
  for (const change of changes) process.stdout.write(`  ${change.key} = ${JSON.stringify(change.value)} (${change.note})\n`);
  if (options.dryRun === true || edited === text) return;
  const tmp = `${project.configPath}.${process.pid}.tmp`;
  writeFileSync(tmp, edited);
  renameSync(tmp, project.configPath);
}

function emptyTable(name: string): EnterpriseInstance {
  return { kind: 'enterprise', name, gatewayUrl: null, queryAuthHeader: null, queryAuthScheme: null, queryAuthEnv: null, databaseId: null };
}

function currentValues(table: EnterpriseInstance): Record<SettingKey, string | null> {
  return {
    gateway_url: table.gatewayUrl,
    query_auth_header: table.queryAuthHeader,
    query_auth_scheme: table.queryAuthScheme,
    query_auth_env: table.queryAuthEnv,
    database_id: table.databaseId,
  };
}

/** The recognised settings of the metadata document, validated, in settingKeys order. */
function parseMetadata(text: string, url: string): Array<readonly [SettingKey, string]> {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new CliError(`${url} did not return JSON: ${text.slice(0, 200)}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new CliError(`${url} must return a JSON object`);
  const fields = doc as Record<string, unknown>;
  const out: Array<readonly [SettingKey, string]> = [];
  for (const key of settingKeys) {
    const value = fields[key];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string' || value === '') throw new CliError(`${url}: ${key} must be a non-empty string, got ${JSON.stringify(value)}`);
    const checked = key === 'gateway_url' ? value.replace(/\/+$/, '') : value;
    checkSetting(key, checked, url);
    out.push([key, checked]);
  }
  return out;
}

/** The edited text must parse and hold exactly the new values. */
function verify(root: string, configPath: string, edited: string, name: string, updates: ReadonlyArray<readonly [SettingKey, string]>): void {
  let table: EnterpriseInstance | undefined;
  try {
    table = parseProject(root, configPath, edited).enterprise.get(name);
  } catch (err) {
    throw new CliError(`cannot update ${configPath} automatically (${(err as Error).message}); write [enterprise.${name}] as its own table with one key per line`);
  }
  const values = table === undefined ? null : currentValues(table);
  for (const [key, value] of updates) {
    if (values === null || values[key] !== value) {
      throw new CliError(`cannot update ${configPath} automatically; write [enterprise.${name}] as its own table with one key per line`);
    }
  }
}
