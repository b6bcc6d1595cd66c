// The control plane's store (src/cloud/): one suite, run against the embedded SQLite store
// and against PostgreSQL (a throwaway cluster started here, test/helpers/postgres.ts).
// Each test opens a fresh, empty store.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import Sqlite from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlaneError, type ControlPlaneStore } from '../src/cloud/admin-store.js';
import { planRateLimits } from '../src/cloud/control-plane.js';
import { openControlPlane } from '../src/cloud/open.js';
import { defaultPlanAllowances } from '../src/cloud/plans.js';
import { apiKeyHash, apiKeyPattern } from '../src/cloud/secrets.js';
import { tempDir } from './helpers/cli.js';
import { startPostgres, type PostgresCluster } from './helpers/postgres.js';

interface Variant {
  name: string;
  /** A fresh store, and every text value of every table of it (to look for secrets). */
  open(): Promise<{ store: ControlPlaneStore; location: string; rawText(): Promise<string> }>;
}

const tables = ['plans', 'workspaces', 'databases', 'api_keys', 'workspace_usage', 'schema_migrations'];

let sqliteDir = '';
let cluster: PostgresCluster | null = null;
let databaseCounter = 0;

beforeAll(async () => {
  sqliteDir = tempDir('cloud-store');
  cluster = await startPostgres();
});

afterAll(async () => {
  await cluster?.stop();
  rmSync(sqliteDir, { recursive: true, force: true });
});

const sqliteVariant: Variant = {
  name: 'SQLite',
  async open() {
    const path = join(sqliteDir, `store-${++databaseCounter}.sqlite`);
    const store = await openControlPlane(path);
    return {
      store, location: path,
      async rawText() {
        const db = new Sqlite(path, { readonly: true });
        try {
          return tables.map((t) => JSON.stringify(db.prepare(`SELECT * FROM ${t}`).all())).join('\n');
        } finally {
          db.close();
        }
      },
    };
  },
};

const postgresVariant: Variant = {
  name: 'PostgreSQL',
  async open() {
    const url = await cluster!.createDatabase(`store_${++databaseCounter}`);
    const store = await openControlPlane(url);
    return {
      store, location: url,
      async rawText() {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        try {
          const parts: string[] = [];
          for (const t of tables) parts.push(JSON.stringify((await client.query(`SELECT * FROM ${t}`)).rows));
          return parts.join('\n');
        } finally {
          await client.end();
        }
      },
    };
  },
};

