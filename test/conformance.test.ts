// Replays ../shared/conformance/corpus: request bodies produced by an existing client of
// this protocol. runtime/ runs in file-name order against one fresh database and every
// fixture must answer 200, except those needing a feature listed in `pendingFeatures`
// (each skip is reported with its reason). json-only/ must decode, and every json-only
// request that needs no index must then execute on the state runtime/ left: 200, except
// three whose variables the protocol itself makes an error (specErrors below).
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../src/index.js';
import { decodeRequest } from '../src/protocol/decode.js';
import { SvcError } from '../src/protocol/errors.js';

const here = dirname(fileURLToPath(import.meta.url));
const corpus = [join(here, '../../shared/conformance/corpus'), join(here, '../shared/conformance/corpus')].find(existsSync);

/** Operations not built yet, with the issue that brings them (none left). */
const pendingFeatures: Record<string, string> = {};

/**
 * json-only requests whose answer the protocol fixes as an error on the state runtime/
 * leaves: they read a variable that is unbound or holds a count, re-create an index with
 * another definition, or search an index the way its definition or its drop forbids
 * (shape-only fixtures, never meant to run clean).
 */
const specErrors: Record<string, { status: number; error: string; because: string }> = {
  '900-exhaustive-raw-read-steps.json': { status: 500, error: 'invalid_query', because: '`without` names the unbound variable `missing` (operations.md §5.7)' },
  '904-empty-query-and-node-edge-ref-shapes.json': { status: 500, error: 'invalid_query', because: '`{"var": "all_nodes"}` names a count, not rows (operations.md §2.1)' },
  '911-range-index-direction.json': { status: 500, error: 'index_definition_conflict', because: 'runtime/020 created ParityUser.age as an asc range index; direction is part of the definition (indexes.md §1, §3)' },
  '905-empty-traversal-source-mutators.json': { status: 500, error: 'invalid_query', because: '`inject` reads the unbound variable `some_var` (operations.md §3.6)' },
  '901-exhaustive-raw-write-steps.json': { status: 500, error: 'index_definition_conflict', because: 'it creates ParityUser.externalId as a unique equality index; runtime/020 made it non-unique, and uniqueness is part of the definition (indexes.md §1, §3)' },
  '903-empty-source-vector-text-runtime-inputs.json': { status: 400, error: 'invalid_search_tenant', because: 'it gives a tenant value to the ParityUser.embedding vector index, which runtime/024 created without a tenant property (indexes.md §7.2 step 3)' },
  '913-remaining-read-contract.json': { status: 400, error: 'index_not_found', because: 'it searches the FOLLOWS.note text index, which runtime/908 dropped (indexes.md §4: a dropped index stops serving at once)' },
};

function opsUsed(json: string): Set<string> {
  const ops = new Set<string>();
  for (const m of json.matchAll(/"([a-z_]+)":/g)) ops.add(m[1]!);
  return ops;
}

