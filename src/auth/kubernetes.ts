// Mode `kubernetes`: the cluster checks the token (TokenReview), so ServiceAccount tokens and
// whatever the API server's authenticators accept work, for the configured audience. Answers are
// kept 10 s per token digest (a call per request would add an API round trip to every tool call),
// with one check per token at a time and a bound on checks at once (review-cache.ts).
import type { AuthenticationV1Api } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { badToken, missingToken, type AuthResult, type Authenticator } from './identity.js';
import { REVIEW_CACHE_DEFAULTS, ReviewCache, type ReviewCacheOptions } from './review-cache.js';

export class KubernetesAuthenticator implements Authenticator {
  readonly mode = 'kubernetes' as const;
  private readonly cache: ReviewCache;

  constructor(
    private readonly api: AuthenticationV1Api,
    private readonly audience: string | undefined,
    private readonly log: Logger,
    cache: ReviewCacheOptions = REVIEW_CACHE_DEFAULTS,
  ) {
    this.cache = new ReviewCache((token) => this.review(token), cache);
  }

  async authenticate(token: string | undefined): Promise<AuthResult> {
    if (token === undefined) return missingToken();
    return this.cache.get(token);
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
