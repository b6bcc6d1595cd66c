// Deterministic power-law graph for the benchmarks.
//
// Model: a Chung-Lu style "Zipf" graph. Every node gets an out-weight and an in-weight
// drawn from Zipf rank weights (rank^-s) under two independent seeded permutations, and
// each edge picks its source proportionally to the out-weights and its target
// proportionally to the in-weights (preferential attachment on a fixed weight profile).
// Self-loops are re-drawn; parallel edges are kept (the engine and graphology's
// MultiDirectedGraph both allow them). Same seed => byte-identical graph.

export interface GraphSpec {
  nodes: number;
  edges: number;
  seed: number;
  /** Zipf exponent of the out-degree profile (degree power-law gamma = 1 + 1/s). */
  outExponent: number;
  /** Zipf exponent of the in-degree profile. */
  inExponent: number;
}

export const defaultGraphSpec: GraphSpec = {
  nodes: 100_000,
  edges: 1_000_000,
  seed: 0x5eed,
  outExponent: 0.6,
  inExponent: 0.85,
};

export interface NodeProps {
  name: string;
  age: number; // integer (i64)
  score: number; // never an integer (f64)
}

export interface Graph {
  spec: GraphSpec;
  /** Edge i goes src[i] -> dst[i]; edge IDs in the engine are 0..edges-1 in this order. */
  src: Uint32Array;
  dst: Uint32Array;
  outDegree: Uint32Array;
  inDegree: Uint32Array;
  /** Node i's properties (node IDs are 0..nodes-1 in creation order). */
  props(i: number): NodeProps;
}

/** sfc32: small, fast, seedable PRNG with good statistical quality. */
export function rng(seed: number): () => number {
  let a = 0x9e3779b9, b = 0x243f6a88, c = 0xb7e15162, d = seed >>> 0;
  const next = (): number => {
    a >>>= 0; b >>>= 0; c >>>= 0; d >>>= 0;
    const t = (a + b | 0) + d | 0;
    d = d + 1 | 0;
    a = b ^ (b >>> 9);
    b = c + (c << 3) | 0;
    c = (c << 21) | (c >>> 11);
    c = c + t | 0;
    return (t >>> 0) / 4294967296;
  };
  for (let i = 0; i < 16; i++) next();
  return next;
}

function shuffled(n: number, random: () => number): Uint32Array {
  const p = new Uint32Array(n);
  for (let i = 0; i < n; i++) p[i] = i;
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const t = p[i]!; p[i] = p[j]!; p[j] = t;
  }
  return p;
}

/** Cumulative Zipf weights assigned to nodes through a random permutation. */
function cumulativeWeights(n: number, s: number, random: () => number): Float64Array {
  const perm = shuffled(n, random);
  const w = new Float64Array(n);
  for (let rank = 0; rank < n; rank++) w[perm[rank]!] = Math.pow(rank + 1, -s);
  const cum = new Float64Array(n);
  let acc = 0;
  for (let i = 0; i < n; i++) { acc += w[i]!; cum[i] = acc; }
  return cum;
}

function pick(cum: Float64Array, u: number): number {
  const target = u * cum[cum.length - 1]!;
  let lo = 0, hi = cum.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (cum[mid]! > target) hi = mid; else lo = mid + 1;
  }
  return lo;
}

const FIRST = ['ana', 'bo', 'cy', 'dee', 'eli', 'fay', 'gus', 'hal', 'ivy', 'jo', 'kai', 'lu', 'mo', 'ned', 'oz', 'pia'];

