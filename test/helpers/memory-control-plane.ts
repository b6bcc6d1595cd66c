// A test-only ControlPlane held in memory: workspaces, databases and keys set up by the
// test, with counters of every lookup so tests can prove the gateway's caching.
import { createHash, randomBytes } from 'node:crypto';
import type {
  Allowance, ControlPlane, DatabaseRoute, DatabaseStatus, KeyGrant, Permission, PlanName, RateLimit, UsageKind,
} from '../../src/cloud/control-plane.js';
import { planRateLimits } from '../../src/cloud/control-plane.js';

export interface MemoryDatabase {
  id: string;
  workspaceId: string;
  status: DatabaseStatus;
  writerUrl: string | null;
  readerUrls: string[];
  rateLimit: RateLimit;
}

export class MemoryControlPlane implements ControlPlane {
  readonly plans = new Map<string, PlanName>();
  readonly databases = new Map<string, MemoryDatabase>();
  readonly grants = new Map<string, KeyGrant>();
  readonly allowances = new Map<string, Allowance>();
  /** Usage recorded by the gateway: `${workspaceId}/${kind}` -> count. */
  readonly usage = new Map<string, number>();
  readonly calls = { grantForKeyHash: 0, database: 0, allowance: 0, recordUsage: 0 };
  /** When set, every call fails with it (a store that is down). */
  failure: Error | null = null;
  private keyCounter = 0;

  addWorkspace(id: string, plan: PlanName = 'Growth'): void {
    this.plans.set(id, plan);
  }

  addDatabase(db: Partial<MemoryDatabase> & { id: string; workspaceId: string }): MemoryDatabase {
    const plan = this.plans.get(db.workspaceId) ?? 'Growth';
    const full: MemoryDatabase = {
      status: 'Active', writerUrl: null, readerUrls: [], rateLimit: planRateLimits[plan], ...db,
    };
    this.databases.set(full.id, full);
    return full;
  }

  /** A new key for a database; returns the secret (stored only as its hash, like the real store). */
  addKey(databaseId: string, permission: Permission = 'read_write'): { secret: string; keyId: string } {
    const db = this.databases.get(databaseId);
    if (db === undefined) throw new Error(`no database ${databaseId}`);
    const secret = `svc_${randomBytes(32).toString('base64url')}`;
    const keyId = `key_${++this.keyCounter}`;
    this.grants.set(sha256(secret), { keyId, databaseId, workspaceId: db.workspaceId, permission });
    return { secret, keyId };
  }

  revoke(secret: string): void {
    this.grants.delete(sha256(secret));
  }

  async grantForKeyHash(keyHash: string): Promise<KeyGrant | null> {
    this.calls.grantForKeyHash++;
    if (this.failure !== null) throw this.failure;
    return this.grants.get(keyHash) ?? null;
  }

  async database(databaseId: string): Promise<DatabaseRoute | null> {
    this.calls.database++;
    if (this.failure !== null) throw this.failure;
    const db = this.databases.get(databaseId);
    return db === undefined ? null : { ...db, readerUrls: [...db.readerUrls] };
  }

  async allowance(workspaceId: string): Promise<Allowance> {
    this.calls.allowance++;
    if (this.failure !== null) throw this.failure;
    return this.allowances.get(workspaceId) ?? { readsAllowed: true, writesAllowed: true };
  }

  async recordUsage(workspaceId: string, kind: UsageKind, count: number, _month?: string): Promise<void> {
    this.calls.recordUsage++;
    if (this.failure !== null) throw this.failure;
    const key = `${workspaceId}/${kind}`;
    this.usage.set(key, (this.usage.get(key) ?? 0) + count);
  }

  async close(): Promise<void> {}
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
