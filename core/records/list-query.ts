import * as v from 'valibot';
import { validationError, type ValidationIssue } from '../base/errors.ts';
import { isUuid } from '../base/schemas.ts';
import { walkFilter, type Comparison, type FieldTranslation, type FilterTranslation, type ListTranslation, type ValueTranslation } from './filter-language.ts';

/**
 * The document-store-style list filters (docs/endpoint.md: `$eq`,
 * `$in`, `$regex` and the rest, read by filter-language.ts), translated into
 * MikroORM conditions on an entity's own fields only. Anything else is a
 * VALIDATION_ERROR naming the offending path; no raw SQL is ever built.
 */

/** `tags`: a text[] column; a value matches when the array holds it (`$in`: any of them), as in document stores. */
export type FieldType = 'string' | 'uuid' | 'boolean' | 'number' | 'date' | 'tags';

/** API field name → entity property and its type. */
export type FieldMap = Record<string, { property: string; type: FieldType }>;

export const MAX_PAGE_SIZE = 200;
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

/** The filter as MikroORM conditions on an entity's fields, read by the walk of filter-language.ts. */
class EntityFilter implements FilterTranslation<Condition> {
  readonly issues: ValidationIssue[] = [];

  constructor(private readonly fields: FieldMap) {}

  all(conditions: Condition[]): Condition {
    return conditions.length === 1 ? conditions[0]! : conditions.length === 0 ? {} : { $and: conditions };
  }

  group(operator: '$and' | '$or', filters: Condition[]): Condition {
    return { [operator]: filters };
  }

  field(key: string): FieldTranslation<Condition> | string {
    const field = Object.hasOwn(this.fields, key) ? this.fields[key] : undefined;
    if (!field) return `unknown field; filterable fields: ${Object.keys(this.fields).join(', ')}`;
    return field.type === 'tags' ? new TagsField(this.issues, field.property) : new EntityField(this.issues, field.property, field.type);
  }
}

/** A column compared with values of its type: `{property: value}` or `{property: {$gt: value, ...}}`. */
class EntityField implements ValueTranslation<Condition> {
  readonly noRegex: string | undefined;
  readonly #operators: Condition = {};
  #value: { given: unknown } | undefined;

  constructor(
    private readonly issues: ValidationIssue[],
    private readonly property: string,
    private readonly type: Exclude<FieldType, 'tags'>,
  ) {
    this.noRegex = type === 'string' ? undefined : '$regex applies to text fields only';
  }

  equals(value: unknown, path: string): void {
    this.#value = { given: this.#checked(value, path) };
  }

  compare(operator: Comparison, operand: unknown, path: string): void {
    if (operator !== '$in' && operator !== '$nin') this.#operators[operator] = this.#checked(operand, path);
    else if (!Array.isArray(operand)) this.issues.push({ path, message: `${operator} takes an array` });
    else this.#operators[operator] = operand.map((item, index) => this.#checked(item, `${path}.${index}`));
  }

  exists(present: boolean): void {
    this.#operators[present ? '$ne' : '$eq'] = null;
  }

  matches(pattern: string): void {
    this.#operators.$re = pattern;
  }

  condition(): Condition {
    return { [this.property]: this.#value ? this.#value.given : this.#operators };
  }

  #checked(value: unknown, path: string): unknown {
    if (value === null) return null;
    if (this.type === 'date') {
      const date = typeof value === 'string' || typeof value === 'number' ? new Date(value) : undefined;
      const year = date?.getUTCFullYear() ?? Number.NaN;
      if (!(year >= MIN_YEAR && year <= MAX_YEAR))
        this.issues.push({ path, message: `must be an ISO 8601 date between the years ${MIN_YEAR} and ${MAX_YEAR}` });
      return date;
    }
    if (this.type === 'uuid') {
      if (!isUuid(value)) this.issues.push({ path, message: 'must be a UUID' });
      return value;
    }
    if (typeof value !== this.type) this.issues.push({ path, message: `must be a ${this.type}` });
    return value;
  }
}

/** A text[] column, by containment: a value or `$eq` held, `$ne` not held, `$in` any held, `$nin` none held. */
class TagsField implements ListTranslation<Condition> {
  readonly only = {
    operators: ['$eq', '$ne', '$in', '$nin'] as const,
    refused: (operator: string) => `a list of tags takes $eq, $ne, $in or $nin, not ${operator}`,
  };
  readonly #conditions: Condition[] = [];
  #value: Condition | undefined;

  constructor(
    private readonly issues: ValidationIssue[],
    private readonly property: string,
  ) {}

  equals(value: unknown, path: string): void {
    this.#value = { [this.property]: { $contains: [this.#tag(value, path)] } };
  }

  compare(operator: Comparison, operand: unknown, path: string): void {
    const property = this.property;
    if (operator === '$eq') this.#conditions.push({ [property]: { $contains: [this.#tag(operand, path)] } });
    else if (operator === '$ne') this.#conditions.push({ $not: { [property]: { $contains: [this.#tag(operand, path)] } } });
    else if (operator === '$in') this.#conditions.push({ [property]: { $overlap: this.#tags(operand, path) } });
    else this.#conditions.push({ $not: { [property]: { $overlap: this.#tags(operand, path) } } });
  }

  condition(): Condition {
    return this.#value ?? (this.#conditions.length === 1 ? this.#conditions[0]! : { $and: this.#conditions });
  }

  #tag(item: unknown, path: string): string {
    if (typeof item !== 'string') this.issues.push({ path, message: 'must be a string' });
    return String(item);
  }

  #tags(items: unknown, path: string): string[] {
    if (!Array.isArray(items) || items.length === 0) {
      this.issues.push({ path, message: 'takes a non-empty array' });
      return [];
    }
    return items.map((item, index) => this.#tag(item, `${path}.${index}`));
  }
}

export function toWhere(filter: Record<string, unknown>, fields: FieldMap): Condition {
  const translation = new EntityFilter(fields);
  const where = walkFilter(filter, translation, 'filter');
  if (translation.issues.length > 0) throw validationError(translation.issues);
  return where;
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
