// Unit tests of the reference interpreter (test/reference/) against worked examples derived
// from the protocol spec (/work/shared/protocol). The interpreter is the oracle of the
// differential tests, so these tests pin it to the spec independently of the engine.
import { describe, it, expect } from 'vitest';
import { parseJson } from '../src/protocol/json.js';
import { ReferenceDb } from './reference/interpreter.js';
import { workedExamples } from './reference/examples.js';
import { errorCode, runReference, showPlain } from './reference/harness.js';
import { decodeRequest } from '../src/protocol/decode.js';
import { classOf } from './reference/planner.js';
import { entry, ex, forEach, op, pr, readBody, tv, writeBody, type J } from './reference/wire.js';

describe('worked examples of examples.md', () => {
  const db = new ReferenceDb();
  let fresh: ReferenceDb | null = null;
  for (const ex of workedExamples) {
    it(`#${ex.n} ${ex.title}`, () => {
      let target = db;
      if (ex.n >= 74) {
        if (fresh === null) {
          fresh = new ReferenceDb();
          expect(runReference(fresh, workedExamples[0]!.request).status).toBe(200);
        }
        target = fresh;
      }
      const got = runReference(target, ex.request);
      const want = parseJson(ex.response);
      expect(got.status, showPlain(got.body)).toBe(ex.status);
      if (ex.status === 200) expect(showPlain(got.body)).toBe(showPlain(want));
      else expect(errorCode(got.body)).toBe(errorCode(want));
    });
  }
});

// ------------------------------------------------------------------ targeted spec rules


/** Runs a body that must succeed; returns the response as comparable text. */
function ok(db: ReferenceDb, body: string): string {
  const got = runReference(db, body);
  expect(got.status, showPlain(got.body)).toBe(200);
  return showPlain(got.body);
}

function fails(db: ReferenceDb, body: string): { status: number; code: unknown } {
  const got = runReference(db, body);
  return { status: got.status, code: errorCode(got.body) };
}

/** Expected response text, normalized through the JSON parser (keys must be sorted). */
const J = (text: string) => showPlain(parseJson(text));

const rd = (root: J, params?: Record<string, J>) => readBody([entry('r', root)], ['r'], params);
const one = (db: ReferenceDb, root: J, params?: Record<string, J>) => ok(db, rd(root, params));
const nodeIds = (root: J) => op.unary('id', root);

/** A tagged value as a literal input; inputs already written as {value}/{expr} stay. */
const asInput = (v: J): J => (typeof v === 'object' && v !== null && ('value' in v || 'expr' in v) ? v : op.val(v));

/** A database built by one write of `add_n` entries n0..nK and `add_e` entries between them. */
function graph(nodes: [label: string, props: [string, J][]][], edges: [from: number, to: number, label: string][]): ReferenceDb {
  const db = new ReferenceDb();
  const entries = [
    ...nodes.map(([label, props], i) => entry(`n${i}`, op.addN(label, props.map(([k, v]) => [k, asInput(v)])))),
    ...edges.map(([from, to, label], i) => entry(`e${i}`, op.addE(op.nodes({ var: `n${from}` }), label, { var: `n${to}` }))),
  ];
  ok(db, writeBody(entries, []));
  return db;
}

