// Partition export and import (docs/text.md §7): the partition as of a cut, written from
// the live memory by any thread while the writer keeps inserting, and loaded back without
// re-analysing any text (statistics chains are rebuilt from the documents' epochs).
//
// Format (version EXPORT_VERSION), little-endian u32 words:
//   header [magic 'STX1', version, header words (16), analyzer, positions (0/1), docs, 0 x 10]
//   per doc  [created, deleted, element, length] (an export writes deleted 0: a document not
//            visible at the cut is written never visible: 0, 0, element, 0)
//   per term [length in UTF-16 code units (>= 1), the code units two per word (low half
//            first, a zero half pads), postings n, n x (doc, tf, positions: tf words)]
//   [0]      (a term of length 0 ends the terms)
//   trailer  [crc32 of every byte before it]
// Terms appear in term-id order, only those with a posting of a document visible at the
// cut; postings of those documents only, by ascending doc. Chunks are at most limits.textExportChunkBytes; their concatenation is the
// export.
import { crc32 } from 'node:zlib';
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';
import { ANALYZERS } from './analyze.js';
import {
  B_CAP, B_HEADER, BLOCK_SHIFT, D_CREATED, D_DELETED, D_ELEMENT, D_LENGTH, L_COUNT, L_DIR, L_WORDS,
  P_ANALYZER, P_DOCS, P_MAGIC, P_POSITIONS, P_TERMS, PARTITION_MAGIC, T_LEN, T_LIST, T_TEXT,
} from './layout.js';
import type { TextMemory } from './memory.js';
import { docAt, postingWords, termAt, TextPartition, type PartitionImage } from './partition.js';
import { joinChunks, WordChunkWriter } from '../word-chunks.js';
export { joinChunks };

export const EXPORT_MAGIC = 0x31585453; // 'STX1' read as little-endian bytes
export const EXPORT_VERSION = 1;
const HEADER_WORDS = 16;

/**
 * The partition at `root` as of a cut (docsAtCut = pointCount() taken by the writer between
 * batches, cutEpoch = the store epoch then), from the live memory on any thread: docs >=
 * docsAtCut left out, deletions after cutEpoch written as 0, docs not visible at the cut
 * (created after it, never, or deleted at or before it) written never visible without
 * postings. Purges (maintain's purgeBefore) must stay at or below cutEpoch while it runs.
 */
