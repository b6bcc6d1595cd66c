// Shared by the vector and text index tests: answers that must succeed or fail, index
// builds polled to their end, snapshot-level stores driven without a handle, and a seeded
// generator.
import type { Database } from '../../src/index.js';
import { executeRequest, noFlags } from '../../src/exec/request.js';
import type { IndexRuntime } from '../../src/index/runtime.js';
import type { Store } from '../../src/store/store.js';
import { q, read, write } from './requests.js';

export const createIndex = (spec: unknown) => write([q('r', { create_index: { spec, if_not_exists: true } })], ['r']);

export async function ok(db: Database, request: unknown): Promise<Record<string, unknown>> {
  const { status, body } = await db.queryRaw(request);
  if (status !== 200) throw new Error(`expected 200, got ${status} ${body}`);
  return JSON.parse(body) as Record<string, unknown>;
}

export async function fails(db: Database, request: unknown): Promise<{ status: number; error: string; msg: string }> {
  const { status, body } = await db.queryRaw(request);
  const parsed = JSON.parse(body) as { error: string; msg: string };
  return { status, error: parsed.error, msg: parsed.msg };
}

/** Poll an index operation until it is terminal (or blocked); its status object. */
export async function settle(db: Database, operationId: string, until: readonly string[] = ['succeeded', 'aborted', 'blocked']): Promise<Record<string, unknown>> {
  for (let i = 0; i < 4000; i++) {
    const s = (await ok(db, read([q('r', { get_index_operation: { operation_id: operationId } })], ['r'])))['r'] as Record<string, unknown>;
    if (until.includes(s['status'] as string)) return s;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`index operation ${operationId} did not settle`);
}

/** Create an index and poll its build until it is terminal or blocked. */
export async function buildIndex(db: Database, spec: unknown): Promise<Record<string, unknown>> {
  const receipt = (await ok(db, createIndex(spec)))['r'] as Record<string, string>;
  return settle(db, receipt['operation_id']!);
}

/** A request on a bare store (snapshot tests); throws unless it answers 200. */
export function runOn(store: Store, request: unknown, role: 'writer' | 'reader' = 'writer'): Record<string, unknown> {
  const out = executeRequest(store, JSON.stringify(request), noFlags, role);
  if (!('status' in out) || out.status !== 200) throw new Error(`request failed: ${JSON.stringify(out)}`);
  return JSON.parse(out.body) as Record<string, unknown>;
}

/** Run a bare store's index work slices until none is left (what the Committer does between requests). */
export function settleIndexWork(store: Store): void {
  const runtime = store.indexes as IndexRuntime;
  for (let i = 0; i < 10_000; i++) {
    store.beginWrite();
    if (runtime.step() !== 'progress') { store.rollback(); return; }
    store.commit();
  }
  throw new Error('index work did not finish');
}

export { rng as random } from '../../bench/seeded-random.js';
