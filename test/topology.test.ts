// The topology's snapshot form is compacted (tight blocks, no superseded blocks, no entries
// deleted before the snapshot): a store rebuilt from it must answer every navigation like
// the original, and keep working (appends grow the tight blocks, deletions find entries).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { executeRequest, noFlags } from '../src/exec/request.js';
import { Store } from '../src/store/store.js';

const run = (store: Store, request: unknown, role: 'writer' | 'reader' = 'writer'): { status: number; body: string } => {
  const out = executeRequest(store, JSON.stringify(request), noFlags, role);
  if (!('status' in out)) throw new Error('unexpected forward');
  return out;
};
const write = (entries: unknown[]) => ({ request_type: 'write', query: { write: { entries, returns: [] } } });
const entry = (root: unknown) => ({ query: { root } });

/** Every node's out / in / both neighbours and incident edges, as one comparable text. */
function neighbourhoods(store: Store, nodes: number): string {
  const ref = { ids: Array.from({ length: nodes }, (_, i) => i) };
  const entries = ['out', 'in', 'both', 'out_e', 'in_e', 'both_e'].flatMap((op) => [undefined, 'X'].map((label) => ({ query: {
    name: `${op}_${label ?? 'any'}`,
    root: { id: { input: { [op]: { input: { nodes: { reference: ref } }, ...(label === undefined ? {} : { label }) } } } },
  } })));
  return run(store, { request_type: 'read', query: { read: { entries, returns: entries.map((e) => e.query.name) } } }, 'reader').body;
}

describe('topology snapshot form', () => {
  it('a store rebuilt from the compacted topology navigates like the original, then keeps growing', () => {
    const opArb = fc.oneof(
      fc.tuple(fc.constant('edge' as const), fc.nat(11), fc.nat(11), fc.constantFrom('X', 'Y')),
      fc.tuple(fc.constant('drop' as const), fc.nat(60)),
      fc.tuple(fc.constant('fail' as const), fc.nat(11)),
    );
    fc.assert(fc.property(fc.array(opArb, { minLength: 1, maxLength: 80 }), fc.array(opArb, { maxLength: 30 }), (before, after) => {
      const nodes = 12;
      const original = Store.create();
      run(original, write(Array.from({ length: nodes }, () => entry({ add_n: { label: 'N', properties: [] } }))));
      const apply = (store: Store, ops: typeof before) => {
        for (const op of ops) {
          if (op[0] === 'edge') run(store, write([entry({ add_e: { input: { nodes: { reference: { ids: [op[1]] } } }, label: op[3], to: { ids: [op[2]] }, properties: [] } })]));
          else if (op[0] === 'drop') run(store, write([entry({ drop_edge_by_id: { edges: { ids: [op[1]] } } })]));
          // A batch that adds an edge and then fails: rolled back, its adjacency entries cut off.
          else expect(run(store, write([entry({ add_e: { input: { nodes: { reference: { ids: [op[1]] } } }, label: 'X', to: { ids: [op[1]] }, properties: [] } }),
            entry({ add_e: { input: { nodes: { reference: { ids: [op[1]] } } }, label: 'X', to: { ids: [999] }, properties: [] } })])).status).toBe(500);
        }
      };
      apply(original, before);
      const rebuilt = Store.fromSections(original.exportSections());
      expect(neighbourhoods(rebuilt, nodes)).toBe(neighbourhoods(original, nodes));
      apply(original, after);
      apply(rebuilt, after);
      expect(neighbourhoods(rebuilt, nodes)).toBe(neighbourhoods(original, nodes));
      // The compacted form holds no more than the live entries (+ per-block overhead).
      expect(rebuilt.topology.exportBytes().byteLength).toBeLessThanOrEqual(original.topology.exportBytes().byteLength);
    }), { numRuns: 150 });
  });
});

describe('topology section of a snapshot', () => {
  const sectionsWith = (change: (bytes: Uint8Array) => Uint8Array) => {
    const store = Store.create();
    run(store, write([entry({ add_n: { label: 'N', properties: [] } }), entry({ add_n: { label: 'N', properties: [] } })]));
    run(store, write([entry({ add_e: { input: { nodes: { reference: { ids: [0] } } }, label: 'X', to: { ids: [1] }, properties: [] } })]));
    const sections = store.exportSections();
    sections.set('topology', change(sections.get('topology')!));
    return sections;
  };
  const codeOf = (f: () => unknown): string => {
    try { f(); } catch (err) { return (err as { code?: string }).code ?? String(err); }
    return 'no error';
  };

  it('a truncated section or one whose length disagrees with its header is storage_error', () => {
    expect(codeOf(() => Store.fromSections(sectionsWith((b) => b.slice(0, 100))))).toBe('storage_error');
    expect(codeOf(() => Store.fromSections(sectionsWith((b) => b.slice(0, b.byteLength - 4))))).toBe('storage_error');
    expect(codeOf(() => Store.fromSections(sectionsWith((b) => b)))).toBe('no error');
  });
});
