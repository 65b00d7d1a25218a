import { defineEntity, VectorType, type InferEntity } from 'rpc-service/plugin';

export const SCOPES = ['user', 'global'] as const;
export type Scope = (typeof SCOPES)[number];

/**
 * A memory: a text, its metadata and its embedding, of one user (scope
 * `user`) or of the whole subscription (`global`, userId null). A scope and
 * owner hold one memory per content (by its SHA-256).
 */
export const Memory = defineEntity({
  name: 'Memory',
  tableName: 'memory_memory',
  properties: (p) => ({
    id: p.uuid().primary(),
    subscriptionId: p.uuid(),
    scope: p.enum([...SCOPES]),
    userId: p.uuid().nullable(),
    content: p.text(),
    contentHash: p.text(),
    metadata: p.json<Record<string, unknown>>(),
    embedding: p.type(VectorType).lazy(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  }),
  indexes: [
    { properties: ['subscriptionId', 'scope', 'userId', 'createdAt'] },
    {
      // An owner's embeddings side by side, so a recall that compares every candidate reads a few index pages
      // instead of one heap page per memory (an index-only scan); it costs a second copy of each embedding.
      name: 'memory_memory_exact_search_index',
      expression: 'create index "memory_memory_exact_search_index" on "memory_memory" ("subscription_id", "scope", "user_id") include ("id", "embedding")',
    },
    {
      // Cosine distance, the operator recall orders by; tenant and owner conditions go inside the same query (iterative scans).
      // A denser graph than pgvector's default (m 16, ef_construction 64): test/bench/ai.ts measures recall@10 0.97 at 100,000 memories with it.
      name: 'memory_memory_embedding_index',
      expression:
        'create index "memory_memory_embedding_index" on "memory_memory" using hnsw ("embedding" vector_cosine_ops) with (m = 24, ef_construction = 128)',
    },
  ],
  uniques: [
    {
      name: 'memory_memory_content_unique',
      expression:
        'create unique index "memory_memory_content_unique" on "memory_memory" ' +
        `("subscription_id", "scope", coalesce("user_id", '00000000-0000-0000-0000-000000000000'), "content_hash")`,
    },
  ],
});
export type Memory = InferEntity<typeof Memory>;
