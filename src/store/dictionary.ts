// Interned names (labels and property keys) shared across threads. The writer appends
// UTF-8 bytes and an end offset, then publishes the new count with Atomics.store;
// readers load the count and decode entries they have not seen yet.
import { limits } from '../limits.js';
import { SvcError } from '../protocol/errors.js';
import { ensureBytes, sharedBuffer } from './growable.js';

export interface DictionaryShared { meta: SharedArrayBuffer; ends: SharedArrayBuffer; bytes: SharedArrayBuffer }

/** The dictionary's meta buffer: [COUNT, reserved]. */
export const COUNT = 0;
export const NAMES_META_BYTES = 8;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class Dictionary {
  readonly shared: DictionaryShared;
  private readonly meta: Uint32Array;
  private readonly ends: Uint32Array;
  private readonly bytes: Uint8Array;
  private readonly names: string[] = [];
  private readonly ids = new Map<string, number>();

  constructor(shared?: DictionaryShared) {
    this.shared = shared ?? {
      meta: new SharedArrayBuffer(NAMES_META_BYTES),
      ends: Dictionary.endsBuffer(0),
      bytes: Dictionary.bytesBuffer(0),
    };
    this.meta = new Uint32Array(this.shared.meta);
    this.ends = new Uint32Array(this.shared.ends);
    this.bytes = new Uint8Array(this.shared.bytes);
    this.refresh();
  }

  /** Pick up names published by the writer since the last call. */
  private refresh(): void {
    const count = Atomics.load(this.meta, COUNT);
    for (let id = this.names.length; id < count; id++) {
      const start = id === 0 ? 0 : this.ends[id - 1]!;
      const name = decoder.decode(this.bytes.slice(start, this.ends[id]!));
      this.names.push(name);
      this.ids.set(name, id);
    }
  }

  /** The used bytes of the dictionary's buffers, for a snapshot. */
  exportSections(): [string, Uint8Array][] {
    const count = Atomics.load(this.meta, COUNT);
    const used = count === 0 ? 0 : this.ends[count - 1]!;
    return [
      ['meta', new Uint8Array(this.shared.meta).slice()],
      ['ends', new Uint8Array(this.shared.ends, 0, count * 4).slice()],
      ['bytes', new Uint8Array(this.shared.bytes, 0, used).slice()],
    ];
  }

  /** A growable buffer for the end offsets, holding at least `byteLength` bytes. */
  static endsBuffer(byteLength: number): SharedArrayBuffer {
    return sharedBuffer(Math.max(4096, byteLength), limits.dictionaryEntriesMax * 4);
  }

  /** A growable buffer for the UTF-8 bytes of the names, holding at least `byteLength` bytes. */
  static bytesBuffer(byteLength: number): SharedArrayBuffer {
    return sharedBuffer(Math.max(4096, byteLength), limits.dictionaryBytesMax);
  }

  static sharedFromSections(meta: Uint8Array, ends: Uint8Array, bytes: Uint8Array): DictionaryShared {
    const shared: DictionaryShared = {
      meta: new SharedArrayBuffer(NAMES_META_BYTES),
      ends: Dictionary.endsBuffer(ends.byteLength),
      bytes: Dictionary.bytesBuffer(bytes.byteLength),
    };
    new Uint8Array(shared.meta).set(meta);
    new Uint8Array(shared.ends).set(ends);
    new Uint8Array(shared.bytes).set(bytes);
    return shared;
  }

  /** Number of names known to this thread (writer: all of them). */
  size(): number {
    this.refresh();
    return this.names.length;
  }

  /** The id of `name`, or -1 if no element has ever used it. */
  idOf(name: string): number {
    let id = this.ids.get(name);
    if (id === undefined) {
      this.refresh();
      id = this.ids.get(name);
    }
    return id ?? -1;
  }

  nameOf(id: number): string {
    if (id >= this.names.length) this.refresh();
    const name = this.names[id];
    if (name === undefined) throw new SvcError('internal_error', `internal error: unknown dictionary id ${id}`);
    return name;
  }

  /** Writer only: the id of `name`, adding it if new. Ids are never reused or rolled back. */
  intern(name: string): number {
    const known = this.idOf(name);
    if (known >= 0) return known;
    const id = this.names.length;
    if (id >= limits.dictionaryEntriesMax) {
      throw new SvcError('storage_error', `storage error: more than ${limits.dictionaryEntriesMax} distinct names`);
    }
    const utf8 = encoder.encode(name);
    const start = id === 0 ? 0 : this.ends[id - 1]!;
    ensureBytes(this.shared.bytes, start + utf8.length, 'name dictionary');
    ensureBytes(this.shared.ends, (id + 1) * 4, 'name dictionary');
    this.bytes.set(utf8, start);
    this.ends[id] = start + utf8.length;
    Atomics.store(this.meta, COUNT, id + 1);
    this.names.push(name);
    this.ids.set(name, id);
    return id;
  }
}
