// The settings a server process starts with (src/server/launch.ts) are the ones of the `svc`
// launcher's #! line and of `npm start`: three places the shell and the kernel read, kept
// equal here. That svc start and the cloud's process runtime pass them is asserted on the
// processes they start (test/cli.test.ts, test/cloud-provision.test.ts).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { launcherLine, serverMallocEnvironment, serverNodeFlags, serverProcess } from '../src/server/launch.js';

const repo = new URL('../', import.meta.url);

describe('server launch settings', () => {
  it('the svc launcher line is the one launch.ts implies, in the source and in the build', () => {
    expect(readFileSync(new URL('src/cli/main.ts', repo), 'utf8').split('\n', 1)[0]).toBe(launcherLine());
    expect(readFileSync(new URL('dist/src/cli/main.js', repo), 'utf8').split('\n', 1)[0]).toBe(launcherLine());
    expect(launcherLine()).toMatch(/^#!\/usr\/bin\/env -S MALLOC_MMAP_THRESHOLD_=262144 node --max-semi-space-size=1$/);
    // Linux reads at most 255 bytes of a #! line (BINPRM_BUF_SIZE 256 since 5.1; 127 before).
    expect(launcherLine().length).toBeLessThan(128);
  });

  it('npm start runs the server with the same environment and flags', () => {
    const start = (JSON.parse(readFileSync(new URL('package.json', repo), 'utf8')) as { scripts: Record<string, string> }).scripts['start']!;
    const assignments = Object.entries(serverMallocEnvironment).map(([name, value]) => `${name}=${value}`);
    expect(start).toContain(`${[...assignments, 'node', ...serverNodeFlags].join(' ')} dist/src/cli/main.js serve`);
  });

  it('serverProcess puts the flags before the script and keeps a glibc setting the environment already has', () => {
    const { argv, env } = serverProcess('/x/main.js', ['serve', '--port', '1'], { MALLOC_MMAP_THRESHOLD_: '1048576', PATH: '/bin' });
    expect(argv).toEqual([...serverNodeFlags, '/x/main.js', 'serve', '--port', '1']);
    expect(env).toEqual({ MALLOC_MMAP_THRESHOLD_: '1048576', PATH: '/bin' });
  });
});
