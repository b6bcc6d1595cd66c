// The storage torture scenarios (run by bench/torture.ts and, a round or two each, by
// test/torture-smoke.test.ts). Each scenario runs one round per call in fresh temp
// directories and reports through the context: `fail` for a broken guarantee, `note` for
// what was observed (coverage, timings, behaviour the spec leaves open).
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, readFileSync, rmSync, statfsSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import {
  canon, canonical, checkPairs, copyData, dataFiles, describeStart, diffCanonical, diffHashes, dump, entry, errorCode, fileRegions,
  getStatus, hashDir, hasStackTrace, listing, listShort, lit, MISSING_ID, mustStart, newLoadLog, nodeIds, nodeVar, pairLoad,
  pairRequest, pairSpec, post, removeTemp, seeded, sleep, startServer, tempDir, walFrames, watchFor, wherePropEq, writeReq,
  type Answer, type Dump, type LoadLog, type Random, type Region, type Server, type StartOutcome,
} from './lib.js';

export interface RoundContext {
  /** The round's seed (printed with every failure). */
  seed: number;
  round: number;
  /** Shorter loads (the vitest smoke run). */
  quick: boolean;
  fail(what: string): void;
  note(what: string): void;
  log(what: string): void;
}

export interface Scenario {
  id: number;
  name: string;
  title: string;
  run(ctx: RoundContext): Promise<void>;
}

const snapshotBytesChoices = [2048, 8192, 32768];

/** Start on `dir` and audit the pair workload; returns the running server or null (after recording the failure). */
async function startAndAudit(ctx: RoundContext, args: string[], seed: number, log: LoadLog, what: string, padBytes = 0): Promise<Server | null> {
  const o = await startServer(args);
  if (o.kind !== 'listening') {
    ctx.fail(`${what}: restart failed: ${describeStart(o)}`);
    return null;
  }
  try {
    const problems = checkPairs(await dump(o.server.url), seed, log.sent, log.acked, padBytes);
    for (const p of problems) ctx.fail(`${what}: ${p}`);
  } catch (err) {
    ctx.fail(`${what}: ${(err as Error).message}`);
  }
  return o.server;
}

// ---------------------------------------------------------------- 1. kill -9 at random moments

type Trigger = 'random' | 'snapshot .tmp appears' | 'new snapshot file' | 'new WAL segment';

/**
 * Start a pair load on `server` and kill -9 it at `trigger` (or after `fallbackMs`).
 * Returns whether the trigger fired and the directory listing at the kill.
 */
async function loadAndKill(server: Server, dir: string, seed: number, log: LoadLog, nextK: () => number, trigger: Trigger, r: Random,
  opts: { fallbackMs: number; clients: number; padBytes?: number }): Promise<{ fired: boolean; at: string }> {
  const before = new Set(dataFiles(dir).snapshots.concat(dataFiles(dir).segments));
  let fired = false;
  let at = '';
  const kill = (): void => { if (server.alive()) { server.child.kill('SIGKILL'); at = listing(dir); } };
  let stopWatch = (): void => {};
  if (trigger === 'random') {
    const t = setTimeout(() => { fired = true; kill(); }, r.int(30, 700));
    stopWatch = () => clearTimeout(t);
  } else {
    const match = trigger === 'snapshot .tmp appears' ? (f: string) => f.endsWith('.tmp') && !f.startsWith('writer.')
      : trigger === 'new snapshot file' ? (f: string) => f.startsWith('snapshot-') && !f.endsWith('.tmp') && !before.has(f)
        : (f: string) => f.startsWith('wal-') && !before.has(f);
    stopWatch = watchFor(dir, match, () => { fired = true; kill(); });
  }
  const fallback = setTimeout(kill, opts.fallbackMs);
  const until = performance.now() + opts.fallbackMs + 2000;
  await pairLoad(server.url, seed, log, { nextK, clients: opts.clients, maxRequests: 20_000, untilMs: until, padBytes: opts.padBytes ?? 0 });
  kill();
  await server.exited;
  clearTimeout(fallback);
  stopWatch();
  return { fired, at };
}

export const killScenario: Scenario = {
  id: 1, name: 'kill', title: 'kill -9 at random moments, during snapshots and WAL rotation',
  async run(ctx) {
    const r = seeded(ctx.seed);
    const dir = tempDir('kill');
    try {
      const snap = r.pick(snapshotBytesChoices);
      const args = ['--disk', dir, '--readers', '1', '--snapshot-wal-bytes', String(snap)];
      const log = newLoadLog();
      let k = 0;
      const cycles = ctx.quick ? 2 : 4;
      for (let c = 0; c <= cycles; c++) {
        const server = await startAndAudit(ctx, args, ctx.seed, log, `after kill ${c} (--snapshot-wal-bytes ${snap})`);
        if (server === null) return;
        if (c === cycles) {
          const exit = await server.stop();
          if (exit.code !== 0 || exit.forced) ctx.fail(`clean stop exited with ${exit.code}${exit.forced ? ' (needed SIGKILL)' : ''}: ${server.stderr().slice(0, 300)}`);
          const again = await startAndAudit(ctx, args, ctx.seed, log, 'after the final clean stop');
          await again?.stop();
          break;
        }
        const trigger = r.pick<Trigger>(['random', 'snapshot .tmp appears', 'new snapshot file', 'new WAL segment']);
        const { fired, at } = await loadAndKill(server, dir, ctx.seed, log, () => k++, trigger, r, { fallbackMs: ctx.quick ? 800 : 1500, clients: 3 });
        ctx.note(`trigger "${trigger}" ${fired ? 'fired' : 'missed (killed by the fallback timer)'}`);
        ctx.log(`  kill ${c}: trigger ${trigger}${fired ? '' : ' (missed)'}, ${log.acked.size} acked so far, files at kill: ${at}`);
      }
      ctx.note(`${log.acked.size} batches acknowledged over ${cycles} kills`);
    } finally {
      removeTemp(dir);
    }
  },
};

