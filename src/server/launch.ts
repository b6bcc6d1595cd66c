// How a server process is started: the node flags and the environment that size its
// memory. The `svc` launcher's #! line (src/cli/main.ts) carries the same (a test keeps
// the two equal), so `svc serve` has them; svc start and the cloud's process runtime
// spawn `node main.js serve`, which reads no #! line, so they pass them from here. A server
// started as a bare `node dist/src/cli/main.js serve` has neither (README, "Server").

/**
 * 1 MiB semi-spaces for the main (HTTP) thread: V8's young generation grows to 3 x 16 MiB
 * under load and its pages stay resident (~40 MiB more RSS after reads; worker threads get
 * the same through resourceLimits, limits.workerThreadYoungGenerationMb).
 */
export const serverNodeFlags: readonly string[] = ['--max-semi-space-size=1'];

/**
 * glibc malloc settings, which glibc reads once as the process starts. A fixed
 * MALLOC_MMAP_THRESHOLD_ maps blocks of 256 KiB and more on their own and unmaps them when
 * freed; glibc's default threshold follows the largest block freed (up to 32 MiB), so after
 * the first 1-3 MB load body was freed every later one came from the heap, which stayed
 * fragmented and resident after the load (~9 MiB, docs/benchmarks.md "malloc settings").
 * A variable the environment already sets is left as it is.
 */
export const serverMallocEnvironment: Readonly<Record<string, string>> = {
  MALLOC_MMAP_THRESHOLD_: '262144',
};

/** The #! line of the `svc` launcher these settings imply. */
export function launcherLine(): string {
  const assignments = Object.entries(serverMallocEnvironment).map(([name, value]) => `${name}=${value}`);
  return `#!/usr/bin/env -S ${[...assignments, 'node', ...serverNodeFlags].join(' ')}`;
}

/** The arguments (for process.execPath) and environment of `node <mainPath> serve ...args`. */
export function serverProcess(mainPath: string, args: readonly string[], env: NodeJS.ProcessEnv): { argv: string[]; env: NodeJS.ProcessEnv } {
  return { argv: [...serverNodeFlags, mainPath, ...args], env: { ...serverMallocEnvironment, ...env } };
}
