// Text indexes through the embedded handle (indexes.md §2, §5, §7, §8.4): lifecycle of the
// text family, searches and their planning and run-time errors, values a write may store,
// tenant partitions, answers against a brute-force BM25 written here under inserts, updates
// and deletes, `*_within` scoring exactly like the source search, analyzers of the embedded
// API, and a restart on disk that loads the partitions instead of building them again.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openDatabase, type Database } from '../src/index.js';
import { TextPhysical } from '../src/index/text-index.js';
import { textMaintainCounters } from '../src/text/index.js';
import { limits } from '../src/limits.js';
import { tempDirs } from './helpers/temp-dirs.js';
import { buildIndex, createIndex, fails, ok, random, runOn, settleIndexWork } from './helpers/search-indexes.js';
import { Store } from '../src/store/store.js';
import { loadSections, sectionsAt } from '../src/store/snapshot-sections.js';
import { q, read, str, write } from './helpers/requests.js';

const newDir = tempDirs('text-index');

const textSpec = (fields: Record<string, unknown>, element: 'node' | 'edge' = 'node') => ({ [`${element}_text`]: fields });
const create = createIndex;
const build = buildIndex;




const doc = (body: unknown, extra: [string, unknown][] = []) => q(null, { add_n: { label: 'Doc', properties: [['body', body], ...extra] } });
const search = (query: unknown, k: unknown = { literal: 10 }, more: Record<string, unknown> = {}) =>
  ({ text_search_nodes: { label: 'Doc', property: 'body', query_text: query, k, ...more } });
const hits = async (db: Database, query: string, k = 10, more: Record<string, unknown> = {}) =>
  (await ok(db, read([q('r', search(str(query), { literal: k }, more))], ['r'])))['r'] as { $id: number; $score: number }[];


/**
 * The test's own BM25 (k1 1.2, b 0.75, idf ln(1 + (N - df + 0.5) / (df + 0.5))), from the
 * texts as they are, with the test's own tokenizer: top k by descending score, ties by id.
 */
function bruteForce(texts: Map<number, string>, query: string, k: number): { id: number; score: number }[] {
  const tokens = (s: string): string[] => s.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  const terms = [...new Set(tokens(query))];
  const docs = [...texts.entries()].map(([id, text]) => ({ id, words: tokens(text) }));
  const avgdl = docs.reduce((n, d) => n + d.words.length, 0) / docs.length;
  const df = terms.map((t) => docs.filter((d) => d.words.includes(t)).length);
  const out: { id: number; score: number }[] = [];
  for (const d of docs) {
    let score = 0, matched = false;
    terms.forEach((t, i) => {
      const tf = d.words.filter((w) => w === t).length;
      if (tf === 0) return;
      matched = true;
      const idf = Math.log(1 + (docs.length - df[i]! + 0.5) / (df[i]! + 0.5));
      score += idf * ((tf * 2.2) / (tf + 1.2 * (0.25 + 0.75 * (d.words.length / avgdl))));
    });
    if (matched) out.push({ id: d.id, score });
  }
  return out.sort((a, b) => b.score - a.score || a.id - b.id).slice(0, k);
}

afterEach(() => vi.restoreAllMocks());

