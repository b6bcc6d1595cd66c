// The vector engine (docs/vector.md): shared-memory HNSW graphs with SIMD kernels.
import { cosineIn, OP_ABSDIFF, OP_DOT, OP_SQDIFF, reduceIn } from './twin.js';
import type { Metric } from './graph.js';

export { VectorMemory } from './memory.js';
export { VectorGraph, DEFAULT_CONNECTIONS, DEFAULT_EF_CONSTRUCTION, type Metric, type VectorGraphOptions } from './graph.js';
export { exportGraph, importGraph, joinChunks, EXPORT_VERSION } from './export.js';
export { setVectorKernel, vectorKernelsOn } from './kernel.js';

/**
 * The f32 distance of indexes.md §7.4 between two vectors of equal length, with exactly the
 * kernels' arithmetic and summation order (twin.ts header): cosine (1 - clamp(cos)) / 2 with
 * cos = dot / (|a| |b|) (in f64 where f32 would overflow or vanish: twin.ts cosineIn),
 * euclidean squared, manhattan.
 */
export function vectorDistance(metric: Metric, a: Float32Array, b: Float32Array): number {
  const dim = a.length;
  if (b.length !== dim) throw new RangeError(`vectorDistance of lengths ${dim} and ${b.length}`);
  switch (metric) {
    case 'cosine': {
      const na = Math.fround(Math.sqrt(reduceIn(OP_DOT, a, 0, a, 0, dim)));
      const nb = Math.fround(Math.sqrt(reduceIn(OP_DOT, b, 0, b, 0, dim)));
      return cosineIn(a, 0, na, b, 0, nb, dim);
    }
    case 'euclidean': return reduceIn(OP_SQDIFF, a, 0, b, 0, dim);
    case 'manhattan': return reduceIn(OP_ABSDIFF, a, 0, b, 0, dim);
  }
}
