// Mode `oidc`: the gateway is an OAuth 2.1 resource server as the MCP authorization specification
// describes. Access tokens are JWTs checked with `jose` against the issuer's JWKS (signature,
// issuer, audience, expiry); the JWKS location comes from CODEMODE_OIDC_JWKS_URL or the issuer's
// discovery document. Clients find the issuer through /.well-known/oauth-protected-resource.
// `jose` loads with the first token: a gateway in another mode never loads it.
import type * as JoseModule from 'jose';
import type { JWTPayload, JWTVerifyGetKey } from 'jose';
import { errorHead } from '../log/error-head.js';
import { badToken, missingToken, type AuthResult, type Authenticator } from './identity.js';

type Jose = typeof JoseModule;
let jose: Promise<Jose> | undefined;
const loadJose = (): Promise<Jose> => (jose ??= import('jose'));

export interface OidcOptions {
  issuer: string;
  audience: string;
  jwksUrl?: string;
  usernameClaim: string;
  groupsClaim: string;
  /** After a failed discovery or JWKS fetch, requests are refused (503) this long before it is tried again. */
  retryMs?: number;
}

const RETRY_MS = 5_000;

/**
 * The codes of the errors jose throws for a token that is at fault (malformed, expired, for another
 * audience, signed by a key the issuer does not list or with an algorithm not allowed): answered
 * 401. Any other error (the JWKS answered non-200, was not JSON or not a key set, timed out, the
 * issuer is unreachable) says nothing about the token: answered 503, and the client retries.
 */
const TOKEN_FAULT_CODES: ReadonlySet<string> = new Set([
  'ERR_JWT_EXPIRED',
  'ERR_JWT_CLAIM_VALIDATION_FAILED',
  'ERR_JWT_INVALID',
  'ERR_JWS_INVALID',
  'ERR_JWS_SIGNATURE_VERIFICATION_FAILED',
  'ERR_JWKS_NO_MATCHING_KEY',
  'ERR_JWKS_MULTIPLE_MATCHING_KEYS',
  'ERR_JOSE_ALG_NOT_ALLOWED',
  'ERR_JOSE_NOT_SUPPORTED',
]);

/** Pure: whether `err`, thrown while verifying a token, is the token's fault (401) rather than the issuer's (503). */
export function isTokenFault(err: unknown): boolean {
  const code = err instanceof Error ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' && TOKEN_FAULT_CODES.has(code);
}

async function discoverJwks(issuer: string): Promise<URL> {
  const url = `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
  const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
  if (!res.ok) throw new Error(`OIDC discovery at ${url} answered ${res.status}`);
  const doc = (await res.json()) as { jwks_uri?: unknown };
  if (typeof doc.jwks_uri !== 'string') throw new Error(`OIDC discovery at ${url} has no jwks_uri`);
  return new URL(doc.jwks_uri);
}

/** Pure: why a JWKS answer (`status`, body `text`) gives no key set, or undefined when it does. */
export function jwksProblem(status: number, text: string): string | undefined {
  if (status >= 300 && status < 400) return `it answered HTTP ${status}, a redirect (not followed: set CODEMODE_OIDC_JWKS_URL to where it points)`;
  if (status !== 200) return `it answered HTTP ${status}`;
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return 'its answer is not JSON';
  }
  const keys = typeof doc === 'object' && doc !== null ? (doc as { keys?: unknown }).keys : undefined;
  if (!Array.isArray(keys) || !keys.every((k) => typeof k === 'object' && k !== null && !Array.isArray(k)))
    return 'its answer is not a key set ({"keys": [...]})';
  return undefined;
}

/** Pure: the identity claims of a verified payload, or why they are unusable. */
export function identityFromClaims(p: JWTPayload, usernameClaim: string, groupsClaim: string): AuthResult {
  const user = p[usernameClaim];
  if (typeof user !== 'string' || user === '') return badToken(`The token has no "${usernameClaim}" claim to name the user.`);
  // Named by email, a user is that address's owner only when the issuer says it checked the
  // address: many issuers let a user type any address (a profile field, self-registration) and
  // mark it email_verified: false, which would make them the owner of that address's sessions.
  // As the API server's OIDC authenticator: present, it must be true; absent (some issuers never
  // send it), the address is taken as the issuer's.
  if (usernameClaim === 'email' && p.email_verified !== undefined && p.email_verified !== true)
    return badToken("The token's email is not verified (email_verified is not true); verify the address with the issuer, then get a new token.");
  const raw = p[groupsClaim];
  // An empty string names no group (the tokens file skips them too).
  const groups = (Array.isArray(raw) ? raw.filter((g): g is string => typeof g === 'string') : typeof raw === 'string' ? [raw] : []).filter(Boolean);
  return { ok: true, identity: Object.freeze({ user, groups: Object.freeze(groups) }) };
}

function describe(err: unknown, errors: Jose['errors']): string {
  if (err instanceof errors.JWTExpired) return 'The token has expired; get a new one from the issuer.';
  if (err instanceof errors.JWTClaimValidationFailed)
    return `The token's "${err.claim}" claim is not accepted (${err.reason === 'check_failed' ? 'wrong value' : err.reason}).`;
  if (err instanceof errors.JWSSignatureVerificationFailed || err instanceof errors.JWKSNoMatchingKey)
    return 'The token is not signed by the configured issuer.';
  return 'The token is not a valid JWT for this gateway.';
}

