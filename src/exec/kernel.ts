// A long-lived exec stream to a session kernel's relay (runtime/): requests go in as frames on
// stdin, output and results come back as frames on stdout. The ~60 ms exec set-up is paid once
// per pod and process; a call then costs about a millisecond plus the code's own time.
import { PassThrough, Writable } from 'node:stream';
import type { Exec } from '@kubernetes/client-node';
import type { KernelLanguage } from '../api/v1alpha1/index.js';
import { describeError, exitCodeFromStatus } from './exec.js';
import { capText, type KernelResult } from './frames.js';
import { isNetworkError, isUpgradeUnavailable } from '../util/network-error.js';
import { KernelConnectionError, KernelStream, KernelUnreachableError, type CallHandler, type OutputListener } from './kernel-stream.js';
import { DEFAULT_DISPLAY_LIMITS, type DisplayLimits } from './display.js';
import { PodReadCharge, READ_MS_PER_MESSAGE, ReadBudget, ReadBudgets, type ReadBudgetKind, type ReadCharge } from './read-budget.js';

export { KernelConnectionError, KernelNoAnswerError, KernelProtocolError, KernelUnreachableError } from './kernel-stream.js';
export type { KernelResult } from './frames.js';
export type { CallHandler } from './kernel-stream.js';

export const RUNTIME_MOUNT = '/codemode/runtime';
export const KERNEL_SOCKET = '/tmp/.codemode/kernel.sock';

/**
 * The kernel the pod runs as its main process. `prestart` (warm pool pods): the python kernel
 * starts an interpreter ahead for the one transient run the pod may serve. `preImport` (a
 * profile's modules): the python kernel imports them into its session interpreter and the
 * prestarted one before any code arrives.
 */
export function kernelCommand(language: KernelLanguage, options: { prestart?: boolean; preImport?: readonly string[] } = {}): string[] {
  if (language === 'node') return ['node', `${RUNTIME_MOUNT}/node/kernel.js`, '--socket', KERNEL_SOCKET];
  return [
    'python3',
    `${RUNTIME_MOUNT}/python/kernel.py`,
    '--socket',
    KERNEL_SOCKET,
    '--language',
    language,
    ...(options.prestart ? ['--prestart'] : []),
    ...(options.preImport?.length ? ['--preimport', options.preImport.join(',')] : []),
  ];
}

/** The relay each gateway process execs once per pod to reach the kernel's socket. */
export function relayCommand(language: KernelLanguage): string[] {
  if (language === 'node') return ['node', `${RUNTIME_MOUNT}/node/relay.js`, KERNEL_SOCKET];
  return ['python3', `${RUNTIME_MOUNT}/python/relay.py`, KERNEL_SOCKET];
}

export interface KernelExecRequest {
  code: string;
  timeoutMs: number;
  capChars: number;
  stdin?: string;
  /** The kernel first checks that its pod has no network, and refuses the call (notIsolated) if it has. */
  netcheck?: boolean;
  /** The call's key (a run's name, a session call's id): the kernel keeps its result under it for a later `recall` (recall()). */
  key?: string;
  /** Kept with the keyed result and shown only in recall answers: they are believed only with it (ANNOTATION_RECALL_PROOF). */
  proof?: string;
}

/** A one-shot run (op "run"): the code as a fresh program, for a transient run in a pool pod. */
export interface KernelRunRequest extends KernelExecRequest {
  language: 'python' | 'bash' | 'sh' | 'node';
}

/** Bytes of the relay's stderr kept for the error message (the relay is in the pod: untrusted). */
const RELAY_STDERR_KEEP = 2000;

