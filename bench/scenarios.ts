// The scenario registry: the one place to add a benchmark.
//
// - An HTTP scenario lists the request bodies the load generator rotates through (and an
//   optional check of one answer before timing). It runs against the real server with
//   the graph loaded; `mutates` scenarios run after all read scenarios.
// - An in-process scenario lists cases: engine requests (JSON text sent through the
//   embedded handle) and optionally the same computations on the peer (graphology). The
//   engine is timed first and its answers recorded; the peer phase checks every case
//   (engine answer == peer answer) and times the peer.
// - A goal reads one number out of the results and compares it with a target.
//
// Adding e.g. "3-hop repeat with dedup" or "shortest_path vs graphology-shortest-path" is
// one more entry in `httpScenarios` / `inProcessScenarios` (and a body builder in
// queries.ts); a scenario that needs its own database (disk-mode writes) gets it in
// `prepare`.
import type { Database } from '../src/index.js';
import type { FloodResult } from './flood.js';
import type { Graph } from './graph.js';
import type { Peer } from './load.js';
import type { LoadResult, Workload } from './loadgen.js';
import * as q from './queries.js';
import { bidirectional } from 'graphology-shortest-path/unweighted.js';

export interface ScenarioContext {
  graph: Graph;
  /** Rotating start nodes for the read scenarios (see graph.ts pickStartIds). */
  startIds: Uint32Array;
}

export interface HttpScenario {
  key: string;
  title: string;
  /** Either a fixed list of bodies the load generator rotates through ... */
  bodies?(ctx: ScenarioContext): string[];
  /** ... or bodies built per request from templates (random IDs, as clients send them). */
  workload?(ctx: ScenarioContext): Workload;
  /** Validate the answer to `bodies[0]` (or to one body of each template) before timing; return a problem or null. */
  check?(answer: { status: number; body: string }): string | null;
  /** Writes: run after every read scenario. */
  mutates?: boolean;
}

export interface EngineContext extends ScenarioContext {
  db: Database;
}

export interface PeerContext extends ScenarioContext {
  peer: Peer;
}

export interface InProcessScenario {
  key: string;
  title: string;
  peerName?: string;
  /** Optional setup (e.g. a separate database for disk-mode writes); may replace ctx.db. */
  prepare?(ctx: EngineContext): Promise<EngineContext>;
  /** Engine requests, JSON text (the embedded handle's fastest input), one per case. */
  engine(ctx: EngineContext): string[];
  /**
   * The same cases computed on the peer, in the same order. Run in a later phase (the
   * engine is timed before the peer is loaded, so neither pays for the other's heap);
   * each return value is compared with the engine's `r`.
   */
  peer?(ctx: PeerContext): Array<() => unknown>;
  /** Engine `r` vs peer result; default: JSON equality. */
  same?(engine: unknown, peer: unknown): boolean;
  /** false: run the traversals on their JS twins instead of the WebAssembly kernels. */
  kernels?: boolean;
  /**
   * How the engine is called: 'sync' (default) with queryRawSync, as the peer's calls are
   * synchronous; 'async' with `await queryRaw` (a promise and a microtask per call).
   */
  call?: 'sync' | 'async';
}

const ids = (ctx: ScenarioContext): number[] => Array.from(ctx.startIds);
/** Source/target pairs for shortest_path: start ids paired with other start ids. */
const pairs = (ctx: ScenarioContext): [number, number][] =>
  ids(ctx).map((id, i, all) => [id, all[(i * 7 + 3) % all.length]!]);
const okStatus = (a: { status: number; body: string }): string | null =>
  a.status === 200 ? null : `status ${a.status}: ${a.body.slice(0, 300)}`;
const okScalar = (a: { status: number; body: string }): string | null =>
  okStatus(a) ?? (/^\{"r":\d+\}$/.test(a.body) ? null : `unexpected body ${a.body.slice(0, 300)}`);

const okRows = (a: { status: number; body: string }): string | null =>
  okStatus(a) ?? (/^\{"r":\[(\{"\$id":\d+,[^\]]*)?\]\}$/.test(a.body) ? null : `unexpected body ${a.body.slice(0, 300)}`);
