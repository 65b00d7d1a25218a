import { jobBuilder, operationBuilder, type Deps } from 'rpc-service/plugin';
import type { OAuthServerConfig } from './config.ts';
import type { ClientDirectory } from './client-directory.ts';
import type { OAuthServerService } from './oauth-server.service.ts';

/** The core services the OAuth server uses, and the auth plugin's users (whose role a token acts with). */
export const DEPS = ['db', 'credentials', 'rateLimiter', 'outbound', 'operations', 'http', 'userService'] as const;

export type OAuthServerDeps = Deps<typeof DEPS, { oauthServerService: OAuthServerService; clientDirectory: ClientDirectory }, OAuthServerConfig>;

export const defineOperation = operationBuilder<OAuthServerDeps>();
export const defineJob = jobBuilder<OAuthServerDeps>();
