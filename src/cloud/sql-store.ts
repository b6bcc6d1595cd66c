// The control plane's store, written once over SqlDriver (SQLite or PostgreSQL). Every
// method is one statement or one transaction, so several processes (gateway replicas, the
// admin server) can share the store without locks of their own.
import {
  ControlPlaneError,
  type ApiKey, type ControlPlaneStore, type CreatedApiKey, type Database, type DatabaseBackends,
  type NewDatabase, type PlanAllowance, type Workspace, type WorkspaceUsage,
} from './admin-store.js';
import {
  planNames, planRateLimits,
  type Allowance, type DatabaseRoute, type DatabaseStatus, type KeyGrant, type Permission,
  type PlanName, type RateLimit, type UsageKind,
} from './control-plane.js';
import { allowancePerMonthMax, isPlanName, monthOf, monthPattern } from './plans.js';
import { apiKeyHash, newApiKeySecret, newId, newSlug } from './secrets.js';
import type { ProvisionerLock, SqlDriver, SqlExecutor, SqlRow } from './sql-driver.js';

/** Names of workspaces, databases and keys: printable, bounded. */
export const nameLengthMax = 100;
export const readerCountMax = 16;
/** A bucket override: at least one request per second, at most a very fast database. */
export const ratePerSecondMax = 1_000_000;
/** Draws of a new slug before giving up (each collides with chance ~n / 36^6). */
const slugAttemptsMax = 8;

interface WorkspaceRow extends SqlRow { id: string; name: string; plan: string; created_at: string }
interface DatabaseRow extends SqlRow {
  id: string; workspace_id: string; name: string; slug: string; endpoint: string; status: string;
  status_detail: string | null; storage_prefix: string; reader_count: number | string;
  writer_url: string | null; reader_urls: string; rate_per_second: number | string | null;
  rate_burst: number | string | null; created_at: string; plan: string;
}
interface KeyRow extends SqlRow {
  id: string; database_id: string; name: string; permission: string; created_at: string; revoked_at: string | null;
}

const databaseColumns = `d.id, d.workspace_id, d.name, d.slug, d.endpoint, d.status, d.status_detail,
  d.storage_prefix, d.reader_count, d.writer_url, d.reader_urls, d.rate_per_second, d.rate_burst,
  d.created_at, w.plan`;

/** Controls, format characters (bidi overrides, zero-width), line and paragraph separators. */
const unprintable = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

export function checkName(what: string, name: unknown): string {
  if (typeof name !== 'string') throw new ControlPlaneError('invalid', `${what} name must be a string`);
  const trimmed = name.trim();
  // Characters, not UTF-16 units: an emoji is one. A lone surrogate is no character.
  let characters = 0;
  for (const _ of trimmed) characters++;
  if (characters === 0 || characters > nameLengthMax || !trimmed.isWellFormed() || unprintable.test(trimmed)) {
    throw new ControlPlaneError('invalid', `${what} name must have 1 to ${nameLengthMax} printable characters`);
  }
  return trimmed;
}

export function checkRateLimit(limit: RateLimit): RateLimit {
  const { perSecond, burst } = limit;
  if (typeof perSecond !== 'number' || !Number.isFinite(perSecond) || perSecond < 1 || perSecond > ratePerSecondMax) {
    throw new ControlPlaneError('invalid', `rate limit per_second must be a number from 1 to ${ratePerSecondMax}`);
  }
  if (typeof burst !== 'number' || !Number.isFinite(burst) || burst < 1 || burst > ratePerSecondMax * 60) {
    throw new ControlPlaneError('invalid', `rate limit burst must be a number from 1 to ${ratePerSecondMax * 60}`);
  }
  return { perSecond, burst };
}

function toWorkspace(row: WorkspaceRow): Workspace {
  return { id: row.id, name: row.name, plan: row.plan as PlanName, createdAt: row.created_at };
}

function overrideOf(row: DatabaseRow): RateLimit | null {
  if (row.rate_per_second === null || row.rate_burst === null) return null;
  return { perSecond: Number(row.rate_per_second), burst: Number(row.rate_burst) };
}

