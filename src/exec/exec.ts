// One command in a pod through the Kubernetes exec API (websocket), with output capped in memory
// while it streams, and a watchdog: the socket can close without ever sending a status, and
// closing it does NOT stop the remote process (the caller must kill it from inside the pod).
import { Readable, Writable } from 'node:stream';
import type { Exec, V1Status } from '@kubernetes/client-node';
import { CappedOutput, TailBuffer } from './output.js';
import { ByteAccumulator } from '../util/byte-accumulator.js';

export interface ExecRequest {
  namespace: string;
  pod: string;
  container: string;
  command: string[];
  /** Bytes written to the process's stdin, then stdin is closed (half-close). */
  stdin?: Buffer;
  /** Characters kept per stream; the rest is counted, not kept. */
  capChars: number;
  /** Give up waiting after this long (the process may still run in the pod). */
  watchdogMs: number;
  onOutput?: (stream: 'stdout' | 'stderr', text: string) => void;
}

export interface ExecResult {
  /** Exit code from the API's status; undefined when no status arrived. */
  exitCode?: number;
  stdout: CappedOutput;
  stderr: CappedOutput;
  /** The last bytes of stderr, uncut (for trailers written by our runner). */
  stderrTail: Buffer;
  /** Why no exit code is known: transport error, watchdog, or a Failure status that is not an exit. */
  error?: string;
  /** The exec stream opened: the command (and its stdin) may have reached the pod. */
  opened: boolean;
  watchdogFired: boolean;
  durationMs: number;
}

/** Tail kept for the runner trailer; larger than any trailer we write. */
const TAIL_BYTES = 256;

export function exitCodeFromStatus(status: V1Status): { exitCode?: number; error?: string } {
  if (status.status === 'Success') return { exitCode: 0 };
  if (status.reason === 'NonZeroExitCode') {
    const cause = status.details?.causes?.find((c) => c.reason === 'ExitCode');
    const code = Number(cause?.message);
    if (Number.isInteger(code)) return { exitCode: code };
  }
  return { error: shortenExecError(status.message ?? status.reason ?? 'exec failed without a message') };
}

function sink(onChunk: (b: Buffer) => void): Writable {
  return new Writable({
    write(chunk: Buffer, _enc, cb): void {
      onChunk(chunk);
      cb();
    },
  });
}

export async function execInPod(exec: Exec, req: ExecRequest): Promise<ExecResult> {
  const started = performance.now();
  const stdout = new CappedOutput(req.capChars);
  const stderr = new CappedOutput(req.capChars);
  const tail = new TailBuffer(TAIL_BYTES);
  const outSink = sink((b) => {
    const t = stdout.push(b);
    if (t && req.onOutput) req.onOutput('stdout', t);
  });
  const errSink = sink((b) => {
    tail.push(b);
    const t = stderr.push(b);
    if (t && req.onOutput) req.onOutput('stderr', t);
  });

  return new Promise<ExecResult>((resolve) => {
    let done = false;
    let opened = false;
    const stream = new StreamCloser();
    const finish = (r: { exitCode?: number; error?: string; watchdogFired?: boolean }): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      stdout.end();
      stderr.end();
      stream.close();
      resolve({
        ...r,
        opened: opened || r.exitCode !== undefined,
        watchdogFired: r.watchdogFired ?? false,
        stdout,
        stderr,
        stderrTail: tail.bytes,
        durationMs: Math.round(performance.now() - started),
      });
    };
    const timer = setTimeout(() => finish({ error: `no result within ${req.watchdogMs} ms`, watchdogFired: true }), req.watchdogMs);
    const stdin = req.stdin === undefined ? null : Readable.from([req.stdin]);
    exec
      .exec(req.namespace, req.pod, req.container, req.command, outSink, errSink, stdin, false, (status) => {
        // The status frame arrives after all output frames of the process.
        finish(exitCodeFromStatus(status));
      })
      .then((ws) => {
        opened = true;
        stream.attach(ws);
        ws.on('close', (code: number, reason: Buffer) => {
          // Give an in-flight status callback a tick to land first.
          setImmediate(() => finish({ error: `exec stream closed without a status (code ${code} ${reason.toString()})` }));
        });
        ws.on('error', (err: Error) => finish({ error: `exec stream error: ${err.message}` }));
      })
      .catch((err: unknown) => finish({ error: `exec could not start: ${describeError(err)}` }));
  });
}

