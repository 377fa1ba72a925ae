// A rate per user: a token bucket each (the `limiter` package), a burst then a steady rate.
// Used for the API reads one user's session lookups may cause (src/sessions/service.ts: a call
// naming a session this replica's cache does not have reads it from the API server once, since
// another replica may have created it a moment ago; names come from callers, so without a bound
// one user's client naming made-up sessions made one GET per call, and the API server's flow
// control, which throttles the gateway's ServiceAccount as a whole, slowed every user's requests
// with them), and for the requests one user may send to a replica (CODEMODE_USER_REQUESTS_PER_SECOND).
import { TokenBucket } from 'limiter';

export interface UserRateLimits {
  /** What one user may do at once after a quiet moment. */
  burst: number;
  /** What one user may do a second in the long run. */
  perSecond: number;
}

/** Users whose buckets are kept before the full ones (idle users) are let go. */
const KEPT_USERS = 1000;

export class UserRate {
  private readonly users = new Map<string, TokenBucket>();

  constructor(private readonly limits: UserRateLimits) {}

  /** Whether `user` ('' without authentication) may do one more now; takes it if so. */
  take(user: string): boolean {
    let bucket = this.users.get(user);
    if (bucket === undefined) {
      if (this.users.size >= KEPT_USERS) this.forgetIdle();
      bucket = new TokenBucket({ bucketSize: this.limits.burst, tokensPerInterval: this.limits.perSecond, interval: 'second' });
      bucket.content = this.limits.burst; // a new bucket starts empty; a user new here starts with the burst
      this.users.set(user, bucket);
    }
    return bucket.tryRemoveTokens(1);
  }

  /** Seconds until `user` may do one more (0: now). */
  waitSeconds(user: string): number {
    const bucket = this.users.get(user);
    if (bucket === undefined) return 0;
    bucket.drip();
    return bucket.content >= 1 ? 0 : (1 - bucket.content) / this.limits.perSecond;
  }

  /** Users with a bucket (tests). */
  get size(): number {
    return this.users.size;
  }

  /** Lets go of the buckets that are full again: a new one for the same user is the same. */
  private forgetIdle(): void {
    for (const [user, bucket] of this.users) {
      bucket.drip();
      if (bucket.content >= bucket.bucketSize) this.users.delete(user);
    }
  }
}
