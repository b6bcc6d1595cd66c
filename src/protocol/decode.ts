// Stage 3 of envelope.md §6: bytes -> Request AST. Every violation here is
// 400 invalid_query_json. Structural rules that the protocol calls planning errors
// (empty names, arities, duplicates...) are left to src/plan.
import { definitionOf } from './index-spec.js';
import type {
  AggregateFunction, Batch, BindingProjection, BindingTarget, CompareOp, Condition, Direction, ElementRef,
  EmitMode, Entry, Expr, IndexSpec, Op, Order, Predicate, Projection, PropertyAssignment, RepeatConfig,
  Request, StreamBound, SubTraversal, ValueInput,
} from './ast.js';
import { mutatingOps } from './ast.js';
import { jsonError, type SvcError } from './errors.js';
import { NegativeZeroInteger, parseJson, type JsonObject, type JsonValue } from './json.js';
import { DateTime, F32, I64_MAX, I64_MIN, StringArray, type Value } from './value.js';
import { isRfc3339 } from './date-time.js';
import { limits } from '../limits.js';

const U64_MAX = (1n << 64n) - 1n;
const VAR_MIN_SIZE_MAX = BigInt(Number.MAX_SAFE_INTEGER);
const bigMin = (a: bigint, b: bigint): bigint => (a < b ? a : b);

// ---------------------------------------------------------------- small readers

function isObject(v: JsonValue | undefined): v is JsonObject {
  return v instanceof Map;
}

function typeName(v: JsonValue | undefined): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (typeof v === 'bigint' || v instanceof NegativeZeroInteger) return 'integer';
  if (typeof v === 'number') return 'float';
  if (Array.isArray(v)) return 'array';
  if (v instanceof Map) return 'object';
  return typeof v;
}

function expectObject(v: JsonValue | undefined, what: string): JsonObject {
  if (!isObject(v)) throw jsonError(`${what}: expected an object, got ${typeName(v)}`);
  return v;
}

function expectArray(v: JsonValue | undefined, what: string): JsonValue[] {
  if (!Array.isArray(v)) throw jsonError(`${what}: expected an array, got ${typeName(v)}`);
  return v;
}

function expectString(v: JsonValue | undefined, what: string): string {
  if (typeof v !== 'string') throw jsonError(`${what}: expected a string, got ${typeName(v)}`);
  return v;
}

function expectBool(v: JsonValue | undefined, what: string): boolean {
  if (typeof v !== 'boolean') throw jsonError(`${what}: expected a boolean, got ${typeName(v)}`);
  return v;
}

/** An integer token as a bigint (`-0` is 0), or undefined for anything else. */
function integerOf(v: JsonValue | undefined): bigint | undefined {
  if (typeof v === 'bigint') return v;
  return v instanceof NegativeZeroInteger ? 0n : undefined;
}

/** Any number token as a double; an integer token converts exactly and `-0` keeps its sign. */
function floatOf(v: JsonValue | undefined): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  return v instanceof NegativeZeroInteger ? -0 : undefined;
}

function expectInt(v: JsonValue | undefined, what: string, min: bigint, max: bigint): bigint {
  const n = integerOf(v);
  if (n === undefined) throw jsonError(`${what}: expected an integer, got ${typeName(v)}`);
  if (n < min || n > max) throw jsonError(`${what}: integer ${n} out of range`);
  return n;
}

function expectNumber(v: JsonValue | undefined, what: string): number {
  const n = floatOf(v);
  if (n === undefined) throw jsonError(`${what}: expected a number, got ${typeName(v)}`);
  return n;
}

/**
 * A number token narrowed to single precision: one past the f32 range would be stored as an
 * infinity, which the protocol says cannot be written (values.md §2) and which reads back
 * as `null`; refused like an f64 token past the f64 range.
 */
function expectF32(v: JsonValue | undefined, what: string): number {
  const n = expectNumber(v, what);
  if (!Number.isFinite(Math.fround(n))) throw jsonError(`${what}: number ${n} out of range for f32`);
  return n;
}

function field(o: JsonObject, key: string, what: string): JsonValue {
  const v = o.get(key);
  if (v === undefined) throw jsonError(`${what}: missing field \`${key}\``);
  return v;
}

/** An optional field: absent and null both mean "not given". */
function optional(o: JsonObject, key: string): JsonValue | undefined {
  const v = o.get(key);
  return v === null ? undefined : v;
}

function optionalString(o: JsonObject, key: string, what: string): string | null {
  const v = optional(o, key);
  return v === undefined ? null : expectString(v, `${what}.${key}`);
}

