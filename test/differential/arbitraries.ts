// fast-check generators of wire-format request bodies for the differential tests:
//   * graphArb:  a random small graph as ONE write request (add_n entries n0..nK, add_e
//                entries with {var} references), 0-12 nodes, 0-30 edges incl. self-loops
//                and parallel edges, 2-3 labels, properties of every value variant;
//   * readArb:   random read batches over the core operations (sources, navigation,
//                filters, windows, ordering, terminals) with predicates and expressions;
//   * extraArb:  reads over the remaining operations (branches, repeat, variables, fold,
//                path, sacks, grouping, aggregation, shortest_path, bind);
//   * writeArb:  mutations followed by reads and a dump of the whole graph;
//   * faultArb:  a valid read with exactly one planning (or decode) error inserted.
//
// Generated trees are plain objects in wire format (see ../reference/wire.ts); bigint
// stands for an integer token and number for a float token. Domains are deliberately tiny
// (few labels, few property names, small value pools) so that equal values, ties, missing
// properties and empty results happen often.
import fc from 'fast-check';
import { entry, ex, forEach, jsonText, op, pr, request, tv, type J } from '../reference/wire.js';

export interface GraphCase { nodes: number; body: string | null }

// ------------------------------------------------------------------ values

const smallInt = fc.constantFrom(-2n, -1n, 0n, 1n, 2n, 3n, 5n, 7n, 10n);
const i64Arb = fc.oneof(
  { weight: 9, arbitrary: smallInt },
  { weight: 1, arbitrary: fc.constantFrom(9007199254740993n, 9007199254740992n, 1n << 62n, -(1n << 40n), (1n << 63n) - 1n) },
);
const f64Num = fc.constantFrom(0, 0.5, 1, 1.5, 2, -1, 2.5, 0.1, 3, 7, 1e-7, 1e21, -0.5);
const f32Num = fc.constantFrom(0.5, 0.1, 1, 2, 1.25, -3);
const strArb = fc.constantFrom('', 'a', 'b', 'ab', 'Ab', 'abc', 'b a', 'é', '😀', '\uffff', '2', '3.5', 'null');
const msArb = fc.constantFrom(0n, 1000n, -1000n, 86400000n, 1740816000000n);
const memberName = fc.constantFrom('a', 'b', 'c', 'x');

/** A scalar tagged value. */
const leafArb: fc.Arbitrary<J> = fc.oneof(
  fc.constant(tv.null),
  fc.boolean().map(tv.bool),
  i64Arb.map(tv.i64),
  f64Num.map(tv.f64),
  f32Num.map(tv.f32),
  strArb.map(tv.str),
  msArb.map(tv.dt),
);

/** Any tagged value, including typed arrays, nested arrays and objects. */
const valueArb: fc.Arbitrary<J> = fc.letrec<{ v: J }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { weight: 6, arbitrary: leafArb },
    { weight: 1, arbitrary: fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 3 }).map(tv.bytes) },
    { weight: 1, arbitrary: fc.array(smallInt, { maxLength: 3 }).map(tv.i64s) },
    { weight: 1, arbitrary: fc.array(f64Num, { maxLength: 3 }).map(tv.f64s) },
    { weight: 1, arbitrary: fc.array(f32Num, { maxLength: 3 }).map(tv.f32s) },
    { weight: 1, arbitrary: fc.array(strArb, { maxLength: 3 }).map(tv.strs) },
    { weight: 1, arbitrary: fc.array(tie('v'), { maxLength: 3 }).map(tv.arr) },
    { weight: 1, arbitrary: fc.uniqueArray(fc.tuple(memberName, tie('v')), { maxLength: 3, selector: ([k]) => k }).map(tv.obj) },
  ),
})).v;

/** An object value shaped for dotted paths: {a: leaf, b: {c: leaf}}, members sometimes missing. */
const objArb: fc.Arbitrary<J> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ a: fc.option(leafArb), b: fc.option(fc.option(leafArb).map((c) => tv.obj(c === null ? [] : [['c', c]]))) })
    .map(({ a, b }) => tv.obj([...(a === null ? [] : [['a', a]]), ...(b === null ? [] : [['b', b]])] as [string, J][])) },
  { weight: 1, arbitrary: valueArb },
);

const numericArb = fc.oneof(i64Arb.map(tv.i64), f64Num.map(tv.f64), f32Num.map(tv.f32));

/** Optional properties of a node: a missing key is as likely as most variants. */
const nodePropsArb: fc.Arbitrary<[string, J][]> = fc.record({
  name: fc.option(strArb.map(tv.str), { freq: 4 }),
  age: fc.option(fc.oneof({ weight: 4, arbitrary: smallInt.map(tv.i64) }, { weight: 1, arbitrary: f64Num.map(tv.f64) }, { weight: 1, arbitrary: strArb.map(tv.str) }), { freq: 3 }),
  score: fc.option(fc.oneof({ weight: 4, arbitrary: numericArb }, { weight: 1, arbitrary: fc.constant(tv.null) }), { freq: 3 }),
  flag: fc.option(fc.oneof(fc.boolean().map(tv.bool), fc.constant(tv.null)), { freq: 2 }),
  tags: fc.option(fc.oneof(fc.array(strArb, { maxLength: 3 }).map(tv.strs), fc.array(leafArb, { maxLength: 2 }).map(tv.arr)), { freq: 2 }),
  obj: fc.option(objArb, { freq: 2 }),
  when: fc.option(fc.oneof(msArb.map(tv.dt), strArb.map(tv.str)), { freq: 2 }),
  misc: fc.option(valueArb, { freq: 2 }),
  'x.y': fc.option(smallInt.map(tv.i64), { freq: 8 }),
}).map((r) => Object.entries(r).filter(([, v]) => v !== null) as [string, J][]);

const edgePropsArb: fc.Arbitrary<[string, J][]> = fc.record({
  w: fc.option(numericArb, { freq: 2 }),
  since: fc.option(smallInt.map(tv.i64), { freq: 2 }),
  name: fc.option(strArb.map(tv.str), { freq: 3 }),
}).map((r) => Object.entries(r).filter(([, v]) => v !== null) as [string, J][]);

const allLabels = ['A', 'B', 'C'];
const edgeLabels = ['X', 'Y', 'Z'];

// ------------------------------------------------------------------ graphs

const graphSizeArb = fc.oneof({ weight: 1, arbitrary: fc.integer({ min: 0, max: 3 }) }, { weight: 4, arbitrary: fc.integer({ min: 4, max: 12 }) });

