// Differential tests of secondary indexes (issue 9 item 6): the SAME random graph and the
// SAME random queries and writes run on
//   (a) an engine with a random set of secondary indexes (node/edge equality, some unique,
//       range asc/desc on the properties the predicates use; built after the graph is
//       loaded and awaited until each build succeeded or blocked: blocked ones don't serve),
//   (b) an engine without indexes, and
//   (c) the reference interpreter (test/reference/).
// (a) and (b) must answer byte-equal (status and body); (b) and (c) must agree as in
// test/differential.test.ts (plain JSON equal on 200, same error code otherwise).
//
// Values exercise the index keys' edge cases (index/keys.ts): i64 vs f64 equal values (5
// and 5.0), -0.0 vs 0, i64 beyond 2^53 next to nearby f64s, date_time vs strings (incl.
// RFC 3339 strings and date_time-typed params, which stay strings), strings sharing
// prefixes longer than 8 UTF-8 bytes, non-ASCII and astral characters, null and missing
// properties, is_in sets mixing types, between with bounds of different types, and params
// (typed and untyped) as well as constants. Writes between queries (set_property,
// remove_property, drop, add_n) only write values every index kind accepts, and unique
// properties only get fresh values, so the indexed engine never rejects a write the
// others accept (index value rules are tested in test/indexes.test.ts).
//
// Replay a failure with DIFF_SEED / DIFF_PATH (printed by fast-check).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { openDatabase, type Database } from '../src/index.js';
import { parseJson } from '../src/protocol/json.js';
import { ReferenceDb } from './reference/interpreter.js';
import { errorCode, plainEqual, runReference, showPlain } from './reference/harness.js';
import { stateBody } from './differential/arbitraries.js';
import { entry, ex, jsonText, op, pr, tv, type J } from './reference/wire.js';

const replay: fc.Parameters<unknown> = process.env.DIFF_SEED === undefined ? {}
  : { seed: Number(process.env.DIFF_SEED), path: process.env.DIFF_PATH };

// ------------------------------------------------------------------ values

const TWO_53 = 1n << 53n;
/** Numerics: equal values across variants, -0.0, and neighbours around 2^53 and 2^63. */
const numVals: J[] = [
  tv.i64(0), tv.i64(5), tv.i64(-1), tv.i64(7), tv.f64(5), tv.f64(-0), tv.f64(0), tv.f64(5.5), tv.f64(-1), tv.f64(0.1),
  tv.f32(5), tv.f32(0.1), tv.f32(-0), tv.i64(TWO_53), tv.i64(TWO_53 + 1n), tv.i64(TWO_53 + 2n), tv.i64(-(TWO_53 + 1n)),
  tv.f64(9007199254740992), tv.f64(9007199254740994), tv.f64(-9007199254740992), tv.i64((1n << 63n) - 1n), tv.i64(-(1n << 63n)),
  tv.f64(9223372036854775807), tv.f64(1e300), tv.f64(-1e-300),
];
/** Strings: prefixes shared beyond the 8 bytes a range key holds, non-ASCII, astral, date-like. */
const strVals: J[] = ['', 'a', 'ab', 'abcdefgh', 'abcdefghij', 'abcdefghik', 'abcdefghiJ', 'abcdefgh\u0000', 'ééééé', 'éééééa', 'éééééb',
  '日本語日本語x', '日本語日本語y', '😀😀a', '😀😀b', '😀', '\uffff', '\u{10000}', 'z', '5', '2025-03-01T08:00:00Z', '1970-01-01T00:00:00Z']
  .map(tv.str);
const dtVals: J[] = [0n, 5n, -1n, 1740816000000n, 1740816000001n].map(tv.dt);
/** What no range index accepts (and, for generic arrays/objects, no equality index either). */
const otherVals: J[] = [tv.null, tv.bool(true), tv.bool(false), tv.bytes([5]), tv.i64s([5n]), tv.f64s([5]), tv.f32s([5]),
  tv.strs(['a']), tv.arr([tv.i64(5)]), tv.arr([tv.str('a'), tv.f64(5)]), tv.obj([['a', tv.i64(1)]])];

