// Temporary directories of one test file, removed after each test.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';

/** A maker of fresh `svcdb-<label>-*` directories; call it at the top of a test file. */
export function tempDirs(label: string): () => string {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  return () => {
    const dir = mkdtempSync(join(tmpdir(), `svcdb-${label}-`));
    dirs.push(dir);
    return dir;
  };
}
