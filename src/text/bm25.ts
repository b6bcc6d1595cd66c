// BM25 arithmetic (docs/text.md §5), shared by search() and bm25() so that a `*_within`
// score equals the source search's score bit for bit. Everything is IEEE double precision in
// one fixed order; only the final sum is rounded to single precision:
//   avgdl  = totalLength / docs
//   idf_t  = ln(1 + (docs - df_t + 0.5) / (df_t + 0.5))
//   w_t    = idf_t * ((tf_t * (k1 + 1)) / (tf_t + k1 * (1 - b + b * (dl / avgdl))))
//   score  = fround(w_t1 + w_t2 + ...)   (left to right, query terms in first-occurrence order,
//                                         terms the document lacks skipped)
export const K1 = 1.2;
export const B = 0.75;

export const idfOf = (docs: number, df: number): number => Math.log(1 + (docs - df + 0.5) / (df + 0.5));

export const termWeight = (idf: number, tf: number, dl: number, avgdl: number): number =>
  idf * ((tf * (K1 + 1)) / (tf + K1 * (1 - B + B * (dl / avgdl))));

/**
 * Upper bounds are inflated by this factor before they are compared with a single-precision
 * threshold: a bound computed with rounded double arithmetic may undershoot the true value
 * by a few ulps, and a sum more than one f32 ulp (2^-23 relative) below the threshold can no
 * longer round up to it. 2^-16 covers both with room to spare.
 */
export const BOUND_INFLATION = 1 + 2 ** -16;

export interface TermStats {
  docs: number;
  totalLength: number;
  df: number[];
}

/** BM25 of one document's term frequencies against termStats, with exactly search()'s arithmetic. */
export function bm25(tfs: readonly number[], docLength: number, stats: TermStats): number {
  if (tfs.length !== stats.df.length) throw new RangeError(`bm25 of ${tfs.length} term frequencies against ${stats.df.length} document frequencies`);
  if (stats.docs <= 0 || stats.totalLength <= 0) return 0;
  const avgdl = stats.totalLength / stats.docs;
  let sum = 0;
  for (let i = 0; i < tfs.length; i++) {
    const tf = tfs[i]!;
    if (tf <= 0) continue;
    sum += termWeight(idfOf(stats.docs, stats.df[i]!), tf, docLength, avgdl);
  }
  return Math.fround(sum);
}
