// The part of the WebAssembly JS API svcdb uses. TypeScript declares it only in the DOM
// libraries, which a Node program should not pull in.
declare namespace WebAssembly {
  interface MemoryDescriptor { initial: number; maximum?: number; shared?: boolean }
  class Memory {
    constructor(descriptor: MemoryDescriptor);
    readonly buffer: ArrayBuffer | SharedArrayBuffer;
    grow(deltaPages: number): number;
  }
  class Module {
    constructor(bytes: BufferSource);
  }
  type ImportValue = Memory | ((...args: never[]) => unknown) | number;
  type Imports = Record<string, Record<string, ImportValue>>;
  class Instance {
    constructor(module: Module, imports?: Imports);
    readonly exports: Record<string, unknown>;
  }
}
