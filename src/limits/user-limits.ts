// Per-user limits (issue 9): concurrent runs, live sessions and executions per minute of one owner.
// Counted from what every replica sees — the SandboxRun and SandboxSession informer caches,
// filtered by owner — plus what this replica has started that its cache may not show yet, so a
// user cannot pass a limit by spreading calls over replicas. Soft across replicas: two replicas
// admitting in the same instant (before either's object reaches the other's cache, typically
// well under a second) may pass a limit by one each. The decisions are pure (table-tested).
import type { KubernetesObject } from '@kubernetes/client-node';
import { SessionReasons, type Owner } from '../api/v1alpha1/index.js';
import { ANNOTATION_EXECUTOR, AUDIT_EXECUTOR } from '../api/v1alpha1/labels.js';
import { AdmissionError } from './admission.js';

/** CODEMODE_USER_MAX_*; 0 = unlimited. */
export interface UserCaps {
  runs: number;
  sessions: number;
  executionsPerMinute: number;
}

export const RATE_WINDOW_MS = 60_000;

export interface UserUsage {
  /** Transient runs not finished (any replica, kubectl-created ones too). */
  runs: number;
  /** Seconds until the soonest of those reaches its timeout (an upper bound of the wait). */
  nextRunDeadlineSeconds?: number;
  sessions: number;
  /** Seconds until the soonest of the user's sessions expires if it stays idle. */
  nextSessionExpirySeconds?: number;
  /** Executions (runs and session calls) started in the last 60 s. */
  executions: number;
  /** Seconds until the oldest of those leaves the window. */
  oldestExecutionLeavesSeconds?: number;
}

/** What this replica started that the cache may not show yet, by object name. */
export interface LocalUse {
  user: string;
  /** An unfinished transient run. */
  running: boolean;
  /** When the execution started (ms), for the rate; undefined for a session being created. */
  executedAtMs?: number;
  /** A session being created. */
  creatingSession?: boolean;
}

type Obj = KubernetesObject & {
  spec?: { owner?: { user?: unknown }; session?: unknown; timeoutSeconds?: unknown };
  status?: { phase?: unknown; reason?: unknown; startTime?: unknown; expiresAt?: unknown; calls?: unknown };
};

/** The calls an audit record covers (status.calls) as name and start, or undefined for a record of one. */
function recordedCalls(o: Obj): Array<{ name: string; started: number }> | undefined {
  const calls = o.status?.calls;
  if (!Array.isArray(calls)) return undefined;
  return calls.flatMap((c: { name?: unknown; startTime?: unknown }) =>
    typeof c?.name === 'string' ? [{ name: c.name, started: Date.parse(String(c.startTime ?? '')) }] : [],
  );
}

const TERMINAL = new Set(['Succeeded', 'Failed', 'TimedOut']);

/**
 * By spec.owner.user alone, the value the admission policy guards: the owner label is only for
 * `kubectl -l`, and whoever may edit their own objects may remove or change it.
 */
function owns(o: Obj, user: string): boolean {
  return o.spec?.owner?.user === user && !o.metadata?.deletionTimestamp;
}

const secondsUntil = (ms: number, nowMs: number): number => Math.max(0, (ms - nowMs) / 1000);
const soonest = (xs: number[]): number | undefined => (xs.length > 0 ? Math.min(...xs) : undefined);

