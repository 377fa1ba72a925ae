// RunService on Kubernetes: each execute_code call becomes a SandboxRun object (the record that
// survives restarts and is visible with kubectl), executed by this process's RunExecutor so the
// output can stream back while it runs.
import { randomBytes } from 'node:crypto';
import {
  API_VERSION,
  GROUP,
  LABEL_OWNER,
  SANDBOXRUN_KIND,
  SANDBOXRUN_PLURAL,
  VERSION,
  ownerLabelValue,
  parseSandboxRun,
  type SandboxRun,
} from '../api/v1alpha1/index.js';
import { ANNOTATION_EXECUTOR, ANNOTATION_RECALL_PROOF, LABEL_MANAGED_BY, MANAGED_BY_VALUE } from '../api/v1alpha1/labels.js';
import type { RunExecutor } from './executor.js';
import { apiErrorMessage, statusOf, type KubeClients } from '../kube/clients.js';
import { isQuotaConflict } from '../kube/api-client.js';
import { generateRunName } from '../sandbox/names.js';
import { EventReasons, Reasons, SANDBOXSESSION_KIND } from '../api/v1alpha1/index.js';
import { type ExecuteOptions, type ExecuteRequest, type RunOutcome, type RunService, type SessionCallMetrics } from './types.js';
import { RunRequestError } from '../limits/refusal.js';
import type { Config } from '../config/index.js';
import type { SessionService } from '../sessions/service.js';
import { limitProblems } from '../limits/spec-limits.js';
import { callInSession, sessionCallRequest } from './session-call.js';
import { quotaExceeded, type RunSlots } from '../limits/run-slots.js';
import type { Ticket } from '../limits/admission.js';
import type { UserLimits } from '../limits/user-limits.js';
import type { AuditWriter } from '../audit/writer.js';
import { auditEntry } from '../audit/record.js';
import type { RunCalls, ToolBroker } from '../codemode/broker.js';
import type { EventRecorder, EventTarget } from '../kube/events.js';
import { isRefusal } from '../profiles/catalog.js';
import type { Profiles } from './executor.js';

/** Optional collaborators: per-user limits and the audit writer for session calls. */
export interface KubeRunServiceExtras {
  limits?: UserLimits;
  audit?: AuditWriter;
  /** Code mode: the broker of nested tool calls (absent: no upstream servers). */
  tools?: ToolBroker;
  /** Where a denied tool call is told (a Warning Event on the session or run). */
  events?: EventRecorder;
  /** The profiles a run may name: an unknown one is refused before anything is created. */
  profiles?: Profiles;
}

export type KubeRunServiceOptions = Pick<Config, 'namespace' | 'defaultTimeoutSeconds' | 'maxTimeoutSeconds' | 'maxCodeBytes' | 'maxCpu' | 'maxMemory'> & {
  /** This process's identity (the executor annotation on the runs it executes). */
  readonly identity: string;
  /** Calls in a session create no SandboxRun: their outcomes and output sizes are counted here. */
  readonly metrics?: SessionCallMetrics;
};

export class KubeRunService implements RunService {
  constructor(
    private readonly clients: KubeClients,
    private readonly executor: RunExecutor,
    private readonly opts: KubeRunServiceOptions,
    private readonly sessions?: SessionService,
    /** Back-pressure: a transient run needs a slot (waits in the queue, or is refused). */
    private readonly slots?: RunSlots,
    private readonly extras: KubeRunServiceExtras = {},
  ) {}

