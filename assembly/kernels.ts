// AssemblyScript kernels over the topology memory (src/store/topology.ts), which the
// module imports as its memory. Kernels only read the store and write the caller's
// scratch (never a word another thread reads); JS allocates everything. Arguments and results are WORD offsets (u32 index =
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

// Memory ordering: exactly the JS readers' protocol (topology.ts header). The words the
// writer publishes are read with atomic.load, which is the same sequentially consistent
// access as JS Atomics.load on the shared memory (an acquire): the directory chunk
// pointer, then a block's length, then its offset. Entries are plain loads ordered after
// them; the kernels read nothing else the writer writes. A racing `deleted` word, or the
// words of an entry a rollback cut off and a later append rewrites, may read old or new,
// and either is right (topology.ts header). The writes below (setWord) only go to the
// calling thread's own scratch.

/** Word offset of a node's directory entry (topology.ts `dir`): the chunk pointer is an acquire. */
// @ts-ignore: decorator
@inline function directory(node: u32): u32 {
  return atomic.load<u32>(<usize>(CHUNK_TABLE + (node >> CHUNK_SHIFT)) << 2) + (node & CHUNK_MASK) * DIR_WORDS;
}

/**
 * A node's block in direction `d` (0 out, 1 in): its length, loaded BEFORE its offset,
 * and the word offset of its first entry. Both are atomic loads (acquire), pairing with
 * the writer's Atomics.store of each (topology.ts header); the entries are then plain
 * loads, and only entries below a length loaded before the offset may be read.
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

// Search state of src/exec/shortest-path.ts, in the caller's scratch. A header
// [H_TABLE] table word offset, [H_SHIFT] 32 - log2(slots), [H_COUNT] entries used,
// [H_ROOM] entries allowed before the table must grow, [H_RESUME] / [H_NEED] where a kernel
// stopped for room and how much it needs; then an open-addressing table (linear probing,
// Fibonacci hash) of ENTRY_WORDS-word entries [key = node + 1 (0 = empty), forward reach,
// backward reach, forward predecessor], one per node the search reached. Kernels never
// grow anything: before each node they check that the table and the queue have room for
// all of its entries, and otherwise return ROOM so that JS makes room and calls again.
const H_TABLE: u32 = 0, H_SHIFT: u32 = 1, H_COUNT: u32 = 2, H_ROOM: u32 = 3, H_RESUME: u32 = 4, H_NEED: u32 = 5;
const E_REACH: u32 = 1, E_PRED_F: u32 = 3;
const ENTRY_SHIFT: u32 = 2;
const HASH: u32 = 0x9e3779b1;
const MET: u32 = 1 << 31, ROOM: u32 = 1 << 30, NEW: u32 = 1 << 31;

/** Word offset of `node`'s entry, or 0 when the search has not reached it. */
// @ts-ignore: decorator
@inline function findEntry(table: u32, shift: u32, node: u32): u32 {
  const mask: u32 = <u32>0xffffffff >> shift;
  const key = node + 1;
  let i = (node * HASH) >> shift;
  while (true) {
    const e = table + (i << ENTRY_SHIFT);
    const k = word(e);
    if (k == key) return e;
    if (k == 0) return 0;
    i = (i + 1) & mask;
  }
  return 0;
}

/** `node`'s entry, made when missing (then | NEW); the caller made room for it. */
// @ts-ignore: decorator
@inline function claimEntry(table: u32, shift: u32, node: u32): u32 {
  const mask: u32 = <u32>0xffffffff >> shift;
  const key = node + 1;
  let i = (node * HASH) >> shift;
  while (true) {
    const e = table + (i << ENTRY_SHIFT);
    const k = word(e);
    if (k == key) return e;
    if (k == 0) {
      setWord(e, key);
      return e | NEW;
    }
    i = (i + 1) & mask;
  }
  return 0;
}

/** Stop before node queue[i] for room for `need` entries (see above). */
// @ts-ignore: decorator
@inline function stopForRoom(search: u32, count: u32, i: u32, need: u32, end: u32): u32 {
  setWord(search + H_COUNT, count);
  setWord(search + H_RESUME, i);
  setWord(search + H_NEED, need);
  return end | ROOM;
}