const rangeable = [...numVals, ...strVals, ...dtVals];
const numArb = fc.constantFrom(...numVals);
const strArb = fc.constantFrom(...strVals);
const dtArb = fc.constantFrom(...dtVals);
const rangeableArb = fc.constantFrom(...rangeable);
const anyArb = fc.oneof({ weight: 4, arbitrary: rangeableArb }, { weight: 1, arbitrary: fc.constantFrom(...otherVals) });
/** Values for the unique-candidate property: few, so duplicates (5 and 5.0 too) happen sometimes. */
const uniqueCandidates: J[] = [tv.i64(1), tv.f64(1), tv.i64(2), tv.f32(2), tv.str('a'), tv.str('abcdefghij'), tv.str('abcdefghik'),
  tv.dt(1), tv.i64(TWO_53 + 1n), tv.f64(9007199254740992), tv.f64(-0), tv.i64(0), tv.str('😀😀a'), tv.str('😀😀b'), tv.i64(3), tv.i64(4),
  tv.str('b'), tv.str('c'), tv.dt(2), tv.f64(2.5)];

// ------------------------------------------------------------------ graphs

const nodeLabels = ['A', 'B'];
const edgeLabels = ['X', 'Y'];
const nodeProps = ['n', 's', 'v', 'u'];
const edgeProps = ['n', 's', 'v'];

const present = <T>(arb: fc.Arbitrary<T>, freq: number) => fc.option(arb, { freq });

const nodePropsArb: fc.Arbitrary<[string, J][]> = fc.record({
  n: present(fc.oneof({ weight: 12, arbitrary: numArb }, { weight: 1, arbitrary: fc.constant(tv.null) }, { weight: 1, arbitrary: strArb }), 4),
  s: present(fc.oneof({ weight: 6, arbitrary: strArb }, { weight: 3, arbitrary: dtArb }, { weight: 1, arbitrary: fc.constant(tv.null) }), 4),
  v: present(anyArb, 3),
  u: present(fc.constantFrom(...uniqueCandidates), 2),
}).map((r) => Object.entries(r).filter(([, v]) => v !== null) as [string, J][]);

const edgePropsArb: fc.Arbitrary<[string, J][]> = fc.record({
  n: present(fc.oneof({ weight: 12, arbitrary: numArb }, { weight: 1, arbitrary: fc.constant(tv.null) }), 3),
  s: present(fc.oneof(strArb, dtArb), 3),
  v: present(anyArb, 3),
}).map((r) => Object.entries(r).filter(([, v]) => v !== null) as [string, J][]);

const req = (kind: 'read' | 'write', entries: J[], returns: string[], params?: Params): string => {
  const body: Record<string, J> = { request_type: kind, query_name: null, query: { [kind]: { entries, returns } } };
  if (params !== undefined) {
    body.parameters = params.values;
    if (params.types !== null) body.parameter_types = params.types;
  }
  return jsonText(body);
};

const graphArb: fc.Arbitrary<{ nodes: number; edges: number; body: string }> = fc.integer({ min: 4, max: 20 }).chain((n) =>
  fc.tuple(
    fc.array(fc.tuple(fc.constantFrom(...nodeLabels), nodePropsArb), { minLength: n, maxLength: n }),
    fc.array(fc.tuple(fc.nat(n - 1), fc.nat(n - 1), fc.constantFrom(...edgeLabels), edgePropsArb), { maxLength: 24 }),
  ).map(([nodes, edges]) => ({
    nodes: n,
    edges: edges.length,
    body: req('write', [
      ...nodes.map(([label, props], i) => entry(`n${i}`, op.addN(label, props.map(([k, v]) => [k, op.val(v)])))),
      ...edges.map(([from, to, label, props], i) => entry(`e${i}`, op.addE(op.nodes({ var: `n${from}` }), label, { var: `n${to}` },
        props.map(([k, v]) => [k, op.val(v)])))),
    ], ['n0']),
  })));

