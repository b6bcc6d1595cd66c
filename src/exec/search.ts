// Searches (indexes.md §7, operations.md §3.7 and §6).
//
// Vector: a source search walks the graph of its index partition (src/vector/), or scans it
// exactly when that is as cheap or the graph could not find k visible points; a
// `*_within` search ranks exactly the distinct elements of its input. Rows carry
// `$distance`, ascending, ties by ascending ID.
//
// Text: a source search is the partition's BM25 top-k (src/text/, block-max WAND); a
// `*_within` search scores each distinct input element's current text with the statistics
// of the whole partition, with the same arithmetic (text/bm25.ts). Rows carry `$score`,
// descending, ties by ascending ID. Both keep the ranking field until the row moves (rows.ts).
//
// Planning (plan.ts checkSearch) has already checked names, the index, the tenant value's
// presence, literal queries and literal k; what is left are the run-time rules of §7.3,
// evaluated with an empty row.
import type { Op, SearchOp, StreamBound } from '../protocol/ast.js';
import { planError, queryError } from '../protocol/errors.js';
import { valuesEqual } from '../protocol/compare.js';
import { tagOf, type Value } from '../protocol/value.js';
import { limits } from '../limits.js';
import { recordGet, type PropertyRecord } from '../store/record-codec.js';
import { currentView, findServing, type ViewIndex } from '../index/view.js';
import { PartitionDirectory } from '../index/partition-directory.js';
import { queryVector, storedVector } from '../index/vector-values.js';
import { ElementPoints } from '../index/vector-elements.js';
import { storedText } from '../index/text-index.js';
import { VectorGraph, vectorDistance } from '../vector/index.js';
import { W_RECORD } from '../vector/layout.js';
import { analyze, bm25, distinctTerms, TextPartition } from '../text/index.js';
import { evalExpr, inputValue, type ExecCtx } from './context.js';
import type { EvalOp } from './eval-op.js';
import { EXTRA_BYTES, guard } from '../query-guard.js';
import { ElementMarks } from './marks.js';
import { navigate, navigationOps, navigationStep, nodeRowsNeighbourIds, nodeRowsStep, type NavigationOp } from './navigation.js';
import { edgeKey, emptyExtra, idOfKey, isEdgeKey, needRows, NO_ELEMENT, nodeKey, RowSet, rowsOf, type RowExtra, type Stream } from './rows.js';

export function evalSearch(ctx: ExecCtx, op: SearchOp, context: Stream | null, evalOp: EvalOp): Stream {
  const vector = op.op.startsWith('vector');
  const edges = !op.op.includes('nodes');
  const index = findServing(currentView(ctx.store), { lane: vector ? 'vector' : 'text', element: edges ? 'edge' : 'node', label: op.label, property: op.property }, ctx.at);
  // The plan saw the index active; a snapshot older than its activation does not.
  if (index === null) throw planError('index_not_found', `missing ${edges ? 'Edge' : 'Node'} ${vector ? 'vector' : 'text'} index for \`${op.label}.${op.property}\` at this snapshot`);
  let input: WithinInput | null = null;
  if (op.input !== null) {
    input = withinInput(ctx, op, op.input, context, evalOp, edges);
    // operations.md §6: empty input, empty output, without touching the index.
    if (withinLength(input) === 0) return rowsOf(new RowSet());
  }
  const d = index.record.definition;
  const k = resultCount(ctx, op.k);
  let tenant: Value | undefined;
  if (d.tenantProperty !== null) {
    if (op.tenant_value === null) throw queryError(`a search on the tenant-partitioned index \`${d.label}.${d.property}\` needs a tenant_value`);
    tenant = inputValue(ctx, op.tenant_value, NO_ELEMENT, null);
  }
  // The tenant's partition root (0: no element of that tenant was ever indexed).
  const partition = PartitionDirectory.attach(ctx.store.topology, index.directory!).find(tenant);
  const queryValue = inputValue(ctx, op.query, NO_ELEMENT, null);
  if (vector) {
    const query = queryVector(queryValue, d.dimension!, d.metric!);
    if (partition === 0) return rowsOf(new RowSet());
    return rowsOf(input === null ? graphSearch(ctx, partition, query, k, edges) : rankWithin(ctx, op.op, input, index, partition, tenant, query, k, edges));
  }
  if (typeof queryValue !== 'string' || queryValue === '') throw queryError(`the query text must be a non-empty string, got ${typeof queryValue === 'string' ? 'an empty string' : tagOf(queryValue)}`);
  if (partition === 0) return rowsOf(new RowSet());
  return rowsOf(input === null ? textSearch(ctx, partition, queryValue, k, edges) : scoreWithin(ctx, op.op, input, index, partition, tenant, queryValue, k, edges));
}

