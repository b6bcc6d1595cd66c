// Analyzers (docs/text.md §1): text -> terms, in order. The same function runs at insert,
// at query time and in the lead's `*_within` scoring, so a document's length (its number
// of terms) and its term frequencies are the same everywhere.
import stem from 'wink-porter2-stemmer';
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';

export type Analyzer = 'standard' | 'standard_stem_en' | 'whitespace_lowercase';
export const ANALYZERS: readonly Analyzer[] = ['standard', 'standard_stem_en', 'whitespace_lowercase'];
export const analyzerCode = (a: Analyzer): number => {
  const i = ANALYZERS.indexOf(a);
  if (i < 0) throw new SvcError('invalid_query', `unknown text analyzer ${String(a)}`);
  return i;
};

// Letters (Unicode Alphabetic, which includes the marks that are part of letters in most
// scripts) and numbers (Nd, Nl, No); everything else separates terms.
const STANDARD = /[\p{Alphabetic}\p{N}]+/gu;
const WHITESPACE = /\S+/gu;

/**
 * A term too long to be a word (a base64 blob, a URL run together) is dropped, not an
 * error: a document must stay indexable whatever its text holds (docs/text.md §1).
 */
const fits = (term: string): boolean =>
  term.length * 3 <= limits.textTermBytesMax || Buffer.byteLength(term, 'utf8') <= limits.textTermBytesMax;

// Porter2 stems of words seen (Map lookups are ~10x faster than stemming); cleared when full.
const stems = new Map<string, string>();
function stemOf(word: string): string {
  let s = stems.get(word);
  if (s === undefined) {
    if (stems.size >= limits.textStemCacheEntriesMax) stems.clear();
    s = stem(word);
    // The stemmer may return '' for odd input; keep the word then (a term is never empty).
    if (s.length === 0) s = word;
    stems.set(word, s);
  }
  return s;
}

/** Terms of a text under an analyzer, in order (standard: split on non-alphanumeric, Unicode-aware, lower-case). */
export function analyze(text: string, analyzer: Analyzer): string[] {
  const out: string[] = [];
  const re = analyzer === 'whitespace_lowercase' ? WHITESPACE : STANDARD;
  if (analyzer !== 'standard' && analyzer !== 'standard_stem_en' && analyzer !== 'whitespace_lowercase') analyzerCode(analyzer);
  const tokens = text.match(re);
  if (tokens === null) return out;
  for (let i = 0; i < tokens.length; i++) {
    let t = tokens[i]!.toLowerCase();
    if (!fits(t)) continue;
    if (analyzer === 'standard_stem_en') t = stemOf(t);
    out.push(t);
  }
  return out;
}

/** FNV-1a over UTF-16 code units: the term dictionary's hash (the same in every thread). */
export function termHash(term: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < term.length; i++) {
    h ^= term.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * A query's distinct terms in first-occurrence order: what a search scores (BM25 sums over
 * distinct terms, indexes.md §7.4). More than limits.textQueryTermsMax: 500 invalid_query.
 */
export function distinctTerms(query: string, analyzer: Analyzer): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const t of analyze(query, analyzer)) if (!seen.has(t)) { seen.add(t); out.push(t); }
  if (out.length > limits.textQueryTermsMax) {
    throw new SvcError('invalid_query', `db error: Query error: a text query of ${out.length} distinct terms is over the limit of ${limits.textQueryTermsMax}`);
  }
  return out;
}
