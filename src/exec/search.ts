// Searches (indexes.md §7, operations.md §3.7 and §6). A vector source search walks the
// graph of its index partition (src/vector/), or scans it exactly when that is as cheap or
// the graph could not find k visible points; a `*_within` search ranks exactly the distinct
// elements of its input. Rows carry `$distance` until they move (rows.ts RowExtra).
//
// Planning (plan.ts checkSearch) has already checked names, the index, the tenant value's
// presence, literal query vectors and literal k; what is left are the run-time rules of
// §7.3, evaluated with an empty row.
import type { SearchOp, StreamBound } from '../protocol/ast.js';
import { planError, queryError, SvcError } from '../protocol/errors.js';
import { valuesEqual } from '../protocol/compare.js';
import { tagOf, type Value } from '../protocol/value.js';
import { limits } from '../limits.js';
import { recordGet } from '../store/record-codec.js';
import { currentView, findServing, type ViewIndex } from '../index/view.js';
import { decodeTenant, partitionKey, type VectorPartitionView } from '../index/vector-index.js';
import { queryVector, storedVector } from '../index/vector-values.js';
import { VectorGraph, vectorDistance } from '../vector/index.js';
import { ElementPoints } from '../index/vector-elements.js';
import { evalExpr, inputValue, type ExecCtx } from './context.js';
import type { EvalOp } from './eval-op.js';
import { EXTRA_BYTES, guard } from './guard.js';
import { ElementMarks } from './marks.js';
import { edgeKey, emptyExtra, idOfKey, isEdgeKey, needRows, NO_ELEMENT, nodeKey, RowSet, rowsOf, type RowExtra, type Stream } from './rows.js';

export function evalSearch(ctx: ExecCtx, op: SearchOp, context: Stream | null, evalOp: EvalOp): Stream {
  const vector = op.op.startsWith('vector');
  const element = op.op.includes('nodes') ? 'node' : 'edge';
  const index = findServing(currentView(ctx.store), { lane: vector ? 'vector' : 'text', element, label: op.label, property: op.property }, ctx.at);
  // The plan saw the index active; a snapshot older than its activation does not.
  if (index === null) throw planError('index_not_found', `missing ${element === 'node' ? 'Node' : 'Edge'} ${vector ? 'vector' : 'text'} index for \`${op.label}.${op.property}\` at this snapshot`);
  if (!vector) throw new SvcError('internal_error', 'internal error: text searches are not built yet');
  let input: RowSet | null = null;
  if (op.input !== null) {
    input = needRows(evalOp(ctx, op.input, context), op.op);
    // operations.md §6: empty input, empty output, without touching the index.
    if (input.length === 0) return rowsOf(new RowSet());
  }
  const d = index.record.definition;
  const k = resultCount(ctx, op.k);
  let tenant: Value | undefined;
  if (d.tenantProperty !== null) {
    if (op.tenant_value === null) throw queryError(`a search on the tenant-partitioned index \`${d.label}.${d.property}\` needs a tenant_value`);
    tenant = inputValue(ctx, op.tenant_value, NO_ELEMENT, null);
  }
  const query = queryVector(inputValue(ctx, op.query, NO_ELEMENT, null), d.dimension!, d.metric!);
  const rows = input === null ? graphSearch(ctx, index, tenant, query, k, element === 'edge') : rankWithin(ctx, op.op, input, index, tenant, query, k, element === 'edge');
  return rowsOf(rows);
}

/** k of §7.3: an i64 >= 1 (else 500 invalid_query). */
function resultCount(ctx: ExecCtx, bound: StreamBound): number {
  const k = bound.kind === 'literal' ? bound.value : evalExpr(ctx, bound.expr, NO_ELEMENT, null);
  if (typeof k !== 'bigint') throw queryError(`k must be an i64, got ${tagOf(k)}`);
  if (k < 1n) throw queryError(`k must be at least 1, got ${k}`);
  // More rows than any partition can hold is the same as all of them.
  return k > BigInt(limits.streamRowsMax) ? limits.streamRowsMax : Number(k);
}

/** Distinct candidates of a `*_within` search (per thread, one search at a time). */
const candidateMarks = new ElementMarks();

/** Decoded tenant values of the readers' view partitions (per thread; the views are immutable). */
const tenants = new WeakMap<VectorPartitionView, Value>();

