// The per-UpstreamServer gauges go with the server: a call to a deleted server that ends after the
// deletion does not bring its series back (on the real prom-client registry).
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../../src/metrics/registry.js';
import { CallGate } from '../../../src/upstreams/call-gate.js';

async function seriesOf(m: ReturnType<typeof createMetrics>, server: string): Promise<string[]> {
  return (await m.registry.metrics()).split('\n').filter((l) => l.includes(`server="${server}"`));
}

describe('upstream gauges', () => {
  it('are set while the server exists', async () => {
    const m = createMetrics();
    const gate = new CallGate({ perServer: 4, perUser: 2 }, m.upstreamCalls);
    m.upstreamReady('github', true);
    const release = gate.tryAcquire('github', 'alice');
    expect(await seriesOf(m, 'github')).toEqual([
      'codemode_upstream_ready{server="github"} 1',
      'codemode_upstream_calls_in_flight{server="github"} 1',
      'codemode_upstream_calls_waiting{server="github"} 0',
    ]);
    release?.();
    expect(await seriesOf(m, 'github')).toContain('codemode_upstream_calls_in_flight{server="github"} 0');
  });

  it('stay gone after the server was deleted, when its calls in flight and waiting end', async () => {
    const m = createMetrics();
    const gate = new CallGate({ perServer: 4, perUser: 1 }, m.upstreamCalls);
    m.upstreamReady('github', true);
    const release = gate.tryAcquire('github', 'alice');
    const waiting = gate.acquire('github', 'alice');
    // The UpstreamServer is deleted (the watcher's forget) while one call runs and one waits.
    m.upstreamReady('github', undefined);
    expect(await seriesOf(m, 'github')).toEqual([]);
    release?.();
    (await waiting)();
    expect(await seriesOf(m, 'github')).toEqual([]);
    // Made again under the same name: its series come back.
    m.upstreamReady('github', false);
    gate.tryAcquire('github', 'bob')?.();
    expect(await seriesOf(m, 'github')).toEqual([
      'codemode_upstream_ready{server="github"} 0',
      'codemode_upstream_calls_in_flight{server="github"} 0',
      'codemode_upstream_calls_waiting{server="github"} 0',
    ]);
  });
});
