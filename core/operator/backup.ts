import { execFile, spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite/vector';
import { pino } from 'pino';
import { loadPlugins } from '../app/app.ts';
import { embeddedDatabaseDir, hasEmbeddedDatabase, sessionDatabaseUrl, type Config } from '../base/config.ts';
import { masterKeyFile } from '../credentials/master-key.ts';
import { coreEntities } from '../plugin/core-entities.ts';
import { applyMigrations } from '../db/migration.ts';
import { openDatabase } from '../db/orm.ts';
import { PGLITE_START_PARAMS } from '../db/pglite.ts';
import { createLogger } from '../base/logger.ts';
import type { Plugin } from '../plugin/define.ts';
import { CORE_VERSION } from '../base/version.ts';
import { appliedMigrations, filesUnder, inside, migrationsOf, Staging, unpackChecked, type ArchiveManifest } from './archive.ts';
import { OperatorError, type OperatorCommand, type Report } from './command.ts';
import { namePlugins, pluginVersions, type PluginVersion } from './plugins.ts';

/**
 * `rpc-service backup` and `restore`
 * (docs/decisions/0044-backup-and-restore.md). An archive is a gzipped tar of:
 *   manifest.json        format, versions, migrations, the plugins with their versions, and each entry's size and SHA-256
 *   database/embedded.tar.gz   the embedded database (PGlite's own dump), or
 *   database/postgresql.dump   pg_dump's custom format
 *   data/...             DATA_DIR but the database and the control socket: uploads, checkpoint scopes, plugins' folders
 *   keys/master.key      the embedded installation's master key, unless left out
 */
export const BACKUP_FORMAT = 1;

export interface Manifest extends ArchiveManifest {
  createdAt: string;
  /** `tables`: how many tables pg_dump dumped the rows of, for restore's progress bar (PostgreSQL). */
  database: { kind: 'pglite' | 'postgresql'; serverVersion: string; migrations: string[]; tables?: number };
  /** The plugins loaded when it was made; archives of the first releases name them by id alone. */
  plugins: (PluginVersion | string)[];
  /** `included` (keys/master.key), `left out` (restore needs the installation's master.key), or `environment` (restore needs MASTER_KEY). */
  masterKey: 'included' | 'left out' | 'environment';
}

export interface BackupArgs {
  /** Absolute path of the archive to write. */
  out: string;
  withoutMasterKey?: boolean;
}

export interface BackupResult {
  out: string;
  bytes: number;
  entries: number;
  masterKey: Manifest['masterKey'];
}

/** What DATA_DIR holds that the archive carries otherwise, or not at all. */
const NOT_DATA = new Set(['db', 'control.sock', 'master.key']);

/** DATA_DIR's files the archive carries under `data/`: hidden names at the top are staging folders (`.staging-*`, `.restore-*`), not data. */
const dataFiles = (dataDir: string): string[] => filesUnder(dataDir, (name) => NOT_DATA.has(name) || name.startsWith('.'));

/** What to install for pg_dump and pg_restore: PostgreSQL's client programs, of the server's major version or newer. */
export const clientProgramsAdvice = (serverMajor?: number): string =>
  serverMajor
    ? `install PostgreSQL's client programs ${serverMajor} or newer (Debian: postgresql-client-${serverMajor})`
    : "install PostgreSQL's client programs, as new as the server (Debian: postgresql-client)";

/**
 * Runs a client program of PostgreSQL; `line` hears each line of its stderr.
 * When it fails, its error is its last `<program>: error:` line (pg_restore
 * follows it with the statement), else its last line.
 */
function runTool(command: string, args: string[], line: (text: string) => void = () => undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let last = '';
    let error = '';
    createInterface({ input: child.stderr }).on('line', (text) => {
      if (text.trim()) last = text;
      if (text.startsWith(`${command}: error:`)) error = text;
      line(text);
    });
    child.once('error', (error: NodeJS.ErrnoException) =>
      reject(error.code === 'ENOENT' ? new OperatorError(`${command} is not on PATH: ${clientProgramsAdvice()}`) : error),
    );
    child.once('close', (code) => (code === 0 ? resolve() : reject(new OperatorError(`${command} failed: ${error || last}`))));
  });
}

