import pg from 'pg';

// The parser pg and the ORM read timestamptz text with; formatting in SQL instead (to_char) costs the database more.
const parseTimestamp = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, 'text') as (text: string) => Date;

/** A timestamptz of a raw row as a Date: PostgreSQL's connection gives it as text, PGlite as a Date. */
export const rowTimestamp = (value: Date | string): Date => (typeof value === 'string' ? parseTimestamp(value) : value);
