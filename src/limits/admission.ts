// Back-pressure: how many sandbox pods one client can make the service start. Runs pass a
// per-replica cap, a namespace-wide cap and a bounded FIFO wait queue; sessions pass a namespace
// cap. Over capacity the caller gets an AdmissionError that says which limit, how full, and when to
// retry — never a hang: a queued call waits at most the queue timeout.
//
// The decisions are pure functions of the load (table-tested); RunAdmission is the small
// semaphore + queue around them. What other replicas execute is read from the informer caches
// every replica shares (othersActive), never from this process's memory.
import { RunRequestError } from './refusal.js';

/** The caps a refusal can name; a closed set (metric label `limit`). */
export const ADMISSION_LIMITS = [
  'replica_runs',
  'namespace_runs',
  'sessions',
  'batch_size',
  'request_bytes',
  'user_request_bytes',
  'user_runs',
  'user_sessions',
  'user_executions_per_minute',
  'user_requests',
] as const;
export type AdmissionLimit = (typeof ADMISSION_LIMITS)[number];

export interface RunCaps {
  /** CODEMODE_MAX_CONCURRENT_RUNS */
  replicaRuns: number;
  /** CODEMODE_MAX_NAMESPACE_RUNS */
  namespaceRuns: number;
  /** CODEMODE_RUN_QUEUE_LENGTH */
  queueLength: number;
  /** CODEMODE_RUN_QUEUE_TIMEOUT_SECONDS */
  queueTimeoutSeconds: number;
}

export interface RunLoad {
  /** Runs this replica executes now. */
  replicaActive: number;
  /** Runs executing in the namespace now, this replica's included. */
  namespaceActive: number;
  /** Calls waiting in this replica's queue. */
  waiting: number;
}

/** How an acquire() ended (metric label `result`): a slot, a capacity refusal, or the caller gone. */
export const QUEUE_WAIT_RESULTS = ['admitted', 'refused', 'cancelled'] as const;
export type QueueWaitResult = (typeof QUEUE_WAIT_RESULTS)[number];

/** Why a refused call did not get a slot. */
export type RefusalCause = 'queue_full' | 'queue_timeout' | 'no_queue';

export type RunDecision = { kind: 'admit' } | { kind: 'wait' } | { kind: 'reject'; limit: AdmissionLimit; cause: RefusalCause };

/** The cap that is reached, the replica's first (it is the one this replica can do nothing about). */
export function fullLimit(load: RunLoad, caps: RunCaps): AdmissionLimit | undefined {
  if (load.replicaActive >= caps.replicaRuns) return 'replica_runs';
  if (load.namespaceActive >= caps.namespaceRuns) return 'namespace_runs';
  return undefined;
}

/**
 * What to do with a call. `atHead`: the call is first in the queue (a newcomer waits behind
 * earlier callers, FIFO). `canWait`: false for callers that must not be queued here (the
 * controller's kubectl-created runs, which wait as Queued objects instead).
 */
export function decideRun(load: RunLoad, caps: RunCaps, call: { atHead: boolean; canWait: boolean }): RunDecision {
  const full = fullLimit(load, caps);
  const behindOthers = !call.atHead && load.waiting > 0;
  if (full === undefined && !behindOthers) return { kind: 'admit' };
  const limit = full ?? 'replica_runs';
  if (call.atHead) return { kind: 'wait' };
  if (!call.canWait) return { kind: 'reject', limit, cause: 'no_queue' };
  if (caps.queueLength === 0) return { kind: 'reject', limit, cause: 'no_queue' };
  if (load.waiting >= caps.queueLength) return { kind: 'reject', limit, cause: 'queue_full' };
  return { kind: 'wait' };
}

/**
 * Seconds after which a retry has a fair chance: the time the queue ahead needs to drain at the
 * observed mean run time, at least 1 s, at most 5 minutes.
 */
export function retryAfterSeconds(load: RunLoad, caps: RunCaps, limit: AdmissionLimit, meanRunSeconds: number): number {
  const slots = limit === 'namespace_runs' ? caps.namespaceRuns : caps.replicaRuns;
  const seconds = Math.ceil((Math.max(meanRunSeconds, 0.1) * (load.waiting + 1)) / Math.max(slots, 1));
  return Math.min(300, Math.max(1, seconds));
}

