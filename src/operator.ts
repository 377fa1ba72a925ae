// Wires the Kubernetes side of the process: informers, the run executor and the controller.
// Kept apart from main.ts so tests and benchmarks can start a whole operator in-process.
import { hostname, networkInterfaces } from 'node:os';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { KubernetesListObject, KubernetesObject, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { GROUP, SANDBOXRUN_PLURAL, VERSION } from './api/v1alpha1/index.js';
import type { Config } from './config/index.js';
import { gatewayOptions, type GatewayDeps } from './gateway/types.js';
import { EventRecorder } from './controller/events.js';
import { ResilientInformer } from './controller/informer.js';
import { NetworkPolicyGuard } from './controller/network-policy.js';
import type { ControllerOptions } from './controller/options.js';
import { PodWatcher } from './controller/pod-watcher.js';
import { RunExecutor } from './controller/run-executor.js';
import { SandboxRunController, podSelector } from './controller/run-controller.js';
import { apiErrorMessage, isNotFound, type KubeClients } from './kube/clients.js';
import type { Metrics } from './metrics/registry.js';
import { KubeRunService } from './runs/kube-run-service.js';
import { RuntimeConfigMapGuard } from './controller/runtime-guard.js';
import { SandboxSessionController } from './controller/session-controller.js';
import { KernelConnections } from './exec/kernel.js';
import { findRuntimeDir, readRuntimeFiles } from './sessions/runtime-files.js';
import { SessionService } from './sessions/service.js';
import { LeaderElector } from './controller/leader.js';
import { WarmPool } from './controller/warm-pool.js';
import { WorkQueue } from './controller/workqueue.js';
import { SANDBOXSESSION_PLURAL } from './api/v1alpha1/index.js';
import { runCanary } from './selfcheck/canary-run.js';
import { SandboxChecker } from './selfcheck/checker.js';

export interface Operator {
  identity: string;
  executor: RunExecutor;
  controller: SandboxRunController;
  runService: KubeRunService;
  sessionService: SessionService;
  sessionController: SandboxSessionController;
  /** The sandbox self-check (runtime/selfcheck): absent only when a test turned it off. */
  sandboxCheck: SandboxChecker | undefined;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** What the gateway serves from `operator`: its run and session services and the gateway settings. */
export function gatewayDeps(operator: Operator, config: Config, logger: Logger, process: Pick<GatewayDeps, 'isReady' | 'isDraining' | 'onToolCall' | 'auth'>): GatewayDeps {
  return {
    runService: operator.runService,
    sessions: operator.sessionService,
    logger,
    options: gatewayOptions(config),
    ...(operator.sandboxCheck !== undefined && { sandboxGate: operator.sandboxCheck }),
    ...process,
  };
}

/** Unique per process; the executor annotation on runs this process executes. */
export function newIdentity(): string {
  return `${hostname().slice(0, 40)}-${randomBytes(4).toString('hex')}`;
}

export function controllerOptions(config: Config, identity: string): ControllerOptions {
  return { ...config, images: { ...config.images }, identity };
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
}

export function createOperator(config: Config, clients: KubeClients, log: Logger, metrics?: Metrics, options: OperatorOptions = {}): Operator {
  const identity = newIdentity();
  const opts = controllerOptions(config, identity);
  const ns = config.namespace;
  const runs = new ResilientInformer<KubernetesObject>(
    clients.kc,
    `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${SANDBOXRUN_PLURAL}`,
    () =>
      clients.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL }) as Promise<
        KubernetesListObject<KubernetesObject>
      >,
    log.child({ informer: 'sandboxruns' }),
  );
  const pods = new ResilientInformer<V1Pod>(
    clients.kc,
    `/api/v1/namespaces/${ns}/pods`,
    () => clients.core.listNamespacedPod({ namespace: ns, labelSelector: podSelector() }),
    log.child({ informer: 'pods' }),
    podSelector(),
  );
  const policies = new NetworkPolicyGuard(clients, log);
  const events = new EventRecorder(clients.events, identity, log);
  const podWatcher = new PodWatcher(pods);
  const runtimeDir = findRuntimeDir();
  const sandboxCheck = options.sandboxCheck === false ? undefined : newSandboxChecker(config, clients, podWatcher, policies, runtimeDir, log, metrics);
  const executor = new RunExecutor({
    clients,
    opts,
    pods: podWatcher,
    ...(sandboxCheck !== undefined && { gate: sandboxCheck }),
    policies,
    events,
    log: log.child({ controller: 'sandboxrun' }),
    metrics: metrics?.runs,
  });
  const controller = new SandboxRunController({ clients, opts, log: log.child({ controller: 'sandboxrun' }), executor, runs, pods, metrics });

  const sessions = new ResilientInformer<KubernetesObject>(
    clients.kc,
    `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${SANDBOXSESSION_PLURAL}`,
    () =>
      clients.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXSESSION_PLURAL }) as Promise<
        KubernetesListObject<KubernetesObject>
      >,
    log.child({ informer: 'sandboxsessions' }),
  );
  const runtimeFiles = runtimeDir ? readRuntimeFiles(runtimeDir) : {};
  if (!runtimeDir) log.warn('runtime/ (the session kernels) was not found next to the code: sessions cannot start');
  const runtimeGuard = new RuntimeConfigMapGuard(clients, runtimeFiles, log);
  const kernels = new KernelConnections(clients.exec);
  const pool = new WarmPool({
    kernels,
    clients,
    opts,
    size: runtimeDir ? config.warmPoolSize : 0,
    refillDeferMs: config.warmPoolRefillDeferMs,
    pods,
    policies,
    runtime: runtimeGuard,
    runtimePaths: Object.keys(runtimeFiles),
    log: log.child({ component: 'warm-pool' }),
    onClaim: (r) => metrics?.poolClaim(r),
  });
  // Only the leader keeps the pool at its size; every replica may claim from it.
  const poolQueue = new WorkQueue(async () => {
    const again = elector.isLeader ? await pool.refill() : undefined;
    return { requeueAfterMs: again ?? config.resyncSeconds * 1000 };
  }, { workers: 1, metrics: metrics?.queue('warmpool') });
  const elector = new LeaderElector(clients.coordination, {
    namespace: ns,
    name: 'codemode-operator-leader',
    identity,
    onChange: (leader) => {
      metrics?.leader(leader);
      if (leader) poolQueue.add('pool');
    },
  }, log.child({ component: 'leader-election' }));
  pods.onChange(() => {
    if (elector.isLeader) poolQueue.add('pool');
  });
  executor.setPool(pool, kernels);
  const sessionController = new SandboxSessionController({
    pool,
    clients,
    opts,
    log: log.child({ controller: 'sandboxsession' }),
    sessions,
    pods,
    policies,
    runtime: runtimeGuard,
    runtimePaths: Object.keys(runtimeFiles),
    events,
    metrics,
    ...(sandboxCheck !== undefined && { gate: sandboxCheck }),
  });
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
    },
    log.child({ component: 'sessions' }),
  );
  executor.setSessions(sessionService);

  const runService = new KubeRunService(clients, executor, {
    namespace: ns,
    identity,
    defaultTimeoutSeconds: config.defaultTimeoutSeconds,
    maxTimeoutSeconds: config.maxTimeoutSeconds,
    maxCodeBytes: config.maxCodeBytes,
  }, sessionService);

  return {
    identity,
    executor,
    controller,
    runService,
    sessionService,
    sessionController,
    sandboxCheck,
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
      controller.start();
      sessionController.start();
      if (pool.enabled) elector.start();
      // Needs the pod informer (the canary's readiness); code waits for its first verdict.
      sandboxCheck?.start();
    },
    async stop(): Promise<void> {
      await sandboxCheck?.stop();
      poolQueue.stop();
      await elector.stop();
      controller.stop();
      sessionController.stop();
      await executor.drain();
      kernels.closeAll();
      await runs.stop();
      await sessions.stop();
      await pods.stop();
    },
  };
}

function newSandboxChecker(
  config: Config,
  clients: KubeClients,
  pods: PodWatcher,
  policies: NetworkPolicyGuard,
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