export function exportPartition(memory: TextMemory, root: number, docsAtCut: number, cutEpoch: number): Uint8Array[] {
  const slot = memory.beginRead();
  try {
    memory.cover();
    let u = memory.u32;
    if (Atomics.load(u, root + P_MAGIC) !== PARTITION_MAGIC) throw new SvcError('internal_error', `internal error: no text partition at word ${root}`);
    const docs = Atomics.load(u, root + P_DOCS);
    if (!(Number.isInteger(docsAtCut) && docsAtCut >= 0 && docsAtCut <= docs)) {
      throw new SvcError('internal_error', `internal error: text export cut at ${docsAtCut} documents of ${docs}`);
    }
    const terms = Atomics.load(u, root + P_TERMS);
    // Terms below P_TERMS, and what they lead to, may lie past this thread's views.
    memory.cover();
    u = memory.u32;
    const u16 = memory.u16;
    const positions = u[root + P_POSITIONS] === 1;
    const w = new WordChunkWriter(Math.max(1024, Math.floor(limits.textExportChunkBytes / 4)));
    w.word(EXPORT_MAGIC); w.word(EXPORT_VERSION); w.word(HEADER_WORDS);
    w.word(u[root + P_ANALYZER]!); w.word(positions ? 1 : 0); w.word(docsAtCut);
    for (let i = 6; i < HEADER_WORDS; i++) w.word(0);
    // Only documents visible at the cut keep their postings; the others (created after it,
    // rolled back, or deleted at or before it) keep their record as never visible (element,
    // length 0). What they held is invisible at the cut and after it, and maintain() may
    // have compacted it away meanwhile, so leaving it out keeps the bytes a function of the
    // state at the cut. An import serves the cut and later snapshots.
    const kept = new Uint8Array(docsAtCut);
    for (let d = 0; d < docsAtCut; d++) {
      const rec = docAt(u, root, d);
      const created = u[rec + D_CREATED]!, deleted = u[rec + D_DELETED]!;
      const live = created !== 0 && created <= cutEpoch && (deleted === 0 || deleted > cutEpoch);
      kept[d] = live ? 1 : 0;
      w.word(live ? created : 0);
      w.word(0);
      w.word(u[rec + D_ELEMENT]!);
      w.word(live ? u[rec + D_LENGTH]! : 0);
    }
    // A list, directory or block published after the cover above (compaction, growth) may
    // lie past the views: re-made then (this loop keeps no view across a check).
    const need = (at: number, words: number): void => {
      if (at + words > u.length) { memory.cover(); u = memory.u32; }
    };
    const blockAt = (dir: number, j: number): number => {
      const blk = Atomics.load(u, dir + j);
      need(blk, B_HEADER);
      need(blk, B_HEADER + u[blk + B_CAP]! * postingWords(positions));
      return blk;
    };
    for (let t = 0; t < terms; t++) {
      const trec = termAt(u, root, t);
      const list = Atomics.load(u, trec + T_LIST);
      if (list === 0) continue; // removed (maintain()): no visible document holds it
      need(list, L_WORDS);
      const count = Atomics.load(u, list + L_COUNT);
      if (count === 0) continue;
      const dir = Atomics.load(u, list + L_DIR);
      need(dir, ((count - 1) >>> BLOCK_SHIFT) + 1);
      // Postings below the cut are a prefix of the list (ascending docs); of those, the kept docs'.
      let prefix = 0, n = 0;
      for (let j = 0; j << BLOCK_SHIFT < count; j++) {
        const blk = blockAt(dir, j);
        const end = Math.min(count - (j << BLOCK_SHIFT), 1 << BLOCK_SHIFT);
        let i = 0;
        for (; i < end; i++) {
          const doc = u[blk + B_HEADER + i]!;
          if (doc >= docsAtCut) break;
          n += kept[doc]!;
        }
        prefix += i;
        if (i < end) break;
      }
      if (n === 0) continue;
      const len = u[trec + T_LEN]!, text = 2 * u[trec + T_TEXT]!;
      w.word(len);
      for (let i = 0; i < len; i += 2) w.word(u16[text + i]! | ((i + 1 < len ? u16[text + i + 1]! : 0) << 16));
      w.word(n);
      for (let p = 0; p < prefix; p++) {
        const j = p >>> BLOCK_SHIFT, off = p & ((1 << BLOCK_SHIFT) - 1);
        const blk = blockAt(dir, j);
        const cap = u[blk + B_CAP]!;
        const doc = u[blk + B_HEADER + off]!;
        if (kept[doc] === 0) continue;
        const tf = u[blk + B_HEADER + cap + off]!;
        w.word(doc);
        w.word(tf);
        if (positions) {
          const at = u[blk + B_HEADER + 3 * cap + off]!;
          for (let i = 0; i < tf; i++) w.word(u[at + i]!);
        }
      }
    }
    w.word(0);
    return w.finish();
  } finally {
    memory.endRead(slot);
    // Exports run on threads that may be replaced (the snapshot thread): keep no slot.
    if (slot >= 0) memory.releaseReaderSlot();
  }
}

function corrupt(msg: string): never {
  throw new SvcError('storage_error', `text index image is corrupt: ${msg}`);
}

