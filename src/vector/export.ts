// Graph export and import (docs/vector.md §5): the graph as of a cut, written from the live
// memory by any thread while the writer keeps inserting, and loaded back without a rebuild.
//
// Format (version EXPORT_VERSION), little-endian u32 words:
//   header [magic 'SVX1', version, header words, dimension, metric, M, M0, efConstruction,
//           rng state, points, entry point, entry level, 0, 0, 0, 0]
//   per point [created, deleted, element, level, norm (f32 bits), n0, n0 ids,
//              per layer 1..level: n, n ids, vector (dimension f32)]
//   trailer [crc32 of every byte before it]
// Chunks are at most limits.vectorExportChunkBytes; their concatenation is the export.
import { crc32 } from 'node:zlib';
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';
import { recordAt, VectorGraph, METRICS } from './graph.js';
import {
  G_CHUNK0, G_CHUNKS, G_COUNT, G_DIM, G_EFC, G_ENTRY, G_M, G_M0, G_METRIC, G_RECORD, G_RNG, G_TOP, G_VEC, NEVER,
  R_CREATED, R_DELETED, R_ELEMENT, R_LEVEL, R_N0, R_NORM, R_UPPER, chunkWords,
} from './layout.js';
import type { VectorMemory } from './memory.js';
import { kernelsFor } from './kernel.js';
import { joinChunks, WordChunkWriter } from '../word-chunks.js';
export { joinChunks };

export const EXPORT_MAGIC = 0x31585653; // 'SVX1' read as little-endian bytes
export const EXPORT_VERSION = 1;
const HEADER_WORDS = 16;

/**
 * The graph at `root` as of a cut (pointsAtCut = pointCount() taken by the writer between
 * batches, cutEpoch = the store epoch then), from the live memory on any thread. Points
 * >= pointsAtCut and neighbour IDs >= it are left out, deleted epochs > cutEpoch written as
 * 0, points created > cutEpoch written never visible (NEVER). The entry point is the first
 * point of the highest level among those written, so it too depends only on the cut.
 * Neighbour lists are read as readers read them (each ID a point ID, counts clamped).
 */
export function exportGraph(memory: VectorMemory, root: number, pointsAtCut: number, cutEpoch: number): Uint8Array[] {
  const count = Atomics.load(memory.u32, root + G_COUNT);
  memory.cover(); // after the count's acquire (graph.ts search)
  const u = memory.u32;
  if (!(Number.isInteger(pointsAtCut) && pointsAtCut >= 0 && pointsAtCut <= count)) {
    throw new SvcError('internal_error', `internal error: export cut at ${pointsAtCut} points of ${count}`);
  }
  const dim = u[root + G_DIM]!, m = u[root + G_M]!, m0 = u[root + G_M0]!, vec = u[root + G_VEC]!;
  let entry = 0, top = 0;
  for (let p = 0; p < pointsAtCut; p++) {
    const level = u[recordAt(u, root, p) + R_LEVEL]!;
    if (level > top) { top = level; entry = p; }
  }
  const w = new WordChunkWriter(Math.max(1024, Math.floor(limits.vectorExportChunkBytes / 4)));
  w.room(HEADER_WORDS);
  for (const x of [EXPORT_MAGIC, EXPORT_VERSION, HEADER_WORDS, dim, u[root + G_METRIC]!, m, m0, u[root + G_EFC]!, u[root + G_RNG]!, pointsAtCut, entry, top, 0, 0, 0, 0]) w.word(x);
  for (let p = 0; p < pointsAtCut; p++) {
    const rec = recordAt(u, root, p);
    const level = u[rec + R_LEVEL]!;
    w.room(6 + m0 + level * (m + 1) + dim);
    const created = u[rec + R_CREATED]!;
    const deleted = u[rec + R_DELETED]!;
    w.word(created === 0 || created > cutEpoch ? NEVER : created);
    w.word(deleted > cutEpoch ? 0 : deleted);
    w.word(u[rec + R_ELEMENT]!);
    w.word(level);
    w.word(u[rec + R_NORM]!);
    writeList(w, u, rec + R_N0, m0, pointsAtCut);
    const upper = u[rec + R_UPPER]!;
    for (let l = 1; l <= level; l++) writeList(w, u, upper + (l - 1) * (m + 1), m, pointsAtCut);
    for (let i = 0; i < dim; i++) w.word(u[rec - vec + i]!);
  }
  return w.finish();
}

/** A list read once into a local copy (it may be rewritten meanwhile): count clamped, IDs >= cut dropped. */
const listCopy = new Uint32Array(2 * 64 + 1);
function writeList(w: WordChunkWriter, u: Uint32Array, list: number, max: number, cut: number): void {
  let n = Math.min(u[list]!, max);
  let kept = 0;
  for (let j = 0; j < n; j++) {
    const id = u[list + 1 + j]!;
    if (id < cut) listCopy[kept++] = id;
  }
  n = kept;
  w.word(n);
  for (let j = 0; j < n; j++) w.word(listCopy[j]!);
}

function corrupt(msg: string): never {
  throw new SvcError('storage_error', `vector graph image is corrupt: ${msg}`);
}