// ------------------------------------------------------------------ indexes

/** One index slot per (element, label, property, lane); at most one definition per slot. */
const indexSetArb: fc.Arbitrary<J[]> = fc.tuple(
  ...nodeLabels.flatMap((label) => nodeProps.flatMap((property) => [
    fc.option(fc.constantFrom(...(property === 'u' ? [true, false, true] : [false])).map((unique) => ({ node_equality: { label, property, unique } })), { freq: 2 }),
    fc.option(fc.constantFrom('asc', 'desc').map((direction) => ({ node_range: { label, property, direction } })), { freq: 2 }),
  ])),
  ...edgeLabels.flatMap((label) => edgeProps.flatMap((property) => [
    fc.option(fc.constant({ edge_equality: { label, property } }), { freq: 2 }),
    fc.option(fc.constantFrom('asc', 'desc').map((direction) => ({ edge_range: { label, property, direction } })), { freq: 2 }),
  ])),
).map((specs) => specs.filter((s) => s !== null) as J[]);

// ------------------------------------------------------------------ parameters

interface Params { values: Record<string, J>; types: Record<string, J> | null }

/** JSON parameter values: bigint = integer token, number = float token. */
const paramScalars: J[] = [0n, 5n, -1n, TWO_53 + 1n, (1n << 63n) - 1n, 5, -0, 0, 5.5, 9007199254740994, 9007199254740992, 0.1,
  'a', 'abcdefghij', 'abcdefghik', 'ééééé', '😀😀a', '2025-03-01T08:00:00Z', '', null, true];
const paramScalarArb = fc.constantFrom(...paramScalars);
const rfc3339 = /^\d{4}-\d\d-\d\dT/;

/** A declaration the value satisfies (envelope.md §3.3). */
function declArb(v: J): fc.Arbitrary<J> {
  if (typeof v === 'bigint') return fc.constantFrom<J>('i64', 'value');
  if (typeof v === 'number') return fc.constantFrom<J>('f64', 'f32', 'value');
  if (typeof v === 'string') return fc.constantFrom<J>('string', 'value', ...(rfc3339.test(v) ? ['date_time'] : []));
  if (typeof v === 'boolean') return fc.constantFrom<J>('bool', 'value');
  if (Array.isArray(v)) {
    const kinds = new Set(v.map((x) => typeof x));
    const homogeneous = v.length > 0 && kinds.size === 1 && !v.includes(null) ? declArb(v[0]) : fc.constant<J>('value');
    return fc.oneof(fc.constant<J>('value'), fc.constant<J>({ array: 'value' }), homogeneous.map((t) => (t === 'f32' || t === 'date_time' ? { array: 'value' } : { array: t })));
  }
  return fc.constant<J>('value');
}

const paramsArb: fc.Arbitrary<Params> = fc.record({
  pa: paramScalarArb,
  pb: paramScalarArb,
  pset: fc.oneof(fc.array(paramScalarArb, { maxLength: 4 }), fc.array(fc.constantFrom<J>(5n, 7n, -1n, TWO_53 + 1n), { minLength: 1, maxLength: 3 }),
    fc.array(fc.constantFrom<J>('a', 'ab', 'abcdefghij', '😀😀a'), { minLength: 1, maxLength: 3 })),
}).chain((values) => fc.option(fc.tuple(declArb(values.pa), declArb(values.pb), declArb(values.pset)), { freq: 2 })
  .map((decls): Params => ({ values, types: decls === null ? null : { pa: decls[0], pb: decls[1], pset: decls[2] } })));

// ------------------------------------------------------------------ predicates