/** `pg_dump (PostgreSQL) 17.2 (Debian 17.2-1)` → `17.2`; undefined when the program is not on PATH. */
export function clientVersion(command: 'pg_dump' | 'pg_restore'): Promise<string | undefined> {
  return new Promise((resolve, reject) =>
    execFile(command, ['--version'], (error, stdout) => {
      if ((error as NodeJS.ErrnoException | null)?.code === 'ENOENT') return resolve(undefined);
      if (error) return reject(error);
      resolve(/\(PostgreSQL\) (\d+(?:\.\d+)?)/.exec(stdout)?.[1] ?? stdout.trim());
    }),
  );
}

/** The tables whose rows pg_dump writes: ordinary tables outside the system schemas and not an extension's. */
const DUMPED_TABLES = `select count(*)::int as tables from pg_class c join pg_namespace n on n.oid = c.relnamespace
  where c.relkind = 'r' and n.nspname <> 'information_schema' and n.nspname not like 'pg\\_%'
  and not exists (select 1 from pg_depend d where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'e')`;

/** `backup`: the database first, then the files, so every file the database names is in the archive (files only ever arrive before their record). */
export const backup: OperatorCommand<BackupArgs, BackupResult> = {
  async run(app, { out, withoutMasterKey = false }, report) {
    const { config, deps } = app;
    if (existsSync(out)) throw new OperatorError(`${out} exists: give a new file`);
    const staging = await Staging.open(out);
    try {
      await mkdir(staging.path('database'));
      const [{ version }] = await deps.db.execute<{ version: string }>('show server_version');
      const migrations = await appliedMigrations(deps.db);
      let tables: number | undefined;
      const embedded = deps.db.dumpEmbedded();
      if (embedded) {
        // PGlite dumps its folder in one call: two stages, the dump and its copy in the archive.
        report({ label: 'database', done: 0, total: 2, unit: 'items' });
        const dump = new Uint8Array(await (await embedded).arrayBuffer());
        report({ label: 'database', done: 1, total: 2, unit: 'items' });
        await writeFile(staging.path('database/embedded.tar.gz'), dump);
        await staging.add('database/embedded.tar.gz');
        report({ label: 'database', done: 2, total: 2, unit: 'items' });
      } else {
        // A table at a time, as pg_dump --verbose says it dumps one's rows.
        [{ tables }] = await deps.db.execute<{ tables: number }>(DUMPED_TABLES);
        let dumped = 0;
        report({ label: 'database', done: 0, total: tables, unit: 'items' });
        await runTool(
          'pg_dump',
          ['--format=custom', '--no-owner', '--no-privileges', '--verbose', `--file=${staging.path('database/postgresql.dump')}`, sessionDatabaseUrl(config)!],
          (line) => {
            if (line.includes('dumping contents of table')) report({ label: 'database', done: ++dumped, total: Math.max(tables!, dumped), unit: 'items' });
          },
        );
        await staging.add('database/postgresql.dump');
        report({ label: 'database', done: tables, total: tables, unit: 'items' });
      }

      const files = dataFiles(config.dataDir);
      const total = files.reduce((sum, file) => sum + statSync(path.join(config.dataDir, file)).size, 0);
      let done = 0;
      for (const file of files) {
        const target = staging.path(path.join('data', file));
        await mkdir(path.dirname(target), { recursive: true });
        // Gone since the walk (a swept upload): nothing to keep.
        const copied = await copyFile(path.join(config.dataDir, file), target).then(
          () => true,
          (error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? false : Promise.reject(error)),
        );
        if (!copied) continue;
        done += (await staging.add(path.join('data', file))).size;
        report({ label: 'files', done, total, unit: 'bytes' });
      }

      let masterKey: Manifest['masterKey'] = config.masterKey ? 'environment' : withoutMasterKey ? 'left out' : 'included';
      if (masterKey === 'included') {
        if (!existsSync(masterKeyFile(config))) masterKey = 'left out';
        else {
          await mkdir(staging.path('keys'), { mode: 0o700 });
          await copyFile(masterKeyFile(config), staging.path('keys/master.key'));
          await staging.add('keys/master.key');
        }
      }
      const manifest: Manifest = {
        format: BACKUP_FORMAT,
        createdAt: new Date().toISOString(),
        serviceVersion: CORE_VERSION,
        database: { kind: deps.db.kind, serverVersion: version, migrations, tables },
        plugins: await pluginVersions(app.plugins, config.plugins),
        masterKey,
        entries: staging.entries,
      };
      await staging.pack(out, manifest, report);
      return { out, bytes: statSync(out).size, entries: staging.entries.length, masterKey };
    } finally {
      await staging.close();
    }
  },
};

