// Interleaved A/B of server builds or settings on the HTTP client scenarios (issue 13):
// `node dist/bench/ab.js [options] --config SPEC --config SPEC ...`
//
// On a shared 2-core machine one figure alone says little; two servers measured in turn,
// round after round, in one session say how they compare. Each configuration is its own
// server process with the same graph loaded; every round measures every scenario on every
// configuration, one after the other, and the report gives per-configuration medians and
// the ratio of each to the first configuration, with the server's CPU time per request
// (whole process and busiest thread, from /proc), which other load on the machine barely moves.
//
// SPEC is `label|main.js|server cpus|wrk threads|wrk cpus|extra serve args`, e.g.
//   'A pinned|/tmp/a/dist/src/cli/main.js|0|1|1|--readers 1'
//   'B 2 cores|dist/src/cli/main.js|-|2|-|--readers 2'
// (`-` = not pinned; node flags may precede main.js, e.g. `--max-semi-space-size=32 dist/...`,
// and environment assignments may precede those, e.g. `MALLOC_ARENA_MAX=8 dist/...`).
// Options: --quick (10k nodes / 100k edges), --nodes/--edges,
// --duration S (default 5), --warmup S (default 1), --connections C (default 64),
// --rounds R (default 3), --scenarios point,point_rand,... (default the client read
// scenarios and the rotating point lookups).
import { readdirSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { defaultGraphSpec, generateGraph, pickStartIds } from './graph.js';
import { loadSvcdb } from './load.js';
import { drive, sampleBodies, type LoadResult, type Workload } from './loadgen.js';
import { httpScenarios, type ScenarioContext } from './scenarios.js';
import { post, startListening, type RunningProcess } from './servers.js';
import { fmtUs, log, machineBusy, sleep } from './util.js';

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    nodes: { type: 'string' },
    edges: { type: 'string' },
    duration: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '1' },
    connections: { type: 'string', default: '64' },
    rounds: { type: 'string', default: '3' },
    scenarios: { type: 'string', default: 'point,point_rand,point_param,1hop_rows,2hop_rows' },
    config: { type: 'string', multiple: true, default: [] },
  },
});

interface Config {
  label: string;
  /** Node flags, then the script. */
  main: string[];
  /** Environment assignments given before them. */
  env: Record<string, string>;
  serverCpus: string | null;
  wrkThreads: number;
  wrkCpus: string | null;
  args: string[];
}

function parseConfig(spec: string): Config {
  const [label, main, serverCpus, wrkThreads, wrkCpus, args] = spec.split('|');
  if (label === undefined || main === undefined || wrkThreads === undefined) throw new Error(`bad --config ${spec}`);
  const cpus = (s: string | undefined): string | null => (s === undefined || s === '-' || s === '' ? null : s);
  const words = main.split(' ').filter(Boolean);
  const env: Record<string, string> = {};
  while (words.length > 0 && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[0]!)) {
    const word = words.shift()!;
    env[word.slice(0, word.indexOf('='))] = word.slice(word.indexOf('=') + 1);
  }
  return { label, main: words, env, serverCpus: cpus(serverCpus), wrkThreads: Number(wrkThreads), wrkCpus: cpus(wrkCpus), args: (args ?? '').split(' ').filter(Boolean) };
}

/** USER_HZ: the unit of utime/stime in /proc (100 on Linux everywhere in practice). */
const CLOCK_TICKS_PER_S = 100;

/** CPU ticks (user + system) of each thread of a process, by thread id; empty without /proc. */
function threadTicks(pid: number): Map<number, number> {
  const ticks = new Map<number, number>();
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks.set(Number(tid), Number(fields[11]) + Number(fields[12])); // utime, stime
    }
  } catch { /* the thread list changed while read: the next run reads it again */ }
  return ticks;
}

/**
 * Server CPU per request during a run, in microseconds: the whole process and its busiest
 * thread. Unlike req/s on a shared machine these barely depend on what else runs: the
 * busiest thread's figure is what one thread can serve at most (1e6 / it req/s).
 */
