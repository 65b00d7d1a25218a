import * as v from 'valibot';
import { sqlStateOf } from '../base/database-errors.ts';
import { validationError, type RpcError, type ValidationIssue } from '../base/errors.ts';
import { isUuid } from '../base/schemas.ts';

/**
 * The document-store-style list filters (docs/endpoint.md: `$eq`,
 * `$in`, `$regex` and the rest), translated into
 * MikroORM conditions on an entity's own fields only. Anything else is a
 * VALIDATION_ERROR naming the offending path; no raw SQL is ever built.
 */

/** `tags`: a text[] column; a value matches when the array holds it (`$in`: any of them), as in document stores. */
export type FieldType = 'string' | 'uuid' | 'boolean' | 'number' | 'date' | 'tags';

/** API field name → entity property and its type. */
export type FieldMap = Record<string, { property: string; type: FieldType }>;

export const MAX_PAGE_SIZE = 200;
const MAX_REGEX_LENGTH = 200;
/** PostgreSQL's SQLSTATE for a regular expression it cannot compile. */
const INVALID_REGULAR_EXPRESSION = '2201B';
/** Years a PostgreSQL timestamp takes and an ISO 8601 date spells with four digits. */
const MIN_YEAR = 1;
const MAX_YEAR = 9999;

const positiveInteger = (label: string) =>
  v.pipe(v.number(`${label} must be a number`), v.integer(`${label} must be a whole number`), v.minValue(1, `${label} must be at least 1`));

/** The four list params, each required. */
const listFields = (maxPageSize: number) => {
  // Past this the row offset is no longer an exact integer (and the query builder drops it).
  const maxPage = Math.floor(Number.MAX_SAFE_INTEGER / maxPageSize);
  return {
    filter: v.record(v.string(), v.unknown(), 'filter must be an object'),
    sort: v.record(v.string(), v.union([v.picklist([1, -1]), v.picklist(['asc', 'desc'])]), 'sort maps fields to 1, -1, asc or desc'),
    page: v.pipe(positiveInteger('page'), v.maxValue(maxPage, `page must be at most ${maxPage}`)),
    pageSize: v.pipe(positiveInteger('pageSize'), v.maxValue(maxPageSize, `pageSize must be at most ${maxPageSize}`)),
  };
};

/** `filter`, `sort`, `page`, `pageSize` params, each optional: no filter, no sort, page 1, the operation's page size. */
export const listParams = (defaultPageSize: number, maxPageSize = MAX_PAGE_SIZE) => {
  const { filter, sort, page, pageSize } = listFields(maxPageSize);
  return { filter: v.optional(filter, {}), sort: v.optional(sort, {}), page: v.optional(page, 1), pageSize: v.optional(pageSize, defaultPageSize) };
};

/** The same params where the operation requires all four (BillingPlanRpc.getData, DiscountRpc.getData). */
export const requiredListParams = (maxPageSize = MAX_PAGE_SIZE) => listFields(maxPageSize);

/** The params listParams gives a handler. */
export interface ListQuery {
  filter: Record<string, unknown>;
  sort: Record<string, 1 | -1 | 'asc' | 'desc'>;
  page: number;
  pageSize: number;
}

/** The paged envelope of document-store lists (`getData` with page and pageSize): `{docs, totalDocs, limit, page, totalPages, hasNextPage, hasPrevPage}`. */
export interface Page<T> {
  docs: T[];
  totalDocs: number;
  limit: number;
  page: number;
  totalPages: number;
  hasNextPage: boolean;
  hasPrevPage: boolean;
}

export function pageOf<T>(docs: T[], totalDocs: number, { page, pageSize }: Pick<ListQuery, 'page' | 'pageSize'>): Page<T> {
  const totalPages = Math.ceil(totalDocs / pageSize);
  return { docs, totalDocs, limit: pageSize, page, totalPages, hasNextPage: page < totalPages, hasPrevPage: page > 1 };
}

/** The unpaged envelope: `{data, totalCount}`. */
export interface ListEnvelope<T> {
  data: T[];
  totalCount: number;
}

export const listOf = <T>(data: T[]): ListEnvelope<T> => ({ data, totalCount: data.length });