describe('empty-value shape rule (envelope.md §9)', () => {
  const db = graph([['A', [['v', tv.i64(1)]]]], []);
  const none = op.nodesWhere(pr.cmp('eq', ex.prop('v'), ex.c(tv.i64(99))));

  it('classifies the worked table of §9.5 statically', () => {
    const cls = (root: J, kind: 'read' | 'write' = 'read') => {
      const body = kind === 'read' ? readBody([entry('r', root)], ['r']) : writeBody([entry('r', root)], ['r']);
      const e = decodeRequest(body).batch.entries[0]!;
      return e.kind === 'query' ? classOf(e.root) : null;
    };
    expect(cls(op.unary('value_map', op.nodes(op.ids(5))))).toBe('object');
    expect(cls(op.unary('value_map', op.with('limit', none, { count: op.lit(1) })))).toBe('object');
    expect(cls(op.unary('value_map', op.with('limit', none, { count: { expr: ex.param('n') } })))).toBe('list');
    expect(cls(op.nav('out', op.nodes(op.ids(5))))).toBe('list');
    expect(cls(op.unary('id', op.addN('A')), 'write')).toBe('list');
    expect(cls(op.unary('count', none))).toBe('scalar');
    expect(cls(op.unary('fold', op.nodes(op.ids(5))))).toBe('list');
    expect(cls(op.with('range', op.with('order_by', none, { property: 'v', order: 'asc' }), { start: op.lit(0), end: op.lit(1) }))).toBe('object');
    expect(cls(op.with('range', none, { start: op.lit(2), end: op.lit(4) }))).toBe('list');
    expect(cls({ shortest_path: { source: op.ids(0), target: op.ids(1), direction: 'out', max_depth: 2n } })).toBe('list');
    // A constant bound is not a literal for this rule, even though the planner normalizes it.
    expect(cls(op.unary('value_map', op.with('limit', none, { count: { expr: ex.c(tv.i64(1)) } })))).toBe('list');
    expect(cls(op.unary('exists', none))).toBe('scalar');
    expect(cls(op.nodes(op.ids()))).toBe('object');
    expect(cls(op.nodes(op.ids(1, 2)))).toBe('list');
  });

  it('renders empty values as [] / null / the scalar', () => {
    const body = readBody([
      entry('ghost', op.unary('value_map', op.nodes(op.ids(5)))),
      entry('lim1', op.unary('value_map', op.with('limit', none, { count: op.lit(1) }))),
      entry('limp', op.unary('value_map', op.with('limit', none, { count: { expr: ex.param('n') } }))),
      entry('out5', op.nav('out', op.nodes(op.ids(5)))),
      entry('cnt', op.unary('count', none)),
      entry('ex', op.unary('exists', none)),
      entry('fold5', op.unary('fold', op.nodes(op.ids(5)))),
      entry('r01', op.with('range', op.with('order_by', none, { property: 'v', order: 'asc' }), { start: op.lit(0), end: op.lit(1) })),
      entry('r24', op.with('range', none, { start: op.lit(2), end: op.lit(4) })),
      entry('sp', { shortest_path: { source: op.ids(0), target: op.ids(7), direction: 'out', max_depth: 2n } }),
      entry('present', op.nodes(op.ids(0))),
    ], ['ghost', 'lim1', 'limp', 'out5', 'cnt', 'ex', 'fold5', 'r01', 'r24', 'sp', 'present'], { n: 3n });
    expect(ok(db, body)).toBe(J(`{"cnt":0,"ex":false,"fold5":[],"ghost":null,"lim1":null,"limp":[],"out5":[],
      "present":[{"$id":0}],"r01":null,"r24":[],"sp":[]}`));
  });

  it('a skipped scalar entry renders as [], an executed one as itself', () => {
    const body = readBody([
      entry('a', none),
      entry('skipped_count', op.unary('count', op.nodes('all')), { var_not_empty: 'a' }),
      entry('skipped_list', op.nodes('all'), { var_not_empty: 'a' }),
      entry('skipped_obj', op.nodes(op.ids(0)), { var_not_empty: 'a' }),
      entry('ran_count', op.unary('count', none), { var_empty: 'a' }),
    ], ['skipped_count', 'skipped_list', 'skipped_obj', 'ran_count']);
    expect(ok(db, body)).toBe(J('{"ran_count":0,"skipped_count":[],"skipped_list":[],"skipped_obj":null}'));
  });

  it('windows over a count make a one-element array; limit 0 of a count is an empty "one"', () => {
    const body = readBody([
      entry('l', op.with('limit', op.unary('count', op.nodes('all')), { count: op.lit(5) })),
      entry('l0', op.with('limit', op.unary('count', op.nodes('all')), { count: op.lit(0) })),
      entry('d', op.unary('dedup', op.unary('count', op.nodes('all')))),
      entry('cc', op.unary('count', op.unary('count', none))),
    ], ['l', 'l0', 'd', 'cc']);
    expect(ok(db, body)).toBe(J('{"cc":1,"d":[1],"l":[1],"l0":null}'));
  });

  it('conditions use sizes: a count has its own size, a folded stream size 1', () => {
    const body = readBody([
      entry('c', op.unary('count', op.nodes('all'))),
      entry('f', op.unary('fold', op.nodes('all'))),
      entry('x', op.nodes('all'), { var_min_size: ['c', 2n] }),
      entry('y', op.nodes('all'), { var_min_size: ['c', 1n] }),
      entry('z', op.nodes('all'), { var_min_size: ['f', 1n] }),
    ], ['x', 'y', 'z']);
    expect(ok(db, body)).toBe(J('{"x":[],"y":[{"$id":0}],"z":[{"$id":0}]}'));
  });
});

describe('navigation (operations.md §4)', () => {
  // n0..n3; e0: 2→0 X, e1: 0→1 X, e2: 0→1 Y, e3: 0→1 X, e4: 0→0 X (self-loop), e5: 3→0 Y
  const db = graph([['A', []], ['B', []], ['A', []], ['B', []]],
    [[2, 0, 'X'], [0, 1, 'X'], [0, 1, 'Y'], [0, 1, 'X'], [0, 0, 'X'], [3, 0, 'Y']]);
  const n0 = op.nodes(op.ids(0));
  const ids = (root: J) => one(db, nodeIds(root));

  it('neighbors are distinct per input row and ascending; a self-loop yields the node once', () => {
    expect(ids(op.nav('out', n0))).toBe(J('{"r":[0,1]}'));
    expect(ids(op.nav('out', n0, 'X'))).toBe(J('{"r":[0,1]}'));
    expect(ids(op.nav('out', n0, 'Y'))).toBe(J('{"r":[1]}'));
    expect(ids(op.nav('in', n0))).toBe(J('{"r":[0,2,3]}'));
    expect(ids(op.nav('both', n0))).toBe(J('{"r":[0,1,2,3]}'));
    expect(ids(op.nav('out', op.nav('out', n0, 'Z')))).toBe(J('{"r":[]}'));
  });

  it('de-duplication is per input row, not across rows', () => {
    expect(ids(op.nav('in', op.nodes(op.ids(1, 0))))).toBe(J('{"r":[0,0,2,3]}'));
    expect(ids(op.unary('dedup', op.nav('in', op.nodes(op.ids(1, 0)))))).toBe(J('{"r":[0,2,3]}'));
  });

  it('edge steps list every parallel edge once, ascending by edge ID', () => {
    expect(ids(op.nav('out_e', n0))).toBe(J('{"r":[1,2,3,4]}'));
    expect(ids(op.nav('in_e', n0))).toBe(J('{"r":[0,4,5]}'));
    expect(ids(op.nav('both_e', n0))).toBe(J('{"r":[0,1,2,3,4,5]}'));
    expect(ids(op.nav('both_e', n0, 'Y'))).toBe(J('{"r":[2,5]}'));
    expect(ids(op.nav('out_e', op.edges(op.ids(0))))).toBe(J('{"r":[]}'));
  });

  it('other_n uses the latest node of the path', () => {
    expect(ids(op.unary('other_n', op.nav('both_e', n0)))).toBe(J('{"r":[2,1,1,1,0,3]}'));
    expect(ids(op.unary('other_n', op.edges(op.ids(1))))).toBe(J('{"r":[0,1]}'));
    expect(ids(op.unary('other_n', op.edges(op.ids(4))))).toBe(J('{"r":[0]}'));
    expect(ids(op.unary('other_n', op.nav('in_e', op.nodes(op.ids(1)))))).toBe(J('{"r":[0,0,0]}'));
  });

  it('out/in/both on edge rows go to the endpoints; out_n/in_n too', () => {
    expect(ids(op.nav('out', op.edges(op.ids(0))))).toBe(J('{"r":[0]}'));
    expect(ids(op.nav('in', op.edges(op.ids(0))))).toBe(J('{"r":[2]}'));
    expect(ids(op.nav('both', op.edges(op.ids(0)), 'Y'))).toBe(J('{"r":[2,0]}'));
    expect(ids(op.unary('out_n', op.edges(op.ids(5, 0))))).toBe(J('{"r":[0,0]}'));
    expect(ids(op.unary('in_n', op.edges(op.ids(5, 0))))).toBe(J('{"r":[3,2]}'));
    expect(ids(op.unary('in_n', n0))).toBe(J('{"r":[0,2,3]}'));
  });

  it('path records the start and every hop', () => {
    const got = one(db, op.unary('path', op.unary('out_n', op.nav('out_e', op.nodes(op.ids(2)), 'X'))));
    expect(got).toBe(J('{"r":[{"bindings":{},"current":{"node":0},"path":[{"node":2},{"edge":0},{"node":0}]}]}'));
  });
});

