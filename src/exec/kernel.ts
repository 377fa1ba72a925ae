// A long-lived exec stream to a session kernel's relay (runtime/): requests go in as frames on
// stdin, output and results come back as frames on stdout. The ~60 ms exec set-up is paid once
// per pod and process; a call then costs about a millisecond plus the code's own time.
import { PassThrough, Writable } from 'node:stream';
import type { Exec } from '@kubernetes/client-node';
import type { KernelLanguage } from '../api/v1alpha1/index.js';
import { describeError, exitCodeFromStatus } from './exec.js';
import { FrameDecoder, encodeFrame } from './framing.js';

export const RUNTIME_MOUNT = '/codemode/runtime';
export const KERNEL_SOCKET = '/tmp/.codemode/kernel.sock';

/**
 * The kernel the pod runs as its main process. `prestart` (warm pool pods): the python kernel
 * starts an interpreter ahead for the one transient run the pod may serve.
 */
export function kernelCommand(language: KernelLanguage, options: { prestart?: boolean } = {}): string[] {
  if (language === 'node') return ['node', `${RUNTIME_MOUNT}/node/kernel.js`, '--socket', KERNEL_SOCKET];
  return ['python3', `${RUNTIME_MOUNT}/python/kernel.py`, '--socket', KERNEL_SOCKET, '--language', language, ...(options.prestart ? ['--prestart'] : [])];
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
}

/** A one-shot run (op "run"): the code as a fresh program, for a transient run in a pool pod. */
export interface KernelRunRequest extends KernelExecRequest {
  language: 'python' | 'bash' | 'sh' | 'node';
}

export interface KernelResult {
  status: 'ok' | 'error' | 'timeout' | 'lost';
  stdout: string;
  stderr: string;
  stdoutBytes: number;
  stderrBytes: number;
  truncated: boolean;
  result?: string;
  exitCode?: number;
  error?: { ename: string; evalue: string; traceback: string };
  durationMs: number;
  /** Only for "run": the deadline stopped the program. */
  timedOut?: boolean;
  /** Only for "run": the memory cgroup killed a process during the run. */
  oomKilled?: boolean;
  /** A fork failed at the sandbox's process cap during the call ("run" and "exec"). */
  processLimit?: boolean;
  /** A sandbox volume ("workspace" or "tmp") was full during or at the end of the call. */
  diskFull?: string;
  /** Only for "run": the program's processes still running when it ended (killed then). */
  leftovers?: number;
}

type OutputFrame = { id: string; type: 'output'; stream: 'stdout' | 'stderr'; text: string };
type ResultFrame = KernelResult & { id: string; type: 'result' };
type PongFrame = { id: string; type: 'pong' };

interface Pending {
  resolve(r: ResultFrame | PongFrame): void;
  reject(e: Error): void;
  onOutput?: (stream: 'stdout' | 'stderr', text: string) => void;
  timer: NodeJS.Timeout;
}

/** The connection was lost: the call's outcome is unknown, the session may be gone. */
export class KernelConnectionError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KernelConnectionError';
  }
}

export class KernelConnection {
  private readonly pending = new Map<string, Pending>();
  private readonly decoder = new FrameDecoder();
  private nextId = 1;
  private closedReason: string | undefined;
  private socket: { close(): void } | undefined;

  private constructor(private readonly stdin: PassThrough) {}

  /** Opens the relay exec stream; resolves once the kernel answered a ping. */
  static async open(exec: Exec, namespace: string, pod: string, container: string, language: KernelLanguage, connectTimeoutMs = 15_000): Promise<KernelConnection> {
    const stdin = new PassThrough();
    const conn = new KernelConnection(stdin);
    const stdout = new Writable({
      write(chunk: Buffer, _e, cb): void {
        conn.onData(chunk);
        cb();
      },
    });
    let relayErr = '';
    const stderr = new Writable({
      write(chunk: Buffer, _e, cb): void {
        if (relayErr.length < 2000) relayErr += chunk.toString('utf8');
        cb();
      },
    });
    const ws = await exec
      .exec(namespace, pod, container, relayCommand(language), stdout, stderr, stdin, false, (status) => {
        const { exitCode, error } = exitCodeFromStatus(status);
        conn.fail(`the kernel relay exited (${error ?? `exit code ${exitCode}`})${relayErr ? `: ${relayErr.trim().slice(0, 300)}` : ''}`);
      })
      .catch((err: unknown) => {
        throw new KernelConnectionError(`Cannot reach the session kernel in pod ${namespace}/${pod}: ${describeError(err)}`, { cause: err });
      });
    conn.socket = ws;
    ws.on('close', () => setImmediate(() => conn.fail(`the exec stream closed${relayErr ? `: ${relayErr.trim().slice(0, 300)}` : ''}`)));
    ws.on('error', (e: Error) => conn.fail(`exec stream error: ${e.message}`));
    await conn.ping(connectTimeoutMs);
    return conn;
  }

