// A reader-pool thread (Piscina worker). It attaches to the writer's shared-memory store
// once, when Piscina loads this module, and then runs read tasks: each task is a batch
// of requests coalesced by the main thread (reader-pool.ts), executed one after the other
// against the snapshot current when each starts.
//
// Answers go back as ONE transferred ArrayBuffer of UTF-8 bytes per task (plus a small
// index), so the main thread neither copies nor encodes them: it hands byte ranges of
// that buffer straight to uWS.
import { Buffer } from 'node:buffer';
import { parentPort, threadId } from 'node:worker_threads';
import { Piscina, move, transferableSymbol, valueSymbol } from 'piscina';
import { executeRequest, execOptions, type ExecOptions, type ExecRole } from '../exec/request.js';
import { BULK_BODY_BYTES_MIN, trimHeapNow } from '../store/heap-trim.js';
import { Store, type StoreShared } from '../store/store.js';
import { assertSameInstall } from '../build-identity.js';
import { allocTransferable, decodeFlags, FORWARD_TO_WRITER, READER_ATTACHED, READER_LOADED, type ReaderSlots, type ReadTaskResult, type SwappableReadTask } from './job.js';
import { testStall } from './test-stall.js';

/** Piscina `workerData` of every reader thread (structured-cloned: plain data only). */
export interface ReaderWorkerData {
  shared: StoreShared;
  /** 'reader' on a writer server (writes are forwarded), 'replica' on a read-only one. */
  role: Extract<ExecRole, 'reader' | 'replica'>;
  queryTimeoutMs: number;
  queryMemoryBytes: number;
  /** The server's BUILD_IDENTITY: a replacement thread must load the same install. */
  buildIdentity: string;
  /** Which store swap `shared` is (ReaderPool's generation when it started these threads). */
  generation: number;
}

const data = Piscina.workerData as ReaderWorkerData;
assertSameInstall(data.buildIdentity, 'reader thread');
let store = Store.attach(data.shared);
// workerData lives as long as the thread: it must not keep this store once a swap replaced it.
delete (data as Partial<ReaderWorkerData>).shared;
/** Which store swap `store` is (reader servers replace the store when they reload). */
let generation = data.generation;
const role = data.role;
const exec: ExecOptions = execOptions({ queryTimeoutMs: data.queryTimeoutMs, queryMemoryBytes: data.queryMemoryBytes });

/**
 * Test hook (test/overload.test.ts), never set in production: with
 * SVCDB_TEST_READER_CRASH=MARKER in the server's environment, a request whose body
 * contains MARKER makes this thread allocate until its heap limit kills it, the way a
 * runaway query would. A client cannot turn it on: only whoever starts the server can,
 * and the marker is theirs (at least 16 characters, so it cannot match by accident).
 */
const crashMarker = testCrashMarker(process.env['SVCDB_TEST_READER_CRASH']);

function testCrashMarker(value: string | undefined): Buffer | null {
  if (value === undefined || value === '') return null;
  if (value.length < 16) throw new Error('SVCDB_TEST_READER_CRASH must be at least 16 characters');
  return Buffer.from(value, 'utf8');
}

/** SVCDB_TEST_READER_STALL (test-stall.ts): hold this thread before a marked request. */
const stall = testStall('SVCDB_TEST_READER_STALL');

/**
 * Claim this thread's reader slots in `store` now and tell the pool which they are, before
 * any read there: a thread that died in its first read would otherwise hold them with nobody
 * knowing (reader-pool.ts).
 */
function postSlots(type: ReaderSlots['type']): void {
  store.topology.beginRead();
  store.topology.endRead();
  const texts = store.textMemory();
  texts.endRead(texts.beginRead());
  const slots: ReaderSlots = { type, threadId, generation, readerSlot: store.topology.readerSlotIndex, textSlot: store.textReaderSlot };
  parentPort!.postMessage(slots);
}

postSlots(READER_LOADED);

function dieOfHeapExhaustion(): never {
  store.beginRead(); // die inside a read, as a real runaway query would: the slot stays announced
  store.textMemory().beginRead(); // and inside a text read
  const hog: number[][] = [];
  for (;;) hog.push(new Array<number>(100_000).fill(1.5));
}

