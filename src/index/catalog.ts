// The index catalog's vocabulary (indexes.md §1-§6): definitions and their identity, index
// records, lifecycle operations, and the receipt and status objects clients receive.
// Plain data only: records and operations are immutable objects (a change makes a new
// one), so a write batch undoes a catalog change by putting the old object back, and the
// same objects are what the WAL, the snapshot and the readers' view carry.
import { dbError, SvcError } from '../protocol/errors.js';
import type { ElementKind, IndexDefinition, Lane } from '../protocol/index-spec.js';

export type { ElementKind, IndexDefinition, Lane } from '../protocol/index-spec.js';
import type { Value } from '../protocol/value.js';

export type Family = 'secondary' | 'vector' | 'text';

export type IndexState = 'building' | 'active' | 'aborting' | 'dropping' | 'dropped';

export interface IndexRecord {
  readonly id: number;
  readonly definition: IndexDefinition;
  readonly generation: number;
  readonly state: IndexState;
  /** Bumped on every change of the record (not on the wire). */
  readonly revision: number;
  /** Epoch from which readers may use the index (the activation batch); 0 while not active. */
  readonly activeSince: number;
  /** Epoch of the batch that stopped it serving queries (drop); 0 while it serves or never did. */
  readonly retiredAt: number;
  /** The operation in charge: the build (building, aborting) or the drop (dropping); '' otherwise. */
  readonly operation: string;
}

export type OperationStatus = 'queued' | 'running' | 'blocked' | 'succeeded' | 'aborted';

export interface IndexOperation {
  readonly id: string;
  readonly indexId: number;
  readonly generation: number;
  readonly kind: 'build' | 'drop';
  readonly family: Family;
  readonly status: OperationStatus;
  readonly stage: string;
  readonly attempt: number;
  /** entities, input_bytes, output_operations, output_bytes: monotonic. */
  readonly progress: readonly [number, number, number, number];
  readonly blocker: string | null;
  /** Epoch of the batch that entered the current stage (cleanup waits until readers passed it). */
  readonly stageEpoch: number;
  /** Order of creation, for retention of finished operations. */
  readonly sequence: number;
}

export const familyOf = (lane: Lane): Family => (lane === 'equality' || lane === 'range' ? 'secondary' : lane);

/** Stages per operation kind and family (indexes.md §5.3). */
export const buildStages: Record<Family, readonly string[]> = {
  secondary: ['scan', 'catch_up', 'validate', 'activate'],
  vector: ['scan', 'catch_up', 'validate_descriptor', 'activate'],
  text: ['scan', 'scan_partitions', 'catch_up', 'compact', 'prepare_manifests', 'validate_manifests', 'activate'],
};
export const dropStages: Record<Family, readonly string[]> = {
  secondary: ['delete_entries', 'delete_deltas', 'finalize'],
  vector: ['retire_cache', 'delete_physical', 'delete_deltas', 'finalize'],
  text: ['delete_metadata', 'finalize'],
};
export const abortStages = (family: Family): string[] => dropStages[family].map((s) => `aborting_${s}`);

/** The identity of indexes.md §1: lane, element kind, label, property. */
export function identityOf(d: Pick<IndexDefinition, 'lane' | 'element' | 'label' | 'property'>): string {
  return `${d.lane}\u001f${d.element}\u001f${d.label}\u001f${d.property}`;
}

/** Execution-time checks of definition components (indexes.md §2, last paragraph). */
export function checkComponents(d: IndexDefinition): void {
  for (const [what, name] of [['label', d.label], ['property', d.property], ['tenant property', d.tenantProperty]] as const) {
    if (name === null) continue;
    if (name.trim() === '' || name.includes('\u001f')) {
      throw dbError('invalid_configuration', `invalid index configuration: the ${what} \`${name}\` is blank or contains U+001F`);
    }
    if (Buffer.byteLength(name, 'utf8') > 65535) throw dbError('invalid_index_model', `invalid index model: the ${what} is longer than 65535 bytes`);
  }
}

/** The fields in which two definitions of one identity differ (conflict messages). */
export function differingFields(a: IndexDefinition, b: IndexDefinition): string[] {
  const out: string[] = [];
  if (a.unique !== b.unique) out.push('unique');
  if (a.direction !== b.direction) out.push('direction');
  if (a.dimension !== b.dimension) out.push('dimension');
  if (a.metric !== b.metric) out.push('metric');
  if (a.tenantProperty !== b.tenantProperty) out.push('tenant_property');
  if ((a.analyzer ?? null) !== (b.analyzer ?? null)) out.push('text_analyzer');
  if ((a.positions ?? false) !== (b.positions ?? false)) out.push('text_positions_enabled');
  return out;
}

/** `Node equality index Person.email`, for messages. */
export function describeIndex(d: IndexDefinition): string {
  const element = d.element === 'node' ? 'Node' : 'Edge';
  return `${element} ${d.lane}${d.unique ? ' (unique)' : ''} index \`${d.label}.${d.property}\``;
}

// ------------------------------------------------------------------ wire objects

const decimal = (n: number): string => {
  if (!Number.isSafeInteger(n) || n < 0) throw new SvcError('internal_error', `internal error: index counter ${n} is not a safe integer`);
  return String(n);
};

export function acceptedReceipt(op: IndexOperation): Value {
  return new Map<string, Value>([['kind', 'accepted'], ['operation_id', op.id], ['index_id', decimal(op.indexId)], ['generation', decimal(op.generation)]]);
}

export function existingOperationReceipt(operationId: string): Value {
  return new Map<string, Value>([['kind', 'existing_operation'], ['operation_id', operationId]]);
}

export function alreadyActiveReceipt(r: IndexRecord): Value {
  return new Map<string, Value>([['kind', 'already_active'], ['index_id', decimal(r.id)], ['generation', decimal(r.generation)]]);
}

/** The status object of indexes.md §5.3. */
export function statusObject(op: IndexOperation): Value {
  const [entities, inputBytes, outputOperations, outputBytes] = op.progress;
  const status = new Map<string, Value>([
    ['status', op.status], ['operation_id', op.id], ['index_id', decimal(op.indexId)], ['generation', decimal(op.generation)],
    ['operation_kind', op.kind], ['family', op.family], ['stage', op.stage], ['attempt', BigInt(op.attempt)],
    ['progress', new Map<string, Value>([
      ['entities', decimal(entities)], ['input_bytes', decimal(inputBytes)],
      ['output_operations', decimal(outputOperations)], ['output_bytes', decimal(outputBytes)],
    ])],
  ]);
  if (op.status === 'blocked' && op.blocker !== null) status.set('blocker_code', op.blocker);
  return status;
}

export const operationNotFound = (id: string) => dbError('index_operation_not_found', `Index operation ${id} not found`);
