// For tests that simulate a writer process dying without close() inside the test process:
// the kernel would close the dead process's descriptors, which frees its writer lock.
import { closeSync, readdirSync, readlinkSync, realpathSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Close this process's descriptor that holds the writer lock of `dir` (Linux /proc), as the
 * kernel does when the holder dies. The writer object must be abandoned afterwards (never
 * closed): its lock descriptor number may be reused by another file.
 */
export function dropWriterLock(dir: string): void {
  const lockFile = realpathSync(join(dir, 'writer.lock'));
  const held = readdirSync('/proc/self/fd').filter((fd) => {
    try { return readlinkSync(`/proc/self/fd/${fd}`) === lockFile; } catch { return false; }
  });
  if (held.length !== 1) throw new Error(`expected one descriptor on ${lockFile}, found ${held.length}`);
  closeSync(Number(held[0]));
}
