// The writer's index runtime: the catalog (records and operations), the secondary
// indexes' entries, their maintenance inside every write batch, and builds and drops that
// run in bounded slices between batches (indexes.md §3-§6, docs/indexes.md).
//
// Transactions. Everything here joins the store's one transaction log (store.ts): a
// catalog change pushes an undo (put the old object back) and a redo op (the new object,
// RedoKind.Catalog) into the open batch; an index entry written by a graph write pushes an
// undo (remove it, or clear its deletion). So a rolled-back batch leaves no entry and no
// catalog change behind, and the WAL carries catalog changes in the batch that made them.
// Entries themselves are never logged: they are derived from the graph, and rebuilt from
// it when a store is loaded or an activation is replayed (materialize).
//
// Readers see the catalog through a view published in the topology memory (view.ts)
// after every batch that changed it; an index serves a reader at snapshot S only when
// activeSince <= S (and S < retiredAt once dropped), so activation and drop happen at
// the epoch of their batch.
import { Packr } from 'msgpackr';
import { limits } from '../limits.js';
import { dbError, SvcError } from '../protocol/errors.js';
import type { Value } from '../protocol/value.js';
import { valuesEqual } from '../protocol/compare.js';
import { recordGet, type PropertyRecord } from '../store/record-codec.js';
import { registerIndexHooks, type BatchOutcome, type IndexHooks, type Store } from '../store/store.js';
import {
  abortStages, acceptedReceipt, alreadyActiveReceipt, buildStages, checkComponents, describeIndex, differingFields,
  dropStages, existingOperationReceipt, familyOf, identityOf, operationNotFound, statusObject,
  type IndexDefinition, type IndexOperation, type IndexRecord,
} from './catalog.js';
import { IndexEntries } from './entries.js';
import { equalityKey, rangeKey, type IndexKey } from './keys.js';
import { showView, writeView, type ViewBlock, type ViewIndex } from './view.js';
import { VectorPhysical } from './vector-index.js';
import { TextPhysical } from './text-index.js';
import { importGraph } from '../vector/export.js';
import { importPartition } from '../text/index.js';
import type { PartitionsAtCut } from '../store/partition-section.js';
import type { TextAnalyzer } from '../protocol/index-spec.js';
import { decodeTenant } from './partitions.js';

/** A vector or text index on the writer (index/vector-index.ts, index/text-index.ts). */
type SearchPhysical = VectorPhysical | TextPhysical;

const packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false });

/** One catalog change as the WAL and the snapshot carry it. */
export interface CatalogChange { record?: IndexRecord; operation?: IndexOperation; forget?: string; nextIndexId?: number; sequence?: number }

/** A secondary index's entries plus what its build needs. */
interface Physical {
  readonly kind: 'secondary';
  record: IndexRecord;
  readonly entries: IndexEntries;
  readonly labelId: number;
  readonly propertyId: number;
  /** Build only: element slots below it are scanned (and maintained by writes). Infinity once scanned. */
  cursor: number;
  /** Build only: slots holding values the index cannot accept, to re-check at validation. */
  readonly invalidSlots: Set<number>;
  /** Build only (unique): keys that may be held by more than one element, to re-check at validation. */
  readonly duplicateKeys: Map<string, IndexKey>;
}

const keyName = (k: IndexKey) => `${k.k0}:${k.k1}`;

/** The key of a value under an index definition (index/keys.ts); null: not indexed. Throws on values the index refuses. */
function indexKey(d: IndexDefinition, v: Value, out: IndexKey): IndexKey | null {
  return d.lane === 'equality' ? equalityKey(v, d.unique, out) : rangeKey(v, out);
}

/** index_definition_conflict, naming the differing fields, unless `asked` matches `existing`. */
function checkSameDefinition(existing: IndexDefinition, asked: IndexDefinition): void {
  const differing = differingFields(existing, asked);
  if (differing.length === 0) return;
  throw dbError('index_definition_conflict', `index definition conflict for ${describeIndex(existing)}: ${differing.join(', ')} differ${differing.length === 1 ? 's' : ''} from the existing definition`);
}

/** Map key of the indexes watching one element kind and label. */
const watchKey = (labelId: number, edge: boolean) => labelId * 2 + (edge ? 1 : 0);

export class IndexRuntime implements IndexHooks {
  private readonly records = new Map<string, IndexRecord>();
  private readonly recordsById = new Map<number, IndexRecord>();
  private readonly operations = new Map<string, IndexOperation>();
  /** Operations queued or running: what background work can advance (hasWork runs per request). */
  private readonly runnable = new Set<string>();
  private nextIndexId = 1;
  private sequence = 0;
  /** Physical secondary indexes by index id: built, being built, or waiting to be freed. */
  private readonly physical = new Map<number, Physical>();
  /** Indexes maintained by writes, by element kind and label id (key: label * 2 + edge). */
  private readonly watching = new Map<number, (Physical | SearchPhysical)[]>();
  /** Vector and text indexes by index id: built, being built, or waiting to be freed. */
  private readonly searches = new Map<number, SearchPhysical>();
  /**
   * Blocks of dropped (or compacted) vector and text partitions, freed once every read that
   * began before is over (topology reader slots: a read announces itself there before it
   * loads the catalog view that names them).
   */
  private blocksRetired: { blocks: [number, number][]; sequence: number; free: (at: number, words: number) => void }[] = [];
  /**
   * (visible epoch, retire sequence) samples: once every read announced at or before a
   * sample's sequence has ended, no running read holds a snapshot older than its epoch
   * (text merges may then drop documents deleted at or before it).
   */
  private readonly horizons: { epoch: number; sequence: number }[] = [];
  /** Bumped whenever the catalog or a watched set changes; the view is republished then. */
  private changed = false;
  private version = 0;
  /** The view block readers use now (retired when the next one is published). */
  private viewBlock: ViewBlock | null = null;
  /** The open batch's view, written before the batch is logged (prepareCommit), shown at its commit. */
  private preparedView: ViewBlock | null = null;
  /** The last problem of the optional work after a batch (merges), logged once until it changes. */
  private settleProblem: string | null = null;
  private readonly scratchKey: IndexKey = { k0: 0, k1: 0 };
  private readonly scratchOld: IndexKey = { k0: 0, k1: 0 };
  /** checkUnique's candidates (it does not re-enter itself). */
  private readonly scratchFound: number[] = [];

