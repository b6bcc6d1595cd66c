// Value semantics of values.md §7 (equality, comparison, membership) and §8 (the total
// sort order). JS compares bigint with number exactly, which is what "same exact
// mathematical value" asks for.
import { compareKeys } from './json.js';
import { DateTime, F32, StringArray, type Value, type ValueObject } from './value.js';

type Num = number | bigint;

function num(v: Value): Num | undefined {
  if (typeof v === 'bigint' || typeof v === 'number') return v;
  if (v instanceof F32) return v.value;
  return undefined;
}

/**
 * Elements compared inside containers (arrays, objects) by valuesEqual since the last
 * takeEqualityWork(): an equality of two large values is that many steps of work, not one
 * (the query guard charges them; scalars add nothing).
 */
let equalityWork = 0;

/** The elements compared since the last call (and start counting again). */
export function takeEqualityWork(): number {
  const work = equalityWork;
  equalityWork = 0;
  return work;
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  equalityWork += a.length;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function numericArraysEqual(a: ArrayLike<Num>, b: ArrayLike<Num>): boolean {
  if (a.length !== b.length) return false;
  equalityWork += a.length;
  for (let i = 0; i < a.length; i++) if (a[i] != b[i]) return false; // eslint-disable-line eqeqeq
  return true;
}

/** values.md §7.1. Never throws; mismatched kinds are simply unequal. */
export function valuesEqual(a: Value, b: Value): boolean {
  const na = num(a);
  if (na !== undefined) {
    const nb = num(b);
    return nb !== undefined && na == nb; // eslint-disable-line eqeqeq
  }
  if (a === null || typeof a === 'boolean' || typeof a === 'string') return a === b;
  if (a instanceof DateTime) return b instanceof DateTime && a.ms === b.ms;
  if (a instanceof Uint8Array) return b instanceof Uint8Array && bytesEqual(a, b);
  if (a instanceof BigInt64Array) return b instanceof BigInt64Array && numericArraysEqual(a, b);
  if (a instanceof Float64Array) return b instanceof Float64Array && numericArraysEqual(a, b);
  if (a instanceof Float32Array) return b instanceof Float32Array && numericArraysEqual(a, b);
  if (a instanceof StringArray) {
    if (!(b instanceof StringArray) || a.items.length !== b.items.length) return false;
    equalityWork += a.items.length;
    return a.items.every((s, i) => s === b.items[i]);
  }
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    equalityWork += a.length;
    return a.every((item, i) => structurallyEqual(item, b[i]!));
  }
  return b instanceof Map && objectsEqual(a as ValueObject, b);
}

/** Equality inside arrays/objects: the variant tags must match too. */
function structurallyEqual(a: Value, b: Value): boolean {
  if (typeof a !== typeof b) return false;
  if (a instanceof F32 !== b instanceof F32) return false;
  return valuesEqual(a, b);
}

function objectsEqual(a: ValueObject, b: ValueObject): boolean {
  if (a.size !== b.size) return false;
  equalityWork += a.size;
  for (const [k, v] of a) {
    const other = b.get(k);
    if (other === undefined || !structurallyEqual(v, other)) return false;
  }
  return true;
}

/** values.md §7.2: -1/0/1 when comparable, undefined when not (the predicate is then false). */
export function compareComparable(a: Value, b: Value): number | undefined {
  const na = num(a);
  if (na !== undefined) {
    const nb = num(b);
    if (nb === undefined) return undefined;
    return na < nb ? -1 : na > nb ? 1 : na == nb ? 0 : undefined; // eslint-disable-line eqeqeq
  }
  if (typeof a === 'string') return typeof b === 'string' ? compareKeys(a, b) : undefined;
  if (a instanceof DateTime) return b instanceof DateTime ? Math.sign(a.ms - b.ms) : undefined;
  return undefined;
}

/** values.md §7.4. */
/** How many members isMember compares `value` against: its work (0 for a value that is not a set). */
export function memberCount(set: Value): number {
  if (Array.isArray(set)) return set.length;
  if (set instanceof StringArray) return set.items.length;
  if (set instanceof BigInt64Array || set instanceof Float64Array || set instanceof Float32Array) return set.length;
  return 0;
}

