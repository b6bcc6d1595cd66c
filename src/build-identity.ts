// Which install of svcdb a thread runs. Threads started after the server (a reader thread
// replacing one that died, the snapshot thread on the first snapshot) load svcdb's code
// from disk again; if an upgrade replaced the installed files meanwhile, such a thread
// would run other code than the rest of the process, reading the shared store with another
// layout: a reader would answer wrongly and a snapshot thread could write a snapshot of
// garbage that then replaces the log. Each such thread compares this identity, taken when
// it loaded, with the one the server took at its start, and refuses to run on a mismatch.
import { statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The package.json of the install this module was loaded from (device, inode, size,
 * modification time, as this thread found it): an upgrade writes a new file. Sources and
 * their build in one checkout share it, as tests need.
 */
export const BUILD_IDENTITY: string = identityOfInstall();

function identityOfInstall(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    try {
      const stat = statSync(join(dir, 'package.json'));
      return `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeMs}`;
    } catch {
      if (dirname(dir) === dir) return 'no package.json';
    }
  }
}

/** Throws unless this thread loaded the install the server started with (`expected`). */
export function assertSameInstall(expected: string, thread: string): void {
  if (expected !== BUILD_IDENTITY) {
    throw new Error(`${thread}: svcdb's installed files changed since this server started (upgraded in place?), so this thread would run other code than the server: restart the server`);
  }
}
