// The AssemblyScript kernels (assembly/kernels.ts, built to build/kernels.wasm), one
// instance per thread and topology memory. Loaded lazily, so a thread that never runs a
// kernel never compiles the module.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SvcError } from '../protocol/errors.js';
import { DIR_OUT, type DirWord } from './topology.js';

export interface TraversalKernels {
  expandLayer(queue: number, from: number, to: number, end: number, queueCap: number, dirs: number, label: number, at: number, search: number, side: number, mark: number): number;
  entryCount(queue: number, count: number, dirs: number): number;
  expandRows(rows: number, count: number, dirs: number, label: number, at: number, out: number, seen: number, seenShift: number): number;
  expandOrdered(queue: number, from: number, to: number, end: number, queueCap: number, dirs: number, label: number, at: number, search: number, mark: number, temp: number, tempCap: number): number;
  hasSuccessorAt(node: number, dirs: number, label: number, at: number, search: number, reach: number): number;
  rehash(search: number, table: number, shift: number): void;
}

/** The kernels' `dirs` argument: bit 0 out, bit 1 in. */
export const kernelDirections = (words: readonly DirWord[]): number => words.reduce<number>((bits, w) => bits | (w === DIR_OUT ? 1 : 2), 0);

/** Traversals run on the kernels (default) or on their JS twins (differential tests, SVCDB_TRAVERSAL_KERNEL=js). */
let kernelsOn = process.env.SVCDB_TRAVERSAL_KERNEL !== 'js';
export const traversalKernelsOn = (): boolean => kernelsOn;
export function setTraversalKernel(on: boolean): void {
  kernelsOn = on;
}

let compiled: WebAssembly.Module | null = null;

/** build/kernels.wasm of the package (this file runs from src/store or dist/src/store). */
function wasmBytes(): Uint8Array {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let up = 0; up < 4; up++) {
    const file = join(dir, 'build', 'kernels.wasm');
    if (existsSync(file)) return readFileSync(file);
    dir = dirname(dir);
  }
  throw new SvcError('internal_error', 'internal error: build/kernels.wasm is missing (run npm run build)');
}

/** A module that would write data segments into the shared memory must never be instantiated. */
function hasDataSegments(bytes: Uint8Array): boolean {
  // Sections follow the 8-byte header as [id u8][size LEB128][payload]; id 11 = data.
  let at = 8;
  while (at < bytes.length) {
    const id = bytes[at++]!;
    let size = 0, shift = 0, byte: number;
    do { byte = bytes[at++]!; size |= (byte & 0x7f) << shift; shift += 7; } while (byte & 0x80);
    if (id === 11 && size > 1) return true;
    at += size;
  }
  return false;
}

export function instantiateKernels(memory: WebAssembly.Memory): TraversalKernels {
  if (compiled === null) {
    const bytes = wasmBytes();
    if (hasDataSegments(bytes)) throw new SvcError('internal_error', 'internal error: kernels.wasm has data segments');
    compiled = new WebAssembly.Module(bytes);
  }
  const abort = (): never => { throw new SvcError('internal_error', 'internal error: kernel abort'); };
  const instance = new WebAssembly.Instance(compiled, { env: { memory, abort } });
  return instance.exports as unknown as TraversalKernels;
}