/** k of §7.3: an i64 >= 1 (else 500 invalid_query). */
function resultCount(ctx: ExecCtx, bound: StreamBound): number {
  const k = bound.kind === 'literal' ? bound.value : evalExpr(ctx, bound.expr, NO_ELEMENT, null);
  if (typeof k !== 'bigint') throw queryError(`k must be an i64, got ${tagOf(k)}`);
  if (k < 1n) throw queryError(`k must be at least 1, got ${k}`);
  // More rows than any partition can hold is the same as all of them.
  return k > BigInt(limits.streamRowsMax) ? limits.streamRowsMax : Number(k);
}

/** A row ranked `rank` (f32, widened exactly) under `rankName`, keeping `from`'s other extras. */
function rankedExtra(from: RowExtra | null, rankName: '$distance' | '$score', rank: number): RowExtra {
  guard.chargeLater(EXTRA_BYTES);
  const extra = from === null ? emptyExtra() : { ...from };
  extra.rankName = rankName;
  extra.rank = rank;
  return extra;
}

// ---------------------------------------------------------------- source searches

/** Top-k of the partition (its graph's root): the graph's approximate answer, or an exact scan. */
function graphSearch(ctx: ExecCtx, root: number, query: Float32Array, k: number, edges: boolean): RowSet {
  const out = new RowSet();
  const graph = VectorGraph.attach(ctx.store.vectorMemory(), root);
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
  for (let i = 0; i < found; i++) out.push(edges ? edgeKey(elements[i]!) : nodeKey(elements[i]!), rankedExtra(null, '$distance', distances[i]!));
  return out;
}

/** BM25 top-k of the partition at `root` (OR over the query's distinct terms). */
function textSearch(ctx: ExecCtx, root: number, query: string, k: number, edges: boolean): RowSet {
  const out = new RowSet();
  const text = TextPartition.attach(ctx.store.textMemory(), root);
  const want = Math.min(k, text.pointCount());
  if (want === 0) return out;
  guard.charge(want * 8);
  const elements = new Uint32Array(want);
  const scores = new Float32Array(want);
  const found = text.search(query, want, ctx.at, elements, scores);
  guard.step(want * 64);
  for (let i = 0; i < found; i++) out.push(edges ? edgeKey(elements[i]!) : nodeKey(elements[i]!), rankedExtra(null, '$score', scores[i]!));
  return out;
}

// ---------------------------------------------------------------- searches within a stream

/** Distinct candidates of a `*_within` search whose input keys are not ascending (per thread). */
const candidateMarks = new ElementMarks();

/**
 * Per-thread buffers of `*_within` (one search at a time, after its input is evaluated),
 * grown to fit: input row and element ID of each candidate, and the kernel's status of it.
 */
let withinRows = new Uint32Array(0), withinIds = new Uint32Array(0), withinStatus = new Uint32Array(0);

/**
 * The input of a `*_within` search: its rows, or, for a navigation from plain node rows,
 * only the neighbour IDs those rows would hold (the search needs nothing else of a row
 * without bindings, path or sack: no row is built).
 */
type WithinInput = { readonly rows: RowSet; readonly nodeIds: null } | { readonly rows: null; readonly nodeIds: Uint32Array };