export const graphArb: fc.Arbitrary<GraphCase> = graphSizeArb.chain((n): fc.Arbitrary<GraphCase> => {
  if (n === 0) return fc.constant<GraphCase>({ nodes: 0, body: null });
  const node = fc.tuple(fc.constantFrom(...allLabels), nodePropsArb);
  const edge = fc.tuple(fc.integer({ min: 0, max: n - 1 }), fc.integer({ min: 0, max: n - 1 }), fc.constantFrom(...edgeLabels), edgePropsArb);
  const edges = fc.integer({ min: 0, max: 30 }).chain((m) => fc.array(edge, { minLength: m, maxLength: m }));
  return fc.tuple(fc.integer({ min: 2, max: 3 }), fc.array(node, { minLength: n, maxLength: n }), edges)
    .map(([labelCount, nodes, edges]) => {
      const entries = [
        ...nodes.map(([label, props], i) =>
          entry(`n${i}`, op.addN(allLabels[allLabels.indexOf(label) % labelCount]!, props.map(([k, v]) => [k, op.val(v)])))),
        ...edges.map(([from, to, label, props], i) =>
          entry(`e${i}`, op.addE(op.nodes({ var: `n${from}` }), edgeLabels[edgeLabels.indexOf(label) % labelCount]!, { var: `n${to}` },
            props.map(([k, v]) => [k, op.val(v)])))),
      ];
      const returns = [...nodes.map((_, i) => `n${i}`), ...edges.map((_, i) => `e${i}`)];
      return { nodes: n, body: jsonText(request('write', entries, returns)) };
    });
});

// ------------------------------------------------------------------ parameters

/** Every query gets the same parameter names; values vary. */
export const paramsArb: fc.Arbitrary<Record<string, J>> = fc.record({
  p_i: smallInt,
  p_f: f64Num,
  p_s: strArb,
  p_set: fc.array(strArb, { maxLength: 3 }),
  p_nums: fc.array(smallInt, { maxLength: 3 }),
  p_ids: fc.uniqueArray(fc.integer({ min: 0, max: 14 }).map(BigInt), { minLength: 1, maxLength: 3 }),
  p_id: fc.integer({ min: 0, max: 10 }).map(BigInt),
  p_n: fc.oneof({ weight: 12, arbitrary: fc.bigInt({ min: 0n, max: 4n }) }, { weight: 1, arbitrary: fc.constantFrom<J>(-1n, 'two', 1.5) }),
  p_m: fc.bigInt({ min: 0n, max: 6n }),
  // for_each rows; `p_i` in a row shadows the top-level p_i inside the body.
  p_rows: fc.array(fc.record({ name: strArb, age: smallInt, p_i: fc.option(smallInt, { nil: undefined }) }, { requiredKeys: ['name', 'age'] }), { maxLength: 3 }),
});
const paramNames = ['p_i', 'p_f', 'p_s', 'p_set', 'p_nums', 'p_ids', 'p_id'];

// ------------------------------------------------------------------ expressions and predicates

const propNames = ['name', 'age', 'score', 'flag', 'tags', 'obj', 'obj.a', 'obj.b', 'obj.b.c', 'obj..a', 'when', 'misc', 'x.y',
  'missing', '$id', '$label', '$from', '$to', '$from.name', '$to.age', '$from.$id', 'w', 'since'];
const propArb = fc.constantFrom(...propNames);
const numericPropArb = fc.constantFrom('age', 'score', 'w', 'since', '$id', 'x.y');

export const exprArb: fc.Arbitrary<J> = fc.letrec<{ e: J; p: J }>((tie) => ({
  e: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { weight: 5, arbitrary: propArb.map(ex.prop) },
    { weight: 4, arbitrary: leafArb.map(ex.c) },
    { weight: 1, arbitrary: valueArb.map(ex.c) },
    { weight: 2, arbitrary: fc.constantFrom(...paramNames).map(ex.param) },
    { weight: 1, arbitrary: fc.constant(ex.id) },
    { weight: 2, arbitrary: fc.tuple(fc.constantFrom('add', 'sub', 'mul', 'div') as fc.Arbitrary<'add'>,
      fc.oneof(numericPropArb.map(ex.prop), numericArb.map(ex.c)), fc.oneof(numericPropArb.map(ex.prop), numericArb.map(ex.c), tie('e')))
      .map(([k, l, r]) => ex.bin(k, l, r)) },
    { weight: 1, arbitrary: fc.tuple(fc.oneof(numericPropArb.map(ex.prop), smallInt.map((n) => ex.c(tv.i64(n)))),
      fc.constantFrom(-3n, -2n, 2n, 3n, 0n).map((n) => ex.c(tv.i64(n)))).map(([l, r]) => ex.bin('mod', l, r)) },
    { weight: 1, arbitrary: fc.oneof(numericPropArb.map(ex.prop), tie('e')).map(ex.neg) },
    { weight: 1, arbitrary: fc.tuple(fc.array(fc.tuple(tie('p'), tie('e')), { minLength: 1, maxLength: 2 }), fc.option(tie('e')))
      .map(([wt, e]) => ex.case(wt, e)) },
  ),
  p: predicateFrom(tie('e'), tie('p')),
})).e;

/** A constant of the type a property usually holds (so comparisons often hold), sometimes anything. */
function typedConstant(name: string): fc.Arbitrary<J> {
  const base = name.replace(/^\$(from|to)\./, '');
  const typical: fc.Arbitrary<J> =
    ['name', 'tags'].includes(base) ? strArb.map(tv.str)
    : ['age', 'score', 'w', 'since', 'x.y', '$id', '$from', '$to', 'obj.b.c', 'obj.a'].includes(base) ? fc.oneof(smallInt.map(tv.i64), f64Num.map(tv.f64), f32Num.map(tv.f32))
    : base === 'flag' ? fc.boolean().map(tv.bool)
    : base === 'when' ? msArb.map(tv.dt)
    : base === '$label' ? fc.constantFrom(...allLabels, ...edgeLabels).map(tv.str)
    : leafArb;
  return fc.oneof({ weight: 3, arbitrary: typical }, { weight: 1, arbitrary: leafArb }).map(ex.c);
}

