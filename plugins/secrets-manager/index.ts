import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import * as v from 'valibot';
import { DEPS, type SecretsManagerDeps } from './deps.ts';
import { migrations } from './migrations/index.ts';
import { create, getData, getScopeOptions, getSecretValue, remove, update } from './operations.ts';
import { ScopedSecret } from './scoped-secret.entity.ts';
import { SCOPED_SECRET, SCOPED_SECRET_CHANGED, ScopedSecretsService } from './scoped-secrets.service.ts';

declare module 'rpc-service/plugin' {
  interface PluginServices {
    /** Scope-based secrets; `getSecretValue(ctx, id)` gives a value to another group, audited. */
    scopedSecretsService: ScopedSecretsService;
  }
}

/** SecretsManagerRpc: secrets of the subscription, a project or an agent; values sealed, reads audited. */
export const secretsManagerPlugin = definePlugin<SecretsManagerDeps>({
  id: 'secrets-manager',
  group: 'SecretsManagerRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  entities: [ScopedSecret],
  migrations,
  services: { scopedSecretsService: asClass(ScopedSecretsService).singleton() },
  exports: ['scopedSecretsService'],
  extends: {
    'core.events': [
      {
        name: SCOPED_SECRET_CHANGED,
        describe:
          'A scope-based secret was created, updated or deleted: {action, _id, scope, projectId, agentName, key, label, description, createdAt, updatedAt}; never its value.',
        payload: v.strictObject({ action: v.picklist(['created', 'updated', 'deleted']), ...SCOPED_SECRET.entries }),
      },
    ],
  },
  operations: { getData, create, update, delete: remove, getSecretValue, getScopeOptions },
});
