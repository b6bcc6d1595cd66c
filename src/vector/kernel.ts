// The vector kernels (assembly/vector.ts, built to build/vector.wasm): one instance per
// thread and vector memory (VectorMemory.kernelInstance), loaded lazily. Every kernel has a
// JS twin (twin.ts) with the same arithmetic; SVCDB_VECTOR_KERNEL=js or setVectorKernel(false)
// runs the twins.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SvcError } from '../protocol/errors.js';
import type { VectorMemory } from './memory.js';
import * as twin from './twin.js';

/** Entry points shared by the module and the twins; all offsets are u32 word offsets. */
export interface VectorKernels {
  distance(metric: number, a: number, an: number, b: number, bn: number, dim: number): number;
  norm(a: number, dim: number): number;
  search(root: number, s: number, k: number, ef: number, snapshot: number, count: number, entry: number): number;
  searchExact(root: number, s: number, k: number, snapshot: number, count: number): number;
  visibleCount(root: number, snapshot: number, count: number): number;
  distances(root: number, s: number, n: number): void;
  insert(root: number, s: number, p: number, entry: number, top: number): void;
}

let kernelsOn = process.env.SVCDB_VECTOR_KERNEL !== 'js';
export const vectorKernelsOn = (): boolean => kernelsOn;
/** Vector kernels (true, default) or their JS twins (differential tests, SVCDB_VECTOR_KERNEL=js). */
export function setVectorKernel(on: boolean): void {
  kernelsOn = on;
}

const twins: VectorKernels = twin;

let compiled: WebAssembly.Module | null = null;

function wasmBytes(): Uint8Array {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let up = 0; up < 4; up++) {
    const file = join(dir, 'build', 'vector.wasm');
    if (existsSync(file)) return readFileSync(file);
    dir = dirname(dir);
  }
  throw new SvcError('internal_error', 'internal error: build/vector.wasm is missing (run npm run build)');
}

/** A module that would write data segments into the shared memory must never be instantiated. */
function hasDataSegments(bytes: Uint8Array): boolean {
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

function instantiate(memory: WebAssembly.Memory): VectorKernels {
  if (compiled === null) {
    const bytes = wasmBytes();
    if (hasDataSegments(bytes)) throw new SvcError('internal_error', 'internal error: vector.wasm has data segments');
    compiled = new WebAssembly.Module(bytes);
  }
  const abort = (): never => { throw new SvcError('internal_error', 'internal error: vector kernel abort'); };
  const instance = new WebAssembly.Instance(compiled, { env: { memory, abort } });
  const exports = instance.exports as unknown as Partial<VectorKernels>;
  // Kernels the module does not have yet run as twins.
  return { ...twins, ...exports } as VectorKernels;
}

/** The kernels to run on `vm` now (module or twins); the views are current for the twins. */
export function kernelsFor(vm: VectorMemory, on: boolean = kernelsOn): VectorKernels {
  twin.bindViews(vm.u32, vm.f32);
  if (on) return (vm.kernelInstance ??= instantiate(vm.memory)) as VectorKernels;
  return twins;
}