describe('ordering (values.md §8)', () => {
  // One node per type family, created out of order, plus a missing value and a tie.
  const values: [number, J | undefined][] = [
    [0, tv.obj([['a', tv.i64(1)]])], [1, tv.str('b')], [2, undefined], [3, tv.i64(2)], [4, tv.null],
    [5, tv.bool(true)], [6, tv.f64(1.5)], [7, tv.dt(1000)], [8, tv.bytes([1, 2])], [9, tv.i64s([1])],
    [10, tv.f64s([0.5])], [11, tv.f32s([0.5])], [12, tv.strs(['x'])], [13, tv.arr([tv.i64(1)])], [14, tv.bool(false)],
    [15, tv.str('a')], [16, tv.f32(1.25)], [17, tv.i64(2)], [18, tv.bytes([1])], [19, tv.obj([])],
  ];
  const db = graph(values.map(([, v]) => ['N', v === undefined ? [] : [['v', op.val(v)]]]), []);
  const sorted = (order: 'asc' | 'desc') =>
    one(db, nodeIds(op.with('order_by', op.nodes('all'), { property: 'v', order })));

  it('missing first, then type families, then values; ties by ID', () => {
    expect(sorted('asc')).toBe(J('{"r":[2,4,14,5,16,6,3,17,7,15,1,18,8,9,10,11,12,13,19,0]}'));
  });

  it('desc reverses everything except the tie-break', () => {
    expect(sorted('desc')).toBe(J('{"r":[0,19,13,12,11,10,9,8,18,1,15,7,3,17,6,16,5,14,4,2]}'));
  });

  it('order_by_multiple uses later keys for ties', () => {
    const db2 = graph([['N', [['a', op.val(tv.i64(1))], ['b', op.val(tv.str('y'))]]], ['N', [['a', op.val(tv.f64(1))], ['b', op.val(tv.str('x'))]]],
      ['N', [['a', op.val(tv.i64(0))]]]], []);
    expect(one(db2, nodeIds(op.with('order_by_multiple', op.nodes('all'), { orderings: [['a', 'desc'], ['b', 'asc']] }))))
      .toBe(J('{"r":[1,0,2]}'));
  });
});