for (const variant of [sqliteVariant, postgresVariant]) {
  describe(`control-plane store on ${variant.name}`, () => {
    async function withStore(run: (store: ControlPlaneStore, rawText: () => Promise<string>, location: string) => Promise<void>): Promise<void> {
      const { store, rawText, location } = await variant.open();
      try {
        await run(store, rawText, location);
      } finally {
        await store.close();
      }
    }

    it('creates, lists, renames and deletes workspaces; refuses to delete one with live databases', () => withStore(async (store) => {
      const a = await store.createWorkspace('  Acme  ', 'Idea');
      const b = await store.createWorkspace('Beta', 'Growth');
      expect(a.name).toBe('Acme');
      expect(a.id).toMatch(/^ws_[0-9a-f]{20}$/);
      // Listed by creation time; two created in one millisecond may come in either order.
      expect((await store.listWorkspaces()).map((w) => w.id).sort()).toEqual([a.id, b.id].sort());
      expect(await store.updateWorkspace(a.id, { name: 'Acme Inc' })).toMatchObject({ id: a.id, name: 'Acme Inc', plan: 'Idea' });

      const db = await store.createDatabase({ workspaceId: b.id, name: 'main', readerCount: 1 }, 'http://gw');
      await expect(store.deleteWorkspace(b.id)).rejects.toMatchObject({ code: 'conflict' });
      await store.markDatabaseDeleted(db.id);
      await store.deleteWorkspace(b.id);
      expect(await store.workspace(b.id)).toBeNull();
      expect((await store.listWorkspaces()).map((w) => w.id)).toEqual([a.id]);
      await expect(store.deleteWorkspace(b.id)).rejects.toMatchObject({ code: 'not_found' });
      await expect(store.createWorkspace('x', 'Enterprise' as 'Idea')).rejects.toBeInstanceOf(ControlPlaneError);
      await expect(store.createWorkspace('', 'Idea')).rejects.toMatchObject({ code: 'invalid' });
      // Names count characters (an emoji is one) and must be printable: no format or
      // separator characters (bidi overrides, zero-width space, U+2028), no lone surrogate.
      expect((await store.createWorkspace('😀'.repeat(60), 'Idea')).name).toBe('😀'.repeat(60));
      await expect(store.createWorkspace('😀'.repeat(101), 'Idea')).rejects.toMatchObject({ code: 'invalid' });
      for (const bad of ['a\u202eb', 'a\u200bb', 'a\u2028b', 'a\u0085b', 'a\ud800', 'a\u0000b']) {
        await expect(store.createWorkspace(bad, 'Idea'), JSON.stringify(bad)).rejects.toMatchObject({ code: 'invalid' });
      }
      expect((await store.createWorkspace('Café Ωmega 東京', 'Idea')).name).toBe('Café Ωmega 東京');
    }));

    it('a database is never created in a workspace deleted at the same time', () => withStore(async (store) => {
      // A probe on PostgreSQL had both succeed in 16 of 25 rounds: a database in a deleted workspace.
      for (let round = 0; round < 25; round++) {
        const ws = await store.createWorkspace(`race ${round}`, 'Idea');
        const [created, deleted] = await Promise.allSettled([
          store.createDatabase({ workspaceId: ws.id, name: 'd', readerCount: 0 }, 'http://gw'),
          store.deleteWorkspace(ws.id),
        ]);
        if (created.status === 'fulfilled') {
          expect(deleted, `round ${round}`).toMatchObject({ status: 'rejected', reason: { code: 'conflict' } });
          expect(await store.workspace(ws.id)).not.toBeNull();
        } else {
          expect(created.reason, `round ${round}`).toMatchObject({ code: 'not_found' });
          expect(deleted.status, `round ${round}`).toBe('fulfilled');
        }
      }
    }));

    it('a plan change moves the database\'s rate limit; a per-database override wins over the plan', () => withStore(async (store) => {
      const ws = await store.createWorkspace('w', 'Idea');
      const db = await store.createDatabase({ workspaceId: ws.id, name: 'd', readerCount: 0 }, 'http://gw');
      expect((await store.database(db.id))!.rateLimit).toEqual(planRateLimits.Idea);
      await store.updateWorkspace(ws.id, { plan: 'Growth' });
      expect((await store.database(db.id))!.rateLimit).toEqual({ perSecond: 20, burst: 40 });
      await store.setRateLimitOverride(db.id, { perSecond: 100, burst: 7 });
      expect((await store.database(db.id))!.rateLimit).toEqual({ perSecond: 100, burst: 7 });
      await store.updateWorkspace(ws.id, { plan: 'Startup' });
      expect((await store.database(db.id))!.rateLimit).toEqual({ perSecond: 100, burst: 7 });
      await store.setRateLimitOverride(db.id, null);
      expect((await store.database(db.id))!.rateLimit).toEqual({ perSecond: 10, burst: 20 });
      await expect(store.setRateLimitOverride(db.id, { perSecond: 0, burst: 1 })).rejects.toMatchObject({ code: 'invalid' });
    }));

    it('databases get unique slugs and their own storage prefix, start Provisioning and record their servers', () => withStore(async (store) => {
      const ws = await store.createWorkspace('w', 'Startup');
      const created = [];
      for (let i = 0; i < 40; i++) created.push(await store.createDatabase({ workspaceId: ws.id, name: 'Orders DB', readerCount: 2 }, 'http://gw'));
      const slugs = new Set(created.map((d) => d.slug));
      expect(slugs.size).toBe(40);
      for (const slug of slugs) expect(slug).toMatch(/^orders-db-[a-z0-9]{6}$/);
      expect(new Set(created.map((d) => d.storagePrefix)).size).toBe(40);

      const db = created[0]!;
      expect(db).toMatchObject({ status: 'Provisioning', writerUrl: null, readerUrls: [], readerCount: 2, endpoint: 'http://gw' });
      await store.setDatabaseBackends(db.id, { writerUrl: 'http://127.0.0.1:1', readerUrls: ['http://127.0.0.1:2', 'http://127.0.0.1:3'] });
      await store.setDatabaseStatus(db.id, 'Active');
      expect(await store.database(db.id)).toEqual({
        id: db.id, workspaceId: ws.id, status: 'Active', writerUrl: 'http://127.0.0.1:1',
        readerUrls: ['http://127.0.0.1:2', 'http://127.0.0.1:3'], rateLimit: planRateLimits.Startup,
      });
      expect(await store.database('db_00000000000000000000')).toBeNull();

      await store.markDatabaseDeleted(db.id);
      expect(await store.database(db.id)).toBeNull();
      expect((await store.databaseRecord(db.id))!.status).toBe('Deleted');
      // A provisioning that ends after the deletion must not bring the database back.
      await expect(store.setDatabaseStatus(db.id, 'Active')).rejects.toMatchObject({ code: 'not_found' });
      expect((await store.listDatabases(ws.id)).map((d) => d.id)).not.toContain(db.id);
      expect(await store.listDatabases(ws.id)).toHaveLength(39);
    }));

    it('the store refuses a second database row with a taken slug', () => withStore(async (store, _raw, location) => {
      const ws = await store.createWorkspace('w', 'Idea');
      const db = await store.createDatabase({ workspaceId: ws.id, name: 'one', readerCount: 0 }, 'http://gw');
      const duplicate = `INSERT INTO databases (id, workspace_id, name, slug, endpoint, status, storage_prefix, reader_count, reader_urls, created_at)
        VALUES ('db_x', '${ws.id}', 'two', '${db.slug}', 'http://gw', 'Provisioning', 'databases/db_x', 0, '[]', 'now')`;
      if (variant.name === 'SQLite') {
        const raw = new Sqlite(location);
        try {
          expect(() => raw.prepare(duplicate).run()).toThrow(/UNIQUE/);
        } finally {
          raw.close();
        }
      } else {
        const client = new pg.Client({ connectionString: location });
        await client.connect();
        try {
          await expect(client.query(duplicate)).rejects.toMatchObject({ code: '23505' });
        } finally {
          await client.end();
        }
      }
    }));

    it('API keys: the secret is shown once, stored only as its SHA-256, never listed; revocation ends the grant', () => withStore(async (store, rawText) => {
      const ws = await store.createWorkspace('w', 'Idea');
      const db = await store.createDatabase({ workspaceId: ws.id, name: 'd', readerCount: 0 }, 'http://gw');
      const reader = await store.createApiKey(db.id, 'dashboard', 'read');
      const writer = await store.createApiKey(db.id, 'backend', 'read_write');
      expect(reader.secret).toMatch(apiKeyPattern);
      expect(writer.secret).not.toBe(reader.secret);

      const raw = await rawText();
      for (const secret of [reader.secret, writer.secret]) {
        expect(raw).not.toContain(secret);
        // Not even the random part without the prefix, nor a long piece of it.
        expect(raw).not.toContain(secret.slice(4, 20));
        expect(raw).toContain(apiKeyHash(secret));
      }

      const listed = await store.listApiKeys(db.id);
      const byId = (x: { id: string }, y: { id: string }) => x.id.localeCompare(y.id);
      expect([...listed].sort(byId)).toEqual([reader.key, writer.key].sort(byId));
      expect(JSON.stringify(listed)).not.toContain(reader.secret.slice(4, 20));

      expect(await store.grantForKeyHash(apiKeyHash(reader.secret))).toEqual({ keyId: reader.key.id, databaseId: db.id, workspaceId: ws.id, permission: 'read' });
      expect(await store.grantForKeyHash(apiKeyHash(writer.secret))).toMatchObject({ permission: 'read_write' });
      // The gateway passes the hash: the secret itself, or a wrong hash, grants nothing.
      expect(await store.grantForKeyHash(reader.secret)).toBeNull();
      expect(await store.grantForKeyHash(apiKeyHash(reader.secret + 'x'))).toBeNull();

      const revoked = await store.revokeApiKey(db.id, reader.key.id);
      expect(revoked.revokedAt).not.toBeNull();
      expect(await store.grantForKeyHash(apiKeyHash(reader.secret))).toBeNull();
      expect(await store.grantForKeyHash(apiKeyHash(writer.secret))).not.toBeNull();
      expect((await store.revokeApiKey(db.id, reader.key.id)).revokedAt).toBe(revoked.revokedAt);
      const validity = new Map((await store.listApiKeys(db.id)).map((k) => [k.id, k.revokedAt === null]));
      expect(validity).toEqual(new Map([[reader.key.id, false], [writer.key.id, true]]));
    }));

    it('a key grants only its own database; keys of a deleted database grant nothing', () => withStore(async (store) => {
      const ws = await store.createWorkspace('w', 'Idea');
      const a = await store.createDatabase({ workspaceId: ws.id, name: 'a', readerCount: 0 }, 'http://gw');
      const b = await store.createDatabase({ workspaceId: ws.id, name: 'b', readerCount: 0 }, 'http://gw');
      const keyOfA = await store.createApiKey(a.id, 'k', 'read_write');
      const keyOfB = await store.createApiKey(b.id, 'k', 'read');
      expect((await store.grantForKeyHash(apiKeyHash(keyOfA.secret)))!.databaseId).toBe(a.id);
      expect((await store.grantForKeyHash(apiKeyHash(keyOfB.secret)))!.databaseId).toBe(b.id);
      // A key cannot be revoked, nor listed, through another database.
      await expect(store.revokeApiKey(b.id, keyOfA.key.id)).rejects.toMatchObject({ code: 'not_found' });
      expect((await store.listApiKeys(b.id)).map((k) => k.id)).toEqual([keyOfB.key.id]);

      await store.markDatabaseDeleted(a.id);
      expect(await store.grantForKeyHash(apiKeyHash(keyOfA.secret))).toBeNull();
      expect((await store.listApiKeys(a.id))[0]!.revokedAt).not.toBeNull();
      expect(await store.grantForKeyHash(apiKeyHash(keyOfB.secret))).not.toBeNull();
      await expect(store.createApiKey(a.id, 'late', 'read')).rejects.toMatchObject({ code: 'not_found' });
    }));

    it('usage is metered per workspace across its databases; the allowance flips when usage reaches the plan\'s', () => withStore(async (store) => {
      expect(await store.planAllowances()).toEqual(defaultPlanAllowances);
      await store.setPlanAllowance('Startup', { readsPerMonth: 10, writesPerMonth: 3 });
      const ws = await store.createWorkspace('w', 'Startup');
      const other = await store.createWorkspace('other', 'Startup');
      expect(await store.allowance(ws.id)).toEqual({ readsAllowed: true, writesAllowed: true });

      await store.recordUsage(ws.id, 'read', 9);
      await store.recordUsage(ws.id, 'write', 2);
      expect(await store.allowance(ws.id)).toEqual({ readsAllowed: true, writesAllowed: true });
      await store.recordUsage(ws.id, 'read', 1);
      expect(await store.allowance(ws.id)).toEqual({ readsAllowed: false, writesAllowed: true });
      await store.recordUsage(ws.id, 'write', 5);
      expect(await store.allowance(ws.id)).toEqual({ readsAllowed: false, writesAllowed: false });
      expect(await store.usage(ws.id)).toMatchObject({ reads: 10, writes: 7, allowance: { readsPerMonth: 10, writesPerMonth: 3 } });
      // The other workspace's usage is its own.
      expect(await store.allowance(other.id)).toEqual({ readsAllowed: true, writesAllowed: true });

      // A bigger plan (or a raised allowance) lets the workspace go on at once.
      await store.updateWorkspace(ws.id, { plan: 'Growth' });
      expect(await store.allowance(ws.id)).toEqual({ readsAllowed: true, writesAllowed: true });

      // Last month's usage is not this month's.
      const lastMonth = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth() - 1, 15));
      expect(await store.usage(ws.id, lastMonth)).toMatchObject({ reads: 0, writes: 0 });
      // Counts sent late go to the month they name (the gateway's meter names the month of admission).
      await store.recordUsage(ws.id, 'read', 4, lastMonth.toISOString().slice(0, 7));
      expect(await store.usage(ws.id, lastMonth)).toMatchObject({ reads: 4, writes: 0 });
      expect(await store.usage(ws.id)).toMatchObject({ reads: 10, writes: 7 });
      await expect(store.recordUsage(ws.id, 'read', 1, '2026-13')).rejects.toMatchObject({ code: 'invalid' });
      expect(await store.allowance('ws_unknown')).toEqual({ readsAllowed: false, writesAllowed: false });
      await expect(store.recordUsage(ws.id, 'read', -1)).rejects.toMatchObject({ code: 'invalid' });
    }));

    it('concurrent usage records all count', () => withStore(async (store) => {
      const ws = await store.createWorkspace('w', 'Idea');
      await Promise.all(Array.from({ length: 50 }, (_, i) => store.recordUsage(ws.id, i % 2 === 0 ? 'read' : 'write', 3)));
      expect(await store.usage(ws.id)).toMatchObject({ reads: 75, writes: 75 });
    }));

    if (variant.name === 'PostgreSQL') {
      it('replicas opening a new store at once apply each migration once', async () => {
        const url = await cluster!.createDatabase(`store_${++databaseCounter}`);
        const stores = await Promise.all(Array.from({ length: 4 }, () => openControlPlane(url)));
        try {
          const ws = await stores[0]!.createWorkspace('shared', 'Idea');
          for (const store of stores) expect(await store.workspace(ws.id)).toMatchObject({ name: 'shared' });
          const client = new pg.Client({ connectionString: url });
          await client.connect();
          try {
            expect((await client.query('SELECT version FROM schema_migrations')).rows).toEqual([{ version: 1 }]);
          } finally {
            await client.end();
          }
        } finally {
          await Promise.all(stores.map((s) => s.close()));
        }
      });
    }

    it('one provisioner lock per store: a second holder is refused until the first lets go', () => withStore(async (store, _raw, location) => {
      const other = await openControlPlane(location);
      try {
        const lock = await store.tryProvisionerLock();
        expect(lock).not.toBeNull();
        expect(await other.tryProvisionerLock()).toBeNull();
        await lock!.release();
        const otherLock = await other.tryProvisionerLock();
        expect(otherLock).not.toBeNull();
        expect(await store.tryProvisionerLock()).toBeNull();
        await otherLock!.release();
      } finally {
        await other.close();
      }
    }));

    it('opening the store again keeps its data and applies no migration twice', async () => {
      const { store, location, rawText } = await variant.open();
      const ws = await store.createWorkspace('kept', 'Growth');
      await store.close();
      const again = await openControlPlane(location);
      try {
        expect(await again.workspace(ws.id)).toMatchObject({ name: 'kept', plan: 'Growth' });
        expect((await rawText()).split('\n')[5]).toMatch(/^\[\{"version":1,/);
        expect(JSON.parse((await rawText()).split('\n')[5]!)).toHaveLength(1);
      } finally {
        await again.close();
      }
    });
  });
}

