import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import * as v from 'valibot';
import { DEPS, type SecretsDeps } from './deps.ts';
import { migrations } from './migrations/index.ts';
import { create, getAuditLog, getData, getSecretValue, remove, update } from './operations.ts';
import { Secret } from './secret.entity.ts';
import { SECRET_CHANGED, SECRET_RECORD, SecretsService } from './secrets.service.ts';

/** SecretsRpc: zone-based secrets, values sealed per subscription and read by admins only, every read and change audited. */
export const secretsPlugin = definePlugin<SecretsDeps>({
  id: 'secrets',
  group: 'SecretsRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  entities: [Secret],
  migrations,
  services: { secretsService: asClass(SecretsService).singleton() },
  extends: {
    'core.events': [
      {
        name: SECRET_CHANGED,
        describe: 'A secret was created, updated or deleted: {action, _id, zone, key, description}; never its value.',
        payload: v.strictObject({ action: v.picklist(['created', 'updated', 'deleted']), ...SECRET_RECORD.entries }),
      },
    ],
  },
  operations: { getData, create, update, delete: remove, getSecretValue, getAuditLog },
});
