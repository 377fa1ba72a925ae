// Owns the namespace's deny-all NetworkPolicy: an informer watches it, a level-triggered
// reconcile restores it within moments when it is deleted or its spec or labels are edited, and
// a gate (ensure) lets no sandbox pod be created and no code start while the informer's cache
// does not show the correct policy. The gate's hot path is a cache lookup, never an API call.
//
// Measured on the test cluster (kube-router v2.1.0, 2 shared cores, other suites running;
// bench/netpol-programming.ts): after a delete, a running sandbox pod can reach other pods
// 190-350 ms later; after a re-create it is cut off again 140-430 ms later; an allow-all egress
// edit opens it after 190-500 ms and its undo closes it after 90-240 ms. Deleted and re-created
// at once (50-170 ms apart, as this controller does), the pod still had network for 150-310 ms in
// 3 of 4 tries. A connection opened in such a window survives the restore (kube-router accepts
// established flows). So the gate can only keep code from STARTING while the policy is broken;
// code already running when it is deleted gets a window of a few hundred ms. Independently of
// any of this, kube-router leaves every NEW pod open until its next sync: 190-1380 ms after the
// container started (kube-router issue #873; its --netpol-default-deny, PR #2079, closes that);
// sandbox code starts later (Ready, then an exec), and 12 cold runs probing from their first
// instruction never saw that window on a quiet node — but one did on a loaded one, so the runner
// and the kernels start code only once the pod cannot reach the API server (src/exec/runner.ts).
// The settling wait after a restore is a guess at kube-router's delay (a loaded node can exceed
// it), so for a while after a restore kernel calls also check in their pod (inPodCheck).
import type { V1NetworkPolicy } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { LABEL_MANAGED_BY, MANAGED_BY_VALUE } from '../api/v1alpha1/index.js';
import { apiErrorMessage, isConflict, isNotFound, type KubeClients } from '../kube/clients.js';
import { SANDBOX_NETWORK_POLICY_NAME, buildSandboxNetworkPolicy, restoredPolicy, sandboxPolicyDrift, type PolicyDrift } from '../sandbox/networkpolicy.js';
import { ResilientInformer } from '../kube/informer.js';
import { gateState, inPodCheckDue, lastWrittenMs } from './policy-gate.js';
import { WorkQueue, type QueueMetrics } from './workqueue.js';

/** Why the sandbox NetworkPolicy was restored (a metric label). */
export const POLICY_RESTORE_CAUSES = ['deleted', 'modified'] as const;
export type PolicyRestoreCause = (typeof POLICY_RESTORE_CAUSES)[number];

export interface NetworkPolicyMetrics {
  restored(cause: PolicyRestoreCause): void;
  inPlace(yes: boolean): void;
  queue?: QueueMetrics;
}

export interface NetworkPolicyGuardOptions {
  /** How long ensure() waits for a missing or altered policy to be restored before it fails. */
  gateTimeoutMs?: number;
  /** How long after the policy is (re)created sandboxes still wait for the CNI to program it. */
  settleMs?: number;
  /** How often the cache is checked again without an event (the watch may have missed one). */
  resyncMs?: number;
  /** How long after the policy is (re)created code checks in its pod that it has no network (inPodCheckDue). */
  inPodCheckMs?: number;
}

/** Re-programming took up to 430 ms (measured, above); 2 s leaves room for a loaded node. */
const DEFAULT_SETTLE_MS = 2000;
const DEFAULT_GATE_TIMEOUT_MS = 20_000;
/** Far longer than any re-programming seen, even under load; costs nothing while the policy is left alone. */
const DEFAULT_IN_POD_CHECK_MS = 60_000;
const KEY = 'policy';

/** Sandbox pods cannot start: the policy is missing or altered and was not restored in time. */
export class NetworkPolicyUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NetworkPolicyUnavailableError';
  }
}

export class NetworkPolicyGuard {
  private readonly informer: ResilientInformer<V1NetworkPolicy>;
  private readonly queue: WorkQueue;
  private readonly waiters = new Set<() => void>();
  private readonly desired: V1NetworkPolicy;
  /** When the cache started showing the correct policy (ms since epoch); undefined: it does not. */
  private inPlaceSince: number | undefined;
  /** The resourceVersion last found correct: the hot path skips the comparison for it. */
  private okVersion: string | undefined;
  /** Whether this process ever saw the policy in place: a later create is a restore. */
  private everInPlace = false;
  private lastError: string | undefined;
  /** Counts the times the policy came (back) in place: a pod's check counts for one of them. */
  private epoch = 0;
  /**
   * Pods whose kernel showed, since the policy last came back, that they have no network (pod →
   * epoch). Filled only within inPodCheckDue's window, emptied when it ends or the policy changes.
   */
  private readonly shownIsolated = new Map<string, number>();
  private resync: NodeJS.Timeout | undefined;
  private readonly settleMs: number;
  private readonly gateTimeoutMs: number;
  private readonly inPodCheckMs: number;