describe('text index lifecycle and searches', () => {
  it('builds over existing data with the text family stages and ranks by BM25 (descending, ties by id)', async () => {
    const db = await openDatabase({ storage: 'memory' });
    const texts = new Map([[0, 'graphs connect nodes and edges'], [1, 'vectors and cosine distance'], [2, 'graphs in production graphs'], [3, 'Graphs!']]);
    await ok(db, write([...texts.values()].map((t) => doc(str(t))), []));
    const done = await build(db, textSpec({ label: 'Doc', property: 'body' }));
    expect(done).toMatchObject({ status: 'succeeded', family: 'text', operation_kind: 'build', stage: 'activate' });
    expect((done['progress'] as Record<string, string>)['output_operations']).toBe('4');
    const answer = await hits(db, 'graphs nodes');
    expect(answer).toEqual(bruteForce(texts, 'graphs nodes', 10).map((w) => ({ $id: w.id, $score: Math.fround(w.score) })));
    expect(answer.map((r) => r.$id).sort()).toEqual([0, 2, 3]);
    for (let i = 1; i < answer.length; i++) expect(answer[i - 1]!.$score).toBeGreaterThanOrEqual(answer[i]!.$score);
    // Single precision, widened.
    for (const r of answer) expect(Math.fround(r.$score)).toBe(r.$score);
    expect(await hits(db, 'nothing matches this')).toEqual([]);
    expect(await hits(db, '...')).toEqual([]);
    expect((await hits(db, 'graphs', 1)).length).toBe(1);
    // $score stays on the row through value_map when listed.
    const mapped = (await ok(db, read([q('r', { value_map: { input: search(str('cosine')), properties: ['$score'] } })], ['r'])))['r'] as { $score: number }[];
    expect(mapped).toEqual([{ $score: (await hits(db, 'cosine'))[0]!.$score }]);
    await db.close();
  });

  it('answers the planning checks of §7.2 and the run-time rules of §7.3', async () => {
    const db = await openDatabase({ storage: 'memory' });
    const plan = async (query: unknown, k: unknown = { literal: 1 }, more: Record<string, unknown> = {}) => fails(db, read([q('r', search(query, k, more))], ['r']));
    expect(await plan(str('x'))).toMatchObject({ status: 400, error: 'index_not_found', msg: 'planner error: missing Node text index for `Doc.body`' });
    await build(db, textSpec({ label: 'Doc', property: 'body' }));
    expect(await plan(str(''))).toMatchObject({ status: 400, error: 'invalid_search_input' });
    expect(await plan({ value: { i64: 3 } })).toMatchObject({ status: 400, error: 'invalid_search_input' });
    expect(await plan(str('x'), { literal: 0 })).toMatchObject({ status: 400, error: 'invalid_search_result_count' });
    expect(await plan(str('x'), { literal: 1 }, { tenant_value: str('t') })).toMatchObject({ status: 400, error: 'invalid_search_tenant' });
    const run = (parameters: unknown) => fails(db, read([q('r', search({ expr: { param: 'q' } }, { expr: { param: 'k' } }))], ['r'], { parameters }));
    expect(await run({ q: 5, k: 1 })).toMatchObject({ status: 500, error: 'invalid_query' });
    expect(await run({ q: '', k: 1 })).toMatchObject({ status: 500, error: 'invalid_query' });
    expect(await run({ q: 'x', k: 0 })).toMatchObject({ status: 500, error: 'invalid_query' });
    await ok(db, write([doc(str('hello world'))], []));
    expect((await ok(db, read([q('r', search({ expr: { param: 'q' } }, { expr: { param: 'k' } }))], ['r'], { parameters: { q: 'WORLD', k: 3 } })))['r']).toHaveLength(1);
    await db.close();
  });

  it('refuses stored values §8.4 forbids, rolling the write back, and bounds the text one write indexes', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await build(db, textSpec({ label: 'Doc', property: 'body' }));
    const attempt = (body: unknown) => fails(db, write([q(null, { add_n: { label: 'Other', properties: [] } }), doc(body)], []));
    expect(await attempt({ value: { i64: 5 } })).toMatchObject({ status: 500, error: 'invalid_index_source_data' });
    expect(await attempt({ value: 'null' })).toMatchObject({ status: 500, error: 'invalid_index_source_data' });
    expect(await attempt({ value: { array: [{ string: 'a' }] } })).toMatchObject({ status: 500, error: 'invalid_index_source_data' });
    expect((await ok(db, read([q('r', { count: { input: { nodes: { reference: 'all' } } } })], ['r'])))['r']).toBe(0);
    // A string_array is its items joined with newlines.
    await ok(db, write([doc({ value: { string_array: ['alpha beta', 'gamma'] } })], []));
    expect((await hits(db, 'gamma')).length).toBe(1);
    const chars = limits.textMutationCharsMax;
    (limits as { textMutationCharsMax: number }).textMutationCharsMax = 100;
    try {
      expect(await fails(db, write([doc(str('x'.repeat(60))), doc(str('y'.repeat(60)))], []))).toMatchObject({ status: 500, error: 'active_text_mutation_limit_exceeded' });
      // The count is per batch: the same texts in two writes pass.
      await ok(db, write([doc(str('x'.repeat(60)))], []));
      await ok(db, write([doc(str('y'.repeat(60)))], []));
    } finally {
      (limits as { textMutationCharsMax: number }).textMutationCharsMax = chars;
    }
    await db.close();
  });

  it('blocks a build over invalid source data and passes a retry once the data is fixed', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await ok(db, write([doc(str('fine')), doc({ value: { f64: 1.5 } })], []));
    const blocked = await build(db, textSpec({ label: 'Doc', property: 'body' }));
    expect(blocked).toMatchObject({ status: 'blocked', stage: 'validate_manifests', blocker_code: 'invalid_source_data' });
    await ok(db, write([q(null, { set_property: { input: { nodes: { reference: { ids: [1] } } }, name: 'body', value: str('fixed now') } })], []));
    await ok(db, write([q('r', { retry_index_operation: { operation_id: blocked['operation_id'] } })], ['r']));
    for (let i = 0; i < 1000; i++) {
      const s = (await ok(db, read([q('r', { get_index_operation: { operation_id: blocked['operation_id'] } })], ['r'])))['r'] as Record<string, string>;
      if (s['status'] === 'succeeded') break;
      if (i === 999) throw new Error(`retry did not succeed: ${JSON.stringify(s)}`);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    expect((await hits(db, 'fixed')).map((r) => r.$id)).toEqual([1]);
    await db.close();
  });

  it('equals a brute-force BM25 through inserts, updates, deletes and rolled-back writes', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await build(db, textSpec({ label: 'Doc', property: 'body' }));
    const rnd = random(5);
    // A Zipf-ish vocabulary: low word numbers are common.
    const word = () => `w${Math.floor(Math.pow(rnd(), 2.5) * 60)}`;
    const text = () => Array.from({ length: 1 + Math.floor(rnd() * 12) }, word).join(rnd() < 0.5 ? ' ' : ', ');
    const texts = new Map<number, string>();
    for (let round = 0; round < 25; round++) {
      const batch = Array.from({ length: 8 }, text);
      const added = await ok(db, write(batch.map((t, i) => q(`n${i}`, { add_n: { label: 'Doc', properties: [['body', str(t)]] } })), batch.map((_, i) => `n${i}`)));
      batch.forEach((t, i) => texts.set((added[`n${i}`] as { $id: number }[])[0]!.$id, t));
      const ids = [...texts.keys()];
      const changed = ids[Math.floor(rnd() * ids.length)]!, gone = ids[Math.floor(rnd() * ids.length)]!;
      const t = text();
      await ok(db, write([q(null, { set_property: { input: { nodes: { reference: { ids: [changed] } } }, name: 'body', value: str(t) } })], []));
      texts.set(changed, t);
      if (round % 3 === 0 && gone !== changed) {
        await ok(db, write([q(null, { drop: { input: { nodes: { reference: { ids: [gone] } } } } })], []));
        texts.delete(gone);
      }
      // A write that fails after indexing a text leaves nothing.
      await fails(db, write([doc(str('w1 w2 w3')), doc({ value: { i64: 1 } })], []));
      for (const query of [word(), `${word()} ${word()}`, `${word()} ${word()} ${word()} ${word()}`]) {
        const want = bruteForce(texts, query, 10);
        const got = await hits(db, query, 10);
        expect(got.map((r) => r.$id), `query "${query}" in round ${round}`).toEqual(want.map((w) => w.id));
        got.forEach((r, i) => expect(r.$score).toBe(Math.fround(want[i]!.score)));
      }
    }
    await db.close();
  });

  it('scores *_within candidates exactly like the source search, with the whole partition\'s statistics', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await build(db, textSpec({ label: 'Doc', property: 'body' }));
    await ok(db, write([doc(str('red apple')), doc(str('green apple pie')), doc(str('red red wine')), doc(str('blue sky')), q(null, { add_n: { label: 'Tag', properties: [['body', str('red')]] } })], []));
    const source = await hits(db, 'red apple');
    const within = (ids: number[], k = 10) => read([q('r', { text_search_nodes_within: { input: { nodes: { reference: { ids } } }, label: 'Doc', property: 'body', query_text: str('red apple'), k: { literal: k } } })], ['r']);
    // Node 3 matches no term, node 4 is a Tag: no rows for them.
    const answer = (await ok(db, within([3, 2, 1, 0, 4])))['r'] as { $id: number; $score: number }[];
    expect(answer).toEqual(source.filter((r) => [0, 1, 2].includes(r.$id)));
    expect((await ok(db, within([1, 2], 1)))['r']).toEqual([source.filter((r) => r.$id === 1 || r.$id === 2)[0]]);
    await db.close();
  });

  it('partitions by tenant: statistics and answers per tenant, a tenantless element is invalid source data', async () => {
    const db = await openDatabase({ storage: 'memory' });
    await build(db, textSpec({ label: 'Doc', property: 'body', tenant_property: 'team' }));
    await ok(db, write([doc(str('shared words here'), [['team', str('a')]]), doc(str('shared words there'), [['team', str('b')]]), doc(str('only in a'), [['team', str('a')]])], []));
    const tenantHits = async (team: string, query: string) => (await hits(db, query, 10, { tenant_value: str(team) })).map((r) => r.$id);
    expect(await tenantHits('a', 'shared')).toEqual([0]);
    expect(await tenantHits('b', 'shared')).toEqual([1]);
    expect(await tenantHits('c', 'shared')).toEqual([]);
    expect(await fails(db, write([doc(str('no team'))], []))).toMatchObject({ status: 500, error: 'invalid_index_source_data' });
    expect(await fails(db, read([q('r', search(str('shared')))], ['r']))).toMatchObject({ status: 500, error: 'invalid_query' });
    await db.close();
  });

  it('offers the embedded handle other analyzers, part of the definition', async () => {
    const db = await openDatabase({ storage: 'memory', textAnalyzer: 'standard_stem_en' });
    await ok(db, write([doc(str('The runner was running')), doc(str('a quiet walk'))], []));
    await build(db, textSpec({ label: 'Doc', property: 'body' }));
    expect((await hits(db, 'runs')).map((r) => r.$id)).toEqual([0]);
    await db.close();
    const plain = await openDatabase({ storage: 'memory' });
    await ok(plain, write([doc(str('The runner was running'))], []));
    await build(plain, textSpec({ label: 'Doc', property: 'body' }));
    expect(await hits(plain, 'runs')).toEqual([]);
    await plain.close();
    await expect(openDatabase({ storage: 'memory', textAnalyzer: 'klingon' as never })).rejects.toThrow(/unknown text analyzer/);
  });
});

