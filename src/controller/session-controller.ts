// The SandboxSession controller: creates each session's kernel pod, reports whether the
// interpreter is ready, and garbage-collects sessions that are idle or too old. GC is time math
// on the session's status (lastActivityTime) plus requeueAfter — nothing lives only in memory.
import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { Logger } from 'pino';
import {
  API_VERSION,
  CONTROLLER_FIELD_MANAGER,
  DEFAULT_IDLE_TIMEOUT_SECONDS,
  GROUP,
  LABEL_SESSION,
  Reasons,
  SANDBOXSESSION_KIND,
  SANDBOXSESSION_PLURAL,
  SessionReasons,
  VERSION,
  kernelLanguage,
  parseSandboxSession,
  type SandboxSession,
  type SandboxSessionStatus,
} from '../api/v1alpha1/index.js';
import { kernelCommand } from '../exec/kernel.js';
import { apiErrorMessage, isConflict, isNotFound, statusOf, type KubeClients } from '../kube/clients.js';
import type { ControllerMetrics } from './metrics.js';
import { podNameForSession, runLabelValue } from '../sandbox/names.js';
import type { WarmPool } from './warm-pool.js';
import { POOL_LANGUAGE, buildSessionPod, sandboxPodOptions } from '../sandbox/pod.js';
import type { EventRecorder } from '../kube/events.js';
import type { ResilientInformer } from '../kube/informer.js';
import { isPoolPod, readySeconds } from './pool-plan.js';
import type { NetworkPolicyGuard } from './network-policy.js';
import type { SandboxGate } from '../selfcheck/checker.js';
import type { ControllerOptions } from './options.js';
import type { RuntimeConfigMapGuard } from './runtime-guard.js';
import { sessionExpiry } from './session-gc.js';
import { userSessionCapRefusal } from './session-cap.js';
import { controls, foreignPodMessage, readPod, sessionPod } from '../sessions/session-pod.js';
import { computeSessionStatus, controllerOwned, failedStatus, installingStatus, refusedStatus, sessionStatusChanged } from './session-status.js';
import { ObjectLoop } from './object-loop.js';
import { isRefusal, type ProfileRefusal } from '../profiles/catalog.js';
import { builtinProfile, type ResolvedProfile } from '../profiles/profile.js';
import { PackageError } from '../packages/policy.js';
import { InstallSlotsFull } from '../packages/slots.js';
import { describeInstall, type SessionPackages } from '../packages/session-packages.js';
import type { InstallResult } from '../packages/installer.js';
import { SessionInstalls } from './session-installs.js';
import { sessionPodSeconds } from '../sandbox/deadlines.js';
import { podState } from '../sandbox/pod-state.js';

const CONTROLLER = 'sandboxsession';
/** How often a session whose install runs is looked at anyway (its end queues it at once). */
const INSTALL_RECHECK_MS = 30_000;
/** The Event of a session whose interpreter died: why is in its status, which only its readers see. */
export const KERNEL_LOST_NOTE = 'The interpreter is gone; status.message says why. Create a new session.';

export interface SessionControllerDeps {
  clients: KubeClients;
  opts: ControllerOptions;
  log: Logger;
  sessions: ResilientInformer<KubernetesObject>;
  pods: ResilientInformer<V1Pod>;
  policies: NetworkPolicyGuard;
  runtime: RuntimeConfigMapGuard;
  events: EventRecorder;
  metrics?: ControllerMetrics;
  /** The warm pools by profile (pool-set.ts): a python session claims from its profile's. */
  pools?: { pool(profile: string): WarmPool | undefined };
  /** The profiles sessions may name; without it only the built-in profile (the settings in opts). */
  profiles?: { resolve(name?: string): ResolvedProfile | ProfileRefusal };
  now?: () => Date;
  /** The sandbox self-check: no session pod starts while code is refused. */
  gate?: Pick<SandboxGate, 'refusal'>;
  /** Installs spec.packages before a session is Ready (src/packages); without it such sessions fail. */
  packages?: Pick<SessionPackages, 'install'>;
  /**
   * Whether this replica starts spec.packages installs (the leader's does): every replica
   * reconciles every session, and two installs delivering into one session at once race on its
   * files. The others keep the session Pending until its status says how the install went.
   * Without it: this replica installs.
   */
  installsHere?: () => boolean;
}

