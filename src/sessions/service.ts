// Sessions for the gateway: create (and wait until the interpreter is ready), list, close,
// execute code in the session's kernel through a long-lived exec stream, and file operations.
// The objects come from store.ts, what the gateway writes to their status from activity.ts, and
// one call's way through the kernel's stream from kernel-call.ts.
import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import type { PodFailure } from '../sandbox/pod-failure.js';
import {
  API_VERSION,
  DEFAULT_IDLE_TIMEOUT_SECONDS,
  GROUP,
  LABEL_OWNER,
  Reasons,
  SANDBOXSESSION_KIND,
  SANDBOXSESSION_PLURAL,
  VERSION,
  ownerLabelValue,
  type Owner,
  type SandboxSession,
  type SessionLanguage,
} from '../api/v1alpha1/index.js';
import { LABEL_MANAGED_BY, MANAGED_BY_VALUE } from '../api/v1alpha1/labels.js';
import type { ResilientInformer } from '../kube/informer.js';
import { KernelConnectionError, type CallHandler, type KernelConnections, type KernelResult } from '../exec/kernel.js';
import { NOT_ISOLATED_MESSAGE } from '../exec/frames.js';
import { recallOnce, type StreamBreakOutcome } from '../exec/recall.js';
import { apiErrorMessage, isConflict, isNotFound, statusOf, type KubeClients } from '../kube/clients.js';
import { generateSessionName } from '../sandbox/names.js';
import { workspaceOverText, type MemoryCharge } from '../sandbox/pod-failure.js';
import { listFilesInPod, readFileInPod, writeFileInPod, type Listing } from './files.js';
import { workspacePath } from './paths.js';
import { canSee, toolCallsFor } from './access.js';
import { sessionCapacity } from '../limits/admission.js';
import { quotaExceeded } from '../limits/run-slots.js';
import { SessionTurns, type TurnResult, type WaitResult } from './turns.js';
import { SessionError, SessionNotReadyError, WAITING_CALLS_PER_SESSION, asSessionError, busyError, goneError } from './errors.js';
import { UserRate } from '../limits/user-rate.js';
import { SessionStore } from './store.js';
import { foreignPodMessage, readPod, sessionPod } from './session-pod.js';
import { SessionActivity } from './activity.js';
import { SessionKernel, notAnswering, type SessionKernelDeps } from './kernel-call.js';
import { sessionState, startingUntil } from './state.js';
import { isRefusal, type ProfileRefusal } from '../profiles/catalog.js';
import type { ResolvedProfile } from '../profiles/profile.js';
import type { InstallResult } from '../packages/installer.js';
import type { SessionPackages } from '../packages/session-packages.js';

export type SessionServiceOptions = Pick<
  Config,
  'namespace' | 'outputCapChars' | 'maxFileBytes' | 'sessionMaxIdleTimeoutSeconds' | 'sessionMaxLifetimeSeconds'
> &
  /** adminGroups see and use every session; maxSessions caps live sessions in the namespace. */
  Partial<Pick<Config, 'adminGroups' | 'maxSessions'>> & {
    /** How long create() waits for the interpreter. */
    readonly startupTimeoutSeconds: number;
    /** Told of each create() refused for capacity (metrics). */
    onRefused?(limit: 'sessions'): void;
    /** Told when a call's stream broke after its code was sent, and whether its outcome was read back (metrics). */
    onStreamBroke?(outcome: StreamBreakOutcome): void;
    /** Told how a call that found its session busy waited, and how that ended (metrics). */
    onWaited?(result: WaitResult, seconds: number): void;
    /**
     * The per-user session limit (src/limits/user-limits.ts): throws the refusal, or holds the new
     * name for its owner until the returned function is called.
     */
    admitSession?(name: string, owner: Owner | undefined): { end(): void };
    /** The profiles a session may name (src/profiles): an unknown one is refused before anything is created. */
    profiles?: { resolve(name?: string): ResolvedProfile | ProfileRefusal };
    /** Packages (src/packages): create() with packages and installPackages(); without it both are refused. */
    packages?: Pick<SessionPackages, 'check' | 'install'>;
    /** How long create() also waits when the session installs packages first. */
    packagesTimeoutSeconds?: number;
    /**
     * A sandbox pod of the namespace from the operator's pod cache (undefined: not cached). With
     * it, a session is used only in a pod it owns (session-pod.ts): its status's podName is only a
     * record, which whoever may write sandboxsessions/status could point at another user's pod.
     */
    cachedPod?: (name: string) => V1Pod | undefined;
  };

