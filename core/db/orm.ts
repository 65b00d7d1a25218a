import type { PGlite, QueryOptions } from '@electric-sql/pglite';
import pg from 'pg';
import { MikroORM, type Options } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { AnyEntitySchema } from './any-entity.ts';
import { PgliteDriver } from './pglite-driver.ts';
import { embeddedDatabaseDir, makeDataFolder } from '../base/config.ts';
import type { Logger } from '../base/logger.ts';
import { applyMigrations, MIGRATIONS_TABLE, pendingMigrations, type MigrationClass, type NamedMigration } from './migration.ts';
import { openPglite } from './pglite.ts';
import { keepStatistics } from './statistics.ts';
import { withRawConnection, type KnexClient } from './raw-connection.ts';
import { inStatementSpan, TracedPostgreSqlDriver } from './statement-spans.ts';
import { TENANT_FILTER, tenantEntityNames } from './tenant.ts';

/**
 * pg-boss keeps its tables in this schema, named like the core's own tables
 * (core/jobs/job-service.ts); declared here, below the job queue, because the
 * schema generator must leave it alone.
 */
export const JOBS_SCHEMA = 'core_jobs';

export type DatabaseKind = 'postgresql' | 'pglite';

export interface Database {
  kind: DatabaseKind;
  orm: MikroORM;
  /** A fresh EntityManager with the tenant filter set; null leaves it unset, so tenant tables refuse queries. */
  forkEm(subscriptionId: string | null): EntityManager;
  /** Runs SQL outside any tenant filter (health checks, rate limits, event payloads). */
  execute<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  /**
   * Rows of a read that a hot path runs again and again, parsed and planned
   * once per connection: with `pg` a named statement, so only the values
   * travel; on PGlite PREPAREd once, then run by EXECUTE through the simple
   * protocol. Like `execute` it goes around the ORM and its tenant filter, so
   * the SQL names the subscription itself.
   */
  read<T = Record<string, unknown>>(statement: PreparedRead, values: unknown[]): Promise<T[]>;
  /** Whether statements may be named, so each connection parses and plans them once: on PostgreSQL reached straight, not through a pooler in transaction mode. */
  namedStatements: boolean;
  migrate(): Promise<string[]>;
  /**
   * Runs start-up work that changes the schema outside the migrations (the
   * job queues' partitions) under the migration lock: nodes starting at
   * once take turns instead of deadlocking.
   */
  withSchemaLock<T>(run: () => Promise<T>): Promise<T>;
  pendingMigrations(): Promise<string[]>;
  /**
   * The embedded database's folder as one gzipped tarball, taken between two
   * statements (PGlite runs one at a time), so it is consistent: for backups
   * (core/operator/backup.ts). Null on PostgreSQL, which pg_dump snapshots.
   */
  dumpEmbedded(): Promise<Blob> | null;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  databaseUrl?: string;
  /** Set when databaseUrl is a pooler in transaction mode: the server itself, for the migration lock. */
  directUrl?: string;
  dataDir: string;
  /** Embedded database kept in memory only (tests). */
  inMemory?: boolean;
  entities: readonly AnyEntitySchema[];
  /** Each owner's migrations in order: the core's first, then each plugin's in load order. */
  migrations: { owner: string; migrations: readonly MigrationClass[] }[];
  logger: Logger;
}

/** A read for `Database.read`: a name unique in the service, and SQL with `$1`, `$2`... placeholders. */
export interface PreparedRead {
  readonly name: string;
  readonly sql: string;
}

const preparedReads = new Map<string, string>();

/** Declares a read once, at module level; a name stands for one statement in the whole service. */
export function preparedRead(name: string, sql: string): PreparedRead {
  if (!/^[a-z][a-z0-9_]{0,62}$/.test(name)) {
    throw new TypeError(`Prepared read "${name}": the name must be lower-case letters, digits and _, at most 63 characters`);
  }
  const known = preparedReads.get(name);
  if (known !== undefined && known !== sql) throw new TypeError(`Prepared read "${name}" is already declared with other SQL; give each read its own name`);
  preparedReads.set(name, sql);
  return { name, sql };
}

