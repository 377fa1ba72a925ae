// Request bodies that stop arriving. A body's bytes count against its user's and the replica's
// body budget from the moment they arrive (body-budget.ts), and Node's only bound on a body that
// stalls is its 5-minute request timeout: a client that sent 32 MiB quickly and then paused held
// them, and its connection, for five minutes (four users could fill a replica's budget that way
// and keep every other user's larger calls out). A body must keep coming: in every window
// (15 s) at least 1/32 of what it has brought so far, and at least one byte. A client sending at
// any steady rate meets that for 32 windows (8 minutes, past the request timeout), whatever the
// rate; one that stops, or drips a byte now and then after a large start, is answered 408 within
// two windows, and what it held is given back.
import type { IncomingMessage } from 'node:http';

/** The window in which a body must bring its share of new bytes. */
export const BODY_PROGRESS_WINDOW_MS = 15_000;

/** Each window must bring at least 1/BODY_PROGRESS_SHARE of the bytes the body has brought so far. */
export const BODY_PROGRESS_SHARE = 32;

/** How far a stalled body got: its bytes so far and what the last window brought. */
export interface BodyStall {
  received: number;
  lastWindow: number;
  windowMs: number;
}

/** The bytes a window must bring after `received` bytes: at least one. */
export function bytesDue(received: number): number {
  return Math.max(1, Math.floor(received / BODY_PROGRESS_SHARE));
}

/**
 * Watches the body of `incoming` while it arrives (its bytes read from its socket, as Node's HTTP
 * parser takes them); resolves when a window brings less than its due, and never when the body
 * ends in time. Nothing is watched for a body already complete (the usual call, whose body came
 * with its headers): no timer on the hot path.
 */
export function watchBodyProgress(incoming: IncomingMessage, windowMs = BODY_PROGRESS_WINDOW_MS): Promise<BodyStall> | undefined {
  if (incoming.complete) return undefined;
  const socket = incoming.socket;
  // Counted from here: bytes that came with the headers are not (a short body is then complete).
  const start = socket.bytesRead;
  let last = start;
  return new Promise<BodyStall>((resolve) => {
    const timer = setTimeout(() => {
      if (incoming.complete || socket.destroyed) return;
      const now = socket.bytesRead;
      const lastWindow = now - last;
      if (lastWindow < bytesDue(last - start)) {
        resolve({ received: now - start, lastWindow, windowMs });
        return;
      }
      last = now;
      timer.refresh();
    }, windowMs);
    timer.unref();
  });
}

/** The answer to a request whose body stalled; sent with `Connection: close` (the rest is not read). */
export function bodyStalledRefused(stall: BodyStall): Response {
  const seconds = stall.windowMs / 1000;
  const message =
    `Request Timeout: this request's body stopped arriving (${stall.received} bytes so far, ${stall.lastWindow} in the last ${seconds} s). ` +
    `Nothing in it was run. A body must keep coming: in every ${seconds} s at least 1/${BODY_PROGRESS_SHARE} of what it has sent so far. ` +
    'Send the request again, its body without pauses.';
  return Response.json({ jsonrpc: '2.0', error: { code: -32600, message, data: { limit: 'body_progress', ...stall } }, id: null }, { status: 408 });
}
