// A local OIDC issuer for the auth tests: generated RS256 keys, discovery and JWKS over HTTP.
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type CryptoKey } from 'jose';

export interface LocalIssuer {
  /** Its URL (the `iss` its tokens carry). */
  url: string;
  /** The private key of its JWKS's one key, `kid` k1. */
  key: CryptoKey;
  /** The paths it was asked for, in order. */
  requests: string[];
  /** While true, discovery answers 503. */
  discoveryDown: boolean;
  /** How /jwks answers: its keys, this HTTP status (a redirect to itself for 3xx), a body that is not JSON, or JSON that is not a key set. */
  jwks: 'ok' | 'not-json' | 'not-a-set' | number;
  close(): Promise<void>;
}

export async function startIssuer(): Promise<LocalIssuer> {
  const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  let url = '';
  const requests: string[] = [];
  const server = createServer((req, res) => {
    requests.push(req.url ?? '');
    res.setHeader('content-type', 'application/json');
    if (req.url === '/.well-known/openid-configuration' && issuer.discoveryDown) res.writeHead(503).end('{}');
    else if (req.url === '/.well-known/openid-configuration') res.end(JSON.stringify({ issuer: url, jwks_uri: `${url}/jwks` }));
    else if (req.url === '/jwks') answerJwks(res, issuer.jwks, jwk);
    else res.writeHead(404).end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const issuer: LocalIssuer = {
    url,
    key: privateKey,
    requests,
    discoveryDown: false,
    jwks: 'ok',
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
  return issuer;
}

function answerJwks(res: ServerResponse, how: LocalIssuer['jwks'], jwk: object): void {
  if (how === 'ok') res.end(JSON.stringify({ keys: [jwk] }));
  else if (how === 'not-json') res.setHeader('content-type', 'text/html').end('<html>maintenance</html>');
  else if (how === 'not-a-set') res.end(JSON.stringify({ error: 'maintenance' }));
  else res.writeHead(how, how >= 300 && how < 400 ? { location: '/jwks' } : {}).end('{}');
}
