// The control plane's full store: what the gateway asks (ControlPlane, control-plane.ts)
// plus what the admin API and the provisioner manage. The SQLite and PostgreSQL stores
// implement this one interface (sql-store.ts over a driver each), so the admin API, the
// CLI and the tests never know which one is behind them.
import type {
  ControlPlane, DatabaseStatus, Permission, PlanName, RateLimit, UsageKind,
} from './control-plane.js';
import type { ProvisionerLock } from './sql-driver.js';

/** A plan's monthly allowances: requests admitted per calendar month (UTC), per workspace. */
export interface PlanAllowance {
  readonly readsPerMonth: number;
  readonly writesPerMonth: number;
}

export interface Workspace {
  readonly id: string;
  readonly name: string;
  readonly plan: PlanName;
  /** ISO 8601, UTC. */
  readonly createdAt: string;
}

/** A workspace's usage of one month, and what its plan allows. */
export interface WorkspaceUsage {
  readonly workspaceId: string;
  /** `YYYY-MM`, UTC. */
  readonly month: string;
  readonly reads: number;
  readonly writes: number;
  readonly allowance: PlanAllowance;
}

export interface Database {
  readonly id: string;
  readonly workspaceId: string;
  readonly name: string;
  /** Generated, unique across the control plane (deleted databases keep theirs). */
  readonly slug: string;
  /** The base URL clients send `POST /v2/query` to (the gateway), with this database's ID. */
  readonly endpoint: string;
  readonly status: DatabaseStatus;
  /** Why provisioning failed (status Failed), else null. */
  readonly statusDetail: string | null;
  /** This database's own key prefix in the object storage (its data is isolated there). */
  readonly storagePrefix: string;
  /** How many reader servers the database runs. */
  readonly readerCount: number;
  readonly writerUrl: string | null;
  readonly readerUrls: readonly string[];
  /** Per-database override of the plan's bucket; null = the plan's. */
  readonly rateLimitOverride: RateLimit | null;
  /** The bucket in force: the override, else the workspace plan's. */
  readonly rateLimit: RateLimit;
  readonly createdAt: string;
}

/** An API key as listed: never its secret, which exists only in the creation answer. */
export interface ApiKey {
  readonly id: string;
  readonly databaseId: string;
  readonly name: string;
  readonly permission: Permission;
  readonly createdAt: string;
  /** ISO time of revocation, or null while the key is valid. */
  readonly revokedAt: string | null;
}

/** The answer to a key creation: the one time the secret is shown. */
export interface CreatedApiKey {
  readonly key: ApiKey;
  readonly secret: string;
}

export interface NewDatabase {
  readonly workspaceId: string;
  readonly name: string;
  readonly readerCount: number;
  readonly rateLimitOverride?: RateLimit | null;
}

/** Where a database's servers run, once the provisioner started them. */
export interface DatabaseBackends {
  readonly writerUrl: string | null;
  readonly readerUrls: readonly string[];
}

/** Failures the admin API maps to HTTP statuses (admin-api.ts). */
export class ControlPlaneError extends Error {
  constructor(readonly code: 'not_found' | 'conflict' | 'invalid', message: string) {
    super(message);
    this.name = 'ControlPlaneError';
  }
}

export interface ControlPlaneStore extends ControlPlane {
  // Workspaces
  createWorkspace(name: string, plan: PlanName): Promise<Workspace>;
  workspace(workspaceId: string): Promise<Workspace | null>;
  listWorkspaces(): Promise<Workspace[]>;
  /** Renames and/or changes the plan; the new plan's bucket and allowance apply at once. */
  updateWorkspace(workspaceId: string, change: { name?: string; plan?: PlanName }): Promise<Workspace>;
  /** Refused (conflict) while the workspace has databases that are not deleted. */
  deleteWorkspace(workspaceId: string): Promise<void>;
  /** Usage of the month holding `at` (default now). */
  usage(workspaceId: string, at?: Date): Promise<WorkspaceUsage>;

  // Plans
  planAllowances(): Promise<Record<PlanName, PlanAllowance>>;
  setPlanAllowance(plan: PlanName, allowance: PlanAllowance): Promise<void>;

  // Databases
  /** Status Provisioning, with a new ID, slug and storage prefix; no servers yet. */
  createDatabase(spec: NewDatabase, endpoint: string): Promise<Database>;
  databaseRecord(databaseId: string): Promise<Database | null>;
  /** Databases not deleted, of one workspace or of all. */
  listDatabases(workspaceId?: string): Promise<Database[]>;
  setDatabaseStatus(databaseId: string, status: DatabaseStatus, detail?: string | null): Promise<void>;
  setDatabaseBackends(databaseId: string, backends: DatabaseBackends): Promise<void>;
  setRateLimitOverride(databaseId: string, override: RateLimit | null): Promise<Database>;
  /** Status Deleted, no servers, every key revoked; the record and slug stay. */
  markDatabaseDeleted(databaseId: string): Promise<void>;

  /**
   * The store's one provisioner lock (held until released or the process ends, unless
   * `lost` settles); null when another `svc cloud serve` holds it.
   */
  tryProvisionerLock(): Promise<ProvisionerLock | null>;
  /** Who holds the provisioner lock (SqlDriver.provisionerLockHolder). */
  provisionerLockHolder(): Promise<'none' | 'this process' | 'another process'>;

  // API keys
  createApiKey(databaseId: string, name: string, permission: Permission): Promise<CreatedApiKey>;
  listApiKeys(databaseId: string): Promise<ApiKey[]>;
  revokeApiKey(databaseId: string, keyId: string): Promise<ApiKey>;
}

export type { UsageKind };
