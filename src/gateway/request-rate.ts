// The requests one user may send to this replica's /mcp (CODEMODE_USER_REQUESTS_PER_SECOND): a
// burst, then a steady rate. Each request costs the replica's one event loop about a millisecond
// even when it is refused further on (a tools/list, a call over a per-user limit), so one user's
// client sending them as fast as it can on many connections took that time from every other
// user of the replica. Past the rate the request is answered at once, before its body is read.
import { UserRate } from '../limits/user-rate.js';

/** The smallest burst: a client's start (initialize, initialized, tools/list) and a few calls. */
export const MIN_REQUEST_BURST = 10;

export class RequestRate {
  private readonly rate: UserRate;
  readonly burst: number;

  constructor(readonly perSecond: number) {
    this.burst = Math.max(MIN_REQUEST_BURST, 2 * perSecond);
    this.rate = new UserRate({ burst: this.burst, perSecond });
  }

  /** Undefined: `user` ('' without authentication) may send this request (it is counted); else the answer to it. */
  admit(user: string): Response | undefined {
    if (this.rate.take(user)) return undefined;
    const wait = Math.max(1, Math.ceil(this.rate.waitSeconds(user)));
    const message = `Too many requests: you sent more than ${this.perSecond} a second to this gateway replica (after a burst of ${this.burst}; CODEMODE_USER_REQUESTS_PER_SECOND). Nothing in this request was run. Retry in ${wait} s, and send calls one after another rather than all at once.`;
    return Response.json(
      { jsonrpc: '2.0', error: { code: -32000, message, data: { limit: 'user_requests', perSecond: this.perSecond } }, id: null },
      { status: 429, headers: { 'Retry-After': String(wait) } },
    );
  }
}