/** Visible entries of a node's blocks (lengths len0, len1) whose neighbour has no reach word `reach`. */
function unreachedCount(dir: u32, len0: u32, len1: u32, label: i32, at: u32, table: u32, shift: u32, reach: u32): u32 {
  let fresh: u32 = 0;
  for (let d: u32 = 0; d < 2; d++) {
    const len = d == 0 ? len0 : len1;
    if (len == 0) continue;
    const block = blockStart(dir, d);
    const stop = block + len * ADJ_WORDS;
    for (let p = block; p < stop; p += ADJ_WORDS) {
      if (!visible(p, at, label)) continue;
      const e = findEntry(table, shift, word(p + A_NEIGHBOR));
      if (e == 0 || word(e + reach) == 0) fresh++;
    }
  }
  return fresh;
}

/**
 * Move the search table into the `2^(32 - shift)` slots at word `table` (the header's
 * table, if any, is the old one; 0 = none yet): zero them, re-insert every entry, and
 * point the header at them. JS sets H_ROOM.
 */
export function rehash(search: u32, table: u32, shift: u32): void {
  const slots: u32 = <u32>1 << (32 - shift);
  memory.fill(<usize>table << 2, 0, <usize>slots << (ENTRY_SHIFT + 2));
  const old = word(search + H_TABLE);
  if (old != 0) {
    const stop = old + ((<u32>1 << (32 - word(search + H_SHIFT))) << ENTRY_SHIFT);
    for (let e = old; e < stop; e += 1 << ENTRY_SHIFT) {
      const key = word(e);
      if (key == 0) continue;
      const moved = claimEntry(table, shift, key - 1) ^ NEW;
      setWord(moved + 1, word(e + 1));
      setWord(moved + 2, word(e + 2));
      setWord(moved + 3, word(e + 3));
    }
  }
  setWord(search + H_TABLE, table);
  setWord(search + H_SHIFT, shift);
}

/**
 * One BFS layer: every visible entry (snapshot `at`, label `label` or any when < 0) of the
 * blocks of nodes queue[from..to) in the directions of `dirs` (bit 0 out, bit 1 in) whose
 * neighbour has no reach on side `side` (0 forward, 1 backward) gives it reach `mark` and
 * appends it at queue[end..) (`end` = `to` on the first call). Returns the new end; stops
 * early, returning the end | MET, after appending a node the other side reached, or
 * end | ROOM before a node it has no room for.
 */
export function expandLayer(queue: u32, from: u32, to: u32, end: u32, queueCap: u32, dirs: u32, label: i32, at: u32, search: u32, side: u32, mark: u32): u32 {
  const table = word(search + H_TABLE), shift = word(search + H_SHIFT), room = word(search + H_ROOM);
  let count = word(search + H_COUNT);
  const reach = E_REACH + side;
  const other = E_REACH + (side ^ 1);
  for (let i = from; i < to; i++) {
    const node = word(queue + i);
    const dir = directory(node);
    // Lengths read once: the room check and the scan count the same entries.
    const len0: u32 = (dirs & 1) != 0 ? blockLength(dir, 0) : 0;
    const len1: u32 = (dirs & 2) != 0 ? blockLength(dir, 1) : 0;
    const need = len0 + len1;
    if (count + need > room || end + need > queueCap) {
      // Near the bound (or a hub): count what this node can really add before asking for
      // room, so that a hub whose neighbours are mostly reached does not double the table.
      const fresh = unreachedCount(dir, len0, len1, label, at, table, shift, reach);
      if (count + fresh > room || end + fresh > queueCap) return stopForRoom(search, count, i, fresh, end);
    }
    for (let d: u32 = 0; d < 2; d++) {
      const len = d == 0 ? len0 : len1;
      if (len == 0) continue;
      const block = blockStart(dir, d);
      const stop = block + len * ADJ_WORDS;
      for (let p = block; p < stop; p += ADJ_WORDS) {
        if (!visible(p, at, label)) continue;
        const next = word(p + A_NEIGHBOR);
        let e = claimEntry(table, shift, next);
        if ((e & NEW) != 0) {
          e ^= NEW;
          count++;
        } else if (word(e + reach) != 0) continue;
        setWord(e + reach, mark);
        setWord(queue + end, next);
        end++;
        // The sides met: the caller needs nothing more of this layer.
        if (word(e + other) != 0) {
          setWord(search + H_COUNT, count);
          return end | MET;
        }
      }
    }
  }
  setWord(search + H_COUNT, count);
  return end;
}

