import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Tests that bound latency under load (an answer within the deadline + a slack): run after
 * every other file, alone, so the load they measure is their own and not the rest of the
 * suite's on the same cores (docs/architecture.md §7).
 */
const TIMED_ALONE = ['test/torture-queries-smoke.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // One file at a time, on every machine: what vitest picks on the 2-core machines this is
    // built on (cores - 1), stated so a machine with more cores, or a container whose CPU
    // quota is below the cores it sees, does not run files beside each other and eat the
    // margins of the tests that bound a latency. The suite takes ~8 minutes so.
    maxWorkers: 1,
    projects: [
      { extends: true, test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...TIMED_ALONE], sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: 'timed alone', include: TIMED_ALONE, sequence: { groupOrder: 1 } } },
    ],
  },
});