/** A constant or parameter operand: mostly the property's own domain, often anything. */
const operandArb = (property: string): fc.Arbitrary<J> => fc.oneof(
  { weight: 3, arbitrary: (property === 'n' ? numArb : property === 's' ? fc.oneof(strArb, dtArb) : rangeableArb).map(ex.c) },
  { weight: 2, arbitrary: anyArb.map(ex.c) },
  { weight: 2, arbitrary: fc.constantFrom('pa', 'pb').map(ex.param) },
);

const setArb: fc.Arbitrary<J> = fc.oneof(
  { weight: 3, arbitrary: fc.array(anyArb, { maxLength: 4 }).map((xs) => ex.c(tv.arr(xs))) },
  { weight: 1, arbitrary: fc.array(fc.constantFrom(5n, 0n, -1n, TWO_53 + 1n, TWO_53), { maxLength: 3 }).map((xs) => ex.c(tv.i64s(xs))) },
  { weight: 1, arbitrary: fc.array(fc.constantFrom(5, -0, 0.1, 9007199254740992, 5.5), { maxLength: 3 }).map((xs) => ex.c(tv.f64s(xs))) },
  { weight: 1, arbitrary: fc.array(fc.constantFrom(5, -0, 0.1, 2), { maxLength: 3 }).map((xs) => ex.c(tv.f32s(xs))) },
  { weight: 1, arbitrary: fc.array(fc.constantFrom('a', 'abcdefghij', 'abcdefghik', 'ééééé', '😀😀a', '5'), { maxLength: 3 }).map((xs) => ex.c(tv.strs(xs))) },
  { weight: 1, arbitrary: anyArb.map(ex.c) }, // a scalar: a one-element set
  { weight: 3, arbitrary: fc.constant(ex.param('pset')) },
  { weight: 1, arbitrary: fc.constantFrom('pa', 'pb').map(ex.param) },
);

type Cmp = 'eq' | 'neq' | 'gt' | 'gte' | 'lt' | 'lte';

/** A conjunct over `props` an index may answer (and a few it may not). */
const conjunctArb = (props: string[]): fc.Arbitrary<J> => fc.constantFrom(...props, ...props, 'missing').chain((property) => {
  const p = ex.prop(property);
  const operand = operandArb(property);
  return fc.oneof(
    { weight: 4, arbitrary: fc.tuple(fc.constantFrom<Cmp>('eq', 'eq', 'gt', 'gte', 'lt', 'lte'), operand, fc.boolean())
      .map(([k, o, swap]) => (swap ? pr.cmp(k, o, p) : pr.cmp(k, p, o))) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom('eq', 'neq', 'gt', 'gte', 'lt', 'lte'), operand, fc.boolean())
      .map(([k, o, swap]) => (swap ? pr.compare(k, o, p) : pr.compare(k, p, o))) },
    { weight: 2, arbitrary: fc.tuple(operand, operand).map(([lo, hi]) => pr.between(p, lo, hi)) },
    { weight: 2, arbitrary: setArb.map((s) => pr.isIn(p, s)) },
    { weight: 1, arbitrary: fc.oneof(
      fc.constantFrom('has_key', 'is_null', 'is_not_null').map((k) => ({ [k]: { property } })),
      operand.map((o) => pr.not(pr.cmp('eq', p, o))),
      fc.tuple(operand, operand).map(([a, b]) => pr.or([pr.cmp('lt', p, a), pr.cmp('gte', p, b)])),
    ) },
  );
});

const and = (ps: J[]): J => (ps.length === 1 ? ps[0] : pr.and(ps));

type Step = (input: J) => J;

