// AssemblyScript kernels over the topology memory (src/store/topology.ts), which the
// module imports as its memory. Kernels only read the store and write the caller's
// scratch; JS allocates everything. Arguments and results are WORD offsets (u32 index =
// byte address / 4), as in topology.ts. The module must not have data segments:
// instantiating it would write them into the shared memory (checked at load time).

// Mirrors src/store/topology.ts.
const CHUNK_TABLE: u32 = 2;
const CHUNK_SHIFT: u32 = 14;
const CHUNK_MASK: u32 = (1 << CHUNK_SHIFT) - 1;
const DIR_WORDS: u32 = 4;
const ADJ_WORDS: u32 = 5;
const A_NEIGHBOR: u32 = 1, A_LABEL: u32 = 2, A_CREATED: u32 = 3, A_DELETED: u32 = 4;

// @ts-ignore: decorator
@inline function word(index: u32): u32 {
  return load<u32>(<usize>index << 2);
}

// @ts-ignore: decorator
@inline function setWord(index: u32, value: u32): void {
  store<u32>(<usize>index << 2, value);
}

// Node state of src/exec/shortest-path.ts: STATE_WORDS words per node, [0] forward reach,
// [1] backward reach.
const STATE_SHIFT: u32 = 2;

/**
 * One BFS layer: every visible entry (snapshot `at`, label `label` or any when < 0) of the
 * blocks of nodes queue[from..to) in the directions of `dirs` (bit 0 out, bit 1 in) whose
 * neighbour's reach word `side` (0 forward, 1 backward) is 0 gets reach `mark` and is
 * appended at queue[to..). Returns the new end of the queue; stops early, returning the end
 * plus 2^31, after appending a node the other side reached.
 */
export function expandLayer(queue: u32, from: u32, to: u32, dirs: u32, label: i32, at: u32, state: u32, side: u32, mark: u32): u32 {
  const reach = state + side;
  const other = state + (side ^ 1);
  let end = to;
  for (let i = from; i < to; i++) {
    const node = word(queue + i);
    const dir = word(CHUNK_TABLE + (node >> CHUNK_SHIFT)) + (node & CHUNK_MASK) * DIR_WORDS;
    for (let d: u32 = 0; d < 2; d++) {
      if ((dirs & (1 << d)) == 0) continue;
      // Length before block offset: see topology.ts on why no fence is needed.
      const len = atomic.load<u32>(<usize>(dir + 2 * d + 1) << 2);
      const block = word(dir + 2 * d);
      const stop = block + len * ADJ_WORDS;
      for (let p = block; p < stop; p += ADJ_WORDS) {
        const created = word(p + A_CREATED);
        const deleted = word(p + A_DELETED);
        if (created == 0 || created > at || (deleted != 0 && at >= deleted)) continue;
        if (label >= 0 && word(p + A_LABEL) != <u32>label) continue;
        const next = word(p + A_NEIGHBOR);
        const slot = next << STATE_SHIFT;
        if (word(reach + slot) != 0) continue;
        setWord(reach + slot, mark);
        setWord(queue + end, next);
        end++;
        // The sides met: the caller needs nothing more of this layer.
        if (word(other + slot) != 0) return end | (1 << 31);
      }
    }
  }
  return end;
}