describe('text indexes on disk', () => {
  it('survive a restart with their partitions loaded from the snapshot, and take later writes', async () => {
    const path = newDir();
    let db = await openDatabase({ storage: 'disk', path });
    await ok(db, write([doc(str('alpha beta')), doc(str('beta gamma')), doc(str('gamma delta'))], []));
    await build(db, textSpec({ label: 'Doc', property: 'body' }));
    await ok(db, write([doc(str('beta beta beta'))], []));
    const before = await hits(db, 'beta gamma');
    await db.close();
    const materialize = vi.spyOn(TextPhysical.prototype, 'materialize');
    db = await openDatabase({ storage: 'disk', path });
    expect(materialize).not.toHaveBeenCalled();
    expect(await hits(db, 'beta gamma')).toEqual(before);
    await ok(db, write([q(null, { drop: { input: { nodes: { reference: { ids: [1] } } } } })], []));
    const after = await hits(db, 'beta gamma');
    expect(after.map((r) => r.$id)).not.toContain(1);
    await db.close();
    db = await openDatabase({ storage: 'disk', path });
    expect(await hits(db, 'beta gamma')).toEqual(after);
    await db.close();
  });
});

describe('text partitions in snapshots', () => {
  const run = runOn;
  const settleIndexes = settleIndexWork;
  const everything = (store: Store, query: string) => run(store, read([q('r', { text_search_nodes: { label: 'Doc', property: 'body', tenant_value: { expr: { param: 't' } }, query_text: str(query), k: { literal: 1000 } } })], ['r'], { parameters: { t: 'a' } }), 'reader')['r'];

  it('a snapshot cut while the writer inserts, updates and deletes holds the partitions as of the cut, and loads without a rebuild', () => {
    const rnd = random(21);
    const text = () => Array.from({ length: 1 + Math.floor(rnd() * 8) }, () => `w${Math.floor(rnd() * 30)}`).join(' ');
    const live = Store.create(), upToCut = Store.create();
    const both = (request: unknown) => { run(live, request); run(upToCut, request); };
    both(create(textSpec({ label: 'Doc', property: 'body', tenant_property: 'team' })));
    settleIndexes(live);
    settleIndexes(upToCut);
    for (let b = 0; b < 4; b++) both(write(Array.from({ length: 100 }, (_, i) => doc(str(text()), [['team', str(i % 3 === 0 ? 'b' : 'a')]])), []));
    const cut = live.cut();
    run(live, write(Array.from({ length: 100 }, () => doc(str(text()), [['team', str('a')]])), []));
    run(live, write([q(null, { set_property: { input: { nodes: { reference: { ids: [1, 2, 4] } } }, name: 'body', value: str('w1 w1 w1') } })], []));
    run(live, write([q(null, { drop: { input: { nodes: { reference: { ids: [5, 7, 8] } } } } })], []));
    // Drop most documents and let the merges run: they must keep what the cut's export reads.
    run(live, write([q(null, { drop: { input: { nodes: { reference: { ids: Array.from({ length: 300 }, (_, i) => 10 + i) } } } } })], []));
    settleIndexes(live);
    const sections = sectionsAt(live.shared, cut);
    expect(sections.map((s) => s.name)).toContain('texts');
    const materialize = vi.spyOn(TextPhysical.prototype, 'materialize');
    const loaded = loadSections(sections);
    expect(materialize).not.toHaveBeenCalled();
    for (const query of ['w1', 'w2 w3', 'w4 w5 w6 w7']) expect(everything(loaded, query)).toEqual(everything(upToCut, query));
    const later = write([doc(str('w1 w9'), [['team', str('a')]]), q(null, { drop: { input: { nodes: { reference: { ids: [3] } } } } })], []);
    run(loaded, later);
    run(upToCut, later);
    for (const query of ['w1', 'w9 w2']) expect(everything(loaded, query)).toEqual(everything(upToCut, query));
  });

  it('merges wait while a cut older than the deletions is held, and drop the dead postings once it is released', () => {
    const store = Store.create();
    run(store, create(textSpec({ label: 'Doc', property: 'body' })));
    settleIndexes(store);
    run(store, write(Array.from({ length: 400 }, (_, i) => doc(str(`common word${i % 10}`))), []));
    const cut = store.cut();
    const before = textMaintainCounters.postingsDropped;
    run(store, write([q(null, { drop: { input: { nodes: { reference: { ids: Array.from({ length: 300 }, (_, i) => i) } } } } })], []));
    settleIndexes(store);
    // The export of the cut may still read the dropped documents' postings.
    expect(textMaintainCounters.postingsDropped).toBe(before);
    store.releaseCut(cut);
    run(store, write([doc(str('one more'))], []));
    settleIndexes(store);
    expect(textMaintainCounters.postingsDropped).toBeGreaterThan(before);
    expect(run(store, read([q('r', search(str('common'), { literal: 500 }))], ['r']), 'reader')['r']).toHaveLength(100);
  });
});

