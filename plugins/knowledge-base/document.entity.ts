import { defineEntity, type InferEntity } from 'rpc-service/plugin';

export const STATUSES = ['pending', 'processing', 'ready', 'failed', 'deleted'] as const;
export type DocumentStatus = (typeof STATUSES)[number];
export const SOURCE_TYPES = ['text', 'file', 'url'] as const;
export type SourceType = (typeof SOURCE_TYPES)[number];

/**
 * A knowledge-base document: its metadata, its status through ingestion, and
 * the version whose text the search index holds. Its text lives in its
 * versions; a deleted document stays (status deleted) without its chunks.
 */
export const KnowledgeDocument = defineEntity({
  name: 'KnowledgeDocument',
  tableName: 'knowledge_base_document',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    name: p.text(),
    description: p.text(),
    collection: p.text().nullable(),
    tags: p.json<string[]>(),
    /** The parser that read it: text, markdown, html, pdf, or a contributed one. */
    docType: p.text(),
    sourceType: p.enum([...SOURCE_TYPES]),
    /** The user it belongs to (the ingesting user unless given). */
    userId: p.uuid().nullable(),
    contactId: p.text().nullable(),
    projectId: p.text().nullable(),
    status: p.enum([...STATUSES]),
    /** Why the last ingestion failed. */
    error: p.text().nullable(),
    /** The latest version; the index holds it once status is ready. */
    version: p.integer(),
    chunkCount: p.integer(),
    /** Bytes of the ingested text or file of the latest version. */
    sizeBytes: p.bigint('number'),
    /** name, description and tags for full-text listing; the text itself is searched through the chunks. */
    searchVector: p.text().columnType('tsvector').nullable().lazy(),
    createdBy: p.uuid(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    deletedAt: p.datetime().nullable(),
  }),
  indexes: [
    { properties: ['subscriptionId', 'status', 'createdAt'] },
    { properties: ['subscriptionId', 'collection'] },
    {
      name: 'knowledge_base_document_search_vector_index',
      expression: 'create index "knowledge_base_document_search_vector_index" on "knowledge_base_document" using gin ("search_vector")',
    },
  ],
});
export type KnowledgeDocument = InferEntity<typeof KnowledgeDocument>;
