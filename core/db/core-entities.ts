import { defineEntity } from '@mikro-orm/core';
import { EmbeddingState } from '../ai/embedding-columns.ts';
import { AuditEntry } from '../audit/audit-log.ts';
import { StoredFile, UploadKey } from '../uploads/entities.ts';

/**
 * The core's own tables. The services that use the first three speak SQL to
 * them (counters, notifications, an append-only outbox); the entities exist
 * so that the schema has one definition and its migrations are generated.
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

/** A message for a channel with no delivery configured, for the operator to read (written by plugins/auth/message-sender.ts). */
export const OutboxMessage = defineEntity({
  name: 'OutboxMessage',
  tableName: 'core_outbox',
  properties: (p) => ({
    id: p.uuid().primary(),
    channel: p.text(),
    recipient: p.text(),
    subject: p.text(),
    body: p.text(),
    createdAt: p.datetime().index(),
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

export const coreEntities = [RateLimitBucket, EventPayload, OutboxMessage, UploadKey, StoredFile, DataKey, AuditEntry, EmbeddingState];
