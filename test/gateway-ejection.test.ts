// Reader ejection in the gateway's backend registry (src/gateway/backends.ts, docs/gateway.md
// "Ejection"): which answers count as server faults, and how many readers may be out at once.
// The whole path through a gateway is in test/gateway.test.ts.
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { BackendRegistry, serverFault } from '../src/gateway/backends.js';
import { limits } from '../src/limits.js';
import { monotonicMs } from '../src/clock.js';

const json = (o: unknown): Buffer => Buffer.from(JSON.stringify(o));
const FAULT = json({ error: 'internal_error', msg: 'x' });

describe('serverFault', () => {
  it('is a 5xx whose code says the server failed, or a 5xx that is no error envelope', () => {
    for (const code of ['internal_error', 'storage_error', 'database_closed']) expect(serverFault(500, json({ error: code, msg: '' }))).toBe(true);
    expect(serverFault(502, Buffer.from('<html>Bad Gateway</html>'))).toBe(true);
    expect(serverFault(500, json({ msg: 'no code' }))).toBe(true);
    // The query's own failures, deadlines and back-pressure are not the server's fault.
    for (const code of ['invalid_query', 'node_not_found', 'query_deadline_exceeded', 'unique_constraint_violation', 'response_serialization_error']) {
      expect(serverFault(500, json({ error: code, msg: '' })), code).toBe(false);
    }
    expect(serverFault(503, json({ error: 'server_overloaded', msg: '' }))).toBe(false);
    expect(serverFault(503, json({ error: 'writer_mode_required', msg: '' }))).toBe(false);
    // Below 500 nothing is parsed or counted.
    expect(serverFault(400, Buffer.from('not json'))).toBe(false);
    expect(serverFault(200, FAULT)).toBe(false);
  });
});

describe('BackendRegistry ejection', () => {
  let registry: BackendRegistry | null = null;
  afterEach(async () => { await registry?.close(); registry = null; });

  const make = (): BackendRegistry => new BackendRegistry({
    healthIntervalMs: 60_000, healthTimeoutMs: 100, connectionsPerBackend: 1, forgetAfterMs: 60_000, readerEjectionMs: 10_000,
    log: pino({ level: 'silent' }),
  });

  it('ejects a reader after the limit of faults in a row; a clean answer in between starts the count again', () => {
    registry = make();
    const urls = ['http://127.0.0.1:1', 'http://127.0.0.1:2'];
    const reader = registry.backend(urls[0]!);
    for (let i = 1; i < limits.gatewayReaderFaultsToEject; i++) expect(registry.noteAnswer(reader, 500, FAULT, urls)).toBe(true);
    expect(registry.noteAnswer(reader, 200, json({ n: 1 }), urls)).toBe(false);
    for (let i = 1; i < limits.gatewayReaderFaultsToEject; i++) registry.noteAnswer(reader, 500, FAULT, urls);
    expect(reader.ejected).toBe(false);
    const before = monotonicMs();
    registry.noteAnswer(reader, 500, FAULT, urls);
    expect(reader.ejected).toBe(true);
    expect(reader.ejectedUntilMs - before).toBeGreaterThanOrEqual(10_000);
    expect(reader.ejectedUntilMs - monotonicMs()).toBeLessThanOrEqual(10_000);
  });

  it('ejects at most half of a database\'s readers (at least one), and never a writer', () => {
    registry = make();
    const urls = ['http://127.0.0.1:1', 'http://127.0.0.1:2', 'http://127.0.0.1:3', 'http://127.0.0.1:4', 'http://127.0.0.1:5'];
    const readers = urls.map((u) => registry!.backend(u));
    for (const reader of readers) for (let i = 0; i < limits.gatewayReaderFaultsToEject; i++) registry.noteAnswer(reader, 500, FAULT, urls);
    expect(readers.map((r) => r.ejected)).toEqual([true, true, false, false, false]);

    const writer = registry.backend('http://127.0.0.1:6');
    for (let i = 0; i < 3 * limits.gatewayReaderFaultsToEject; i++) registry.noteAnswer(writer, 500, FAULT, null);
    expect(writer.ejected).toBe(false);

    const only = registry.backend('http://127.0.0.1:7');
    for (let i = 0; i < limits.gatewayReaderFaultsToEject; i++) registry.noteAnswer(only, 500, FAULT, [only.url]);
    expect(only.ejected).toBe(true);
  });
});
