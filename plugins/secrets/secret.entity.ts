import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** A zone-based secret: its definition, and its value sealed by the keyring. `_id` is `<zone>:<key>`. */
export const Secret = defineEntity({
  name: 'Secret',
  tableName: 'secrets',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    zone: p.text(),
    key: p.text(),
    description: p.text(),
    /** Sealed under the subscription's data key; never leaves the service except through getSecretValue. */
    value: p.text(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  }),
  uniques: [{ properties: ['subscriptionId', 'zone', 'key'] }],
});
export type Secret = InferEntity<typeof Secret>;