/** How full the binding cap is, in words ("16 of 16 runs are executing on this replica and 32 are waiting"). */
export function describeRunLoad(load: RunLoad, caps: RunCaps, limit: AdmissionLimit, namespace: string): string {
  const waiting = `${load.waiting} ${load.waiting === 1 ? 'is' : 'are'} waiting`;
  if (limit === 'namespace_runs') {
    return `${load.namespaceActive} of ${caps.namespaceRuns} runs are executing in namespace ${namespace} across all gateway replicas (CODEMODE_MAX_NAMESPACE_RUNS) and ${waiting} on this replica`;
  }
  return `${load.replicaActive} of ${caps.replicaRuns} runs are executing on this gateway replica (CODEMODE_MAX_CONCURRENT_RUNS) and ${waiting}`;
}

const CAUSES: Record<RefusalCause, (caps: RunCaps) => string> = {
  queue_full: (caps) => `The wait queue is full (CODEMODE_RUN_QUEUE_LENGTH=${caps.queueLength}).`,
  queue_timeout: (caps) => `This call waited ${caps.queueTimeoutSeconds} s (CODEMODE_RUN_QUEUE_TIMEOUT_SECONDS) without getting a slot.`,
  no_queue: () => 'Nothing was started.',
};

/** A call refused for capacity: which limit, how full, when to retry. */
export class AdmissionError extends RunRequestError {
  constructor(
    readonly limit: AdmissionLimit,
    message: string,
    readonly retryAfterSeconds: number,
    hint: string,
  ) {
    super(message, hint);
    this.name = 'AdmissionError';
  }
}

export function runRefusal(
  load: RunLoad,
  caps: RunCaps,
  limit: AdmissionLimit,
  cause: RefusalCause,
  namespace: string,
  meanRunSeconds: number,
): AdmissionError {
  const retry = retryAfterSeconds(load, caps, limit, meanRunSeconds);
  return new AdmissionError(
    limit,
    `The run was refused for capacity (${limit}): ${describeRunLoad(load, caps, limit, namespace)}. ${CAUSES[cause](caps)}`,
    retry,
    `Retry in ${retry} seconds. Calls in a session (create_session) do not count against this limit.`,
  );
}

/**
 * The session cap. `nextExpirySeconds`: when the soonest-expiring live session is collected if it
 * stays idle (undefined when unknown). Returns the refusal, or undefined when there is room.
 */
export function sessionRefusal(live: number, cap: number, namespace: string, nextExpirySeconds?: number): AdmissionError | undefined {
  if (live < cap) return undefined;
  const retry = Math.min(3600, Math.max(1, Math.ceil(nextExpirySeconds ?? 60)));
  const when = nextExpirySeconds === undefined ? '' : ', when the next idle session expires';
  return new AdmissionError(
    'sessions',
    `The session was refused for capacity (sessions): ${live} of ${cap} sessions are live in namespace ${namespace} (CODEMODE_MAX_SESSIONS).`,
    retry,
    `Close a session you no longer need with close_session (list_sessions shows them), or retry in ${retry} seconds${when}.`,
  );
}

/**
 * The session cap over what every replica sees (`live`, from the informer cache) plus the sessions
 * this process is creating that the cache may not show yet; the retry hint is when the
 * soonest-expiring session is collected if it stays idle.
 */
export function sessionCapacity(
  live: ReadonlyArray<{ name: string; expiresAt?: string }>,
  creating: Iterable<string>,
  cap: number,
  namespace: string,
  nowMs: number,
): AdmissionError | undefined {
  const names = new Set([...live.map((s) => s.name), ...creating]);
  const expiries = live.map((s) => (s.expiresAt ? (Date.parse(s.expiresAt) - nowMs) / 1000 : NaN)).filter((x) => x > 0);
  return sessionRefusal(names.size, cap, namespace, expiries.length > 0 ? Math.min(...expiries) : undefined);
}

/** A held run slot. release() is idempotent. */
export interface Ticket {
  release(): void;
}

export interface RunAdmissionDeps {
  caps: RunCaps;
  namespace: string;
  /** Runs other replicas execute in the namespace now, from the informer caches. */
  othersActive(): number;
  onReject?(limit: AdmissionLimit): void;
  /** Told the load after every change (gauges). */
  onLoad?(load: RunLoad): void;
  /** Told how each acquire() ended and how long it waited (0 when decided at once). */
  onWait?(result: QueueWaitResult, seconds: number): void;
}

interface Waiter {
  admit(ticket: Ticket): void;
  refuse(err: unknown, result?: QueueWaitResult): void;
}

/** Other replicas' runs end without telling us: while calls wait, the load is looked at this often. */
const RECHECK_MS = 1000;
/** Assumed mean run time before any run finished (for retry hints only). */
const INITIAL_MEAN_RUN_SECONDS = 5;

export class RunAdmission {
  private active = 0;
  private readonly waiting: Waiter[] = [];
  private meanRunSeconds = INITIAL_MEAN_RUN_SECONDS;
  private recheck: NodeJS.Timeout | undefined;
  private readonly capacityListeners: Array<() => void> = [];

