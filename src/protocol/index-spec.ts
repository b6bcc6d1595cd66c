// IndexSpec (indexes.md §2): the index definitions a request asks for, decoded and checked
// like the rest of a request (protocol/decode.ts). The catalog (index/catalog.ts) keeps
// them; identity and lifecycle live there.
import { jsonError } from './errors.js';

export type Lane = 'equality' | 'range' | 'vector' | 'text';
export type ElementKind = 'node' | 'edge';
export type Metric = 'cosine' | 'euclidean' | 'manhattan';

export interface IndexDefinition {
  readonly lane: Lane;
  readonly element: ElementKind;
  readonly label: string;
  readonly property: string;
  /** node equality only. */
  readonly unique: boolean;
  /** range only ('asc' by default). */
  readonly direction: 'asc' | 'desc' | null;
  /** vector only. */
  readonly dimension: number | null;
  readonly metric: Metric | null;
  /** vector and text only. */
  readonly tenantProperty: string | null;
  /**
   * text only: the analyzer and whether postings keep term positions. The wire always asks
   * for `standard` without positions (indexes.md §2); the embedded handle may ask for others
   * (OpenOptions.textAnalyzer). Absent in catalogs written before text indexes existed.
   */
  readonly analyzer?: TextAnalyzer | null;
  readonly positions?: boolean;
}

export type TextAnalyzer = 'standard' | 'standard_stem_en' | 'whitespace_lowercase';

const specKinds: Record<string, [ElementKind, Lane]> = {
  node_equality: ['node', 'equality'], node_range: ['node', 'range'],
  edge_equality: ['edge', 'equality'], edge_range: ['edge', 'range'],
  node_vector: ['node', 'vector'], edge_vector: ['edge', 'vector'],
  node_text: ['node', 'text'], edge_text: ['edge', 'text'],
};

const specFields: Record<Lane, readonly string[]> = {
  equality: ['label', 'property', 'unique'],
  range: ['label', 'property', 'direction'],
  vector: ['label', 'property', 'dimension', 'metric', 'tenant_property'],
  text: ['label', 'property', 'tenant_property'],
};

/**
 * The definition an IndexSpec asks for (indexes.md §2). Shape and type errors are decode
 * errors (400 invalid_query_json); empty names are left to planning (checkIndexNames).
 */
/** An IndexSpec as decoded: its variant tag and its fields (protocol/ast.ts IndexSpec). */
export interface RawIndexSpec { kind: string; fields: Map<string, unknown> }

export function definitionOf(spec: RawIndexSpec, what: string): IndexDefinition {
  const kind = specKinds[spec.kind];
  if (kind === undefined) throw jsonError(`${what}: unknown index spec variant \`${spec.kind}\``);
  const [element, lane] = kind;
  const f = spec.fields;
  for (const key of f.keys()) {
    if (!specFields[lane].includes(key)) throw jsonError(`${what}.${spec.kind}: unknown field \`${key}\``);
  }
  const str = (key: string, required: boolean): string | null => {
    const v = f.get(key);
    if (v === undefined || v === null) {
      if (required) throw jsonError(`${what}.${spec.kind}: missing field \`${key}\``);
      return null;
    }
    if (typeof v !== 'string') throw jsonError(`${what}.${spec.kind}.${key}: expected a string`);
    return v;
  };
  const label = str('label', true)!, property = str('property', true)!;
  let unique = false, direction: 'asc' | 'desc' | null = null, dimension: number | null = null;
  let metric: IndexDefinition['metric'] = null, tenantProperty: string | null = null;
  if (lane === 'equality') {
    const u = f.get('unique');
    if (u !== undefined && u !== null && typeof u !== 'boolean') throw jsonError(`${what}.${spec.kind}.unique: expected a boolean`);
    unique = u === true;
    if (unique && element === 'edge') throw jsonError(`${what}.${spec.kind}: unique exists only for node equality indexes`);
  }
  if (lane === 'range') {
    const d = str('direction', false) ?? 'asc';
    if (d !== 'asc' && d !== 'desc') throw jsonError(`${what}.${spec.kind}.direction: expected "asc" or "desc"`);
    direction = d;
  }
  if (lane === 'vector') {
    // An integer token (values.md §2: `3.0` and `1e1` are floats, refused where an integer is due).
    const d = f.get('dimension');
    if (typeof d !== 'bigint' || d < 1n || d > 0xffffffffn) {
      throw jsonError(`${what}.${spec.kind}.dimension: expected an integer >= 1`);
    }
    dimension = Number(d);
    const m = str('metric', true);
    if (m !== 'cosine' && m !== 'euclidean' && m !== 'manhattan') throw jsonError(`${what}.${spec.kind}.metric: expected "cosine", "euclidean" or "manhattan"`);
    metric = m;
  }
  if (lane === 'vector' || lane === 'text') tenantProperty = str('tenant_property', false);
  return { lane, element, label, property, unique, direction, dimension, metric, tenantProperty, analyzer: lane === 'text' ? 'standard' : null, positions: false };
}

/** Planning check (400 invalid_empty_name) of the names a spec carries. */
export function emptyNameOf(d: IndexDefinition): string | null {
  if (d.label === '') return 'index label';
  if (d.property === '') return 'index property';
  if (d.tenantProperty === '') return 'index tenant property';
  return null;
}

