// In-process scenarios: the embedded handle vs the peer, timed with tinybench.
//
// Two phases so neither side pays for the other's heap (graphology's ~1M JS objects
// make every major GC of a shared heap slower): phase 1 times the engine and records its
// answers; the caller then drops the database, loads the peer, and phase 2 times the
// peer and compares its answers with the recorded ones.
import { Bench } from 'tinybench';
import type { EngineContext, InProcessRow, InProcessScenario, PeerContext } from './scenarios.js';
import { fmtOps, log, undisturbed } from './util.js';
import { setTraversalKernel } from '../src/store/kernels.js';

export interface InProcessSettings {
  /** tinybench time budget per round (ms), rounds per task (the median is kept), warm-up (ms). */
  timeMs: number;
  rounds: number;
  warmupMs: number;
  waitIdleMs: number;
  /** Repeat a run when other processes took more than `threshold` of the machine. */
  attempts: number;
  threshold: number;
}

/** What phase 1 leaves for phase 2. */
export interface EnginePhase {
  rows: InProcessRow[];
  answers: Map<string, unknown[]>;
}

/** Median ops/s of `rounds` tinybench runs (the first one warms up), plus the spread. */
async function timeOne(name: string, fn: () => unknown, s: InProcessSettings): Promise<{ ops: number; spread: string; foreign: number | null }> {
  const { value, foreign } = await undisturbed(name, async () => {
    const samples: number[] = [];
    for (let round = 0; round < s.rounds; round++) {
      const bench = new Bench({ time: s.timeMs, warmup: round === 0, warmupTime: s.warmupMs, throws: true });
      bench.add(name, fn);
      await bench.run();
      const r = bench.getTask(name)?.result;
      if (!r || !('period' in r)) throw new Error(`tinybench task ${name} did not complete: ${r?.state}`);
      samples.push(1000 / r.period);
    }
    samples.sort((a, b) => a - b);
    return { ops: samples[samples.length >> 1]!, spread: `${fmtOps(samples[0]!)}..${fmtOps(samples[samples.length - 1]!)}` };
  }, [], { attempts: s.attempts, threshold: s.threshold, waitIdleMs: s.waitIdleMs });
  return { ...value, foreign };
}

export async function runEnginePhase(scenarios: InProcessScenario[], base: EngineContext, s: InProcessSettings): Promise<EnginePhase> {
  const phase: EnginePhase = { rows: [], answers: new Map() };
  for (const scenario of scenarios) {
    setTraversalKernel(scenario.kernels ?? true);
    const ctx = scenario.prepare ? await scenario.prepare(base) : base;
    const bodies = scenario.engine(ctx);
    const answers: unknown[] = [];
    let verified = 'ok';
    for (const body of bodies) {
      const res = await ctx.db.queryRaw(body);
      if (res.status !== 200) { verified = `engine error ${res.status}: ${res.body.slice(0, 200)}`; break; }
      if (scenario.call !== 'async' && ctx.db.queryRawSync(body).body !== res.body) { verified = 'queryRawSync answered otherwise than queryRaw'; break; }
      answers.push((JSON.parse(res.body) as { r: unknown }).r);
    }
    phase.answers.set(scenario.key, answers);
    if (verified !== 'ok') {
      log(`  !! ${scenario.key}: ${verified} (skipped)`);
      continue;
    }
    const db = ctx.db;
    let i = 0;
    const { ops, spread, foreign } = await timeOne(`${scenario.key} svcdb`, scenario.call === 'async'
      ? async () => {
        const res = await db.queryRaw(bodies[i]!);
        if (++i === bodies.length) i = 0;
        if (res.status !== 200) throw new Error(res.body);
      }
      : () => {
        const res = db.queryRawSync(bodies[i]!);
        if (++i === bodies.length) i = 0;
        if (res.status !== 200) throw new Error(res.body);
      }, s);
    log(`  ${scenario.key}: svcdb ${fmtOps(ops)} ops/s (median of ${s.rounds} rounds, ${spread})`);
    phase.rows.push({ key: scenario.key, title: scenario.title, engineOps: ops, verified: 'engine only', foreign });
  }
  setTraversalKernel(true);
  return phase;
}

const sameJson = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

export async function runPeerPhase(scenarios: InProcessScenario[], ctx: PeerContext, engine: EnginePhase, s: InProcessSettings): Promise<InProcessRow[]> {
  for (const row of engine.rows) {
    const scenario = scenarios.find((x) => x.key === row.key)!;
    if (!scenario.peer) continue;
    const cases = scenario.peer(ctx);
    const answers = engine.answers.get(row.key)!;
    row.verified = `ok (${cases.length} cases)`;
    for (let k = 0; k < cases.length; k++) {
      const peer = cases[k]!();
      if (!(scenario.same ?? sameJson)(answers[k], peer)) {
        row.verified = `MISMATCH in case ${k}: engine ${JSON.stringify(answers[k])} vs ${scenario.peerName} ${JSON.stringify(peer)}`;
        log(`  !! ${row.key}: ${row.verified}`);
        break;
      }
    }
    let j = 0;
    const { ops, spread, foreign } = await timeOne(`${row.key} ${scenario.peerName ?? 'peer'}`, () => {
      cases[j]!();
      if (++j === cases.length) j = 0;
    }, s);
    row.peerName = scenario.peerName ?? 'peer';
    row.peerOps = ops;
    row.peerForeign = foreign;
    row.ratio = row.engineOps / ops;
    log(`  ${row.key}: ${row.peerName} ${fmtOps(ops)} ops/s (${spread}); svcdb/${row.peerName} ${row.ratio.toFixed(2)} [${row.verified}]`);
  }
  return engine.rows;
}