/** The position of the tenant's partition in the view (-1: none). */
function partitionIndex(index: ViewIndex, tenant: Value | undefined): number {
  const partitions = index.partitions ?? [];
  if (tenant === undefined) return partitions.length > 0 ? 0 : -1;
  const key = partitionKey(tenant);
  for (let i = 0; i < partitions.length; i++) {
    const p = partitions[i]!;
    if (p.key !== key || p.tenant === null) continue;
    let value = tenants.get(p);
    if (value === undefined) tenants.set(p, value = decodeTenant(p.tenant));
    if (valuesEqual(value, tenant)) return i;
  }
  return -1;
}

/** A row of `el` ranked `distance` (f32, widened exactly), keeping `from`'s other extras. */
function rankedExtra(from: RowExtra | null, distance: number): RowExtra {
  guard.chargeLater(EXTRA_BYTES);
  const extra = from === null ? emptyExtra() : { ...from };
  extra.rankName = '$distance';
  extra.rank = distance;
  return extra;
}

/** Top-k of the tenant's partition: the graph's approximate answer, or an exact scan. */
function graphSearch(ctx: ExecCtx, index: ViewIndex, tenant: Value | undefined, query: Float32Array, k: number, edges: boolean): RowSet {
  const out = new RowSet();
  const partition = partitionIndex(index, tenant);
  if (partition < 0) return out; // an unknown tenant has no rows
  const graph = VectorGraph.attach(ctx.store.vectorMemory(), index.partitions![partition]!.root);
  const points = graph.pointCount();
  const want = Math.min(k, points);
  if (want === 0) return out;
  guard.charge(want * 8);
  const elements = new Uint32Array(want);
  const distances = new Float32Array(want);
  const exact = points <= limits.vectorExactScanPointsMax || want * 4 >= points || 2 * want > limits.vectorEfMax;
  let found = exact ? graph.searchExact(query, want, ctx.at, elements, distances)
    : graph.search(query, want, Math.max(limits.vectorSearchEfMin, 2 * want), ctx.at, elements, distances);
  // Tombstones and points of other snapshots can hide visible ones from the graph walk:
  // short of k, the exact scan decides (it finds every visible point).
  if (!exact && found < want) found = graph.searchExact(query, want, ctx.at, elements, distances);
  guard.step(exact ? points : want * 64);
  for (let i = 0; i < found; i++) out.push(edges ? edgeKey(elements[i]!) : nodeKey(elements[i]!), rankedExtra(null, distances[i]!));
  return out;
}

/**
 * `*_within` (operations.md §6): the input's distinct elements (first row kept) that the
 * index would hold at this snapshot (its label, a vector it accepts, the tenant's
 * partition), ranked by exact distance, ties by ascending ID, at most k.
 *
 * An element whose point (index/vector-elements.ts) holds its vector at this snapshot is
 * ranked from the graph by the distance kernel; any other (a snapshot older than its
 * current point, a write racing the read) from its record, with the same arithmetic.
 */
