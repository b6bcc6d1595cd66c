// Word layouts of the vector memory (docs/vector.md §1). assembly/vector.ts mirrors every
// constant here; a change to any of them is a format change (bump EXPORT_VERSION in
// export.ts when it changes what an export holds).

/** VectorMemory header: [V_MAGIC] [V_TOP] heap top (word offset, compare-exchanged), rest reserved. */
export const V_MAGIC = 0;
export const V_TOP = 1;
export const V_HEADER_WORDS = 16;
export const VECTOR_MEMORY_MAGIC = 0x56454d31; // 'VEM1'

/**
 * Graph header at the graph's root. Words a reader uses: G_DIM..G_VEC (written once before
 * the root is handed out), G_COUNT (published point count: Atomics.store / atomic.load),
 * G_ENTRY (entry point: stored after the count that covers it, loaded before the count), and
 * the chunk table (a chunk pointer is written before any point in it is published).
 */
export const G_MAGIC = 0;
export const G_DIM = 1;
export const G_METRIC = 2;
export const G_M = 3;
export const G_M0 = 4;
export const G_EFC = 5;
export const G_RECORD = 6; // words per point record
export const G_VEC = 7; // words of a record's vector area: the header follows it (vectorWords)
export const G_RNG = 8; // level draw state (writer only)
export const G_COUNT = 9;
export const G_ENTRY = 10;
export const G_TOP = 11; // entry point's level (writer only; readers read the entry's record)
export const G_CHUNKS = 12; // chunks allocated (writer only)
export const G_CHUNK0 = 13; // chunk table: chunk c holds points [2^c - 1, 2^(c+1) - 1)
export const CHUNKS_MAX = 27;
export const G_HEADER_WORDS = G_CHUNK0 + CHUNKS_MAX; // 40 words, 160 bytes
export const GRAPH_MAGIC = 0x56475231; // 'VGR1'

/**
 * A point's record: the f32 vector padded to a multiple of 16 words (G_VEC words), then the
 * header words R_* and the layer-0 neighbour list [R_N0 count, M0 ids], the whole padded to
 * 16 words. Records start 64-byte aligned (chunks are), so a vector covers exactly
 * ceil(dim / 16) cache lines, and a search that only needs the vector (euclidean, manhattan)
 * touches no other line of a point it does not keep. A record's word offset (`rec`) names
 * its header: the vector is at rec - G_VEC.
 * R_UPPER names a block of LEVEL lists of [count, M ids] for layers 1..LEVEL (0: none).
 * R_NORM is the f32 sqrt of the vector's sum of squares (cosine only; 0 otherwise).
 *
 * A chunk of 2^c points holds their 2^c records, then their 2^c int8 copies (compactWords
 * each, in point order), so graph searches stride over records as before and a `*_within`
 * pass streams the copies.
 * The int8 copy (docs/vector.md §3, written by the kernel `quantize` after the vector):
 * c_i = nearest(x_i / s) with the step s = f32(max |x_i| / 127) (R_Q_STEP), bytes zero past
 * dim; R_Q_ERROR >= ||x - s c||, R_Q_NORM >= ||s c|| (both rounded up to f32) and R_SQUARES
 * = f32(sum of x_i^2). `*_within` bounds a candidate's exact distance from it (one integer
 * dot product over 1/4 of the vector's bytes) and measures exactly only those that could
 * enter the top k. Derived from the vector: exports leave it out, imports rebuild it.
 */
export const R_CREATED = 0;
export const R_DELETED = 1;
export const R_ELEMENT = 2;
export const R_LEVEL = 3;
export const R_UPPER = 4;
export const R_NORM = 5;
export const R_Q_STEP = 6;
export const R_Q_ERROR = 7;
export const R_Q_NORM = 8;
export const R_SQUARES = 9;
export const R_N0 = 10;

export const vectorWords = (dimension: number): number => (dimension + 15) & ~15;
/** Words of the int8 copy: dim bytes in whole cache lines. */
export const compactWords = (dimension: number): number => ((dimension + 63) >> 6) << 4;
export const recordWords = (m0: number, dimension: number): number => (vectorWords(dimension) + R_N0 + 1 + m0 + 15) & ~15;
/** Words of chunk c: its records, then their int8 copies. */
export const chunkWords = (c: number, recordW: number, dimension: number): number => (1 << c) * (recordW + compactWords(dimension));
/** Scratch words of a `*_within` query: the f32 query, then its int8 copy. */
export const queryWords = (dimension: number): number => vectorWords(dimension) + compactWords(dimension);

/** Epoch of an insert that was undone: never visible (created > every snapshot). */
export const NEVER = 0xffffffff;

export const METRIC_COSINE = 0;
export const METRIC_EUCLIDEAN = 1;
export const METRIC_MANHATTAN = 2;

/**
 * Per-thread scratch header (scratch.ts): offsets and capacities of the thread's regions.
 * S_TAG is the visited-mark generation; a point is visited in this search when its mark
 * equals the tag (wraps: marks cleared). Heaps hold [f32 distance, u32 point] pairs.
 */
export const S_TAG = 0;
export const S_VISITED = 1; // u32 marks, one per point
export const S_VISITED_CAP = 2;
export const S_CAND = 3; // candidate min-heap
export const S_CAND_CAP = 4;
export const S_RES = 5; // result max-heap
export const S_RES_CAP = 6;
export const S_OUT = 7; // sorted output pairs (capacity S_RES_CAP)
export const S_QUERY = 8; // query vector (f32), then its int8 copy (queryWords; S_QUERY_CAP words)
export const S_QUERY_CAP = 9;
export const S_SEL = 10; // neighbour selection: 2 * (M0 + 1) pair words + M0 + 1 ids
export const S_SEL_CAP = 11; // pairs
export const S_BATCH = 12; // withinTop(): S_BATCH_CAP element IDs, then as many u32 statuses
export const S_BATCH_CAP = 13;
export const S_WITHIN_RECORDS = 14; // withinTop(): how many candidates it left to their records (W_RECORD)
export const S_HEADER_WORDS = 16;

/**
 * Element map of a vector index (src/index/vector-elements.ts): a root of [magic, chunk
 * table]; chunk c holds element slots [c << E_CHUNK_SHIFT, (c + 1) << E_CHUNK_SHIFT) as
 * pairs [point + 1 (0: none), graph root]. withinTop() reads it.
 */
export const E_CHUNK_SHIFT = 16;

/** What withinTop() found for a candidate (its status word). */
export const W_RANKED = 0; // its point in the searched graph holds its vector at the snapshot: the kernel ranked it
export const W_RECORD = 1; // anything else: the caller decides from the element's record
