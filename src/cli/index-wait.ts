// `svc query --wait`: after a write whose answer holds index DDL receipts with an operation
// (kind `accepted` / `existing_operation`, indexes.md §3-§4), poll `get_index_operation`
// (§6, one read batch for all of them) until every operation is `succeeded`, `aborted` or
// `blocked`, showing progress on stderr.
//
// The status object (§5.3) reports the stage and counters of elements visited, not how
// many there are in all, so progress is a spinner with the stage and the counts, not a bar.
// On a TTY one line is rewritten in place (\r, erase line); otherwise (a pipe, a log file,
// tests) a plain line is printed whenever an operation's status or stage changes, and every
// PLAIN_PROGRESS_EVERY_MS while it is running. Each operation ends with one line of its own.
import { CliError } from './errors.js';
import type { HttpResponse } from './http.js';
import { monotonicMs } from '../clock.js';

/** An operation to wait for, from a receipt. */
export interface Receipt {
  readonly operationId: string;
  readonly kind: 'accepted' | 'existing_operation';
  /** `index_id` of an `accepted` receipt (an `existing_operation` one has none). */
  readonly indexId: string | null;
}

/** The members of a status object that are shown; unknown members are ignored (§5.3). */
export interface OperationStatus {
  status: string;
  operation_id: string;
  index_id?: string;
  generation?: string;
  operation_kind?: string;
  family?: string;
  stage?: string;
  attempt?: number;
  progress?: Record<string, string>;
  blocker_code?: string;
  message?: string;
}

/** Terminal (or waiting for a person: `blocked`) statuses. */
const SETTLED = new Set(['succeeded', 'aborted', 'blocked']);
const RECEIPT_KINDS = new Set(['accepted', 'existing_operation']);
const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
/** Time between polls. */
export const POLL_MS = 100;
/** Non-TTY: a line per running operation at most this often while nothing else changes. */
const PLAIN_PROGRESS_EVERY_MS = 2000;

/**
 * Every receipt with an operation in a parsed answer, in order of appearance, each
 * operation once. Receipts may sit under any returned variable (and in lists).
 */
export function findReceipts(answer: unknown): Receipt[] {
  const out: Receipt[] = [];
  const seen = new Set<string>();
  const visit = (value: unknown): void => {
    if (value === null || typeof value !== 'object') return;
    if (Array.isArray(value)) { value.forEach(visit); return; }
    const record = value as Record<string, unknown>;
    const kind = record['kind'];
    const id = record['operation_id'];
    if (typeof kind === 'string' && RECEIPT_KINDS.has(kind) && typeof id === 'string') {
      if (!seen.has(id)) {
        seen.add(id);
        out.push({ operationId: id, kind: kind as Receipt['kind'], indexId: typeof record['index_id'] === 'string' ? record['index_id'] : null });
      }
      return;
    }
    for (const key in record) visit(record[key]);
  };
  visit(answer);
  return out;
}

/** The read batch that polls every operation: variable `op<i>` for receipts[i]. */
export function pollRequest(receipts: readonly Receipt[]): string {
  const names = receipts.map((_, i) => `op${i}`);
  return JSON.stringify({
    request_type: 'read',
    query_name: null,
    query: { read: {
      entries: receipts.map((r, i) => ({ query: { name: names[i], root: { get_index_operation: { operation_id: r.operationId } } } })),
      returns: names,
    } },
  });
}

