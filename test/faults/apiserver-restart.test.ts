// Fault (e): kube-apiserver restarted during the mix (see cluster-fault.ts).
import { describe, it } from 'vitest';
import { clusterFaultScenario } from './cluster-fault.js';

describe('fault: kube-apiserver restarted', () => {
  it('runs no code twice, leaves no run open, fails runs with reasons, keeps session state', { timeout: 480_000 }, () =>
    clusterFaultScenario('kube-apiserver'),
  );
});