function toDatabase(row: DatabaseRow): Database {
  const override = overrideOf(row);
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    name: row.name,
    slug: row.slug,
    endpoint: row.endpoint,
    status: row.status as DatabaseStatus,
    statusDetail: row.status_detail,
    storagePrefix: row.storage_prefix,
    readerCount: Number(row.reader_count),
    writerUrl: row.writer_url,
    readerUrls: JSON.parse(row.reader_urls) as string[],
    rateLimitOverride: override,
    rateLimit: override ?? planRateLimits[row.plan as PlanName],
    createdAt: row.created_at,
  };
}

function toApiKey(row: KeyRow): ApiKey {
  return {
    id: row.id,
    databaseId: row.database_id,
    name: row.name,
    permission: row.permission as Permission,
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
  };
}

function now(): string {
  return new Date().toISOString();
}

function notFound(what: string, id: string): ControlPlaneError {
  return new ControlPlaneError('not_found', `no ${what} ${JSON.stringify(id)}`);
}

const keyHashPattern = /^[0-9a-f]{64}$/;

export class SqlControlPlaneStore implements ControlPlaneStore {
  constructor(private readonly driver: SqlDriver) {}

  get dialect(): 'sqlite' | 'postgres' {
    return this.driver.dialect;
  }

  // ------------------------------------------------------------ the gateway's contract

  async grantForKeyHash(keyHash: string): Promise<KeyGrant | null> {
    if (!keyHashPattern.test(keyHash)) return null;
    const rows = await this.driver.query<{ id: string; database_id: string; workspace_id: string; permission: string }>(
      `SELECT k.id, k.database_id, d.workspace_id, k.permission
         FROM api_keys k JOIN databases d ON d.id = k.database_id
        WHERE k.secret_sha256 = ? AND k.revoked_at IS NULL AND d.status <> 'Deleted'`, [keyHash]);
    const row = rows[0];
    if (row === undefined) return null;
    return { keyId: row.id, databaseId: row.database_id, workspaceId: row.workspace_id, permission: row.permission as Permission };
  }

  async database(databaseId: string): Promise<DatabaseRoute | null> {
    const record = await this.databaseRecord(databaseId);
    if (record === null || record.status === 'Deleted') return null;
    return {
      id: record.id,
      workspaceId: record.workspaceId,
      status: record.status,
      writerUrl: record.writerUrl,
      readerUrls: record.readerUrls,
      rateLimit: record.rateLimit,
    };
  }

  async allowance(workspaceId: string): Promise<Allowance> {
    const usage = await this.usageOrNull(workspaceId, new Date());
    // A deleted or unknown workspace has nothing left to spend.
    if (usage === null) return { readsAllowed: false, writesAllowed: false };
    return {
      readsAllowed: usage.reads < usage.allowance.readsPerMonth,
      writesAllowed: usage.writes < usage.allowance.writesPerMonth,
    };
  }

  async recordUsage(workspaceId: string, kind: UsageKind, count: number, month: string = monthOf(new Date())): Promise<void> {
    if (!Number.isSafeInteger(count) || count < 0) throw new ControlPlaneError('invalid', `usage count must be a non-negative integer, got ${count}`);
    if (!monthPattern.test(month)) throw new ControlPlaneError('invalid', `usage month must be YYYY-MM, got ${JSON.stringify(month)}`);
    if (count === 0) return;
    const reads = kind === 'read' ? count : 0;
    const writes = kind === 'write' ? count : 0;
    await this.driver.query(
      `INSERT INTO workspace_usage (workspace_id, month, reads, writes) VALUES (?, ?, ?, ?)
       ON CONFLICT (workspace_id, month) DO UPDATE
         SET reads = workspace_usage.reads + excluded.reads, writes = workspace_usage.writes + excluded.writes`,
      [workspaceId, month, reads, writes]);
  }

  async close(): Promise<void> {
    await this.driver.close();
  }

  // ------------------------------------------------------------ workspaces

  async createWorkspace(name: string, plan: PlanName): Promise<Workspace> {
    const checkedName = checkName('workspace', name);
    if (!isPlanName(plan)) throw new ControlPlaneError('invalid', `plan must be one of ${planNames.join(', ')}`);
    const workspace: Workspace = { id: newId('ws'), name: checkedName, plan, createdAt: now() };
    await this.driver.query('INSERT INTO workspaces (id, name, plan, created_at) VALUES (?, ?, ?, ?)',
      [workspace.id, workspace.name, workspace.plan, workspace.createdAt]);
    return workspace;
  }

