import { defineEntity, type InferEntity } from '@mikro-orm/core';

/** An upload key: only its hash is stored; single use, bound to a user and a purpose. */
export const UploadKey = defineEntity({
  name: 'UploadKey',
  tableName: 'core_upload_key',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    userId: p.uuid(),
    /** SHA-256 of the key, hex; the key itself is never stored. */
    keyHash: p.text(),
    purpose: p.text(),
    expiresAt: p.datetime().index(),
    /** Set by the operation that finalizes the upload; a used key takes no more files and cannot be finalized again. */
    usedAt: p.datetime().nullable(),
    createdAt: p.datetime(),
  }),
  uniques: [{ properties: ['subscriptionId', 'keyHash'] }],
});
export type UploadKey = InferEntity<typeof UploadKey>;
