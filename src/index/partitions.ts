// Tenant partitions of a search index (vector and text, indexes.md §2 `tenant_property`):
// one physical structure per tenant value, found by the equality key of the value
// (index/keys.ts: values equal under values.md §7.1 share a key) and told apart by the
// values themselves, so a hash collision never mixes tenants. An unpartitioned index has
// one partition, with no tenant.
import { valuesEqual } from '../protocol/compare.js';
import type { Value } from '../protocol/value.js';
import { decodeRecord, encodeRecord } from '../store/record-codec.js';
import { equalityKey, type IndexKey } from './keys.js';

const scratchKey: IndexKey = { k0: 0, k1: 0 };

/** The partition key of a tenant value; values the equality key refuses share one bucket. */
export function partitionKey(tenant: Value): string {
  try {
    const k = equalityKey(tenant, false, scratchKey);
    return k === null ? 'null' : `${k.k0}:${k.k1}`;
  } catch {
    return 'other';
  }
}

export const encodeTenant = (v: Value): Uint8Array => encodeRecord({ keys: [0], values: [v] });
export const decodeTenant = (bytes: Uint8Array): Value => decodeRecord(bytes).values[0]!;

/** What every partition carries: its key and tenant value (undefined: the index is not partitioned). */
export interface TenantPartition {
  readonly key: string;
  readonly tenant: Value | undefined;
  readonly tenantBytes: Uint8Array | null;
}

/** The partitions of one index on the writer, in creation order (their position is their number). */
export class TenantPartitions<P extends TenantPartition> {
  readonly list: P[] = [];
  private readonly byKey = new Map<string, number[]>();

  /** The position of the tenant's partition, or -1. */
  find(tenant: Value | undefined): number {
    const list = this.byKey.get(tenant === undefined ? '' : partitionKey(tenant));
    if (list === undefined) return -1;
    for (const i of list) if (tenant === undefined || valuesEqual(this.list[i]!.tenant!, tenant)) return i;
    return -1;
  }

  /** Add a partition; returns its position. */
  add(partition: P): number {
    const index = this.list.length;
    this.list.push(partition);
    const list = this.byKey.get(partition.key);
    if (list === undefined) this.byKey.set(partition.key, [index]);
    else list.push(index);
    return index;
  }
}

/** Key and encoded tenant of a new partition. */
export function partitionIdentity(tenant: Value | undefined): TenantPartition {
  return { key: tenant === undefined ? '' : partitionKey(tenant), tenant, tenantBytes: tenant === undefined ? null : encodeTenant(tenant) };
}

/** Writer: element slot -> (item, partition) of one index, -1 for none (typed arrays grown by doubling). */
export class SlotMap {
  private items = new Int32Array(0);
  private partitions = new Int32Array(0);

  get(slot: number): number {
    return slot < this.items.length ? this.items[slot]! : -1;
  }

  partition(slot: number): number {
    return slot < this.partitions.length ? this.partitions[slot]! : 0;
  }

  set(slot: number, item: number, partition: number): void {
    if (slot >= this.items.length) {
      let size = Math.max(1024, this.items.length);
      while (size <= slot) size *= 2;
      const items = new Int32Array(size).fill(-1);
      items.set(this.items);
      const partitions = new Int32Array(size);
      partitions.set(this.partitions);
      this.items = items;
      this.partitions = partitions;
    }
    this.items[slot] = item;
    this.partitions[slot] = partition;
  }
}
