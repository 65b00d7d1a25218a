import { defineEntity, type InferEntity } from '@mikro-orm/core';

/**
 * File bytes kept in the database (core/uploads/database-storage.ts): a blob
 * is a list of parts, each naming a chunk of at most CHUNK_BYTES by its
 * SHA-256. Chunks are the subscription's, shared by every blob of it that
 * holds the same bytes, and counted: one whose count falls to 0 is deleted.
 */
export const StoredBlob = defineEntity({
  name: 'StoredBlob',
  tableName: 'core_blob',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    size: p.bigint('number'),
    /** How many parts it has; set with `complete`. */
    parts: p.integer(),
    /** False while the bytes stream in: a blob is read only once whole, and one left incomplete is swept. */
    complete: p.boolean(),
    createdAt: p.datetime(),
  }),
  // The sweep looks for blobs left incomplete by a node that stopped mid-upload.
  indexes: [{ name: 'core_blob_incomplete_index', expression: 'create index "core_blob_incomplete_index" on "core_blob" ("created_at") where not "complete"' }],
});
export type StoredBlob = InferEntity<typeof StoredBlob>;