/**
 * Adjacency entries of nodes queue[0..count) in the directions of `dirs`: an upper bound on
 * expandRows' output. Summed in 64 bits and returned as f64 (exact below 2^53): millions of
 * rows of high-degree nodes pass 2^32, and a wrapped count would undersize the output.
 */
export function entryCount(queue: u32, count: u32, dirs: u32): f64 {
  let total: u64 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const node = word(queue + i);
    const dir = directory(node);
    if ((dirs & 1) != 0) total += <u64>blockLength(dir, 0);
    if ((dirs & 2) != 0) total += <u64>blockLength(dir, 1);
  }
  return <f64>total;
}

/**
 * One navigation step for rows: for each node of rows[0..count) in order, its distinct
 * neighbours over visible entries (as expandLayer), ascending, are appended to out[..].
 * With `seen` != 0 a neighbour already in the set `seen` (zeroed by the caller) is left
 * out and the others are added (first occurrence per level): with `seenShift` == 0 the set
 * is one byte per node ID at byte address seen * 4, else an open-addressing table of
 * 2^(32 - seenShift) words holding node + 1 (0 = empty), as findEntry. Returns the count
 * written; `out` must hold entryCount(rows, count, dirs) words (`outCap`: what it holds; a
 * row past it traps) and the table that many nodes with room to spare.
 */
