// Compaction of a graph's tombstones (docs/vector.md §9): a new graph holding the points
// some reader may still see, built by the writer in slices between batches while the old
// graph keeps serving (and taking inserts and removes). Searches traverse tombstoned points,
// so a partition whose points are mostly deleted gets slow; its compaction is a rebuild
// without them. The caller swaps the graphs between batches when finish() returns, and frees
// the old graph's blocks() once no reader can still use it.
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';
import { recordAt, VectorGraph } from './graph.js';
import { G_COUNT, G_EFC, G_M, NEVER, R_CREATED, R_DELETED, R_ELEMENT } from './layout.js';

/** pointOf value of a point the compaction dropped. */
export const DROPPED = 0xffffffff;

export class VectorCompactor {
  private readonly source: VectorGraph;
  private readonly target: VectorGraph;
  private readonly horizon: number;
  /** Source point -> target point (DROPPED), for the source points copied so far. */
  private pointOf = new Uint32Array(1024);
  private copied = 0;
  private readonly vector: Float32Array;

  /**
   * `horizon`: an epoch no reader will ever read below again (the oldest snapshot in use):
   * points deleted at or before it, and undone inserts, are left out. The new graph lives in
   * the same memory with the same options (and the source's level seed state).
   */
  constructor(source: VectorGraph, horizon: number) {
    if (!(horizon >= 0 && horizon <= limits.epochMax)) throw new SvcError('internal_error', `internal error: compaction horizon ${horizon}`);
    this.source = source;
    this.horizon = horizon;
    const u = source.memory.u32;
    this.target = VectorGraph.create(source.memory, {
      dimension: source.dimension, metric: source.metric,
      connections: u[source.root + G_M]!, efConstruction: u[source.root + G_EFC]!,
    });
    this.vector = new Float32Array(source.dimension);
  }

  /**
   * Writer, between batches: copy up to `pointsMax` more source points (inserted with their
   * created epoch, removed with their deleted epoch). True once every source point so far
   * is copied (inserts after that need another step() before finish()).
   */
  step(pointsMax: number): boolean {
    const src = this.source, vm = src.memory;
    const count = vm.u32[src.root + G_COUNT]!;
    const end = Math.min(count, this.copied + pointsMax);
    if (end > this.pointOf.length) {
      const grown = new Uint32Array(Math.max(end, 2 * this.pointOf.length));
      grown.set(this.pointOf);
      this.pointOf = grown;
    }
    for (let p = this.copied; p < end; p++) {
      const u = vm.u32; // inserts below may grow the memory (views re-made)
      const rec = recordAt(u, src.root, p);
      const created = u[rec + R_CREATED]!, deleted = u[rec + R_DELETED]!;
      if (created === 0 || created === NEVER || (deleted !== 0 && deleted <= this.horizon)) {
        this.pointOf[p] = DROPPED;
        continue;
      }
      src.readVector(p, this.vector);
      const q = this.target.insert(u[rec + R_ELEMENT]!, this.vector, created);
      if (deleted !== 0) this.target.remove(q, deleted);
      this.pointOf[p] = q;
    }
    this.copied = end;
    return end === vm.u32[src.root + G_COUNT]!;
  }

  /**
   * Writer, between batches, after step() returned true with no insert since: the new graph
   * with every removal made since its points were copied, and the map from source point to
   * new point (DROPPED for the points left out).
   */
  finish(): { graph: VectorGraph; pointOf: Uint32Array } {
    const src = this.source, vm = src.memory;
    if (vm.u32[src.root + G_COUNT] !== this.copied) throw new SvcError('internal_error', 'internal error: compaction finished before every point was copied');
    const u = vm.u32;
    for (let p = 0; p < this.copied; p++) {
      const q = this.pointOf[p]!;
      if (q === DROPPED) continue;
      const deleted = u[recordAt(u, src.root, p) + R_DELETED]!;
      const now = u[recordAt(u, this.target.root, q) + R_DELETED]!;
      if (deleted === now) continue;
      // Removes after the copy (an undone remove between batches cannot be pending here).
      if (now !== 0) throw new SvcError('internal_error', `internal error: point ${p} deleted at ${now}, then at ${deleted}`);
      this.target.remove(q, deleted);
    }
    return { graph: this.target, pointOf: this.pointOf.subarray(0, this.copied) };
  }
}
