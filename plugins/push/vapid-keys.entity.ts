import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** The service's VAPID key pair (one row): made once, the private key sealed by the keyring (the service's own data key). */
export const VapidKeys = defineEntity({
  name: 'VapidKeys',
  tableName: 'push_vapid_keys',
  properties: (p) => ({
    id: p.integer().primary().autoincrement(false),
    publicKey: p.text(),
    privateKeySealed: p.text(),
    createdAt: p.datetime(),
  }),
});
export type VapidKeys = InferEntity<typeof VapidKeys>;
