import { DriverException, ValidationError } from '@mikro-orm/core';

/**
 * Errors raised by the database carry the failed statement with every value
 * inlined (MikroORM formats the parameters into the SQL, and knex prefixes the
 * statement to the message), plus a `detail` that may quote a whole row.
 * MikroORM's own checks (ValidationError and its kinds: NotFoundError,
 * OptimisticLockError, ...) hold the entity and quote it, or the values and
 * conditions given, in their message. This is what of them may be shown in a
 * log: the class, the SQLSTATE, the names of the objects involved, and the
 * message's shape with its literals replaced by `?`.
 */

const SQLSTATE = /^[0-9A-Z]{5}$/;
/** Statements MikroORM and the services send; a message that starts otherwise is read as the database's own words. */
const STATEMENT_START = /^\s*(?:select|insert|update|delete|with)\s/i;
const TOKEN =
  /(\n - (?:detail|hint): [\s\S]*)|( - )|([Ee]'(?:[^'\\]|''|\\[\s\S])*'?|'(?:[^']|'')*'?|`(?:[^`\\]|\\[\s\S])*`?)|("(?:[^"]|"")*"?)|(\$\d+|[A-Za-z_][\w$]*)|\d+(?:\.\d*)?(?:[Ee][+-]?\d+)?|\.\d+(?:[Ee][+-]?\d+)?/g;
/** Fields of a server error that name things but hold no values. */
const NAMED_FIELDS = ['code', 'severity', 'schema', 'table', 'column', 'dataType', 'constraint', 'routine'] as const;

/** The SQLSTATE of an error the database raised (through MikroORM or a raw driver), else undefined. */
export function sqlStateOf(error: unknown): string | undefined {
  if (!isServerError(error)) return undefined;
  const { code } = error as { code?: unknown };
  return typeof code === 'string' && SQLSTATE.test(code) ? code : undefined;
}

function isServerError(error: unknown): error is Error {
  return error instanceof DriverException || (error instanceof Error && typeof (error as { severity?: unknown }).severity === 'string');
}

/**
 * A server error, one whose message knex prefixed with the statement (a
 * connection lost mid-query has no SQLSTATE), or one of MikroORM's checks.
 */
export function isDatabaseError(error: unknown): boolean {
  return (
    isServerError(error) || error instanceof ValidationError || (error instanceof Error && STATEMENT_START.test(error.message) && error.message.includes(' - '))
  );
}

/** A database error as a log record: no parameter values, no detail, no hint, no entity. */
export function databaseErrorRecord(error: Error): Record<string, unknown> {
  const type = error.constructor.name;
  // MikroORM appends whole entities on the lines after its own (`entity: Secret { ... }`).
  const message = withoutValues(error instanceof ValidationError ? error.message.split('\n', 1)[0]! : error.message);
  const frames = (error.stack ?? '').split('\n').filter((line) => /^\s+at /.test(line));
  const record: Record<string, unknown> = { type, message, stack: [`${type}: ${message}`, ...frames].join('\n') };
  for (const field of NAMED_FIELDS) {
    const value = (error as unknown as Record<string, unknown>)[field];
    if (typeof value === 'string' && value !== '') record[field] = value;
  }
  return record;
}

/**
 * One pass over "<statement> - <database message>[\n - detail: ...][\n - hint: ...]".
 * In the statement, keywords and identifiers (quoted or not) stay and every
 * literal (a number, a string in any quotes node:util's inspect writes) becomes `?`. From the first " - " outside a literal on comes the
 * database's message, where a double-quoted word is a value too (the names
 * are logged as fields). The detail and hint MikroORM appends, which can quote
 * a failing row, are dropped.
 */
function withoutValues(message: string): string {
  let inStatement = STATEMENT_START.test(message);
  return message.replace(TOKEN, (token, appended, separator, _literal, quoted, word) => {
    if (appended !== undefined) return '';
    if (separator !== undefined) inStatement = false;
    if (separator !== undefined || word !== undefined) return token;
    if (quoted !== undefined) return inStatement ? token : '"?"';
    return '?';
  });
}
