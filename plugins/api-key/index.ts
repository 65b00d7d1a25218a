import { asClass } from 'awilix';
import { definePlugin, type EntityManager } from 'rpc-service/plugin';
import { ApiKey } from './api-key.entity.ts';
import { ApiKeyService } from './api-key.service.ts';
import { DEPS, type ApiKeyDeps } from './deps.ts';
import { migrations } from './migrations/index.ts';
import { create, getData, remove, update } from './operations.ts';
import { recordFieldsPoint, type RecordFieldsContribution } from './record-fields.ts';

declare module 'rpc-service/plugin' {
  interface PluginServices {
    /** API keys; other groups read which keys a subscription has (keysById). */
    apiKeyService: ApiKeyService;
  }
  interface ExtensionPoints {
    'api-key.recordFields': RecordFieldsContribution;
  }
}

/** ApiKeyRpc: the calling user's API keys; verifies `X-API-Key` for the core. */
export const apiKeyPlugin = definePlugin<ApiKeyDeps>({
  id: 'api-key',
  group: 'ApiKeyRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  entities: [ApiKey],
  migrations,
  services: { apiKeyService: asClass(ApiKeyService).singleton() },
  exports: ['apiKeyService'],
  extensionPoints: [recordFieldsPoint],
  extends: {
    'core.credentials': (deps) => [{ scheme: 'apiKey', verifier: deps.apiKeyService }],
    // A removed user's keys go in the same transaction, and so do the keys of an account its address's owner claims: someone else may hold them.
    'auth.lifecycle': (deps) => {
      const removeKeys = ({ em, userId }: { em: EntityManager; userId: string }) => deps.apiKeyService.removeAllOf(em, userId);
      return [{ userRemoved: removeKeys, accountClaimed: removeKeys }];
    },
  },
  operations: { getData, create, update, delete: remove },
  start: async ({ apiKeyService }) => void (await apiKeyService.resealLegacy()),
});
