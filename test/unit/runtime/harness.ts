// Test harness for the session kernels (runtime/): starts a kernel as a local process on a temp
// UNIX socket and talks to it exactly as the gateway does in a pod: through a relay process's
// stdin/stdout, with the framing of runtime/PROTOCOL.md.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { FrameDecoder, encodeFrame } from '../../../src/exec/framing.js';

export const RUNTIME_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../../runtime');
export type Language = 'python' | 'bash' | 'node';

export interface OutputFrame {
  id: string;
  type: 'output';
  stream: 'stdout' | 'stderr';
  text: string;
}

export interface ResultFrame {
  id: string;
  type: 'result';
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
  /** The call arrived while another ran and did not start. */
  busy?: boolean;
  /** A call with netcheck found the network reachable and did not start. */
  notIsolated?: boolean;
  /** A recall of a key the kernel never ran. */
  notFound?: boolean;
}

export interface PongFrame {
  id: string;
  type: 'pong';
  language: string;
  busy: boolean;
}

/** A display item (images, HTML, tables) of a call, sent before its result. */
export interface DisplayFrame {
  id: string;
  type: 'display';
  kind: 'image' | 'text';
  mime?: string;
  data?: string;
  path?: string;
  format?: string;
  text?: string;
}

/** A reply with the output and display frames that preceded it, outputs stamped with their arrival time (ms). */
export interface Reply<T> {
  frame: T;
  outputs: Array<OutputFrame & { at: number }>;
  displays: DisplayFrame[];
  at: number;
}

export interface ExecOptions {
  timeoutMs?: number;
  capChars?: number;
  stdin?: string;
  /** Check first that the network cannot be reached (runtime/PROTOCOL.md). */
  netcheck?: unknown;
  /** A run's key: the kernel keeps its result for a `recall` (runtime/PROTOCOL.md). */
  key?: unknown;
  /** Kept with the keyed result, shown in recall answers only (runtime/PROTOCOL.md, "Recall"). */
  proof?: unknown;
}

// The interpreters the kernels run on: python3 from PATH, and this Node unless
// CODEMODE_TEST_NODE names another binary (to check the kernel on Node 18, as in Debian images).
const PYTHON = 'python3';
const NODE = process.env.CODEMODE_TEST_NODE ?? process.execPath;

function kernelCommand(language: Language, socket: string, extra: readonly string[]): [string, string[]] {
  if (language === 'node') return [NODE, [join(RUNTIME_DIR, 'node/kernel.js'), '--socket', socket, ...extra]];
  return [PYTHON, [join(RUNTIME_DIR, 'python/kernel.py'), '--socket', socket, '--language', language, ...extra]];
}

export class Kernel {
  private log = '';
  readonly exited: Promise<number | null>;

  private constructor(
    readonly language: Language,
    readonly socket: string,
    private readonly dir: string,
    readonly proc: ChildProcess,
  ) {
    proc.stderr?.on('data', (chunk: Buffer) => (this.log += chunk.toString('utf8')));
    this.exited = new Promise((res) => proc.on('exit', (code) => res(code)));
  }

  /** Starts a kernel in a fresh temp directory and waits for its "Started kernel" log line. */
  static async start(language: Language, extraArgs: readonly string[] = [], env: Record<string, string> = {}): Promise<Kernel> {
    const kernel = Kernel.launch(language, extraArgs, env);
    await kernel.started();
    return kernel;
  }

