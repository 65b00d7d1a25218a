/**
 * The rows of raw reads (`em.execute`, `Database.execute`, `Database.read`)
 * typed from the entity whose columns they select, so a raw read writes no
 * shape of its own: `RowOf<Memory, 'id' | 'createdAt'>` is
 * `{ id: string; created_at: Date | string }`.
 */

type IsLowerLetter<C extends string> = C extends Lowercase<C> ? (C extends Uppercase<C> ? false : true) : false;

/** A property's column, as MikroORM's UnderscoreNamingStrategy names it: `_` between a lower-case letter and a capital, then all lower case (`contentHash` → `content_hash`). */
export type ColumnName<P extends string, Previous extends string = ''> = P extends `${infer C}${infer Rest}`
  ? `${IsLowerLetter<Previous> extends true ? (C extends Lowercase<C> ? C : `_${Lowercase<C>}`) : Lowercase<C>}${ColumnName<Rest, C>}`
  : P;

/**
 * A column's value as a raw read hands it: a timestamp is a Date on PGlite
 * and the text PostgreSQL sent on `pg` (MikroORM's PostgreSqlConnection keeps
 * it, with its microseconds), an absent value null; JSON arrives parsed.
 */
export type RawValue<T> = T extends Date ? Date | string : T extends undefined ? null : T;

/** The row of a raw read of the columns of entity `E` named by the properties `K`. */
export type RowOf<E, K extends keyof E & string> = { -readonly [P in K as ColumnName<P>]: RawValue<E[P]> };
