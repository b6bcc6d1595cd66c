// One request end to end on one thread: decode -> check options -> plan -> execute ->
// render (envelope.md §6 stages 3-10). Used by reader workers, the writer thread and
// the embedded handle. Never throws: failures become `{error, msg}` bodies.
import type { Request } from '../protocol/ast.js';
import { decodeParameterValues, decodeRequest, plainToValue } from '../protocol/decode.js';
import { bodyText, NegativeZeroInteger, parseJson, type JsonValue } from '../protocol/json.js';
import { lastParametersSpan, parametersSpan } from '../protocol/request-text.js';
import {
  bindIds, cutHoles, findIdSlots, hasAt, holeCount, holeEnd, holeInteger, holeStart, idHoles, matchShape, probeText, shapeKey, shapePieces, type IdSlots,
} from '../protocol/literal-ids.js';
import { I64_MAX, I64_MIN, type Value } from '../protocol/value.js';
import { asSvcError, errorBody, optionError, SvcError } from '../protocol/errors.js';
import { eachOp, planRequest, type Plan, type PlanningCatalog } from '../plan/plan.js';
import { currentView, type CatalogView } from '../index/view.js';
import { describeIndex } from '../index/catalog.js';
import { limits } from '../limits.js';
import type { RedoBatch, Store } from '../store/store.js';
import { runBatch } from './batch.js';
// Every writer-side store gets an index runtime (it registers itself with the store).
import '../index/runtime.js';
import type { ExecCtx } from './context.js';
import { deadlineExceeded, InlineWorkExceeded, QueryGuard, swapGuard } from '../query-guard.js';
import { monotonicMs } from '../clock.js';

/** Execution headers after stage-1 parsing (envelope.md §11); null = header absent. */
export interface RequestFlags {
  warm: boolean | null;
  requireWriter: boolean | null;
  awaitDurable: boolean | null;
}

export const noFlags: RequestFlags = { warm: null, requireWriter: null, awaitDurable: null };

/**
 * writer: executes everything. reader: a pool thread of a writer server (writes are
 * forwarded). replica: a read-only server or handle (writes answer 503). reads: the
 * embedded handle's synchronous call on a writer's store, which answers reads only (a
 * write's answer waits for durability: invalid_request, nothing executed).
 */
export type ExecRole = 'writer' | 'reader' | 'replica' | 'reads';

/**
 * A finished response, or "send it elsewhere": to the writer (reader role: a write), or to
 * the reader pool (an inline run whose plan has no static cost bound, or that outgrew its
 * work cap; reads have no side effects, so running one again is exact).
 */
export type ExecOutcome = { status: number; body: string } | { forward: 'writer' } | {
  forward: 'pool';
  /** The plan has no static cost bound (whatever its parameter values): not an outgrown work cap. */
  unbounded?: true;
};

export interface ExecOptions {
  /** Cooperative deadline per request (`--query-timeout-ms`). */
  queryTimeoutMs: number;
  /**
   * monotonicMs() when the request arrived (src/clock.ts); the deadline is this + queryTimeoutMs, so a request
   * that waited in a queue has less time left. 0 or absent: from the start of execution.
   */
  receivedAtMs?: number;
  /** Memory budget per request in bytes (`--query-memory-mb`), default limits.queryMemoryBytesMax. */
  queryMemoryBytes?: number;
  /**
   * Set on the HTTP thread: run only plans with a static cost bound, and give up after this
   * many work units (the outcome is then `{forward: 'pool'}`).
   */
  inlineWorkMax?: number;
  /** Disk storage: log the batch before it is published; a throw rolls the batch back. */
  logBatch?: (batch: RedoBatch) => void;
}

/**
 * Execution options with every field present, always in this order. executeRequest reads
 * them on every request; objects of one shape keep those reads fast, while spread copies
 * (`{ ...options, x }`) halved point-lookup throughput when measured (in-process bench).
 */