export class SandboxSessionController {
  private readonly loop: ObjectLoop;
  private readonly now: () => Date;
  private readonly installs: SessionInstalls;

  constructor(private readonly d: SessionControllerDeps) {
    this.now = d.now ?? (() => new Date());
    this.loop = new ObjectLoop(
      {
        controller: CONTROLLER,
        kind: SANDBOXSESSION_KIND,
        workers: 4,
        objects: d.sessions,
        pods: d.pods,
        resyncSeconds: d.opts.resyncSeconds,
        log: d.log,
        metrics: d.metrics,
      },
      (key) => this.reconcile(key),
    );
    this.installs = new SessionInstalls(
      (session, pod, packages) => (this.d.packages ? this.d.packages.install(session, pod, packages) : Promise.reject(new Error('No package installer'))),
      (key) => this.loop.queue.add(key),
    );
  }

  start(): void {
    this.loop.start();
  }

  stop(): void {
    this.loop.stop();
  }

  async reconcile(key: string): Promise<{ requeueAfterMs?: number } | void> {
    const [ns = '', name = ''] = key.split('/');
    const obj = this.d.sessions.get(name, ns);
    if (!obj || obj.metadata?.deletionTimestamp) {
      this.installs.forget(key);
      return;
    }
    const parsed = parseSandboxSession(obj);
    if (!parsed.ok) return this.invalid(obj, parsed.message);
    const session = parsed.session;
    // The install's outcome is in the status this copy shows (Ready, or Failed with its reason): its
    // entry goes. Not when the write lands: a reconcile from an older copy, still Pending, would find
    // no entry and install into the Ready session again.
    if (session.status?.phase !== undefined && session.status.phase !== 'Pending') this.installs.forget(key);
    const now = this.now();
    const { opts } = this.d;
    const exp = sessionExpiry(session, opts.sessionMaxLifetimeSeconds, now);
    if (exp.remainingMs <= 0) {
      // The copy judged expired is the cache's: one changed since (activity another replica wrote
      // a moment ago, not in this cache yet) is judged again from the new copy.
      if (!(await this.collect(session, exp.cause))) return { requeueAfterMs: 100 };
      return;
    }
    // The session's pod: the one its status names once recorded, else one it owns (a claimed pool
    // pod or its own), else the name it would get. Replicas can each claim a pool pod for a new
    // session; the status write is guarded by resourceVersion, so one replica's choice lands and the
    // others reconcile from it — a pod the session owns besides that one lost the race and goes.
    const ownedPods = this.d.pods.list(ns).filter((p) => p.metadata?.ownerReferences?.some((o) => o.controller && o.uid === session.metadata.uid));
    let podName = session.status?.podName ?? ownedPods[0]?.metadata?.name ?? podNameForSession(name);
    const owned = ownedPods.find((p) => p.metadata?.name === podName);
    const terminal = session.status?.phase === 'Lost' || session.status?.phase === 'Failed';
    const extras = session.status?.podName ? ownedPods.filter((p) => p.metadata?.name !== podName && !p.metadata?.deletionTimestamp) : [];
    if (extras.length > 0) {
      // This copy can be older than a status written since (the pod cache shows a claim before the
      // session cache shows the status that recorded it): the pod it calls extra may be the one the
      // session now runs in. Only the API server's status says which one lost.
      const named = await this.livePodName(ns, session);
      if (named !== podName) return { requeueAfterMs: 100 };
      // And the pod it names must be there: gone, a reconcile elsewhere (another replica) may be
      // claiming its replacement — one of these — with its status write still on its way.
      // (A session Lost or Failed claims nothing any more: its extras go.)
      const current = owned ?? (terminal ? undefined : await readPod(this.d.clients.core, ns, podName));
      if (terminal || controls(session.metadata.uid, current)) for (const extra of extras) this.deletePod(ns, extra);
    }
    const invalid = this.checkLimits(session);
    if (invalid) {
      // Judged from this copy, written only onto it (resourceVersion): a spec edited back within
      // the limits since, not in this cache yet, must not fail the session or lose its pod.
      const failed = refusedStatus(session, exp.expiresAt, Reasons.InvalidSpec, invalid, now);
      if (session.status?.phase !== 'Failed' && !(await this.patchExpiring(ns, session, failed, now, session.metadata.resourceVersion)))
        return { requeueAfterMs: 100 };
      // A session that started before its spec was edited past the limits: a Failed session has no
      // pod (no call reaches it), and one left would hold its node's resources to the session's end.
      for (const p of ownedPods) if (!p.metadata?.deletionTimestamp) this.deletePod(ns, p);
      return { requeueAfterMs: exp.remainingMs };
    }
    let pod = owned;
    const named = owned ? undefined : this.d.pods.get(podName, ns);
    // A pod the status names and the cache does not show may only be behind the cache (created or
    // claimed a moment ago): the API server says whether it exists. Taken for gone, it would be
    // replaced by another pod, and the status's podName moved under a session about to be Ready.
    if (named || (!owned && session.status?.podName && !terminal)) {
      // Not the session's by the cache: a claim the cache has not caught up with, or a pod of
      // someone else's under the name (sessionPod): read again before using it, never delete it.
      const found = await sessionPod(session.metadata.uid, named, () => readPod(this.d.clients.core, ns, podName));
      if (found.kind === 'own') pod = found.pod;
      else if (found.kind === 'foreign') return this.foreignPod(session, podName, exp, now);
    }
    let overCap: string | undefined;
    if (!pod && !terminal && session.status?.phase !== 'Ready') {
      const refused = await this.d.gate?.refusal();
      // Refusals below are written onto this copy only (resourceVersion): from an older one (a
      // status that made the session Ready since, not in this cache yet) a refusal would fail a
      // session its user was just told is ready.
      const rv = session.metadata.resourceVersion;
      if (refused !== undefined) {
        const failed = refusedStatus(session, exp.expiresAt, Reasons.SandboxNotEnforced, refused, now);
        return (await this.patchExpiring(ns, session, failed, now, rv)) ? { requeueAfterMs: exp.remainingMs } : { requeueAfterMs: 100 };
      }
      // Once, before the session first gets a phase (a limit lowered later ends no session). A
      // session refused goes on below with no pod, to its Failed status and Event.
      overCap = session.status?.phase === undefined ? userSessionCapRefusal(session, this.d.sessions.list(ns), opts.userMaxSessions) : undefined;
      if (overCap === undefined) {
        const profile = this.d.profiles?.resolve(session.spec.profile) ?? builtinProfile(this.d.opts);
        if (isRefusal(profile)) {
          const failed = refusedStatus(session, exp.expiresAt, Reasons.InvalidSpec, `${profile.message} ${profile.hint}`, now);
          return (await this.patchExpiring(ns, session, failed, now, rv)) ? { requeueAfterMs: exp.remainingMs } : { requeueAfterMs: 100 };
        }
        pod = await this.claimWarm(session, profile.name);
        if (pod?.metadata?.name) podName = pod.metadata.name;
        else pod = await this.createPod(session, podName, profile);
      }
    }

    const created = Date.parse(session.metadata.creationTimestamp ?? now.toISOString());
    const startupLeft = created + opts.podStartupTimeoutSeconds * 1000 - now.getTime();
    if (startupLeft <= 0 && pod && session.status?.phase !== 'Ready' && podState(pod).kind === 'pending') {
      // Failed for not starting in time is judged from the pod as the API server has it: the cache
      // can be behind a pod that became ready (its watch restarting), and the session is then Ready.
      const live = await readPod(this.d.clients.core, ns, podName);
      if (controls(session.metadata.uid, live)) pod = live;
    }
    let next = computeSessionStatus(session, pod, podName, exp.expiresAt, startupLeft <= 0, now);
    if (overCap !== undefined) next = failedStatus(next, SessionReasons.UserSessionLimit, overCap, session.metadata.generation, now);
    let installed: InstallResult | undefined;
    let installing = false;
    if (overCap === undefined && next.phase === 'Ready' && session.status?.phase !== 'Ready' && (session.spec.packages?.length ?? 0) > 0) {
      const r = this.installPackages(key, session, podName, next, now);
      // Installing: Pending until the install ends (which queues the key).
      installing = r === undefined;
      if (r === undefined) next = installingStatus(next, session.metadata.generation, now);
      else ({ next, installed } = r);
    }
    next = this.expiring(session, next, now);
    if (sessionStatusChanged(session.status, next)) {
      // Guarded by resourceVersion: the gateway marks a session Lost (with its reason) while this
      // runs, and a status computed from an older copy must not overwrite that. On a conflict a
      // newer copy exists: reconcile again from it.
      if (!(await this.patchStatus(ns, name, next, session.metadata.resourceVersion))) return { requeueAfterMs: 100 };
      if (installed)
        this.d.events.record(
          { name, namespace: ns, uid: session.metadata.uid, kind: SANDBOXSESSION_KIND },
          'Normal',
          SessionReasons.PackagesInstalled,
          'Install',
          describeInstall(installed, session.spec.packages ?? []),
        );
      // Events tell transitions: a later write to a session already Lost or Failed (a spec edit, a
      // status from an older version) must not report the failure again.
      if ((next.phase === 'Lost' || next.phase === 'Failed') && session.status?.phase !== next.phase) {
        this.d.events.record(
          { name, namespace: ns, uid: session.metadata.uid, kind: SANDBOXSESSION_KIND },
          'Warning',
          next.reason ?? 'Failed',
          'Start',
          // kernelLost quotes the sandbox (a kernel's error text): Events are read by whoever may
          // list them in the namespace, so the note only points at the status.
          session.status?.kernelLost ? KERNEL_LOST_NOTE : (next.message ?? ''),
        );
      } else if (next.phase === 'Ready' && session.status?.phase !== 'Ready') {
        // A pod of its own: creation → Ready as the kubelet reports it (a claim is timed by the pool).
        const coldSeconds = pod && !isPoolPod(pod) ? readySeconds(pod) : undefined;
        if (coldSeconds !== undefined) this.d.metrics?.podStarted('cold', coldSeconds);
        this.d.events.record(
          { name, namespace: ns, uid: session.metadata.uid, kind: SANDBOXSESSION_KIND },
          'Normal',
          SessionReasons.KernelReady,
          'Start',
          `The ${session.spec.language} interpreter is ready in pod ${podName}.`,
        );
      }
    }
    if ((next.phase === 'Lost' || next.phase === 'Failed') && pod) this.deletePod(ns, pod);
    if (installing) return { requeueAfterMs: Math.min(INSTALL_RECHECK_MS, exp.remainingMs) };
    const wake = next.phase === 'Pending' && startupLeft > 0 ? Math.min(startupLeft, exp.remainingMs) : exp.remainingMs;
    return { requeueAfterMs: wake };
  }

