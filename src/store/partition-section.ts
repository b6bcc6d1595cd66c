// The snapshot sections `vectors` and `texts`: every vector and text index partition (a
// vector graph, src/vector/; a text partition, src/text/) as of the snapshot's cut, so a
// restart loads them instead of building them again.
//
// Layout (little-endian): u32 magic ("SVV1" for vectors, "STP1" for texts: the format
// version), u32 count, then per partition an f64 byte length, then the partitions' bytes in
// that order (each is its engine's export, which carries its own format version and
// checksum). The index catalog section says which index and partition each belongs to, by
// its position here.
import { SvcError } from '../protocol/errors.js';
import { exportGraph } from '../vector/export.js';
import type { VectorMemory } from '../vector/memory.js';
import { exportPartition, type TextMemory } from '../text/index.js';

export const VECTOR_SECTION_MAGIC = 0x31565653; // "SVV1"
export const TEXT_SECTION_MAGIC = 0x31505453; // "STP1"

/** One partition as the writer saw it at a cut: its root and its point (document) count then. */
export interface PartitionCut { readonly root: number; readonly points: number }

/** The vector and text partitions a snapshot carries, in the catalog's order. */
export interface PartitionsAtCut { readonly vectors: readonly PartitionCut[]; readonly texts: readonly PartitionCut[] }

const corrupt = (name: string, what: string) => new SvcError('storage_error', `storage error: snapshot section \`${name}\` ${what}`);

function sectionChunks(magic: number, exported: Uint8Array[][]): Uint8Array[] {
  const header = new DataView(new ArrayBuffer(8 + 8 * exported.length));
  header.setUint32(0, magic, true);
  header.setUint32(4, exported.length, true);
  exported.forEach((chunks, i) => header.setFloat64(8 + 8 * i, chunks.reduce((n, c) => n + c.byteLength, 0), true));
  return [new Uint8Array(header.buffer), ...exported.flat()];
}

/** The `vectors` section's bytes, in chunks (read from the live memory, any thread). */
export function vectorSectionChunks(memory: VectorMemory, graphs: readonly PartitionCut[], cutEpoch: number): Uint8Array[] {
  return sectionChunks(VECTOR_SECTION_MAGIC, graphs.map((g) => exportGraph(memory, g.root, g.points, cutEpoch)));
}

/** The `texts` section's bytes, in chunks (read from the live memory, any thread). */
export function textSectionChunks(memory: TextMemory, partitions: readonly PartitionCut[], cutEpoch: number): Uint8Array[] {
  return sectionChunks(TEXT_SECTION_MAGIC, partitions.map((p) => exportPartition(memory, p.root, p.points, cutEpoch)));
}

/** The partitions' bytes of a loaded section, in order (views of `bytes`). */
export function splitPartitionSection(name: 'vectors' | 'texts', bytes: Uint8Array): Uint8Array[] {
  if (bytes.byteLength < 8) throw corrupt(name, `is truncated (${bytes.byteLength} bytes)`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, true) !== (name === 'vectors' ? VECTOR_SECTION_MAGIC : TEXT_SECTION_MAGIC)) throw corrupt(name, 'has an unknown format (magic)');
  const count = view.getUint32(4, true);
  if (8 + 8 * count > bytes.byteLength) throw corrupt(name, `announces ${count} partitions but is only ${bytes.byteLength} bytes`);
  const out: Uint8Array[] = [];
  let at = 8 + 8 * count;
  for (let i = 0; i < count; i++) {
    const length = view.getFloat64(8 + 8 * i, true);
    if (!Number.isSafeInteger(length) || length < 0 || at + length > bytes.byteLength) throw corrupt(name, `partition ${i} has a bad length ${length}`);
    out.push(bytes.subarray(at, at + length));
    at += length;
  }
  if (at !== bytes.byteLength) throw corrupt(name, `has ${bytes.byteLength - at} bytes after its partitions`);
  return out;
}
