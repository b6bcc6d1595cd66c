// Usage metering per workspace (SPEC "What the service does" 5: a plan's read and write
// allowances are shared by every database of the workspace). Admitted requests are counted
// in memory, per workspace and UTC month of admission, and sent to the control plane every
// `flushIntervalMs`, so the hot path does no store write. A failed flush keeps its counts
// for the next one; counts of a gateway that crashes between flushes are lost (at most one
// interval's worth), which undercounts, never double counts.
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
  /**
   * Counts by month, then workspace: counts held across a month's end go to the month they
   * were made in. (Two levels: a request looks up its workspace id as it is, no key built.)
   */
  private pending = new Map<string, Map<string, Counts>>();
  /** Workspaces with counts held, over every month. */
  private held = 0;
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
    const monthCounts = this.monthCounts(month);
    let counts = monthCounts.get(workspaceId);
    if (counts === undefined) {
      counts = { workspaceId, month, read: 0, write: 0 };
      monthCounts.set(workspaceId, counts);
      if (++this.held >= limits.gatewayUsageWorkspacesMax) void this.flush();
    }
    counts[kind]++;
  }

  private monthCounts(month: string): Map<string, Counts> {
    let counts = this.pending.get(month);
    if (counts === undefined) this.pending.set(month, counts = new Map());
    return counts;
  }

  /** Send every count held; resolves when sent (or failed and kept). */
  flush(): Promise<void> {
    if (this.flushing !== null) return this.flushing;
    this.flushing = this.send().finally(() => { this.flushing = null; });
    return this.flushing;
  }

  private async send(): Promise<void> {
    if (this.held === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    this.held = 0;
    for (const months of batch.values()) {
      for (const counts of months.values()) {
        const { workspaceId, month } = counts;
        for (const kind of ['read', 'write'] as const) {
          const count = counts[kind];
          if (count === 0) continue;
          try {
            await this.controlPlane.recordUsage(workspaceId, kind, count, month);
          } catch (err) {
            this.log.warn({ workspaceId, month, kind, count, err: (err as Error).message }, 'usage flush failed; kept for the next flush');
            const kept = this.monthCounts(month);
            let again = kept.get(workspaceId);
            if (again === undefined) {
              kept.set(workspaceId, again = { workspaceId, month, read: 0, write: 0 });
              this.held++;
            }
            again[kind] += count;
          }
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
