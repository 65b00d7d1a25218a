/** A statement's rows as the drivers return them. */
export interface RawResult {
  rows: Record<string, unknown>[];
  rowCount?: number | null;
  affectedRows?: number;
}

/** The raw connection knex hands out: a `pg` client, or the one PGlite instance (as core/db/orm.ts wraps it). */
export interface RawConnection {
  query(text: string | { name?: string; text: string; values: unknown[] }, values?: unknown[]): Promise<RawResult>;
  /** PGlite only: several statements in one call (the simple query protocol). */
  exec?(text: string): Promise<RawResult[]>;
}

export interface KnexClient {
  acquireConnection(): Promise<RawConnection>;
  releaseConnection(connection: RawConnection): Promise<unknown>;
}

/**
 * Runs on one of the ORM's own connections, taken from and given back to its
 * pool: on PGlite the pool of one keeps the statement out of a transaction
 * another request has open on the only connection.
 */
export async function withRawConnection<T>(client: KnexClient, run: (connection: RawConnection) => Promise<T>): Promise<T> {
  const connection = await client.acquireConnection();
  try {
    return await run(connection);
  } finally {
    await client.releaseConnection(connection);
  }
}
