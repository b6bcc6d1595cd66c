// The vector kernels (assembly/vector.ts, built to build/vector.wasm): one instance per
// thread and vector memory (VectorMemory.kernelInstance), loaded lazily. Every kernel has a
// JS twin (twin.ts) with the same arithmetic; SVCDB_VECTOR_KERNEL=js or setVectorKernel(false)
// runs the twins.
import { instantiateOnSharedMemory } from '../store/wasm-module.js';
import type { VectorMemory } from './memory.js';
import * as twin from './twin.js';

/** Entry points shared by the module and the twins; all offsets are u32 word offsets. */
export interface VectorKernels {
  distance(metric: number, a: number, an: number, b: number, bn: number, dim: number): number;
  norm(a: number, dim: number): number;
  search(root: number, s: number, k: number, ef: number, snapshot: number, count: number, entry: number): number;
  searchExact(root: number, s: number, k: number, snapshot: number, count: number): number;
  visibleCount(root: number, snapshot: number, count: number): number;
  withinTop(root: number, elements: number, s: number, n: number, snapshot: number, count: number, k: number): number;
  insert(root: number, s: number, p: number, entry: number, top: number): void;
  quantize(root: number, p: number): void;
}

let kernelsOn = process.env.SVCDB_VECTOR_KERNEL !== 'js';
export const vectorKernelsOn = (): boolean => kernelsOn;
/** Vector kernels (true, default) or their JS twins (differential tests, SVCDB_VECTOR_KERNEL=js). */
export function setVectorKernel(on: boolean): void {
  kernelsOn = on;
}

const twins: VectorKernels = twin;

function instantiate(memory: WebAssembly.Memory): VectorKernels {
  const exports = instantiateOnSharedMemory<Partial<VectorKernels>>('vector.wasm', memory);
  // Kernels the module does not have yet run as twins.
  return { ...twins, ...exports } as VectorKernels;
}

/** The kernels to run on `vm` now (module or twins); the views are current for the twins. */
export function kernelsFor(vm: VectorMemory, on: boolean = kernelsOn): VectorKernels {
  twin.bindViews(vm.u32, vm.f32);
  if (on) return (vm.kernelInstance ??= instantiate(vm.memory)) as VectorKernels;
  return twins;
}
