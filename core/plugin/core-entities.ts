import { EmbeddingState } from '../ai/embedding-state.entity.ts';
import { AuditEntry } from '../audit/audit-log.entity.ts';
import { DataKey } from '../credentials/data-key.entity.ts';
import { EventPayload } from '../events/event-payload.entity.ts';
import { RateLimitBucket } from '../rate-limits/rate-limit.entity.ts';
import { BlobChunk } from '../uploads/blob-chunk.entity.ts';
import { BlobPart } from '../uploads/blob-part.entity.ts';
import { StoredBlob } from '../uploads/blob.entity.ts';
import { StoredFile } from '../uploads/file.entity.ts';
import { UploadKey } from '../uploads/upload-key.entity.ts';

/**
 * The core tables a plugin's SQL may name (test/core/plugin-boundary.test.ts
 * holds plugins to it): none, since plugins reach the core's data through its
 * services. A table added here is part of the SDK's contract.
 */
export const SHARED_TABLES: readonly string[] = [];

/**
 * The core's tables, each defined in a `<name>.entity.ts` file beside the
 * service that uses it. The rate limiter, the event bus, the keyring and the
 * embedding columns speak SQL to theirs; the entities exist so that the
 * schema has one definition and its migrations are generated.
 */
export const coreEntities = [RateLimitBucket, EventPayload, UploadKey, StoredFile, StoredBlob, BlobPart, BlobChunk, DataKey, AuditEntry, EmbeddingState];
