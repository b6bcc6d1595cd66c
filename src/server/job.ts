// What travels between the HTTP front end (main thread), the reader pool and the
// writer thread. Kept free of uWS and worker imports so every side can load it.
import type { RequestFlags } from '../protocol/headers.js';
import type { QueryRoute } from './request-log.js';
import type { StoreShared } from '../store/store.js';
import { Buffer } from 'node:buffer';
import { errorBody, SvcError } from '../protocol/errors.js';

/** Where a finished answer goes. Implemented by the HTTP front end, one per request. */
export interface QueryResponder {
  /** True once the request was answered or its client went away: skip the work. */
  readonly settled: boolean;
  /**
   * Send the answer (JSON bytes or text). Called at most once; later calls are ignored.
   * `retryAfterSeconds` adds a Retry-After header (a shed request, queue-bound.ts).
   */
  respond(status: number, body: Uint8Array | string, retryAfterSeconds?: number): void;
}

/**
 * One `POST /v2/query` whose headers were valid and whose body was read completely.
 * `body` is owned by the job: its ArrayBuffer is transferred to the thread that runs it
 * (and back, when a reader forwards a write), so nobody else may hold a view of it.
 */
export interface QueryJob {
  body: Uint8Array;
  readonly flags: RequestFlags;
  readonly responder: QueryResponder;
  /**
   * monotonicMs() when the whole body had arrived (src/clock.ts): the query deadline counts from here, so
   * time spent waiting in a queue is part of it. Absent: from when execution starts.
   */
  readonly receivedAtMs?: number;
  /**
   * Known to have no static cost bound, or to have outgrown the inline work cap (set by
   * inline-reads.ts): the reader pool runs it in a task of its own.
   */
  costly?: boolean;
  /**
   * Called just before the body's buffer is transferred to another thread (bodyToTransfer),
   * after which the body is unreadable here: the front end copies what its log may need.
   */
  bodyLeaving?(): void;
  /**
   * A small body may be a view of the front end's scratch buffer while the job is being
   * dispatched (http.ts): this gives it a buffer of its own. Whatever keeps a body past
   * the call that handed it the job, or sends it, takes it through ownedBody.
   */
  ownBody?(): void;
}

/** The job's body, in a buffer of its own (see QueryJob.ownBody). */
export function ownedBody(job: QueryJob): Uint8Array {
  job.ownBody?.();
  return job.body;
}

/** The job's body buffer, to transfer to another thread; the job may keep what it needs of it first. */
export function bodyToTransfer(job: QueryJob): ArrayBuffer {
  job.bodyLeaving?.();
  return ownedBody(job).buffer as ArrayBuffer;
}

/** Something that executes jobs: the reader pool or the writer thread. */
export interface QuerySink {
  submit(job: QueryJob): void;
}

// ---------------------------------------------------------------- reader-pool wire format
// (here, not in reader-worker.ts: importing that module runs a worker's start-up code)

/** One task: requests in arrival order. Body buffers are transferred, not copied. */
export interface ReadTask {
  bodies: Uint8Array[];
  /** One byte per request: encodeFlags() of its execution headers. */
  flags: Uint8Array;
  /** Per request: QueryJob.receivedAtMs, or 0 when unknown. */
  receivedAtMs: Float64Array;
}

/**
 * A read task after the store was swapped (reader servers only): it carries the current
 * store, and a thread still on an older generation attaches to it before running the
 * requests. Until the first swap tasks carry nothing extra, so writer servers pay nothing.
 */
export interface SwappableReadTask extends ReadTask {
  generation?: number;
  shared?: StoreShared;
}

/**
 * What a reader thread posts on its port once its code is loaded and attached to the store
 * (reader-worker.ts): Piscina reports its first threads as created before they load.
 */
export const READER_LOADED = 'svcdb-reader-loaded';
/** What it posts when it attaches to another store (a reader server reloaded it), before reading it. */
export const READER_ATTACHED = 'svcdb-reader-attached';

/** A reader thread and its slots in a store's topology and text memory (-1: none yet, or none was free). */
export interface ClaimedSlots {
  readonly threadId: number;
  readonly readerSlot: number;
  readonly textSlot: number;
}

/**
 * The reader slots a thread claimed in the store of `generation` (ReaderPool's count of store
 * swaps), posted as it loads or attaches and before it reads there, so that the pool frees
 * them once the thread is gone, even if it dies in that first read (reader-pool.ts).
 */
export interface ReaderSlots extends ClaimedSlots {
  readonly type: typeof READER_LOADED | typeof READER_ATTACHED;
  readonly generation: number;
}

export function isReaderSlots(message: unknown): message is ReaderSlots {
  const type = typeof message === 'object' && message !== null ? (message as { type?: unknown }).type : undefined;
  return type === READER_LOADED || type === READER_ATTACHED;
}

export function isReaderLoaded(message: unknown): message is ReaderSlots {
  return isReaderSlots(message) && message.type === READER_LOADED;
}

/** Status of a request a reader may not run (a write, or one pinned to the writer). */
export const FORWARD_TO_WRITER = 0;

/** A task's answers; its ClaimedSlots are the thread that ran it and its slots in the task's store. */
export interface ReadTaskResult extends ClaimedSlots {
  /**
   * Two words per request: HTTP status (or FORWARD_TO_WRITER) and the end offset of its
   * answer in `bytes` (the start is the previous request's end; forwarded ones are empty).
   */
  index: Uint32Array;
  /** Every answer's UTF-8 bytes, back to back. */
  bytes: Uint8Array;
  /** The bodies of forwarded requests, in request order, handed back to the main thread. */
  returned: Uint8Array[];
}

// Flags cross threads as one byte per request (2 bits per header: 0 absent, 1 false,
// 2 true) instead of an object each: an array of objects costs a structured clone per
// request, a Uint8Array costs one memcpy per task.
const enc = (v: boolean | null): number => (v === null ? 0 : v ? 2 : 1);
const dec = (bits: number): boolean | null => (bits === 0 ? null : bits === 2);

export function encodeFlags(flags: RequestFlags): number {
  return enc(flags.warm) | (enc(flags.requireWriter) << 2) | (enc(flags.awaitDurable) << 4);
}

export function decodeFlags(byte: number): RequestFlags {
  return { warm: dec(byte & 3), requireWriter: dec((byte >> 2) & 3), awaitDurable: dec((byte >> 4) & 3) };
}

/** Answer a job with 500 internal_error (a worker died or a task failed: a bug). */
export function failJob(job: QueryJob, detail: string): void {
  const err = new SvcError('internal_error', `internal error: ${detail}`);
  job.responder.respond(err.status, errorBody(err));
}

/**
 * `size` uninitialized bytes in an ArrayBuffer of their own (never a slice of Node's
 * shared Buffer pool), so the buffer can be transferred to another thread.
 */
export function allocTransferable(size: number): Uint8Array {
  const buffer = Buffer.allocUnsafeSlow(size);
  return new Uint8Array(buffer.buffer as ArrayBuffer, buffer.byteOffset, size);
}

/** The message of anything thrown, for logs and internal_error bodies. */
export function describeError(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * A sink that notes on the job where it went, for the request log (a job handed on, e.g.
 * a write a reader forwards, ends with the last route), then hands it over.
 */
export function routedTo(route: QueryRoute, sink: QuerySink): QuerySink {
  return {
    submit(job: QueryJob): void {
      (job as QueryJob & { route?: QueryRoute | null }).route = route;
      sink.submit(job);
    },
  };
}
