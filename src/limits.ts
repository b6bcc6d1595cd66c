// Every bound in one place (STYLE.md "a limit on everything"). Each has the error
// raised when it is hit; docs/limits.md lists them for users.

export const limits = {
  /** Secondary indexes that may exist at once (any state but dropped); more: 500 invalid_index_model. */
  indexesMax: 256,
  /** Bytes of an index key's canonical form (indexes.md §8.1); longer: 500 invalid_secondary_index_value. */
  indexKeyBytesMax: 4096,
  /**
   * Elements one build slice visits between two write batches (index/runtime.ts): about
   * 10-20 ms of work, the longest a write waits behind a build.
   */
  indexBuildSliceElements: 20_000,
  /**
   * Milliseconds of inserts one vector build slice runs between two write batches (an
   * insert is a graph search, ~0.1-1 ms): the longest a write waits behind a vector build.
   */
  vectorBuildSliceMs: 20,
  /** Bytes of the vector memory (one wasm32 memory for every vector index); more: 500 storage_error. */
  vectorMemoryBytesMax: 4 * 1024 * 1024 * 1024,
  /**
   * A search over a partition with at most this many points, or whose k is at least a
   * quarter of them, scans it exactly instead of walking the graph (same answer, exact).
   */
  vectorExactScanPointsMax: 2048,
  /**
   * A vector index partition of at least this many points whose live points are fewer than
   * half is compacted (copied without its dead points) between requests.
   */
  vectorCompactPointsMin: 1024,
  /**
   * Smallest candidate list (ef) of an approximate vector search; a search uses max(this, 2k).
   * 96 gives recall@10 0.995 on the bench's 100k x 128 set (64: 0.985; docs/benchmarks.md).
   */
  vectorSearchEfMin: 96,
  /**
   * UTF-16 code units of text one write batch may index into one text index (a write that
   * sets a long text on many elements); more: 500 active_text_mutation_limit_exceeded and the
   * batch rolls back.
   */
  textMutationCharsMax: 64 * 1024 * 1024,
  /** Distinct input elements a `*_within` search may rank (indexes.md §7.3); more: 500 invalid_query. */
  searchWithinCandidatesMax: 1_000_000,
  /**
   * A store with at most this many node (and edge) slots runs a write's index operations to
   * their end before the write is answered (durable.ts finishSmallIndexWork), for at most
   * indexSynchronousWorkMs; larger stores build in the background only.
   */
  indexSynchronousBuildElements: 1000,
  indexSynchronousWorkMs: 100,
  /** How often a drop or abort waiting for readers to move past its epoch looks again (ms). */
  indexCleanupPollMs: 10,
  /** Finished index operations kept readable by get_index_operation (oldest forgotten first). */
  indexOperationsRetainedMax: 1000,
  /** Bytes of the index catalog in a snapshot; larger: the snapshot is corrupt (storage_error). */
  indexCatalogBytesMax: 64 * 1024 * 1024,
  /** Request body bytes (envelope.md §1); over it: 400 invalid_request_body. */
  bodyBytesMax: 16 * 1024 * 1024,
  /**
   * Memory the parse of one request body may build, estimated per container and value
   * (protocol/json.ts): 16 MiB of nested one-element arrays built 1.5 GB and killed reader
   * threads, or held the writer for 15 s; an ordinary body builds 2-20x its size. More:
   * 400 invalid_request_body, before the rest is parsed.
   */
  bodyStructureBytesMax: 256 * 1024 * 1024,
  /**
   * Request body bytes `POST /v2/explain` takes; larger: 400 invalid_request_body. Explain
   * decodes and plans on the HTTP thread that received it (~60 us per KiB): 256 KiB is ~15 ms,
   * while a 15 MB body held a thread 0.9 s and stalled its other clients.
   */
  explainBodyBytesMax: 256 * 1024,
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
  // Every thread (main, writer, each reader) keeps its own decoded copy of the dictionary
  // in its JS heap: ~56 bytes per name plus its characters (measured on Node 20). The two
  // bounds below keep that under ~500 MiB, well inside the thread heap limits further down.
  /** Distinct labels / property keys (dictionary entries); more: 500 storage_error. */
  dictionaryEntriesMax: 1 << 22,
  /** UTF-8 bytes of all distinct names together; more: 500 storage_error. */
  dictionaryBytesMax: 256 * 1024 * 1024,
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
  /**
   * Decoded property records cached per thread (records are immutable, so caching is exact).
   * A decoded 3-property record holds ~210 bytes of heap and a miss costs ~0.2 us to decode,
   * so 16k entries keep ~3.5 MiB per thread (the HTTP thread and each reader) for a hit rate
   * that matters only when requests hit the same elements again; the 64k entries of 511
   * bytes this was held 32 MiB per thread (docs/benchmarks.md "Memory"). A power of two
   * (the cache is direct-mapped, Store.recordAt).
   */
  recordCacheEntriesMax: 1 << 14,
  /**
   * Encoded bytes of the records cached per thread (a record may be 16 MiB, so the entry
   * bound alone would let the cache outgrow a thread's heap).
   */
  recordCacheBytesMax: 8 * 1024 * 1024,
  /** Planned queries cached per thread, keyed by query text and parameter kinds, not values (oldest evicted). */
  planCacheEntriesMax: 1024,
  /** Bodies longer than this are not cached. */
  planCacheBodyBytesMax: 4096,
  /**
   * Bytes one query may allocate for intermediate results and its response (rows, row
   * extras and paths, sets, group maps, scalar items, rendered JSON; src/query-guard.ts); more:
   * 500 invalid_query. `--query-memory-mb` overrides it. 128 MiB (~8 M rows, or ~500 k
   * value maps): the estimates are below what V8 really holds (array growth, garbage not yet
   * collected: ~2-2.5x measured), so a worst-case query takes ~300 MiB of a reader thread's
   * heap (readerThreadHeapMbMax) and its garbage collections stay short enough for the
   * deadline to be kept within ~100 ms (the 256 MiB tried first let collections of a
   * failing query overrun it by up to 150 ms; docs/benchmarks.md).
   */
  queryMemoryBytesMax: 128 * 1024 * 1024,
  /** The largest `--query-timeout-ms` (server, gateway) and `queryTimeoutMs` (embedded): a day. */
  queryTimeoutMsMax: 86_400_000,
  /** The largest `--query-memory-mb` and `queryMemoryMb`. */
  queryMemoryMbMax: 65_536,
  /** The largest `--refresh-ms` and `refreshMs` of a reader following storage: an hour. */
  refreshMsMax: 3_600_000,
  /** The largest `--snapshot-wal-bytes` and `snapshotWalBytes`. */
  snapshotWalBytesMax: 2 ** 40,
  /**
   * Work units (rows, adjacency entries, predicate evaluations; src/query-guard.ts) a read may
   * spend on the HTTP thread before it is handed to the reader pool instead: ~1-2 ms.
   */
  inlineReadWorkMax: 20_000,
  /** Bodies remembered as too costly to run inline (oldest forgotten). */
  slowReadBodiesMax: 4096,
  /** Bytes of one write batch's WAL record; larger: 500 storage_error (the batch rolls back). */
  walFrameBytesMax: 1024 * 1024 * 1024,
  /**
   * Bytes of one WAL object in object storage: the frames waiting for an upload go in
   * groups up to this (a frame larger than it goes alone, up to walFrameBytesMax). Without
   * it, what piled up during an outage went as one body: past Node's 4 GiB buffer the writer
   * fenced itself, past S3's 5 GiB single PUT it retried for ever.
   */
  walObjectBytesMax: 256 * 1024 * 1024,
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
  // ---- Vector engine (src/vector/, docs/vector.md).
  /** Dimension of a vector index (indexes.md leaves it open); more: create_index answers 500 invalid_vector_configuration. */
  vectorDimensionMax: 16_384,
  /** HNSW `connections` (M) of a graph: its layer-0 lists hold 2M; more: 500 storage_error. */
  vectorConnectionsMax: 64,
  /** efConstruction of a graph; more: 500 storage_error. */
  vectorEfConstructionMax: 4096,
  /** Search `ef` (beam width) one search may use; larger requests are clamped (no error). */
  vectorEfMax: 65_536,
  /**
   * Points one graph may hold (chunks of 2^i points, i < 27). In practice the 4 GiB vector
   * memory ends first (about 6 M points of dimension 128); more: 500 storage_error.
   */
  vectorPointsMax: (1 << 27) - 1,
  /** HNSW layers above layer 0 a point may get (the level draw is capped, no error). */
  vectorLevelMax: 16,
  /**
   * Bytes of search scratch (visited marks, candidate and result heaps, the query) one
   * thread may hold in a vector memory: ~12 bytes per point of the largest graph it
   * searched; more: 500 storage_error.
   */
  vectorScratchBytesPerThreadMax: 1024 * 1024 * 1024,
  /** Bytes of one chunk of an exported graph (export.ts): what an export holds at once. */
  vectorExportChunkBytes: 4 * 1024 * 1024,
  // ---- Text engine (src/text/, docs/text.md).
  /** Bytes of the text memory (one wasm32 memory for every text index of a store); more: 500 storage_error. */
  textMemoryBytesMax: 4 * 1024 * 1024 * 1024,
  /**
   * UTF-8 bytes of one term. A longer token (a base64 blob, a run-together URL) is dropped
   * by the analyzer, in documents and queries alike: no error, the rest stays searchable.
   */
  textTermBytesMax: 255,
  /**
   * Terms (tokens after analysis) of one document; more: the write fails with 500
   * invalid_index_source_data (a build: invalid_source_data). 1 M terms is ~6 MB of English.
   */
  textDocumentTermsMax: 1_000_000,
  /**
   * Documents one partition may hold over its life, updates included (an update is a remove
   * plus an insert; chunks of 2^i documents, i < 27); more: 500 storage_error.
   */
  textDocumentsPerPartitionMax: (1 << 27) - 1,
  /** Distinct terms of one partition over its life; more: 500 storage_error. */
  textTermsPerPartitionMax: (1 << 27) - 1,
  /**
   * Postings of one term: one per document holding it, so bounded by
   * textDocumentsPerPartitionMax (no separate error).
   */
  textPostingsPerTermMax: (1 << 27) - 1,
  /** Distinct terms of one search query; more: 500 invalid_query. */
  textQueryTermsMax: 1024,
  /** Porter2 stems remembered per thread (the cache is cleared when full; no error). */
  textStemCacheEntriesMax: 1 << 16,
  /**
   * Threads that may read one text memory at once (a reader slot each); past it, blocks the
   * writer replaces are never reused again (no error: memory only).
   */
  textReaderSlotsMax: 256,
  /** Postings one maintain() step may copy (~1-3 ms of work between two write batches). */
  textMaintainPostingsPerStep: 200_000,
  /** Bytes of one chunk of an exported partition (export.ts): what an export holds at once. */
  textExportChunkBytes: 4 * 1024 * 1024,
  /**
   * Entries of a secondary index's unsorted delta (src/index/entries.ts) past which
   * maintenance between batches sorts it into a run: lookups scan the delta linearly. No
   * error: a batch may push the delta past it until the next maintenance.
   */
  indexDeltaEntriesMax: 64,
  /**
   * Bytes of a request body the slow-query log shows (copied per request while that log
   * is on); the rest is cut, and the line says `"query_truncated": true`. No error.
   */
  slowQueryLogBodyBytesMax: 256,
  /**
   * Slow-query lines per front-end thread and second (on by default: under overload every
   * request is slow, and a line per request would flood the log). Past it, lines are counted
   * and one summary line per second says how many were left out. `--log-requests`, asked
   * for explicitly, still writes every request's line, without the query.
   */
  slowQueryLogLinesPerSecondMax: 20,
  /** Read requests coalesced into one reader-pool task. */
  readBatchRequestsMax: 256,
  /**
   * Body bytes coalesced into one reader-pool task (a single larger body travels alone).
   * The main thread keeps a copy of a batch's bodies so that, if the thread running it
   * dies, the other requests of the batch can be retried: 1 MiB costs ~0.1 ms of memcpy.
   */
  readBatchBodyBytesMax: 1024 * 1024,

  // ---- Load shedding: every queue between threads is bounded in requests and body bytes.
  // Past a bound the NEW request is answered 503 server_overloaded with a Retry-After
  // header, before anything runs (a shed write never executes). 4096 requests is tens of
  // milliseconds of work at the measured rates (notes/measured.md: ~22 us per Piscina hop,
  // a few us per point read; writes wait for a group commit): a deeper queue adds only
  // latency that clients would time out on. 1 GiB of bodies is 64 bodies at bodyBytesMax;
  // the bounds together (receiving + early + readers + writer) cap queued bodies at 4 GiB.
  /** Seconds in the Retry-After header of a 503 server_overloaded answer. */
  overloadRetryAfterSeconds: 1,
  /** Bytes of request bodies being received at once (bodies not complete yet); more: 503 server_overloaded. */
  receivingBodyBytesMax: 1024 * 1024 * 1024,
  /**
   * Bytes announced by Content-Length and not arrived yet that the front end allocates ahead
   * (one buffer per body at its length: no regrowth, which fragmented the malloc heap). Past
   * it a body's buffer grows as its bytes arrive instead: connections that announce much and
   * send little cannot make the server allocate without bound.
   */
  receivingUnfilledBytesMax: 256 * 1024 * 1024,
  /** Requests that arrived before the threads were up (start-up, recovery); more: 503 server_overloaded. */
  earlyQueueRequestsMax: 4096,
  /** Body bytes of those requests; more: 503 server_overloaded. */
  earlyQueueBodyBytesMax: 1024 * 1024 * 1024,
  /** Requests waiting for a reader thread (the pool's FIFO, or Piscina's queue per request); more: 503 server_overloaded. */
  readerQueueRequestsMax: 4096,
  /** Body bytes of those requests; more: 503 server_overloaded. */
  readerQueueBodyBytesMax: 1024 * 1024 * 1024,
  /**
   * A request sent to the reader pool or the writer thread and not answered this long (ms)
   * after its deadline (arrival + --query-timeout-ms) is answered `500
   * query_deadline_exceeded` by the HTTP thread: a read running or queued (its reader's own
   * answer is dropped; a reader in a long garbage collection or still on the task before it
   * cuts its query only at its next check, reader-pool.ts), a writer request not started
   * yet (it never runs then; write-claims.ts). A writer request already running is cut by
   * its own guard, or commits. 20 ms, not 50: the query torture's client allows deadline +
   * 100 ms, and on 2 shared cores the watch's own timer and the answer's trip took up to
   * ~110 ms more (docs/benchmarks.md, "Deadlines of writer requests").
   */
  deadlineAnswerGraceMs: 20,
  /**
   * Requests sent to the writer thread and not answered yet: waiting to run, running, or
   * committed and waiting for durability (group commit); more: 503 server_overloaded.
   */
  writerPendingRequestsMax: 4096,
  /** Body bytes of those requests; more: 503 server_overloaded. */
  writerPendingBodyBytesMax: 1024 * 1024 * 1024,
  /**
   * Writes answered before they were durable (`x-svc-await-durable: false`) whose WAL frames
   * the writer still holds (object storage uploads them in groups); another such write:
   * 503 server_overloaded. Writes that await durability are bounded by writerPendingRequestsMax.
   */
  writerUndurableAcksMax: 4096,

  // ---- Thread heaps. Node's default on this machine is 4144 MB for every thread
  // (v8.getHeapStatistics().heap_size_limit, 24 GB of RAM), so two readers, the writer and
  // the main thread could grow to 16 GB together and take the process down with the OS OOM
  // killer. With a limit a runaway thread dies alone: a reader is replaced and its requests
  // answered (reader-pool.ts); a writer's death stops the server (writer.ts). The store
  // itself lives in SharedArrayBuffers, outside these heaps; what a thread's heap holds is
  // the dictionary copy (<= ~500 MiB, above), caches, and the queries it runs (each one
  // bounded by the per-query memory budget, 128 MiB of estimates, ~300 MiB of heap).
  /** Old-generation MB of each reader-pool thread: the dictionary, caches and ~3 query budgets. */
  readerThreadHeapMbMax: 1536,
  /**
   * A reader thread that dies is replaced by Piscina, but only until one replacement fails
   * while loading; from then on Piscina replaces no thread of that pool again. The reader
   * pool then starts a whole new pool of threads itself, first after this many ms, and
   * doubles the delay after each start that fails (reader-pool.ts, "Threads that are gone").
   */
  readerRestartDelayMsMin: 1000,
  /** The longest delay between two such starts (ms). */
  readerRestartDelayMsMax: 30_000,
  /** Old-generation MB of the writer thread: as a reader, plus WAL frames and decoded write bodies. */
  writerThreadHeapMbMax: 2048,
  /**
   * Young-generation MB of the writer and of each reader thread (V8's semi-spaces; its
   * default grows them to 3 x 16 MiB per thread). Per-request garbage dies there either
   * way; large bodies (a bulk load's 1-3 MB writes, which readers parse too before they
   * forward them) grew every thread's young generation to its maximum and the pages stayed
   * resident: 100 MiB of the server's RSS after the bench load (docs/benchmarks.md "Memory").
   */
  workerThreadYoungGenerationMb: 3,
  /**
   * Bytes of one chunk of a snapshot section (snapshot-sections.ts): what an export holds
   * in memory per section being read, instead of a copy of the store.
   */
  snapshotChunkBytes: 4 * 1024 * 1024,

  // ---- The cloud gateway (src/gateway/, docs/gateway.md).
  /** Request body bytes the gateway accepts (SPEC "Request size"); more: 413 payload_too_large, before parsing. */
  gatewayBodyBytesMax: 2 * 1024 * 1024,
  /** Body bytes of requests the gateway is still receiving or forwarding; more: 503 server_overloaded. */
  gatewayBufferedBodyBytesMax: 512 * 1024 * 1024,
  /** As receivingUnfilledBytesMax, for the gateway: announced body bytes allocated ahead of their arrival. */
  gatewayUnfilledBodyBytesMax: 128 * 1024 * 1024,
  /**
   * Body bytes of one database's requests the gateway holds at once, its share of
   * gatewayBufferedBodyBytesMax (32 bodies of the 2 MiB maximum): more, 503 server_overloaded
   * for that database while the others are still served.
   */
  gatewayDatabaseBodyBytesMax: 64 * 1024 * 1024,
  /**
   * Backend answer bytes the gateway holds at once, over all requests (a backend answer may
   * be up to 128 MiB); an answer that would go past it is cancelled upstream and answered
   * 503 server_overloaded.
   */
  gatewayBufferedResponseBytesMax: 512 * 1024 * 1024,
  /** Default wall-clock deadline of a request at the gateway (ms); past it: 408 query_timeout. */
  gatewayQueryTimeoutMs: 30_000,
  /** Longest wait for Redis's rate-limit decision (ms); longer: 503 rate_limit_unavailable (fails closed). */
  gatewayRateLimitDecisionMs: 500,
  /** Entries of each control-plane answer cache (keys, routes, allowances); the oldest go first. */
  gatewayCacheEntriesMax: 100_000,
  /**
   * Control-plane lookups (keys, routes, allowances) one gateway runs at once; more: 503
   * control_plane_unavailable at once, so a flood of unknown keys cannot queue on the store.
   */
  gatewayControlPlaneLookupsMax: 128,
  /** Longest a control-plane lookup may take (ms); longer: 503 control_plane_unavailable. */
  gatewayControlPlaneTimeoutMs: 2_000,
  /**
   * How long after the control-plane store last confirmed them the gateway keeps using a
   * key's grant, a route and an allowance while the store fails (ms; cache.ts "Stale if
   * the store fails"); past it, or for one never seen: 503 control_plane_unavailable.
   */
  gatewayControlPlaneStaleMs: 300_000,
  /** Keep-alive connections from the gateway to one backend server. */
  gatewayUpstreamConnectionsMax: 64,
  /** Longest a backend's /readyz may take before the gateway counts it as failing (ms). */
  gatewayHealthTimeoutMs: 1_000,
  /** Server-fault answers in a row (internal_error, storage_error, ...) that eject a reader (backends.ts). */
  gatewayReaderFaultsToEject: 5,
  /** A reader's first ejection (ms); each further one since its last clean answer doubles it. */
  gatewayReaderEjectionMs: 10_000,
  /** Longest ejection of a reader (ms). */
  gatewayReaderEjectionMaxMs: 300_000,
  /** Workspaces whose unflushed usage the gateway holds (each is a few numbers); more are flushed at once. */
  gatewayUsageWorkspacesMax: 100_000,
  /**
   * Gateway threads on one port (`svc gateway --threads`, gateway-threads.ts). Each is a
   * whole gateway with its own Redis connection, control-plane connection and up to
   * gatewayUpstreamConnectionsMax connections per backend; one per core is the most that
   * helps, and past 64 the connections it opens to each backend (64 x 64) outgrow what
   * a backend should be asked to hold.
   */
  gatewayThreadsMax: 64,
} as const;

/** Overrides of some limits for one component (tests lower the queue bounds). */
export type LimitOverrides<K extends keyof typeof limits> = Partial<Record<K, number>>;