// ---------------------------------------------------------------- 2. flipped bytes

interface Refusal { file: string; damage: string; before: Map<string, string>; dir: string }

/** Judge a start on a deliberately damaged copy: refuse cleanly (files untouched, file named) or start with every acknowledged batch whole. */
async function judgeDamagedStart(ctx: RoundContext, o: StartOutcome, d: Refusal, seed: number, log: LoadLog,
  expectRefusal: boolean): Promise<'refused' | 'started'> {
  if (o.kind === 'timeout') { ctx.fail(`${d.damage}: server hung: ${describeStart(o)}`); return 'refused'; }
  if (o.kind === 'exited') {
    const text = o.stderr + o.stdout;
    if (o.exit.code === 0) ctx.fail(`${d.damage}: server exited 0 without listening: ${text.slice(0, 300)}`);
    if (hasStackTrace(text)) ctx.fail(`${d.damage}: crashed with a stack trace: ${text.trim().split('\n').slice(0, 4).join(' | ').slice(0, 400)}`);
    if (!text.includes(d.file)) ctx.fail(`${d.damage}: refusal does not name ${d.file}: ${text.trim().slice(0, 300)}`);
    else if (!/offset|byte \d|at \d/i.test(text)) ctx.note(`refusals naming the file but no offset (spec asks for both): e.g. "${text.trim().slice(0, 160)}"`);
    const changed = diffHashes(d.before, hashDir(d.dir));
    if (changed.length > 0) ctx.fail(`${d.damage}: refused start changed files: ${changed.join(', ')}`);
    return 'refused';
  }
  try {
    const problems = checkPairs(await dump(o.server.url), seed, log.sent, log.acked);
    const changed = diffHashes(d.before, hashDir(d.dir));
    for (const p of problems) ctx.fail(`${d.damage}: started (${changed.length > 0 ? `rewrote ${changed.join(', ')}` : 'files untouched'}) and ${p}`);
    if (expectRefusal && problems.length === 0) {
      ctx.fail(`${d.damage}: started although the spec calls this corruption (must refuse, naming file and offset)${changed.length > 0 ? `; it rewrote ${changed.join(', ')}` : ''}`);
    }
  } catch (err) {
    ctx.fail(`${d.damage}: started but the audit failed: ${(err as Error).message}`);
  }
  await o.server.stop();
  return 'started';
}

/** Build a base directory with the pair workload: killed under load (maybe mid-rotation) or cleanly stopped. */
async function buildBase(ctx: RoundContext, r: Random, dir: string, log: LoadLog): Promise<string> {
  const snap = r.pick([2048, 4096, 16384]);
  const args = ['--disk', dir, '--readers', '1', '--snapshot-wal-bytes', String(snap)];
  let k = 0;
  const server = await mustStart(args);
  const ending = r.pick(['kill -9 under load', 'kill -9 at a new WAL segment', 'clean stop then more writes and kill -9', 'clean stop']);
  if (ending === 'clean stop' || ending.startsWith('clean stop then')) {
    await pairLoad(server.url, ctx.seed, log, { nextK: () => k++, clients: 2, maxRequests: r.int(20, 120), untilMs: performance.now() + 3000 });
    await server.stop();
    if (ending === 'clean stop') return `${ending}, --snapshot-wal-bytes ${snap}`;
    const again = await mustStart(args);
    await pairLoad(again.url, ctx.seed, log, { nextK: () => k++, clients: 1, maxRequests: r.int(3, 40), untilMs: performance.now() + 3000 });
    await again.kill9();
    return `${ending}, --snapshot-wal-bytes ${snap}`;
  }
  const trigger: Trigger = ending === 'kill -9 under load' ? 'random' : 'new WAL segment';
  const { fired } = await loadAndKill(server, dir, ctx.seed, log, () => k++, trigger, r, { fallbackMs: 900, clients: 2 });
  return `${ending}${fired ? '' : ' (missed: timer)'}, --snapshot-wal-bytes ${snap}`;
}

