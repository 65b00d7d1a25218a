import type { EntityManager } from '@mikro-orm/postgresql';
import type { SqlCondition } from '../records/json-filter.ts';

/**
 * The two rankings of search by words and meaning, and their fusion: BM25
 * over a tsvector column, in SQL that PGlite and PostgreSQL run alike, and
 * weighted reciprocal-rank fusion with the nearest by embedding (`nearest`).
 * The constants were chosen on BEIR SciFact (docs/decisions/0063-retrieval.md).
 */

/** The most candidates holding all the question's words one ranking reads. */
export const TEXT_WINDOW = 500;
/** A word held by more rows than this is common: never a reason on its own to rank a row. */
export const COMMON_ROWS = 250;
/** The most candidates holding an uncommon word one ranking reads. */
export const RARE_WINDOW = 2000;
/** A question's distinct words ranked, at most. */
const QUESTION_WORDS = 64;
/** Rows whose length gives the mean, when it is not counted ahead. */
const LENGTH_SAMPLE = 1000;
/** BM25's saturation of a word's count in a row (k1) and its normalisation by length (b). */
const K1 = 1.2;
const B = 0.75;

export interface WordRankingQuery {
  /** Table and tsvector column (names from the plugin's own code, never from input); a row is identified by `id` within the scope. */
  table: string;
  column: string;
  /** The text search configuration the column was made with. */
  config: string;
  /** The rows words are counted over: the tenant, the owner or source, live rows only. */
  scope: SqlCondition;
  /** The rows that may be found: `scope` and any filters. */
  where: SqlCondition;
  question: string;
  limit: number;
  /**
   * Counts kept ahead by the caller, each a statement of one row at most:
   * `size` answers `rows` and `mean_length` of the scope, `word` the rows
   * holding `term.lexeme` (null for a word not kept: it is counted then, up
   * to TEXT_WINDOW + 1). Without them, everything is counted by the search.
   */
  counted?: { size: SqlCondition; word: SqlCondition };
}

/** A row's id and its BM25 score. */
export interface RankedRow {
  id: string;
  score: number;
}

/**
 * The rows of `where`, best first by BM25 for `question`, at most `limit`:
 * a word weighs by its inverse document frequency among the scope's rows,
 * ln(1 + (N − n + 0.5)/(n + 0.5)), by how often the row holds it
 * (saturating with k1) and against the row's number of distinct words
 * (weighted by b). One statement, bounded: the candidates are the rows
 * holding all the question's words and those holding any of its uncommon
 * words, at most TEXT_WINDOW and RARE_WINDOW of each.
 */
export async function rankByWords(em: EntityManager, query: WordRankingQuery): Promise<RankedRow[]> {
  const { table, column, config, scope, where } = query;
  const size = query.counted?.size ?? { sql: 'select null::bigint as rows, null::float8 as mean_length', params: [] };
  const word = query.counted?.word ?? { sql: 'select null::bigint', params: [] };
  // A tsquery's quoted lexeme: backslashes escaped, quotes doubled.
  const quoted = `'''' || replace(replace(term.lexeme, '\\', '\\\\'), '''', '''''') || ''''`;
  const rows = await em.execute<{ id: string; score: number }[]>(
    // Materialized: each word's count is made once, not again wherever the plan reads it.
    `with kept as (${size.sql}),
     stats as materialized (
       select coalesce(kept.rows, (select count(*) from ${table} where ${scope.sql}))::float8 as rows,
              greatest(coalesce(kept.mean_length, (select avg(length(sample.${column})) from (select ${column} from ${table} where ${scope.sql} limit ${LENGTH_SAMPLE}) sample)), 1)::float8 as mean_length
       from (select 1) one left join kept on true),
     term as materialized (
       select lexeme, (${quoted})::tsquery as query
       from (select distinct lexeme from unnest(tsvector_to_array(to_tsvector('${config}', ?))) as lexeme limit ${QUESTION_WORDS}) term),
     word as materialized (
       select term.lexeme, term.query,
              coalesce((${word.sql}), (select count(*) from (select 1 from ${table} where ${scope.sql} and ${column} @@ term.query limit ${TEXT_WINDOW + 1}) holding)) as rows
       from term),
     weight as materialized (
       select word.lexeme, word.query, word.rows, ln(1 + (stats.rows - word.rows + 0.5) / (word.rows + 0.5)) as idf
       from word, stats where word.rows > 0),
     candidate as (
       (select id, ${column} as words from ${table} where ${where.sql} and ${column} @@ websearch_to_tsquery('${config}', ?) limit ${TEXT_WINDOW})
       union
       (select id, ${column} as words from ${table}
        where ${where.sql} and ${column} @@ (select string_agg(query::text, ' | ')::tsquery from weight where rows <= ${COMMON_ROWS})
        limit ${RARE_WINDOW}))
     select candidate.id,
            sum(weight.idf * held.times * ${K1 + 1} / (held.times + ${K1} * (1 - ${B} + ${B} * length(candidate.words) / stats.mean_length))) as score
     from candidate cross join stats
     cross join lateral (
       -- Only the question's words of the row (a row holds a hundred words, a question a few); offset 0 keeps it one unnest per row.
       select lexeme, coalesce(cardinality(positions), 1) as times from unnest(candidate.words)
       where lexeme in (select lexeme from weight) offset 0) held
     join weight on weight.lexeme = held.lexeme
     group by candidate.id
     order by score desc, candidate.id limit ?`,
    [
      ...size.params,
      ...scope.params,
      ...scope.params,
      query.question,
      ...word.params,
      ...scope.params,
      ...where.params,
      query.question,
      ...where.params,
      query.limit,
    ],
  );
  return rows.map((row) => ({ id: row.id, score: Number(row.score) }));
}

