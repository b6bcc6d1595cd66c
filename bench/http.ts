// HTTP scenarios: the bare uWS reference, then the real svcdb server with the graph
// loaded over POST /v2/query, each scenario driven by the load generator.
import { logFlood, runFlood, type FloodResult } from './flood.js';
import type { Graph } from './graph.js';
import { loadSvcdb, type Chunking, type LoadReport } from './load.js';
import { drive, sampleBodies, type LoadResult, type LoadSettings, type Workload } from './loadgen.js';
import { httpScenarios, type HttpRow, type HttpScenario, type Results, type ScenarioContext } from './scenarios.js';
import { post, startBareUws, startSvcdb, type RunningProcess } from './servers.js';
import { fmtUs, log, sleep, undisturbed } from './util.js';

export interface HttpSettings extends LoadSettings {
  /** Unmeasured run before each measured one (JIT and caches), seconds; 0 = none. */
  warmupSec: number;
  /** CPU list for the server processes (taskset), or null. */
  serverCpus: string | null;
  readers: number;
  tool: 'wrk' | 'autocannon';
  chunking: Chunking;
  /** Wait up to this long for other work on the machine to stop before each run. */
  waitIdleMs: number;
  /** Repeat a run when other processes took more than `threshold` of the machine. */
  attempts: number;
  threshold: number;
  /** Connections of the flood scenario (flood.ts); 0 = skip it. */
  floodConnections: number;
}

export interface HttpOutcome {
  results: NonNullable<Results['http']>;
  load: LoadReport;
  serverCommand: string;
  bareCommand: string;
}

async function measure(what: string, server: RunningProcess, bodies: Workload, s: HttpSettings): Promise<{ result: LoadResult; foreign: number | null }> {
  if (s.warmupSec > 0) await drive(server.url, bodies, { ...s, durationSec: s.warmupSec }, s.tool);
  const { value, foreign } = await undisturbed(what, () => drive(server.url, bodies, s, s.tool), [server.pid], s);
  return { result: value, foreign };
}

const describe = (r: LoadResult): string =>
  `${r.rps.toFixed(0)} req/s, p50 ${fmtUs(r.p50us)}, p99 ${fmtUs(r.p99us)}${r.errors ? `, ${r.errors} ERRORS` : ''}`;

async function withProcess<T>(start: () => Promise<RunningProcess>, body: (p: RunningProcess) => Promise<T>): Promise<T> {
  const p = await start();
  try {
    return await body(p);
  } finally {
    await p.stop();
  }
}

