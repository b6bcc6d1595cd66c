// One timer armed for the earliest moment asked of it: the deadline watches of the reader
// pool and of the writer thread (reader-pool.ts, writer.ts) each keep one, however many
// requests they watch. Unref'd: a watch never keeps the process alive.

export class DeadlineTimer {
  private timer: NodeJS.Timeout | null = null;
  private atMs = Number.POSITIVE_INFINITY;
  private closed = false;

  /** `fire` runs at the armed moment; it arms the timer again for whatever is next. */
  constructor(private readonly fire: () => void) {}

  /** Make sure `fire` runs by `atMs` (a Date.now() value; Infinity: nothing to do). */
  armBy(atMs: number): void {
    if (atMs >= this.atMs || this.closed) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.atMs = atMs;
    this.timer = setTimeout(this.run, Math.max(1, atMs - Date.now()));
    this.timer.unref();
  }

  close(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private readonly run = (): void => {
    this.timer = null;
    this.atMs = Number.POSITIVE_INFINITY;
    this.fire();
  };
}
