import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, readdirSync, statSync, type Dirent } from 'node:fs';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite/vector';
import * as tar from 'tar';
import type { App } from '../app.ts';
import type { Config } from '../config.ts';
import { masterKeyFile } from '../credentials/master-key.ts';
import { MIGRATIONS_TABLE } from '../db/migration.ts';
import { PGLITE_START_PARAMS } from '../db/pglite.ts';
import { CORE_VERSION } from '../version.ts';
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

export interface Manifest {
  format: number;
  createdAt: string;
  serviceVersion: string;
  database: { kind: 'pglite' | 'postgresql'; serverVersion: string; migrations: string[] };
  plugins: string[];
  /** `included` (keys/master.key), `left out` (restore needs the installation's master.key), or `environment` (restore needs MASTER_KEY). */
  masterKey: 'included' | 'left out' | 'environment';
  entries: { path: string; size: number; sha256: string }[];
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

/** Files and folders by their path under `root`, a git repository's `objects` after everything else beside it (see copyTree). */
function walk(root: string, relative = ''): string[] {
  const here = path.join(root, relative);
  if (!existsSync(here)) return [];
  const entries = readdirSync(here, { withFileTypes: true }).sort((a: Dirent, b: Dirent) => order(a) - order(b) || a.name.localeCompare(b.name));
  return entries.flatMap((entry) => {
    const child = path.join(relative, entry.name);
    // A restore's staging folder (`.restore-*`) and any other hidden entry at the top are not the installation's data.
    if (relative === '' && (NOT_DATA.has(entry.name) || entry.name.startsWith('.'))) return [];
    if (entry.isDirectory()) return walk(root, child);
    // An upload still arriving (uploads/storage.ts writes `.part` first) is not kept data yet.
    return entry.isFile() && !entry.name.endsWith('.part') ? [child] : [];
  });
}

const order = (entry: Dirent): number => (entry.isDirectory() && entry.name === 'objects' ? 1 : 0);

async function sha256(file: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(file), hash);
  return hash.digest('hex');
}

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

async function migrationsApplied(app: App): Promise<string[]> {
  const rows = await app.deps.db.execute<{ name: string }>(`select name from "${MIGRATIONS_TABLE}" order by id`);
  return rows.map((row) => row.name);
}

