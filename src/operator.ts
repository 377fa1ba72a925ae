// Wires the Kubernetes side of the process: informers, the run executor and the controller.
// Kept apart from main.ts so tests and benchmarks can start a whole operator in-process.
import { hostname, networkInterfaces } from 'node:os';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { SANDBOXRUN_PLURAL } from './api/v1alpha1/index.js';
import type { Config } from './config/index.js';
import { gatewayOptions, type GatewayDeps } from './gateway/types.js';
import { connectionsPerUser } from './gateway/connection-owners.js';
import { createApp } from './gateway/app.js';
import { serveMetrics } from './metrics/route.js';
import type { Hono } from 'hono';
import { EventRecorder } from './kube/events.js';
import { LIST_PAGE_SIZE, customResourceInformer, ResilientInformer, withoutManagedFields } from './kube/informer.js';
import { stripRun } from './controller/cached-run.js';
import { NetworkPolicyGuard } from './controller/network-policy.js';
import type { ControllerOptions } from './controller/options.js';
import { PodWatcher } from './sandbox/pod-watcher.js';
import { RunExecutor } from './runs/executor.js';
import { ReplicaLiveness } from './controller/replica-liveness.js';
import { SandboxRunController, podSelector } from './controller/run-controller.js';
import { apiErrorMessage, isNotFound, type KubeClients } from './kube/clients.js';
import type { Metrics } from './metrics/registry.js';
import { KubeRunService } from './runs/kube-run-service.js';
import { RunSlots } from './limits/run-slots.js';
import { RuntimeConfigMapGuard } from './controller/runtime-guard.js';
import { SandboxSessionController } from './controller/session-controller.js';
import { KernelConnections } from './exec/kernel.js';
import { findRuntimeDir, readRuntimeFiles } from './sessions/runtime-files.js';
import { SessionService } from './sessions/service.js';
import { PoolController } from './controller/pool-controller.js';
import { PoolSet } from './controller/pool-set.js';
import { PackageInstaller } from './packages/installer.js';
import { SessionPackages } from './packages/session-packages.js';
import { ProfileCatalog } from './profiles/catalog.js';
import type { SandboxShape } from './profiles/profile.js';
import { keepActivityStamp } from './controller/session-gc.js';
import { SANDBOXSESSION_PLURAL } from './api/v1alpha1/index.js';
import { runCanary } from './selfcheck/canary-run.js';
import { PolicyChangeWatch } from './selfcheck/policy-changes.js';
import { SandboxChecker } from './selfcheck/checker.js';
import { UserLimits } from './limits/user-limits.js';
import { AuditWriter } from './audit/writer.js';
import { liveRecords } from './audit/live-records.js';
import { ToolBroker, type BrokerLimits } from './codemode/broker.js';
import type { UpstreamCaller } from './codemode/types.js';
import { registryCaller } from './codemode/registry-caller.js';
import { UpstreamWatcher } from './upstreams/watcher.js';
import { parseLabels, stdioSessionIdleSeconds } from './upstreams/stdio-objects.js';
import type { UpstreamRegistry } from './upstreams/types.js';

/** On shutdown, queued audit records get this long to be written. */
const AUDIT_FLUSH_MS = 5000;

