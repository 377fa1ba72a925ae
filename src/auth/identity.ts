// Who is calling: what every authentication mode produces and what the rest of the gateway sees.
// Tokens themselves never leave src/auth (never logged, stored or passed on).
import { MAX_OWNER_GROUPS, MAX_OWNER_NAME_CHARS } from '../api/v1alpha1/owner.js';
import { characters, hasControls } from '../util/text.js';
export interface Identity {
  /** The user name as the authenticator states it (a token's user, a TokenReview's username, a JWT claim). */
  user: string;
  groups: readonly string[];
}

export type AuthMode = 'none' | 'tokens' | 'kubernetes' | 'oidc';

/** The identity of requests when authentication is off (loopback development only). */
export const ANONYMOUS: Identity = Object.freeze({ user: 'anonymous', groups: Object.freeze(['system:unauthenticated']) });

/**
 * What became of a request's authentication (codemode_auth_requests_total): accepted; refused for
 * no token, a token not accepted, or an identity that cannot be recorded (forbidden, 403); or not
 * decided because the token could not be checked (unavailable: TokenReview or the OIDC issuer did
 * not answer) or too many new tokens were being checked (busy): both 503.
 */
export const AUTH_OUTCOMES = ['accepted', 'no_token', 'invalid_token', 'forbidden', 'unavailable', 'busy'] as const;
export type AuthOutcome = (typeof AUTH_OUTCOMES)[number];

/** Why a request was refused; `description` is safe to show the client (never contains the token). */
export interface AuthFailure {
  error: 'invalid_request' | 'invalid_token';
  description: string;
}

export type AuthResult = { ok: true; identity: Identity } | { ok: false; failure: AuthFailure };

/** Checks a bearer token (undefined: none was sent). */
export interface Authenticator {
  readonly mode: AuthMode;
  authenticate(token: string | undefined): Promise<AuthResult>;
  stop?(): Promise<void>;
}

export const missingToken = (): AuthResult => ({
  ok: false,
  failure: { error: 'invalid_request', description: 'No bearer token: send "Authorization: Bearer <token>".' },
});

export const badToken = (description: string): AuthResult => ({ ok: false, failure: { error: 'invalid_token', description } });

/**
 * What a Bearer header can carry (RFC 6750's b64token): letters, digits and -._~+/, then `=`
 * padding. The tokens file refuses other tokens (tokens.ts): they could never be sent.
 */
export const BEARER_TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

/** The token of an `Authorization: Bearer <token>` header; undefined when absent, not Bearer or not a {@link BEARER_TOKEN}. */
export function bearerToken(header: string | undefined): string | undefined {
  const token = /^Bearer[ \t]+([^ \t]+)[ \t]*$/i.exec(header ?? '')?.[1];
  return token !== undefined && BEARER_TOKEN.test(token) ? token : undefined;
}

/** Prepended to the names an authenticator of the gateway's own states (CODEMODE_USERNAME_PREFIX, CODEMODE_GROUPS_PREFIX). */
export interface IdentityPrefixes {
  user?: string | undefined;
  groups?: string | undefined;
}

/** Pure: `identity` with the prefixes, as the API server's --oidc-username-prefix / --oidc-groups-prefix apply them. */
export function withPrefixes(identity: Identity, p: IdentityPrefixes): Identity {
  const user = p.user ?? '';
  const groups = p.groups ?? '';
  if (user === '' && groups === '') return identity;
  return { user: `${user}${identity.user}`, groups: identity.groups.map((g) => `${groups}${g}`) };
}

/** `a`, whose identities carry the prefixes (checked by identityProblem afterwards, like any other). */
export function prefixed(a: Authenticator, p: IdentityPrefixes): Authenticator {
  if (!p.user && !p.groups) return a;
  return {
    mode: a.mode,
    authenticate: async (token) => {
      const r = await a.authenticate(token);
      return r.ok ? { ok: true, identity: withPrefixes(r.identity, p) } : r;
    },
    ...(a.stop && { stop: a.stop.bind(a) }),
  };
}

/** A UTF-16 surrogate without its other half. */
const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function nameProblem(what: string, name: string): string | undefined {
  if (name === '') return `${what} is empty`;
  // Characters (code points), as the API server and the owner schema count them (not UTF-16 units:
  // a name of 256 emoji is 512 units, and fits).
  if (name.length > MAX_OWNER_NAME_CHARS && characters(name) > MAX_OWNER_NAME_CHARS)
    return `${what} is ${characters(name)} characters long; at most ${MAX_OWNER_NAME_CHARS} can be recorded`;
  // The API server stores an unpaired surrogate as U+FFFD: two such names would be stored alike.
  if (hasControls(name) || UNPAIRED_SURROGATE.test(name))
    return `${what} contains control characters or unpaired UTF-16 surrogates, which cannot be recorded and shown as they are`;
  return undefined;
}

/** Names Kubernetes reserves (system:serviceaccount:…, system:unauthenticated, system:masters). */
const RESERVED_PREFIX = 'system:';

/**
 * Who named an identity: the cluster (TokenReview: its names, `system:` ones included) or the
 * gateway's own authenticators (tokens, OIDC), whose names must not pass for the cluster's.
 */
export type IdentitySource = 'cluster' | 'gateway';

/**
 * Pure: why `identity` cannot be the owner of the runs and sessions its calls create (spec.owner,
 * src/api/v1alpha1/owner.ts), or undefined. Ownership is compared on the stored value, so a name
 * must be stored exactly as authenticated: such an identity is refused at the door with this
 * reason rather than by the API server at its first create. From the gateway's own authenticators,
 * Kubernetes' reserved names are refused too (`from`).
 */
export function identityProblem(identity: Identity, from: IdentitySource = 'cluster'): string | undefined {
  if (from === 'gateway') {
    const reserved = [identity.user, ...identity.groups].find((n) => n.startsWith(RESERVED_PREFIX));
    if (reserved !== undefined) {
      const what = reserved === identity.user ? 'The user name' : `A group name (${JSON.stringify(reserved.slice(0, 40))})`;
      return `${what} starts with ${RESERVED_PREFIX}, which Kubernetes reserves for its own users and groups; the gateway takes such names only from the cluster (CODEMODE_AUTH_MODE=kubernetes). Ask the administrator to name users and groups differently, or to set CODEMODE_USERNAME_PREFIX and CODEMODE_GROUPS_PREFIX.`;
    }
  }
  const user = nameProblem('The user name', identity.user);
  if (user) return `${user}. Ask the administrator to name users differently (e.g. CODEMODE_OIDC_USERNAME_CLAIM).`;
  if (identity.groups.length > MAX_OWNER_GROUPS)
    return `The token names ${identity.groups.length} groups; at most ${MAX_OWNER_GROUPS} can be recorded. Ask the administrator to send fewer (e.g. a narrower CODEMODE_OIDC_GROUPS_CLAIM).`;
  for (const g of identity.groups) {
    const group = nameProblem(`A group name (${JSON.stringify(g.slice(0, 40))})`, g);
    if (group) return `${group}. Ask the administrator to name groups differently.`;
  }
  return undefined;
}