  async execute(req: ExecuteRequest, options: ExecuteOptions = {}): Promise<RunOutcome> {
    const timeoutSeconds = req.timeoutSeconds ?? this.opts.defaultTimeoutSeconds;
    // The same limits as a SandboxRun created with kubectl (src/limits/spec-limits.ts).
    const problems = limitProblems({ timeoutSeconds, code: req.code }, this.opts);
    if (problems.length > 0) {
      throw new RunRequestError(problems.map((p) => `${sentence(p.problem)}.`).join(' '), problems.map((p) => `${sentence(p.hint)}.`).join(' '));
    }
    if (req.session !== undefined) {
      if (req.profile !== undefined)
        throw new RunRequestError(
          "profile cannot be combined with session: a session call runs in the session's sandbox.",
          'Leave profile out (the session was created with its profile).',
        );
      return this.executeInSession(req, req.session, timeoutSeconds, options);
    }
    const profile = this.extras.profiles?.resolve(req.profile);
    if (profile && isRefusal(profile)) throw new RunRequestError(profile.message, profile.hint);
    const name = generateRunName();
    let created = false;
    let run: Promise<unknown> | undefined;
    // Per-user limits first: a refused call takes no run slot and leaves no object behind.
    const hold = this.extras.limits?.admit('run', name, req.owner);
    // The hold ends with the run, not with the call: a caller that goes away (while the SandboxRun
    // is being created, before any cache shows it) must not free its place for its next call.
    const settle = (): void => {
      // Refused for capacity or by the quota before anything was created: not an execution.
      if (!created) hold?.cancel();
      hold?.end();
    };
    try {
      return await this.executeTransient(
        req,
        name,
        timeoutSeconds,
        options,
        () => (created = true),
        (done) => (run = done),
      );
    } finally {
      if (run === undefined) settle();
      else void run.then(settle, settle);
    }
  }

  private async executeTransient(
    req: ExecuteRequest,
    name: string,
    timeoutSeconds: number,
    options: ExecuteOptions,
    onCreated: () => void,
    /** Told of the run once its creation began: it settles when the run has ended (or was never created). */
    onRun: (done: Promise<unknown>) => void,
  ): Promise<RunOutcome> {
    const body: SandboxRun = {
      apiVersion: API_VERSION,
      kind: SANDBOXRUN_KIND,
      metadata: {
        name,
        namespace: this.opts.namespace,
        labels: { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE, ...(req.owner && { [LABEL_OWNER]: ownerLabelValue(req.owner.user) }) },
        annotations: { [ANNOTATION_EXECUTOR]: this.opts.identity, [ANNOTATION_RECALL_PROOF]: randomBytes(16).toString('hex') },
      },
      spec: {
        ...(req.owner && { owner: req.owner }),
        language: req.language ?? 'python',
        code: req.code,
        timeoutSeconds,
        ...(req.stdin !== undefined ? { stdin: req.stdin } : {}),
        ...(req.profile !== undefined && { profile: req.profile }),
      },
    };
    // Before anything is created: unknown servers refuse the call.
    let target: EventTarget | undefined;
    const tools = this.toolsFor(req, timeoutSeconds, () => target);
    // Nothing is created before the call has a slot: a refused call leaves no object behind.
    const ticket = await this.acquire(options.signal);
    // The controller leaves the run to this call until the executor has it (or it was never created).
    const endCreating = this.executor.creating(`${this.opts.namespace}/${name}`);
    // Whether the code started before the create's answer: until it is known not to have, a lost
    // answer is looked up for as long as it takes (createOrFind).
    let startedEarly: boolean | undefined;
    const creation = this.createOrFind(body, () => startedEarly === false, timeoutSeconds).then((run) => {
      target = { name: run.metadata.name, namespace: this.opts.namespace, ...(run.metadata.uid !== undefined && { uid: run.metadata.uid }) };
      onCreated();
      return run;
    });
    // The code may start before the create's answer, in this process's reserved pool pod; nothing
    // of it leaves the sandbox before the run exists (executeWhileCreating). The deadline of nested
    // calls counts from here, so pod start-up shortens the time tools may take, never lengthens it.
    const done = this.executor
      .executeWhileCreating(body, creation, endCreating, {
        ...(tools && { calls: tools }),
        ...(options.onOutput && { onOutput: options.onOutput }),
        // Code ran: the call counts against the caller's limits even if its run was never created.
        onStarted: (early) => {
          startedEarly = early;
          if (early) onCreated();
        },
      })
      .then((outcome) => withToolCalls(outcome, tools))
      .finally(() => tools?.close());
    onRun(done);
    // The slot is held until the run's pod is gone, even when the caller stops waiting.
    if (ticket) this.slots?.releaseAfter(ticket, done, this.opts.namespace, name);
    if (!options.signal) return await done;
    // The caller went away: stop waiting. The run itself goes on and records its result.
    const signal = options.signal;
    return await Promise.race([
      done,
      new Promise<never>((_, reject) => {
        if (signal.aborted) reject(signal.reason);
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      }),
    ]);
  }

