// Exports of the search engines' partitions (src/vector/export.ts, src/text/export.ts) are
// streams of u32 words cut into bounded chunks, with a CRC-32 of every chunk's bytes in a
// 4-byte trailer: the writer of that stream, and the join tests and small stores use.
import { crc32 } from 'node:zlib';

export class WordChunkWriter {
  readonly chunks: Uint8Array[] = [];
  private buf: Uint32Array;
  private used = 0;
  private crc = 0;

  constructor(private readonly chunkWords: number) {
    this.buf = new Uint32Array(chunkWords);
  }

  /** Room for `words` more words in the current chunk (a record never straddles chunks unless it is larger than one). */
  room(words: number): void {
    if (this.used + words > this.chunkWords && this.used > 0) this.flush();
    if (words > this.buf.length) this.buf = new Uint32Array(words);
  }

  word(w: number): void {
    if (this.used === this.buf.length) this.flush();
    this.buf[this.used++] = w;
  }

  flush(): void {
    if (this.used === 0) return;
    const bytes = new Uint8Array(this.buf.buffer.slice(0, this.used * 4));
    this.crc = crc32(bytes, this.crc);
    this.chunks.push(bytes);
    this.used = 0;
  }

  /** The chunks, and the trailer with the CRC-32 of everything before it. */
  finish(): Uint8Array[] {
    this.flush();
    const trailer = new Uint8Array(4);
    new DataView(trailer.buffer).setUint32(0, this.crc >>> 0, true);
    this.chunks.push(trailer);
    return this.chunks;
  }
}

/** The chunks of an export as one array (tests, small partitions). */
export function joinChunks(chunks: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) { out.set(c, at); at += c.length; }
  return out;
}
