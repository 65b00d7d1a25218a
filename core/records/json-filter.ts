import { validationError, type ValidationIssue } from '../base/errors.ts';
import { postgresPattern, regexIssue } from './list-query.ts';

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

class JsonFilter {
  readonly issues: ValidationIssue[] = [];
  readonly params: unknown[] = [];

  constructor(private readonly column: string) {}

  translate(filter: unknown, path: string, depth: number): string {
    if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) {
      this.issues.push({ path, message: 'must be an object' });
      return 'true';
    }
    if (depth > MAX_DEPTH) {
      this.issues.push({ path, message: `nested deeper than ${MAX_DEPTH}` });
      return 'true';
    }
    const parts: string[] = [];
    for (const [key, value] of Object.entries(filter)) {
      const at = `${path}.${key}`;
      if (key === '$and' || key === '$or') {
        if (!Array.isArray(value) || value.length === 0) {
          this.issues.push({ path: at, message: `${key} takes a non-empty array of filters` });
          continue;
        }
        const inner = value.map((item, index) => `(${this.translate(item, `${at}.${index}`, depth + 1)})`);
        parts.push(`(${inner.join(key === '$and' ? ' and ' : ' or ')})`);
      } else if (key.startsWith('$')) {
        this.issues.push({ path: at, message: `unknown operator ${key}` });
      } else if (!KEY.test(key)) {
        this.issues.push({ path: at, message: 'a metadata key is letters, digits, _ and -, dotted for nested keys' });
      } else {
        parts.push(this.#field(key, value, at));
      }
    }
    return parts.length === 0 ? 'true' : parts.join(' and ');
  }

  /** `column #> '{a,b}'`: the value at a dotted key, as jsonb. */
  #at(key: string): string {
    this.params.push(`{${key.split('.').join(',')}}`);
    return `(${this.column} #> ?::text[])`;
  }

  #json(value: unknown, path: string): string {
    if (!isScalar(value)) this.issues.push({ path, message: 'must be a string, number, boolean or null' });
    this.params.push(JSON.stringify(value));
    return '?::jsonb';
  }

  #field(key: string, value: unknown, path: string): string {
    const isOperators = typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).some((name) => name.startsWith('$'));
    if (!isOperators) return this.#equals(key, value, path);
    const operators = value as Record<string, unknown>;
    const parts: string[] = [];
    for (const [operator, operand] of Object.entries(operators)) {
      const at = `${path}.${operator}`;
      if (operator === '$eq') parts.push(this.#equals(key, operand, at));
      else if (operator === '$ne') parts.push(`not (${this.#equals(key, operand, at)})`);
      else if (operator in COMPARISONS) {
        if (typeof operand !== 'number' && typeof operand !== 'string') {
          this.issues.push({ path: at, message: `${operator} takes a number or a string` });
          continue;
        }
        // Placeholders are bound in the order they appear: each fragment pushes its values as it is made.
        const compared = `${this.#at(key)} ${COMPARISONS[operator]} ${this.#json(operand, at)}`;
        const typed = `jsonb_typeof(${this.#at(key)}) = ?`;
        this.params.push(typeof operand === 'number' ? 'number' : 'string');
        parts.push(`(${compared} and ${typed})`);
      } else if (operator === '$in' || operator === '$nin') {
        if (!Array.isArray(operand) || operand.length === 0) {
          this.issues.push({ path: at, message: `${operator} takes a non-empty array` });
          continue;
        }
        const missing = operator === '$nin' ? `${this.#at(key)} is null or not ` : '';
        parts.push(`(${missing}${this.#matchesAny(key, operand, at)})`);
      } else if (operator === '$exists') {
        if (typeof operand !== 'boolean') {
          this.issues.push({ path: at, message: '$exists takes true or false' });
          continue;
        }
        parts.push(`(${this.#at(key)} is ${operand ? 'not ' : ''}null)`);
      } else if (operator === '$regex') {
        const issue = regexIssue(operand, operators.$options, at);
        if (issue) {
          this.issues.push(issue);
          continue;
        }
        this.params.push(`{${key.split('.').join(',')}}`, postgresPattern(operand as string, operators.$options));
        parts.push(`(${this.column} #>> ?::text[]) ~ ?`);
      } else if (operator === '$options') {
        if (!('$regex' in operators)) this.issues.push({ path: at, message: '$options goes with $regex' });
      } else {
        this.issues.push({ path: at, message: `unknown operator ${operator}` });
      }
    }
    return parts.length === 0 ? 'true' : `(${parts.join(' and ')})`;
  }

  #equals(key: string, value: unknown, path: string): string {
    if (value === null) {
      const absent = `${this.#at(key)} is null`;
      return `(${absent} or ${this.#at(key)} = 'null'::jsonb)`;
    }
    return this.#matchesAny(key, [value], path, false);
  }

  /** The value at `key` is one of `values`, or (document-store style) an array holding one of them. */
  #matchesAny(key: string, values: unknown[], path: string, indexed = true): string {
    const field = this.#at(key);
    const list = values.map((item, index) => this.#json(item, indexed ? `${path}.${index}` : path)).join(', ');
    const held = values.map((item) => {
      // Placeholders are bound in the order they appear: the key's first, then the value's.
      const at = this.#at(key);
      this.params.push(JSON.stringify([item]));
      return `${at} @> ?::jsonb`;
    });
    return `(${field} in (${list}) or ${held.join(' or ')})`;
  }
}

/** The SQL condition (with `?` placeholders) a metadata filter stands for; VALIDATION_ERROR for a malformed one. */
export function jsonFilter(filter: unknown, column: string, path = 'filter'): SqlCondition {
  const translator = new JsonFilter(column);
  const sql = translator.translate(filter ?? {}, path, 0);
  if (translator.issues.length > 0) throw validationError(translator.issues);
  return { sql, params: translator.params };
}
