import { describe, expect, it } from 'vitest';
import {
  SANDBOX_CHECKS,
  decide,
  evaluateReport,
  refusalText,
  type CheckResult,
  type Expectations,
  type SandboxCheckName,
} from '../../../src/selfcheck/evaluate.js';
import type { CanaryReport } from '../../../src/selfcheck/report.js';
import { goodReport, outsideCluster } from './fixtures.js';

function verdictOf(report: CanaryReport, exp: Expectations = outsideCluster): Record<string, boolean> {
  return Object.fromEntries(evaluateReport(report, exp).map((r) => [r.check, r.enforced]));
}

const allEnforced = Object.fromEntries(SANDBOX_CHECKS.map((c) => [c, true]));
const base = goodReport();
const reply = (name: 'api_server' | 'pod_ip' | 'metadata' | 'dns') =>
  base.network.map((p) => (p.name === name ? { ...p, outcome: 'reply' as const, detail: 'answered' } : p));

describe('evaluateReport', () => {
  it('finds everything enforced in a healthy report', () => {
    expect(verdictOf(base)).toEqual(allEnforced);
  });

  it.each<[string, Partial<CanaryReport>, Partial<Expectations>, SandboxCheckName]>([
    [
      'pids.max unlimited and 128 forks succeeded',
      { pids_max: { path: 'p', value: 'max' }, fork_probe: { attempted: 128, failed_after: null, error: null } },
      {},
      'process_limit',
    ],
    [
      'pids.max above the cap and no fork failed',
      { pids_max: { path: 'p', value: '4096' }, fork_probe: { attempted: 128, failed_after: null, error: null } },
      {},
      'process_limit',
    ],
    [
      'fork() failed for another reason than the pids controller',
      { pids_max: { path: 'p', value: 'max' }, fork_probe: { attempted: 128, failed_after: 30, error: 'ENOMEM' } },
      {},
      'process_limit',
    ],
    ['no pids file and no fork failed', { pids_max: null, fork_probe: { attempted: 128, failed_after: null, error: null } }, {}, 'process_limit'],
    ['memory unlimited (cgroup v1)', { memory_limit: { path: 'p', value: '9223372036854771712' } }, {}, 'memory_limit'],
    ['memory unlimited (cgroup v2)', { memory_limit: { path: 'p', value: 'max' } }, {}, 'memory_limit'],
    ['memory above the canary limit', { memory_limit: { path: 'p', value: String(1024 ** 3) } }, {}, 'memory_limit'],
    [
      'a writable root mount',
      { root: { '/': { readonly_mount: false, write: 'EACCES' }, '/usr': { readonly_mount: true, write: 'EROFS' } } },
      {},
      'readonly_root',
    ],
    [
      'a write to /usr that succeeded',
      { root: { '/': { readonly_mount: true, write: 'EROFS' }, '/usr': { readonly_mount: true, write: 'written' } } },
      {},
      'readonly_root',
    ],
    [
      'an unknown mount flag',
      { root: { '/': { readonly_mount: null, write: 'EROFS' }, '/usr': { readonly_mount: true, write: 'EROFS' } } },
      {},
      'readonly_root',
    ],
    ['a mounted token', { service_account_token: true }, {}, 'no_service_account_token'],
    ['the API server answered', { network: reply('api_server') }, {}, 'network'],
    ['the echo pod answered', { network: reply('pod_ip') }, {}, 'network'],
    ['the metadata endpoint answered', { network: reply('metadata') }, {}, 'network'],
    ['DNS answered', { network: reply('dns') }, {}, 'network'],
    ['no API server result', { network: base.network.filter((p) => p.name !== 'api_server') }, {}, 'network'],
    ['no pod IP result', { network: base.network.filter((p) => p.name !== 'pod_ip') }, {}, 'network'],
    ['silence from a listener nobody reaches', {}, { control: { reached: false, via: 'nobody' } }, 'network'],
  ])('%s → only %s is not enforced', (_name, over, exp, failing) => {
    expect(verdictOf(goodReport(over), { ...outsideCluster, ...exp })).toEqual({ ...allEnforced, [failing]: false });
  });

  it.each<[string, Partial<CanaryReport>]>([
    ['pids.max reads max but fork() fails below the cap (pod-level limit)', { pids_max: { path: 'p', value: 'max' } }],
    ['a pids.max below the cap', { pids_max: { path: 'p', value: '64' }, fork_probe: { attempted: 128, failed_after: 60, error: 'EAGAIN' } }],
    ['no nameserver at all (dns is skipped, stated)', { network: base.network.filter((p) => p.name !== 'dns') }],
  ])('%s → all enforced', (_name, over) => {
    expect(verdictOf(goodReport(over))).toEqual(allEnforced);
  });

  it('states skipped targets and the control in the network detail', () => {
    const net = evaluateReport(goodReport({ network: base.network.filter((p) => p.name !== 'dns') }), outsideCluster).find((r) => r.check === 'network');
    expect(net?.detail).toContain('dns skipped');
    expect(net?.detail).toContain('gateway skipped: the gateway runs outside the cluster');
    expect(net?.detail).toContain('the echo listener answered the operator');
  });

  it('needs the gateway to answer the operator before its silence counts', () => {
    const gw = { name: 'gateway' as const, address: '10.88.0.2:8080', proto: 'http' as const, outcome: 'no_reply' as const, detail: 'timeout' };
    const inCluster: Expectations = {
      maxProcesses: 128,
      memoryLimitBytes: 512 * 1024 * 1024,
      control: { reached: true, via: 'the operator' },
      gatewayAnswered: true,
    };
    const report = goodReport({ network: [...base.network, gw] });
    expect(verdictOf(report, inCluster).network).toBe(true);
    expect(verdictOf(report, { ...inCluster, gatewayAnswered: false }).network).toBe(false);
    // In a cluster, a report without the gateway probe proves nothing about it.
    expect(verdictOf(goodReport(), inCluster).network).toBe(false);
  });
});