/** A source (nodes_where / edges_where), maybe a where/has right after it, maybe a window. */
const sourceArb: fc.Arbitrary<J> = fc.boolean().chain((nodes) => {
  const labels = nodes ? nodeLabels : edgeLabels;
  const props = nodes ? nodeProps : edgeProps;
  const where = nodes ? op.nodesWhere : op.edgesWhere;
  const label = fc.constantFrom(...labels, ...labels, nodes ? 'X' : 'A').map(pr.label);
  return fc.oneof(
    // $label == L and 1-2 conjuncts, in any order, sometimes nested
    { weight: 5, arbitrary: fc.tuple(label, fc.array(conjunctArb(props), { minLength: 1, maxLength: 2 }), fc.nat(2), fc.boolean())
      .map(([l, cs, at, nest]) => {
        const all = [...cs];
        all.splice(at % (cs.length + 1), 0, l);
        return where(nest && all.length > 2 ? pr.and([all[0], pr.and(all.slice(1))]) : and(all));
      }) },
    // $label == L (maybe with a conjunct), then a where
    { weight: 2, arbitrary: fc.tuple(label, fc.option(conjunctArb(props), { freq: 3 }), conjunctArb(props))
      .map(([l, c, w]) => op.with('where', where(c === null ? l : pr.and([l, c])), { predicate: w })) },
    // $label == L, then a has
    { weight: 2, arbitrary: fc.tuple(label, fc.constantFrom(...props), anyArb).map(([l, property, value]) => op.with('has', where(l), { property, value })) },
    // no label pinned: always a scan
    { weight: 1, arbitrary: conjunctArb(props).map(where) },
  );
});

const terminalArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<Step>((x) => op.unary('id', x)) },
  { weight: 1, arbitrary: fc.constant<Step>((x) => op.unary('count', x)) },
  { weight: 1, arbitrary: fc.constant<Step>((x) => x) },
  { weight: 2, arbitrary: fc.constant<Step>((x) => op.with('value_map', x, { properties: ['n', 's', 'v', 'u'] })) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom('n', 's', 'v'), fc.constantFrom('asc', 'desc'))
    .map(([property, order]): Step => (x) => op.unary('id', op.with('order_by', x, { property, order }))) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 3 }).map((k): Step => (x) => op.unary('id', op.with('limit', x, { count: op.lit(k) }))) },
);

const readArb: fc.Arbitrary<string> = fc.tuple(fc.array(fc.tuple(sourceArb, terminalArb), { minLength: 1, maxLength: 2 }), paramsArb)
  .map(([qs, params]) => req('read', qs.map(([s, t], i) => entry(`r${i}`, t(s))), qs.map((_, i) => `r${i}`), params));

// ------------------------------------------------------------------ writes

/**
 * A write batch of 1-3 mutations; add_n comes last so that a failing batch (none is
 * expected) consumes the same IDs everywhere. Values are ones every index kind accepts; the
 * unique-candidate property `u` only gets fresh values, one node at a time.
 */