export class DatabaseStartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DatabaseStartupError';
  }
}

/** A migration of the history before plugins owned their tables (contract v1), which cannot be upgraded in place. */
const V1_MIGRATION = 'core:0001_identity';

export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  const { databaseUrl, directUrl, logger } = options;
  const base: Options = {
    entities: [...options.entities],
    discovery: { warnWhenNoEntities: false },
    filters: {
      [TENANT_FILTER]: {
        name: TENANT_FILTER,
        cond: (args: { subscriptionId: string }) => ({ subscriptionId: args.subscriptionId }),
        entity: tenantEntityNames(options.entities),
        default: true,
      },
    },
    allowGlobalContext: false,
    // The job queue's tables (pg-boss) are created and migrated by pg-boss, and the
    // record of applied migrations by the migration runner, not from entities.
    schemaGenerator: { ignoreSchema: [JOBS_SCHEMA], skipTables: [MIGRATIONS_TABLE] },
    debug: false,
  };

  let orm: MikroORM;
  let pglite: PGlite | undefined;
  if (databaseUrl) {
    orm = await MikroORM.init({ ...base, driver: TracedPostgreSqlDriver, clientUrl: databaseUrl, pool: { min: 1, max: 10 } }).catch((error: Error) => {
      throw new DatabaseStartupError(`Cannot connect to PostgreSQL at DATABASE_URL: ${error.message}`);
    });
    await requirePgvector(orm);
  } else {
    const dir = options.inMemory ? undefined : embeddedDatabaseDir(options.dataDir);
    if (dir) makeDataFolder(dir);
    pglite = await openPglite(dir);
    const instance = pglite;
    orm = await MikroORM.init({
      ...base,
      driver: PgliteDriver,
      dbName: 'postgres',
      driverOptions: { connection: { pglite: () => simpleProtocolWhenUnbound(instance) } },
    });
  }

  const connection = () => orm.em.getConnection();
  const stopStatistics = await keepStatistics((sql) => connection().execute(sql), pglite !== undefined, logger);
  const migrations: NamedMigration[] = options.migrations.flatMap(({ owner, migrations }) =>
    migrations.map((migration) => ({ name: `${owner}:${migration.name}`, migration })),
  );
  const em = () => orm.em.fork() as EntityManager;
  const platform = orm.em.getPlatform();
  const preparedOnPglite = new Set<string>();
  // A pooler in transaction mode hands each statement to any server connection, where a named one may not be prepared.
  const namedStatements = databaseUrl !== undefined && directUrl === undefined;
  return {
    kind: databaseUrl ? 'postgresql' : 'pglite',
    orm,
    namedStatements,
    forkEm(subscriptionId) {
      const em = orm.em.fork({ clear: true }) as EntityManager;
      if (subscriptionId !== null) em.setFilterParams(TENANT_FILTER, { subscriptionId });
      return em;
    },
    execute: (sql, params = []) => connection().execute(sql, params),
    read: <T>(statement: PreparedRead, values: unknown[]) => {
      // One value, one parameter: an array would be spread over several when inlined on PGlite.
      if (values.some((value) => Array.isArray(value))) throw new TypeError(`Prepared read "${statement.name}": values must be scalars`);
      // The statement's SQL decides the rows' shape; its caller names it.
      return inStatementSpan(statement.sql, () =>
        withRawConnection(knexClientOf(orm), async (raw) => {
          if (!raw.exec) return (await raw.query({ ...(namedStatements ? { name: statement.name } : {}), text: statement.sql, values })).rows as T[];
          if (!preparedOnPglite.has(statement.name)) {
            await raw.exec(`prepare "${statement.name}" as ${statement.sql}`);
            preparedOnPglite.add(statement.name);
          }
          const args = values.length > 0 ? `(${values.map(() => '?').join(', ')})` : '';
          const [result] = await raw.exec(platform.formatQuery(`execute "${statement.name}"${args}`, values));
          return result!.rows as T[];
        }),
      );
    },
    async migrate() {
      await refuseV1Schema(connection());
      const applied = await withMigrationLock(orm, databaseUrl !== undefined, directUrl, () => applyMigrations(em(), migrations));
      if (applied.length > 0) logger.info({ migrations: applied }, 'applied database migrations');
      return applied;
    },
    withSchemaLock: (run) => withMigrationLock(orm, databaseUrl !== undefined, directUrl, run),
    async pendingMigrations() {
      return (await pendingMigrations(em(), migrations)).map((m) => m.name);
    },
    dumpEmbedded: () => pglite?.dumpDataDir('gzip') ?? null,
    async close() {
      stopStatistics();
      await orm.close(true);
      await pglite?.close();
    },
  };
}