  private async acquire(signal: AbortSignal | undefined): Promise<Ticket | undefined> {
    if (!this.slots) return undefined;
    try {
      return await this.slots.admission.acquire(signal);
    } catch (err) {
      if (signal?.aborted && !(err instanceof RunRequestError)) {
        throw new RunRequestError('The request was cancelled while it waited for a run slot; nothing was run.', 'Call execute_code again.');
      }
      throw err;
    }
  }

  /**
   * Creates the run, or — when the create's answer was lost (no answer, a server error, a timeout:
   * it may have been stored) — reads until the API server says whether it exists. While the code
   * may have started (executeWhileCreating), it rejects only when the run certainly does not exist:
   * a run that exists unknown to this call would otherwise be left to the controller to start.
   * Once the code is known not to have started (`notStarted`), it gives up after the run's timeout
   * with an error naming the run: if it exists, the controller runs it once, as any run.
   */
  private async createOrFind(body: SandboxRun, notStarted: () => boolean, timeoutSeconds: number): Promise<SandboxRun> {
    try {
      return await this.create(body);
    } catch (err) {
      if (!mayHaveBeenCreated(err)) throw err;
      return await this.findCreated(body.metadata.name, err, notStarted, Date.now() + timeoutSeconds * 1000);
    }
  }