describe('equality and comparison (values.md §7)', () => {
  const db = graph([['N', [['nul', op.val(tv.null)], ['s', op.val(tv.str('Abc'))], ['tags', op.val(tv.strs(['ab']))],
    ['obj', op.val(tv.obj([['a', tv.obj([['b', tv.i64(1)]])]]))], ['x.y', op.val(tv.i64(7))], ['x', op.val(tv.obj([['y', tv.i64(8)]]))]]]], []);
  const holds = (p: J, params?: Record<string, J>) =>
    one(db, op.unary('exists', op.with('where', op.nodes(op.ids(0)), { predicate: p })), params) === J('{"r":true}');
  const c = ex.c;

  it('numeric equality is exact across i64/f64/f32', () => {
    expect(holds(pr.cmp('eq', c(tv.i64(9007199254740993n)), c(tv.f64(9007199254740992))))).toBe(false);
    expect(holds(pr.cmp('eq', c(tv.i64(9007199254740992n)), c(tv.f64(9007199254740992))))).toBe(true);
    expect(holds(pr.cmp('eq', c(tv.f64(-0)), c(tv.i64(0))))).toBe(true);
    expect(holds(pr.cmp('eq', c(tv.f32(0.1)), c(tv.f64(0.1))))).toBe(false);
    expect(holds(pr.cmp('eq', c(tv.f32(0.5)), c(tv.f64(0.5))))).toBe(true);
    expect(holds(pr.cmp('lt', c(tv.i64(9007199254740992n)), c(tv.f64(9007199254740993.5))))).toBe(true);
  });

  it('composite equality includes variant tags', () => {
    expect(holds(pr.cmp('eq', c(tv.arr([tv.i64(1)])), c(tv.arr([tv.f64(1)]))))).toBe(false);
    expect(holds(pr.cmp('eq', c(tv.arr([tv.i64(1)])), c(tv.arr([tv.i64(1)]))))).toBe(true);
    expect(holds(pr.cmp('eq', c(tv.i64s([1, 2])), c(tv.arr([tv.i64(1), tv.i64(2)]))))).toBe(false);
    expect(holds(pr.cmp('eq', c(tv.f64s([1, 2])), c(tv.f64s([1, 2]))))).toBe(true);
    expect(holds(pr.cmp('eq', c(tv.strs([])), c(tv.i64s([]))))).toBe(false);
    expect(holds(pr.cmp('eq', c(tv.dt(5)), c(tv.i64(5))))).toBe(false);
  });

  it('null and missing', () => {
    expect(holds(pr.cmp('eq', ex.prop('missing'), c(tv.null)))).toBe(true);
    expect(holds(pr.cmp('neq', ex.prop('missing'), c(tv.str('open'))))).toBe(true);
    expect(holds(pr.hasKey('missing'))).toBe(false);
    expect(holds(pr.isNull('missing'))).toBe(true);
    expect(holds(pr.hasKey('nul'))).toBe(true);
    expect(holds(pr.isNull('nul'))).toBe(true);
    expect(holds(pr.notNull('nul'))).toBe(false);
    expect(holds(pr.hasKey('$id'))).toBe(true);
  });

  it('ordering comparisons are false when not comparable, never errors', () => {
    expect(holds(pr.cmp('gt', c(tv.str('b')), c(tv.i64(1))))).toBe(false);
    expect(holds(pr.cmp('lte', c(tv.null), c(tv.null)))).toBe(false);
    expect(holds(pr.cmp('gte', ex.prop('missing'), c(tv.i64(0))))).toBe(false);
    expect(holds(pr.cmp('lt', c(tv.dt(5)), c(tv.dt(6))))).toBe(true);
    expect(holds(pr.cmp('lt', c(tv.dt(5)), c(tv.str('x'))))).toBe(false);
    expect(holds(pr.cmp('gt', c(tv.bool(true)), c(tv.bool(false))))).toBe(false);
    expect(holds(pr.compare('gte', c(tv.i64(2)), c(tv.f32(2))))).toBe(true);
  });

  it('strings compare byte-wise (UTF-8), not by UTF-16 code units', () => {
    expect(holds(pr.cmp('lt', c(tv.str('Z')), c(tv.str('a'))))).toBe(true);
    expect(holds(pr.cmp('lt', c(tv.str('\uffff')), c(tv.str('😀'))))).toBe(true);
  });

  it('between is inclusive on both ends', () => {
    expect(holds(pr.between(c(tv.i64(5)), c(tv.i64(5)), c(tv.f64(5))))).toBe(true);
    expect(holds(pr.between(c(tv.i64(5)), c(tv.null), c(tv.i64(9))))).toBe(false);
    expect(holds(pr.between(c(tv.str('b')), c(tv.str('a')), c(tv.str('b'))))).toBe(true);
  });

  it('string predicates need two strings and are case-sensitive', () => {
    expect(holds(pr.startsWith(ex.prop('tags'), c(tv.str('a'))))).toBe(false);
    expect(holds(pr.startsWith(ex.prop('s'), c(tv.str('Ab'))))).toBe(true);
    expect(holds(pr.contains(ex.prop('s'), c(tv.str('a'))))).toBe(false);
    expect(holds(pr.endsWith(ex.prop('s'), c(tv.str('bc'))))).toBe(true);
    expect(holds(pr.endsWith(ex.prop('s'), c(tv.i64(1))))).toBe(false);
  });

  it('is_in: arrays are sets, a scalar is a one-element set, empty matches nothing', () => {
    expect(holds(pr.isIn(c(tv.str('a')), ex.param('set')), { set: ['a', 'b'] })).toBe(true);
    expect(holds(pr.isIn(c(tv.i64(1)), c(tv.f64s([1]))))).toBe(true);
    expect(holds(pr.isIn(c(tv.i64(1)), c(tv.i64(1))))).toBe(true);
    expect(holds(pr.isIn(c(tv.i64(1)), c(tv.arr([]))))).toBe(false);
    expect(holds(pr.isIn(c(tv.str('x')), c(tv.strs([]))))).toBe(false);
    expect(holds(pr.isIn(c(tv.arr([tv.i64(1)])), c(tv.arr([tv.arr([tv.i64(1)])]))))).toBe(true);
  });

  it('property resolution: exact names first, then dotted paths into objects', () => {
    const vals = one(db, op.with('values', op.nodes(op.ids(0)), { properties: ['obj.a.b', 'obj..a', 'obj.a.b.c', 'x.y', 'tags.0', 'obj.a'] }));
    expect(vals).toBe(J('{"r":[{"obj.a":{"b":1},"obj.a.b":1,"x.y":7}]}'));
  });
});

