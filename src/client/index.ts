// svcdb/client: a builder DSL for the request objects of ../shared/protocol, and a client
// that sends them over HTTP or to an in-process database. See docs/client.md.

export { g, __, GraphSource, Traversal, ref, Ref, B, BindingRef, BindingCoalesce, Index, IndexSpec, valueInput } from './traversal.js';
export type {
  AggregateFunction, Bound, Body, BindingProjectionsInput, Direction, EmitMode, IdInput, Order, ProjectionsInput,
  PropertiesInput, RefInput, RepeatOptions, ShortestPathOptions, TextSearch, ValueInput, VectorMetric, VectorSearch,
} from './traversal.js';
export { E, P, Expr, Pred, CaseExpr, ParamExpr, param } from './expr.js';
export type { CompareOp, Operand, Subject } from './expr.js';
export {
  V, TaggedValue, tag, i64, f64, f32, bytes, dateTime, i64Array, f64Array, f32Array, stringArray, arrayValue, objectValue, nullValue,
} from './values.js';
export type { JsValue } from './values.js';
export { readBatch, writeBatch, Batch, BatchBody, Cond, Condition } from './batch.js';
export type { RequestType, WireRequest } from './batch.js';
export { defineParams, ParamSchema } from './params.js';
export type { ParamDecls, ParamJson, ParamScalarType, ParamType, ParamValue, ParamValues } from './params.js';
export { Client, backoffDelayMs } from './client.js';
export type { ClientOptions, FetchLike, OpenEmbeddedOptions, QueryInput, QueryOptions, RequestSource, RetryOptions } from './client.js';
export { SvcClientError, QueryBuildError, errorFromResponse } from './errors.js';
export { writeJson, parseResponseJson } from './json.js';
export type { WireJson, WireObject } from './json.js';