function predicateFrom(e: fc.Arbitrary<J>, p: fc.Arbitrary<J>): fc.Arbitrary<J> {
  const prop = propArb.map(ex.prop);
  const propAndOperand = propArb.chain((name) => fc.tuple(fc.constant(ex.prop(name)), fc.oneof(
    { weight: 4, arbitrary: typedConstant(name) },
    { weight: 1, arbitrary: fc.constantFrom('p_i', 'p_f', 'p_s').map(ex.param) },
    { weight: 1, arbitrary: e },
  )));
  const cmpKind = fc.constantFrom('eq', 'neq', 'gt', 'gte', 'lt', 'lte') as fc.Arbitrary<'eq'>;
  const leafOperand = fc.oneof({ weight: 3, arbitrary: leafArb.map(ex.c) }, { weight: 1, arbitrary: fc.constantFrom('p_i', 'p_f', 'p_s').map(ex.param) },
    { weight: 1, arbitrary: propArb.map(ex.prop) });
  const operand = fc.oneof({ weight: 3, arbitrary: leafArb.map(ex.c) }, { weight: 1, arbitrary: fc.constantFrom('p_i', 'p_f', 'p_s').map(ex.param) },
    { weight: 1, arbitrary: e });
  return fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { weight: 6, arbitrary: fc.tuple(cmpKind, propAndOperand).map(([k, [l, r]]) => pr.cmp(k, l, r)) },
    { weight: 1, arbitrary: fc.tuple(cmpKind, propAndOperand).map(([k, [r, l]]) => pr.compare(k, l, r)) },
    { weight: 1, arbitrary: fc.tuple(cmpKind, prop, operand).map(([k, l, r]) => pr.cmp(k, l, r)) },
    // Leaf operands only: whether `between` evaluates `max` after `min` already failed is unspecified.
    { weight: 1, arbitrary: fc.tuple(prop, leafOperand, leafOperand).map(([v, lo, hi]) => pr.between(v, lo, hi)) },
    { weight: 2, arbitrary: fc.tuple(fc.constantFrom('has_key', 'is_null', 'is_not_null'), propArb).map(([k, name]) => ({ [k]: { property: name } })) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom('starts_with', 'ends_with', 'contains'), fc.constantFrom('name', 'tags', 'when', '$label').map(ex.prop),
      fc.oneof(strArb.map((s) => ex.c(tv.str(s))), fc.constant(ex.param('p_s'))))
      .map(([k, v, s]) => ({ [k]: { value: v, [k === 'starts_with' ? 'prefix' : k === 'ends_with' ? 'suffix' : 'substring']: s } })) },
    { weight: 1, arbitrary: fc.tuple(prop, fc.oneof(fc.constantFrom('p_set', 'p_nums').map(ex.param), valueArb.map(ex.c))).map(([v, s]) => pr.isIn(v, s)) },
    { weight: 1, arbitrary: fc.array(p, { minLength: 1, maxLength: 3 }).map(pr.and) },
    { weight: 1, arbitrary: fc.array(p, { minLength: 1, maxLength: 3 }).map(pr.or) },
    { weight: 1, arbitrary: p.map(pr.not) },
  );
}

const rawPredicateArb: fc.Arbitrary<J> = fc.letrec<{ p: J }>((tie) => ({ p: predicateFrom(exprArb, tie('p')) })).p;
/** Random predicates are mostly false; negating half of them keeps streams alive more often. */
export const predicateArb: fc.Arbitrary<J> = fc.tuple(rawPredicateArb, fc.boolean()).map(([p, negate]) => (negate ? pr.not(p) : p));

/** Label-scoped source predicates are common in real traffic; mix them in. */
const sourcePredicateArb = (labels: string[]) => fc.oneof(
  { weight: 3, arbitrary: predicateArb },
  { weight: 2, arbitrary: fc.constantFrom(...labels).map(pr.label) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom(...labels), predicateArb).map(([l, p]) => pr.and([pr.label(l), p])) },
);

// ------------------------------------------------------------------ operation chains

type Step = (input: J) => J;

/** Mostly existing IDs (graphs have up to 12 nodes, 30 edges), sometimes none or unknown ones. */
const idList = fc.oneof(
  { weight: 4, arbitrary: fc.uniqueArray(fc.integer({ min: 0, max: 8 }).map(BigInt), { minLength: 1, maxLength: 3 }) },
  { weight: 1, arbitrary: fc.uniqueArray(fc.integer({ min: 0, max: 40 }).map(BigInt), { maxLength: 3 }) },
);
const refArb = (vars: string[]): fc.Arbitrary<J> => fc.oneof(
  { weight: 2, arbitrary: fc.constant<J>('all') },
  { weight: 3, arbitrary: idList.map((ids) => ({ ids })) },
  { weight: 1, arbitrary: fc.constantFrom('p_ids', 'p_id').map((p) => ({ param: p })) },
  ...(vars.length > 0 ? [{ weight: 2, arbitrary: fc.constantFrom(...vars).map((v) => ({ var: v })) }] : []),
);

/** A source operation; `vars` are names of earlier entries holding rows. */
export const sourceArb = (vars: string[]): fc.Arbitrary<J> => fc.oneof(
  { weight: 2, arbitrary: fc.constant(op.nodes('all')) },
  { weight: 3, arbitrary: refArb(vars).map(op.nodes) },
  { weight: 1, arbitrary: fc.constant(op.edges('all')) },
  { weight: 2, arbitrary: refArb(vars).map(op.edges) },
  { weight: 2, arbitrary: sourcePredicateArb(allLabels).map(op.nodesWhere) },
  { weight: 1, arbitrary: sourcePredicateArb(edgeLabels).map(op.edgesWhere) },
);

const boundArb: fc.Arbitrary<J> = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 4 }).map(op.lit) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 4 }).map((n) => ({ expr: ex.c(tv.i64(n)) })) },
  { weight: 2, arbitrary: fc.constantFrom('p_n', 'p_m').map((p) => ({ expr: ex.param(p) })) },
);

const windowArb: fc.Arbitrary<Step> = fc.oneof(
  boundArb.map((count): Step => (input) => op.with('limit', input, { count })),
  boundArb.map((count): Step => (input) => op.with('skip', input, { count })),
  // Literal bounds are kept ordered: an inverted literal range is a planning fault (faultArb).
  fc.tuple(boundArb, boundArb).map(([a, b]): Step => {
    const [start, end] = literalOf(a) !== null && literalOf(b) !== null && literalOf(a)! > literalOf(b)! ? [b, a] : [a, b];
    return (input) => op.with('range', input, { start, end });
  }),
);

/** The value of a literal or `{"expr": {"constant": {"i64": n}}}` bound, else null. */
function literalOf(b: J): bigint | null {
  const o = b as { literal?: bigint; expr?: { constant?: { i64?: bigint } } };
  return o.literal ?? o.expr?.constant?.i64 ?? null;
}

/** A navigation label: an edge label, rarely a node label (matches nothing), or none. */
const labelOpt = fc.option(fc.constantFrom(...edgeLabels, ...edgeLabels, 'A'), { freq: 2 }).map((l) => l ?? undefined);
const sortKeyArb = fc.constantFrom(...propNames.filter((p) => p !== 'obj..a'));
const orderArb = fc.constantFrom('asc', 'desc');