export function generateGraph(spec: GraphSpec = defaultGraphSpec): Graph {
  const random = rng(spec.seed);
  const outCum = cumulativeWeights(spec.nodes, spec.outExponent, random);
  const inCum = cumulativeWeights(spec.nodes, spec.inExponent, random);
  const src = new Uint32Array(spec.edges);
  const dst = new Uint32Array(spec.edges);
  const outDegree = new Uint32Array(spec.nodes);
  const inDegree = new Uint32Array(spec.nodes);
  for (let e = 0; e < spec.edges; e++) {
    const s = pick(outCum, random());
    let d = pick(inCum, random());
    while (d === s) d = pick(inCum, random());
    src[e] = s; dst[e] = d;
    outDegree[s]!++; inDegree[d]!++;
  }
  const ages = new Uint8Array(spec.nodes);
  const scores = new Float64Array(spec.nodes);
  const propRandom = rng(spec.seed ^ 0x9e37);
  for (let i = 0; i < spec.nodes; i++) {
    ages[i] = 16 + Math.floor(propRandom() * 64);
    // Two decimals plus 0.005 keeps it a non-integer f64 (an integer token would be an i64).
    scores[i] = Number((Math.floor(propRandom() * 10000) / 100 + 0.005).toFixed(3));
  }
  return {
    spec, src, dst, outDegree, inDegree,
    props: (i: number) => ({ name: `${FIRST[i % FIRST.length]}_${i}`, age: ages[i]!, score: scores[i]! }),
  };
}

export interface DegreeSummary {
  min: number; p50: number; p90: number; p99: number; max: number; mean: number; zero: number;
}

export function degreeSummary(deg: Uint32Array): DegreeSummary {
  const sorted = Uint32Array.from(deg).sort();
  const q = (p: number): number => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
  let sum = 0, zero = 0;
  for (const d of deg) { sum += d; if (d === 0) zero++; }
  return { min: sorted[0]!, p50: q(0.5), p90: q(0.9), p99: q(0.99), max: sorted[sorted.length - 1]!, mean: sum / deg.length, zero };
}

/**
 * Start IDs for the read scenarios: `count` nodes drawn uniformly (seeded) from the nodes
 * whose out-degree lies between the 10th and the 99th percentile, i.e. typical users
 * including well-connected ones, but neither empty nodes nor the few extreme hubs (which
 * would turn a rotating workload into a handful of outliers).
 */
export function pickStartIds(g: Graph, count: number, seed = g.spec.seed ^ 0x51a7): Uint32Array {
  const sorted = Uint32Array.from(g.outDegree).sort();
  const lo = Math.max(1, sorted[Math.floor(0.1 * sorted.length)]!);
  const hi = sorted[Math.floor(0.99 * sorted.length)]!;
  const eligible: number[] = [];
  for (let i = 0; i < g.spec.nodes; i++) {
    const d = g.outDegree[i]!;
    if (d >= lo && d <= hi) eligible.push(i);
  }
  const random = rng(seed);
  const chosen = new Set<number>();
  while (chosen.size < Math.min(count, eligible.length)) chosen.add(eligible[Math.floor(random() * eligible.length)]!);
  return Uint32Array.from(chosen);
}

/** Distinct out-neighbour counts at one and two hops for `ids` (plain CSR, for the report). */
export function neighbourhoodSizes(g: Graph, ids: Uint32Array): { oneHop: Uint32Array; twoHop: Uint32Array } {
  const n = g.spec.nodes;
  const off = new Uint32Array(n + 1);
  for (let e = 0; e < g.spec.edges; e++) off[g.src[e]! + 1]!++;
  for (let i = 0; i < n; i++) off[i + 1]! += off[i]!;
  const fill = off.slice(0, n);
  const adj = new Uint32Array(g.spec.edges);
  for (let e = 0; e < g.spec.edges; e++) adj[fill[g.src[e]!]!++] = g.dst[e]!;
  const mark = new Uint32Array(n);
  let stamp = 0;
  const oneHop = new Uint32Array(ids.length), twoHop = new Uint32Array(ids.length);
  ids.forEach((id, k) => {
    const first = ++stamp;
    const mids: number[] = [];
    for (let i = off[id]!; i < off[id + 1]!; i++) if (mark[adj[i]!] !== first) { mark[adj[i]!] = first; mids.push(adj[i]!); }
    oneHop[k] = mids.length;
    const second = ++stamp;
    let c = 0;
    for (const m of mids) for (let i = off[m]!; i < off[m + 1]!; i++) if (mark[adj[i]!] !== second) { mark[adj[i]!] = second; c++; }
    twoHop[k] = c;
  });
  return { oneHop, twoHop };
}
