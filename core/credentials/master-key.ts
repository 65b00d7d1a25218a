import { hkdfSync, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { hasEmbeddedDatabase, makeDataFolder, type Config } from '../base/config.ts';
import { ConfigError, splitList } from '../base/settings.ts';
import type { Logger } from '../base/logger.ts';

export const MASTER_KEY_FILE = 'master.key';

/** A master key and its public id (written beside what it wraps, so the right key is picked without trying each). */
export interface MasterKey {
  id: string;
  key: Buffer;
}

/** The master key that wraps new data keys, and the earlier ones still accepted while a rotation is under way. */
export interface MasterKeys {
  current: MasterKey;
  previous: readonly MasterKey[];
}

/** A short id derived from the key, which tells nothing about it. */
export const masterKeyId = (key: Buffer): string => Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), 'rpc-service master key id', 6)).toString('hex');

function decode(text: string, source: string): MasterKey {
  const key = Buffer.from(text.trim(), 'base64');
  if (key.length !== 32) throw new ConfigError(`${source} must be 32 bytes in base64 (for example: openssl rand -base64 32)`);
  return { id: masterKeyId(key), key };
}

function keysOf(texts: readonly string[], source: string): MasterKeys {
  const [current, ...previous] = texts.map((text, index) => decode(text, index === 0 ? source : `${source} (previous key ${index})`));
  return { current: current!, previous: previous.filter((key) => key.id !== current!.id) };
}

const fileLines = (file: string): string[] =>
  readFileSync(file, 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean);

/**
 * The keys that encrypt secrets at rest. With DATABASE_URL, MASTER_KEY must
 * be given, since several nodes must share it, and MASTER_KEY_PREVIOUS lists
 * the keys it replaces while they are rotated out. The embedded mode keeps
 * them in DATA_DIR/master.key (mode 0600), the current one on the first line,
 * made with the database and never after it.
 */
export function resolveMasterKeys(config: Config, logger: Logger): MasterKeys {
  if (config.masterKey) return keysOf([config.masterKey, ...splitList(config.masterKeyPrevious ?? '')], 'MASTER_KEY');
  if (config.databaseUrl) {
    throw new ConfigError('MASTER_KEY is required with DATABASE_URL: set it to 32 random bytes in base64 (openssl rand -base64 32), the same on every node');
  }
  const file = masterKeyFile(config);
  if (existsSync(file)) return keysOf(fileLines(file), file);
  // A new key would open none of an existing database's data keys: its secrets would be lost for good.
  if (hasEmbeddedDatabase(config.dataDir)) {
    throw new ConfigError(
      `${file} is missing, yet DATA_DIR holds the embedded database: put the installation's master.key back (from a backup); a new key would open none of its secrets`,
    );
  }
  makeDataFolder(config.dataDir);
  writeFileSync(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  logger.warn({ file }, 'generated a new master key for the embedded database; back this file up with the data');
  return keysOf(fileLines(file), file);
}

export const masterKeyFile = (config: Config): string => path.join(config.dataDir, MASTER_KEY_FILE);

/**
 * Puts a new key first in the key file, the old ones after it (still read
 * until every data key is wrapped again); written beside and renamed, so the
 * file is never half written.
 */
export function prependMasterKeyFile(file: string): MasterKeys {
  const lines = [randomBytes(32).toString('base64'), ...fileLines(file)];
  const next = `${file}.new`;
  writeFileSync(next, `${lines.join('\n')}\n`, { mode: 0o600 });
  renameSync(next, file);
  return keysOf(lines, file);
}

/** Leaves only the current key in the key file, once nothing is wrapped by the others. */
export function pruneMasterKeyFile(file: string): void {
  const [current] = fileLines(file);
  const next = `${file}.new`;
  writeFileSync(next, `${current}\n`, { mode: 0o600 });
  renameSync(next, file);
}