/** Errors from the API server quote the whole exec URL (with our runner script): keep it short. */
export function shortenExecError(message: string): string {
  const short = message.replace(/"https?:\/\/[^"\s]*"/g, '"<kubelet exec URL>"');
  return short.length > 300 ? `${short.slice(0, 297)}...` : short;
}

export function describeError(err: unknown): string {
  if (err instanceof Error) return shortenExecError(err.message);
  if (typeof err === 'object' && err !== null) {
    const e = err as { message?: unknown; type?: unknown; target?: unknown };
    if (typeof e.message === 'string') return e.message;
    if (e.type === 'error') return 'websocket connection failed';
  }
  return String(err);
}

export interface RawExecResult {
  exitCode?: number;
  stdout: Buffer;
  /** stdout was longer than maxStdoutBytes: the stream was closed there (no exit code; `error` says so). */
  overflow: boolean;
  stderr: string;
  error?: string;
}

const RAW_STDERR_BYTES = 4096;

/**
 * One command with raw (binary) stdout, for file operations. stdout is kept up to
 * maxStdoutBytes; stderr up to 4 KiB (it carries our scripts' error sentences).
 */
export function execRaw(
  exec: Exec,
  namespace: string,
  pod: string,
  container: string,
  command: string[],
  stdin: Buffer | undefined,
  maxStdoutBytes: number,
  watchdogMs = 30_000,
): Promise<RawExecResult> {
  // One growing buffer, not a Buffer per message: a program can send its output a byte at a time.
  const stdout = new ByteAccumulator(maxStdoutBytes);
  let overflow = false;
  // stderr: the first 4 KiB, exactly (a whole first message was kept, however large).
  const stderr = new ByteAccumulator(RAW_STDERR_BYTES);
  // Past maxStdoutBytes the answer is refused whatever follows: the stream is closed at once rather
  // than read (a message per write, each a callback on the gateway's thread) until the watchdog.
  let onOverflow = (): void => undefined;
  const out = sink((b) => {
    if (overflow) return;
    const room = maxStdoutBytes - stdout.size;
    if (b.length > room) {
      overflow = true;
      if (room > 0) stdout.append(b.subarray(0, room));
      onOverflow();
      return;
    }
    stdout.append(b);
  });
  const err = sink((b) => {
    const room = RAW_STDERR_BYTES - stderr.size;
    if (room > 0) stderr.append(b.length > room ? b.subarray(0, room) : b);
  });
  return new Promise<RawExecResult>((resolve) => {
    const stream = new StreamCloser();
    let done = false;
    const finish = (r: { exitCode?: number; error?: string }): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      // Every way out closes the stream: a watchdog that only resolved left it open for good.
      stream.close();
      resolve({ ...r, stdout: stdout.take(), overflow, stderr: stderr.take().toString('utf8') });
    };
    const timer = setTimeout(() => finish({ error: `no result within ${watchdogMs} ms` }), watchdogMs);
    onOverflow = () => finish({ error: `more than ${maxStdoutBytes} bytes of output` });
    exec
      .exec(namespace, pod, container, command, out, err, stdin === undefined ? null : Readable.from([stdin]), false, (status) =>
        finish(exitCodeFromStatus(status)),
      )
      .then((ws) => {
        stream.attach(ws);
        ws.on('close', () => setImmediate(() => finish({ error: 'exec stream closed without a status' })));
        ws.on('error', (e: Error) => finish({ error: `exec stream error: ${e.message}` }));
      })
      .catch((e: unknown) => finish({ error: `exec could not start: ${describeError(e)}` }));
  });
}

/** The part of a websocket the closer uses (ws's WebSocket). */
export interface ClosableSocket {
  readonly readyState: number;
  close(): void;
  terminate?(): void;
}

/**
 * Closes an exec websocket once we are done with it, whenever the socket shows up: an exec can
 * finish (watchdog) before the socket has even opened. terminate() drops the connection at once:
 * a polite close() waits up to 30 s for a peer that may be the very thing that stopped answering.
 */
export class StreamCloser {
  private socket: ClosableSocket | undefined;
  private closed = false;

  attach(socket: ClosableSocket): void {
    this.socket = socket;
    if (this.closed) this.close();
  }

  close(): void {
    this.closed = true;
    const s = this.socket;
    if (!s || s.readyState === 3 /* CLOSED */) return;
    try {
      if (s.terminate) s.terminate();
      else s.close();
    } catch {
      // already closing
    }
  }
}
