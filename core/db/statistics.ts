import type { Logger } from '../base/logger.ts';

/** How often the tables' changes are looked at. */
const UPKEEP_MS = 30_000;
/** A table is analyzed again once this many rows, plus a tenth of its rows, changed since it last was: autovacuum's own rule (autovacuum_analyze_threshold, _scale_factor). */
const CHANGED_ROWS = 50;
const CHANGED_SHARE = 0.1;

type Execute = (sql: string) => Promise<unknown[]>;

/**
 * Analyzes the tables that changed enough since their statistics were last
 * made, and answers their names. Without statistics the planner guesses: a
 * search by words reads every row of its owner where its GIN index would
 * read a few (docs/decisions/0063-retrieval.md).
 */
export async function analyzeChanged(execute: Execute): Promise<string[]> {
  const changed = (await execute(
    `select format('%I.%I', schemaname, relname) as name from pg_stat_user_tables
     where n_mod_since_analyze > ${CHANGED_ROWS} + ${CHANGED_SHARE} * greatest(n_live_tup, 0)`,
  )) as { name: string }[];
  for (const { name } of changed) await execute(`analyze ${name}`);
  return changed.map(({ name }) => name);
}

/**
 * Keeps the planner's statistics where nothing else does: the embedded
 * database has no autovacuum daemon, and a PostgreSQL server may have it
 * turned off. Every UPKEEP_MS the changed tables are analyzed, one statement
 * at a time (on the embedded database, between the service's transactions).
 * Answers the function that stops it.
 */
export async function keepStatistics(execute: Execute, embedded: boolean, logger: Logger): Promise<() => void> {
  if (!embedded) {
    const [setting] = (await execute(`select current_setting('autovacuum') as autovacuum`)) as { autovacuum: string }[];
    if (setting?.autovacuum === 'on') return () => {};
  }
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    analyzeChanged(execute)
      .then((tables) => tables.length > 0 && logger.debug({ tables }, 'table statistics made again'))
      .catch((err: unknown) => logger.warn({ err }, 'could not analyze changed tables'))
      .finally(() => {
        running = false;
      });
  }, UPKEEP_MS);
  timer.unref();
  return () => clearInterval(timer);
}