export interface RestoreArgs {
  from: string;
  /** Replace what the target holds. */
  force?: boolean;
  /** Restore the data of plugins this installation does not load, left unused until they are loaded. */
  allowMissingPlugins?: boolean;
}

export interface RestoreResult {
  manifest: Manifest;
  /** Plugins whose data the archive holds and this installation does not load (restored with allowMissingPlugins). */
  unloaded: PluginVersion[];
  /** Migrations applied after, for code newer than the backup's or plugins it did not have. */
  migrated: number;
}

/** Where a backup's entries go: its database, its master key, and DATA_DIR's files (what dataFiles carries). */
function misplacedEntry(entries: readonly { path: string }[]): string | undefined {
  return entries.find(({ path: name }) => {
    // Not a path at all: unpackChecked says so.
    if (typeof name !== 'string') return false;
    if (name === 'database/embedded.tar.gz' || name === 'database/postgresql.dump' || name === 'keys/master.key') return false;
    const [top, first] = name.split('/');
    return top !== 'data' || first === undefined || NOT_DATA.has(first) || first.startsWith('.');
  })?.path;
}

/**
 * Unpacks and checks the archive: a newer format, a missing or altered entry,
 * an entry the manifest does not list, or one outside a backup's layout (a
 * file for DATA_DIR's database folder, its master key or its control socket,
 * a path outside DATA_DIR) is refused.
 */
const unpack = (from: string, into: string, report: Report): Promise<Manifest> =>
  unpackChecked<Manifest>(
    from,
    into,
    'a backup archive',
    (manifest) => {
      if ('kind' in manifest && manifest.kind === 'tenant') throw new OperatorError(`${from} is a tenant export: add it with rpc-service tenant import`);
      if (!manifest.database) throw new OperatorError(`${from} names no database in its manifest: it is not a backup archive`);
      if (typeof manifest.format !== 'number' || manifest.format > BACKUP_FORMAT) {
        throw new OperatorError(
          `${from} is backup format ${manifest.format}, newer than this version reads (${BACKUP_FORMAT}): restore it with rpc-service ${manifest.serviceVersion} or later`,
        );
      }
      const misplaced = Array.isArray(manifest.entries) ? misplacedEntry(manifest.entries) : undefined;
      if (misplaced !== undefined) throw new OperatorError(`${from} lists ${JSON.stringify(misplaced)}, which is no place in a backup: it was altered`);
      const database = `database/${manifest.database.kind === 'pglite' ? 'embedded.tar.gz' : 'postgresql.dump'}`;
      const needed = [database, ...(manifest.masterKey === 'included' ? ['keys/master.key'] : [])];
      const lacking = needed.find((name) => !manifest.entries?.some((entry) => entry.path === name));
      if (lacking) throw new OperatorError(`${from} lists no ${lacking}: it is not a whole backup archive`);
    },
    report,
  );

