// Reads executed on the uWS thread itself. measured.md: one Piscina hop costs ~22 us of
// CPU per request and a point lookup ~3.5 us, so for cheap reads the hop, not the query,
// is the cost. A body that once took longer than `limits.inlineReadBudgetMs` is sent to
// the reader pool from then on (per exact body text), so a slow query stalls the event
// loop at most `limits.inlineSlowStrikes` times in a row per distinct body (early runs pay
// for parsing, planning, a cold JIT and GC pauses, so a single slow run proves nothing); bodies too
// large to key go to the pool directly.
import { limits } from '../limits.js';
import { executeRequest, type ExecOptions } from '../exec/request.js';
import type { Store } from '../store/store.js';
import type { QueryJob, QuerySink } from './job.js';

const decoder = new TextDecoder('utf-8', { fatal: true });

export class InlineReads implements QuerySink {
  /** Consecutive slow runs per body (a fast run clears it); at limits.inlineSlowStrikes the body goes to the pool. */
  private readonly strikes = new Map<string, number>();

  constructor(
    private readonly store: Store,
    private readonly pool: QuerySink,
    private readonly writer: QuerySink,
    private readonly options: ExecOptions,
  ) {}

  submit(job: QueryJob): void {
    if (job.responder.settled) return;
    const text = job.body.byteLength <= limits.planCacheBodyBytesMax ? this.text(job.body) : null;
    if (text === null || (this.strikes.get(text) ?? 0) >= limits.inlineSlowStrikes) {
      this.pool.submit(job);
      return;
    }
    const started = performance.now();
    const outcome = executeRequest(this.store, text, job.flags, 'reader', this.options);
    if (performance.now() - started > limits.inlineReadBudgetMs) this.markSlow(text);
    else if (this.strikes.size > 0) this.strikes.delete(text);
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
    if (this.strikes.size >= limits.slowReadBodiesMax) this.strikes.delete(this.strikes.keys().next().value!);
    this.strikes.set(text, (this.strikes.get(text) ?? 0) + 1);
  }
}
