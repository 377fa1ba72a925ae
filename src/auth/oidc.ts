// Mode `oidc`: the gateway is an OAuth 2.1 resource server as the MCP authorization specification
// describes. Access tokens are JWTs checked with `jose` against the issuer's JWKS (signature,
// issuer, audience, expiry); the JWKS location comes from CODEMODE_OIDC_JWKS_URL or the issuer's
// discovery document. Clients find the issuer through /.well-known/oauth-protected-resource.
// `jose` loads with the first token: a gateway in another mode never loads it.
import type * as JoseModule from 'jose';
import type { JWTPayload, JWTVerifyGetKey } from 'jose';
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
  /** After a failed discovery, requests are refused (503) this long before it is tried again. */
  discoveryRetryMs?: number;
}

const DISCOVERY_RETRY_MS = 5_000;

async function discoverJwks(issuer: string): Promise<URL> {
  const url = `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
  const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
  if (!res.ok) throw new Error(`OIDC discovery at ${url} answered ${res.status}`);
  const doc = (await res.json()) as { jwks_uri?: unknown };
  if (typeof doc.jwks_uri !== 'string') throw new Error(`OIDC discovery at ${url} has no jwks_uri`);
  return new URL(doc.jwks_uri);
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

  constructor(private readonly o: OidcOptions) {}

  /**
   * The issuer's keys (jose fetches the JWKS once and again only for an unknown key, at most every
   * 30 s). The discovery before it is shared by the requests that wait for it, and a failed one is
   * their answer for discoveryRetryMs: requests with made-up tokens while the issuer is down do
   * not each make a request to it.
   */
  private keys({ createRemoteJWKSet }: Jose): Promise<JWTVerifyGetKey> {
    this.jwks ??= (async () => createRemoteJWKSet(this.o.jwksUrl ? new URL(this.o.jwksUrl) : await discoverJwks(this.o.issuer)))().catch((err: unknown) => {
      setTimeout(() => (this.jwks = undefined), this.o.discoveryRetryMs ?? DISCOVERY_RETRY_MS).unref();
      throw err;
    });
    return this.jwks;
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
      if (err instanceof errors.JOSEError && !(err instanceof errors.JWKSTimeout)) return badToken(describe(err, errors));
      throw err;
    }
    return identityFromClaims(payload, this.o.usernameClaim, this.o.groupsClaim);
  }
}