describe('expressions (values.md §5)', () => {
  const db = graph([['N', [['i', op.val(tv.i64(7))], ['f', op.val(tv.f32(0.5))], ['s', op.val(tv.str('x'))]]]], []);
  const proj = (e: J) => one(db, op.with('project', op.nodes(op.ids(0)), { projections: [{ expr: { alias: 'v', expr: e } }] }));

  it('arithmetic yields f64, mod and neg keep i64', () => {
    expect(proj(ex.bin('add', ex.c(tv.i64(1)), ex.c(tv.i64(2))))).toBe(J('{"r":[{"v":3.0}]}'));
    expect(proj(ex.bin('mod', ex.prop('i'), ex.c(tv.i64(-2))))).toBe(J('{"r":[{"v":1}]}'));
    expect(proj(ex.bin('mod', ex.neg(ex.prop('i')), ex.c(tv.i64(2))))).toBe(J('{"r":[{"v":-1}]}'));
    expect(proj(ex.neg(ex.prop('i')))).toBe(J('{"r":[{"v":-7}]}'));
    expect(proj(ex.neg(ex.prop('f')))).toBe(J('{"r":[{"v":-0.5}]}'));
    expect(proj(ex.bin('div', ex.c(tv.i64(1)), ex.c(tv.i64(0))))).toBe(J('{"r":[{"v":null}]}'));
    expect(proj(ex.id)).toBe(J('{"r":[{"v":0}]}'));
    expect(proj(ex.case([[pr.cmp('gt', ex.prop('i'), ex.c(tv.i64(9))), ex.c(tv.str('big'))]], null))).toBe(J('{"r":[{"v":null}]}'));
  });

  it('type errors are run-time 500 invalid_query, only when a row is evaluated', () => {
    expect(fails(db, rd(op.with('project', op.nodes(op.ids(0)), { projections: [{ expr: { alias: 'v', expr: ex.bin('add', ex.prop('s'), ex.c(tv.i64(1))) } }] }))))
      .toEqual({ status: 500, code: 'invalid_query' });
    expect(fails(db, rd(op.with('project', op.nodes(op.ids(0)), { projections: [{ expr: { alias: 'v', expr: ex.bin('mod', ex.c(tv.f64(1)), ex.c(tv.i64(1))) } }] }))))
      .toEqual({ status: 500, code: 'invalid_query' });
    expect(fails(db, rd(op.with('project', op.nodes(op.ids(0)), { projections: [{ expr: { alias: 'v', expr: ex.param('nope') } }] }))))
      .toEqual({ status: 500, code: 'invalid_query' });
    expect(one(db, op.with('project', op.nodes(op.ids(9)), { projections: [{ expr: { alias: 'v', expr: ex.param('nope') } }] })))
      .toBe(J('{"r":null}'));
  });
});

describe('planning errors come before anything runs', () => {
  it('a planning error in a later entry means the earlier write did not happen', () => {
    const db = new ReferenceDb();
    const body = writeBody([entry('a', op.addN('A')), entry('b', op.with('union', op.nodes('all'), { traversals: [{ root: 'context' }] }))], ['a']);
    expect(fails(db, body)).toEqual({ status: 400, code: 'invalid_branch_arity' });
    expect(ok(db, writeBody([entry('a', op.addN('A'))], ['a']))).toBe(J('{"a":[{"$id":0}]}'));
  });

  it.each([
    ['duplicate_element_id', rd(op.nodes(op.ids(1, 1)))],
    ['invalid_predicate_arity', rd(op.nodesWhere(pr.and([])))],
    ['invalid_empty_name', rd(op.with('has', op.nodes('all'), { property: '', value: tv.null }))],
    ['invalid_stream_range', rd(op.with('range', op.nodes('all'), { start: op.lit(3), end: { expr: ex.c(tv.i64(1)) } }))],
    ['invalid_stream_bound_expression', rd(op.with('skip', op.nodes('all'), { count: { expr: ex.c(tv.f64(1)) } }))],
    ['invalid_projection_arity', rd(op.with('values', op.nodes('all'), { properties: [] }))],
    ['duplicate_property_selection', rd(op.with('value_map', op.nodes('all'), { properties: ['a', 'a'] }))],
    ['duplicate_projection_alias', rd(op.with('project', op.nodes('all'), { projections: [{ property: { source: 'a', alias: 'x' } }, { property: { source: 'b', alias: 'x' } }] }))],
    ['invalid_order_keys', rd(op.with('order_by_multiple', op.nodes('all'), { orderings: [] }))],
    ['duplicate_order_key', rd(op.with('order_by_multiple', op.nodes('all'), { orderings: [['a', 'asc'], ['a', 'desc']] }))],
    ['duplicate_property_assignment', writeBody([entry('a', op.addN('A', [['p', op.val(tv.null)], ['p', op.val(tv.null)]]))], [])],
    ['unsupported_edge_all_target', writeBody([entry('a', { drop_edge_by_id: { edges: 'all' } })], [])],
    ['duplicate_return_variable', readBody([entry('a', op.nodes('all'))], ['a', 'a'])],
    ['internal_planner_error', readBody([entry('a', op.nodes('all'))], ['b'])],
    ['invalid_initial_batch_condition', readBody([entry('a', op.nodes('all'), 'prev_not_empty')], [])],
    ['invalid_batch_condition_min_size', readBody([entry('a', op.nodes('all')), entry('b', op.nodes('all'), { var_min_size: ['a', 0n] })], [])],
    ['unbound_context', rd(op.nav('out', 'context'))],
    ['invalid_sub_traversal_operation', rd(op.with('optional', op.nodes('all'), { traversal: { root: op.nodes('all') } }))],
  ])('%s', (code, body) => {
    expect(fails(new ReferenceDb(), body)).toEqual({ status: 400, code });
  });
});