  /**
   * The analyzer and positions setting of text indexes created on this store: `standard`
   * without positions (the wire's, indexes.md §2) unless the embedded handle was opened
   * with others (OpenOptions.textAnalyzer / textPositions).
   */
  textDefaults: { analyzer: TextAnalyzer; positions: boolean } = { analyzer: 'standard', positions: false };

  constructor(private readonly store: Store) {}

  // ---------------------------------------------------------------- catalog changes

  /** Put a record (inside a write batch): undoable and logged. */
  private putRecord(record: IndexRecord): void {
    const key = identityOf(record.definition);
    const before = this.records.get(key);
    this.store.joinBatch(() => this.setRecord(key, before), [{ record }]);
    this.setRecord(key, record);
  }

  private setRecord(key: string, record: IndexRecord | undefined): void {
    if (record === undefined) {
      const old = this.records.get(key);
      this.records.delete(key);
      if (old !== undefined) this.recordsById.delete(old.id);
    } else {
      this.records.set(key, record);
      this.recordsById.set(record.id, record);
    }
    this.changed = true;
  }

  private putOperation(op: IndexOperation): void {
    const before = this.operations.get(op.id);
    this.store.joinBatch(() => this.setOperation(op.id, before), [{ operation: op }]);
    this.setOperation(op.id, op);
  }

  private setOperation(id: string, op: IndexOperation | undefined): void {
    if (op === undefined) this.operations.delete(id);
    else this.operations.set(id, op);
    if (op !== undefined && (op.status === 'queued' || op.status === 'running')) this.runnable.add(id);
    else this.runnable.delete(id);
    this.changed = true;
  }

  private takeIndexId(): number {
    const id = this.nextIndexId;
    if (id >= Number.MAX_SAFE_INTEGER) throw dbError('index_id_exhausted', 'index id space exhausted');
    const before = this.nextIndexId;
    this.store.joinBatch(() => { this.nextIndexId = before; }, [{ nextIndexId: id + 1 }]);
    this.nextIndexId = id + 1;
    return id;
  }

  private newOperation(record: IndexRecord, kind: 'build' | 'drop', stage: string, epoch: number): IndexOperation {
    const before = this.sequence;
    this.store.joinBatch(() => { this.sequence = before; }, [{ sequence: before + 1 }]);
    this.sequence = before + 1;
    return {
      id: crypto.randomUUID(), indexId: record.id, generation: record.generation, kind, family: familyOf(record.definition.lane),
      status: 'queued', stage, attempt: 0, progress: [0, 0, 0, 0], blocker: null, stageEpoch: epoch, sequence: this.sequence,
    };
  }

  private operation(id: string): IndexOperation {
    const op = this.operations.get(id);
    if (op === undefined) throw operationNotFound(id);
    return op;
  }

  // ---------------------------------------------------------------- DDL (inside a write batch)

  /** create_index (indexes.md §3). */
  createIndex(definition: IndexDefinition, ifNotExists: boolean, epoch: number): Value {
    checkComponents(definition);
    if (definition.lane === 'vector' && definition.dimension! > limits.vectorDimensionMax) {
      throw dbError('invalid_vector_configuration', `invalid vector configuration: dimension ${definition.dimension} is above ${limits.vectorDimensionMax}`);
    }
    if (definition.lane === 'text') definition = { ...definition, analyzer: this.textDefaults.analyzer, positions: this.textDefaults.positions };
    const identity = identityOf(definition);
    const current = this.records.get(identity);
    if (current !== undefined && current.state !== 'dropped') {
      if (current.state === 'aborting' || current.state === 'dropping') {
        throw dbError('index_busy', `${describeIndex(current.definition)} is busy: it is ${current.state}`);
      }
      checkSameDefinition(current.definition, definition);
      if (!ifNotExists) throw dbError('index_already_exists', `${describeIndex(current.definition)} already exists (${current.state})`);
      return current.state === 'active' ? alreadyActiveReceipt(current) : existingOperationReceipt(current.operation);
    }
    let existing = 0;
    for (const r of this.records.values()) if (r.state !== 'dropped') existing++;
    if (existing >= limits.indexesMax) {
      throw dbError('invalid_index_model', `invalid index model: at most ${limits.indexesMax} indexes may exist`);
    }
    const id = current?.id ?? this.takeIndexId();
    const generation = (current?.generation ?? 0) + 1;
    // Names interned now, so maintenance can match label and property ids from the start.
    this.store.names.intern(definition.label);
    this.store.names.intern(definition.property);
    const draft: IndexRecord = { id, definition, generation, state: 'building', revision: (current?.revision ?? 0) + 1, activeSince: 0, retiredAt: 0, operation: '' };
    const op = this.newOperation(draft, 'build', buildStages[familyOf(definition.lane)][0]!, epoch);
    const record = { ...draft, operation: op.id };
    this.putRecord(record);
    this.putOperation(op);
    this.startPhysical(record);
    this.retainOperations();
    return acceptedReceipt(op);
  }

  /** drop_index (indexes.md §4). */
  dropIndex(definition: IndexDefinition, epoch: number): Value {
    const current = this.records.get(identityOf(definition));
    if (current === undefined || current.state === 'dropped') {
      throw new SvcError('index_not_found', `db error: ${describeIndex(definition)} not found`, 500);
    }
    // Vector and text drops ignore dimension, metric and tenant property (indexes.md §4).
    if (definition.lane === 'equality' || definition.lane === 'range') checkSameDefinition(current.definition, definition);
    if (current.state === 'building') {
      this.abort(this.operation(current.operation), epoch);
      return existingOperationReceipt(current.operation);
    }
    if (current.state === 'aborting' || current.state === 'dropping') return existingOperationReceipt(current.operation);
    const op = this.newOperation(current, 'drop', dropStages[familyOf(current.definition.lane)][0]!, epoch);
    this.putRecord({ ...current, state: 'dropping', revision: current.revision + 1, retiredAt: epoch, operation: op.id });
    this.putOperation(op);
    this.unwatch(current.id);
    this.retainOperations();
    return acceptedReceipt(op);
  }

