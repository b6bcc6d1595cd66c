// `svc update`: compares the installed version with the latest `svcdb` on the npm
// registry and says how to upgrade. It changes nothing (upgrading is one npm command the
// user runs, so a CLI never rewrites its own installation mid-run). Not being able to
// check (offline, registry error, package not published) is reported and exits 0.
//
// Registry: --registry > SVC_UPDATE_REGISTRY > npm_config_registry (set when run through
// npm/npx) > https://registry.npmjs.org.
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { action } from './errors.js';
import { httpRequest, Unreachable } from './http.js';
import { integerOption } from './options.js';
import { withoutCredentials } from '../url-credentials.js';

interface UpdateOptions {
  registry?: string;
  timeoutMs: number;
}

export const packageName = 'svcdb';
const defaultRegistry = 'https://registry.npmjs.org';

/** The version in this installation's package.json. */
export function installedVersion(): string {
  const path = new URL('../../../package.json', import.meta.url);
  try {
    const version = (JSON.parse(readFileSync(path, 'utf8')) as { version?: unknown }).version;
    return typeof version === 'string' ? version : 'unknown';
  } catch {
    return 'unknown';
  }
}

export function registerUpdate(program: Command): void {
  program
    .command('update')
    .description('check the npm registry for a newer svcdb and print how to upgrade (changes nothing)')
    .option('--registry <url>', 'npm registry to ask (default: $SVC_UPDATE_REGISTRY, $npm_config_registry, https://registry.npmjs.org)')
    .option('--timeout-ms <ms>', 'give up after this long', integerOption('timeout-ms', 1, 60_000), 3_000)
    .action(action('update', async (options: UpdateOptions) => {
      await update(options);
    }));
}

async function update(options: UpdateOptions): Promise<void> {
  const installed = installedVersion();
  const registry = (options.registry ?? nonEmpty(process.env.SVC_UPDATE_REGISTRY) ?? nonEmpty(process.env.npm_config_registry) ?? defaultRegistry).replace(/\/+$/, '');
  const url = `${registry}/${packageName}/latest`;
  // What is printed: a registry URL may carry credentials (https://user:token@host/).
  const shownRegistry = withoutCredentials(registry);
  const shownUrl = withoutCredentials(url);
  const out = process.stdout;
  out.write(`Installed: svc ${installed}\n`);

  let latest: string;
  try {
    const response = await httpRequest(url, { headers: { accept: 'application/json' }, timeoutMs: options.timeoutMs });
    if (response.status === 404) {
      out.write(`${packageName} is not published on ${shownRegistry}, so there is no newer version to install.\n`);
      return;
    }
    if (response.status !== 200) {
      out.write(`Could not check for updates: ${shownUrl} answered HTTP ${response.status}. Nothing was changed.\n`);
      return;
    }
    let version: unknown;
    try {
      version = (JSON.parse(response.text) as { version?: unknown } | null)?.version;
    } catch {
      version = undefined;
    }
    if (typeof version !== 'string') {
      out.write(`Could not check for updates: ${shownUrl} answered without a version (not a registry's answer). Nothing was changed.\n`);
      return;
    }
    latest = version;
  } catch (err) {
    const reason = err instanceof Unreachable ? err.reason : (err as Error).message;
    out.write(`Could not check for updates: cannot reach ${shownUrl} (${reason}). Nothing was changed.\n`);
    return;
  }

  const order = compareVersions(latest, installed);
  if (order <= 0) {
    out.write(`svc ${installed} is up to date (latest on ${shownRegistry}: ${latest}).\n`);
    return;
  }
  out.write(`A newer version is available: ${packageName} ${latest}.\n`);
  out.write(`Upgrade with:\n  npm install -g ${packageName}@latest    # a global install\n  npm install ${packageName}@latest       # a project dependency\n`);
  out.write('Then restart running instances (svc stop <instance> && svc start <instance>) to use the new server.\n');
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

/** Semver order of the numeric core, then release > prerelease; unparsable compare equal. */
export function compareVersions(a: string, b: string): number {
  const parse = (v: string): { core: number[]; pre: boolean } | null => {
    const m = /^v?(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?/.exec(v.trim());
    return m === null ? null : { core: [Number(m[1]), Number(m[2]), Number(m[3])], pre: m[4] !== undefined };
  };
  const x = parse(a);
  const y = parse(b);
  if (x === null || y === null) return 0;
  for (let i = 0; i < 3; i++) if (x.core[i] !== y.core[i]) return x.core[i]! - y.core[i]!;
  return x.pre === y.pre ? 0 : x.pre ? -1 : 1;
}
