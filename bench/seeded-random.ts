// One seeded generator for the benchmarks and the tests (mulberry32): small, fast, and the
// same sequence on every machine, so a failing seed can be replayed.

/** Uniform draws in [0, 1) from `seed`. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