const writeArb = (step: number): fc.Arbitrary<string> => {
  let fresh = 0;
  const freshU = () => (fresh++ % 2 === 0 ? tv.i64(1000n + BigInt(step * 10 + fresh)) : tv.str(`fresh-${step}-${fresh}`));
  const nodeTarget = fc.oneof(
    fc.uniqueArray(fc.nat(22).map(BigInt), { minLength: 1, maxLength: 3 }).map((ids) => op.nodes({ ids })),
    fc.tuple(fc.constantFrom(...nodeLabels), conjunctArb(['n', 's', 'v'])).map(([l, c]) => op.nodesWhere(pr.and([pr.label(l), c]))),
  );
  const edgeTarget = fc.oneof(
    fc.uniqueArray(fc.nat(25).map(BigInt), { minLength: 1, maxLength: 3 }).map((ids) => op.edges({ ids })),
    fc.tuple(fc.constantFrom(...edgeLabels), conjunctArb(edgeProps)).map(([l, c]) => op.edgesWhere(pr.and([pr.label(l), c]))),
  );
  const target = fc.oneof({ weight: 3, arbitrary: nodeTarget }, { weight: 1, arbitrary: edgeTarget });
  const mutation = fc.oneof(
    { weight: 4, arbitrary: fc.tuple(target, fc.constantFrom('n', 's', 'v'), rangeableArb)
      .map(([input, name, value]) => op.with('set_property', input, { name, value: op.val(value) })) },
    { weight: 1, arbitrary: fc.nat(22).map((id) => ({ id, tag: 'u' })) },
    { weight: 2, arbitrary: fc.tuple(target, fc.constantFrom('n', 's', 'v', 'u')).map(([input, name]) => op.with('remove_property', input, { name })) },
    { weight: 1, arbitrary: fc.oneof(
      fc.nat(22).map((id) => op.nodes({ ids: [BigInt(id)] })),
      fc.nat(25).map((id) => op.edges({ ids: [BigInt(id)] })),
      fc.tuple(fc.constantFrom(...nodeLabels, ...edgeLabels), conjunctArb(['n', 's'])).map(([l, c]) =>
        (nodeLabels.includes(l) ? op.nodesWhere : op.edgesWhere)(pr.and([pr.label(l), c])))).map((input) => op.unary('drop', input)) },
  );
  const addN = fc.tuple(fc.constantFrom(...nodeLabels), fc.record({ n: present(numArb, 3), s: present(fc.oneof(strArb, dtArb), 3), v: present(rangeableArb, 2), u: fc.boolean() }));
  return fc.tuple(fc.array(mutation, { minLength: 0, maxLength: 2 }), fc.option(addN, { freq: 2 }), paramsArb).filter(([ms, a]) => ms.length > 0 || a !== null)
    .map(([ms, a, params]) => {
      fresh = 0;
      const entries = ms.map((m, i) => entry(`w${i}`, (m as { tag?: string }).tag === 'u'
        ? op.with('set_property', op.nodes({ ids: [BigInt((m as { id: number }).id)] }), { name: 'u', value: op.val(freshU()) })
        : m));
      if (a !== null) {
        const [label, r] = a;
        const props: [string, J][] = [];
        for (const k of ['n', 's', 'v'] as const) if (r[k] !== null) props.push([k, op.val(r[k])]);
        if (r.u) props.push(['u', op.val(freshU())]);
        entries.push(entry(`w${entries.length}`, op.addN(label, props)));
      }
      return req('write', entries, entries.map((_, i) => `w${i}`), params);
    });
};

// ------------------------------------------------------------------ cases

interface Case { graph: { nodes: number; edges: number; body: string }; indexes: J[]; steps: string[] }

const STEPS = 20;
const caseArb: fc.Arbitrary<Case> = fc.record({
  graph: graphArb,
  indexes: indexSetArb,
  steps: fc.tuple(...Array.from({ length: STEPS }, (_, step) => fc.oneof({ weight: 3, arbitrary: readArb }, { weight: 1, arbitrary: writeArb(step) }))),
});

class Mismatch extends Error {}

async function ok(db: Database, body: string): Promise<Map<string, unknown>> {
  const got = await db.queryRaw(body);
  if (got.status !== 200) throw new Error(`expected 200 for ${body}, got ${got.status} ${got.body}`);
  return parseJson(got.body) as Map<string, unknown>;
}

