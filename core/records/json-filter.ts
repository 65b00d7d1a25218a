import { validationError, type ValidationIssue } from '../base/errors.ts';
import { walkFilter, type Comparison, type FieldTranslation, type FilterTranslation, type ValueTranslation } from './filter-language.ts';

/**
 * The document-store filter operators of the list filters (`$eq $ne $in
 * $nin $gt $gte $lt $lte $exists $regex` with `$options`, `$and $or`),
 * applied to the keys of a jsonb column (metadata) rather than to an
 * entity's fields: `{"topic": "billing", "priority": {"$gte": 2}}`. A dotted
 * key reaches into nested objects. Values are compared as JSON (numbers as
 * numbers, strings as strings; a number never equals a string). Everything
 * is bound as parameters; anything else is a VALIDATION_ERROR naming where.
 */
export interface SqlCondition {
  sql: string;
  params: unknown[];
}

const MAX_DEPTH = 8;
const COMPARISONS: Record<string, string> = { $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' };
const KEY = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

const isScalar = (value: unknown): value is string | number | boolean | null => value === null || ['string', 'number', 'boolean'].includes(typeof value);

/** The filter as SQL: the walk of filter-language.ts hands it the pieces, each pushing its values as its fragment is made. */
class JsonFilter implements FilterTranslation<string> {
  readonly issues: ValidationIssue[] = [];
  readonly params: unknown[] = [];
  readonly maxDepth = MAX_DEPTH;

  constructor(private readonly column: string) {}

  all(conditions: string[]): string {
    return conditions.length === 0 ? 'true' : conditions.join(' and ');
  }

  group(operator: '$and' | '$or', filters: string[]): string {
    return `(${filters.map((filter) => `(${filter})`).join(operator === '$and' ? ' and ' : ' or ')})`;
  }

  field(key: string): FieldTranslation<string> | string {
    return KEY.test(key) ? new JsonKey(this, key) : 'a metadata key is letters, digits, _ and -, dotted for nested keys';
  }

  /** `column #> '{a,b}'`: the value at a dotted key, as jsonb. */
  at(key: string): string {
    this.params.push(`{${key.split('.').join(',')}}`);
    return `(${this.column} #> ?::text[])`;
  }

  /** `column #>> '{a,b}'`: the value at a dotted key, as text. */
  textAt(key: string): string {
    this.params.push(`{${key.split('.').join(',')}}`);
    return `(${this.column} #>> ?::text[])`;
  }

  json(value: unknown, path: string): string {
    if (!isScalar(value)) this.issues.push({ path, message: 'must be a string, number, boolean or null' });
    this.params.push(JSON.stringify(value));
    return '?::jsonb';
  }
}

/** The conditions on the value at one key. */
class JsonKey implements ValueTranslation<string> {
  readonly #sql: JsonFilter;
  readonly #key: string;
  readonly #parts: string[] = [];
  #equals: string | undefined;

  constructor(sql: JsonFilter, key: string) {
    this.#sql = sql;
    this.#key = key;
  }

  equals(value: unknown, path: string): void {
    this.#equals = this.#equal(value, path);
  }

  compare(operator: Comparison, operand: unknown, path: string): void {
    const sql = this.#sql;
    if (operator === '$eq') this.#parts.push(this.#equal(operand, path));
    else if (operator === '$ne') this.#parts.push(`not (${this.#equal(operand, path)})`);
    else if (operator === '$in' || operator === '$nin') {
      if (!Array.isArray(operand) || operand.length === 0) {
        sql.issues.push({ path, message: `${operator} takes a non-empty array` });
        return;
      }
      const missing = operator === '$nin' ? `${sql.at(this.#key)} is null or not ` : '';
      this.#parts.push(`(${missing}${this.#matchesAny(operand, path)})`);
    } else {
      if (typeof operand !== 'number' && typeof operand !== 'string') {
        sql.issues.push({ path, message: `${operator} takes a number or a string` });
        return;
      }
      // Placeholders are bound in the order they appear: each fragment pushes its values as it is made.
      const compared = `${sql.at(this.#key)} ${COMPARISONS[operator]} ${sql.json(operand, path)}`;
      const typed = `jsonb_typeof(${sql.at(this.#key)}) = ?`;
      sql.params.push(typeof operand === 'number' ? 'number' : 'string');
      this.#parts.push(`(${compared} and ${typed})`);
    }
  }

  exists(present: boolean): void {
    this.#parts.push(`(${this.#sql.at(this.#key)} is ${present ? 'not ' : ''}null)`);
  }

  matches(pattern: string): void {
    const text = this.#sql.textAt(this.#key);
    this.#sql.params.push(pattern);
    this.#parts.push(`${text} ~ ?`);
  }

  condition(): string {
    if (this.#equals !== undefined) return this.#equals;
    return this.#parts.length === 0 ? 'true' : `(${this.#parts.join(' and ')})`;
  }

  #equal(value: unknown, path: string): string {
    if (value === null) {
      const absent = `${this.#sql.at(this.#key)} is null`;
      return `(${absent} or ${this.#sql.at(this.#key)} = 'null'::jsonb)`;
    }
    return this.#matchesAny([value], path, false);
  }

  /** The value at the key is one of `values`, or (document-store style) an array holding one of them. */
  #matchesAny(values: unknown[], path: string, indexed = true): string {
    const sql = this.#sql;
    const field = sql.at(this.#key);
    const list = values.map((item, index) => sql.json(item, indexed ? `${path}.${index}` : path)).join(', ');
    const held = values.map((item) => {
      // Placeholders are bound in the order they appear: the key's first, then the value's.
      const at = sql.at(this.#key);
      sql.params.push(JSON.stringify([item]));
      return `${at} @> ?::jsonb`;
    });
    return `(${field} in (${list}) or ${held.join(' or ')})`;
  }
}

/** The SQL condition (with `?` placeholders) a metadata filter stands for; VALIDATION_ERROR for a malformed one. */
export function jsonFilter(filter: unknown, column: string, path = 'filter'): SqlCondition {
  const translation = new JsonFilter(column);
  const sql = walkFilter(filter ?? {}, translation, path);
  if (translation.issues.length > 0) throw validationError(translation.issues);
  return { sql, params: translation.params };
}
