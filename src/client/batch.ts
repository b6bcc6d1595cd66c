// Batches (envelope.md §2, §4): named entries run in order, a `returns` list, optional
// conditions, `for_each` loops, and the request object around them.
//
//   readBatch()
//     .varAs('alice', g().nWithLabel('User', P.eq('name', 'Alice')))
//     .varAs('friends', g().nVar('alice').out('FOLLOWS').valueMap(['name']), Cond.varNotEmpty('alice'))
//     .returning(['friends'])
//     .toRequest();
//
// A read batch refuses an entry with a mutation (it would be rejected by the server,
// §5.2); a write batch refuses `bind`/`project_bindings` (operations.md §15.4).

import { writeJson, type WireJson, type WireObject } from './json.js';
import { QueryBuildError } from './errors.js';
import { ParamExpr } from './expr.js';
import { Traversal } from './traversal.js';
import { ParamSchema, encodeUntypedParams, type ParamDecls, type ParamJson, type ParamValues } from './params.js';

export type RequestType = 'read' | 'write';

/** An entry condition (envelope.md §4.3). */
export class Condition {
  constructor(readonly json: WireJson) {}
}
export const Cond = {
  varNotEmpty: (name: string): Condition => new Condition({ var_not_empty: name }),
  varEmpty: (name: string): Condition => new Condition({ var_empty: name }),
  varMinSize: (name: string, size: number): Condition => {
    if (!Number.isInteger(size) || size < 1) throw new QueryBuildError(`varMinSize needs a positive integer, got ${size}`);
    return new Condition({ var_min_size: [name, size] });
  },
  prevNotEmpty: (): Condition => new Condition('prev_not_empty'),
} as const;

/** The request object (envelope.md §2). */
export interface WireRequest {
  readonly request_type: RequestType;
  readonly query_name: string | null;
  readonly query: WireObject;
  readonly parameters?: WireObject;
  readonly parameter_types?: WireObject;
}

/** Shared by batches and `forEach` bodies: an immutable list of entries of one kind. */
abstract class Entries<Self> {
  protected constructor(readonly kind: RequestType, readonly entries: readonly WireJson[]) {}

  protected abstract withEntries(entries: readonly WireJson[]): Self;

  /** A named entry: its result is bound to `name` (returnable, and usable as a variable). */
  varAs(name: string, traversal: Traversal, condition?: Condition): Self {
    if (typeof name !== 'string' || name.length === 0) throw new QueryBuildError('an entry name must be a non-empty string');
    return this.add(name, traversal, condition);
  }

  /** An unnamed entry: it runs, its result is discarded. */
  run(traversal: Traversal, condition?: Condition): Self {
    return this.add(null, traversal, condition);
  }

  /** Runs `body` once per element of the array parameter, binding the element's members as parameters. */
  forEach(param: string | ParamExpr, body: (body: BatchBody) => BatchBody): Self {
    const name = param instanceof ParamExpr ? param.name : param;
    if (typeof name !== 'string' || name.length === 0) throw new QueryBuildError('forEach needs a parameter name');
    const built = body(new BatchBody(this.kind, []));
    if (!(built instanceof BatchBody)) throw new QueryBuildError('the forEach callback must return the body builder it was given');
    return this.withEntries([...this.entries, { for_each: { param: name, body: built.entries } }]);
  }

