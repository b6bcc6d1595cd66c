// Reads executed on the uWS thread itself. measured.md: one Piscina hop costs ~22 us of
// CPU per request and a point lookup ~3.5 us, so for cheap reads the hop, not the query,
// is the cost. But the uWS thread serves every client and /healthz, so it must never run
// unbounded work:
//
// - Only small bodies (limits.planCacheBodyBytesMax) are considered: parsing and planning
//   them is bounded.
// - Only plans with a static cost bound run here (Plan.inlineSafe: no scans, repeats,
//   searches or shortest paths); the rest go to the reader pool before executing.
// - An inline run gets a work cap (limits.inlineReadWorkMax units, ~1-2 ms, src/query-guard.ts);
//   a read that outgrows it is abandoned and sent to the pool (reads have no side effects),
//   and its body text is remembered so the next identical body goes to the pool directly.
// - A plan without a static cost bound is one whatever its parameter values: its body text
//   with the `parameters` value cut out is remembered (under the index catalog's version:
//   an index can bound a scan), so the next body of that query text
//   goes to the pool without decoding its parameters here (a 128-number query vector costs
//   ~15 us to decode, on the thread every client shares).
import { limits } from '../limits.js';
import { executeRequest, execOptions, type ExecOptions } from '../exec/request.js';
import { lastParametersSpan, leadingRequestType } from '../protocol/request-text.js';
import { bodyText } from '../protocol/json.js';
import { currentView } from '../index/view.js';
import type { Store } from '../store/store.js';
import type { QueryJob, QuerySink } from './job.js';

/** The start of a large body, for its request_type: a character cut at the end is harmless there. */
const prefixDecoder = new TextDecoder('utf-8');

export class InlineReads implements QuerySink {
  /** Body texts that outgrew the inline work cap (oldest forgotten). */
  private readonly tooCostly = new Set<string>();
  /** Query texts (queryText) whose plans have no static cost bound (oldest forgotten). */
  private readonly unbounded = new Set<string>();
  private readonly options: ExecOptions;

  constructor(
    private readonly store: Store,
    private readonly pool: QuerySink,
    private readonly writer: QuerySink,
    options: ExecOptions,
  ) {
    this.options = execOptions({ ...options, inlineWorkMax: options.inlineWorkMax ?? limits.inlineReadWorkMax });
  }

  submit(job: QueryJob): void {
    if (job.responder.settled) return;
    const small = job.body.byteLength <= limits.planCacheBodyBytesMax;
    const text = small ? this.text(job.body) : null;
    if (!small && leadingRequestType(prefixDecoder.decode(job.body.subarray(0, limits.planCacheBodyBytesMax))) === 'write') {
      // A large write (a bulk load's 1-3 MB): a reader would parse all of it only to answer
      // "forward"; the writer parses it once (docs/architecture.md §2).
      this.writer.submit(job);
      return;
    }
    if (small && text === null) {
      // Not UTF-8: the decoder's error, answered here (bounded: at most 4 KiB to look at)
      // rather than by a reader after whatever waits in the pool's queue.
      const outcome = executeRequest(this.store, job.body, job.flags, 'reader', this.options);
      if (!('forward' in outcome)) {
        job.responder.respond(outcome.status, outcome.body);
        return;
      }
    }
    // Looked up only once some text is remembered: other reads do not even hash theirs.
    if (text === null || (this.tooCostly.size > 0 && this.tooCostly.has(text)) || (this.unbounded.size > 0 && this.unbounded.has(queryText(text, this.store) ?? ''))) {
      if (text !== null) job.costly = true;
      this.pool.submit(job);
      return;
    }
    this.options.receivedAtMs = job.receivedAtMs ?? 0;
    const outcome = executeRequest(this.store, text, job.flags, 'reader', this.options);
    if (!('forward' in outcome)) job.responder.respond(outcome.status, outcome.body);
    else if (outcome.forward === 'writer') this.writer.submit(job);
    else {
      const query = outcome.unbounded === true ? queryText(text, this.store) : null;
      if (query !== null) remember(this.unbounded, query);
      else remember(this.tooCostly, text);
      job.costly = true;
      this.pool.submit(job);
    }
  }

  private text(body: Uint8Array): string | null {
    try {
      return bodyText(body);
    } catch {
      return null; // not UTF-8: submit() answers the decoder's error (or a reader, for a large body)
    }
  }
}

/** Add `text` to `texts`, forgetting the oldest past limits.slowReadBodiesMax. */
function remember(texts: Set<string>, text: string): void {
  if (texts.size >= limits.slowReadBodiesMax) texts.delete(texts.values().next().value!);
  texts.add(text);
}

/**
 * A body's text without its `parameters` value, under the store's index catalog version (an
 * index can give a scan a static cost bound), NUL-separated (JSON text holds no raw NUL);
 * null when it has no `parameters`.
 */
function queryText(text: string, store: Store): string | null {
  const span = lastParametersSpan(text);
  return span === null ? null : `${currentView(store).version}\u0000${text.slice(0, span[0])}\u0000${text.slice(span[1])}`;
}