const result = (check: SandboxCheckName, enforced: boolean): CheckResult => ({ check, enforced, detail: '' });
const only = (failing: SandboxCheckName[]): CheckResult[] => SANDBOX_CHECKS.map((c) => result(c, !failing.includes(c)));

describe('decide', () => {
  it.each<[string, SandboxCheckName[], SandboxCheckName[], boolean, SandboxCheckName[], SandboxCheckName[], RegExp]>([
    ['all enforced', [], [], true, [], [], /^Sandbox check passed/],
    ['all enforced, a risk accepted anyway', [], ['network'], true, [], [], /^Sandbox check passed/],
    ['network missing', ['network'], [], false, ['network'], [], /FAILED: not enforced: network\. .*CODEMODE_ACCEPT_UNENFORCED=network/],
    [
      'network missing and accepted',
      ['network'],
      ['network'],
      true,
      [],
      ['network'],
      /^WARNING: this cluster does not enforce network isolation for sandboxes; code runs anyway because CODEMODE_ACCEPT_UNENFORCED=network/,
    ],
    [
      'two missing, one accepted',
      ['network', 'process_limit'],
      ['network'],
      false,
      ['process_limit'],
      ['network'],
      /not enforced: process_limit\..*podPidsLimit.*WARNING/,
    ],
  ])('%s', (_name, failing, accept, allowed, refused, accepted, summary) => {
    const v = decide(only(failing), accept);
    expect({ allowed: v.allowed, refused: v.refused, accepted: v.accepted }).toEqual({ allowed, refused, accepted });
    expect(v.summary).toMatch(summary);
  });
});

describe('refusalText', () => {
  it('names the protection, says the user cannot fix it, and what the admin must do', () => {
    const text = refusalText(['network']);
    expect(text).toContain('network (network isolation)');
    expect(text).toContain('not something your code can fix');
    expect(text).toContain('NetworkPolicy');
    expect(text).toContain('CODEMODE_ACCEPT_UNENFORCED=network');
  });
});
