// The control plane's schema, as numbered migrations applied in order at open. A store
// records the versions it holds in schema_migrations; a process that finds versions newer
// than it knows refuses to open (an older binary must not write a newer schema).
//
// The DDL is plain SQL both SQLite and PostgreSQL accept. Times are ISO 8601 UTC text
// (sortable, readable in both); counters are BIGINT (pg returns them as strings, which
// sql-store.ts converts).
import type { SqlDriver, SqlExecutor } from './sql-driver.js';
import { planNames } from './control-plane.js';
import { defaultPlanAllowances } from './plans.js';

interface Migration {
  readonly version: number;
  readonly description: string;
  apply(tx: SqlExecutor): Promise<void>;
}

const migrations: readonly Migration[] = [
  {
    version: 1,
    description: 'plans, workspaces, databases, api keys, monthly usage',
    async apply(tx) {
      await tx.query(`CREATE TABLE plans (
        name TEXT PRIMARY KEY,
        reads_per_month BIGINT NOT NULL,
        writes_per_month BIGINT NOT NULL)`);
      await tx.query(`CREATE TABLE workspaces (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        plan TEXT NOT NULL REFERENCES plans(name),
        created_at TEXT NOT NULL,
        deleted_at TEXT)`);
      await tx.query(`CREATE TABLE databases (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        name TEXT NOT NULL,
        slug TEXT NOT NULL UNIQUE,
        endpoint TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('Provisioning', 'Active', 'Failed', 'Deleted')),
        status_detail TEXT,
        storage_prefix TEXT NOT NULL UNIQUE,
        reader_count INTEGER NOT NULL,
        writer_url TEXT,
        reader_urls TEXT NOT NULL,
        rate_per_second DOUBLE PRECISION,
        rate_burst DOUBLE PRECISION,
        created_at TEXT NOT NULL,
        deleted_at TEXT)`);
      await tx.query('CREATE INDEX databases_by_workspace ON databases (workspace_id)');
      await tx.query(`CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        database_id TEXT NOT NULL REFERENCES databases(id),
        name TEXT NOT NULL,
        permission TEXT NOT NULL CHECK (permission IN ('read', 'read_write')),
        secret_sha256 TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL,
        revoked_at TEXT)`);
      await tx.query('CREATE INDEX api_keys_by_database ON api_keys (database_id)');
      await tx.query(`CREATE TABLE workspace_usage (
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        month TEXT NOT NULL,
        reads BIGINT NOT NULL,
        writes BIGINT NOT NULL,
        PRIMARY KEY (workspace_id, month))`);
      for (const plan of planNames) {
        const allowance = defaultPlanAllowances[plan];
        await tx.query('INSERT INTO plans (name, reads_per_month, writes_per_month) VALUES (?, ?, ?)',
          [plan, allowance.readsPerMonth, allowance.writesPerMonth]);
      }
    },
  },
];

/** The newest schema version this code knows. */
export const schemaVersion = migrations[migrations.length - 1]!.version;

/** Applies the migrations the store lacks, each in order, all in one transaction. */
export async function migrate(driver: SqlDriver): Promise<void> {
  await driver.transaction(async (tx) => {
    await driver.lockForMigrations(tx);
    await tx.query('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)');
    const rows = await tx.query<{ version: number | string | null }>('SELECT MAX(version) AS version FROM schema_migrations');
    const current = rows[0]?.version == null ? 0 : Number(rows[0].version);
    if (current > schemaVersion) {
      throw new Error(`the control-plane store is at schema version ${current}, newer than this svc (${schemaVersion}): upgrade svc`);
    }
    for (const migration of migrations) {
      if (migration.version <= current) continue;
      await migration.apply(tx);
      await tx.query('INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)',
        [migration.version, migration.description, new Date().toISOString()]);
    }
  });
}