export function execOptions(o: ExecOptions): ExecOptions {
  return {
    queryTimeoutMs: o.queryTimeoutMs,
    receivedAtMs: o.receivedAtMs ?? 0,
    queryMemoryBytes: o.queryMemoryBytes ?? limits.queryMemoryBytesMax,
    inlineWorkMax: o.inlineWorkMax,
    logBatch: o.logBatch,
  };
}

export const defaultExecOptions: ExecOptions = execOptions({ queryTimeoutMs: 30_000 });

/** The per-query bounds a server or handle is configured with (`--query-timeout-ms`, `--query-memory-mb`). */
export type QueryBounds = Pick<ExecOptions, 'queryTimeoutMs' | 'queryMemoryBytes'>;

/**
 * Decoded and planned queries, per thread. Clients send one query text with the values
 * that change in `parameters` (src/client, the corpus), so a body is keyed on its text
 * around the `parameters` member plus the JSON kind of each parameter, not on their
 * values: a hit skips parsing, decoding and planning the query and decodes only the
 * parameters, with the request's `parameter_types`. Planning reads no parameter (access
 * paths keep the parameter expression and evaluate it when the scan starts,
 * exec/index-scan.ts), so one plan is exact for every value; the kinds in the key keep it
 * exact should planning ever depend on them.
 *
 * A body without `parameters` is keyed on its shape (protocol/literal-ids.ts): its text
 * with the integers cut out. When every integer of a shape is an element ID of an `ids`
 * list, one entry serves every body of that shape: a hit writes the body's IDs into the
 * entry's AST and runs it. Other shapes are remembered as such (a null entry). When some of
 * a shape's integers are element IDs and the rest are not (`"ids":[12345]` next to a
 * `"max_depth":3`), its bodies are keyed with only the IDs cut out ('K' + the text with
 * those holes, partialShapes): one entry serves every body with the same other integers.
 * The bodies of other shapes are keyed on their exact text ('T' + the text).
 *
 * Plans are never mutated by execution, so sharing one across requests is exact (a shape's
 * ID slots are written before each run, and execution is synchronous on this thread); a
 * plan made under another index catalog is made again.
 */
interface CachedPlan {
  readonly plan: Plan;
  /** Keyed without the parameter values: decode them per request (else plan.request's are the body's). */
  readonly parameterized: boolean;
  /** The JSON of the request's `parameter_types` member (undefined: untyped), for decodeParameterValues. */
  readonly parameterTypes: JsonValue | undefined;
  /**
   * The catalog it was planned under. Compared by identity, not by version: versions count
   * per store, and one thread may serve several stores (embedded handles in one process),
   * whose catalogs share version numbers. One object per store and version (planningCatalog).
   */
  readonly catalog: PlanningCatalog;
  /** A shape entry: where the body's element IDs go in plan.request. null: keyed on the values too. */
  readonly idSlots: IdSlots | null;
}
/** null: a shape whose integers are not all element IDs (its bodies are keyed on their text). */
const planCache = new Map<string, CachedPlan | null>();
/**
 * Shapes (with a null entry in planCache) whose bodies are keyed with only these holes cut
 * out (1: an element ID; literal-ids.ts idHoles, cutHoles). Without it a client sending a
 * shortest path or a repeat between literal IDs with a literal `max_depth` filled the plan
 * cache with one entry per pair (1,000 entries of ~1.7 KB on the bench's 3-hop and path
 * scenarios, on the HTTP thread and the reader alike).
 */
const partialShapes = new Map<string, Uint8Array>();

/** A body's text, or null when it is too large to cache (or not UTF-8: the parser reports that). */
function cacheText(body: Uint8Array | string): string | null {
  if (body.length > limits.planCacheBodyBytesMax) return null;
  if (typeof body === 'string') return body;
  try {
    return bodyText(body);
  } catch {
    return null;
  }
}

/** The `parameters` JSON parsed by the last parseParametersAt() that returned true. */
let keyParameters: JsonValue | undefined;

/** Parses the `parameters` value at `span` into keyParameters; false when it does not parse. */
function parseParametersAt(text: string, span: [number, number]): boolean {
  try {
    // One level below the top: the depth limit counts as in the whole body.
    keyParameters = parseJson(text.slice(span[0], span[1]), limits.jsonDepthMax - 1, limits.bodyStructureBytesMax);
  } catch {
    return false;
  }
  return true;
}

