import { COMMON_ROWS, TEXT_WINDOW, type EntityManager, type SqlCondition } from 'rpc-service/plugin';

/**
 * What the full-text side of search (BM25, `rankByWords` of the plugin SDK)
 * counts ahead for the chunks of a source: the common words, and the
 * source's size and mean length, per subscription and source, never across
 * tenants. The `countWords` job counts them after writes; a search counts
 * what the job has not.
 */

/** Writes within this long share one count. */
export const COUNT_DELAY_SECONDS = 30;

/**
 * Counts the words of a source's chunks: keeps the common ones (none for a
 * source of at most TEXT_WINDOW chunks, whose searches count every word) and
 * the source's size and mean length. Answers the common words kept.
 */
export async function countCommonWords(em: EntityManager, subscriptionId: string, source: string): Promise<number> {
  await em.execute('delete from knowledge_base_common_word where subscription_id = ? and source = ?', [subscriptionId, source]);
  const [size] = await em.execute<{ chunks: string }[]>(
    `insert into knowledge_base_source_stat (subscription_id, source, chunks, mean_length, counted_at)
     select ?, ?, count(*), coalesce(avg(length(search_vector)), 0), now()
     from knowledge_base_chunk where subscription_id = ? and source = ? and not withdrawn
     on conflict (subscription_id, source) do update set chunks = excluded.chunks, mean_length = excluded.mean_length, counted_at = excluded.counted_at
     returning chunks`,
    [subscriptionId, source, subscriptionId, source],
  );
  if (Number(size!.chunks) <= TEXT_WINDOW) return 0;
  // ts_stat runs the statement it is given: the subscription and source go in as quoted literals.
  const [kept] = await em.execute<{ words: string }[]>(
    `with kept as (
       insert into knowledge_base_common_word (subscription_id, source, lexeme, chunks, counted_at)
       select ?, ?, word, ndoc, now()
       from ts_stat(format('select search_vector from knowledge_base_chunk where subscription_id = %L and source = %L and not withdrawn', ?::text, ?::text))
       where ndoc > ?
       returning 1)
     select count(*) as words from kept`,
    [subscriptionId, source, subscriptionId, source, COMMON_ROWS],
  );
  return Number(kept!.words);
}

/** The counts `rankByWords` reads for the chunks of a source, as far as the job has made them. */
export function countedWords(subscriptionId: string, source: string): { size: SqlCondition; word: SqlCondition } {
  return {
    size: {
      sql: 'select chunks as rows, mean_length from knowledge_base_source_stat where subscription_id = ? and source = ?',
      params: [subscriptionId, source],
    },
    word: {
      sql: 'select chunks from knowledge_base_common_word where subscription_id = ? and source = ? and lexeme = term.lexeme',
      params: [subscriptionId, source],
    },
  };
}
