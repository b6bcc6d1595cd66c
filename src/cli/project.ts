// The project configuration (`svc.toml`) and the project-root `.env` file.
//
// The project root is the nearest directory, from the working directory upwards, that
// holds `svc.toml`. Its tables:
//
//   [project]            name, container_runtime ("process" | "docker" | "podman")
//   [local.<name>]       a local instance: host, port, storage, state_dir, readers, query_timeout_ms,
//                        query_memory_mb
//   [enterprise.<name>]  a cloud database: gateway_url, query_auth_header, query_auth_scheme,
//                        query_auth_env, database_id
//
// Validation is strict (an unknown key is an error) so that a typo such as `prot = 7000`
// is reported instead of silently ignored. Cloud keys are validated after the flag /
// environment / .env overrides are merged (see cloud.ts), because `svc sync` may start
// from a table that holds nothing but `gateway_url`.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseEnv } from 'node:util';
import { parse, TomlError, type TomlTableWithoutBigInt, type TomlValueWithoutBigInt } from 'smol-toml';
import { CliError, messageOf } from './errors.js';

export const configFileName = 'svc.toml';
export const defaultHost = '127.0.0.1';
export const defaultPort = 6969;
export const defaultStateDir = '.svc';
export const defaultInstanceName = 'dev';

export type StorageMode = 'memory' | 'disk';
export type ContainerRuntime = 'process' | 'docker' | 'podman';
export const containerRuntimes: readonly ContainerRuntime[] = ['process', 'docker', 'podman'];

export interface LocalInstance {
  readonly kind: 'local';
  readonly name: string;
  readonly host: string;
  readonly port: number;
  readonly storage: StorageMode;
  /** Absolute: pid file, log, state file, and `data/<name>` for disk storage. */
  readonly stateDir: string;
  readonly readers: number | null;
  readonly queryTimeoutMs: number | null;
  readonly queryMemoryMb: number | null;
}

/** The `[enterprise.<name>]` table as written (unvalidated strings; see cloud.ts). */
export interface EnterpriseInstance {
  readonly kind: 'enterprise';
  readonly name: string;
  readonly gatewayUrl: string | null;
  readonly queryAuthHeader: string | null;
  readonly queryAuthScheme: string | null;
  readonly queryAuthEnv: string | null;
  readonly databaseId: string | null;
}

export type Instance = LocalInstance | EnterpriseInstance;

export interface Project {
  /** The directory holding svc.toml. */
  readonly root: string;
  readonly configPath: string;
  readonly name: string | null;
  /** `null` when the key is absent (the default process runtime). */
  readonly containerRuntime: ContainerRuntime | null;
  readonly local: ReadonlyMap<string, LocalInstance>;
  readonly enterprise: ReadonlyMap<string, EnterpriseInstance>;
}

/** Instance names are bare TOML keys and file-name safe. */
export const instanceNamePattern = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;

export function checkInstanceName(name: string): string {
  if (!instanceNamePattern.test(name)) {
    throw new CliError(`invalid instance name ${JSON.stringify(name)}: use letters, digits, '-' and '_' (at most 63, starting with a letter or digit)`);
  }
  return name;
}

/** The nearest directory from `start` upwards holding svc.toml, or null. */
export function findProjectRoot(start: string = process.cwd()): string | null {
  let dir = resolve(start);
  for (;;) {
    if (existsSync(join(dir, configFileName))) return dir;
    const parent = dirname(dir);
    if (parent === dir) return null;
    dir = parent;
  }
}

/** Loads the project around the working directory; throws a CliError when there is none. */
export function loadProject(start: string = process.cwd()): Project {
  const root = findProjectRoot(start);
  if (root === null) {
    throw new CliError(`no ${configFileName} found in ${resolve(start)} or any parent directory: run \`svc init local\` in an empty directory to create a project`);
  }
  return loadProjectAt(root);
}

