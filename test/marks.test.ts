// ElementMarks (dedup and first-occurrence sets) holds memory for what it marks, not for
// the store: sparse for a few keys, dense only for a sizable share, the same answers either way.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ElementMarks } from '../src/exec/marks.js';
import { limits } from '../src/limits.js';

describe('ElementMarks', () => {
  it('answers like a Set whether it stays sparse, turns dense, or is reused', () => {
    const marks = new ElementMarks();
    fc.assert(fc.property(
      fc.array(fc.record({ keySpace: fc.integer({ min: 1, max: 5000 }), picks: fc.array(fc.nat(), { maxLength: 3000 }) }), { minLength: 1, maxLength: 4 }),
      (uses) => {
        for (const { keySpace, picks } of uses) {
          marks.beginKeys(keySpace);
          const model = new Set<number>();
          for (const p of picks) {
            const key = p % keySpace;
            expect(marks.add(key)).toBe(!model.has(key));
            model.add(key);
          }
          // Dense only once the marked keys are a sizable share of the key space.
          if (marks.dense) expect(model.size * 16).toBeGreaterThanOrEqual(keySpace);
          else expect(model.size * 4).toBeLessThan(keySpace + 256 * 4);
          marks.end();
        }
      },
    ), { numRuns: 300 });
  });

  it('stays sparse and small when a query marks a few elements of a large store', () => {
    const marks = new ElementMarks();
    marks.beginKeys(2 * limits.edgesMax + 2);
    for (let k = 0; k < 100; k++) expect(marks.add(k * 1_000_003)).toBe(true);
    for (let k = 0; k < 100; k++) expect(marks.add(k * 1_000_003)).toBe(false);
    expect(marks.dense).toBe(false);
    expect(marks.bytes).toBeLessThanOrEqual(4096);
    marks.end();
  });
});
