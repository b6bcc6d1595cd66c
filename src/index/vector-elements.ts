// Element -> point of one vector index, in the vector memory: the writer's map of which
// point holds each element's vector (and in which partition's graph), which readers use to rank
// `*_within` candidates straight from the graphs instead of decoding records.
//
// Layout (u32 words, vector/layout.ts E_*): a root of [MAGIC, chunk table of ELEMENT_CHUNKS word
// offsets]; chunk c holds slots [c * 2^16, (c + 1) * 2^16) as pairs [point + 1 (0: none), graph root]. A chunk
// pointer is zero-filled memory published with Atomics.store and read with Atomics.load.
// Pairs are rewritten in place with plain stores, so a reader may read a stale or torn
// pair: it only uses a pair to *find* a candidate point and then checks that the point is
// published, belongs to that element and is visible at its snapshot (VectorGraph.holds); an
// element has at most one such point, so a pair that passes is right, and a reader whose
// pair does not pass reads the element's record instead.
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';
import type { VectorMemory } from '../vector/memory.js';
import { E_CHUNK_SHIFT } from '../vector/layout.js';

const MAGIC = 0x4d454c45; // 'ELEM'
const CHUNK_SHIFT = E_CHUNK_SHIFT;
const CHUNK_SLOTS = 1 << CHUNK_SHIFT;
/** Enough chunks for the largest element slot (edges: limits.edgesMax). */
const ELEMENT_CHUNKS = Math.ceil(Math.max(limits.nodesMax, limits.edgesMax) / CHUNK_SLOTS);
const ROOT_WORDS = 1 + ELEMENT_CHUNKS;
const CHUNK_WORDS = 2 * CHUNK_SLOTS;

export class ElementPoints {
  /** Highest slot ever set, plus one (writer only). */
  private slots = 0;

  private constructor(private readonly memory: VectorMemory, readonly root: number) {}

  /** Writer: an empty map. */
  static create(memory: VectorMemory): ElementPoints {
    const root = memory.allocateWords(ROOT_WORDS);
    Atomics.store(memory.u32, root, MAGIC);
    return new ElementPoints(memory, root);
  }

  /** Any thread: the map at `root`. */
  static attach(memory: VectorMemory, root: number): ElementPoints {
    memory.cover();
    if (Atomics.load(memory.u32, root) !== MAGIC) throw new SvcError('internal_error', `internal error: no element map at vector word ${root}`);
    return new ElementPoints(memory, root);
  }

  /** Word offset of slot's pair, or 0 when its chunk does not exist. */
  private pairAt(slot: number): number {
    const chunk = Atomics.load(this.memory.u32, this.root + 1 + (slot >>> CHUNK_SHIFT));
    return chunk === 0 ? 0 : chunk + 2 * (slot & (CHUNK_SLOTS - 1));
  }

  /** The root of the graph of the point the last point() call returned (0: none). */
  lastRoot = 0;

  /** The element's point (-1: none); its graph's root goes to lastRoot (one read of the pair). */
  point(slot: number): number {
    const at = this.pairAt(slot);
    if (at === 0) {
      this.lastRoot = 0;
      return -1;
    }
    let u = this.memory.u32;
    // The chunk's offset came from an acquire: re-make the views only if they end before it.
    if (at + 1 >= u.length) {
      this.memory.cover();
      u = this.memory.u32;
    }
    this.lastRoot = u[at + 1]!;
    return u[at]! - 1;
  }

  /** The root of the graph holding the element's point (0: none). */
  graphRoot(slot: number): number {
    this.point(slot);
    return this.lastRoot;
  }

  /** Writer: slot's point (-1: none) in the graph at `root`. */
  set(slot: number, point: number, root: number): void {
    const memory = this.memory;
    const c = slot >>> CHUNK_SHIFT;
    if (c >= ELEMENT_CHUNKS) throw new SvcError('internal_error', `internal error: element slot ${slot} beyond the element map`);
    if (Atomics.load(memory.u32, this.root + 1 + c) === 0) {
      const chunk = memory.allocateWords(CHUNK_WORDS); // zero-filled
      Atomics.store(memory.u32, this.root + 1 + c, chunk);
    }
    const at = this.pairAt(slot);
    const u = memory.u32;
    u[at + 1] = root;
    u[at] = point + 1;
    if (slot >= this.slots) this.slots = slot + 1;
  }

  /** Writer: every slot that has a point, with it and its graph's root. */
  forEach(fn: (slot: number, point: number, root: number) => void): void {
    for (let slot = 0; slot < this.slots; slot++) {
      const point = this.point(slot);
      if (point >= 0) fn(slot, point, this.graphRoot(slot));
    }
  }

  /** The blocks it holds, [word offset, words] (to free with its index). */
  blocks(): [number, number][] {
    const out: [number, number][] = [[this.root, ROOT_WORDS]];
    for (let c = 0; c < ELEMENT_CHUNKS; c++) {
      const chunk = Atomics.load(this.memory.u32, this.root + 1 + c);
      if (chunk !== 0) out.push([chunk, CHUNK_WORDS]);
    }
    return out;
  }
}
