// Prometheus metrics of a server (`GET /metrics`, README "Server"), with
// prom-client.
//
// Every front-end thread counts the queries it answers in typed arrays of its own (a few
// increments per request: no label hashing, no shared memory on the request path). A scrape
// may land on any thread; it asks the main thread, which collects every thread's counts as
// prom-client's JSON (one message round trip per thread),
// adds its own gauges (queues, the reader pool, the writer) and the process metrics, and
// merges them with prom-client's AggregatorRegistry: counters and histograms are summed
// over threads. Nothing runs between scrapes.
import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { MetricsJson } from './query-metrics.js';

/** A registry's metrics as plain data (prom-client's own types describe the same shape). */
export async function registryJson(registry: Registry): Promise<MetricsJson> {
  return (await registry.getMetricsAsJSON()) as unknown as MetricsJson;
}

/** Gauges the main thread reads at each scrape. */
export interface ServerGaugeSources {
  /** Requests waiting for a reader thread. */
  readerQueued(): number;
  /** Read tasks handed to reader threads and not answered. */
  readerTasks(): number;
  /** Reads the reader pool answered itself past their deadline (reader-pool.ts). */
  readsAnsweredOverdue(): number;
  /** Requests sent to the writer thread and not answered. */
  writerPending(): number;
  /** Whether the server answers /readyz with 200. */
  ready(): boolean;
}

/** The main thread's registry: its gauges and the process metrics (CPU, memory, file descriptors). */
export function serverRegistry(sources: ServerGaugeSources): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const gauge = (name: string, help: string, read: () => number): void => {
    new Gauge({ name, help, registers: [registry], collect() { this.set(read()); } });
  };
  gauge('svc_reader_queue_requests', 'Requests waiting for a reader thread', sources.readerQueued);
  gauge('svc_reader_tasks_in_flight', 'Read tasks handed to reader threads and not answered yet', sources.readerTasks);
  gauge('svc_writer_pending_requests', 'Requests sent to the writer thread and not answered yet', sources.writerPending);
  gauge('svc_ready', '1 while the server answers /readyz with 200', () => (sources.ready() ? 1 : 0));
  new Counter({
    name: 'svc_reads_answered_overdue_total',
    help: 'Reads the reader pool answered query_deadline_exceeded itself, past their deadline + grace',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(sources.readsAnsweredOverdue());
    },
  });
  return registry;
}

/** The exposition text of several threads' registries merged (counters and histograms summed). */
export async function mergedMetrics(parts: MetricsJson[]): Promise<string> {
  return AggregatorRegistry.aggregate(parts).metrics();
}