/** `1,234,567` for a decimal-string counter (they may exceed 2^53: no Number()). */
function grouped(counter: string | undefined): string {
  if (counter === undefined || !/^\d+$/.test(counter)) return '?';
  return counter.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** `build of index 3` / `drop of index 3` / `operation 4f6d2b9e` before the first status. */
function label(receipt: Receipt, status: OperationStatus | undefined): string {
  const kind = status?.operation_kind ?? 'operation';
  const index = status?.index_id ?? receipt.indexId;
  return index === null ? `${kind} ${receipt.operationId.slice(0, 8)}` : `${kind} of index ${index}`;
}

function progressText(status: OperationStatus): string {
  const p = status.progress ?? {};
  const parts = [`${grouped(p['entities'])} entities`];
  if (p['output_operations'] !== undefined && p['output_operations'] !== '0') parts.push(`${grouped(p['output_operations'])} entries written`);
  return parts.join(', ');
}

/** One line for an operation's current status. */
export function describeStatus(receipt: Receipt, status: OperationStatus): string {
  const head = `${label(receipt, status)} (${receipt.operationId})`;
  const stage = status.stage === undefined ? '' : ` at stage ${status.stage}`;
  const attempt = status.attempt !== undefined && status.attempt > 1 ? `, attempt ${status.attempt}` : '';
  switch (status.status) {
    case 'succeeded':
      return `${head} succeeded: ${progressText(status)}`;
    case 'aborted':
      return `${head} aborted${stage}`;
    case 'blocked':
      return `${head} blocked${stage}: ${status.blocker_code ?? 'unknown blocker'}${status.message === undefined ? '' : ` (${status.message})`}`;
    default:
      return `${head} ${status.status}${stage}: ${progressText(status)}${attempt}`;
  }
}

/** Where progress goes; a TTY gets one line rewritten in place. */
export interface ProgressSink {
  readonly isTTY: boolean;
  readonly columns?: number;
  write(text: string): boolean;
}

/** Progress display for a set of operations. */
export class ProgressRenderer {
  private frame = 0;
  /** TTY: a transient line is on screen (to be erased before a permanent line). */
  private transient = false;
  /** Non-TTY: what was last printed per operation, and when. */
  private readonly lastLine = new Map<string, { key: string; atMs: number }>();

  constructor(private readonly out: ProgressSink, private readonly now: () => number = monotonicMs) {}

  /** A permanent line (an operation settled, or a note). */
  line(text: string): void {
    this.clear();
    this.out.write(`${text}\n`);
  }

  /** The operations' statuses after a poll. Settled ones were already reported with line(). */
  update(receipts: readonly Receipt[], statuses: ReadonlyMap<string, OperationStatus>): void {
    const running = receipts.filter((r) => !SETTLED.has(statuses.get(r.operationId)?.status ?? ''));
    if (this.out.isTTY) {
      if (running.length === 0) { this.clear(); return; }
      const settled = receipts.length - running.length;
      const first = running[0]!;
      const status = statuses.get(first.operationId);
      const spin = SPINNER[this.frame++ % SPINNER.length]!;
      // The count first: a narrow terminal cuts the end of the line.
      const count = receipts.length > 1 ? `[${settled}/${receipts.length} done] ` : '';
      let text = status === undefined
        ? `${spin} ${count}waiting for ${label(first, undefined)}`
        : `${spin} ${count}${label(first, status)}: ${status.status}${status.stage === undefined ? '' : ` ${status.stage}`}, ${progressText(status)}`;
      const width = this.out.columns || 80; // 0 when the terminal does not say
      if (text.length > width - 1) text = `${text.slice(0, Math.max(0, width - 2))}…`;
      this.out.write(`\r\x1b[2K${text}`);
      this.transient = true;
      return;
    }
    const nowMs = this.now();
    for (const receipt of running) {
      const status = statuses.get(receipt.operationId);
      if (status === undefined) continue;
      const key = `${status.status}/${status.stage ?? ''}/${status.attempt ?? ''}`;
      const last = this.lastLine.get(receipt.operationId);
      if (last !== undefined && last.key === key && nowMs - last.atMs < PLAIN_PROGRESS_EVERY_MS) continue;
      this.lastLine.set(receipt.operationId, { key, atMs: nowMs });
      this.out.write(`${describeStatus(receipt, status)}\n`);
    }
  }

  /** Erase the transient line (TTY). */
  clear(): void {
    if (!this.transient) return;
    this.out.write('\r\x1b[2K');
    this.transient = false;
  }
}

export interface WaitDeps {
  /** POST the read batch text to /v2/query. */
  send(body: string): Promise<HttpResponse>;
  sink: ProgressSink;
  sleep?: (ms: number) => Promise<void>;
  pollMs?: number;
}

/**
 * Poll until every operation settled. Resolves when all succeeded; throws a CliError naming
 * each blocked (with its blocker_code) or aborted operation otherwise, and on a failed poll.
 */
export async function waitForOperations(receipts: readonly Receipt[], deps: WaitDeps): Promise<void> {
  if (receipts.length === 0) return;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const render = new ProgressRenderer(deps.sink);
  const statuses = new Map<string, OperationStatus>();
  render.line(`waiting for ${receipts.length === 1 ? 'index operation' : `${receipts.length} index operations`}: ${receipts.map((r) => r.operationId).join(', ')}`);
  try {
    for (;;) {
      const pending = receipts.filter((r) => !SETTLED.has(statuses.get(r.operationId)?.status ?? ''));
      if (pending.length === 0) break;
      const response = await deps.send(pollRequest(pending));
      if (response.status < 200 || response.status > 299) {
        const body = response.text.trim();
        throw new CliError(`polling get_index_operation failed with HTTP ${response.status}: ${body === '' ? '(no body)' : body}`);
      }
      let answer: Record<string, unknown>;
      try {
        answer = JSON.parse(response.text) as Record<string, unknown>;
      } catch {
        throw new CliError(`polling get_index_operation: the answer is not JSON: ${response.text.slice(0, 200)}`);
      }
      pending.forEach((receipt, i) => {
        const status = answer[`op${i}`] as OperationStatus | undefined;
        if (status === undefined || typeof status !== 'object' || typeof status.status !== 'string') {
          throw new CliError(`polling get_index_operation: no status object for operation ${receipt.operationId}`);
        }
        statuses.set(receipt.operationId, status);
        if (SETTLED.has(status.status)) render.line(describeStatus(receipt, status));
      });
      render.update(receipts, statuses);
      if (receipts.every((r) => SETTLED.has(statuses.get(r.operationId)?.status ?? ''))) break;
      await sleep(deps.pollMs ?? POLL_MS);
    }
  } finally {
    render.clear();
  }
  const failed = receipts.map((r) => ({ r, s: statuses.get(r.operationId)! })).filter(({ s }) => s.status !== 'succeeded');
  if (failed.length === 0) return;
  const lines = failed.map(({ r, s }) => (s.status === 'blocked'
    ? `${label(r, s)} (${r.operationId}) is blocked: ${s.blocker_code ?? 'unknown blocker'}`
    : `${label(r, s)} (${r.operationId}) was aborted`));
  const hint = failed.some(({ s }) => s.status === 'blocked')
    ? '\nHint: fix the data, then send {"retry_index_operation":{"operation_id":"..."}}, or give up with {"abort_index_operation":{"operation_id":"..."}} (write batches).'
    : '';
  throw new CliError(`${lines.join('\n')}${hint}`, { exitCode: 2 });
}
