import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** What one ingestion of a document read: its text, or the stored file it came from, and the Markdown made of it. */
export const DocumentVersion = defineEntity({
  name: 'DocumentVersion',
  tableName: 'knowledge_base_document_version',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    documentId: p.uuid(),
    version: p.integer(),
    docType: p.text(),
    /** Ingested text as given (sourceType text). */
    source: p.text().nullable().lazy(),
    /** The uploaded file (sourceType file). */
    fileId: p.uuid().nullable(),
    fileName: p.text().nullable(),
    /** The page or file fetched (sourceType url); docType and sizeBytes are those of what it answered. */
    sourceUrl: p.text().nullable(),
    sizeBytes: p.bigint('number'),
    /** What the parser made of it, once ingested. */
    markdown: p.text().nullable().lazy(),
    createdBy: p.uuid(),
    createdAt: p.datetime(),
  }),
  uniques: [{ properties: ['subscriptionId', 'documentId', 'version'] }],
  indexes: [{ properties: ['subscriptionId', 'documentId'] }],
});
export type DocumentVersion = InferEntity<typeof DocumentVersion>;
