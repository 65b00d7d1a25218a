import { defineEntity } from '@mikro-orm/core';
import { EmbeddingState } from '../ai/embedding-columns.ts';
import { AuditEntry } from '../audit/audit-log.ts';
import { StoredFile, UploadKey } from '../uploads/entities.ts';

/**
 * The core's own tables. The services that use the first two speak SQL to
 * them (counters, large event payloads); the entities exist so that the
 * schema has one definition and its migrations are generated.
 */

/** A fixed-window counter of failed attempts (core/rate-limiter.ts); the bucket name holds only a hash. */
export const RateLimitBucket = defineEntity({
  name: 'RateLimitBucket',
  tableName: 'core_rate_limit',
  properties: (p) => ({
    bucket: p.text().primary(),
    hits: p.integer(),
    windowEndsAt: p.datetime(),
  }),
});

/** An event too large for a NOTIFY payload, read by the other nodes (core/events/bus.ts). */
export const EventPayload = defineEntity({
  name: 'EventPayload',
  tableName: 'core_event_payload',
  properties: (p) => ({
    id: p.bigint('string').primary().autoincrement(),
    body: p.json<unknown>(),
    createdAt: p.datetime().defaultRaw('now()'),
  }),
});

/**
 * A subscription's data key, wrapped by master keys (core/credentials/keyring.ts):
 * `wraps` maps a master key id to the data key sealed under it. Read and
 * written only by the keyring, in SQL.
 */
export const DataKey = defineEntity({
  name: 'DataKey',
  tableName: 'core_data_key',
  properties: (p) => ({
    id: p.uuid().primary(),
    subscriptionId: p.uuid().unique(),
    wraps: p.json<Record<string, string>>(),
    createdAt: p.datetime(),
    rewrappedAt: p.datetime().nullable(),
  }),
});

/**
 * The core tables a plugin's SQL may name (test/core/plugin-boundary.test.ts
 * holds plugins to it): none, since plugins reach the core's data through its
 * services. A table added here is part of the SDK's contract.
 */
export const SHARED_TABLES: readonly string[] = [];

export const coreEntities = [RateLimitBucket, EventPayload, UploadKey, StoredFile, DataKey, AuditEntry, EmbeddingState];