/** Random node IDs over the whole graph (IDs are 0..nodes-1). */
const nodes = (ctx: ScenarioContext): number => ctx.graph.spec.nodes;
const one = (template: q.BodyTemplate): Workload => ({ mix: [{ share: 1, template }] });

/**
 * What real clients send (issue 13): a random node per request over the whole graph, so
 * the bodies are distinct (far more than the plan cache's 1,024 entries) or, with
 * parameters, one query text with a different `parameters` object each time.
 */
export const clientScenarios: HttpScenario[] = [
  { key: 'point_rand', title: 'point lookup, random ID in the query text', workload: (ctx) => one(q.pointLookupLiteral(nodes(ctx))), check: okRows },
  { key: 'point_param', title: 'point lookup, random ID as a parameter', workload: (ctx) => one(q.pointLookupParam(nodes(ctx))), check: okRows },
  { key: '1hop_rows', title: '1-hop value_map (<= 100 rows), random start as a parameter', workload: (ctx) => one(q.oneHopRowsParam(nodes(ctx))), check: okRows },
  { key: '2hop_rows', title: '2-hop dedup value_map (<= 100 rows), random start as a parameter', workload: (ctx) => one(q.twoHopRowsParam(nodes(ctx))), check: okRows },
  {
    key: 'mix_90_10',
    title: '90% point lookups / 10% writes (add_n, set_property), parameters',
    mutates: true,
    workload: (ctx) => ({ mix: [
      { share: 0.9, template: q.pointLookupParam(nodes(ctx)) },
      { share: 0.05, template: q.addUserParam() },
      { share: 0.05, template: q.setScoreParam(nodes(ctx)) },
    ] }),
    check: okStatus,
  },
];

/** Read scenarios whose p99 should stay within 2x their p50 (issue 13). */
export const tailKeys = ['point_rand', 'point_param', '1hop_rows', '2hop_rows'];

export const httpScenarios: HttpScenario[] = [
  {
    key: 'point',
    title: 'point lookup by id + value_map',
    bodies: (ctx) => ids(ctx).map(q.pointLookup),
    check: (a) => okStatus(a) ?? (a.body.includes('"$label":"User"') ? null : `unexpected body ${a.body.slice(0, 300)}`),
  },
  { key: '1hop', title: '1-hop out count', bodies: (ctx) => ids(ctx).map(q.oneHopCount), check: okScalar },
  { key: '2hop', title: '2-hop out.out.dedup.count', bodies: (ctx) => ids(ctx).map(q.twoHopDedupCount), check: okScalar },
  { key: '3hop', title: '3-hop repeat + dedup + count', bodies: (ctx) => ids(ctx).map(q.threeHopRepeatDedupCount), check: okScalar },
  {
    key: 'path',
    title: 'shortest_path between start ids',
    bodies: (ctx) => pairs(ctx).map(([a, b]) => q.shortestPath(a, b)),
    check: (a) => okStatus(a) ?? (/^\{"r":\[[\d,]*\]\}$/.test(a.body) ? null : `unexpected body ${a.body.slice(0, 300)}`),
  },
  {
    key: 'add_n',
    title: 'single add_n write',
    mutates: true,
    bodies: () => Array.from({ length: 256 }, (_, i) => q.addUser(i)),
    check: (a) => okStatus(a) ?? (/^\{"n":\[\{"\$id":\d+\}\]\}$/.test(a.body) ? null : `unexpected body ${a.body.slice(0, 300)}`),
  },
  ...clientScenarios,
];

/** Distinct out-neighbour keys of `key` (graphology iterates each neighbour once, even in a multigraph). */
function outCount(peer: Peer, key: string): number {
  let n = 0;
  peer.forEachOutNeighbor(key, () => { n++; });
  return n;
}

function twoHopCount(peer: Peer, key: string): number {
  const seen = new Set<string>();
  peer.forEachOutNeighbor(key, (mid) => {
    peer.forEachOutNeighbor(mid, (far) => { seen.add(far); });
  });
  return seen.size;
}

/** Distinct ends of exactly-3-step out-walks: level sets (multiplicity does not change them). */
function threeHopCount(peer: Peer, key: string): number {
  let level = new Set<string>([key]);
  for (let hop = 0; hop < 3; hop++) {
    const next = new Set<string>();
    for (const node of level) peer.forEachOutNeighbor(node, (n) => { next.add(n); });
    level = next;
  }
  return level.size;
}

