import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { withRawConnection, type KnexClient } from '../db/raw-connection.ts';

/** What pg-boss's `db` option expects. */
export interface SqlExecutor {
  executeSql(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[]; rowCount?: number }>;
}

/** An executor that can wait for the statements it has started. */
export interface DrainableSqlExecutor extends SqlExecutor {
  /** Settles once no statement is running: pg-boss completes some jobs without awaiting, and the database must not close under them. */
  drain(): Promise<void>;
  /** No statement is running. */
  idle(): boolean;
}

/**
 * Runs pg-boss's SQL on the ORM's own connections. On PGlite there is only one
 * connection, guarded by the ORM's pool of one, so jobs and requests never
 * interleave inside each other's transactions; on PostgreSQL it shares the pool.
 * Given an EntityManager inside a transaction, the SQL joins that transaction,
 * so a job is enqueued only if the caller's writes commit.
 * With `namedStatements` (core/db/orm.ts), pg-boss's statements with values
 * (its fetch, completion and insert, run once per job) are parsed and planned
 * once per connection.
 */
export function sqlExecutor(em: EntityManager, { namedStatements }: { namedStatements: boolean }): DrainableSqlExecutor {
  const transaction = em.getTransactionContext() as { client: KnexClient } | undefined;
  const client: KnexClient = transaction?.client ?? (em.getConnection().getKnex().client as KnexClient);
  const running = new Set<Promise<unknown>>();
  const execute = (text: string, values?: unknown[]) =>
    withRawConnection(client, async (connection) => {
      if (connection.exec && !values?.length) {
        // pg-boss sends its schema changes and maintenance as several statements without parameters.
        const results = await connection.exec(text);
        const last = results.at(-1);
        return { rows: last?.rows ?? [], rowCount: last?.affectedRows };
      }
      // Without values, pg-boss may send several statements at once, which only the simple protocol takes.
      const name = namedStatements && values?.length ? statementName(text) : undefined;
      const result = await connection.query(name ? { name, text, values: values! } : text, values);
      return { rows: result.rows, rowCount: result.rowCount ?? result.affectedRows };
    });
  return {
    executeSql(text, values) {
      const statement = execute(text, values);
      const settled = statement.catch(() => undefined).finally(() => running.delete(settled));
      running.add(settled);
      return statement;
    },
    async drain() {
      while (running.size > 0) await Promise.all(running);
    },
    idle: () => running.size === 0,
  };
}

/** pg-boss's statements by their text: a few dozen, the schema's name their only variable part. Bounded all the same, as each name holds a plan on every connection. */
const names = new Map<string, string>();
const MAX_NAMES = 200;

function statementName(text: string): string | undefined {
  let name = names.get(text);
  if (!name && names.size < MAX_NAMES) names.set(text, (name = `jobs_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`));
  return name;
}