  async workspace(workspaceId: string): Promise<Workspace | null> {
    const rows = await this.driver.query<WorkspaceRow>(
      'SELECT id, name, plan, created_at FROM workspaces WHERE id = ? AND deleted_at IS NULL', [workspaceId]);
    return rows[0] === undefined ? null : toWorkspace(rows[0]);
  }

  async listWorkspaces(): Promise<Workspace[]> {
    const rows = await this.driver.query<WorkspaceRow>(
      'SELECT id, name, plan, created_at FROM workspaces WHERE deleted_at IS NULL ORDER BY created_at, id');
    return rows.map(toWorkspace);
  }

  async updateWorkspace(workspaceId: string, change: { name?: string; plan?: PlanName }): Promise<Workspace> {
    const name = change.name === undefined ? null : checkName('workspace', change.name);
    if (change.plan !== undefined && !isPlanName(change.plan)) {
      throw new ControlPlaneError('invalid', `plan must be one of ${planNames.join(', ')}`);
    }
    const rows = await this.driver.query<WorkspaceRow>(
      `UPDATE workspaces SET name = COALESCE(?, name), plan = COALESCE(?, plan)
        WHERE id = ? AND deleted_at IS NULL RETURNING id, name, plan, created_at`,
      [name, change.plan ?? null, workspaceId]);
    if (rows[0] === undefined) throw notFound('workspace', workspaceId);
    return toWorkspace(rows[0]);
  }

  /**
   * Inside a transaction: whether the workspace exists (not deleted), holding its row until
   * the transaction ends (PostgreSQL FOR UPDATE; SQLite's BEGIN IMMEDIATE already holds the
   * one write lock), so creating a database in it and deleting it are never both done.
   */
  private async lockWorkspace(tx: SqlExecutor, workspaceId: string): Promise<boolean> {
    const forUpdate = this.driver.dialect === 'postgres' ? ' FOR UPDATE' : '';
    const rows = await tx.query<{ id: string }>(`SELECT id FROM workspaces WHERE id = ? AND deleted_at IS NULL${forUpdate}`, [workspaceId]);
    return rows.length > 0;
  }

  async deleteWorkspace(workspaceId: string): Promise<void> {
    await this.driver.transaction(async (tx) => {
      if (!(await this.lockWorkspace(tx, workspaceId))) throw notFound('workspace', workspaceId);
      const live = await tx.query<{ n: number | string }>(
        "SELECT COUNT(*) AS n FROM databases WHERE workspace_id = ? AND status <> 'Deleted'", [workspaceId]);
      if (Number(live[0]?.n ?? 0) > 0) {
        throw new ControlPlaneError('conflict', `workspace ${workspaceId} still has databases: delete them first`);
      }
      const rows = await tx.query<{ id: string }>(
        'UPDATE workspaces SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL RETURNING id', [now(), workspaceId]);
      if (rows.length === 0) throw notFound('workspace', workspaceId);
    });
  }

  async usage(workspaceId: string, at: Date = new Date()): Promise<WorkspaceUsage> {
    const usage = await this.usageOrNull(workspaceId, at);
    if (usage === null) throw notFound('workspace', workspaceId);
    return usage;
  }

  private async usageOrNull(workspaceId: string, at: Date): Promise<WorkspaceUsage | null> {
    const month = monthOf(at);
    const rows = await this.driver.query<{ reads_per_month: number | string; writes_per_month: number | string; reads: number | string | null; writes: number | string | null }>(
      `SELECT p.reads_per_month, p.writes_per_month, u.reads, u.writes
         FROM workspaces w JOIN plans p ON p.name = w.plan
         LEFT JOIN workspace_usage u ON u.workspace_id = w.id AND u.month = ?
        WHERE w.id = ? AND w.deleted_at IS NULL`, [month, workspaceId]);
    const row = rows[0];
    if (row === undefined) return null;
    return {
      workspaceId,
      month,
      reads: Number(row.reads ?? 0),
      writes: Number(row.writes ?? 0),
      allowance: { readsPerMonth: Number(row.reads_per_month), writesPerMonth: Number(row.writes_per_month) },
    };
  }

  // ------------------------------------------------------------ plans