export const flipScenario: Scenario = {
  id: 2, name: 'flip', title: 'one flipped byte in a persisted file: refuse cleanly or keep everything',
  async run(ctx) {
    const r = seeded(ctx.seed);
    const base = tempDir('flip-base');
    try {
      const log = newLoadLog();
      const how = await buildBase(ctx, r, base, log);
      const files = dataFiles(base);
      const regions: Region[] = [];
      for (const f of files.snapshots) regions.push(...fileRegions(join(base, f), false));
      files.segments.forEach((f, i) => regions.push(...fileRegions(join(base, f), i === files.segments.length - 1)));
      for (const f of files.other) regions.push({ file: f, kind: 'other file', start: 0, end: statSync(join(base, f)).size });
      const kinds = [...new Set(regions.filter((g) => g.end > g.start).map((g) => g.kind))];
      ctx.log(`  base: ${how}; ${log.acked.size} acked; files ${listing(base)}`);
      const trials = ctx.quick ? 3 : 6;
      for (let t = 0; t < trials && kinds.length > 0; t++) {
        const kind = kinds[(ctx.round * trials + t) % kinds.length]!; // walk through every kind present
        const choices = regions.filter((g) => g.kind === kind && g.end > g.start);
        const g = r.pick(choices);
        const offset = r.int(g.start, g.end - 1);
        const mask = r.int(1, 255);
        const copy = tempDir('flip');
        try {
          copyData(base, copy);
          const path = join(copy, g.file);
          const bytes = readFileSync(path);
          bytes[offset] = bytes[offset]! ^ mask;
          writeFileSync(path, bytes);
          const damage = `[${how}] ${g.file} byte ${offset} ^= 0x${mask.toString(16)} (${kind} ${g.start}..${g.end})`;
          const before = hashDir(copy);
          const o = await startServer(['--disk', copy, '--readers', '1'], { timeoutMs: 30_000 });
          const verdict = await judgeDamagedStart(ctx, o, { file: g.file, damage, before, dir: copy }, ctx.seed, log, false);
          ctx.note(`${kind}: ${verdict}`);
        } finally {
          removeTemp(copy);
        }
      }
      ctx.note(`base dirs: ${how.split(',')[0]}`);
      if (files.segments.length > 1) ctx.note('base with a non-last WAL segment');
    } finally {
      removeTemp(base);
    }
  },
};

// ---------------------------------------------------------------- 3. zero-filled and truncated tails

type TailCase = 'append 4 KiB of zeros' | 'append 1-7 zero bytes' | 'truncate inside the last frame' | 'truncate at a random offset'
  | 'zero-fill the tail of the last frame' | 'zero-fill across the last two frames';
const tailCases: TailCase[] = ['append 4 KiB of zeros', 'append 1-7 zero bytes', 'truncate inside the last frame', 'truncate at a random offset',
  'zero-fill the tail of the last frame', 'zero-fill across the last two frames'];

export const tailScenario: Scenario = {
  id: 3, name: 'tail', title: 'zero-filled and truncated WAL tails (spec: only a torn last frame may be dropped)',
  async run(ctx) {
    const r = seeded(ctx.seed);
    const base = tempDir('tail-base');
    try {
      // Serial writes, all acknowledged, one frame each (no snapshot: default threshold), then kill -9.
      const log = newLoadLog();
      const order: number[] = [];
      const server = await mustStart(['--disk', base, '--readers', '1']);
      const n = r.int(8, ctx.quick ? 20 : 60);
      for (let k = 0; k < n; k++) {
        log.sent.add(k);
        const a = await post(server.url, pairRequest(pairSpec(ctx.seed, k)));
        if (a.status !== 200) { ctx.fail(`base write ${k} answered ${a.status} ${a.body.slice(0, 200)}`); return; }
        log.acked.add(k);
        order.push(k);
      }
      await server.kill9();
      const segs = dataFiles(base).segments;
      const last = segs.at(-1)!;
      const bytes = readFileSync(join(base, last));
      const frames = walFrames(bytes);
      const framesMatch = frames !== null && frames.length === n && segs.length === 1;
      if (!framesMatch) ctx.note(`WAL layout not as documented (${segs.length} segment(s), ${frames?.length ?? 'unparsable'} frames for ${n} batches): truncation checks use the prefix rule only`);
      const cases = ctx.quick ? [tailCases[ctx.round % 2]!, tailCases[2 + (ctx.round % 4)]!] : tailCases;
      for (const c of cases) {
        const copy = tempDir('tail');
        try {
          copyData(base, copy);
          const path = join(copy, last);
          const size = bytes.length;
          const lastFrame = frames?.at(-1) ?? { start: Math.max(16, size - 64), end: size };
          const prevFrame = frames && frames.length >= 2 ? frames.at(-2)! : { start: 16, end: lastFrame.start };
          let damage = '';
          let expectRefusal = false;
          /** Batches that must be present (the rest of `order` must be absent) when the damage is a truncation. */
          let keep: number | null = null;
          if (c === 'append 4 KiB of zeros') { appendFileSync(path, Buffer.alloc(4096)); damage = `${last}: 4096 zero bytes appended at ${size}`; expectRefusal = true; }
          else if (c === 'append 1-7 zero bytes') { const z = r.int(1, 7); appendFileSync(path, Buffer.alloc(z)); damage = `${last}: ${z} zero bytes appended at ${size}`; keep = n; }
          else if (c === 'truncate inside the last frame') {
            const at = r.int(lastFrame.start + 1, lastFrame.end - 1); truncateSync(path, at);
            damage = `${last}: truncated to ${at} (last frame ${lastFrame.start}..${lastFrame.end})`; keep = n - 1;
          } else if (c === 'truncate at a random offset') {
            const at = r.int(1, size - 1); truncateSync(path, at);
            keep = frames ? frames.filter((f) => f.end <= at).length : null;
            damage = `${last}: truncated to ${at} of ${size}`;
          } else if (c === 'zero-fill the tail of the last frame') {
            // A frame's payload is padded with zeros the checksum does not cover: zeroing only
            // those changes nothing (the file is intact), so at least one non-zero byte is zeroed.
            let zeroTail = 0;
            while (zeroTail < size && bytes[size - 1 - zeroTail] === 0) zeroTail++;
            const frameBytes = lastFrame.end - lastFrame.start;
            const z = r.int(Math.min(zeroTail + 1, frameBytes), frameBytes); const b = Buffer.from(bytes); b.fill(0, size - z); writeFileSync(path, b);
            damage = `${last}: last ${z} bytes zeroed (last frame ${lastFrame.start}..${lastFrame.end})`; expectRefusal = true;
          } else {
            const from = r.int(prevFrame.start, prevFrame.end - 1); const b = Buffer.from(bytes); b.fill(0, from); writeFileSync(path, b);
            damage = `${last}: zeroed from ${from} to the end ${size} (previous frame ${prevFrame.start}..${prevFrame.end})`; expectRefusal = true;
          }
          const before = hashDir(copy);
          const o = await startServer(['--disk', copy, '--readers', '1'], { timeoutMs: 30_000 });
          if (keep === null) {
            // Must start or refuse; every acknowledged batch before the damage... judged like a flipped byte.
            const verdict = await judgeDamagedStart(ctx, o, { file: last, damage, before, dir: copy }, ctx.seed, log, expectRefusal);
            ctx.note(`${c}: ${verdict}`);
            continue;
          }
          if (o.kind !== 'listening') {
            ctx.fail(`${damage}: a torn tail must be dropped, not refused: ${describeStart(o)}`);
            ctx.note(`${c}: refused`);
            continue;
          }
          ctx.note(`${c}: started`);
          const mustHave = new Set(order.slice(0, framesMatch ? keep : 0));
          const problems = checkPairs(await dump(o.server.url), ctx.seed, log.sent, mustHave);
          for (const p of problems) ctx.fail(`${damage}: ${p}`);
          const present = new Set((await dump(o.server.url)).nodes.map((x) => x['k'] as number));
          const absentShould = framesMatch ? order.slice(keep).filter((k) => present.has(k)) : [];
          if (absentShould.length > 0) ctx.fail(`${damage}: batches from the cut frame or after it are present: ${listShort(absentShould)}`);
          const gaps = order.filter((k, i) => !present.has(k) && order.slice(i + 1).some((later) => present.has(later)));
          if (gaps.length > 0) ctx.fail(`${damage}: present batches are not a prefix of the serial history: missing ${listShort(gaps)} before later ones`);
          await o.server.stop();
        } finally {
          removeTemp(copy);
        }
      }
    } finally {
      removeTemp(base);
    }
  },
};

