import { spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite/vector';
import { embeddedDatabaseDir, hasEmbeddedDatabase, sessionDatabaseUrl, type Config } from '../config.ts';
import { masterKeyFile } from '../credentials/master-key.ts';
import { PGLITE_START_PARAMS } from '../db/pglite.ts';
import { CORE_VERSION } from '../version.ts';
import { appliedMigrations, filesUnder, Staging, unpackChecked, type ArchiveManifest } from './archive.ts';
import { OperatorError, type OperatorCommand, type Report } from './command.ts';

/**
 * `rpc-service backup` and `restore` (docs/decisions.md, "Backup and
 * restore"). An archive is a gzipped tar of:
 *   manifest.json        format, versions, migrations, and each entry's size and SHA-256
 *   database/embedded.tar.gz   the embedded database (PGlite's own dump), or
 *   database/postgresql.dump   pg_dump's custom format
 *   data/...             DATA_DIR but the database and the control socket: uploads, checkpoint scopes, plugins' folders
 *   keys/master.key      the embedded installation's master key, unless left out
 */
export const BACKUP_FORMAT = 1;

export interface Manifest extends ArchiveManifest {
  createdAt: string;
  database: { kind: 'pglite' | 'postgresql'; serverVersion: string; migrations: string[] };
  plugins: string[];
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

/** Runs a client program of PostgreSQL; its stderr becomes the error. */
function runTool(command: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'], env });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'ENOENT'
          ? new OperatorError(`${command} is not on PATH: install PostgreSQL's client programs (Debian: postgresql-client), as new as the server`)
          : error,
      ),
    );
    child.once('close', (code) => (code === 0 ? resolve() : reject(new OperatorError(`${command} failed: ${stderr.trim().split('\n').at(-1)}`))));
  });
}

/** `backup`: the database first, then the files, so every file the database names is in the archive (files only ever arrive before their record). */
export const backup: OperatorCommand<BackupArgs, BackupResult> = {
  async run(app, { out, withoutMasterKey = false }, report) {
    const { config, deps } = app;
    if (existsSync(out)) throw new OperatorError(`${out} exists: give a new file`);
    const staging = await Staging.open(out);
    try {
      await mkdir(staging.path('database'));
      report({ label: 'database', done: 0, unit: 'items' });
      const [{ version }] = await deps.db.execute<{ version: string }>('show server_version');
      const migrations = await appliedMigrations(deps.db);
      const embedded = deps.db.dumpEmbedded();
      if (embedded) {
        await writeFile(staging.path('database/embedded.tar.gz'), new Uint8Array(await (await embedded).arrayBuffer()));
        await staging.add('database/embedded.tar.gz');
      } else {
        await runTool('pg_dump', [
          '--format=custom',
          '--no-owner',
          '--no-privileges',
          `--file=${staging.path('database/postgresql.dump')}`,
          sessionDatabaseUrl(config)!,
        ]);
        await staging.add('database/postgresql.dump');
      }
      report({ label: 'database', done: 1, total: 1, unit: 'items' });

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
        database: { kind: deps.db.kind, serverVersion: version, migrations },
        plugins: app.plugins.map((plugin) => plugin.id),
        masterKey,
        entries: staging.entries,
      };
      await staging.pack(out, manifest);
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
}

/** Unpacks and checks the archive: a newer format, a missing or altered entry, or an entry the manifest does not list is refused. */
const unpack = (from: string, into: string): Promise<Manifest> =>
  unpackChecked<Manifest>(from, into, 'a backup archive', (manifest) => {
    if ('kind' in manifest && manifest.kind === 'tenant') throw new OperatorError(`${from} is a tenant export: add it with rpc-service tenant import`);
    if (!manifest.database) throw new OperatorError(`${from} names no database in its manifest: it is not a backup archive`);
    if (typeof manifest.format !== 'number' || manifest.format > BACKUP_FORMAT) {
      throw new OperatorError(
        `${from} is backup format ${manifest.format}, newer than this version reads (${BACKUP_FORMAT}): restore it with rpc-service ${manifest.serviceVersion} or later`,
      );
    }
  });

/** Whether the target already holds an installation: any table in PostgreSQL, or a database or files in DATA_DIR. */
async function targetInUse(config: Config): Promise<boolean> {
  if (dataFiles(config.dataDir).length > 0) return true;
  if (!config.databaseUrl) return hasEmbeddedDatabase(config.dataDir);
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: sessionDatabaseUrl(config) });
  await client.connect();
  try {
    const { rows } = await client.query("select count(*)::int as tables from pg_tables where schemaname = 'public'");
    return (rows[0] as { tables: number }).tables > 0;
  } finally {
    await client.end();
  }
}

/**
 * `restore`: the archive checked whole before anything is written, then the
 * database, the files and the master key put in place. Runs only with the
 * service stopped; the caller then migrates (core/cli.ts opens the app once).
 */
export async function restore(config: Config, { from, force = false }: RestoreArgs, report: Report): Promise<Manifest> {
  // A refused restore leaves no DATA_DIR it made behind: `made` is the first folder mkdir created, if any.
  const made = await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const staging = await mkdtemp(path.join(config.dataDir, '.restore-'));
  let restored = false;
  try {
    report({ label: 'checking the archive', done: 0, unit: 'items' });
    const manifest = await unpack(from, staging);
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
    if (!force && (await targetInUse(config))) {
      throw new OperatorError(
        `the target already holds an installation (DATA_DIR ${config.dataDir}${config.databaseUrl ? ' or the database' : ''}): restore into an empty one, or give --force to replace it`,
      );
    }

    report({ label: 'database', done: 0, total: 1, unit: 'items' });
    if (kind === 'pglite') {
      const folder = embeddedDatabaseDir(config.dataDir);
      await rm(folder, { recursive: true, force: true });
      await mkdir(folder, { recursive: true, mode: 0o700 });
      const dump = new Blob([new Uint8Array(await readFile(path.join(staging, 'database/embedded.tar.gz')))]);
      const pglite = new PGlite({ dataDir: folder, extensions: { vector }, startParams: PGLITE_START_PARAMS, loadDataDir: dump });
      await pglite.waitReady;
      await pglite.close();
    } else {
      const clean = force ? ['--clean', '--if-exists'] : [];
      await runTool('pg_restore', [
        '--no-owner',
        '--no-privileges',
        '--exit-on-error',
        ...clean,
        `--dbname=${sessionDatabaseUrl(config)}`,
        path.join(staging, 'database/postgresql.dump'),
      ]);
    }
    report({ label: 'database', done: 1, total: 1, unit: 'items' });

    const data = manifest.entries.filter((entry) => entry.path.startsWith('data/'));
    const total = data.reduce((sum, entry) => sum + entry.size, 0);
    let done = 0;
    if (force) for (const file of dataFiles(config.dataDir)) await rm(path.join(config.dataDir, file), { force: true });
    for (const entry of data) {
      const target = path.join(config.dataDir, entry.path.slice('data/'.length));
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
    return manifest;
  } finally {
    await rm(staging, { recursive: true, force: true });
    if (!restored && made) await rm(made, { recursive: true, force: true });
  }
}
