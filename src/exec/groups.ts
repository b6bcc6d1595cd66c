// Grouping and aggregation: group, group_count and aggregate_by (operations.md §12.8-§12.12).
import type { Op } from '../protocol/ast.js';
import { queryError, SvcError } from '../protocol/errors.js';
import { DateTime, F32, StringArray, tagOf, type Value } from '../protocol/value.js';
import { compareKeys, renderValue } from '../protocol/json.js';
import { resolveProperty, type ExecCtx } from './context.js';
import type { EvalOp } from './eval-op.js';
import { idOfKey, needRows, NO_ELEMENT, RowSet, scalarItems, type Stream } from './rows.js';
import { CONTAINER_BYTES, ENTRY_BYTES, guard } from '../query-guard.js';

/**
 * Shortest round-trip digits written out without an exponent and without a trailing
 * ".0" (1e-7 -> "0.0000001", 1e21 -> "1000000000000000000000", 2.0 -> "2"), the way the
 * reference displays a float.
 */
export function plainDecimal(n: number): string {
  if (!Number.isFinite(n)) return Number.isNaN(n) ? 'NaN' : n > 0 ? 'inf' : '-inf';
  const text = String(n);
  const e = text.indexOf('e');
  if (e < 0) return Object.is(n, -0) ? '-0' : text;
  const negative = text.startsWith('-');
  const mantissa = text.slice(negative ? 1 : 0, e);
  const exponent = Number(text.slice(e + 1));
  const dot = mantissa.indexOf('.');
  const digits = mantissa.replace('.', '');
  const point = (dot < 0 ? mantissa.length : dot) + exponent;
  const body = point <= 0 ? `0.${'0'.repeat(-point)}${digits}`
    : point >= digits.length ? digits + '0'.repeat(point - digits.length)
    : `${digits.slice(0, point)}.${digits.slice(point)}`;
  return negative ? `-${body}` : body;
}

/** The display text that decides a group (operations.md §12.10). */
function displayText(v: Value | undefined): string {
  if (v === undefined || v === null) return 'null';
  switch (typeof v) {
    case 'string': return v;
    case 'boolean': return v ? 'true' : 'false';
    case 'bigint': return v.toString();
    case 'number': return plainDecimal(v);
  }
  if (v instanceof F32) return plainDecimal(v.value);
  if (v instanceof DateTime) return renderValue(v).slice(1, -1);
  const length = v instanceof StringArray ? v.items.length : v instanceof Map ? v.size : (v as ArrayLike<unknown>).length;
  return `<${tagOf(v)}:${length}>`;
}

function group(ctx: ExecCtx, rows: RowSet, property: string, withIds: boolean): Value[] {
  const groups = new Map<string, { value: Value; count: number; ids: bigint[] }>();
  for (let i = 0; i < rows.length; i++) {
    const el = rows.el[i]!;
    if (el === NO_ELEMENT) throw queryError('group needs rows with a current element');
    const v = resolveProperty(ctx, el, rows.extraAt(i), property);
    const key = displayText(v);
    let g = groups.get(key);
    if (g === undefined) {
      guard.charge(CONTAINER_BYTES + ENTRY_BYTES + 2 * key.length);
      groups.set(key, (g = { value: v ?? null, count: 0, ids: [] }));
    }
    guard.chargeLater(ENTRY_BYTES); // the id
    guard.step(1);
    g.count++;
    g.ids.push(BigInt(idOfKey(el)));
  }
  return [...groups.keys()].sort(compareKeys).map((key) => {
    const g = groups.get(key)!;
    const m = new Map<string, Value>([[property, g.value], ['count', BigInt(g.count)]]);
    if (withIds) m.set('ids', g.ids);
    return m;
  });
}

const numericText = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

function aggregate(ctx: ExecCtx, op: Extract<Op, { op: 'aggregate_by' }>, input: Stream): Stream {
  if (input.kind !== 'rows') {
    const items = scalarItems(input);
    if (items === null || op.function !== 'count') throw queryError(`aggregate_by ${op.function} expected element rows`);
    return { kind: 'count', n: items.length };
  }
  const rows = input.rows;
  let count = 0, sum = 0, min = Infinity, max = -Infinity;
  for (let i = 0; i < rows.length; i++) {
    guard.step(1);
    const v = resolveProperty(ctx, rows.el[i]!, rows.extraAt(i), op.property);
    let n: number;
    if (typeof v === 'bigint' || typeof v === 'number') n = Number(v);
    else if (v instanceof F32) n = v.value;
    else if (typeof v === 'string' && numericText.test(v)) n = Number(v);
    else continue;
    count++;
    sum += n;
    if (n < min) min = n;
    if (n > max) max = n;
  }
  const result = op.function === 'count' ? count : op.function === 'sum' ? sum
    : op.function === 'min' ? (count === 0 ? 0 : min) : op.function === 'max' ? (count === 0 ? 0 : max)
    : count === 0 ? 0 : sum / count;
  const name = `${op.property}_${op.function[0]!.toUpperCase()}${op.function.slice(1)}`;
  return { kind: 'scalars', items: [new Map<string, Value>([[name, result]])] };
}

/** group, group_count or aggregate_by over the stream of `op.input`. */
export function evalGroup(ctx: ExecCtx, op: Op, context: Stream | null, evalOp: EvalOp): Stream {
  const input = (): Stream => evalOp(ctx, (op as { input: Op }).input, context);
  switch (op.op) {
    case 'group': case 'group_count':
      return { kind: 'scalars', items: group(ctx, needRows(input(), op.op), op.property, op.op === 'group') };
    case 'aggregate_by':
      return aggregate(ctx, op, input());
    default:
      throw new SvcError('internal_error', `internal error: ${op.op} is not a grouping`);
  }
}
