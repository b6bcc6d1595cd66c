// The fuzzing corpus of the query torture: the conformance corpus bodies (a real client's
// requests, ../shared/conformance/corpus/{runtime,json-only}) mutated, plus random JSON.
// Every body is bytes: mutations may make it invalid UTF-8, invalid JSON, or valid JSON
// the protocol rejects, and some make it valid and expensive ("ids" -> "all" on a dense
// graph). A server must answer each one with a status, never a crash or a stall.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot, type Random } from './lib.js';

export interface CorpusBody { file: string; text: string }

/** The corpus directory (a sibling of the repository, as test/client-corpus.test.ts finds it), or null. */
export function corpusDir(): string | null {
  const root = repoRoot();
  return [join(root, '../shared/conformance/corpus'), join(root, 'shared/conformance/corpus'), '/work/shared/conformance/corpus'].find(existsSync) ?? null;
}

/** runtime/ in file order (a replayable sequence: seeds first), then json-only/. */
export function loadCorpus(dir: string): { runtime: CorpusBody[]; jsonOnly: CorpusBody[] } {
  const read = (sub: string): CorpusBody[] => readdirSync(join(dir, sub)).filter((f) => f.endsWith('.json')).sort()
    .map((f) => ({ file: `${sub}/${f}`, text: readFileSync(join(dir, sub, f), 'utf8') }));
  return { runtime: read('runtime'), jsonOnly: read('json-only') };
}

export interface FuzzBody { name: string; bytes: Buffer }

const HUGE_NUMBERS = [
  '1e308', '1e999', '-1e999', '18446744073709551615', '18446744073709551616', '9223372036854775807', '9223372036854775808',
  '-9223372036854775809', '123456789012345678901234567890123456789', '4294967296', '2147483648', '9007199254740993',
  '0.0000000000000000000001', '1.7976931348623157e309', '5e-324', '1' + '0'.repeat(400),
];
const NEG_ZERO = ['-0', '-0.0', '-0e0', '-0E-0', '-0.000'];
const OP_NAMES = [
  'nodes', 'nodes_where', 'edges', 'edges_where', 'out', 'in', 'both', 'out_e', 'in_e', 'both_e', 'out_n', 'in_n', 'other_n', 'has', 'has_label',
  'where', 'dedup', 'limit', 'skip', 'range', 'as', 'select', 'inject', 'bind', 'order_by', 'repeat', 'union', 'choose', 'coalesce', 'optional',
  'fold', 'unfold', 'path', 'simple_path', 'with_sack', 'sack_add', 'count', 'exists', 'id', 'value_map', 'project', 'group', 'group_count',
  'aggregate_by', 'shortest_path', 'add_n', 'add_e', 'drop', 'set_property', 'context', 'for_each', 'query',
];
const FIELD_NAMES = ['input', 'reference', 'ids', 'label', 'config', 'traversal', 'times', 'emit', 'max_depth', 'count', 'literal', 'expr', 'param',
  'predicate', 'property', 'value', 'root', 'entries', 'returns', 'name', 'traversals', 'source', 'target', 'direction', 'properties'];

/** 0-9 e E + - . */
const isNumberChar = (c: number): boolean => (c >= 48 && c <= 57) || c === 101 || c === 69 || c === 43 || c === 45 || c === 46;

/** Byte positions of JSON number tokens outside strings (a cheap scan; good enough to aim mutations). */
function numberSpans(text: string): [number, number][] {
  const spans: [number, number][] = [];
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') { inString = true; continue; }
    if (c === '-' || (c >= '0' && c <= '9')) {
      let j = i + 1;
      while (j < text.length && isNumberChar(text.charCodeAt(j))) j++;
      spans.push([i, j]);
      i = j - 1;
    }
  }
  return spans;
}

/** Positions just after the opening quote of string tokens. */
function stringStarts(text: string): number[] {
  const out: number[] = [];
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') { inString = true; out.push(i + 1); }
  }
  return out;
}

type Tree = unknown;