/** Pure: the user's usage from the caches (`runs`, `sessions`) and this replica's `local` entries. */
export function userUsage(
  runs: readonly KubernetesObject[],
  sessions: readonly KubernetesObject[],
  local: ReadonlyMap<string, LocalUse>,
  user: string,
  nowMs: number,
): UserUsage {
  const running = new Set<string>();
  const executed = new Map<string, number>();
  const deadlines: number[] = [];
  for (const o of runs as readonly Obj[]) {
    if (!owns(o, user)) continue;
    const name = o.metadata?.name ?? '';
    const audit = o.metadata?.annotations?.[ANNOTATION_EXECUTOR] === AUDIT_EXECUTOR;
    // A record of several session calls counts each of them, under the name each was admitted as.
    const calls = (audit && recordedCalls(o)) || [{ name, started: Date.parse(String(o.status?.startTime ?? o.metadata?.creationTimestamp ?? '')) }];
    for (const c of calls) if (!Number.isNaN(c.started) && c.started > nowMs - RATE_WINDOW_MS) executed.set(c.name, c.started);
    if (audit || o.spec?.session !== undefined || TERMINAL.has(String(o.status?.phase))) continue;
    running.add(name);
    const created = Date.parse(String(o.metadata?.creationTimestamp ?? ''));
    if (!Number.isNaN(created)) deadlines.push(created + Number(o.spec?.timeoutSeconds ?? 0) * 1000);
  }
  const live = new Set<string>();
  const expiries: number[] = [];
  for (const s of sessions as readonly Obj[]) {
    // One the controller refused for this limit never started (a SandboxSession applied with
    // kubectl beyond it): it holds nothing, and the controller does not count it either.
    if (!owns(s, user) || (s.status?.phase === 'Failed' && s.status.reason === SessionReasons.UserSessionLimit)) continue;
    live.add(s.metadata?.name ?? '');
    const exp = Date.parse(String(s.status?.expiresAt ?? ''));
    if (!Number.isNaN(exp)) expiries.push(exp);
  }
  for (const [name, l] of local) {
    if (l.user !== user) continue;
    if (l.running) running.add(name);
    if (l.creatingSession) live.add(name);
    if (l.executedAtMs !== undefined && l.executedAtMs > nowMs - RATE_WINDOW_MS && !executed.has(name)) executed.set(name, l.executedAtMs);
  }
  const oldest = soonest([...executed.values()]);
  const nextRun = soonest(deadlines);
  const nextExpiry = soonest(expiries);
  return {
    runs: running.size,
    ...(nextRun !== undefined && { nextRunDeadlineSeconds: secondsUntil(nextRun, nowMs) }),
    sessions: live.size,
    ...(nextExpiry !== undefined && { nextSessionExpirySeconds: secondsUntil(nextExpiry, nowMs) }),
    executions: executed.size,
    ...(oldest !== undefined && { oldestExecutionLeavesSeconds: secondsUntil(oldest + RATE_WINDOW_MS, nowMs) }),
  };
}

/** What the caller wants to start; each is held to the limits that concern it. */
export type UserAction = 'run' | 'session_call' | 'session';

const retryIn = (seconds: number | undefined, fallback: number, max: number): number => Math.min(max, Math.max(1, Math.ceil(seconds ?? fallback)));
/** A run usually ends long before its timeout: retry hints for runs are capped at this. */
const RUN_RETRY_MAX_SECONDS = 10;

/** Pure: the refusal for `action` at `usage`, or undefined when it is within every limit. */
export function userRefusal(action: UserAction, usage: UserUsage, caps: UserCaps): AdmissionError | undefined {
  const subject = action === 'session' ? 'The session was' : action === 'run' ? 'The run was' : 'The call was';
  if (action === 'session') {
    if (caps.sessions === 0 || usage.sessions < caps.sessions) return undefined;
    const retry = retryIn(usage.nextSessionExpirySeconds, 60, 3600);
    return new AdmissionError(
      'user_sessions',
      `${subject} refused for your per-user limit (user_sessions): you have ${usage.sessions} of ${caps.sessions} sessions live across all gateway replicas (CODEMODE_USER_MAX_SESSIONS).`,
      retry,
      `Close a session you no longer need with close_session (list_sessions shows them), or retry in ${retry} seconds${usage.nextSessionExpirySeconds === undefined ? '' : ', when your next idle session expires'}.`,
    );
  }
  if (action === 'run' && caps.runs > 0 && usage.runs >= caps.runs) {
    const retry = retryIn(usage.nextRunDeadlineSeconds, RUN_RETRY_MAX_SECONDS, RUN_RETRY_MAX_SECONDS);
    return new AdmissionError(
      'user_runs',
      `${subject} refused for your per-user limit (user_runs): you have ${usage.runs} of ${caps.runs} runs executing across all gateway replicas (CODEMODE_USER_MAX_RUNS). Nothing was started.`,
      retry,
      `Retry in ${retry} seconds, when one of your runs has finished. Calls in a session (create_session) do not count against this limit.`,
    );
  }
  if (caps.executionsPerMinute > 0 && usage.executions >= caps.executionsPerMinute) {
    const retry = retryIn(usage.oldestExecutionLeavesSeconds, 60, 60);
    return new AdmissionError(
      'user_executions_per_minute',
      `${subject} refused for your per-user limit (user_executions_per_minute): you started ${usage.executions} of ${caps.executionsPerMinute} executions in the last 60 seconds across all gateway replicas (CODEMODE_USER_MAX_EXECUTIONS_PER_MINUTE). Nothing was started.`,
      retry,
      `Retry in ${retry} seconds, when the oldest of them is more than a minute old.`,
    );
  }
  return undefined;
}

