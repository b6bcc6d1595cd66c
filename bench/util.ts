// Small helpers shared by the benchmark modules.
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

export const log = (msg: string): void => { process.stdout.write(`${msg}\n`); };

export async function timed<T>(fn: () => Promise<T> | T): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

/** VmRSS / VmHWM of a process in MiB (Linux only; null elsewhere). */
export function procMemory(pid: number): { rssMiB: number; hwmMiB: number } | null {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (key: string): number => {
      const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text);
      return m ? Number(m[1]) : NaN;
    };
    return { rssMiB: kb('VmRSS') / 1024, hwmMiB: kb('VmHWM') / 1024 };
  } catch {
    return null;
  }
}

export function hasCommand(cmd: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export const fmtInt = (n: number): string => Math.round(n).toLocaleString('en-US');
export const fmtOps = (n: number): string => (n >= 1e6 ? `${(n / 1e6).toFixed(2)}M` : n >= 1e4 ? `${(n / 1e3).toFixed(1)}k` : n >= 100 ? n.toFixed(0) : n.toFixed(1));
export const fmtMs = (ms: number): string => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);
export const fmtUs = (us: number): string => (us >= 10_000 ? `${(us / 1000).toFixed(1)} ms` : us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(0)} us`);
export const fmtRatio = (r: number): string => (Number.isFinite(r) ? (r >= 100 ? `${r.toFixed(0)}x` : r >= 10 ? `${r.toFixed(1)}x` : `${r.toFixed(2)}x`) : 'n/a');

/** A plain text table (also valid Markdown). */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** After this time (ms since epoch) nobody waits for a quiet machine or repeats a run. */
let patienceDeadline = Infinity;
export function setPatienceDeadline(at: number): void { patienceDeadline = at; }
const patient = (): boolean => Date.now() < patienceDeadline;

function cpuTimes(): { idle: number; total: number } | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const idle = f[3]! + (f[4] ?? 0);
    return { idle, total: f.reduce((a, b) => a + b, 0) };
  } catch {
    return null;
  }
}

/** Share of all CPUs busy over `ms` (0..1), or null where /proc/stat is missing. */
export async function machineBusy(ms: number): Promise<number | null> {
  const a = cpuTimes();
  await sleep(ms);
  const b = cpuTimes();
  if (!a || !b || b.total === a.total) return null;
  return 1 - (b.idle - a.idle) / (b.total - a.total);
}

/**
 * Other processes skew every number here (2 cores). Wait up to `maxWaitMs` for a 1 s
 * window with the machine under `threshold` busy; returns the last busy share seen.
 */
export async function waitForQuiet(maxWaitMs: number, threshold = 0.1): Promise<number | null> {
  const deadline = Math.min(Date.now() + maxWaitMs, patienceDeadline);
  let busy = await machineBusy(1000);
  while (busy !== null && busy > threshold && Date.now() < deadline) {
    log(`  machine ${(busy * 100).toFixed(0)}% busy with other work; waiting for a quiet moment ...`);
    busy = await machineBusy(2000);
  }
  if (busy !== null && busy > threshold) log(`  !! still ${(busy * 100).toFixed(0)}% busy with other work: numbers below are disturbed`);
  return busy;
}

function procTicks(pid: number | 'self', withChildren: boolean): number {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the ")" that closes the command name: state is field 3, utime 14, stime 15, cutime 16, cstime 17.
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ').map(Number);
    return f[11]! + f[12]! + (withChildren ? f[13]! + f[14]! : 0);
  } catch {
    return 0;
  }
}

/**
 * CPU used by processes other than ours while a measurement runs, as a share of the
 * whole machine (0..1). "Ours" = this process, its reaped children (wrk, counted once it
 * has exited) and the given server PIDs. Null where /proc is missing.
 */
export function foreignLoadMeter(serverPids: number[]): { stop(): number | null } {
  const own = (): number => procTicks('self', true) + serverPids.reduce((a, pid) => a + procTicks(pid, false), 0);
  const t0 = cpuTimes(), o0 = own();
  return {
    stop() {
      const t1 = cpuTimes(), o1 = own();
      if (!t0 || !t1 || t1.total === t0.total) return null;
      const busy = (t1.total - t0.total) - (t1.idle - t0.idle);
      return Math.max(0, (busy - (o1 - o0)) / (t1.total - t0.total));
    },
  };
}

/** Run `fn` until other work took at most `threshold` of the machine (up to `attempts` tries); keep the least disturbed run. */
export async function undisturbed<T>(
  what: string, fn: () => Promise<T>, serverPids: number[], opts: { attempts: number; threshold: number; waitIdleMs: number },
): Promise<{ value: T; foreign: number | null }> {
  let best: { value: T; foreign: number | null } | undefined;
  for (let attempt = 1; attempt <= opts.attempts; attempt++) {
    await waitForQuiet(opts.waitIdleMs, opts.threshold);
    const meter = foreignLoadMeter(serverPids);
    const value = await fn();
    const foreign = meter.stop();
    if (best === undefined || (foreign ?? 0) < (best.foreign ?? 0)) best = { value, foreign };
    if (foreign === null || foreign <= opts.threshold || !patient()) break;
    if (attempt < opts.attempts) log(`  ${what}: other work took ${(foreign * 100).toFixed(0)}% of the machine during the run; repeating`);
  }
  return best!;
}

/**
 * Where a reference server (bare-uws.ts, bare-engine.ts) listens: `HOST PORT`, or the flags
 * bench/ab.js gives a server (`serve --host HOST --port PORT ...`).
 */
export function listenAddress(args: readonly string[]): { host: string; port: number } {
  const flag = (name: string): string | undefined => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
  return { host: flag('--host') ?? args[0] ?? '127.0.0.1', port: Number(flag('--port') ?? args[1] ?? 0) };
}