  constructor(
    private readonly clients: KubeClients,
    private readonly namespace: string,
    private readonly log: Logger,
    private readonly metrics?: NetworkPolicyMetrics,
    private readonly options: NetworkPolicyGuardOptions = {},
  ) {
    this.desired = buildSandboxNetworkPolicy(namespace);
    this.settleMs = options.settleMs ?? DEFAULT_SETTLE_MS;
    this.gateTimeoutMs = options.gateTimeoutMs ?? DEFAULT_GATE_TIMEOUT_MS;
    this.inPodCheckMs = options.inPodCheckMs ?? DEFAULT_IN_POD_CHECK_MS;
    // Narrowed to the operator's own objects by label; a policy whose label is removed leaves the
    // cache (the watch reports it deleted), the create then meets AlreadyExists and adopts it.
    const selector = `${LABEL_MANAGED_BY}=${MANAGED_BY_VALUE}`;
    this.informer = new ResilientInformer<V1NetworkPolicy>(
      clients.kc,
      `/apis/networking.k8s.io/v1/namespaces/${namespace}/networkpolicies`,
      (cont) => clients.networking.listNamespacedNetworkPolicy({ namespace, labelSelector: selector, ...(cont && { _continue: cont }) }),
      log.child({ informer: 'networkpolicies' }),
      { labelSelector: selector },
    );
    this.queue = new WorkQueue(() => this.reconcile(), {
      workers: 1,
      startPaused: true,
      maxDelayMs: 5000,
      ...(metrics?.queue && { metrics: metrics.queue }),
      onError: (_key, err) => {
        this.lastError = apiErrorMessage(err);
        log.warn({ networkpolicy: this.ref(), err: this.lastError }, 'Reconcile failed; retrying');
      },
    });
    this.informer.onChange((p) => {
      if (p.metadata?.name !== SANDBOX_NETWORK_POLICY_NAME) return;
      this.observe();
      this.queue.add(KEY);
    });
  }

