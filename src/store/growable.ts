// Growable SharedArrayBuffers. Views created without a length track the buffer's
// length, so reader threads see growth without new views (notes/measured.md).
import { SvcError } from '../protocol/errors.js';

export function sharedBuffer(initialBytes: number, maxBytes: number): SharedArrayBuffer {
  return new SharedArrayBuffer(initialBytes, { maxByteLength: maxBytes });
}

/** Grow `sab` (at least doubling) so it holds `bytesNeeded`; storage_error at its maximum. */
export function ensureBytes(sab: SharedArrayBuffer, bytesNeeded: number, what: string): void {
  if (bytesNeeded <= sab.byteLength) return;
  if (bytesNeeded > sab.maxByteLength) {
    throw new SvcError('storage_error', `storage error: ${what} is full (${sab.maxByteLength} bytes)`);
  }
  let next = Math.max(sab.byteLength * 2, 4096);
  while (next < bytesNeeded) next *= 2;
  sab.grow(Math.min(next, sab.maxByteLength));
}
