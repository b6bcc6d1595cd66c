// The text engine (docs/text.md): BM25 full-text partitions in shared memory, searched
// lock-free by reader threads while one writer inserts, removes and merges.
export { analyze, ANALYZERS, distinctTerms, type Analyzer } from './analyze.js';
export { bm25, K1, B, type TermStats } from './bm25.js';
export { TextMemory, type TextMemoryShared } from './memory.js';
export { TextPartition, textSearchCounters, textSearchOptions, textMaintainCounters, type TextPartitionOptions } from './partition.js';
export { exportPartition, importPartition, joinChunks, EXPORT_VERSION } from './export.js';
