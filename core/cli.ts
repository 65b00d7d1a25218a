import { existsSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { Keyring } from './credentials/keyring.ts';
import { masterKeyFile, prependMasterKeyFile, pruneMasterKeyFile, resolveMasterKeys, type MasterKeys } from './credentials/master-key.ts';
import { coreEntities } from './db/core-entities.ts';
import { migrations as coreMigrations } from './db/migrations/index.ts';
import { openDatabase, type Database } from './db/orm.ts';
import { createLogger } from './logger.ts';

/** `npm run cli -- <command>`: administration that runs beside (or, for the embedded database, instead of) the service. */
const COMMANDS: Record<string, { describe: string; run(config: Config): Promise<string> }> = {
  'rotate-master-key': {
    describe:
      'wrap every data key under a new master key. With MASTER_KEY set: the new key is MASTER_KEY and the old ones are in ' +
      'MASTER_KEY_PREVIOUS (nodes keep serving). Embedded database (no MASTER_KEY): generates the new key into DATA_DIR/master.key; ' +
      'stop the service first.',
    run: rotateMasterKey,
  },
};

async function rotateMasterKey(config: Config): Promise<string> {
  const logger = createLogger('warn');
  const fromFile = !config.masterKey;
  if (fromFile) {
    if (config.databaseUrl) throw new ConfigError('MASTER_KEY is required with DATABASE_URL');
    const file = masterKeyFile(config);
    if (!existsSync(file)) throw new ConfigError(`${file} does not exist: there is no master key to rotate`);
    // PGlite keeps this file while the database is open; two processes on one embedded database would damage it.
    if (existsSync(path.join(config.dataDir, 'db', 'postmaster.pid'))) {
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

const [name] = process.argv.slice(2);
const command = name ? COMMANDS[name] : undefined;
if (!command) {
  console.error(
    `Usage: npm run cli -- <command>\n${Object.entries(COMMANDS)
      .map(([id, { describe }]) => `  ${id}: ${describe}`)
      .join('\n')}`,
  );
  process.exit(name ? 1 : 0);
}
try {
  console.log(await command.run(loadConfig()));
} catch (error) {
  console.error(`Cannot ${name}: ${(error as Error).message}`);
  process.exit(1);
}
