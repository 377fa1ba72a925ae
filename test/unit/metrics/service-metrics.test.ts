// The dashboard's metrics (issue 10): closed-set series exist from the start, gauges of cached
// state are read at scrape time, and nothing insane (NaN, negative) reaches a histogram.
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../../src/metrics/registry.js';
import { countPhases } from '../../../src/metrics/service-metrics.js';

describe('countPhases', () => {
  it.each([
    [[], { Pending: 0, Ready: 0, Lost: 0, Failed: 0 }],
    [['Ready', 'Ready', undefined, 'Lost'], { Pending: 1, Ready: 2, Lost: 1, Failed: 0 }],
    // A phase outside the API's enum (a newer version's) is not made a label value.
    [['Failed', 'Exploded'], { Pending: 0, Ready: 0, Lost: 0, Failed: 1 }],
  ])('%j → %j', (phases, expected) => {
    expect(countPhases(phases)).toEqual(expected);
  });
});

describe('service metrics', () => {
  it('has the closed sets at 0 before anything happened', async () => {
    const text = await createMetrics().registry.metrics();
    for (const line of [
      'codemode_admission_rejections_total{limit="sessions"} 0',
      'codemode_sessions_collected_total{cause="idle"} 0',
      'codemode_warm_pool_claims_total{result="empty"} 0',
      'codemode_package_installs_total{ecosystem="npm",outcome="refused"} 0',
      'codemode_admission_queue_wait_seconds_count{result="cancelled"} 0',
      'codemode_session_wait_seconds_count{result="full"} 0',
      'codemode_session_calls_total{runtime="python",phase="Succeeded",reason="Succeeded"} 0',
      'codemode_kernel_stream_breaks_total{path="run",outcome="recalled"} 0',
      'codemode_kernel_stream_breaks_total{path="session",outcome="unknown"} 0',
      'codemode_gateway_replicas_gone_total{how="released"} 0',
      'codemode_gateway_replicas_gone_total{how="expired"} 0',
      // The first dropped audit record, restored policy or failed self-check is an increase.
      'codemode_audit_records_total{result="dropped"} 0',
      'codemode_audit_records_total{result="written"} 0',
      'codemode_network_policy_restores_total{cause="deleted"} 0',
      'codemode_network_policy_restores_total{cause="modified"} 0',
      'codemode_sandbox_check_runs_total{result="failed"} 0',
      'codemode_sandbox_check_runs_total{result="completed"} 0',
      // A backup until it leads: CodemodeNoLeader sees replicas none of which ever led.
      'leader_election_master_status{name="codemode-operator-leader"} 0',
    ]) {
      expect(text).toContain(line);
    }
  });

  it('records pod starts, queue and session waits, outputs, session calls and broken kernel streams with closed labels', async () => {
    const m = createMetrics();
    m.podStarted('warm', 0.04);
    m.podStarted('cold', 1.5);
    m.podStarted('cold', Number.NaN);
    m.queueWait('admitted', 0);
    m.sessionWait('ran', 0.3);
    m.sessionWait('deadline', -1);
    m.output(100, 0);
    m.output(-1, 2_000_000);
    m.output(Number.MAX_SAFE_INTEGER, 0); // a forged kernel count is summed as 4 GiB at most
    m.sessionCall('bash', 'Failed', 'Exception', 0.2);
    m.streamBroke('session', 'recalled');
    m.streamBroke('session', 'recalled');
    m.streamBroke('run', 'unknown');
    m.runs.runFinished('Succeeded', 'Succeeded', 'python', 0.3, 'warm');
    m.runs.runFinished('Failed', 'InvalidSpec', 'python', 0); // never ran: not a latency
    const text = await m.registry.metrics();
    expect(text).toContain('codemode_pod_start_seconds_count{start="warm"} 1');
    expect(text).toContain('codemode_pod_start_seconds_count{start="cold"} 1');
    expect(text).toContain('codemode_admission_queue_wait_seconds_bucket{le="0.001",result="admitted"} 1');
    expect(text).toContain('codemode_session_wait_seconds_bucket{le="0.5",result="ran"} 1');
    expect(text).toContain('codemode_session_wait_seconds_count{result="deadline"} 0');
    expect(text).toContain('codemode_output_bytes_count{stream="stdout"} 2');
    expect(text).toContain(`codemode_output_bytes_sum{stream="stdout"} ${100 + 4 * 1024 ** 3}`);
    expect(text).toContain('codemode_output_bytes_count{stream="stderr"} 3');
    expect(text).toContain('codemode_session_calls_total{runtime="bash",phase="Failed",reason="Exception"} 1');
    expect(text).toContain('codemode_kernel_stream_breaks_total{path="session",outcome="recalled"} 2');
    expect(text).toContain('codemode_kernel_stream_breaks_total{path="run",outcome="unknown"} 1');
    expect(text).toContain('codemode_kernel_stream_breaks_total{path="run",outcome="recalled"} 0');
    expect(text).toContain('codemode_session_call_duration_seconds_count{runtime="bash"} 1');
    expect(text).toContain('codemode_run_duration_seconds_count{runtime="python",phase="Succeeded",start="warm"} 1');
    expect(text).not.toContain('phase="Failed",start=');
  });

  it('reads the pool and the sessions from the caches when scraped', async () => {
    const m = createMetrics();
    let ready = 2;
    m.watchPool(() => ready);
    m.watchSessions(() => ['Ready', 'Pending', undefined]);
    expect(await m.registry.metrics()).toContain('codemode_warm_pool_ready_pods 2');
    ready = 0;
    const text = await m.registry.metrics();
    expect(text).toContain('codemode_warm_pool_ready_pods 0');
    expect(text).toContain('codemode_sessions{phase="Pending"} 2');
    expect(text).toContain('codemode_sessions{phase="Ready"} 1');
    expect(text).toContain('codemode_sessions{phase="Lost"} 0');
  });

  it('creates the reconcile error series of a controller at its first reconcile', async () => {
    const m = createMetrics();
    expect(await m.registry.metrics()).not.toContain('controller_runtime_reconcile_errors_total{controller="sandboxrun"}');
    m.reconcile('sandboxrun', 'success', 0.01);
    expect(await m.registry.metrics()).toContain('controller_runtime_reconcile_errors_total{controller="sandboxrun"} 0');
  });

  it('counts replicas alive and gone, and the runs a gone executor left under how they ended here', async () => {
    const m = createMetrics();
    m.replicasAlive(3);
    m.replicaGone('expired');
    m.replicaGone('released');
    m.replicaGone('released');
    m.orphanEnded('Failed', 'ExecFailed', 'bash');
    m.orphanEnded('Succeeded', 'Succeeded', 'python');
    const text = await m.registry.metrics();
    expect(text).toContain('codemode_gateway_replicas 3');
    expect(text).toContain('codemode_gateway_replicas_gone_total{how="expired"} 1');
    expect(text).toContain('codemode_gateway_replicas_gone_total{how="released"} 2');
    expect(text).toContain('codemode_runs_total{phase="Failed",reason="ExecFailed",runtime="bash"} 1');
    expect(text).toContain('codemode_runs_total{phase="Succeeded",reason="Succeeded",runtime="python"} 1');
  });
});