/**
 * The migrations the restored database lacks (the code is newer than the
 * backup's, or loads a plugin it did not), applied one by one under the
 * migration lock so a progress bar can count them. Without any, the database
 * is not opened here: the service's start-up finds none either.
 */
async function migrate(config: Config, plugins: readonly Plugin[], applied: readonly string[], report: Report): Promise<number> {
  const done = new Set(applied);
  const pending = migrationsOf(plugins).filter((migration) => !done.has(migration.name));
  if (pending.length === 0) return 0;
  report({ label: 'migrations', done: 0, total: pending.length, unit: 'items' });
  const db = await openDatabase({
    databaseUrl: config.databaseUrl,
    directUrl: config.databaseDirectUrl,
    dataDir: config.dataDir,
    entities: coreEntities,
    migrations: [],
    logger: createLogger(config.logLevel, pino.destination(2)),
  });
  try {
    await db.withSchemaLock(async () => {
      for (const [index, migration] of pending.entries()) {
        await applyMigrations(db.forkEm(null), [migration]);
        report({ label: 'migrations', done: index + 1, total: pending.length, unit: 'items' });
      }
    });
  } finally {
    await db.close();
  }
  return pending.length;
}

/** Whether the target already holds an installation: any table in PostgreSQL, or a database or files in DATA_DIR. */
async function targetInUse(config: Config): Promise<boolean> {
  if (dataFiles(config.dataDir).length > 0) return true;
  if (!config.databaseUrl) return hasEmbeddedDatabase(config.dataDir);
  const [{ tables }] = await query<{ tables: number }>(config, "select count(*)::int as tables from pg_tables where schemaname = 'public'");
  return tables > 0;
}

/** Statements on the target's PostgreSQL, on a session of their own; the rows of the last. */
async function query<T>(config: Config, ...statements: string[]): Promise<T[]> {
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: sessionDatabaseUrl(config) });
  await client.connect();
  try {
    let rows: T[] = [];
    for (const statement of statements) rows = (await client.query(statement)).rows as T[];
    return rows;
  } finally {
    await client.end();
  }
}

/**
 * Before pg_restore --clean: it drops a partition's constraints one by one,
 * which PostgreSQL refuses for those a partition inherits, so partitioned
 * tables (the job queue's) are dropped first, with their partitions.
 */
async function dropPartitionedTables(config: Config): Promise<void> {
  const drops = await query<{ drop: string }>(
    config,
    `select format('drop table if exists %I.%I cascade', n.nspname, c.relname) as drop
      from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.relkind = 'p' and not c.relispartition`,
  );
  if (drops.length > 0) await query(config, ...drops.map((row) => row.drop));
}

/**
 * `restore`: the archive checked whole, and the target against it (database
 * kind, master key, plugins, empty unless `force`), before anything is
 * written; then the database, the files and the master key put in place, and
 * the migrations the backup lacks applied. Runs only with the service
 * stopped; the caller then opens the app once (core/cli/cli.ts).
 */
