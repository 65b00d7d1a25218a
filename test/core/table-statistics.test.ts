import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { analyzeChanged } from '../../core/db/statistics.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { eventually } from '../support/peers.ts';

/**
 * The service makes the planner's statistics of the tables that changed,
 * where no autovacuum does (the embedded database; a server with it off):
 * without them a search by words reads every row of its owner.
 */
describe('table statistics', () => {
  let t: TestApp;
  const execute = (sql: string) => t.app.deps.db.execute(sql);
  const lastAnalyzed = async () =>
    ((await execute(`select last_analyze from pg_stat_user_tables where relname = 'statistics_probe'`)) as { last_analyze: Date | string | null }[])[0]
      ?.last_analyze;

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth'] });
    await execute('create table statistics_probe (id int primary key, words tsvector)');
  });
  after(async () => {
    await execute('drop table if exists statistics_probe');
    await t.close();
  });

  it('analyzes a table once enough of its rows changed, and not again until they change', async () => {
    assert.equal(await lastAnalyzed(), null);
    await execute(`insert into statistics_probe select n, to_tsvector('english', 'word ' || n) from generate_series(1, 2000) n`);
    // The server counts the change once the inserting transaction has ended and its counts are flushed; the
    // service's own upkeep (every 30 s, keepStatistics) may be the one that sees it first.
    await eventually(async () => ((await analyzeChanged(execute)).includes('public.statistics_probe') || (await lastAnalyzed()) ? true : undefined));
    // As the counts, the server shows the analysis once it has flushed it.
    assert.ok(await eventually(async () => (await lastAnalyzed()) ?? undefined));
    const [{ reltuples }] = (await execute(`select reltuples from pg_class where relname = 'statistics_probe'`)) as { reltuples: number }[];
    assert.equal(Number(reltuples), 2000);
    assert.ok(!(await analyzeChanged(execute)).includes('public.statistics_probe'), 'unchanged since');
  });
});
