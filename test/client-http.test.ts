// The Client over HTTP (against a scripted node:http server on 127.0.0.1, port 0) and over
// an embedded database: headers, auth schemes, response parsing, the error envelopes of
// errors.md §1–§2, and the opt-in bounded retry on 409.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  Client, Cond, P, SvcClientError, backoffDelayMs, defineParams, g, param, readBatch, writeBatch,
} from '../src/client/index.js';

interface Seen { method: string; url: string; headers: IncomingHttpHeaders; body: string }
interface Reply { status: number; body: string; statusMessage?: string; contentType?: string; headers?: Record<string, string>; delayMs?: number }

let server: Server;
let baseUrl: string;
const seen: Seen[] = [];
let replies: Reply[] = [];

/** Scripts the next answers; once they are used up the server answers `{}`. */
const answer = (...r: Reply[]): void => { replies = r; };
const json = (status: number, body: unknown): Reply => ({ status, body: JSON.stringify(body) });

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      const r = replies.shift() ?? { status: 200, body: '{}' };
      const reply = (): void => {
        if (res.destroyed) return;
        res.writeHead(r.status, r.statusMessage ?? '', { 'Content-Type': r.contentType ?? 'application/json', ...r.headers });
        res.end(r.body);
      };
      if (r.delayMs === undefined) reply();
      else setTimeout(reply, r.delayMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  seen.length = 0;
  replies = [];
});

const countUsers = readBatch().varAs('n', g().nWithLabel('User').count()).returning(['n']);