export interface SessionInfo {
  name: string;
  language: SessionLanguage;
  phase: string;
  idleTimeoutSeconds: number;
  runCount: number;
  lastActivityTime?: string;
  expiresAt?: string;
  message?: string;
}

/** How long close() waits for this replica's cache to see the delete. */
const CLOSE_SEEN_MS = 5000;

export interface SessionCall {
  code: string;
  timeoutSeconds: number;
  stdin?: string;
  /** Answers the code's nested tool calls (code mode); without it they fail as unavailable. */
  onCall?: CallHandler;
  /**
   * The key the kernel keeps the call's result under (1–64 characters, unique to the call), so
   * that a stream broken mid-call can read it back (recallAfterBreak). Default: a random id.
   */
  key?: string;
  /**
   * Until when (ms since the epoch) the call may wait while another call runs in the session
   * (turns.ts). Default: startupTimeoutSeconds from now — as long as a pod may take to start.
   */
  waitUntil?: number;
  /** The caller went away: a call still waiting for its turn gives up (one that started never does). */
  signal?: AbortSignal;
  /**
   * Told when the call waits: for the session to finish another call (once), or for a session
   * still starting to become ready. The caller may tell its user.
   */
  onWait?: (waitSeconds: number, why: SessionWaitCause) => void;
}

/** What a call in a session waits for: the session's running call, or its start. */
export type SessionWaitCause = 'busy' | 'starting';

/** `capChars`: the cap the call ran with, for whoever joins its texts (outcome.ts). */
/** `memory`: when the interpreter was OOM-killed, its limit and the directories whose files count. */
export type SessionCallResult = KernelResult & {
  session: string;
  capChars: number;
  memory?: MemoryCharge;
  /**
   * Set by the gateway only (lostTo), from the pod's own status: the interpreter was OOM-killed or
   * its pod evicted. A kernel's frame can say `lost` with any error name (code in the kernel's
   * process writes frames), so its words never stand for this.
   */
  podFailure?: PodFailure['reason'];
};

export class SessionService {
  private readonly store: SessionStore;
  private readonly activity: SessionActivity;
  private readonly kernel: SessionKernel;
  /** Sessions this process is creating, which the informer may not show yet (session cap). */
  private readonly creating = new Set<string>();
  /** Calls waiting for a busy session, by pod. */
  private readonly turns = new SessionTurns(WAITING_CALLS_PER_SESSION);
  /** API reads of sessions the cache does not show yet, per user: 20 at once, then 10 a second. */
  private readonly reads = new UserRate({ burst: 20, perSecond: 10 });

  constructor(
    private readonly clients: KubeClients,
    informer: ResilientInformer<KubernetesObject>,
    private readonly kernels: KernelConnections,
    private readonly opts: SessionServiceOptions,
    private readonly log: Logger,
    /** The sandbox NetworkPolicy gate: no session code starts while the policy is missing. */
    networkGate?: SessionKernelDeps['networkGate'],
  ) {
    this.store = new SessionStore(clients, informer, opts.namespace);
    this.activity = new SessionActivity(this.store, log);
    this.kernel = new SessionKernel({
      clients,
      kernels,
      namespace: opts.namespace,
      outputCapChars: opts.outputCapChars,
      activity: this.activity,
      log,
      networkGate,
      onStreamBroke: (outcome) => opts.onStreamBroke?.(outcome),
      sessionDeleted: async (s) => {
        const now = await this.store.read(s.metadata.name);
        return now === undefined || now.metadata.deletionTimestamp !== undefined || now.metadata.uid !== s.metadata.uid;
      },
    });
  }