/** Load an export into a memory (writer side, no re-analysis). Corrupt input: storage_error. */
export function importPartition(memory: TextMemory, bytes: Uint8Array): TextPartition {
  if (!(bytes instanceof Uint8Array)) corrupt('not bytes');
  if (bytes.length < (HEADER_WORDS + 2) * 4 || bytes.length % 4 !== 0) corrupt(`${bytes.length} bytes`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const stored = view.getUint32(bytes.length - 4, true);
  if ((crc32(bytes.subarray(0, bytes.length - 4)) >>> 0) !== stored) corrupt('checksum mismatch');
  const words = (bytes.length - 4) / 4;
  let at = 0;
  const next = (): number => {
    if (at >= words) corrupt('truncated');
    return view.getUint32(4 * at++, true);
  };
  const magic = next(), version = next(), headerWords = next();
  if (magic !== EXPORT_MAGIC) corrupt('bad magic');
  if (version !== EXPORT_VERSION) corrupt(`format version ${version}, this build reads ${EXPORT_VERSION}`);
  if (headerWords !== HEADER_WORDS) corrupt(`header of ${headerWords} words`);
  const analyzer = next(), positions = next(), docs = next();
  if (analyzer >= ANALYZERS.length) corrupt(`analyzer ${analyzer}`);
  if (positions > 1) corrupt(`positions flag ${positions}`);
  if (docs > limits.textDocumentsPerPartitionMax || docs * 4 > words) corrupt(`${docs} documents in ${bytes.length} bytes`);
  for (let i = 6; i < HEADER_WORDS; i++) if (next() !== 0) corrupt('reserved header word set');
  const created = new Uint32Array(docs), deleted = new Uint32Array(docs), element = new Uint32Array(docs), length = new Uint32Array(docs);
  for (let d = 0; d < docs; d++) {
    created[d] = next(); deleted[d] = next(); element[d] = next(); length[d] = next();
    if (created[d] === 0 ? deleted[d] !== 0 : deleted[d] !== 0 && deleted[d]! < created[d]!) corrupt(`document ${d} created at ${created[d]} and deleted at ${deleted[d]}`);
    if (length[d]! > limits.textDocumentTermsMax) corrupt(`document ${d} of ${length[d]} terms`);
  }
  const termTexts: string[] = [];
  const postingStarts: number[] = []; // word index of each term's first posting in the bytes
  const postingCounts: number[] = [];
  const seen = new Set<string>();
  const tfSum = new Float64Array(docs);
  const codes: number[] = [];
  for (;;) {
    const len = next();
    if (len === 0) break;
    if (termTexts.length >= limits.textTermsPerPartitionMax) corrupt('too many terms');
    if (len > limits.textTermBytesMax) corrupt(`a term of ${len} code units`);
    codes.length = 0;
    for (let i = 0; i < len; i += 2) {
      const w = next();
      codes.push(w & 0xffff);
      if (i + 1 < len) codes.push(w >>> 16);
      else if (w >>> 16 !== 0) corrupt('term padding set');
    }
    const text = String.fromCharCode(...codes);
    if (seen.has(text)) corrupt(`term ${JSON.stringify(text)} twice`);
    seen.add(text);
    const n = next();
    if (n === 0 || n > docs) corrupt(`a term with ${n} postings over ${docs} documents`);
    termTexts.push(text);
    postingStarts.push(at);
    postingCounts.push(n);
    let prev = -1;
    for (let p = 0; p < n; p++) {
      const doc = next(), tf = next();
      if (doc >= docs || doc <= prev) corrupt(`posting of document ${doc} after ${prev} (${docs} documents)`);
      if (tf === 0 || tf > length[doc]!) corrupt(`term frequency ${tf} in document ${doc} of ${length[doc]} terms`);
      prev = doc;
      tfSum[doc]! += tf;
      if (positions === 1) {
        for (let i = 0; i < tf; i++) if (next() >= length[doc]!) corrupt(`a position past document ${doc}'s end`);
      }
    }
  }
  if (at !== words) corrupt(`${words - at} words after the last term`);
  for (let d = 0; d < docs; d++) if (tfSum[d] !== length[d]) corrupt(`document ${d} of length ${length[d]} has ${tfSum[d]} term occurrences`);
  const image: PartitionImage = {
    analyzer: ANALYZERS[analyzer]!, positions: positions === 1,
    created, deleted, element, length, termTexts, postingStarts, postingCounts,
    word: (i: number) => view.getUint32(4 * i, true),
  };
  return TextPartition.fromImage(memory, image);
}