  /**
   * spec.packages, once the interpreter is up and before the session is Ready (Ready is the
   * record that they are in: a replica that takes over mid-install installs again, which only
   * rewrites the same files). The install runs beside the workers (session-installs.ts):
   * undefined while it does. A refusal or failure fails the session with the installer's reason.
   */
  private installPackages(
    key: string,
    session: SandboxSession,
    podName: string,
    next: SandboxSessionStatus,
    now: Date,
  ): { next: SandboxSessionStatus; installed?: InstallResult } | undefined {
    const generation = session.metadata.generation;
    if (!this.d.packages) return { next: failedStatus(next, SessionReasons.PackagesFailed, 'This gateway cannot install packages.', generation, now) };
    const done = this.installs.poll(key, session, podName, this.d.installsHere?.() ?? true);
    if (done === undefined) return undefined;
    if (done.ok) return { next, installed: done.result };
    const err = done.error;
    // No install slot free on this replica (other sessions' and users' installs): the packages are
    // not at fault, so it waits and tries again as long as a start with packages may take.
    const created = Date.parse(session.metadata.creationTimestamp ?? now.toISOString());
    const startBudgetMs = (this.d.opts.podStartupTimeoutSeconds + this.d.opts.packagesTimeoutSeconds) * 1000;
    const mayWait = err instanceof InstallSlotsFull && now.getTime() < created + startBudgetMs;
    if (!(err instanceof PackageError) || mayWait) {
      // Retried with the work queue's backoff, as any reconcile that threw: a new install then.
      this.installs.forget(key);
      throw err;
    }
    const reason = err.kind === 'refused' ? SessionReasons.PackagesRefused : SessionReasons.PackagesFailed;
    return { next: failedStatus(next, reason, `${err.message} ${err.hint}`, generation, now) };
  }

