// The real client's conformance corpus (../shared/conformance/corpus/runtime, written by an
// existing client of this protocol) replayed through the gateway with an API key, against
// the same corpus replayed straight to an identical server: every answer, status and
// body, must be byte for byte the same (the gateway forwards bodies and answers unchanged),
// except index operation IDs, which are random UUIDs on every server.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../src/gateway/gateway.js';
import { spawnBackend, type SpawnedBackend } from './helpers/backend-server.js';
import { MemoryControlPlane } from './helpers/memory-control-plane.js';
import { startRedis, type RedisServer } from './helpers/redis.js';

const here = dirname(fileURLToPath(import.meta.url));
const corpus = [join(here, '../../shared/conformance/corpus'), join(here, '../shared/conformance/corpus')].find(existsSync);

const randomUuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

let redis: RedisServer;
let direct: SpawnedBackend;
let behind: SpawnedBackend;
let gateway: Gateway;
let key: string;

describe.skipIf(corpus === undefined)('the conformance corpus through the gateway', () => {
  beforeAll(async () => {
    redis = await startRedis();
    [direct, behind] = await Promise.all([spawnBackend(['--readers', '1']), spawnBackend(['--readers', '1'])]);
    const cp = new MemoryControlPlane();
    cp.addWorkspace('ws_corpus', 'Growth');
    cp.addDatabase({ id: 'db_corpus', workspaceId: 'ws_corpus', writerUrl: behind.url, readerUrls: [], rateLimit: { perSecond: 100_000, burst: 100_000 } });
    key = cp.addKey('db_corpus', 'read_write').secret;
    gateway = await startGateway({ controlPlane: cp, redisUrl: redis.url, logDestination: new Writable({ write: (_c, _e, done) => done() }) });
  }, 60_000);

  afterAll(async () => {
    await gateway?.close();
    await Promise.all([direct?.stop(), behind?.stop()]);
    await redis?.dispose();
  });

  it('answers every runtime/ request exactly as the server does directly', async () => {
    const dir = join(corpus!, 'runtime');
    const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
    expect(files.length).toBeGreaterThan(200);
    const differences: string[] = [];
    let ok = 0;
    for (const file of files) {
      const body = readFileSync(join(dir, file));
      const send = async (url: string, headers: Record<string, string>): Promise<string> => {
        const res = await fetch(`${url}/v2/query`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
        return `${res.status} ${(await res.text()).replace(randomUuid, '<uuid>')}`;
      };
      const expected = await send(direct.url, {});
      const actual = await send(gateway.url, { authorization: `Bearer ${key}`, 'x-svc-tenant-id': 'db_corpus' });
      if (actual !== expected) differences.push(`${file}:\n  direct:  ${expected.slice(0, 300)}\n  gateway: ${actual.slice(0, 300)}`);
      if (actual.startsWith('200 ')) ok++;
    }
    expect(differences).toEqual([]);
    expect(ok).toBe(files.length);
  });
});
