// Bounds over the database's life (docs/limits.md): epochs (one per write batch that changes
// something) and node / edge IDs (slots, never reused). Each is lowered here so the tests
// reach it; what the docs promise at the bound is checked: that write refused with
// `500 storage_error`, nothing acknowledged lost, reads and the writes the bound does not
// concern go on, across a restart too.
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/index.js';
import { limits } from '../src/limits.js';
import { addN, count, i64, nodes, q, read, write } from './helpers/requests.js';
import { tempDirs } from './helpers/temp-dirs.js';

const tempDir = tempDirs('lifetime');
type Bound = 'epochMax' | 'nodesMax' | 'edgesMax';
const saved = { epochMax: limits.epochMax, nodesMax: limits.nodesMax, edgesMax: limits.edgesMax };
const lower = (bound: Bound, value: number) => { (limits as Record<Bound, number>)[bound] = value; };
afterEach(() => { for (const bound of Object.keys(saved) as Bound[]) lower(bound, saved[bound]); });

const addOne = (n: number) => write([q('x', addN('U', [['n', i64(n)]]))], ['x']);
const countAll = read([q('c', count(nodes('all')))], ['c']);
const setN = (id: number, n: number) => write([q(null, { set_property: { input: nodes([id]), name: 'n', value: i64(n) } })], []);
const setOnMissing = setN(1_000_000, 1);
const dropNode = (id: number) => write([q(null, { drop: { input: nodes([id]) } })], []);
const edge = (from: number, to: number) => write([q('e', { add_e: { input: nodes([from]), label: 'E', to: { ids: [to] }, properties: [] } })], ['e']);
/** Bounds as low as a table's first 64 KiB allows (20 B a node slot, 24 B an edge slot). */
const NODES = 4096, EDGES = 3072;
const countEdges = read([q('c', count({ edges: { reference: 'all' } }))], ['c']);

describe('epochMax', () => {
  it('refuses every write once reached; reads go on, across a restart, and nothing acknowledged is lost', async () => {
    lower('epochMax', 8);
    const dir = tempDir();
    let db = await openDatabase({ storage: 'disk', path: dir });
    let acknowledged = 0;
    let refusal: { error: string; msg: string } | null = null;
    for (let i = 0; i < 20 && refusal === null; i++) {
      const answer = await db.queryRaw(addOne(i));
      if (answer.status === 200) acknowledged++;
      else refusal = { status: answer.status, ...JSON.parse(answer.body) };
    }
    expect(refusal).toEqual({ status: 500, error: 'storage_error', msg: 'storage error: epoch space exhausted' });
    expect(acknowledged).toBeGreaterThan(0);
    expect(JSON.parse((await db.queryRaw(setN(0, 5))).body)).toMatchObject({ error: 'storage_error' });
    expect(await db.query(countAll)).toEqual({ c: acknowledged });
    // Refused before it runs (the batch would need an epoch to open): the store is read-only.
    expect(JSON.parse((await db.queryRaw(setOnMissing)).body)).toMatchObject({ error: 'storage_error', msg: 'storage error: epoch space exhausted' });
    await db.close();
    db = await openDatabase({ storage: 'disk', path: dir });
    expect(await db.query(countAll)).toEqual({ c: acknowledged });
    expect(JSON.parse((await db.queryRaw(addOne(99))).body)).toMatchObject({ error: 'storage_error', msg: 'storage error: epoch space exhausted' });
    await db.close();
  });
});

describe('nodesMax and edgesMax: IDs are never reused', () => {
  it('refuses a node past the bound, also after deletions; edges and updates go on', async () => {
    lower('nodesMax', NODES); // the smallest a node table's first 64 KiB allows
    const db = await openDatabase();
    for (let i = 0; i < NODES; i += 512) await db.query(write(Array.from({ length: 512 }, (_, k) => q(`n${k}`, addN('U', [['n', i64(i + k)]]))), []));
    const refused = await db.queryRaw(addOne(NODES));
    expect({ status: refused.status, ...JSON.parse(refused.body) }).toEqual({ status: 500, error: 'storage_error', msg: `storage error: node limit ${NODES} reached` });
    await db.query(dropNode(3));
    expect(JSON.parse((await db.queryRaw(addOne(NODES + 1))).body).msg, 'a deleted node keeps its ID').toBe(`storage error: node limit ${NODES} reached`);
    expect(await db.query(countAll)).toEqual({ c: NODES - 1 });
    expect(await db.query(edge(0, 1))).toEqual({ e: [{ $id: 0 }] });
    expect((await db.queryRaw(setN(5, 500))).status).toBe(200);
    await db.close();
  });

  it('refuses an edge past the bound, also after deletions; the refused batch leaves nothing', async () => {
    lower('edgesMax', EDGES);
    const db = await openDatabase();
    await db.query(write([q('a', addN('U')), q('b', addN('U'))], []));
    const toOne = { add_e: { input: nodes([0]), label: 'E', to: { ids: [1] }, properties: [] } };
    for (let i = 0; i < EDGES; i += 512) expect((await db.queryRaw(write(Array.from({ length: 512 }, () => q(null, toOne)), []))).status).toBe(200);
    const refused = await db.queryRaw(write([q('c', addN('U')), q('e', toOne)], []));
    expect({ status: refused.status, ...JSON.parse(refused.body) }).toEqual({ status: 500, error: 'storage_error', msg: `storage error: edge limit ${EDGES} reached` });
    expect(await db.query(countAll), 'the node of the refused batch rolled back').toEqual({ c: 2 });
    await db.query(write([q(null, { drop_edge_by_id: { edges: { ids: [0, 1] } } })], []));
    expect(JSON.parse((await db.queryRaw(edge(1, 0))).body).msg).toBe(`storage error: edge limit ${EDGES} reached`);
    expect(await db.query(countEdges)).toEqual({ c: EDGES - 2 });
    expect((await db.queryRaw(addOne(7))).status, 'nodes are another sequence').toBe(200);
    await db.close();
  });
});
