import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * A word (its lexeme) that many of a source's chunks hold, counted by the
 * `countWords` job. Hybrid search takes its full-text candidates from the
 * question's other words, so it never ranks every chunk that holds a common
 * one (text-ranking.ts).
 */
export const IndexCommonWord = defineEntity({
  name: 'IndexCommonWord',
  tableName: 'knowledge_base_common_word',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    source: p.text().primary(),
    lexeme: p.text().primary(),
    /** The chunks that hold it when it was counted. */
    chunks: p.integer(),
    countedAt: p.datetime(),
  }),
});
export type IndexCommonWord = InferEntity<typeof IndexCommonWord>;
