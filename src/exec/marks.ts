// Reusable per-thread scratch: growable typed buffers, and a "seen" set over row element
// keys (node ID * 2, edge ID * 2 + 1) whose memory follows what it holds, not the store.
import type { ExecCtx } from './context.js';

/** Slots of the sparse table (1 KiB) kept between uses; a grown one is dropped after use. */
const SPARSE_SLOTS_MIN = 256;
/** Fibonacci hashing: element keys are dense and often consecutive; this spreads them. */
const HASH = 0x9e3779b1;

/**
 * A set of element keys below a key space, for one use at a time (begin ... end): an
 * open-addressing table of key + 1 (0 = empty, linear probing, load <= 1/2) that grows with
 * what is added; when the next table would take as many bytes as one byte per key of the
 * key space (the marked keys are >= 1/16 of it), it becomes that byte array instead. So a
 * query that marks three elements of a large store holds 1 KiB, and one that marks most of
 * it holds ~1 byte per key. Growth is amortized: no allocation per add.
 */
export class ElementMarks {
  private table = new Uint32Array(SPARSE_SLOTS_MIN);
  private shift = 32 - Math.log2(SPARSE_SLOTS_MIN);
  private room = SPARSE_SLOTS_MIN >>> 1;
  private count = 0;
  /** One byte per key once dense, else null. */
  private stamps: Uint8Array | null = null;
  private keySpace = 0;

  /**
   * Start a new empty set over every element key of the store, for about `expected` keys
   * when the caller knows (rows it will add at most): sized for them at once, no growth.
   */
  begin(ctx: ExecCtx, expected = 0): this {
    return this.beginKeys(Math.max(ctx.store.nodeSlots(), ctx.store.edgeSlots()) * 2 + 2, expected);
  }

  /** Start a new empty set of keys in [0, keySpace), expecting about `expected` of them. */
  beginKeys(keySpace: number, expected = 0): this {
    this.end();
    this.keySpace = keySpace;
    let slots = SPARSE_SLOTS_MIN;
    while (slots >>> 1 < expected) slots *= 2;
    if (slots > SPARSE_SLOTS_MIN) this.resize(slots);
    return this;
  }

  /** Give back what the last use grew (the next use starts small again). */
  end(): void {
    if (this.table.length > SPARSE_SLOTS_MIN) {
      this.table = new Uint32Array(SPARSE_SLOTS_MIN);
      this.shift = 32 - Math.log2(SPARSE_SLOTS_MIN);
      this.room = SPARSE_SLOTS_MIN >>> 1;
    } else if (this.count > 0) {
      this.table.fill(0);
    }
    this.stamps = null;
    this.count = 0;
  }

  /** Add `key`; false if it was already in the set. */
  add(key: number): boolean {
    const stamps = this.stamps;
    if (stamps !== null) {
      if (key >= stamps.length) throw new RangeError(`element key ${key} is outside the marks' key space ${stamps.length}`);
      if (stamps[key] !== 0) return false;
      stamps[key] = 1;
      return true;
    }
    const table = this.table, mask = table.length - 1, stored = key + 1;
    let i = Math.imul(key, HASH) >>> this.shift;
    for (;;) {
      const k = table[i]!;
      if (k === stored) return false;
      if (k === 0) break;
      i = (i + 1) & mask;
    }
    table[i] = stored;
    if (++this.count > this.room) this.grow();
    return true;
  }

  /** Whether the set is one byte per key (for tests and measurements). */
  get dense(): boolean {
    return this.stamps !== null;
  }

  /** Bytes the set holds now. */
  get bytes(): number {
    return this.table.byteLength + (this.stamps?.byteLength ?? 0);
  }

  private grow(): void {
    this.resize(this.table.length * 2);
  }

  /** Move to a table of `slots` slots, or to the byte array if that takes no more memory. */
  private resize(slots: number): void {
    const old = this.table;
    if (slots * 4 >= this.keySpace) {
      const stamps = new Uint8Array(this.keySpace);
      for (let i = 0; i < old.length; i++) if (old[i] !== 0) stamps[old[i]! - 1] = 1;
      this.stamps = stamps;
      return;
    }
    const table = new Uint32Array(slots), mask = slots - 1, shift = 32 - Math.log2(slots);
    for (let j = 0; j < old.length; j++) {
      const stored = old[j]!;
      if (stored === 0) continue;
      let i = Math.imul(stored - 1, HASH) >>> shift;
      while (table[i] !== 0) i = (i + 1) & mask;
      table[i] = stored;
    }
    this.table = table;
    this.shift = shift;
    this.room = slots >>> 1;
  }
}

/** `buffer`, or a larger copy of its first `used` words, holding at least `needed` words. */
export function withRoom(buffer: Uint32Array, used: number, needed: number): Uint32Array {
  if (needed <= buffer.length) return buffer;
  const bigger = new Uint32Array(Math.max(buffer.length * 2, needed));
  bigger.set(buffer.subarray(0, used));
  return bigger;
}
