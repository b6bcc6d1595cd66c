// Several gateway threads on one port (`svc gateway --threads N`, docs/gateway.md
// "Threads"): the main thread's gateway plus N - 1 worker threads, each a whole gateway
// (gateway.ts) with its own uWS app on the same port. Linux hands each new connection to
// one of the listening sockets (SO_REUSEPORT), as for the server's front-end threads
// (src/server/http-threads.ts). One gateway thread is CPU-bound at about one core (system
// calls for two loopback hops, undici, uWS); several use several cores.
//
// The threads are gateway replicas that happen to share a process. Each has its own undici
// pools, Redis connection (the token buckets live in Redis, and coalesced admissions are
// exact across replicas), control-plane connection, caches and lookup slots, backend health
// view, and usage meter (recordUsage adds counts in the store, so each thread flushes its
// own and nothing is counted twice). Shared are only the counts of held request-body and
// answer bytes (two Int32s in shared memory), because their bounds are about the process's
// memory. The main thread only starts, stops and watches the others.
//
// A thread that fails takes the gateway down with it: the thread closes its own gateway
// (gateway-thread-worker.ts catches its uncaught exceptions, since a worker ending with
// uWS sockets open aborts the whole process), the other threads are closed (their usage
// flushed, the port released) and onFatal is called, which `svc gateway` turns into exit
// status 1 for its supervisor to restart. Not restarting the thread is deliberate: a
// gateway missing a thread would keep answering /readyz 200 on the threads left, with some
// connections lost and no one told; and a bug that killed one thread will kill the next.
import { Worker } from 'node:worker_threads';
import type { ControlPlane } from '../cloud/control-plane.js';
import { limits } from '../limits.js';
import { bindSharedPort } from '../server/listen.js';
import { threadListening } from '../server/thread-listening.js';
import { metricsRenderer } from '../metrics/render.js';
import { answerMetricsRequest, collectThreadMetrics, type MetricsReply } from '../metrics/threads.js';
import { sharedByteCounts, startGateway, type GatewayOptions } from './gateway.js';

/** Gateway options a worker thread receives (structured-cloned: plain data only). */
export type ThreadGatewayOptions = Omit<GatewayOptions, 'controlPlane' | 'logDestination'>;

/** `workerData` of a gateway thread. */
export interface GatewayThreadData {
  options: ThreadGatewayOptions;
  /** The control-plane store's location (open.ts); the thread opens its own connection. */
  storeLocation: string;
}

/** Gateway thread -> main thread. */
export type FromGatewayThread =
  | { kind: 'listening' }
  | { kind: 'failed'; message: string }
  | { kind: 'usage-flushed' }
  /** An uncaught exception: the thread closes its gateway and exits with code 1. */
  | { kind: 'fatal'; message: string }
  /** close() finished: usage flushed, sockets and store closed; the thread exits next. */
  | { kind: 'closed' }
  /** A GET /metrics reached this thread: the main thread answers with the merged text. */
  | { kind: 'metrics-request'; id: number }
  /** This thread's own metrics, asked for by 'collect-metrics'. */
  | MetricsReply;

/** Main thread -> gateway thread. */
export type ToGatewayThread =
  | { kind: 'flush-usage' }
  | { kind: 'close' }
  /** Tests only: throw an uncaught error in the thread, as a bug would. */
  | { kind: 'fail-for-test' }
  /** Send this thread's metrics ('metrics'). */
  | { kind: 'collect-metrics'; id: number }
  /** The merged metrics text for the 'metrics-request' with this id (null: it failed). */
  | { kind: 'metrics-text'; id: number; text: string | null };