export function isMember(value: Value, set: Value): boolean {
  if (Array.isArray(set)) return set.some((item) => valuesEqual(value, item));
  if (set instanceof StringArray) return set.items.some((item) => valuesEqual(value, item));
  if (set instanceof BigInt64Array || set instanceof Float64Array) {
    for (const item of set) if (valuesEqual(value, item)) return true;
    return false;
  }
  if (set instanceof Float32Array) {
    for (const item of set) if (valuesEqual(value, new F32(item))) return true;
    return false;
  }
  return valuesEqual(value, set);
}

// ---------------------------------------------------------------- total order (values.md §8)

function family(v: Value): number {
  switch (typeof v) {
    case 'boolean': return 1;
    case 'bigint': case 'number': return 2;
    case 'string': return 4;
  }
  if (v === null) return 0;
  if (v instanceof F32) return 2;
  if (v instanceof DateTime) return 3;
  if (v instanceof Uint8Array) return 5;
  if (v instanceof BigInt64Array) return 6;
  if (v instanceof Float64Array) return 7;
  if (v instanceof Float32Array) return 8;
  if (v instanceof StringArray) return 9;
  if (Array.isArray(v)) return 10;
  return 11;
}

function compareNumbersTotal(a: Num, b: Num): number {
  const aNaN = typeof a === 'number' && Number.isNaN(a);
  const bNaN = typeof b === 'number' && Number.isNaN(b);
  if (aNaN || bNaN) return aNaN === bNaN ? 0 : aNaN ? 1 : -1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** IEEE 754 totalOrder for float array elements: -NaN < -Inf < ... < -0 < +0 < ... < +Inf < NaN. */
const totalOrderView = new DataView(new ArrayBuffer(8));
function compareFloatTotal(a: number, b: number): number {
  const key = (x: number): bigint => {
    totalOrderView.setFloat64(0, x);
    const bits = totalOrderView.getBigInt64(0);
    return bits < 0n ? -(bits & 0x7fffffffffffffffn) - 1n : bits;
  };
  const ka = key(a), kb = key(b);
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

function compareSequences<T>(a: ArrayLike<T>, b: ArrayLike<T>, cmp: (x: T, y: T) => number): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const c = cmp(a[i]!, b[i]!);
    if (c !== 0) return c;
  }
  return Math.sign(a.length - b.length);
}

/** Total order over present values (values.md §8 steps 2-3). */
export function compareTotal(a: Value, b: Value): number {
  const fa = family(a), fb = family(b);
  if (fa !== fb) return fa < fb ? -1 : 1;
  switch (fa) {
    case 0: return 0;
    case 1: return a === b ? 0 : a ? 1 : -1;
    case 2: return compareNumbersTotal(num(a)!, num(b)!);
    case 3: return Math.sign((a as DateTime).ms - (b as DateTime).ms);
    case 4: return compareKeys(a as string, b as string);
    case 5: return compareSequences(a as Uint8Array, b as Uint8Array, (x, y) => x - y);
    case 6: return compareSequences(a as BigInt64Array, b as BigInt64Array, (x, y) => (x < y ? -1 : x > y ? 1 : 0));
    case 7: return compareSequences(a as Float64Array, b as Float64Array, compareFloatTotal);
    case 8: return compareSequences(a as Float32Array, b as Float32Array, compareFloatTotal);
    case 9: return compareSequences((a as StringArray).items, (b as StringArray).items, compareKeys);
    case 10: return compareSequences(a as Value[], b as Value[], compareTotal);
    default: {
      const ea = [...(a as ValueObject)].sort((x, y) => compareKeys(x[0], y[0]));
      const eb = [...(b as ValueObject)].sort((x, y) => compareKeys(x[0], y[0]));
      const n = Math.min(ea.length, eb.length);
      for (let i = 0; i < n; i++) {
        const ck = compareKeys(ea[i]![0], eb[i]![0]);
        if (ck !== 0) return ck;
        const cv = compareTotal(ea[i]![1], eb[i]![1]);
        if (cv !== 0) return cv;
      }
      return Math.sign(ea.length - eb.length);
    }
  }
}

/** Sort key comparison with "missing first" (undefined = missing). */
export function compareSortKeys(a: Value | undefined, b: Value | undefined): number {
  if (a === undefined || b === undefined) return a === b ? 0 : a === undefined ? -1 : 1;
  return compareTotal(a, b);
}
