// Reads executed on the uWS thread itself. measured.md: one Piscina hop costs ~22 us of
// CPU per request and a point lookup ~3.5 us, so for cheap reads the hop, not the query,
// is the cost. A body that once took longer than `limits.inlineReadBudgetMs` is sent to
// the reader pool from then on (per exact body text), so a slow query stalls the event
// loop at most once per distinct body; bodies too large to key go to the pool directly.
import { limits } from '../limits.js';
import { executeRequest, type ExecOptions } from '../exec/request.js';
import type { Store } from '../store/store.js';
import type { QueryJob, QuerySink } from './job.js';

const decoder = new TextDecoder('utf-8', { fatal: true });

export class InlineReads implements QuerySink {
  private readonly slow = new Set<string>();

  constructor(
    private readonly store: Store,
    private readonly pool: QuerySink,
    private readonly writer: QuerySink,
    private readonly options: ExecOptions,
  ) {}

  submit(job: QueryJob): void {
    if (job.responder.settled) return;
    const text = job.body.byteLength <= limits.planCacheBodyBytesMax ? this.text(job.body) : null;
    if (text === null || this.slow.has(text)) {
      this.pool.submit(job);
      return;
    }
    const started = performance.now();
    const outcome = executeRequest(this.store, text, job.flags, 'reader', this.options);
    if (performance.now() - started > limits.inlineReadBudgetMs) this.markSlow(text);
    if ('forward' in outcome) this.writer.submit(job);
    else job.responder.respond(outcome.status, outcome.body);
  }

  private text(body: Uint8Array): string | null {
    try {
      return decoder.decode(body);
    } catch {
      return null; // not UTF-8: a reader answers the decode error
    }
  }

  private markSlow(text: string): void {
    if (this.slow.size >= limits.slowReadBodiesMax) this.slow.delete(this.slow.values().next().value!);
    this.slow.add(text);
  }
}
