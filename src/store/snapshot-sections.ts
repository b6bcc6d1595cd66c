// TEMPORARY adapter (replaced by the streaming export/load of the store-export branch):
// the API the snapshot file format is written against.
import { SvcError } from '../protocol/errors.js';
import { Store, type StoreShared } from './store.js';

/** The writer's counters between batches: everything a snapshot at `epoch` holds. */
export interface StoreCut { epoch: number; nodeSlots: number; edgeSlots: number; heapUsed: number; names: number }

/** One section of a snapshot: its exact length up front, then its bytes in bounded chunks. */
export interface SectionSource {
  readonly name: string;
  readonly byteLength: number;
  chunks(): Iterable<Uint8Array>;
}

export function storeCut(store: Store): StoreCut {
  return { epoch: store.committedEpoch(), nodeSlots: store.nodeSlots(), edgeSlots: store.edgeSlots(), heapUsed: 0, names: store.names.size() };
}

export function sectionsAt(shared: StoreShared, _cut: StoreCut): SectionSource[] {
  return [...Store.attach(shared).exportSections()].map(([name, bytes]) => ({
    name, byteLength: bytes.byteLength, chunks: () => [bytes],
  }));
}

export class StoreLoader {
  private readonly sections = new Map<string, Uint8Array>();

  section(name: string, byteLength: number): { write(chunk: Uint8Array): void; end(): void } {
    if (this.sections.has(name)) throw new SvcError('storage_error', `storage error: snapshot section \`${name}\` appears twice`);
    const bytes = new Uint8Array(byteLength);
    this.sections.set(name, bytes);
    let at = 0;
    return {
      write: (chunk) => { bytes.set(chunk, at); at += chunk.byteLength; },
      end: () => { if (at !== byteLength) throw new SvcError('storage_error', `storage error: snapshot section \`${name}\` is short`); },
    };
  }

  finish(): Store {
    return Store.fromSections(this.sections);
  }
}
