// AssemblyScript kernels over regions of the store's shared memory.
// Placeholder export so the build pipeline is exercised; real kernels land with
// the traversal and vector work (issue 3).
export function sumU32(ptr: usize, len: i32): u64 {
  let acc: u64 = 0;
  for (let i = 0; i < len; i++) acc += <u64>load<u32>(ptr + (<usize>i << 2));
  return acc;
}