/** A step that keeps element rows (navigation, filters, windows, ordering). */
export const rowStepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.tuple(fc.constantFrom('out', 'in', 'both', 'out_e', 'in_e', 'both_e'), labelOpt)
    .map(([k, l]): Step => (input) => op.nav(k, input, l)) },
  { weight: 2, arbitrary: fc.constantFrom('out_n', 'in_n', 'other_n').map((k): Step => (input) => op.unary(k, input)) },
  { weight: 1, arbitrary: propArb.chain((property) => typedConstant(property).map((c): Step => (input) =>
    op.with('has', input, { property, value: (c as { constant: J }).constant }))) },
  { weight: 1, arbitrary: fc.constantFrom(...allLabels, ...edgeLabels).map((label): Step => (input) => op.with('has_label', input, { label })) },
  { weight: 1, arbitrary: propArb.map((property): Step => (input) => op.with('has_key', input, { property })) },
  { weight: 2, arbitrary: predicateArb.map((predicate): Step => (input) => op.with('where', input, { predicate })) },
  { weight: 1, arbitrary: fc.tuple(propArb, fc.oneof(leafArb.map(op.val), fc.constantFrom('p_i', 'p_s').map((p) => op.expr(ex.param(p))), exprArb.map(op.expr)))
    .map(([property, value]): Step => (input) => op.with('edge_has', input, { property, value })) },
  { weight: 1, arbitrary: fc.constantFrom(...edgeLabels, ...allLabels).map((label): Step => (input) => op.with('edge_has_label', input, { label })) },
  { weight: 2, arbitrary: fc.constant<Step>((input) => op.unary('dedup', input)) },
  { weight: 2, arbitrary: windowArb },
  { weight: 2, arbitrary: fc.tuple(sortKeyArb, orderArb).map(([property, order]): Step => (input) => op.with('order_by', input, { property, order })) },
  { weight: 1, arbitrary: fc.uniqueArray(fc.tuple(sortKeyArb, orderArb), { minLength: 1, maxLength: 3, selector: ([p]) => p })
    .map((orderings): Step => (input) => op.with('order_by_multiple', input, { orderings })) },
);

const projectionArb = fc.uniqueArray(
  fc.tuple(fc.constantFrom('k1', 'k2', 'k3', 'k4'), fc.oneof(propArb.map((source) => ({ source })), exprArb.map((expr) => ({ expr })))),
  { minLength: 1, maxLength: 3, selector: ([alias]) => alias },
).map((items) => items.map(([alias, item]) => ('source' in item ? { property: { source: item.source, alias } } : { expr: { alias, expr: item.expr } })));

const propListArb = (min: number) => fc.uniqueArray(propArb, { minLength: min, maxLength: 3 });

/** A terminal: element rows in, scalars out. */
export const terminalArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom('count', 'exists', 'id', 'label', 'edge_properties').map((k): Step => (input) => op.unary(k, input)) },
  { weight: 2, arbitrary: propListArb(1).map((properties): Step => (input) => op.with('values', input, { properties })) },
  { weight: 2, arbitrary: fc.option(propListArb(0), { freq: 2 }).map((properties): Step => (input) => op.with('value_map', input, { properties })) },
  { weight: 2, arbitrary: projectionArb.map((projections): Step => (input) => op.with('project', input, { projections })) },
);

/** What may follow a terminal: windows, dedup, count, exists. */
const scalarStepArb: fc.Arbitrary<Step> = fc.oneof(
  windowArb,
  fc.constantFrom('dedup', 'count', 'exists').map((k): Step => (input) => op.unary(k, input)),
);

const applySteps = (source: J, steps: Step[]) => steps.reduce((acc, step) => step(acc), source);

/** A chain of 1-6 operations: a source, row steps, maybe a terminal and scalar steps. */
export const chainArb = (vars: string[], steps: fc.Arbitrary<Step> = rowStepArb): fc.Arbitrary<J> =>
  fc.tuple(sourceArb(vars), fc.array(steps, { maxLength: 4 }), fc.option(terminalArb, { freq: 2 }), fc.array(scalarStepArb, { maxLength: 1 }))
    .map(([source, rowSteps, terminal, after]) =>
      terminal === null ? applySteps(source, rowSteps) : applySteps(terminal(applySteps(source, rowSteps)), after));

const conditionArb = (earlier: string[], first: boolean): fc.Arbitrary<J | undefined> => fc.oneof(
  { weight: 6, arbitrary: fc.constant(undefined) },
  ...(earlier.length > 0 ? [
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom('var_not_empty', 'var_empty'), fc.constantFrom(...earlier)).map(([k, v]) => ({ [k]: v })) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom(...earlier), fc.integer({ min: 1, max: 3 })).map(([v, n]) => ({ var_min_size: [v, BigInt(n)] })) },
  ] : []),
  ...(first ? [] : [{ weight: 1, arbitrary: fc.constant<J>('prev_not_empty') }]),
);

/**
 * A batch of 1-3 entries named r0, r1, ...; later ones may read earlier ones through
 * `{"var": ...}` and be gated by conditions. Returns a random non-empty subset of names.
 */
function batchArb(kind: 'read' | 'write', chain: (vars: string[]) => fc.Arbitrary<J>, maxEntries = 3): fc.Arbitrary<string> {
  return fc.integer({ min: 1, max: maxEntries }).chain((n) => {
    const names = Array.from({ length: n }, (_, i) => `r${i}`);
    const entries = names.map((name, i) => fc.tuple(chain(names.slice(0, i)), conditionArb(names.slice(0, i), i === 0))
      .map(([root, condition]) => entry(name, root, condition)));
    return fc.tuple(fc.tuple(...entries), fc.subarray(names, { minLength: 1 }), paramsArb)
      .map(([es, returns, params]) => jsonText(request(kind, es, returns, params)));
  });
}

export const readArb: fc.Arbitrary<string> = batchArb('read', (vars) => chainArb(vars));

// ------------------------------------------------------------------ the remaining operations

const bodyStepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(fc.constantFrom('out', 'in', 'both', 'out_e', 'in_e'), labelOpt).map(([k, l]): Step => (input) => op.nav(k, input, l)) },
  { weight: 1, arbitrary: fc.constantFrom('other_n', 'out_n').map((k): Step => (input) => op.unary(k, input)) },
  { weight: 2, arbitrary: predicateArb.map((predicate): Step => (input) => op.with('where', input, { predicate })) },
  { weight: 1, arbitrary: fc.constant<Step>((input) => op.unary('dedup', input)) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 2 }).map((n): Step => (input) => op.with('limit', input, { count: op.lit(n) })) },
);

/** A sub-traversal body: `context` followed by 0-2 simple steps. */
const bodyArb: fc.Arbitrary<J> = fc.array(bodyStepArb, { maxLength: 2 }).map((steps) => ({ root: applySteps('context', steps) }));
/** A repeat body: exactly one navigation step keeps frontiers small. */
const repeatBodyArb: fc.Arbitrary<J> = fc.tuple(fc.constantFrom('out', 'in', 'both', 'out_n', 'other_n'), labelOpt)
  .map(([k, l]) => ({ root: k === 'out_n' || k === 'other_n' ? op.unary(k, op.nav('out_e', 'context', l)) : op.nav(k, 'context', l) }));

const varName = fc.constantFrom('v0', 'v1');

