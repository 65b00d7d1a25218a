import { defineEntity, wireTimestamp, type InferEntity } from 'rpc-service/plugin';
import * as v from 'valibot';

export const DELIVERY_STATES = ['pending', 'delivered', 'failed'] as const;
export type DeliveryState = (typeof DELIVERY_STATES)[number];

/** One attempt, as kept on its delivery. */
export const ATTEMPT_RECORD = v.strictObject({
  at: wireTimestamp,
  statusCode: v.nullable(v.number()),
  error: v.nullable(v.string()),
  durationMs: v.number(),
});
export type AttemptRecord = v.InferOutput<typeof ATTEMPT_RECORD>;

/**
 * One event for one webhook (an API key's). `seq` orders the deliveries of
 * an endpoint: the oldest pending one goes first, and the others wait for it.
 */
export const WebhookDelivery = defineEntity({
  name: 'WebhookDelivery',
  tableName: 'api_management_delivery',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    apiKeyId: p.uuid(),
    seq: p.bigint('number').autoincrement(),
    /** The event's id: the `id` of the body and the `webhook-id` header, the same on every attempt. */
    eventId: p.uuid(),
    eventType: p.text(),
    /** The exact body sent on every attempt. */
    body: p.text(),
    state: p.enum([...DELIVERY_STATES]),
    attempts: p.integer().default(0),
    nextAttemptAt: p.datetime(),
    lastAttemptAt: p.datetime().nullable(),
    lastStatusCode: p.integer().nullable(),
    lastError: p.text().nullable(),
    /** The latest attempts, newest last (at most 20). */
    attemptLog: p.json<AttemptRecord[]>(),
    deliveredAt: p.datetime().nullable(),
    createdAt: p.datetime(),
  }),
  indexes: [{ properties: ['apiKeyId', 'state', 'seq'] }, { properties: ['subscriptionId', 'state', 'createdAt'] }],
  uniques: [{ properties: ['subscriptionId', 'eventId', 'apiKeyId'] }],
});
export type WebhookDelivery = InferEntity<typeof WebhookDelivery>;