function withinInput(ctx: ExecCtx, op: SearchOp, inputOp: Op, context: Stream | null, evalOp: EvalOp, edges: boolean): WithinInput {
  if (!edges && navigationOps.has(inputOp.op)) {
    const navigation = inputOp as NavigationOp;
    // What evalOp(ctx, navigation, context) does, with the rows left out when they can be.
    const from = needRows(evalOp(ctx, navigation.input, context), navigation.op);
    const plain = nodeRowsStep(ctx, navigationStep(ctx, navigation), from);
    // Straight into withinIds: firstOccurrences reads each ID before it writes that slot.
    const nodeIds = plain === null ? null : nodeRowsNeighbourIds(ctx, plain, from, (count) => { growWithinBuffers(count); return withinIds; });
    if (nodeIds !== null) return { rows: null, nodeIds };
    return { rows: navigate(ctx, navigation, from), nodeIds: null };
  }
  return { rows: needRows(evalOp(ctx, inputOp, context), op.op), nodeIds: null };
}

const withinLength = (input: WithinInput): number => (input.rows !== null ? input.rows.length : input.nodeIds.length);

/** Room for n candidates in withinRows, withinIds and withinStatus (contents kept). */
function growWithinBuffers(n: number): void {
  if (withinRows.length >= n) return;
  const size = Math.max(n, 2 * withinRows.length);
  withinRows = new Uint32Array(size);
  const ids = new Uint32Array(size);
  ids.set(withinIds);
  withinIds = ids;
  withinStatus = new Uint32Array(size);
}

/** The ascending prefix of row keys `keys` into withinRows / withinIds; its length. */
function ascendingRows(keys: readonly number[], edges: boolean, kindError: () => Error, countError: () => Error): number {
  const rows = withinRows, ids = withinIds, max = limits.searchWithinCandidatesMax;
  let i = 0;
  for (let previous = -1; i < keys.length; i++) {
    const key = keys[i]!;
    if (key === NO_ELEMENT || isEdgeKey(key) !== edges) throw kindError();
    if (key <= previous) break;
    if (i >= max) throw countError();
    previous = key;
    rows[i] = i;
    ids[i] = idOfKey(key);
  }
  return i;
}

/** The ascending prefix of node IDs `nodeIds` into withinRows / withinIds; its length. */
function ascendingNodeIds(nodeIds: Uint32Array, countError: () => Error): number {
  const rows = withinRows, ids = withinIds, max = limits.searchWithinCandidatesMax;
  let i = 0;
  for (let previous = -1; i < nodeIds.length; i++) {
    const id = nodeIds[i]!;
    if (id <= previous) break;
    if (i >= max) throw countError();
    previous = id;
    rows[i] = i;
    ids[i] = id;
  }
  return i;
}

/**
 * The distinct input elements of a `*_within` search, in input order, into withinRows
 * (the row of each element's first occurrence: operations.md §6 keeps the first row, with
 * its bindings, path and sack) and withinIds; their count. Rows of the other element kind
 * or without an element are `500 invalid_query`, as are more than
 * limits.searchWithinCandidatesMax distinct elements.
 */
function firstOccurrences(ctx: ExecCtx, opName: string, input: WithinInput, edges: boolean): number {
  const n = withinLength(input);
  growWithinBuffers(n);
  const max = limits.searchWithinCandidatesMax;
  const kindError = () => queryError(`${opName} expects ${edges ? 'edge' : 'node'} rows`);
  const countError = () => queryError(`${opName} has more than ${max} distinct candidates`);
  // Ascending keys (one node's neighbours, an ID list, a scan) are distinct without a set.
  let i = input.rows !== null ? ascendingRows(input.rows.el, edges, kindError, countError) : ascendingNodeIds(input.nodeIds, countError);
  // Element keys: the rows', or node keys of the IDs (nodeKey(id) = 2 id).
  const keys: ArrayLike<number> = input.rows !== null ? input.rows.el : input.nodeIds;
  const scale = input.rows !== null ? 1 : 2;
  const rows = withinRows, ids = withinIds;
  let distinct = i;
  if (i < n) {
    const seen = candidateMarks.begin(ctx, n);
    try {
      for (let j = 0; j < i; j++) seen.add(keys[j]! * scale);
      for (; i < n; i++) {
        const key = keys[i]! * scale;
        if (key === NO_ELEMENT || isEdgeKey(key) !== edges) throw kindError();
        if (!seen.add(key)) continue;
        if (distinct >= max) throw countError();
        rows[distinct] = i;
        ids[distinct++] = idOfKey(key);
      }
    } finally {
      seen.end();
    }
  }
  guard.charge(distinct * 24);
  return distinct;
}