/** Steps over the operations not in rowStepArb (no `bind`: that needs its own rules). */
export const extraStepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 2, arbitrary: fc.array(bodyArb, { minLength: 2, maxLength: 3 }).map((traversals): Step => (input) => op.with('union', input, { traversals })) },
  { weight: 2, arbitrary: fc.array(bodyArb, { minLength: 1, maxLength: 2 }).map((traversals): Step => (input) => op.with('coalesce', input, { traversals })) },
  { weight: 2, arbitrary: bodyArb.map((traversal): Step => (input) => op.with('optional', input, { traversal })) },
  { weight: 2, arbitrary: fc.tuple(predicateArb, bodyArb, fc.option(bodyArb)).map(([condition, then_traversal, else_traversal]): Step =>
    (input) => op.with('choose', input, else_traversal === null ? { condition, then_traversal } : { condition, then_traversal, else_traversal })) },
  { weight: 3, arbitrary: fc.record({
    traversal: repeatBodyArb,
    times: fc.option(fc.integer({ min: 1, max: 3 }).map(BigInt)),
    until: fc.option(predicateArb, { freq: 2 }),
    emit: fc.constantFrom('none', 'before', 'after', 'all'),
    emit_predicate: fc.option(predicateArb, { freq: 3 }),
    max_depth: fc.integer({ min: 1, max: 3 }).map(BigInt),
  }).map((c): Step => (input) => op.with('repeat', input, { config: { ...c, emit_predicate: c.emit === 'after' ? c.emit_predicate : null } })) },
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom('as', 'store'), varName).map(([k, name]): Step => (input) => op.with(k, input, { name })) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom('within', 'without'), varName).map(([k, variable]): Step => (input) => op.with(k, input, { variable })) },
  { weight: 1, arbitrary: varName.map((name): Step => (input) => op.with('select', input, { name })) },
  { weight: 1, arbitrary: varName.map((variable): Step => (input) => op.with('inject', input, { variable })) },
  { weight: 2, arbitrary: fc.constantFrom('path', 'simple_path', 'sack_get').map((k): Step => (input) => op.unary(k, input)) },
  { weight: 1, arbitrary: fc.constant<Step>((input) => op.unary('unfold', op.unary('fold', input))) },
  { weight: 1, arbitrary: fc.oneof(numericArb, leafArb).map((initial): Step => (input) => op.with('with_sack', input, { initial })) },
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom('sack_set', 'sack_add'), fc.constantFrom('age', 'score', 'w', 'since', 'name', 'missing'))
    .map(([k, property]): Step => (input) => op.with(k, input, { property })) },
);

const groupPropArb = fc.constantFrom('name', 'age', 'flag', '$label', 'since', 'missing');
const extraTerminalArb: fc.Arbitrary<Step> = fc.oneof(
  fc.tuple(fc.constantFrom('group', 'group_count'), groupPropArb).map(([k, property]): Step => (input) => op.with(k, input, { property })),
  fc.tuple(fc.constantFrom('count', 'sum', 'min', 'max', 'mean'), fc.constantFrom('age', 'score', 'w', 'name', 'missing', '$id'))
    .map(([fn, property]): Step => (input) => op.with('aggregate_by', input, { function: fn, property })),
  fc.constant<Step>((input) => op.unary('fold', input)),
);

const shortestPathArb: fc.Arbitrary<J> = fc.record({
  source: fc.oneof(fc.integer({ min: 0, max: 13 }).map((i) => op.ids(i)), fc.constant({ param: 'p_id' })),
  target: fc.oneof(fc.integer({ min: 0, max: 13 }).map((i) => op.ids(i)), fc.constant(op.ids())),
  label: fc.option(fc.constantFrom(...edgeLabels)),
  direction: fc.constantFrom('out', 'in', 'both'),
  max_depth: fc.integer({ min: 1, max: 4 }).map(BigInt),
}).map((f) => ({ shortest_path: f }));

/** Bindings: bind steps mixed with navigation/filters, ending in project_bindings, count or the rows. */
const bindChainArb = (vars: string[]): fc.Arbitrary<J> => fc.tuple(
  sourceArb(vars),
  fc.array(fc.oneof(
    { weight: 2, arbitrary: fc.constantFrom('b0', 'b1').map((name): Step => (input) => op.with('bind', input, { name })) },
    { weight: 3, arbitrary: bodyStepArb },
  ), { minLength: 1, maxLength: 4 }),
  fc.oneof(
    fc.constant<Step | null>(null),
    fc.constantFrom('count', 'exists').map((k): Step | null => (input) => op.unary(k, input)),
    fc.tuple(fc.boolean(), fc.uniqueArray(fc.tuple(fc.constantFrom('k1', 'k2', 'k3'), fc.constantFrom<J>('current', { binding: 'b0' }, { binding: 'b1' }), propArb, fc.boolean()),
      { minLength: 1, maxLength: 3, selector: ([a]) => a }))
      .map(([distinct, items]): Step | null => (input) => ({ project_bindings: { input, distinct, projections: items.map(([alias, target, source, co]) =>
        (co ? { coalesce: { alias, refs: [{ target, source }, { target: 'current', source: 'name' }] } } : { property: { target, source, alias } })) } })),
  ),
).map(([source, steps, last]) => {
  const chain = applySteps(op.with('bind', source, { name: 'b0' }), steps);
  return last === null ? chain : last(chain);
});

/** Reads over the remaining operations. */
export const extraArb: fc.Arbitrary<string> = batchArb('read', (vars) => fc.oneof(
  { weight: 5, arbitrary: fc.tuple(sourceArb(vars), fc.array(fc.oneof({ weight: 2, arbitrary: extraStepArb }, { weight: 1, arbitrary: rowStepArb }), { minLength: 1, maxLength: 4 }),
    fc.option(fc.oneof(terminalArb, extraTerminalArb), { freq: 2 }))
    .map(([source, steps, terminal]) => {
      // Bind v0/v1 up front so select/inject/within/without find rows.
      const seeded = op.with('store', op.with('as', source, { name: 'v0' }), { name: 'v1' });
      const chain = applySteps(seeded, steps);
      return terminal === null ? chain : terminal(chain);
    }) },
  { weight: 1, arbitrary: shortestPathArb },
  { weight: 2, arbitrary: bindChainArb(vars) },
  { weight: 1, arbitrary: varName.map((variable) => ({ inject: { variable } })) },
), 2);

// ------------------------------------------------------------------ writes

const valueInputArb = fc.oneof(
  { weight: 3, arbitrary: valueArb.map(op.val) },
  { weight: 1, arbitrary: fc.constantFrom(...paramNames).map((p) => op.expr(ex.param(p))) },
  { weight: 1, arbitrary: exprArb.map(op.expr) },
);
const assignmentsFrom = (input: fc.Arbitrary<J>) => fc.uniqueArray(
  fc.tuple(fc.constantFrom('name', 'age', 'score', 'flag', 'obj', 'misc', 'since', 'w'), input), { maxLength: 3, selector: ([k]) => k });
const assignmentsArb = assignmentsFrom(valueInputArb);
/**
 * add_e properties: expressions (which may fail) only when every target exists, since
 * whether a missing endpoint or a failing property expression is reported first is not
 * specified.
 */
const edgeAssignmentsArb = (safeTargets: boolean) => (safeTargets ? assignmentsArb
  : assignmentsFrom(fc.oneof({ weight: 3, arbitrary: valueArb.map(op.val) }, { weight: 1, arbitrary: fc.constantFrom(...paramNames).map((p) => op.expr(ex.param(p))) })));