  /** get_index_operation on the writer (a write batch); readers use the view. */
  getOperation(id: string): Value {
    return statusObject(this.operation(id));
  }

  /** retry_index_operation: a blocked operation is queued again from its checkpoint. */
  retryOperation(id: string): Value {
    const op = this.operation(id);
    if (op.status !== 'blocked') return statusObject(op);
    const queued: IndexOperation = { ...op, status: 'queued', blocker: null };
    this.putOperation(queued);
    return statusObject(queued);
  }

  /** abort_index_operation. */
  abortOperation(id: string, epoch: number): Value {
    const op = this.operation(id);
    if (op.kind === 'drop' || op.status === 'succeeded') {
      throw dbError('index_operation_not_abortable', `Index operation ${id} is not abortable: ${op.kind === 'drop' ? 'drop operation' : 'successful or terminal build'}`);
    }
    if (op.status === 'aborted' || op.stage.startsWith('aborting_')) return statusObject(op);
    return statusObject(this.abort(op, epoch));
  }

  private abort(op: IndexOperation, epoch: number): IndexOperation {
    const record = this.recordsById.get(op.indexId)!;
    const aborting: IndexOperation = { ...op, status: 'queued', stage: abortStages(op.family)[0]!, blocker: null, stageEpoch: epoch };
    this.putOperation(aborting);
    this.putRecord({ ...record, state: 'aborting', revision: record.revision + 1 });
    this.unwatch(record.id);
    return aborting;
  }

  /** Keep at most limits.indexOperationsRetainedMax finished operations (oldest go first). */
  private retainOperations(): void {
    const finished = [...this.operations.values()].filter((o) => o.status === 'succeeded' || o.status === 'aborted');
    if (finished.length <= limits.indexOperationsRetainedMax) return;
    finished.sort((a, b) => a.sequence - b.sequence);
    for (const op of finished.slice(0, finished.length - limits.indexOperationsRetainedMax)) {
      const before = op;
      this.store.joinBatch(() => this.setOperation(before.id, before), [{ forget: op.id }]);
      this.setOperation(op.id, undefined);
    }
  }

  // ---------------------------------------------------------------- physical indexes

  /**
   * A new, empty physical index, registered and maintained by writes: cursor 0 for a build
   * (its scan fills it), Infinity for an index filled whole at once (materialize).
   */
  private addPhysical(record: IndexRecord, cursor: number): Physical {
    const d = record.definition;
    const physical: Physical = {
      kind: 'secondary', record, entries: IndexEntries.create(this.store.topology),
      labelId: this.store.names.idOf(d.label), propertyId: this.store.names.idOf(d.property),
      cursor, invalidSlots: new Set(), duplicateKeys: new Map(),
    };
    this.physical.set(record.id, physical);
    this.watch(physical);
    return physical;
  }

  /** A new, empty vector or text index, maintained by writes (cursor as for addPhysical). */
  private addSearch(record: IndexRecord, cursor: number): SearchPhysical {
    const d = record.definition;
    const labelId = this.store.names.idOf(d.label), propertyId = this.store.names.idOf(d.property);
    const search = d.lane === 'vector' ? new VectorPhysical(this.store, record, labelId, propertyId, cursor) : new TextPhysical(this.store, record, labelId, propertyId, cursor);
    this.searches.set(record.id, search);
    this.watch(search);
    return search;
  }

  private watch(p: Physical | SearchPhysical): void {
    const key = watchKey(p.labelId, p.record.definition.element === 'edge');
    let list = this.watching.get(key);
    if (list === undefined) this.watching.set(key, list = []);
    list.push(p);
    this.changed = true;
  }

  private startPhysical(record: IndexRecord): void {
    // A rolled-back create leaves no physical index behind.
    this.store.joinBatch(() => this.freePhysical(record.id), []);
    if (isSearchLane(record)) this.addSearch(record, 0);
    else this.addPhysical(record, 0);
  }

  /** Stop maintaining a physical index; returns undo (put it back) or null when it was not watched. */
  private stopWatching(p: Physical | SearchPhysical): (() => void) | null {
    const list = this.watching.get(watchKey(p.labelId, p.record.definition.element === 'edge'));
    const at = list?.indexOf(p) ?? -1;
    if (at < 0) return null;
    list!.splice(at, 1);
    return () => { list!.splice(at, 0, p); };
  }

  private unwatch(indexId: number): void {
    const p = this.physical.get(indexId) ?? this.searches.get(indexId);
    const undo = p === undefined ? null : this.stopWatching(p);
    if (undo !== null) this.store.joinBatch(undo, []);
  }

  private freePhysical(indexId: number): void {
    const search = this.searches.get(indexId);
    if (search !== undefined) {
      this.stopWatching(search);
      this.searches.delete(indexId);
      search.directory.retire();
      this.retireBlocks(search.kind, search.blocks());
      this.changed = true;
      return;
    }
    const p = this.physical.get(indexId);
    if (p === undefined) return;
    this.stopWatching(p);
    p.entries.free();
    this.physical.delete(indexId);
    this.changed = true;
  }

  /** The root of an index's entries (view.ts), or 0. */
  entriesRoot(indexId: number): number {
    return this.physical.get(indexId)?.entries.root ?? 0;
  }

  // ---------------------------------------------------------------- maintenance (IndexHooks)

  watchesNode(label: number): boolean {
    return this.watching.get(watchKey(label, false))?.length ? true : false;
  }

  watchesEdge(label: number): boolean {
    return this.watching.get(watchKey(label, true))?.length ? true : false;
  }

  /**
   * An element changed inside the open batch: from (oldLabel, oldRecord) to (newLabel,
   * newRecord); label -1 = the element does not exist on that side. Every index watching
   * either label gets its entry moved. Throws (the batch rolls back) on values an active
   * index cannot accept and on unique violations.
   */
  elementChanged(edge: boolean, slot: number, oldLabel: number, oldRecord: PropertyRecord | null, newLabel: number, newRecord: PropertyRecord | null): void {
    // Runs per written element: no arrays made here.
    const first = this.watching.get(watchKey(oldLabel < 0 ? newLabel : oldLabel, edge));
    if (first !== undefined) for (const p of first) this.maintainAny(p, slot, oldLabel, oldRecord, newLabel, newRecord);
    if (oldLabel === newLabel || oldLabel < 0 || newLabel < 0) return;
    const second = this.watching.get(watchKey(newLabel, edge));
    if (second !== undefined) for (const p of second) this.maintainAny(p, slot, oldLabel, oldRecord, newLabel, newRecord);
  }