/**
 * Which input elements are candidates of a `*_within` search: the index's label and, under
 * a tenant property, the searched tenant (names resolved once per search, not per candidate).
 */
class Candidates {
  private readonly labelId: number;
  private readonly tenantId: number;
  readonly propertyId: number;

  constructor(private readonly ctx: ExecCtx, index: ViewIndex, private readonly tenant: Value | undefined, private readonly edges: boolean) {
    const d = index.record.definition, names = ctx.store.names;
    this.labelId = names.idOf(d.label);
    this.propertyId = names.idOf(d.property);
    this.tenantId = d.tenantProperty === null ? -1 : names.idOf(d.tenantProperty);
  }

  /** The record of element `id` at the snapshot when it is a candidate, else null. */
  record(id: number): PropertyRecord | null {
    const { ctx, edges } = this, store = ctx.store;
    if ((edges ? store.edgeLabel(id) : store.nodeLabel(id, ctx.at)) !== this.labelId) return null;
    const record = edges ? store.edgeRecord(id, ctx.at) : store.nodeRecord(id, ctx.at);
    if (this.tenantId >= 0) {
      const t = recordGet(record, this.tenantId);
      if (t === undefined || t === null || !valuesEqual(t, this.tenant!)) return null;
    }
    return record;
  }
}

/** Rows of the k best candidates (smallest `order`, ties by ascending ID), each ranked `rank`. */
function rankedRows(input: RowSet | null, rows: ArrayLike<number>, ids: ArrayLike<number>, count: number, order: Float64Array, rankName: '$distance' | '$score', rank: (c: number) => number, k: number, edges: boolean): RowSet {
  const best = nearestFirst(order, ids, count, Math.min(k, count));
  const out = new RowSet();
  for (let i = 0; i < best.length; i++) {
    const c = best[i]!;
    out.push(edges ? edgeKey(ids[c]!) : nodeKey(ids[c]!), rankedExtra(input === null ? null : input.extraAt(rows[c]!), rankName, rank(c)));
  }
  return out;
}

/**
 * `vector_search_*_within`: the input's distinct elements that the index would hold at this
 * snapshot (its label, a vector it accepts, the tenant's partition), ranked by exact
 * distance. Candidates whose point in the searched graph holds their vector at this
 * snapshot are found, measured and ranked in one kernel pass (VectorGraph.withinTop, through
 * the element map); any other (a point in another tenant's graph, a snapshot older than its
 * current point, a write racing the read) is decided here from its record, with the same
 * arithmetic, and joins the kernel's k best.
 */
