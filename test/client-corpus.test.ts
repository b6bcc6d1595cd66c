// Every request of ../shared/conformance/corpus (written by the official TypeScript client)
// is reproduced exactly by the DSL expression in test/client/corpus-dsl.ts: the same JSON
// after a lossless parse (integers kept exact, `null` distinct from absent, member order
// ignored).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseJson, type JsonValue } from '../src/protocol/json.js';
import { dslFor } from './client/corpus-dsl.js';

const here = dirname(fileURLToPath(import.meta.url));
const corpus = [join(here, '../../shared/conformance/corpus'), join(here, '../shared/conformance/corpus')].find(existsSync);

/** A comparable form: Maps become objects with sorted keys; bigints stay exact. */
function canonical(v: JsonValue): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v instanceof Map) {
    const out: Record<string, unknown> = {};
    for (const key of [...v.keys()].sort()) Object.defineProperty(out, key, { value: canonical(v.get(key)!), enumerable: true });
    return out;
  }
  return v;
}

const files = corpus === undefined ? [] : ['runtime', 'json-only'].flatMap((dir) =>
  readdirSync(join(corpus, dir)).filter((f) => f.endsWith('.json')).sort().map((file) => ({ dir, file })));

describe.skipIf(corpus === undefined)('the DSL reproduces the conformance corpus', () => {
  it('covers all 248 corpus files', () => {
    expect(files.length).toBe(248);
    const missing = files.filter(({ file }) => dslFor(file) === undefined).map(({ dir, file }) => `${dir}/${file}`);
    expect(missing).toEqual([]);
  });

  it.each(files)('$dir/$file', ({ dir, file }) => {
    const build = dslFor(file);
    expect(build, `no DSL expression for ${file}`).toBeDefined();
    const expected = canonical(parseJson(readFileSync(join(corpus!, dir, file), 'utf8')));
    const actual = canonical(parseJson(build!().toJSON()));
    expect(actual).toStrictEqual(expected);
  });
});