/** An externally tagged enum value: a bare string (unit variant) or a one-key object. */
function variant(v: JsonValue | undefined, what: string): [tag: string, payload: JsonValue | undefined] {
  if (typeof v === 'string') return [v, undefined];
  if (isObject(v)) {
    if (v.size !== 1) throw jsonError(`${what}: expected exactly one variant key, got ${v.size}`);
    const [[tag, payload]] = v;
    return [tag, payload];
  }
  throw jsonError(`${what}: expected a variant, got ${typeName(v)}`);
}

function oneOf<T extends string>(v: JsonValue | undefined, allowed: readonly T[], what: string): T {
  const s = expectString(v, what);
  if (!(allowed as readonly string[]).includes(s)) throw jsonError(`${what}: unknown variant \`${s}\``);
  return s as T;
}

// ---------------------------------------------------------------- values

/** A tagged value inside the tree (values.md §2). */
export function decodeTaggedValue(v: JsonValue | undefined, what: string): Value {
  const [tag, p] = variant(v, what);
  if (tag === 'null') {
    if (p !== undefined) throw jsonError(`${what}: null takes no payload`);
    return null;
  }
  if (p === undefined) throw jsonError(`${what}: unknown value variant \`${tag}\``);
  switch (tag) {
    case 'bool': return expectBool(p, `${what}.bool`);
    case 'i64': return expectInt(p, `${what}.i64`, I64_MIN, I64_MAX);
    case 'date_time': return new DateTime(Number(expectInt(p, `${what}.date_time`, I64_MIN, I64_MAX)));
    case 'f64': return expectNumber(p, `${what}.f64`);
    case 'f32': return new F32(expectF32(p, `${what}.f32`));
    case 'string': return expectString(p, `${what}.string`);
    case 'bytes': {
      const items = expectArray(p, `${what}.bytes`);
      const out = new Uint8Array(items.length);
      for (let i = 0; i < items.length; i++) out[i] = Number(expectInt(items[i], `${what}.bytes[${i}]`, 0n, 255n));
      return out;
    }
    case 'i64_array': {
      const items = expectArray(p, `${what}.i64_array`);
      const out = new BigInt64Array(items.length);
      for (let i = 0; i < items.length; i++) out[i] = expectInt(items[i], `${what}.i64_array[${i}]`, I64_MIN, I64_MAX);
      return out;
    }
    case 'f64_array': {
      const items = expectArray(p, `${what}.f64_array`);
      const out = new Float64Array(items.length);
      for (let i = 0; i < items.length; i++) out[i] = expectNumber(items[i], `${what}.f64_array[${i}]`);
      return out;
    }
    case 'f32_array': {
      const items = expectArray(p, `${what}.f32_array`);
      const out = new Float32Array(items.length);
      for (let i = 0; i < items.length; i++) out[i] = expectF32(items[i], `${what}.f32_array[${i}]`);
      return out;
    }
    case 'string_array': {
      const items = expectArray(p, `${what}.string_array`);
      return new StringArray(items.map((s, i) => expectString(s, `${what}.string_array[${i}]`)));
    }
    case 'array': {
      const items = expectArray(p, `${what}.array`);
      return items.map((item, i) => decodeTaggedValue(item, `${what}.array[${i}]`));
    }
    case 'object': {
      const members = expectObject(p, `${what}.object`);
      const out = new Map<string, Value>();
      for (const [k, item] of members) out.set(k, decodeTaggedValue(item, `${what}.object.${k}`));
      return out;
    }
    default:
      throw jsonError(`${what}: unknown value variant \`${tag}\``);
  }
}

/** A plain JSON parameter value (envelope.md §3.1). */
export function plainToValue(v: JsonValue): Value {
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return v;
  if (typeof v === 'bigint') return v >= I64_MIN && v <= I64_MAX ? v : Number(v);
  if (typeof v === 'number') return v;
  if (v instanceof NegativeZeroInteger) return 0n; // an integer token: i64, which has no -0
  if (Array.isArray(v)) return v.map(plainToValue);
  const out = new Map<string, Value>();
  for (const [k, item] of v) out.set(k, plainToValue(item));
  return out;
}

// ---------------------------------------------------------------- expressions and predicates

const compareOps: readonly CompareOp[] = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte'];