/** A node stream for mutations: a source and up to two row steps (no windows by parameters). */
const targetStreamArb = (vars: string[]) => fc.tuple(sourceArb(vars), fc.array(rowStepArb, { maxLength: 2 }))
  .map(([s, steps]) => applySteps(s, steps));

type Phase = 'create' | 'update' | 'delete' | 'read' | 'bulk';

function mutationArb(phase: Phase, created: string[], extras: boolean): fc.Arbitrary<J> {
  const to = fc.oneof(
    { weight: 2, arbitrary: idList.map((ids) => ({ ids })) },
    { weight: 1, arbitrary: fc.constant<J>('all') },
    ...(created.length > 0 ? [{ weight: 3, arbitrary: fc.constantFrom(...created).map((v) => ({ var: v })) }] : []),
  );
  switch (phase) {
    case 'create': return fc.oneof(
      { weight: 3, arbitrary: fc.tuple(fc.constantFrom(...allLabels), assignmentsArb).map(([l, props]) => op.addN(l, props)) },
      { weight: 1, arbitrary: fc.tuple(targetStreamArb(created), fc.constantFrom(...allLabels), assignmentsArb).map(([input, l, props]) => op.addN(l, props, input)) },
      { weight: 3, arbitrary: fc.tuple(targetStreamArb(created), fc.constantFrom(...edgeLabels), to)
        .chain(([input, l, t]) => edgeAssignmentsArb(!(t as { ids?: unknown }).ids).map((props) => op.addE(input, l, t, props))) },
    );
    case 'update': return fc.oneof(
      { weight: 3, arbitrary: fc.tuple(targetStreamArb(created), fc.constantFrom('name', 'age', 'score', 'obj', 'fresh'), valueInputArb)
        .map(([input, name, value]) => op.with('set_property', input, { name, value })) },
      // Relabels: a label, or a non-string (an error); "" is avoided (unspecified).
      { weight: 1, arbitrary: fc.tuple(targetStreamArb(created), fc.oneof(
        { weight: 3, arbitrary: fc.constantFrom(...allLabels).map((l) => op.val(tv.str(l))) },
        { weight: 1, arbitrary: fc.oneof(numericArb, fc.boolean().map(tv.bool), fc.constant(tv.null)).map(op.val) }))
        .map(([input, value]) => op.with('set_property', input, { name: '$label', value })) },
      { weight: 2, arbitrary: fc.tuple(targetStreamArb(created), fc.constantFrom('name', 'age', 'obj', 'missing', 'since', 'name', '$label'))
        .map(([input, name]) => op.with('remove_property', input, { name })) },
    );
    case 'delete': return fc.oneof(
      { weight: 2, arbitrary: targetStreamArb([]).map((input) => op.unary('drop', input)) },
      { weight: 2, arbitrary: fc.oneof(idList.map((ids) => ({ ids })), fc.constant({ param: 'p_ids' })).map((edges) => ({ drop_edge_by_id: { edges } })) },
      { weight: 1, arbitrary: fc.tuple(targetStreamArb([]), idList).map(([input, ids]) => ({ drop_edge_by_id: { input, edges: { ids } } })) },
      ...(extras ? [
        { weight: 1, arbitrary: fc.tuple(targetStreamArb([]), fc.oneof(idList.map((ids) => ({ ids })), fc.constant<J>('all'))).map(([input, t]) => ({ drop_edge: { input, to: t } })) },
        { weight: 1, arbitrary: fc.tuple(targetStreamArb([]), fc.oneof(idList.map((ids) => ({ ids })), fc.constant<J>('all')), fc.constantFrom(...edgeLabels))
          .map(([input, t, label]) => ({ drop_edge_labeled: { input, to: t, label } })) },
      ] : []),
    );
    case 'read': return chainArb([]);
    case 'bulk': return fc.constant(null); // built by bulkArb
  }
}

/**
 * A for_each over `p_rows`: creates one node per row from the row's members, then a
 * conditional read in the body (conditions are evaluated per iteration).
 */
const bulkArb = (name: string): fc.Arbitrary<J> => fc.tuple(fc.constantFrom(...allLabels), chainArb([]), conditionArb([name], false))
  .map(([label, read, condition]) => forEach('p_rows', [
    entry(name, op.addN(label, [['name', op.expr(ex.param('name'))], ['age', op.expr(ex.param('age'))], ['k', op.expr(ex.param('p_i'))]])),
    entry(`${name}_read`, read, condition),
  ]));

/** Optionally wrap a mutation in a terminal (count/id/exists/value_map). */
const wrapArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<Step>((x) => x) },
  { weight: 1, arbitrary: fc.constantFrom('count', 'id', 'exists', 'value_map').map((k): Step => (x) => op.unary(k, x)) },
);

/**
 * A write batch: creations, then updates, then deletions (reads may come anywhere), then
 * two dump entries with every node's and every edge's properties. Entry names are m0, m1...
 */
export function writeArb(extras: boolean): fc.Arbitrary<string> {
  const phases = fc.array(fc.constantFrom<Phase>('create', 'create', 'update', 'update', 'delete', 'read', 'bulk'), { minLength: 1, maxLength: 4 })
    .map((ps) => [...ps].sort((a, b) => order(a) - order(b)));
  return phases.chain((ps) => {
    const names = ps.map((_, i) => `m${i}`);
    const created = (i: number) => names.slice(0, i).filter((_, j) => ps[j] === 'create');
    const entries = ps.map((phase, i) => (phase === 'bulk' ? bulkArb(names[i]!) : fc.tuple(mutationArb(phase, created(i), extras), wrapArb)
      .map(([root, wrap]) => entry(names[i]!, phase === 'read' ? root : wrap(root)))));
    const returnable = names.flatMap((n, i) => (ps[i] === 'bulk' ? [n, `${n}_read`] : [n]));
    return fc.tuple(fc.tuple(...entries), fc.subarray(returnable), paramsArb).map(([es, returns, params]) => jsonText(request('write', [
      ...es,
      entry('_nodes', op.unary('value_map', op.nodes('all'))),
      entry('_edges', op.unary('edge_properties', op.edges('all'))),
    ], [...returns, '_nodes', '_edges'], params)));
  });
}

function order(p: Phase): number {
  return p === 'create' || p === 'bulk' ? 0 : p === 'update' ? 1 : p === 'delete' ? 2 : 1.5;
}

/** The whole graph: every node's and every edge's properties. */
export const stateBody = jsonText(request('read', [
  entry('_nodes', op.unary('value_map', op.nodes('all'))),
  entry('_edges', op.unary('edge_properties', op.edges('all'))),
], ['_nodes', '_edges']));

/** After a write: the whole graph and the next IDs of both sequences. */
export const probeBody = jsonText(request('write', [
  entry('_nodes', op.unary('value_map', op.nodes('all'))),
  entry('_edges', op.unary('edge_properties', op.edges('all'))),
  entry('_next_node', op.addN('Probe')),
  entry('_next_edge', op.addE(op.nodes({ var: '_next_node' }), 'PROBE', { var: '_next_node' })),
], ['_nodes', '_edges', '_next_node', '_next_edge']));

