// Polling until a condition holds, for tests that wait on other processes, threads or timers.

export interface EventuallyOptions {
  /** Give up after this long (10 s unless told). */
  readonly timeoutMs?: number;
  /** The pause between probes (25 ms unless told; probes of spawned processes take 100). */
  readonly intervalMs?: number;
}

/**
 * Call `probe` until it answers something other than false or null and return that answer
 * (`true` for a plain check); past the timeout, throw `timed out waiting until <what>`.
 * A probe that throws (a failed expect) fails at once.
 */
export async function eventually<T>(probe: () => T | Promise<T>, what: string, { timeoutMs = 10_000, intervalMs = 25 }: EventuallyOptions = {}): Promise<Exclude<T, false | null>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== false && value !== null) return value as Exclude<T, false | null>;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** For probes of spawned servers (a start or restart takes seconds): 30 s, every 100 ms. */
export const slowly: EventuallyOptions = { timeoutMs: 30_000, intervalMs: 100 };