/** The declared result of an operation answering `pageOf(...)` of the item's schema. */
export const pageSchema = <T>(item: v.GenericSchema<T>) =>
  v.strictObject({
    docs: v.array(item),
    totalDocs: v.number(),
    limit: v.number(),
    page: v.number(),
    totalPages: v.number(),
    hasNextPage: v.boolean(),
    hasPrevPage: v.boolean(),
  });

/** The declared result of an operation answering `listOf(...)` of the item's schema. */
export const listSchema = <T>(item: v.GenericSchema<T>) => v.strictObject({ data: v.array(item), totalCount: v.number() });

type Condition = Record<string, unknown>;

class FilterTranslator {
  readonly issues: ValidationIssue[] = [];

  constructor(private readonly fields: FieldMap) {}

  translate(filter: unknown, path: string): Condition {
    if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) {
      this.issues.push({ path, message: 'must be an object' });
      return {};
    }
    const conditions: Condition[] = [];
    for (const [key, value] of Object.entries(filter)) {
      const at = `${path}.${key}`;
      if (key === '$and' || key === '$or') {
        if (!Array.isArray(value) || value.length === 0) {
          this.issues.push({ path: at, message: `${key} takes a non-empty array of filters` });
          continue;
        }
        conditions.push({ [key]: value.map((item, index) => this.translate(item, `${at}.${index}`)) });
      } else if (key.startsWith('$')) {
        this.issues.push({ path: at, message: `unknown operator ${key}` });
      } else {
        const field = Object.hasOwn(this.fields, key) ? this.fields[key] : undefined;
        if (!field) {
          this.issues.push({ path: at, message: `unknown field; filterable fields: ${Object.keys(this.fields).join(', ')}` });
          continue;
        }
        conditions.push(
          field.type === 'tags' ? this.#tagsCondition(value, field.property, at) : { [field.property]: this.#fieldCondition(value, field.type, at) },
        );
      }
    }
    return conditions.length === 1 ? conditions[0]! : conditions.length === 0 ? {} : { $and: conditions };
  }

  #fieldCondition(value: unknown, type: FieldType, path: string): unknown {
    const isOperators =
      typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date) && Object.keys(value).some((key) => key.startsWith('$'));
    if (!isOperators) return this.#value(value, type, path);
    const operators = value as Record<string, unknown>;
    const condition: Condition = {};
    for (const [operator, operand] of Object.entries(operators)) {
      const at = `${path}.${operator}`;
      switch (operator) {
        case '$eq':
        case '$ne':
        case '$gt':
        case '$gte':
        case '$lt':
        case '$lte':
          condition[operator] = this.#value(operand, type, at);
          break;
        case '$in':
        case '$nin':
          if (!Array.isArray(operand)) this.issues.push({ path: at, message: `${operator} takes an array` });
          else condition[operator] = operand.map((item, index) => this.#value(item, type, `${at}.${index}`));
          break;
        case '$exists':
          if (typeof operand !== 'boolean') this.issues.push({ path: at, message: '$exists takes true or false' });
          else if (operand) condition.$ne = null;
          else condition.$eq = null;
          break;
        case '$regex':
          if (type !== 'string') this.issues.push({ path: at, message: '$regex applies to text fields only' });
          else if (this.#validRegex(operand, operators.$options, at)) {
            condition.$re = postgresPattern(operand as string, operators.$options);
          }
          break;
        case '$options':
          if (!('$regex' in operators)) this.issues.push({ path: at, message: '$options goes with $regex' });
          break;
        default:
          this.issues.push({ path: at, message: `unknown operator ${operator}` });
      }
    }
    return condition;
  }

  /** Array containment: `value` or `$eq` held, `$ne` not held, `$in` any held, `$nin` none held. */
  #tagsCondition(value: unknown, property: string, path: string): Condition {
    const tag = (item: unknown, at: string): string => {
      if (typeof item !== 'string') this.issues.push({ path: at, message: 'must be a string' });
      return String(item);
    };
    const tags = (items: unknown, at: string): string[] => {
      if (!Array.isArray(items) || items.length === 0) {
        this.issues.push({ path: at, message: 'takes a non-empty array' });
        return [];
      }
      return items.map((item, index) => tag(item, `${at}.${index}`));
    };
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return { [property]: { $contains: [tag(value, path)] } };
    const conditions: Condition[] = [];
    for (const [operator, operand] of Object.entries(value)) {
      const at = `${path}.${operator}`;
      if (operator === '$eq') conditions.push({ [property]: { $contains: [tag(operand, at)] } });
      else if (operator === '$ne') conditions.push({ $not: { [property]: { $contains: [tag(operand, at)] } } });
      else if (operator === '$in') conditions.push({ [property]: { $overlap: tags(operand, at) } });
      else if (operator === '$nin') conditions.push({ $not: { [property]: { $overlap: tags(operand, at) } } });
      else this.issues.push({ path: at, message: `a list of tags takes $eq, $ne, $in or $nin, not ${operator}` });
    }
    return conditions.length === 1 ? conditions[0]! : { $and: conditions };
  }

  /**
   * The pattern runs in PostgreSQL, whose regular expressions (POSIX ARE) are
   * close to JavaScript's but not the same. JavaScript's parser refuses the
   * plain mistakes here, with its reason; what it accepts and PostgreSQL does
   * not (named groups, \p{...}, counts above 255, ...) is refused by the
   * database and answered by refusedRegexError, so either way the caller gets
   * a VALIDATION_ERROR. Translating between the two would be a second parser
   * to keep right.
   */
  #validRegex(pattern: unknown, options: unknown, path: string): boolean {
    const issue = regexIssue(pattern, options, path);
    if (issue) this.issues.push(issue);
    return issue === undefined;
  }

  #value(value: unknown, fieldType: FieldType, path: string): unknown {
    if (value === null) return null;
    if (fieldType === 'date') {
      const date = typeof value === 'string' || typeof value === 'number' ? new Date(value) : undefined;
      const year = date?.getUTCFullYear() ?? Number.NaN;
      if (!(year >= MIN_YEAR && year <= MAX_YEAR))
        this.issues.push({ path, message: `must be an ISO 8601 date between the years ${MIN_YEAR} and ${MAX_YEAR}` });
      return date;
    }
    if (fieldType === 'uuid') {
      if (!isUuid(value)) this.issues.push({ path, message: 'must be a UUID' });
      return value;
    }
    if (typeof value !== fieldType) this.issues.push({ path, message: `must be a ${fieldType}` });
    return value;
  }
}

