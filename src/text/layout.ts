// Word layouts of the text memory (docs/text.md §2). Word offsets into one shared
// WebAssembly.Memory viewed as u32 (term text as u16 at twice the word offset). A change
// here is a change of the in-memory layout only; exports have their own format (export.ts).

/** TextMemory header. */
export const M_MAGIC = 0;
export const M_TOP = 1; // heap top, word offset (compare-exchanged: any thread may reserve)
export const M_SEQ = 2; // retire sequence (writer: Atomics.add; readers announce it)
export const M_OVERFLOW = 3; // 1: a thread found no reader slot: nothing retired is reused again
export const M_SLOT0 = 16; // reader slots: [claimed, announced] x textReaderSlotsMax
export const TEXT_MEMORY_MAGIC = 0x54454d31; // 'TEM1'
/** Announcement of a slot whose thread is not reading. */
export const NOT_READING = 0xffffffff;

/** Partition root (fixed for the partition's life). Atomics: P_DOCS, P_STATS, P_DICT. */
export const P_MAGIC = 0;
export const P_ANALYZER = 1;
export const P_POSITIONS = 2;
export const P_DOCS = 3; // documents ever inserted (published count)
export const P_STATS = 4; // head of the partition statistics chain (newest first)
export const P_DICT = 5; // current dictionary hash table
export const P_TERMS = 6; // terms in the dictionary (Atomics: export reads it)
export const P_DOC_CHUNKS = 7; // doc chunks allocated (writer)
export const P_TERM_CHUNKS = 8; // term chunks allocated (writer)
export const P_PURGED = 9; // maintain() dropped postings of documents deleted at or before this epoch
export const P_DOC_CHUNK0 = 12; // chunk c holds docs [2^c - 1, 2^(c+1) - 1)
export const CHUNKS_MAX = 27;
export const P_TERM_CHUNK0 = P_DOC_CHUNK0 + CHUNKS_MAX;
export const P_WORDS = P_TERM_CHUNK0 + CHUNKS_MAX; // 66
export const PARTITION_MAGIC = 0x54585031; // 'TXP1'

/** Document record. */
export const D_CREATED = 0;
export const D_DELETED = 1;
export const D_ELEMENT = 2;
export const D_LENGTH = 3; // terms in the document (analyze(text).length)
export const D_TERMS = 4; // block [n, term id x n]: its distinct terms (writer: remove, export)
export const D_POS = 5; // positions block (0: positions off)
export const D_WORDS = 6;

/** Term record. Atomics: T_STATS, T_LIST. */
export const T_HASH = 0;
export const T_TEXT = 1; // word offset of the UTF-16 text
export const T_LEN = 2; // code units
export const T_STATS = 3; // head of the term's df chain
export const T_LIST = 4; // current postings list header; 0: the term was removed (maintain())
export const T_WORDS = 6;

/** Statistics chain nodes, newest first; a reader takes the first with EPOCH <= its snapshot. */
export const S_EPOCH = 0;
export const S_NEXT = 1; // Atomics (a node may be linked in behind the head by an out-of-order epoch)
export const S_DF = 2; // term node: document frequency
export const S_DOCS = 2; // partition node: visible documents
export const S_LEN_LO = 3; // partition node: total length of visible documents, low 32 bits
export const S_LEN_HI = 4;
export const S_TERM_WORDS = 3;
export const S_PART_WORDS = 5;

/** Postings list header. Atomics: L_COUNT, L_DIR (and the directory's entries). */
export const L_COUNT = 0; // postings published
export const L_DIR = 1; // block directory: word j = block of postings [128 j, 128 j + 128)
export const L_DIR_CAP = 2; // writer
export const L_MAX_TF = 3; // bound over the list (monotone while the list is current)
export const L_MIN_DL = 4;
export const L_IMPACTS = 5; // Atomics: impacts block bounding every posting of the list (0: none yet)
/**
 * Up to L_TOP_COUNT full blocks (index + 1; 0: none) with the best bounds when they were
 * sealed: where a search starts. A hint only: readers check each index against their count,
 * and any block gives a valid starting threshold.
 */
export const L_TOP = 6;
export const L_TOP_COUNT = 4;
export const L_WORDS = L_TOP + L_TOP_COUNT;

/** Postings block: docs ascending, then tfs, then (positions on) offsets of each posting's positions. */
export const B_CAP = 0;
export const B_MAX_TF = 1; // over the block's postings (monotone while it grows)
export const B_MIN_DL = 2;
export const B_IMPACTS = 3; // Atomics: impacts block of a full block (0: not full yet, use B_MAX_TF/B_MIN_DL)
export const B_HEADER = 4;
export const BLOCK_POSTINGS = 128;
export const BLOCK_SHIFT = 7;
export const FIRST_BLOCK_CAP = 2;

/**
 * Impacts block, immutable once published: [n, (tf, dl) x n, min element], tf and dl both strictly
 * increasing. Every posting it covers has a pair with tf >= its tf and dl <= its length
 * (BM25 grows with tf and shrinks with dl), so the best pair bounds them all at any avgdl.
 * Lucene calls these competitive impacts; more than IMPACTS_MAX pairs are merged into looser ones.
 */
export const IMPACTS_MAX = 8;
/** [n, (tf, dl) x n, least element of the block's documents (a list's impacts: 0)]. */
export const impactsWords = (n: number): number => 2 + 2 * n;

/** Dictionary hash table: [capacity, slots]; slot = term id + 1 (0: empty), linear probing. */
export const H_CAP = 0;
export const H_SLOTS = 1;
export const DICT_CAP_MIN = 16;
/** A dictionary slot whose term was removed: lookups probe past it, inserts do not reuse it. */
export const H_REMOVED = 0xffffffff;

/** Record of slot `i` in a chunked table (docs or terms): chunk c = floor(log2(i + 1)). */
export const chunkOf = (i: number): number => 31 - Math.clz32(i + 1);