  /**
   * The caller's session as this replica's cache has it or — when the cache has not seen it yet, or
   * still sees it starting (another replica created it a moment ago) — as the API server has it: one
   * read, only on that path. Another user's session is undefined, like a name that does not exist.
   */
  private async current(name: string, caller: Owner | undefined): Promise<SandboxSession | undefined> {
    let s = this.store.get(name);
    const phase = s?.status?.phase;
    // Past the caller's share of API reads (this.reads), the cache's answer stands.
    if (phase !== 'Ready' && phase !== 'Lost' && phase !== 'Failed' && this.reads.take(caller?.user ?? '')) s = await this.store.read(name);
    // A session being deleted is gone for its users already.
    return s && !s.metadata.deletionTimestamp && canSee(s, caller, this.opts.adminGroups ?? []) ? s : undefined;
  }

  private async require(name: string, caller: Owner | undefined): Promise<SandboxSession> {
    const s = await this.current(name, caller);
    if (!s)
      throw new SessionError(
        `There is no session "${name}".`,
        'Call list_sessions to see your sessions, or create_session to start a new one (idle sessions are deleted).',
      );
    return s;
  }

  /** The caller's session, if they have one of this name (from any replica: see current()). */
  async find(name: string, caller?: Owner): Promise<SessionInfo | undefined> {
    const s = await this.current(name, caller);
    return s && !s.metadata.deletionTimestamp ? this.info(s) : undefined;
  }

  info(s: SandboxSession): SessionInfo {
    return {
      name: s.metadata.name,
      language: s.spec.language,
      phase: s.status?.phase ?? 'Pending',
      idleTimeoutSeconds: s.spec.idleTimeoutSeconds,
      runCount: s.status?.runCount ?? 0,
      ...(s.status?.lastActivityTime && { lastActivityTime: s.status.lastActivityTime }),
      ...(s.status?.expiresAt && { expiresAt: s.status.expiresAt }),
      ...(s.status?.message && { message: s.status.message }),
    };
  }