export function loadProjectAt(root: string): Project {
  const configPath = join(root, configFileName);
  let text: string;
  try {
    text = readFileSync(configPath, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${configPath}: ${messageOf(err)}`);
  }
  return parseProject(root, configPath, text);
}

export function parseProject(root: string, configPath: string, text: string): Project {
  let doc: TomlTableWithoutBigInt;
  try {
    doc = parse(text, { integersAsBigInt: false });
  } catch (err) {
    if (err instanceof TomlError) throw new CliError(`${configPath}:${err.line}:${err.column}: invalid TOML: ${err.message.split('\n')[0]}`);
    throw new CliError(`${configPath}: invalid TOML: ${messageOf(err)}`);
  }
  const where = (table: string): string => `${configPath}: [${table}]`;
  checkKeys(doc, ['project', 'local', 'enterprise'], `${configPath}: top level`);

  let name: string | null = null;
  let containerRuntime: ContainerRuntime | null = null;
  const projectTable = optionalTable(doc.project, `${configPath}: project`);
  if (projectTable !== null) {
    checkKeys(projectTable, ['name', 'container_runtime'], where('project'));
    name = optionalString(projectTable.name, 'name', where('project'));
    const runtime = optionalString(projectTable.container_runtime, 'container_runtime', where('project'));
    if (runtime !== null) {
      if (!(containerRuntimes as readonly string[]).includes(runtime)) {
        throw new CliError(`${where('project')} container_runtime must be one of ${containerRuntimes.map((r) => `"${r}"`).join(', ')}, got ${JSON.stringify(runtime)}`);
      }
      containerRuntime = runtime as ContainerRuntime;
    }
  }

  const local = new Map<string, LocalInstance>();
  const localTables = optionalTable(doc.local, `${configPath}: local`) ?? {};
  for (const [instance, value] of Object.entries(localTables)) {
    const at = where(`local.${instance}`);
    if (!instanceNamePattern.test(instance)) throw new CliError(`${at}: invalid instance name (use letters, digits, '-' and '_')`);
    const table = optionalTable(value, at);
    if (table === null) throw new CliError(`${at} must be a table`);
    checkKeys(table, ['host', 'port', 'storage', 'state_dir', 'readers', 'query_timeout_ms', 'query_memory_mb'], at);
    const storage = optionalString(table.storage, 'storage', at) ?? 'memory';
    if (storage !== 'memory' && storage !== 'disk') throw new CliError(`${at} storage must be "memory" or "disk", got ${JSON.stringify(storage)}`);
    local.set(instance, {
      kind: 'local',
      name: instance,
      host: nonEmpty(optionalString(table.host, 'host', at), 'host', at) ?? defaultHost,
      port: optionalInteger(table.port, 'port', at, 1, 65535) ?? defaultPort,
      storage,
      stateDir: resolve(root, nonEmpty(optionalString(table.state_dir, 'state_dir', at), 'state_dir', at) ?? defaultStateDir),
      readers: optionalInteger(table.readers, 'readers', at, 1, 256),
      queryTimeoutMs: optionalInteger(table.query_timeout_ms, 'query_timeout_ms', at, 1, 86_400_000),
      queryMemoryMb: optionalInteger(table.query_memory_mb, 'query_memory_mb', at, 1, 65_536),
    });
  }

  const enterprise = new Map<string, EnterpriseInstance>();
  const enterpriseTables = optionalTable(doc.enterprise, `${configPath}: enterprise`) ?? {};
  for (const [instance, value] of Object.entries(enterpriseTables)) {
    const at = where(`enterprise.${instance}`);
    if (!instanceNamePattern.test(instance)) throw new CliError(`${at}: invalid instance name (use letters, digits, '-' and '_')`);
    const table = optionalTable(value, at);
    if (table === null) throw new CliError(`${at} must be a table`);
    checkKeys(table, ['gateway_url', 'query_auth_header', 'query_auth_scheme', 'query_auth_env', 'database_id'], at);
    if (local.has(instance)) throw new CliError(`${configPath}: instance "${instance}" is defined both as [local.${instance}] and [enterprise.${instance}]; rename one`);
    enterprise.set(instance, {
      kind: 'enterprise',
      name: instance,
      gatewayUrl: optionalString(table.gateway_url, 'gateway_url', at),
      queryAuthHeader: optionalString(table.query_auth_header, 'query_auth_header', at),
      queryAuthScheme: optionalString(table.query_auth_scheme, 'query_auth_scheme', at),
      queryAuthEnv: optionalString(table.query_auth_env, 'query_auth_env', at),
      databaseId: optionalString(table.database_id, 'database_id', at),
    });
  }

  return { root, configPath, name, containerRuntime, local, enterprise };
}

/** The instance called `name`, local or cloud; a CliError names the configured ones otherwise. */
export function findInstance(project: Project, name: string): Instance {
  const found = project.local.get(name) ?? project.enterprise.get(name);
  if (found !== undefined) return found;
  const names = [...[...project.local.keys()].map((n) => `${n} (local)`), ...[...project.enterprise.keys()].map((n) => `${n} (enterprise)`)];
  const known = names.length === 0 ? 'no instances are configured' : `configured: ${names.join(', ')}`;
  throw new CliError(`unknown instance "${name}" in ${project.configPath} (${known}); add a [local.${name}] or [enterprise.${name}] table`);
}

export function findLocalInstance(project: Project, name: string, command: string): LocalInstance {
  const instance = findInstance(project, name);
  if (instance.kind !== 'local') {
    throw new CliError(`"${name}" is a cloud instance ([enterprise.${name}]); \`svc ${command}\` manages local instances only`);
  }
  return instance;
}

/**
 * The variables of `<root>/.env` (empty when there is none). Parsed with util.parseEnv
 * and never copied into process.env, so the shell environment always wins.
 */
export function readDotenv(root: string): Readonly<Record<string, string>> {
  const path = join(root, '.env');
  if (!existsSync(path)) return {};
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${path}: ${messageOf(err)}`);
  }
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(parseEnv(text))) if (value !== undefined) out[key] = value;
  return out;
}

// ---- validation helpers ----

function isTable(value: TomlValueWithoutBigInt | undefined): value is TomlTableWithoutBigInt {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === null || proto === Object.prototype; // not a TomlDate
}

function optionalTable(value: TomlValueWithoutBigInt | undefined, at: string): TomlTableWithoutBigInt | null {
  if (value === undefined) return null;
  if (!isTable(value)) throw new CliError(`${at} must be a table`);
  return value;
}

function checkKeys(table: TomlTableWithoutBigInt, known: readonly string[], at: string): void {
  for (const key of Object.keys(table)) {
    if (!known.includes(key)) throw new CliError(`${at}: unknown key "${key}" (known keys: ${known.join(', ')})`);
  }
}

function optionalString(value: TomlValueWithoutBigInt | undefined, key: string, at: string): string | null {
  if (value === undefined) return null;
  if (typeof value !== 'string') throw new CliError(`${at} ${key} must be a string`);
  return value;
}

/** An empty host would bind every interface; an empty state_dir is the project root itself. */
function nonEmpty(value: string | null, key: string, at: string): string | null {
  if (value !== null && value.trim() === '') throw new CliError(`${at} ${key} must not be empty (leave it out for the default)`);
  return value;
}

function optionalInteger(value: TomlValueWithoutBigInt | undefined, key: string, at: string, min: number, max: number): number | null {
  if (value === undefined) return null;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new CliError(`${at} ${key} must be an integer from ${min} to ${max}`);
  }
  return value;
}
