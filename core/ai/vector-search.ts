import type { EntityManager } from '@mikro-orm/postgresql';
import type { SqlCondition } from '../records/json-filter.ts';
import { vectorLiteral } from './vector-type.ts';

/** Candidates the HNSW search keeps (pgvector's hnsw.ef_search); more finds more of the true nearest, slower. */
const EF_SEARCH = 400;
/** Rows a filtered HNSW search may examine before it gives up finding `limit` (pgvector's hnsw.max_scan_tuples). */
const MAX_SCAN_TUPLES = 50_000;

export interface NearestQuery {
  /** Table and pgvector column (names from the plugin's own code, never from input); a row is identified by `subscription_id` and `id` together. */
  table: string;
  column: string;
  /** Which rows may be found: tenant, owner, metadata conditions. */
  where: SqlCondition;
  /**
   * What the candidates are counted by, when `where` holds conditions an
   * index cannot answer alone (flags of rows that are rare): `where` by default.
   */
  candidates?: SqlCondition;
  vector: readonly number[];
  limit: number;
  /** At most this many candidates are all compared (exact); more are searched through the column's HNSW index. */
  exactSearchLimit: number;
  /** Further columns of the table to return with each row. */
  columns?: readonly string[];
}

export type NearestRow<T> = T & { id: string; distance: number };

/**
 * The `limit` rows nearest to a vector by cosine distance, nearest first.
 * When few rows pass the conditions (counted, up to exactSearchLimit + 1)
 * every one is compared: exact, and fast through an index on the
 * conditions' columns. Otherwise the HNSW index is searched with the
 * conditions inside the same query, pgvector 0.8's iterative scan going on
 * until `limit` rows pass them, in exact distance order; its recall falls
 * with very selective conditions, which is why few candidates are compared
 * instead. One statement decides the path and sets the scan's settings, for
 * this transaction only.
 */
export async function nearest<T extends object = object>(em: EntityManager, query: NearestQuery): Promise<NearestRow<T>[]> {
  const { table, column, where, limit } = query;
  const vector = vectorLiteral(query.vector);
  const extra = (query.columns ?? []).map((name) => `, found.${name}`).join('');
  const counted = query.candidates ?? { sql: `(${where.sql}) and ${column} is not null`, params: where.params };
  const rows = await em.fork().transactional(async (tx) => {
    const [few] = await tx.execute<{ few: boolean }[]>(
      `select count(*) <= ? as few, set_config('hnsw.iterative_scan', 'strict_order', true),
              set_config('hnsw.ef_search', '${Math.max(EF_SEARCH, Math.trunc(limit))}', true), set_config('hnsw.max_scan_tuples', '${MAX_SCAN_TUPLES}', true)
       from (select 1 from ${table} where ${counted.sql} limit ?) candidates`,
      [query.exactSearchLimit, ...counted.params, query.exactSearchLimit + 1],
    );
    if (few!.few) {
      // `offset 0` keeps the planner from ordering through the HNSW index; the distance is computed once, and only `limit` rows are then read whole.
      return tx.execute<NearestRow<T>[]>(
        `with best as (
           select subscription_id, id, distance
           from (select subscription_id, id, ${column} <=> ?::vector as distance from ${table} where (${where.sql}) and ${column} is not null offset 0) candidates
           order by distance, id limit ?)
         select found.id, best.distance${extra} from best join ${table} found on found.subscription_id = best.subscription_id and found.id = best.id
         order by best.distance, best.id`,
        [vector, ...where.params, limit],
      );
    }
    return tx.execute<NearestRow<T>[]>(
      `select found.id, found.${column} <=> ?::vector as distance${extra} from ${table} found
       where (${where.sql}) and found.${column} is not null order by found.${column} <=> ?::vector limit ?`,
      [vector, ...where.params, vector, limit],
    );
  });
  return rows.map((row) => ({ ...row, distance: Number(row.distance) }));
}