  /** The sessions `caller` may see (access.ts), by name. */
  list(caller?: Owner): SessionInfo[] {
    return this.store
      .list()
      .filter((s) => !s.metadata.deletionTimestamp && canSee(s, caller, this.opts.adminGroups ?? []))
      .map((s) => this.info(s))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  async create(
    language: SessionLanguage,
    idleTimeoutSeconds: number | undefined,
    signal?: AbortSignal,
    owner?: Owner,
    profile?: string,
    packages: readonly string[] = [],
  ): Promise<SessionInfo> {
    const resolved = this.opts.profiles?.resolve(profile);
    if (resolved && isRefusal(resolved)) throw new SessionError(resolved.message, resolved.hint);
    if (packages.length > 0) this.checkPackages(profile, language, packages);
    if (idleTimeoutSeconds !== undefined && idleTimeoutSeconds > this.opts.sessionMaxIdleTimeoutSeconds) {
      throw new SessionError(
        `idle_timeout_seconds=${idleTimeoutSeconds} is above the maximum of ${this.opts.sessionMaxIdleTimeoutSeconds}.`,
        `Use at most ${this.opts.sessionMaxIdleTimeoutSeconds}.`,
      );
    }
    this.checkCapacity();
    const name = generateSessionName();
    const endHold = this.opts.admitSession?.(name, owner);
    this.creating.add(name);
    try {
      return await this.createNamed(name, language, idleTimeoutSeconds, signal, owner, profile, packages);
    } finally {
      this.creating.delete(name);
      endHold?.end();
    }
  }

  /** The session cap, counted from the informer cache every replica shares plus our own creations. */
  private checkCapacity(): void {
    if (this.opts.maxSessions === undefined) return;
    const refusal = sessionCapacity(this.list(), this.creating, this.opts.maxSessions, this.opts.namespace, Date.now());
    if (!refusal) return;
    this.opts.onRefused?.('sessions');
    throw refusal;
  }

  private async createNamed(
    name: string,
    language: SessionLanguage,
    idleTimeoutSeconds: number | undefined,
    signal?: AbortSignal,
    owner?: Owner,
    profile?: string,
    packages: readonly string[] = [],
  ): Promise<SessionInfo> {
    const body = {
      apiVersion: API_VERSION,
      kind: SANDBOXSESSION_KIND,
      metadata: {
        name,
        namespace: this.opts.namespace,
        labels: { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE, ...(owner && { [LABEL_OWNER]: ownerLabelValue(owner.user) }) },
      },
      spec: {
        ...(owner && { owner }),
        ...(profile !== undefined && { profile }),
        language,
        // Always written: the CRD's default (600) is refused where the administrator's maximum is lower.
        idleTimeoutSeconds: idleTimeoutSeconds ?? Math.min(DEFAULT_IDLE_TIMEOUT_SECONDS, this.opts.sessionMaxIdleTimeoutSeconds),
        ...(packages.length > 0 && { packages: [...new Set(packages)] }),
      },
    };
    try {
      await this.clients.custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: this.opts.namespace,
        plural: SANDBOXSESSION_PLURAL,
        body,
      });
    } catch (err) {
      const quota = quotaExceeded(statusOf(err), apiErrorMessage(err));
      if (quota)
        throw new SessionError(
          `The session was refused: the namespace is at its ResourceQuota (${quota}).`,
          'Close a session you no longer need with close_session, or ask the administrator to raise the quota.',
        );
      throw new Error(`Failed to create SandboxSession: ${apiErrorMessage(err)}`, { cause: err });
    }
    // Not in the cache yet right after the create; gone from it once seen: deleted while it started.
    let seen = false;
    let gone = false;
    const s = await this.store.waitUntil(
      name,
      (x) => {
        if (x === undefined) return (gone = seen);
        seen = true;
        return ['Ready', 'Failed', 'Lost'].includes(x.status?.phase ?? '');
      },
      (this.opts.startupTimeoutSeconds + (packages.length > 0 ? (this.opts.packagesTimeoutSeconds ?? 0) : 0)) * 1000 + 5000,
      signal,
    );
    if (gone)
      throw new SessionError(
        `Session ${name} was deleted before it became ready (close_session, kubectl delete, or its maximum lifetime).`,
        'Create a new session.',
      );
    if (!s) throw new SessionError(`Session ${name} did not become ready in time.`, 'Try again later; the cluster may be short of capacity.');
    if (s.status?.phase !== 'Ready')
      throw new SessionError(`Session ${name} could not start: ${s.status?.message ?? 'unknown reason'}`, 'Fix the cause above or ask the administrator.');
    return this.info(s);
  }

  /** Refuses by name what the session's profile would refuse, before anything is created. */
  private checkPackages(profile: string | undefined, language: SessionLanguage, packages: readonly string[]): void {
    if (!this.opts.packages) throw new SessionError('This server cannot install packages.', 'Create the session without packages.');
    try {
      this.opts.packages.check(profile, language, packages);
    } catch (err) {
      throw asSessionError(err);
    }
  }

  /**
   * Installs packages into a Ready session (install_packages): fetched outside the sandbox, copied
   * in over the exec stream (src/packages). What was asked for is then appended to spec.packages,
   * so the session's object lists everything it was given.
   */
  async installPackages(name: string, packages: readonly string[], caller?: Owner): Promise<InstallResult & { session: string }> {
    const s = await this.readySession(name, caller);
    this.checkPackages(s.spec.profile, s.spec.language, packages);
    this.activity.note(s, 0);
    const stopKeepAlive = this.activity.keepAlive(s);
    let r: InstallResult;
    try {
      r = await (this.opts.packages as Pick<SessionPackages, 'install'>).install(s, s.status?.podName as string, packages);
    } catch (err) {
      throw asSessionError(err);
    } finally {
      stopKeepAlive();
    }
    this.activity.note(s, 0);
    await this.store
      .appendPackages(name, packages)
      .catch((err: unknown) => this.log.warn({ sandboxsession: name, err: apiErrorMessage(err) }, 'Installed packages not recorded in spec.packages'));
    return { ...r, session: name };
  }

  async close(name: string, caller?: Owner): Promise<boolean> {
    // Never delete by name alone: a session this replica has not seen yet is read from the API first.
    const s = await this.current(name, caller);
    if (!s) return false;
    try {
      await this.clients.custom.deleteNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: this.opts.namespace,
        plural: SANDBOXSESSION_PLURAL,
        name,
        // The session the caller may close, not whatever holds its name now: the cache's copy
        // can be of one deleted a moment ago, its name since taken by another user's session.
        body: { preconditions: { uid: s.metadata.uid } },
      });
    } catch (err) {
      if (isNotFound(err) || isConflict(err)) return false;
      throw err;
    }
    if (s?.status?.podName) this.kernels.drop(this.opts.namespace, s.status.podName);
    // Until this replica's cache has seen the delete, a call here would still find the session
    // (and its terminating pod's kernel): the reply waits for it (bounded).
    await this.store.waitUntil(name, (x) => x === undefined || x.metadata.deletionTimestamp !== undefined, CLOSE_SEEN_MS);
    return true;
  }

  /** Runs code in the session's interpreter. Rejects with SessionError when it cannot. */
  async execute(name: string, call: SessionCall, onOutput?: (stream: 'stdout' | 'stderr', text: string) => void, caller?: Owner): Promise<SessionCallResult> {
    const asked = Date.now();
    const until = call.waitUntil ?? asked + this.opts.startupTimeoutSeconds * 1000;
    const secondsLeft = (): number => Math.max(0, Math.round((until - Date.now()) / 1000));
    const s = await this.readySession(name, caller, {
      until,
      asked,
      signal: call.signal,
      onWait: call.onWait && ((waitUntil) => call.onWait?.(Math.max(0, Math.round((waitUntil - Date.now()) / 1000)), 'starting')),
    });
    const pod = s.status?.podName as string;
    this.activity.note(s, 0);
    const req = {
      code: call.code,
      timeoutMs: call.timeoutSeconds * 1000,
      ...(call.stdin !== undefined && { stdin: call.stdin }),
      ...(call.key !== undefined && { key: call.key }),
      ...(call.onCall && { onCall: toolCallsFor(s, caller, call.onCall) }),
    };
    let turn: TurnResult<KernelResult>;
    // Whether the last busy answer was a Node kernel's silence (busyError says what that means).
    let silent = false;
    // Waiting for its turn and running: a session in use is not idle, however long the call.
    const stopKeepAlive = this.activity.keepAlive(s);
    try {
      const onWait = call.onWait && ((): void => call.onWait?.(secondsLeft(), 'busy'));
      turn = await this.turns.take(pod, { until, signal: call.signal, onWait }, async () => {
        const r = await this.kernel.send(s, pod, req, until, call.signal, onOutput);
        silent = notAnswering(r);
        return r;
      });
    } catch (err) {
      if (!(err instanceof KernelConnectionError)) throw err;
      return this.kernel.failed(s, pod, err);
    } finally {
      stopKeepAlive();
    }
    if (turn.waitedMs !== undefined) this.opts.onWaited?.('gaveUp' in turn ? turn.gaveUp : 'ran', turn.waitedMs / 1000);
    if ('gaveUp' in turn) throw busyError(name, turn.gaveUp, Math.round((until - asked) / 1000), silent);
    const result = turn.ran;
    if (result.notIsolated)
      throw new SessionError(
        `Session ${name}: ${NOT_ISOLATED_MESSAGE}.`,
        'The session is intact; call again in a moment. If this repeats, tell the administrator: the sandbox NetworkPolicy is not enforced.',
      );
    if (result.status === 'lost') {
      this.kernels.drop(this.opts.namespace, pod);
      await this.activity.markLost(
        s,
        result.diskFull === 'workspace' ? workspaceOverText(undefined) : 'the interpreter is gone (it could not be interrupted at the timeout and was stopped)',
      );
    }
    this.activity.note(s, 1);
    return { ...result, session: name, capChars: this.opts.outputCapChars };
  }

  /**
   * The result of the call sent with `key` to session `name`'s interpreter, read back after the
   * replica that sent it stopped (RunExecutor.recover): answered once that call ends, within
   * `timeoutMs`. Undefined when the session cannot tell: it or its pod is gone, its kernel cannot
   * be reached, or it keeps no result under the key (the call never arrived, or so many later keyed
   * calls came that its result was let go: runtime/PROTOCOL.md, "Recall"). Never starts code.
   * `caller`: whom the call was made for (the run's owner). The session of that name must still
   * be one they may use: one deleted since, its name taken by another user's session, would have
   * that user's kernel answer for the call with any outcome it likes.
   */
  async recall(name: string, key: string, timeoutMs: number, caller?: Owner): Promise<SessionCallResult | undefined> {
    const s = this.store.get(name) ?? (await this.store.read(name).catch(() => undefined));
    const pod = s?.status?.podName;
    if (!s || !pod || !canSee(s, caller, this.opts.adminGroups ?? [])) return undefined;
    if (
      !(await this.checkPod(s).then(
        () => true,
        () => false,
      ))
    )
      return undefined;
    const r = await recallOnce(this.kernel.recallTarget(s, pod, key), timeoutMs);
    return 'result' in r ? { ...r.result, session: name, capChars: this.opts.outputCapChars } : undefined;
  }

  async readFile(name: string, path: string, caller?: Owner): Promise<Buffer> {
    const s = await this.readySession(name, caller);
    this.activity.note(s, 0);
    return readFileInPod(this.clients.exec, this.opts.namespace, s.status?.podName as string, workspacePath(path), this.opts.maxFileBytes);
  }

  async writeFile(name: string, path: string, content: Buffer, caller?: Owner): Promise<number> {
    if (content.length > this.opts.maxFileBytes) {
      throw new SessionError(
        `The content is ${content.length} bytes; the limit is ${this.opts.maxFileBytes}.`,
        'Write smaller files, or generate large data inside the session with execute_code.',
      );
    }
    const s = await this.readySession(name, caller);
    this.activity.note(s, 0);
    return writeFileInPod(this.clients.exec, this.opts.namespace, s.status?.podName as string, workspacePath(path), content);
  }

  async listFiles(name: string, path: string, caller?: Owner): Promise<Listing> {
    const s = await this.readySession(name, caller);
    this.activity.note(s, 0);
    return listFilesInPod(this.clients.exec, this.opts.namespace, s.status?.podName as string, workspacePath(path), 1000);
  }

  /** Refuses a ready session whose status names a pod the session does not own (session-pod.ts). */
  private async checkPod(s: SandboxSession): Promise<void> {
    const cachedPod = this.opts.cachedPod;
    const name = s.status?.podName ?? '';
    if (cachedPod === undefined || name === '') return;
    const found = await sessionPod(s.metadata.uid, cachedPod(name), () => readPod(this.clients.core, this.opts.namespace, name));
    if (found.kind === 'foreign')
      throw new SessionError(
        `Session ${s.metadata.name} cannot be used: ${foreignPodMessage(name)}.`,
        "Create a new session with create_session, and tell the administrator: only the gateway may write SandboxSession status (the chart's owner policy enforces it).",
        { reason: Reasons.ForeignPod },
      );
  }

  /**
   * The caller's session if it is ready. `wait`: a session still starting is waited for until
   * `wait.until`, plus the packages allowance when it installs packages first (startingUntil; the
   * call has not run meanwhile); without it the caller is told to call again.
   */
  private async readySession(
    name: string,
    caller: Owner | undefined,
    wait?: { until: number; asked: number; signal?: AbortSignal | undefined; onWait?: ((until: number) => void) | undefined },
  ): Promise<SandboxSession> {
    let s = await this.require(name, caller);
    if (wait && sessionState(s) === 'starting') {
      const until = startingUntil(wait.until, s, this.opts.packagesTimeoutSeconds);
      wait.onWait?.(until);
      await this.store.waitUntil(name, (x) => x === undefined || sessionState(x) !== 'starting', Math.max(0, until - Date.now()), wait.signal);
      s = await this.require(name, caller);
      if (sessionState(s) === 'starting') {
        throw new SessionNotReadyError(
          wait.signal?.aborted
            ? `The call was cancelled while it waited for session ${name} to start; it did not run.`
            : `Session ${name} was still starting after the ${Math.round((until - wait.asked) / 1000)} s this call could wait; this call did not run.`,
          'Check the session with list_sessions (kubectl describe sbs shows why its pod has not started), then call again.',
        );
      }
    }
    const state = sessionState(s);
    if (state === 'ready') {
      await this.checkPod(s);
      return s;
    }
    if (state === 'gone') throw goneError(name, s.status);
    throw new SessionError(`Session ${name} is still starting.`, 'Wait a moment and call again.');
  }
}
