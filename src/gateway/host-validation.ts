// DNS-rebinding protection for /mcp. A web page the user visits can make the browser send requests
// to a name that resolves to the gateway (or to localhost when it runs on a laptop); checking Host
// and Origin against an allow-list stops that page from running code through the user's agent
// credentials. Probes (/healthz, /readyz) are not covered: the kubelet calls them by pod IP.
//
// Not the SDK's @modelcontextprotocol/hono validators (hostHeaderValidation, originValidation):
// they compare hostnames only, so a listed https://app.example.com would also admit an
// http://app.example.com:8080 page, and they cannot pin a Host to one port or refuse the opaque
// `null` origin; their errors cannot name the setting to change. Same shape, stricter rules here.
import type { MiddlewareHandler } from 'hono';

export const ALLOWED_HOSTS_ENV = 'CODEMODE_ALLOWED_HOSTS';
export const ALLOWED_ORIGINS_ENV = 'CODEMODE_ALLOWED_ORIGINS';

// WHATWG URL parsing normalises case, IPv6 brackets and default ports, so header and allow-list
// entries are compared in one canonical form.
const LOOPBACK_HOSTNAMES: ReadonlySet<string> = new Set(['localhost', '127.0.0.1', '[::1]']);

export interface HostValidationOptions {
  allowedHosts: readonly string[];
  allowedOrigins: readonly string[];
}

interface HostAndPort {
  hostname: string;
  port: string;
}

function parseHost(value: string): HostAndPort | undefined {
  // A Host header is "name[:port]"; anything with a path, user info or query is not a host.
  if (value === '' || /[/?#@\s]/.test(value)) return undefined;
  try {
    const url = new URL(`http://${value}`);
    return { hostname: url.hostname, port: url.port };
  } catch {
    return undefined;
  }
}

/** True when the Host header names the gateway: a loopback name (any port) or an allowed host. */
export function isAllowedHost(hostHeader: string | undefined, allowedHosts: readonly string[]): boolean {
  if (hostHeader === undefined) return false;
  const host = parseHost(hostHeader);
  if (host === undefined) return false;
  if (LOOPBACK_HOSTNAMES.has(host.hostname)) return true;
  return allowedHosts.some((entry) => {
    const allowed = parseHost(entry.trim());
    if (allowed === undefined || allowed.hostname !== host.hostname) return false;
    // An entry without a port allows every port: the gateway often sits behind a Service or
    // Ingress whose port differs from the container's.
    return !/:\d+$/.test(entry.trim()) || allowed.port === host.port;
  });
}

/**
 * True when the request has no Origin (non-browser clients do not send one), a loopback origin,
 * or an allowed origin. `null` and unparsable origins are refused: an opaque origin is exactly
 * what a hostile sandboxed iframe sends.
 */
export function isAllowedOrigin(originHeader: string | undefined, allowedOrigins: readonly string[]): boolean {
  if (originHeader === undefined || originHeader === '') return true;
  let origin: URL;
  try {
    origin = new URL(originHeader);
  } catch {
    return false;
  }
  if (origin.hostname === '' || origin.origin === 'null') return false;
  if (LOOPBACK_HOSTNAMES.has(origin.hostname)) return true;
  return allowedOrigins.some((raw) => {
    const entry = raw.trim();
    if (entry.includes('://')) {
      try {
        return new URL(entry).origin === origin.origin;
      } catch {
        return false;
      }
    }
    return parseHost(entry)?.hostname === origin.hostname;
  });
}

function refusal(header: 'Host' | 'Origin', value: string | undefined): object {
  const env = header === 'Host' ? ALLOWED_HOSTS_ENV : ALLOWED_ORIGINS_ENV;
  const shown = value === undefined ? '(missing)' : JSON.stringify(value.slice(0, 200));
  const message =
    header === 'Host'
      ? `Host header ${shown} is not allowed by this gateway. If clients reach the gateway by this name, add it to ${env} (comma-separated).`
      : `Origin header ${shown} is not allowed by this gateway. If this web origin may call the gateway, add it to ${env} (comma-separated).`;
  // JSON-RPC error shape, like the SDK's own validators, so MCP clients surface the message.
  return { jsonrpc: '2.0', error: { code: -32000, message, data: { header, env } }, id: null };
}

/** Hono middleware that answers 403 when Host or Origin is not allowed. */
export function hostValidation(options: HostValidationOptions): MiddlewareHandler {
  return async (c, next) => {
    const host = c.req.header('host');
    if (!isAllowedHost(host, options.allowedHosts)) return c.json(refusal('Host', host), 403);
    const origin = c.req.header('origin');
    if (!isAllowedOrigin(origin, options.allowedOrigins)) return c.json(refusal('Origin', origin), 403);
    await next();
  };
}
