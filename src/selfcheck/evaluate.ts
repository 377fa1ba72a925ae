// Pure decisions of the sandbox self-check: which protections the canary's report shows as
// enforced, and what the gateway does about the ones that are not (refuse code, or run it
// because the administrator accepted that risk). No I/O; unit-tested as tables.
import { cgroupNumber, type CanaryReport, type NetworkTargetName, type Probe } from './report.js';

/** The closed set of checks: metric label values and CODEMODE_ACCEPT_UNENFORCED entries. */
export const SANDBOX_CHECKS = ['process_limit', 'memory_limit', 'readonly_root', 'no_service_account_token', 'network'] as const;
export type SandboxCheckName = (typeof SANDBOX_CHECKS)[number];

export interface CheckResult {
  check: SandboxCheckName;
  enforced: boolean;
  /** For the log and the operator's output: what was observed (never shown to agents). */
  detail: string;
}

export interface Expectations {
  /** CODEMODE_MAX_PROCESSES: pids.max (or the cap fork() meets) must be at most this. */
  maxProcesses: number;
  /** The canary's memory limit in bytes; the cgroup must show at most this. */
  memoryLimitBytes: number;
  /** Whether a non-sandbox client exchanged data with the echo listener, and which one. */
  control: { reached: boolean; via: string };
  /** Set when there is no gateway address to probe, saying why (e.g. it runs outside the cluster). */
  gatewaySkipped?: string;
  /** With gateway targets: whether the gateway answered the operator on them (its own control). */
  gatewayAnswered?: boolean;
}

/** What an administrator does about each unenforced protection. */
export const ADMIN_HINTS: Readonly<Record<SandboxCheckName, string>> = {
  process_limit: "set the kubelet's podPidsLimit (KubeletConfiguration) on every node to at most CODEMODE_MAX_PROCESSES",
  memory_limit: 'make the nodes enforce container memory limits (the memory cgroup controller must be enabled)',
  readonly_root: 'use a container runtime that honours readOnlyRootFilesystem',
  no_service_account_token: 'stop whatever mounts a service-account token into pods of this namespace (an admission webhook or policy)',
  network: 'install a network plugin (CNI) that enforces NetworkPolicy, and remove any NetworkPolicy in the namespace that allows sandbox traffic',
};

export const CHECK_TITLES: Readonly<Record<SandboxCheckName, string>> = {
  process_limit: 'the process limit',
  memory_limit: 'the memory limit',
  readonly_root: 'the read-only root filesystem',
  no_service_account_token: 'the absence of a service-account token',
  network: 'network isolation',
};

/** `a, b and c` */
export function listText(items: readonly string[]): string {
  return items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}

function processLimit(r: CanaryReport, max: number): CheckResult {
  const pids = cgroupNumber(r.pids_max);
  const shown = r.pids_max?.value ?? 'absent';
  if (pids !== undefined && pids <= max) return { check: 'process_limit', enforced: true, detail: `pids.max is ${pids} (at most ${max})` };
  // The kubelet's pod PID limit sits on the pod's cgroup, which a container may not see: a
  // fork() that fails below the cap proves a limit all the same.
  const f = r.fork_probe;
  // Only EAGAIN is the pids controller saying no; ENOMEM and the like prove nothing about it.
  if (f.failed_after !== null && f.failed_after < max && f.error === 'EAGAIN') {
    return {
      check: 'process_limit',
      enforced: true,
      detail: `pids.max reads ${shown}, but fork() failed (${f.error ?? 'error'}) after ${f.failed_after} processes, below ${max}`,
    };
  }
  return {
    check: 'process_limit',
    enforced: false,
    detail: `pids.max reads ${shown} and ${f.attempted} processes started without meeting a limit (required: at most ${max})`,
  };
}

function memoryLimit(r: CanaryReport, expected: number): CheckResult {
  const bytes = cgroupNumber(r.memory_limit);
  const shown = r.memory_limit?.value ?? 'absent';
  return bytes !== undefined && bytes <= expected
    ? { check: 'memory_limit', enforced: true, detail: `the memory cgroup limit is ${bytes} bytes (at most ${expected})` }
    : { check: 'memory_limit', enforced: false, detail: `the memory cgroup limit reads ${shown} (required: at most ${expected} bytes)` };
}

function readonlyRoot(r: CanaryReport): CheckResult {
  const dirs = ['/', '/usr'] as const;
  const bad = dirs.filter((d) => r.root[d].readonly_mount !== true || r.root[d].write === 'written');
  const seen = dirs.map((d) => `${d}: ${r.root[d].readonly_mount === true ? 'read-only mount' : 'writable mount'}, write ${r.root[d].write}`).join('; ');
  return { check: 'readonly_root', enforced: bad.length === 0, detail: seen };
}

