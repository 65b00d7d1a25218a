import { BigIntType, EntitySchema } from '@mikro-orm/core';

export interface UploadKey {
  id: string;
  subscriptionId: string;
  userId: string;
  /** SHA-256 of the key, hex; the key itself is never stored. */
  keyHash: string;
  purpose: string;
  expiresAt: Date;
  /** Set by the operation that finalizes the upload; a used key takes no more files and cannot be finalized again. */
  usedAt: Date | null;
  createdAt: Date;
}

export const UploadKeySchema = new EntitySchema<UploadKey>({
  name: 'UploadKey',
  tableName: 'core_upload_key',
  properties: {
    id: { type: 'uuid', primary: true },
    subscriptionId: { type: 'uuid' },
    userId: { type: 'uuid' },
    keyHash: { type: 'string' },
    purpose: { type: 'string' },
    expiresAt: { type: 'Date', columnType: 'timestamptz' },
    usedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
  },
});

export interface StoredFile {
  id: string;
  subscriptionId: string;
  /** Who uploaded it; null once that user is deleted (the file belongs to the subscription). */
  userId: string | null;
  /** The upload key it came through; null once that key is swept away. */
  uploadKeyId: string | null;
  purpose: string;
  /** The client's name for the file, cleaned; shown to people, never used for paths. */
  fileName: string;
  mimeType: string;
  size: number;
  /** SHA-256 of the bytes, hex. */
  sha256: string;
  /** Where the storage keeps the bytes: `<subscriptionId>/<fileId>`. */
  storagePath: string;
  /** Set when the upload is finalized; files never finalized are swept once their key has expired. */
  finalizedAt: Date | null;
  createdAt: Date;
}

export const StoredFileSchema = new EntitySchema<StoredFile>({
  name: 'StoredFile',
  tableName: 'core_file',
  properties: {
    id: { type: 'uuid', primary: true },
    subscriptionId: { type: 'uuid' },
    userId: { type: 'uuid', nullable: true },
    uploadKeyId: { type: 'uuid', nullable: true },
    purpose: { type: 'string' },
    fileName: { type: 'string' },
    mimeType: { type: 'string' },
    size: { type: new BigIntType('number') },
    sha256: { type: 'string' },
    storagePath: { type: 'string' },
    finalizedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
  },
});

export const uploadEntities = [UploadKeySchema, StoredFileSchema];