/** Create the indexes; wait until each build succeeded or blocked. Returns the statuses. */
async function buildIndexes(db: Database, specs: J[]): Promise<string[]> {
  const ops: string[] = [];
  for (const spec of specs) {
    const r = (await ok(db, req('write', [entry('r', { create_index: { spec, if_not_exists: false } })], ['r']))).get('r') as Map<string, unknown>;
    ops.push(r.get('operation_id') as string);
  }
  const statuses: string[] = [];
  for (const id of ops) {
    for (let i = 0; ; i++) {
      const s = (await ok(db, req('read', [entry('r', { get_index_operation: { operation_id: id } })], ['r']))).get('r') as Map<string, unknown>;
      const status = s.get('status') as string;
      if (status === 'succeeded' || status === 'blocked') { statuses.push(status); break; }
      if (status === 'aborted' || i > 5000) throw new Error(`index operation ${id}: ${status}`);
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }
  return statuses;
}

const stats = { reads: 0, indexedReads: 0, sources: 0, indexedSources: 0, indexes: 0, blocked: 0, writes: 0, failedWrites: 0 };

async function runCase(c: Case): Promise<void> {
  const indexed = await openDatabase({ storage: 'memory' });
  const plain = await openDatabase({ storage: 'memory' });
  const reference = new ReferenceDb();
  try {
    const bodies = [c.graph.body, ...c.steps, stateBody];
    for (const [step, body] of bodies.entries()) {
      if (step === 1) {
        const statuses = await buildIndexes(indexed, c.indexes);
        stats.indexes += statuses.length;
        stats.blocked += statuses.filter((s) => s === 'blocked').length;
      }
      const isRead = body.includes('"request_type":"read"');
      if (isRead && step < bodies.length - 1) {
        const sources = indexed.explain(body);
        const used = sources.filter((s) => s.access !== 'scan').length;
        stats.reads++;
        stats.sources += sources.length;
        stats.indexedSources += used;
        if (used > 0) stats.indexedReads++;
      } else if (!isRead) stats.writes++;
      const a = await indexed.queryRaw(body);
      const b = await plain.queryRaw(body);
      const want = runReference(reference, body);
      if (want.status === 501) throw new Error(`reference does not support this request: ${showPlain(want.body)}`);
      if (!isRead && want.status !== 200) stats.failedWrites++;
      const bBody = b.body.length > 0 ? parseJson(b.body) : null;
      const sameAB = a.status === b.status && a.body === b.body;
      const sameRef = b.status === want.status
        && (want.status === 200 ? plainEqual(bBody, want.body) : errorCode(bBody) === errorCode(want.body));
      if (!sameAB || !sameRef) {
        throw new Mismatch([
          `step ${step} of ${bodies.length} (${sameAB ? 'engines agree, reference differs' : 'indexed engine differs from the engine without indexes'})`,
          `indexes:   ${jsonText(c.indexes)}`,
          `explain:   ${isRead ? JSON.stringify(indexed.explain(body)) : '-'}`,
          `request:   ${body}`,
          `indexed:   ${a.status} ${a.body}`,
          `no index:  ${b.status} ${b.body}`,
          `reference: ${want.status} ${showPlain(want.body)}`,
        ].join('\n'));
      }
    }
  } finally {
    await indexed.close();
    await plain.close();
  }
}

// 250 graphs x 20 steps (about 15 reads and 5 writes each; 5,000 cases, ~12 s on two cores),
// plus the graph load and a final dump per graph. The second test reads the first one's counts.
const GRAPHS = Number(process.env.DIFF_INDEX_RUNS ?? 250);

describe('secondary indexes: indexed engine vs engine without indexes vs reference interpreter', () => {
  it(`${GRAPHS} random graphs x ${STEPS} reads and writes under random index sets`, { timeout: 300_000 }, async () => {
    await fc.assert(fc.asyncProperty(caseArb, runCase), { numRuns: GRAPHS, ...replay } as fc.Parameters<[Case]>);
  });

  it('the run is not vacuous: a fair share of the generated reads used an index', () => {
    const share = stats.indexedReads / Math.max(1, stats.reads);
    console.log(`differential-indexes: ${stats.reads} reads (${stats.indexedReads} used an index: ${(100 * share).toFixed(1)}%), `
      + `${stats.indexedSources}/${stats.sources} sources indexed, ${stats.writes} writes (${stats.failedWrites} failed), `
      + `${stats.indexes} indexes built (${stats.blocked} blocked)`);
    expect(stats.reads + stats.writes).toBeGreaterThanOrEqual(GRAPHS * STEPS);
    expect(share).toBeGreaterThanOrEqual(0.3);
    expect(stats.blocked).toBeGreaterThan(0);
    expect(stats.blocked).toBeLessThan(stats.indexes);
  });
});
