/**
 * The `rpc-service` command (bin/rpc-service.js; `npm run cli --` in a clone):
 * the service, the plugin scaffold, migrations, and administration that runs
 * beside (or, for the embedded database, instead of) the service.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { ConfigError, embeddedDatabaseDir, loadConfig, type Config } from '../base/config.ts';
import { Keyring } from '../credentials/keyring.ts';
import { masterKeyFile, prependMasterKeyFile, pruneMasterKeyFile, resolveMasterKeys, type MasterKeys } from '../credentials/master-key.ts';
import { coreEntities } from '../plugin/core-entities.ts';
import { migrations as coreMigrations } from '../db/migrations/index.ts';
import { openDatabase, type Database } from '../db/orm.ts';
import { Command } from 'commander';
import { createLogger } from '../base/logger.ts';
import type { NewPluginOptions } from '../scaffold/new-plugin.ts';
import type { AdminCreateResult } from '../operator/admin.ts';
import type { BackupResult } from '../operator/backup.ts';
import type { TenantExportResult, TenantImportResult } from '../operator/tenant.ts';
import type { Check } from '../operator/doctor.ts';
import type { FilesToDatabaseResult } from '../operator/files.ts';
import type { JobsListResult } from '../operator/jobs.ts';
import { formatBytes, progressBars } from '../operator/progress.ts';
import { serve } from './serve.ts';
import { CORE_VERSION } from '../base/version.ts';

async function rotateMasterKey(config: Config): Promise<string> {
  const logger = createLogger('warn');
  const fromFile = !config.masterKey;
  if (fromFile) {
    if (config.databaseUrl) throw new ConfigError('MASTER_KEY is required with DATABASE_URL');
    const file = masterKeyFile(config);
    if (!existsSync(file)) throw new ConfigError(`${file} does not exist: there is no master key to rotate`);
    // PGlite keeps this file while the database is open; two processes on one embedded database would damage it.
    if (existsSync(path.join(embeddedDatabaseDir(config.dataDir), 'postmaster.pid'))) {
      throw new ConfigError('the embedded database is in use (or was not shut down cleanly): stop the service, or start and stop it once, then run this again');
    }
  }
  const keys: MasterKeys = fromFile ? prependMasterKeyFile(masterKeyFile(config)) : resolveMasterKeys(config, logger);
  const result = await withDatabase(config, logger, (db) => new Keyring({ db, keys }).rewrapAll());
  const summary = `${result.rewrapped} data key(s) wrapped again, ${result.current} already under it`;
  if (fromFile) {
    pruneMasterKeyFile(masterKeyFile(config));
    return `New master key ${keys.current.id} in ${masterKeyFile(config)}: ${summary}. The old key is gone from the file; back the new one up with the data.`;
  }
  return `Every data key is wrapped by master key ${keys.current.id}: ${summary}. Remove MASTER_KEY_PREVIOUS from every node's settings.`;
}

/** The database with the core's tables (migrated, so a database that never ran the keyring's migration has its table). */
async function withDatabase<T>(config: Config, logger: ReturnType<typeof createLogger>, run: (db: Database) => Promise<T>): Promise<T> {
  const db = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    entities: coreEntities,
    migrations: [{ owner: 'core', migrations: coreMigrations }],
    logger,
  });
  try {
    await db.migrate();
    return await run(db);
  } finally {
    await db.close();
  }
}

/**
 * An installation folder keeps its settings in `.env` beside its package.json
 * (docs/operations.md, "As a package"); what the environment already sets wins.
 */
function readEnvFile(file = path.resolve('.env')): void {
  if (!existsSync(file)) return;
  for (const [name, value] of Object.entries(parseEnv(readFileSync(file, 'utf8')))) process.env[name] ??= value;
}

readEnvFile();

const program = new Command('rpc-service')
  .description('The self-hosted application back end: serve it, write a plugin for it, and administer it.')
  .version(CORE_VERSION)
  .showHelpAfterError();

program
  .command('serve', { isDefault: true })
  .description('serve until SIGTERM or SIGINT, with the configuration from the environment (see the README, or --print-config)')
  .option('--print-config', 'list every setting of the core and of each plugin, its default and whether it is set, and exit')
  // A word that names no command comes here as the default command's argument: said as what it is, not as too many arguments.
  .allowExcessArguments()
  .action(({ printConfig }: { printConfig?: boolean }, command: Command) => {
    if (command.args.length > 0) {
      console.error(`Unknown command "${command.args[0]}": rpc-service --help lists the commands.`);
      process.exit(1);
    }
    return serve({ printConfig });
  });