function decodeExpr(v: JsonValue | undefined, what: string): Expr {
  const [tag, p] = variant(v, what);
  switch (tag) {
    case 'id': case 'timestamp': case 'date_time_now':
      if (p !== undefined) throw jsonError(`${what}: \`${tag}\` takes no payload`);
      return { kind: tag };
  }
  if (p === undefined) throw jsonError(`${what}: unknown expression \`${tag}\``);
  const w = `${what}.${tag}`;
  switch (tag) {
    case 'property': return { kind: 'property', name: expectString(p, w) };
    case 'param': return { kind: 'param', name: expectString(p, w) };
    case 'constant': return { kind: 'constant', value: decodeTaggedValue(p, w) };
    case 'add': case 'sub': case 'mul': case 'div': case 'mod': {
      const o = expectObject(p, w);
      return { kind: tag, left: decodeExpr(field(o, 'left', w), `${w}.left`), right: decodeExpr(field(o, 'right', w), `${w}.right`) };
    }
    case 'neg': {
      const o = expectObject(p, w);
      return { kind: 'neg', expr: decodeExpr(field(o, 'expr', w), `${w}.expr`) };
    }
    case 'case': {
      const o = expectObject(p, w);
      const branches = expectArray(field(o, 'when_then', w), `${w}.when_then`).map((b, i) => {
        const bo = expectObject(b, `${w}.when_then[${i}]`);
        return {
          when: decodePredicate(field(bo, 'when', `${w}.when_then[${i}]`), `${w}.when_then[${i}].when`),
          then: decodeExpr(field(bo, 'then', `${w}.when_then[${i}]`), `${w}.when_then[${i}].then`),
        };
      });
      const elseExpr = optional(o, 'else_expr');
      return { kind: 'case', when_then: branches, else_expr: elseExpr === undefined ? null : decodeExpr(elseExpr, `${w}.else_expr`) };
    }
    default:
      throw jsonError(`${what}: unknown expression \`${tag}\``);
  }
}

function decodePredicate(v: JsonValue | undefined, what: string): Predicate {
  const [tag, p] = variant(v, what);
  const w = `${what}.${tag}`;
  const o = expectObject(p, w);
  const e = (key: string) => decodeExpr(field(o, key, w), `${w}.${key}`);
  switch (tag) {
    case 'eq': case 'neq': case 'gt': case 'gte': case 'lt': case 'lte':
      return { kind: tag, left: e('left'), right: e('right') };
    case 'between': return { kind: 'between', value: e('value'), min: e('min'), max: e('max') };
    case 'has_key': case 'is_null': case 'is_not_null':
      return { kind: tag, property: expectString(field(o, 'property', w), `${w}.property`) };
    case 'starts_with': return { kind: 'starts_with', value: e('value'), prefix: e('prefix') };
    case 'ends_with': return { kind: 'ends_with', value: e('value'), suffix: e('suffix') };
    case 'contains': return { kind: 'contains', value: e('value'), substring: e('substring') };
    case 'is_in': return { kind: 'is_in', value: e('value'), values: e('values') };
    case 'and': case 'or':
      return {
        kind: tag,
        predicates: expectArray(field(o, 'predicates', w), `${w}.predicates`).map((c, i) => decodePredicate(c, `${w}.predicates[${i}]`)),
      };
    case 'not': return { kind: 'not', predicate: decodePredicate(field(o, 'predicate', w), `${w}.predicate`) };
    case 'compare':
      return { kind: 'compare', left: e('left'), op: oneOf(field(o, 'op', w), compareOps, `${w}.op`), right: e('right') };
    default:
      throw jsonError(`${what}: unknown predicate \`${tag}\``);
  }
}

function decodeValueInput(v: JsonValue | undefined, what: string): ValueInput {
  const [tag, p] = variant(v, what);
  if (tag === 'value') return { kind: 'value', value: decodeTaggedValue(p, `${what}.value`) };
  if (tag === 'expr') {
    const expr = decodeExpr(p, `${what}.expr`);
    // `{"expr": {"constant": V}}` is the literal V everywhere (values.md §4).
    return expr.kind === 'constant' ? { kind: 'value', value: expr.value } : { kind: 'expr', expr };
  }
  throw jsonError(`${what}: unknown input variant \`${tag}\``);
}

function decodeStreamBound(v: JsonValue | undefined, what: string): StreamBound {
  const [tag, p] = variant(v, what);
  if (tag === 'literal') return { kind: 'literal', value: expectInt(p, `${what}.literal`, 0n, U64_MAX) };
  if (tag === 'expr') return { kind: 'expr', expr: decodeExpr(p, `${what}.expr`) };
  throw jsonError(`${what}: unknown stream bound \`${tag}\``);
}

function decodeRef(v: JsonValue | undefined, what: string): ElementRef {
  const [tag, p] = variant(v, what);
  switch (tag) {
    case 'all':
      if (p !== undefined) throw jsonError(`${what}: \`all\` takes no payload`);
      return { kind: 'all' };
    case 'ids':
      return { kind: 'ids', ids: expectArray(p, `${what}.ids`).map((id, i) => expectInt(id, `${what}.ids[${i}]`, 0n, U64_MAX)) };
    case 'var': return { kind: 'var', name: expectString(p, `${what}.var`) };
    case 'param': return { kind: 'param', name: expectString(p, `${what}.param`) };
    default: throw jsonError(`${what}: unknown reference \`${tag}\``);
  }
}

