import { defineEntity, type InferEntity } from '@mikro-orm/core';

/** One part of a stored blob (core/uploads/blob.entity.ts): its place in the file and the chunk that holds its bytes. */
export const BlobPart = defineEntity({
  name: 'BlobPart',
  tableName: 'core_blob_part',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    blobId: p.uuid().primary(),
    seq: p.integer().primary(),
    /** The chunk's SHA-256, hex. */
    hash: p.text(),
  }),
});
export type BlobPart = InferEntity<typeof BlobPart>;
