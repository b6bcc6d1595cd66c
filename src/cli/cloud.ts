// Cloud targets: the settings of an [enterprise.<instance>] table merged with their
// overrides, and the API key.
//
// Precedence for each setting: command-line flag > environment variable > project-root
// .env > svc.toml > default. The environment variable of a setting is per instance,
// SVC_<INSTANCE>_<KEY> (instance upper-cased, '-' -> '_'), e.g. SVC_PROD_GATEWAY_URL, so
// a variable meant for one database never redirects another database's key elsewhere.
//
// The API key itself is read from the variable named by query_auth_env (default
// SVC_API_KEY): the shell first, then .env. It never comes from svc.toml or a flag
// (a flag would show it in `ps` and shell history).
import { CliError } from './errors.js';
import { databaseIdPattern } from '../protocol/headers.js';
import { readDotenv, type EnterpriseInstance, type Project } from './project.js';

export type AuthScheme = 'bearer' | 'raw';
export type SettingKey = 'gateway_url' | 'query_auth_header' | 'query_auth_scheme' | 'query_auth_env' | 'database_id';
export const settingKeys: readonly SettingKey[] = ['gateway_url', 'query_auth_header', 'query_auth_scheme', 'query_auth_env', 'database_id'];
export type Source = 'flag' | 'environment' | '.env' | 'svc.toml' | 'default';

export const defaultAuthHeader = 'Authorization';
export const defaultAuthScheme: AuthScheme = 'bearer';
export const defaultAuthEnv = 'SVC_API_KEY';

/** Command-line overrides (undefined = not given). */
export interface CloudFlags {
  gatewayUrl?: string;
  authHeader?: string;
  authScheme?: string;
  authEnv?: string;
  databaseId?: string;
}

export interface CloudSettings {
  readonly name: string;
  /** Without trailing slashes. */
  readonly gatewayUrl: string;
  readonly authHeader: string;
  readonly authScheme: AuthScheme;
  readonly authEnv: string;
  readonly databaseId: string | null;
  readonly sources: Readonly<Record<SettingKey, Source>>;
}

export function settingEnvName(instance: string, key: SettingKey): string {
  return `SVC_${instance.toUpperCase().replace(/-/g, '_')}_${key.toUpperCase()}`;
}

const headerNamePattern = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const envNamePattern = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Validates one setting value; returns the normalised value or throws a CliError. */
export function checkSetting(key: SettingKey, value: string, where: string): string {
  switch (key) {
    case 'gateway_url': {
      let url: URL;
      try {
        url = new URL(value);
      } catch {
        throw new CliError(`${where}: gateway_url ${JSON.stringify(value)} is not a URL (expected e.g. https://gateway.example.com)`);
      }
      if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new CliError(`${where}: gateway_url must be an http:// or https:// URL, got ${JSON.stringify(value)}`);
      if (url.search !== '' || url.hash !== '') throw new CliError(`${where}: gateway_url must not carry a query string or fragment, got ${JSON.stringify(value)}`);
      return value.replace(/\/+$/, '');
    }
    case 'query_auth_header':
      if (!headerNamePattern.test(value)) throw new CliError(`${where}: query_auth_header ${JSON.stringify(value)} is not a valid HTTP header name`);
      return value;
    case 'query_auth_scheme':
      if (value !== 'bearer' && value !== 'raw') throw new CliError(`${where}: query_auth_scheme must be "bearer" or "raw", got ${JSON.stringify(value)}`);
      return value;
    case 'query_auth_env':
      if (!envNamePattern.test(value)) throw new CliError(`${where}: query_auth_env ${JSON.stringify(value)} is not a valid environment variable name`);
      return value;
    case 'database_id':
      // Sent as x-svc-tenant-id: a value the gateway refuses (or a header cannot hold) is refused here, before it is written.
      if (!databaseIdPattern.test(value)) throw new CliError(`${where}: database_id must be 1-128 letters, digits, ".", "_" or "-", got ${JSON.stringify(value)}`);
      return value;
  }
}

/**
 * The merged, validated settings. `gateway_url` is required; the error says where it can
 * come from.
 */
