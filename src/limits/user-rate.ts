// The API reads one user's session lookups may cause. A call naming a session this replica's
// cache does not have (or still sees starting) reads it from the API server once: another
// replica may have created it a moment ago. Names come from callers, so without a bound one
// user's client naming made-up sessions made one GET per call (measured: 2,000 calls, 2,000
// GETs), and the API server's flow control, which throttles the gateway's ServiceAccount as a
// whole, slowed every user's requests with them. Each user gets a token bucket (the `limiter`
// package); past it, the cache's answer stands. A user's calls to sessions that have just been
// created elsewhere stay far below it.
import { TokenBucket } from 'limiter';

export interface SessionReadLimits {
  /** Reads one user may make at once after a quiet moment. */
  burst: number;
  /** Reads a second one user may make in the long run. */
  perSecond: number;
}

export const SESSION_READ_LIMITS: SessionReadLimits = { burst: 20, perSecond: 10 };

/** Users whose buckets are kept before the full ones (idle users) are let go. */
const KEPT_USERS = 1000;

export class SessionReads {
  private readonly users = new Map<string, TokenBucket>();

  constructor(private readonly limits: SessionReadLimits = SESSION_READ_LIMITS) {}

  /** Whether `user` ('' without authentication) may make one more read now; takes it if so. */
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
