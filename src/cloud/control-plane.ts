// The control plane's contract with the gateway (issue 14): what `svc gateway` asks of the
// store of workspaces, databases and API keys. The SQLite (single gateway) and PostgreSQL
// (gateway replicas) stores implement it; the gateway caches its answers briefly, so a
// request on the hot path reaches neither store.
//
// Keys are random secrets shown once at creation; the store keeps only their SHA-256 hash,
// so `grantForKeyHash` takes the hash, never the secret.

export type Permission = 'read' | 'read_write';
export type PlanName = 'Idea' | 'Startup' | 'Growth';
export const planNames: readonly PlanName[] = ['Idea', 'Startup', 'Growth'];

/** Token bucket of one database: sustained requests per second and burst capacity. */
export interface RateLimit {
  readonly perSecond: number;
  readonly burst: number;
}

/** SPEC "Cloud request rate limit": the plans' buckets (per-database overrides win). */
export const planRateLimits: Readonly<Record<PlanName, RateLimit>> = {
  Idea: { perSecond: 5, burst: 10 },
  Startup: { perSecond: 10, burst: 20 },
  Growth: { perSecond: 20, burst: 40 },
};

/** What an API key admits: one database, with one permission. */
export interface KeyGrant {
  readonly keyId: string;
  readonly databaseId: string;
  readonly workspaceId: string;
  readonly permission: Permission;
}

export type DatabaseStatus = 'Provisioning' | 'Active' | 'Failed' | 'Deleted';

/** Where the gateway sends a database's requests. */
export interface DatabaseRoute {
  readonly id: string;
  readonly workspaceId: string;
  readonly status: DatabaseStatus;
  /** Base URL of the writer server, e.g. http://127.0.0.1:7001 (no trailing slash). */
  readonly writerUrl: string | null;
  /** Base URLs of the reader servers that follow the database's object storage. */
  readonly readerUrls: readonly string[];
  /** The plan's bucket, or the database's override. */
  readonly rateLimit: RateLimit;
}

/** Whether a workspace may still run reads and writes this month (allowances per plan). */
export interface Allowance {
  readonly readsAllowed: boolean;
  readonly writesAllowed: boolean;
}

export type UsageKind = 'read' | 'write';

export interface ControlPlane {
  /** The grant of the key whose SHA-256 hex digest is `keyHash`; null if unknown or revoked. */
  grantForKeyHash(keyHash: string): Promise<KeyGrant | null>;
  /** The route of a database; null if there is no such database. */
  database(databaseId: string): Promise<DatabaseRoute | null>;
  /** The workspace's allowance state for the current month. */
  allowance(workspaceId: string): Promise<Allowance>;
  /**
   * Adds admitted requests to the workspace's usage of `month` (`YYYY-MM`, UTC; default the
   * current one): the month the requests were admitted in, not the one they are sent in.
   */
  recordUsage(workspaceId: string, kind: UsageKind, count: number, month?: string): Promise<void>;
  close(): Promise<void>;
}
