import type { EntityManager } from 'rpc-service/plugin';

/**
 * The full-text side of search: BM25 over the chunks' `search_vector`, in
 * SQL that PGlite and PostgreSQL run alike. A word weighs by how rare it is
 * among the source's chunks (its inverse document frequency), by how often
 * the chunk holds it (saturating) and against the chunk's length. The
 * constants were chosen on BEIR SciFact (docs/decisions/0063-retrieval.md).
 *
 * Kept bounded. The candidates are the chunks holding all the question's
 * words and those holding any of its uncommon words, at most TEXT_WINDOW and
 * RARE_WINDOW of each; a word held by more than COMMON_CHUNKS chunks is
 * common. Which words are common, and the source's size and mean length, are
 * counted per subscription and source by the `countWords` job, never across
 * tenants; a search counts what the job has not.
 */

/** The most candidates holding all the question's words one search ranks. */
export const TEXT_WINDOW = 500;
/** A word held by more chunks than this is common: never a reason on its own to rank a chunk. */
export const COMMON_CHUNKS = 250;
/** The most candidates holding an uncommon word one search ranks. */
export const RARE_WINDOW = 2000;
/** Writes within this long share one count. */
export const COUNT_DELAY_SECONDS = 30;
/** A question's distinct words ranked, at most. */
const QUESTION_WORDS = 64;
/** BM25's saturation of a word's count in a chunk (k1) and its normalisation by length (b). */
const K1 = 1.2;
const B = 0.75;

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
    [subscriptionId, source, subscriptionId, source, COMMON_CHUNKS],
  );
  return Number(kept!.words);
}

/** A chunk's id and its BM25 score. */
export interface TextHit {
  id: string;
  score: number;
}

/**
 * The chunks of `scope` (the subscription and source) passing `where` (which
 * includes the scope), best first by BM25 for `question`, at most `limit`.
 * One statement: the question's words, their frequencies, the candidates and
 * the scores are all worked out inside it.
 */
export async function rankByWords(
  em: EntityManager,
  config: string,
  scope: { subscriptionId: string; source: string },
  where: { sql: string; params: unknown[] },
  question: string,
  limit: number,
): Promise<TextHit[]> {
  const { subscriptionId, source } = scope;
  // A tsquery's quoted lexeme: backslashes escaped, quotes doubled.
  const quoted = `'''' || replace(replace(term.lexeme, '\\', '\\\\'), '''', '''''') || ''''`;
  const rows = await em.execute<{ id: string; score: number }[]>(
    `with stats as (
       select coalesce(stat.chunks, live.chunks)::float8 as chunks, greatest(coalesce(stat.mean_length, live.mean_length), 1)::float8 as mean_length
       from (select 1) one
       left join knowledge_base_source_stat stat on stat.subscription_id = ? and stat.source = ?
       cross join lateral (
         select count(*) as chunks, avg(length(search_vector)) as mean_length
         from knowledge_base_chunk where stat.chunks is null and subscription_id = ? and source = ? and not withdrawn) live),
     term as (
       select lexeme, (${quoted})::tsquery as query
       from (select distinct lexeme from unnest(tsvector_to_array(to_tsvector('${config}', ?))) as lexeme limit ${QUESTION_WORDS}) term),
     word as (
       select term.lexeme, term.query,
              coalesce(common.chunks, (
                select count(*) from (
                  select 1 from knowledge_base_chunk chunk
                  where chunk.subscription_id = ? and chunk.source = ? and not chunk.withdrawn and chunk.search_vector @@ term.query
                  limit ${TEXT_WINDOW + 1}) holding)) as chunks
       from term left join knowledge_base_common_word common on common.subscription_id = ? and common.source = ? and common.lexeme = term.lexeme),
     weight as (
       select word.lexeme, word.query, word.chunks, ln(1 + (stats.chunks - word.chunks + 0.5) / (word.chunks + 0.5)) as idf
       from word, stats where word.chunks > 0),
     candidate as (
       (select id, search_vector from knowledge_base_chunk where ${where.sql} and search_vector @@ websearch_to_tsquery('${config}', ?) limit ${TEXT_WINDOW})
       union
       (select id, search_vector from knowledge_base_chunk
        where ${where.sql} and search_vector @@ (select string_agg(query::text, ' | ')::tsquery from weight where chunks <= ${COMMON_CHUNKS})
        limit ${RARE_WINDOW}))
     select candidate.id,
            sum(weight.idf * held.times * ${K1 + 1} / (held.times + ${K1} * (1 - ${B} + ${B} * length(candidate.search_vector) / stats.mean_length))) as score
     from candidate cross join stats
     cross join lateral (select lexeme, coalesce(cardinality(positions), 1) as times from unnest(candidate.search_vector)) held
     join weight on weight.lexeme = held.lexeme
     group by candidate.id
     order by score desc, candidate.id limit ?`,
    [
      subscriptionId,
      source,
      subscriptionId,
      source,
      question,
      subscriptionId,
      source,
      subscriptionId,
      source,
      ...where.params,
      question,
      ...where.params,
      limit,
    ],
  );
  return rows.map((row) => ({ id: row.id, score: Number(row.score) }));
}
