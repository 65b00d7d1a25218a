import { existsSync, lstatSync, statSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, hasEmbeddedDatabase, loadConfig, writableByOthers, type Config } from '../base/config.ts';
import { Keyring } from '../credentials/keyring.ts';
import { masterKeyFile, resolveMasterKeys } from '../credentials/master-key.ts';
import type { Database, DatabaseKind } from '../db/orm.ts';
import { createLogger } from '../base/logger.ts';
import { formatBytes } from './progress.ts';
import type { OperatorCommand } from './command.ts';
import { appliedMigrations } from './archive.ts';
import { clientProgramsAdvice, clientVersion } from './backup.ts';
import { controlSocketPath } from './control.ts';

/**
 * `rpc-service doctor`: what is wrong with an installation and what to do
 * about it, one check a line. The checks of the settings, the master key's
 * file and the disk run in the command's process; those that need the
 * database are the operator command `doctor`, so they run in the serving
 * process when one serves the embedded database (core/operator/control.ts).
 */

export type CheckStatus = 'ok' | 'warn' | 'fail';

export interface Check {
  name: string;
  status: CheckStatus;
  /** What was found, and for a warning or a failure what to do. */
  message: string;
}

/** Past this difference from the database server's clock, tokens, schedules and job delays drift: a warning. */
const CLOCK_SKEW_WARN_MS = 5_000;
/** Free space of DATA_DIR's file system below which the database and uploads soon fail to write. */
const DISK_FAIL_BYTES = 256 * 1024 ** 2;
const DISK_WARN_BYTES = 2 * 1024 ** 3;
const DISK_WARN_SHARE = 0.1;
/** The oldest PostgreSQL server this version supports: no older one is tested (docs/operations.md, "doctor"). */
export const OLDEST_POSTGRESQL = 14;
/** Subscriptions whose data keys are opened in one statement's page. */
const DATA_KEY_PAGE = 500;

export interface DoctorArgs {
  /** The migrations the installed code has, `<owner>:<name>`: those of a serving process that was not restarted after an upgrade may be fewer. */
  known: string[];
}

/** The database checks: its version, pgvector, migrations, its clock against this process's, and the master key against every data key. */
export const doctor: OperatorCommand<DoctorArgs, Check[]> = {
  async run(app, { known }, report) {
    const { db } = app.deps;
    const checks: Check[] = [];
    const [{ version, number }] = await db.execute<{ version: string; number: number }>(
      "select current_setting('server_version') as version, current_setting('server_version_num')::int as number",
    );
    checks.push(databaseCheck(db.kind, version, number));
    // pg_dump and pg_restore run where the command runs: here, in the serving process when one answers.
    if (db.kind === 'postgresql') checks.push(await backupToolsCheck(Math.floor(number / 10_000)));

    const [vector] = await db.execute<{ extversion: string }>("select extversion from pg_extension where extname = 'vector'");
    checks.push(
      vector
        ? { name: 'pgvector', status: 'ok', message: `version ${vector.extversion}` }
        : {
            name: 'pgvector',
            status: 'fail',
            message:
              "the vector extension is not installed: install pgvector on the database server (Debian: postgresql-<major>-pgvector), then run 'create extension vector' as a superuser",
          },
    );

    checks.push(migrationsCheck(new Set(await appliedMigrations(db)), known));

    const before = Date.now();
    const [{ now }] = await db.execute<{ now: Date | string }>('select now() as now');
    const skew = new Date(now).getTime() - (before + Date.now()) / 2;
    checks.push(
      Math.abs(skew) > CLOCK_SKEW_WARN_MS
        ? {
            name: 'clock',
            status: 'warn',
            message: `this host's clock is ${(Math.abs(skew) / 1000).toFixed(1)} s ${skew > 0 ? 'behind' : 'ahead of'} the database server's: run NTP (chrony, systemd-timesyncd) on both`,
          }
        : { name: 'clock', status: 'ok', message: `within ${Math.ceil(Math.abs(skew))} ms of the database server's` },
    );

    checks.push(await dataKeysCheck(app.config, app.deps.db, (done, total) => report({ label: 'data keys', done, total, unit: 'items' })));
    return checks;
  },
};