/**
 * The cache key of a body's text with its `parameters` value at `span`: 'P' + where the
 * value starts, the parameter kinds (length-prefixed) and the text around the value (so
 * two keys are equal only for the same text around a value in the same place). null when
 * the value does not parse.
 */
function keyAt(text: string, span: [number, number]): string | null {
  if (!parseParametersAt(text, span)) return null;
  const kinds = parameterKinds(keyParameters!);
  return `P${span[0]}:${kinds.length}:${kinds}${text.slice(0, span[0])}${text.slice(span[1])}`;
}

/**
 * The parameterized entry found last by key, with what its key is made of: a body with the
 * same text around its `parameters` value, of the same kinds, has that key, which is then
 * checked in place instead of built and hashed.
 */
interface RecentParameterized {
  entry: CachedPlan;
  /** The parameters' JSON: the same names in the same order, each of the same kind, is the same kinds string. */
  readonly parameters: JsonValue;
  readonly before: string;
  readonly after: string;
  /** When every parameter is an integer: how to decode a body that differs only in them. */
  readonly integers: IntegerParameters | null;
}
let recentParameterized: RecentParameterized | null = null;

/**
 * Parameters that are all integer tokens (`"parameters":{"id":12345}`, the client libraries'
 * point lookup), untyped or declared `i64`, in a text with no other integer. A body that is
 * that text with other integers in their places (literal-ids.ts matchShape over the whole
 * text) has the same key, and its parameters decode from the integers alone: no span to
 * find, no JSON to parse. The names (non-empty), their match with `parameter_types` and the
 * kinds are what they were; only an `i64`'s range is left to check, and a body out of range
 * goes the usual way, which reports the error.
 */
interface IntegerParameters {
  /** The whole text cut at its integers. */
  readonly pieces: readonly string[];
  /** The parameters in the order decodeParameterValues sets them (declared order when typed). */
  readonly names: readonly string[];
  /** For each of `names`, its hole (the order of the `parameters` member). */
  readonly holeOf: Int32Array;
  readonly typed: boolean;
}

function integerParametersOf(text: string, span: [number, number], params: JsonValue, types: JsonValue | undefined): IntegerParameters | null {
  if (!(params instanceof Map) || params.size === 0) return null;
  const given: string[] = [];
  for (const [name, v] of params) {
    if (name === '' || !(typeof v === 'bigint' || v instanceof NegativeZeroInteger)) return null;
    given.push(name);
  }
  let names = given;
  const typed = types !== undefined && types !== null;
  if (typed) {
    if (!(types instanceof Map) || types.size !== params.size) return null;
    names = [];
    for (const [name, t] of types) {
      if (t !== 'i64' || !params.has(name)) return null;
      names.push(name);
    }
  }
  if (shapeKey(text) === null || holeCount !== given.length || holeStart(0) < span[0] || holeEnd(holeCount - 1) > span[1]) return null;
  return { pieces: shapePieces(text), names, holeOf: Int32Array.from(names, (name) => given.indexOf(name)), typed };
}

/** The parameters of a text matched against `integers` (matchShape), or null when an `i64` is out of range. */
function integerParameters(text: string, integers: IntegerParameters): Map<string, Value> | null {
  const values = new Map<string, Value>();
  for (let i = 0; i < integers.names.length; i++) {
    const n = holeInteger(text, integers.holeOf[i]!);
    if (integers.typed && (n < I64_MIN || n > I64_MAX)) return null;
    values.set(integers.names[i]!, integers.typed ? n : plainToValue(n));
  }
  return values;
}

function isRecentParameterized(text: string, span: [number, number], recent: RecentParameterized): boolean {
  return span[0] === recent.before.length && text.length - span[1] === recent.after.length
    && hasAt(text, 0, recent.before) && hasAt(text, span[1], recent.after) && sameKinds(keyParameters!, recent.parameters);
}

