import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * How many chunks a source holds and how long they are on average (in
 * distinct words), counted by the `countWords` job: BM25's collection size
 * and mean length (text-ranking.ts). Until a source is first counted, a
 * search counts them itself.
 */
export const IndexSourceStat = defineEntity({
  name: 'IndexSourceStat',
  tableName: 'knowledge_base_source_stat',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    source: p.text().primary(),
    chunks: p.integer(),
    meanLength: p.double(),
    countedAt: p.datetime(),
  }),
});
export type IndexSourceStat = InferEntity<typeof IndexSourceStat>;