describe('Client over HTTP', () => {
  it('POSTs the batch body to /v2/query with only Content-Type by default', async () => {
    answer(json(200, { n: 3 }));
    const result = await new Client({ baseUrl }).query(countUsers);
    expect(result).toStrictEqual({ n: 3 });
    expect(seen).toHaveLength(1);
    const [req] = seen;
    expect(req!.method).toBe('POST');
    expect(req!.url).toBe('/v2/query');
    expect(req!.body).toBe(countUsers.toJSON());
    expect(req!.headers['content-type']).toBe('application/json');
    for (const h of ['authorization', 'x-svc-tenant-id', 'x-svc-warm', 'x-svc-require-writer', 'x-svc-await-durable']) {
      expect(req!.headers[h], h).toBeUndefined();
    }
  });

  it('accepts a request object or body text as well as a builder, and a trailing slash in baseUrl', async () => {
    const client = new Client({ baseUrl: `${baseUrl}/` });
    await client.query(countUsers.toRequest());
    await client.query(countUsers.toJSON());
    expect(seen.map((s) => s.url)).toEqual(['/v2/query', '/v2/query']);
    expect(seen.map((s) => s.body)).toEqual([countUsers.toJSON(), countUsers.toJSON()]);
  });

  it('sends the API key as a bearer token and the tenant header', async () => {
    await new Client({ baseUrl, apiKey: 'k-123', tenantId: 'db-7' }).query(countUsers);
    expect(seen[0]!.headers.authorization).toBe('Bearer k-123');
    expect(seen[0]!.headers['x-svc-tenant-id']).toBe('db-7');
  });

  it('sends the key raw under a configured header name; a per-query tenant overrides the client one', async () => {
    await new Client({ baseUrl, apiKey: 'raw-key', authHeader: 'X-Api-Key', authScheme: 'raw', tenantId: 'a' })
      .query(countUsers, { tenantId: 'b' });
    expect(seen[0]!.headers['x-api-key']).toBe('raw-key');
    expect(seen[0]!.headers.authorization).toBeUndefined();
    expect(seen[0]!.headers['x-svc-tenant-id']).toBe('b');
  });

  it('sends the execution headers only when asked', async () => {
    const client = new Client({ baseUrl });
    await client.query(countUsers, { warm: true, requireWriter: true });
    await client.query(writeBatch().run(g().addN('A')), { awaitDurable: true });
    await client.query(writeBatch().run(g().addN('A')), { awaitDurable: false, warm: false, requireWriter: false });
    expect(seen[0]!.headers['x-svc-warm']).toBe('true');
    expect(seen[0]!.headers['x-svc-require-writer']).toBe('true');
    expect(seen[0]!.headers['x-svc-await-durable']).toBeUndefined();
    expect(seen[1]!.headers['x-svc-await-durable']).toBe('true');
    expect(seen[2]!.headers['x-svc-await-durable']).toBe('false');
    expect(seen[2]!.headers['x-svc-warm']).toBeUndefined();
    expect(seen[2]!.headers['x-svc-require-writer']).toBeUndefined();
  });

  it('passes parameter values given as a query option, with bigint written exactly', async () => {
    const params = defineParams({ id: 'i64' });
    const b = readBatch(params).varAs('n', g().n(params.ref('id')).count()).returning(['n']);
    await new Client({ baseUrl }).query(b, { params: { id: 9223372036854775807n } });
    expect(seen[0]!.body).toContain('"parameters":{"id":9223372036854775807},"parameter_types":{"id":"i64"}');
  });

  it('parses integers beyond 2^53 as exact bigints and keeps other numbers as numbers', async () => {
    answer({ status: 200, body: '{"ids":[18446744073709551615,3],"big":-9223372036854775808,"f":2.0,"e":1e-7,"s":"x","__proto__":{"a":9007199254740993}}' });
    const r = await new Client({ baseUrl }).query<Record<string, unknown>>(countUsers);
    expect(r.ids).toStrictEqual([18446744073709551615n, 3]);
    expect(r.big).toBe(-9223372036854775808n);
    expect(r.f).toBe(2);
    expect(r.e).toBe(1e-7);
    expect(Object.getPrototypeOf(r)).toBe(Object.prototype);
    expect(Object.keys(r)).toContain('__proto__');
    expect((Object.getOwnPropertyDescriptor(r, '__proto__')!.value as { a: unknown }).a).toBe(9007199254740993n);
  });

  describe('errors (errors.md §2)', () => {
    const fail = async (reply: Reply): Promise<SvcClientError> => {
      answer(reply);
      const err = await new Client({ baseUrl }).query(countUsers).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(SvcClientError);
      return err as SvcClientError;
    };

    it('reads the current {error, msg} envelope', async () => {
      const e = await fail(json(400, { error: 'duplicate_order_key', msg: 'planner error: duplicate order key `rank`' }));
      expect([e.status, e.code, e.msg]).toEqual([400, 'duplicate_order_key', 'planner error: duplicate order key `rank`']);
      expect(e.details).toBeUndefined();
      expect(e.message).toContain('duplicate_order_key');
    });

    it('reads the legacy {error: message, code} envelope', async () => {
      const e = await fail(json(400, { error: 'planner error: duplicate order key `rank`', code: 'duplicate_order_key' }));
      expect([e.code, e.msg]).toEqual(['duplicate_order_key', 'planner error: duplicate order key `rank`']);
    });

    it('falls back to {code?, message | error} and keeps details', async () => {
      let e = await fail(json(429, { code: 'rate_limited', message: 'rate limit exceeded', details: { retry_after: 2 } }));
      expect([e.status, e.code, e.msg]).toEqual([429, 'rate_limited', 'rate limit exceeded']);
      expect(e.details).toStrictEqual({ retry_after: 2 });
      expect(e.isRateLimited).toBe(true);
      e = await fail(json(500, { error: 'something broke' }));
      expect([e.code, e.msg]).toEqual([undefined, 'something broke']);
      e = await fail(json(400, { error: 'x', msg: '', code: '' }));
      expect([e.code, e.msg]).toEqual([undefined, 'x']);
    });

    it('keeps codes it does not know', async () => {
      const e = await fail(json(500, { error: 'brand_new_code', msg: 'new' }));
      expect(e.code).toBe('brand_new_code');
    });

    it('surfaces a non-JSON body as the message, without a code', async () => {
      const e = await fail({ status: 502, body: '<html>Bad Gateway</html>', contentType: 'text/html' });
      expect([e.status, e.code, e.msg]).toEqual([502, undefined, '<html>Bad Gateway</html>']);
      expect(e.body).toBe('<html>Bad Gateway</html>');
    });

    it('uses the reason phrase, then `unknown error with code: <status>`, for an empty body', async () => {
      let e = await fail({ status: 503, body: '', statusMessage: 'Service Unavailable' });
      expect([e.code, e.msg]).toEqual([undefined, 'Service Unavailable']);
      e = await fail({ status: 599, body: '', statusMessage: '' });
      expect(e.msg).toBe('unknown error with code: 599');
    });

    it('treats only 200 as success (a 204 is an error)', async () => {
      const e = await fail({ status: 204, body: '' });
      expect(e.status).toBe(204);
    });

    it('reports an unreachable server with status 0', async () => {
      const dead = createServer();
      await new Promise<void>((resolve) => dead.listen(0, '127.0.0.1', resolve));
      const port = (dead.address() as AddressInfo).port;
      await new Promise<void>((resolve) => dead.close(() => resolve()));
      const err = await new Client({ baseUrl: `http://127.0.0.1:${port}` }).query(countUsers).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SvcClientError);
      expect((err as SvcClientError).status).toBe(0);
      expect((err as SvcClientError).msg).toContain(`cannot reach http://127.0.0.1:${port}/v2/query`);
    });
  });

  describe('retry on 409 and 503 server_overloaded (opt-in, bounded)', () => {
    const conflict = json(409, { error: 'transaction_conflict', msg: 'db error: transaction conflict' });
    const write = writeBatch().varAs('a', g().addN('A')).returning(['a']);

    it('does not retry unless asked', async () => {
      answer(conflict, json(200, { a: [] }));
      const e = await new Client({ baseUrl }).query(write).catch((x: unknown) => x);
      expect((e as SvcClientError).code).toBe('transaction_conflict');
      expect((e as SvcClientError).isConflict).toBe(true);
      expect(seen).toHaveLength(1);
    });

    it('retries a 409 until it succeeds, within the attempt budget', async () => {
      answer(conflict, conflict, json(200, { a: [{ $id: 1 }] }));
      const r = await new Client({ baseUrl }).query(write, { retry: { attempts: 3, baseDelayMs: 1 } });
      expect(r).toStrictEqual({ a: [{ $id: 1 }] });
      expect(seen).toHaveLength(3);
      expect(new Set(seen.map((s) => s.body)).size).toBe(1);
    });

    it('gives up after `attempts` tries and throws the last 409', async () => {
      answer(conflict, conflict, conflict, json(200, {}));
      const e = await new Client({ baseUrl, retry: { attempts: 2, baseDelayMs: 1 } }).query(write).catch((x: unknown) => x);
      expect((e as SvcClientError).status).toBe(409);
      expect(seen).toHaveLength(2);
    });

    it('never retries other statuses, and `retry: false` disables the client default', async () => {
      answer(json(500, { error: 'storage_error', msg: 'x' }), json(200, {}));
      const client = new Client({ baseUrl, retry: { attempts: 5, baseDelayMs: 1 } });
      await expect(client.query(write)).rejects.toMatchObject({ status: 500, code: 'storage_error' });
      expect(seen).toHaveLength(1);
      answer(conflict, json(200, {}));
      await expect(client.query(write, { retry: false })).rejects.toMatchObject({ status: 409 });
      expect(seen).toHaveLength(2);
      // A 409 that may have committed is never sent again (errors.md §7), nor the gateway's
      // answer to a write that ran.
      answer(json(409, { error: 'writer_fenced_commit_outcome_unknown', msg: 'writer fenced' }), json(200, {}));
      await expect(client.query(write)).rejects.toMatchObject({ status: 409, code: 'writer_fenced_commit_outcome_unknown' });
      expect(seen).toHaveLength(3);
      answer(json(502, { error: 'write_outcome_unknown', msg: 'x' }), json(200, {}));
      await expect(client.query(write)).rejects.toMatchObject({ status: 502 });
      expect(seen).toHaveLength(4);
    });

    it('takes Retry-After as an HTTP date too', async () => {
      const shed: Reply = { ...json(503, { error: 'server_overloaded', msg: 'shed' }), headers: { 'Retry-After': new Date(Date.now() + 1500).toUTCString() } };
      answer(shed, json(200, { a: [] }));
      const started = performance.now();
      await new Client({ baseUrl, retry: { attempts: 2, baseDelayMs: 1 } }).query(write);
      // An HTTP date has whole seconds: at least ~0.5 s of the 1.5 s is left.
      expect(performance.now() - started).toBeGreaterThanOrEqual(450);
      expect(seen).toHaveLength(2);
    });

    it('retries 503 server_overloaded (shed before running) after its Retry-After, but no other 503', async () => {
      const shed: Reply = { ...json(503, { error: 'server_overloaded', msg: 'server overloaded: the reader queue is full (4096 requests waiting); retry later' }), headers: { 'Retry-After': '1' } };
      answer(shed, json(200, { a: [{ $id: 2 }] }));
      const started = performance.now();
      const r = await new Client({ baseUrl, retry: { attempts: 3, baseDelayMs: 1 } }).query(write);
      expect(r).toStrictEqual({ a: [{ $id: 2 }] });
      expect(seen).toHaveLength(2);
      expect(performance.now() - started).toBeGreaterThanOrEqual(950); // waited for Retry-After: 1
      answer(json(503, { error: 'writer_mode_required', msg: 'writer mode required' }), json(200, {}));
      await expect(new Client({ baseUrl, retry: { attempts: 3, baseDelayMs: 1 } }).query(write)).rejects.toMatchObject({ status: 503 });
      expect(seen).toHaveLength(3);
    });

    it('backs off exponentially with jitter, capped', () => {
      const policy = { attempts: 10, baseDelayMs: 100, maxDelayMs: 1000 };
      expect(backoffDelayMs(1, policy, () => 0)).toBe(50);
      expect(backoffDelayMs(1, policy, () => 1)).toBe(100);
      expect(backoffDelayMs(3, policy, () => 1)).toBe(400);
      expect(backoffDelayMs(3, policy, () => 0)).toBe(200);
      expect(backoffDelayMs(9, policy, () => 1)).toBe(1000);
    });
  });
});

