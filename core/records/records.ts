import { types, type EntitySchema } from '@mikro-orm/core';
import * as v from 'valibot';
import type { FieldMap, FieldType } from './list-query.ts';
import { wireTimestamp } from '../base/schemas.ts';

/**
 * What an operation answers for a row, derived from the entity alone: the
 * record type, the mapping from a row and the list-query field map. The
 * wire form is every group's (docs/endpoint.md): the primary key `id` as `_id`, dates as ISO 8601
 * text, an absent value as null, every other column as stored. Columns a
 * caller must not see (the tenant, hashes, sealed values) are named in
 * `hide`; the rest is the record, and its plain columns are what lists
 * filter and sort by. Columns in `filterOnly` stay out of the record and
 * can still be filtered and sorted by (a record that nests them).
 */

/** A column's value on the wire. */
type WireValue<T> = T extends Date ? string : T extends undefined ? null : T;

/** The record of entity `E` without the properties `H`. */
export type RecordOf<E, H extends string = never> = ('id' extends keyof E ? ('id' extends H ? unknown : { _id: string }) : unknown) & {
  -readonly [K in Exclude<keyof E & string, 'id' | H>]: WireValue<E[K]>;
};

export interface RecordView<E, R, Shown extends keyof E = keyof E> {
  /** Every shown plain column (text, number, boolean, date, uuid, text[]), by its record name, for toWhere and toOrderBy. */
  readonly fields: FieldMap;
  /** It reads the record's columns only: a row loaded with just those (`fields` of a find) will do. */
  readonly toRecord: (row: Pick<E, Shown>) => R;
  /** The record's schema, for an operation's declared `result`: every shown column, no other key; JSON columns as any value. */
  readonly schema: v.GenericSchema<R>;
  /** The schema of each field, for a record that adds to the derived one: `v.strictObject({ ...TASK.entries, subtasks: ... })`. */
  readonly entries: { readonly [K in keyof R]: v.GenericSchema<R[K]> };
}

/** The record type of a view: `type TaskRecord = InferRecord<typeof TASK>`. */
export type InferRecord<View> = View extends { readonly schema: v.GenericSchema<infer R> } ? R : never;

const FIELD_TYPES = new Map<unknown, FieldType>([
  [types.uuid, 'uuid'],
  [types.text, 'string'],
  [types.string, 'string'],
  [types.character, 'string'],
  [types.enum, 'string'],
  [types.boolean, 'boolean'],
  [types.integer, 'number'],
  [types.smallint, 'number'],
  [types.tinyint, 'number'],
  [types.mediumint, 'number'],
  [types.bigint, 'number'],
  [types.float, 'number'],
  [types.double, 'number'],
  [types.decimal, 'number'],
  [types.datetime, 'date'],
  [types.date, 'date'],
  [types.array, 'tags'],
]);

/** A column's schema on the wire, by its list-query type; any value for JSON and the other types lists cannot compare. */
const WIRE_SCHEMAS: Record<FieldType, v.GenericSchema> = {
  uuid: v.string(),
  string: v.string(),
  boolean: v.boolean(),
  number: v.number(),
  date: wireTimestamp,
  tags: v.array(v.string()),
};

/** The list-query type of a property; undefined for JSON, vectors and other values lists cannot compare. */
function fieldTypeOf(property: { type?: unknown; enum?: boolean }): FieldType | undefined {
  const { type } = property;
  if (property.enum && type === undefined) return 'string';
  return FIELD_TYPES.get(typeof type === 'function' ? type : (type as object | undefined)?.constructor);
}

const wire = (value: unknown): unknown => (value instanceof Date ? value.toISOString() : value === undefined ? null : value);

/**
 * The record view of an entity made with `defineEntity`:
 *
 *   export const DISCOUNT = defineRecord(Discount, { hide: ['subscriptionId'] });
 *   export type DiscountRecord = InferRecord<typeof DISCOUNT>;
 *   ...toWhere(query.filter, DISCOUNT.fields) ... DISCOUNT.toRecord(row)
 */
export function defineRecord<E extends object, const H extends keyof E & string = never, const F extends keyof E & string = never>(
  entity: EntitySchema<E, never>,
  { hide = [], filterOnly = [] }: { hide?: readonly H[]; filterOnly?: readonly F[] } = {},
): RecordView<E, RecordOf<E, H | F>, Exclude<keyof E & string, H | F>> {
  const hidden = new Set<string>(hide);
  const columns = Object.entries(entity.meta.properties as Record<string, { type?: unknown; enum?: boolean; nullable?: boolean }>)
    .filter(([name]) => !hidden.has(name))
    .map(([property, options]) => ({
      property,
      name: property === 'id' ? '_id' : property,
      type: fieldTypeOf(options),
      nullable: options.nullable === true,
    }));
  const fields: FieldMap = {};
  for (const { property, name, type } of columns) if (type) fields[name] = { property, type };
  const shown = columns.filter(({ property }) => !(filterOnly as readonly string[]).includes(property));
  const toRecord = (row: Pick<E, Exclude<keyof E & string, H | F>>) => {
    const record: Record<string, unknown> = {};
    for (const { property, name } of shown) record[name] = wire((row as Record<string, unknown>)[property]);
    return record as RecordOf<E, H | F>;
  };
  const entries = Object.freeze(
    Object.fromEntries(
      shown.map(({ name, type, nullable }) => {
        const wireSchema = type ? WIRE_SCHEMAS[type] : v.unknown();
        return [name, nullable ? v.nullable(wireSchema) : wireSchema];
      }),
    ),
  );
  // The entity's metadata is known at run time only: the types say what toRecord makes of it.
  const schema = v.strictObject(entries) as unknown as v.GenericSchema<RecordOf<E, H | F>>;
  return Object.freeze({ fields: Object.freeze(fields), toRecord, schema, entries: entries as RecordView<E, RecordOf<E, H | F>>['entries'] });
}

/** Columns `K` of entity `E` as a service checks them before saving: an absent value is null. */
export type FieldsOf<E, K extends keyof E> = { -readonly [P in K]: Exclude<E[P], undefined> };

/** Those columns of a row, to merge a change into before checking it. */
export const fieldsOf = <E extends object, const K extends keyof E & string>(row: E, names: readonly K[]): FieldsOf<E, K> =>
  Object.fromEntries(names.map((name) => [name, row[name] ?? null])) as FieldsOf<E, K>;