// ------------------------------------------------------------------ single planning faults

/** One planning (or decode) error, as a faulty entry root or batch shape. */
const faultyRootArb: fc.Arbitrary<{ root: J; write?: boolean }> = fc.oneof(
  fc.constant({ root: op.nodes(op.ids(1, 1)) }),
  fc.constant({ root: op.nodesWhere(pr.and([])) }),
  fc.constant({ root: op.with('where', op.nodes('all'), { predicate: pr.or([]) }) }),
  fc.constant({ root: op.with('has', op.nodes('all'), { property: '', value: tv.null }) }),
  fc.constant({ root: op.nodesWhere(pr.cmp('eq', ex.prop(''), ex.c(tv.null))) }),
  fc.constant({ root: op.with('where', op.nodes('all'), { predicate: pr.cmp('eq', ex.param(''), ex.c(tv.null)) }) }),
  fc.constant({ root: op.nav('out', op.nodes('all'), '') }),
  fc.constant({ root: op.with('range', op.nodes('all'), { start: op.lit(3), end: op.lit(1) }) }),
  fc.constant({ root: op.with('limit', op.nodes('all'), { count: { expr: ex.c(tv.i64(-1)) } }) }),
  fc.constant({ root: op.with('skip', op.nodes('all'), { count: { expr: ex.c(tv.f64(1)) } }) }),
  fc.constant({ root: op.with('values', op.nodes('all'), { properties: [] }) }),
  fc.constant({ root: op.with('values', op.nodes('all'), { properties: ['name', 'name'] }) }),
  fc.constant({ root: op.with('value_map', op.nodes('all'), { properties: ['age', 'age'] }) }),
  fc.constant({ root: op.with('project', op.nodes('all'), { projections: [] }) }),
  fc.constant({ root: op.with('project', op.nodes('all'), { projections: [{ property: { source: 'a', alias: 'k' } }, { expr: { alias: 'k', expr: ex.id } }] }) }),
  fc.constant({ root: op.with('order_by_multiple', op.nodes('all'), { orderings: [] }) }),
  fc.constant({ root: op.with('order_by_multiple', op.nodes('all'), { orderings: [['age', 'asc'], ['age', 'desc']] }) }),
  fc.constant({ root: op.with('order_by', op.nodes('all'), { property: '', order: 'asc' }) }),
  fc.constant({ root: op.nav('out', 'context') }),
  fc.constant({ root: op.with('union', op.nodes('all'), { traversals: [{ root: 'context' }] }) }),
  fc.constant({ root: op.with('coalesce', op.nodes('all'), { traversals: [] }) }),
  fc.constant({ root: op.with('optional', op.nodes('all'), { traversal: { root: op.nodes('all') } }) }),
  fc.constant({ root: op.with('order_by', op.with('bind', op.nodes('all'), { name: 'b' }), { property: 'age', order: 'asc' }) }),
  fc.constant({ root: op.unary('count', op.with('bind', op.nodes('all'), { name: 'b' })), write: true }),
  fc.constant({ root: op.addN('A', [['p', op.val(tv.null)], ['p', op.val(tv.i64(1))]]), write: true }),
  fc.constant({ root: op.addN('', []), write: true }),
  fc.constant({ root: { drop_edge_by_id: { edges: 'all' } }, write: true }),
  fc.constant({ root: op.with('repeat', op.nodes('all'), { config: { traversal: { root: op.nav('out', 'context') }, times: 0n, emit: 'none', max_depth: 3n } }) }),
  fc.constant({ root: op.with('repeat', op.nodes('all'), { config: { traversal: { root: op.nav('out', 'context') }, emit: 'none', emit_predicate: pr.hasKey('a'), max_depth: 3n } }) }),
  fc.constant({ root: op.unary('count', { shortest_path: { source: op.ids(0), target: op.ids(1), direction: 'out', max_depth: 2n } }) }),
  fc.constant({ root: { shortest_path: { source: op.ids(0), target: op.ids(1), direction: 'out', max_depth: 0n } } }),
  fc.constant({ root: op.addN('A') }), // a mutation in a read batch: decode error
);

type BatchFault = 'dup_return' | 'unknown_return' | 'empty_return' | 'prev_first' | 'min_size_zero' | 'empty_entry_name' | 'no_entries';

/** A valid read batch with exactly one fault inserted. */
export const faultArb: fc.Arbitrary<string> = fc.tuple(
  fc.array(chainArb([]), { minLength: 1, maxLength: 2 }),
  fc.oneof(
    { weight: 4, arbitrary: faultyRootArb },
    { weight: 1, arbitrary: fc.constantFrom<BatchFault>('dup_return', 'unknown_return', 'empty_return', 'prev_first', 'min_size_zero', 'empty_entry_name', 'no_entries') },
  ),
  fc.nat(),
  paramsArb,
).map(([roots, fault, at, params]) => {
  const entries: J[] = roots.map((root, i) => entry(`r${i}`, root));
  const returns = roots.map((_, i) => `r${i}`);
  let kind: 'read' | 'write' = 'read';
  if (typeof fault === 'object') {
    entries.splice(at % (entries.length + 1), 0, entry('bad', fault.root));
    if (fault.write === true) kind = 'write';
  } else {
    switch (fault) {
      case 'dup_return': returns.push(returns[0]!); break;
      case 'unknown_return': returns.push('nobody'); break;
      case 'empty_return': returns.push(''); break;
      case 'prev_first': entries[0] = entry('r0', roots[0], 'prev_not_empty'); break;
      case 'min_size_zero': entries.push(entry('late', op.nodes('all'), { var_min_size: ['r0', 0n] })); break;
      case 'empty_entry_name': entries.push(entry('', op.nodes('all'))); break;
      case 'no_entries': entries.length = 0; returns.length = 0; break;
    }
  }
  return jsonText(request(kind, entries, returns, params));
});

// ------------------------------------------------------------------ dense graphs: paths and repeats

/**
 * A denser graph than graphArb (up to 40 nodes, 160 edges, labels X and Y, no properties),
 * so many equal-length paths and repeated walks compete, followed by a write that drops some
 * edges and nodes (so deleted adjacency entries are skipped). Yields [n, graph write, drop write].
 */
