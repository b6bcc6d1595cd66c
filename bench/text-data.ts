// Documents and queries for the text benchmarks (bench/text.ts, bench/search-server.ts):
// paragraphs of the Debian manual pages installed on the machine, or a seeded Zipf corpus
// where there are none, and queries drawn from a corpus' vocabulary.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { analyze } from '../src/text/index.js';
import { rng } from './seeded-random.js';

export const MAN_ROOT = '/usr/share/man';

/** Plain text of a troff manual page: requests dropped, escapes blanked, paragraphs split. */
function manParagraphs(troff: string, out: string[], max: number): void {
  let para: string[] = [];
  const flush = (): void => {
    const text = para.join(' ').replace(/\s+/g, ' ').trim();
    para = [];
    if (text.length > 0 && (text.match(/\p{L}+/gu)?.length ?? 0) >= 5) out.push(text);
  };
  for (const raw of troff.split('\n')) {
    if (out.length >= max) return;
    if (raw.startsWith('.\\"') || raw.startsWith('\'\\"')) continue;
    let line = raw;
    if (line.startsWith('.') || line.startsWith('\'')) {
      const m = /^[.'](\S+)\s*(.*)$/.exec(line);
      const req = m?.[1] ?? '';
      if (/^(PP|P|LP|SH|SS|TP|IP|sp|br|HP|RS|RE|TH|nf|fi|in|ti|ne|ad|na|hy|nh|de|ds|if|ie|el|so|ft|ps|vs|TS|TE|EX|EE|UR|UE|ME|MT)$/.test(req)) flush();
      if (/^(SH|SS|TH|B|I|BR|RB|IR|RI|BI|IB|SM|SB|IP|TP|UR|MT|OP)$/.test(req)) line = m?.[2] ?? '';
      else continue;
    }
    line = line.replace(/\\(\(..|\[[^\]]*\]|\*\(..|\*\[[^\]]*\]|\*.|f\[[^\]]*\]|f\(..|f.|s[-+]?\d+|[nkgw]\S|.)/g, (e) => (e === '\\-' ? '-' : ' ')).replace(/"/g, ' ');
    if (line.trim().length === 0) { flush(); continue; }
    para.push(line);
  }
  flush();
}

export function manCorpus(max: number): string[] | null {
  if (!existsSync(MAN_ROOT)) return null;
  const out: string[] = [];
  for (const section of ['man1', 'man2', 'man3', 'man4', 'man5', 'man6', 'man7', 'man8']) {
    const dir = join(MAN_ROOT, section);
    if (!existsSync(dir)) continue;
    for (const f of readdirSync(dir).sort()) {
      if (out.length >= max) return out;
      if (!f.endsWith('.gz')) continue;
      let text: string;
      try {
        text = gunzipSync(readFileSync(join(dir, f))).toString('utf8');
      } catch {
        continue; // a symlink to a missing page, a damaged file
      }
      if (text.startsWith('.so ')) continue; // an alias page
      manParagraphs(text, out, max);
    }
  }
  return out.length >= max ? out : null;
}


/** Seeded Zipf(1) corpus over a 50k-word vocabulary, 5-80 words per document. */
export function zipfCorpus(n: number): string[] {
  const random = rng(20261126);
  const vocab = 50_000;
  const words = Array.from({ length: vocab }, (_, i) => `w${i.toString(36)}`);
  const out: string[] = [];
  for (let d = 0; d < n; d++) {
    const len = 5 + Math.floor(random() * 76);
    const parts: string[] = [];
    for (let i = 0; i < len; i++) parts.push(words[Math.min(vocab - 1, Math.floor(Math.exp(random() * Math.log(vocab + 1)) - 1))]!);
    out.push(parts.join(' '));
  }
  return out;
}

/**
 * `count` queries of `terms` distinct terms each from the corpus vocabulary, with mixed
 * frequencies: each term from the 100 most frequent, ranks 100-5000, or rarer with df >= 2,
 * one third each.
 */
export function queriesOf(count: number, docs: string[], terms: number, seed: number): string[] {
  const df = new Map<string, number>();
  for (const d of docs) for (const t of new Set(analyze(d, 'standard'))) df.set(t, (df.get(t) ?? 0) + 1);
  const ranked = [...df.entries()].filter(([, n]) => n >= 2).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([t]) => t);
  const random = rng(seed);
  const pick = (): string => {
    const c = Math.floor(random() * 3);
    const [lo, hi] = c === 0 ? [0, 100] : c === 1 ? [100, 5000] : [5000, ranked.length];
    return ranked[Math.min(ranked.length - 1, lo + Math.floor(random() * Math.max(1, hi - lo)))]!;
  };
  const out: string[] = [];
  for (let q = 0; q < count; q++) {
    const parts: string[] = [];
    while (parts.length < terms) {
      const t = pick();
      if (!parts.includes(t)) parts.push(t);
    }
    out.push(parts.join(' '));
  }
  return out;
}