  private maintainAny(p: Physical | SearchPhysical, slot: number, oldLabel: number, oldRecord: PropertyRecord | null, newLabel: number, newRecord: PropertyRecord | null): void {
    if (p.kind === 'secondary') this.maintain(p, slot, oldLabel, oldRecord, newLabel, newRecord);
    else p.maintain(slot, oldLabel, oldRecord, newLabel, newRecord, this.recordsById.get(p.record.id)?.state !== 'active');
  }

  private maintain(p: Physical, slot: number, oldLabel: number, oldRecord: PropertyRecord | null, newLabel: number, newRecord: PropertyRecord | null): void {
    // A building index learns slots at or past its cursor from its scan.
    if (slot >= p.cursor) return;
    const d = p.record.definition;
    const building = this.recordsById.get(p.record.id)?.state !== 'active';
    const oldValue = oldLabel === p.labelId && oldRecord !== null ? recordGet(oldRecord, p.propertyId) : undefined;
    const newValue = newLabel === p.labelId && newRecord !== null ? recordGet(newRecord, p.propertyId) : undefined;
    const oldKey = oldValue === undefined ? null : this.keyOf(p, oldValue, slot, this.scratchOld, building);
    const newKey = newValue === undefined ? null : this.keyOf(p, newValue, slot, this.scratchKey, building);
    if (oldKey !== null && newKey !== null && oldKey.k0 === newKey.k0 && oldKey.k1 === newKey.k1) return;
    const epoch = this.store.pendingEpoch();
    const entries = p.entries;
    if (oldKey !== null) {
      const { k0, k1 } = oldKey;
      if (entries.markDeleted(k0, k1, slot, epoch)) this.store.joinBatch(() => entries.undoDelete(k0, k1, slot, epoch), null);
    }
    if (newKey !== null) {
      const { k0, k1 } = newKey;
      if (d.unique) this.checkUnique(p, newValue!, k0, k1, slot, epoch, building);
      entries.insert(k0, k1, slot, epoch);
      this.store.joinBatch(() => entries.undoInsert(k0, k1, slot), null);
    }
  }

  /**
   * The key of element `slot`'s value under index p, or null when it is not indexed. A value
   * the index refuses fails the write, except while the index builds (`building`): a build
   * does not fail writes, the slot is re-checked when the build validates.
   */
  private keyOf(p: Physical, v: Value, slot: number, out: IndexKey, building: boolean): IndexKey | null {
    try {
      return indexKey(p.record.definition, v, out);
    } catch (err) {
      if (!building) throw err;
      p.invalidSlots.add(slot);
      return null;
    }
  }

  /** Another element holding an equal value under a unique index (at the batch's epoch). */
  private checkUnique(p: Physical, value: Value, k0: number, k1: number, slot: number, epoch: number, building: boolean): void {
    // A key no entry has (almost every insert of a fresh value) needs no lookup.
    if (!p.entries.mayContain(k0, k1)) return;
    const found = this.scratchFound;
    found.length = 0;
    p.entries.scan(k0, k1, k0, k1, epoch, found);
    for (const other of found) {
      if (other === slot) continue;
      const otherValue = recordGet(this.store.nodeRecord(other, epoch), p.propertyId);
      if (otherValue === undefined || !valuesEqual(otherValue, value)) continue;
      if (building) {
        p.duplicateKeys.set(keyName({ k0, k1 }), { k0, k1 });
        return;
      }
      throw dbError('unique_constraint_violation', `Unique constraint violated for ${p.record.definition.label}.${p.record.definition.property} on value ${JSON.stringify(typeof value === 'bigint' ? Number(value) : value)}: existing node ${other}, attempted node ${slot}`);
    }
  }

  // ---------------------------------------------------------------- store transaction events

  /**
   * Before the open batch is logged and committed: write its view if the catalog changed.
   * This is what can fail (the topology heap full); failing here fails the batch while it
   * can still roll back. After the commit, settled() only shows it: a batch that is logged
   * and committed is never answered with an error (a review found one that was).
   */
  prepareCommit(): void {
    if (!this.changed) return;
    this.discardPreparedView();
    this.preparedView = this.writeNextView();
  }

  /**
   * After commit, rollback or an empty batch: show the new view if the catalog changed, then
   * the optional upkeep (merges, freeing), which never fails the batch: what it could not
   * do (the topology heap full) is tried again after the next one.
   */
  settled(outcome: BatchOutcome = 'committed'): void {
    if (outcome === 'committed') this.showChangedView();
    else {
      // Rolled back: the catalog is the last committed one again, whose view readers have.
      this.discardPreparedView();
      this.changed = false;
    }
    // Deltas past their bound are merged into runs here, after every batch (writer and
    // followers alike), so lookups never scan a long unsorted delta. Amortized O(log n)
    // moves per entry; entries deleted before the visible epoch are dropped on the way.
    // Each step on its own: one that cannot allocate must not keep the others from running.
    let done = true;
    for (const p of this.physical.values()) if (p.entries.pendingMaintenance()) done = this.upkeep(() => p.entries.maintain(this.store.visibleEpoch())) && done;
    for (const search of this.searches.values()) {
      if (search.kind !== 'text') continue;
      search.batchSettled();
      // Merges of the lists batches killed postings in: one bounded step, then idle slices.
      if (search.needsMerging() || search.hasParkedMerges()) done = this.upkeep(() => search.merge(this.store.visibleEpoch(), this.purgeHorizon(), false)) && done;
    }
    if (this.blocksRetired.length > 0) done = this.upkeep(() => this.freeRetiredBlocks()) && done;
    if (done) this.settleProblem = null;
  }

  /** One step of the upkeep after a batch: a storage_error defers it to the next batch (logged once per problem). */
  private upkeep(step: () => unknown): boolean {
    try {
      step();
      return true;
    } catch (err) {
      if (!(err instanceof SvcError) || err.code !== 'storage_error') throw err;
      if (this.settleProblem !== err.msg) process.stderr.write(`svcdb: index upkeep after a batch deferred: ${err.msg}\n`);
      this.settleProblem = err.msg;
      return false;
    }
  }

