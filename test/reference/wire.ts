// Builders for wire-format request bodies (envelope.md, operations.md) and an exact JSON
// writer: a `bigint` becomes an integer token and a `number` always becomes a float token
// (`2.0`, never `2`), so the integer/float distinction of the protocol is explicit.

export type J = unknown;

/** JSON text; bigint → integer token, number → float token, Map/objects keep key order. */
export function jsonText(v: J): string {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'bigint': return v.toString();
    case 'number': {
      if (!Number.isFinite(v)) throw new Error(`non-finite number ${v} cannot be written as JSON`);
      if (Object.is(v, -0)) return '-0.0';
      const s = String(v);
      return /[.e]/.test(s) ? s : `${s}.0`;
    }
    case 'string': return JSON.stringify(v);
    case 'boolean': return v ? 'true' : 'false';
  }
  if (Array.isArray(v)) return `[${v.map(jsonText).join(',')}]`;
  if (v instanceof Map) return `{${[...v].map(([k, x]) => `${JSON.stringify(k)}:${jsonText(x)}`).join(',')}}`;
  if (typeof v === 'object') {
    return `{${Object.entries(v as Record<string, J>).filter(([, x]) => x !== undefined)
      .map(([k, x]) => `${JSON.stringify(k)}:${jsonText(x)}`).join(',')}}`;
  }
  throw new Error(`cannot write ${typeof v} as JSON`);
}

// ------------------------------------------------------------------ envelope

export const entry = (name: string | null, root: J, condition?: J): J =>
  ({ query: condition === undefined ? { name, root } : { name, root, condition } });
export const forEach = (param: string, body: J[]): J => ({ for_each: { param, body } });

export function request(kind: 'read' | 'write', entries: J[], returns: string[], parameters?: Record<string, J>): J {
  const body: Record<string, J> = { request_type: kind, query_name: null, query: { [kind]: { entries, returns } } };
  if (parameters !== undefined) body.parameters = parameters;
  return body;
}
export const readBody = (entries: J[], returns: string[], parameters?: Record<string, J>) =>
  jsonText(request('read', entries, returns, parameters));
export const writeBody = (entries: J[], returns: string[], parameters?: Record<string, J>) =>
  jsonText(request('write', entries, returns, parameters));

// ------------------------------------------------------------------ tagged values (values.md §2)

export const tv = {
  null: 'null' as J,
  bool: (b: boolean): J => ({ bool: b }),
  i64: (n: number | bigint): J => ({ i64: BigInt(n) }),
  f64: (n: number): J => ({ f64: n }),
  f32: (n: number): J => ({ f32: n }),
  str: (s: string): J => ({ string: s }),
  dt: (ms: number | bigint): J => ({ date_time: BigInt(ms) }),
  bytes: (b: number[]): J => ({ bytes: b.map(BigInt) }),
  i64s: (a: (number | bigint)[]): J => ({ i64_array: a.map((x) => BigInt(x)) }),
  f64s: (a: number[]): J => ({ f64_array: a }),
  f32s: (a: number[]): J => ({ f32_array: a }),
  strs: (a: string[]): J => ({ string_array: a }),
  arr: (a: J[]): J => ({ array: a }),
  obj: (o: [string, J][]): J => ({ object: new Map(o) }),
};

// ------------------------------------------------------------------ expressions and predicates

export const ex = {
  prop: (name: string): J => ({ property: name }),
  c: (v: J): J => ({ constant: v }),
  param: (name: string): J => ({ param: name }),
  id: 'id' as J,
  bin: (kind: 'add' | 'sub' | 'mul' | 'div' | 'mod', left: J, right: J): J => ({ [kind]: { left, right } }),
  neg: (expr: J): J => ({ neg: { expr } }),
  case: (whenThen: [J, J][], elseExpr: J | null): J =>
    ({ case: { when_then: whenThen.map(([when, then]) => ({ when, then })), else_expr: elseExpr } }),
};

export const pr = {
  cmp: (kind: 'eq' | 'neq' | 'gt' | 'gte' | 'lt' | 'lte', left: J, right: J): J => ({ [kind]: { left, right } }),
  compare: (op: string, left: J, right: J): J => ({ compare: { left, op, right } }),
  between: (value: J, min: J, max: J): J => ({ between: { value, min, max } }),
  hasKey: (p: string): J => ({ has_key: { property: p } }),
  isNull: (p: string): J => ({ is_null: { property: p } }),
  notNull: (p: string): J => ({ is_not_null: { property: p } }),
  startsWith: (value: J, prefix: J): J => ({ starts_with: { value, prefix } }),
  endsWith: (value: J, suffix: J): J => ({ ends_with: { value, suffix } }),
  contains: (value: J, substring: J): J => ({ contains: { value, substring } }),
  isIn: (value: J, values: J): J => ({ is_in: { value, values } }),
  and: (ps: J[]): J => ({ and: { predicates: ps } }),
  or: (ps: J[]): J => ({ or: { predicates: ps } }),
  not: (p: J): J => ({ not: { predicate: p } }),
  label: (l: string): J => ({ eq: { left: { property: '$label' }, right: { constant: { string: l } } } }),
};

// ------------------------------------------------------------------ operations

export const op = {
  nodes: (ref: J): J => ({ nodes: { reference: ref } }),
  edges: (ref: J): J => ({ edges: { reference: ref } }),
  ids: (...ids: (number | bigint)[]): J => ({ ids: ids.map((x) => BigInt(x)) }),
  nodesWhere: (predicate: J): J => ({ nodes_where: { predicate } }),
  edgesWhere: (predicate: J): J => ({ edges_where: { predicate } }),
  nav: (kind: string, input: J, label?: string | null): J =>
    ({ [kind]: label === undefined ? { input } : { input, label } }),
  unary: (kind: string, input: J): J => ({ [kind]: { input } }),
  with: (kind: string, input: J, fields: Record<string, J>): J => ({ [kind]: { input, ...fields } }),
  lit: (n: number | bigint): J => ({ literal: BigInt(n) }),
  addN: (label: string, props: [string, J][] = [], input?: J): J =>
    ({ add_n: input === undefined ? { label, properties: props } : { input, label, properties: props } }),
  addE: (input: J, label: string, to: J, props: [string, J][] = []): J => ({ add_e: { input, label, to, properties: props } }),
  val: (v: J): J => ({ value: v }),
  expr: (e: J): J => ({ expr: e }),
};