export interface Operator {
  identity: string;
  executor: RunExecutor;
  controller: SandboxRunController;
  runService: KubeRunService;
  sessionService: SessionService;
  sessionController: SandboxSessionController;
  /** The sandbox self-check (runtime/selfcheck): absent only when a test turned it off. */
  sandboxCheck: SandboxChecker | undefined;
  /** What the SandboxRun informer holds (runs without code or output); tests inspect it. */
  runCache: { list(): readonly KubernetesObject[] };
  poolController: PoolController;
  /** The warm pools of every profile (one per profile, replaced when it changes); tests inspect them. */
  pools: PoolSet;
  /** The kinds of sandbox runs and sessions may ask for; the tools name the ones with more memory after an OOM kill. */
  profiles: Pick<ProfileCatalog, 'resolve' | 'all'>;
  /** Code mode is on (upstream servers were given): the broker's per-run limits. */
  codeMode?: { maxCalls: number; callTimeoutSeconds: number };
  /** The team's upstream MCP servers (UpstreamServers of the namespace) for code mode. */
  upstreams: UpstreamRegistry;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** What the gateway serves from `operator`: its run and session services and the gateway settings. */
export function gatewayDeps(
  operator: Operator,
  config: Config,
  logger: Logger,
  process: Pick<GatewayDeps, 'isReady' | 'isDraining' | 'shutdown' | 'onToolCall' | 'onAdmissionRejected' | 'auth'>,
): GatewayDeps {
  return {
    runService: operator.runService,
    sessions: operator.sessionService,
    logger,
    options: gatewayOptions(config),
    ...(operator.sandboxCheck !== undefined && { sandboxGate: operator.sandboxCheck }),
    ...(operator.codeMode && { codeMode: operator.codeMode }),
    upstreams: operator.upstreams,
    profiles: operator.profiles,
    // One user among many only with authentication: without it every caller is the same one.
    ...(config.authMode !== 'none' && { connectionsPerUser: connectionsPerUser(config.maxConnections) }),
    ...process,
  };
}

/**
 * The HTTP app a replica serves: MCP, probes and /metrics, with its tool calls and refusals
 * counted. One wiring for src/main.ts and the fault tests' replicas (test/e2e/faults/helpers).
 */
export function replicaApp(
  operator: Operator,
  config: Config,
  logger: Logger,
  metrics: Metrics,
  process: Pick<GatewayDeps, 'isReady' | 'isDraining' | 'shutdown' | 'auth'>,
): Hono {
  const app = createApp(
    gatewayDeps(operator, config, logger, {
      ...process,
      ...(process.auth && { auth: { ...process.auth, onResult: metrics.authRequest } }),
      onToolCall: metrics.toolCall,
      onAdmissionRejected: metrics.admissionRejected,
    }),
  );
  serveMetrics(app, metrics.registry);
  return app;
}

/** Unique per process; the executor annotation on runs this process executes. */
export function newIdentity(): string {
  return `${hostname().slice(0, 40)}-${randomBytes(4).toString('hex')}`;
}

export function controllerOptions(config: Config, identity: string): ControllerOptions {
  return { ...config, identity };
}

/** The operator's non-loopback addresses (its pod IP in a cluster): the gateway as a canary target. */
function ownAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .filter((a) => a !== undefined && !a.internal && !a.address.startsWith('fe80:'))
    .map((a) => (a as { address: string }).address);
}

function readCanaryProgram(runtimeDir: string | undefined): string | undefined {
  try {
    return runtimeDir ? readFileSync(join(runtimeDir, 'selfcheck', 'canary.py'), 'utf8') : undefined;
  } catch {
    return undefined;
  }
}

export interface OperatorOptions {
  /** Run the sandbox self-check (default true). Tests of other features turn it off. */
  sandboxCheck?: boolean;
  /** Test seam: the session kernels to ship instead of runtime/ (two runtime versions side by side). */
  runtimeFiles?: Readonly<Record<string, string>>;
  /**
   * Code mode: the upstream MCP servers sandbox code may call through the broker. The registry of
   * UpstreamServers (src/upstreams) plugs in here; tests pass a real MCP client of their own.
   */
  upstreams?: UpstreamCaller;
}
/** The per-run limits of nested tool calls, from the configuration. */
export function brokerLimits(config: Config): BrokerLimits {
  return {
    maxCalls: config.toolCallsPerRun,
    callTimeoutMs: config.toolCallTimeoutSeconds * 1000,
    resultMaxBytes: config.toolResultMaxBytes,
    bytesPerRun: config.toolBytesPerRun,
  };
}

/** The former name of OperatorOptions (test seams). */
export type OperatorOverrides = OperatorOptions;

