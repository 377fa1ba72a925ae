// HTTP side of authentication: the bearer token of every /mcp request is checked by the configured
// Authenticator; a refusal is a 401 whose WWW-Authenticate header points the client to the
// protected-resource metadata (RFC 9728), as the MCP authorization specification asks. The
// identity is attached to the request for the tools (identityOf). Probes and /metrics are not
// covered: they are mounted outside /mcp.
import type { Context, MiddlewareHandler } from 'hono';
import { ANONYMOUS, bearerToken, identityProblem, type AuthFailure, type AuthOutcome, type Authenticator, type Identity } from './identity.js';
import { ReviewsBusyError } from './review-cache.js';

const identities = new WeakMap<Request, Identity>();

/** The caller of an MCP request (tools get the Request from the SDK's context). */
export function identityOf(req: Request | undefined): Identity | undefined {
  return req ? identities.get(req) : undefined;
}

/**
 * `to` (a request rebuilt from `from`, e.g. with its body replayed) has `from`'s caller: a request
 * that reached the tools without one would be taken for an internal caller, who sees everything.
 */
export function carryIdentity(from: Request, to: Request): void {
  const id = identities.get(from);
  if (id !== undefined) identities.set(to, id);
}

export const METADATA_PATH = '/.well-known/oauth-protected-resource';

export interface AuthHttpOptions {
  authenticator: Authenticator;
  /** Public base URL of the gateway (scheme://host[:port]); by default the request's own. */
  publicUrl?: string;
  /** OIDC issuer, listed as the authorization server in the metadata. */
  issuer?: string;
  /** Told what became of each request's authentication (the metrics). */
  onResult?: (outcome: AuthOutcome) => void;
}

function baseUrl(c: Context, publicUrl: string | undefined): string {
  if (publicUrl) return publicUrl.replace(/\/$/, '');
  const u = new URL(c.req.url);
  return `${u.protocol}//${u.host}`;
}

/** Pure: the WWW-Authenticate header of a refusal (RFC 6750 quoting; no token in it). */
export function wwwAuthenticate(metadataUrl: string, failure: AuthFailure): string {
  const q = (s: string): string => s.replace(/["\\]/g, '');
  return `Bearer resource_metadata="${q(metadataUrl)}", error="${failure.error}", error_description="${q(failure.description)}"`;
}

/** Pure: the protected-resource metadata document (RFC 9728) for the /mcp resource. */
export function resourceMetadata(base: string, issuer: string | undefined): Record<string, unknown> {
  return {
    resource: `${base}/mcp`,
    ...(issuer && { authorization_servers: [issuer] }),
    bearer_methods_supported: ['header'],
    resource_name: 'codemode-operator',
  };
}

export function authMiddleware(o: AuthHttpOptions): MiddlewareHandler {
  return async (c, next) => {
    if (o.authenticator.mode === 'none') {
      o.onResult?.('accepted');
      identities.set(c.req.raw, ANONYMOUS);
      return next();
    }
    let result;
    try {
      result = await o.authenticator.authenticate(bearerToken(c.req.header('authorization')));
    } catch (err) {
      o.onResult?.(err instanceof ReviewsBusyError ? 'busy' : 'unavailable');
      c.header('Retry-After', '2');
      return c.json({ jsonrpc: '2.0', id: null, error: { code: -32000, message: (err as Error).message } }, 503);
    }
    if (!result.ok) {
      o.onResult?.(result.failure.error === 'invalid_request' ? 'no_token' : 'invalid_token');
      c.header('WWW-Authenticate', wwwAuthenticate(`${baseUrl(c, o.publicUrl)}${METADATA_PATH}/mcp`, result.failure));
      // Not kept alive: a client that never authenticates must not hold one of the replica's
      // connections (CODEMODE_MAX_CONNECTIONS) for the keep-alive timeout (gateway/http-server.ts).
      c.header('Connection', 'close');
      return c.json({ jsonrpc: '2.0', id: null, error: { code: -32001, message: `Unauthorized: ${result.failure.description}` } }, 401);
    }
    // A valid token whose identity cannot be recorded as an owner exactly: refused, not retried.
    // Names from the gateway's own authenticators cannot be Kubernetes' reserved ones: a token user
    // "anonymous" in group system:unauthenticated would pass for the unauthenticated caller.
    const problem = identityProblem(result.identity, o.authenticator.mode === 'kubernetes' ? 'cluster' : 'gateway');
    o.onResult?.(problem ? 'forbidden' : 'accepted');
    if (problem) {
      c.header('Connection', 'close');
      return c.json({ jsonrpc: '2.0', id: null, error: { code: -32001, message: `Forbidden: ${problem}` } }, 403);
    }
    identities.set(c.req.raw, result.identity);
    return next();
  };
}

/** Serves the metadata at both places clients look (path-inserted and root). */
export function metadataHandler(o: AuthHttpOptions): (c: Context) => Response {
  return (c) => c.json(resourceMetadata(baseUrl(c, o.publicUrl), o.issuer));
}