export interface GatewayThreadsOptions extends Omit<GatewayOptions, 'controlPlane' | 'logDestination' | 'sharedPort' | 'thread' | 'sharedByteCounts'> {
  /** Threads in all, the main thread's gateway included: 1 to limits.gatewayThreadsMax. */
  threads: number;
  /** The main thread's control plane (already open on `storeLocation`). */
  controlPlane: ControlPlane;
  /**
   * Where every other thread opens its own: a SQLite file (WAL mode, so the threads'
   * connections read concurrently and their usage flushes wait on the busy timeout) or
   * PostgreSQL (a pool per thread). Not `:memory:`, which would be an empty store per thread.
   */
  storeLocation: string;
  /** A thread died after start-up; the others are closed already. */
  onFatal: (err: Error) => void;
  startTimeoutMs?: number;
}

export interface GatewayThreads {
  readonly port: number;
  readonly url: string;
  /** Threads serving, the main thread's included. */
  readonly threads: number;
  /** Flush every thread's metered usage now (tests; close() flushes too). */
  flushUsage(): Promise<void>;
  /** Stop every thread: stop accepting, drain, flush usage, close connections. */
  close(): Promise<void>;
  /** Tests only: make worker thread `thread` (2 and up) fail with an uncaught error. */
  failThreadForTest(thread: number): void;
}

const START_TIMEOUT_MS_DEFAULT = 30_000;
/**
 * How long close() waits for a worker thread to exit: its gateway drains for up to 5 s
 * (gateway.ts close()), then flushes usage; past this it is terminated.
 */
const EXIT_TIMEOUT_MS = 15_000;

class GatewayThread {
  exited = false;
  private closing: Promise<void> | null = null;

  constructor(readonly number: number, readonly worker: Worker) {
    worker.once('exit', () => { this.exited = true; });
  }

  post(message: ToGatewayThread): void {
    if (!this.exited) this.worker.postMessage(message);
  }

  /** Resolves on the thread's next message of `kind`, or when it exits. */
  reply(kind: FromGatewayThread['kind']): Promise<void> {
    return new Promise((resolve) => {
      if (this.exited) { resolve(); return; }
      const onMessage = (message: FromGatewayThread): void => {
        if (message.kind === kind) done();
      };
      const done = (): void => {
        this.worker.off('message', onMessage);
        this.worker.off('exit', done);
        resolve();
      };
      this.worker.on('message', onMessage);
      this.worker.once('exit', done);
    });
  }

  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      if (this.exited) { resolve(); return; }
      const timer = setTimeout(() => void this.worker.terminate(), EXIT_TIMEOUT_MS);
      this.worker.once('exit', () => { clearTimeout(timer); resolve(); });
      this.post({ kind: 'close' });
    });
    return this.closing;
  }
}

/** Validate the thread count (the CLI checks it too, with its own message). */
function checkThreads(threads: number): void {
  if (!Number.isInteger(threads) || threads < 1 || threads > limits.gatewayThreadsMax) {
    throw new Error(`threads must be an integer from 1 to ${limits.gatewayThreadsMax}, got ${threads}`);
  }
}

/**
 * Start `threads` gateways on one port; resolves once every one listens. With one thread
 * this is startGateway alone, listening exclusively as before.
 */