  /** Starts a kernel in a fresh temp directory without waiting for it (see started()). */
  static launch(language: Language, extraArgs: readonly string[] = [], env: Record<string, string> = {}): Kernel {
    const dir = mkdtempSync(join(tmpdir(), 'codemode-kernel-'));
    const socket = join(dir, 'run', 'kernel.sock');
    const [cmd, args] = kernelCommand(language, socket, extraArgs);
    // A session's images are saved next to the socket, not in the machine's /workspace.
    const figures = join(dir, 'figures');
    const proc = spawn(cmd, args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, CODEMODE_FIGURES_DIR: figures, ...env } });
    return new Kernel(language, socket, dir, proc);
  }

  /** Waits for the "Started kernel" log line (its socket exists); stops the kernel if it never comes. */
  async started(timeoutMs = 15_000): Promise<void> {
    try {
      await this.waitForLog('Started kernel', timeoutMs);
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  get stderr(): string {
    return this.log;
  }

  /** Where the kernel saves a session's images (CODEMODE_FIGURES_DIR). */
  get figuresDir(): string {
    return join(this.dir, 'figures');
  }

  /** A new relay connected to this kernel (as one gateway process would hold). */
  connect(): Promise<RelayClient> {
    return RelayClient.open(this);
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
    await this.exited;
    rmSync(this.dir, { recursive: true, force: true });
  }

  private waitForLog(text: string, timeoutMs: number): Promise<void> {
    return new Promise((res, rej) => {
      const timer = setTimeout(() => rej(new Error(`Kernel did not log "${text}" within ${timeoutMs} ms: ${this.log}`)), timeoutMs);
      const check = (): void => {
        if (!this.log.includes(text)) return;
        clearTimeout(timer);
        this.proc.stderr?.off('data', check);
        res();
      };
      this.proc.stderr?.on('data', check);
      this.proc.on('exit', (code) => rej(new Error(`Kernel exited with ${code}: ${this.log}`)));
      check();
    });
  }
}

interface Pending {
  resolve(reply: Reply<ResultFrame | PongFrame>): void;
  reject(err: Error): void;
  outputs: Array<OutputFrame & { at: number }>;
  displays: DisplayFrame[];
}

export class RelayClient {
  private readonly decoder = new FrameDecoder();
  private readonly pending = new Map<string, Pending>();
  private nextId = 1;
  readonly closed: Promise<void>;

  private constructor(readonly relay: ChildProcess) {
    relay.stdout?.on('data', (chunk: Buffer) => this.onData(chunk));
    this.closed = new Promise((res) =>
      relay.on('exit', (code) => {
        for (const p of this.pending.values()) p.reject(new Error(`The relay exited (code ${code}) before the reply`));
        this.pending.clear();
        res();
      }),
    );
  }

  static async open(kernel: Kernel): Promise<RelayClient> {
    const [cmd, args] =
      kernel.language === 'node'
        ? [NODE, [join(RUNTIME_DIR, 'node/relay.js'), kernel.socket]]
        : [PYTHON, [join(RUNTIME_DIR, 'python/relay.py'), kernel.socket]];
    const client = new RelayClient(spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'] }));
    await client.ping();
    return client;
  }

  ping(): Promise<Reply<PongFrame>> {
    return this.request({ op: 'ping' }) as Promise<Reply<PongFrame>>;
  }

  exec(code: string, options: ExecOptions = {}): Promise<Reply<ResultFrame>> {
    return this.request({ op: 'exec', code, timeoutMs: 10_000, ...options }) as Promise<Reply<ResultFrame>>;
  }

  /** A one-shot run: the code as a fresh program (op "run", warm pool pods). */
  run(language: string, code: string, options: ExecOptions = {}): Promise<Reply<ResultFrame & { timedOut: boolean; oomKilled: boolean }>> {
    return this.request({ op: 'run', language, code, timeoutMs: 10_000, ...options }) as Promise<
      Reply<ResultFrame & { timedOut: boolean; oomKilled: boolean }>
    >;
  }

  /** Sends any request (an `id` is added) and resolves with its result or pong. */
  request(message: Record<string, unknown>): Promise<Reply<ResultFrame | PongFrame>> {
    const id = `r${this.nextId++}`;
    return new Promise((res, rej) => {
      this.pending.set(id, { resolve: res, reject: rej, outputs: [], displays: [] });
      this.relay.stdin?.write(encodeFrame({ ...message, id }));
    });
  }

  /** Writes raw bytes to the relay (for malformed-input tests). */
  writeRaw(bytes: Buffer | string): void {
    this.relay.stdin?.write(bytes);
  }

  async close(): Promise<void> {
    this.relay.stdin?.end();
    await this.closed;
  }

  private onData(chunk: Buffer): void {
    const at = performance.now();
    for (const message of this.decoder.push(chunk) as Array<OutputFrame | ResultFrame | PongFrame | DisplayFrame>) {
      const p = this.pending.get(message.id);
      if (!p) continue;
      if (message.type === 'output') {
        p.outputs.push({ ...message, at });
        continue;
      }
      if (message.type === 'display') {
        p.displays.push(message);
        continue;
      }
      this.pending.delete(message.id);
      p.resolve({ frame: message, outputs: p.outputs, displays: p.displays, at });
    }
  }
}

/** Starts a kernel plus one relay; `stop` tears both down. */
export async function startSession(
  language: Language,
  extraArgs: readonly string[] = [],
): Promise<{ kernel: Kernel; client: RelayClient; stop(): Promise<void> }> {
  const kernel = await Kernel.start(language, extraArgs);
  const client = await kernel.connect();
  return {
    kernel,
    client,
    async stop() {
      await client.close();
      await kernel.stop();
    },
  };
}

/** Alive and not a zombie (an orphan waits for whichever init reaps it; it no longer runs). */
export function processRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** True when a process with this pid exists (a zombie counts: it was not reaped). */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
