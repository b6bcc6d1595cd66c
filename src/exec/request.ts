// One request end to end on one thread: decode -> check options -> plan -> execute ->
// render (envelope.md §6 stages 3-10). Used by reader workers, the writer thread and
// the embedded handle. Never throws: failures become `{error, msg}` bodies.
import { decodeRequest } from '../protocol/decode.js';
import { asSvcError, errorBody, optionError, SvcError } from '../protocol/errors.js';
import { planRequest } from '../plan/plan.js';
import type { RedoBatch, Store } from '../store/store.js';
import { runBatch } from './batch.js';
import type { ExecCtx } from './context.js';

/** Execution headers after stage-1 parsing (envelope.md §11); null = header absent. */
export interface RequestFlags {
  warm: boolean | null;
  requireWriter: boolean | null;
  awaitDurable: boolean | null;
}

export const noFlags: RequestFlags = { warm: null, requireWriter: null, awaitDurable: null };

/**
 * writer: executes everything. reader: a pool thread of a writer server (writes are
 * forwarded). replica: a read-only server or handle (writes answer 503).
 */
export type ExecRole = 'writer' | 'reader' | 'replica';

/** A finished response, or (reader role only) "this is a write, send it to the writer". */
export type ExecOutcome = { status: number; body: string } | { forward: 'writer' };

export interface ExecOptions {
  /** Cooperative deadline per request (`--query-timeout-ms`). */
  queryTimeoutMs: number;
  /** Disk storage: log the batch before it is published; a throw rolls the batch back. */
  logBatch?: (batch: RedoBatch) => void;
}

export const defaultExecOptions: ExecOptions = { queryTimeoutMs: 30_000 };

export function executeRequest(
  store: Store, body: Uint8Array | string, flags: RequestFlags, role: ExecRole,
  options: ExecOptions = defaultExecOptions,
): ExecOutcome {
  try {
    const request = decodeRequest(body);
    const write = request.request_type === 'write';
    if (write && flags.warm === true) throw optionError('x-svc-warm is only valid for read requests');
    if (!write && flags.awaitDurable === true) throw optionError('x-svc-await-durable is only valid for write requests');
    if (role === 'reader' && (write || flags.requireWriter === true)) return { forward: 'writer' };
    if (role === 'replica' && flags.requireWriter === true) {
      throw optionError('request requires a writer but this server is read-only', 503);
    }
    if (role === 'replica' && write) throw new SvcError('writer_mode_required', 'writer mode required: this server is read-only');
    const plan = planRequest(request);
    const nowMs = Date.now();
    const at = write ? store.beginWrite() : store.committedEpoch();
    const ctx: ExecCtx = {
      store, at, writing: write, paramFrames: [request.parameters], vars: new Map(),
      trackPath: plan.trackPath, nowMs, deadlineMs: nowMs + options.queryTimeoutMs,
    };
    let response: string;
    try {
      response = runBatch(ctx, plan);
      if (write && options.logBatch) {
        const redo = store.pendingRedo();
        if (redo !== null) options.logBatch(redo);
      }
    } catch (err) {
      if (write) store.rollback();
      throw err;
    }
    if (write) store.commit();
    return { status: 200, body: response };
  } catch (err) {
    const e = asSvcError(err);
    return { status: e.status, body: errorBody(e) };
  }
}