  /** Lists (fills the cache), then reconciles once and keeps watching. */
  async start(): Promise<void> {
    await this.informer.start().catch((err: unknown) => {
      throw new Error(
        `Cannot watch NetworkPolicies in namespace ${this.namespace}: ${apiErrorMessage(err)}. The operator's Role needs get, list, watch, create and update on networkpolicies (see deploy/codemode-operator.yaml).`,
        { cause: err },
      );
    });
    this.observe(true);
    this.metrics?.inPlace(this.inPlaceSince !== undefined);
    this.queue.start();
    this.queue.add(KEY);
    this.resync = setInterval(() => {
      this.observe();
      this.queue.add(KEY);
    }, this.options.resyncMs ?? 30_000);
    this.resync.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.resync);
    this.queue.stop();
    await this.informer.stop();
    this.wake();
  }

  /**
   * The gate: resolves when the informer's cache shows the correct policy (and the CNI has had
   * time to program it), restoring it first if needed; rejects after a bounded wait. A cache
   * lookup when the policy is in place.
   */
  ensure(namespace: string): Promise<void> {
    if (namespace !== this.namespace) {
      return Promise.reject(new NetworkPolicyUnavailableError(`This operator guards sandboxes in namespace ${this.namespace} only, not ${namespace}.`));
    }
    this.observe();
    const state = gateState(this.inPlaceSince, Date.now(), this.settleMs);
    if (state.kind === 'open') return Promise.resolve();
    if (state.kind === 'closed') this.queue.add(KEY);
    return this.waitOpen();
  }

  /**
   * Asked after ensure(), just before code is sent to the kernel of `pod`: whether the kernel must
   * first check that its pod has no network (the policy came back recently and the CNI may still be
   * behind; inPodCheckDue). Undefined when not; otherwise a function to call once the kernel's check
   * passed, after which this pod is not asked again until the policy next comes back (so a session
   * pays one check per restore, not one per call).
   */
  inPodCheck(namespace: string, pod: string): (() => void) | undefined {
    if (namespace !== this.namespace) return () => undefined;
    if (!inPodCheckDue(this.inPlaceSince, Date.now(), this.inPodCheckMs)) {
      this.shownIsolated.clear();
      return undefined;
    }
    if (this.shownIsolated.get(pod) === this.epoch) return undefined;
    const epoch = this.epoch;
    return () => {
      if (this.epoch === epoch && this.inPlaceSince !== undefined) this.shownIsolated.set(pod, epoch);
    };
  }

  /**
   * Called right after ensure() by code that then creates sandbox pods: what to call with each
   * created pod's name. Such a pod starts after the policy was in place and its kernel checks at
   * start that it has no network, so until the policy next comes back its calls need no check.
   */
  createdAfterEnsure(namespace: string): (pod: string) => void {
    const epoch = this.epoch;
    return (pod) => {
      if (namespace !== this.namespace || epoch !== this.epoch || this.inPlaceSince === undefined) return;
      if (inPodCheckDue(this.inPlaceSince, Date.now(), this.inPodCheckMs)) this.shownIsolated.set(pod, epoch);
    };
  }

  private waitOpen(): Promise<void> {
    return new Promise((resolve, reject) => {
      let pause: NodeJS.Timeout | undefined;
      const check = (): void => {
        clearTimeout(pause);
        const state = gateState(this.inPlaceSince, Date.now(), this.settleMs);
        if (state.kind === 'open') return finish();
        // The settling wait ends by time, not by an event.
        if (state.kind === 'wait') pause = setTimeout(check, state.ms);
      };
      const finish = (err?: Error): void => {
        clearTimeout(pause);
        clearTimeout(timer);
        this.waiters.delete(check);
        if (err) reject(err);
        else resolve();
      };
      const timer = setTimeout(() => {
        this.log.error({ networkpolicy: this.ref(), err: this.lastError }, 'NetworkPolicy not in place; refused to start a sandbox');
        finish(
          new NetworkPolicyUnavailableError(
            `The sandbox NetworkPolicy ${this.ref()} is missing or altered and was not restored within ${this.gateTimeoutMs / 1000}s${this.lastError ? ` (${this.lastError})` : ''}; no sandbox starts without it. Try again shortly, or ask the administrator to check the operator's permissions on networkpolicies.`,
          ),
        );
      }, this.gateTimeoutMs);
      this.waiters.add(check);
      check();
    });
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  /** Reads the cache and updates the in-place state; wakes gate waiters when it changed. */
  private observe(initial = false): void {
    const observed = this.informer.get(SANDBOX_NETWORK_POLICY_NAME, this.namespace);
    const version = observed?.metadata?.resourceVersion;
    if (version !== undefined && version === this.okVersion && !observed?.metadata?.deletionTimestamp) return;
    const ok = sandboxPolicyDrift(this.desired, observed) === 'ok';
    const before = this.inPlaceSince;
    if (!ok) {
      this.okVersion = undefined;
      this.inPlaceSince = undefined;
    } else {
      this.okVersion = version;
      // Seen at start-up: in place since it was last written. Seen to come back: since now.
      this.inPlaceSince ??= initial && observed ? lastWrittenMs(observed, Date.now()) : Date.now();
      this.everInPlace = true;
    }
    if (before === undefined && this.inPlaceSince !== undefined) {
      this.epoch++;
      this.shownIsolated.clear();
    }
    if ((before === undefined) !== (this.inPlaceSince === undefined)) {
      this.metrics?.inPlace(ok);
      this.wake();
    }
  }

  /** Level-triggered: compares the cached object with the desired one and converges. */
  async reconcile(): Promise<void> {
    this.observe();
    const observed = this.informer.get(SANDBOX_NETWORK_POLICY_NAME, this.namespace);
    const drift = sandboxPolicyDrift(this.desired, observed);
    if (drift === 'ok') {
      this.lastError = undefined;
      return;
    }
    if (drift === 'missing') await this.create();
    else await this.replace(observed as V1NetworkPolicy, drift);
    this.lastError = undefined;
  }

  private async create(): Promise<void> {
    try {
      await this.clients.networking.createNamespacedNetworkPolicy({ namespace: this.namespace, body: this.desired });
    } catch (err) {
      if (!isConflict(err)) throw new Error(`Failed to create NetworkPolicy ${this.ref()}: ${apiErrorMessage(err)}`, { cause: err });
      // It exists but the cache does not show it (not yet, or its label was removed): adopt it.
      const current = await this.clients.networking.readNamespacedNetworkPolicy({ namespace: this.namespace, name: SANDBOX_NETWORK_POLICY_NAME });
      if (current.metadata?.deletionTimestamp) throw new Error(`NetworkPolicy ${this.ref()} is being deleted; recreating it once it is gone`);
      const drift = sandboxPolicyDrift(this.desired, current);
      if (drift !== 'ok') await this.replace(current, drift);
      return;
    }
    if (this.everInPlace) this.restoredLog('deleted');
    else this.log.info({ networkpolicy: this.ref() }, 'Created NetworkPolicy');
  }

  private async replace(observed: V1NetworkPolicy, drift: Exclude<PolicyDrift, 'ok'>): Promise<void> {
    try {
      await this.clients.networking.replaceNamespacedNetworkPolicy({
        namespace: this.namespace,
        name: SANDBOX_NETWORK_POLICY_NAME,
        body: restoredPolicy(this.desired, observed),
      });
    } catch (err) {
      // Conflict: someone wrote it meanwhile; the informer brings the new version and we retry.
      if (isNotFound(err) || isConflict(err))
        throw new Error(`NetworkPolicy ${this.ref()} changed while being restored: ${apiErrorMessage(err)}`, { cause: err });
      throw new Error(`Failed to restore NetworkPolicy ${this.ref()}: ${apiErrorMessage(err)}`, { cause: err });
    }
    this.restoredLog(drift === 'missing' ? 'deleted' : 'modified');
  }

  private restoredLog(cause: PolicyRestoreCause): void {
    this.metrics?.restored(cause);
    this.log.warn({ networkpolicy: this.ref(), cause }, 'Restored NetworkPolicy');
  }

  private ref(): string {
    return `${this.namespace}/${SANDBOX_NETWORK_POLICY_NAME}`;
  }
}
