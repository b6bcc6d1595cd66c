// The reference graph: plain Maps of plain records. Nodes and edges keep their label in
// `props` under "$label" because the protocol treats it as a stored property
// (envelope.md §10, values.md §6 step 5). IDs come from two sequences starting at 0
// (envelope.md §10); a rollback restores the elements but never the sequences.
import type { Value } from '../../src/protocol/value.js';
import { RefError } from './values.js';

export interface NodeRec { id: bigint; props: Map<string, Value> }
export interface EdgeRec { id: bigint; from: bigint; to: bigint; props: Map<string, Value> }

export type Direction = 'out' | 'in' | 'both';

interface Snapshot { nodes: NodeRec[]; edges: EdgeRec[] }

const copyNode = (n: NodeRec): NodeRec => ({ id: n.id, props: new Map(n.props) });
const copyEdge = (e: EdgeRec): EdgeRec => ({ id: e.id, from: e.from, to: e.to, props: new Map(e.props) });
const byId = (a: { id: bigint }, b: { id: bigint }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

export class Graph {
  nodes = new Map<bigint, NodeRec>();
  edges = new Map<bigint, EdgeRec>();
  nextNodeId = 0n;
  nextEdgeId = 0n;

  snapshot(): Snapshot {
    return { nodes: [...this.nodes.values()].map(copyNode), edges: [...this.edges.values()].map(copyEdge) };
  }

  /** Put the elements back as they were; the ID sequences keep what was consumed. */
  restore(s: Snapshot): void {
    this.nodes = new Map(s.nodes.map((n) => [n.id, copyNode(n)]));
    this.edges = new Map(s.edges.map((e) => [e.id, copyEdge(e)]));
  }

  allNodes(): NodeRec[] {
    return [...this.nodes.values()].sort(byId);
  }

  allEdges(): EdgeRec[] {
    return [...this.edges.values()].sort(byId);
  }

  /** Allocates the next node ID and stores the node. */
  addNode(label: string, props: Map<string, Value>): NodeRec {
    const id = this.nextNodeId++;
    const all = new Map(props);
    all.set('$label', label);
    const node = { id, props: all };
    this.nodes.set(id, node);
    return node;
  }

  /** Allocates the next edge ID (consumed even if an endpoint is missing) and stores the edge. */
  addEdge(from: bigint, to: bigint, label: string, props: Map<string, Value>): EdgeRec {
    const id = this.nextEdgeId++;
    for (const end of [from, to]) {
      if (!this.nodes.has(end)) throw new RefError('node_not_found', `db error: Node not found: ${end}`, 500);
    }
    const all = new Map(props);
    all.set('$label', label);
    const edge = { id, from, to, props: all };
    this.edges.set(id, edge);
    return edge;
  }

  removeNode(id: bigint): void {
    this.nodes.delete(id);
    for (const e of this.allEdges()) if (e.from === id || e.to === id) this.edges.delete(e.id);
  }

  removeEdge(id: bigint): void {
    this.edges.delete(id);
  }

  /** Distinct edges touching `node` in the direction, optionally with a label, by ascending ID. */
  incidentEdges(node: bigint, dir: Direction, label: string | null): EdgeRec[] {
    return this.allEdges().filter((e) => {
      const touches = dir === 'out' ? e.from === node : dir === 'in' ? e.to === node : e.from === node || e.to === node;
      return touches && (label === null || e.props.get('$label') === label);
    });
  }

  /** Distinct neighbor node IDs over matching edges, ascending (a self-loop yields the node once). */
  neighbors(node: bigint, dir: Direction, label: string | null): bigint[] {
    const found = new Set<bigint>();
    for (const e of this.incidentEdges(node, dir, label)) {
      if (dir === 'out') found.add(e.to);
      else if (dir === 'in') found.add(e.from);
      else found.add(e.from === node ? e.to : e.from);
    }
    return [...found].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }
}