/** What admit() holds for this replica until the caches show it. */
export interface Hold {
  /** The run finished or the session exists: the caches count it now. */
  end(): void;
  /** Nothing was started after all: forget it (it does not count for the rate either). */
  cancel(): void;
}

const NO_HOLD: Hold = { end: () => undefined, cancel: () => undefined };

export interface UserLimitsDeps {
  caps: UserCaps;
  namespace: string;
  runs(namespace: string): readonly KubernetesObject[];
  sessions(namespace: string): readonly KubernetesObject[];
  onRefused?(limit: AdmissionError['limit']): void;
  now?(): number;
}

/**
 * The per-user limits of this replica. admit() checks and records in one synchronous step, so two
 * calls of one user on this replica can never both take the last unit.
 */
export class UserLimits {
  private readonly local = new Map<string, LocalUse>();

  constructor(private readonly d: UserLimitsDeps) {}

  /**
   * Admits `action` named `name` (the run, the audit record of the session call, or the session)
   * for `owner`, or throws the AdmissionError. end() ends the local hold of a run or of a session
   * being created (the cache shows it by then); the execution itself stays counted for the minute
   * unless cancel() says nothing was started (refused for capacity, no such session). Callers
   * without an owner (no authentication wiring) are not limited.
   */
  admit(action: UserAction, name: string, owner: Owner | undefined): Hold {
    const { caps } = this.d;
    if (!owner || (caps.runs === 0 && caps.sessions === 0 && caps.executionsPerMinute === 0)) return NO_HOLD;
    const now = this.d.now?.() ?? Date.now();
    this.prune(now);
    const usage = userUsage(this.d.runs(this.d.namespace), this.d.sessions(this.d.namespace), this.local, owner.user, now);
    const refusal = userRefusal(action, usage, caps);
    if (refusal) {
      this.d.onRefused?.(refusal.limit);
      throw refusal;
    }
    const entry: LocalUse = {
      user: owner.user,
      running: action === 'run' && caps.runs > 0,
      ...(action === 'session' ? { creatingSession: caps.sessions > 0 } : caps.executionsPerMinute > 0 && { executedAtMs: now }),
    };
    if (entry.running || entry.creatingSession || entry.executedAtMs !== undefined) this.local.set(name, entry);
    return {
      end: () => {
        entry.running = false;
        entry.creatingSession = false;
        if (entry.executedAtMs === undefined) this.local.delete(name);
      },
      cancel: () => void this.local.delete(name),
    };
  }

  /**
   * Entries that no longer count anywhere go. The map is in insertion (= time) order, so the walk
   * stops at the first execution still in the window: a call costs O(expired), not O(map).
   */
  private prune(now: number): void {
    for (const [name, l] of this.local) {
      if (l.running || l.creatingSession) continue;
      if (l.executedAtMs !== undefined && l.executedAtMs > now - RATE_WINDOW_MS) break;
      this.local.delete(name);
    }
  }
}
