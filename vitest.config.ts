import { defineConfig } from 'vitest/config';

// Two projects: `unit` is pure logic (no cluster); `e2e` talks to the real test cluster
// (test/cluster) and runs files one at a time because they share one small node.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts', 'test/cluster/**/*.test.ts'],
          fileParallelism: false,
          testTimeout: 120_000,
          hookTimeout: 300_000,
        },
      },
    ],
  },
});