/** The server's version, from `server_version` and `server_version_num` (170002 for 17.2): one older than OLDEST_POSTGRESQL fails. */
export function databaseCheck(kind: DatabaseKind, version: string, number: number): Check {
  const found = `${kind === 'pglite' ? 'embedded (PGlite), PostgreSQL' : 'PostgreSQL'} ${version}`;
  if (Math.floor(number / 10_000) < OLDEST_POSTGRESQL) {
    return { name: 'database', status: 'fail', message: `${found} is older than ${OLDEST_POSTGRESQL}, the oldest this version supports: upgrade the server` };
  }
  return { name: 'database', status: 'ok', message: `${found}, reachable` };
}

/**
 * pg_dump and pg_restore, which backup and restore run on PostgreSQL: on
 * PATH, and of the server's major version or newer (pg_dump refuses a newer
 * server). A warning: the service runs without them.
 */
async function backupToolsCheck(serverMajor: number): Promise<Check> {
  const found = await Promise.all(
    (['pg_dump', 'pg_restore'] as const).map(async (tool) => ({
      tool,
      version: await clientVersion(tool).catch((error: Error) => error),
    })),
  );
  const problems = found.flatMap(({ tool, version }) => {
    if (version === undefined) return [`${tool} is not on PATH`];
    if (version instanceof Error) return [`${tool} --version failed (${version.message})`];
    return Number.parseInt(version, 10) < serverMajor ? [`${tool} ${version} is older than the server`] : [];
  });
  if (problems.length > 0) {
    return {
      name: 'backup tools',
      status: 'warn',
      message: `${problems.join(', ')}: ${clientProgramsAdvice(serverMajor)}, for rpc-service backup and restore`,
    };
  }
  return { name: 'backup tools', status: 'ok', message: found.map(({ tool, version }) => `${tool} ${String(version)}`).join(', ') };
}

function migrationsCheck(applied: Set<string>, known: readonly string[]): Check {
  const pending = known.filter((name) => !applied.has(name));
  const knownSet = new Set(known);
  const unknown = [...applied].filter((name) => !knownSet.has(name));
  const some = (names: string[]) => `${names.slice(0, 3).join(', ')}${names.length > 3 ? `, and ${names.length - 3} more` : ''}`;
  if (pending.length > 0) {
    return {
      name: 'migrations',
      status: 'warn',
      message: `${pending.length} not applied (${some(pending)}): restart the service, which applies them as it starts`,
    };
  }
  if (unknown.length > 0) {
    return {
      name: 'migrations',
      status: 'warn',
      message: `the database has ${unknown.length} this installation does not know (${some(unknown)}): a newer version or another plugin (PLUGINS) used it`,
    };
  }
  return { name: 'migrations', status: 'ok', message: `all ${known.length} applied` };
}

/**
 * Whether the master key opens every subscription's data key, with a keyring
 * of its own, so the key checked is the one in the settings or the file now,
 * not one a serving process read when it started. Read-only: the keyring's
 * seal opens a subscription's data key that exists and makes one only for a
 * subscription that has none, and only subscriptions with one are asked.
 */
async function dataKeysCheck(config: Config, db: Database, progress: (done: number, total: number) => void): Promise<Check> {
  const fix = 'set MASTER_KEY (or put back DATA_DIR/master.key) as it was when the data keys were made, or list the old key in MASTER_KEY_PREVIOUS';
  // The key file removed under a serving process: a finding, said in this check's words.
  if (!config.masterKey && !existsSync(masterKeyFile(config))) return { name: 'data keys', status: 'fail', message: `there is no master key: ${fix}` };
  const keyring = new Keyring({ db, keys: resolveMasterKeys(config, createLogger('silent')) });
  const [{ total }] = await db.execute<{ total: number }>('select count(*)::int as total from core_data_key');
  let done = 0;
  let failed = 0;
  let firstError: string | undefined;
  for (let after = ''; ;) {
    const rows = await db.execute<{ subscription_id: string }>(
      'select subscription_id from core_data_key where subscription_id::text > ? order by subscription_id::text limit ?',
      [after, DATA_KEY_PAGE],
    );
    if (rows.length === 0) break;
    for (const { subscription_id: subscriptionId } of rows) {
      await keyring.seal(subscriptionId, '').catch((error: Error) => {
        failed += 1;
        firstError ??= error.message;
      });
      progress(++done, Math.max(total, done));
    }
    after = rows.at(-1)!.subscription_id;
  }
  if (failed > 0) return { name: 'data keys', status: 'fail', message: `the master key opens ${done - failed} of ${done} data keys (${firstError}): ${fix}` };
  const opened = done === 0 ? 'has no data key to open yet' : done === 1 ? 'opens the one data key' : `opens all ${done} data keys`;
  return { name: 'data keys', status: 'ok', message: `the master key (id ${keyring.masterKeyId}) ${opened}` };
}

