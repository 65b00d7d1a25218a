import { defineEntity, VectorType, type InferEntity } from 'rpc-service/plugin';

/**
 * A chunk: a small overlapping run of a section's text, matched against
 * questions. Two embedding columns: one answers searches while, after the
 * embedding model changes, the other is filled with the new model's vectors
 * (EmbeddingColumns keeps which is which, in core_embedding_state).
 */
export const IndexChunk = defineEntity({
  name: 'IndexChunk',
  tableName: 'knowledge_base_chunk',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    source: p.text(),
    recordId: p.uuid(),
    /** What a search may be narrowed to: a documentation instance, a knowledge-base collection. */
    collection: p.text().nullable(),
    sectionId: p.uuid(),
    ordinal: p.integer(),
    heading: p.text(),
    text: p.text(),
    /** SHA-256 of heading and text: an unchanged chunk keeps its embeddings when its record is written again. */
    contentHash: p.text(),
    /** The record's fields a search filters on (list operators on metadata keys). */
    metadata: p.json<Record<string, unknown>>(),
    searchVector: p.text().columnType('tsvector').lazy(),
    embeddingA: p.type(VectorType).nullable().lazy(),
    embeddingB: p.type(VectorType).nullable().lazy(),
    /** Set when its record is deleted: out of every search at once, removed by the clean-up job. */
    withdrawn: p.boolean().default(false),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  }),
  indexes: [
    { properties: ['subscriptionId', 'source', 'collection'] },
    { properties: ['subscriptionId', 'source', 'recordId'] },
    // Chunks waiting for their embedding, per column: a search checks for them every time, so finding none must cost nothing.
    {
      name: 'knowledge_base_chunk_pending_a_index',
      expression:
        'create index "knowledge_base_chunk_pending_a_index" on "knowledge_base_chunk" ("subscription_id", "source", "collection") where "embedding_a" is null and not "withdrawn"',
    },
    {
      name: 'knowledge_base_chunk_pending_b_index',
      expression:
        'create index "knowledge_base_chunk_pending_b_index" on "knowledge_base_chunk" ("subscription_id", "source", "collection") where "embedding_b" is null and not "withdrawn"',
    },
    {
      name: 'knowledge_base_chunk_search_vector_index',
      // Without a pending list (fastupdate): the embedded database has no autovacuum to merge one, and a search would read it whole.
      expression: 'create index "knowledge_base_chunk_search_vector_index" on "knowledge_base_chunk" using gin ("search_vector") with (fastupdate = off)',
    },
    // As MemoryRpc's index (see its README): a denser graph than pgvector's default, cosine distance.
    {
      name: 'knowledge_base_chunk_embedding_a_index',
      expression:
        'create index "knowledge_base_chunk_embedding_a_index" on "knowledge_base_chunk" using hnsw ("embedding_a" vector_cosine_ops) with (m = 24, ef_construction = 128)',
    },
    {
      name: 'knowledge_base_chunk_embedding_b_index',
      expression:
        'create index "knowledge_base_chunk_embedding_b_index" on "knowledge_base_chunk" using hnsw ("embedding_b" vector_cosine_ops) with (m = 24, ef_construction = 128)',
    },
  ],
});
export type IndexChunk = InferEntity<typeof IndexChunk>;
