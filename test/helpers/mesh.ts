// A complete directed graph and a read over it that runs until the query deadline stops it:
// the fixture of the tests that need a thread held busy for a known time.
import { addN, count, nodes, q, read, write } from './requests.js';

/** Nodes of the complete graph (ids 0..MESH_NODES-1). */
export const MESH_NODES = 30;

/** Write request: MESH_NODES nodes labelled MeshNode and an edge MESH from every node to every node. */
export const meshWrite = JSON.stringify({
  ...write([
    { for_each: { param: 'ns', body: [q(null, addN('MeshNode'))] } },
    { for_each: { param: 'es', body: [q(null, { add_e: { input: { nodes: { reference: { param: 'src' } } }, label: 'MESH', to: { param: 'dst' }, properties: [] } })] } },
  ], []),
  parameters: {
    ns: Array.from({ length: MESH_NODES }, () => ({})),
    es: Array.from({ length: MESH_NODES * MESH_NODES }, (_, i) => ({ src: Math.floor(i / MESH_NODES), dst: i % MESH_NODES })),
  },
});

/** A read over the mesh that would run for minutes (4 hops: 30^4 rows, 10,000 times): the deadline stops it. */
export const slowMeshRead = JSON.stringify({
  ...read([{ for_each: { param: 'xs', body: [q('r', count({ repeat: { input: nodes([0]), config: {
    traversal: { root: { out: { input: 'context', label: 'MESH' } } }, times: 4, emit: 'none', max_depth: 100,
  } } }))] } }], []),
  parameters: { xs: Array.from({ length: 10_000 }, () => ({})) },
});