function decodeProperties(v: JsonValue | undefined, what: string): PropertyAssignment[] {
  return expectArray(v, what).map((pair, i) => {
    const items = expectArray(pair, `${what}[${i}]`);
    if (items.length !== 2) throw jsonError(`${what}[${i}]: expected a [name, input] pair`);
    return [expectString(items[0], `${what}[${i}][0]`), decodeValueInput(items[1], `${what}[${i}][1]`)];
  });
}

function decodeStringList(v: JsonValue | undefined, what: string): string[] {
  return expectArray(v, what).map((s, i) => expectString(s, `${what}[${i}]`));
}

function decodeSub(v: JsonValue | undefined, what: string): SubTraversal {
  const o = expectObject(v, what);
  return { root: decodeOp(field(o, 'root', what), `${what}.root`) };
}

function decodeBindingTarget(v: JsonValue | undefined, what: string): BindingTarget {
  const [tag, p] = variant(v, what);
  if (tag === 'current' && p === undefined) return { kind: 'current' };
  if (tag === 'binding') return { kind: 'binding', name: expectString(p, `${what}.binding`) };
  throw jsonError(`${what}: unknown binding target \`${tag}\``);
}

function decodeProjection(v: JsonValue | undefined, what: string): Projection {
  const [tag, p] = variant(v, what);
  const o = expectObject(p, `${what}.${tag}`);
  const w = `${what}.${tag}`;
  if (tag === 'property') {
    return { kind: 'property', source: expectString(field(o, 'source', w), `${w}.source`), alias: expectString(field(o, 'alias', w), `${w}.alias`) };
  }
  if (tag === 'expr') {
    return { kind: 'expr', alias: expectString(field(o, 'alias', w), `${w}.alias`), expr: decodeExpr(field(o, 'expr', w), `${w}.expr`) };
  }
  throw jsonError(`${what}: unknown projection \`${tag}\``);
}

function decodeBindingProjection(v: JsonValue | undefined, what: string): BindingProjection {
  const [tag, p] = variant(v, what);
  const w = `${what}.${tag}`;
  const o = expectObject(p, w);
  if (tag === 'property') {
    return {
      kind: 'property', target: decodeBindingTarget(field(o, 'target', w), `${w}.target`),
      source: expectString(field(o, 'source', w), `${w}.source`), alias: expectString(field(o, 'alias', w), `${w}.alias`),
    };
  }
  if (tag === 'coalesce') {
    const refs = expectArray(field(o, 'refs', w), `${w}.refs`).map((r, i) => {
      const ro = expectObject(r, `${w}.refs[${i}]`);
      return {
        target: decodeBindingTarget(field(ro, 'target', `${w}.refs[${i}]`), `${w}.refs[${i}].target`),
        source: expectString(field(ro, 'source', `${w}.refs[${i}]`), `${w}.refs[${i}].source`),
      };
    });
    return { kind: 'coalesce', refs, alias: expectString(field(o, 'alias', w), `${w}.alias`) };
  }
  throw jsonError(`${what}: unknown binding projection \`${tag}\``);
}

function decodeRepeatConfig(v: JsonValue | undefined, what: string): RepeatConfig {
  const o = expectObject(v, what);
  const times = optional(o, 'times');
  const until = optional(o, 'until');
  const emitPredicate = optional(o, 'emit_predicate');
  return {
    traversal: decodeSub(field(o, 'traversal', what), `${what}.traversal`),
    times: times === undefined ? null : expectInt(times, `${what}.times`, 0n, U64_MAX),
    until: until === undefined ? null : decodePredicate(until, `${what}.until`),
    emit: oneOf<EmitMode>(field(o, 'emit', what), ['none', 'before', 'after', 'all'], `${what}.emit`),
    emit_predicate: emitPredicate === undefined ? null : decodePredicate(emitPredicate, `${what}.emit_predicate`),
    max_depth: expectInt(field(o, 'max_depth', what), `${what}.max_depth`, 0n, U64_MAX),
  };
}

function decodeIndexSpec(v: JsonValue | undefined, what: string): IndexSpec {
  const [tag, p] = variant(v, what);
  const spec = { kind: tag, fields: p instanceof Map ? new Map(p) : expectObject(p, `${what}.${tag}`) };
  return { ...spec, definition: definitionOf(spec, what) };
}

// ---------------------------------------------------------------- operations