/** Whether parameterKinds() of the two is the same, compared without building either string. */
function sameKinds(a: JsonValue, b: JsonValue): boolean {
  if (!(a instanceof Map) || !(b instanceof Map)) {
    // null is '' and any other non-object '!'. ({} is '' too: that match is only missed here.)
    return !(a instanceof Map) && !(b instanceof Map) && (a === null) === (b === null);
  }
  if (a.size !== b.size) return false;
  const names = b.keys();
  for (const [name, value] of a) {
    const other = names.next().value!;
    if (name !== other || kindOf(value) !== kindOf(b.get(other)!)) return false;
  }
  return true;
}

/**
 * The cache key of a body's text, exact (what a plan is stored under): keyAt() the top-level
 * `parameters` value, or 'T' + the text when there is none. null when the parameters do not
 * parse (decoding reports it).
 */
function exactKey(text: string): string | null {
  const span = parametersSpan(text);
  return span === null ? 'T' + text : keyAt(text, span);
}

/** What lookUp() found: the entry (undefined: none), the key to store a new plan under, and a new shape. */
interface Lookup {
  cached: CachedPlan | undefined;
  key: string | null;
  /** A shape not seen yet: its key, and its text with a distinct ID in each hole (literal-ids.ts probeText). */
  newShape: string | null;
  probe: string;
  /** The parameters of a parameterized entry's body when already decoded (IntegerParameters), else null. */
  parameters: Map<string, Value> | null;
}
const found: Lookup = { cached: undefined, key: null, newShape: null, probe: '', parameters: null };

/**
 * The shape entry used last: a body of the same shape is matched against its pieces in
 * place (literal-ids.ts matchShape), without building and hashing its key.
 */
let recentShape: CachedPlan | null = null;

/**
 * The cached plan of a body's text, or where to store the plan made for it. Clients put
 * `parameters` last, so the cheap candidate span comes first; the exact scan only on a
 * miss. A text without `"parameters"` has no such member: its shape is looked up.
 */
function lookUp(text: string): Lookup {
  found.cached = undefined;
  found.newShape = null;
  found.parameters = null;
  if (recentShape !== null && matchShape(text, recentShape.idSlots!.pieces) && bindIds(text, recentShape.idSlots!)) {
    found.key = null; // the entry is stored already
    found.cached = recentShape;
    return found;
  }
  const integers = recentParameterized?.integers;
  if (integers != null && matchShape(text, integers.pieces)) {
    const parameters = integerParameters(text, integers);
    if (parameters !== null) {
      found.key = null; // the entry is stored already
      found.cached = recentParameterized!.entry;
      found.parameters = parameters;
      return found;
    }
  }
  const candidate = lastParametersSpan(text);
  if (candidate === null) {
    const shape = shapeKey(text);
    if (shape === null) return hitOrKey(found, 'T' + text);
    const entry = planCache.get(shape);
    if (entry !== null) return shapeHitOrKey(found, shape, entry, text);
    const cut = partialShapes.get(shape);
    if (cut === undefined) return hitOrKey(found, 'T' + text);
    const partial = cutHoles(text, cut);
    if (partial === null) return hitOrKey(found, 'T' + text);
    return shapeHitOrKey(found, partial, planCache.get(partial), text);
  }
  if (recentParameterized !== null && parseParametersAt(text, candidate) && isRecentParameterized(text, candidate, recentParameterized)) {
    found.key = null; // the entry is stored already
    found.cached = recentParameterized.entry;
    return found;
  }
  const first = keyAt(text, candidate);
  if (first !== null) {
    const cached = planCache.get(first);
    if (cached) {
      found.key = first;
      found.cached = cached;
      if (cached.parameterized) {
        recentParameterized = {
          entry: cached, parameters: keyParameters!, before: text.slice(0, candidate[0]), after: text.slice(candidate[1]),
          integers: integerParametersOf(text, candidate, keyParameters!, cached.parameterTypes),
        };
      }
      return found;
    }
  }
  const key = exactKey(text);
  found.key = key;
  if (key !== null && key !== first) found.cached = planCache.get(key) ?? undefined;
  return found;
}

