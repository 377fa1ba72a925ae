// Fault (f): the kubelet restarted during the mix (see cluster-fault.ts). Exec streams and pod
// status go through it; containers keep running.
import { describe, it } from 'vitest';
import { clusterFaultScenario } from './cluster-fault.js';

describe('fault: kubelet restarted', () => {
  it('runs no code twice, leaves no run open, fails runs with reasons, keeps session state', { timeout: 480_000 }, () => clusterFaultScenario('kubelet'));
});