  private checkLimits(s: SandboxSession): string | undefined {
    const { opts } = this.d;
    const problems: string[] = [];
    if (s.spec.idleTimeoutSeconds > opts.sessionMaxIdleTimeoutSeconds)
      problems.push(
        `spec.idleTimeoutSeconds=${s.spec.idleTimeoutSeconds} is above the maximum ${opts.sessionMaxIdleTimeoutSeconds}${s.spec.idleTimeoutSeconds === DEFAULT_IDLE_TIMEOUT_SECONDS ? ` (${DEFAULT_IDLE_TIMEOUT_SECONDS} is its default when left out)` : ''}: set it to at most ${opts.sessionMaxIdleTimeoutSeconds}`,
      );
    if ((s.spec.maxLifetimeSeconds ?? 0) > opts.sessionMaxLifetimeSeconds)
      problems.push(`spec.maxLifetimeSeconds=${s.spec.maxLifetimeSeconds} is above the maximum ${opts.sessionMaxLifetimeSeconds}`);
    return problems.length ? `Invalid SandboxSession: ${problems.join('; ')}.` : undefined;
  }

  private async claimWarm(session: SandboxSession, profile: string): Promise<V1Pod | undefined> {
    const { opts } = this.d;
    const pool = this.d.pools?.pool(profile);
    const language = kernelLanguage(session.spec.language);
    if (!pool?.enabled || language !== POOL_LANGUAGE) return undefined;
    const owner = {
      apiVersion: API_VERSION,
      kind: SANDBOXSESSION_KIND,
      name: session.metadata.name,
      uid: session.metadata.uid ?? '',
      controller: true,
      blockOwnerDeletion: true,
    };
    const lifetime = session.spec.maxLifetimeSeconds ?? opts.sessionMaxLifetimeSeconds;
    return pool.claim(owner, { [LABEL_SESSION]: runLabelValue(session.metadata.name) }, sessionPodSeconds(lifetime));
  }

