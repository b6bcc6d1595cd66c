// The install identity late threads compare with the server's (src/build-identity.ts): the
// same while the install stays, another once an upgrade writes its package.json anew.
import { copyFileSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempDirs } from './helpers/temp-dirs.js';

const tempDir = tempDirs('install');

interface IdentityModule { BUILD_IDENTITY: string; assertSameInstall(expected: string, thread: string): void }

describe('install identity', () => {
  it('stays while the install stays, changes when an upgrade replaces package.json, and the check then refuses', async () => {
    // A copy of the built module in an install of its own: dist/src/ under a package.json.
    const root = tempDir();
    mkdirSync(join(root, 'dist', 'src'), { recursive: true });
    const module = join(root, 'dist', 'src', 'build-identity.js');
    for (const file of ['build-identity.js', 'build-identity.js.map']) copyFileSync(fileURLToPath(new URL(`../dist/src/${file}`, import.meta.url)), join(root, 'dist', 'src', file));
    writeFileSync(join(root, 'package.json'), '{"name":"svcdb","version":"1.0.0"}\n');
    // Each query string is a fresh instance of the module, as a thread started later loads it.
    const load = async (instance: number) => (await import(`${pathToFileURL(module).href}?${instance}`)) as IdentityModule;

    const atStart = (await load(1)).BUILD_IDENTITY;
    expect((await load(2)).BUILD_IDENTITY, 'the same install').toBe(atStart);
    (await load(3)).assertSameInstall(atStart, 'reader thread');

    // An upgrade writes the new package.json beside the old and renames it over.
    writeFileSync(join(root, 'package.json.new'), '{"name":"svcdb","version":"1.0.1"}\n');
    renameSync(join(root, 'package.json.new'), join(root, 'package.json'));
    const later = await load(4);
    expect(later.BUILD_IDENTITY).not.toBe(atStart);
    expect(() => later.assertSameInstall(atStart, 'snapshot thread')).toThrow(/^snapshot thread: svcdb's installed files changed since this server started/);
  });
});
