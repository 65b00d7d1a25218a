import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * One AI call the core's client reported through `core.aiCalls` (the fields
 * of its `AiCall`). The table was the core's `core_ai_trace` until this plugin
 * took it over (migrations/Migration20261126011446_trace_from_core.ts).
 */
export const AiTrace = defineEntity({
  name: 'AiTrace',
  tableName: 'ai_telemetry_trace',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    traceId: p.uuid().primary(),
    userId: p.uuid().nullable(),
    threadId: p.text().nullable(),
    requestTimestamp: p.datetime(),
    durationMs: p.integer(),
    /** `success` or `error`. */
    status: p.text(),
    provider: p.text(),
    model: p.text(),
    /** `embedding` or `chat`. */
    operation: p.text(),
    callerType: p.text(),
    callerName: p.text(),
    inputTokens: p.integer(),
    outputTokens: p.integer(),
    cachedTokens: p.integer(),
    totalTokens: p.integer(),
    /** In US dollars at the AI catalogue's prices when the call was made; null for a model the catalogue gives no price. */
    costUsd: p.double().nullable(),
    attempts: p.integer(),
    error: p.text().nullable(),
  }),
  indexes: [{ properties: ['subscriptionId', 'requestTimestamp'] }, { properties: ['subscriptionId', 'threadId'] }],
});
export type AiTrace = InferEntity<typeof AiTrace>;