/** Every object/array inside `root`, with a setter that replaces it in its parent. */
function slots(root: Tree): { node: Tree; set(v: Tree): void }[] {
  const out: { node: Tree; set(v: Tree): void }[] = [];
  const stack: { parent: Record<string, Tree> | Tree[]; key: string | number }[] = [];
  const push = (parent: Record<string, Tree> | Tree[]): void => {
    if (Array.isArray(parent)) parent.forEach((_, i) => stack.push({ parent, key: i }));
    else for (const k of Object.keys(parent)) stack.push({ parent, key: k });
  };
  if (root !== null && typeof root === 'object') push(root as Record<string, Tree>);
  while (stack.length > 0 && out.length < 100_000) {
    const { parent, key } = stack.pop()!;
    const node = (parent as Record<string | number, Tree>)[key];
    if (node === null || typeof node !== 'object') continue;
    out.push({ node, set: (v) => { (parent as Record<string | number, Tree>)[key] = v; } });
    push(node as Record<string, Tree>);
  }
  return out;
}

const ascii = (s: string): Buffer => Buffer.from(s, 'utf8');

/** Mutations of one body's text; each returns [what, bytes]. */
const mutators: [string, (text: string, r: Random) => Buffer | null][] = [
  ['byte flips', (text, r) => {
    const b = ascii(text);
    for (let n = r.int(1, 8); n > 0 && b.length > 0; n--) b[r.int(0, b.length - 1)] = r.int(0, 255);
    return b;
  }],
  ['truncation', (text, r) => ascii(text.slice(0, r.int(0, Math.max(0, text.length - 1))))],
  ['duplicated subtrees', (text, r) => {
    const tree = JSON.parse(text) as Tree;
    for (let n = r.int(1, 4); n > 0; n--) {
      const all = slots(tree);
      if (all.length === 0) return null;
      const from = r.pick(all).node;
      r.pick(all).set(structuredClone(from));
    }
    const out = JSON.stringify(tree);
    return out.length > 4_000_000 ? null : ascii(out);
  }],
  ['deep nesting', (text, r) => {
    // Wrap the first entry's root (or the whole body) in thousands of single-input operations,
    // built as text: the depth is the point, so no recursion on this side either.
    const depth = r.pick([50, 500, 1023, 1024, 1025, 5000, 20_000, 100_000]);
    const op = r.pick(['dedup', 'out', 'both', 'path', 'simple_path', 'unfold', 'fold']);
    if (r.chance(0.3)) {
      const open = r.pick(['[', '{"a":', '{"query":']);
      return ascii(open.repeat(depth) + (r.chance(0.5) ? '1' : '') + (open === '[' ? ']' : '}').repeat(r.chance(0.8) ? depth : r.int(0, depth)));
    }
    // Replace the first entry's root by a marker, then splice the wrapped root in as text.
    const tree = JSON.parse(text) as { query?: Record<string, { entries?: { query?: { root?: Tree } }[] }> };
    const batch = Object.values(tree.query ?? {})[0];
    const first = batch?.entries?.find((e) => e.query?.root !== undefined)?.query;
    if (first === undefined) return null;
    const root = JSON.stringify(first.root);
    first.root = '\u0000root';
    return ascii(JSON.stringify(tree).replace('"\\u0000root"', () => `${`{"${op}":{"input":`.repeat(depth)}${root}${'}}'.repeat(depth)}`));
  }],
  ['huge numbers', (text, r) => {
    const spans = numberSpans(text);
    if (spans.length === 0) return null;
    let out = text;
    for (const [s, e] of [...new Set(Array.from({ length: r.int(1, 4) }, () => r.pick(spans)))].sort((x, y) => y[0] - x[0])) {
      out = out.slice(0, s) + r.pick(HUGE_NUMBERS) + out.slice(e);
    }
    return ascii(out);
  }],
  ['-0', (text, r) => {
    const spans = numberSpans(text);
    if (spans.length === 0) return null;
    const [s, e] = r.pick(spans);
    return ascii(text.slice(0, s) + r.pick(NEG_ZERO) + text.slice(e));
  }],
  ['lone surrogates', (text, r) => {
    const starts = stringStarts(text);
    if (starts.length === 0) return null;
    const at = r.pick(starts);
    const kind = r.int(0, 3);
    if (kind === 3) {
      // A lone surrogate as raw (CESU-8) bytes: invalid UTF-8, not an escape.
      const b = ascii(text);
      return Buffer.concat([b.subarray(0, at), Buffer.from([0xed, 0xa0, 0x80]), b.subarray(at)]);
    }
    return ascii(text.slice(0, at) + r.pick(['\\ud800', '\\udfff', '\\ud800\\ud800', '\\u0000', '\\udbff\\udfff']) + text.slice(at));
  }],
  ['ids -> all', (text) => {
    const out = text.replace(/\{"ids":\[[^\]]*\]\}/g, '"all"');
    return out === text ? null : ascii(out);
  }],
  ['bounds -> huge', (text, r) => {
    const big = r.pick(['1000000000', '9223372036854775807', '4294967295', '100000']);
    const out = text.replace(/"(times|max_depth)":\d+/g, `"$1":${big}`).replace(/\{"literal":\d+\}/g, `{"literal":${big}}`);
    return out === text ? null : ascii(out);
  }],
  ['field swap', (text, r) => {
    const starts = stringStarts(text);
    if (starts.length === 0) return null;
    const at = r.pick(starts);
    const end = text.indexOf('"', at);
    if (end < 0) return null;
    return ascii(text.slice(0, at) + r.pick([...OP_NAMES, ...FIELD_NAMES, '', 'x'.repeat(r.int(1, 5000))]) + text.slice(end));
  }],
];

/** Random JSON: values of random kinds, keys drawn from the protocol's names. */
export function randomJson(r: Random, depth = 0): Tree {
  const kind = depth > 7 ? r.int(0, 3) : r.int(0, 6);
  switch (kind) {
    case 0: return r.pick([null, true, false]);
    case 1: return r.pick([0, -1, 1, 2 ** 31, 2 ** 53 + 1, 1e300, -0, 0.5, r.int(-1000, 1000)]);
    case 2: return r.pick([...OP_NAMES, ...FIELD_NAMES, 'read', 'write', 'all', 'none', 'context', '\u0000', 'é', '🦀']);
    case 3: return '';
    case 4: return Array.from({ length: r.int(0, 4) }, () => randomJson(r, depth + 1));
    default: {
      const o: Record<string, Tree> = {};
      for (let n = r.int(1, 3); n > 0; n--) o[r.pick([...OP_NAMES, ...FIELD_NAMES])] = randomJson(r, depth + 1);
      return o;
    }
  }
}

/** A random request envelope around a random operation tree (decodes often enough to reach planning). */
function randomEnvelope(r: Random): Tree {
  const rt = r.pick(['read', 'write']);
  return { request_type: rt, query: { [rt]: { entries: [{ query: { name: 'r', root: randomJson(r, 2) } }], returns: r.chance(0.5) ? ['r'] : [] } } };
}

/**
 * One fuzz body: a corpus body as is (1 in 10), mutated one to three times, or random
 * JSON (1 in 8). Mutations that do not apply to a body are skipped.
 */
export function fuzzBody(corpus: CorpusBody[], r: Random): FuzzBody {
  if (r.chance(0.125)) {
    return r.chance(0.5)
      ? { name: 'random JSON', bytes: ascii(JSON.stringify(randomJson(r))) }
      : { name: 'random envelope', bytes: ascii(JSON.stringify(randomEnvelope(r))) };
  }
  const base = r.pick(corpus);
  if (r.chance(0.1)) return { name: `as is: ${base.file}`, bytes: ascii(base.text) };
  let bytes = ascii(base.text);
  const applied: string[] = [];
  for (let n = r.int(1, 3); n > 0; n--) {
    const [what, mutate] = r.pick(mutators);
    let text: string;
    try {
      text = bytes.toString('utf8');
      const out = mutate(text, r);
      if (out === null) continue;
      bytes = out;
      applied.push(what);
      // Scanning megabytes of nesting again would stall this client's event loop (and so
      // every latency it measures): deep nesting is the last mutation.
      if (what === 'deep nesting') break;
    } catch {
      continue; // e.g. JSON.parse of an already broken body: try another mutation
    }
  }
  return { name: `${applied.length > 0 ? applied.join(' + ') : 'as is'} of ${base.file}`, bytes };
}