  get closed(): boolean {
    return this.closedReason !== undefined;
  }

  async ping(timeoutMs = 5_000): Promise<void> {
    await this.send({ op: 'ping' }, timeoutMs);
  }

  /** Runs code in the kernel. Rejects with KernelConnectionError when the stream breaks. */
  exec(req: KernelExecRequest, onOutput?: Pending['onOutput']): Promise<KernelResult> {
    return this.call('exec', req, onOutput);
  }

  /** Runs code as a fresh program (python kernels). Rejects with KernelConnectionError when the stream breaks. */
  run(req: KernelRunRequest, onOutput?: Pending['onOutput']): Promise<KernelResult> {
    return this.call('run', req, onOutput);
  }

  private async call(op: 'exec' | 'run', req: KernelExecRequest, onOutput?: Pending['onOutput']): Promise<KernelResult> {
    // The kernel stops the code at timeoutMs; the extra time covers its grace period.
    const r = (await this.send({ op, ...req }, req.timeoutMs + 15_000, onOutput)) as ResultFrame;
    const { id: _id, type: _type, ...result } = r;
    return result;
  }

  close(): void {
    this.fail('closed by the gateway');
  }

  private send(message: Record<string, unknown>, timeoutMs: number, onOutput?: Pending['onOutput']): Promise<ResultFrame | PongFrame> {
    if (this.closedReason) return Promise.reject(new KernelConnectionError(`Kernel connection is closed: ${this.closedReason}`));
    const id = String(this.nextId++);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new KernelConnectionError(`The session kernel did not answer within ${timeoutMs} ms`));
        // A kernel that misses its own deadline is stuck; this stream can't be trusted any more.
        this.fail('a call did not answer in time');
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, onOutput, timer });
      this.stdin.write(encodeFrame({ ...message, id }));
    });
  }

  private onData(chunk: Buffer): void {
    let frames: unknown[];
    try {
      frames = this.decoder.push(chunk);
    } catch (err) {
      this.fail(describeError(err));
      return;
    }
    for (const f of frames) {
      const frame = f as OutputFrame | ResultFrame | PongFrame;
      const p = this.pending.get(frame.id);
      if (!p) continue;
      if (frame.type === 'output') {
        p.onOutput?.(frame.stream, frame.text);
        continue;
      }
      clearTimeout(p.timer);
      this.pending.delete(frame.id);
      p.resolve(frame);
    }
  }

  private fail(reason: string): void {
    if (this.closedReason) return;
    this.closedReason = reason;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new KernelConnectionError(`Lost the connection to the session kernel: ${reason}`));
      this.pending.delete(id);
    }
    this.stdin.end();
    try {
      this.socket?.close();
    } catch {
      // already closed
    }
  }
}

/** Pauses before the retries of a failed KernelConnection.open. */
const OPEN_RETRY_DELAYS_MS = [200, 800];
/** Only an open that failed this fast is retried. */
const OPEN_RETRY_WITHIN_MS = 5_000;

/** One connection per pod per process, opened on first use and replaced when it breaks. */
export class KernelConnections {
  private readonly conns = new Map<string, Promise<KernelConnection>>();

  constructor(private readonly exec: Exec) {}

  get(namespace: string, pod: string, container: string, language: KernelLanguage): Promise<KernelConnection> {
    const key = `${namespace}/${pod}`;
    const existing = this.conns.get(key);
    if (existing) {
      return existing.then((c) => (c.closed ? this.reopen(key, namespace, pod, container, language) : c));
    }
    return this.reopen(key, namespace, pod, container, language);
  }

  drop(namespace: string, pod: string): void {
    const key = `${namespace}/${pod}`;
    const c = this.conns.get(key);
    this.conns.delete(key);
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
        return await KernelConnection.open(this.exec, namespace, pod, container, language);
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
  }

  private reopen(key: string, namespace: string, pod: string, container: string, language: KernelLanguage): Promise<KernelConnection> {
    const p = this.openRetrying(namespace, pod, container, language);
    this.conns.set(key, p);
    p.catch(() => {
      if (this.conns.get(key) === p) this.conns.delete(key);
    });
    return p;
  }
}
