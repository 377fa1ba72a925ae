// The answers of a remote token check (TokenReview), kept per token digest so that a tool call
// does not wait for an API round trip. Pure logic around the check it is given:
//   - accepted and refused answers are kept apart, each map bounded, so a flood of made-up tokens
//     (anyone who reaches the endpoint can send them) evicts only other refusals, never the
//     answers of the users who are calling;
//   - concurrent requests with one token share one check (a client's parallel calls when its
//     answer expires make one TokenReview, not one each);
//   - at most `maxInFlight` checks of different tokens at once, and `maxWaiting` more waiting for
//     their turn (the callers of a gateway that just started); beyond that the request is refused
//     as busy (the gateway answers 503 with Retry-After), so unknown tokens cannot turn the gateway
//     into a flood of TokenReviews against the API server every replica and user depends on;
//   - a check that failed (the API server did not answer) is not kept: the next request asks again;
//   - a token whose accepted answer's time is over is checked again ahead of every waiting check,
//     past the cap on waiting ones: answers expire every 10 s, and a flood that keeps the line full
//     would otherwise refuse the users who are calling as busy (503) for as long as it lasts. Only
//     tokens the cluster accepted get there (at most `max` of them), and one refusal ends it.
import { createHash } from 'node:crypto';
import type { AuthResult } from './identity.js';

export interface ReviewCacheOptions {
  /** How long an answer is used (a revoked token keeps working that long). */
  ttlMs: number;
  /** Answers kept, of each kind (accepted, refused). */
  max: number;
  /** Checks of different tokens running at once. */
  maxInFlight: number;
  /** Checks waiting for one of those places; a request beyond them is refused as busy. */
  maxWaiting: number;
}

export const REVIEW_CACHE_DEFAULTS: ReviewCacheOptions = { ttlMs: 10_000, max: 1000, maxInFlight: 16, maxWaiting: 256 };

/** Thrown when `maxInFlight` checks are running: the caller should retry shortly. */
export class ReviewsBusyError extends Error {
  constructor() {
    super('The gateway is checking too many new tokens with the cluster right now; retry shortly.');
    this.name = 'ReviewsBusyError';
  }
}

interface Kept {
  at: number;
  result: AuthResult;
}

export class ReviewCache {
  private readonly accepted = new Map<string, Kept>();
  private readonly refused = new Map<string, Kept>();
  /** By token digest: the check running or waiting for a place. */
  private readonly inFlight = new Map<string, Promise<AuthResult>>();
  private running = 0;
  /** The checks waiting for a place, first come first served. */
  private readonly waiting: Array<() => void> = [];

  constructor(
    private readonly check: (token: string) => Promise<AuthResult>,
    private readonly o: ReviewCacheOptions = REVIEW_CACHE_DEFAULTS,
    private readonly now: () => number = Date.now,
  ) {}

  /** The answer for `token`: kept, joined, or checked now. Rejects when the check fails or too many run. */
  get(token: string): Promise<AuthResult> {
    const key = createHash('sha256').update(token, 'utf8').digest('hex');
    const kept = this.fresh(this.accepted, key) ?? this.fresh(this.refused, key);
    if (kept) return Promise.resolve(kept);
    const running = this.inFlight.get(key);
    if (running) return running;
    // Kept past its time (fresh() leaves expired accepted answers): the token was accepted before.
    const renewal = this.accepted.has(key);
    if (!renewal && this.running >= this.o.maxInFlight && this.waiting.length >= this.o.maxWaiting) return Promise.reject(new ReviewsBusyError());
    const p = this.turn(renewal)
      .then(() => this.check(token))
      .then((result) => {
        if (!result.ok) this.accepted.delete(key);
        this.keep(result.ok ? this.accepted : this.refused, key, result);
        return result;
      })
      .finally(() => {
        this.inFlight.delete(key);
        this.running--;
        this.waiting.shift()?.();
      });
    this.inFlight.set(key, p);
    return p;
  }

  /** Kept answers of each kind, checks running and waiting (for tests and metrics). */
  get sizes(): { accepted: number; refused: number; running: number; waiting: number } {
    return { accepted: this.accepted.size, refused: this.refused.size, running: this.running, waiting: this.waiting.length };
  }

  /** Resolves when this check may run (a place is taken for it); `first`: ahead of those waiting. */
  private turn(first: boolean): Promise<void> {
    if (this.running < this.o.maxInFlight) {
      this.running++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const start = (): void => {
        this.running++;
        resolve();
      };
      if (first) this.waiting.unshift(start);
      else this.waiting.push(start);
    });
  }

  /** A kept answer still in its time. An expired refusal goes; an expired acceptance stays, to mark its renewal. */
  private fresh(map: Map<string, Kept>, key: string): AuthResult | undefined {
    const kept = map.get(key);
    if (kept === undefined) return undefined;
    if (this.now() - kept.at < this.o.ttlMs) return kept.result;
    if (map !== this.accepted) map.delete(key);
    return undefined;
  }

  private keep(map: Map<string, Kept>, key: string, result: AuthResult): void {
    // Re-inserted at the end: the map's order is the answers' age, the oldest goes first.
    map.delete(key);
    if (map.size >= this.o.max) map.delete(map.keys().next().value as string);
    map.set(key, { at: this.now(), result });
  }
}