describe('transactions and ID sequences (envelope.md §5, §10)', () => {
  const count = (db: ReferenceDb) => ok(db, readBody([entry('n', op.unary('count', op.nodes('all'))), entry('e', op.unary('count', op.edges('all')))], ['n', 'e']));

  it('later entries see earlier effects; a failing last entry rolls everything back', () => {
    const db = new ReferenceDb();
    const body = writeBody([
      entry('a', op.addN('A', [['v', op.val(tv.i64(1))]])),
      entry('b', op.addE(op.nodes({ var: 'a' }), 'L', { var: 'a' })),
      entry('c', op.unary('count', op.nodes('all'))),
      entry('boom', op.with('set_property', op.nodes('all'), { name: 'v', value: op.expr(ex.bin('mod', ex.prop('v'), ex.c(tv.i64(0)))) })),
    ], ['c']);
    expect(fails(db, body)).toEqual({ status: 500, code: 'invalid_query' });
    expect(count(db)).toBe(J('{"e":0,"n":0}'));
    // The IDs of the failed write stay consumed: the next node is 1, the next edge 1.
    const again = writeBody([entry('a', op.addN('A')), entry('b', op.addE(op.nodes({ var: 'a' }), 'L', { var: 'a' })),
      entry('c', op.unary('count', op.nodes('all')))], ['a', 'b', 'c']);
    expect(ok(db, again)).toBe(J('{"a":[{"$id":1}],"b":[{"$id":1}],"c":1}'));
  });

  it('add_e to a missing node fails with node_not_found and consumes the edge ID', () => {
    const db = new ReferenceDb();
    const body = writeBody([entry('a', op.addN('A')), entry('e', op.addE(op.nodes({ var: 'a' }), 'L', op.ids(404)))], ['e']);
    expect(fails(db, body)).toEqual({ status: 500, code: 'node_not_found' });
    expect(ok(db, writeBody([entry('a', op.addN('A')), entry('e', op.addE(op.nodes({ var: 'a' }), 'L', { var: 'a' }))], ['a', 'e'])))
      .toBe(J('{"a":[{"$id":1}],"e":[{"$id":1}]}'));
  });

  it('add_e: no usable input rows is not an error even without targets; targets resolve first', () => {
    const db = graph([['A', []]], []);
    expect(ok(db, writeBody([entry('e', op.addE(op.nodes(op.ids(9)), 'L', op.ids()))], ['e']))).toBe(J('{"e":[]}'));
    expect(fails(db, writeBody([entry('e', op.addE(op.nodes(op.ids(0)), 'L', op.ids()))], ['e']))).toEqual({ status: 500, code: 'invalid_query' });
    expect(fails(db, writeBody([entry('e', op.addE(op.nodes(op.ids(9)), 'L', { var: 'nope' }))], ['e']))).toEqual({ status: 500, code: 'invalid_query' });
    // |sources| × |targets| edges, source-major.
    const db2 = graph([['A', []], ['A', []], ['B', []]], []);
    const many = writeBody([entry('e', op.with('project', op.addE(op.nodes('all'), 'L', op.ids(2, 0)), {
      projections: [{ property: { source: '$id', alias: 'id' } }, { property: { source: '$from', alias: 'f' } }, { property: { source: '$to', alias: 't' } }] }))], ['e']);
    expect(ok(db2, many)).toBe(J(`{"e":[{"f":0,"id":0,"t":2},{"f":0,"id":1,"t":0},{"f":1,"id":2,"t":2},{"f":1,"id":3,"t":0},
      {"f":2,"id":4,"t":2},{"f":2,"id":5,"t":0}]}`));
  });

  it('drop removes incident edges; drop_edge respects direction; drop_edge_by_id ignores missing IDs', () => {
    const db = graph([['A', []], ['A', []], ['A', []]], [[0, 1, 'X'], [1, 0, 'X'], [1, 2, 'Y'], [2, 2, 'X']]);
    const body = writeBody([
      entry('d1', { drop_edge: { input: op.nodes(op.ids(0)), to: op.ids(1) } }),
      entry('d2', { drop_edge_by_id: { edges: op.ids(3, 99) } }),
      entry('d3', op.unary('drop', op.nodes(op.ids(2)))),
      entry('left', op.unary('id', op.edges('all'))),
    ], ['d1', 'd2', 'd3', 'left']);
    expect(ok(db, body)).toBe(J('{"d1":[],"d2":[],"d3":[],"left":[1]}'));
  });

  it('set_property relabels nodes, rejects edge relabels; remove_property tolerates absent keys', () => {
    const db = graph([['A', [['k', op.val(tv.i64(1))]]], ['A', []]], [[0, 1, 'X']]);
    expect(ok(db, writeBody([
      entry('s', op.with('set_property', op.nodes(op.ids(0)), { name: '$label', value: op.val(tv.str('B')) })),
      entry('r', op.with('remove_property', op.nodes('all'), { name: 'k' })),
      entry('m', op.unary('value_map', op.nodes('all'))),
    ], ['m']))).toBe(J('{"m":[{"$id":0,"$label":"B"},{"$id":1,"$label":"A"}]}'));
    expect(fails(db, writeBody([entry('s', op.with('set_property', op.edges('all'), { name: '$label', value: op.val(tv.str('B')) }))], [])))
      .toEqual({ status: 500, code: 'invalid_query' });
    expect(fails(db, writeBody([entry('s', op.with('set_property', op.nodes('all'), { name: '$label', value: op.val(tv.i64(1)) }))], [])))
      .toEqual({ status: 500, code: 'invalid_query' });
  });
});

