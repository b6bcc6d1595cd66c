// Loading the AssemblyScript modules (build/*.wasm, `npm run build:wasm`) that run on a
// shared WebAssembly memory: found from this file's place in src/ or dist/src/, read when
// this module loads (with the JavaScript that calls them), refused when they carry data
// segments (instantiation would write them into the shared memory, over the store),
// compiled once per thread and instantiated per memory.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SvcError } from '../protocol/errors.js';

const compiled = new Map<string, WebAssembly.Module>();

/** build/<file> of the package (this file runs from src/store or dist/src/store). */
function wasmBytes(file: string): Uint8Array {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let up = 0; up < 4; up++) {
    const path = join(dir, 'build', file);
    if (existsSync(path)) return readFileSync(path);
    dir = dirname(dir);
  }
  throw new SvcError('internal_error', `internal error: build/${file} is missing (run npm run build)`);
}

/** Whether a module has a data section with segments. */
export function hasDataSegments(bytes: Uint8Array): boolean {
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

/**
 * The modules' bytes as they were when this thread loaded its JavaScript. Read on first use
 * instead, a thread that loaded its JavaScript before a rebuild and ran its first kernel
 * after it called the new module with the old arguments: a fuzz run against servers whose
 * dist/ was rebuilt under them got `unreachable` on every neighbour step, on every thread,
 * until restart (an upgrade in place does the same).
 */
const bytesAtLoad = new Map<string, Uint8Array | Error>();
for (const file of ['kernels.wasm', 'vector.wasm']) {
  try {
    bytesAtLoad.set(file, wasmBytes(file));
  } catch (err) {
    bytesAtLoad.set(file, err as Error); // not built: said when a kernel is first needed
  }
}

/** An instance of build/<file> over `memory` (its exports, typed by the caller). */
export function instantiateOnSharedMemory<T>(file: string, memory: WebAssembly.Memory): T {
  let module = compiled.get(file);
  if (module === undefined) {
    const loaded = bytesAtLoad.get(file) ?? wasmBytes(file);
    if (loaded instanceof Error) throw loaded;
    const bytes = loaded;
    if (hasDataSegments(bytes)) throw new SvcError('internal_error', `internal error: ${file} has data segments`);
    compiled.set(file, module = new WebAssembly.Module(bytes));
  }
  const abort = (): never => { throw new SvcError('internal_error', `internal error: ${file} aborted`); };
  return new WebAssembly.Instance(module, { env: { memory, abort } }).exports as unknown as T;
}