program
  .command('rotate-master-key')
  .description(
    'wrap every data key under a new master key. With MASTER_KEY set: the new key is MASTER_KEY and the old ones are in ' +
      'MASTER_KEY_PREVIOUS (nodes keep serving). Embedded database (no MASTER_KEY): generates the new key into DATA_DIR/master.key; ' +
      'stop the service first.',
  )
  .action(() => report('rotate the master key', () => rotateMasterKey(loadConfig())));

program
  .command('plugin')
  .description('plugin packages')
  .command('new')
  .description('write a new plugin package into <dir>: an operation, an entity with its migration, a setting, a test and a README')
  .argument('<dir>', 'the folder to create (it must not exist or be empty); its name is the package name unless --name')
  .requiredOption('--group <group>', 'the RPC group the plugin owns, e.g. HelloRpc')
  .option('--id <id>', 'the plugin id (kebab-case; tables start with it); derived from the group by default')
  .option('--name <name>', 'the npm package name; the folder name by default')
  .option(
    '--sdk <spec>',
    'where the new package installs rpc-service from for its tests and types, as npm takes it (a version range, a tarball or a folder); this installation by default',
  )
  .action((dir: string, options: NewPluginOptions) =>
    report('write the plugin', async () => (await import('../scaffold/new-plugin.ts')).newPlugin(dir, options)),
  );

program
  .command('migration')
  .description('migrations')
  .command('create')
  .description('write the next migration of the core or of a plugin from its entities, into its migrations/ folder')
  .argument('[owner]', 'core, or a plugin id; the plugin given with --plugin by default')
  .argument('[name]', 'a word for the file name, e.g. add_due_date')
  .option('--plugin <path>', 'a plugin package folder (or npm name) to load beside the built-in plugins and PLUGINS')
  .option('--check', "write nothing; fail when any owner's entities changed without a migration")
  .action((owner: string | undefined, name: string | undefined, options: { plugin?: string; check?: boolean }) =>
    report('make the migration', () => migrationCreate(owner, name, options)),
  );

program
  .command('backup')
  .description(
    'write one archive of everything the installation keeps: the database, uploaded files, checkpoint scopes and plugin folders, and (embedded ' +
      'database, master key in DATA_DIR) the master key. Works while the service runs: it takes the snapshot when asked on its control socket.',
  )
  .requiredOption('--out <file>', 'the archive to write (.tar.gz); it must not exist')
  .option('--without-master-key', "leave the master key out of the archive: a restore then needs the installation's master.key beside it")
  .action(({ out, withoutMasterKey }: { out: string; withoutMasterKey?: boolean }) =>
    report('back up', async () => {
      const result = (await operate('backup', { out: path.resolve(out), withoutMasterKey: withoutMasterKey ?? false })) as BackupResult;
      const key = {
        included: 'It holds the master key: keep it as safe as the key itself.',
        'left out':
          `It holds no master key: a restore needs this installation's ${masterKeyFile(operatorConfig())} in the target's DATA_DIR first ` +
          '(keep it apart from the archive).',
        environment: 'It holds no master key: a restore needs the same MASTER_KEY.',
      }[result.masterKey];
      return `Wrote ${result.out} (${formatBytes(result.bytes)}, ${result.entries} entries). ${key}`;
    }),
  );