describe('for_each (envelope.md §4.4)', () => {
  it('members shadow parameters, the array itself is hidden, the last iteration wins', () => {
    const db = new ReferenceDb();
    const body = writeBody([
      forEach('rows', [entry('added', op.addN('P', [['name', op.expr(ex.param('name'))], ['k', op.expr(ex.param('k'))]]))]),
      entry('all', op.with('values', op.nodes('all'), { properties: ['name', 'k'] })),
    ], ['added', 'all'], { rows: [{ name: 'a' }, { name: 'b', k: 2n }], k: 'top' });
    expect(ok(db, body)).toBe(J('{"added":[{"$id":1}],"all":[{"k":"top","name":"a"},{"k":2,"name":"b"}]}'));
    const hidden = writeBody([forEach('rows', [entry('x', op.addN('P', [['r', op.expr(ex.param('rows'))]]))])], [], { rows: [{ a: 1n }] });
    expect(fails(db, hidden)).toEqual({ status: 500, code: 'invalid_query' });
  });

  it('a body that never ran: list/object names render empty, scalar names fail', () => {
    const db = new ReferenceDb();
    expect(ok(db, readBody([forEach('rows', [entry('l', op.nodes('all')), entry('o', op.nodes(op.ids(1)))])], ['l', 'o'], { rows: [] })))
      .toBe(J('{"l":[],"o":null}'));
    expect(fails(db, readBody([forEach('rows', [entry('c', op.unary('count', op.nodes('all')))])], ['c'], { rows: [] })))
      .toEqual({ status: 500, code: 'invalid_query' });
    expect(fails(db, readBody([forEach('rows', [entry('c', op.nodes('all'))])], [], { rows: [1n] })))
      .toEqual({ status: 500, code: 'invalid_query' });
  });
});

describe('terminals (operations.md §12)', () => {
  const db = graph([['P', [['city', op.val(tv.str('b'))], ['n', op.val(tv.i64(2))]]], ['P', [['city', op.val(tv.str('a'))], ['n', op.val(tv.f64(2))]]],
    ['P', [['n', op.val(tv.str('3'))]]], ['Q', [['city', op.val(tv.str('b'))], ['n', op.val(tv.bool(true))]]]], [[0, 1, 'X']]);

  it('group keys use display text: i64 2 and f64 2.0 share a group; absent is "null"', () => {
    expect(one(db, op.with('group', op.nodes('all'), { property: 'n' }))).toBe(J(
      '{"r":[{"count":2,"ids":[0,1],"n":2},{"count":1,"ids":[2],"n":"3"},{"count":1,"ids":[3],"n":true}]}'));
    expect(one(db, op.with('group_count', op.nodes('all'), { property: 'city' }))).toBe(J(
      '{"r":[{"city":"a","count":1},{"city":"b","count":2},{"city":null,"count":1}]}'));
  });

  it('aggregate_by counts numbers and numeric strings, always as f64', () => {
    const agg = (fn: string) => one(db, op.with('aggregate_by', op.nodes('all'), { function: fn, property: 'n' }));
    expect(agg('sum')).toBe(J('{"r":[{"n_Sum":7.0}]}'));
    expect(agg('count')).toBe(J('{"r":[{"n_Count":3.0}]}'));
    expect(agg('min')).toBe(J('{"r":[{"n_Min":2.0}]}'));
    expect(one(db, op.with('aggregate_by', op.nodes(op.ids()), { function: 'mean', property: 'n' }))).toBe(J('{"r":[{"n_Mean":0.0}]}'));
  });

  it('values omits rows without any listed property; project omits absent property items', () => {
    expect(one(db, op.with('values', op.nodes('all'), { properties: ['city'] }))).toBe(J('{"r":[{"city":"b"},{"city":"a"},{"city":"b"}]}'));
    expect(one(db, op.with('project', op.nodes(op.ids(2)), { projections: [{ property: { source: 'city', alias: 'c' } }] }))).toBe(J('{"r":[{}]}'));
    expect(one(db, op.unary('edge_properties', op.edges('all'))))
      .toBe(J('{"r":[{"$from":0,"$id":0,"$label":"X","$to":1}]}'));
    expect(one(db, op.unary('label', op.nodes(op.ids(3, 0))))).toBe(J('{"r":["Q","P"]}'));
  });
});

