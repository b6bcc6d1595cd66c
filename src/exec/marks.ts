// Reusable per-thread scratch: growable typed buffers, and a "seen" set over row element keys (node ID * 2, edge ID * 2 + 1): one u32
// stamp per key, and a generation counter so clearing is O(1) per use.
import type { ExecCtx } from './context.js';

export class ElementMarks {
  private stamps = new Uint32Array(0);
  private generation = 0;

  /** Start a new empty set sized for every element of the store. */
  begin(ctx: ExecCtx): this {
    const keys = Math.max(ctx.store.nodeSlots(), ctx.store.edgeSlots()) * 2 + 2;
    if (this.stamps.length < keys) {
      this.stamps = new Uint32Array(Math.max(keys, this.stamps.length * 2));
      this.generation = 0;
    }
    if (++this.generation === 0xffffffff) {
      this.stamps.fill(0);
      this.generation = 1;
    }
    return this;
  }

  /** Add `key`; false if it was already in the set. */
  add(key: number): boolean {
    if (this.stamps[key] === this.generation) return false;
    this.stamps[key] = this.generation;
    return true;
  }
}

/** `buffer`, or a larger copy of its first `used` words, holding at least `needed` words. */
export function withRoom(buffer: Uint32Array, used: number, needed: number): Uint32Array {
  if (needed <= buffer.length) return buffer;
  const bigger = new Uint32Array(Math.max(buffer.length * 2, needed));
  bigger.set(buffer.subarray(0, used));
  return bigger;
}
