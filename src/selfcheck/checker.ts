// Runs the sandbox self-check at start and every CODEMODE_SANDBOX_CHECK_INTERVAL_SECONDS, keeps
// the verdict, and is the gate the gateway and the run executor ask before running code:
// refused while a protection is not enforced (unless the administrator accepted that risk),
// not ready (/readyz) until the first check allowed code.
import type { Logger } from 'pino';
import type { CanaryRunResult } from './canary-run.js';
import { SANDBOX_CHECKS, type SandboxCheckName } from '../api/v1alpha1/index.js';
import { CHECK_TITLES, decide, listText, refusalText, type CheckResult, type Verdict } from './evaluate.js';

/** How long a call made before the first verdict waits for it (pod start + the check). */
const FIRST_CHECK_WAIT_MS = 60_000;
/** A check that could not run is retried this soon (at most the interval). */
const RETRY_AFTER_FAILURE_MS = 30_000;
/**
 * After something that can change a verdict (another NetworkPolicy changed), the check runs this
 * soon (a burst of changes is one check), and once more this much later, for a CNI slow to apply it.
 */
const RECHECK_DELAY_MS = 2000;
const RECHECK_AGAIN_MS = 30_000;
/** Shutdown does not wait longer for a check in flight; a later sweep deletes what it leaves. */
const STOP_WAIT_MS = 15_000;

export interface SandboxCheckMetrics {
  accepted(checks: readonly SandboxCheckName[]): void;
  completed(results: readonly CheckResult[], at: Date): void;
  failed(): void;
}

/** What the gateway and the executor need: may code run now, and is the process ready. */
export interface SandboxGate {
  /** undefined when code may run; else the sentence to return. Waits (bounded) for the first verdict. */
  refusal(signal?: AbortSignal): Promise<string | undefined>;
  /** undefined when ready; else why /readyz fails. */
  notReady(): string | undefined;
}

export type SandboxCheckState =
  { kind: 'pending' } | { kind: 'failed'; problem: string } | { kind: 'checked'; results: CheckResult[]; verdict: Verdict; at: Date };

export interface SandboxCheckerDeps {
  run: () => Promise<CanaryRunResult>;
  intervalSeconds: number;
  accept: readonly SandboxCheckName[];
  log: Logger;
  metrics?: SandboxCheckMetrics;
}

export class SandboxChecker implements SandboxGate {
  private state: SandboxCheckState = { kind: 'pending' };
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly settledOnce: Promise<void>;
  private markSettled!: () => void;

  constructor(private readonly d: SandboxCheckerDeps) {
    this.settledOnce = new Promise((r) => (this.markSettled = r));
  }

  /** Every check accepted: nothing can be refused, so code never waits for a verdict. */
  private get acceptsAll(): boolean {
    return SANDBOX_CHECKS.every((c) => this.d.accept.includes(c));
  }

  get status(): SandboxCheckState {
    return this.state;
  }

  start(): void {
    this.d.metrics?.accepted(this.d.accept);
    if (this.d.accept.length > 0) {
      // Said on every start, before any check: the administrator chose to run code without these.
      const summary = `WARNING: CODEMODE_ACCEPT_UNENFORCED=${this.d.accept.join(',')}: code runs even where the cluster does not enforce ${listText(this.d.accept.map((c) => CHECK_TITLES[c]))}.`;
      this.d.log.warn({ event: 'sandbox-check', accepted: this.d.accept, summary }, 'Accepted unenforced sandbox protections');
    }
    this.schedule(0);
  }

  /** Stops the schedule; waits a little for a check in flight (its pods are deleted either way). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.recheckTimer);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.chain, new Promise((r) => (timer = setTimeout(r, STOP_WAIT_MS)))]);
    clearTimeout(timer);
  }

  /** Runs one check now (tests); the periodic schedule goes on as before. */
  async checkNow(): Promise<SandboxCheckState> {
    await this.enqueue();
    return this.state;
  }