  private add(name: string | null, traversal: Traversal, condition: Condition | undefined): Self {
    if (!(traversal instanceof Traversal)) throw new QueryBuildError(`entry ${name ?? `#${this.entries.length}`} needs a traversal built with g()`);
    const label = name === null ? `#${this.entries.length}` : `'${name}'`;
    if (this.kind === 'read' && traversal.mutation !== null) {
      throw new QueryBuildError(`read batch entry ${label} contains the mutation \`${traversal.mutation}\`; use writeBatch() for mutations`);
    }
    if (this.kind === 'write' && traversal.rowBinding !== null) {
      throw new QueryBuildError(`write batch entry ${label} uses \`${traversal.rowBinding}\`, which is only allowed in read batches`);
    }
    const query: Record<string, WireJson> = name === null ? { root: traversal.root } : { name, root: traversal.root };
    if (condition !== undefined) query.condition = condition.json;
    return this.withEntries([...this.entries, { query }]);
  }
}

/** The entries of a `forEach` body. */
export class BatchBody extends Entries<BatchBody> {
  constructor(kind: RequestType, entries: readonly WireJson[]) {
    super(kind, entries);
  }
  protected withEntries(entries: readonly WireJson[]): BatchBody {
    return new BatchBody(this.kind, entries);
  }
}

type ValuesOf<S> = S extends ParamSchema<infer D> ? ParamValues<D> : { readonly [name: string]: ParamJson };

interface BatchState<S> {
  readonly kind: RequestType;
  readonly entries: readonly WireJson[];
  readonly returns: readonly string[];
  readonly name: string | null;
  readonly schema: S;
  readonly values: ValuesOf<S> | undefined;
}

/** A read or write batch; `S` is its parameter schema (`null` for untyped parameters). */
export class Batch<S extends ParamSchema<ParamDecls> | null = null> extends Entries<Batch<S>> {
  private readonly state: BatchState<S>;

  /** Use `readBatch()` / `writeBatch()`. */
  constructor(state: BatchState<S>) {
    super(state.kind, state.entries);
    this.state = state;
  }

  protected withEntries(entries: readonly WireJson[]): Batch<S> {
    return new Batch({ ...this.state, entries });
  }

  get requestType(): RequestType { return this.kind; }
  get schema(): S { return this.state.schema; }

  /** The names the response carries (each must be an entry name). */
  returning(names: readonly string[]): Batch<S> {
    return new Batch({ ...this.state, returns: [...names] });
  }

  /** A diagnostic label sent as `query_name`. */
  queryName(name: string | null): Batch<S> {
    return new Batch({ ...this.state, name });
  }

  /** Stores parameter values, used when `toRequest`/`toJSON`/`toString` get none. */
  withParams(values: ValuesOf<S>): Batch<S> {
    return new Batch({ ...this.state, values });
  }

  /** The request object. Typed batches write `parameters` and `parameter_types`. */
  toRequest(values?: ValuesOf<S>): WireRequest {
    const { kind, entries, returns, name, schema } = this.state;
    const given = values ?? this.state.values;
    const request: {
      request_type: RequestType; query_name: string | null; query: WireObject; parameters?: WireObject; parameter_types?: WireObject;
    } = { request_type: kind, query_name: name, query: { [kind]: { entries, returns } } };
    if (schema !== null) {
      request.parameters = (schema as ParamSchema<ParamDecls>).encode(given as ParamValues<ParamDecls> | undefined);
      request.parameter_types = (schema as ParamSchema<ParamDecls>).types;
    } else if (given !== undefined) {
      request.parameters = encodeUntypedParams(given as { readonly [name: string]: ParamJson });
    }
    return request;
  }

  /** The request body text (bigint values written exactly). */
  toJSON(values?: ValuesOf<S>): string {
    // JSON.stringify(batch) calls toJSON(key) with a string key: not parameter values.
    return writeJson(this.toRequest(typeof values === 'object' ? values : undefined));
  }

  override toString(): string {
    return this.toJSON();
  }
}

function batch<S extends ParamSchema<ParamDecls> | null>(kind: RequestType, schema: S): Batch<S> {
  return new Batch<S>({ kind, entries: [], returns: [], name: null, schema, values: undefined });
}

/** A read batch: one consistent snapshot, no mutations. */
export function readBatch(): Batch<null>;
export function readBatch<D extends ParamDecls>(params: ParamSchema<D>): Batch<ParamSchema<D>>;
export function readBatch<D extends ParamDecls>(params?: ParamSchema<D>): Batch<ParamSchema<D>> | Batch<null> {
  return params === undefined ? batch('read', null) : batch('read', params);
}

/** A write batch: one transaction, committed atomically at the end. */
export function writeBatch(): Batch<null>;
export function writeBatch<D extends ParamDecls>(params: ParamSchema<D>): Batch<ParamSchema<D>>;
export function writeBatch<D extends ParamDecls>(params?: ParamSchema<D>): Batch<ParamSchema<D>> | Batch<null> {
  return params === undefined ? batch('write', null) : batch('write', params);
}