/**
 * A body of a shape whose holes (literal-ids.ts) are set: its entry's plan with the body's
 * IDs written in, or the shape to remember (probed) when it has no entry yet.
 */
function shapeHitOrKey(into: Lookup, shape: string, entry: CachedPlan | null | undefined, text: string): Lookup {
  if (entry === undefined) {
    into.newShape = shape;
    into.probe = holeCount === 0 ? text : probeText(text);
    into.key = null;
    return into;
  }
  if (entry === null) return hitOrKey(into, 'T' + text);
  // A body whose IDs the shape cannot take is decoded from scratch and not cached.
  into.key = null;
  if (bindIds(text, entry.idSlots!)) {
    into.key = shape;
    into.cached = entry;
    recentShape = entry;
  }
  return into;
}

function hitOrKey(into: Lookup, key: string): Lookup {
  into.key = key;
  into.cached = planCache.get(key) ?? undefined;
  return into;
}

/**
 * A new shape's entry, made when its first body planned: the shape decoded and planned
 * from its probe text, whose distinct IDs show where each hole goes (literal-ids.ts). A
 * shape whose probe does not decode or plan, or has a hole outside an `ids` list, is
 * remembered as null; the body's own plan is then kept under its exact text.
 */
function rememberShape(shape: string, probe: string, text: string, own: CachedPlan): void {
  const pieces = shapePieces(text);
  if (holeCount === 0) {
    remember(shape, recentShape = { ...own, idSlots: { list: [], index: new Int32Array(0), multi: [], pieces } });
    return;
  }
  const holes = holeCount;
  let entry: CachedPlan | null = null;
  try {
    const parts: { parameterTypes?: JsonValue } = {};
    const request = decodeRequest(probe, parts);
    const slots = findIdSlots(request, holes, pieces);
    if (slots !== null) {
      entry = { plan: planRequest(request, own.catalog), parameterized: false, parameterTypes: parts.parameterTypes, catalog: own.catalog, idSlots: slots };
    }
  } catch {
    entry = null;
  }
  remember(shape, entry);
  if (entry !== null) {
    recentShape = entry;
    return;
  }
  // Some holes are element IDs and some are not: the shape's bodies are keyed with only the
  // IDs cut out, and this body's key is remembered (probed) as a shape of its own.
  if (shape.charCodeAt(0) === 0x53 /* S */) {
    const cut = idHoles(text, own.plan.request);
    const cutCount = cut.reduce((n, c) => n + c, 0);
    if (cutCount > 0 && cutCount < holes) {
      if (partialShapes.size >= limits.planCacheEntriesMax) partialShapes.delete(partialShapes.keys().next().value!);
      partialShapes.set(shape, cut);
      const partial = cutHoles(text, cut);
      if (partial !== null) {
        rememberShape(partial, probeText(text), text, own);
        return;
      }
    }
  }
  remember('T' + text, own);
}

/** The JSON kind of each parameter, with its name (length-prefixed); '!' for a `parameters` that is no object. */
function parameterKinds(params: JsonValue): string {
  if (params === null) return '';
  if (!(params instanceof Map)) return '!';
  let kinds = '';
  for (const [name, v] of params) kinds += `${name.length}:${name}${kindOf(v)}`;
  return kinds;
}

function kindOf(v: JsonValue): string {
  return v === null ? 'n' : typeof v === 'boolean' ? 'b' : typeof v === 'bigint' || v instanceof NegativeZeroInteger ? 'i'
    : typeof v === 'number' ? 'f' : typeof v === 'string' ? 's' : Array.isArray(v) ? 'a' : 'o';
}

/** Entries in this thread's plan cache (tests). */
export function planCacheEntries(): number {
  return planCache.size;
}

function remember(key: string, entry: CachedPlan | null): void {
  if (planCache.size >= limits.planCacheEntriesMax) planCache.delete(planCache.keys().next().value!);
  planCache.set(key, entry);
}

