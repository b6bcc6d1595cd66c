// The flood of bench/flood.ts, in its own process so it does not share an event loop with
// the probe it disturbs: `node dist/bench/flood-client.js URL BODIES_JSON_FILE CONNECTIONS
// DURATION_MS`. Each connection posts the bodies in rotation, one at a time, for
// DURATION_MS; requests still running then are cut (the server may run a query up to its
// own deadline, 30 s by default, longer than the flood). Then one JSON line goes to stdout:
// {"requests": n, "answers": {"200": n, "500 query_deadline_exceeded": n, "0 cut at the end": n, ...}}.
import { readFileSync } from 'node:fs';
import { setMaxListeners } from 'node:events';

const [url, file, connectionsText, durationText] = process.argv.slice(2);
if (url === undefined || file === undefined) {
  process.stderr.write('usage: flood-client.js URL BODIES_JSON_FILE CONNECTIONS DURATION_MS\n');
  process.exit(2);
}
const bodies = JSON.parse(readFileSync(file, 'utf8')) as string[];
const connections = Number(connectionsText ?? 8);
const durationMs = Number(durationText ?? 3000);
const until = performance.now() + durationMs;
const end = new AbortController();
setMaxListeners(0, end.signal);
setTimeout(() => end.abort(), durationMs);
const answers: Record<string, number> = {};
let requests = 0;

async function one(body: string): Promise<string> {
  try {
    const res = await fetch(`${url}/v2/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: end.signal });
    const text = await res.text();
    if (res.status === 200) return '200';
    try { return `${res.status} ${String((JSON.parse(text) as { error?: unknown }).error)}`; } catch { return `${res.status}`; }
  } catch {
    return end.signal.aborted ? '0 cut at the end' : '0 connection failed';
  }
}

async function connection(offset: number): Promise<void> {
  for (let i = offset; performance.now() < until; i++) {
    const key = await one(bodies[i % bodies.length]!);
    requests++;
    answers[key] = (answers[key] ?? 0) + 1;
    // A refused connection would spin: the server is gone, stop.
    if (key === '0 connection failed') return;
  }
}

await Promise.all(Array.from({ length: connections }, (_, c) => connection(c * 7)));
process.stdout.write(`${JSON.stringify({ requests, answers })}\n`);
process.exit(0);
