import { defineEntity, type InferEntity } from '@mikro-orm/core';

/** A file received through an upload key; its bytes live in the FileStorage under `storagePath`. */
export const StoredFile = defineEntity({
  name: 'StoredFile',
  tableName: 'core_file',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
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