/** Node count of a shortest path (0 when none); ties may pick different paths of equal length. */
function pathLength(path: unknown): number {
  return Array.isArray(path) ? path.length : 0;
}

/** Point lookups against graphology's getNodeAttributes with its answer rendered by JSON.stringify. */
function pointJson(key: string, title: string, call: 'sync' | 'async'): InProcessScenario {
  return {
    key, title, call,
    peerName: 'graphology',
    engine: (ctx) => ids(ctx).map(q.pointLookup),
    peer: (ctx) => ids(ctx).map((id) => () => JSON.stringify({ r: [{ $id: id, ...ctx.peer.getNodeAttributes(String(id)) }] })),
    same: (engine, peer) => {
      const e = (engine as Record<string, unknown>[])[0]!, p = (JSON.parse(peer as string) as { r: Record<string, unknown>[] }).r[0]!;
      return e['$id'] === p['$id'] && e['$label'] === p['label'] && e['name'] === p['name'] && e['age'] === p['age'] && e['score'] === p['score'];
    },
  };
}

export const inProcessScenarios: InProcessScenario[] = [
  {
    key: 'point',
    title: 'point lookup by id + value_map',
    peerName: 'graphology',
    engine: (ctx) => ids(ctx).map(q.pointLookup),
    peer: (ctx) => ids(ctx).map((id) => () => ({ $id: id, ...ctx.peer.getNodeAttributes(String(id)) })),
    same: (engine, peer) => {
      const e = (engine as Record<string, unknown>[])[0]!, p = peer as Record<string, unknown>;
      return e['$id'] === p['$id'] && e['$label'] === p['label'] && e['name'] === p['name'] && e['age'] === p['age'] && e['score'] === p['score'];
    },
  },
  // The same lookups against graphology's path with its answer rendered as JSON text, as
  // svcdb's is (issue 13 item 6: "getNodeAttributes path including rendering"); and again
  // with the engine called through `await db.queryRaw` (what the promise costs on top).
  pointJson('point_json', 'point lookup by id + value_map, the peer rendering JSON too', 'sync'),
  pointJson('point_json_async', 'point lookup by id + value_map, the peer rendering JSON too, engine through `await queryRaw`', 'async'),
  {
    key: '1hop',
    title: '1-hop out count',
    peerName: 'graphology',
    engine: (ctx) => ids(ctx).map(q.oneHopCount),
    peer: (ctx) => ids(ctx).map((id) => () => outCount(ctx.peer, String(id))),
  },
  {
    key: '2hop',
    title: '2-hop out.out.dedup.count',
    peerName: 'graphology',
    engine: (ctx) => ids(ctx).map(q.twoHopDedupCount),
    peer: (ctx) => ids(ctx).map((id) => () => twoHopCount(ctx.peer, String(id))),
  },
  ...(['kernel', 'JS'] as const).flatMap((impl): InProcessScenario[] => [
    {
      key: impl === 'kernel' ? '3hop' : '3hop_js',
      title: `3-hop repeat + dedup + count${impl === 'JS' ? ' (JS step, no kernel)' : ''}`,
      peerName: 'graphology',
      kernels: impl === 'kernel',
      engine: (ctx) => ids(ctx).map(q.threeHopRepeatDedupCount),
      peer: (ctx) => ids(ctx).map((id) => () => threeHopCount(ctx.peer, String(id))),
    },
    {
      key: impl === 'kernel' ? 'path' : 'path_js',
      title: `shortest_path between start ids${impl === 'JS' ? ' (JS layers, no kernel)' : ''}`,
      peerName: 'graphology-shortest-path',
      kernels: impl === 'kernel',
      engine: (ctx) => pairs(ctx).map(([a, b]) => q.shortestPath(a, b)),
      peer: (ctx) => pairs(ctx).map(([a, b]) => () => bidirectional(ctx.peer, String(a), String(b))),
      same: (engine, peer) => pathLength(engine) === pathLength(peer),
    },
  ]),
];

// ------------------------------------------------------------------ results and goals

export interface HttpRow {
  key: string;
  title: string;
  result: LoadResult;
  /** req/s relative to the bare uWS server under the same settings. */
  ratioToBare: number;
  /** Share of the machine used by other processes during the measured run (0..1). */
  foreign: number | null;
}