describe.skipIf(corpus === undefined)('conformance corpus', () => {
  it('replays runtime/ in order with status 200 for every supported fixture, then runs json-only/ on that state', async () => {
    const dir = join(corpus!, 'runtime');
    const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
    expect(files.length).toBeGreaterThan(200);
    const db = await openDatabase({ storage: 'memory' });
    const failures: string[] = [];
    const skipped: string[] = [];
    for (const file of files) {
      const body = readFileSync(join(dir, file), 'utf8');
      const pending = [...opsUsed(body)].filter((op) => op in pendingFeatures);
      const { status, body: answer } = await db.queryRaw(body);
      if (pending.length > 0) {
        skipped.push(`${file}: ${pendingFeatures[pending[0]!]} (${pending.join(', ')})`);
        continue;
      }
      if (status !== 200) failures.push(`${file}: ${status} ${answer}`);
    }
    console.log(`conformance: ${files.length - skipped.length} fixtures required 200, ${skipped.length} skipped:\n  ${skipped.join('\n  ')}`);
    expect(failures).toEqual([]);

    const jsonOnly = join(corpus!, 'json-only');
    const outcomes: string[] = [], wanted: string[] = [], needIndex: string[] = [];
    for (const file of readdirSync(jsonOnly).filter((f) => f.endsWith('.json')).sort()) {
      const body = readFileSync(join(jsonOnly, file), 'utf8');
      const pending = [...opsUsed(body)].filter((op) => op in pendingFeatures);
      if (pending.length > 0) { needIndex.push(`${file} (${pending.join(', ')})`); continue; }
      const { status, body: answer } = await db.queryRaw(body);
      const code = status === 200 ? '' : (JSON.parse(answer) as { error: string }).error;
      outcomes.push(`${file}: ${status} ${code}`.trim());
      const spec = specErrors[file];
      wanted.push(spec === undefined ? `${file}: 200` : `${file}: ${spec.status} ${spec.error}`);
    }
    console.log(`conformance: json-only run on the corpus state, ${outcomes.length} executed, ${needIndex.length} need indexes: ${needIndex.join(', ')}`);
    expect(outcomes.length).toBeGreaterThanOrEqual(10);
    expect(outcomes).toEqual(wanted);
    await db.close();
  });

  it('index fixtures (020 creates four secondary indexes) change no answer: 021-023 and 031-032 equal a replay without them', async () => {
    const dir = join(corpus!, 'runtime');
    const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort().filter((f) => f < '040');
    const withIndexes = await openDatabase({ storage: 'memory' });
    const without = await openDatabase({ storage: 'memory' });
    const answers: Record<string, [string, string]> = {};
    for (const file of files) {
      const body = readFileSync(join(dir, file), 'utf8');
      if ([...opsUsed(body)].some((op) => op in pendingFeatures)) continue;
      const a = await withIndexes.queryRaw(body);
      expect(a.status, `${file}: ${a.body}`).toBe(200);
      if (file.startsWith('020')) {
        const receipts = JSON.parse(a.body) as Record<string, { kind: string; operation_id: string }>;
        expect(Object.values(receipts).map((r) => r.kind)).toEqual(['accepted', 'accepted', 'accepted', 'accepted']);
        // Wait for the builds, so the later fixtures run with active indexes.
        for (const { operation_id } of Object.values(receipts)) {
          const poll = JSON.stringify({ request_type: 'read', query: { read: { entries: [{ query: { name: 'op', root: { get_index_operation: { operation_id } } } }], returns: ['op'] } } });
          for (let i = 0; ; i++) {
            const status = (JSON.parse((await withIndexes.queryRaw(poll)).body) as { op: { status: string } }).op.status;
            if (status === 'succeeded') break;
            expect(['queued', 'running']).toContain(status);
            expect(i).toBeLessThan(2000);
            await new Promise((resolve) => setTimeout(resolve, 2));
          }
        }
        continue;
      }
      const b = await without.queryRaw(body);
      answers[file] = [a.body, b.body];
      if (file.startsWith('032')) expect(withIndexes.explain(JSON.parse(body))[0]!.access).toBe('index_range');
    }
    for (const prefix of ['021', '022', '023', '031', '032']) {
      const file = Object.keys(answers).find((f) => f.startsWith(prefix))!;
      expect(answers[file]![0], file).toBe(answers[file]![1]);
    }
    expect(JSON.parse(answers[Object.keys(answers).find((f) => f.startsWith('032'))!]![0]).adults.length).toBeGreaterThan(0);
    await withIndexes.close();
    await without.close();
  });

  it('decodes every json-only request (no invalid_query_json)', () => {
    const dir = join(corpus!, 'json-only');
    const failures: string[] = [];
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
      try {
        decodeRequest(readFileSync(join(dir, file), 'utf8'));
      } catch (err) {
        failures.push(`${file}: ${err instanceof SvcError ? `${err.code} ${err.message}` : String(err)}`);
      }
    }
    expect(failures).toEqual([]);
  });
});
