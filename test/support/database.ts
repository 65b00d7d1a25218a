import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** The PostgreSQL the suite runs against, when TEST_DATABASE_URL is set; otherwise the embedded PGlite. */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL || undefined;

export interface ScratchDatabase {
  url: string;
  drop(): Promise<void>;
}

/** A fresh database on the test PostgreSQL server, so test files never see each other's rows. */
export async function createScratchDatabase(baseUrl: string): Promise<ScratchDatabase> {
  const name = `rpc_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: baseUrl });
      await client.connect();
      try {
        await client.query(`drop database if exists ${name} with (force)`);
      } finally {
        await client.end();
      }
    },
  };
}
