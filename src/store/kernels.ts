// The AssemblyScript kernels (assembly/kernels.ts, built to build/kernels.wasm), one
// instance per thread and topology memory. Loaded lazily, so a thread that never runs a
// kernel never compiles the module.
import { instantiateOnSharedMemory } from './wasm-module.js';

export interface TraversalKernels {
  expandLayer(queue: number, from: number, to: number, end: number, queueCap: number, dirs: number, label: number, at: number, search: number, side: number, mark: number): number;
  entryCount(queue: number, count: number, dirs: number): number;
  expandRows(rows: number, count: number, dirs: number, label: number, at: number, out: number, outCap: number, seen: number, seenShift: number): number;
  expandOrdered(queue: number, from: number, to: number, end: number, queueCap: number, dirs: number, label: number, at: number, search: number, mark: number, temp: number, tempCap: number): number;
  hasSuccessorAt(node: number, dirs: number, label: number, at: number, search: number, reach: number): number;
  rehash(search: number, table: number, shift: number): void;
  distinctNeighbourCount(node: number, dirs: number, label: number, at: number, marks: number): number;
  reachUnmarked(rows: number, count: number, dirs: number, label: number, at: number, marks: number, out: number, outCap: number): number;
  keepUnmarked(ids: number, count: number, marks: number): number;
  clearMarks(ids: number, count: number, marks: number): void;
}

/** Traversals run on the kernels (default) or on their JS twins (differential tests, SVCDB_TRAVERSAL_KERNEL=js). */
let kernelsOn = process.env.SVCDB_TRAVERSAL_KERNEL !== 'js';
export const traversalKernelsOn = (): boolean => kernelsOn;
export function setTraversalKernel(on: boolean): void {
  kernelsOn = on;
}

export function instantiateKernels(memory: WebAssembly.Memory): TraversalKernels {
  return instantiateOnSharedMemory<TraversalKernels>('kernels.wasm', memory);
}
