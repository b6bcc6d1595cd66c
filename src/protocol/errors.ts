// The one catalog of stable error codes (../shared/protocol/errors.md §4).
// A code's HTTP status depends on where it was raised (errors.md §3), so every
// SvcError carries its own status; `statusOf` gives the default for a code.
//
// What a client may read (docs/protocol-choices.md, "Error messages"): never a stack, a
// file-system path, a bucket URI or the text of an arbitrary exception. Those go to the
// server log (stderr) under a short reference that the client's message repeats.
import { randomBytes } from 'node:crypto';

export type ErrorCode =
  // request validation
  | 'invalid_request' | 'invalid_query_json' | 'invalid_request_body' | 'invalid_request_option' | 'invalid_query'
  // planning (all 400)
  | 'invalid_index_operation_id' | 'internal_planner_error' | 'unsupported_edge_all_target'
  | 'non_literal_index_expression' | 'missing_planning_equality_parameter' | 'unsupported_planning_equality_parameter'
  | 'index_not_found' | 'invalid_search_tenant' | 'invalid_search_tenant_value' | 'invalid_search_result_count'
  | 'invalid_search_result_count_expression' | 'invalid_search_input' | 'invalid_batch_condition_min_size'
  | 'invalid_initial_batch_condition' | 'duplicate_property_assignment' | 'duplicate_property_selection'
  | 'duplicate_projection_alias' | 'duplicate_return_variable' | 'duplicate_element_id' | 'duplicate_order_key'
  | 'unbound_context' | 'invalid_sub_traversal_operation' | 'invalid_after_bind_operation'
  | 'read_only_traversal_in_write_batch' | 'invalid_branch_arity' | 'invalid_batch_arity' | 'invalid_repeat_emit'
  | 'invalid_repeat_count' | 'invalid_shortest_path_count' | 'invalid_order_keys' | 'invalid_projection_arity'
  | 'invalid_stream_range' | 'invalid_stream_bound_expression' | 'invalid_empty_name' | 'invalid_predicate_arity'
  // execution
  | 'query_deadline_exceeded' | 'invalid_node_id' | 'node_not_found' | 'edge_not_found'
  | 'invalid_vector_configuration' | 'unique_constraint_violation' | 'unsupported_unique_index_value_type'
  | 'invalid_vector_dimension' | 'invalid_vector_component' | 'vector_component_magnitude_exceeded'
  | 'zero_norm_cosine_vector'
  // index lifecycle
  | 'index_lifecycle_unavailable' | 'secondary_lifecycle_stepping_requires_disabled_mode'
  | 'active_text_mutation_limit_exceeded' | 'invalid_index_source_data' | 'invalid_index_model'
  | 'invalid_secondary_index_value' | 'identifier_exhausted' | 'index_id_exhausted'
  | 'vector_physical_id_exhausted' | 'index_generation_exhausted' | 'index_revision_exhausted'
  | 'index_operation_revision_exhausted' | 'index_already_exists' | 'index_definition_conflict' | 'index_busy'
  | 'index_operation_not_found' | 'index_operation_not_abortable'
  // retryable conflicts
  | 'transaction_conflict' | 'request_read_view_changed' | 'stale_index_generation'
  | 'writer_fenced_commit_outcome_unknown'
  // availability and migration
  | 'database_closed' | 'invalid_configuration' | 'migration_required' | 'writer_migration_required'
  | 'unsupported_index_storage_version' | 'writer_mode_required' | 'reader_mode_required'
  // load shedding: not in errors.md's catalog (SPEC.md: new codes may be added); docs/protocol-choices.md
  | 'server_overloaded'
  // a server bound to one database (svc serve --database-id) sent another's request: not in
  // errors.md's catalog; server-internal, the gateway maps it (docs/gateway.md "Binding")
  | 'misdirected_request'
  // internal
  | 'storage_error' | 'response_serialization_error' | 'internal_error';

const planningCodes: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'invalid_index_operation_id', 'internal_planner_error', 'unsupported_edge_all_target',
  'non_literal_index_expression', 'missing_planning_equality_parameter', 'unsupported_planning_equality_parameter',
  'index_not_found', 'invalid_search_tenant', 'invalid_search_tenant_value', 'invalid_search_result_count',
  'invalid_search_result_count_expression', 'invalid_search_input', 'invalid_batch_condition_min_size',
  'invalid_initial_batch_condition', 'duplicate_property_assignment', 'duplicate_property_selection',
  'duplicate_projection_alias', 'duplicate_return_variable', 'duplicate_element_id', 'duplicate_order_key',
  'unbound_context', 'invalid_sub_traversal_operation', 'invalid_after_bind_operation',
  'read_only_traversal_in_write_batch', 'invalid_branch_arity', 'invalid_batch_arity', 'invalid_repeat_emit',
  'invalid_repeat_count', 'invalid_shortest_path_count', 'invalid_order_keys', 'invalid_projection_arity',
  'invalid_stream_range', 'invalid_stream_bound_expression', 'invalid_empty_name', 'invalid_predicate_arity',
]);

