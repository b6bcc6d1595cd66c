// Who decides a queued writer request's fate: the writer thread, by starting it, or the
// HTTP thread's deadline watch (writer.ts), by answering it `query_deadline_exceeded`
// before it starts. Each side claims the request with one compare-and-swap on a shared
// word, so exactly one wins: an answered request is never run, a started one is never
// answered early (a write the watch answered cannot commit afterwards).
//
// One Int32 slot per request in flight, indexed by id modulo the slot count. The slot count
// is the writer queue's request bound (limits.writerPendingRequestsMax): requests not yet
// started are the newest ones sent and are all still pending, so at most that many are
// unstarted and their slots are distinct; a slot is only reused for id + slots once id
// has started (or was answered by the watch, which the writer still passes over in order).
// A slot holds the id's low 28 bits and a 2-bit state; Atomics make the claim visible
// across threads on every CPU (the JavaScript memory model, not x86 ordering).

const QUEUED = 1;
const STARTED = 2;
const ANSWERED = 3;
const TAG_MASK = 0x0fff_ffff;

const word = (id: number, state: number): number => ((id & TAG_MASK) << 2) | state;

export class WriteClaims {
  private constructor(private readonly slots: Int32Array) {}

  /** `count` slots: at least the number of requests that can be in flight at once. */
  static create(count: number): WriteClaims {
    if (!Number.isInteger(count) || count < 1) throw new Error(`write claims need a positive slot count, got ${count}`);
    return new WriteClaims(new Int32Array(new SharedArrayBuffer(count * Int32Array.BYTES_PER_ELEMENT)));
  }

  /** The same slots on another thread. */
  static attach(buffer: SharedArrayBuffer): WriteClaims {
    return new WriteClaims(new Int32Array(buffer));
  }

  get buffer(): SharedArrayBuffer {
    return this.slots.buffer as SharedArrayBuffer;
  }

  /** HTTP thread, before sending request `id` to the writer. */
  queue(id: number): void {
    Atomics.store(this.slots, id % this.slots.length, word(id, QUEUED));
  }

  /** Writer thread, before running request `id`: false when the watch answered it (skip it). */
  start(id: number): boolean {
    const slot = id % this.slots.length;
    return Atomics.compareExchange(this.slots, slot, word(id, QUEUED), word(id, STARTED)) === word(id, QUEUED);
  }

  /** HTTP thread's watch: true when request `id` had not started and now never will. */
  answer(id: number): boolean {
    const slot = id % this.slots.length;
    return Atomics.compareExchange(this.slots, slot, word(id, QUEUED), word(id, ANSWERED)) === word(id, QUEUED);
  }
}
