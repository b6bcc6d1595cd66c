// A few seconds of the storage torture (bench/torture/scenarios.ts; the long run is
// `npm run torture -- --storage`): one or two short rounds of scenarios 1-5 against the
// built server with fixed seeds.
//
// FAILING_TODAY lists the scenarios that find real failures in the current code; they run
// as `it.fails` (the test passes while the scenario still fails). Remove a name once its
// fix lands: the scenario then has to pass.
//   flip:         a flipped byte in any WAL frame truncates the log there and silently drops
//                 every acknowledged batch from that frame on; refusals do not name the file.
//   tail:         4 KiB of zeros appended to the WAL crash the start with a msgpack error
//                 (file not named); zero-filled tails are truncated away with acked batches.
//   failed-write: a failed write's new labels/keys leave the dictionary out of step with the
//                 WAL: restart fails ("dictionary id mismatch"), a reader server answers
//                 500 "unknown dictionary id".
//   halfway:      the same dictionary mismatch after batches that fail halfway.
import { afterAll, describe, expect, it } from 'vitest';
import { removeAllTemps } from '../bench/torture/lib.js';
import { failedWriteScenario, flipScenario, halfwayScenario, killScenario, tailScenario, type Scenario } from '../bench/torture/scenarios.js';

const FAILING_TODAY = new Set<string>([]);

async function runRounds(s: Scenario, seeds: number[]): Promise<string[]> {
  const failures: string[] = [];
  for (const [round, seed] of seeds.entries()) {
    await s.run({
      seed, round, quick: true,
      fail: (what) => { failures.push(`${s.name} round ${round} seed ${seed}: ${what}`); },
      note: () => {},
      log: () => {},
    });
  }
  return failures;
}

afterAll(() => removeAllTemps());

describe('storage torture (smoke)', () => {
  const cases: [Scenario, number[]][] = [
    [killScenario, [11, 12]],
    [flipScenario, [21]],
    [tailScenario, [31, 32]],
    [failedWriteScenario, [41]],
    [halfwayScenario, [51, 52]],
  ];
  for (const [s, seeds] of cases) {
    const test = FAILING_TODAY.has(s.name) ? it.fails : it;
    test(`${s.id}. ${s.title}`, async () => {
      expect(await runRounds(s, seeds)).toEqual([]);
    }, 120_000);
  }
});
