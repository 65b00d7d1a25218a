import { defineEntity } from '@mikro-orm/core';

/**
 * A subscription's data key, wrapped by master keys (core/credentials/keyring.ts):
 * `wraps` maps a master key id to the data key sealed under it. Read and
 * written only by the keyring, in SQL.
 */
export const DataKey = defineEntity({
  name: 'DataKey',
  tableName: 'core_data_key',
  properties: (p) => ({
    subscriptionId: p.uuid().primary().unique(),
    id: p.uuid().primary(),
    wraps: p.json<Record<string, string>>(),
    createdAt: p.datetime(),
    rewrappedAt: p.datetime().nullable(),
  }),
});