/** Load an exported graph into `memory` (writer side): no rebuild. Corrupt input: storage_error. */
export function importGraph(memory: VectorMemory, bytes: Uint8Array): VectorGraph {
  if (bytes.length < (HEADER_WORDS + 1) * 4 || bytes.length % 4 !== 0) corrupt(`${bytes.length} bytes`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const stored = view.getUint32(bytes.length - 4, true);
  if (crc32(bytes.subarray(0, bytes.length - 4)) !== stored) corrupt('checksum mismatch');
  const words = (bytes.length - 4) / 4;
  let at = 0;
  const next = (): number => {
    if (at >= words) corrupt('truncated');
    return view.getUint32(4 * at++, true);
  };
  const h: number[] = [];
  for (let i = 0; i < HEADER_WORDS; i++) h.push(next());
  const [magic, version, headerWords, dim, metric, m, m0, efc, rng, count, entry, top] = h as [number, number, number, number, number, number, number, number, number, number, number, number];
  if (magic !== EXPORT_MAGIC) corrupt('bad magic');
  if (version !== EXPORT_VERSION) corrupt(`format version ${version}, this build reads ${EXPORT_VERSION}`);
  if (headerWords !== HEADER_WORDS) corrupt(`header of ${headerWords} words`);
  if (metric >= METRICS.length) corrupt(`metric ${metric}`);
  if (m < 2 || m > limits.vectorConnectionsMax || m0 !== 2 * m) corrupt(`connections ${m} / ${m0}`);
  if (dim < 1 || dim > limits.vectorDimensionMax) corrupt(`dimension ${dim}`);
  if (efc < 1 || efc > limits.vectorEfConstructionMax) corrupt(`efConstruction ${efc}`);
  if (count > limits.vectorPointsMax) corrupt(`${count} points`);
  if (count > 0 ? entry >= count || top > limits.vectorLevelMax : entry !== 0 || top !== 0) corrupt(`entry point ${entry} at level ${top}`);
  // The smallest point is 6 + dim words: a count the bytes cannot hold is refused before allocating.
  if (count * (6 + dim) > words - HEADER_WORDS) corrupt(`${count} points in ${bytes.length} bytes`);
  const graph = VectorGraph.create(memory, { dimension: dim, metric: METRICS[metric]!, connections: m, efConstruction: efc, seed: rng });
  const root = graph.root;
  let u = memory.u32;
  u[root + G_RNG] = rng;
  const recordW = u[root + G_RECORD]!, vec = u[root + G_VEC]!;
  for (let c = 0; c < 32 && (1 << c) - 1 < count; c++) {
    const chunk = memory.allocateWords(chunkWords(c, recordW, dim));
    u = memory.u32;
    u[root + G_CHUNK0 + c] = chunk;
    u[root + G_CHUNKS] = c + 1;
  }
  const readList = (list: number, max: number): void => {
    const n = next();
    if (n > max) corrupt(`a list of ${n} neighbours (at most ${max})`);
    u[list] = n;
    for (let j = 0; j < n; j++) {
      const id = next();
      if (id >= count) corrupt(`neighbour ${id} of ${count} points`);
      u[list + 1 + j] = id;
    }
  };
  let topSeen = 0;
  for (let p = 0; p < count; p++) {
    const created = next(), deleted = next(), element = next(), level = next(), norm = next();
    if (level > limits.vectorLevelMax) corrupt(`point ${p} at level ${level}`);
    if (level > topSeen) topSeen = level;
    const upper = level > 0 ? memory.allocateWords(level * (m + 1)) : 0;
    u = memory.u32;
    const rec = recordAt(u, root, p);
    u[rec + R_CREATED] = created;
    u[rec + R_DELETED] = deleted;
    u[rec + R_ELEMENT] = element;
    u[rec + R_LEVEL] = level;
    u[rec + R_UPPER] = upper;
    u[rec + R_NORM] = norm;
    readList(rec + R_N0, m0);
    for (let l = 1; l <= level; l++) readList(upper + (l - 1) * (m + 1), m);
    for (let i = 0; i < dim; i++) u[rec - vec + i] = next();
    kernelsFor(memory).quantize(root, p);
  }
  if (at !== words) corrupt(`${words - at} words after the last point`);
  // A link at layer l must name a point that has layer l (searches descend through them).
  for (let p = 0; p < count; p++) {
    const rec = recordAt(u, root, p);
    const upper = u[rec + R_UPPER]!;
    for (let l = 1; l <= u[rec + R_LEVEL]!; l++) {
      const list = upper + (l - 1) * (m + 1);
      for (let j = 0; j < u[list]!; j++) {
        const id = u[list + 1 + j]!;
        if (u[recordAt(u, root, id) + R_LEVEL]! < l) corrupt(`point ${p} links point ${id} at layer ${l} above its level`);
      }
    }
  }
  if (count > 0 && (u[recordAt(u, root, entry) + R_LEVEL] !== top || topSeen !== top)) corrupt(`entry point ${entry} is not at the top level ${topSeen}`);
  u[root + G_TOP] = top;
  Atomics.store(u, root + G_COUNT, count);
  Atomics.store(u, root + G_ENTRY, entry);
  return graph;
}

