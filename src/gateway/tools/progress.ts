// Progress notifications of a tool call that may take long (execute_code, create_session,
// install_packages), sent only when the client asked for them with a progress token.
//
// Two kinds: execute_code's output chunks (coalesced, capped) and a heartbeat — a notification
// without a message whenever nothing was sent for `heartbeatMs`. The heartbeat is for the wait in
// between: a run that prints nothing for minutes, a call waiting for its busy session, a pod that
// starts, packages that download. MCP clients may reset their request timeout on progress (the
// TypeScript SDK's `resetTimeoutOnProgress`; its default timeout is 60 s), and proxies in front of
// the gateway close a response stream that stays silent longer than their idle timeout (often
// 60 s); neither then gives up on a call that is alive. Without a message, clients that show
// progress messages as output show nothing for it.
import type { ServerContext } from '@modelcontextprotocol/server';
import type { Logger } from 'pino';
import type { OutputChunk } from '../../runs/types.js';
import { holdOf } from '../body-budget.js';
import type { GatewayOptions } from '../types.js';

// Output chunks are coalesced per stream for PROGRESS_INTERVAL_MS: each tick sends at most one
// notification per stream, whatever the write pattern (a program alternating 1-byte writes to
// stdout and stderr must not turn every chunk into a notification). Each message is capped, and
// the whole stream has a budget (the result carries the output anyway; progress is for watching a
// long run) that also charges every notification a fixed cost, so the total count is bounded too:
// a notification costs its JSON-RPC envelope and SSE framing whatever the text.
const PROGRESS_INTERVAL_MS = 50;
const PROGRESS_MESSAGE_MAX_CHARS = 4096;
const PROGRESS_TOTAL_MAX_CHARS = 1024 * 1024;
/**
 * What a notification costs the budget besides its text (its envelope): with at most two a tick,
 * a 5-minute run printing on both streams every tick still fits; a flood of tiny ones does not.
 * The progress token, which every notification repeats, is charged on top (message-ids.ts bounds it).
 */
const PROGRESS_NOTIFICATION_COST_CHARS = 64;

/** The heartbeat's interval when the gateway's options do not say (CODEMODE_PROGRESS_HEARTBEAT_SECONDS; 0: none). */
export const DEFAULT_PROGRESS_HEARTBEAT_SECONDS = 15;

/** `message` undefined: a heartbeat. */
export type SendProgress = (progress: number, message: string | undefined) => Promise<void>;

/**
 * Sends coalesced output chunks (stderr text prefixed with `stderr: `) and a heartbeat after every
 * `heartbeatMs` without a notification (0: none). Progress values count up from 1. Each stream's
 * text stays in order; within one tick the stream that wrote first is sent first.
 */
export class ProgressReporter {
  private readonly pending: Record<OutputChunk['stream'], string> = { stdout: '', stderr: '' };
  private firstStream: OutputChunk['stream'] | undefined;
  private timer: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private count = 0;
  private budget = PROGRESS_TOTAL_MAX_CHARS;
  private stopped = false;
  private failed = false;
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly send: SendProgress,
    private readonly onSendError: (err: unknown) => void,
    private readonly heartbeatMs = 0,
    /** What each notification costs the budget besides its text: its envelope and progress token. */
    private readonly notificationChars = PROGRESS_NOTIFICATION_COST_CHARS,
  ) {
    this.armHeartbeat();
  }

  push(chunk: OutputChunk): void {
    if (this.stopped || chunk.text === '') return;
    this.firstStream ??= chunk.stream;
    // Keep only what can still be sent: a flood between two flushes must not grow memory.
    if (this.pending[chunk.stream].length <= PROGRESS_MESSAGE_MAX_CHARS) this.pending[chunk.stream] += chunk.text;
    this.timer ??= setTimeout(() => this.flush(), PROGRESS_INTERVAL_MS);
  }

  /** Sends what is pending, waits until every notification was handed to the transport. */
  async close(): Promise<void> {
    this.flush();
    this.stopped = true;
    clearTimeout(this.heartbeat);
    await this.chain;
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const first = this.firstStream;
    this.firstStream = undefined;
    if (first === undefined) return;
    this.sendPending(first);
    this.sendPending(first === 'stdout' ? 'stderr' : 'stdout');
  }

  /** Sends one stream's pending text as one notification, within the budget. */
  private sendPending(stream: OutputChunk['stream']): void {
    const text = this.pending[stream];
    this.pending[stream] = '';
    if (text === '' || this.stopped || this.budget <= 0) return;
    let message = stream === 'stderr' ? `stderr: ${text}` : text;
    if (message.length > PROGRESS_MESSAGE_MAX_CHARS) {
      message = `${message.slice(0, PROGRESS_MESSAGE_MAX_CHARS)}… (more output in the result)`;
    }
    this.budget -= message.length + this.notificationChars;
    this.enqueue(message);
  }

  private enqueue(message: string | undefined): void {
    const progress = ++this.count;
    this.armHeartbeat();
    // Chained so notifications leave in order; the first failure (client gone) stops the rest.
    this.chain = this.chain
      .then(() => (this.failed ? undefined : this.send(progress, message)))
      .catch((err: unknown) => {
        this.failed = true;
        this.stopped = true;
        clearTimeout(this.heartbeat);
        this.onSendError(err);
      });
  }

  private armHeartbeat(): void {
    if (this.heartbeatMs <= 0 || this.stopped) return;
    clearTimeout(this.heartbeat);
    this.heartbeat = setTimeout(() => {
      if (!this.stopped) this.enqueue(undefined);
    }, this.heartbeatMs);
    // A heartbeat never keeps the process alive on its own.
    this.heartbeat.unref();
  }
}

/**
 * The request's progress reporter, or undefined when the client sent no progress token. Progress
 * goes through the request's own context: it is tied to this request's response stream, the only
 * channel a stateless server has to the client.
 */
export function progressReporter(ctx: ServerContext, options: GatewayOptions, logger: Logger): ProgressReporter | undefined {
  const progressToken = ctx.mcpReq._meta?.progressToken;
  if (progressToken === undefined) return undefined;
  // What is sent waits in the replica until the client reads it: it counts against the caller's
  // share of the body budget until the response has ended, like the result (body-budget.ts).
  const hold = holdOf(ctx.http?.req);
  const notificationChars = PROGRESS_NOTIFICATION_COST_CHARS + String(progressToken).length;
  return new ProgressReporter(
    (progress, message) => {
      hold?.add(notificationChars + (message?.length ?? 0));
      return ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress, ...(message !== undefined && { message }) } });
    },
    (err) => logger.debug({ err }, 'Stopped sending progress'),
    (options.progressHeartbeatSeconds ?? DEFAULT_PROGRESS_HEARTBEAT_SECONDS) * 1000,
    notificationChars,
  );
}

/** Runs `work` with a heartbeat on the request's progress token (if any) until it settles. */
export async function withHeartbeat<T>(ctx: ServerContext, options: GatewayOptions, logger: Logger, work: () => Promise<T>): Promise<T> {
  const progress = progressReporter(ctx, options, logger);
  try {
    return await work();
  } finally {
    await progress?.close();
  }
}