program
  .command('restore')
  .description(
    'put a backup archive in place of an empty installation (DATA_DIR, and DATABASE_URL for PostgreSQL), then apply migrations. ' +
      'The service must be stopped. The archive is checked whole first: a newer format, a damaged entry or the data of a plugin not loaded here ' +
      'is refused.',
  )
  .requiredOption('--from <file>', 'the archive rpc-service backup wrote')
  .option('--force', 'replace what the target holds (PostgreSQL: pg_restore --clean)')
  .option('--allow-missing-plugins', 'restore the data of plugins this installation does not load (else refused): kept, unused until they are loaded')
  .action(({ from, force, allowMissingPlugins }: { from: string; force?: boolean; allowMissingPlugins?: boolean }) =>
    report('restore', async () => {
      // Loaded here only, as for every administration command: the service's modules are not needed to write a plugin.
      const [{ refuseWhileServed }, { restore }, { createApp }] = await Promise.all([
        import('../operator/control.ts'),
        import('../operator/backup.ts'),
        import('../app/app.ts'),
      ]);
      const config = operatorConfig();
      await refuseWhileServed(config);
      const { namePlugins } = await import('../operator/plugins.ts');
      const bars = progressBars();
      let restored;
      try {
        restored = await restore(config, { from: path.resolve(from), force, allowMissingPlugins }, bars.report);
      } finally {
        bars.stop();
      }
      // Opening the service once does the start-up work the migrations do not (the job queue's schema) and reads the master key as it will.
      const app = await createApp({ config, background: false });
      await app.close();
      const { manifest, unloaded, migrated } = restored;
      return [
        `Restored the backup of ${manifest.createdAt} (rpc-service ${manifest.serviceVersion}, ${manifest.entries.length} entries) into ${config.dataDir}${config.databaseUrl ? ' and the database' : ''}`,
        migrated > 0 ? `, then applied ${migrated} migration${migrated === 1 ? '' : 's'}.` : '.',
        unloaded.length > 0 ? ` The data of ${namePlugins(unloaded)} is restored but unused: this installation does not load them.` : '',
      ].join('');
    }),
  );

program
  .command('admin')
  .description('subscriptions and their administrators')
  .command('create')
  .description(
    'make a new subscription and its first admin without the HTTP API, whatever SIGNUP_MODE says (the way in when signup is closed). ' +
      'The password is asked for on a terminal, or read from --password-file or a pipe: never from an argument, which shell history and ps show. ' +
      'Works while the service runs.',
  )
  .requiredOption('--email <address>', "the admin's e-mail address")
  .requiredOption('--username <name>', "the admin's username: 3 to 32 letters, digits, dots, dashes or underscores")
  .option('--subscription-name <name>', "the subscription's name; the username by default, as signup names it")
  .option('--password-file <file>', 'read the password from the first line of this file (- for standard input)')
  .action((options: { email: string; username: string; subscriptionName?: string; passwordFile?: string }) =>
    report('create the admin', async () => {
      const { readPassword } = await import('../operator/admin.ts');
      const password = await readPassword(options.passwordFile);
      const { email, username, subscriptionName } = options;
      const result = (await operate('admin create', { email, username, subscriptionName, password })) as AdminCreateResult;
      return `Created subscription ${result.subscriptionId} ("${result.subscriptionName}") and its admin ${username}: user ${result.userId}.`;
    }),
  );

