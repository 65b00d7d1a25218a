import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { sourcePath } from '../base/paths.ts';
import { MikroORM } from '@mikro-orm/core';
import type { AnyEntitySchema } from '../db/any-entity.ts';
import { Migrator } from '@mikro-orm/migrations';
import { PgliteDriver } from '../db/pglite-driver.ts';
import { discoverLocalPlugins, importPackagePlugins, pluginFolders } from '../plugin/loader.ts';
import { coreEntities } from '../plugin/core-entities.ts';
import { openPglite } from '../db/pglite.ts';

/**
 * `rpc-service migration create <owner> [name]` (`npm run migration:create`
 * here) writes the next migration of `core` or of a plugin (by id) from its
 * entities, into its `migrations/` folder, and lists it in that folder's
 * index.ts. The diff is taken against the folder's snapshot of the schema it
 * last generated, so each owner's migrations cover its own tables only.
 * `--check` fails when any owner's entities differ from its last migration.
 */
const CORE_MIGRATIONS = sourcePath(import.meta.url, '../db/migrations/');
const PLUGINS_DIR = sourcePath(import.meta.url, '../../plugins/');

export interface Owner {
  id: string;
  entities: readonly AnyEntitySchema[];
  folder: string;
}

/** The core and every plugin with entities: built-in ones and those named (npm names or paths). */
export async function migrationOwners(named: readonly string[]): Promise<Owner[]> {
  const plugins = [...(await discoverLocalPlugins(PLUGINS_DIR)), ...(await importPackagePlugins([...named]))];
  return [
    { id: 'core', entities: coreEntities, folder: CORE_MIGRATIONS },
    ...plugins
      .filter((plugin) => (plugin.entities ?? []).length > 0 && pluginFolders.has(plugin))
      .map((plugin) => ({ id: plugin.id, entities: plugin.entities!, folder: path.join(pluginFolders.get(plugin)!, 'migrations') })),
  ];
}

async function withMigrator<T>(owner: Owner, run: (migrator: Migrator) => Promise<T>): Promise<T> {
  const pglite = await openPglite(undefined);
  const orm = await MikroORM.init({
    driver: PgliteDriver,
    dbName: 'postgres',
    driverOptions: { connection: { pglite: () => pglite } },
    entities: [...owner.entities],
    extensions: [Migrator],
    discovery: { warnWhenNoEntities: false },
    migrations: { path: owner.folder, emit: 'ts', snapshot: true, snapshotName: '.snapshot', dropTables: true, safe: false, silent: true },
  });
  try {
    return await run(orm.getMigrator() as Migrator);
  } finally {
    await orm.close(true);
    await pglite.close();
  }
}

/** The folder's index.ts: every migration class in it, oldest first, for the plugin's `migrations`. */
function writeIndex(folder: string): void {
  const names = readdirSync(folder)
    .filter((file) => /^Migration\d{14}.*\.ts$/.test(file))
    .sort()
    .map((file) => file.replace(/\.ts$/, ''));
  const lines = [
    '// Written by `npm run migration:create`: the migrations of this folder, oldest first.',
    ...names.map((name) => `import { ${name} } from './${name}.ts';`),
    '',
    `export const migrations = [${names.join(', ')}];`,
    '',
  ];
  writeFileSync(path.join(folder, 'index.ts'), lines.join('\n'));
}

/** The generator writes MikroORM's Migration class; the service runs its own (core/db/migration.ts), which plugins take from the SDK. */
function useServiceMigrationClass(owner: Owner, file: string): void {
  const from = owner.id === 'core' ? '../migration.ts' : 'rpc-service/plugin';
  const generated = "import { Migration } from '@mikro-orm/migrations';";
  const text = readFileSync(file, 'utf8');
  if (!text.includes(generated)) throw new Error(`${file}: the generator no longer writes ${generated}; change its import to '${from}' by hand`);
  writeFileSync(file, text.replace(generated, `import { Migration } from '${from}';`));
}

/** Writes the owner's next migration; says what it wrote, or that nothing changed. */
export async function createMigration(owner: Owner, name?: string): Promise<string> {
  const result = await withMigrator(owner, (migrator) => migrator.createMigration(undefined, false, false, name));
  if (!result.fileName) return `No changes in the entities of ${owner.id}.`;
  useServiceMigrationClass(owner, path.join(owner.folder, result.fileName));
  writeIndex(owner.folder);
  return `Wrote ${path.relative(process.cwd(), path.join(owner.folder, result.fileName))}; review it before committing.`;
}

/** The owners whose entities changed since their last migration. */
export async function staleOwners(owners: readonly Owner[]): Promise<string[]> {
  const stale: string[] = [];
  for (const owner of owners) if (await withMigrator(owner, (migrator) => migrator.checkMigrationNeeded())) stale.push(owner.id);
  return stale;
}
