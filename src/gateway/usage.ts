// Usage metering per workspace (SPEC "What the service does" 5: a plan's read and write
// allowances are shared by every database of the workspace). Admitted requests are counted
// in memory and sent to the control plane every `flushIntervalMs`, so the hot path does no
// store write. A failed flush keeps its counts for the next one; counts of a gateway that
// crashes between flushes are lost (at most one interval's worth), which undercounts, never
// double counts.
import type { Logger } from 'pino';
import type { ControlPlane, UsageKind } from '../cloud/control-plane.js';
import { limits } from '../limits.js';

interface Counts {
  read: number;
  write: number;
}

export class UsageMeter {
  private pending = new Map<string, Counts>();
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
    let counts = this.pending.get(workspaceId);
    if (counts === undefined) {
      counts = { read: 0, write: 0 };
      this.pending.set(workspaceId, counts);
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
    for (const [workspaceId, counts] of batch) {
      for (const kind of ['read', 'write'] as const) {
        const count = counts[kind];
        if (count === 0) continue;
        try {
          await this.controlPlane.recordUsage(workspaceId, kind, count);
        } catch (err) {
          this.log.warn({ workspaceId, kind, count, err: (err as Error).message }, 'usage flush failed; kept for the next flush');
          const kept = this.pending.get(workspaceId) ?? { read: 0, write: 0 };
          kept[kind] += count;
          this.pending.set(workspaceId, kept);
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
