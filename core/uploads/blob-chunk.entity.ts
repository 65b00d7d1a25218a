import { defineEntity, type InferEntity } from '@mikro-orm/core';

/** Bytes of the subscription's files, kept once however many parts name them (core/uploads/blob.entity.ts). */
export const BlobChunk = defineEntity({
  name: 'BlobChunk',
  tableName: 'core_blob_chunk',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    hash: p.text().primary(),
    size: p.integer(),
    /** Parts naming it, over every blob of the subscription. */
    refs: p.integer(),
    data: p.blob().lazy(),
  }),
});
export type BlobChunk = InferEntity<typeof BlobChunk>;
