import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { ApiKeyService } from './api-key.service.ts';

/** What the API-key plugin uses: the core's database, credential caches and keyring, and the auth plugin's users. */
export const DEPS = ['db', 'credentials', 'keyring', 'secretBox', 'userService'] as const;

export type ApiKeyDeps = Deps<typeof DEPS, { apiKeyService: ApiKeyService }>;

export const defineOperation = operationBuilder<ApiKeyDeps>();
