import { sqlStateOf } from '../base/database-errors.ts';
import { validationError, type RpcError, type ValidationIssue } from '../base/errors.ts';

/**
 * The list filter language (docs/endpoint.md): `{field: value}`, `{field:
 * {$eq $ne $gt $gte $lt $lte $in $nin $exists $regex $options}}`, and `$and`
 * and `$or` of filters. This walk is its one reader, under both translators:
 * MikroORM conditions on an entity's fields (list-query.ts) and SQL over the
 * keys of a jsonb column (json-filter.ts). It checks the filter's shape and
 * operators, and hands each piece to the translator in the filter's order, so
 * the issues (and the placeholders of the SQL) follow that order.
 */

/** The operators that compare a field with their operand, which the translator checks against the field. */
export type Comparison = '$eq' | '$ne' | '$gt' | '$gte' | '$lt' | '$lte' | '$in' | '$nin';

const COMPARISONS = new Set<string>(['$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$in', '$nin']);
const MAX_REGEX_LENGTH = 200;
/** PostgreSQL's SQLSTATE for a regular expression it cannot compile. */
const INVALID_REGULAR_EXPRESSION = '2201B';

/** What a translator makes of one field's value, piece by piece. */
interface Translation<C> {
  /** A value without operators: the field equals it. */
  equals(value: unknown, path: string): void;
  compare(operator: Comparison, operand: unknown, path: string): void;
  /** The field's condition, once its value is read. */
  condition(): C;
}

/** A field holding one value: it takes every operator. */
export interface ValueTranslation<C> extends Translation<C> {
  readonly only?: undefined;
  /** Why the field takes no `$regex`, when it does not. */
  readonly noRegex?: string;
  exists(present: boolean): void;
  /** A valid `$regex` with its `$options`, as PostgreSQL takes it. */
  matches(pattern: string): void;
}

/** A field holding a list (of tags): an object value is operators whatever its keys, and only these; any other key is refused with `refused(key)`. */
export interface ListTranslation<C> extends Translation<C> {
  readonly only: { readonly operators: readonly Comparison[]; readonly refused: (operator: string) => string };
}

export type FieldTranslation<C> = ValueTranslation<C> | ListTranslation<C>;

export interface FilterTranslation<C> {
  /** Where the walk and the translation put what is wrong, in the filter's order. */
  readonly issues: ValidationIssue[];
  /** Nesting of `$and` and `$or` past which a filter is refused; none by default. */
  readonly maxDepth?: number;
  /** The translation of field `key`, or why `key` is not one. */
  field(key: string): FieldTranslation<C> | string;
  /** The conditions of one filter object together; none: every row. */
  all(conditions: C[]): C;
  /** `$and` or `$or` of filters. */
  group(operator: '$and' | '$or', filters: C[]): C;
}

/** The condition `filter` (at `path`) stands for; what is wrong is in `translation.issues`. */
export function walkFilter<C>(filter: unknown, translation: FilterTranslation<C>, path: string): C {
  return walkObject(filter, translation, path, 0);
}

function walkObject<C>(filter: unknown, translation: FilterTranslation<C>, path: string, depth: number): C {
  const { issues, maxDepth = Infinity } = translation;
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) {
    issues.push({ path, message: 'must be an object' });
    return translation.all([]);
  }
  if (depth > maxDepth) {
    issues.push({ path, message: `nested deeper than ${maxDepth}` });
    return translation.all([]);
  }
  const conditions: C[] = [];
  for (const [key, value] of Object.entries(filter)) {
    const at = `${path}.${key}`;
    if (key === '$and' || key === '$or') {
      if (!Array.isArray(value) || value.length === 0) {
        issues.push({ path: at, message: `${key} takes a non-empty array of filters` });
        continue;
      }
      const filters = value.map((item, index) => walkObject(item, translation, `${at}.${index}`, depth + 1));
      conditions.push(translation.group(key, filters));
    } else if (key.startsWith('$')) {
      issues.push({ path: at, message: `unknown operator ${key}` });
    } else {
      const field = translation.field(key);
      if (typeof field === 'string') {
        issues.push({ path: at, message: field });
        continue;
      }
      walkValue(value, field, issues, at);
      conditions.push(field.condition());
    }
  }
  return translation.all(conditions);
}

/** A field's value: a value it equals, or an object of operators (one with a `$` key, or any object for a field with `only`). */
function walkValue<C>(value: unknown, field: FieldTranslation<C>, issues: ValidationIssue[], path: string): void {
  const isObject = typeof value === 'object' && value !== null && !Array.isArray(value);
  const isOperators = isObject && (field.only !== undefined || (!(value instanceof Date) && Object.keys(value).some((key) => key.startsWith('$'))));
  if (!isOperators) {
    field.equals(value, path);
    return;
  }
  const operators = value as Record<string, unknown>;
  for (const [operator, operand] of Object.entries(operators)) {
    const at = `${path}.${operator}`;
    if (field.only) {
      if ((field.only.operators as readonly string[]).includes(operator)) field.compare(operator as Comparison, operand, at);
      else issues.push({ path: at, message: field.only.refused(operator) });
    } else if (COMPARISONS.has(operator)) {
      field.compare(operator as Comparison, operand, at);
    } else if (operator === '$exists') {
      if (typeof operand !== 'boolean') issues.push({ path: at, message: '$exists takes true or false' });
      else field.exists(operand);
    } else if (operator === '$regex') {
      const issue = field.noRegex === undefined ? regexIssue(operand, operators.$options, at) : { path: at, message: field.noRegex };
      if (issue) issues.push(issue);
      else field.matches(operators.$options === 'i' ? `(?i)${operand as string}` : (operand as string));
    } else if (operator === '$options') {
      if (!('$regex' in operators)) issues.push({ path: at, message: '$options goes with $regex' });
    } else {
      issues.push({ path: at, message: `unknown operator ${operator}` });
    }
  }
}

/**
 * What is wrong with a `$regex` (at `path`) and its `$options`, if anything.
 * The pattern runs in PostgreSQL, whose regular expressions (POSIX ARE) are
 * close to JavaScript's but not the same. JavaScript's parser refuses the
 * plain mistakes here, with its reason; what it accepts and PostgreSQL does
 * not (named groups, \p{...}, counts above 255, ...) is refused by the
 * database and answered by refusedRegexError, so either way the caller gets
 * a VALIDATION_ERROR. Translating between the two would be a second parser
 * to keep right. A valid pattern goes to PostgreSQL with the case-insensitive
 * flag as an embedded option at its start.
 */
function regexIssue(pattern: unknown, options: unknown, path: string): ValidationIssue | undefined {
  if (typeof pattern !== 'string' || pattern.length > MAX_REGEX_LENGTH) {
    return { path, message: `$regex takes a string of at most ${MAX_REGEX_LENGTH} characters` };
  }
  try {
    new RegExp(pattern);
  } catch (error) {
    return { path, message: `not a valid regular expression: ${(error as SyntaxError).message}` };
  }
  if (options !== undefined && options !== '' && options !== 'i') return { path: path.replace(/\$regex$/, '$options'), message: '$options may only be "i"' };
  return undefined;
}

/** The VALIDATION_ERROR for a $regex PostgreSQL refused after JavaScript accepted it (see regexIssue); undefined for any other error. */
export function refusedRegexError(thrown: unknown): RpcError | undefined {
  if (sqlStateOf(thrown) !== INVALID_REGULAR_EXPRESSION) return undefined;
  return validationError([{ path: 'filter', message: 'a $regex is not a valid PostgreSQL regular expression' }]);
}
