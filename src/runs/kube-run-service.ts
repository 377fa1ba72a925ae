// RunService on Kubernetes: each execute_code call becomes a SandboxRun object (the record that
// survives restarts and is visible with kubectl), executed by this process's RunExecutor so the
// output can stream back while it runs.
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
import { ANNOTATION_EXECUTOR, LABEL_MANAGED_BY, MANAGED_BY_VALUE } from '../api/v1alpha1/labels.js';
import type { RunExecutor } from '../controller/run-executor.js';
import { apiErrorMessage, statusOf, type KubeClients } from '../kube/clients.js';
import { generateRunName } from '../sandbox/names.js';
import { RunRequestError, type ExecuteOptions, type ExecuteRequest, type RunOutcome, type RunService } from './types.js';
import { kernelLanguage, normalizeLanguage } from '../api/v1alpha1/index.js';
import { SessionError, type SessionService } from '../sessions/service.js';
import { sessionOutcome } from '../sessions/outcome.js';
import { quotaExceeded, type RunSlots } from './run-slots.js';
import type { Ticket } from './admission.js';

export interface KubeRunServiceOptions {
  namespace: string;
  identity: string;
  defaultTimeoutSeconds: number;
  maxTimeoutSeconds: number;
  maxCodeBytes: number;
}

export class KubeRunService implements RunService {
  constructor(
    private readonly clients: KubeClients,
    private readonly executor: RunExecutor,
    private readonly opts: KubeRunServiceOptions,
    private readonly sessions?: SessionService,
    /** Back-pressure: a transient run needs a slot (waits in the queue, or is refused). */
    private readonly slots?: RunSlots,
  ) {}

  async execute(req: ExecuteRequest, options: ExecuteOptions = {}): Promise<RunOutcome> {
    if (req.session !== undefined) return this.executeInSession(req, req.session, options);
    const timeoutSeconds = req.timeoutSeconds ?? this.opts.defaultTimeoutSeconds;
    if (timeoutSeconds > this.opts.maxTimeoutSeconds) {
      throw new RunRequestError(
        `timeout_seconds=${timeoutSeconds} is above the maximum of ${this.opts.maxTimeoutSeconds}.`,
        `Use timeout_seconds of at most ${this.opts.maxTimeoutSeconds}.`,
      );
    }
    const bytes = Buffer.byteLength(req.code, 'utf8');
    if (bytes > this.opts.maxCodeBytes) {
      throw new RunRequestError(
        `The code is ${bytes} bytes; the maximum is ${this.opts.maxCodeBytes}.`,
        'Send smaller code: split the work into several calls or generate data inside the sandbox.',
      );
    }
    const body = {
      apiVersion: API_VERSION,
      kind: SANDBOXRUN_KIND,
      metadata: {
        name: generateRunName(),
        namespace: this.opts.namespace,
        labels: { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE, ...(req.owner && { [LABEL_OWNER]: ownerLabelValue(req.owner.user) }) },
        annotations: { [ANNOTATION_EXECUTOR]: this.opts.identity },
      },
      spec: {
        ...(req.owner && { owner: req.owner }),
        language: req.language,
        code: req.code,
        timeoutSeconds,
        ...(req.stdin !== undefined ? { stdin: req.stdin } : {}),
      },
    };
    // Nothing is created before the call has a slot: a refused call leaves no object behind.
    const ticket = await this.acquire(options.signal);
    let run;
    try {
      run = await this.create(body);
    } catch (err) {
      ticket?.release();
      throw err;
    }
    // Subscribe before the first output can be produced: execute() only starts the work.
    const done = this.executor.execute(run);
    // The slot is held until the run's pod is gone, even when the caller stops waiting.
    if (ticket) this.slots?.releaseAfter(ticket, done, this.opts.namespace, run.metadata.name);
    const unsubscribe = options.onOutput ? this.executor.subscribe(run.metadata.uid ?? '', options.onOutput) : () => undefined;
    try {
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
    } finally {
      unsubscribe();
    }
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

  private async create(body: object): Promise<SandboxRun> {
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
   * A call in a session goes straight to the session's interpreter: no SandboxRun is created (the
   * session's status counts the calls), so the call costs no API write on its path.
   */
  private async executeInSession(req: ExecuteRequest, session: string, options: ExecuteOptions): Promise<RunOutcome> {
    if (!this.sessions) throw new RunRequestError('Sessions are not available on this server.', 'Run the code without a session.');
    const timeoutSeconds = req.timeoutSeconds ?? this.opts.defaultTimeoutSeconds;
    const info = this.sessions.list(req.owner).find((s) => s.name === session);
    if (info && req.language !== 'python' && kernelLanguage(info.language) !== normalizeLanguage(req.language)) {
      throw new RunRequestError(
        `Session ${session} runs ${info.language}, not ${req.language}.`,
        `Send ${info.language} code to this session, or create a ${req.language} session.`,
      );
    }
    try {
      const r = await this.sessions.execute(
        session,
        { code: req.code, timeoutSeconds, ...(req.stdin !== undefined && { stdin: req.stdin }) },
        options.onOutput ? (stream, text) => options.onOutput?.({ stream, text }) : undefined,
        req.owner,
      );
      return sessionOutcome(r, this.opts.namespace, timeoutSeconds);
    } catch (err) {
      if (err instanceof SessionError) throw new RunRequestError(err.message, err.hint);
      throw err;
    }
  }
}
