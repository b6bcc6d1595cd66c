// Usage metering per workspace (SPEC "What the service does" 5: a plan's read and write
// allowances are shared by every database of the workspace). Admitted requests are counted
// in memory, per workspace and UTC month of admission, and sent to the control plane every
// `flushIntervalMs`, so the hot path does no store write. A failed flush keeps its counts for the next one; counts of a gateway that
// crashes between flushes are lost (at most one interval's worth), which undercounts, never
// double counts.
import type { Logger } from 'pino';
import type { ControlPlane, UsageKind } from '../cloud/control-plane.js';
import { limits } from '../limits.js';
import { monthOf } from '../cloud/plans.js';

interface Counts {
  readonly workspaceId: string;
  /** The UTC month (`YYYY-MM`) the requests were admitted in: what they count toward. */
  readonly month: string;
  read: number;
  write: number;
}

/** The current UTC month, recomputed only when the clock leaves the month (either way). */
export class MonthClock {
  private month = '';
  private startsAtMs = 0;
  private endsAtMs = 0;

  now(ms: number = Date.now()): string {
    if (ms >= this.endsAtMs || ms < this.startsAtMs) {
      const at = new Date(ms);
      this.month = monthOf(at);
      this.startsAtMs = Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1);
      this.endsAtMs = Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1);
    }
    return this.month;
  }
}

export class UsageMeter {
  /** Keyed by month and workspace: counts held across a month's end go to the month they were made in. */
  private pending = new Map<string, Counts>();
  private readonly clock = new MonthClock();
  private readonly controlPlane: ControlPlane;
  private readonly log: Logger;
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> | null = null;

  constructor(controlPlane: ControlPlane, flushIntervalMs: number, log: Logger) {
    this.controlPlane = controlPlane;
    this.log = log;
    this.timer = setInterval(() => { void this.flush(); }, flushIntervalMs);
    this.timer.unref();
  }

  add(workspaceId: string, kind: UsageKind): void {
    const month = this.clock.now();
    const key = `${month} ${workspaceId}`;
    let counts = this.pending.get(key);
    if (counts === undefined) {
      counts = { workspaceId, month, read: 0, write: 0 };
      this.pending.set(key, counts);
      if (this.pending.size >= limits.gatewayUsageWorkspacesMax) void this.flush();
    }
    counts[kind]++;
  }

  /** Send every count held; resolves when sent (or failed and kept). */
  flush(): Promise<void> {
    if (this.flushing !== null) return this.flushing;
    this.flushing = this.send().finally(() => { this.flushing = null; });
    return this.flushing;
  }

  private async send(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    for (const [key, counts] of batch) {
      const { workspaceId, month } = counts;
      for (const kind of ['read', 'write'] as const) {
        const count = counts[kind];
        if (count === 0) continue;
        try {
          await this.controlPlane.recordUsage(workspaceId, kind, count, month);
        } catch (err) {
          this.log.warn({ workspaceId, month, kind, count, err: (err as Error).message }, 'usage flush failed; kept for the next flush');
          let kept = this.pending.get(key);
          if (kept === undefined) this.pending.set(key, kept = { workspaceId, month, read: 0, write: 0 });
          kept[kind] += count;
        }
      }
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
    if (this.flushing !== null) await this.flushing;
    await this.flush(); // what arrived while the last flush ran
  }
}
