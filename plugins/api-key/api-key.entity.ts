import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** An API key of a user: the prefix finds it, the SHA-256 of the whole key proves it, a sealed copy is kept. */
export const ApiKey = defineEntity({
  name: 'ApiKey',
  tableName: 'api_key',
  properties: (p) => ({
    id: p.uuid().primary(),
    subscriptionId: p.uuid(),
    userId: p.uuid(),
    prefix: p.text().unique(),
    /** SHA-256 of the full key, hex. */
    keyHash: p.text(),
    /** The full key sealed with the master key. */
    encryptedKey: p.text(),
    description: p.text(),
    isEnabled: p.boolean().default(true),
    initialContext: p.json<Record<string, unknown>>().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  }),
  indexes: [{ properties: ['subscriptionId', 'userId'] }],
});
export type ApiKey = InferEntity<typeof ApiKey>;