/** What is wrong with a `$regex` (at `path`) and its `$options`, if anything; see FilterTranslator#validRegex. */
export function regexIssue(pattern: unknown, options: unknown, path: string): ValidationIssue | undefined {
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

/** A valid `$regex` as PostgreSQL takes it: the case-insensitive flag is an embedded option at the start of the pattern. */
export const postgresPattern = (pattern: string, options: unknown): string => (options === 'i' ? `(?i)${pattern}` : pattern);

export function toWhere(filter: Record<string, unknown>, fields: FieldMap): Condition {
  const translator = new FilterTranslator(fields);
  const where = translator.translate(filter, 'filter');
  if (translator.issues.length > 0) throw validationError(translator.issues);
  return where;
}

/** The VALIDATION_ERROR for a $regex PostgreSQL refused after JavaScript accepted it (see #validRegex); undefined for any other error. */
export function refusedRegexError(thrown: unknown): RpcError | undefined {
  if (sqlStateOf(thrown) !== INVALID_REGULAR_EXPRESSION) return undefined;
  return validationError([{ path: 'filter', message: 'a $regex is not a valid PostgreSQL regular expression' }]);
}

export function toOrderBy(sort: Record<string, 1 | -1 | 'asc' | 'desc'>, fields: FieldMap): Record<string, 'asc' | 'desc'> {
  const orderBy: Record<string, 'asc' | 'desc'> = {};
  const issues: ValidationIssue[] = [];
  for (const [key, direction] of Object.entries(sort)) {
    const field = Object.hasOwn(fields, key) ? fields[key] : undefined;
    if (!field) issues.push({ path: `sort.${key}`, message: `unknown field; sortable fields: ${Object.keys(fields).join(', ')}` });
    else orderBy[field.property] = direction === 1 || direction === 'asc' ? 'asc' : 'desc';
  }
  if (issues.length > 0) throw validationError(issues);
  return orderBy;
}
