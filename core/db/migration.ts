import type { EntityManager } from '@mikro-orm/postgresql';
import { withStatementOrigin } from './statement-log.ts';

/**
 * A schema change of the core or of a plugin: `up` lists its statements with
 * `addSql`, and they run in one transaction with the record that it ran.
 * `npm run migration:create` writes these from the entities. The service runs
 * them itself rather than through MikroORM's migrator, which loads a command
 * line framework, a file globber and a JSON validator on every start for
 * work the service never does at run time (it stays in the generator).
 */
export abstract class Migration {
  #queries: string[] = [];

  abstract up(): Promise<void> | void;

  down(): Promise<void> | void {
    throw new Error('This migration cannot be reverted');
  }

  protected addSql(sql: string): void {
    this.#queries.push(sql);
  }

  /**
   * Renames a table with its rows, and the constraints and indexes named
   * after it, given by what follows the table's name (`pkey`,
   * `created_at_index`): for a table that takes its owner's prefix. `down`
   * calls it with the names swapped.
   */
  protected renameTable(from: string, to: string, { constraints = [], indexes = [] }: { constraints?: readonly string[]; indexes?: readonly string[] }): void {
    this.addSql(`alter table "${from}" rename to "${to}";`);
    for (const suffix of constraints) this.addSql(`alter table "${to}" rename constraint "${from}_${suffix}" to "${to}_${suffix}";`);
    for (const suffix of indexes) this.addSql(`alter index "${from}_${suffix}" rename to "${to}_${suffix}";`);
  }

  /** The statements `up` listed. */
  async statementsUp(): Promise<string[]> {
    this.#queries = [];
    await this.up();
    return this.#queries;
  }
}

/** A migration class as a plugin lists it: its class name is the migration's name. */
export type MigrationClass = (new () => Migration) & { readonly name: string };

/** One owner's migration, as recorded: `<owner>:<class name>`. */
export interface NamedMigration {
  name: string;
  migration: MigrationClass;
}

/** The table the applied migrations are recorded in, as MikroORM's migrator made it, so databases made before read the same. */
export const MIGRATIONS_TABLE = 'core_migrations';

const CREATE_TABLE = `create table if not exists "${MIGRATIONS_TABLE}" ("id" serial primary key, "name" varchar(255), "executed_at" timestamptz default current_timestamp)`;

/** Names of the migrations not yet applied, in order. */
export async function pendingMigrations(em: EntityManager, all: readonly NamedMigration[]): Promise<NamedMigration[]> {
  const connection = em.getConnection();
  const [table] = await connection.execute<{ present: boolean }[]>(`select to_regclass('${MIGRATIONS_TABLE}') is not null as present`);
  if (!table?.present) return [...all];
  const applied = new Set((await connection.execute<{ name: string }[]>(`select name from "${MIGRATIONS_TABLE}"`)).map((row) => row.name));
  return all.filter(({ name }) => !applied.has(name));
}

/** Applies the pending migrations in order, each in its own transaction with its record; returns their names. */
export async function applyMigrations(em: EntityManager, all: readonly NamedMigration[]): Promise<string[]> {
  await em.getConnection().execute(CREATE_TABLE);
  const applied: string[] = [];
  for (const { name, migration } of await pendingMigrations(em, all)) {
    const statements = await new migration().statementsUp();
    await em.fork().transactional(async (tx) => {
      const connection = tx.getConnection();
      const context = tx.getTransactionContext();
      // A migration changes every tenant's rows at once: the tenant-key check sets its statements apart.
      await withStatementOrigin('migration', async () => {
        for (const sql of statements) await connection.execute(sql, [], 'run', context);
      });
      await connection.execute(`insert into "${MIGRATIONS_TABLE}" ("name") values (?)`, [name], 'run', context);
    });
    applied.push(name);
  }
  return applied;
}