program
  .command('doctor')
  .description(
    'check the installation and say what to fix: the settings, the master key, free space on DATA_DIR, and the database (reachable, version, ' +
      'pg_dump and pg_restore for PostgreSQL, pgvector, migrations, clock, the master key opening every data key). One line a check: ok, warn ' +
      'or fail; exit code 1 when one fails. Works while the service runs.',
  )
  .action(() =>
    report('check the installation', async () => {
      const { configCheck, dataDirCheck, diskCheck, formatCheck, masterKeyCheck } = await import('../operator/doctor.ts');
      const { check, config } = configCheck({ ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' });
      const checks = [check];
      if (config) {
        const key = masterKeyCheck(config);
        checks.push(dataDirCheck(config.dataDir), key.check, await diskCheck(config.dataDir));
        if (key.open) checks.push(...(await databaseChecks(config)));
      }
      const failed = checks.filter((one) => one.status === 'fail').length;
      const warned = checks.filter((one) => one.status === 'warn').length;
      if (failed > 0) process.exitCode = 1;
      const summary = failed + warned === 0 ? 'Everything checked is in order.' : `${failed} failed, ${warned} to look at: do what those lines say.`;
      return [...checks.map(formatCheck), summary].join('\n');
    }),
  );

/** The doctor's checks of the database, run where the database is open (a serving process, else here); a database that does not open is a failed check. */
async function databaseChecks(config: Config): Promise<Check[]> {
  let known: string[];
  try {
    const [{ loadPlugins }, { migrationsOf }] = await Promise.all([import('../app/app.ts'), import('../operator/archive.ts')]);
    known = migrationsOf(await loadPlugins({ config })).map((migration) => migration.name);
  } catch (error) {
    return [{ name: 'plugins', status: 'fail', message: `${(error as Error).message} (fix PLUGINS or the plugin)` }];
  }
  try {
    return (await operate('doctor', { known })) as Check[];
  } catch (error) {
    const { message } = error as Error;
    // That one says what to install; any other failure to open is the address or the server.
    if (message.includes('pgvector')) return [{ name: 'pgvector', status: 'fail', message }];
    return [{ name: 'database', status: 'fail', message: `${message}: check DATABASE_URL and that the database server runs` }];
  }
}

const jobs = program.command('jobs').description('the job queue of every subscription: its states, and the jobs that failed for good ("dead")');

jobs
  .command('list')
  .description('jobs per queue and state, and the dead jobs that failed last: id, queue, when and the error (never their data). Works while the service runs.')
  .option('--queue <queue>', 'only this queue (<plugin id>.<job name>)')
  .option('--limit <count>', 'how many dead jobs to show', '20')
  .action(({ queue, limit }: { queue?: string; limit: string }) =>
    report('list the jobs', async () => formatJobs((await operate('jobs list', { queue, limit: Number(limit) })) as JobsListResult)),
  );

jobs
  .command('retry')
  .description('put dead jobs back in their queue, with one more attempt: one by id, or every one. Works while the service runs.')
  .argument('[id]', "a dead job's id (jobs list shows them)")
  .option('--all-failed', 'every dead job')
  .option('--queue <queue>', "with --all-failed: only this queue's")
  .action((id: string | undefined, { allFailed, queue }: { allFailed?: boolean; queue?: string }) =>
    report('retry', async () => {
      const { retried } = (await operate('jobs retry', { id, allFailed, queue })) as { retried: number };
      return `Put ${retried} dead job${retried === 1 ? '' : 's'} back in the queue.`;
    }),
  );

jobs
  .command('purge')
  .description('delete finished jobs, dead or done, from the queue and its archive. Works while the service runs.')
  .option('--failed', 'the dead jobs')
  .option('--completed', 'the jobs that succeeded')
  .option('--older-than <age>', 'only those that finished longer ago: 30m, 12h, 7d')
  .option('--queue <queue>', 'only this queue')
  .action(({ failed, completed, olderThan, queue }: { failed?: boolean; completed?: boolean; olderThan?: string; queue?: string }) =>
    report('purge the jobs', async () => {
      if (failed === completed) throw new Error('give --failed or --completed (one of them)');
      const state = failed ? 'failed' : 'completed';
      const { deleted } = (await operate('jobs purge', { state, olderThan, queue })) as { deleted: number };
      return `Deleted ${deleted} ${state === 'failed' ? 'dead' : 'done'} job${deleted === 1 ? '' : 's'}${olderThan ? ` older than ${olderThan}` : ''}${queue ? ` of ${queue}` : ''}.`;
    }),
  );

const tenant = program.command('tenant').description("one subscription's records and files, to move it to another installation");

tenant
  .command('export')
  .description(
    "write one subscription's records from every plugin (NDJSON) and its files into an archive, and the transfer key that opens its secrets " +
      'beside it (<out>.key): keep the two apart. Works while the service runs.',
  )
  .requiredOption('--subscription <id>', "the subscription's id")
  .requiredOption('--out <file>', 'the archive to write (.tar.gz); it and <file>.key must not exist')
  .action(({ subscription, out }: { subscription: string; out: string }) =>
    report('export the tenant', async () => {
      const result = (await operate('tenant export', { subscriptionId: subscription, out: path.resolve(out) })) as TenantExportResult;
      return `Wrote ${result.out} (${result.rows} records from ${result.tables} tables, ${result.files} files) and its transfer key ${result.keyFile}.`;
    }),
  );

tenant
  .command('import')
  .description(
    "add a subscription tenant export wrote to this installation: its secrets' data keys are wrapped again by this installation's master key. " +
      'Refused when the subscription exists here or a plugin it used is missing; all or nothing. Works while the service runs.',
  )
  .requiredOption('--from <file>', 'the archive tenant export wrote')
  .option('--key-file <file>', 'its transfer key; <file>.key by default')
  .option('--trust-sign-ins', "keep the sign-in provider links and owners' proofs of an address: only for an archive your own installation wrote")
  .action(({ from, keyFile, trustSignIns }: { from: string; keyFile?: string; trustSignIns?: boolean }) =>
    report('import the tenant', async () => {
      const archive = path.resolve(from);
      const args = { from: archive, keyFile: path.resolve(keyFile ?? `${archive}.key`), trustSignIns: trustSignIns === true };
      const result = (await operate('tenant import', args)) as TenantImportResult;
      const withheld = result.withheld.map(({ what, rows, meaning }) => `${what} (${rows}): ${meaning}`).join('; ');
      return `Imported subscription ${result.subscriptionId}: ${result.rows} records and ${result.files} files.${withheld && ` Left out what an archive cannot vouch for (--trust-sign-ins keeps it, for an archive your own installation wrote): ${withheld}.`}`;
    }),
  );

program
  .command('files')
  .description('where uploaded files are kept')
  .command('to-database')
  .description(
    'move the uploaded files this installation kept on disk (DATA_DIR/files) into its database, so that nodes share no folder. Set ' +
      'FILE_STORAGE=database and restart the service first: files not moved yet are still read from disk. Works while the service runs; ' +
      'a run stopped half-way is run again.',
  )
  .action(() =>
    report('move the files', async () => {
      const { moved, bytes, already, missing } = (await operate('files to-database', {})) as FilesToDatabaseResult;
      const left = [already > 0 && `${already} already there`, missing > 0 && `${missing} with no bytes on disk or in the database`].filter(Boolean);
      return `Moved ${moved} file${moved === 1 ? '' : 's'} (${formatBytes(bytes)}) into the database${left.length > 0 ? `; ${left.join(', ')}` : ''}.`;
    }),
  );

/** `jobs list`: a table of the queues' states, then the dead jobs. */
function formatJobs({ queues, failed }: JobsListResult): string {
  const states = ['waiting', 'retrying', 'running', 'done', 'dead', 'cancelled'] as const;
  const width = Math.max(5, ...queues.map(({ queue }) => queue.length));
  const table = [
    ['queue'.padEnd(width), ...states.map((state) => state.padStart(9))].join(' '),
    ...queues.map(({ queue, states: counts }) => [queue.padEnd(width), ...states.map((state) => String(counts[state]).padStart(9))].join(' ')),
  ];
  const dead =
    failed.length === 0
      ? ['No dead jobs.']
      : [`Dead jobs, newest first (${failed.length}):`, ...failed.map((job) => `${job.id}  ${job.queue}  ${job.failedAt}  ${job.error ?? '(no message)'}`)];
  return [...table, '', ...dead].join('\n');
}

/** The configuration of an administration command: only warnings logged, unless LOG_LEVEL says otherwise, so its output is its answer. */
const operatorConfig = (): Config => loadConfig({ ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' });

/** Runs an operator command (core/operator/) with progress bars on a terminal; its result. */
async function operate(name: string, args: Record<string, unknown>): Promise<unknown> {
  const [{ OPERATOR_COMMANDS }, { runOperatorCommand }] = await Promise.all([import('../operator/commands.ts'), import('../operator/control.ts')]);
  const bars = progressBars();
  try {
    return await runOperatorCommand(operatorConfig(), OPERATOR_COMMANDS, name, args, bars.report);
  } finally {
    bars.stop();
  }
}

/** Runs a command that answers one line: printed, or its error on stderr with exit code 1. */
async function report(doing: string, run: () => Promise<string>): Promise<void> {
  try {
    console.log(await run());
  } catch (error) {
    console.error(`Cannot ${doing}: ${(error as Error).message}`);
    process.exit(1);
  }
}

async function migrationCreate(ownerId: string | undefined, name: string | undefined, options: { plugin?: string; check?: boolean }): Promise<string> {
  // Loaded here only: the generator brings MikroORM's migration tooling, which serving does not need.
  const { createMigration, migrationOwners, staleOwners } = await import('../operator/migration-generator.ts');
  const named = [...loadConfig().plugins, ...(options.plugin ? [options.plugin] : [])];
  const owners = await migrationOwners(named);
  if (options.check) {
    const stale = await staleOwners(owners);
    if (stale.length > 0) throw new Error(`entities changed without a migration: ${stale.join(', ')}. Run rpc-service migration create <owner>`);
    return `Migrations match the entities of ${owners.map((owner) => owner.id).join(', ')}.`;
  }
  // Without an owner, the plugin given with --plugin: the one whose folder is that path. With it, a lone word that is no owner is the name.
  const given = options.plugin ? owners.find((owner) => path.dirname(owner.folder) === path.resolve(options.plugin!)) : undefined;
  if (given && ownerId !== undefined && name === undefined && !owners.some((owner) => owner.id === ownerId)) [ownerId, name] = [undefined, ownerId];
  const owner = owners.find((candidate) => candidate.id === (ownerId ?? given?.id));
  if (!owner) throw new Error(`name the owner: one of ${owners.map((candidate) => candidate.id).join(', ')}`);
  return createMigration(owner, name);
}

await program.parseAsync();
