// Ids of removed text terms reused for new ones (src/text/partition.ts reusableTermId):
// never while a read that could hold the old term runs, and never half-way when adding the
// new term fails.
import { describe, expect, it } from 'vitest';
import { TextMemory, TextPartition, textMaintainCounters } from '../dist/src/text/index.js';

const setup = () => {
  const tm = TextMemory.create();
  const p = TextPartition.create(tm, { analyzer: 'standard', positions: false });
  return { tm, p };
};

describe('text term ids reused', () => {
  it('an announced read on another slot blocks reuse until it ends', () => {
    const { tm, p } = setup();
    let epoch = 1;
    const h: number[] = [];
    for (let i = 0; i < 50; i++) h.push(p.insert(i, `old${i} shared`, epoch));
    // Simulate a reader announced now (slot of this thread), holding e.g. term ids.
    const slot = tm.beginRead();
    epoch++;
    for (let i = 0; i < 50; i++) p.remove(h[i]!, epoch);
    while (p.maintain(epoch, epoch));
    tm.reclaim();
    const before = textMaintainCounters.termIdsReused;
    epoch++;
    for (let i = 0; i < 50; i++) p.insert(100 + i, `new${i}`, epoch);
    expect(textMaintainCounters.termIdsReused - before, 'no reuse while an older read runs').toBe(0);
    tm.endRead(slot);
    tm.reclaim();
    epoch++;
    for (let i = 0; i < 50; i++) p.insert(200 + i, `newer${i}`, epoch);
    expect(textMaintainCounters.termIdsReused - before).toBeGreaterThan(0);
    const e = new Uint32Array(10), s = new Float32Array(10);
    for (let i = 0; i < 50; i++) {
      expect(p.search(`old${i}`, 10, epoch, e, s)).toBe(0);
      expect(p.search(`newer${i}`, 10, epoch, e, s)).toBe(1);
      expect(e[0]).toBe(200 + i);
    }
  });

  it('a word whose addition failed (memory full at the dictionary\'s rehash) leaves no orphan record: added again, it is found, also by a writer attaching anew', () => {
    const { tm, p } = setup();
    let epoch = 1;
    const h: number[] = [];
    for (let i = 0; i < 5; i++) h.push(p.insert(i, `old${i}`, epoch));
    epoch++;
    for (let i = 0; i < 5; i++) p.remove(h[i]!, epoch);
    while (p.maintain(epoch, epoch));
    tm.reclaim();
    // Fill the dictionary up to its rehash point with live terms.
    epoch++;
    let n = 0;
    const reusedBefore = textMaintainCounters.termIdsReused;
    const orig = tm.allocate.bind(tm);
    let armed = false;
    (tm as unknown as { allocate: (w: number) => number }).allocate = (w: number) => {
      // The dictionary table of a rehash: H_SLOTS + cap (cap a power of two >= 16).
      if (armed && w > 16 && ((w - 1) & (w - 2)) === 0) throw new Error('text memory full (injected)');
      return orig(w);
    };
    let failed = false;
    for (; n < 200 && !failed; n++) {
      armed = textMaintainCounters.termIdsReused - reusedBefore >= 0;
      try { p.insert(100 + n, `live${n}`, epoch); } catch { failed = true; }
    }
    expect(failed).toBe(true);
    armed = false;
    const reusedAtFailure = textMaintainCounters.termIdsReused - reusedBefore;
    // Retry the failed word: it must be found by readers, and the popped id should come back.
    p.insert(999, `live${n - 1}`, epoch);
    const e = new Uint32Array(10), s = new Float32Array(10);
    expect(p.search(`live${n - 1}`, 10, epoch, e, s)).toBe(1);
    // A writer attaching anew maps each text to one id; the orphan record holds the text too.
    const q = TextPartition.attach(tm, p.root);
    epoch++;
    q.insert(1000, `live${n - 1}`, epoch);
    expect(q.search(`live${n - 1}`, 10, epoch, e, s), `reused at failure: ${reusedAtFailure}`).toBe(2);
  });
});