export async function runHttp(graph: Graph, ctx: ScenarioContext, s: HttpSettings, scenarios: HttpScenario[] = httpScenarios): Promise<HttpOutcome> {
  const ordered = [...scenarios.filter((x) => !x.mutates), ...scenarios.filter((x) => x.mutates)];
  const workOf = new Map(ordered.map((x): [string, Workload] => [x.key, x.workload?.(ctx) ?? { bodies: x.bodies!(ctx) }]));
  // The bare server gets the first scenario's bodies: same request sizes, same Lua work in wrk.
  const bareBodies = workOf.get(ordered[0]!.key)!;
  // ... and once with bodies built per request, to show what that costs the client.
  const built = ordered.find((x) => x.workload !== undefined && !x.mutates);

  // The bare server is measured before the svcdb scenarios and again after them, and the
  // reference is the mean of the two: single runs of it moved by 10-25 % within an hour on
  // the 2-core machine (docs/benchmarks.md), and a drift between the two halves of a run
  // would otherwise land on every ratio.
  let bareCommand = '';
  return withProcess(() => startBareUws(s.serverCpus), async (bareProcess) => {
    bareCommand = bareProcess.command;
    const first = await post(bareProcess.url, sampleBodies(bareBodies)[0]!);
    if (first.status !== 200) throw new Error(`bare uWS answered ${first.status}`);
    const bareBefore = await measure('bare uWS', bareProcess, bareBodies, s);
    log(`  bare uWS: ${describe(bareBefore.result)}`);
    let bareBuilt: LoadResult | undefined;
    if (built !== undefined) {
      bareBuilt = (await measure('bare uWS, bodies built per request', bareProcess, workOf.get(built.key)!, s)).result;
      log(`  bare uWS, ${built.key} bodies built per request: ${describe(bareBuilt)} (${(bareBuilt.rps / bareBefore.result.rps).toFixed(2)}x the rotating bodies)`);
    }

    return withProcess(() => startSvcdb(s.readers, s.serverCpus), async (p) => {
      await sleep(500); // let the worker threads finish starting
      const empty = p.memory();
      log(`  svcdb server pid ${p.pid} at ${p.url} (VmRSS empty ${empty?.rssMiB.toFixed(1)} MiB); loading the graph over HTTP ...`);
      const load = await loadSvcdb(graph, (body) => post(p.url, body), s.chunking);
      log(`  loaded in ${(load.totalMs / 1000).toFixed(2)} s (nodes ${(load.nodesMs / 1000).toFixed(2)} s, edges ${(load.edgesMs / 1000).toFixed(2)} s, ${load.requests} requests)`);
      const loaded = p.memory();
      log(`  server VmRSS with the graph loaded: ${loaded?.rssMiB.toFixed(1)} MiB`);

      const rows: HttpRow[] = [];
      let settled: ReturnType<RunningProcess['memory']> = null;
      for (const scenario of ordered) {
        if (scenario.mutates && settled === null) settled = p.memory();
        const bodies = workOf.get(scenario.key)!;
        let problem: string | null = null;
        for (const body of sampleBodies(bodies)) {
          const answer = await post(p.url, body);
          problem ??= scenario.check?.(answer) ?? (answer.status === 200 ? null : `status ${answer.status}`);
        }
        if (problem !== null) {
          log(`  !! ${scenario.key}: ${problem} (skipped)`);
          continue;
        }
        const { result, foreign } = await measure(scenario.key, p, bodies, s);
        rows.push({ key: scenario.key, title: scenario.title, result, ratioToBare: 0, foreign });
        log(`  ${scenario.key}: ${describe(result)} (${(result.rps / bareBefore.result.rps).toFixed(2)}x the first bare run)`);
      }
      // Read the instant the last scenario ends, before the bare server's second run.
      const after = p.memory();
      settled ??= after;
      log(`  server VmRSS after the read scenarios: ${settled?.rssMiB.toFixed(1)} MiB`);
      const bareAfter = await measure('bare uWS, again', bareProcess, bareBodies, s);
      const bare = meanResult(bareBefore.result, bareAfter.result);
      log(`  bare uWS again: ${describe(bareAfter.result)}; the reference is the mean of both, ${bare.rps.toFixed(0)} req/s`);
      for (const row of rows) row.ratioToBare = row.result.rps / bare.rps;
      const bareForeign = Math.max(bareBefore.foreign ?? 0, bareAfter.foreign ?? 0);
      // Last: the flood adds a dense subgraph, and a server it breaks breaks nothing after it.
      let flood: FloodResult | { error: string } | undefined;
      if (s.floodConnections > 0) {
        log(`  flood: point lookups and /healthz idle, then under ${s.floodConnections} connections of pathological reads ...`);
        try {
          const r = await runFlood(p, graph, ctx.startIds, { durationSec: s.durationSec, connections: s.floodConnections, cpus: s.cpus, waitIdleMs: s.waitIdleMs, threshold: s.threshold });
          logFlood(r);
          flood = r;
        } catch (err) {
          flood = { error: err instanceof Error ? err.message : String(err) };
          log(`  !! flood: ${flood.error}`);
        }
      }
      return {
        results: { bare, bareRuns: [bareBefore.result, bareAfter.result], bareForeign, ...(bareBuilt !== undefined ? { bareBuilt } : {}), rows, rssEmptyMiB: empty?.rssMiB, rssLoadedMiB: loaded?.rssMiB, rssSettledMiB: settled?.rssMiB, rssAfterMiB: after?.rssMiB, hwmMiB: after?.hwmMiB, ...(flood !== undefined ? { flood } : {}) },
        load, serverCommand: p.command, bareCommand,
      };
    });
  });
}

/** One result from two runs of the same thing: the mean of each figure. */
function meanResult(a: LoadResult, b: LoadResult): LoadResult {
  return { ...a, rps: (a.rps + b.rps) / 2, p50us: (a.p50us + b.p50us) / 2, p99us: (a.p99us + b.p99us) / 2, errors: a.errors + b.errors };
}
