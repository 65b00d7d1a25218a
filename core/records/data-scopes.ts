import type { EntityManager } from '@mikro-orm/postgresql';
import * as v from 'valibot';
import type { AnyEntitySchema } from '../db/any-entity.ts';
import { PluginLoadError } from '../base/plugin-errors.ts';
import { defineExtensionPoint, type Contribution } from '../base/extension-points.ts';
import type { AuthenticatedContext } from '../base/context.ts';
import { validationError } from '../base/errors.ts';
import { isUuid } from '../base/schemas.ts';

/** Files of a data scope: path inside the scope → text. */
export type ScopeFiles = Record<string, string>;

/**
 * Records of a plugin kept as files of a versioned data scope (CheckpointRpc):
 * a checkpoint writes them out, a restore or rollback reads them back.
 */
export interface DataScopeDeclaration {
  /** The scope's name: `workflows`, `agents`. */
  name: string;
  describe: string;
  /** The caller's subscription's records as files, read through `em`: the connection that holds the scope's lock. */
  export(ctx: AuthenticatedContext, em: EntityManager): Promise<ScopeFiles>;
  /** Makes the subscription's records equal to the files, through `em`: the transaction the restore runs in. */
  import(ctx: AuthenticatedContext, em: EntityManager, files: ScopeFiles): Promise<void>;
}

export const SCOPE_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;

declare module '../base/extension-points.ts' {
  interface ExtensionPoints {
    'core.dataScopes': DataScopeDeclaration;
  }
}

export const dataScopesPoint = defineExtensionPoint({
  id: 'core.dataScopes',
  describe: 'Records kept as files of a versioned data scope: {name, describe, export(ctx, em), import(ctx, em, files)}.',
  contribution: v.object({
    name: v.pipe(v.string(), v.regex(SCOPE_NAME, 'a scope name is lower-case letters, digits, _ and -, like "workflows"')),
    describe: v.pipe(v.string(), v.minLength(1, 'describe must not be empty')),
    export: v.function(),
    import: v.function(),
  }),
});

/** A scope whose files come from records, as the catalogue gives it. */
export type DataScope = Readonly<DataScopeDeclaration>;

/** The `core.dataScopes` contributions, by scope name. */
export class DataScopeCatalogue {
  #scopes = new Map<string, DataScope>();

  load(contributions: readonly Contribution<DataScopeDeclaration>[]): void {
    const scopes = new Map<string, DataScope>();
    const owners = new Map<string, string>();
    for (const { pluginId, value } of contributions) {
      const owner = owners.get(value.name);
      if (owner)
        throw new PluginLoadError('PLUGIN_INVALID_CONTRIBUTION', `Plugin "${pluginId}": data scope "${value.name}" is already declared by plugin "${owner}"`);
      owners.set(value.name, pluginId);
      scopes.set(value.name, value);
    }
    this.#scopes = scopes;
  }

  names(): string[] {
    return [...this.#scopes.keys()].sort();
  }

  get(name: string): DataScope | undefined {
    return this.#scopes.get(name);
  }
}

/**
 * A data scope of one entity of a subscription: each record one JSON file,
 * `<id>.json`, every property but the subscription, dates as ISO 8601. The
 * import deletes the subscription's records that have no file, then writes
 * every file's record as it is (same id, same values).
 */
export function entityScope({ name, describe, entity }: { name: string; describe: string; entity: AnyEntitySchema }): DataScopeDeclaration {
  const entityName = entity.meta.className;
  // Ids are the files' word: keyed by (subscriptionId, id), a file naming an id another subscription uses makes a row of this one.
  const key = Object.entries(entity.meta.properties).flatMap(([property, { primary }]) => (primary ? [property] : []));
  if (key.join() !== 'subscriptionId,id')
    throw new Error(`Data scope "${name}": entity ${entityName} needs the primary key (subscriptionId, id), not (${key.join(', ')})`);
  const fieldsOf = (em: EntityManager) => {
    const meta = em.getMetadata().get(entityName);
    return {
      names: meta.props.filter((prop) => prop.persist !== false && prop.name !== 'subscriptionId').map((prop) => prop.name),
      dates: new Set(meta.props.filter((prop) => prop.runtimeType === 'Date').map((prop) => prop.name)),
      nullable: new Set(meta.props.filter((prop) => prop.nullable).map((prop) => prop.name)),
    };
  };
  return {
    name,
    describe,
    async export(ctx, em) {
      const { names } = fieldsOf(em);
      const rows = await em.find<{ id: string; subscriptionId: string }>(entityName, { subscriptionId: ctx.subscriptionId }, { orderBy: { id: 'asc' } });
      return Object.fromEntries(
        rows.map((row: Record<string, unknown>) => {
          const record = Object.fromEntries(
            names.map((field) => [field, row[field] instanceof Date ? (row[field] as Date).toISOString() : (row[field] ?? null)]),
          );
          return [`${row.id as string}.json`, `${JSON.stringify(record, null, 2)}\n`];
        }),
      );
    },
    async import(ctx, em, files) {
      const { names, dates, nullable } = fieldsOf(em);
      const records = Object.entries(files).map(([path, text]) => {
        const id = /^([^/]+)\.json$/.exec(path)?.[1];
        let record: Record<string, unknown>;
        try {
          record = JSON.parse(text) as Record<string, unknown>;
        } catch {
          throw validationError([{ path, message: `${path} of scope ${name} is not JSON` }]);
        }
        if (!id || !isUuid(id) || record?.id !== id)
          throw validationError([{ path, message: `${path} of scope ${name} is not a record file (<id>.json holding that id)` }]);
        // A field added since the checkpoint was made is null where it may be; any other missing field refuses the file.
        const missing = names.filter((field) => !(field in record) && !nullable.has(field));
        if (missing.length > 0) throw validationError([{ path, message: `${path} of scope ${name} lacks ${missing.join(', ')}` }]);
        return {
          ...Object.fromEntries(
            names.map((field) => [
              field,
              record[field] === undefined || record[field] === null ? null : dates.has(field) ? new Date(record[field] as string) : record[field],
            ]),
          ),
          id,
          subscriptionId: ctx.subscriptionId,
        };
      });
      const ids = records.map((record) => record.id);
      await em.nativeDelete(entityName, { subscriptionId: ctx.subscriptionId, id: { $nin: ids } });
      if (records.length > 0) await em.upsertMany(entityName, records);
    },
  };
}
