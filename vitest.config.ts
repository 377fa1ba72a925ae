import { defineConfig } from 'vitest/config';
import { CLUSTER_KUBECONFIG } from './scripts/cluster-paths.js';

// e2e tests talk to the local test cluster unless KUBECONFIG points elsewhere.
const kubeconfig = process.env.KUBECONFIG ?? CLUSTER_KUBECONFIG;

// Projects: `unit` is pure logic (no cluster); `integration` drives the controllers' reconcile
// against the real API server (API objects only, no pod ever runs: files may run side by side);
// `e2e` talks to the real test cluster (test/cluster) and runs files one at a time because they
// share one small node; `faults-cluster` and `cluster-lifecycle` disrupt the cluster itself and run
// last.
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
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          env: { KUBECONFIG: kubeconfig },
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts', 'test/cluster/cluster.test.ts'],
          fileParallelism: false,
          env: { KUBECONFIG: kubeconfig },
          // Memory tests compare the heap after a full collection.
          execArgv: ['--expose-gc'],
          testTimeout: 120_000,
          hookTimeout: 300_000,
        },
      },
      {
        // Faults that disrupt the whole cluster (API server and kubelet restarts): after the e2e
        // phase, one file at a time, since every other suite would see the outage.
        test: {
          name: 'faults-cluster',
          include: ['test/faults/**/*.test.ts'],
          fileParallelism: false,
          env: { KUBECONFIG: kubeconfig },
          testTimeout: 480_000,
          hookTimeout: 300_000,
        },
      },
      {
        test: {
          name: 'cluster-lifecycle',
          include: ['test/cluster/lifecycle.test.ts'],
          fileParallelism: false,
          env: { KUBECONFIG: kubeconfig },
          testTimeout: 300_000,
          hookTimeout: 300_000,
        },
      },
    ],
  },
});
