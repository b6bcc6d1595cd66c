// A write larger than what the HTTP thread parses itself (limits.planCacheBodyBytesMax) goes
// straight to the writer when the start of its body says `"request_type":"write"`
// (protocol/request-text.ts leadingRequestType); a reader no longer parses all of it only
// to answer "forward". Anything else large still goes to the reader pool.
import { describe, expect, it } from 'vitest';
import { leadingRequestType } from '../src/protocol/request-text.js';
import { InlineReads } from '../src/server/inline-reads.js';
import { Store } from '../src/store/store.js';
import { noFlags } from '../src/exec/request.js';
import type { QueryJob, QuerySink } from '../src/server/job.js';
import { limits } from '../src/limits.js';
import { addN, q, read, str, write } from './helpers/requests.js';

describe('leadingRequestType', () => {
  it('reads request_type from the top-level members before it, however the text goes on', () => {
    expect(leadingRequestType('{"request_type":"write","query":{"write":')).toBe('write');
    expect(leadingRequestType(' { "query_name" : null , "request_type" : "read" }')).toBe('read');
    expect(leadingRequestType('{"query_name":"a,\\"}","request_type":"write"')).toBe('write');
    expect(leadingRequestType('{"parameters":{"x":[1,{"request_type":"read"}]},"request_type":"write"')).toBe('write');
  });

  it('gives up on anything else: unknown, nested, escaped, cut short, not an object', () => {
    for (const text of [
      '{"request_type":"Write"}', '{"request_type":1}', '{"query":{"request_type":"write"}}',
      '{"request\\u005ftype":"write"}', '{"parameters":{"x":[1,2', '{"request_type":"wri', '["request_type","write"]', '',
    ]) expect(leadingRequestType(text), text).toBe(null);
  });
});

describe('large bodies on the HTTP thread (InlineReads)', () => {
  it('sends a large write to the writer and a large read to the pool, without executing either', () => {
    const pooled: QueryJob[] = [], written: QueryJob[] = [];
    const pool: QuerySink = { submit: (job) => { pooled.push(job); } };
    const writer: QuerySink = { submit: (job) => { written.push(job); } };
    const inline = new InlineReads(Store.create(), pool, writer, { queryTimeoutMs: 30_000 });
    const job = (body: string): QueryJob => ({
      body: new TextEncoder().encode(body), flags: noFlags,
      responder: { settled: false, respond: () => { throw new Error('not answered here'); } },
    });
    const padding = 'x'.repeat(limits.planCacheBodyBytesMax);
    const bigWrite = JSON.stringify(write([q(null, addN('N', [['pad', str(padding)]]))], []));
    const bigRead = JSON.stringify(read([q('r', { nodes: { reference: { ids: [0] } } })], ['r'], { query_name: padding }));
    expect(bigWrite.startsWith('{"request_type":"write"')).toBe(true); // as the client libraries send it
    inline.submit(job(bigWrite));
    inline.submit(job(bigRead));
    expect(written).toHaveLength(1);
    expect(new TextDecoder().decode(written[0]!.body)).toBe(bigWrite);
    expect(pooled).toHaveLength(1);
    expect(new TextDecoder().decode(pooled[0]!.body)).toBe(bigRead);
  });
});
