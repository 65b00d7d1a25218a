import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** The PostgreSQL the suite runs against, when TEST_DATABASE_URL is set; otherwise the embedded PGlite. */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL || undefined;

/**
 * Set when TEST_DATABASE_URL is a pooler in transaction mode (PgBouncer, as
 * .ci/run starts it): the server behind it. Each database of the pooler is
 * reached there by the same name, as the service's DATABASE_DIRECT_URL.
 */
export const TEST_DATABASE_DIRECT_URL = process.env.TEST_DATABASE_DIRECT_URL || undefined;

/** The direct URL of a database the suite reaches at `url`, when the suite runs through a pooler. */
export function directUrlOf(url: string): string | undefined {
  if (!TEST_DATABASE_DIRECT_URL) return undefined;
  const direct = new URL(TEST_DATABASE_DIRECT_URL);
  direct.pathname = new URL(url).pathname;
  return direct.toString();
}

/** The settings that point a service at a database: DATABASE_URL, and DATABASE_DIRECT_URL through a pooler. */
export function databaseEnv(url: string): Record<string, string> {
  const direct = directUrlOf(url);
  return { DATABASE_URL: url, ...(direct ? { DATABASE_DIRECT_URL: direct } : {}) };
}

export interface ScratchDatabase {
  url: string;
  drop(): Promise<void>;
}

/** A fresh database on the test PostgreSQL server, so test files never see each other's rows. */
export async function createScratchDatabase(baseUrl: string): Promise<ScratchDatabase> {
  const name = `rpc_test_${randomBytes(6).toString('hex')}`;
  // Made and dropped on the server itself: a pooler would keep its own connections to the database open.
  const admin = () => new pg.Client({ connectionString: directUrlOf(baseUrl) ?? baseUrl });
  const client = admin();
  await client.connect();
  try {
    await client.query(`create database ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const client = admin();
      await client.connect();
      try {
        await client.query(`drop database if exists ${name} with (force)`);
      } finally {
        await client.end();
      }
    },
  };
}