export interface InProcessRow {
  key: string;
  title: string;
  engineOps: number;
  peerName?: string;
  peerOps?: number;
  /** engine / peer. */
  ratio?: number;
  verified: string;
  /** Share of the machine used by other processes during the engine / peer runs. */
  foreign: number | null;
  peerForeign?: number | null;
}

export interface Results {
  http?: {
    /** The reference: the mean of the bare runs before and after the svcdb scenarios (bareRuns). */
    bare: LoadResult; bareRuns?: LoadResult[]; bareForeign: number | null; rows: HttpRow[];
    /** Bare uWS driven by the per-request body builder (the client's own cost; should be ~1x `bare`). */
    bareBuilt?: LoadResult; rssEmptyMiB?: number; rssLoadedMiB?: number; rssSettledMiB?: number; rssAfterMiB?: number; hwmMiB?: number;
    /** Point lookups and /healthz idle vs under a flood of pathological reads (flood.ts). */
    flood?: FloodResult | { error: string };
  };
  inProcess?: InProcessRow[];
}

export interface Goal {
  label: string;
  target: number;
  unit: 'x' | 'MiB';
  better: 'higher' | 'lower';
  measure(r: Results): number | undefined;
}

const httpRatio = (key: string) => (r: Results): number | undefined => r.http?.rows.find((x) => x.key === key)?.ratioToBare;
/** The worst p99 / p50 among the client read scenarios. */
const worstTail = (r: Results): number | undefined => {
  const tails = (r.http?.rows ?? []).filter((x) => tailKeys.includes(x.key)).map((x) => x.result.p99us / x.result.p50us);
  return tails.length > 0 ? Math.max(...tails) : undefined;
};

export const goals: Goal[] = [
  { label: 'point lookup over HTTP vs bare uWS (c=64)', target: 0.6, unit: 'x', better: 'higher', measure: httpRatio('point') },
  { label: '1-hop count over HTTP vs bare uWS (c=64)', target: 0.5, unit: 'x', better: 'higher', measure: httpRatio('1hop') },
  { label: 'point lookup, random ID in the text, vs bare uWS (c=64)', target: 0.6, unit: 'x', better: 'higher', measure: httpRatio('point_rand') },
  { label: 'point lookup, random ID as a parameter, vs bare uWS (c=64)', target: 0.6, unit: 'x', better: 'higher', measure: httpRatio('point_param') },
  { label: '1-hop value_map rows vs bare uWS (c=64)', target: 0.3, unit: 'x', better: 'higher', measure: httpRatio('1hop_rows') },
  { label: 'worst p99 / p50 of the client read scenarios', target: 2, unit: 'x', better: 'lower', measure: worstTail },
  { label: 'in-process 2-hop vs graphology', target: 20, unit: 'x', better: 'higher', measure: (r) => r.inProcess?.find((x) => x.key === '2hop')?.ratio },
  { label: 'in-process 1-hop count vs graphology', target: 2, unit: 'x', better: 'higher', measure: (r) => r.inProcess?.find((x) => x.key === '1hop')?.ratio },
  { label: 'in-process point lookup vs graphology getNodeAttributes', target: 0.5, unit: 'x', better: 'higher', measure: (r) => r.inProcess?.find((x) => x.key === 'point')?.ratio },
  { label: 'in-process point lookup vs graphology getNodeAttributes + JSON.stringify', target: 0.5, unit: 'x', better: 'higher', measure: (r) => r.inProcess?.find((x) => x.key === 'point_json')?.ratio },
  { label: 'in-process shortest_path vs graphology-shortest-path', target: 10, unit: 'x', better: 'higher', measure: (r) => r.inProcess?.find((x) => x.key === 'path')?.ratio },
  // Issue 13: 200 MB, i.e. 190.7 MiB.
  { label: 'server RSS with graph loaded (right after the load)', target: 200e6 / 2 ** 20, unit: 'MiB', better: 'lower', measure: (r) => r.http?.rssLoadedMiB },
  { label: 'server RSS with graph loaded (after the read scenarios)', target: 200e6 / 2 ** 20, unit: 'MiB', better: 'lower', measure: (r) => r.http?.rssSettledMiB },
];
