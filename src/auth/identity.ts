// Who is calling: what every authentication mode produces and what the rest of the gateway sees.
// Tokens themselves never leave src/auth (never logged, stored or passed on).
export interface Identity {
  /** The user name as the authenticator states it (a token's user, a TokenReview's username, a JWT claim). */
  user: string;
  groups: readonly string[];
}

export type AuthMode = 'none' | 'tokens' | 'kubernetes' | 'oidc';

/** The identity of requests when authentication is off (loopback development only). */
export const ANONYMOUS: Identity = Object.freeze({ user: 'anonymous', groups: Object.freeze(['system:unauthenticated']) });

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

/** The token of an `Authorization: Bearer <token>` header; undefined when absent or not Bearer. */
export function bearerToken(header: string | undefined): string | undefined {
  const m = /^Bearer[ \t]+([A-Za-z0-9\-._~+/]+=*)[ \t]*$/i.exec(header ?? '');
  return m?.[1];
}