function cpuPerRequest(before: Map<number, number>, after: Map<number, number>, requests: number): { processUs: number; busiestUs: number } {
  let total = 0, busiest = 0;
  for (const [tid, t] of after) {
    const d = t - (before.get(tid) ?? 0);
    total += d;
    busiest = Math.max(busiest, d);
  }
  const us = (t: number): number => (t / CLOCK_TICKS_PER_S) * 1e6 / requests;
  return { processUs: us(total), busiestUs: us(busiest) };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

async function main(): Promise<void> {
  const configs = opt.config!.map(parseConfig);
  if (configs.length < 1) throw new Error('give at least one --config');
  const quick = opt.quick!;
  const spec = {
    ...defaultGraphSpec,
    nodes: Number(opt.nodes ?? (quick ? 10_000 : defaultGraphSpec.nodes)),
    edges: Number(opt.edges ?? (quick ? 100_000 : defaultGraphSpec.edges)),
  };
  const graph = generateGraph(spec);
  const ctx: ScenarioContext = { graph, startIds: pickStartIds(graph, 512) };
  const keys = opt.scenarios!.split(',');
  const scenarios = keys.map((k) => {
    const s = httpScenarios.find((x) => x.key === k);
    if (s === undefined) throw new Error(`no HTTP scenario ${k}`);
    return s;
  });
  const work = new Map(scenarios.map((s): [string, Workload] => [s.key, s.workload?.(ctx) ?? { bodies: s.bodies!(ctx) }]));
  log(`graph ${spec.nodes} nodes / ${spec.edges} edges; ${configs.length} configurations; scenarios ${keys.join(', ')}; ${opt.rounds} rounds of ${opt.duration} s (+${opt.warmup} s warm-up)`);

  const servers: RunningProcess[] = [];
  try {
    for (const c of configs) {
      const [first, ...rest] = c.main;
      const p = await startListening(c.label, first!, [...rest, 'serve', '--host', '127.0.0.1', '--port', '0', ...c.args], { cpus: c.serverCpus, startTimeoutMs: 30_000, env: c.env });
      servers.push(p);
      await sleep(300);
      await loadSvcdb(graph, (body) => post(p.url, body));
      for (const s of scenarios) {
        for (const body of sampleBodies(work.get(s.key)!)) {
          const answer = await post(p.url, body);
          const problem = s.check?.(answer) ?? (answer.status === 200 ? null : `status ${answer.status}`);
          if (problem !== null) throw new Error(`${c.label} ${s.key}: ${problem}`);
        }
      }
      log(`  ${c.label}: ${p.command} loaded, VmRSS ${p.memory()?.rssMiB.toFixed(1)} MiB`);
    }
    const results = new Map<string, (LoadResult & { processUs: number; busiestUs: number })[]>();
    const busy: number[] = [];
    for (let round = 1; round <= Number(opt.rounds); round++) {
      for (const s of scenarios) {
        for (let i = 0; i < configs.length; i++) {
          const c = configs[i]!, p = servers[i]!;
          const settings = { connections: Number(opt.connections), threads: c.wrkThreads, cpus: c.wrkCpus };
          const w = work.get(s.key)!;
          if (Number(opt.warmup) > 0) await drive(p.url, w, { ...settings, durationSec: Number(opt.warmup) }, 'wrk');
          const idle = await machineBusy(200);
          if (idle !== null) busy.push(idle);
          const before = threadTicks(p.pid);
          const run = await drive(p.url, w, { ...settings, durationSec: Number(opt.duration) }, 'wrk');
          const r = { ...run, ...cpuPerRequest(before, threadTicks(p.pid), run.requests) };
          const key = `${s.key}\u0000${i}`;
          results.set(key, [...(results.get(key) ?? []), r]);
          log(`  round ${round} ${s.key} ${c.label}: ${r.rps.toFixed(0)} req/s, p50 ${fmtUs(r.p50us)}, p99 ${fmtUs(r.p99us)} (p99/p50 ${(r.p99us / r.p50us).toFixed(1)}x); server CPU ${r.processUs.toFixed(1)} us/req, busiest thread ${r.busiestUs.toFixed(1)} us/req${r.errors ? `, ${r.errors} ERRORS` : ''}`);
        }
      }
    }
    log('');
    log(`medians over ${opt.rounds} rounds (ratio: req/s over ${configs[0]!.label}'s in the same scenario; machine busy before runs: median ${(median(busy) * 100).toFixed(0)}%, max ${(Math.max(...busy) * 100).toFixed(0)}%):`);
    log('| scenario | configuration | req/s | ratio | p50 | p99 | p99/p50 | server CPU us/req | busiest thread us/req |');
    log('|---|---|---|---|---|---|---|---|---|');
    for (const s of scenarios) {
      const base = median(results.get(`${s.key}\u00000`)!.map((r) => r.rps));
      configs.forEach((c, i) => {
        const rs = results.get(`${s.key}\u0000${i}`)!;
        const rps = median(rs.map((r) => r.rps)), p50 = median(rs.map((r) => r.p50us)), p99 = median(rs.map((r) => r.p99us));
        const processUs = median(rs.map((r) => r.processUs)), busiestUs = median(rs.map((r) => r.busiestUs));
        log(`| ${s.key} | ${c.label} | ${(rps / 1000).toFixed(1)}k | ${(rps / base).toFixed(2)}x | ${fmtUs(p50)} | ${fmtUs(p99)} | ${(p99 / p50).toFixed(1)}x | ${processUs.toFixed(1)} | ${busiestUs.toFixed(1)} |`);
      });
    }
    for (const p of servers) log(`  ${p.name}: VmRSS at the end ${p.memory()?.rssMiB.toFixed(1)} MiB`);
  } finally {
    for (const p of servers) await p.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
