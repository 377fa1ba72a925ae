// Prometheus metrics on a private registry. Names follow controller-runtime where a dashboard
// expects them; every label value comes from a closed set (phases, reasons, runtimes, results) —
// never run names, pod names, sessions or users.
import { ECOSYSTEMS, SANDBOX_CHECKS, type Ecosystem } from '../api/v1alpha1/index.js';
import type { InstallOutcome } from '../packages/installer.js';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { REPLICA_GONE, type ControllerMetrics } from '../controller/metrics.js';
import { LEADER_LEASE } from '../controller/pool-controller.js';
import type { QueueMetrics } from '../controller/workqueue.js';
import type { RunMetricsSink } from '../runs/types.js';
import type { SandboxCheckMetrics } from '../selfcheck/checker.js';
import { POLICY_RESTORE_CAUSES, type NetworkPolicyMetrics } from '../controller/network-policy.js';
import { ADMISSION_LIMITS, type AdmissionLimit, type RunLoad } from '../limits/admission.js';
import { serviceMetrics, type ServiceMetrics } from './service-metrics.js';
import { AUDIT_RESULTS, type AuditResult } from '../audit/writer.js';
import type { KubeApiMetrics } from '../kube/api-metrics.js';
import { kubeApiMetrics } from './kube-api-metrics.js';
import { READ_BUDGET_KINDS, type ReadBudgetKind } from '../exec/read-budget.js';
import type { CodemodeMetrics } from '../codemode/broker.js';
import { codemodeMetrics } from './codemode-metrics.js';
import { AUTH_OUTCOMES, type AuthOutcome } from '../auth/identity.js';

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export interface Metrics extends ControllerMetrics, ServiceMetrics {
  registry: Registry;
  runs: RunMetricsSink;
  toolCall(tool: string, outcome: 'ok' | 'error', seconds: number): void;
  poolClaim(result: 'warm' | 'empty'): void;
  sandboxCheck: SandboxCheckMetrics;
  /** The sandbox NetworkPolicy's restores and whether it is in place (issue 14, point 4). */
  networkPolicy: NetworkPolicyMetrics;
  /** What became of a /mcp request's authentication (closed set: AUTH_OUTCOMES). */
  authRequest(outcome: AuthOutcome): void;
  /** A call refused for capacity, by the limit it hit (closed set: ADMISSION_LIMITS). */
  admissionRejected(limit: AdmissionLimit): void;
  /** One package install into a session (src/packages): its registry, outcome and duration. */
  packageInstall(ecosystem: Ecosystem, outcome: InstallOutcome, seconds: number): void;
  /** This replica's run slots: executing and waiting. */
  admissionLoad(load: RunLoad): void;
  /** Audit records of session calls: written or dropped (src/audit/writer.ts), and the queue. */
  audit: { result(result: AuditResult): void; queue(length: number): void };
  /** Kubernetes API requests by verb and result, informer restarts (makeClients counts them here). */
  kubeApi: KubeApiMetrics;
  /** Nested tool calls from sandbox code (src/codemode). */
  codemode: CodemodeMetrics;
  /** Whether an UpstreamServer is Ready on this replica (undefined: it was deleted). */
  upstreamReady(server: string, ready: boolean | undefined): void;
  /** Tool calls to an UpstreamServer in flight and waiting for a place on this replica. */
  upstreamCalls(server: string, calls: { active: number; waiting: number }): void;
  /** A pod's kernel stream paused for its reading budget (src/exec/read-budget.ts), in ms. */
  kernelStreamPaused(ms: number, budget: ReadBudgetKind): void;
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const runsTotal = new Counter({
    name: 'codemode_runs_total',
    help: 'Finished SandboxRuns by phase, reason and runtime.',
    labelNames: ['phase', 'reason', 'runtime'] as const,
    registers: [registry],
  });
  const runDuration = new Histogram({
    name: 'codemode_run_duration_seconds',
    help: 'Time from the start of execution handling to the recorded result, by runtime, phase and start: cold (a pod of its own), warm (a claimed pool pod) or session (in a SandboxSession).',
    labelNames: ['runtime', 'phase', 'start'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const runsActive = new Gauge({ name: 'codemode_runs_active', help: 'Runs executing in this process.', registers: [registry] });
  const reconcileTotal = new Counter({
    name: 'controller_runtime_reconcile_total',
    help: 'Total number of reconciliations per controller.',
    labelNames: ['controller', 'result'] as const,
    registers: [registry],
  });
  const reconcileErrors = new Counter({
    name: 'controller_runtime_reconcile_errors_total',
    help: 'Total number of reconciliation errors per controller.',
    labelNames: ['controller'] as const,
    registers: [registry],
  });
  const reconcileTime = new Histogram({
    name: 'controller_runtime_reconcile_time_seconds',
    help: 'Length of time per reconciliation per controller.',
    labelNames: ['controller'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const wqDepth = new Gauge({ name: 'workqueue_depth', help: 'Current depth of workqueue.', labelNames: ['name'] as const, registers: [registry] });
  const wqAdds = new Counter({
    name: 'workqueue_adds_total',
    help: 'Total number of adds handled by workqueue.',
    labelNames: ['name'] as const,
    registers: [registry],
  });
  const wqRetries = new Counter({
    name: 'workqueue_retries_total',
    help: 'Total number of retries handled by workqueue.',
    labelNames: ['name'] as const,
    registers: [registry],
  });
  const wqQueue = new Histogram({
    name: 'workqueue_queue_duration_seconds',
    help: 'How long in seconds an item stays in workqueue before being requested.',
    labelNames: ['name'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const wqWork = new Histogram({
    name: 'workqueue_work_duration_seconds',
    help: 'How long in seconds processing an item from workqueue takes.',
    labelNames: ['name'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const toolCalls = new Counter({
    name: 'codemode_mcp_tool_calls_total',
    help: 'MCP tool calls by tool and outcome.',
    labelNames: ['tool', 'outcome'] as const,
    registers: [registry],
  });
  const toolLatency = new Histogram({
    name: 'codemode_mcp_tool_call_duration_seconds',
    help: 'MCP tool call latency by tool.',
    labelNames: ['tool'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });

  const sessionsCollected = new Counter({
    name: 'codemode_sessions_collected_total',
    help: 'SandboxSessions deleted by garbage collection, by cause.',
    labelNames: ['cause'] as const,
    registers: [registry],
  });

  const packageInstalls = new Counter({
    name: 'codemode_package_installs_total',
    help: 'Package installs into sessions (install_packages, spec.packages), by registry and outcome: installed, refused (policy or a limit) or failed.',
    labelNames: ['ecosystem', 'outcome'] as const,
    registers: [registry],
  });
  const packageInstallDuration = new Histogram({
    name: 'codemode_package_install_duration_seconds',
    help: 'Time of one successful install into a session: fetcher pod, resolution, download, copy and unpack.',
    labelNames: ['ecosystem'] as const,
    buckets: [1, 2, 5, 10, 20, 40, 80, 160, 320],
    registers: [registry],
  });

  const poolClaims = new Counter({
    name: 'codemode_warm_pool_claims_total',
    help: 'Warm-pool claims: warm (a ready pod was taken) or empty (fell back to a cold pod).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const poolTargetPods = new Gauge({
    name: 'codemode_warm_pool_target_pods',
    help: 'Unclaimed warm-pool pods the leader keeps for the current demand (between the configured minimum and maximum); 0 on replicas that do not lead.',
    registers: [registry],
  });
  const replicasAlive = new Gauge({
    name: 'codemode_gateway_replicas',
    help: 'Gateway replicas this replica sees renewing their replica Lease, itself included (max over replicas: how many are up).',
    registers: [registry],
  });
  const replicasGone = new Counter({
    name: 'codemode_gateway_replicas_gone_total',
    help: 'Other gateway replicas this replica judged gone: released (deleted its Lease on an orderly stop) or expired (stopped renewing: killed, out of memory, node lost). Their unfinished runs are failed.',
    labelNames: ['how'] as const,
    registers: [registry],
  });
  for (const how of REPLICA_GONE) replicasGone.inc({ how }, 0);
  const leaderStatus = new Gauge({
    name: 'leader_election_master_status',
    help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master.',
    labelNames: ['name'] as const,
    registers: [registry],
  });
  // A backup from the start: with no replica ever leader (the Lease refused, say) the series is
  // there at 0 for CodemodeNoLeader to see, not absent.
  leaderStatus.set({ name: LEADER_LEASE }, 0);

  const sandboxCheck = sandboxCheckMetrics(registry);
  // Issue 14, point 4: the sandbox NetworkPolicy is watched and restored.
  const policyRestores = new Counter({
    name: 'codemode_network_policy_restores_total',
    help: 'Times the sandbox deny-all NetworkPolicy was restored, by cause: deleted or modified.',
    labelNames: ['cause'] as const,
    registers: [registry],
  });
  for (const cause of POLICY_RESTORE_CAUSES) policyRestores.inc({ cause }, 0);
  const policyInPlace = new Gauge({
    name: 'codemode_network_policy_in_place',
    help: '1 when the informer shows the correct sandbox NetworkPolicy, 0 while it is missing or altered (no sandbox starts then).',
    registers: [registry],
  });

  const authRequests = new Counter({
    name: 'codemode_auth_requests_total',
    help: 'Requests to /mcp by what became of their authentication: accepted (every request in mode none), no_token, invalid_token (401), forbidden (an identity that cannot be recorded, 403), unavailable (the token could not be checked: TokenReview or the OIDC issuer did not answer, 503) or busy (too many new tokens being checked, 503).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  for (const outcome of AUTH_OUTCOMES) authRequests.inc({ outcome }, 0);
  const admissionRejections = new Counter({
    name: 'codemode_admission_rejections_total',
    help: 'Calls refused for capacity, by the limit hit: replica_runs, namespace_runs, sessions, batch_size, request_bytes (request bodies the replica holds), or a per-user limit (user_runs, user_sessions, user_executions_per_minute, user_request_bytes, user_requests).',
    labelNames: ['limit'] as const,
    registers: [registry],
  });
  const runSlotsUsed = new Gauge({
    name: 'codemode_admission_runs_executing',
    help: 'Run slots of this replica in use (CODEMODE_MAX_CONCURRENT_RUNS caps it).',
    registers: [registry],
  });
  const runSlotsWaiting = new Gauge({
    name: 'codemode_admission_runs_waiting',
    help: 'execute_code calls waiting for a run slot on this replica.',
    registers: [registry],
  });
  const auditRecords = new Counter({
    name: 'codemode_audit_records_total',
    help: 'Session calls recorded in audit records (finished SandboxRuns written after the reply; one record lists the calls of a session made within a second), by result: written, or dropped (queue full while the API server was unreachable, refused, or shutdown).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  for (const result of AUDIT_RESULTS) auditRecords.inc({ result }, 0);
  const auditQueue = new Gauge({
    name: 'codemode_audit_queue_length',
    help: 'Session calls waiting for their audit record to be written on this replica (CODEMODE_AUDIT_QUEUE_LENGTH caps it).',
    registers: [registry],
  });

  // Series of closed sets exist from the start (at 0): a rate or an alert then sees "none" as 0.
  runsTotal.inc({ phase: 'Succeeded', reason: 'Succeeded', runtime: 'python' }, 0);
  for (const limit of ADMISSION_LIMITS) admissionRejections.inc({ limit }, 0);
  for (const cause of ['idle', 'lifetime'] as const) sessionsCollected.inc({ cause }, 0);
  for (const result of ['warm', 'empty'] as const) poolClaims.inc({ result }, 0);
  for (const ecosystem of ECOSYSTEMS) for (const outcome of ['installed', 'refused', 'failed'] as const) packageInstalls.inc({ ecosystem, outcome }, 0);
  const reconciled = new Set<string>();
  const toolsSeen = new Set<string>();
  // Server names are UpstreamServer names, set by the administrator: a closed set.
  const upstreamUp = new Gauge({
    name: 'codemode_upstream_ready',
    help: 'Whether this replica is connected to the UpstreamServer and holds its tool catalog (1) or not (0).',
    labelNames: ['server'] as const,
    registers: [registry],
  });
  const upstreamInFlight = new Gauge({
    name: 'codemode_upstream_calls_in_flight',
    help: 'Tool calls this replica has in flight to the UpstreamServer (at most CODEMODE_UPSTREAM_CALLS_PER_SERVER).',
    labelNames: ['server'] as const,
    registers: [registry],
  });
  const upstreamWaiting = new Gauge({
    name: 'codemode_upstream_calls_waiting',
    help: "Tool calls waiting for a place at the UpstreamServer on this replica: the server's or a user's share (CODEMODE_UPSTREAM_CALLS_PER_USER) was taken.",
    labelNames: ['server'] as const,
    registers: [registry],
  });
  const kernelStreamPauses = new Counter({
    name: 'codemode_kernel_stream_paused_seconds_total',
    help: "Time kernel streams were paused because their frames took more of the gateway's event loop than a budget (budget: pod, a burst of 250 ms then 50 ms a second for each pod; user, 500 ms then 100 ms a second for all of one user's pods): sandbox code writing frames shaped to be slow to read. Honest kernels stay inside it.",
    labelNames: ['budget'] as const,
    registers: [registry],
  });
  for (const budget of READ_BUDGET_KINDS) kernelStreamPauses.inc({ budget }, 0);
  const service = serviceMetrics(registry);
  // The UpstreamServers that exist (told by upstreamReady): a call to a deleted one that was still
  // in flight ends after its series were removed, and must not set them again.
  const upstreamsKnown = new Set<string>();

  return {
    registry,
    ...service,
    sandboxCheck,
    kubeApi: kubeApiMetrics(registry),
    codemode: codemodeMetrics(registry),
    audit: {
      result: (result): void => void auditRecords.inc({ result }),
      queue: (length): void => void auditQueue.set(length),
    },
    authRequest: (outcome): void => void authRequests.inc({ outcome }),
    admissionRejected: (limit): void => void admissionRejections.inc({ limit }),
    packageInstall(ecosystem, outcome, seconds): void {
      packageInstalls.inc({ ecosystem, outcome });
      if (outcome === 'installed' && Number.isFinite(seconds) && seconds >= 0) packageInstallDuration.observe({ ecosystem }, seconds);
    },
    upstreamReady(server, ready): void {
      if (ready === undefined) {
        upstreamsKnown.delete(server);
        for (const g of [upstreamUp, upstreamInFlight, upstreamWaiting]) g.remove({ server });
      } else {
        upstreamsKnown.add(server);
        upstreamUp.set({ server }, ready ? 1 : 0);
      }
    },
    upstreamCalls(server, calls): void {
      if (!upstreamsKnown.has(server)) return;
      upstreamInFlight.set({ server }, calls.active);
      upstreamWaiting.set({ server }, calls.waiting);
    },
    admissionLoad(load): void {
      runSlotsUsed.set(load.replicaActive);
      runSlotsWaiting.set(load.waiting);
    },
    poolClaim: (result): void => void poolClaims.inc({ result }),
    poolTarget: (pods): void => void poolTargetPods.set(pods),
    leader: (isLeader): void => void leaderStatus.set({ name: LEADER_LEASE }, isLeader ? 1 : 0),
    replicasAlive: (count): void => void replicasAlive.set(count),
    replicaGone: (how): void => void replicasGone.inc({ how }),
    orphanEnded: (phase, reason, runtime): void => void runsTotal.inc({ phase, reason, runtime }),
    sessionCollected: (cause): void => void sessionsCollected.inc({ cause }),
    kernelStreamPaused: (ms, budget): void => void kernelStreamPauses.inc({ budget }, ms / 1000),
    networkPolicy: {
      restored: (cause): void => void policyRestores.inc({ cause }),
      inPlace: (yes): void => void policyInPlace.set(yes ? 1 : 0),
    },
    runs: {
      runFinished(phase, reason, runtime, seconds, start): void {
        runsTotal.inc({ phase, reason, runtime });
        if (seconds > 0 && start !== undefined) runDuration.observe({ runtime, phase, start }, seconds);
      },
      runStarted: () => runsActive.inc(),
      runEnded: () => runsActive.dec(),
      podStarted: service.podStarted,
      output: service.output,
      streamBroke: (outcome) => service.streamBroke('run', outcome),
    },
    queue(name): QueueMetrics {
      return {
        adds: () => wqAdds.inc({ name }),
        retries: () => wqRetries.inc({ name }),
        depth: (n) => wqDepth.set({ name }, n),
        queueDuration: (s) => wqQueue.observe({ name }, s),
        workDuration: (s) => wqWork.observe({ name }, s),
      };
    },
    reconcile(controller, result, seconds): void {
      if (!reconciled.has(controller)) {
        reconciled.add(controller); // controller names are ours: a closed set
        reconcileErrors.inc({ controller }, 0);
      }
      reconcileTotal.inc({ controller, result });
      if (result === 'error') reconcileErrors.inc({ controller });
      reconcileTime.observe({ controller }, seconds);
    },
    toolCall(tool, outcome, seconds): void {
      if (!toolsSeen.has(tool)) {
        toolsSeen.add(tool); // tool names are ours: a closed set
        for (const o of ['ok', 'error'] as const) toolCalls.inc({ tool, outcome: o }, 0);
      }
      toolCalls.inc({ tool, outcome });
      toolLatency.observe({ tool }, seconds);
    },
  };
}

// Sandbox self-check (issue 14, point 3). `check` is one of SANDBOX_CHECKS; every series exists
// from the start (0 until a check proved otherwise) so an alert on `== 0` sees a missing check.
function sandboxCheckMetrics(registry: Registry): SandboxCheckMetrics {
  const enforced = new Gauge({
    name: 'codemode_sandbox_check_enforced',
    help: 'Whether the last sandbox self-check found the protection enforced by the cluster (1) or not (0, also before the first check).',
    labelNames: ['check'] as const,
    registers: [registry],
  });
  const accepted = new Gauge({
    name: 'codemode_sandbox_check_accepted',
    help: 'Whether the administrator accepted running code without this protection (CODEMODE_ACCEPT_UNENFORCED).',
    labelNames: ['check'] as const,
    registers: [registry],
  });
  const lastCompleted = new Gauge({
    name: 'codemode_sandbox_check_last_success_timestamp_seconds',
    help: 'Unix time at which a sandbox self-check last completed (the canary reported and every check was evaluated, whatever the result).',
    registers: [registry],
  });
  const runs = new Counter({
    name: 'codemode_sandbox_check_runs_total',
    help: 'Sandbox self-check runs by result: completed (the canary reported) or failed (it could not run or report).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  for (const result of ['completed', 'failed'] as const) runs.inc({ result }, 0);
  for (const check of SANDBOX_CHECKS) {
    enforced.set({ check }, 0);
    accepted.set({ check }, 0);
  }
  return {
    accepted: (checks): void => {
      for (const check of SANDBOX_CHECKS) accepted.set({ check }, checks.includes(check) ? 1 : 0);
    },
    completed: (results, at): void => {
      for (const r of results) enforced.set({ check: r.check }, r.enforced ? 1 : 0);
      lastCompleted.set(at.getTime() / 1000);
      runs.inc({ result: 'completed' });
    },
    failed: (): void => void runs.inc({ result: 'failed' }),
  };
}