describe('Client failures say what they mean and show no secret', () => {
  const write = writeBatch().varAs('a', g().addN('A')).returning(['a']);

  it('a key a header cannot carry is refused before sending, without the key in the message', async () => {
    for (const apiKey of ['sk_live_SECRET\nabc', 'sk_live_SECRÉT\u20ac']) {
      const e = await new Client({ baseUrl, apiKey }).query(countUsers).catch((x: unknown) => x) as SvcClientError;
      expect(e).toBeInstanceOf(SvcClientError);
      expect(e.msg).toContain('the API key holds a character an HTTP header cannot carry');
      expect(`${e.message} ${e.msg} ${String(e.cause)}`).not.toContain('SECR');
    }
    expect(seen).toHaveLength(0);
  });

  it('a URL\'s credentials are not shown; a refused connection says nothing was sent', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const e = await new Client({ baseUrl: `http://user:s3cr3t@127.0.0.1:${port}`, fetch: (url, init) => fetch(url.replace('user:s3cr3t@', ''), init) })
      .query(countUsers).catch((x: unknown) => x) as SvcClientError;
    expect(e.status).toBe(0);
    expect(e.msg).toBe(`cannot reach http://***@127.0.0.1:${port}/v2/query (ECONNREFUSED): nothing was sent`);
  });

  it('an abort after the request was sent says a write may have been applied; a retry wait ends at the abort', async () => {
    answer({ ...json(200, { a: [] }), delayMs: 2_000 });
    const aborted = await new Client({ baseUrl }).query(write, { signal: AbortSignal.timeout(100) }).catch((x: unknown) => x) as SvcClientError;
    expect(aborted.status).toBe(0);
    expect(aborted.msg).toMatch(/was aborted \(TimeoutError\) before an answer: it may have reached the server, so a write may have been applied$/);
    expect(seen).toHaveLength(1);

    answer({ ...json(503, { error: 'server_overloaded', msg: 'shed' }), headers: { 'Retry-After': '5' } });
    const started = performance.now();
    const waiting = await new Client({ baseUrl }).query(write, { retry: { attempts: 3, baseDelayMs: 1 }, signal: AbortSignal.timeout(300) })
      .catch((x: unknown) => x) as SvcClientError;
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(waiting.msg).toBe('aborted while waiting to retry: the last attempt was answered and ran nothing');
    expect(seen).toHaveLength(2);
  });
});

