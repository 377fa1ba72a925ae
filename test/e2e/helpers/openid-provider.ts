// A real OpenID provider (the `oidc-provider` package, OpenID Certified) for the oidc auth mode's
// end-to-end tests: discovery, JWKS, and RFC 9068 JWT access tokens from the client credentials
// grant, as an agent's machine identity gets them. Its state lives in memory (the package's
// development adapter): a test's provider lives as long as the test file.
import { createSocket } from 'node:dgram';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair } from 'jose';
import Provider from 'oidc-provider';
import type { TestKube } from './kube.js';

export interface OpenIdProvider {
  /** The issuer URL (the tokens' `iss`), at an address the test's callers reach. */
  issuer: string;
  /**
   * A JWT access token for `audience` (a resource the provider serves tokens for), from the client
   * credentials grant of client `clientId` (its `sub`), with `groups` as a claim.
   */
  token(clientId: string, audience?: string): Promise<string>;
  close(): Promise<void>;
}

const SECRET = 'e2e-client-secret';

/**
 * Starts the provider on `host` (all addresses by default) and names it by `address`: 127.0.0.1
 * for a gateway in this process, the address pods reach this machine at for one in the cluster
 * (podReachableAddress). Tokens are issued for any of `audiences` (the first by default); clients
 * are the ones named, all members of the group `dev`.
 */
export async function startOpenIdProvider(o: { address: string; audiences: string[]; clients: string[]; host?: string }): Promise<OpenIdProvider> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), kid: 'e2e', alg: 'RS256', use: 'sig' };
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, o.host ?? '0.0.0.0', resolve));
  const issuer = `http://${o.address}:${String((server.address() as AddressInfo).port)}`;
  const provider = new Provider(issuer, {
    clients: o.clients.map((id) => ({ client_id: id, client_secret: SECRET, grant_types: ['client_credentials'], redirect_uris: [], response_types: [] })),
    jwks: { keys: [jwk] },
    ttl: { ClientCredentials: 600 },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => o.audiences[0] ?? '',
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => {
          if (!o.audiences.includes(resource)) throw new Error(`not a resource of this provider: ${resource}`);
          return { scope: 'mcp', audience: resource, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } };
        },
      },
    },
    extraTokenClaims: () => ({ groups: ['dev'] }),
  });
  server.on('request', provider.callback());
  return {
    issuer,
    async token(clientId, audience = o.audiences[0]) {
      const res = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${clientId}:${SECRET}`).toString('base64')}`,
        },
        body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'mcp', resource: audience ?? '' }).toString(),
      });
      const body = (await res.json()) as { access_token?: string; error?: string; error_description?: string };
      if (!res.ok || !body.access_token)
        throw new Error(`the provider issued no token: HTTP ${String(res.status)} ${body.error ?? ''} ${body.error_description ?? ''}`);
      return body.access_token;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * The address of this machine that pods reach it at: the one it sends from to the node's
 * InternalIP (the test cluster's node is this machine; for kind, the host's address on the
 * node container's network).
 */
export async function podReachableAddress(k: TestKube): Promise<string> {
  const nodes = await k.core.listNode();
  const nodeIp = nodes.items[0]?.status?.addresses?.find((a) => a.type === 'InternalIP')?.address;
  if (!nodeIp) throw new Error('the node has no InternalIP: cannot tell the address pods reach this machine at');
  const socket = createSocket(nodeIp.includes(':') ? 'udp6' : 'udp4');
  try {
    await new Promise<void>((resolve, reject) => socket.connect(9, nodeIp, (err?: Error) => (err ? reject(err) : resolve())));
    return socket.address().address;
  } finally {
    socket.close();
  }
}
