import type { EntityManager } from 'rpc-service/plugin';

/**
 * Hybrid search's full-text side, kept bounded. Ranking every chunk that
 * holds any word of a question costs a row read and a `ts_rank_cd` per
 * match, and a common word matches a large share of a big source. So the
 * candidates are the chunks holding all the question's words and those
 * holding any of its uncommon words (each brings at most COMMON_CHUNKS), at
 * most TEXT_WINDOW of each. Which words are common is counted per
 * subscription and source by the `countWords` job, never across tenants.
 */

/** The most full-text candidates of each kind one search ranks. */
export const TEXT_WINDOW = 500;
/** A word held by more chunks than this is common. */
export const COMMON_CHUNKS = TEXT_WINDOW / 5;
/** Writes within this long share one count. */
export const COUNT_DELAY_SECONDS = 30;

/**
 * Counts the words of a source's chunks and keeps the common ones. A source
 * of at most TEXT_WINDOW chunks keeps none: its searches rank every match.
 */
export async function countCommonWords(em: EntityManager, subscriptionId: string, source: string): Promise<number> {
  await em.execute('delete from knowledge_base_common_word where subscription_id = ? and source = ?', [subscriptionId, source]);
  const [size] = await em.execute<{ chunks: string }[]>(
    'select count(*) as chunks from knowledge_base_chunk where subscription_id = ? and source = ? and not withdrawn',
    [subscriptionId, source],
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
    [subscriptionId, source, subscriptionId, source, COMMON_CHUNKS],
  );
  return Number(kept!.words);
}

/**
 * SQL for the question's uncommon words as a tsquery matching any of them
 * (null when it has none), computed inside the full-text statement; its
 * values: the question, the subscription, the source.
 */
export function uncommonWordsQuery(config: string): string {
  // A tsquery's quoted lexeme: backslashes escaped, quotes doubled. `offset 0` keeps the lookup one index probe per word: made a
  // join, it was planned as a scan of the source's every common word (thousands) for a question of a few.
  return `(select string_agg('''' || replace(replace(q.lexeme, '\\', '\\\\'), '''', '''''') || '''', ' | ')::tsquery
     from unnest(tsvector_to_array(to_tsvector('${config}', ?))) as q(lexeme)
     where not exists (select 1 from knowledge_base_common_word w where w.subscription_id = ? and w.source = ? and w.lexeme = q.lexeme offset 0))`;
}