  /** The catalog as it is now, written as the next version's view (not shown yet). */
  private writeNextView(): ViewBlock {
    return writeView(this.store.topology, this.version + 1, this.viewEntries(), [...this.operations.values()]);
  }

  /** A view written for a batch that did not commit: readers never saw it. */
  private discardPreparedView(): void {
    if (this.preparedView !== null) this.store.topology.retireWords(this.preparedView.at, this.preparedView.words);
    this.preparedView = null;
  }

  /** Show the view of a changed catalog: the one prepareCommit wrote, else one written now (loading, replay). */
  private showChangedView(): void {
    if (!this.changed) return;
    const block = this.preparedView ?? this.writeNextView();
    this.preparedView = null;
    showView(this.store.topology, block, this.viewBlock);
    this.viewBlock = block;
    this.version++;
    this.changed = false;
  }

  private viewEntries(): ViewIndex[] {
    const out: ViewIndex[] = [];
    for (const record of this.records.values()) {
      const search = record.state === 'dropped' ? undefined : this.searches.get(record.id);
      if (search === undefined) out.push({ record, root: record.state === 'dropped' ? 0 : this.entriesRoot(record.id) });
      else if (search.kind === 'vector') out.push({ record, root: 0, directory: search.directory.at, elements: search.elements.root });
      else out.push({ record, root: 0, directory: search.directory.at });
    }
    return out;
  }

  /** Vector or text memory blocks nothing published names any more: freed once no read can hold them. */
  private retireBlocks(kind: 'vector' | 'text', blocks: [number, number][]): void {
    const free = kind === 'vector'
      ? (at: number, words: number) => this.store.vectorMemory().freeWords(at, words)
      : (at: number, words: number) => this.store.textMemory().freeNow(at, words);
    this.blocksRetired.push({ blocks, sequence: this.store.topology.retireSequence(), free });
  }

  /** Free the retired blocks that no running read, and no snapshot export, can still hold. */
  private freeRetiredBlocks(): void {
    // An export runs on another thread without a topology reader slot, from the roots of its cut.
    if (this.store.oldestHeldCut() !== Infinity) return;
    const oldest = this.store.topology.oldestReadSequence();
    this.blocksRetired = this.blocksRetired.filter(({ blocks, sequence, free }) => {
      if (sequence >= oldest) return true;
      for (const [at, words] of blocks) free(at, words);
      return false;
    });
  }

  /**
   * The newest epoch E such that no running read holds a snapshot older than E: the
   * visible epoch of the newest sample whose sequence every running read announced after.
   * Samples are taken here (each takes a retire sequence), at most one per visible epoch.
   */
  private purgeHorizon(): number {
    const topology = this.store.topology;
    const visible = this.store.visibleEpoch();
    const samples = this.horizons;
    if (samples.length === 0 || samples[samples.length - 1]!.epoch < visible) samples.push({ epoch: visible, sequence: topology.retireSequence() });
    const oldest = topology.oldestReadSequence();
    let horizon = 0;
    while (samples.length > 0 && samples[0]!.sequence < oldest) horizon = samples.shift()!.epoch;
    // The last sample passed stays as the floor for the next call.
    if (horizon > 0) samples.unshift({ epoch: horizon, sequence: -1 });
    // A snapshot export reads as of its cut, which may be older than every running read.
    return Math.min(horizon, this.store.oldestHeldCut());
  }

  // ---------------------------------------------------------------- replay, snapshot

  /** A logged catalog change (recovery, followers), inside the replayed batch. */
  replayCatalog(logged: unknown): void {
    const change = checkedChange(logged);
    if (change.nextIndexId !== undefined) {
      if (change.nextIndexId < this.nextIndexId) throw replayError(`index id counter goes back from ${this.nextIndexId} to ${change.nextIndexId}`);
      this.nextIndexId = change.nextIndexId;
    }
    if (change.sequence !== undefined) this.sequence = change.sequence;
    if (change.operation !== undefined) this.setOperation(change.operation.id, change.operation);
    if (change.forget !== undefined) this.setOperation(change.forget, undefined);
    if (change.record !== undefined) this.replayRecord(change.record);
  }

  private replayRecord(record: IndexRecord): void {
    const key = identityOf(record.definition);
    const before = this.records.get(key);
    this.setRecord(key, record);
    if (record.state === 'active' && before?.state !== 'active') this.materialize(record);
    else if (record.state !== 'active' && (this.physical.has(record.id) || this.searches.has(record.id)) && before?.generation === record.generation && before.state === 'active') {
      // Stopped serving: no longer maintained; freed by the drop (or at once on a follower).
      this.freePhysical(record.id);
    }
  }

  /**
   * Build an active index whole from the store as it is (a loaded snapshot, a replayed
   * activation): every entry created at epoch 1, which every later reader holds.
   */
  private materialize(record: IndexRecord): void {
    this.freePhysical(record.id);
    const d = record.definition;
    if (isSearchLane(record)) {
      this.addSearch(record, Infinity).materialize(d.element === 'edge' ? this.store.edgeSlots() : this.store.nodeSlots(), this.store.committedEpoch());
      return;
    }
    const physical = this.addPhysical(record, Infinity);
    const entries = physical.entries;
    const at = this.store.committedEpoch();
    const key: IndexKey = { k0: 0, k1: 0 };
    const slots = d.element === 'edge' ? this.store.edgeSlots() : this.store.nodeSlots();
    for (let slot = 0; slot < slots; slot++) {
      const value = this.sourceValue(physical, slot, at);
      if (value === undefined) continue;
      // Committed data satisfied the index when it was written.
      const k = indexKey(d, value, key);
      if (k !== null) entries.appendBuild(k.k0, k.k1, slot, 1);
    }
    // Sorted once into one run; nothing reads it before the view is republished.
    entries.finishBuild(0);
  }

