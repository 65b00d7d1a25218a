import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Logger, run as runGraphileWorker } from 'graphile-worker';
import pg from 'pg';
import * as v from 'valibot';
import { createApp } from '../../core/app/app.ts';
import { loadConfig } from '../../core/base/config.ts';
import { definePlugin, defineJob, type Jobs } from '../../core/plugin/sdk.ts';
import { createScratchDatabase } from '../support/database.ts';
import { TEST_MASTER_KEY } from '../support/harness.ts';

/**
 * `npm run bench` (jobs): how soon a job starts once the transaction that
 * enqueued it has committed. BENCH_JOBS (1,000) jobs, each enqueued in a
 * transaction of its own, one every BENCH_JOB_GAP_MS (5) ms, so the figure is
 * the wait of a job arriving at a steady rate, not of a backlog. Measured
 * from the commit to the handler's first line; the polling interval is left
 * at its default (2 s), so a job that waits for a poll shows.
 * With BENCH_DATABASE_URL (PostgreSQL) the same is measured for
 * graphile-worker (LISTEN/NOTIFY, the same concurrency) on the same server,
 * as the anchor of the aim: p50 < 10 ms, p99 < 50 ms, within 2x of it.
 */
const JOBS = Number(process.env.BENCH_JOBS ?? 1000);
const GAP_MS = Number(process.env.BENCH_JOB_GAP_MS ?? 5);
const CONCURRENCY = 8;
const DATABASE_URL = process.env.BENCH_DATABASE_URL || undefined;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((values.length * p) / 100))]!;

interface Figures {
  p50: number;
  p99: number;
}

/** Enqueues JOBS jobs through `enqueue` (which resolves once committed) and waits for all to start; the delays in ms. */
async function measure(enqueue: (n: number) => Promise<void>, started: Map<number, number>): Promise<Figures> {
  const committed = new Map<number, number>();
  for (let n = 0; n < JOBS; n++) {
    await enqueue(n);
    committed.set(n, performance.now());
    await sleep(GAP_MS);
  }
  const deadline = Date.now() + 60_000;
  while (started.size < JOBS) {
    if (Date.now() > deadline) throw new Error(`only ${started.size} of ${JOBS} jobs started in a minute`);
    await sleep(20);
  }
  // A job may start before its enqueuer resumes after the commit: that is no wait at all.
  const delays = [...committed].map(([n, at]) => Math.max(0, started.get(n)! - at));
  return { p50: percentile(delays, 50), p99: percentile(delays, 99) };
}

async function ours(databaseUrl: string | undefined): Promise<Figures> {
  const started = new Map<number, number>();
  const plugin = definePlugin({
    id: 'bench-jobs',
    group: 'BenchJobsRpc',
    coreVersion: '^2.0.0',
    deps: ['jobs'],
    operations: {},
    jobs: {
      ping: defineJob({
        describe: 'Notes when it started.',
        data: v.object({ n: v.number() }),
        concurrency: CONCURRENCY,
        handler: ({ data }) => void started.set(data.n, performance.now()),
      }),
    },
  });
  const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-bench-jobs-'));
  const app = await createApp({
    config: loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', ...(databaseUrl ? { DATABASE_URL: databaseUrl, MASTER_KEY: TEST_MASTER_KEY } : {}) }),
    inMemoryDatabase: !databaseUrl,
    only: ['bench-jobs'],
    extraPlugins: [plugin],
  });
  try {
    const jobs: Jobs = app.depsOf('bench-jobs').jobs;
    const em = () => app.deps.db.forkEm(null);
    return await measure((n) => em().transactional(async (tx) => void (await jobs.enqueue('ping', { n }, { em: tx }))), started);
  } finally {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function graphileWorker(databaseUrl: string): Promise<Figures> {
  const started = new Map<number, number>();
  const pool = new pg.Pool({ connectionString: databaseUrl, max: CONCURRENCY + 2 });
  // Its idle connections are ended by the scratch database's drop after the run: not an error of the bench.
  pool.on('error', () => undefined);
  const runner = await runGraphileWorker({
    pgPool: pool,
    concurrency: CONCURRENCY,
    noHandleSignals: true,
    pollInterval: 2000,
    logger: new Logger(() => () => undefined),
    taskList: { ping: async (payload) => void started.set((payload as { n: number }).n, performance.now()) },
  });
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return await measure(async (n) => {
      await client.query('begin');
      await client.query('select graphile_worker.add_job($1, $2::json)', ['ping', JSON.stringify({ n })]);
      await client.query('commit');
    }, started);
  } finally {
    await client.end();
    await runner.stop();
    await pool.end();
  }
}

const line = (label: string, { p50, p99 }: Figures) =>
  console.log(`${label.padEnd(44)} p50 ${p50.toFixed(1).padStart(7)} ms   p99 ${p99.toFixed(1).padStart(7)} ms`);

console.log(`\njobs: enqueued in a transaction → started, ${JOBS} jobs one every ${GAP_MS} ms, concurrency ${CONCURRENCY}, polling every 2 s`);
const embedded = await ours(undefined);
line('(j1) this service, embedded database', embedded);
if (DATABASE_URL) {
  const scratch = await createScratchDatabase(DATABASE_URL);
  try {
    const onPostgres = await ours(scratch.url);
    line('(j2) this service, PostgreSQL', onPostgres);
    const anchor = await graphileWorker(scratch.url);
    line('(j3) graphile-worker 0.16, same PostgreSQL', anchor);
    console.log(
      `j2/j3 p50 = ${(onPostgres.p50 / Math.max(anchor.p50, 0.1)).toFixed(2)}, p99 = ${(onPostgres.p99 / Math.max(anchor.p99, 0.1)).toFixed(2)}   (aim: p50 < 10 ms, p99 < 50 ms, each within 2x)`,
    );
  } finally {
    await scratch.drop();
  }
} else {
  console.log('(j2, j3) PostgreSQL and graphile-worker: set BENCH_DATABASE_URL');
}
console.log(`aim on each database: p50 < 10 ms, p99 < 50 ms`);
