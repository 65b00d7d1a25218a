import { defineEntity, type InferEntity } from '@mikro-orm/core';

/** A fixed-window counter of failed attempts (core/rate-limits/rate-limiter.ts); the bucket name holds only a hash. */
export const RateLimitBucket = defineEntity({
  name: 'RateLimitBucket',
  tableName: 'core_rate_limit',
  properties: (p) => ({
    bucket: p.text().primary(),
    hits: p.integer(),
    windowEndsAt: p.datetime(),
  }),
});
export type RateLimitBucket = InferEntity<typeof RateLimitBucket>;
