// Element IDs written into the query text (`{"ids":[12345]}`): a client that looks nodes up
// by ID that way sends a distinct body every time, so the plan cache (exec/request.ts),
// keyed on text, would miss every one and pay JSON parse, decode and plan per request.
// Here a body is cut into its shape (the text with every integer token replaced by a hole)
// and its integers, and a shape whose integers all land in `ids` lists of the decoded AST
// (found once per shape by decoding a probe text, below) can take a new body's integers
// into the cached AST instead of being decoded again.
//
// Why that is exact: two bodies with the same shape key differ only in integer tokens at
// the holes (the argument is at shapeKey). Decoding reads an `ids` member's integers only
// to range-check them (0..2^64-1) and store them; planning reads only how many there are
// and whether one repeats (plan.ts checkRef, isAtMostOne). So a body whose integers are in
// range and repeat no ID within one list decodes and plans to the cached AST with the new
// IDs in place; any other body is decoded from scratch, which reports the exact error.
import type { Request } from './ast.js';

const QUOTE = 0x22, BACKSLASH = 0x5c, MINUS = 0x2d, ZERO = 0x30, NINE = 0x39;
const U64_MAX = (1n << 64n) - 1n;
/** More holes than this: the body is not treated as a shape (binding them would cost more than it saves). */
const HOLES_MAX = 64;

/**
 * Characters of a bare word outside strings: number tokens, `true`/`false`/`null`, and in
 * a malformed text whatever else is there. A hole is a whole word that is an integer token,
 * so a hole's neighbours are never word characters.
 */
function isWordChar(c: number): boolean {
  return (c >= ZERO && c <= NINE) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x7a) || c === MINUS || c === 0x2b || c === 0x2e;
}

/** Whether text[start, end) is a JSON integer token: `-?(0|[1-9][0-9]*)`. */
function isIntegerToken(text: string, start: number, end: number): boolean {
  let i = text.charCodeAt(start) === MINUS ? start + 1 : start;
  if (i >= end) return false;
  const first = text.charCodeAt(i);
  if (first === ZERO) return i + 1 === end;
  for (; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c < ZERO || c > NINE) return false;
  }
  return true;
}

/** Where the holes of the last shapeKey() are: hole k is text[holeStarts[k], holeEnds[k]). */
const holeStarts = new Int32Array(HOLES_MAX);
const holeEnds = new Int32Array(HOLES_MAX);
/** Holes found by the last shapeKey() that returned a key. */
export let holeCount = 0;

/**
 * The shape key of a body's text ('S' + the text with each integer token outside strings
 * replaced by U+0000), or null when the text has more than HOLES_MAX integers, an
 * unterminated string, or a raw control character outside strings (no JSON text has one).
 *
 * Two texts with equal keys differ only in the integers at the holes: strings are kept with
 * their quotes and escapes and holes hold neither, so both texts split into strings and the
 * rest at the same places; outside strings a U+0000 of the key can only be a hole (a raw
 * one is refused), and a hole is a whole word, so the other text has a whole integer word
 * there too.
 */
export function shapeKey(text: string): string | null {
  let key = 'S';
  let last = 0;
  let holes = 0;
  const n = text.length;
  for (let i = 0; i < n;) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = stringEnd(text, i);
      if (i < 0) return null;
    } else if (isWordChar(c)) {
      let j = i + 1;
      while (j < n && isWordChar(text.charCodeAt(j))) j++;
      if (isIntegerToken(text, i, j)) {
        if (holes === HOLES_MAX) return null;
        holeStarts[holes] = i;
        holeEnds[holes] = j;
        holes++;
        key += text.slice(last, i) + '\u0000';
        last = j;
      }
      i = j;
    } else if (c < 0x20 && c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) {
      return null;
    } else i++;
  }
  holeCount = holes;
  return last === 0 ? key + text : key + text.slice(last);
}

/**
 * The index after the string whose opening quote is at i, or -1 when it does not end: after
 * the first quote not escaped (an even run of backslashes before it). indexOf skips the
 * string's characters much faster than a loop over them.
 */