/** `backup`: the database first, then the files, so every file the database names is in the archive (files only ever arrive before their record). */
export const backup: OperatorCommand<BackupArgs, BackupResult> = {
  async run(app, { out, withoutMasterKey = false }, report) {
    const { config, deps } = app;
    if (existsSync(out)) throw new OperatorError(`${out} exists: give a new file`);
    const staging = await mkdtemp(path.join(path.dirname(out), '.backup-'));
    try {
      const entries: Manifest['entries'] = [];
      const add = async (relative: string) => {
        const file = path.join(staging, relative);
        entries.push({ path: relative, size: statSync(file).size, sha256: await sha256(file) });
      };
      await mkdir(path.join(staging, 'database'));
      report({ label: 'database', done: 0, unit: 'items' });
      const [{ version }] = await deps.db.execute<{ version: string }>('show server_version');
      const migrations = await migrationsApplied(app);
      const embedded = deps.db.dumpEmbedded();
      if (embedded) {
        await writeFile(path.join(staging, 'database/embedded.tar.gz'), new Uint8Array(await (await embedded).arrayBuffer()));
        await add('database/embedded.tar.gz');
      } else {
        await runTool('pg_dump', [
          '--format=custom',
          '--no-owner',
          '--no-privileges',
          `--file=${path.join(staging, 'database/postgresql.dump')}`,
          config.databaseUrl!,
        ]);
        await add('database/postgresql.dump');
      }
      report({ label: 'database', done: 1, total: 1, unit: 'items' });

      const files = walk(config.dataDir);
      const total = files.reduce((sum, file) => sum + statSync(path.join(config.dataDir, file)).size, 0);
      let done = 0;
      for (const file of files) {
        const target = path.join(staging, 'data', file);
        await mkdir(path.dirname(target), { recursive: true });
        // Gone since the walk (a swept upload): nothing to keep.
        const copied = await copyFile(path.join(config.dataDir, file), target).then(
          () => true,
          (error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? false : Promise.reject(error)),
        );
        if (!copied) continue;
        await add(path.join('data', file));
        done += entries.at(-1)!.size;
        report({ label: 'files', done, total, unit: 'bytes' });
      }

      let masterKey: Manifest['masterKey'] = config.masterKey ? 'environment' : withoutMasterKey ? 'left out' : 'included';
      if (masterKey === 'included') {
        if (!existsSync(masterKeyFile(config))) masterKey = 'left out';
        else {
          await mkdir(path.join(staging, 'keys'), { mode: 0o700 });
          await copyFile(masterKeyFile(config), path.join(staging, 'keys/master.key'));
          await add('keys/master.key');
        }
      }
      const manifest: Manifest = {
        format: BACKUP_FORMAT,
        createdAt: new Date().toISOString(),
        serviceVersion: CORE_VERSION,
        database: { kind: deps.db.kind, serverVersion: version, migrations },
        plugins: app.plugins.map((plugin) => plugin.id),
        masterKey,
        entries,
      };
      await writeFile(path.join(staging, 'manifest.json'), JSON.stringify(manifest, null, 2));
      const partial = `${out}.partial`;
      // The archive may hold the master key: only this user reads it.
      await pipeline(
        tar.create({ gzip: true, cwd: staging, portable: true }, ['manifest.json', ...entries.map((entry) => entry.path)]),
        createWriteStream(partial, { mode: 0o600 }),
      );
      await rename(partial, out);
      return { out, bytes: statSync(out).size, entries: entries.length, masterKey };
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
  },
};

export interface RestoreArgs {
  from: string;
  /** Replace what the target holds. */
  force?: boolean;
}

export interface RestoreResult {
  manifest: Manifest;
  /** Migrations applied after the restore, for a backup of an older version. */
  migrated: string[];
}

/** Unpacks and checks the archive: a newer format, a missing or altered entry, or an entry the manifest does not list is refused. */
async function unpack(from: string, into: string): Promise<Manifest> {
  if (!existsSync(from)) throw new OperatorError(`${from} does not exist`);
  await tar.extract({ file: from, cwd: into, strict: true }).catch((error: Error) => {
    throw new OperatorError(`${from} is not a backup archive: ${error.message}`);
  });
  let manifest: Manifest;
  try {
    manifest = JSON.parse(await readFile(path.join(into, 'manifest.json'), 'utf8')) as Manifest;
  } catch {
    throw new OperatorError(`${from} has no readable manifest.json: it is not a backup archive`);
  }
  if (typeof manifest.format !== 'number' || manifest.format > BACKUP_FORMAT) {
    throw new OperatorError(
      `${from} is backup format ${manifest.format}, newer than this version reads (${BACKUP_FORMAT}): restore it with rpc-service ${manifest.serviceVersion} or later`,
    );
  }
  const listed = new Set(manifest.entries.map((entry) => entry.path));
  const present = walk(into).filter((file) => file !== 'manifest.json');
  const unlisted = present.filter((file) => !listed.has(file));
  if (unlisted.length > 0) throw new OperatorError(`${from} holds files its manifest does not list (${unlisted.slice(0, 3).join(', ')}): it was altered`);
  for (const entry of manifest.entries) {
    const file = path.join(into, entry.path);
    if (!existsSync(file) || statSync(file).size !== entry.size || (await sha256(file)) !== entry.sha256) {
      throw new OperatorError(`${from}: ${entry.path} does not match its checksum: the archive is damaged or was altered`);
    }
  }
  return manifest;
}

/** Whether the target already holds an installation: any table in PostgreSQL, or a database or files in DATA_DIR. */
async function targetInUse(config: Config): Promise<boolean> {
  if (walk(config.dataDir).length > 0) return true;
  if (!config.databaseUrl) return existsSync(path.join(config.dataDir, 'db')) && readdirSync(path.join(config.dataDir, 'db')).length > 0;
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: config.databaseUrl });
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
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const staging = await mkdtemp(path.join(config.dataDir, '.restore-'));
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
      const folder = path.join(config.dataDir, 'db');
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
        `--dbname=${config.databaseUrl}`,
        path.join(staging, 'database/postgresql.dump'),
      ]);
    }
    report({ label: 'database', done: 1, total: 1, unit: 'items' });

    const data = manifest.entries.filter((entry) => entry.path.startsWith('data/'));
    const total = data.reduce((sum, entry) => sum + entry.size, 0);
    let done = 0;
    if (force) for (const file of walk(config.dataDir)) await rm(path.join(config.dataDir, file), { force: true });
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
    return manifest;
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}