export async function restore(config: Config, { from, force = false, allowMissingPlugins = false }: RestoreArgs, report: Report): Promise<RestoreResult> {
  const plugins = await loadPlugins({ config });
  // A refused restore leaves no DATA_DIR it made behind: `made` is the first folder mkdir created, if any.
  const made = await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const staging = await mkdtemp(path.join(config.dataDir, '.restore-'));
  let restored = false;
  try {
    const manifest = await unpack(from, staging, report);
    const kind = config.databaseUrl ? 'postgresql' : 'pglite';
    if (manifest.database.kind !== kind) {
      throw new OperatorError(
        `${from} is a backup of ${manifest.database.kind === 'pglite' ? 'the embedded database' : 'PostgreSQL'}; this installation uses ${kind === 'pglite' ? 'the embedded database' : 'PostgreSQL'} (DATABASE_URL)`,
      );
    }
    if (manifest.masterKey === 'environment' && !config.masterKey)
      throw new OperatorError(`${from} was made with MASTER_KEY: set the same MASTER_KEY to restore it`);
    if (manifest.masterKey === 'left out' && !config.masterKey && !existsSync(masterKeyFile(config))) {
      throw new OperatorError(
        `${from} holds no master key (it was made with --without-master-key): put the installation's master.key into ${config.dataDir} first`,
      );
    }
    const loaded = new Set(plugins.map((plugin) => plugin.id));
    const unloaded = manifest.plugins.map((plugin) => (typeof plugin === 'string' ? { id: plugin } : plugin)).filter(({ id }) => !loaded.has(id));
    if (unloaded.length > 0 && !allowMissingPlugins) {
      throw new OperatorError(
        `${from} holds the data of plugins this installation does not load: ${namePlugins(unloaded)}. Install them and name them in PLUGINS, ` +
          'as where the backup was made; or give --allow-missing-plugins to restore their data unused',
      );
    }
    if (!force && (await targetInUse(config))) {
      throw new OperatorError(
        `the target already holds an installation (DATA_DIR ${config.dataDir}${config.databaseUrl ? ' or the database' : ''}): restore into an empty one, or give --force to replace it`,
      );
    }

    if (kind === 'pglite') {
      report({ label: 'database', done: 0, total: 1, unit: 'items' });
      const folder = embeddedDatabaseDir(config.dataDir);
      await rm(folder, { recursive: true, force: true });
      await mkdir(folder, { recursive: true, mode: 0o700 });
      const dump = new Blob([new Uint8Array(await readFile(path.join(staging, 'database/embedded.tar.gz')))]);
      const pglite = new PGlite({ dataDir: folder, extensions: { vector }, startParams: PGLITE_START_PARAMS, loadDataDir: dump });
      await pglite.waitReady;
      await pglite.close();
      report({ label: 'database', done: 1, total: 1, unit: 'items' });
    } else {
      // A table at a time, as pg_restore --verbose says it restores one's rows (archives of the first releases do not say how many).
      const tables = manifest.database.tables ?? 0;
      let done = 0;
      report({ label: 'database', done: 0, total: tables, unit: 'items' });
      if (force) await dropPartitionedTables(config);
      const clean = force ? ['--clean', '--if-exists'] : [];
      await runTool(
        'pg_restore',
        [
          '--no-owner',
          '--no-privileges',
          '--exit-on-error',
          '--verbose',
          ...clean,
          `--dbname=${sessionDatabaseUrl(config)}`,
          path.join(staging, 'database/postgresql.dump'),
        ],
        (line) => {
          if (line.includes('processing data for table')) report({ label: 'database', done: ++done, total: Math.max(tables, done), unit: 'items' });
        },
      );
    }

    const data = manifest.entries.filter((entry) => entry.path.startsWith('data/'));
    const total = data.reduce((sum, entry) => sum + entry.size, 0);
    let done = 0;
    if (force) for (const file of dataFiles(config.dataDir)) await rm(path.join(config.dataDir, file), { force: true });
    for (const entry of data) {
      const target = inside(config.dataDir, entry.path.slice('data/'.length));
      await mkdir(path.dirname(target), { recursive: true, mode: 0o700 });
      await copyFile(path.join(staging, entry.path), target);
      done += entry.size;
      report({ label: 'files', done, total, unit: 'bytes' });
    }
    if (manifest.masterKey === 'included' && !config.masterKey) {
      await copyFile(path.join(staging, 'keys/master.key'), masterKeyFile(config));
      await chmod(masterKeyFile(config), 0o600);
    }
    restored = true;
    return { manifest, unloaded, migrated: await migrate(config, plugins, manifest.database.migrations, report) };
  } finally {
    await rm(staging, { recursive: true, force: true });
    if (!restored && made) await rm(made, { recursive: true, force: true });
  }
}