/** The settings, read as the service reads them; a bad one is a failed check, not a stack. */
export function configCheck(environment: NodeJS.ProcessEnv): { check: Check; config?: Config } {
  try {
    const config = loadConfig(environment);
    const where = config.databaseUrl ? `PostgreSQL at ${new URL(config.databaseUrl).host}` : 'the embedded database';
    return { config, check: { name: 'configuration', status: 'ok', message: `DATA_DIR ${config.dataDir}, ${where}` } };
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return { check: { name: 'configuration', status: 'fail', message: `${error.message} (fix the setting in the environment or .env)` } };
  }
}

/**
 * Whether there is an installation and its master key reads, before anything
 * opens it. `open` is false when opening it would do harm: a DATA_DIR that
 * holds no embedded database would be given a new one (a mistyped path), and
 * an embedded database without its key file cannot be read.
 */
export function masterKeyCheck(config: Config): { check: Check; open: boolean } {
  const name = 'master key';
  const file = masterKeyFile(config);
  if (!config.databaseUrl && !hasEmbeddedDatabase(config.dataDir)) {
    const message = `DATA_DIR ${config.dataDir} holds no embedded database: check DATA_DIR (the service makes one where it first starts). Database checks skipped`;
    return { open: false, check: { name: 'installation', status: 'fail', message } };
  }
  try {
    const keys = resolveMasterKeys(config, createLogger('silent'));
    const source = config.masterKey ? 'MASTER_KEY' : file;
    const previous = keys.previous.length > 0 ? `, ${keys.previous.length} previous still accepted (finish the rotation: rpc-service rotate-master-key)` : '';
    if (!config.masterKey && (statSync(file).mode & 0o077) !== 0) {
      return { open: true, check: { name, status: 'warn', message: `${file} can be read by other users: chmod 600 ${file}` } };
    }
    return { open: true, check: { name, status: previous ? 'warn' : 'ok', message: `${source} (id ${keys.current.id})${previous}` } };
  } catch (error) {
    return { open: false, check: { name, status: 'fail', message: `${(error as Error).message}. Database checks skipped` } };
  }
}

/**
 * That no other user may write DATA_DIR, nor owns its control socket: either
 * would let them replace the socket and read what operator commands send
 * (core/operator/control.ts refuses to use it then, the service to start).
 */
export function dataDirCheck(dataDir: string): Check {
  const name = 'DATA_DIR';
  if (!existsSync(dataDir)) return { name, status: 'ok', message: `${dataDir} does not exist yet: the service makes it, private to its user (mode 0700)` };
  const open = writableByOthers(dataDir);
  if (open) return { name, status: 'fail', message: open };
  const socket = controlSocketPath(dataDir);
  const owner = existsSync(socket) ? lstatSync(socket).uid : undefined;
  const me = process.getuid?.();
  if (owner !== undefined && me !== undefined && owner !== me && owner !== 0) {
    return { name, status: 'fail', message: `${socket} belongs to uid ${owner}, not to this user (uid ${me}): another user may have put it there; remove it` };
  }
  const mode = (statSync(dataDir).mode & 0o777).toString(8);
  return { name, status: 'ok', message: `${dataDir}: no other user may write it (mode ${mode})` };
}

/** Free space of the file system DATA_DIR is on (or will be: its nearest existing parent). */
export async function diskCheck(dataDir: string): Promise<Check> {
  let folder = dataDir;
  while (!existsSync(folder)) folder = path.dirname(folder);
  const { bavail, blocks, bsize } = await statfs(folder);
  const free = bavail * bsize;
  const share = blocks > 0 ? bavail / blocks : 1;
  const found = `${formatBytes(free)} free (${Math.floor(share * 100)}%) on DATA_DIR's file system`;
  if (free < DISK_FAIL_BYTES) return { name: 'disk', status: 'fail', message: `${found}: free some space or move DATA_DIR to a larger disk now` };
  if (free < DISK_WARN_BYTES || share < DISK_WARN_SHARE) return { name: 'disk', status: 'warn', message: `${found}: free some space soon` };
  return { name: 'disk', status: 'ok', message: found };
}

/** One line a check: `ok   name  message`. */
export const formatCheck = ({ name, status, message }: Check): string => `${status.padEnd(4)}  ${name.padEnd(13)}  ${message}`;