/** Runs `fn`, never letting it throw into client-node's websocket handlers (that ends the process). */
function guarded<A extends unknown[]>(stream: KernelStream, fn: (...args: A) => void): (...args: A) => void {
  return (...args: A): void => {
    try {
      fn(...args);
    } catch (err) {
      stream.fail(`the gateway failed to handle the exec stream: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
}

export class KernelConnection {
  private constructor(private readonly stream: KernelStream) {}

  /** Opens the relay exec stream; resolves once the kernel answered a ping. */
  static async open(
    exec: Exec,
    namespace: string,
    pod: string,
    container: string,
    language: KernelLanguage,
    connectTimeoutMs = 15_000,
    displayLimits: DisplayLimits = DEFAULT_DISPLAY_LIMITS,
    /** What its reading time is charged to (src/exec/read-budget.ts): the pod's budget, shared by its successive connections, and its user's. */
    budget: ReadCharge = new PodReadCharge(new ReadBudget()),
    /** Told of each pause of this stream for its budget, in ms (a metric). */
    onPaused?: (ms: number, budget: ReadBudgetKind) => void,
  ): Promise<KernelConnection> {
    const stdin = new PassThrough();
    stdin.on('error', () => undefined); // a write racing the end; the stream is failed anyway
    // The websocket exists only once exec() resolved; a failure before that closes it right after.
    const ws: { socket?: { close(): void; pause(): void; resume(): void; bufferedAmount?: number } } = {};
    let resumeTimer: NodeJS.Timeout | undefined;
    const stream = new KernelStream(
      (frame) => stdin.write(frame),
      () => {
        clearTimeout(resumeTimer);
        stdin.end();
        ws.socket?.close();
      },
      displayLimits,
      undefined,
      // client-node forwards stdin to the websocket at once: what the pod has not taken waits there.
      () => stdin.writableLength + (ws.socket?.bufferedAmount ?? 0),
    );
    const conn = new KernelConnection(stream);
    const stdout = new Writable({
      write(chunk: unknown, _e, cb): void {
        const started = performance.now();
        stream.receive(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
        const { pauseMs, budget: by } = budget.charge(performance.now() - started + READ_MS_PER_MESSAGE);
        // Past its budget the pod waits: the websocket stops reading (what it had read still
        // comes), its writes block, and reading goes on once the time is repaid.
        if (pauseMs > 0 && resumeTimer === undefined && ws.socket && !stream.closed) {
          const socket = ws.socket;
          socket.pause();
          onPaused?.(pauseMs, by);
          resumeTimer = setTimeout(() => {
            resumeTimer = undefined;
            if (!stream.closed) socket.resume();
          }, pauseMs);
        }
        cb();
      },
    });
    let relayErr = '';
    const stderr = new Writable({
      write: (chunk: unknown, _e, cb): void => {
        guarded(stream, () => {
          if (relayErr.length < RELAY_STDERR_KEEP) relayErr += String(chunk).slice(0, RELAY_STDERR_KEEP);
        })();
        cb();
      },
    });
    const relayText = (): string => (relayErr ? `: ${capText(relayErr.trim(), 300).text}` : '');
    const socket = await exec
      .exec(
        namespace,
        pod,
        container,
        relayCommand(language),
        stdout,
        stderr,
        stdin,
        false,
        guarded(stream, (status) => {
          const { exitCode, error } = exitCodeFromStatus(status);
          stream.fail(`the kernel relay exited (${error ?? `exit code ${exitCode}`})${relayText()}`);
        }),
      )
      .catch((err: unknown) => {
        // No answer from the API server at all, or one saying that it or the kubelet cannot serve
        // the exec now (429, 5xx: a kubelet restarting is dialed in vain), vs. an answer such as
        // "pod not found": the kernel may well be alive, so callers must not conclude that it is gone.
        const Failure = isNetworkError(err) || isUpgradeUnavailable(err) ? KernelUnreachableError : KernelConnectionError;
        throw new Failure(`Cannot reach the session kernel in pod ${namespace}/${pod}: ${describeError(err)}`, { cause: err });
      });
    ws.socket = socket;
    if (stream.closed) socket.close();
    socket.on(
      'close',
      guarded(stream, () => setImmediate(guarded(stream, () => stream.fail(`the exec stream closed${relayText()}`)))),
    );
    socket.on(
      'error',
      guarded(stream, (e: Error) => stream.fail(`exec stream error: ${e.message}`)),
    );
    await conn.ping(connectTimeoutMs);
    return conn;
  }

  get closed(): boolean {
    return this.stream.closed;
  }

  /** Why the pod's stream was failed as a protocol breach, if it was. */
  get breach(): string | undefined {
    return this.stream.breach;
  }

  /** The error a call on this closed connection gets. */
  closedError(): KernelConnectionError {
    return this.stream.closedError();
  }

  async ping(timeoutMs = 5_000): Promise<void> {
    await this.stream.request({ op: 'ping' }, 'pong', 0, timeoutMs);
  }

  /** Runs code in the kernel. Rejects with KernelConnectionError when the stream breaks. */
  exec(req: KernelExecRequest, onOutput?: OutputListener, onCall?: CallHandler): Promise<KernelResult> {
    return this.call('exec', req, onOutput, onCall);
  }

  /** Runs code as a fresh program (python kernels). Rejects with KernelConnectionError when the stream breaks. */
  run(req: KernelRunRequest, onOutput?: OutputListener, onCall?: CallHandler): Promise<KernelResult> {
    return this.call('run', req, onOutput, onCall);
  }

  /**
   * The result of the call sent with `key`, read back by a client that did not see it (its stream
   * broke, or its executor stopped): waits while that call still goes on, for at most `timeoutMs`.
   * A result with `notFound` means the kernel keeps no result under the key (src/exec/recall.ts).
   * The kernel's answer is untrusted like any result. `onCall`: the call's code goes on calling
   * tools through this stream from now on (the recall is sent with `tools`; runtime/PROTOCOL.md).
   */
  async recall(key: string, capChars: number, timeoutMs: number, onCall?: CallHandler): Promise<KernelResult> {
    const r = await this.stream.request({ op: 'recall', key, ...(onCall && { tools: true }) }, 'result', capChars, timeoutMs, undefined, onCall);
    return r as KernelResult;
  }

  private async call(op: 'exec' | 'run', req: KernelExecRequest, onOutput?: OutputListener, onCall?: CallHandler): Promise<KernelResult> {
    // The kernel stops the code at timeoutMs; the extra time covers its grace period.
    const r = await this.stream.request({ op, ...req }, 'result', req.capChars, req.timeoutMs + 15_000, onOutput, onCall);
    return r as KernelResult;
  }

  close(): void {
    this.stream.fail('closed by the gateway');
  }
}

/** Pauses before the retries of a failed KernelConnection.open. */
const OPEN_RETRY_DELAYS_MS = [200, 800];
/** Only an open that failed this fast is retried. */
const OPEN_RETRY_WITHIN_MS = 5_000;

/** One connection per pod per process, opened on first use and replaced when it breaks. */
export class KernelConnections {
  private readonly conns = new Map<string, Promise<KernelConnection>>();
  /** The connections that opened (their kernel answered). */
  private readonly opened = new Map<string, KernelConnection>();

  /** Each pod's and each user's reading time, kept across connections while it owes or has spent some. */
  private readonly budgets = new ReadBudgets();
  private readonly live = (key: string): boolean => this.conns.has(key);

  constructor(
    private readonly exec: Exec,
    private readonly displayLimits: DisplayLimits = DEFAULT_DISPLAY_LIMITS,
    private readonly onPaused?: (ms: number, budget: ReadBudgetKind) => void,
  ) {}

  /**
   * The stream to the pod's kernel, opened when there is none or it closed. `user`: the pod runs
   * that user's code (a session's owner; a pool pod once its run is claimed), so its reading is
   * charged to that user's budget as well, shared by all the user's pods.
   */
  get(namespace: string, pod: string, container: string, language: KernelLanguage, user?: string): Promise<KernelConnection> {
    const key = `${namespace}/${pod}`;
    if (user !== undefined) this.budgets.chargeTo(key, user, this.live);
    const existing = this.conns.get(key);
    if (existing) {
      return existing.then((c) => {
        if (!c.closed) return c;
        // A pod that broke the protocol gets no new stream: its session is lost, its run failed.
        if (c.breach !== undefined) throw c.closedError();
        return this.reopen(key, namespace, pod, container, language);
      });
    }
    return this.reopen(key, namespace, pod, container, language);
  }

  /** Whether this process has an open stream to the pod's kernel (the kernel is up and answered). */
  isOpen(namespace: string, pod: string): boolean {
    const c = this.opened.get(`${namespace}/${pod}`);
    return c !== undefined && !c.closed;
  }

  drop(namespace: string, pod: string): void {
    const key = `${namespace}/${pod}`;
    const c = this.conns.get(key);
    this.conns.delete(key);
    this.opened.delete(key);
    void c?.then((conn) => conn.close()).catch(() => undefined);
  }

  /**
   * A failed open is retried a few times: nothing but a ping has reached the kernel then, so a
   * retry cannot run code twice. Under load the kubelet can refuse the first exec into a container
   * it reported Ready a moment earlier ("container not found"); a pod that is really gone fails
   * every attempt.
   */
  private async openRetrying(namespace: string, pod: string, container: string, language: KernelLanguage): Promise<KernelConnection> {
    for (let attempt = 0; ; attempt++) {
      const started = performance.now();
      try {
        return await KernelConnection.open(
          this.exec,
          namespace,
          pod,
          container,
          language,
          undefined,
          this.displayLimits,
          this.budgets.pod(`${namespace}/${pod}`, this.live),
          this.onPaused,
        );
      } catch (err) {
        const delay = OPEN_RETRY_DELAYS_MS[attempt];
        // A kernel that did not answer for seconds is not retried: it is hung, not refused.
        if (!(err instanceof KernelConnectionError) || delay === undefined || performance.now() - started > OPEN_RETRY_WITHIN_MS) throw err;
        await new Promise((r) => setTimeout(r, delay));
      }
    }
  }

  closeAll(): void {
    for (const c of this.conns.values()) void c.then((conn) => conn.close()).catch(() => undefined);
    this.conns.clear();
    this.opened.clear();
  }

  private reopen(key: string, namespace: string, pod: string, container: string, language: KernelLanguage): Promise<KernelConnection> {
    const p = this.openRetrying(namespace, pod, container, language);
    this.conns.set(key, p);
    this.opened.delete(key);
    p.then(
      (c) => {
        if (this.conns.get(key) === p) this.opened.set(key, c);
      },
      () => {
        if (this.conns.get(key) === p) this.conns.delete(key);
      },
    );
    return p;
  }
}