// ---------------------------------------------------------------- 4. crash after a failed write that named new labels

/** The exact expected graph, built as writes are acknowledged; nodes carry a unique `u`. */
class Model {
  nodes = new Map<number, Record<string, unknown>>();
  ids = new Map<number, number>();
  edges: { props: Record<string, unknown>; from: number; to: number }[] = [];
  addNode(u: number, label: string, props: Record<string, unknown>, id: number): void { this.nodes.set(u, { $label: label, u, ...props }); this.ids.set(u, id); }
  dropNode(u: number): void { this.nodes.delete(u); this.ids.delete(u); this.edges = this.edges.filter((e) => e.from !== u && e.to !== u); }
  expected(): string[] {
    const out = [...this.nodes.values()].map((n) => `N ${canon(n)}`);
    for (const e of this.edges) out.push(`E ${canon(e.props)} ${canon(this.nodes.get(e.from)!)} -> ${canon(this.nodes.get(e.to)!)}`);
    return out.sort();
  }
}

const idOf = (a: Answer, name: string, i = 0): number => (JSON.parse(a.body) as Record<string, { $id: number }[]>)[name]![i]!.$id;

async function compareTo(ctx: RoundContext, url: string, model: Model, what: string): Promise<boolean> {
  let d: Dump;
  try { d = await dump(url); } catch (err) { ctx.fail(`${what}: ${(err as Error).message}`); return false; }
  const diff = diffCanonical(canonical(d), model.expected());
  if (diff.length > 0) ctx.fail(`${what}: ${diff.join(' | ')}`);
  return diff.length === 0;
}

/** Poll a reader server until its dump equals the model (bounded). */
async function readerCatchesUp(ctx: RoundContext, url: string, model: Model, what: string, ms: number): Promise<void> {
  const until = performance.now() + ms;
  const want = model.expected();
  let last: string[] = [];
  while (performance.now() < until) {
    try {
      const d = await dump(url);
      const diff = diffCanonical(canonical(d), want);
      if (diff.length === 0) return;
      last = diff;
    } catch (err) { last = [(err as Error).message]; }
    await sleep(100);
  }
  ctx.fail(`${what}: reader did not reach the writer's state within ${ms} ms: ${last.join(' | ')}`);
}