export function createOperator(config: Config, clients: KubeClients, log: Logger, metrics?: Metrics, options: OperatorOptions = {}): Operator {
  const identity = newIdentity();
  const opts = controllerOptions(config, identity);
  const ns = config.namespace;
  // Code, stdin and outputs stay in the API server: the controller does not need them cached.
  const runs = customResourceInformer(clients, ns, SANDBOXRUN_PLURAL, log, { transform: stripRun });
  const pods = new ResilientInformer<V1Pod>(
    clients.kc,
    `/api/v1/namespaces/${ns}/pods`,
    (cont) => clients.core.listNamespacedPod({ namespace: ns, labelSelector: podSelector(), limit: LIST_PAGE_SIZE, _continue: cont }),
    log.child({ informer: 'pods' }),
    { labelSelector: podSelector(), transform: withoutManagedFields },
  );
  const policies = new NetworkPolicyGuard(
    clients,
    ns,
    log.child({ controller: 'networkpolicy' }),
    metrics && { ...metrics.networkPolicy, queue: metrics.queue('networkpolicy') },
  );
  const events = new EventRecorder(clients.events, identity, log);
  const podWatcher = new PodWatcher(pods);
  const runtimeDir = findRuntimeDir();
  // The kinds of sandbox runs and sessions may ask for (SandboxProfiles, plus the built-in one).
  const profiles = new ProfileCatalog({
    clients,
    namespace: ns,
    defaults: config,
    defaultProfile: config.defaultProfile,
    log: log.child({ component: 'profiles' }),
  });
  // The canary is a sandbox of the default profile.
  const sandboxCheck =
    options.sandboxCheck === false
      ? undefined
      : newSandboxChecker(config, clients, podWatcher, policies, () => profiles.defaultShape(), runtimeDir, log, metrics);
  // Another NetworkPolicy can open the sandboxes (policies add up): the canary looks again at once.
  const policyChanges = sandboxCheck && new PolicyChangeWatch(clients, ns, log, () => sandboxCheck.recheckSoon());
  const executor = new RunExecutor({
    clients,
    opts,
    profiles,
    pods: podWatcher,
    ...(sandboxCheck !== undefined && { gate: sandboxCheck }),
    policies,
    events,
    log: log.child({ controller: 'sandboxrun' }),
    metrics: metrics?.runs,
  });
  const slots = new RunSlots(runs, pods, identity, {
    namespace: ns,
    caps: {
      replicaRuns: config.maxConcurrentRuns,
      namespaceRuns: config.maxNamespaceRuns,
      queueLength: config.runQueueLength,
      queueTimeoutSeconds: config.runQueueTimeoutSeconds,
    },
    onReject: (limit) => metrics?.admissionRejected(limit),
    onLoad: (load) => metrics?.admissionLoad(load),
    onWait: (result, seconds) => metrics?.queueWait(result, seconds),
  });
  // Which other replicas are alive: a run whose executor is gone is failed without waiting out
  // its whole time budget (the controller is told when one goes).
  const liveness = new ReplicaLiveness(
    clients.coordination,
    { namespace: ns, identity, onGone: (gone) => controller.executorGone(gone), ...(metrics !== undefined && { metrics }) },
    log.child({ component: 'replica-liveness' }),
  );
  const controller = new SandboxRunController({ clients, opts, log: log.child({ controller: 'sandboxrun' }), executor, runs, pods, metrics, slots, liveness });

  // Cached with the API server's stamp of the gateway's activity writes (idle GC, session-gc.ts).
  const sessions = customResourceInformer(clients, ns, SANDBOXSESSION_PLURAL, log, { transform: keepActivityStamp });
  const runtimeFiles = options.runtimeFiles ?? (runtimeDir ? readRuntimeFiles(runtimeDir) : {});
  const hasKernels = Object.keys(runtimeFiles).length > 0;
  if (!hasKernels) log.warn('runtime/ (the session kernels) was not found next to the code: sessions cannot start');
  const runtimeGuard = new RuntimeConfigMapGuard(clients, runtimeFiles, log);
  const kernels = new KernelConnections(
    clients.exec,
    {
      maxImageBytes: config.displayMaxImageBytes,
      maxBytes: config.displayMaxBytes,
      maxItems: config.displayMaxItems,
    },
    (ms, budget) => metrics?.kernelStreamPaused(ms, budget),
  );
  // One pool per profile. Without kernels there is no pool: max 0 drains what an earlier version left.
  const pools = new PoolSet({
    profiles,
    kernelsAvailable: hasKernels,
    kernels,
    clients,
    opts,
    refillDeferMs: config.warmPoolRefillDeferMs,
    reserve: config.warmPoolReserve > 0,
    pods,
    policies,
    runtime: runtimeGuard,
    log: log.child({ component: 'warm-pool' }),
    onClaim: (r, seconds) => {
      metrics?.poolClaim(r);
      if (r === 'warm') metrics?.podStarted('warm', seconds);
    },
  });
  metrics?.watchPool(() => pools.readyPods().length);
  metrics?.watchSessions(() =>
    sessions
      .list(ns)
      .filter((s) => !s.metadata?.deletionTimestamp)
      .map((s) => (s as { status?: { phase?: string } }).status?.phase),
  );
  const poolController = new PoolController({
    pools,
    profiles,
    pods,
    runtime: runtimeGuard,
    clients,
    namespace: ns,
    identity,
    resyncMs: config.resyncSeconds * 1000,
    refillDeferMs: config.warmPoolRefillDeferMs,
    log: log.child({ controller: 'warmpool' }),
    metrics,
  });
  profiles.onChange(() => {
    pools.sync();
    poolController.poolsChanged();
  });
  executor.setPool(pools, kernels, hasKernels ? runtimeGuard : undefined);
  // Packages sessions install (src/packages): fetched by a fetcher pod, copied in over exec.
  const sessionPackages = new SessionPackages({
    installer: new PackageInstaller(clients, config, log.child({ component: 'packages' }), (e, o, s) => metrics?.packageInstall(e, o, s)),
    profiles,
    defaults: config,
  });
  const sessionController = new SandboxSessionController({
    pools,
    profiles,
    packages: sessionPackages,
    clients,
    opts,
    log: log.child({ controller: 'sandboxsession' }),
    sessions,
    pods,
    policies,
    runtime: runtimeGuard,
    events,
    metrics,
    ...(sandboxCheck !== undefined && { gate: sandboxCheck }),
    // One replica installs a session's spec.packages: the leader (the pool's election).
    installsHere: () => poolController.isLeader,
  });
  // Per-user limits, counted from the caches every replica shares (runs/user-limits.ts).
  const userLimits = new UserLimits({
    caps: { runs: config.userMaxRuns, sessions: config.userMaxSessions, executionsPerMinute: config.userMaxExecutionsPerMinute },
    namespace: ns,
    runs: (namespace) => runs.list(namespace),
    sessions: (namespace) => sessions.list(namespace),
    onRefused: (limit) => metrics?.admissionRejected(limit),
  });
  // Audit records of session calls, written after the reply (src/audit).
  const audit = new AuditWriter(
    clients,
    {
      capacity: config.auditQueueLength,
      ttlSecondsAfterFinished: config.auditTtlSeconds,
      recordCaps: { caps: { total: config.auditMaxRecords, perUser: config.auditMaxRecordsPerUser }, live: () => liveRecords(runs.list(ns)) },
      onResult: (r) => metrics?.audit.result(r),
      onQueue: (n) => metrics?.audit.queue(n),
    },
    log.child({ component: 'audit' }),
  );
  const sessionService = new SessionService(
    clients,
    sessions,
    kernels,
    {
      namespace: ns,
      outputCapChars: config.outputCapChars,
      maxFileBytes: config.maxFileBytes,
      sessionMaxIdleTimeoutSeconds: config.sessionMaxIdleTimeoutSeconds,
      sessionMaxLifetimeSeconds: config.sessionMaxLifetimeSeconds,
      startupTimeoutSeconds: config.podStartupTimeoutSeconds,
      adminGroups: config.adminGroups,
      maxSessions: config.maxSessions,
      onRefused: (limit) => metrics?.admissionRejected(limit),
      onWaited: (result, seconds) => metrics?.sessionWait(result, seconds),
      onStreamBroke: (outcome) => metrics?.streamBroke('session', outcome),
      admitSession: (name, owner) => userLimits.admit('session', name, owner),
      profiles,
      packages: sessionPackages,
      packagesTimeoutSeconds: config.packagesTimeoutSeconds,
      cachedPod: (name) => pods.get(name, ns),
    },
    log.child({ component: 'sessions' }),
    policies,
  );
  executor.setSessions(sessionService);

  // Code mode's upstream MCP servers: every replica keeps its own warm connections; the leader
  // (the warm pool's Lease) writes their status.
  const upstreams = new UpstreamWatcher({
    clients,
    namespace: ns,
    log: log.child({ component: 'upstreams' }),
    healthIntervalMs: config.upstreamHealthIntervalSeconds * 1000,
    requestTimeoutMs: config.upstreamRequestTimeoutSeconds * 1000,
    messageMaxBytes: config.upstreamMessageMaxBytes,
    callLimits: { perServer: config.upstreamCallsPerServer, perUser: config.upstreamCallsPerUser },
    isLeader: () => poolController.isLeader,
    stdio: {
      bridgeImage: config.stdioBridgeImage,
      gatewayPodLabels: parseLabels(config.stdioGatewayPodLabels),
      sessionIdleSeconds: stdioSessionIdleSeconds(config.upstreamHealthIntervalSeconds),
      ...(config.stdioGatewayNamespace !== undefined && { gatewayNamespace: config.stdioGatewayNamespace }),
    },
    ...(metrics !== undefined && { onReady: metrics.upstreamReady, onCalls: metrics.upstreamCalls }),
  });

  // Nested tool calls from sandbox code go to those upstreams (a test may pass its own caller).
  const tools = new ToolBroker(options.upstreams ?? registryCaller(upstreams.registry), brokerLimits(config), metrics?.codemode);
  const runService = new KubeRunService(clients, executor, { ...config, identity, ...(metrics !== undefined && { metrics }) }, sessionService, slots, {
    limits: userLimits,
    audit,
    tools,
    events,
    profiles,
  });

  return {
    identity,
    executor,
    controller,
    runService,
    sessionService,
    sessionController,
    sandboxCheck,
    runCache: runs,
    poolController,
    pools,
    profiles,
    codeMode: { maxCalls: config.toolCallsPerRun, callTimeoutSeconds: config.toolCallTimeoutSeconds },
    upstreams: upstreams.registry,
    async start(): Promise<void> {
      try {
        await runs.start();
      } catch (err) {
        if (isNotFound(err)) {
          throw new Error(
            `The SandboxRun CRD is not installed in this cluster. Install the CRDs with: kubectl apply --server-side -f crds/ (helm install of charts/codemode-operator installs them too).`,
            { cause: err },
          );
        }
        throw new Error(`Cannot list SandboxRuns in namespace ${ns}: ${apiErrorMessage(err)}`, { cause: err });
      }
      await sessions.start().catch((err: unknown) => {
        throw new Error(
          isNotFound(err)
            ? 'The SandboxSession CRD is not installed in this cluster. Install the CRDs with: kubectl apply --server-side -f crds/ (helm install of charts/codemode-operator installs them too).'
            : `Cannot list SandboxSessions in namespace ${ns}: ${apiErrorMessage(err)}`,
          { cause: err },
        );
      });
      await pods.start();
      // Before any controller: runs and sessions resolve their profile from this cache.
      await profiles.start();
      // Before any controller: sandboxes wait for the policy (the gate), which needs its cache.
      await policies.start();
      // This replica's Lease before it executes anything; and a first look at the others'.
      await liveness.start();
      controller.start();
      sessionController.start();
      poolController.start();
      // Needs the pod informer (the canary's readiness); code waits for its first verdict.
      sandboxCheck?.start();
      await policyChanges?.start();
      // Without the UpstreamServer CRD (e.g. `helm upgrade`, which never updates CRDs) the gateway
      // still runs code; it just has no upstreams until the CRD is applied and it restarts.
      await upstreams.start().catch((err: unknown) => {
        if (!isNotFound(err)) throw new Error(`Cannot list UpstreamServers in namespace ${ns}: ${apiErrorMessage(err)}`, { cause: err });
        log.warn(
          'The UpstreamServer CRD is not installed: code mode has no upstream MCP servers. Apply it (kubectl apply --server-side -f crds/) and restart the gateway.',
        );
        return upstreams.stop();
      });
    },
    async stop(): Promise<void> {
      await policyChanges?.stop();
      await sandboxCheck?.stop();
      await upstreams.stop();
      await poolController.stop();
      controller.stop();
      sessionController.stop();
      slots.admission.close();
      await executor.drain();
      await pools.releaseAll();
      // The calls have ended: their records get a few seconds to reach the API server.
      await audit.stop(AUDIT_FLUSH_MS);
      // Last of the writes: every run this replica executed has its outcome recorded, so the
      // others may now fail whatever it still held.
      await liveness.stop();
      kernels.closeAll();
      await runs.stop();
      await sessions.stop();
      await profiles.stop();
      await pods.stop();
      await policies.stop();
    },
  };
}

function newSandboxChecker(
  config: Config,
  clients: KubeClients,
  pods: PodWatcher,
  policies: NetworkPolicyGuard,
  sandbox: () => SandboxShape,
  runtimeDir: string | undefined,
  log: Logger,
  metrics: Metrics | undefined,
): SandboxChecker {
  const cluster = clients.kc.getCurrentCluster();
  const program = readCanaryProgram(runtimeDir);
  const checkLog = log.child({ component: 'sandbox-check' });
  return new SandboxChecker({
    run: () =>
      runCanary({
        clients,
        pods,
        policies,
        config,
        sandbox,
        program,
        // Read per run: the pod IP is known from the start, but interfaces can change.
        place: { inCluster: cluster?.name === 'inCluster', apiServerUrl: cluster?.server, ownAddresses: ownAddresses() },
        log: checkLog,
      }),
    intervalSeconds: config.sandboxCheckIntervalSeconds,
    accept: config.acceptUnenforced,
    log: checkLog,
    ...(metrics !== undefined && { metrics: metrics.sandboxCheck }),
  });
}
