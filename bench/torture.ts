// `npm run torture -- --storage [--seconds N] [--seed S] [--only 1,3] [--rounds R] [--verbose]`
// `npm run torture -- --queries [--seconds N] [--seed S] [--quick] [--query-timeout-ms T] [--verbose]`
// (both flags together run the storage torture, then the query torture; --seconds then
// applies to each; exit 1 when either fails).
//
// --queries: the query torture (torture/queries.ts, issue 10): dense graphs, pathological
// and random deep reads, a fuzzed conformance corpus and acknowledged writes thrown at
// servers with a query deadline of T ms (default 1000) for --seconds (default 120, --quick
// 20), while probes time point lookups and /healthz. Fails on a crash, heap exhaustion, an
// answer later than T + 100 ms, an unexpected 5xx, or a lost acknowledged write.
//
// --storage: fault injection against the built server (not part of `npm test`): kill -9 at random
// moments and during snapshots, flipped bytes, torn / zero-filled WAL tails, failed writes
// that named new labels, batches failing halfway, a full file system during a snapshot, and
// an object store that goes away and comes back. Each scenario runs rounds in fresh temp
// directories for its share of --seconds (default 240; at least one round each) and prints
// a verdict; the final table lists rounds and failures, then every failure with its round
// seed. Exits 1 on any failure. `--seed S` reruns the same round seeds (timing still varies).
import { parseArgs } from 'node:util';
import { existsSync } from 'node:fs';
import { cliPath, removeAllTemps, roundSeed } from './torture/lib.js';
import { freshSeed, killQueryServers, printReport, runQueryTorture } from './torture/queries.js';
import { scenarios, type RoundContext } from './torture/scenarios.js';

const { values: opt } = parseArgs({
  options: {
    storage: { type: 'boolean', default: false },
    queries: { type: 'boolean', default: false },
    seconds: { type: 'string' },
    'query-timeout-ms': { type: 'string', default: '1000' },
    seed: { type: 'string' },
    only: { type: 'string' },
    rounds: { type: 'string' },
    quick: { type: 'boolean', default: false },
    verbose: { type: 'boolean', default: false },
  },
});

const out = (s: string): void => { process.stdout.write(`${s}\n`); };

interface Row { id: number; name: string; title: string; rounds: number; failedRounds: number; failures: string[]; notes: Map<string, number>; ms: number }

async function main(): Promise<number> {
  if (!opt.storage && !opt.queries) {
    out('usage: npm run torture -- --storage [--seconds N] [--seed S] [--only 1,2,...|names] [--rounds R] [--quick] [--verbose]');
    out('       npm run torture -- --queries [--seconds N] [--seed S] [--quick] [--query-timeout-ms T] [--verbose]');
    return 2;
  }
  if (!existsSync(cliPath())) { out(`${cliPath()} is missing: run npm run build`); return 2; }
  let code = 0;
  if (opt.storage) code = Math.max(code, await storage());
  if (opt.queries) code = Math.max(code, await queries());
  return code;
}

async function queries(): Promise<number> {
  const seed = opt.seed !== undefined ? Number(opt.seed) >>> 0 : freshSeed();
  const seconds = Number(opt.seconds ?? (opt.quick ? 20 : 120));
  const queryTimeoutMs = Number(opt['query-timeout-ms']);
  if (!(seconds > 0) || !(queryTimeoutMs >= 1)) { out('--seconds and --query-timeout-ms must be positive numbers'); return 2; }
  if (opt.storage) out('');
  const report = await runQueryTorture({ seconds, seed, quick: opt.quick!, verbose: opt.verbose!, queryTimeoutMs, out });
  printReport(report, out);
  return report.passed ? 0 : 1;
}