export const failedWriteScenario: Scenario = {
  id: 4, name: 'failed-write', title: 'crash after a failed write that named new labels and keys (writer and reader server)',
  async run(ctx) {
    const r = seeded(ctx.seed);
    const dir = tempDir('failed');
    const servers: Server[] = [];
    try {
      const snap = r.pick([null, 1024]);
      const args = ['--disk', dir, '--readers', '1', ...(snap ? ['--snapshot-wal-bytes', String(snap)] : [])];
      const writer = await mustStart(args);
      servers.push(writer);
      const model = new Model();
      let u = 0;
      const x = r.int(1000, 9999);
      const add = async (label: string, props: Record<string, number | string>, what: string): Promise<number | null> => {
        const me = u++;
        const a = await post(writer.url, writeReq([entry('n', { add_n: { label, properties: [['u', lit(me)], ...Object.entries(props).map(([k, v]) => [k, lit(v)])] } })], ['n']));
        if (a.status !== 200) { ctx.fail(`${what}: answered ${a.status} ${a.body.slice(0, 200)}`); return null; }
        model.addNode(me, label, props, idOf(a, 'n'));
        return me;
      };
      const base = await add('Base', { k: 0 }, 'base write');
      const reader = await mustStart(['--mode', 'reader', '--disk', dir, '--readers', '1', '--refresh-ms', '50']);
      servers.push(reader);
      // The failed write: a node and an edge with brand-new labels and keys, then add_e to a missing node.
      const L1 = `Fresh${x}`, K1 = `fk${x}`, EL = `FE${x}`, EK = `ek${x}`;
      const bad = await post(writer.url, writeReq([
        entry('a', { add_n: { label: L1, properties: [['u', lit(u++)], [K1, lit('doomed')]] } }),
        entry('b', { add_n: { label: L1, properties: [['u', lit(u++)]] } }),
        entry(null, { add_e: { input: nodeVar('a'), label: EL, to: { var: 'b' }, properties: [[EK, lit(1)]] } }),
        entry(null, { add_e: { input: nodeVar('a'), label: EL, to: { ids: [MISSING_ID] }, properties: [] } }),
      ], []));
      if (bad.status !== 500 || errorCode(bad) !== 'node_not_found') ctx.fail(`failing write answered ${bad.status} ${bad.body.slice(0, 200)} (expected 500 node_not_found)`);
      if (snap === null && r.chance(0.5)) ctx.note('no snapshot between the failed write and the next');
      // A good write reusing the label, key and edge label, then one with another new label and key.
      const g1 = await post(writer.url, writeReq([
        entry('a', { add_n: { label: L1, properties: [['u', lit(u)], [K1, lit('kept')]] } }),
        entry('b', { add_n: { label: 'Base', properties: [['u', lit(u + 1)], [K1, lit(7)]] } }),
        entry(null, { add_e: { input: nodeVar('a'), label: EL, to: { var: 'b' }, properties: [[EK, lit(2)]] } }),
      ], ['a', 'b']));
      if (g1.status !== 200) ctx.fail(`write reusing the failed write's label answered ${g1.status} ${g1.body.slice(0, 200)}`);
      else {
        model.addNode(u, L1, { [K1]: 'kept' }, idOf(g1, 'a'));
        model.addNode(u + 1, 'Base', { [K1]: 7 }, idOf(g1, 'b'));
        model.edges.push({ props: { $label: EL, [EK]: 2 }, from: u, to: u + 1 });
      }
      u += 2;
      await add(`Other${x}`, { [`ok${x}`]: 'yes', k: 3 }, 'write with another new label');
      if (base === null) return;
      await compareTo(ctx, writer.url, model, 'writer before the kill');
      await readerCatchesUp(ctx, reader.url, model, 'reader server following the writer', 5000);
      const how = r.pick(['kill -9', 'clean stop']);
      if (how === 'kill -9') await writer.kill9(); else await writer.stop();
      const again = await startServer(args);
      if (again.kind !== 'listening') { ctx.fail(`restart after ${how} failed: ${describeStart(again)}`); return; }
      servers.push(again.server);
      ctx.note(`${how}: restart ok`);
      await compareTo(ctx, again.server.url, model, `writer after ${how}`);
      const one = await post(again.server.url, writeReq([entry('n', { add_n: { label: L1, properties: [['u', lit(u)], [K1, lit('after')]] } })], ['n']));
      if (one.status === 200) model.addNode(u, L1, { [K1]: 'after' }, idOf(one, 'n')); else ctx.fail(`write after restart answered ${one.status} ${one.body.slice(0, 200)}`);
      await readerCatchesUp(ctx, reader.url, model, `reader server after the writer's ${how} and restart`, 5000);
      // A fresh reader from the files alone.
      const fresh = await startServer(['--mode', 'reader', '--disk', dir, '--readers', '1']);
      if (fresh.kind !== 'listening') ctx.fail(`a new reader server on the directory failed: ${describeStart(fresh)}`);
      else { servers.push(fresh.server); await compareTo(ctx, fresh.server.url, model, 'new reader server'); }
    } finally {
      for (const s of servers) await s.stop(3000);
      removeTemp(dir);
    }
  },
};

// ---------------------------------------------------------------- 5. batches failing halfway through edges and drops