function rankWithin(ctx: ExecCtx, opName: string, input: WithinInput, index: ViewIndex, wanted: number /* graph root */, tenant: Value | undefined, query: Float32Array, k: number, edges: boolean): RowSet {
  const d = index.record.definition;
  const n = firstOccurrences(ctx, opName, input, edges);
  const rows = withinRows, ids = withinIds, status = withinStatus;
  guard.step(n);
  const memory = ctx.store.vectorMemory();
  const best = Math.min(k, n);
  guard.charge(best * 8);
  const positions = new Uint32Array(best), nearest = new Float32Array(best);
  const graph = VectorGraph.attach(memory, wanted);
  const found = graph.withinTop(query, index.elements!, ids, n, ctx.at, k, status, positions, nearest);
  // Candidates: the kernel's best, then those decided from their records.
  const candidateRows: number[] = [], candidateIds: number[] = [], distances: number[] = [];
  for (let j = 0; j < found; j++) {
    candidateRows.push(rows[positions[j]!]!);
    candidateIds.push(ids[positions[j]!]!);
    distances.push(nearest[j]!);
  }
  let filter: Candidates | null = null, elements: ElementPoints | null = null;
  for (let c = 0; c < n && graph.recordCandidates > 0; c++) {
    if (status[c] !== W_RECORD) continue;
    const id = ids[c]!;
    elements ??= ElementPoints.attach(memory, index.elements!);
    // A point of another graph that holds the vector at this snapshot: another tenant's.
    const point = elements.point(id), root = elements.lastRoot;
    if (point >= 0 && root !== 0 && root !== wanted && VectorGraph.attach(memory, root).holds(point, id, ctx.at)) continue;
    filter ??= new Candidates(ctx, index, tenant, edges);
    const record = filter.record(id);
    const value = record === null ? undefined : recordGet(record, filter.propertyId);
    if (value === undefined) continue;
    let vector: Float32Array;
    try {
      vector = storedVector(value, d.dimension!, d.metric!);
    } catch {
      continue; // a value the index does not hold is no candidate
    }
    candidateRows.push(rows[c]!);
    candidateIds.push(id);
    distances.push(vectorDistance(d.metric!, query, vector));
  }
  const order = Float64Array.from(distances);
  return rankedRows(input.rows, candidateRows, candidateIds, candidateIds.length, order, '$distance', (c) => distances[c]!, k, edges);
}

/**
 * `text_search_*_within`: the input's distinct elements whose current text (at this
 * snapshot, with the index's label and the tenant) holds at least one query term, scored by
 * BM25 against the statistics of the whole partition (text/bm25.ts, the source search's
 * arithmetic).
 */
function scoreWithin(ctx: ExecCtx, opName: string, input: WithinInput, index: ViewIndex, root: number, tenant: Value | undefined, query: string, k: number, edges: boolean): RowSet {
  const d = index.record.definition;
  const analyzer = d.analyzer ?? 'standard';
  const terms = distinctTerms(query, analyzer);
  const n = firstOccurrences(ctx, opName, input, edges);
  const firstRows = withinRows, firstIds = withinIds;
  if (terms.length === 0) return new RowSet(); // a query without terms matches nothing
  const slotOf = new Map(terms.map((t, i) => [t, i]));
  const stats = TextPartition.attach(ctx.store.textMemory(), root).termStats(terms, ctx.at);
  const filter = new Candidates(ctx, index, tenant, edges), propertyId = filter.propertyId;
  const tfs = new Array<number>(terms.length);
  const rowOf: number[] = [], ids: number[] = [], scores: number[] = [];
  for (let c = 0; c < n; c++) {
    const row = firstRows[c]!;
    const id = firstIds[c]!;
    const record = filter.record(id);
    const value = record === null ? undefined : recordGet(record, propertyId);
    if (value === undefined) continue;
    let text: string;
    try {
      text = storedText(value);
    } catch {
      continue; // a value the index does not hold is no candidate
    }
    const docTerms = analyze(text, analyzer);
    guard.step(1 + docTerms.length);
    tfs.fill(0);
    let matched = false;
    for (const t of docTerms) {
      const i = slotOf.get(t);
      if (i === undefined) continue;
      tfs[i]!++;
      matched = true;
    }
    if (!matched) continue;
    rowOf.push(row);
    ids.push(id);
    scores.push(bm25(tfs, docTerms.length, stats));
  }
  // Highest score first: rank by the negated score.
  const order = Float64Array.from(scores, (s) => -s);
  return rankedRows(input.rows, rowOf, ids, ids.length, order, '$score', (c) => scores[c]!, k, edges);
}

/**
 * Positions of the `k` smallest (order, id) pairs, in ascending order: a bounded max-heap
 * (n log k) instead of sorting every candidate.
 */
function nearestFirst(order: Float64Array, ids: ArrayLike<number>, count: number, k: number): Uint32Array {
  const heap = new Uint32Array(k);
  const after = (a: number, b: number) => order[a]! > order[b]! || (order[a] === order[b] && ids[a]! > ids[b]!);
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
  for (let c = 0; c < count && k > 0; c++) {
    if (size < k) {
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