async function storage(): Promise<number> {
  const seed = opt.seed !== undefined ? Number(opt.seed) >>> 0 : (Date.now() ^ (process.pid << 8)) >>> 0;
  const only = opt.only?.split(',').map((s) => s.trim());
  const chosen = scenarios.filter((s) => only === undefined || only.includes(String(s.id)) || only.includes(s.name));
  const seconds = Number(opt.seconds ?? 240);
  const fixedRounds = opt.rounds !== undefined ? Number(opt.rounds) : null;
  out(`svcdb storage torture: seed ${seed}, ${chosen.length} scenario(s), ${fixedRounds !== null ? `${fixedRounds} round(s) each` : `${seconds} s`}; reproduce with --seed ${seed}`);
  const rows: Row[] = [];
  const started = performance.now();
  for (const [i, s] of chosen.entries()) {
    const share = ((seconds * 1000) - (performance.now() - started)) / (chosen.length - i);
    const until = performance.now() + share;
    const row: Row = { id: s.id, name: s.name, title: s.title, rounds: 0, failedRounds: 0, failures: [], notes: new Map(), ms: 0 };
    rows.push(row);
    out(`\n[${s.id}] ${s.title}`);
    const t0 = performance.now();
    for (let round = 0; fixedRounds !== null ? round < fixedRounds : (round === 0 || performance.now() < until); round++) {
      const rs = roundSeed(seed, s.id, round);
      const failures: string[] = [];
      const ctx: RoundContext = {
        seed: rs, round, quick: opt.quick!,
        fail: (what) => { failures.push(what); },
        note: (what) => { row.notes.set(what, (row.notes.get(what) ?? 0) + 1); },
        log: (what) => { if (opt.verbose) out(what); },
      };
      const r0 = performance.now();
      try {
        await s.run(ctx);
      } catch (err) {
        failures.push(`harness error: ${(err as Error).stack?.split('\n').slice(0, 4).join(' | ') ?? String(err)}`);
      }
      row.rounds++;
      if (failures.length > 0) {
        row.failedRounds++;
        for (const f of failures) row.failures.push(`round ${round} (round seed ${rs}): ${f}`);
      }
      out(`  round ${round} seed ${rs}: ${failures.length === 0 ? 'ok' : `${failures.length} FAILURE(S)`} (${((performance.now() - r0) / 1000).toFixed(1)} s)`);
      for (const f of failures.slice(0, 5)) out(`    - ${f.slice(0, 400)}`);
    }
    row.ms = performance.now() - t0;
    out(`  => ${row.failedRounds === 0 ? 'PASS' : 'FAIL'}: ${row.rounds} round(s), ${row.failedRounds} with failures`);
  }
  removeAllTemps();

  out('\n== summary ==\n');
  out('| # | scenario | rounds | rounds failed | failures | time | verdict |');
  out('|---|---|---|---|---|---|---|');
  for (const r of rows) out(`| ${r.id} | ${r.title} | ${r.rounds} | ${r.failedRounds} | ${r.failures.length} | ${(r.ms / 1000).toFixed(0)} s | ${r.failedRounds === 0 ? 'pass' : 'FAIL'} |`);
  out('\n== observations ==');
  for (const r of rows) {
    if (r.notes.size === 0) continue;
    out(`[${r.id}] ${r.name}`);
    for (const [n, c] of [...r.notes].sort((a, b) => a[0].localeCompare(b[0]))) out(`  ${c}x ${n.slice(0, 300)}`);
  }
  const failing = rows.filter((r) => r.failures.length > 0);
  if (failing.length > 0) {
    out('\n== failures (seed, round, what differed) ==');
    for (const r of failing) {
      out(`[${r.id}] ${r.name}`);
      for (const f of r.failures) out(`  - ${f}`);
    }
  }
  out(`\nseed ${seed}; total ${((performance.now() - started) / 1000).toFixed(0)} s; ${failing.length === 0 ? 'all scenarios passed' : `${failing.length} scenario(s) FAILED`}`);
  return failing.length === 0 ? 0 : 1;
}

const stop = (): void => { killQueryServers(); removeAllTemps(); process.exit(130); };
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
main().then((code) => process.exit(code), (err: unknown) => {
  process.stderr.write(`torture failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  removeAllTemps();
  process.exit(1);
});
