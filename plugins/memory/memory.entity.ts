import { defineEntity, VectorType, type InferEntity } from 'rpc-service/plugin';

export const SCOPES = ['user', 'global'] as const;
/** The text search configuration of a memory's words: English stemming (installs, installing, installed match install). */
export const TEXT_SEARCH_CONFIG = 'english';
export type Scope = (typeof SCOPES)[number];

/** Indexes each of the two embedding columns has (see EmbeddingColumns: one answers, the other is filled during a change of model). */
const perColumn = (slot: 'a' | 'b') => [
  {
    // An owner's embeddings side by side, so a recall that compares every candidate reads a few index pages
    // instead of one heap page per memory (an index-only scan); it costs a second copy of each embedding.
    name: `memory_exact_search_${slot}_index`,
    expression: `create index "memory_exact_search_${slot}_index" on "memory" ("subscription_id", "scope", "user_id") include ("id", "embedding_${slot}") where "embedding_${slot}" is not null`,
  },
  {
    // Cosine distance, the operator recall orders by; tenant and owner conditions go inside the same query (iterative scans).
    // A denser graph than pgvector's default (m 16, ef_construction 64): test/bench/ai.ts measures recall@10 0.97 at 100,000 memories with it.
    name: `memory_embedding_${slot}_index`,
    expression: `create index "memory_embedding_${slot}_index" on "memory" using hnsw ("embedding_${slot}" vector_cosine_ops) with (m = 24, ef_construction = 128)`,
  },
  {
    // Memories still without a vector in this column, found at once by a change of model.
    name: `memory_pending_${slot}_index`,
    expression: `create index "memory_pending_${slot}_index" on "memory" ("subscription_id") where "embedding_${slot}" is null`,
  },
];

/**
 * A memory: a text, its words, its metadata and its embedding, of one user (scope
 * `user`) or of the whole subscription (`global`, userId null). A scope and
 * owner hold one memory per content (by its SHA-256). The embedding is in
 * one of two columns (EmbeddingColumns says which), so that the embedding
 * model can change without downtime. The caller may choose the id, so it is
 * unique within a subscription only: an id another tenant uses is free here.
 */
export const Memory = defineEntity({
  name: 'Memory',
  tableName: 'memory',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    scope: p.enum([...SCOPES]),
    userId: p.uuid().nullable(),
    content: p.text(),
    contentHash: p.text(),
    metadata: p.json<Record<string, unknown>>(),
    /** The content's words, stemmed (TEXT_SEARCH_CONFIG): what recall ranks by BM25. */
    searchVector: p.text().columnType('tsvector').lazy(),
    embeddingA: p.type(VectorType).nullable().lazy(),
    embeddingB: p.type(VectorType).nullable().lazy(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  }),
  indexes: [
    { properties: ['subscriptionId', 'scope', 'userId', 'createdAt'] },
    {
      // Without a pending list (fastupdate): the embedded database has no autovacuum to merge one, and a recall would read it whole.
      name: 'memory_search_vector_index',
      expression: 'create index "memory_search_vector_index" on "memory" using gin ("search_vector") with (fastupdate = off)',
    },
    ...perColumn('a'),
    ...perColumn('b'),
  ],
  uniques: [
    {
      name: 'memory_content_unique',
      expression:
        'create unique index "memory_content_unique" on "memory" ' +
        `("subscription_id", "scope", coalesce("user_id", '00000000-0000-0000-0000-000000000000'), "content_hash")`,
    },
  ],
});
export type Memory = InferEntity<typeof Memory>;