/** Decode one operation. Recursion is bounded by the JSON depth limit of the parser. */
export function decodeOp(v: JsonValue | undefined, what: string): Op {
  const [tag, p] = variant(v, what);
  if (tag === 'context') {
    if (p !== undefined) throw jsonError(`${what}: \`context\` takes no payload`);
    return { op: 'context' };
  }
  const w = `${what}.${tag}`;
  const o = expectObject(p, w);
  const input = () => decodeOp(field(o, 'input', w), `${w}.input`);
  const optInput = () => {
    const i = optional(o, 'input');
    return i === undefined ? null : decodeOp(i, `${w}.input`);
  };
  const str = (key: string) => expectString(field(o, key, w), `${w}.${key}`);
  const pred = (key: string) => decodePredicate(field(o, key, w), `${w}.${key}`);
  switch (tag) {
    case 'nodes': case 'edges':
      return { op: tag, reference: decodeRef(field(o, 'reference', w), `${w}.reference`) };
    case 'nodes_where': case 'edges_where':
      return { op: tag, predicate: pred('predicate') };
    case 'vector_search_nodes': case 'vector_search_edges': case 'text_search_nodes': case 'text_search_edges':
    case 'vector_search_nodes_within': case 'vector_search_edges_within': case 'text_search_nodes_within': case 'text_search_edges_within': {
      const queryKey = tag.startsWith('vector') ? 'query_vector' : 'query_text';
      const tenant = optional(o, 'tenant_value');
      const common = {
        label: str('label'), property: str('property'),
        tenant_value: tenant === undefined ? null : decodeValueInput(tenant, `${w}.tenant_value`),
        query: decodeValueInput(field(o, queryKey, w), `${w}.${queryKey}`),
        k: decodeStreamBound(field(o, 'k', w), `${w}.k`),
      };
      return tag.endsWith('_within')
        ? { op: tag as 'vector_search_nodes_within', input: input(), ...common }
        : { op: tag as 'vector_search_nodes', input: null, ...common };
    }
    case 'shortest_path':
      return {
        op: 'shortest_path', source: decodeRef(field(o, 'source', w), `${w}.source`),
        target: decodeRef(field(o, 'target', w), `${w}.target`), label: optionalString(o, 'label', w),
        direction: oneOf<Direction>(field(o, 'direction', w), ['out', 'in', 'both'], `${w}.direction`),
        max_depth: expectInt(field(o, 'max_depth', w), `${w}.max_depth`, 0n, U64_MAX),
      };
    case 'out': case 'in': case 'both': case 'out_e': case 'in_e': case 'both_e':
      return { op: tag, input: input(), label: optionalString(o, 'label', w) };
    case 'out_n': case 'in_n': case 'other_n':
    case 'dedup': case 'fold': case 'unfold': case 'path': case 'simple_path': case 'sack_get':
    case 'count': case 'exists': case 'id': case 'label': case 'edge_properties': case 'drop':
      return { op: tag, input: input() } as Op;
    case 'has':
      return { op: 'has', input: input(), property: str('property'), value: decodeTaggedValue(field(o, 'value', w), `${w}.value`) };
    case 'has_label': case 'edge_has_label':
      return { op: tag, input: input(), label: str('label') } as Op;
    case 'has_key':
      return { op: 'has_key', input: input(), property: str('property') };
    case 'where':
      return { op: 'where', input: input(), predicate: pred('predicate') };
    case 'within': case 'without':
      return { op: tag, input: input(), variable: str('variable') };
    case 'edge_has':
      return { op: 'edge_has', input: input(), property: str('property'), value: decodeValueInput(field(o, 'value', w), `${w}.value`) };
    case 'limit': case 'skip':
      return { op: tag, input: input(), count: decodeStreamBound(field(o, 'count', w), `${w}.count`) } as Op;
    case 'range':
      return {
        op: 'range', input: input(), start: decodeStreamBound(field(o, 'start', w), `${w}.start`),
        end: decodeStreamBound(field(o, 'end', w), `${w}.end`),
      };
    case 'as': case 'store': case 'select': case 'bind':
      return { op: tag, input: input(), name: str('name') } as Op;
    case 'inject':
      return { op: 'inject', input: optInput(), variable: str('variable') };
    case 'order_by':
      return { op: 'order_by', input: input(), property: str('property'), order: oneOf<Order>(field(o, 'order', w), ['asc', 'desc'], `${w}.order`) };
    case 'order_by_multiple': {
      const orderings = expectArray(field(o, 'orderings', w), `${w}.orderings`).map((pair, i): [string, Order] => {
        const items = expectArray(pair, `${w}.orderings[${i}]`);
        if (items.length !== 2) throw jsonError(`${w}.orderings[${i}]: expected a [property, order] pair`);
        return [expectString(items[0], `${w}.orderings[${i}][0]`), oneOf<Order>(items[1], ['asc', 'desc'], `${w}.orderings[${i}][1]`)];
      });
      return { op: 'order_by_multiple', input: input(), orderings };
    }
    case 'repeat':
      return { op: 'repeat', input: input(), config: decodeRepeatConfig(field(o, 'config', w), `${w}.config`) };
    case 'union': case 'coalesce':
      return { op: tag, input: input(), traversals: expectArray(field(o, 'traversals', w), `${w}.traversals`).map((t, i) => decodeSub(t, `${w}.traversals[${i}]`)) } as Op;
    case 'choose': {
      const elseBody = optional(o, 'else_traversal');
      return {
        op: 'choose', input: input(), condition: pred('condition'),
        then_traversal: decodeSub(field(o, 'then_traversal', w), `${w}.then_traversal`),
        else_traversal: elseBody === undefined ? null : decodeSub(elseBody, `${w}.else_traversal`),
      };
    }
    case 'optional':
      return { op: 'optional', input: input(), traversal: decodeSub(field(o, 'traversal', w), `${w}.traversal`) };
    case 'with_sack':
      return { op: 'with_sack', input: input(), initial: decodeTaggedValue(field(o, 'initial', w), `${w}.initial`) };
    case 'sack_set': case 'sack_add':
      return { op: tag, input: input(), property: str('property') };
    case 'values':
      return { op: 'values', input: input(), properties: decodeStringList(field(o, 'properties', w), `${w}.properties`) };
    case 'value_map': {
      const props = optional(o, 'properties');
      return { op: 'value_map', input: input(), properties: props === undefined ? null : decodeStringList(props, `${w}.properties`) };
    }
    case 'project':
      return { op: 'project', input: input(), projections: expectArray(field(o, 'projections', w), `${w}.projections`).map((x, i) => decodeProjection(x, `${w}.projections[${i}]`)) };
    case 'project_bindings':
      return {
        op: 'project_bindings', input: input(), distinct: expectBool(field(o, 'distinct', w), `${w}.distinct`),
        projections: expectArray(field(o, 'projections', w), `${w}.projections`).map((x, i) => decodeBindingProjection(x, `${w}.projections[${i}]`)),
      };
    case 'group': case 'group_count':
      return { op: tag, input: input(), property: str('property') };
    case 'aggregate_by':
      return {
        op: 'aggregate_by', input: input(),
        function: oneOf<AggregateFunction>(field(o, 'function', w), ['count', 'sum', 'min', 'max', 'mean'], `${w}.function`),
        property: str('property'),
      };
    case 'add_n':
      return { op: 'add_n', input: optInput(), label: str('label'), properties: decodeProperties(field(o, 'properties', w), `${w}.properties`) };
    case 'add_e':
      return {
        op: 'add_e', input: input(), label: str('label'), to: decodeRef(field(o, 'to', w), `${w}.to`),
        properties: decodeProperties(field(o, 'properties', w), `${w}.properties`),
      };
    case 'set_property':
      return { op: 'set_property', input: input(), name: str('name'), value: decodeValueInput(field(o, 'value', w), `${w}.value`) };
    case 'remove_property':
      return { op: 'remove_property', input: input(), name: str('name') };
    case 'drop_edge':
      return { op: 'drop_edge', input: input(), to: decodeRef(field(o, 'to', w), `${w}.to`) };
    case 'drop_edge_labeled':
      return { op: 'drop_edge_labeled', input: input(), to: decodeRef(field(o, 'to', w), `${w}.to`), label: str('label') };
    case 'drop_edge_by_id':
      return { op: 'drop_edge_by_id', input: optInput(), edges: decodeRef(field(o, 'edges', w), `${w}.edges`) };
    case 'create_index':
      return { op: 'create_index', spec: decodeIndexSpec(field(o, 'spec', w), `${w}.spec`), if_not_exists: expectBool(field(o, 'if_not_exists', w), `${w}.if_not_exists`) };
    case 'drop_index':
      return { op: 'drop_index', spec: decodeIndexSpec(field(o, 'spec', w), `${w}.spec`) };
    case 'get_index_operation': case 'retry_index_operation': case 'abort_index_operation':
      return { op: tag, operation_id: str('operation_id') };
    default:
      throw jsonError(`${what}: unknown operation \`${tag}\``);
  }
}