  /** The indexed property of element `slot` at `at`, if it has the index's label and the property. */
  private sourceValue(p: Physical, slot: number, at: number): Value | undefined {
    const store = this.store;
    if (p.record.definition.element === 'edge') {
      if (!store.edgeVisible(slot, at) || store.edgeLabel(slot) !== p.labelId) return undefined;
      return store.propertyOnce(true, slot, at, p.propertyId);
    }
    if (!store.nodeVisible(slot, at) || store.nodeLabel(slot, at) !== p.labelId) return undefined;
    return store.propertyOnce(false, slot, at, p.propertyId);
  }

  /** The catalog for a snapshot (msgpack), taken between batches. */
  exportCatalog(): Uint8Array {
    // Active vector and text indexes carry their partitions (the snapshot's `vectors` and
    // `texts` sections, in the order partitionsAtCut gives them); building ones scan again
    // after a restart.
    const position = { vector: 0, text: 0 };
    const searches = this.activeSearches().map((s) => ({
      indexId: s.record.id,
      partitions: s.cutPartitions().map((p) => ({ key: p.key, tenant: p.tenant, graph: position[s.kind]++ })),
    }));
    return packr.pack({
      nextIndexId: this.nextIndexId, sequence: this.sequence,
      records: [...this.records.values()], operations: [...this.operations.values()], searches,
    }) as Uint8Array;
  }

  partitionsAtCut(): PartitionsAtCut {
    const cuts = (kind: 'vector' | 'text') => this.activeSearches().filter((s) => s.kind === kind)
      .flatMap((s) => s.cutPartitions().map((p) => ({ root: p.root, points: p.points })));
    return { vectors: cuts('vector'), texts: cuts('text') };
  }

  private activeSearches(): SearchPhysical[] {
    return [...this.searches.values()].filter((s) => this.recordsById.get(s.record.id)?.state === 'active');
  }

  /** A loaded snapshot's catalog: records and operations back, active indexes materialized. */
  restoreCatalog(bytes: Uint8Array, partitions: { vectors: Uint8Array[] | null; texts: Uint8Array[] | null }): void {
    let data: { nextIndexId: number; sequence: number; records: IndexRecord[]; operations: IndexOperation[]; searches?: SnapshotSearchIndex[] };
    try {
      data = packr.unpack(bytes) as typeof data;
    } catch (err) {
      throw new SvcError('storage_error', `storage error: the snapshot's index catalog cannot be decoded: ${(err as Error).message}`);
    }
    this.nextIndexId = data.nextIndexId;
    this.sequence = data.sequence;
    for (const op of data.operations) this.setOperation(op.id, op);
    const carried = new Map((data.searches ?? []).map((v) => [v.indexId, v]));
    for (const record of data.records) {
      const search = carried.get(record.id);
      const images = record.definition.lane === 'vector' ? partitions.vectors : partitions.texts;
      if (record.state === 'active' && search !== undefined && images !== null) this.adoptSearch(record, search, images);
      else this.replayRecord(record);
    }
    this.changed = true;
    this.settled();
  }

  /** An active vector or text index whose partitions a snapshot carried: loaded, not built again. */
  private adoptSearch(record: IndexRecord, carried: SnapshotSearchIndex, images: Uint8Array[]): void {
    this.setRecord(identityOf(record.definition), record);
    const search = this.addSearch(record, Infinity);
    for (const p of carried.partitions) {
      const bytes = images[p.graph];
      if (bytes === undefined) throw new SvcError('storage_error', `storage error: the snapshot's index catalog names ${search.kind} partition ${p.graph}, which its \`${search.kind}s\` section lacks`);
      const identity = { key: p.key, tenant: p.tenant === null ? undefined : decodeTenant(p.tenant), tenantBytes: p.tenant };
      if (search.kind === 'vector') search.adoptPartition(identity, importGraph(this.store.vectorMemory(), bytes));
      else search.adoptPartition(identity, importPartition(this.store.textMemory(), bytes));
    }
  }

  /**
   * After recovery: unfinished builds start over (their entries were in memory only);
   * attempt goes up when they are claimed again, progress counters keep counting.
   */
  resumeAfterRecovery(): void {
    for (const record of this.records.values()) {
      if (record.state !== 'building' || this.physical.has(record.id) || this.searches.has(record.id)) continue;
      if (isSearchLane(record)) this.addSearch(record, 0);
      else this.addPhysical(record, 0);
    }
    for (const op of this.operations.values()) {
      if (op.status === 'running') this.setOperation(op.id, { ...op, status: 'queued', stage: op.kind === 'build' && !op.stage.startsWith('aborting_') ? buildStages[op.family][0]! : op.stage });
    }
    this.changed = true;
    this.settled();
  }

  // ---------------------------------------------------------------- background work (between batches)

  /** Whether an index operation is queued or running (not blocked, not finished). */
  hasRunnableOperation(): boolean {
    return this.runnable.size > 0;
  }

  /** Whether an operation can make progress now (not blocked, not finished), or a compaction or merge. */
  hasWork(): boolean {
    if (this.runnable.size > 0) return true;
    for (const s of this.searches.values()) if (s.kind === 'vector' ? s.needsCompaction() : s.needsMerging()) return true;
    return false;
  }

  /**
   * One slice of background work, inside a write batch the caller opened (and commits):
   * at most limits.indexBuildSliceElements elements of one build, or one cleanup stage.
   * 'waiting': the next operation waits for readers to move past an epoch (try later).
   */
  step(): 'progress' | 'waiting' | 'idle' {
    const epoch = this.store.pendingEpoch();
    const visible = this.store.visibleEpoch();
    // The oldest runnable operation first.
    let oldest: IndexOperation | undefined;
    for (const id of this.runnable) {
      const candidate = this.operations.get(id)!;
      if (oldest === undefined || candidate.sequence < oldest.sequence) oldest = candidate;
    }
    if (oldest === undefined) return this.compactionSlice();
    let op = oldest;
    if (op.status === 'queued') {
      if (op.attempt >= 0xffffffff) throw dbError('index_operation_revision_exhausted', 'index operation attempts exhausted');
      op = { ...op, status: 'running', attempt: op.attempt + 1 };
    }
    const record = this.recordsById.get(op.indexId)!;
    try {
      if (op.kind === 'build' && !op.stage.startsWith('aborting_')) {
        op = op.family === 'secondary' ? this.buildSlice(record, op, epoch) : this.searchBuildSlice(record, op, epoch);
      }
      else {
        const next = this.cleanupStage(record, op, epoch, visible);
        if (next === null) return 'waiting';
        op = next;
      }
    } catch (err) {
      // Storage exhausted or a broken invariant: the operation waits for retry or abort.
      process.stderr.write(`svcdb: index operation ${op.id} blocked: ${(err as Error).message}\n`);
      op = { ...op, status: 'blocked', blocker: 'invariant_violation' };
    }
    this.putOperation(op);
    return 'progress';
  }

