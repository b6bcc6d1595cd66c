// The readers' view of the index catalog: the writer publishes it in the topology memory
// after every batch that changed the catalog, readers decode it when its version changed.
//
// Layout: the header word VIEW_ROOT holds the word offset of the current view block (0:
// none yet); a block is [version, byteLength, bytes...] (msgpack). A new block is written
// whole, then its offset is Atomics.stored into VIEW_ROOT (release); the replaced block is
// retired like a superseded adjacency block, so a read that Atomics.loaded the old offset
// (acquire, after its beginRead) reads it intact. Versions only grow, so a reader's decoded
// copy is current exactly when the block's version equals the copy's.
//
// The view is catalog metadata, not versioned by snapshot: a reader at snapshot S uses an
// index only when activeSince <= S and (retiredAt == 0 or S < retiredAt), and the writer
// frees an index's entries only after every such reader is done (runtime.ts cleanupStage).
import { Packr } from 'msgpackr';
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';
import type { Store } from '../store/store.js';
import { T_VIEW_ROOT, type Topology } from '../store/topology.js';
import type { IndexDefinition, IndexOperation, IndexRecord } from './catalog.js';
import { IndexEntries } from './entries.js';

const packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false });

/** Its header word in the topology memory (topology.ts). */
export const VIEW_ROOT = T_VIEW_ROOT;

/** One index as readers see it. */
export interface ViewIndex {
  readonly record: IndexRecord;
  /** Word offset of its entries' root in the topology memory (0: no entries). */
  readonly root: number;
  /** Vector and text indexes: the word offset of their partition directory (index/partition-directory.ts). */
  readonly directory?: number;
  /** Vector indexes: the root of their element -> point map (index/vector-elements.ts). */
  readonly elements?: number;
}

export interface CatalogView {
  readonly version: number;
  readonly indexes: readonly ViewIndex[];
  readonly operations: ReadonlyMap<string, IndexOperation>;
}

export const emptyView: CatalogView = { version: 0, indexes: [], operations: new Map() };

interface ViewPayload { indexes: ViewIndex[]; operations: IndexOperation[] }

/** A view block: its word offset and the words it was allocated with. */
export interface ViewBlock { readonly at: number; readonly words: number }

/**
 * Writer: a new view written to a block of its own, not published yet. The allocation is
 * the part that can fail (storage_error when the topology heap is full): a commit writes its
 * view before the batch is logged, so it fails while the batch can still roll back.
 */
export function writeView(topology: Topology, version: number, indexes: ViewIndex[], operations: IndexOperation[]): ViewBlock {
  const bytes = packr.pack({ indexes, operations } satisfies ViewPayload) as Uint8Array;
  const words = 2 + ((bytes.byteLength + 3) >>> 2);
  const at = topology.allocateWords(words);
  const view = topology.cover(at + words);
  view[at] = version;
  view[at + 1] = bytes.byteLength;
  new Uint8Array(view.buffer, (at + 2) * 4, bytes.byteLength).set(bytes);
  return { at, words };
}

/** Writer: readers see `block` from now on; `previous` (the caller's last one) is retired. Cannot fail. */
export function showView(topology: Topology, block: ViewBlock, previous: ViewBlock | null): void {
  Atomics.store(topology.words, VIEW_ROOT, block.at);
  if (previous !== null) topology.retireWords(previous.at, previous.words);
}

/** Readers: decoded views by store (one decode per version and thread). */
const decoded = new WeakMap<Store, CatalogView>();

/** The current catalog view (call between beginRead and endRead, or on the writer). */
export function currentView(store: Store): CatalogView {
  const words = store.topology.words;
  const at = Atomics.load(words, VIEW_ROOT);
  if (at === 0) return emptyView;
  const view = store.topology.cover(at + 2);
  const version = view[at]!;
  const cached = decoded.get(store);
  if (cached !== undefined && cached.version === version) return cached;
  const length = view[at + 1]!;
  const all = store.topology.cover(at + 2 + ((length + 3) >>> 2));
  // Copied out of shared memory first (msgpackr must not read a SharedArrayBuffer directly).
  const bytes = new Uint8Array(all.buffer, (at + 2) * 4, length).slice();
  let payload: ViewPayload;
  try {
    payload = packr.unpack(bytes) as ViewPayload;
  } catch (err) {
    throw new SvcError('internal_error', `internal error: the index catalog view cannot be decoded: ${(err as Error).message}`);
  }
  const result: CatalogView = { version, indexes: payload.indexes, operations: new Map(payload.operations.map((o) => [o.id, o])) };
  decoded.set(store, result);
  return result;
}

/** Whether an index serves a reader at snapshot `at`. */
export function servesAt(index: ViewIndex, at: number): boolean {
  const r = index.record;
  return (index.root !== 0 || index.directory !== undefined) && r.activeSince !== 0 && r.activeSince <= at && (r.retiredAt === 0 || at < r.retiredAt);
}

/** The index of a definition's identity in a view that serves at `at`, or null. */
export function findServing(view: CatalogView, d: Pick<IndexDefinition, 'lane' | 'element' | 'label' | 'property'>, at: number): ViewIndex | null {
  for (const index of view.indexes) {
    const r = index.record.definition;
    if (r.lane === d.lane && r.element === d.element && r.label === d.label && r.property === d.property && servesAt(index, at)) return index;
  }
  return null;
}

/** Entries of an index for this thread (attach is cheap; readers do it per query). */
export function entriesOf(store: Store, index: ViewIndex): IndexEntries {
  return IndexEntries.attach(store.topology, index.root);
}
