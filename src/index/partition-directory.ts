// The tenant partitions of one vector or text index as readers find them: a hash table in
// the topology memory (tenant value -> the partition's root in the vector or text memory),
// which the writer extends in place, so a new tenant costs one entry, not a new catalog
// view holding every partition (that made each new tenant's write cost grow with the
// number of tenants: 18 ms at 10k tenants).
//
// Layout (u32 words). Header (fixed for the index's life): [MAGIC, table]. Table: [count,
// capacity, entries x capacity], capacity a power of two, linear probing; an entry is
// [state, k0, k1, root, tenantAt, tenantBytes]: state 0 empty, 1 used; k0:k1 the tenant's
// partition key hash (index/partitions.ts; 0:0 for an unpartitioned index's one entry);
// tenantAt / tenantBytes the tenant value's record-codec bytes in a block of their own.
//
// Publish protocol (docs/architecture.md §3): an entry's words and its tenant bytes are
// written before its state is Atomics.stored (release); readers Atomics.load the state
// (acquire) before reading the rest. A root is replaced (compaction) with Atomics.store and
// read with Atomics.load. A grown table is filled whole before the header's table word is
// Atomics.stored; the old table is retired like a superseded adjacency block, so a read
// that loaded it (after its beginRead) reads it intact.
import { valuesEqual } from '../protocol/compare.js';
import type { Value } from '../protocol/value.js';
import { SvcError } from '../protocol/errors.js';
import type { Topology } from '../store/topology.js';
import { decodeTenant, encodeTenant, partitionKey } from './partitions.js';

const MAGIC = 0x52494450; // 'PDIR'
const H_MAGIC = 0, H_TABLE = 1, HEADER_WORDS = 2;
const T_COUNT = 0, T_CAPACITY = 1, T_ENTRIES = 2;
const E_STATE = 0, E_K0 = 1, E_K1 = 2, E_ROOT = 3, E_TENANT_AT = 4, E_TENANT_BYTES = 5, ENTRY_WORDS = 6;
const CAPACITY_MIN = 8;

/** The partition key of a tenant value as two words (the key string of partitions.ts, hashed). */
function keyWords(tenant: Value | undefined): [number, number] {
  if (tenant === undefined) return [0, 0];
  const key = partitionKey(tenant);
  // FNV-1a twice over the key text (its equality hash, or a bucket name): collisions only cost probes.
  let a = 0x811c9dc5, b = 0x01000193;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
  }
  return [a >>> 0, (b | 1) >>> 0];
}

const tableWords = (capacity: number) => T_ENTRIES + capacity * ENTRY_WORDS;

export class PartitionDirectory {
  private constructor(private readonly topology: Topology, readonly at: number) {}

  /** Writer: an empty directory. */
  static create(topology: Topology): PartitionDirectory {
    const at = topology.allocateWords(HEADER_WORDS);
    const table = PartitionDirectory.newTable(topology, CAPACITY_MIN);
    const words = topology.cover(at + HEADER_WORDS);
    words[at + H_TABLE] = table;
    Atomics.store(words, at + H_MAGIC, MAGIC);
    return new PartitionDirectory(topology, at);
  }

  /** Any thread (inside a read): the directory at `at`. */
  static attach(topology: Topology, at: number): PartitionDirectory {
    if (Atomics.load(topology.cover(at + HEADER_WORDS), at + H_MAGIC) !== MAGIC) {
      throw new SvcError('internal_error', `internal error: no partition directory at topology word ${at}`);
    }
    return new PartitionDirectory(topology, at);
  }

  private static newTable(topology: Topology, capacity: number): number {
    const size = tableWords(capacity);
    const table = topology.allocateWords(size);
    const words = topology.cover(table + size);
    words.fill(0, table, table + size);
    words[table + T_CAPACITY] = capacity;
    return table;
  }

  private table(): number {
    return Atomics.load(this.topology.cover(this.at + HEADER_WORDS), this.at + H_TABLE);
  }

  /** Readers: the root of `tenant`'s partition (undefined: the index is unpartitioned), or 0 when it has none. */
  find(tenant: Value | undefined): number {
    const [k0, k1] = keyWords(tenant);
    const table = this.table();
    let words = this.topology.cover(table + T_ENTRIES);
    const capacity = words[table + T_CAPACITY]!;
    words = this.topology.cover(table + tableWords(capacity));
    const mask = capacity - 1;
    for (let i = k0 & mask, probes = 0; probes < capacity; i = (i + 1) & mask, probes++) {
      const e = table + T_ENTRIES + i * ENTRY_WORDS;
      if (Atomics.load(words, e + E_STATE) === 0) return 0;
      if (words[e + E_K0] !== k0 || words[e + E_K1] !== k1) continue;
      if (tenant !== undefined && !valuesEqual(this.tenantAt(words[e + E_TENANT_AT]!, words[e + E_TENANT_BYTES]!), tenant)) continue;
      return Atomics.load(words, e + E_ROOT);
    }
    return 0;
  }