function stringEnd(s: string, i: number): number {
  for (let quote = s.indexOf('"', i + 1); quote >= 0; quote = s.indexOf('"', quote + 1)) {
    let backslashes = 0;
    while (s.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes++;
    if ((backslashes & 1) === 0) return quote + 1;
  }
  return -1;
}

/**
 * The value of hole k of the last shapeKey() as an element ID, or -1n when it is not one
 * (negative, `-0`, beyond 2^64-1): decoding would reject it or read it otherwise.
 */
export function holeId(text: string, k: number): bigint {
  const start = holeStarts[k]!, end = holeEnds[k]!;
  if (text.charCodeAt(start) === MINUS) return -1n;
  const digits = end - start;
  if (digits <= 15) {
    let n = 0;
    for (let i = start; i < end; i++) n = n * 10 + (text.charCodeAt(i) - ZERO);
    return BigInt(n);
  }
  if (digits > 20) return -1n;
  const id = BigInt(text.slice(start, end));
  return id > U64_MAX ? -1n : id;
}

/** The last shapeKey()'s text cut at its holes: holeCount + 1 pieces, for matchShape(). */
export function shapePieces(text: string): string[] {
  const pieces: string[] = [];
  let last = 0;
  for (let k = 0; k < holeCount; k++) {
    pieces.push(text.slice(last, holeStarts[k]));
    last = holeEnds[k]!;
  }
  pieces.push(text.slice(last));
  return pieces;
}

/**
 * Whether `text` has the shape whose pieces (shapePieces) are given, i.e. shapeKey(text)
 * would be that shape's key; then its holes are set as shapeKey() sets them. Compares the
 * pieces in place, without building or hashing a key: the plan cache tries the shape seen
 * last this way first, since one shape usually follows another. Exact: the text is the
 * pieces with an integer token between each two, each a whole word: a hole was a whole word
 * where the pieces came from, so no piece starts or ends with a word character (nor is one
 * between two holes empty), and the digits read here are followed by the next piece.
 */
export function matchShape(text: string, pieces: readonly string[]): boolean {
  const holes = pieces.length - 1;
  const n = text.length;
  let at = 0;
  for (let k = 0; k < holes; k++) {
    const piece = pieces[k]!;
    if (!hasAt(text, at, piece)) return false;
    at += piece.length;
    const start = at;
    if (text.charCodeAt(at) === MINUS) at++;
    const first = at;
    while (at < n && text.charCodeAt(at) >= ZERO && text.charCodeAt(at) <= NINE) at++;
    if (at === first || (text.charCodeAt(first) === ZERO && at - first > 1)) return false;
    holeStarts[k] = start;
    holeEnds[k] = at;
  }
  const tail = pieces[holes]!;
  if (n - at !== tail.length || !hasAt(text, at, tail)) return false;
  holeCount = holes;
  return true;
}

/**
 * Whether `part` is in `text` at `at`. A slice compared with === (a memory comparison of
 * flat strings) measured 3-10x faster than text.startsWith(part, at), which optimized code
 * compares character by character (~400 ns for a 200-character client query text).
 */
export function hasAt(text: string, at: number, part: string): boolean {
  return text.slice(at, at + part.length) === part;
}

/** Where hole k of the last shapeKey() or matchShape() starts and ends in its text. */
export function holeStart(k: number): number {
  return holeStarts[k]!;
}
export function holeEnd(k: number): number {
  return holeEnds[k]!;
}

/** The integer of hole k of the last shapeKey() or matchShape() (`-0` is 0). */
export function holeInteger(text: string, k: number): bigint {
  const start = holeStarts[k]!, end = holeEnds[k]!;
  const negative = text.charCodeAt(start) === MINUS;
  const digitsStart = negative ? start + 1 : start;
  if (end - digitsStart > 15) return BigInt(text.slice(start, end));
  let n = 0;
  for (let i = digitsStart; i < end; i++) n = n * 10 + (text.charCodeAt(i) - ZERO);
  return BigInt(negative ? -n : n);
}

/**
 * A probe of the last shapeKey()'s text: hole k holds 2^64-1-k. Every hole holds a distinct
 * integer that no other token of the text can decode to, so each can be found in the AST.
 */
export function probeText(text: string): string {
  let out = '';
  let last = 0;
  for (let k = 0; k < holeCount; k++) {
    out += text.slice(last, holeStarts[k]) + String(U64_MAX - BigInt(k));
    last = holeEnds[k]!;
  }
  return out + text.slice(last);
}

/** Where the holes of a shape go in its AST: hole k is element index[k] of list[k]. */
export interface IdSlots {
  /** The `ids` list of the probe's AST that hole k went into, and its index there. */
  readonly list: readonly bigint[][];
  readonly index: Int32Array;
  /** The lists with two or more elements: a new body must not repeat an ID in one (plan.ts). */
  readonly multi: readonly bigint[][];
  /** The shape's text cut at its holes (shapePieces), for matchShape(). */
  readonly pieces: readonly string[];
}

/** Calls `fn` with every `ids` reference list of a decoded request's batch (an AST walk). */
function forEachIdsList(batch: unknown, fn: (ids: bigint[]) => void): void {
  const visit = (node: unknown): void => {
    if (node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      for (const item of node) visit(item);
      return;
    }
    if (node instanceof Map || ArrayBuffer.isView(node)) return; // values: no references inside
    const record = node as Record<string, unknown>;
    if (record['kind'] === 'ids' && Array.isArray(record['ids'])) {
      fn(record['ids'] as bigint[]);
      return;
    }
    for (const key in record) visit(record[key]);
  };
  visit(batch);
}

/**
 * Where each hole of the probe (probeText) went in its decoded request, or null when some
 * hole is not an element of an `ids` reference list (an `i64` value, a `limit`, a
 * parameter...: its value may matter to decoding or planning) or went to two places.
 */
export function findIdSlots(probe: Request, holes: number, pieces: readonly string[]): IdSlots | null {
  const list: (bigint[] | undefined)[] = new Array(holes).fill(undefined);
  const index = new Int32Array(holes);
  const multi: bigint[][] = [];
  let found = 0;
  let twice = false;
  forEachIdsList(probe.batch, (ids) => {
    if (ids.length >= 2) multi.push(ids);
    for (let i = 0; i < ids.length; i++) {
      const k = U64_MAX - ids[i]!;
      if (k < 0n || k >= BigInt(holes)) continue;
      const hole = Number(k);
      if (list[hole] !== undefined) twice = true;
      list[hole] = ids;
      index[hole] = i;
      found++;
    }
  });
  if (twice || found !== holes) return null;
  return { list: list as bigint[][], index, multi, pieces };
}

/**
 * Writes the holes of the last shapeKey()'s text into the shape's AST; false when one is no
 * element ID or a list would repeat an ID: the body must then be decoded from scratch, which
 * reports the error (the AST may be left half written: every use of it writes it first).
 */
export function bindIds(text: string, slots: IdSlots): boolean {
  const holes = slots.index.length;
  for (let k = 0; k < holes; k++) {
    const id = holeId(text, k);
    if (id < 0n) return false;
    slots.list[k]![slots.index[k]!] = id;
  }
  for (const ids of slots.multi) {
    for (let i = 1; i < ids.length; i++) {
      for (let j = 0; j < i; j++) {
        if (ids[i] === ids[j]) return false;
      }
    }
  }
  return true;
}

/**
 * The holes of the last shapeKey() whose integers may be element IDs of `request` (the body
 * of that text, decoded): 1 for a hole whose value is an element of one of its `ids` lists
 * and is no other hole's value, 0 for the rest (a `max_depth`, a `limit`, an ID that another
 * hole repeats: which of the two is where cannot be told from the values). Only a guess: a
 * shape keyed with the rest kept (cutHoles) is checked with its own probe (findIdSlots).
 */
export function idHoles(text: string, request: Request): Uint8Array {
  const ids = new Set<bigint>();
  forEachIdsList(request.batch, (list) => { for (const id of list) ids.add(id); });
  // Counted by the integer each hole decodes to: `-0` in an ids list is element 0, so a `-0`
  // and a `0` elsewhere are the same value and neither can be told to be the ID.
  const values = new Map<bigint, number>();
  for (let k = 0; k < holeCount; k++) {
    const value = holeInteger(text, k);
    values.set(value, (values.get(value) ?? 0) + 1);
  }
  const cut = new Uint8Array(holeCount);
  for (let k = 0; k < holeCount; k++) {
    const value = holeInteger(text, k);
    if (value >= 0n && ids.has(value) && values.get(value) === 1) cut[k] = 1;
  }
  return cut;
}

/**
 * The key of the last shapeKey()'s text with only the holes `cut` marks cut out ('K' + the
 * text with each of those integers replaced by U+0000; the other integers stay as they are),
 * and from now on those holes are the text's holes (hole j is the j-th cut one), as
 * shapePieces(), probeText() and bindIds() read them. Two texts with equal keys differ
 * only in the integers at the cut holes (the argument at shapeKey, with fewer holes).
 */
export function cutHoles(text: string, cut: Uint8Array): string | null {
  // The probe of the key (probeText) puts 2^64-1-j in cut hole j, and the kept integers stay
  // as written: one of them equal to a probe value (in an ids list) would be taken for that
  // hole by findIdSlots, which then maps a hole that is no ID onto an ids slot (a review
  // built a cache entry that wrote a limit in as a node ID that way). Such a text gets no key.
  const probeMin = U64_MAX - BigInt(holeCount);
  for (let k = 0; k < holeCount; k++) {
    if (cut[k] !== 1 && holeEnds[k]! - holeStarts[k]! >= 19 && holeInteger(text, k) >= probeMin) return null;
  }
  let key = 'K';
  let last = 0;
  let holes = 0;
  for (let k = 0; k < holeCount; k++) {
    if (cut[k] !== 1) continue;
    key += text.slice(last, holeStarts[k]) + '\u0000';
    last = holeEnds[k]!;
    holeStarts[holes] = holeStarts[k]!;
    holeEnds[holes] = last;
    holes++;
  }
  holeCount = holes;
  return key + text.slice(last);
}