/**
 * Tasks wait here while an answer is returned but not yet posted to the main thread.
 * Piscina posts an answer in the continuation of its `await handler(task)`, a microtask
 * after the handler returns. When the thread's port held several tasks (the pool's spare
 * costly task: concurrentTasksPerWorker 2), Piscina starts all their handlers from one
 * drain of the port, and a later task's start is queued ahead of the earlier answer's
 * post: that answer, done, waited for the whole later task (up to its deadline: answers
 * 400-900 ms past it under the query torture). So a task starts only once the answer before it
 * is posted, in arrival order, all within microtasks (a macrotask would let a task that
 * reaches the port meanwhile run first). One case is left: Piscina first waits for this
 * thread's stdout/stderr to drain when either holds unwritten output, and then the next
 * task runs before that post; reader threads write nothing there.
 */
const waiting: { task: SwappableReadTask; resolve: (result: unknown) => void; reject: (err: unknown) => void }[] = [];
let answerUnposted = false;

export default function runReadTask(task: SwappableReadTask): unknown {
  if (answerUnposted) return new Promise((resolve, reject) => waiting.push({ task, resolve, reject }));
  const result = runReadTaskNow(task);
  answerReturned();
  return result;
}

/**
 * An answer was just returned (or its promise settled): Piscina's post of it is queued
 * now, so a microtask queued from the next microtask runs after that post.
 */
function answerReturned(): void {
  answerUnposted = true;
  queueMicrotask(afterPostQueued);
}

function afterPostQueued(): void {
  queueMicrotask(answerPosted);
}

function answerPosted(): void {
  answerUnposted = false;
  const next = waiting.shift();
  if (next === undefined) return;
  try {
    next.resolve(runReadTaskNow(next.task));
  } catch (err) {
    next.reject(err);
  }
  answerReturned();
}

function runReadTaskNow(task: SwappableReadTask): unknown {
  if (task.generation !== undefined && task.generation > generation && task.shared !== undefined) {
    store = Store.attach(task.shared);
    generation = task.generation;
    postSlots(READER_ATTACHED);
  }
  const count = task.bodies.length;
  const index = new Uint32Array(2 * count);
  const answers = new Array<string>(count);
  const returned: Uint8Array[] = [];
  let totalBytes = 0;
  for (let i = 0; i < count; i++) {
    const body = task.bodies[i]!;
    if (crashMarker !== null && Buffer.from(body.buffer, body.byteOffset, body.byteLength).includes(crashMarker)) dieOfHeapExhaustion();
    stall?.(body);
    // The deadline counts from arrival (queue wait included). The answers of a task go back
    // together, so each request of it gets the task's earliest deadline: none of them waits
    // past its own deadline for a batch-mate (the first request arrived first).
    exec.receivedAtMs = task.receivedAtMs[0]! > 0 ? Math.min(task.receivedAtMs[0]!, task.receivedAtMs[i]!) : task.receivedAtMs[i]!;
    const outcome = executeRequest(store, body, decodeFlags(task.flags[i]!), role, exec);
    if ('forward' in outcome) {
      index[2 * i] = FORWARD_TO_WRITER;
      answers[i] = '';
      returned.push(body);
    } else {
      index[2 * i] = outcome.status;
      answers[i] = outcome.body;
      totalBytes += Buffer.byteLength(outcome.body, 'utf8');
    }
  }
  // Unpooled: the whole ArrayBuffer belongs to this result and can be transferred.
  const bytes = allocTransferable(totalBytes);
  const writer = Buffer.from(bytes.buffer, 0, totalBytes); // a view, for Buffer#write
  let end = 0;
  for (let i = 0; i < count; i++) {
    const answer = answers[i]!;
    if (answer.length > 0) end += writer.write(answer, end, 'utf8');
    index[2 * i + 1] = end;
  }
  // A bulk write parsed only to be forwarded left megabytes of garbage in this heap; this
  // thread sleeps between tasks (no timers run), so it is trimmed now (heap-trim.ts).
  if (returned.some((body) => body.byteLength >= BULK_BODY_BYTES_MIN)) trimHeapNow();
  const result: ReadTaskResult = { index, bytes, returned, threadId, readerSlot: store.topology.readerSlotIndex, textSlot: store.textReaderSlot };
  const transfer: ArrayBuffer[] = [index.buffer, bytes.buffer as ArrayBuffer];
  for (const body of returned) transfer.push(body.buffer as ArrayBuffer);
  return move({ [transferableSymbol]: transfer, [valueSymbol]: result });
}