  constructor(private readonly d: RunAdmissionDeps) {}

  load(): RunLoad {
    return { replicaActive: this.active, namespaceActive: this.active + this.d.othersActive(), waiting: this.waiting.length };
  }

  /** Called when a slot may be free and nobody waits here (the controller re-queues Queued runs). */
  onCapacity(cb: () => void): void {
    this.capacityListeners.push(cb);
  }

  /**
   * Resolves with a slot, waiting (FIFO) at most the queue timeout; rejects with AdmissionError
   * when over capacity, or with the signal's reason when the caller goes away while waiting.
   */
  acquire(signal?: AbortSignal): Promise<Ticket> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const decision = decideRun(this.load(), this.d.caps, { atHead: false, canWait: true });
    if (decision.kind === 'admit') {
      this.d.onWait?.('admitted', 0);
      return Promise.resolve(this.grant());
    }
    if (decision.kind === 'reject') {
      this.d.onWait?.('refused', 0);
      return Promise.reject(this.refusal(decision.limit, decision.cause));
    }
    const began = performance.now();
    return new Promise<Ticket>((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const i = this.waiting.indexOf(waiter);
        if (i >= 0) this.waiting.splice(i, 1);
        this.changed();
      };
      const waited = (result: QueueWaitResult): void => this.d.onWait?.(result, (performance.now() - began) / 1000);
      const waiter: Waiter = {
        admit: (t) => {
          done();
          waited('admitted');
          resolve(t);
        },
        refuse: (err, result = 'refused') => {
          done();
          waited(result);
          reject(err);
        },
      };
      const onAbort = (): void => waiter.refuse(signal?.reason, 'cancelled');
      const timer = setTimeout(() => {
        const limit = fullLimit(this.load(), this.d.caps) ?? 'replica_runs';
        // Counted while this call is still in the queue, so the message includes it.
        waiter.refuse(this.refusal(limit, 'queue_timeout'));
      }, this.d.caps.queueTimeoutSeconds * 1000);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(waiter);
      this.changed();
    });
  }

  /**
   * A slot now, or why not (never queues here, and never jumps ahead of waiting calls): for the
   * controller's kubectl-created runs, which wait as Queued objects instead.
   */
  tryAcquire(): Ticket | { queued: string; retryAfterSeconds: number } {
    const load = this.load();
    const decision = decideRun(load, this.d.caps, { atHead: false, canWait: false });
    if (decision.kind === 'admit') return this.grant();
    const limit = fullLimit(load, this.d.caps) ?? 'replica_runs';
    return {
      queued: `Waiting for a free run slot: ${describeRunLoad(load, this.d.caps, limit, this.d.namespace)}. The run starts when one is free.`,
      retryAfterSeconds: retryAfterSeconds(load, this.d.caps, limit, this.meanRunSeconds),
    };
  }

  /** The namespace's load may have changed (another replica's run ended): admit who fits now. */
  poke(): void {
    while (this.waiting.length > 0) {
      const decision = decideRun(this.load(), this.d.caps, { atHead: true, canWait: true });
      if (decision.kind !== 'admit') break;
      this.waiting[0]?.admit(this.grant());
    }
    if (this.waiting.length === 0 && fullLimit(this.load(), this.d.caps) === undefined) {
      for (const cb of this.capacityListeners) cb();
    }
  }

  /** Refuses every waiting call (shutdown). */
  close(): void {
    for (const w of [...this.waiting]) w.refuse(this.refusal(fullLimit(this.load(), this.d.caps) ?? 'replica_runs', 'queue_full'));
  }

  private refusal(limit: AdmissionLimit, cause: RefusalCause): AdmissionError {
    this.d.onReject?.(limit);
    return runRefusal(this.load(), this.d.caps, limit, cause, this.d.namespace, this.meanRunSeconds);
  }

  private grant(): Ticket {
    this.active++;
    this.changed();
    const started = performance.now();
    let released = false;
    return {
      release: (): void => {
        if (released) return;
        released = true;
        this.active--;
        // Exponential moving average of slot hold times, for the retry hint.
        this.meanRunSeconds = 0.8 * this.meanRunSeconds + 0.2 * ((performance.now() - started) / 1000);
        this.changed();
        this.poke();
      },
    };
  }

  private changed(): void {
    this.d.onLoad?.(this.load());
    if (this.waiting.length > 0 && !this.recheck) {
      this.recheck = setInterval(() => this.poke(), RECHECK_MS);
      this.recheck.unref();
    } else if (this.waiting.length === 0 && this.recheck) {
      clearInterval(this.recheck);
      this.recheck = undefined;
    }
  }
}
