// A reusable "seen" set over row element keys (node ID * 2, edge ID * 2 + 1): one u32
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