  async planAllowances(): Promise<Record<PlanName, PlanAllowance>> {
    const rows = await this.driver.query<{ name: string; reads_per_month: number | string; writes_per_month: number | string }>(
      'SELECT name, reads_per_month, writes_per_month FROM plans');
    const result = {} as Record<PlanName, PlanAllowance>;
    for (const row of rows) {
      if (isPlanName(row.name)) result[row.name] = { readsPerMonth: Number(row.reads_per_month), writesPerMonth: Number(row.writes_per_month) };
    }
    return result;
  }

  async setPlanAllowance(plan: PlanName, allowance: PlanAllowance): Promise<void> {
    if (!isPlanName(plan)) throw new ControlPlaneError('invalid', `plan must be one of ${planNames.join(', ')}`);
    for (const [what, value] of [['reads_per_month', allowance.readsPerMonth], ['writes_per_month', allowance.writesPerMonth]] as const) {
      if (!Number.isSafeInteger(value) || value < 0 || value > allowancePerMonthMax) {
        throw new ControlPlaneError('invalid', `${what} must be an integer from 0 to ${allowancePerMonthMax}`);
      }
    }
    await this.driver.query('UPDATE plans SET reads_per_month = ?, writes_per_month = ? WHERE name = ?',
      [allowance.readsPerMonth, allowance.writesPerMonth, plan]);
  }

  // ------------------------------------------------------------ databases

  async createDatabase(spec: NewDatabase, endpoint: string): Promise<Database> {
    const name = checkName('database', spec.name);
    if (!Number.isInteger(spec.readerCount) || spec.readerCount < 0 || spec.readerCount > readerCountMax) {
      throw new ControlPlaneError('invalid', `readers must be an integer from 0 to ${readerCountMax}`);
    }
    const override = spec.rateLimitOverride == null ? null : checkRateLimit(spec.rateLimitOverride);
    const id = newId('db');
    for (let attempt = 1; ; attempt++) {
      try {
        await this.driver.transaction(async (tx) => {
          // The workspace row locked (as deleteWorkspace does): a delete running at once
          // either sees this database or makes this insert find no workspace.
          if (!(await this.lockWorkspace(tx, spec.workspaceId))) throw notFound('workspace', spec.workspaceId);
          await tx.query(
            `INSERT INTO databases (id, workspace_id, name, slug, endpoint, status, status_detail, storage_prefix,
               reader_count, writer_url, reader_urls, rate_per_second, rate_burst, created_at)
             VALUES (?, ?, ?, ?, ?, 'Provisioning', NULL, ?, ?, NULL, '[]', ?, ?, ?)`,
            [id, spec.workspaceId, name, newSlug(name), endpoint, `databases/${id}`, spec.readerCount,
              override?.perSecond ?? null, override?.burst ?? null, now()]);
        });
        break;
      } catch (err) {
        // Only the slug is drawn again: the ID has 80 random bits, a slug's suffix 31.
        if (!this.driver.isUniqueViolation(err) || attempt >= slugAttemptsMax) throw err;
      }
    }
    const created = await this.databaseRecord(id);
    if (created === null) throw new Error(`database ${id} vanished right after its creation`);
    return created;
  }

  async databaseRecord(databaseId: string): Promise<Database | null> {
    const rows = await this.driver.query<DatabaseRow>(
      `SELECT ${databaseColumns} FROM databases d JOIN workspaces w ON w.id = d.workspace_id WHERE d.id = ?`, [databaseId]);
    return rows[0] === undefined ? null : toDatabase(rows[0]);
  }

  async listDatabases(workspaceId?: string): Promise<Database[]> {
    const rows = workspaceId === undefined
      ? await this.driver.query<DatabaseRow>(
        `SELECT ${databaseColumns} FROM databases d JOIN workspaces w ON w.id = d.workspace_id
          WHERE d.status <> 'Deleted' ORDER BY d.created_at, d.id`)
      : await this.driver.query<DatabaseRow>(
        `SELECT ${databaseColumns} FROM databases d JOIN workspaces w ON w.id = d.workspace_id
          WHERE d.status <> 'Deleted' AND d.workspace_id = ? ORDER BY d.created_at, d.id`, [workspaceId]);
    return rows.map(toDatabase);
  }