function token(r: CanaryReport): CheckResult {
  return r.service_account_token
    ? { check: 'no_service_account_token', enforced: false, detail: 'a service-account token directory is mounted in the sandbox' }
    : { check: 'no_service_account_token', enforced: true, detail: 'no service-account token is mounted' };
}

const REQUIRED_TARGETS: readonly NetworkTargetName[] = ['api_server', 'pod_ip', 'metadata'];

function describeProbe(p: Probe): string {
  return `${p.name} ${p.address} ${p.outcome === 'reply' ? 'answered' : `no reply (${p.detail})`}`;
}

function network(r: CanaryReport, exp: Expectations): CheckResult {
  const answered = r.network.filter((p) => p.outcome === 'reply');
  if (answered.length > 0) {
    return { check: 'network', enforced: false, detail: `the canary exchanged data with ${answered.map((p) => `${p.name} ${p.address}`).join(', ')}` };
  }
  const names = new Set(r.network.map((p) => p.name));
  const required = exp.gatewaySkipped === undefined ? [...REQUIRED_TARGETS, 'gateway' as const] : REQUIRED_TARGETS;
  const missing = required.filter((n) => !names.has(n));
  const notes = [
    ...(names.has('dns') ? [] : ['dns skipped: the sandbox has no nameserver configured']),
    ...(exp.gatewaySkipped === undefined ? [] : [`gateway skipped: ${exp.gatewaySkipped}`]),
  ];
  const seen = [...r.network.map(describeProbe), ...notes].join('; ');
  if (missing.length > 0) return { check: 'network', enforced: false, detail: `unverified: no result for ${missing.join(', ')}; ${seen}` };
  // Silence from a listener nobody can reach proves nothing.
  if (!exp.control.reached)
    return { check: 'network', enforced: false, detail: `unverified: the echo listener did not answer a non-sandbox client either; ${seen}` };
  if (exp.gatewaySkipped === undefined && exp.gatewayAnswered === false) {
    return { check: 'network', enforced: false, detail: `unverified: the gateway did not answer the operator on its own address either; ${seen}` };
  }
  return { check: 'network', enforced: true, detail: `${seen}; the echo listener answered ${exp.control.via}` };
}

export function evaluateReport(report: CanaryReport, exp: Expectations): CheckResult[] {
  return [processLimit(report, exp.maxProcesses), memoryLimit(report, exp.memoryLimitBytes), readonlyRoot(report), token(report), network(report, exp)];
}

export interface Verdict {
  /** Code may run: every check is enforced or its risk was accepted. */
  allowed: boolean;
  /** Unenforced and not accepted: the reasons code is refused. */
  refused: SandboxCheckName[];
  /** Unenforced, but accepted by CODEMODE_ACCEPT_UNENFORCED: warned about on every start. */
  accepted: SandboxCheckName[];
  /** One line for the log and `npm start`'s output. */
  summary: string;
}

export function decide(results: readonly CheckResult[], accept: readonly SandboxCheckName[]): Verdict {
  const unenforced = results.filter((r) => !r.enforced);
  const refused = unenforced.filter((r) => !accept.includes(r.check)).map((r) => r.check);
  const accepted = unenforced.filter((r) => accept.includes(r.check)).map((r) => r.check);
  const parts: string[] = [];
  if (unenforced.length === 0) {
    parts.push(`Sandbox check passed: ${listText(results.map((r) => CHECK_TITLES[r.check]))} are enforced.`);
  }
  if (refused.length > 0) {
    parts.push(
      `Sandbox check FAILED: not enforced: ${refused.join(', ')}. Code execution is refused until an administrator fixes the cluster ` +
        `(${refused.map((c) => ADMIN_HINTS[c]).join('; ')}) or accepts the risk with CODEMODE_ACCEPT_UNENFORCED=${[...accept, ...refused].join(',')}.`,
    );
  }
  if (accepted.length > 0) {
    parts.push(
      `WARNING: this cluster does not enforce ${listText(accepted.map((c) => CHECK_TITLES[c]))} for sandboxes; code runs anyway because ` +
        `CODEMODE_ACCEPT_UNENFORCED=${accept.join(',')} accepts that risk.`,
    );
  }
  return { allowed: refused.length === 0, refused, accepted, summary: parts.join(' ') };
}

/** The isError text execute_code and create_session return while code is refused. */
export function refusalText(refused: readonly SandboxCheckName[]): string {
  return (
    `Code execution is disabled on this server: its sandboxes are not fully isolated. The operator's self-check found that the cluster ` +
    `does not enforce: ${refused.map((c) => `${c} (${CHECK_TITLES[c]})`).join(', ')}. This is not something your code can fix. ` +
    `An administrator must ${refused.map((c) => ADMIN_HINTS[c]).join('; ')} — or explicitly accept the risk with ` +
    `CODEMODE_ACCEPT_UNENFORCED=${refused.join(',')} and restart the operator.`
  );
}
