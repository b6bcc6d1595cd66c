// `value_map` without a property list renders a read's rows straight from their records
// (src/exec/element-maps.ts); a write batch, or an operator that reads the items, builds
// one Map per row. Both must give the same bytes, for every value kind and key order.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../src/index.js';
import { addN, count, nodes, q, read, str, write, type Json } from './helpers/requests.js';

const valueMap = (input: Json) => ({ value_map: { input } });
const outE = (input: Json) => ({ out_e: { input } });

describe('value_map rendered from records', () => {
  let db: Database;
  const ask = async (body: Json): Promise<string> => {
    const r = await db.queryRaw(JSON.stringify(body));
    expect(r.status, r.body).toBe(200);
    return r.body;
  };

  beforeAll(async () => {
    db = await openDatabase({ storage: 'memory' });
    // Key lists that differ in order, size and byte-wise order (upper case, non-ASCII,
    // a name needing escapes), and every value kind.
    await ask(write([
      q(null, addN('Person', [['name', str('a "quoted"\nname')], ['Zed', { value: { i64: -7 } }], ['é', { value: { f64: 1e21 } }]])),
      q(null, addN('Person', [['é', { value: { f64: 0.1 } }], ['name', str('ünï')], ['Zed', { value: { i64: 0 } }]])),
      q(null, addN('Thing', [['tags', { value: { string_array: ['x', 'y\\'] } }], ['at', { value: { date_time: 1_700_000_000_000 } }],
        ['ok', { value: { bool: true } }], ['v', { value: { f32_array: [0.5, -2] } }], ['n', { value: { i64_array: [1, 2] } }]])),
      q(null, addN('Empty')),
      q(null, addN('Person', [['a\u0001b', str('ctl')], ['name', str('short')]])),
      q(null, { add_e: { input: nodes([0]), label: 'knows', to: { ids: [1, 2] }, properties: [['since', { value: { i64: 2020 } }], ['w', { value: { f64: 2.5 } }]] } }),
    ], []));
  }, 30_000);
  afterAll(async () => { await db.close(); });

  it('renders every node and edge as the Map path does (a write batch builds Maps)', async () => {
    const entries = [q('n', valueMap(nodes('all'))), q('e', valueMap(outE(nodes('all'))))];
    const fromRecords = await ask(read(entries, ['n', 'e']));
    const fromMaps = await ask(write(entries, ['n', 'e']));
    expect(fromRecords).toBe(fromMaps);
    // Keys byte-wise: `$id` and `$label` first, upper case before lower case, é last.
    const n = (JSON.parse(fromRecords) as { n: Record<string, unknown>[] }).n;
    expect(n).toHaveLength(5);
    expect(Object.keys(n[0]!)).toEqual(['$id', '$label', 'Zed', 'name', 'é']);
    expect(n[0]).toMatchObject({ $id: 0, $label: 'Person', Zed: -7, name: 'a "quoted"\nname' });
    expect(Object.keys(n[3]!)).toEqual(['$id', '$label']);
    expect(fromRecords).toContain('"a\\u0001b":"ctl"');
  });

  it('builds the rows when an operator reads them', async () => {
    const body = await ask(read([
      q('rows', valueMap(nodes('all'))),
      q('distinct', { dedup: { input: valueMap({ both: { input: nodes([1, 2]) } }) } }),
      q('counted', count(valueMap(nodes('all')))),
      q('two', { limit: { input: valueMap(nodes('all')), count: { literal: 2 } } }),
    ], ['rows', 'distinct', 'counted', 'two']));
    const r = JSON.parse(body) as { rows: unknown[]; distinct: unknown[]; counted: number; two: unknown[] };
    expect(r.counted).toBe(5);
    expect(r.distinct).toEqual(r.rows.slice(0, 1)); // node 0 twice, once after dedup
    expect(r.two).toEqual(r.rows.slice(0, 2));
  });
});