  private async findCreated(name: string, createError: unknown, notStarted: () => boolean, giveUpAt: number): Promise<SandboxRun> {
    for (let attempt = 0; ; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, Math.min(FIND_RETRY_MAX_MS, 100 * 2 ** attempt)));
      let found: unknown;
      try {
        found = await this.clients.custom.getNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: this.opts.namespace,
          plural: SANDBOXRUN_PLURAL,
          name,
        });
      } catch (err) {
        if (statusOf(err) === 404) throw createError;
        if (notStarted() && Date.now() >= giveUpAt) {
          throw new RunRequestError(
            `The API server did not say whether SandboxRun ${this.opts.namespace}/${name} was created (${apiErrorMessage(createError)}); this call did not start it.`,
            `If it was created, it runs once and records its result: kubectl get sandboxrun ${name} -n ${this.opts.namespace}. If not, call execute_code again.`,
          );
        }
        continue; // no answer yet: ask again
      }
      const parsed = parseSandboxRun(found);
      // A run of this name that this process did not create is not this call's.
      if (!parsed.ok || parsed.run.metadata.annotations?.[ANNOTATION_EXECUTOR] !== this.opts.identity) throw createError;
      return parsed.run;
    }
  }

  private async create(body: SandboxRun): Promise<SandboxRun> {
    let created: unknown;
    try {
      created = await this.clients.custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: this.opts.namespace,
        plural: SANDBOXRUN_PLURAL,
        body,
      });
    } catch (err) {
      const quota = quotaExceeded(statusOf(err), apiErrorMessage(err));
      if (quota) {
        throw new RunRequestError(
          `The run was refused: the namespace ${this.opts.namespace} is at its ResourceQuota (${quota}).`,
          'Retry in a minute (finished runs are deleted after their TTL), or ask the administrator to raise the quota.',
        );
      }
      throw new Error(`Failed to create SandboxRun in namespace ${this.opts.namespace}: ${apiErrorMessage(err)}`, { cause: err });
    }
    const parsed = parseSandboxRun(created);
    if (!parsed.ok) throw new Error(`The API server returned an unexpected SandboxRun: ${parsed.message}`);
    return parsed.run;
  }

  /**
   * A call in a session goes straight to the session's interpreter (session-call.ts): no SandboxRun
   * is created before or during it, so the call costs no API write on its path. Its audit record (a
   * finished SandboxRun with spec.session) is queued after the outcome is known and written in the
   * background (src/audit).
   */
  /**
   * The broker of this call's nested tool calls, or undefined when the gateway has no upstreams.
   * Refuses servers the caller may not use. The deadline is the call's: time waiting on upstreams
   * counts against timeout_seconds.
   */
  private toolsFor(req: ExecuteRequest, timeoutSeconds: number, target: () => EventTarget | undefined): RunCalls | undefined {
    const broker = this.extras.tools;
    if (!broker) {
      if (req.servers?.length) throw new RunRequestError('This gateway has no upstream MCP servers: servers cannot be used.', 'Leave servers out.');
      return undefined;
    }
    const unknown = req.servers ? broker.unknownServers(req.servers, req.owner) : [];
    if (unknown.length > 0) {
      const known = broker.serverNames(req.owner);
      throw new RunRequestError(
        `Unknown or unavailable upstream servers: ${unknown.join(', ')}.`,
        `Use some of: ${known.join(', ') || '(none are available to you)'}, or leave servers out for all of them.`,
      );
    }
    const events = this.extras.events;
    const onDenied = (message: string): void => {
      const t = target();
      if (t) events?.record(t, 'Warning', EventReasons.ToolCallDenied, 'CallTool', `Refused a tool call from the code: ${message}`);
    };
    return broker.forRun({
      ...(req.servers && { servers: req.servers }),
      ...(req.owner && { owner: req.owner }),
      deadline: Date.now() + timeoutSeconds * 1000,
      onDenied,
    });
  }

  private async executeInSession(req: ExecuteRequest, session: string, timeoutSeconds: number, options: ExecuteOptions): Promise<RunOutcome> {
    if (!this.sessions) throw new RunRequestError('Sessions are not available on this server.', 'Run the code without a session.');
    // The call's name in its audit record is chosen now: the per-user rate counts this call under
    // it until the record (of this call alone, or listing it among its session's) shows in the cache.
    const recordName = generateRunName();
    const tools = this.toolsFor(req, timeoutSeconds, () => ({ name: session, namespace: this.opts.namespace, kind: SANDBOXSESSION_KIND }));
    const hold = this.extras.limits?.admit('session_call', recordName, req.owner);
    const started = Date.now();
    const call = await callInSession(
      this.sessions,
      this.opts.namespace,
      sessionCallRequest(
        session,
        { ...req, timeoutSeconds },
        {
          ...(tools && { onCall: (frame) => tools.handle(frame) }),
          ...(options.signal && { signal: options.signal }),
          ...(options.onWait && { onWait: options.onWait }),
          // The kernel keeps the call's result under its record's name (a stream broken mid-call reads it back).
          key: recordName,
        },
      ),
      options.onOutput,
    ).finally(() => tools?.close());
    if (!call.ok) {
      // No such session, not ready or busy for as long as the call could wait, or its interpreter
      // lost: the call left no outcome to record. (A call whose code reached the interpreter stays
      // counted: it may have run.)
      if (!call.mayHaveRun) hold?.cancel();
      throw new RunRequestError(call.message, call.hint, true);
    }
    const outcome = withToolCalls(call.outcome, tools);
    const ended = Date.now();
    this.opts.metrics?.output(outcome.stdoutBytes, outcome.stderrBytes);
    this.opts.metrics?.sessionCall(call.runtime, outcome.phase, outcome.reason ?? Reasons.Succeeded, (ended - started) / 1000);
    // After the reply (next turn of the event loop) and only queued (no I/O there either): the
    // record never delays or fails the call.
    const audit = this.extras.audit;
    if (audit) {
      const entry = {
        name: recordName,
        namespace: this.opts.namespace,
        session,
        ...(req.owner && { owner: req.owner }),
        language: req.language ?? call.runtime,
        timeoutSeconds,
        code: req.code,
        startedMs: started,
        endedMs: ended,
        outcome,
      };
      setImmediate(() => audit.record(auditEntry(entry)));
    }
    return outcome;
  }
}

/** The outcome with the counts of its nested tool calls, when it made any. */
function withToolCalls(outcome: RunOutcome, tools: RunCalls | undefined): RunOutcome {
  const summary = tools?.summary();
  return summary && summary.calls > 0 ? { ...outcome, toolCalls: summary } : outcome;
}

/** A problem or hint from spec-limits.ts as the start of a sentence. */
function sentence(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** The longest pause between reads of a run whose create's answer was lost. */
const FIND_RETRY_MAX_MS = 5_000;

/**
 * Whether a failed create may have stored the run all the same: no answer at all, a server error or
 * a timeout. Any other answer (invalid, forbidden, over quota, too many requests) means it was not.
 */
export function mayHaveBeenCreated(err: unknown): boolean {
  if (err instanceof RunRequestError) return false;
  // KubeRunService.create wraps the API client's error (its cause).
  const answer = err instanceof Error && err.cause !== undefined ? err.cause : err;
  const status = statusOf(answer);
  return status === undefined || status >= 500 || status === 408 || (status === 409 && !isQuotaConflict(answer));
}
