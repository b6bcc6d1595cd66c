// Seeded vector data for the vector benchmark and tests: a Gaussian mixture (clusters of
// unit-variance noise around centres drawn with spread `spread`), queries drawn from the same
// mixture with another seed (so they are not in the data).

import { rng } from './seeded-random.js';

/** Standard normal draws (Box-Muller). */
export function gaussian(next: () => number): () => number {
  let spare: number | null = null;
  return () => {
    if (spare !== null) { const s = spare; spare = null; return s; }
    const u = 1 - next(), v = next();
    const r = Math.sqrt(-2 * Math.log(u));
    spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  };
}

export interface MixtureSpec {
  dimension: number;
  clusters: number;
  /** Standard deviation of the cluster centres (the noise around a centre has 1). */
  spread: number;
  seed: number;
}

/** `count` vectors of the mixture, drawn with `seed` (the centres come from spec.seed). */
export function mixture(spec: MixtureSpec, count: number, seed: number): Float32Array {
  const g0 = gaussian(rng(spec.seed));
  const centres = new Float32Array(spec.clusters * spec.dimension);
  for (let i = 0; i < centres.length; i++) centres[i] = g0() * spec.spread;
  const pick = rng(seed ^ 0x5bd1e995);
  const g = gaussian(rng(seed));
  const out = new Float32Array(count * spec.dimension);
  for (let i = 0; i < count; i++) {
    const c = Math.floor(pick() * spec.clusters);
    for (let d = 0; d < spec.dimension; d++) out[i * spec.dimension + d] = centres[c * spec.dimension + d]! + g();
  }
  return out;
}
