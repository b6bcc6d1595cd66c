// A few seconds of the query torture (bench/torture/queries.ts; the long run is
// `npm run torture -- --queries`): one 5 s flood with a fixed seed against the built
// server, on a complete bipartite 300x300 graph (memory server) and 100x100 (disk server),
// then one assertion per kind of failure.
//
// ISSUE 10: the assertions marked [issue 10] need its fixes (per-query memory budget,
// deadlines checked inside every loop, inline-vs-pool decided from the plan, load shedding,
// worker heap limits). Against the code before them they FAIL, on purpose:
//   - "every answer ... within the deadline + 1 s": the first pathological read runs
//     inline on the uWS thread of the memory and disk servers and does not return (no
//     deadline check in its loops), so every request behind it, /healthz included, gets no
//     answer within the cap (deadline + 3 s).
//   - "servers answer right after the flood": the same servers are still stuck in that read.
//   - "writes are acknowledged during the flood" passes today only when the writer's first
//     write gets in before the disk server's uWS thread is stuck (one run in two here, 1.3 s
//     late); otherwise no write is acknowledged at all.
// "no server exits or runs out of heap" passes today only because 5 s is shorter than the
// ~40 s such a read needs to exhaust the heap; the full run (120 s) shows the exits.
//
// Answers may come 1 s after the deadline here, not 100 ms as in the full run: this file runs
// alone, but two servers and five clients share the CI machine's cores, and one pause of the
// VM or of any of those processes would otherwise fail it (10-60 ms overruns were seen
// before). A stuck server thread answers nothing for seconds, which this still catches;
// `npm run torture -- --queries` holds the 100 ms.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeAllTemps } from '../bench/torture/lib.js';
import { runQueryTorture, type FailureKind, type QueryTortureReport } from '../bench/torture/queries.js';

let report: QueryTortureReport;

beforeAll(async () => {
  report = await runQueryTorture({
    seconds: 5, seed: 10, quick: true, verbose: false, queryTimeoutMs: 1000, slackMs: 1000,
    graphs: [{ kind: 'bipartite', a: 300, b: 300 }],
    diskGraph: { kind: 'bipartite', a: 100, b: 100 },
    clients: { pathological: 2, pathologicalDisk: 1, deep: 1, fuzz: 1 },
    out: () => {},
  });
}, 180_000);

afterAll(() => removeAllTemps());

/** The failures of these kinds, one line each (the test output then says what differed). */
const failuresOf = (...kinds: FailureKind[]): string[] =>
  report.failures.filter((f) => kinds.includes(f.kind)).map((f) => `${f.kind} [${f.server}] ${f.category}: ${f.what.slice(0, 160)} => ${f.detail.slice(0, 200)}`);

describe('query torture (smoke)', () => {
  it('runs every client against every server', () => {
    expect(failuresOf('harness')).toEqual([]);
    for (const category of ['pathological', 'deep', 'fuzz', 'write (acknowledged)', 'probe point lookup (memory)', 'probe GET /healthz (memory)', 'probe GET /healthz (disk)']) {
      expect(report.categories.get(category)?.requests ?? 0, `${category} requests`).toBeGreaterThan(0);
    }
    expect(report.graphs.map((g) => `${g.server}: ${g.name}`)).toEqual(expect.arrayContaining(['memory: bipartite 300x300', 'disk: bipartite 100x100']));
  });

  it('[issue 10] no server exits or runs out of heap', () => {
    expect(failuresOf('crash', 'heap')).toEqual([]);
  });

  it('[issue 10] every answer, 503s included, arrives within the deadline + 1 s', () => {
    expect(failuresOf('slow', 'no-answer')).toEqual([]);
  });

  it('no 5xx besides query_deadline_exceeded, invalid_query and 503 server_overloaded with Retry-After', () => {
    expect(failuresOf('unexpected-5xx', 'bad-503')).toEqual([]);
  });

  it('[issue 10] servers answer right after the flood', () => {
    expect(failuresOf('unresponsive-after')).toEqual([]);
  });

  it('acknowledged writes survive the flood and kill -9', () => {
    expect(failuresOf('lost-write')).toEqual([]);
    expect(report.writes.missingAfterRestart).toBe(0);
  });

  it('[issue 10] writes are acknowledged during the flood', () => {
    expect(report.writes.acked).toBeGreaterThan(0);
  });
});