describe('the remaining operations (operations.md §8, §10, §11, §3.8)', () => {
  // A chain 0 → 1 → 2 → 3 (label X) plus 0 → 2 (label Y).
  const db = graph([['A', [['k', tv.i64(0)]]], ['A', [['k', tv.i64(1)]]], ['B', [['k', tv.i64(2)]]], ['B', [['k', tv.i64(3)]]]],
    [[0, 1, 'X'], [1, 2, 'X'], [2, 3, 'X'], [0, 2, 'Y']]);
  const ids = (root: J) => one(db, nodeIds(root));
  const rep = (emit: string, extra: Record<string, J> = {}) => ids(op.with('repeat', op.nodes(op.ids(0)), {
    config: { traversal: { root: op.nav('out', 'context', 'X') }, times: 2n, emit, max_depth: 10n, ...extra } }));

  it('repeat emit modes, until and running out of rows', () => {
    expect(rep('none')).toBe(J('{"r":[2]}'));
    expect(rep('before')).toBe(J('{"r":[0,1]}'));
    expect(rep('after')).toBe(J('{"r":[1,2]}'));
    expect(rep('all')).toBe(J('{"r":[0,1,1,2]}'));
    expect(rep('after', { emit_predicate: pr.cmp('gt', ex.prop('k'), ex.c(tv.i64(1))) })).toBe(J('{"r":[2]}'));
    expect(rep('none', { times: 5n, until: pr.cmp('eq', ex.prop('k'), ex.c(tv.i64(1))) })).toBe(J('{"r":[1]}'));
    expect(rep('none', { times: 5n })).toBe(J('{"r":[]}'));
    expect(rep('all', { times: 5n, max_depth: 1n })).toBe(J('{"r":[0,1]}'));
  });

  it('choose runs each body once over its partition: then-output first', () => {
    const body = op.with('choose', op.nodes('all'), {
      condition: pr.label('B'), then_traversal: { root: 'context' }, else_traversal: { root: op.nav('out', 'context') } });
    expect(ids(body)).toBe(J('{"r":[2,3,1,2,2]}'));
  });

  it('union with bindings must not mix node and edge rows', () => {
    const mixed = op.with('union', op.with('bind', op.nodes(op.ids(0)), { name: 'b' }),
      { traversals: [{ root: 'context' }, { root: op.nav('out_e', 'context') }] });
    expect(fails(db, rd(op.unary('count', mixed)))).toEqual({ status: 500, code: 'invalid_query' });
    const plain = op.with('union', op.nodes(op.ids(0)), { traversals: [{ root: 'context' }, { root: op.nav('out_e', 'context') }] });
    expect(one(db, op.unary('count', plain))).toBe(J('{"r":3}'));
  });

  it('as/store bind for later operations of the same entry (inject, select, within)', () => {
    const seeded = op.with('as', op.nodes(op.ids(0, 1)), { name: 'v' });
    expect(ids(op.with('inject', op.nav('out', seeded, 'X'), { variable: 'v' }))).toBe(J('{"r":[1,2,0,1]}'));
    expect(ids(op.with('select', op.nav('out', seeded, 'X'), { name: 'v' }))).toBe(J('{"r":[0,1]}'));
    expect(ids(op.with('without', op.nav('both', seeded), { variable: 'v' }))).toBe(J('{"r":[2,2]}'));
    expect(fails(db, rd(op.with('inject', op.nodes('all'), { variable: 'nope' })))).toEqual({ status: 500, code: 'invalid_query' });
  });

  it('a navigation label is ignored on edge rows, even one no edge has', () => {
    expect(ids(op.nav('out', op.edges(op.ids(0)), 'NEVER_USED'))).toBe(J('{"r":[1]}'));
    expect(ids(op.nav('in', op.edges(op.ids(0)), 'Y'))).toBe(J('{"r":[0]}'));
  });

  it('sack_add: i64 + i64 stays i64, mixed numbers become f64, the rest fails', () => {
    const sack = (initial: J, property: string) => one(db, op.unary('sack_get', op.with('sack_add', op.with('with_sack', op.nodes(op.ids(1)), { initial }), { property })));
    expect(sack(tv.i64(5), 'k')).toBe(J('{"r":[{"bindings":{},"current":{"node":1},"sack":6}]}'));
    expect(sack(tv.f32(0.5), 'k')).toBe(J('{"r":[{"bindings":{},"current":{"node":1},"sack":1.5}]}'));
    expect(sack(tv.i64(5), 'missing')).toBe(J('{"r":[{"bindings":{},"current":{"node":1},"sack":5}]}'));
    expect(fails(db, rd(op.with('sack_add', op.with('with_sack', op.nodes(op.ids(1)), { initial: tv.i64((1n << 63n) - 1n) }), { property: 'k' }))))
      .toEqual({ status: 500, code: 'invalid_query' });
    expect(fails(db, rd(op.with('sack_add', op.with('with_sack', op.nodes(op.ids(1)), { initial: tv.str('x') }), { property: 'k' }))))
      .toEqual({ status: 500, code: 'invalid_query' });
  });

  it('shortest_path: BFS expanding neighbors in ascending ID order', () => {
    const sp = (source: J, target: J, direction: string, max: bigint, label?: string) =>
      one(db, { shortest_path: { source, target, direction, max_depth: max, ...(label === undefined ? {} : { label }) } });
    expect(sp(op.ids(0), op.ids(3), 'out', 5n)).toBe(J('{"r":[0,2,3]}'));
    expect(sp(op.ids(0), op.ids(3), 'out', 5n, 'X')).toBe(J('{"r":[0,1,2,3]}'));
    expect(sp(op.ids(3), op.ids(0), 'out', 5n)).toBe(J('{"r":[]}'));
    expect(sp(op.ids(3), op.ids(0), 'both', 2n)).toBe(J('{"r":[3,2,0]}'));
    expect(sp(op.ids(1), op.ids(1), 'out', 1n)).toBe(J('{"r":[1]}'));
    expect(sp(op.ids(0), op.ids(3), 'out', 1n)).toBe(J('{"r":[]}'));
    expect(fails(db, rd({ shortest_path: { source: 'all', target: op.ids(1), direction: 'out', max_depth: 2n } })))
      .toEqual({ status: 500, code: 'invalid_query' });
  });

  it('simple_path drops rows that revisit an element; fold/unfold round-trips', () => {
    const twoHops = op.with('repeat', op.nodes(op.ids(1)), { config: { traversal: { root: op.nav('both', 'context', 'X') }, times: 2n, emit: 'none', max_depth: 5n } });
    expect(ids(twoHops)).toBe(J('{"r":[1,1,3]}'));
    expect(ids(op.unary('simple_path', twoHops))).toBe(J('{"r":[3]}'));
    expect(ids(op.unary('unfold', op.unary('fold', op.nodes(op.ids(2, 0)))))).toBe(J('{"r":[2,0]}'));
    expect(fails(db, rd(op.unary('count', op.unary('fold', op.nodes('all')))))).toEqual({ status: 500, code: 'invalid_query' });
  });

  it('remove_property of $label fails even without rows', () => {
    expect(fails(db, writeBody([entry('x', op.with('remove_property', op.nodes(op.ids(99)), { name: '$label' }))], [])))
      .toEqual({ status: 500, code: 'invalid_query' });
  });
});
