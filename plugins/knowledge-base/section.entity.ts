import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * The search index every text source shares (knowledge-base documents,
 * DocumentRpc pages): sections of a record, and the chunks of each section
 * with their full-text vector and embedding. Written and read in SQL by
 * KnowledgeIndex; the entities give the schema one definition.
 */
export const IndexSection = defineEntity({
  name: 'IndexSection',
  tableName: 'knowledge_base_section',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    /** Who indexed the record: `knowledge-base`, `documents`, ... */
    source: p.text(),
    recordId: p.uuid(),
    ordinal: p.integer(),
    /** The record's title and the headings above the section, joined by ` › `. */
    heading: p.text(),
    text: p.text(),
  }),
  indexes: [{ properties: ['subscriptionId', 'source', 'recordId'] }],
});
export type IndexSection = InferEntity<typeof IndexSection>;