describe('embedded store in one process', () => {
  it('two stores on one SQLite file share a connection: concurrent transactions neither stall nor fail', async () => {
    const path = join(sqliteDir, 'shared.sqlite');
    const [first, second] = await Promise.all([openControlPlane(path), openControlPlane(`sqlite:${path}`)]);
    try {
      const ws = await first.createWorkspace('w', 'Idea');
      const databases = await Promise.all(Array.from({ length: 6 }, (_, i) => first.createDatabase({ workspaceId: ws.id, name: `d${i}`, readerCount: 0 }, 'http://gw')));
      const started = Date.now();
      // markDatabaseDeleted is a transaction; the other store's writes run at the same time.
      await Promise.all([
        ...databases.map((d, i) => (i % 2 === 0 ? first : second).markDatabaseDeleted(d.id)),
        ...Array.from({ length: 20 }, () => second.recordUsage(ws.id, 'write', 1)),
      ]);
      expect(Date.now() - started, 'no transaction waited out the 5 s busy timeout').toBeLessThan(4_000);
      expect(await first.listDatabases(ws.id)).toEqual([]);
      expect((await second.usage(ws.id)).writes).toBe(20);
    } finally {
      await first.close();
    }
    // The other store still works after the first closed its handle.
    expect(await second.listWorkspaces()).toHaveLength(1);
    await second.close();
  });
});
