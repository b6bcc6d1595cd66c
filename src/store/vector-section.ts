// The snapshot's `vectors` section: every vector index partition's graph (src/vector/) as of
// the snapshot's cut, so a restart loads the graphs instead of building them again.
//
// Layout (little-endian): u32 magic "SVV1" (the format version), u32 graph count, then per
// graph an f64 byte length, then the graphs' bytes in that order (each is exportGraph's
// output, which carries its own format version and checks). The index catalog section says
// which index and partition each graph belongs to, by its position here.
import { SvcError } from '../protocol/errors.js';
import { exportGraph } from '../vector/export.js';
import type { VectorMemory } from '../vector/memory.js';

export const VECTOR_SECTION_MAGIC = 0x31565653; // "SVV1"

/** One graph as the writer saw it at a cut: its root and its point count then. */
export interface VectorGraphCut { readonly root: number; readonly points: number }

const corrupt = (what: string) => new SvcError('storage_error', `storage error: snapshot section \`vectors\` ${what}`);

/** The section's bytes, in chunks: header, then each graph's chunks (read from the live memory, any thread). */
export function vectorSectionChunks(memory: VectorMemory, graphs: readonly VectorGraphCut[], cutEpoch: number): Uint8Array[] {
  const exported = graphs.map((g) => exportGraph(memory, g.root, g.points, cutEpoch));
  const header = new DataView(new ArrayBuffer(8 + 8 * graphs.length));
  header.setUint32(0, VECTOR_SECTION_MAGIC, true);
  header.setUint32(4, graphs.length, true);
  exported.forEach((chunks, i) => header.setFloat64(8 + 8 * i, chunks.reduce((n, c) => n + c.byteLength, 0), true));
  return [new Uint8Array(header.buffer), ...exported.flat()];
}

/** The graphs' bytes of a loaded section, in order (views of `bytes`). */
export function splitVectorSection(bytes: Uint8Array): Uint8Array[] {
  if (bytes.byteLength < 8) throw corrupt(`is truncated (${bytes.byteLength} bytes)`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, true) !== VECTOR_SECTION_MAGIC) throw corrupt('has an unknown format (magic)');
  const count = view.getUint32(4, true);
  if (8 + 8 * count > bytes.byteLength) throw corrupt(`announces ${count} graphs but is only ${bytes.byteLength} bytes`);
  const out: Uint8Array[] = [];
  let at = 8 + 8 * count;
  for (let i = 0; i < count; i++) {
    const length = view.getFloat64(8 + 8 * i, true);
    if (!Number.isSafeInteger(length) || length < 0 || at + length > bytes.byteLength) throw corrupt(`graph ${i} has a bad length ${length}`);
    out.push(bytes.subarray(at, at + length));
    at += length;
  }
  if (at !== bytes.byteLength) throw corrupt(`has ${bytes.byteLength - at} bytes after its graphs`);
  return out;
}