  private buildSlice(record: IndexRecord, op: IndexOperation, epoch: number): IndexOperation {
    const p = this.physical.get(record.id)!;
    const d = record.definition;
    const store = this.store;
    const at = store.committedEpoch();
    const slots = d.element === 'edge' ? store.edgeSlots() : store.nodeSlots();
    let [entities, inputBytes, outputs, outputBytes] = op.progress;
    if (op.stage === 'scan' || op.stage === 'catch_up') {
      const stop = Math.min(slots, p.cursor + limits.indexBuildSliceElements);
      const key: IndexKey = { k0: 0, k1: 0 };
      const flagged: string[] = [];
      for (let slot = p.cursor; slot < stop; slot++) {
        entities++;
        const value = this.sourceValue(p, slot, at);
        p.cursor = slot + 1;
        if (value === undefined) continue;
        inputBytes += approximateBytes(value);
        const k = this.keyOf(p, value, slot, key, true);
        if (k === null) continue;
        // Equal values have equal keys: a key the index may hold already is checked once
        // this slice's entries are published (below).
        if (d.unique && p.entries.mayContain(k.k0, k.k1)) {
          const name = keyName(k);
          if (!p.duplicateKeys.has(name)) {
            p.duplicateKeys.set(name, { k0: k.k0, k1: k.k1 });
            flagged.push(name);
          }
        }
        p.entries.appendBuild(k.k0, k.k1, slot, 1);
        outputs++;
        outputBytes += 20;
      }
      // The slice's entries become one sorted run, found by later writes' maintenance.
      p.entries.finishBuild(0);
      // The keys this slice flagged are checked now, a few hundred per slice (the filter's
      // false positives, ~2 %), rather than all at validation, which runs in one slice. A key
      // dropped here that gains a duplicate later is flagged again then: by the scan (the
      // filter holds the key) or by the write's own check (checkUnique while building).
      for (const name of flagged) {
        if (!this.holdsDuplicate(p, p.duplicateKeys.get(name)!, at)) p.duplicateKeys.delete(name);
      }
      const progress: [number, number, number, number] = [entities, inputBytes, outputs, outputBytes];
      if (p.cursor < slots) return { ...op, progress };
      // Scanned up to the slots of now: elements made during the build were the catch-up.
      if (op.stage === 'scan') return { ...op, stage: 'catch_up', progress, stageEpoch: epoch };
      // Every slot is scanned: from now on every write maintains the index.
      p.cursor = Infinity;
      return { ...op, stage: 'validate', progress, stageEpoch: epoch };
    }
    // A build whose entries were lost (a restart while it was blocked or queued at
    // validate) has not scanned anything of this process: scan again first.
    if (p.cursor !== Infinity) return { ...op, stage: 'scan', stageEpoch: epoch };
    // validate + activate: one step, so no write slips in between.
    for (const slot of p.invalidSlots) {
      const value = this.sourceValue(p, slot, at);
      try {
        if (value !== undefined) indexKey(d, value, { k0: 0, k1: 0 });
        p.invalidSlots.delete(slot);
      } catch {
        return { ...op, status: 'blocked', stage: 'validate', blocker: 'invalid_source_data' };
      }
    }
    for (const [name, key] of p.duplicateKeys) {
      if (this.holdsDuplicate(p, key, at)) return { ...op, status: 'blocked', stage: 'validate', blocker: 'uniqueness_violation' };
      p.duplicateKeys.delete(name);
    }
    // The build left one run per binary digit of its slice count (three for a million
    // entries): merged into one now (~20 ms per million), each lookup of the new index
    // makes one binary search instead of three, until writes add runs again.
    try {
      p.entries.maintain(this.store.visibleEpoch(), Infinity, true);
    } catch {
      // Out of topology memory: nothing changed (maintain's contract), and the index works
      // with its runs as they are; the next write reports the exhaustion where it matters.
    }
    this.putRecord({ ...record, state: 'active', revision: record.revision + 1, activeSince: epoch });
    return { ...op, status: 'succeeded', stage: 'activate', stageEpoch: epoch };
  }

  /** Whether two elements hold equal values under `key` at `at` (a unique build's re-check). */
  private holdsDuplicate(p: Physical, key: IndexKey, at: number): boolean {
    const found: number[] = [];
    p.entries.scan(key.k0, key.k1, key.k0, key.k1, at, found);
    const values = found.map((slot) => this.sourceValue(p, slot, at)).filter((v): v is Value => v !== undefined);
    return values.some((v, i) => values.some((w, j) => j > i && valuesEqual(v, w)));
  }

  /**
   * With no operation to run: one slice compacting a vector index partition
   * (index/vector-index.ts) or merging text postings (index/text-index.ts).
   */
  private compactionSlice(): 'progress' | 'waiting' | 'idle' {
    const topology = this.store.topology;
    let waiting = false;
    for (const s of this.searches.values()) {
      if (this.recordsById.get(s.record.id)?.state !== 'active') continue;
      if (s.kind === 'text') {
        if (!s.needsMerging()) continue;
        s.merge(this.store.visibleEpoch(), this.purgeHorizon(), false);
        return 'progress';
      }
      if (!s.needsCompaction()) continue;
      const result = s.compactStep(performance.now() + limits.vectorBuildSliceMs, this.store.visibleEpoch(), topology.oldestReadSequence(), () => topology.retireSequence());
      if (result === 'waiting') { waiting = true; continue; }
      if (result === 'idle') continue;
      if (result !== 'progress') this.retireBlocks('vector', result);
      return 'progress';
    }
    return waiting ? 'waiting' : 'idle';
  }

