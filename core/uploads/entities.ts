import { defineEntity, type InferEntity } from '@mikro-orm/core';

/** An upload key: only its hash is stored; single use, bound to a user and a purpose. */
export const UploadKey = defineEntity({
  name: 'UploadKey',
  tableName: 'core_upload_key',
  properties: (p) => ({
    id: p.uuid().primary(),
    subscriptionId: p.uuid(),
    userId: p.uuid(),
    /** SHA-256 of the key, hex; the key itself is never stored. */
    keyHash: p.text().unique(),
    purpose: p.text(),
    expiresAt: p.datetime().index(),
    /** Set by the operation that finalizes the upload; a used key takes no more files and cannot be finalized again. */
    usedAt: p.datetime().nullable(),
    createdAt: p.datetime(),
  }),
});
export type UploadKey = InferEntity<typeof UploadKey>;

/** A file received through an upload key; its bytes live in the FileStorage under `storagePath`. */
export const StoredFile = defineEntity({
  name: 'StoredFile',
  tableName: 'core_file',
  properties: (p) => ({
    id: p.uuid().primary(),
    subscriptionId: p.uuid().index(),
    /** Who uploaded it (informational: the file belongs to the subscription). */
    userId: p.uuid().nullable(),
    /** The upload key it came through; null once that key is swept away. */
    uploadKeyId: p.uuid().nullable().index(),
    purpose: p.text(),
    /** The client's name for the file, cleaned; shown to people, never used for paths. */
    fileName: p.text(),
    mimeType: p.text(),
    size: p.bigint('number'),
    /** SHA-256 of the bytes, hex. */
    sha256: p.text(),
    /** Where the storage keeps the bytes: `<subscriptionId>/<fileId>`. */
    storagePath: p.text(),
    /** Set when the upload is finalized; files never finalized are swept once their key has expired. */
    finalizedAt: p.datetime().nullable(),
    createdAt: p.datetime(),
  }),
  // The sweep looks for files never finalized.
  indexes: [
    {
      name: 'core_file_unfinalized_index',
      expression: 'create index "core_file_unfinalized_index" on "core_file" ("created_at") where "finalized_at" is null',
    },
  ],
});
export type StoredFile = InferEntity<typeof StoredFile>;
