// Small builders for wire-format requests used across tests.
export type Json = unknown;

export const read = (entries: Json[], returns: string[], extra: Record<string, Json> = {}) =>
  ({ request_type: 'read', query_name: null, query: { read: { entries, returns } }, ...extra });

export const write = (entries: Json[], returns: string[], extra: Record<string, Json> = {}) =>
  ({ request_type: 'write', query_name: null, query: { write: { entries, returns } }, ...extra });

export const q = (name: string | null, root: Json, condition?: Json) =>
  ({ query: condition === undefined ? { name, root } : { name, root, condition } });

export const str = (s: string) => ({ value: { string: s } });
export const i64 = (n: number | bigint) => ({ value: { i64: n } });

export const addN = (label: string, props: [string, Json][] = []) => ({ add_n: { label, properties: props } });
export const nodes = (ids: number[] | 'all') => ({ nodes: { reference: ids === 'all' ? 'all' : { ids } } });
export const nodesVar = (name: string) => ({ nodes: { reference: { var: name } } });
export const count = (input: Json) => ({ count: { input } });

/** The body text of a read counting the nodes labelled `label` (one entry `n`). */
export function countNodesBody(label: string): string {
  return JSON.stringify({
    request_type: 'read',
    query: {
      read: {
        entries: [{
          query: {
            name: 'n',
            root: { count: { input: { nodes_where: { predicate: { eq: { left: { property: '$label' }, right: { constant: { string: label } } } } } } } },
          },
        }],
        returns: ['n'],
      },
    },
  });
}

/** Users Ann (0, age 31) and Bo (1, age 27) and an edge Ann -KNOWS-> Bo: the seed of the engine tests. */
export const annKnowsBo = write([
  q('a', addN('User', [['name', str('Ann')], ['age', i64(31)]])),
  q('b', addN('User', [['name', str('Bo')], ['age', i64(27)]])),
  q('e', { add_e: { input: nodesVar('a'), label: 'KNOWS', to: { var: 'b' }, properties: [] } }),
], []);

/** Every node's value map and every edge's properties: what a test compares before and after. */
export const dumpAll = read([
  q('n', { value_map: { input: nodes('all'), properties: null } }),
  q('e', { edge_properties: { input: { edges: { reference: 'all' } } } }),
], ['n', 'e']);