/** Reciprocal-rank fusion's constant: a hit's share is weight / (RRF_K + its rank) in each ranking (10 measured best on SciFact, of 10, 30, 60 and 100). */
export const RRF_K = 10;
/** Candidates taken from each ranking before they are fused. */
export const FUSION_DEPTH = 50;

/** How a search ranks: by meaning (embeddings), by words (BM25), or both fused. */
export const SEARCH_MODES = ['hybrid', 'semantic', 'text'] as const;
export type SearchMode = (typeof SEARCH_MODES)[number];

export interface FusedRow {
  id: string;
  score: number;
  /** Its place in each ranking (1 = first), null when it is not in it. */
  semanticRank: number | null;
  textRank: number | null;
}

/**
 * Weighted reciprocal-rank fusion of two rankings (ids, best first): the
 * `topK` best by Σ weight/(k + rank), ties by id: the ranking by words
 * weighs 1, that by meaning `meaningWeight` (the embedding model's
 * `hybridWeight`). test/bench/retrieval.ts measures other constants beside
 * the shipped ones.
 */
export function fuseRankings(
  semantic: readonly string[],
  textual: readonly string[],
  topK: number,
  { k = RRF_K, meaningWeight = 1 }: { k?: number; meaningWeight?: number } = {},
): FusedRow[] {
  const fused = new Map<string, FusedRow>();
  semantic.forEach((id, index) => fused.set(id, { id, score: meaningWeight / (k + index + 1), semanticRank: index + 1, textRank: null }));
  textual.forEach((id, index) => {
    const entry = fused.get(id) ?? { id, score: 0, semanticRank: null, textRank: null };
    fused.set(id, { ...entry, score: entry.score + 1 / (k + index + 1), textRank: index + 1 });
  });
  return [...fused.values()].sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1)).slice(0, topK);
}

/**
 * The `topK` best rows of a search in `mode`: one ranking, or both (each
 * FUSION_DEPTH deep, at once: on PostgreSQL on two connections) fused.
 * `score` is the ranking's own (cosine similarity, BM25) or the fused one.
 */
export async function rankBy(
  mode: SearchMode,
  topK: number,
  rankings: {
    /** The nearest by embedding, and how much the model that embedded them counts in fusion (its `hybridWeight`). */
    byMeaning: (depth: number) => Promise<{ rows: RankedRow[]; weight: number }>;
    byWords: (depth: number) => Promise<RankedRow[]>;
  },
): Promise<FusedRow[]> {
  const depth = mode === 'hybrid' ? Math.max(FUSION_DEPTH, topK) : topK;
  const [meaning, textual] = await Promise.all([
    mode === 'text' ? { rows: [], weight: 0 } : rankings.byMeaning(depth),
    mode === 'semantic' ? [] : rankings.byWords(depth),
  ]);
  if (mode === 'hybrid')
    return fuseRankings(
      meaning.rows.map((row) => row.id),
      textual.map((row) => row.id),
      topK,
      { meaningWeight: meaning.weight },
    );
  return (mode === 'semantic' ? meaning.rows : textual).map((row, index) => ({
    id: row.id,
    score: row.score,
    semanticRank: mode === 'semantic' ? index + 1 : null,
    textRank: mode === 'text' ? index + 1 : null,
  }));
}
