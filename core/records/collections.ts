import * as v from 'valibot';
import { PluginLoadError } from '../base/plugin-errors.ts';
import { defineExtensionPoint, type Contribution } from '../base/extension-points.ts';
import type { AuthenticatedContext } from '../base/context.ts';
import { validationError } from '../base/errors.ts';
import { requiredListParams, type ListQuery } from './list-query.ts';

/**
 * A collection of records that forms may pick values from (`getFieldValues`
 * with a `reference`): a plugin's records, read with its own list filters.
 */
export interface CollectionDeclaration {
  /** The name a reference gives: `workflows`, `agentConfigs`. */
  name: string;
  describe: string;
  /** The fields a reference may take values and labels from. */
  fields: string[];
  /** Records of the caller's subscription, filtered and sorted as the owner's list operation does, at most `limit`. */
  list(ctx: AuthenticatedContext, query: Pick<ListQuery, 'filter' | 'sort'> & { limit: number }): Promise<object[]>;
}

declare module '../base/extension-points.ts' {
  interface ExtensionPoints {
    'core.collections': CollectionDeclaration;
  }
}

export const collectionsPoint = defineExtensionPoint({
  id: 'core.collections',
  describe: 'Collections of records forms pick values from (getFieldValues): {name, describe, fields, list(ctx, {filter, sort, limit})}.',
  contribution: v.object({
    name: v.pipe(v.string(), v.regex(/^[a-z][A-Za-z0-9]{0,63}$/, 'a collection name is camelCase, like "agentConfigs"')),
    describe: v.pipe(v.string(), v.minLength(1, 'describe must not be empty')),
    fields: v.pipe(v.array(v.pipe(v.string(), v.minLength(1))), v.minLength(1)),
    list: v.function(),
  }),
});

/** A reference to values of a collection, as forms give it. */
export interface FieldReference {
  collection: string;
  valueField: string;
  displayField: string;
  filter?: Record<string, unknown>;
  sort?: ListQuery['sort'];
}

const fieldName = v.pipe(v.string('must be a string'), v.minLength(1, 'must not be empty'), v.maxLength(100));
const referenceEntries = {
  valueField: fieldName,
  displayField: fieldName,
  filter: v.optional(requiredListParams().filter, {}),
  sort: v.optional(requiredListParams().sort),
};

/** The params of a group's getFieldValues over its own records: `{fieldName, reference: {valueField, displayField, filter?, sort?}}`. */
export const fieldValuesParams = v.object({ fieldName, reference: v.object(referenceEntries) });

/** The same where the reference names the collection it reads (`reference.collection`). */
export const collectionFieldValuesParams = v.object({ fieldName, reference: v.object({ collection: fieldName, ...referenceEntries }) });

/** Records read for one lookup at most. */
export const MAX_FIELD_VALUES = 1000;

/** The `core.collections` contributions, and lookups of `{value, label}` pairs in them. */
export class CollectionCatalogue {
  #collections = new Map<string, Contribution<CollectionDeclaration>>();

  load(contributions: readonly Contribution<CollectionDeclaration>[]): void {
    const collections = new Map<string, Contribution<CollectionDeclaration>>();
    for (const contribution of contributions) {
      const owner = collections.get(contribution.value.name);
      if (owner) {
        throw new PluginLoadError(
          'PLUGIN_INVALID_CONTRIBUTION',
          `Plugin "${contribution.pluginId}": collection "${contribution.value.name}" is already declared by plugin "${owner.pluginId}"`,
        );
      }
      collections.set(contribution.value.name, contribution);
    }
    this.#collections = collections;
  }

  names(): string[] {
    return [...this.#collections.keys()];
  }

  /**
   * `{value, label}` for each record of the collection (of the caller's
   * subscription) that passes the reference's filter, in its sort, at most
   * MAX_FIELD_VALUES, one per value.
   */
  async fieldValues(ctx: AuthenticatedContext, reference: FieldReference, path = 'reference'): Promise<{ value: unknown; label: string }[]> {
    const collection = this.#collections.get(reference.collection);
    if (!collection) throw validationError([{ path: `${path}.collection`, message: `unknown collection; known: ${this.names().join(', ')}` }]);
    const { fields } = collection.value;
    const issues = (['valueField', 'displayField'] as const)
      .filter((key) => !fields.includes(reference[key]))
      .map((key) => ({ path: `${path}.${key}`, message: `${reference[key]} is not a field of ${reference.collection}; fields: ${fields.join(', ')}` }));
    if (issues.length > 0) throw validationError(issues);
    const records = (await collection.value.list(ctx, { filter: reference.filter ?? {}, sort: reference.sort ?? {}, limit: MAX_FIELD_VALUES })) as Record<
      string,
      unknown
    >[];
    const seen = new Set<string>();
    const values: { value: unknown; label: string }[] = [];
    for (const record of records) {
      const value = record[reference.valueField];
      if (value === undefined || value === null) continue;
      const key = JSON.stringify(value);
      if (seen.has(key)) continue;
      seen.add(key);
      const label = record[reference.displayField];
      values.push({ value, label: label === undefined || label === null ? String(value) : typeof label === 'string' ? label : JSON.stringify(label) });
    }
    return values;
  }
}
