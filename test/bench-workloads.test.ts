// The bench's client workloads (issue 13): bodies built from templates with random holes
// must be what the client library sends, differ only where the hole is, and be accepted
// by the engine. No timing here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../src/index.js';
import { defineParams, g, readBatch } from '../src/client/index.js';
import * as q from '../bench/queries.js';
import { sampleBodies, wrkTemplateScript } from '../bench/loadgen.js';

const NODES = 20;

describe('bench client workloads', () => {
  let db: Database;
  beforeAll(async () => {
    db = await openDatabase({ storage: 'memory' });
    for (let i = 0; i < NODES; i++) expect((await db.queryRaw(q.addUser(i))).status).toBe(200);
    const edges = { rows: [{ s: 0, d: 1 }, { s: 1, d: 2 }, { s: 0, d: 3 }] };
    const head = q.addEdgesChunk({ spec: { nodes: NODES, edges: 3 }, src: Uint32Array.of(0, 1, 0), dst: Uint32Array.of(1, 2, 3) } as never, 0, 3);
    expect(JSON.parse(head).parameters).toEqual(edges);
    expect((await db.queryRaw(head)).status).toBe(200);
  });
  afterAll(async () => { await db.close(); });

  it('the parameterized point lookup is the client library text with the ID in parameters', () => {
    const t = q.pointLookupParam(NODES);
    expect(t.holes).toEqual([NODES]);
    const p = defineParams({ id: 'i64' });
    const expected = readBatch(p).varAs('r', g().n(p.ref('id')).valueMap()).returning(['r']).toJSON({ id: 7 });
    expect(q.fill(t, [7])).toBe(expected);
    // One query text: two fills differ only in parameters.
    const a = JSON.parse(q.fill(t, [3])), b = JSON.parse(q.fill(t, [11]));
    expect(a.query).toEqual(b.query);
    expect([a.parameters.id, b.parameters.id]).toEqual([3, 11]);
  });

  it('the literal point lookup puts the ID in the query text', () => {
    const t = q.pointLookupLiteral(NODES);
    expect(q.fill(t, [5])).toBe(q.pointLookup(5));
  });

  it('every template fills to a request the engine answers with rows', async () => {
    const reads = [q.pointLookupLiteral(NODES), q.pointLookupParam(NODES), q.oneHopRowsParam(NODES), q.twoHopRowsParam(NODES)];
    for (const t of reads) {
      const res = await db.queryRaw(q.fill(t, [0]));
      expect(res.status, res.body).toBe(200);
      expect((JSON.parse(res.body) as { r: { $id: number }[] }).r.length).toBeGreaterThan(0);
    }
    const twoHop = JSON.parse((await db.queryRaw(q.fill(q.twoHopRowsParam(NODES), [0]))).body) as { r: { $id: number }[] };
    expect(twoHop.r.map((x) => x.$id)).toEqual([2]);
    for (const t of [q.addUserParam(), q.setScoreParam(NODES)]) {
      const res = await db.queryRaw(q.fill(t, t.holes.map((h) => h - 1)));
      expect(res.status, res.body).toBe(200);
    }
    const after = JSON.parse((await db.queryRaw(q.pointLookup(NODES - 1))).body) as { r: { score: number }[] };
    expect(after.r[0]!.score).toBe(999.5);
  });

  it('the wrk script carries every piece and hole range, and the samples fill each template', () => {
    const mix = [{ share: 0.9, template: q.pointLookupParam(NODES) }, { share: 0.1, template: q.setScoreParam(NODES) }];
    const lua = wrkTemplateScript(mix, 1);
    for (const { template } of mix) {
      for (const piece of template.pieces) expect(lua).toContain(piece);
      expect(lua).toContain(`holes = { ${template.holes.join(', ')} }`);
    }
    expect(lua).toContain('upto = 0.900000');
    expect(sampleBodies({ mix })).toEqual(mix.map(({ template: t }) => q.fill(t, t.holes.map((h) => h >> 1))));
  });
});
