// The gateway's usage meter (src/gateway/usage.ts): requests count toward the UTC month
// they were admitted in, also when they are flushed, or a failed flush is retried, after
// the month ended (a probe had the last seconds of November billed to December).
import pino from 'pino';
import { afterEach, expect, it, vi } from 'vitest';
import type { Allowance, ControlPlane, DatabaseRoute, KeyGrant, UsageKind } from '../src/cloud/control-plane.js';
import { MonthClock, UsageMeter } from '../src/gateway/usage.js';

class RecordingControlPlane implements ControlPlane {
  readonly recorded: { workspaceId: string; kind: UsageKind; count: number; month: string | undefined }[] = [];
  failing = false;
  async grantForKeyHash(): Promise<KeyGrant | null> { return null; }
  async database(): Promise<DatabaseRoute | null> { return null; }
  async allowance(): Promise<Allowance> { return { readsAllowed: true, writesAllowed: true }; }
  async recordUsage(workspaceId: string, kind: UsageKind, count: number, month?: string): Promise<void> {
    if (this.failing) throw new Error('store unreachable');
    this.recorded.push({ workspaceId, kind, count, month });
  }
  async close(): Promise<void> {}
}

afterEach(() => { vi.useRealTimers(); });

it('counts requests toward the month they were admitted in, across a flush and a failed flush after the month ended', async () => {
  vi.useFakeTimers({ toFake: ['Date'] });
  const store = new RecordingControlPlane();
  const meter = new UsageMeter(store, 3_600_000, pino({ level: 'silent' }));
  try {
    vi.setSystemTime(new Date('2026-11-30T23:59:58Z'));
    for (let i = 0; i < 100; i++) meter.add('ws_a', 'read');
    meter.add('ws_a', 'write');
    vi.setSystemTime(new Date('2026-12-01T00:00:02Z'));
    for (let i = 0; i < 3; i++) meter.add('ws_a', 'read');
    await meter.flush();
    expect(store.recorded).toEqual(expect.arrayContaining([
      { workspaceId: 'ws_a', kind: 'read', count: 100, month: '2026-11' },
      { workspaceId: 'ws_a', kind: 'write', count: 1, month: '2026-11' },
      { workspaceId: 'ws_a', kind: 'read', count: 3, month: '2026-12' },
    ]));
    expect(store.recorded).toHaveLength(3);

    // A flush that fails keeps its counts with their month.
    store.recorded.length = 0;
    vi.setSystemTime(new Date('2026-12-31T23:59:59Z'));
    meter.add('ws_b', 'write');
    store.failing = true;
    await meter.flush();
    store.failing = false;
    vi.setSystemTime(new Date('2027-01-01T00:05:00Z'));
    meter.add('ws_b', 'write');
    await meter.flush();
    expect(store.recorded).toEqual(expect.arrayContaining([
      { workspaceId: 'ws_b', kind: 'write', count: 1, month: '2026-12' },
      { workspaceId: 'ws_b', kind: 'write', count: 1, month: '2027-01' },
    ]));
    expect(store.recorded).toHaveLength(2);
  } finally {
    await meter.close();
  }
});

it('MonthClock follows the clock across month ends, either way', () => {
  const clock = new MonthClock();
  expect(clock.now(Date.UTC(2026, 1, 28, 23, 59, 59, 999))).toBe('2026-02');
  expect(clock.now(Date.UTC(2026, 2, 1))).toBe('2026-03');
  expect(clock.now(Date.UTC(2026, 1, 15))).toBe('2026-02');
  expect(clock.now(Date.UTC(2027, 0, 1))).toBe('2027-01');
});
