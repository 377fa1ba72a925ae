// The admission metrics on the private registry: closed-set labels, gauges of this replica's slots.
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../../src/metrics/registry.js';
import { ADMISSION_LIMITS } from '../../../src/limits/admission.js';

describe('admission metrics', () => {
  it('counts rejections by limit and shows the run slots in use and waiting', async () => {
    const m = createMetrics();
    for (const limit of ADMISSION_LIMITS) m.admissionRejected(limit);
    m.admissionRejected('replica_runs');
    m.admissionLoad({ replicaActive: 8, namespaceActive: 9, waiting: 3 });
    const text = await m.registry.metrics();
    expect(text).toContain('codemode_admission_rejections_total{limit="replica_runs"} 2');
    for (const limit of ['namespace_runs', 'sessions', 'batch_size']) expect(text).toContain(`codemode_admission_rejections_total{limit="${limit}"} 1`);
    expect(text).toContain('codemode_admission_runs_executing 8');
    expect(text).toContain('codemode_admission_runs_waiting 3');
  });
});