export async function startGatewayThreads(options: GatewayThreadsOptions): Promise<GatewayThreads> {
  const { threads, controlPlane, storeLocation, onFatal, startTimeoutMs, ...gatewayOptions } = options;
  checkThreads(threads);
  if (threads > 1 && /^(sqlite:)?:memory:$/.test(storeLocation)) {
    throw new Error('several gateway threads need a control-plane store they can each open: a SQLite file or PostgreSQL, not :memory:');
  }
  if (threads === 1) {
    const gateway = await startGateway({ ...gatewayOptions, controlPlane });
    return {
      port: gateway.port, url: gateway.url, threads: 1,
      flushUsage: () => gateway.flushUsage(),
      close: () => gateway.close(),
      failThreadForTest: () => { throw new Error('a one-thread gateway has no worker thread'); },
    };
  }

  // Every thread binds with SO_REUSEPORT: the first binds the port under the port's lock (a
  // port another process holds or is binding fails here, as an exclusive listen would).
  const host = gatewayOptions.host ?? '127.0.0.1';
  // The bounds on held body and answer bytes are the process's memory bounds: one count
  // for all threads. Everything else is per thread (the top of the file).
  const byteCounts = sharedByteCounts();
  let port = 0;
  const main = await bindSharedPort(host, gatewayOptions.port ?? 0, (chosen) => {
    port = chosen;
    return startGateway({ ...gatewayOptions, port, sharedPort: true, sharedByteCounts: byteCounts, controlPlane, thread: 1 });
  });
  const shared = { ...gatewayOptions, port, sharedPort: true, sharedByteCounts: byteCounts };

  const workers: GatewayThread[] = [];
  let up = false;
  let closing: Promise<void> | null = null;
  const closeAll = (): Promise<void> => {
    closing ??= Promise.all([main.close(), ...workers.map((w) => w.close())]).then(() => undefined);
    return closing;
  };
  const starts: Promise<void>[] = [];
  for (let number = 2; number <= threads; number++) {
    const workerData: GatewayThreadData = { options: { ...shared, thread: number }, storeLocation };
    const worker = new Worker(new URL('./gateway-thread-worker.js', import.meta.url), {
      workerData, name: `svc-gateway-${number}`,
      // The CLI runs the main thread with 1 MiB semi-spaces (src/cli/main.ts); the same here.
      resourceLimits: { maxYoungGenerationSizeMb: limits.workerThreadYoungGenerationMb },
    });
    const thread = new GatewayThread(number, worker);
    workers.push(thread);
    worker.on('error', (err) => {
      process.stderr.write(`svc gateway: thread ${number} failed: ${err.stack ?? err.message}\n`);
    });
    // A thread that fails after start-up stops the whole gateway (see the top of the file).
    const fail = (what: string): void => {
      if (!up || closing !== null) return;
      const err = new Error(`gateway thread ${number} ${what}; the gateway stops (its other threads were closed)`);
      void closeAll().then(() => onFatal(err));
    };
    worker.on('message', (message: FromGatewayThread) => {
      if (message.kind !== 'fatal') return;
      process.stderr.write(`svc gateway: thread ${number} failed: ${message.message}\n`);
      fail('failed with an uncaught exception');
    });
    worker.once('exit', (code) => fail(`exited with code ${code}`));
    starts.push(threadListening(worker, `gateway thread ${number}`, startTimeoutMs ?? START_TIMEOUT_MS_DEFAULT));
  }
  // Started together: on a machine with many cores one after the other would add seconds.
  const outcomes = await Promise.allSettled(starts);
  const failure = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
  if (failure !== undefined) {
    await closeAll();
    throw failure.reason;
  }
  up = true;
  // GET /metrics on any thread: the process metrics and every thread's counts, merged here.
  const renderMetrics = metricsRenderer();
  const mergedText = async (): Promise<string> => {
    const others = await collectThreadMetrics(workers.filter((w) => !w.exited).map((w) => ({ worker: w.worker, post: (m) => w.post(m) })));
    return renderMetrics([main.metricsJson(), ...others]);
  };
  main.serveMetricsWith(mergedText);
  for (const w of workers) {
    w.worker.on('message', (message: FromGatewayThread) => {
      if (message.kind !== 'metrics-request') return;
      answerMetricsRequest(message.id, mergedText, (m) => w.post(m));
    });
  }
  return {
    port: main.port,
    url: main.url,
    threads,
    flushUsage: async () => {
      await Promise.all([main.flushUsage(), ...workers.map((w) => {
        const flushed = w.reply('usage-flushed');
        w.post({ kind: 'flush-usage' });
        return flushed;
      })]);
    },
    close: closeAll,
    failThreadForTest: (number) => {
      const thread = workers.find((w) => w.number === number);
      if (thread === undefined) throw new Error(`no worker thread ${number} (threads 2 to ${threads})`);
      thread.post({ kind: 'fail-for-test' });
    },
  };
}

