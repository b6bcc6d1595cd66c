// Expressions (values.md §5) and predicates (operations.md §2.3).
//
// Operand conventions, used everywhere:
// * A predicate's *subject* (`P.eq(subject, value)`, `P.between(subject, …)`, …) is a
//   property name when it is a string, otherwise an expression: `P.eq('age', 30)`.
// * Every other operand is an expression when it is an `Expr` (`E.prop('x')`,
//   `param('p')`, …) and a constant otherwise: `30` → `{"constant": {"i64": 30}}`.

import type { WireJson } from './json.js';
import { QueryBuildError } from './errors.js';
import { tag, type JsValue } from './values.js';

export class Expr {
  constructor(readonly json: WireJson) {}
  add(right: Operand): Expr { return binary('add', this, right); }
  sub(right: Operand): Expr { return binary('sub', this, right); }
  mul(right: Operand): Expr { return binary('mul', this, right); }
  div(right: Operand): Expr { return binary('div', this, right); }
  mod(right: Operand): Expr { return binary('mod', this, right); }
  neg(): Expr { return new Expr({ neg: { expr: this.json } }); }
}

/** A reference to a request parameter: `{"param": name}` (envelope.md §3.5). */
export class ParamExpr extends Expr {
  constructor(readonly name: string) {
    if (typeof name !== 'string' || name.length === 0) throw new QueryBuildError('a parameter name must be a non-empty string');
    super({ param: name });
  }
}

/** `param('city')`: usable as an expression, a value input, a bound, an ID set, a for_each array. */
export function param(name: string): ParamExpr {
  return new ParamExpr(name);
}

/** An expression operand: an `Expr`, or a plain value written as a constant. */
export type Operand = Expr | JsValue;
/** A predicate subject: a property name, or an expression. */
export type Subject = string | Expr;

export function operandJson(v: Operand): WireJson {
  return v instanceof Expr ? v.json : { constant: tag(v) };
}

function subjectJson(v: Subject): WireJson {
  return typeof v === 'string' ? { property: v } : v.json;
}

function binary(op: string, left: Operand, right: Operand): Expr {
  return new Expr({ [op]: { left: operandJson(left), right: operandJson(right) } });
}

/** `case`: `E.when(p, a).when(q, b).otherwise(c)`; without `otherwise` the else is null. */
export class CaseExpr extends Expr {
  private constructor(private readonly branches: readonly WireJson[]) {
    super({ case: { when_then: branches } });
  }
  static start(when: Pred, then: Operand): CaseExpr {
    return new CaseExpr([{ when: when.json, then: operandJson(then) }]);
  }
  when(when: Pred, then: Operand): CaseExpr {
    return new CaseExpr([...this.branches, { when: when.json, then: operandJson(then) }]);
  }
  otherwise(elseExpr: Operand): Expr {
    return new Expr({ case: { when_then: this.branches, else_expr: operandJson(elseExpr) } });
  }
}

/** Expression constructors (values.md §5). */
export const E = {
  /** The resolved property (virtual fields and dotted paths allowed); missing → null. */
  prop: (name: string): Expr => new Expr({ property: name }),
  /** The current element's ID. */
  id: (): Expr => new Expr('id'),
  /** Current time as i64 epoch milliseconds. */
  timestamp: (): Expr => new Expr('timestamp'),
  /** Current time as a date_time. */
  now: (): Expr => new Expr('date_time_now'),
  /** A constant; the tag is inferred (values.md §10) unless a helper such as `f64(1)` is used. */
  const: (value: JsValue): Expr => new Expr({ constant: tag(value) }),
  param,
  add: (left: Operand, right: Operand): Expr => binary('add', left, right),
  sub: (left: Operand, right: Operand): Expr => binary('sub', left, right),
  mul: (left: Operand, right: Operand): Expr => binary('mul', left, right),
  div: (left: Operand, right: Operand): Expr => binary('div', left, right),
  mod: (left: Operand, right: Operand): Expr => binary('mod', left, right),
  neg: (expr: Operand): Expr => new Expr({ neg: { expr: operandJson(expr) } }),
  when: (when: Pred, then: Operand): CaseExpr => CaseExpr.start(when, then),
} as const;

// ---------------------------------------------------------------------------------------
// Predicates

export type CompareOp = 'eq' | 'neq' | 'gt' | 'gte' | 'lt' | 'lte';

export class Pred {
  constructor(readonly json: WireJson) {}
  and(...others: Pred[]): Pred { return P.and(this, ...others); }
  or(...others: Pred[]): Pred { return P.or(this, ...others); }
  not(): Pred { return P.not(this); }
}

const comparison = (op: CompareOp) => (subject: Subject, value: Operand): Pred =>
  new Pred({ [op]: { left: subjectJson(subject), right: operandJson(value) } });
const propertyTest = (op: string) => (property: string): Pred => new Pred({ [op]: { property } });
const stringTest = (op: string, operand: string) => (subject: Subject, value: Operand): Pred =>
  new Pred({ [op]: { value: subjectJson(subject), [operand]: operandJson(value) } });
const logical = (op: 'and' | 'or') => (...predicates: Pred[]): Pred => {
  if (predicates.length === 0) throw new QueryBuildError(`P.${op}() needs at least one predicate`);
  return new Pred({ [op]: { predicates: predicates.map((p) => p.json) } });
};

/** Predicate constructors (operations.md §2.3). */
export const P = {
  eq: comparison('eq'),
  neq: comparison('neq'),
  gt: comparison('gt'),
  gte: comparison('gte'),
  lt: comparison('lt'),
  lte: comparison('lte'),
  /** min ≤ subject ≤ max. */
  between: (subject: Subject, min: Operand, max: Operand): Pred =>
    new Pred({ between: { value: subjectJson(subject), min: operandJson(min), max: operandJson(max) } }),
  hasKey: propertyTest('has_key'),
  isNull: propertyTest('is_null'),
  isNotNull: propertyTest('is_not_null'),
  startsWith: stringTest('starts_with', 'prefix'),
  endsWith: stringTest('ends_with', 'suffix'),
  contains: stringTest('contains', 'substring'),
  /** subject ∈ values (an array constant such as `['a', 'b']`, or a parameter). */
  isIn: (subject: Subject, values: Operand): Pred =>
    new Pred({ is_in: { value: subjectJson(subject), values: operandJson(values) } }),
  and: logical('and'),
  or: logical('or'),
  not: (predicate: Pred): Pred => new Pred({ not: { predicate: predicate.json } }),
  compare: (subject: Subject, op: CompareOp, value: Operand): Pred =>
    new Pred({ compare: { left: subjectJson(subject), op, right: operandJson(value) } }),
  /** The label-scoping idiom: `$label` equals `label`. */
  label: (label: string): Pred => comparison('eq')('$label', label),
} as const;
