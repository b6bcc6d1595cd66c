// Loading the generated graph into svcdb (in-process and over HTTP) and into graphology.
import { MultiDirectedGraph } from 'graphology';
import type { Graph } from './graph.js';
import { loadChunks } from './queries.js';

export interface Chunking {
  nodesPerChunk: number;
  edgesPerChunk: number;
}

/** ~60 B per node row and ~22 B per edge row keep every body far below the 16 MiB limit. */
export const defaultChunking: Chunking = { nodesPerChunk: 25_000, edgesPerChunk: 50_000 };

export interface LoadReport {
  totalMs: number;
  nodesMs: number;
  edgesMs: number;
  requests: number;
  bytes: number;
  maxBodyBytes: number;
  /** Slowest single request, to spot super-linear chunks. */
  slowestMs: number;
}

export type Send = (body: string) => Promise<{ status: number; body: string }>;

/** Send the whole graph as write requests through `send`, one chunk at a time. */
export async function loadSvcdb(g: Graph, send: Send, chunking: Chunking = defaultChunking): Promise<LoadReport> {
  const r: LoadReport = { totalMs: 0, nodesMs: 0, edgesMs: 0, requests: 0, bytes: 0, maxBodyBytes: 0, slowestMs: 0 };
  for (const chunk of loadChunks(g, chunking.nodesPerChunk, chunking.edgesPerChunk)) {
    const bytes = Buffer.byteLength(chunk.body);
    if (bytes >= 16 * 1024 * 1024) throw new Error(`load chunk of ${bytes} bytes exceeds the 16 MiB body limit`);
    const t0 = performance.now();
    const res = await send(chunk.body);
    const ms = performance.now() - t0;
    if (res.status !== 200) throw new Error(`load request failed with ${res.status}: ${res.body.slice(0, 500)}`);
    r.requests++; r.bytes += bytes; r.maxBodyBytes = Math.max(r.maxBodyBytes, bytes); r.slowestMs = Math.max(r.slowestMs, ms);
    if (chunk.kind === 'nodes') r.nodesMs += ms; else r.edgesMs += ms;
  }
  r.totalMs = r.nodesMs + r.edgesMs;
  return r;
}

export type Peer = MultiDirectedGraph;

/** The same nodes (keys are the node IDs as strings) and edge list in a MultiDirectedGraph. */
export function loadGraphology(g: Graph): { ms: number; graph: Peer } {
  const t0 = performance.now();
  const graph = new MultiDirectedGraph();
  for (let i = 0; i < g.spec.nodes; i++) graph.addNode(String(i), { label: 'User', ...g.props(i) });
  for (let e = 0; e < g.spec.edges; e++) graph.addEdge(String(g.src[e]), String(g.dst[e]), { label: 'FOLLOWS' });
  return { ms: performance.now() - t0, graph };
}