  private async createPod(session: SandboxSession, podName: string, profile: ResolvedProfile): Promise<V1Pod | undefined> {
    const opts = { ...this.d.opts, ...profile.shape };
    const ns = session.metadata.namespace ?? opts.namespace;
    const language = kernelLanguage(session.spec.language);
    await this.d.policies.ensure(ns);
    const isolatedAtStart = this.d.policies.createdAfterEnsure(ns);
    await this.d.runtime.ensure(ns);
    const body = buildSessionPod(
      session,
      // Backstop: the pod cannot outlive the session's maximum lifetime.
      sandboxPodOptions(opts, {
        image: opts.images[language],
        activeDeadlineSeconds: sessionPodSeconds(session.spec.maxLifetimeSeconds ?? opts.sessionMaxLifetimeSeconds),
        profile: profile.name,
      }),
      kernelCommand(language, { preImport: profile.preImport }),
      this.d.runtime.volume,
    );
    try {
      const pod = await this.d.clients.core.createNamespacedPod({ namespace: ns, body });
      isolatedAtStart(podName);
      this.d.log.info({ sandboxsession: `${ns}/${session.metadata.name}`, pod: podName }, 'Created Pod');
      return pod;
    } catch (err) {
      if (statusOf(err) === 409) return undefined; // the informer will show it
      throw new Error(`Failed to create Pod ${ns}/${podName}: ${apiErrorMessage(err)}`, { cause: err });
    }
  }

