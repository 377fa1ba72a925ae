// Mode `kubernetes`: the cluster checks the token (TokenReview), so ServiceAccount tokens and
// whatever the API server's authenticators accept work, for the configured audience. Answers are
// cached briefly by the token's digest (a call per request would add an API round trip to every
// tool call); a bounded cache, so a flood of random tokens cannot grow it.
import { createHash } from 'node:crypto';
import type { AuthenticationV1Api } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { badToken, missingToken, type AuthResult, type Authenticator } from './identity.js';

const CACHE_TTL_MS = 10_000;
const CACHE_MAX = 1000;

export class KubernetesAuthenticator implements Authenticator {
  readonly mode = 'kubernetes' as const;
  private readonly cache = new Map<string, { at: number; result: AuthResult }>();

  constructor(
    private readonly api: AuthenticationV1Api,
    private readonly audience: string | undefined,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  async authenticate(token: string | undefined): Promise<AuthResult> {
    if (token === undefined) return missingToken();
    const key = createHash('sha256').update(token, 'utf8').digest('hex');
    const hit = this.cache.get(key);
    if (hit && this.now() - hit.at < CACHE_TTL_MS) return hit.result;
    const result = await this.review(token);
    if (this.cache.size >= CACHE_MAX) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(key, { at: this.now(), result });
    return result;
  }

  private async review(token: string): Promise<AuthResult> {
    try {
      const r = await this.api.createTokenReview({ body: { spec: { token, ...(this.audience && { audiences: [this.audience] }) } } });
      const s = r.status;
      if (!s?.authenticated || !s.user?.username) {
        return badToken(this.audience ? `The cluster did not accept the token for the audience "${this.audience}".` : 'The cluster did not accept the token.');
      }
      if (this.audience && !(s.audiences ?? []).includes(this.audience)) return badToken(`The token is not meant for the audience "${this.audience}".`);
      return { ok: true, identity: Object.freeze({ user: s.user.username, groups: Object.freeze([...(s.user.groups ?? [])]) }) };
    } catch (err) {
      // The API server could not check it: refuse (never fail open), but do not cache.
      this.log.warn({ err: (err as Error).message }, 'TokenReview failed');
      throw new Error('The gateway could not verify the token with the cluster right now; retry shortly.', { cause: err });
    }
  }
}
