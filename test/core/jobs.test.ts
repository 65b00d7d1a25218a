import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import * as v from 'valibot';
import { definePlugin, jobBuilder, type Deps, type JobView, type Jobs } from 'rpc-service/plugin';
import { createScratchDatabase, TEST_DATABASE_URL } from '../support/database.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';

const FAST = { JOBS_POLL_MS: '500' };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until<T>(what: string, probe: () => T | Promise<T>, timeoutMs = 15_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** What the probe plugin's handlers saw: every attempt, by job id, with its time and node. */
class Journal {
  readonly attempts: { job: string; jobId: string; attempt: number; at: number; node: string; subscriptionId: string | null }[] = [];
  runsOf(jobId: string) {
    return this.attempts.filter((entry) => entry.jobId === jobId);
  }
}

const defineJob = jobBuilder<Deps<['jobs', 'db']>>();

/** A plugin with jobs that fail on demand, count their runs and say where they ran. */
function probePlugin(journal: Journal, node: string) {
  return definePlugin({
    id: 'probe',
    group: 'ProbeRpc',
    coreVersion: '^2.0.0',
    deps: ['jobs', 'db'],
    operations: {},
    jobs: {
      leaky: defineJob({
        describe: 'Fails with a database error whose statement carries its data.',
        data: v.object({ secret: v.string() }),
        retry: { limit: 0 },
        handler: ({ data, deps }) => deps.db.execute('select ?::int as n', [data.secret]),
      }),
      flaky: defineJob({
        describe: 'Fails its first `failures` attempts.',
        data: v.object({ failures: v.number() }),
        retry: { limit: 4, delaySeconds: 1, backoff: true, maxDelaySeconds: 1 },
        handler: ({ data, job, ctx }) => {
          journal.attempts.push({ job: job.name, jobId: job.id, attempt: job.attempt, at: Date.now(), node, subscriptionId: ctx.subscriptionId });
          if (job.attempt <= data.failures) throw new Error(`attempt ${job.attempt} failed`);
          return { succeededOn: job.attempt };
        },
      }),
      count: defineJob({
        describe: 'Records that it ran.',
        data: v.object({ n: v.number() }),
        concurrency: 8,
        handler: ({ job, ctx }) => {
          journal.attempts.push({ job: job.name, jobId: job.id, attempt: job.attempt, at: Date.now(), node, subscriptionId: ctx.subscriptionId });
        },
      }),
      slow: defineJob({
        describe: 'Takes its time.',
        data: v.object({ ms: v.number() }),
        handler: async ({ data, job }) => {
          await sleep(data.ms);
          journal.attempts.push({ job: job.name, jobId: job.id, attempt: job.attempt, at: Date.now(), node, subscriptionId: null });
        },
      }),
      tick: defineJob({
        describe: 'Runs every minute.',
        data: v.object({}),
        schedule: '* * * * *',
        handler: ({ job }) => {
          journal.attempts.push({ job: job.name, jobId: job.id, attempt: job.attempt, at: Date.now(), node, subscriptionId: null });
        },
      }),
    },
  });
}

const probeJobs = (app: TestApp): Jobs => app.app.depsOf('probe').jobs;

describe('durable jobs', () => {
  const journal = new Journal();
  let app: TestApp;
  let jobs: Jobs;

  before(async () => {
    app = await startTestApp({ env: FAST, extraPlugins: [probePlugin(journal, 'one')] });
    jobs = probeJobs(app);
  });
  after(() => app.close());

  /** The job's view once it is in this state. */
  const inState = (job: string, id: string, state: string, timeoutMs?: number) =>
    until(
      `${job} job ${state}`,
      async () => {
        const view = await jobs.get(job, id);
        return view?.state === state ? view : null;
      },
      timeoutMs,
    );

  test('a failing job is retried on its backoff schedule, capped, then succeeds', async () => {
    const id = (await jobs.enqueue('flaky', { failures: 4 }))!;
    const done = await inState('flaky', id, 'done', 30_000);
    const runs = journal.runsOf(id);
    assert.deepEqual(
      runs.map((run) => run.attempt),
      [1, 2, 3, 4, 5],
    );
    // Uncapped, the waits double from 1 s with jitter: 1-2, 2-4, 4-8 and 8-16 s, at least 15 s in all. Capped at 1 s, about 4 s;
    // the bound leaves room for a loaded machine's polling delays, the floor shows no retry comes early.
    const waits = runs.slice(1).map((run, index) => run.at - runs[index]!.at);
    assert.ok(
      waits.every((wait) => wait >= 900),
      `retries after ${waits.join(', ')} ms`,
    );
    assert.ok(waits.reduce((sum, wait) => sum + wait, 0) < 12_000, `retries after ${waits.join(', ')} ms (cap 1 s)`);
    assert.equal(done.attempts, 5);
    assert.deepEqual(done.output, { succeededOn: 5 });
    assert.equal(done.lastError, null);
    assert.ok(done.finishedAt && done.startedAt && done.createdAt);
  });

  test('a job that keeps failing ends dead with its last error', async () => {
    const id = (await jobs.enqueue('flaky', { failures: 99 }))!;
    const retrying = await inState('flaky', id, 'retrying');
    assert.equal(retrying.lastError, 'attempt 1 failed');
    const dead = await inState('flaky', id, 'dead', 30_000);
    assert.equal(dead.attempts, 5);
    assert.equal(dead.lastError, 'attempt 5 failed');
    assert.equal(journal.runsOf(id).length, 5);
  });

  test("a failed job keeps a database error's message without the values", async () => {
    const id = (await jobs.enqueue('leaky', { secret: 'hunter2-secret' }))!;
    const dead = await inState('leaky', id, 'dead');
    assert.match(dead.lastError!, /invalid input syntax for type integer/);
    assert.doesNotMatch(dead.lastError!, /hunter2/);
    assert.ok(!app.logs.some((line) => line.includes('hunter2')), 'the secret reached the log');
  });

  test('a key keeps one waiting job; delayed jobs wait; bad data and unknown jobs are refused', async () => {
    const first = await jobs.enqueue('count', { n: 1 }, { key: 'report-7', delaySeconds: 60 });
    assert.ok(first);
    assert.equal(await jobs.enqueue('count', { n: 2 }, { key: 'report-7', delaySeconds: 60 }), null);
    const other = await jobs.enqueue('count', { n: 3 }, { key: 'report-8', delaySeconds: 60 });
    assert.ok(other && other !== first);
    const waiting = (await jobs.get('count', first))!;
    assert.equal(waiting.state, 'waiting');
    assert.deepEqual(waiting.data, { n: 1 });
    assert.equal(waiting.attempts, 0);
    assert.ok(Date.parse(waiting.runAt) - Date.now() > 50_000);
    assert.equal(await jobs.cancel('count', first), true);
    assert.equal((await jobs.get('count', first))!.state, 'cancelled');
    assert.equal(await jobs.cancel('count', first), false);
    // Once the first is cancelled, the key is free again.
    assert.ok(await jobs.enqueue('count', { n: 4 }, { key: 'report-7', delaySeconds: 60 }));

    const soon = (await jobs.enqueue('count', { n: 5 }, { delaySeconds: 1 }))!;
    const enqueuedAt = Date.now();
    const ran = await until('the delayed job', () => journal.runsOf(soon)[0]);
    assert.ok(ran.at - enqueuedAt >= 900, `ran ${ran.at - enqueuedAt} ms after enqueue`);

    await assert.rejects(jobs.enqueue('count', { n: 'x' }), /data does not match its schema/);
    await assert.rejects(jobs.enqueue('nope', {}), /No job "probe.nope"/);
    assert.equal(await jobs.get('count', '00000000-0000-4000-8000-000000000000'), null);
  });

  test('a job enqueued in a transaction exists only if the transaction commits', async () => {
    let rolledBack: string | null = null;
    await assert.rejects(
      app.app.deps.db.forkEm(null).transactional(async (em) => {
        rolledBack = await jobs.enqueue('count', { n: 6 }, { em, delaySeconds: 60 });
        throw new Error('changed my mind');
      }),
      /changed my mind/,
    );
    assert.ok(rolledBack);
    assert.equal(await jobs.get('count', rolledBack), null);
    const committed = await app.app.deps.db.forkEm(null).transactional((em) => jobs.enqueue('count', { n: 7 }, { em, delaySeconds: 60 }));
    assert.equal((await jobs.get('count', committed!))!.state, 'waiting');
  });

  test('a periodic job runs on its schedule', async () => {
    const tick = await until('the first tick', () => journal.attempts.find((entry) => entry.job === 'probe.tick'));
    assert.equal(tick.attempt, 1);
  });

  test("a plugin's job runs in the context of whoever enqueued it", async () => {
    // The notes plugin enqueues `tally` from NoteRpc.add; each subscription's count holds its own notes only.
    const tallies: { subscriptionId: string; payload: unknown }[] = [];
    app.app.deps.bus.subscribe('notes.tallied', (event) => void tallies.push({ subscriptionId: event.subscriptionId!, payload: event.payload }));
    const ann = await app.signup();
    const bob = await app.signup();
    await app.ok('NoteRpc.add', { text: 'one two three' }, { token: ann.token });
    await app.ok('NoteRpc.add', { text: 'four' }, { token: bob.token });
    const annTally = await until('ann tally', () => tallies.find((entry) => entry.subscriptionId === ann.subscriptionId));
    const bobTally = await until('bob tally', () => tallies.find((entry) => entry.subscriptionId === bob.subscriptionId));
    assert.deepEqual(annTally.payload, { notes: 1, words: 3 });
    assert.deepEqual(bobTally.payload, { notes: 1, words: 1 });
  });

  test('the nightly sweep keeps every note when no retention is set', async () => {
    const { kept, old, fresh, output } = await sweepWithOneOldNote(app, 400);
    assert.deepEqual(output, { deleted: 0 });
    assert.deepEqual(kept.sort(), [old, fresh].sort());
  });
});

test('the nightly sweep deletes notes older than NOTES_RETENTION_DAYS', async () => {
  const app = await startTestApp({ env: { ...FAST, NOTES_RETENTION_DAYS: '30' } });
  try {
    const { kept, fresh, output } = await sweepWithOneOldNote(app, 31);
    assert.deepEqual(output, { deleted: 1 });
    assert.deepEqual(kept, [fresh]);
  } finally {
    await app.close();
  }
});

/** Adds a note made `daysOld` days ago and a new one, runs the notes plugin's sweep job, and lists what is left. */
async function sweepWithOneOldNote(app: TestApp, daysOld: number) {
  const user = await app.signup();
  const old = await app.ok<{ _id: string }>('NoteRpc.add', { text: 'old news' }, { token: user.token });
  const fresh = await app.ok<{ _id: string }>('NoteRpc.add', { text: 'fresh news' }, { token: user.token });
  await app.app.deps.db.execute(`update notes set created_at = now() - make_interval(days => ?) where id = ?`, [daysOld, old._id]);
  const notes: Jobs = app.app.depsOf('notes').jobs;
  const id = (await notes.enqueue('sweep', {}))!;
  const view = await until('the sweep', async () => {
    const job = await notes.get('sweep', id);
    return job?.state === 'done' ? job : null;
  });
  const listed = await app.ok<{ data: { _id: string }[] }>('NoteRpc.list', {}, { token: user.token });
  return { output: view.output, old: old._id, fresh: fresh._id, kept: listed.data.map((note) => note._id) };
}

test('shutdown lets a running job finish; a waiting job survives a restart', async () => {
  const journal = new Journal();
  const scratch = TEST_DATABASE_URL ? await createScratchDatabase(TEST_DATABASE_URL) : undefined;
  const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-jobs-'));
  const options = { env: FAST, dataDir, persistent: true, databaseUrl: scratch?.url };
  try {
    const first = await startTestApp({ ...options, extraPlugins: [probePlugin(journal, 'first')] });
    const slow = (await probeJobs(first).enqueue('slow', { ms: 1200 }))!;
    await until('the slow job to start', async () => (await probeJobs(first).get('slow', slow))?.state === 'running');
    const waiting = (await probeJobs(first).enqueue('count', { n: 1 }, { delaySeconds: 2 }))!;
    await first.close();
    // close() returned only after the running job finished on the first node.
    assert.deepEqual(
      journal.runsOf(slow).map((run) => run.node),
      ['first'],
    );
    assert.equal(journal.runsOf(waiting).length, 0);

    const second = await startTestApp({ ...options, extraPlugins: [probePlugin(journal, 'second')] });
    try {
      assert.equal((await probeJobs(second).get('slow', slow))!.state, 'done');
      const ran = await until('the waiting job after the restart', () => journal.runsOf(waiting)[0]);
      assert.equal(ran.node, 'second');
    } finally {
      await second.close();
    }
  } finally {
    await scratch?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('two nodes on one PostgreSQL run each of 500 jobs exactly once', { skip: !TEST_DATABASE_URL && 'needs TEST_DATABASE_URL' }, async () => {
  const journal = new Journal();
  const scratch = await createScratchDatabase(TEST_DATABASE_URL!);
  const nodes: TestApp[] = [];
  try {
    for (const node of ['a', 'b']) nodes.push(await startTestApp({ env: FAST, databaseUrl: scratch.url, extraPlugins: [probePlugin(journal, node)] }));
    const ids = await Promise.all(Array.from({ length: 500 }, (_, n) => probeJobs(nodes[n % 2]!).enqueue('count', { n })));
    assert.equal(new Set(ids).size, 500);
    const counted = () => journal.attempts.filter((entry) => entry.job === 'probe.count');
    await until('500 runs', () => counted().length >= 500, 60_000);
    await sleep(1000); // a second run of any job would show up here
    const runs = new Map<string, number>();
    for (const entry of counted()) runs.set(entry.jobId, (runs.get(entry.jobId) ?? 0) + 1);
    assert.equal(runs.size, 500);
    assert.deepEqual([...new Set(runs.values())], [1]);
    const byNode = (node: string) => counted().filter((entry) => entry.node === node).length;
    assert.ok(byNode('a') > 0 && byNode('b') > 0, `node a ran ${byNode('a')}, node b ${byNode('b')}`);
    const states = new Set<JobView['state']>();
    for (const id of ids.slice(0, 20)) states.add((await probeJobs(nodes[0]!).get('count', id!))!.state);
    assert.deepEqual([...states], ['done']);
  } finally {
    for (const node of nodes) await node.close();
    await scratch.drop();
  }
});

test('nodes started at once on an empty database all start, each queue made once', { skip: !TEST_DATABASE_URL && 'needs TEST_DATABASE_URL' }, async () => {
  const scratch = await createScratchDatabase(TEST_DATABASE_URL!);
  const started = await Promise.allSettled(['a', 'b', 'c'].map(() => startTestApp({ env: FAST, databaseUrl: scratch.url })));
  try {
    assert.deepEqual(
      started.map((node) => (node.status === 'fulfilled' ? 'started' : String(node.reason))),
      ['started', 'started', 'started'],
    );
    const node = (started[0] as PromiseFulfilledResult<TestApp>).value;
    const [{ queues, names }] = await node.app.deps.db.execute<{ queues: number; names: number }>(
      'select count(*)::int as queues, count(distinct name)::int as names from core_jobs.queue',
    );
    assert.ok(queues > 5 && queues === names, `${queues} queues, ${names} names`);
  } finally {
    for (const node of started) if (node.status === 'fulfilled') await node.value.close();
    await scratch.drop();
  }
});

/** Polls far apart: a job that starts sooner was woken for. */
const UNHURRIED = { JOBS_POLL_MS: '60000' };

test('a job starts as soon as its transaction commits, without waiting for a poll; a rolled-back one never', async () => {
  const journal = new Journal();
  const app = await startTestApp({ env: UNHURRIED, extraPlugins: [probePlugin(journal, 'one')] });
  try {
    const jobs = probeJobs(app);
    await sleep(500); // past the workers' first look at their queues, which start-up makes
    await assert.rejects(
      app.app.deps.db.forkEm(null).transactional(async (em) => {
        await jobs.enqueue('count', { n: 1 }, { em });
        throw new Error('changed my mind');
      }),
      /changed my mind/,
    );
    let committedAt = 0;
    const committed = (await app.app.deps.db.forkEm(null).transactional(async (em) => {
      const id = await jobs.enqueue('count', { n: 2 }, { em });
      // Not before the commit: the worker could not see the job yet.
      await sleep(300);
      assert.equal(journal.runsOf(id!).length, 0);
      committedAt = Date.now();
      return id;
    }))!;
    const ran = await until('the committed job to run', () => journal.runsOf(committed)[0]);
    assert.ok(ran.at >= committedAt);
    const outside = (await jobs.enqueue('count', { n: 3 }))!;
    await until('the job enqueued outside a transaction to run', () => journal.runsOf(outside)[0]);
    assert.equal(journal.attempts.filter((entry) => entry.job === 'probe.count').length, 2, 'the rolled-back job never ran');
  } finally {
    await app.close();
  }
});

test('a job enqueued on one node wakes the workers of the others', { skip: !TEST_DATABASE_URL && 'needs TEST_DATABASE_URL' }, async () => {
  const journal = new Journal();
  const scratch = await createScratchDatabase(TEST_DATABASE_URL!);
  const nodes: TestApp[] = [];
  try {
    for (const node of ['a', 'b']) nodes.push(await startTestApp({ env: UNHURRIED, databaseUrl: scratch.url, extraPlugins: [probePlugin(journal, node)] }));
    // Node a runs two at a time; without a wake-up, node b would not look before its next poll, a minute away.
    const ids = await nodes[0]!.app.deps.db
      .forkEm(null)
      .transactional((em) => Promise.all(Array.from({ length: 12 }, () => probeJobs(nodes[0]!).enqueue('slow', { ms: 250 }, { em }))));
    await until('the 12 runs', () => ids.every((id) => journal.runsOf(id!).length === 1), 20_000);
    const byNode = (node: string) => journal.attempts.filter((entry) => entry.node === node).length;
    assert.ok(byNode('b') > 0, `node a ran ${byNode('a')}, node b ${byNode('b')}`);
  } finally {
    for (const node of nodes) await node.close();
    await scratch.drop();
  }
});