  /**
   * Deletes the expired session: only the copy that was judged (uid and resourceVersion
   * preconditions), so a session used meanwhile — its lastActivityTime written through another
   * replica after this cache's copy — is not deleted under its user. False when it had changed.
   */
  private async collect(session: SandboxSession, cause: 'idle' | 'lifetime'): Promise<boolean> {
    const ns = session.metadata.namespace ?? '';
    const name = session.metadata.name;
    try {
      await this.d.clients.custom.deleteNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ns,
        plural: SANDBOXSESSION_PLURAL,
        name,
        body: { preconditions: { uid: session.metadata.uid, resourceVersion: session.metadata.resourceVersion } },
      });
    } catch (err) {
      if (isNotFound(err)) return true;
      if (isConflict(err)) return false;
      throw err;
    }
    const reason = cause === 'idle' ? SessionReasons.IdleTimeout : SessionReasons.LifetimeExceeded;
    const why = cause === 'idle' ? `idle for ${session.spec.idleTimeoutSeconds}s` : 'past its maximum lifetime';
    this.d.events.record(
      { name, namespace: ns, uid: session.metadata.uid, kind: SANDBOXSESSION_KIND },
      'Normal',
      reason,
      'Delete',
      `Deleted the session: ${why}.`,
    );
    this.d.metrics?.sessionCollected(cause);
    this.d.log.info({ sandboxsession: `${ns}/${name}`, cause }, 'Deleted idle SandboxSession');
    return true;
  }

  /**
   * A session the API server accepted and the schema refuses (an object of an older, looser CRD,
   * say): Failed once, its pods go, and it is deleted at its maximum lifetime from its creation, as
   * any session is, so it holds no quota for ever.
   */
  private async invalid(obj: KubernetesObject & { status?: { phase?: string; reason?: string } }, message: string): Promise<{ requeueAfterMs: number } | void> {
    const ns = obj.metadata?.namespace ?? '';
    const name = obj.metadata?.name ?? '';
    for (const p of this.d.pods.list(ns)) if (controls(obj.metadata?.uid, p) && !p.metadata?.deletionTimestamp) this.deletePod(ns, p);
    const created = Date.parse(String(obj.metadata?.creationTimestamp ?? ''));
    const left = (Number.isFinite(created) ? created : this.now().getTime()) + this.d.opts.sessionMaxLifetimeSeconds * 1000 - this.now().getTime();
    if (left <= 0) {
      await this.d.clients.custom
        // This object, not one made since under its name (kubectl can reuse names).
        .deleteNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: ns,
          plural: SANDBOXSESSION_PLURAL,
          name,
          ...(obj.metadata?.uid && { body: { preconditions: { uid: obj.metadata.uid } } }),
        })
        .catch((err: unknown) => {
          if (!isNotFound(err) && !isConflict(err)) throw err;
        });
      return;
    }
    if (obj.status?.phase !== 'Failed' || obj.status.reason !== Reasons.InvalidSpec)
      await this.patchStatus(ns, name, { phase: 'Failed', reason: Reasons.InvalidSpec, message });
    return { requeueAfterMs: left };
  }

  /**
   * The pod `podName` exists and is not this session's. Named by its status: the status was
   * written by someone else (the gateway writes only pods a session owns): the session fails, and
   * the pod is left alone. Only the name its own pod would get (a session of the same name, deleted
   * a moment ago, whose pod is not collected yet; or any pod so named): wait for it to go, up to
   * the startup timeout.
   */
  private async foreignPod(
    session: SandboxSession,
    podName: string,
    { expiresAt, remainingMs }: { expiresAt: Date; remainingMs: number },
    now: Date,
  ): Promise<{ requeueAfterMs: number }> {
    const ns = session.metadata.namespace ?? '';
    const name = session.metadata.name;
    const created = Date.parse(session.metadata.creationTimestamp ?? now.toISOString());
    const startupLeft = created + this.d.opts.podStartupTimeoutSeconds * 1000 - now.getTime();
    const named = session.status?.podName === podName;
    if (!named && startupLeft > 0) return { requeueAfterMs: Math.min(1000, remainingMs) };
    const message = named
      ? `Session ${name}: ${foreignPodMessage(podName)}.`
      : `Session ${name} could not start: pod ${podName}, the name of its pod, is taken by a pod it does not own.`;
    if (session.status?.phase !== 'Failed' || session.status.message !== message) {
      await this.patchExpiring(ns, session, refusedStatus(session, expiresAt, Reasons.ForeignPod, message, now), now, session.metadata.resourceVersion);
    }
    return { requeueAfterMs: remainingMs };
  }

  /** The pod the session's status names as the API server has it now (undefined: none, or the session is gone). */
  private async livePodName(namespace: string, session: SandboxSession): Promise<string | undefined> {
    try {
      const live = (await this.d.clients.custom.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: SANDBOXSESSION_PLURAL,
        name: session.metadata.name,
      })) as SandboxSession;
      return live.metadata.uid === session.metadata.uid ? live.status?.podName : undefined;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * Deletes the pod as this controller saw it: by name and uid, so a pod made since under its name
   * (another session's) is never the one deleted (409 then, as gone).
   */
  private deletePod(namespace: string, pod: V1Pod): void {
    const name = pod.metadata?.name ?? '';
    const uid = pod.metadata?.uid;
    this.d.clients.core
      .deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0, ...(uid && { body: { preconditions: { uid } } }) })
      .catch((err: unknown) => {
        if (!isNotFound(err) && !isConflict(err)) this.d.log.warn({ pod: name, err: apiErrorMessage(err) }, 'Failed to delete Pod');
      });
  }

  /**
   * `status` with the expiry it gives the session: when the idle clock starts depends on the phase
   * (none while starting; from the Ready condition's change after), so a status that changes the
   * phase carries its own expiry, not the one of the copy it was computed from (which the next
   * reconcile would otherwise write again).
   */
  private expiring(session: SandboxSession, status: SandboxSessionStatus, now: Date): SandboxSessionStatus {
    const { expiresAt } = sessionExpiry({ ...session, status }, this.d.opts.sessionMaxLifetimeSeconds, now);
    return { ...status, expiresAt: expiresAt.toISOString() };
  }

  /** patchStatus of a status computed for `session`, with the expiry it gives (expiring). */
  private patchExpiring(namespace: string, session: SandboxSession, status: SandboxSessionStatus, now: Date, resourceVersion?: string): Promise<boolean> {
    return this.patchStatus(namespace, session.metadata.name, this.expiring(session, status, now), resourceVersion);
  }

  /**
   * Server-side apply of the fields the controller owns (controllerOwned); the gateway's stay its
   * own. With `resourceVersion` it applies only to that copy: false when the session is gone or
   * changed since (nothing written then), so a status computed from an older copy never lands.
   */
  async patchStatus(namespace: string, name: string, status: SandboxSessionStatus, resourceVersion?: string): Promise<boolean> {
    try {
      await this.d.clients.custom.patchNamespacedCustomObjectStatus(
        {
          group: GROUP,
          version: VERSION,
          namespace,
          plural: SANDBOXSESSION_PLURAL,
          name,
          body: {
            apiVersion: API_VERSION,
            kind: SANDBOXSESSION_KIND,
            metadata: { name, namespace, ...(resourceVersion && { resourceVersion }) },
            status: controllerOwned(status),
          },
          fieldManager: CONTROLLER_FIELD_MANAGER,
          force: true,
        },
        setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
      );
      return true;
    } catch (err) {
      if (isNotFound(err) || (resourceVersion && isConflict(err))) return false;
      throw err;
    }
  }
}
