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

/** Word offset of a node's directory entry (topology.ts `dir`). */
// @ts-ignore: decorator
@inline function directory(node: u32): u32 {
  return word(CHUNK_TABLE + (node >> CHUNK_SHIFT)) + (node & CHUNK_MASK) * DIR_WORDS;
}

/**
 * A node's block in direction `d` (0 out, 1 in): its length, read before its offset, and
 * the word offset of its first entry. Both are atomic loads (acquire), pairing with the
 * writer's Atomics.store of each (topology.ts header); the entries are then plain loads.
 */
// @ts-ignore: decorator
@inline function blockLength(dir: u32, d: u32): u32 {
  return atomic.load<u32>(<usize>(dir + 2 * d + 1) << 2);
}

// @ts-ignore: decorator
@inline function blockStart(dir: u32, d: u32): u32 {
  return atomic.load<u32>(<usize>(dir + 2 * d) << 2);
}

/** Entry at word `p` visible at `at` with label `label` (any when < 0): topology.ts `entryVisible`. */
// @ts-ignore: decorator
@inline function visible(p: u32, at: u32, label: i32): bool {
  const created = word(p + A_CREATED);
  const deleted = word(p + A_DELETED);
  return created != 0 && created <= at && (deleted == 0 || at < deleted) && (label < 0 || word(p + A_LABEL) == <u32>label);
}

// Node state of src/exec/shortest-path.ts: STATE_WORDS words per node, [0] forward reach,
// [1] backward reach, [3] forward predecessor.
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
    const dir = directory(node);
    for (let d: u32 = 0; d < 2; d++) {
      if ((dirs & (1 << d)) == 0) continue;
      const len = blockLength(dir, d);
      const block = blockStart(dir, d);
      const stop = block + len * ADJ_WORDS;
      for (let p = block; p < stop; p += ADJ_WORDS) {
        if (!visible(p, at, label)) continue;
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

/** Adjacency entries of nodes queue[0..count) in the directions of `dirs`: an upper bound on expandRows' output. */
export function entryCount(queue: u32, count: u32, dirs: u32): u32 {
  let total: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const node = word(queue + i);
    const dir = directory(node);
    if ((dirs & 1) != 0) total += blockLength(dir, 0);
    if ((dirs & 2) != 0) total += blockLength(dir, 1);
  }
  return total;
}

/**
 * One navigation step for rows: for each node of rows[0..count) in order, its distinct
 * neighbours over visible entries (as expandLayer), ascending, are appended to out[..].
 * With `stamp` != 0 a neighbour whose word stamps[neighbour] already equals `stamp` is
 * left out and the others get it (first occurrence per level). Returns the count written;
 * `out` must hold entryCount(rows, count, dirs) words.
 */
export function expandRows(rows: u32, count: u32, dirs: u32, label: i32, at: u32, out: u32, stamps: u32, stamp: u32): u32 {
  let end: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const node = word(rows + i);
    const dir = directory(node);
    const start = end;
    let ordered = true;
    let previous: u32 = 0;
    for (let d: u32 = 0; d < 2; d++) {
      if ((dirs & (1 << d)) == 0) continue;
      const len = blockLength(dir, d);
      const block = blockStart(dir, d);
      const stop = block + len * ADJ_WORDS;
      for (let p = block; p < stop; p += ADJ_WORDS) {
        if (!visible(p, at, label)) continue;
        const next = word(p + A_NEIGHBOR);
        if (end > start && next < previous) ordered = false;
        previous = next;
        setWord(out + end, next);
        end++;
      }
    }
    if (!ordered) sortWords(out + start, end - start);
    // Distinct per row, then (with stamps) first occurrence per level.
    let kept = start;
    for (let j = start; j < end; j++) {
      const next = word(out + j);
      if (j > start && next == word(out + j - 1)) continue;
      if (stamp != 0) {
        if (word(stamps + next) == stamp) continue;
        setWord(stamps + next, stamp);
      }
      setWord(out + kept, next);
      kept++;
    }
    // The kept prefix never overtakes the read position, so the row's later words are intact.
    end = kept;
  }
  return end;
}