  /**
   * Something that can change the verdict happened (a NetworkPolicy other than the operator's own
   * changed): checks in a moment instead of at the next period, and once more a little later.
   */
  recheckSoon(): void {
    if (this.stopped) return;
    clearTimeout(this.recheckTimer);
    this.recheckTimer = setTimeout(() => {
      this.d.log.info({ event: 'sandbox-check' }, 'A NetworkPolicy in the namespace changed: checking the sandbox again');
      // Then the periodic schedule resumes from the follow-up.
      void this.enqueue().finally(() => this.schedule(Math.min(RECHECK_AGAIN_MS, this.d.intervalSeconds * 1000)));
    }, RECHECK_DELAY_MS);
    this.recheckTimer.unref();
  }

  private recheckTimer: NodeJS.Timeout | undefined;

  // Checks never overlap: each one starts pods, and two verdicts racing would be meaningless.
  private chain: Promise<void> = Promise.resolve();
  private lastRunFailed = false;

  private enqueue(): Promise<void> {
    const next = this.chain.then(() => this.once()).catch((err: unknown) => this.d.log.error({ err: String(err) }, 'Sandbox check crashed'));
    this.chain = next;
    return next;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      void this.enqueue().finally(() => {
        const interval = this.d.intervalSeconds * 1000;
        this.schedule(this.lastRunFailed ? Math.min(RETRY_AFTER_FAILURE_MS, interval) : interval);
      });
    }, ms);
    this.timer.unref();
  }

  private async once(): Promise<void> {
    let result: CanaryRunResult;
    try {
      result = await this.d.run();
    } catch (err) {
      result = { ok: false, problem: err instanceof Error ? err.message : String(err) };
    }
    this.lastRunFailed = !result.ok;
    if (result.ok) this.record(result.results);
    else this.recordFailure(result.problem);
    this.markSettled();
  }

  private record(results: CheckResult[]): void {
    const at = new Date();
    const verdict = decide(results, this.d.accept);
    this.state = { kind: 'checked', results, verdict, at };
    this.d.metrics?.completed(results, at);
    const fields = { event: 'sandbox-check', checks: results, refused: verdict.refused, accepted: verdict.accepted, summary: verdict.summary };
    if (!verdict.allowed) this.d.log.error(fields, 'Sandbox check failed: code execution is refused');
    else if (verdict.accepted.length > 0) this.d.log.warn(fields, 'Sandbox check: running code without protections the administrator accepted');
    else this.d.log.info(fields, 'Sandbox check passed');
  }

  private recordFailure(problem: string): void {
    this.d.metrics?.failed();
    // A verdict stays valid until a later check replaces it; only the first check's failure
    // leaves the gateway without one.
    if (this.state.kind !== 'checked') this.state = { kind: 'failed', problem };
    const summary = `Sandbox check could not run: ${problem}.${this.state.kind === 'checked' ? ' The previous result stays in force.' : ' Code execution is refused until it succeeds.'} Retrying.`;
    this.d.log.error({ event: 'sandbox-check', problem, summary }, 'Sandbox check could not run');
  }

  async refusal(signal?: AbortSignal): Promise<string | undefined> {
    if (this.acceptsAll) return undefined;
    if (this.state.kind === 'pending') await this.waitFirst(signal);
    const s = this.state;
    if (s.kind === 'pending') {
      return 'The operator is still verifying that its sandboxes are isolated (its self-check has not finished). Try again in a few seconds.';
    }
    if (s.kind === 'failed') {
      return 'Code execution is disabled on this server: the operator could not verify that its sandboxes are isolated (its self-check could not run). It retries every 30 seconds; if this persists, an administrator should read the operator log.';
    }
    return s.verdict.allowed ? undefined : refusalText(s.verdict.refused);
  }

  notReady(): string | undefined {
    const s = this.state;
    if (s.kind === 'checked')
      return s.verdict.allowed
        ? undefined
        : `the sandbox self-check found protections not enforced by the cluster: ${s.verdict.refused.join(', ')} (see the operator log)`;
    if (this.acceptsAll) return undefined;
    return s.kind === 'pending' ? 'the sandbox self-check has not completed yet' : `the sandbox self-check could not run: ${s.problem}`;
  }

  private async waitFirst(signal?: AbortSignal): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((r) => (timer = setTimeout(r, FIRST_CHECK_WAIT_MS)));
    const aborted = signal ? new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true })) : undefined;
    await Promise.race([this.settledOnce, timeout, ...(aborted ? [aborted] : [])]);
    clearTimeout(timer);
  }
}
