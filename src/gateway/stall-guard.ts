// Responses whose client stopped reading. A result can be large (images a call displayed: up to
// CODEMODE_DISPLAY_MAX_BYTES, 5 MiB, more once base64), and Node keeps whatever the kernel's
// socket buffer cannot take in the process's memory, for as long as the connection stays open:
// there is no write timeout, and a connection with a response under way is never idle. A client
// that sends calls and never reads their answers kept them all (measured: 40 unread results held
// 220 MiB of a 512 MiB gateway), until the replica ended and every user's calls with it. A
// response that has bytes waiting and has not sent any of them for `stallMs` is given up: its
// connection is closed, which frees them. A slow reader is not stalled (its bytes keep leaving),
// and a call that sends nothing while it runs has nothing waiting.
import type { ServerResponse } from 'node:http';

/** How long a response may have bytes waiting without sending any (a minute: a client busy or briefly offline is not cut). */
export const STALLED_RESPONSE_MS = 60_000;

interface Watched {
  /** Where the socket's writing stood at the last look (see progress()). */
  sent: string;
  /** When bytes were last seen waiting with none sent since (undefined: not stalled). */
  stalledSince: number | undefined;
}

/** Watches the open responses of one server; one timer for all of them, running only while some are open. */
export class StallGuard {
  private readonly open = new Map<ServerResponse, Watched>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly stallMs = STALLED_RESPONSE_MS,
    private readonly onStalled: (waitingBytes: number) => void = () => undefined,
    private readonly now: () => number = Date.now,
  ) {}

  /** Watches `res` until it closes. */
  watch(res: ServerResponse): void {
    if (res.closed || this.open.has(res)) return;
    this.open.set(res, { sent: '', stalledSince: undefined });
    res.once('close', () => {
      this.open.delete(res);
      if (this.open.size === 0) this.stop();
    });
    if (this.timer === undefined) {
      this.timer = setInterval(() => this.sweep(), Math.max(10, Math.min(5_000, this.stallMs / 4)));
      this.timer.unref();
    }
  }

  /** Responses watched (tests). */
  get size(): number {
    return this.open.size;
  }

  /** Looks at every open response once: closes the connections of those stalled for stallMs. */
  sweep(): void {
    const now = this.now();
    for (const [res, w] of this.open) {
      const socket = res.socket;
      if (!socket || socket.destroyed) continue;
      const waiting = socket.writableLength;
      const sent = progress(socket);
      if (waiting === 0 || sent !== w.sent) {
        w.sent = sent;
        w.stalledSince = undefined;
        continue;
      }
      w.stalledSince ??= now;
      if (now - w.stalledSince < this.stallMs) continue;
      this.open.delete(res);
      this.onStalled(waiting);
      socket.destroy();
    }
    if (this.open.size === 0) this.stop();
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

type WritingSocket = NonNullable<ServerResponse['socket']> & { _handle?: { writeQueueSize?: number } | null };

/**
 * Where a socket's writing stands. `bytesWritten` counts what is still queued (the difference is
 * what the socket took from its buffer), but a single large write stays queued whole until the
 * kernel has taken all of it: its progress shows only in libuv's write queue, which Node exposes
 * on the handle (the size it once gave as socket.bufferSize).
 */
function progress(socket: WritingSocket): string {
  return `${socket.bytesWritten - socket.writableLength}/${socket._handle?.writeQueueSize ?? ''}`;
}
