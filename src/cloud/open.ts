// Opens the control plane's store from one location string, for `svc gateway` and
// `svc cloud serve` alike:
//   - `postgres://...` or `postgresql://...`: the shared store (gateway replicas);
//   - `sqlite:<path>` or a plain file path: the embedded store (one gateway, a laptop).
// The schema is migrated to this code's version before the store is returned.
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { ControlPlaneStore } from './admin-store.js';
import { migrate } from './migrations.js';
import { PostgresDriver } from './postgres-driver.js';
import type { SqlDriver } from './sql-driver.js';
import { openSqliteDriver } from './sqlite-driver.js';
import { SqlControlPlaneStore } from './sql-store.js';
import { withoutSecretParameters } from '../url-credentials.js';

export type { ControlPlaneStore } from './admin-store.js';

/** What `location` names, without opening it (also used to describe it in logs). */
export function parseStoreLocation(location: string): { kind: 'postgres'; url: string } | { kind: 'sqlite'; path: string } {
  if (/^postgres(ql)?:\/\//i.test(location)) return { kind: 'postgres', url: location };
  const path = location.startsWith('sqlite:') ? location.slice('sqlite:'.length) : location;
  if (path === '') throw new Error('control-plane store: empty SQLite path (give a file path, sqlite:<path> or postgres://...)');
  return { kind: 'sqlite', path: path === ':memory:' ? path : resolve(path) };
}

/** The location for logs: a PostgreSQL URL without its credentials (user info, `?password=`). */
export function describeStoreLocation(location: string): string {
  const parsed = parseStoreLocation(location);
  if (parsed.kind === 'sqlite') return `sqlite:${parsed.path}`;
  try {
    const url = new URL(parsed.url);
    if (url.password !== '') url.password = '***';
    return withoutSecretParameters(url.toString());
  } catch {
    return 'postgres://(unparsable URL)';
  }
}

export async function openControlPlane(location: string): Promise<ControlPlaneStore> {
  const parsed = parseStoreLocation(location);
  let driver: SqlDriver;
  if (parsed.kind === 'postgres') {
    driver = new PostgresDriver(parsed.url);
  } else {
    if (parsed.path !== ':memory:') mkdirSync(dirname(parsed.path), { recursive: true });
    driver = openSqliteDriver(parsed.path);
  }
  try {
    await migrate(driver);
  } catch (err) {
    await driver.close().catch(() => undefined);
    throw err;
  }
  return new SqlControlPlaneStore(driver);
}