// ---------------------------------------------------------------- batches

function decodeCondition(v: JsonValue | undefined, what: string): Condition {
  const [tag, p] = variant(v, what);
  switch (tag) {
    case 'prev_not_empty':
      if (p !== undefined) throw jsonError(`${what}: \`prev_not_empty\` takes no payload`);
      return { kind: 'prev_not_empty' };
    case 'var_not_empty': case 'var_empty':
      return { kind: tag, name: expectString(p, `${what}.${tag}`) };
    case 'var_min_size': {
      const items = expectArray(p, `${what}.var_min_size`);
      if (items.length !== 2) throw jsonError(`${what}.var_min_size: expected [name, size]`);
      return {
        kind: 'var_min_size', name: expectString(items[0], `${what}.var_min_size[0]`),
        // Any u64 (envelope.md §4.3); past 2^53 - 1 no variable holds that many rows, and the
        // cap keeps the size an exact number.
        size: Number(bigMin(expectInt(items[1], `${what}.var_min_size[1]`, 0n, U64_MAX), VAR_MIN_SIZE_MAX)),
      };
    }
    default:
      throw jsonError(`${what}: unknown condition \`${tag}\``);
  }
}

function decodeEntries(v: JsonValue | undefined, what: string): Entry[] {
  return expectArray(v, what).map((e, i): Entry => {
    const w = `${what}[${i}]`;
    const [tag, p] = variant(e, w);
    const o = expectObject(p, `${w}.${tag}`);
    if (tag === 'query') {
      const name = optional(o, 'name');
      const condition = optional(o, 'condition');
      return {
        kind: 'query', name: name === undefined ? null : expectString(name, `${w}.query.name`),
        root: decodeOp(field(o, 'root', `${w}.query`), `${w}.query.root`),
        condition: condition === undefined ? null : decodeCondition(condition, `${w}.query.condition`),
      };
    }
    if (tag === 'for_each') {
      return {
        kind: 'for_each', param: expectString(field(o, 'param', `${w}.for_each`), `${w}.for_each.param`),
        body: decodeEntries(field(o, 'body', `${w}.for_each`), `${w}.for_each.body`),
      };
    }
    throw jsonError(`${w}: unknown entry variant \`${tag}\``);
  });
}

