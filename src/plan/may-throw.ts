// Whether evaluating an expression or predicate can raise an error on some row (arithmetic
// on a wrong type, mod by zero, case). Operators that skip rows a plain evaluation would
// visit (streamed windows, index scans) are exact only when nothing can raise.
import type { Expr, Predicate } from '../protocol/ast.js';

export function exprMayThrow(e: Expr): boolean {
  switch (e.kind) {
    case 'property': case 'id': case 'timestamp': case 'date_time_now': case 'constant': case 'param': return false;
    case 'case': return true;
    default: return true; // arithmetic
  }
}

export function predicateMayThrow(p: Predicate): boolean {
  switch (p.kind) {
    case 'has_key': case 'is_null': case 'is_not_null': return false;
    case 'and': case 'or': return p.predicates.some(predicateMayThrow);
    case 'not': return predicateMayThrow(p.predicate);
    case 'between': return exprMayThrow(p.value) || exprMayThrow(p.min) || exprMayThrow(p.max);
    case 'starts_with': return exprMayThrow(p.value) || exprMayThrow(p.prefix);
    case 'ends_with': return exprMayThrow(p.value) || exprMayThrow(p.suffix);
    case 'contains': return exprMayThrow(p.value) || exprMayThrow(p.substring);
    case 'is_in': return exprMayThrow(p.value) || exprMayThrow(p.values);
    default: return exprMayThrow(p.left) || exprMayThrow(p.right);
  }
}
