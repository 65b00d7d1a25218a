import { asClass } from 'awilix';
import { definePlugin, type EntityManager } from 'rpc-service/plugin';
import { OAuthAuthorization } from './authorization.entity.ts';
import { ClientDirectory } from './client-directory.ts';
import { OAuthClient } from './client.entity.ts';
import { oauthServerSettings } from './config.ts';
import { DEPS, type OAuthServerDeps } from './deps.ts';
import { OAuthGrant } from './grant.entity.ts';
import { migrations } from './migrations/index.ts';
import { OAuthServerService } from './oauth-server.service.ts';
import { approveConsent, denyConsent, getConsent, listApps, listSubscriptionApps, revokeApp, revokeSubscriptionApp, sweep } from './operations.ts';
import { oauthServerRoutes } from './routes.ts';
import { OAuthToken } from './token.entity.ts';

/**
 * OAuthServerRpc: the service as an OAuth 2.1 authorization server for MCP
 * clients and third-party apps (README.md). Its access tokens are a credential
 * scheme of the core, held to their grant's scopes by the same admission step
 * as API keys.
 */
export const oauthServerPlugin = definePlugin<OAuthServerDeps>({
  id: 'oauth-server',
  group: 'OAuthServerRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  config: oauthServerSettings,
  entities: [OAuthClient, OAuthAuthorization, OAuthGrant, OAuthToken],
  migrations,
  services: {
    clientDirectory: asClass(ClientDirectory).singleton(),
    oauthServerService: asClass(OAuthServerService).singleton(),
  },
  extends: {
    'core.credentials': (deps) => [{ scheme: 'oauth', verifier: deps.oauthServerService }],
    // A removed user's grants go with them, and so do those of an account its address's owner claims: someone else authorised those apps.
    'auth.lifecycle': (deps) => {
      const removeGrants = ({ em, userId }: { em: EntityManager; userId: string }) => deps.oauthServerService.removeAllOf(em, userId);
      return [{ userRemoved: removeGrants, accountClaimed: removeGrants }];
    },
  },
  operations: { getConsent, approveConsent, denyConsent, listApps, revokeApp, listSubscriptionApps, revokeSubscriptionApp },
  jobs: { sweep },
  routes: oauthServerRoutes,
});