function decodeBatch(v: JsonValue | undefined, what: string): Batch {
  const o = expectObject(v, what);
  const returns = optional(o, 'returns');
  return {
    entries: decodeEntries(field(o, 'entries', what), `${what}.entries`),
    returns: returns === undefined ? [] : decodeStringList(returns, `${what}.returns`),
  };
}

// ---------------------------------------------------------------- read-batch purity (envelope.md §5.2)

function firstMutation(root: Op): string | null {
  const stack: Op[] = [root];
  while (stack.length > 0) {
    const op = stack.pop()!;
    if (mutatingOps.has(op.op)) return op.op;
    if ('input' in op && op.input) stack.push(op.input);
    switch (op.op) {
      case 'union': case 'coalesce': for (const t of op.traversals) stack.push(t.root); break;
      case 'optional': stack.push(op.traversal.root); break;
      case 'choose': stack.push(op.then_traversal.root); if (op.else_traversal) stack.push(op.else_traversal.root); break;
      case 'repeat': stack.push(op.config.traversal.root); break;
    }
  }
  return null;
}

function checkReadOnly(entries: Entry[], path: string): void {
  entries.forEach((entry, i) => {
    const here = path === '' ? `entries[${i}]` : `${path}[${i}]`;
    if (entry.kind === 'for_each') {
      checkReadOnly(entry.body, `${here}.for_each`);
      return;
    }
    const op = firstMutation(entry.root);
    if (op !== null) throw jsonError(`read batch entry '${here}' contains a persistent mutation (\`${op}\`)`);
  });
}

// ---------------------------------------------------------------- parameters (envelope.md §3)

type ParamType = 'bool' | 'i64' | 'f64' | 'f32' | 'string' | 'date_time' | 'bytes' | 'value' | 'object' | { array: ParamType };

function decodeParamType(v: JsonValue | undefined, what: string): ParamType {
  const [tag, p] = variant(v, what);
  if (tag === 'array') return { array: decodeParamType(p, `${what}.array`) };
  if (p !== undefined) throw jsonError(`${what}: unknown parameter type \`${tag}\``);
  switch (tag) {
    case 'bool': case 'i64': case 'f64': case 'f32': case 'string': case 'date_time': case 'bytes': case 'value': case 'object':
      return tag;
  }
  throw jsonError(`${what}: unknown parameter type \`${tag}\``);
}

const typeLabel = (t: ParamType): string => (typeof t === 'string' ? t.toUpperCase() : `ARRAY<${typeLabel(t.array)}>`);

function typeMismatch(v: JsonValue, t: ParamType, path: string): SvcError {
  return jsonError(`parameter '${path}' expected ${typeLabel(t)}, but received ${typeName(v)}`);
}