/** Sort words[at..at+n) ascending, in place: insertion sort for short lists, else heapsort. */
function sortWords(at: u32, n: u32): void {
  if (n < 2) return;
  if (n <= 16) {
    for (let i: u32 = 1; i < n; i++) {
      const value = word(at + i);
      let j = i;
      while (j > 0 && word(at + j - 1) > value) {
        setWord(at + j, word(at + j - 1));
        j--;
      }
      setWord(at + j, value);
    }
    return;
  }
  for (let start = (n >> 1); start > 0; start--) siftDown(at, start - 1, n);
  for (let end = n - 1; end > 0; end--) {
    const top = word(at);
    setWord(at, word(at + end));
    setWord(at + end, top);
    siftDown(at, 0, end);
  }
}

function siftDown(at: u32, root: u32, n: u32): void {
  const value = word(at + root);
  while (true) {
    let child: u32 = 2 * root + 1;
    if (child >= n) break;
    if (child + 1 < n && word(at + child + 1) > word(at + child)) child++;
    if (word(at + child) <= value) break;
    setWord(at + root, word(at + child));
    root = child;
  }
  setWord(at + root, value);
}

/**
 * One forward BFS layer in the protocol's own order: for the nodes of queue[from..to) in
 * order, each one's visible neighbours (as expandLayer) with forward reach 0, ascending,
 * get reach `mark` and predecessor `node` (state words 0 and 3) and are appended at
 * queue[to..). `temp` must hold the largest entry count of those nodes. Returns the new end;
 * after a node whose list reached a node with a backward reach, returns it plus 2^31.
 */
export function expandOrdered(queue: u32, from: u32, to: u32, dirs: u32, label: i32, at: u32, state: u32, mark: u32, temp: u32): u32 {
  let end = to;
  for (let i = from; i < to; i++) {
    const node = word(queue + i);
    const dir = directory(node);
    let n: u32 = 0;
    for (let d: u32 = 0; d < 2; d++) {
      if ((dirs & (1 << d)) == 0) continue;
      const len = blockLength(dir, d);
      const block = blockStart(dir, d);
      const stop = block + len * ADJ_WORDS;
      for (let p = block; p < stop; p += ADJ_WORDS) {
        if (!visible(p, at, label)) continue;
        const next = word(p + A_NEIGHBOR);
        if (word(state + (next << STATE_SHIFT)) == 0) {
          setWord(temp + n, next);
          n++;
        }
      }
    }
    if (n > 1) sortWords(temp, n);
    let met = false;
    for (let k: u32 = 0; k < n; k++) {
      const next = word(temp + k);
      const slot = state + (next << STATE_SHIFT);
      if (word(slot) != 0) continue; // a parallel edge: already appended
      setWord(slot, mark);
      setWord(slot + 3, node);
      setWord(queue + end, next);
      end++;
      if (word(slot + 1) != 0) met = true;
    }
    if (met) return end | (1 << 31);
  }
  return end;
}

/** 1 when one of `node`'s visible successors (as expandLayer) has backward reach `reach`. */
export function hasSuccessorAt(node: u32, dirs: u32, label: i32, at: u32, state: u32, reach: u32): u32 {
  const dir = directory(node);
  for (let d: u32 = 0; d < 2; d++) {
    if ((dirs & (1 << d)) == 0) continue;
    const len = blockLength(dir, d);
    const block = blockStart(dir, d);
    const stop = block + len * ADJ_WORDS;
    for (let p = block; p < stop; p += ADJ_WORDS) {
      if (!visible(p, at, label)) continue;
      if (word(state + (word(p + A_NEIGHBOR) << STATE_SHIFT) + 1) == reach) return 1;
    }
  }
  return 0;
}
