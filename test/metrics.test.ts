// GET /metrics (src/server/metrics.ts, README.md, `GET /metrics`): Prometheus text with
// the whole server's query counts and durations (every front-end thread's, merged however
// many threads there are and whichever one the scrape reaches), the queues' gauges and the
// process metrics.
import { request as httpRequest } from 'node:http';
import { describe, expect, it } from 'vitest';
import { startServer } from '../dist/src/server/server.js';
import { addN, count, q, read, write } from './helpers/requests.js';

interface Answer { status: number; text: string; contentType: string }

/** A request on a connection of its own, so the kernel picks a front-end thread for each. */
function fresh(url: string, method: 'GET' | 'POST', path: string, body = '', headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, { method, agent: false, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => { text += d; }).on('end', () => resolve({ status: res.statusCode ?? 0, text, contentType: String(res.headers['content-type']) }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The value of one sample line (`name{labels} value`), or 0 when absent. */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

const label = `Metrics${process.pid}`;
const countLabel = JSON.stringify(read([q('c', count({ nodes_where: { predicate: { eq: { left: { property: '$label' }, right: { constant: { string: label } } } } } }))], ['c']));
const addNode = JSON.stringify(write([q('n', addN(label))], ['n']));

describe('GET /metrics', () => {
  it('counts every query once, by route and status class, whichever of several threads answered it or is scraped', async () => {
    const server = await startServer({ port: 0, readers: 1, httpThreads: 3 });
    try {
      const writes = 5, reads = 30, bad = 7;
      const before = await fresh(server.url, 'GET', '/metrics');
      const epochBefore = sample(before.text, 'svc_store_visible_epoch');
      const propertyHeapBefore = sample(before.text, 'svc_store_property_heap_bytes');
      for (let i = 0; i < writes; i++) expect((await fresh(server.url, 'POST', '/v2/query', addNode)).status).toBe(200);
      const answers = await Promise.all(Array.from({ length: reads }, () => fresh(server.url, 'POST', '/v2/query', countLabel)));
      for (const a of answers) expect(a.text).toBe(`{"c":${writes}}`);
      for (let i = 0; i < bad; i++) expect((await fresh(server.url, 'POST', '/v2/query', '{"request_type":')).status).toBe(400);
      // Refused on their headers, before the body is read: counted too, under route "none".
      const badHeaders = 4;
      for (let i = 0; i < badHeaders; i++) expect((await fresh(server.url, 'POST', '/v2/query', countLabel, { 'x-svc-warm': 'maybe' })).status).toBe(400);

      // Scrapes on fresh connections reach different threads: each gives the same totals.
      const scrapes = await Promise.all(Array.from({ length: 12 }, () => fresh(server.url, 'GET', '/metrics')));
      for (const m of scrapes) {
        expect(m.status).toBe(200);
        expect(m.contentType).toContain('text/plain; version=0.0.4');
        const total = ['inline', 'pool', 'writer', 'none'].flatMap((route) => ['2xx', '4xx', '5xx'].map((c) => sample(m.text, `svc_queries_total{route="${route}",status="${c}"}`)))
          .reduce((a, b) => a + b, 0);
        expect(total).toBe(writes + reads + bad + badHeaders);
        expect(sample(m.text, 'svc_queries_total{route="none",status="4xx"}')).toBeGreaterThanOrEqual(badHeaders);
        expect(sample(m.text, 'svc_queries_total{route="writer",status="2xx"}')).toBe(writes);
        expect(sample(m.text, 'svc_queries_total{route="pool",status="2xx"}') + sample(m.text, 'svc_queries_total{route="inline",status="2xx"}')).toBe(reads);
        const durations = ['inline', 'pool', 'writer', 'none'].reduce((a, route) => a + sample(m.text, `svc_query_duration_seconds_count{route="${route}"}`), 0);
        expect(durations).toBe(writes + reads + bad + badHeaders);
        expect(sample(m.text, 'svc_ready')).toBe(1);
        expect(sample(m.text, 'svc_reader_queue_requests')).toBe(0);
        expect(sample(m.text, 'svc_reader_threads')).toBe(1);
        expect(m.text).toMatch(/^svc_reader_pool_restarts_total 0$/m);
        expect(sample(m.text, 'svc_writer_pending_requests')).toBe(0);
        expect(sample(m.text, 'svc_reads_answered_overdue_total')).toBe(0);
        expect(sample(m.text, 'svc_writer_requests_answered_overdue_total')).toBe(0);
        expect(sample(m.text, 'process_resident_memory_bytes')).toBeGreaterThan(10 * 1024 * 1024);
        // One write batch per write request, each adding one node.
        expect(sample(m.text, 'svc_store_visible_epoch')).toBe(epochBefore + writes);
        expect(sample(m.text, 'svc_store_node_slots')).toBe(writes);
        expect(sample(m.text, 'svc_store_edge_slots')).toBe(0);
        // Each write added one node: a record version (its 16 B header at least) each.
        expect(propertyHeapBefore).toBeGreaterThan(0);
        expect(sample(m.text, 'svc_store_property_heap_bytes')).toBeGreaterThanOrEqual(propertyHeapBefore + writes * 16);
        expect(sample(m.text, 'svc_store_adjacency_heap_bytes')).toBeGreaterThan(0);
      }
      // Each update leaves its node's previous version to be reused: the heap stops growing.
      expect(sample(scrapes[0]!.text, 'svc_store_property_heap_reclaimable_bytes')).toBe(0);
      const update = JSON.stringify(write([q(null, { set_property: { input: { nodes: { reference: { ids: [0] } } }, name: 'n', value: { value: { i64: 1 } } } })], []));
      for (let i = 0; i < 3; i++) expect((await fresh(server.url, 'POST', '/v2/query', update)).status).toBe(200);
      const updated = await fresh(server.url, 'GET', '/metrics');
      expect(sample(updated.text, 'svc_store_property_heap_reclaimable_bytes')).toBeGreaterThan(0);
      for (let i = 0; i < 20; i++) expect((await fresh(server.url, 'POST', '/v2/query', update)).status).toBe(200);
      const later = await fresh(server.url, 'GET', '/metrics');
      expect(sample(later.text, 'svc_store_property_heap_bytes')).toBe(sample(updated.text, 'svc_store_property_heap_bytes'));
      // A scrape is not a query.
      const again = await fresh(server.url, 'GET', '/metrics');
      expect(sample(again.text, 'svc_queries_total{route="writer",status="2xx"}')).toBe(writes + 23);
      expect((await fresh(server.url, 'POST', '/metrics')).status).toBe(405);
    } finally {
      await server.close();
    }
  });
});
