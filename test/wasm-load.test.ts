// The kernels' bytes are read with the JavaScript that calls them: a rebuild (or an upgrade
// in place) under a running server must not give an old thread the new module.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));

it('a module replaced on disk after the JavaScript loaded is not what the thread instantiates', () => {
  const copy = mkdtempSync(join(tmpdir(), 'svcdb-wasm-load-'));
  try {
    cpSync(join(root, 'dist'), join(copy, 'dist'), { recursive: true });
    cpSync(join(root, 'build'), join(copy, 'build'), { recursive: true });
    symlinkSync(join(root, 'node_modules'), join(copy, 'node_modules'));
    writeFileSync(join(copy, 'package.json'), '{"type":"module"}');
    const script = `
      const { instantiateKernels } = await import(${JSON.stringify(join(copy, 'dist/src/store/kernels.js'))});
      const { writeFileSync } = await import('node:fs');
      writeFileSync(${JSON.stringify(join(copy, 'build/kernels.wasm'))}, 'not a module');
      const memory = new WebAssembly.Memory({ initial: 1, maximum: 16, shared: true });
      const kernels = instantiateKernels(memory);
      console.log(typeof kernels.expandRows, kernels.expandRows.length);
    `;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(out.trim()).toBe('function 9');
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
});
