import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** An API key of a user: the prefix finds it, the SHA-256 of the whole key proves it, a sealed copy is kept. */
export const ApiKey = defineEntity({
  name: 'ApiKey',
  tableName: 'api_key',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    userId: p.uuid(),
    prefix: p.text().unique(),
    /** SHA-256 of the full key, hex. */
    keyHash: p.text(),
    /** The full key sealed with the master key. */
    encryptedKey: p.text(),
    description: p.text(),
    isEnabled: p.boolean().default(true),
    initialContext: p.json<Record<string, unknown>>().nullable(),
    /** Groups (`TaskRpc`) and operations (`TaskRpc.getData`) the key may call; every one its owner's role allows when null. */
    scopes: p.array().nullable(),
    /** Only operations that change nothing (kind `read`), and GET routes. */
    readOnly: p.boolean().default(false),
    /** Calls a minute over every door and node; no limit when null. */
    rateLimitPerMinute: p.integer().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  }),
  indexes: [{ properties: ['subscriptionId', 'userId'] }],
});
export type ApiKey = InferEntity<typeof ApiKey>;
