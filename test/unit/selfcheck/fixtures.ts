// A canary report as a healthy cluster produces it, and a way to vary one field per test row.
import type { CanaryReport } from '../../../src/selfcheck/report.js';
import type { Expectations } from '../../../src/selfcheck/evaluate.js';

export function goodReport(over: Partial<CanaryReport> = {}): CanaryReport {
  return {
    v: 1,
    uid: 65534,
    pids_max: { path: '/sys/fs/cgroup/pids/pids.max', value: '128' },
    memory_limit: { path: '/sys/fs/cgroup/memory/memory.limit_in_bytes', value: String(512 * 1024 * 1024) },
    fork_probe: { attempted: 128, failed_after: 124, error: 'EAGAIN' },
    root: { '/': { readonly_mount: true, write: 'EROFS' }, '/usr': { readonly_mount: true, write: 'EROFS' } },
    service_account_token: false,
    network: [
      { name: 'api_server', address: '10.0.0.1:443', proto: 'tls', outcome: 'no_reply', detail: 'timeout' },
      { name: 'pod_ip', address: '10.88.0.9:8080', proto: 'echo', outcome: 'no_reply', detail: 'timeout' },
      { name: 'metadata', address: '169.254.169.254:80', proto: 'http', outcome: 'no_reply', detail: 'timeout' },
      { name: 'dns', address: '10.0.0.10:53', proto: 'dns', outcome: 'no_reply', detail: 'timeout' },
    ],
    ...over,
  };
}

export const outsideCluster: Expectations = {
  maxProcesses: 128,
  memoryLimitBytes: 512 * 1024 * 1024,
  control: { reached: true, via: 'the operator' },
  gatewaySkipped: 'the gateway runs outside the cluster',
};