export const halfwayScenario: Scenario = {
  id: 5, name: 'halfway', title: 'batches failing halfway through add_e / drop, more writes, kill -9, full dump vs model',
  async run(ctx) {
    const r = seeded(ctx.seed);
    const dir = tempDir('halfway');
    const servers: Server[] = [];
    try {
      const snap = r.pick([null, 2048, 8192]);
      const args = ['--disk', dir, '--readers', '1', ...(snap ? ['--snapshot-wal-bytes', String(snap)] : [])];
      let server = await mustStart(args);
      servers.push(server);
      const model = new Model();
      let u = 0;
      const steps = ctx.quick ? 25 : r.int(30, 80);
      const live = (): number[] => [...model.nodes.keys()];
      const idsOf = (us: number[]): number[] => us.map((x) => model.ids.get(x)!);
      const kinds: string[] = [];
      for (let s = 0; s < steps; s++) {
        const nodes = live();
        const kind = nodes.length < 6 ? 'add' : r.pick(['add', 'add', 'fan ok', 'fan fail', 'drop ok', 'drop fail', 'drop edges fail', 'set fail', 'drop edges ok']);
        kinds.push(kind);
        const some = (n: number): number[] => { const out = new Set<number>(); for (let i = 0; i < n * 3 && out.size < n; i++) out.add(r.pick(nodes)); return [...out]; };
        let req: unknown;
        let expectOk = true;
        let apply = (_a: Answer): void => {};
        /** A last step that fails (node_not_found) from a node the batch did not drop. */
        const failTail = (exclude: number[] = []) => {
          const from = nodes.filter((n) => !exclude.includes(n));
          return entry(null, { add_e: { input: nodeIds(idsOf([r.pick(from.length > 0 ? from : nodes)])), label: 'FAIL', to: { ids: [MISSING_ID] }, properties: [] } });
        };
        if (kind === 'add') {
          const me = u++;
          const label = r.chance(0.2) ? `L${me}` : 'N';
          const key = r.chance(0.2) ? `q${me}` : 'w';
          req = writeReq([entry('n', { add_n: { label, properties: [['u', lit(me)], [key, lit(me * 2)]] } })], ['n']);
          apply = (a) => model.addNode(me, label, { [key]: me * 2 }, idOf(a, 'n'));
        } else if (kind === 'fan ok' || kind === 'fan fail') {
          const pairs = Array.from({ length: r.int(2, 12) }, () => [r.pick(nodes), r.pick(nodes)] as [number, number]);
          const rows = pairs.map(([a, b], i) => ({ s: model.ids.get(a)!, d: model.ids.get(b)!, i }));
          const label = r.chance(0.2) ? `F${u}` : 'FAN';
          if (kind === 'fan fail') { rows.splice(r.int(1, rows.length), 0, { s: model.ids.get(pairs[0]![0])!, d: MISSING_ID, i: -1 }); expectOk = false; }
          req = writeReq([{ for_each: { param: 'rows', body: [entry(null, { add_e: {
            input: { nodes: { reference: { param: 's' } } }, label, to: { param: 'd' }, properties: [['i', { expr: { param: 'i' } }]] } })] } }], [], { rows });
          apply = () => { for (const [i, [a, b]] of pairs.entries()) model.edges.push({ props: { $label: label, i }, from: a, to: b }); };
        } else if (kind === 'drop ok') {
          const victims = some(r.int(1, 3));
          req = writeReq([entry(null, { drop: { input: nodeIds(idsOf(victims)) } })], []);
          apply = () => { for (const v of victims) model.dropNode(v); };
        } else if (kind === 'drop fail') {
          const victims = some(r.int(1, 4));
          req = writeReq([entry(null, { drop: { input: nodeIds(idsOf(victims)) } }), failTail(victims)], []);
          expectOk = false;
        } else if (kind === 'drop edges ok' || kind === 'drop edges fail') {
          const from = some(r.int(1, 4));
          const entries = [entry(null, { drop_edge_labeled: { input: nodeIds(idsOf(from)), to: 'all', label: 'FAN' } })];
          if (kind === 'drop edges fail') { entries.push(failTail()); expectOk = false; }
          req = writeReq(entries, []);
          apply = () => { model.edges = model.edges.filter((e) => !(from.includes(e.from) && e.props['$label'] === 'FAN')); };
        } else {
          req = writeReq([entry(null, { set_property: { input: nodeIds(idsOf(some(3))), name: 'w', value: lit(-1) } }), failTail()], []);
          expectOk = false;
        }
        const a = await post(server.url, req);
        if (expectOk && a.status === 200) apply(a);
        else if (!expectOk && a.status === 500 && errorCode(a) === 'node_not_found') { /* rolled back */ }
        else { ctx.fail(`step ${s} (${kind}) answered ${a.status} ${a.body.slice(0, 200)}; stopping the round (model unknown)`); return; }
        if (s === Math.floor(steps / 2) && !(await compareTo(ctx, server.url, model, `live state after step ${s}`))) return;
      }
      ctx.note(`steps: ${kinds.length}, failing ones: ${kinds.filter((k) => k.includes('fail')).length}`);
      if (!(await compareTo(ctx, server.url, model, 'live state before the kill'))) return;
      await server.kill9();
      const again = await startServer(args);
      if (again.kind !== 'listening') { ctx.fail(`restart after kill -9 failed: ${describeStart(again)}`); return; }
      server = again.server;
      servers.push(server);
      await compareTo(ctx, server.url, model, 'after kill -9 and restart');
      await server.stop();
      const third = await startServer(args);
      if (third.kind !== 'listening') { ctx.fail(`restart after a clean stop failed: ${describeStart(third)}`); return; }
      servers.push(third.server);
      await compareTo(ctx, third.server.url, model, 'after a clean stop (snapshot) and restart');
    } finally {
      for (const s of servers) await s.stop(3000);
      removeTemp(dir);
    }
  },
};