const denseGraphArb: fc.Arbitrary<[number, string, string]> = fc.integer({ min: 2, max: 40 }).chain((n) => {
  const edge = fc.tuple(fc.integer({ min: 0, max: n - 1 }), fc.integer({ min: 0, max: n - 1 }), fc.constantFrom('X', 'Y'));
  const edges = fc.integer({ min: 0, max: Math.min(160, 4 * n) }).chain((m) => fc.array(edge, { minLength: m, maxLength: m }));
  return edges.chain((es) =>
    fc.tuple(fc.subarray(es.map((_, i) => i), { maxLength: Math.min(12, es.length) }), fc.subarray([...Array(n).keys()], { maxLength: 2 }))
      .map(([droppedEdges, droppedNodes]): [number, string, string] => [
        n,
        jsonText(request('write', [
          ...Array.from({ length: n }, (_, i) => entry(`n${i}`, op.addN('A', []))),
          ...es.map(([from, to, label], i) => entry(`e${i}`, op.addE(op.nodes({ var: `n${from}` }), label, { var: `n${to}` }, []))),
        ], [])),
        jsonText(request('write', [
          entry('de', { drop_edge_by_id: { edges: { ids: droppedEdges.map(BigInt) } } }),
          ...droppedNodes.map((id, i) => entry(`dn${i}`, op.unary('drop', op.nodes({ ids: [BigInt(id)] })))),
        ], [])),
      ]));
});

/** shortest_path: 8 searches in one read batch on a dense graph. [graph, drops, read]. */
export const shortestPathCaseArb: fc.Arbitrary<string[]> = denseGraphArb.chain(([n, graph, drops]) => {
  const search = fc.record({
    source: fc.integer({ min: 0, max: n - 1 }).map((i) => op.ids(i)),
    target: fc.integer({ min: 0, max: n - 1 }).map((i) => op.ids(i)),
    label: fc.option(fc.constantFrom('X', 'Y'), { freq: 3 }),
    direction: fc.constantFrom('out', 'in', 'both'),
    max_depth: fc.integer({ min: 1, max: 8 }).map(BigInt),
  }).map((f) => ({ shortest_path: f }));
  return fc.array(search, { minLength: 8, maxLength: 8 }).map((searches) =>
    [graph, drops, jsonText(request('read', searches.map((s, i) => entry(`p${i}`, s)), searches.map((_, i) => `p${i}`)))]);
});

/**
 * Multi-hop repeats of one navigation step on a dense graph, under dedup (where levels are
 * deduplicated early), count, or nothing (every walk, in order). [graph, drops, read].
 */
export const repeatCaseArb: fc.Arbitrary<string[]> = denseGraphArb.chain(([n, graph, drops]) => {
  const repeat = fc.record({
    start: fc.oneof(fc.subarray([...Array(n).keys()], { minLength: 1, maxLength: Math.min(3, n) }).map((ids) => op.nodes({ ids: ids.map(BigInt) })), fc.constant(op.nodes('all'))),
    step: fc.constantFrom('out', 'in', 'both'),
    label: fc.option(fc.constantFrom('X', 'Y', 'Q'), { freq: 3 }),
    times: fc.option(fc.integer({ min: 0, max: 4 }).map(BigInt), { freq: 4 }),
    emit: fc.constantFrom('none', 'before', 'after', 'all'),
    max_depth: fc.integer({ min: 1, max: 4 }).map(BigInt),
    wrap: fc.constantFrom('dedup', 'dedup', 'count_dedup', 'rows', 'count'),
  }).map((r) => {
    const body = { root: { [r.step]: { input: 'context', ...(r.label === null ? {} : { label: r.label }) } } };
    const rep = { repeat: { input: r.start, config: { traversal: body, ...(r.times === null ? {} : { times: r.times }), emit: r.emit, max_depth: r.max_depth } } };
    switch (r.wrap) {
      case 'dedup': return op.unary('id', op.unary('dedup', rep));
      case 'count_dedup': return op.unary('count', op.unary('dedup', rep));
      case 'count': return op.unary('count', rep);
      default: return op.unary('id', rep);
    }
  });
  return fc.array(repeat, { minLength: 4, maxLength: 4 }).map((queries) =>
    [graph, drops, jsonText(request('read', queries.map((q, i) => entry(`r${i}`, q)), queries.map((_, i) => `r${i}`)))]);
});

/**
 * Chains of navigation and element filters on a dense multigraph under count, exists,
 * limit/range and dedup: the terminals the engine answers without materializing every walk
 * (exec/streaming.ts). Some filters raise errors on every row (arithmetic on a missing
 * property), which an early stop must not hide. [graph, drops, read].
 */
export const chainCaseArb: fc.Arbitrary<string[]> = denseGraphArb.chain(([n, graph, drops]) => {
  const stepArb = fc.oneof(
    { weight: 6, arbitrary: fc.tuple(fc.constantFrom('out', 'in', 'both', 'out_e', 'in_e', 'both_e'), fc.option(fc.constantFrom('X', 'Y', 'Q'), { freq: 3 }))
      .map(([k, l]) => (input: J) => op.nav(k, input, l ?? undefined)) },
    { weight: 2, arbitrary: fc.constantFrom('out_n', 'in_n').map((k) => (input: J) => op.unary(k, input)) },
    { weight: 1, arbitrary: fc.constantFrom('A', 'X', 'Y').map((label) => (input: J) => op.with('has_label', input, { label })) },
    { weight: 2, arbitrary: fc.tuple(fc.constantFrom('lt', 'gt', 'neq'), fc.integer({ min: 0, max: n + 4 }))
      .map(([kind, k]) => (input: J) => op.with('where', input, { predicate: pr.cmp(kind as 'lt', ex.id, ex.c(tv.i64(k))) })) },
    { weight: 1, arbitrary: fc.constant((input: J) => op.with('where', input, { predicate: pr.cmp('eq', ex.bin('mod', ex.prop('x'), ex.c(tv.i64(2))), ex.c(tv.i64(0))) })) },
  );
  const bound = fc.integer({ min: 0, max: 6 }).map(op.lit);
  const query = fc.record({
    start: fc.oneof(fc.subarray([...Array(n).keys()], { minLength: 1, maxLength: Math.min(3, n) }).map((ids) => op.nodes({ ids: ids.map(BigInt) })),
      fc.constant(op.nodes('all')), fc.constant(op.edges({ ids: [0n, 1n] }))),
    steps: fc.array(stepArb, { minLength: 1, maxLength: 5 }),
    wrap: fc.constantFrom('count', 'exists', 'limit', 'range', 'dedup', 'count_dedup', 'rows'),
    a: bound,
    b: bound,
  }).map((q) => {
    const chain = q.steps.reduce((input, step) => step(input), q.start);
    switch (q.wrap) {
      case 'count': case 'exists': return op.unary(q.wrap, chain);
      case 'limit': return op.unary('id', op.with('limit', chain, { count: q.a }));
      case 'range': {
        const [start, end] = (q.a as { literal: bigint }).literal <= (q.b as { literal: bigint }).literal ? [q.a, q.b] : [q.b, q.a];
        return op.unary('id', op.with('range', chain, { start, end }));
      }
      case 'dedup': return op.unary('id', op.unary('dedup', chain));
      case 'count_dedup': return op.unary('count', op.unary('dedup', chain));
      default: return op.unary('id', chain);
    }
  });
  return fc.array(query, { minLength: 4, maxLength: 4 }).map((queries) =>
    [graph, drops, jsonText(request('read', queries.map((q, i) => entry(`c${i}`, q)), queries.map((_, i) => `c${i}`)))]);
});