function rankWithin(ctx: ExecCtx, opName: string, input: RowSet, index: ViewIndex, tenant: Value | undefined, query: Float32Array, k: number, edges: boolean): RowSet {
  const d = index.record.definition;
  // The rows of first occurrences, in input order.
  const firstRows = new Uint32Array(input.length);
  let distinct = 0;
  const seen = candidateMarks.begin(ctx, input.length);
  try {
    for (let i = 0; i < input.length; i++) {
      const el = input.el[i]!;
      if (el === NO_ELEMENT || isEdgeKey(el) !== edges) throw queryError(`${opName} expects ${edges ? 'edge' : 'node'} rows`);
      if (!seen.add(el)) continue;
      firstRows[distinct++] = i;
      if (distinct > limits.searchWithinCandidatesMax) throw queryError(`${opName} has more than ${limits.searchWithinCandidatesMax} distinct candidates`);
    }
  } finally {
    seen.end();
  }
  const store = ctx.store;
  const wanted = partitionIndex(index, tenant);
  if (wanted < 0) return new RowSet(); // no element of this tenant was ever indexed
  const labelId = store.names.idOf(d.label), propertyId = store.names.idOf(d.property);
  const tenantId = d.tenantProperty === null ? -1 : store.names.idOf(d.tenantProperty);
  const memory = store.vectorMemory();
  const elements = ElementPoints.attach(memory, index.elements!);
  const partitions = index.partitions!;
  const graphs: (VectorGraph | undefined)[] = [];
  const graphOf = (i: number): VectorGraph => graphs[i] ??= VectorGraph.attach(memory, partitions[i]!.root);
  guard.charge(distinct * 24);
  const rowOf: number[] = [], ids: number[] = [];
  const distance = new Float64Array(distinct);
  // Candidates ranked from the graph: their points and positions, then one kernel pass.
  const points = new Uint32Array(distinct), fastAt = new Uint32Array(distinct);
  let fast = 0;
  for (let c = 0; c < distinct; c++) {
    guard.step(1);
    const row = firstRows[c]!;
    const id = idOfKey(input.el[row]!);
    const point = elements.point(id);
    if (point >= 0) {
      const partition = elements.partition(id);
      if (partition < partitions.length && graphOf(partition).holds(point, id, ctx.at)) {
        // Its vector at this snapshot; in another tenant's partition it is no candidate.
        if (partition === wanted) {
          points[fast] = point;
          fastAt[fast++] = ids.length;
          rowOf.push(row);
          ids.push(id);
        }
        continue;
      }
    }
    if ((edges ? store.edgeLabel(id) : store.nodeLabel(id, ctx.at)) !== labelId) continue;
    const record = edges ? store.edgeRecord(id, ctx.at) : store.nodeRecord(id, ctx.at);
    const value = recordGet(record, propertyId);
    if (value === undefined) continue;
    if (tenantId >= 0) {
      const t = recordGet(record, tenantId);
      if (t === undefined || t === null || !valuesEqual(t, tenant!)) continue;
    }
    let vector: Float32Array;
    try {
      vector = storedVector(value, d.dimension!, d.metric!);
    } catch {
      continue; // a value the index does not hold is no candidate
    }
    distance[ids.length] = vectorDistance(d.metric!, query, vector);
    rowOf.push(row);
    ids.push(id);
  }
  if (fast > 0) {
    const near = new Float32Array(fast);
    graphOf(wanted).distancesTo(query, points, fast, near);
    for (let i = 0; i < fast; i++) distance[fastAt[i]!] = near[i]!;
  }
  const order = nearestFirst(distance, ids, Math.min(k, ids.length));
  const out = new RowSet();
  for (let i = 0; i < order.length; i++) {
    const c = order[i]!;
    out.push(edges ? edgeKey(ids[c]!) : nodeKey(ids[c]!), rankedExtra(input.extraAt(rowOf[c]!), distance[c]!));
  }
  return out;
}

/**
 * Positions of the `k` smallest (distance, id) pairs, in ascending order: a bounded max-heap
 * (n log k) instead of sorting every candidate.
 */
function nearestFirst(distance: Float64Array, ids: readonly number[], k: number): Uint32Array {
  const heap = new Uint32Array(k);
  const after = (a: number, b: number) => distance[a]! > distance[b]! || (distance[a] === distance[b] && ids[a]! > ids[b]!);
  let size = 0;
  const siftDown = (from: number) => {
    for (let i = from; ;) {
      const l = 2 * i + 1, r = l + 1;
      let top = i;
      if (l < size && after(heap[l]!, heap[top]!)) top = l;
      if (r < size && after(heap[r]!, heap[top]!)) top = r;
      if (top === i) return;
      const t = heap[i]!; heap[i] = heap[top]!; heap[top] = t;
      i = top;
    }
  };
  for (let c = 0; c < ids.length && k > 0; c++) {
    if (size < k) {
      // Sift up.
      let i = size++;
      heap[i] = c;
      while (i > 0) {
        const parent = (i - 1) >> 1;
        if (!after(heap[i]!, heap[parent]!)) break;
        const t = heap[i]!; heap[i] = heap[parent]!; heap[parent] = t;
        i = parent;
      }
    } else if (after(heap[0]!, c)) {
      heap[0] = c;
      siftDown(0);
    }
  }
  // Pop the largest to the end: ascending order.
  for (let end = size - 1; end > 0; end--) {
    const t = heap[0]!; heap[0] = heap[end]!; heap[end] = t;
    size = end;
    siftDown(0);
  }
  return heap;
}