  async setDatabaseStatus(databaseId: string, status: DatabaseStatus, detail: string | null = null): Promise<void> {
    // A deleted database stays deleted: a provisioning that finishes late must not revive it.
    const rows = await this.driver.query<{ id: string }>(
      "UPDATE databases SET status = ?, status_detail = ? WHERE id = ? AND status <> 'Deleted' RETURNING id",
      [status, detail, databaseId]);
    if (rows.length === 0) throw notFound('database', databaseId);
  }

  async setDatabaseBackends(databaseId: string, backends: DatabaseBackends): Promise<void> {
    const rows = await this.driver.query<{ id: string }>(
      "UPDATE databases SET writer_url = ?, reader_urls = ? WHERE id = ? AND status <> 'Deleted' RETURNING id",
      [backends.writerUrl, JSON.stringify(backends.readerUrls), databaseId]);
    if (rows.length === 0) throw notFound('database', databaseId);
  }

  async setRateLimitOverride(databaseId: string, override: RateLimit | null): Promise<Database> {
    const checked = override === null ? null : checkRateLimit(override);
    const rows = await this.driver.query<{ id: string }>(
      "UPDATE databases SET rate_per_second = ?, rate_burst = ? WHERE id = ? AND status <> 'Deleted' RETURNING id",
      [checked?.perSecond ?? null, checked?.burst ?? null, databaseId]);
    if (rows.length === 0) throw notFound('database', databaseId);
    const record = await this.databaseRecord(databaseId);
    if (record === null) throw notFound('database', databaseId);
    return record;
  }

  async markDatabaseDeleted(databaseId: string): Promise<void> {
    await this.driver.transaction(async (tx) => {
      const at = now();
      const rows = await tx.query<{ id: string }>(
        `UPDATE databases SET status = 'Deleted', status_detail = NULL, writer_url = NULL, reader_urls = '[]', deleted_at = ?
          WHERE id = ? AND status <> 'Deleted' RETURNING id`, [at, databaseId]);
      if (rows.length === 0) throw notFound('database', databaseId);
      await tx.query('UPDATE api_keys SET revoked_at = ? WHERE database_id = ? AND revoked_at IS NULL', [at, databaseId]);
    });
  }

  tryProvisionerLock(): Promise<ProvisionerLock | null> {
    return this.driver.tryProvisionerLock();
  }

  provisionerLockHolder(): Promise<'none' | 'this process' | 'another process'> {
    return this.driver.provisionerLockHolder();
  }

  // ------------------------------------------------------------ API keys

  async createApiKey(databaseId: string, name: string, permission: Permission): Promise<CreatedApiKey> {
    const checkedName = checkName('key', name);
    if (permission !== 'read' && permission !== 'read_write') {
      throw new ControlPlaneError('invalid', 'permission must be "read" or "read_write"');
    }
    const database = await this.databaseRecord(databaseId);
    if (database === null || database.status === 'Deleted') throw notFound('database', databaseId);
    const secret = newApiKeySecret();
    const key: ApiKey = { id: newId('key'), databaseId, name: checkedName, permission, createdAt: now(), revokedAt: null };
    await this.driver.query(
      'INSERT INTO api_keys (id, database_id, name, permission, secret_sha256, created_at) VALUES (?, ?, ?, ?, ?, ?)',
      [key.id, key.databaseId, key.name, key.permission, apiKeyHash(secret), key.createdAt]);
    return { key, secret };
  }

  async listApiKeys(databaseId: string): Promise<ApiKey[]> {
    if ((await this.databaseRecord(databaseId)) === null) throw notFound('database', databaseId);
    const rows = await this.driver.query<KeyRow>(
      'SELECT id, database_id, name, permission, created_at, revoked_at FROM api_keys WHERE database_id = ? ORDER BY created_at, id',
      [databaseId]);
    return rows.map(toApiKey);
  }

  async revokeApiKey(databaseId: string, keyId: string): Promise<ApiKey> {
    // Revoking twice keeps the first time; a key of another database is not found here.
    await this.driver.query('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND database_id = ? AND revoked_at IS NULL',
      [now(), keyId, databaseId]);
    const rows = await this.driver.query<KeyRow>(
      'SELECT id, database_id, name, permission, created_at, revoked_at FROM api_keys WHERE id = ? AND database_id = ?',
      [keyId, databaseId]);
    if (rows[0] === undefined) throw notFound('key', keyId);
    return toApiKey(rows[0]);
  }
}