/** Planning's part of a catalog view: its version and the definitions of indexes that are active. */
const planningCatalogs = new WeakMap<CatalogView, PlanningCatalog>();
export function planningCatalog(view: CatalogView): PlanningCatalog {
  let catalog = planningCatalogs.get(view);
  if (catalog === undefined) {
    const active = view.indexes.filter((i) => i.record.state === 'active').map((i) => i.record.definition);
    planningCatalogs.set(view, catalog = { version: view.version, active });
  }
  return catalog;
}

/**
 * Just before the open batch commits: the commit's work that can fail (Store.prepareCommit),
 * then its changes logged (disk, object storage). A throw rolls the batch back.
 */
export function logPending(store: Store, logBatch: ((batch: RedoBatch) => void) | undefined): void {
  store.prepareCommit();
  if (logBatch === undefined) return;
  const redo = store.pendingRedo();
  if (redo !== null) logBatch(redo);
}

export function executeRequest(
  store: Store, body: Uint8Array | string, flags: RequestFlags, role: ExecRole,
  options: ExecOptions = defaultExecOptions,
): ExecOutcome {
  try {
    // Stage order (envelope.md §6): decode (with the parameters), option checks, then
    // planning. A cached plan already passed decoding and planning of its query, and its
    // parameters are decoded here, before the option checks, as a fresh body's are.
    const text = cacheText(body);
    const look = text === null ? null : lookUp(text);
    const key = look === null ? null : look.key;
    const newShape = look === null ? null : look.newShape;
    const probe = look === null ? '' : look.probe;
    let cached = look === null ? undefined : look.cached;
    const decodedParameters = look === null ? null : look.parameters;
    let request: Request;
    let parameters: Map<string, Value>;
    let parameterTypes: JsonValue | undefined;
    if (cached !== undefined) {
      request = cached.plan.request;
      parameterTypes = cached.parameterTypes;
      if (!cached.parameterized) parameters = request.parameters;
      else if (decodedParameters !== null) parameters = decodedParameters;
      else {
        try {
          parameters = decodeParameterValues(keyParameters, parameterTypes);
        } catch {
          // The whole body's decoding reports the error exactly (message and position).
          cached = undefined;
          request = decodeRequest(text!);
          parameters = request.parameters;
        }
      }
    } else {
      const parts: { parameterTypes?: JsonValue } = {};
      request = decodeRequest(text ?? body, parts);
      parameters = request.parameters;
      parameterTypes = parts.parameterTypes;
    }
    const write = request.request_type === 'write';
    if (write && flags.warm === true) throw optionError('x-svc-warm is only valid for read requests');
    if (!write && flags.awaitDurable === true) throw optionError('x-svc-await-durable is only valid for write requests');
    if (role === 'reader' && (write || flags.requireWriter === true)) return { forward: 'writer' };
    if (role === 'replica' && flags.requireWriter === true) {
      throw optionError('request requires a writer but this server is read-only', 503);
    }
    if (role === 'replica' && write) throw new SvcError('writer_mode_required', 'writer mode required: this server is read-only');
    if (role === 'reads' && write) {
      throw new SvcError('invalid_request', 'invalid request: querySync answers read requests; send a write with query(), whose answer waits until it is durable');
    }
    // Whether an inline run may take the plan is known once the plan is checked against the
    // catalog of now (below): a cached scan may have become an index lookup.
    const inline = options.inlineWorkMax !== undefined;
    const startMs = monotonicMs();
    // Begun before planning: the catalog view a plan is chosen under is read inside the read.
    const at = write ? store.beginWrite() : store.beginRead();
    let plan: Plan;
    let catalog: PlanningCatalog;
    try {
      catalog = planningCatalog(currentView(store));
      plan = cached !== undefined && cached.catalog === catalog ? cached.plan : planRequest(request, catalog);
      if (plan !== cached?.plan) {
        // A cached entry planned again keeps what it is (it may have been found without its key).
        const entry: CachedPlan = cached !== undefined ? { ...cached, plan, catalog }
          : { plan, parameterized: key !== null && key.charCodeAt(0) === 0x50 /* P */, parameterTypes, catalog, idSlots: null };
        if (newShape !== null) rememberShape(newShape, probe, text!, entry);
        else if (key !== null) remember(key, entry);
        // Planned again under a new catalog: the entry found last is the new one from now on.
        if (cached !== undefined && recentShape === cached) recentShape = entry;
        if (cached !== undefined && recentParameterized?.entry === cached) recentParameterized.entry = entry;
      }
    } catch (err) {
      if (write) store.rollback(); else store.endRead();
      throw err;
    }
    if (inline && !plan.inlineSafe) {
      if (write) store.rollback(); else store.endRead();
      return { forward: 'pool', unbounded: true };
    }
    // A request that starts past its deadline (it waited behind others, e.g. in the writer's
    // queue) is not run: the answer the deadline watches give (server/write-claims.ts), after
    // every decoding and planning error (envelope.md §6: the deadline belongs to execution).
    const deadlineMs = (options.receivedAtMs || startMs) + options.queryTimeoutMs;
    if (startMs > deadlineMs) {
      if (write) store.rollback(); else store.endRead();
      throw deadlineExceeded();
    }
    const ctx: ExecCtx = {
      store, at, writing: write, barrier: null, accessPaths: plan.accessPaths.size === 0 ? null : plan.accessPaths,
      paramFrames: [parameters], vars: new Map(),
      trackPath: plan.trackPath, nowMs: 0,
    };
    // A write that commits at barriers announces a read, as a read does: rows bound before a
    // barrier may name elements its commit dropped, whose records must outlive the request
    // (store/version-reuse.ts reuses what a commit retires once no announced read began before).
    const announced = write && plan.hasBarrier;
    if (announced) {
      store.beginRead();
      (ctx as { barrier: (() => void) | null }).barrier = () => {
        if (store.batchIsEmpty()) return;
        logPending(store, options.logBatch);
        store.commit();
        ctx.at = store.beginWrite();
      };
    }
    const queryGuard = new QueryGuard(options.queryMemoryBytes ?? limits.queryMemoryBytesMax, deadlineMs, options.inlineWorkMax);
    let response: string;
    // A write that changed nothing is neither logged nor committed: it takes no epoch, and its
    // answer still waits for what it read to be durable (durable.ts Committer.execute).
    let empty = false;
    const outerGuard = swapGuard(queryGuard);
    try {
      response = runBatch(ctx, plan);
      empty = write && store.batchIsEmpty();
      if (write && !empty) logPending(store, options.logBatch);
    } catch (err) {
      if (write) store.rollback();
      throw err;
    } finally {
      swapGuard(outerGuard);
      if (!write || announced) store.endRead();
    }
    if (empty) store.endEmptyBatch();
    else if (write) store.commit();
    return { status: 200, body: response };
  } catch (err) {
    if (err instanceof InlineWorkExceeded) return { forward: 'pool' };
    const e = asSvcError(err);
    return { status: e.status, body: errorBody(e) };
  }
}

