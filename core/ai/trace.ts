import { defineEntity, type InferEntity } from '@mikro-orm/core';

/**
 * One call the service made to an AI model: who asked (caller type and name,
 * subscription, user), what (provider, model, operation), how it went
 * (status, duration, attempts, error) and the tokens counted. Input tokens
 * include the cached ones; `totalTokens` is input plus output. Prompts and
 * answers are not kept.
 */
export const AiTrace = defineEntity({
  name: 'AiTrace',
  tableName: 'core_ai_trace',
  properties: (p) => ({
    traceId: p.uuid().primary(),
    subscriptionId: p.uuid().nullable(),
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
    attempts: p.integer(),
    error: p.text().nullable(),
  }),
  indexes: [
    { properties: ['subscriptionId', 'requestTimestamp'] },
    { properties: ['subscriptionId', 'threadId'] },
  ],
});
export type AiTrace = InferEntity<typeof AiTrace>;