export function expandRows(rows: u32, count: u32, dirs: u32, label: i32, at: u32, out: u32, outCap: u32, seen: u32, seenShift: u32): u32 {
  const seenBytes: usize = <usize>seen << 2;
  const mask: u32 = <u32>0xffffffff >> seenShift;
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
        if (end >= outCap) unreachable(); // never (entryCount bounds it): a trap, not a write past `out`
        setWord(out + end, next);
        end++;
      }
    }
    if (!ordered) sortWords(out + start, end - start);
    // Distinct per row, then (with a set) first occurrence per level.
    let kept = start;
    for (let j = start; j < end; j++) {
      const next = word(out + j);
      if (j > start && next == word(out + j - 1)) continue;
      if (seen != 0) {
        if (seenShift == 0) {
          if (load<u8>(seenBytes + next) != 0) continue;
          store<u8>(seenBytes + next, 1);
        } else {
          const key = next + 1;
          let h = (next * HASH) >> seenShift;
          let found = false;
          while (true) {
            const k = word(seen + h);
            if (k == key) { found = true; break; }
            if (k == 0) { setWord(seen + h, key); break; }
            h = (h + 1) & mask;
          }
          if (found) continue;
        }
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
 * order, each one's visible neighbours (as expandLayer) without forward reach, ascending,
 * get forward reach `mark` and predecessor `node` and are appended at queue[end..) (`end` =
 * `to` on the first call). `temp` holds `tempCap` words for one node's list. Returns the
 * new end; after a node whose list reached a node with a backward reach, end | MET; before
 * a node it has no room for (table, queue or temp), end | ROOM (H_NEED: what it needs).
 */
export function expandOrdered(queue: u32, from: u32, to: u32, end: u32, queueCap: u32, dirs: u32, label: i32, at: u32, search: u32, mark: u32, temp: u32, tempCap: u32): u32 {
  const table = word(search + H_TABLE), shift = word(search + H_SHIFT), room = word(search + H_ROOM);
  let count = word(search + H_COUNT);
  for (let i = from; i < to; i++) {
    const node = word(queue + i);
    const dir = directory(node);
    const len0: u32 = (dirs & 1) != 0 ? blockLength(dir, 0) : 0;
    const len1: u32 = (dirs & 2) != 0 ? blockLength(dir, 1) : 0;
    const need = len0 + len1;
    if (need > tempCap) return stopForRoom(search, count, i, need, end);
    let n: u32 = 0;
    for (let d: u32 = 0; d < 2; d++) {
      const len = d == 0 ? len0 : len1;
      if (len == 0) continue;
      const block = blockStart(dir, d);
      const stop = block + len * ADJ_WORDS;
      for (let p = block; p < stop; p += ADJ_WORDS) {
        if (!visible(p, at, label)) continue;
        const next = word(p + A_NEIGHBOR);
        const e = findEntry(table, shift, next);
        if (e == 0 || word(e + E_REACH) == 0) {
          setWord(temp + n, next);
          n++;
        }
      }
    }
    // This node adds at most its n candidates (a hub's mostly reached list asks for little).
    if (count + n > room || end + n > queueCap) return stopForRoom(search, count, i, n, end);
    if (n > 1) sortWords(temp, n);
    let met = false;
    for (let k: u32 = 0; k < n; k++) {
      const next = word(temp + k);
      let e = claimEntry(table, shift, next);
      if ((e & NEW) != 0) {
        e ^= NEW;
        count++;
      } else if (word(e + E_REACH) != 0) continue; // a parallel edge: already appended
      setWord(e + E_REACH, mark);
      setWord(e + E_PRED_F, node);
      setWord(queue + end, next);
      end++;
      if (word(e + E_REACH + 1) != 0) met = true;
    }
    if (met) {
      setWord(search + H_COUNT, count);
      return end | MET;
    }
  }
  setWord(search + H_COUNT, count);
  return end;
}

/** 1 when one of `node`'s visible successors (as expandLayer) has backward reach `reach`. */
export function hasSuccessorAt(node: u32, dirs: u32, label: i32, at: u32, search: u32, reach: u32): u32 {
  const table = word(search + H_TABLE), shift = word(search + H_SHIFT);
  const dir = directory(node);
  for (let d: u32 = 0; d < 2; d++) {
    if ((dirs & (1 << d)) == 0) continue;
    const len = blockLength(dir, d);
    const block = blockStart(dir, d);
    const stop = block + len * ADJ_WORDS;
    for (let p = block; p < stop; p += ADJ_WORDS) {
      if (!visible(p, at, label)) continue;
      const e = findEntry(table, shift, word(p + A_NEIGHBOR));
      if (e != 0 && word(e + E_REACH + 1) == reach) return 1;
    }
  }
  return 0;
}

// Node marks for counts over navigation (src/exec/navigation-counts.ts): one bit per node
// ID at word `marks`, in this thread's scratch. Every bit is clear between calls: a kernel
// that sets marks either clears them before it returns or appends each node it marked to a
// list the caller clears with clearMarks (also when the query stops between calls), so the
// bitset is reused across queries without being zeroed. Only neighbours of visible entries
// are marked, and those are nodes of the snapshot, below the bit count JS sized it for.

/** Set `node`'s mark; true when it was clear. */
// @ts-ignore: decorator
@inline function markNode(marks: u32, node: u32): bool {
  const at: usize = (<usize>(marks + (node >> 5))) << 2;
  const bits = load<u32>(at);
  const bit: u32 = 1 << (node & 31);
  if ((bits & bit) != 0) return false;
  store<u32>(at, bits | bit);
  return true;
}

// @ts-ignore: decorator
@inline function unmarkNode(marks: u32, node: u32): void {
  const at: usize = (<usize>(marks + (node >> 5))) << 2;
  store<u32>(at, load<u32>(at) & ~(<u32>1 << (node & 31)));
}

/**
 * Distinct visible neighbours (snapshot `at`, label `label` or any when < 0) of `node` in
 * the directions of `dirs` (bit 0 out, bit 1 in): the length of neighbors() in
 * src/exec/navigation.ts, without building the list. Leaves the marks clear.
 */
export function distinctNeighbourCount(node: u32, dirs: u32, label: i32, at: u32, marks: u32): u32 {
  const dir = directory(node);
  const len0: u32 = (dirs & 1) != 0 ? blockLength(dir, 0) : 0;
  const len1: u32 = (dirs & 2) != 0 ? blockLength(dir, 1) : 0;
  const block0: u32 = len0 != 0 ? blockStart(dir, 0) : 0;
  const block1: u32 = len1 != 0 ? blockStart(dir, 1) : 0;
  let distinct: u32 = 0;
  for (let d: u32 = 0; d < 2; d++) {
    const len = d == 0 ? len0 : len1;
    const block = d == 0 ? block0 : block1;
    for (let p = block, stop = block + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
      if (visible(p, at, label) && markNode(marks, word(p + A_NEIGHBOR))) distinct++;
    }
  }
  // The same entries again (the lengths and offsets loaded above, so the same visible set).
  for (let d: u32 = 0; d < 2; d++) {
    const len = d == 0 ? len0 : len1;
    const block = d == 0 ? block0 : block1;
    for (let p = block, stop = block + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
      if (visible(p, at, label)) unmarkNode(marks, word(p + A_NEIGHBOR));
    }
  }
  return distinct;
}

/**
 * One level of distinct walk ends: the visible neighbours (as distinctNeighbourCount) of
 * nodes rows[0..count) that are not marked yet are marked and appended to out[..], in the
 * order found. Returns how many were appended; `out` must have room for every node the
 * level can still add (at most the bit count of the marks, at most the entries scanned).
 * The caller clears the marks of out[..) once the level is complete.
 */
export function reachUnmarked(rows: u32, count: u32, dirs: u32, label: i32, at: u32, marks: u32, out: u32, outCap: u32): u32 {
  let end: u32 = 0;
  for (let group: u32 = 0; group < count; group += TOUCH_GROUP) {
    const groupEnd = min(group + TOUCH_GROUP, count);
    touchBlocks(rows, group, groupEnd, dirs);
    for (let i = group; i < groupEnd; i++) {
      const dir = directory(word(rows + i));
      for (let d: u32 = 0; d < 2; d++) {
        if ((dirs & (1 << d)) == 0) continue;
        const len = blockLength(dir, d);
        if (len == 0) continue;
        const block = blockStart(dir, d);
        for (let p = block, stop = block + len * ADJ_WORDS; p < stop; p += ADJ_WORDS) {
          if (!visible(p, at, label)) continue;
          const next = word(p + A_NEIGHBOR);
          if (!markNode(marks, next)) continue;
          if (end >= outCap) unreachable(); // never (the caller's room bounds it): a trap, not a write past `out`
          setWord(out + end, next);
          end++;
        }
      }
    }
  }
  return end;
}

/** Sum of the words touchBlocks loaded (kept so the loads stay). */
let blocksTouched: u32 = 0;
/** Nodes whose blocks touchBlocks loads together before they are scanned. */
const TOUCH_GROUP: u32 = 8;
/** Words per cache line (64 bytes). */
const LINE_WORDS: u32 = 16;

/**
 * Load one word of every cache line of the blocks of nodes rows[from..to) (directions
 * `dirs`), as read protocol allows (length, then offset, then entries below the length).
 * The loads do not depend on each other, so the processor overlaps their cache misses,
 * where the scan that follows would take them one node after another (a block's address
 * is known only once the previous node is scanned). What they read is summed into a
 * global, so they are not optimized away. Never into the caller's memory: its output can
 * be full (its next word then belongs to another allocation of the shared heap, a block or
 * a directory chunk the writer owns).
 */
function touchBlocks(rows: u32, from: u32, to: u32, dirs: u32): void {
  let sum: u32 = 0;
  for (let i = from; i < to; i++) {
    const dir = directory(word(rows + i));
    for (let d: u32 = 0; d < 2; d++) {
      if ((dirs & (1 << d)) == 0) continue;
      const len = blockLength(dir, d);
      if (len == 0) continue;
      const block = blockStart(dir, d);
      for (let p = block, stop = block + len * ADJ_WORDS; p < stop; p += LINE_WORDS) sum += word(p);
    }
  }
  blocksTouched += sum;
}

/** Keep the first occurrence of each of ids[0..count), in place and in order, marking them; returns how many were kept. */
export function keepUnmarked(ids: u32, count: u32, marks: u32): u32 {
  let kept: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const id = word(ids + i);
    if (!markNode(marks, id)) continue;
    setWord(ids + kept, id);
    kept++;
  }
  return kept;
}

/** Clear the marks of ids[0..count). */
export function clearMarks(ids: u32, count: u32, marks: u32): void {
  for (let i: u32 = 0; i < count; i++) unmarkNode(marks, word(ids + i));
}
