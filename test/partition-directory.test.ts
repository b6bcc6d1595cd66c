// The tenant -> partition directory of vector and text indexes (index/partition-directory.ts):
// every tenant finds its own root through table growth, tenants equal under values.md §7.1
// are one, values without an equality key share a bucket and stay apart, replaced roots are
// found, unknown tenants find nothing; and many tenants through the database.
import { describe, expect, it } from 'vitest';
import { Store } from '../src/store/store.js';
import { PartitionDirectory } from '../src/index/partition-directory.js';
import { F32 } from '../src/protocol/value.js';
import { openDatabase } from '../src/index.js';
import { q, read, str, write } from './helpers/requests.js';
import { buildIndex, ok } from './helpers/search-indexes.js';

describe('partition directory', () => {
  it('finds every tenant through growth, with typed equality and shared buckets', () => {
    const store = Store.create();
    const dir = PartitionDirectory.create(store.topology);
    const tenants = [
      ...Array.from({ length: 3000 }, (_, i) => `tenant-${i}`),
      ...Array.from({ length: 500 }, (_, i) => BigInt(i * 7)),
      // Generic arrays have no equality key: one bucket, told apart by value.
      ...Array.from({ length: 40 }, (_, i) => [BigInt(i), 'x']),
    ];
    tenants.forEach((t, i) => dir.add(t as never, 1000 + i));
    const reader = PartitionDirectory.attach(store.topology, dir.at);
    tenants.forEach((t, i) => expect(reader.find(t as never)).toBe(1000 + i));
    // f64 14.0 and f32 14 are the i64 14 tenant; 14.5 is nobody.
    expect(reader.find(14.0)).toBe(1000 + 3000 + 2);
    expect(reader.find(new F32(14))).toBe(1000 + 3000 + 2);
    expect(reader.find(14.5)).toBe(0);
    expect(reader.find('nobody')).toBe(0);
    expect(reader.find([99n, 'x'])).toBe(0);
    dir.replaceRoot(1000 + 17, 77_777);
    expect(reader.find('tenant-17')).toBe(77_777);
    expect(reader.find('tenant-18')).toBe(1018);
  });

  it('keeps an unpartitioned index in one entry', () => {
    const store = Store.create();
    const dir = PartitionDirectory.create(store.topology);
    expect(dir.find(undefined)).toBe(0);
    dir.add(undefined, 42);
    expect(dir.find(undefined)).toBe(42);
  });

  it('serves thousands of tenants through a vector and a text index, each seeing only its own', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await buildIndex(db, { node_vector: { label: 'D', property: 'v', dimension: 2, metric: 'euclidean', tenant_property: 't' } });
    await buildIndex(db, { node_text: { label: 'D', property: 'body', tenant_property: 't' } });
    const n = 3000;
    for (let at = 0; at < n; at += 500) {
      await ok(db, write(Array.from({ length: 500 }, (_, i) => q(null, { add_n: { label: 'D', properties: [['t', str(`t${at + i}`)], ['v', { value: { f32_array: [at + i, 0] } }], ['body', str(`word${at + i} shared`)]] } })), []));
    }
    for (const t of [0, 1, 1234, 2999]) {
      const answer = await ok(db, read([
        q('v', { vector_search_nodes: { label: 'D', property: 'v', tenant_value: str(`t${t}`), query_vector: { value: { f32_array: [0, 0] } }, k: { literal: 10 } } }),
        q('x', { text_search_nodes: { label: 'D', property: 'body', tenant_value: str(`t${t}`), query_text: str('shared'), k: { literal: 10 } } }),
      ], ['v', 'x']));
      expect((answer['v'] as { $id: number }[]).map((r) => r.$id)).toEqual([t]);
      expect((answer['x'] as { $id: number }[]).map((r) => r.$id)).toEqual([t]);
    }
    await db.close();
  });
});