/** One source operation of a request and the access path its plan uses. */
export interface ExplainedSource {
  operation: 'nodes_where' | 'edges_where';
  /** 'scan', or the index lookup: 'index_eq', 'index_in', 'index_range'. */
  access: 'scan' | 'index_eq' | 'index_in' | 'index_range';
  /** The index used, e.g. "Node equality index `Person.email`". */
  index?: string;
}

/**
 * The access paths a request's plan chooses under the catalog as it is now (`svc query
 * --explain`, the embedded explain()). Decodes and plans; executes nothing. An index that
 * stops serving before a query runs makes that query scan instead (index-scan.ts).
 */
export function explainRequest(store: Store, body: Uint8Array | string): ExplainedSource[] {
  const request = decodeRequest(body);
  store.beginRead();
  let plan: Plan;
  try {
    plan = planRequest(request, planningCatalog(currentView(store)));
  } finally {
    store.endRead();
  }
  const out: ExplainedSource[] = [];
  eachOp(request.batch.entries, null, (op) => {
    if (op.op !== 'nodes_where' && op.op !== 'edges_where') return;
    const path = plan.accessPaths.get(op);
    out.push(path === undefined ? { operation: op.op, access: 'scan' } : { operation: op.op, access: `index_${path.kind}`, index: describeIndex(path.index) });
  });
  return out;
}