  /**
   * One slice of a vector or text build. Their stages (indexes.md §5.3): vector `scan`,
   * `catch_up`, `validate_descriptor`, `activate`; text `scan`, `scan_partitions`,
   * `catch_up`, `compact`, `prepare_manifests`, `validate_manifests`, `activate`. The
   * scanning stages insert until limits.vectorBuildSliceMs has passed (an insert is a graph
   * search or a document's analysis, far costlier than a secondary entry); `compact` merges
   * the postings; the stages without work here (partitions are made as the scan meets them,
   * manifests are this store's publish of the view) pass in one slice; validation and
   * activation share one slice, so no write slips in between.
   */
  private searchBuildSlice(record: IndexRecord, op: IndexOperation, epoch: number): IndexOperation {
    const s = this.searches.get(record.id)!;
    const store = this.store;
    const at = store.committedEpoch();
    const slots = record.definition.element === 'edge' ? store.edgeSlots() : store.nodeSlots();
    const stages = buildStages[op.family];
    const next = (progress = op.progress): IndexOperation => ({ ...op, stage: stages[stages.indexOf(op.stage) + 1]!, progress, stageEpoch: epoch });
    const [entities, inputBytes, outputs, outputBytes] = op.progress;
    if (op.stage === 'scan' || op.stage === 'catch_up') {
      const progress = { entities, inputBytes, outputs, outputBytes };
      s.scan(slots, at, performance.now() + limits.vectorBuildSliceMs, progress);
      const counters: [number, number, number, number] = [progress.entities, progress.inputBytes, progress.outputs, progress.outputBytes];
      if (s.cursor < slots) return { ...op, progress: counters };
      // Scanned up to the slots of now: elements made during the scan are the catch-up.
      if (op.stage === 'catch_up') s.cursor = Infinity;
      return next(counters);
    }
    // Between the scan and the catch-up (text scan_partitions): nothing to do here.
    if (stages.indexOf(op.stage) < stages.indexOf('catch_up')) return next();
    // A build whose points were lost (a restart while blocked or queued after the scan): scan again.
    if (s.cursor !== Infinity) return { ...op, stage: 'scan', stageEpoch: epoch };
    if (op.stage === 'compact' && s.kind === 'text') {
      if (s.merge(store.visibleEpoch(), this.purgeHorizon(), true)) return op;
      return next();
    }
    if (!op.stage.startsWith('validate_')) return next();
    if (s.invalidSourceData(at)) return { ...op, status: 'blocked', stage: op.stage, blocker: 'invalid_source_data' };
    this.putRecord({ ...record, state: 'active', revision: record.revision + 1, activeSince: epoch });
    return { ...op, status: 'succeeded', stage: 'activate', stageEpoch: epoch };
  }

  /**
   * Drop and abort stages. Entries are freed only once every reader that could still use
   * the index is past the batch that stopped it (visible >= that epoch): later readers do
   * not use it, earlier ones are protected by the topology's reader slots.
   */
  private cleanupStage(record: IndexRecord, op: IndexOperation, epoch: number, visible: number): IndexOperation | null {
    const stages = op.kind === 'drop' ? dropStages[op.family] : abortStages(op.family);
    const at = stages.indexOf(op.stage);
    const [entities, inputBytes, outputs, outputBytes] = op.progress;
    // The stage that frees the family's structures (indexes.md §5.3).
    if (op.stage.endsWith('delete_entries') || op.stage.endsWith('delete_physical') || op.stage.endsWith('delete_metadata')) {
      if (visible < op.stageEpoch) return null; // readers may still use it; later
      this.freePhysical(record.id);
    }
    const progress: [number, number, number, number] = [entities, inputBytes, outputs + 1, outputBytes];
    if (at + 1 < stages.length) return { ...op, stage: stages[at + 1]!, progress, stageEpoch: epoch };
    this.putRecord({ ...record, state: 'dropped', revision: record.revision + 1, activeSince: 0, operation: '' });
    // stageEpoch: the batch that ends it (a read shows the end once its snapshot holds it).
    return { ...op, status: op.kind === 'drop' ? 'succeeded' : 'aborted', progress, stageEpoch: epoch };
  }
}

/** An active vector or text index in a snapshot's catalog: its partitions and their positions in the `vectors` / `texts` section. */
interface SnapshotSearchIndex { indexId: number; partitions: { key: string; tenant: Uint8Array | null; graph: number }[] }

const isSearchLane = (record: IndexRecord): boolean => record.definition.lane === 'vector' || record.definition.lane === 'text';

const replayError = (what: string) => new SvcError('storage_error', `storage error: an index catalog change in the log does not fit: ${what}`);
const changeKeys = new Set(['record', 'operation', 'forget', 'nextIndexId', 'sequence']);

/** A logged catalog change, checked for shape: unknown members are refused, never skipped. */
function checkedChange(logged: unknown): CatalogChange {
  if (logged === null || typeof logged !== 'object' || Array.isArray(logged)) throw replayError('not an object');
  const change = logged as Record<string, unknown>;
  for (const key of Object.keys(change)) if (!changeKeys.has(key)) throw replayError(`unknown member \`${key}\``);
  const record = change['record'] as IndexRecord | undefined;
  if (record !== undefined && (typeof record !== 'object' || record === null || typeof record.id !== 'number' || typeof record.definition !== 'object' || typeof record.state !== 'string')) {
    throw replayError('malformed index record');
  }
  const op = change['operation'] as IndexOperation | undefined;
  if (op !== undefined && (typeof op !== 'object' || op === null || typeof op.id !== 'string' || typeof op.status !== 'string' || !Array.isArray(op.progress))) {
    throw replayError('malformed index operation');
  }
  for (const key of ['nextIndexId', 'sequence'] as const) {
    if (change[key] !== undefined && !Number.isSafeInteger(change[key])) throw replayError(`malformed ${key}`);
  }
  if (change['forget'] !== undefined && typeof change['forget'] !== 'string') throw replayError('malformed forget');
  return change as CatalogChange;
}

/** Rough encoded size of a value, for the input_bytes counter. */
function approximateBytes(v: Value): number {
  if (typeof v === 'string') return v.length;
  if (v instanceof Uint8Array) return v.byteLength;
  if (ArrayBuffer.isView(v)) return v.byteLength;
  return 8;
}

registerIndexHooks((store) => new IndexRuntime(store));