// ---------------------------------------------------------------- 6. disk full during a snapshot

export const diskFullScenario: Scenario = {
  id: 6, name: 'disk-full', title: 'file system full during a snapshot (tmpfs)',
  async run(ctx) {
    const r = seeded(ctx.seed);
    const mnt = tempDir('full');
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', mnt], { stdio: 'ignore' });
    } catch {
      ctx.note('skipped: mount -t tmpfs failed (needs root)');
      removeTemp(mnt);
      return;
    }
    let server: Server | null = null;
    try {
      const data = join(mnt, 'db');
      mkdirSync(data);
      const pad = 1500;
      const args = ['--disk', data, '--readers', '1', '--snapshot-wal-bytes', String(r.pick([65536, 131072]))];
      server = await mustStart(args);
      const log = newLoadLog();
      let k = 0;
      await pairLoad(server.url, ctx.seed, log, { nextK: () => k++, clients: 1, maxRequests: 60, untilMs: performance.now() + 10_000, padBytes: pad });
      // Leave less room than a snapshot needs but enough for some WAL frames.
      const st = statfsSync(mnt);
      const free = Number(st.bavail) * Number(st.bsize);
      const leave = r.int(24, 96) * 1024;
      // The server may take space meanwhile (a snapshot it was writing): shrink until it fits.
      for (let size = Math.max(0, free - leave); ; size = Math.max(0, size - 64 * 1024)) {
        try {
          writeFileSync(join(mnt, 'filler'), Buffer.alloc(size));
          break;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOSPC' || size === 0) throw err;
        }
      }
      const snapsBefore = new Set(dataFiles(data).snapshots);
      let tmpSeen = 0;
      const stopWatch = watchFor(data, (f) => f.endsWith('.tmp') && !f.startsWith('writer.'), () => { tmpSeen++; });
      const statuses = new Map<string, number>();
      let unresponsive = 0;
      let notReady = 0;
      for (let i = 0; i < 150; i++) {
        const k0 = k++;
        log.sent.add(k0);
        const a = await post(server.url, pairRequest(pairSpec(ctx.seed, k0, pad)), {}, 10_000);
        const key = a.status === 200 ? '200' : `${a.status} ${errorCode(a)}`;
        statuses.set(key, (statuses.get(key) ?? 0) + 1);
        if (a.status === 200) log.acked.add(k0); else if (a.status === 0) log.unanswered.add(k0); else log.failed.set(k0, key);
        if (a.status !== 200) {
          const read = await post(server.url, { request_type: 'read', query: { read: { entries: [entry('c', { count: { input: { nodes: { reference: 'all' } } } })], returns: ['c'] } } }, {}, 5000);
          if (read.status !== 200) unresponsive++;
          if ((await getStatus(server.url, '/readyz')).status !== 200) notReady++;
          if (!server.alive()) break;
        }
      }
      stopWatch();
      const tmpLeft = dataFiles(data).other.filter((f) => f.endsWith('.tmp'));
      const newSnaps = dataFiles(data).snapshots.filter((f) => !snapsBefore.has(f));
      ctx.note(`while full: ${tmpSeen > 0 ? 'a snapshot was attempted (*.tmp seen)' : 'no snapshot temp file seen'}, ${newSnaps.length > 0 ? 'a snapshot completed' : 'no snapshot completed'}`);
      ctx.note(`while full: ${[...statuses].map(([s, n]) => `${s} x${n}`).join(', ')}`);
      if (!server.alive()) ctx.fail(`server exited while the disk was full: ${server.stderr().slice(0, 300)}`);
      if (unresponsive > 0) ctx.fail(`reads failed ${unresponsive} time(s) while the disk was full`);
      if (notReady > 0) ctx.note(`/readyz answered not ready ${notReady} time(s) while full`);
      if (tmpLeft.length > 0) ctx.note(`snapshot temp file left behind while full: ${tmpLeft.join(', ')}`);
      if (!statuses.has('500 storage_error') && ![...statuses.keys()].some((s) => s !== '200')) ctx.note('the disk never filled up (no write failed)');
      rmSync(join(mnt, 'filler'));
      // After space is freed: do writes succeed again without a restart?
      let okAfter = 0, failedAfter = '';
      for (let i = 0; i < 10 && server.alive(); i++) {
        const k0 = k++;
        log.sent.add(k0);
        const a = await post(server.url, pairRequest(pairSpec(ctx.seed, k0, pad)), {}, 10_000);
        if (a.status === 200) { okAfter++; log.acked.add(k0); } else failedAfter = `${a.status} ${errorCode(a)}`;
      }
      ctx.note(okAfter === 10 ? 'writes succeed again once space is freed' : `after space was freed ${10 - okAfter}/10 writes still failed (${failedAfter})`);
      if (r.chance(0.5)) await server.kill9(); else await server.stop();
      server = await startAndAudit(ctx, args, ctx.seed, log, 'restart after the disk was full', pad);
    } finally {
      await server?.stop(3000);
      try { execFileSync('umount', [mnt], { stdio: 'ignore' }); } catch { execFileSync('umount', ['-l', mnt], { stdio: 'ignore' }); }
      removeTemp(mnt);
    }
  },
};

