// Builds the configured authentication mode. Tokens never leave this folder.
import type { AuthenticationV1Api } from '@kubernetes/client-node';
import { AuthenticationV1ApiRequestFactory, AuthenticationV1ApiResponseProcessor } from '@kubernetes/client-node/dist/gen/apis/AuthenticationV1Api.js';
import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import { apiClass } from '../kube/api-client.js';
import type { KubeClients } from '../kube/clients.js';
import { ANONYMOUS, prefixed, type AuthResult, type Authenticator } from './identity.js';
import type { AuthHttpOptions } from './middleware.js';
import { KubernetesAuthenticator } from './kubernetes.js';
import { OidcAuthenticator } from './oidc.js';
import { SecretWatch } from './secret-watch.js';
import { TokensAuthenticator } from './tokens.js';

export { identityOf, authMiddleware, metadataHandler, METADATA_PATH } from './middleware.js';
export type { Identity, Authenticator, AuthMode } from './identity.js';

export interface Auth {
  http: AuthHttpOptions;
  /** Ready to authenticate (the tokens Secret read once). */
  start(): Promise<void>;
  stop(): Promise<void>;
}

type AuthConfig = Pick<
  Config,
  | 'authMode'
  | 'namespace'
  | 'authTokensSecret'
  | 'authAudience'
  | 'oidcIssuer'
  | 'oidcAudience'
  | 'oidcJwksUrl'
  | 'oidcUsernameClaim'
  | 'oidcGroupsClaim'
  | 'usernamePrefix'
  | 'groupsPrefix'
  | 'publicUrl'
>;

const none: Authenticator = { mode: 'none', authenticate: async (): Promise<AuthResult> => ({ ok: true, identity: ANONYMOUS }) };

export function createAuth(config: AuthConfig, clients: KubeClients, log: Logger): Auth {
  const http = (authenticator: Authenticator): AuthHttpOptions => ({
    authenticator,
    ...(config.publicUrl && { publicUrl: config.publicUrl }),
    ...(config.oidcIssuer && config.authMode === 'oidc' && { issuer: config.oidcIssuer }),
  });
  // The names the gateway authenticates itself, kept apart from the cluster's (not TokenReview's: those are the cluster's).
  const own = (a: Authenticator): Authenticator => prefixed(a, { user: config.usernamePrefix, groups: config.groupsPrefix });
  const alwaysReady = { start: async (): Promise<void> => undefined, stop: async (): Promise<void> => undefined };
  switch (config.authMode) {
    case 'none':
      return { http: http(none), ...alwaysReady };
    case 'kubernetes':
      return {
        http: http(
          new KubernetesAuthenticator(
            clients.kc.makeApiClient(apiClass<AuthenticationV1Api>(AuthenticationV1ApiRequestFactory, AuthenticationV1ApiResponseProcessor)),
            config.authAudience,
            log,
          ),
        ),
        ...alwaysReady,
      };
    case 'oidc':
      return {
        http: http(
          own(
            new OidcAuthenticator({
              issuer: config.oidcIssuer ?? '',
              audience: config.oidcAudience ?? '',
              ...(config.oidcJwksUrl && { jwksUrl: config.oidcJwksUrl }),
              usernameClaim: config.oidcUsernameClaim,
              groupsClaim: config.oidcGroupsClaim,
            }),
          ),
        ),
        ...alwaysReady,
      };
    case 'tokens': {
      const tokens = new TokensAuthenticator(log);
      const watch = new SecretWatch(clients.kc, clients.core, config.namespace, config.authTokensSecret, (s) => tokens.load(s), log);
      return { http: http(own(tokens)), start: () => watch.start(), stop: () => watch.stop() };
    }
  }
}