/**
 * The PGlite instance as the knex dialect uses it, except that a statement
 * without values goes through the simple query protocol, as `pg` sends it to
 * PostgreSQL. MikroORM inlines every value, so that is nearly every statement;
 * PGlite's query() would take six trips into the WASM for it (parse, describe,
 * bind, describe, execute, sync), exec() takes two, about a third less time.
 */
function simpleProtocolWhenUnbound(pglite: PGlite) {
  return {
    get waitReady() {
      return pglite.waitReady;
    },
    async query(sql: string, values?: unknown[], options?: QueryOptions) {
      if (values?.length || options) return pglite.query(sql, values, options);
      return (await pglite.exec(sql)).at(-1)!;
    },
    exec: (sql: string, options?: QueryOptions) => pglite.exec(sql, options),
    close: () => pglite.close(),
  };
}

async function refuseV1Schema(connection: { execute(sql: string, params?: unknown[]): Promise<Record<string, unknown>[]> }): Promise<void> {
  const [found] = await connection.execute(`select to_regclass('${MIGRATIONS_TABLE}') is not null as present`);
  if (!found?.present) return;
  const [old] = await connection.execute(`select 1 from ${MIGRATIONS_TABLE} where name = ?`, [V1_MIGRATION]);
  if (old) {
    throw new DatabaseStartupError(
      'This database was created by a build before plugins owned their tables (plugin contract v2) and cannot be upgraded in place. ' +
        'Start with an empty database (a new DATA_DIR or DATABASE_URL).',
    );
  }
}

async function requirePgvector(orm: MikroORM): Promise<void> {
  const rows = await orm.em.getConnection().execute(`select 1 from pg_available_extensions where name = 'vector'`);
  if (rows.length === 0) {
    await orm.close(true);
    throw new DatabaseStartupError(
      'The PostgreSQL server at DATABASE_URL has no pgvector extension. Install pgvector on that server ' +
        '(Debian/Ubuntu: the postgresql-<version>-pgvector package, or build it as .ci/ensure-pgvector.sh does), ' +
        'then start the service again.',
    );
  }
}

/**
 * Several nodes may start at once on one PostgreSQL: only one applies
 * migrations at a time. The lock is a session's, held on a connection of the
 * pool, or behind a pooler (`directUrl`) on one straight to the server, where
 * a session lasts.
 */
async function withMigrationLock<T>(orm: MikroORM, shared: boolean, directUrl: string | undefined, run: () => Promise<T>): Promise<T> {
  if (!shared) return run();
  const LOCK_ID = 727_001;
  const locked = async (lockConnection: { query(sql: string, values: unknown[]): Promise<unknown> }) => {
    await lockConnection.query('select pg_advisory_lock($1)', [LOCK_ID]);
    try {
      return await run();
    } finally {
      await lockConnection.query('select pg_advisory_unlock($1)', [LOCK_ID]).catch(() => undefined);
    }
  };
  if (!directUrl) return withRawConnection(knexClientOf(orm), locked);
  const client = new pg.Client({ connectionString: directUrl });
  await client.connect();
  try {
    return await locked(client);
  } finally {
    await client.end();
  }
}

/** The knex client behind the ORM's pool, which hands out its raw connections. */
const knexClientOf = (orm: MikroORM): KnexClient => (orm.em as EntityManager).getConnection().getKnex().client as KnexClient;