export class OidcAuthenticator implements Authenticator {
  readonly mode = 'oidc' as const;
  private jwks: Promise<JWTVerifyGetKey> | undefined;
  /** The last JWKS fetch that failed, and until when (performance.now()) it is the answer. */
  private jwksFailure: { error: Error; until: number } | undefined;

  constructor(private readonly o: OidcOptions) {}

  /**
   * The issuer's keys. jose fetches the JWKS with the first token, again when its copy is 10
   * minutes old, and for a token whose key it does not hold (at most every 30 s after a fetch that
   * worked, but after every one that failed). The discovery before it is shared by the requests
   * that wait for it, and a failed discovery or JWKS fetch is the answer to every fetch for
   * retryMs: requests with made-up tokens while the issuer is down do not each make a request to
   * it. Tokens of the keys jose still holds are checked meanwhile.
   */
  private keys({ createRemoteJWKSet, customFetch }: Jose): Promise<JWTVerifyGetKey> {
    this.jwks ??= (async () =>
      createRemoteJWKSet(this.o.jwksUrl ? new URL(this.o.jwksUrl) : await discoverJwks(this.o.issuer), {
        [customFetch]: (url: string, init: RequestInit) => this.fetchJwks(url, init),
      }))().catch((err: unknown) => {
      setTimeout(() => (this.jwks = undefined), this.o.retryMs ?? RETRY_MS).unref();
      throw err;
    });
    return this.jwks;
  }

  /**
   * One fetch of the JWKS for jose: the key set, or an error that says why there is none (thrown
   * here, it reaches authenticate as it is, not as a JOSEError), which answers every fetch for
   * retryMs.
   */
  private async fetchJwks(url: string, init: RequestInit): Promise<Response> {
    const failure = this.jwksFailure;
    if (failure && performance.now() < failure.until) throw failure.error;
    let problem: string | undefined;
    let cause: unknown;
    let text = '';
    try {
      const res = await fetch(url, init);
      text = await res.text();
      problem = jwksProblem(res.status, text);
    } catch (err) {
      cause = err;
      problem = `it did not answer (${errorHead(err)}${err instanceof Error && err.cause instanceof Error ? `: ${errorHead(err.cause)}` : ''})`;
    }
    if (problem === undefined) {
      this.jwksFailure = undefined;
      return new Response(text, { status: 200, headers: { 'content-type': 'application/json' } });
    }
    const error = new Error(
      `The OIDC issuer's signing keys (JWKS) at ${url} could not be fetched: ${problem}. Tokens cannot be checked until it answers; retry in a few seconds.`,
      cause === undefined ? undefined : { cause },
    );
    this.jwksFailure = { error, until: performance.now() + (this.o.retryMs ?? RETRY_MS) };
    throw error;
  }

  async authenticate(token: string | undefined): Promise<AuthResult> {
    if (token === undefined) return missingToken();
    const j = await loadJose();
    const { errors } = j;
    let payload: JWTPayload;
    try {
      ({ payload } = await j.jwtVerify(token, await this.keys(j), { issuer: this.o.issuer, audience: this.o.audience, requiredClaims: ['exp'] }));
    } catch (err) {
      // A JWKS that cannot be fetched is not the token's fault: that throws (503 with retry), never 401.
      if (err instanceof errors.JOSEError && isTokenFault(err)) return badToken(describe(err, errors));
      throw err;
    }
    return identityFromClaims(payload, this.o.usernameClaim, this.o.groupsClaim);
  }
}
