// Open `subscriptions/listen` streams per user. The SDK keeps at most 1,024 of them per replica
// for all callers together (createMcpHandler's maxSubscriptions), and a listen stays open as long
// as its client likes: one user's client opening 1,024 of them refused every other caller's
// listen on that replica ("Subscription limit reached"). Each user may keep MAX_LISTENS_PER_USER
// open; one more is refused before the SDK sees it (HTTP 429, a JSON-RPC error with the request's id).

/** Listen streams one user may keep open on a replica (a client needs one; a few for reconnects). */
export const MAX_LISTENS_PER_USER = 8;

export class ListenLimit {
  private readonly open = new Map<string, number>();

  constructor(readonly max = MAX_LISTENS_PER_USER) {}

  /** Takes one of `user`'s places; the function gives it back (once). Undefined when all are taken. */
  take(user: string): (() => void) | undefined {
    const n = this.open.get(user) ?? 0;
    if (n >= this.max) return undefined;
    this.open.set(user, n + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const left = (this.open.get(user) ?? 1) - 1;
      if (left > 0) this.open.set(user, left);
      else this.open.delete(user);
    };
  }
}

/** The id of a `subscriptions/listen` request, when `body` (a parsed request body) is one. */
export function listenId(body: unknown): string | number | null | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const { method, id } = body as { method?: unknown; id?: unknown };
  if (method !== 'subscriptions/listen') return undefined;
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

/** The answer to a listen beyond the user's places. */
export function listenRefused(id: string | number | null, max: number): Response {
  const message = `Too many open subscriptions: you already have ${max} subscriptions/listen streams open on this gateway replica, the most one user may. Close one (end its request) before opening another.`;
  return Response.json(
    { jsonrpc: '2.0', id, error: { code: -32000, message, data: { limit: 'user_listens', max } } },
    { status: 429, headers: { 'Retry-After': '5' } },
  );
}
