// The provisioner's hook (BackendRuntime, src/cloud/provision.ts) with a runtime of the
// test's own: in-process HTTP servers that answer /readyz, standing in for servers run
// "elsewhere". Proves the provisioner needs nothing but start() -> {url, exited, stop},
// and that a failed provisioning leaves no started server behind.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControlPlaneStore } from '../src/cloud/admin-store.js';
import { openControlPlane } from '../src/cloud/open.js';
import { Provisioner, type BackendRuntime, type BackendSpec, type RunningBackend } from '../src/cloud/provision.js';
import { tempDir } from './helpers/cli.js';

let dir = '';
let store: ControlPlaneStore;

beforeAll(async () => {
  dir = tempDir('cloud-runtime');
  store = await openControlPlane(join(dir, 'cp.sqlite'));
});

afterAll(async () => {
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Servers on loopback that answer /readyz 200; `plan` decides per spec how each start goes. */
class FakeRuntime implements BackendRuntime {
  readonly specs: BackendSpec[] = [];
  readonly open = new Set<Server>();
  constructor(private readonly plan: (spec: BackendSpec) => { delayMs: number; fail?: boolean }) {}

  async start(spec: BackendSpec): Promise<RunningBackend> {
    this.specs.push(spec);
    const { delayMs, fail } = this.plan(spec);
    await new Promise((r) => setTimeout(r, delayMs));
    if (fail === true) throw new Error(`${spec.role} ${spec.ordinal} could not start`);
    const server = createServer((req, res) => res.writeHead(req.url === '/readyz' ? 200 : 404).end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.open.add(server);
    let exit!: () => void;
    const exited = new Promise<void>((resolve) => { exit = resolve; });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return {
      url, exited,
      stop: async () => {
        if (this.open.delete(server)) await new Promise<void>((resolve) => server.close(() => resolve()));
        exit();
      },
    };
  }
}

describe('provisioner with a runtime of its own', () => {
  it('records the URLs the runtime gives, with each database\'s own storage', async () => {
    const runtime = new FakeRuntime(() => ({ delayMs: 0 }));
    const provisioner = new Provisioner(store, runtime, { storage: { kind: 's3', bucket: 'b', prefix: 'root/x', endpointUrl: 'http://s3.test' } });
    try {
      const ws = await store.createWorkspace('w', 'Idea');
      const db = await store.createDatabase({ workspaceId: ws.id, name: 'd', readerCount: 2 }, 'http://g');
      await provisioner.provision(db.id);
      const route = await store.database(db.id);
      expect(route!.status).toBe('Active');
      expect([route!.writerUrl, ...route!.readerUrls].sort()).toEqual(provisioner.running(db.id).sort());
      expect(runtime.specs.map((s) => `${s.role}${s.ordinal}`).sort()).toEqual(['reader0', 'reader1', 'writer0']);
      for (const spec of runtime.specs) {
        expect(spec.storage).toEqual({ kind: 's3', uri: `s3://b/root/x/databases/${db.id}`, endpointUrl: 'http://s3.test' });
      }
      // The writer is started and ready before any reader starts.
      expect(runtime.specs[0]!.role).toBe('writer');
    } finally {
      await provisioner.close();
    }
    expect(runtime.open.size).toBe(0);
  });

  it('a reader that fails while another is still starting: Failed, and the slow one is stopped too', async () => {
    const runtime = new FakeRuntime((spec) => spec.role === 'writer' ? { delayMs: 0 }
      : spec.ordinal === 0 ? { delayMs: 10, fail: true } : { delayMs: 400 });
    const provisioner = new Provisioner(store, runtime, { storage: { kind: 'directory', path: join(dir, 'data') } });
    try {
      const ws = await store.createWorkspace('w', 'Idea');
      const db = await store.createDatabase({ workspaceId: ws.id, name: 'd', readerCount: 2 }, 'http://g');
      await provisioner.provision(db.id);
      const record = await store.databaseRecord(db.id);
      expect(record).toMatchObject({ status: 'Failed', statusDetail: 'reader 0 could not start' });
      expect(runtime.specs).toHaveLength(3);
      // Longer than the slow reader's start: a server it left behind would be open by now.
      await new Promise((r) => setTimeout(r, 600));
      expect(runtime.open.size).toBe(0);
      expect(provisioner.running(db.id)).toEqual([]);
    } finally {
      await provisioner.close();
    }
  });
});