export function resolveCloudSettings(project: Project, table: EnterpriseInstance, flags: CloudFlags): CloudSettings {
  const dotenv = readDotenv(project.root);
  const name = table.name;
  const fromToml: Record<SettingKey, string | null> = {
    gateway_url: table.gatewayUrl,
    query_auth_header: table.queryAuthHeader,
    query_auth_scheme: table.queryAuthScheme,
    query_auth_env: table.queryAuthEnv,
    database_id: table.databaseId,
  };
  const fromFlags: Record<SettingKey, string | undefined> = {
    gateway_url: flags.gatewayUrl,
    query_auth_header: flags.authHeader,
    query_auth_scheme: flags.authScheme,
    query_auth_env: flags.authEnv,
    database_id: flags.databaseId,
  };
  const sources = {} as Record<SettingKey, Source>;
  const pick = (key: SettingKey): string | null => {
    const envName = settingEnvName(name, key);
    const candidates: [Source, string | null | undefined, string][] = [
      ['flag', fromFlags[key], `--${flagName(key)}`],
      ['environment', process.env[envName], `environment variable ${envName}`],
      ['.env', dotenv[envName], `${envName} in ${project.root}/.env`],
      ['svc.toml', fromToml[key], `[enterprise.${name}] of ${project.configPath}`],
    ];
    for (const [source, value, where] of candidates) {
      if (value === undefined || value === null || value === '') continue;
      sources[key] = source;
      return checkSetting(key, value, where);
    }
    sources[key] = 'default';
    return null;
  };

  const gatewayUrl = pick('gateway_url');
  const authHeader = pick('query_auth_header') ?? defaultAuthHeader;
  const authScheme = (pick('query_auth_scheme') ?? defaultAuthScheme) as AuthScheme;
  const authEnv = pick('query_auth_env') ?? defaultAuthEnv;
  const databaseId = pick('database_id');
  if (gatewayUrl === null) {
    throw new CliError(
      `gateway_url is missing for cloud instance "${name}": set gateway_url in [enterprise.${name}] of ${project.configPath} ` +
      `(or ${settingEnvName(name, 'gateway_url')}, or --gateway-url)`,
    );
  }
  return { name, gatewayUrl, authHeader, authScheme, authEnv, databaseId, sources };
}

function flagName(key: SettingKey): string {
  switch (key) {
    case 'gateway_url': return 'gateway-url';
    case 'query_auth_header': return 'auth-header';
    case 'query_auth_scheme': return 'auth-scheme';
    case 'query_auth_env': return 'auth-env';
    case 'database_id': return 'database-id';
  }
}

/** The API key from the shell, then `.env`; null when neither has it. */
export function findApiKey(project: Project, settings: CloudSettings): string | null {
  const fromShell = process.env[settings.authEnv];
  const key = fromShell !== undefined && fromShell !== '' ? fromShell : readDotenv(project.root)[settings.authEnv];
  if (key === undefined || key === '') return null;
  if (/[\r\n\0]/.test(key)) throw new CliError(`${settings.authEnv} contains a line break; an API key must be one line`);
  // An HTTP header holds it: visible ASCII only (the key itself is never printed).
  if (!/^[\x21-\x7e]+$/.test(key)) throw new CliError(`${settings.authEnv} holds a character that is not visible ASCII (a space, a control character or a non-ASCII letter); an API key is sent in an HTTP header`);
  return key;
}

export function requireApiKey(project: Project, settings: CloudSettings): string {
  const key = findApiKey(project, settings);
  if (key === null) {
    throw new CliError(
      `${settings.authEnv} is not set: it is required for cloud query authentication of "${settings.name}". ` +
      `Export it in the shell or put ${settings.authEnv}=<api key> in ${project.root}/.env (never in svc.toml)` +
      (settings.authEnv === defaultAuthEnv ? '' : ` (the name comes from query_auth_env)`),
    );
  }
  return key;
}

/** The authentication and tenant headers of one cloud request. */
export function cloudHeaders(settings: CloudSettings, apiKey: string | null): Record<string, string> {
  const headers: Record<string, string> = {};
  if (apiKey !== null) headers[settings.authHeader] = settings.authScheme === 'bearer' ? `Bearer ${apiKey}` : apiKey;
  if (settings.databaseId !== null) headers['x-svc-tenant-id'] = settings.databaseId;
  return headers;
}

/** What to check when the gateway cannot be reached; `syncing`: the hint of svc sync itself. */
export function cloudHint(name: string, configPath: string, syncing = false): string {
  const check = `Check gateway_url in [enterprise.${name}] of ${configPath} and your network`;
  return syncing ? `${check}.` : `${check}, or run \`svc sync ${name}\` to refresh the gateway settings.`;
}