  private tenantAt(at: number, bytes: number): Value {
    const words = this.topology.cover(at + ((bytes + 3) >>> 2));
    // Copied out of shared memory (record bytes are decoded from a private copy).
    return decodeTenant(new Uint8Array(words.buffer, at * 4, bytes).slice());
  }

  /** Writer: a new partition of `tenant` with its root (the caller knows the tenant has none yet). */
  add(tenant: Value | undefined, root: number): void {
    let table = this.table();
    let words = this.topology.cover(table + T_ENTRIES);
    const count = words[table + T_COUNT]!, capacity = words[table + T_CAPACITY]!;
    // Load at most one half: probes stay short.
    if ((count + 1) * 2 > capacity) table = this.grow(table, capacity * 2);
    let tenantAt = 0, tenantBytes = 0;
    if (tenant !== undefined) {
      const bytes = encodeTenant(tenant);
      tenantBytes = bytes.byteLength;
      tenantAt = this.topology.allocateWords(Math.max(1, (tenantBytes + 3) >>> 2));
      words = this.topology.cover(tenantAt + ((tenantBytes + 3) >>> 2));
      new Uint8Array(words.buffer, tenantAt * 4, tenantBytes).set(bytes);
    }
    const [k0, k1] = keyWords(tenant);
    this.put(table, k0, k1, root, tenantAt, tenantBytes);
  }

  private put(table: number, k0: number, k1: number, root: number, tenantAt: number, tenantBytes: number): void {
    const words = this.topology.cover(table + T_ENTRIES);
    const capacity = words[table + T_CAPACITY]!;
    const all = this.topology.cover(table + tableWords(capacity));
    const mask = capacity - 1;
    let i = k0 & mask;
    while (all[table + T_ENTRIES + i * ENTRY_WORDS + E_STATE] !== 0) i = (i + 1) & mask;
    const e = table + T_ENTRIES + i * ENTRY_WORDS;
    all[e + E_K0] = k0;
    all[e + E_K1] = k1;
    all[e + E_ROOT] = root;
    all[e + E_TENANT_AT] = tenantAt;
    all[e + E_TENANT_BYTES] = tenantBytes;
    Atomics.store(all, e + E_STATE, 1);
    all[table + T_COUNT] = all[table + T_COUNT]! + 1;
  }

  /** A table of `capacity` holding every entry of `old`, published; `old` retired. */
  private grow(old: number, capacity: number): number {
    const table = PartitionDirectory.newTable(this.topology, capacity);
    const oldCapacity = this.topology.cover(old + T_ENTRIES)[old + T_CAPACITY]!;
    for (let i = 0; i < oldCapacity; i++) {
      const words = this.topology.cover(old + tableWords(oldCapacity));
      const e = old + T_ENTRIES + i * ENTRY_WORDS;
      if (words[e + E_STATE] === 0) continue;
      this.put(table, words[e + E_K0]!, words[e + E_K1]!, words[e + E_ROOT]!, words[e + E_TENANT_AT]!, words[e + E_TENANT_BYTES]!);
    }
    Atomics.store(this.topology.cover(this.at + HEADER_WORDS), this.at + H_TABLE, table);
    this.topology.retireWords(old, tableWords(oldCapacity));
    return table;
  }

  /** Writer: the partition whose root is `from` has `to` now (a compacted graph). */
  replaceRoot(from: number, to: number): void {
    const table = this.table();
    const capacity = this.topology.cover(table + T_ENTRIES)[table + T_CAPACITY]!;
    const words = this.topology.cover(table + tableWords(capacity));
    for (let i = 0; i < capacity; i++) {
      const e = table + T_ENTRIES + i * ENTRY_WORDS;
      if (words[e + E_STATE] !== 0 && words[e + E_ROOT] === from) {
        Atomics.store(words, e + E_ROOT, to);
        return;
      }
    }
    throw new SvcError('internal_error', `internal error: no partition with root ${from} in the directory`);
  }

  /** Writer: give every block back (a dropped index), once no read can hold them (topology retire). */
  retire(): void {
    const table = this.table();
    const capacity = this.topology.cover(table + T_ENTRIES)[table + T_CAPACITY]!;
    const words = this.topology.cover(table + tableWords(capacity));
    for (let i = 0; i < capacity; i++) {
      const e = table + T_ENTRIES + i * ENTRY_WORDS;
      if (words[e + E_STATE] !== 0 && words[e + E_TENANT_AT] !== 0) this.topology.retireWords(words[e + E_TENANT_AT]!, Math.max(1, (words[e + E_TENANT_BYTES]! + 3) >>> 2));
    }
    this.topology.retireWords(table, tableWords(capacity));
    this.topology.retireWords(this.at, HEADER_WORDS);
  }
}