/** Check a typed parameter and normalize it (only f32 changes the value). */
function typedValue(v: JsonValue, t: ParamType, path: string): Value {
  if (typeof t !== 'string') {
    if (!Array.isArray(v)) throw typeMismatch(v, t, path);
    return v.map((item, i) => typedValue(item, t.array, `${path}[${i}]`));
  }
  switch (t) {
    case 'bool': if (typeof v !== 'boolean') throw typeMismatch(v, t, path); return v;
    case 'i64': {
      const n = integerOf(v);
      if (n === undefined || n < I64_MIN || n > I64_MAX) throw typeMismatch(v, t, path);
      return n;
    }
    case 'f64': {
      // Integer tokens are accepted and converted exactly (envelope.md §3.3 recommendation).
      const n = floatOf(v);
      if (n === undefined) throw typeMismatch(v, t, path);
      return n;
    }
    case 'f32': {
      const n = floatOf(v) ?? NaN;
      if (!Number.isFinite(n) || !Number.isFinite(Math.fround(n))) throw typeMismatch(v, t, path);
      return new F32(n);
    }
    case 'string': if (typeof v !== 'string') throw typeMismatch(v, t, path); return v;
    case 'date_time':
      if (typeof v !== 'string' || !isRfc3339(v)) throw typeMismatch(v, t, path);
      return v; // stays a string at run time, like the reference (envelope.md §3.1)
    case 'bytes': throw jsonError(`parameter '${path}': bytes parameters cannot be sent as JSON`);
    case 'value': return plainToValue(v);
    case 'object': if (!(v instanceof Map)) throw typeMismatch(v, t, path); return plainToValue(v);
  }
}

function decodeParameters(params: JsonValue | undefined, types: JsonValue | undefined): { values: Map<string, Value>; typed: boolean } {
  const values = new Map<string, Value>();
  const given = params === undefined || params === null ? new Map<string, JsonValue>() : expectObject(params, 'parameters');
  for (const name of given.keys()) if (name === '') throw jsonError('parameter names must be non-empty');
  if (types === undefined || types === null) {
    for (const [name, v] of given) values.set(name, plainToValue(v));
    return { values, typed: false };
  }
  const declared = expectObject(types, 'parameter_types');
  // Names are unique in each: the same count and every declared name given is a match.
  let match = declared.size === given.size;
  if (match) for (const name of declared.keys()) if (!given.has(name)) { match = false; break; }
  if (!match) {
    const missing = [...declared.keys()].filter((n) => !given.has(n));
    const extra = [...given.keys()].filter((n) => !declared.has(n));
    throw jsonError(`parameters do not match parameter_types (missing: [${missing.join(', ')}], undeclared: [${extra.join(', ')}])`);
  }
  for (const [name, t] of declared) {
    if (name === '') throw jsonError('parameter names must be non-empty');
    values.set(name, typedValue(given.get(name)!, decodeParamType(t, `parameter_types.${name}`), name));
  }
  return { values, typed: true };
}

// ---------------------------------------------------------------- request

/**
 * The values of a request's `parameters` member (its JSON, undefined when absent) under its
 * `parameter_types` member (likewise): what decodeRequest puts in Request.parameters, with
 * the same errors. The plan cache (exec/request.ts) decodes only this part of a request
 * whose query it planned before.
 */
export function decodeParameterValues(params: JsonValue | undefined, types: JsonValue | undefined): Map<string, Value> {
  return decodeParameters(params, types).values;
}

/**
 * Stage 3: the request in `body`. `parts`, when given, receives the JSON of its
 * `parameter_types` member (undefined when absent), for decodeParameterValues later.
 */
export function decodeRequest(body: Uint8Array | string, parts?: { parameterTypes?: JsonValue }): Request {
  const root = parseJson(body, limits.jsonDepthMax, limits.bodyStructureBytesMax);
  const o = expectObject(root, 'request');
  const requestType = field(o, 'request_type', 'request');
  if (requestType !== 'read' && requestType !== 'write') {
    throw jsonError(`request_type must be "read" or "write", got ${typeof requestType === 'string' ? JSON.stringify(requestType) : typeName(requestType)}`);
  }
  const queryName = optional(o, 'query_name');
  const [batchKind, batchJson] = variant(field(o, 'query', 'request'), 'query');
  if (batchKind !== 'read' && batchKind !== 'write') throw jsonError(`query: unknown batch variant \`${batchKind}\``);
  if (batchKind !== requestType) throw jsonError(`request_type "${requestType}" does not match query variant "${batchKind}"`);
  const batch = decodeBatch(batchJson, `query.${batchKind}`);
  if (requestType === 'read') checkReadOnly(batch.entries, '');
  const { values, typed } = decodeParameters(o.get('parameters'), o.get('parameter_types'));
  if (parts !== undefined) parts.parameterTypes = o.get('parameter_types');
  return {
    request_type: requestType,
    query_name: queryName === undefined ? null : expectString(queryName, 'query_name'),
    batch,
    parameters: values,
    typed,
  };
}