describe('Client.embedded', () => {
  it('after close() refuses queries with database_closed, not a new empty database', async () => {
    const client = Client.embedded({ storage: 'memory' });
    await client.query(writeBatch().run(g().addN('A')));
    await client.close();
    await expect(client.query(countUsers)).rejects.toMatchObject({ code: 'database_closed' });
    await expect(client.query(writeBatch().run(g().addN('B')))).rejects.toMatchObject({ code: 'database_closed' });
  });

  it('runs a real write and read in process with the same query API', async () => {
    const client = Client.embedded({ storage: 'memory' });
    try {
      const written = await client.query(writeBatch()
        .varAs('oslo', g().addN('City', { name: 'Oslo', population: 709_000 }))
        .varAs('bergen', g().addN('City', { name: 'Bergen', population: 291_000 }))
        .varAs('road', g().nVar('oslo').addE('ROAD', 'bergen', { km: 463 }))
        .returning(['oslo', 'bergen', 'road']));
      expect(written).toStrictEqual({ oslo: [{ $id: 0 }], bergen: [{ $id: 1 }], road: [{ $id: 0 }] });

      const params = defineParams({ min: 'i64' });
      const read = await client.query(readBatch(params)
        .varAs('big', g().nWithLabel('City', P.gte('population', params.ref('min'))).orderBy('name').values(['name']))
        .varAs('reach', g().nWithLabel('City', P.eq('name', 'Oslo')).out('ROAD').values(['name']), Cond.varNotEmpty('big'))
        .varAs('cities', g().nWithLabel('City').count())
        .returning(['big', 'reach', 'cities'])
        .withParams({ min: 300_000 }));
      expect(read).toStrictEqual({ big: [{ name: 'Oslo' }], reach: [{ name: 'Bergen' }], cities: 2 });
    } finally {
      await client.close();
    }
  });

  it('surfaces server errors as SvcClientError with code and status', async () => {
    const client = Client.embedded();
    try {
      const e = await client.query(readBatch().varAs('x', g().n().orderByMultiple([['a', 'asc'], ['a', 'desc']])).returning(['x']))
        .catch((x: unknown) => x);
      expect(e).toBeInstanceOf(SvcClientError);
      expect((e as SvcClientError).status).toBe(400);
      expect((e as SvcClientError).code).toBe('duplicate_order_key');
      const unbound = await client.query(readBatch().varAs('x', g().n(param('ids')).count()).returning(['x'])).catch((x: unknown) => x);
      expect((unbound as SvcClientError).code).toBe('invalid_query');
    } finally {
      await client.close();
    }
  });

  it('refuses gateway options with invalid_request', async () => {
    const client = Client.embedded({ storage: 'memory' });
    try {
      for (const options of [{ warm: true }, { requireWriter: true }, { tenantId: 't' }]) {
        await expect(client.query(countUsers, options)).rejects.toMatchObject({ code: 'invalid_request', status: 400 });
      }
      await expect(client.query(writeBatch().run(g().addN('A')), { awaitDurable: true })).resolves.toStrictEqual({});
    } finally {
      await client.close();
    }
  });
});
