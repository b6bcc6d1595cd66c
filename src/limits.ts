// Every bound in one place (STYLE.md "a limit on everything"). Each has the error
// raised when it is hit; docs/limits.md lists them for users.

export const limits = {
  /** Request body bytes (envelope.md §1); over it: 400 invalid_request_body. */
  bodyBytesMax: 16 * 1024 * 1024,
  /** JSON nesting depth of a request; deeper: 400 invalid_query_json. */
  jsonDepthMax: 1024,
  // One SharedArrayBuffer holds at most 4 GiB on Node 20, which bounds the columns below.
  /** Nodes the store can hold (slot = ID); more: 500 storage_error. */
  nodesMax: 1 << 26,
  /** Edges the store can hold; more: 500 storage_error. */
  edgesMax: 1 << 27,
  /** Bytes of one element's encoded property record; larger: 500 invalid_query. */
  propertyRecordBytesMax: 16 * 1024 * 1024,
  /** Bytes of the shared property heap; more: 500 storage_error. */
  propertyHeapBytesMax: 4 * 1024 * 1024 * 1024 - 4096,
  /**
   * u32 words of the topology memory (adjacency directories + blocks of 5-word entries):
   * one wasm32 memory, 4 GiB. About 100 M edges when blocks are full; more: 500 storage_error.
   */
  topologyWordsMax: (4 * 1024 * 1024 * 1024) / 4 - 16 * 1024,
  /** Distinct labels / property keys (dictionary entries); more: 500 storage_error. */
  dictionaryEntriesMax: 1 << 24,
  /** UTF-8 bytes of all distinct names together; more: 500 storage_error. */
  dictionaryBytesMax: 1 << 30,
  /** Committed write batches before the u32 epoch wraps; more: 500 storage_error. */
  epochMax: 0xfffffff0,
  /** Rows any one operator may produce; more: 500 invalid_query. */
  streamRowsMax: 50_000_000,
  /** Iterations one repeat may run (whatever times/max_depth say); more: 500 invalid_query. */
  repeatIterationsMax: 10_000,
  /** Elements in one row's path; longer: 500 invalid_query. */
  pathLengthMax: 100_000,
  /** Nodes one shortest_path search may visit; more: 500 invalid_query. */
  shortestPathVisitedMax: 10_000_000,
  /**
   * Bytes of kernel scratch (search tables, queues, navigation buffers) one thread may hold
   * in the topology memory; a query that needs more: 500 invalid_query. A shortest_path
   * needs ~70 bytes per visited node (table, its outgrown copies, queues): 9 M visited nodes
   * ran within it (bench/scratch-memory.ts). A thread keeps what its largest query needed.
   */
  scratchBytesPerThreadMax: 1024 * 1024 * 1024,
  /** Iterations of a for_each across one request; more: 500 invalid_query. */
  forEachIterationsMax: 1_000_000,
  /** Decoded property records cached per thread (records are immutable, so caching is exact). */
  recordCacheEntriesMax: 1 << 16,
  /** Planned requests cached per thread, keyed by exact body text (oldest evicted). */
  planCacheEntriesMax: 1024,
  /** Bodies longer than this are not cached. */
  planCacheBodyBytesMax: 4096,
  /** A read the uWS thread ran inline for longer than this goes to the reader pool next time. */
  inlineReadBudgetMs: 2,
  /** Consecutive slow inline runs after which a body always goes to the reader pool. */
  inlineSlowStrikes: 3,
  /** Bodies remembered as too slow to run inline (oldest forgotten). */
  slowReadBodiesMax: 4096,
  /** Bytes of one write batch's WAL record; larger: 500 storage_error (the batch rolls back). */
  walFrameBytesMax: 1024 * 1024 * 1024,
  /** Sections in one snapshot file; more: storage_error (a damaged section table). */
  snapshotSectionsMax: 64,
  /** First wait before a failed fsync or WAL upload is retried (backoff doubles, with jitter). */
  storageRetryFirstMs: 100,
  /** Longest wait between retries of a failed fsync or WAL upload. */
  storageRetryMaxMs: 2_000,
  /** First wait before a failed snapshot is retried (the WAL keeps every write meanwhile). */
  snapshotRetryFirstMs: 1_000,
  /** Longest wait between retries of a failed snapshot. */
  snapshotRetryMaxMs: 60_000,
  /**
   * Threads that may read one store at once (a reader slot each, in the topology header);
   * past it superseded adjacency blocks are never reused again (no error: memory only).
   */
  topologyReaderSlotsMax: 1024,
  /**
   * Bytes of a request body the slow-query log shows (copied per request while that log
   * is on); the rest is cut, and the line says `"query_truncated": true`. No error.
   */
  slowQueryLogBodyBytesMax: 256,
  /** Read requests coalesced into one reader-pool task. */
  readBatchRequestsMax: 256,
  /**
   * Bytes of one chunk of a snapshot section (snapshot-sections.ts): what an export holds
   * in memory per section being read, instead of a copy of the store.
   */
  snapshotChunkBytes: 4 * 1024 * 1024,
} as const;