// ---------------------------------------------------------------- 7. object storage down and back

interface S3rverInstance { run(): Promise<{ port: number }>; close(): Promise<void>; httpServer?: { closeAllConnections?(): void } }
type S3rverClass = new (options: Record<string, unknown>) => S3rverInstance;

async function startS3rver(directory: string, port: number): Promise<{ server: S3rverInstance; port: number }> {
  const { default: S3rver } = (await import('s3rver' as string)) as { default: S3rverClass };
  for (let attempt = 0; ; attempt++) {
    try {
      const server = new S3rver({ port, address: '127.0.0.1', directory, silent: true, configureBuckets: [{ name: 'bucket' }] });
      const started = await server.run();
      return { server, port: started.port };
    } catch (err) {
      if (attempt >= 20) throw err;
      await sleep(100);
    }
  }
}

async function stopS3rver(s: S3rverInstance): Promise<void> {
  const closing = s.close();
  s.httpServer?.closeAllConnections?.();
  await Promise.race([closing, sleep(3000)]);
}

export const objectOutageScenario: Scenario = {
  id: 7, name: 's3-outage', title: 'object storage (s3rver) down for 1.5-4 s under a write load, then back',
  async run(ctx) {
    const r = seeded(ctx.seed);
    const s3dir = tempDir('s3rver');
    let s3 = await startS3rver(s3dir, 0);
    const endpoint = `http://127.0.0.1:${s3.port}`;
    const env = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' };
    const args = ['--storage-uri', `s3://bucket/t${ctx.seed}`, '--s3-endpoint-url', endpoint, '--s3-region', 'us-east-1', '--readers', '1',
      '--snapshot-wal-bytes', String(r.pick([16384, 1 << 26]))];
    let server: Server | null = null;
    try {
      server = await mustStart(args, { env });
      const log = newLoadLog();
      let k = 0;
      const t0 = performance.now();
      const outageAt = t0 + 1000;
      const downMs = r.int(1500, 4000);
      const endAt = outageAt + downMs + 4000;
      const load = pairLoad(server.url, ctx.seed, log, { nextK: () => k++, clients: 3, maxRequests: 5000, untilMs: endAt, continueAfterNoAnswer: true, pauseMs: 20 });
      await sleep(outageAt - performance.now());
      await stopS3rver(s3.server);
      const down = performance.now();
      let readyDown = 0, notReadyDown = 0;
      while (performance.now() < down + downMs) {
        const st = await getStatus(server.url, '/readyz', 1000);
        if (st.status === 200) readyDown++; else notReadyDown++;
        await sleep(100);
      }
      s3 = await startS3rver(s3dir, s3.port);
      const back = performance.now();
      let readyBack = false;
      await load;
      for (let i = 0; i < 20 && !readyBack; i++) { readyBack = (await getStatus(server.url, '/readyz', 1000)).status === 200; if (!readyBack) await sleep(100); }
      const okAfterBack = [...log.ackedAt.values()].filter((t) => t > back + 1000).length;
      const errs = new Map<string, number>();
      for (const v of log.failed.values()) errs.set(v, (errs.get(v) ?? 0) + 1);
      ctx.note(`outage ${downMs} ms: ${log.acked.size} acked, errors ${[...errs].map(([e, n]) => `${e} x${n}`).join(', ') || 'none'}`);
      if (notReadyDown === 0) ctx.fail(`/readyz answered 200 on all ${readyDown} probes during the ${downMs} ms outage`);
      if (okAfterBack === 0) ctx.fail(`no write succeeded in the ${(endAt - back - 1000).toFixed(0)} ms after the object store came back (without restarting svcdb)${readyBack ? '' : '; /readyz still not ready'}`);
      else ctx.note('writes succeed again after the object store is back');
      const how = r.pick(['kill -9', 'clean stop']);
      if (how === 'kill -9') await server.kill9(); else {
        const e = await server.stop(15_000);
        if (e.forced) ctx.fail('clean stop after the outage did not finish within 15 s');
      }
      const again = await startServer(args, { env, timeoutMs: 40_000 });
      if (again.kind !== 'listening') { ctx.fail(`restart after the outage (${how}) failed: ${describeStart(again)}`); return; }
      server = again.server;
      const d = await dump(server.url);
      for (const p of checkPairs(d, ctx.seed, log.sent, log.acked)) ctx.fail(`after the outage and ${how}: ${p}`);
      const present = new Set(d.nodes.map((n) => n['k'] as number));
      const visibleFailed = [...log.failed.keys()].filter((x) => present.has(x));
      if (visibleFailed.length > 0) ctx.note(`writes answered with an error but present after restart: ${visibleFailed.length} of ${log.failed.size} (${[...new Set(visibleFailed.map((x) => log.failed.get(x)))].join(', ')})`);
    } finally {
      await server?.stop(5000);
      await stopS3rver(s3.server);
      removeTemp(s3dir);
    }
  },
};

export const scenarios: Scenario[] = [killScenario, flipScenario, tailScenario, failedWriteScenario, halfwayScenario, diskFullScenario, objectOutageScenario];