/** Default HTTP status of a code when raised at its usual stage (errors.md §3). */
export function statusOf(code: ErrorCode): number {
  if (planningCodes.has(code)) return 400;
  switch (code) {
    case 'invalid_request': case 'invalid_query_json': case 'invalid_request_body': case 'invalid_request_option':
    case 'invalid_vector_dimension': case 'invalid_vector_component': case 'vector_component_magnitude_exceeded':
    case 'zero_norm_cosine_vector':
      return 400;
    case 'transaction_conflict': case 'writer_fenced_commit_outcome_unknown':
      return 409;
    case 'writer_mode_required': case 'server_overloaded':
      return 503;
    case 'misdirected_request':
      return 421;
    default:
      return 500;
  }
}

export class SvcError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  constructor(code: ErrorCode, msg: string, status: number = statusOf(code)) {
    super(msg);
    this.name = 'SvcError';
    this.code = code;
    this.status = status;
  }
  get error(): ErrorCode { return this.code; }
  get msg(): string { return this.message; }
}

// Constructors that apply the message conventions of errors.md §6.
export const jsonError = (detail: string) => new SvcError('invalid_query_json', `invalid query JSON: ${detail}`);
export const planError = (code: ErrorCode, detail: string) => new SvcError(code, `planner error: ${detail}`, 400);
export const queryError = (detail: string) => new SvcError('invalid_query', `db error: Query error: ${detail}`);
export const dbError = (code: ErrorCode, detail: string) => new SvcError(code, `db error: ${detail}`);
export const optionError = (detail: string, status = 400) => new SvcError('invalid_request_option', detail, status);
export const bodyError = (detail: string) => new SvcError('invalid_request_body', `failed to read request body: ${detail}`);
/** A body over `max` bytes (limits.bodyBytesMax): the server's and the embedded handle's answer. */
export const bodyTooLargeError = (max: number) => bodyError(`length limit exceeded (the maximum is ${max} bytes)`);
/** `queue`: which queue is full, `full`: how ("4096 requests waiting"). */
export const overloadError = (queue: string, full: string) =>
  new SvcError('server_overloaded', `server overloaded: ${queue} is full (${full}); retry later`);

/** The wire envelope of a failure: `{"error": code, "msg": text}`. */
export function errorBody(err: SvcError): string {
  return `{"error":${JSON.stringify(err.code)},"msg":${JSON.stringify(err.message)}}`;
}

/**
 * Any thrown thing as a SvcError a client may read. Non-SvcErrors are bugs: they become a
 * generic internal_error and go to the log (internalErrorFor); SvcErrors pass forClient.
 */
export function asSvcError(err: unknown): SvcError {
  if (err instanceof SvcError) return forClient(err);
  if (err instanceof RangeError && /call stack/i.test(err.message)) {
    return new SvcError('invalid_query', 'db error: Query error: query nested too deeply');
  }
  return internalErrorFor(err);
}

/** A short random reference that ties a client's message to its server log line. */
export function newErrorRef(): string {
  return randomBytes(4).toString('hex');
}

/** The whole story of a failure, for the server log only. */
function logText(err: unknown): string {
  if (err instanceof Error) return err.stack ?? `${err.name}: ${err.message}`;
  return String(err);
}

/**
 * An unexpected exception (a bug, a dead worker, a failed task) as the 500 a client gets:
 * a fixed message with a reference. The exception itself, with its stack, goes to stderr
 * under that reference. `context` says where it happened (e.g. "reader task failed").
 */
export function internalErrorFor(err: unknown, context?: string): SvcError {
  const ref = newErrorRef();
  process.stderr.write(`svcdb: internal error (ref ${ref})${context === undefined ? '' : ` ${context}`}: ${logText(err)}\n`);
  return new SvcError('internal_error', `internal error: the request failed; see the server log (ref ${ref})`);
}

/** Codes whose messages may quote the operating system, storage or a worker. */
const operatorDetailCodes: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'internal_error', 'storage_error', 'writer_fenced_commit_outcome_unknown',
]);

// Absolute file-system paths, file:// URLs and s3:// object URIs. Quoted ones (Node's fs
// messages quote paths: `open '/data/x'`) may hold spaces; bare ones end at whitespace,
// quotes, brackets, `,` or `;`, and a trailing `.` or `:` belongs to the sentence.
const quotedPathPattern = /(['"`])(?:file:\/\/|s3:\/\/|\/)[^'"`\n]*\1/g;
const pathPattern = /(?:file:\/\/|s3:\/\/|(?<![\w.~/<-])\/)[^\s'"`()<>[\]{},;]*/g;
const stackPattern = /\n\s+at [^]*$/;

/** `text` without stack frames and with every path or object URI replaced by `<path>`. */
export function redactInternals(text: string): string {
  return text.replace(stackPattern, '')
    .replace(quotedPathPattern, (_found, quote: string) => `${quote}<path>${quote}`)
    .replace(pathPattern, (found) => {
      const kept = found.replace(/[.:]+$/, '');
      return `<path>${found.slice(kept.length)}`;
    });
}

/**
 * `err` as a client may read it. Storage, fencing and internal errors can quote paths
 * and OS texts; when anything had to go, the full message is logged under a reference
 * and the client's message names that reference. Every other code is returned as is.
 */
export function forClient(err: SvcError): SvcError {
  if (!operatorDetailCodes.has(err.code)) return err;
  const safe = redactInternals(err.message);
  if (safe === err.message) return err;
  const ref = newErrorRef();
  process.stderr.write(`svcdb: ${err.code} (ref ${ref}): ${err.message}\n`);
  return new SvcError(err.code, `${safe} (ref ${ref}; the server log has the details)`, err.status);
}
