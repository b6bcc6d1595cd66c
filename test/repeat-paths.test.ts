// Edges that leave a `repeat` unchanged (emit "before") still know the node they were
// reached from: a later `both` / `other_n` gives the other endpoint, not both
// (operations.md §4.1, §4.3). The planner tracks paths when a repeat's input may hold edges
// and its body yields nodes (src/plan/plan.ts); found by test/differential.test.ts (seed
// -1772340882), whose reference interpreter agrees with every answer here.
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../src/index.js';
import { ReferenceDb } from './reference/interpreter.js';
import { runReference, showPlain } from './reference/harness.js';

// Nodes 0-3; one edge 0 -> 1.
const graph = JSON.stringify({ request_type: 'write', query: { write: { entries: [
  ...[0, 1, 2, 3].map((i) => ({ query: { name: `n${i}`, root: { add_n: { label: 'A', properties: [] } } } })),
  { query: { name: 'e0', root: { add_e: { input: { nodes: { reference: { var: 'n0' } } }, label: 'X', to: { var: 'n1' }, properties: [] } } } },
], returns: [] } } });
const read = (root: unknown): string => JSON.stringify({ request_type: 'read', query: { read: { entries: [{ query: { name: 'r', root } }], returns: ['r'] } } });
/** The edge 0 -> 1, reached from node 1 (in_e), through a repeat that emits it before its first step. */
const repeated = { repeat: { input: { in_e: { input: { nodes: { reference: 'all' } } } }, config: {
  traversal: { root: { out: { input: 'context' } } }, times: null, until: null, emit: 'before', emit_predicate: null, max_depth: 1,
} } };

describe('edges out of a repeat keep their path', () => {
  it.each([
    ['both', { both: { input: repeated } }, '{"r":[{"$id":0}]}'],
    ['other_n', { other_n: { input: repeated } }, '{"r":[{"$id":0}]}'],
    ['union of both and context', { union: { input: repeated, traversals: [{ root: { both: { input: 'context' } } }, { root: 'context' }] } }, '{"r":[{"$id":0},{"$id":0}]}'],
  ])('%s gives the endpoint it did not come from', async (_name, root, want) => {
    const db = await openDatabase();
    const reference = new ReferenceDb();
    try {
      await db.queryRaw(graph);
      runReference(reference, graph);
      const body = read(root);
      const got = await db.queryRaw(body);
      expect(got.body).toBe(want);
      expect(JSON.parse(got.body)).toEqual(JSON.parse(showPlain(runReference(reference, body).body)));
    } finally {
      await db.close();
    }
  });
});
