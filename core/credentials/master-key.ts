import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { makeDataFolder, type Config } from '../config.ts';
import { ConfigError } from '../settings.ts';
import type { Logger } from '../logger.ts';

const MASTER_KEY_FILE = 'master.key';

function decode(text: string, source: string): Buffer {
  const key = Buffer.from(text.trim(), 'base64');
  if (key.length !== 32) throw new ConfigError(`${source} must be 32 bytes in base64 (for example: openssl rand -base64 32)`);
  return key;
}

/**
 * The key that encrypts secrets at rest. With DATABASE_URL it must be given,
 * since several nodes must share it; the embedded mode keeps a generated one
 * in DATA_DIR (mode 0600).
 */
export function resolveMasterKey(config: Config, logger: Logger): Buffer {
  if (config.masterKey) return decode(config.masterKey, 'MASTER_KEY');
  if (config.databaseUrl) {
    throw new ConfigError(
      'MASTER_KEY is required with DATABASE_URL: set it to 32 random bytes in base64 (openssl rand -base64 32), the same on every node',
    );
  }
  const file = path.join(config.dataDir, MASTER_KEY_FILE);
  if (existsSync(file)) return decode(readFileSync(file, 'utf8'), file);
  makeDataFolder(config.dataDir);
  writeFileSync(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  logger.warn({ file }, 'generated a new master key for the embedded database; back this file up with the data');
  return decode(readFileSync(file, 'utf8'), file);
}
