import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as v from 'valibot';
import { jobBuilder, operationBuilder, WorkerTaskError, type Deps, type Jobs } from 'rpc-service/plugin';
import { definePlugin } from '../../core/plugin/define.ts';
import { WorkerPool } from '../../core/pool/worker-pool.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

// Worker modules written for this file: plain .mjs, so the threads need no TypeScript loader.
const workDir = mkdtempSync(path.join(tmpdir(), 'worker-pool-test-'));
const SECRET_MESSAGE = `worker exploded: ${randomBytes(8).toString('hex')}`;
const THROWING_WORKER = path.join(workDir, 'throwing.mjs');
writeFileSync(THROWING_WORKER, `export default function () {\n  throw new Error(${JSON.stringify(SECRET_MESSAGE)});\n}\n`);
// Counts in shared memory how many tasks run at once: each task enters, then waits (at most boundMs)
// until `until` tasks have entered, and answers with its thread id. `entered` only grows, so a task
// that leaves early cannot hide from the others that the target was reached.
const PROBE_WORKER = path.join(workDir, 'probe.mjs');
writeFileSync(
  PROBE_WORKER,
  `import { threadId } from 'node:worker_threads';
const RUNNING = 0, MOST = 1, ENTERED = 2;
export default function ({ shared, until, boundMs }) {
  const cells = new Int32Array(shared);
  const running = Atomics.add(cells, RUNNING, 1) + 1;
  for (let most = Atomics.load(cells, MOST); running > most; most = Atomics.load(cells, MOST)) {
    if (Atomics.compareExchange(cells, MOST, most, running) === most) break;
  }
  Atomics.add(cells, ENTERED, 1);
  Atomics.notify(cells, ENTERED);
  const deadline = Date.now() + boundMs;
  for (let entered = Atomics.load(cells, ENTERED); entered < until && Date.now() < deadline; entered = Atomics.load(cells, ENTERED)) {
    Atomics.wait(cells, ENTERED, entered, Math.max(0, deadline - Date.now()));
  }
  Atomics.sub(cells, RUNNING, 1);
  return threadId;
}
`,
);

// Holds ever more memory until its thread's heap limit; spins without end.
const HOG_WORKER = path.join(workDir, 'hog.mjs');
writeFileSync(HOG_WORKER, `export default function () {\n  const kept = [];\n  for (;;) kept.push(new Array(10000).fill(kept.length));\n}\n`);
const SPIN_WORKER = path.join(workDir, 'spin.mjs');
writeFileSync(SPIN_WORKER, `export default function () {\n  for (;;);\n}\n`);
const ECHO_WORKER = path.join(workDir, 'echo.mjs');
writeFileSync(ECHO_WORKER, `export default function (data) {\n  return data;\n}\n`);

const defineJob = jobBuilder<Deps<['pool', 'jobs']>>();
const defineOperation = operationBuilder<Deps<['pool', 'jobs']>>();

const faultyWork = definePlugin({
  id: 'faulty-work',
  group: 'FaultyWorkRpc',
  coreVersion: '^2.0.0',
  deps: ['pool', 'jobs'],
  operations: {
    explode: defineOperation({
      access: 'user',
      describe: 'Runs a worker that throws.',
      params: v.object({}),
      handler: ({ deps }) => deps.pool.run(THROWING_WORKER, {}),
    }),
  },
  jobs: {
    hog: defineJob({
      describe: 'Runs a worker that runs out of memory.',
      data: v.object({}),
      retry: { limit: 1, delaySeconds: 1, backoff: false },
      handler: ({ deps }) => deps.pool.run(HOG_WORKER, {}),
    }),
  },
});

/**
 * Runs `count` probe tasks at once, each waiting (at most boundMs) until `until` of them have started;
 * returns the number of distinct threads that served them and the most that ever ran at once.
 */
async function probe(t: TestApp, count: number, until: number, boundMs: number) {
  const shared = new SharedArrayBuffer(12);
  const ids = await Promise.all(Array.from({ length: count }, () => t.app.deps.pool.run<number>(PROBE_WORKER, { shared, until, boundMs })));
  for (const id of ids) assert.ok(Number.isInteger(id) && id > 0, `not a worker thread id: ${id}`);
  return { threads: new Set(ids).size, mostAtOnce: new Int32Array(shared)[1] };
}

describe('worker pool', () => {
  let t: TestApp;
  let three: TestApp;
  let hogs: TestApp;

  before(async () => {
    // Started together: most of a test app's start is the embedded database's.
    [t, three, hogs] = await Promise.all([
      startTestApp({ extraPlugins: [faultyWork] }),
      startTestApp({ env: { WORKERS: '3' }, withNotes: false }),
      startTestApp({ extraPlugins: [faultyWork], withNotes: false, env: { WORKER_MAX_MEMORY_MB: '32', JOBS_POLL_MS: '500' } }),
    ]);
  });
  after(async () => {
    await t?.close();
    await three?.close();
    await hogs?.close();
    rmSync(workDir, { recursive: true, force: true });
  });

  it('computes NoteRpc.stats in a worker over the caller subscription notes only', async () => {
    const owner = await t.signup();
    assert.deepEqual(await t.ok('NoteRpc.stats', {}, { token: owner.token }), { notes: 0, words: 0, topWords: [] });

    for (const text of ['Alpha beta, alpha!', 'BETA gamma 42', 'alpha delta epsilon zeta']) {
      await t.ok('NoteRpc.add', { text }, { token: owner.token });
    }
    // Another tenant's notes must not count.
    const other = await t.signup();
    await t.ok('NoteRpc.add', { text: 'omega omega omega omega alpha' }, { token: other.token });

    // Words, lower-cased: alpha beta alpha | beta gamma 42 | alpha delta epsilon zeta = 10 words;
    // alpha 3, beta 2, then the ones in locale order: 42, delta, epsilon (gamma and zeta fall off the top 5).
    assert.deepEqual(await t.ok('NoteRpc.stats', {}, { token: owner.token }), {
      notes: 3,
      words: 10,
      topWords: [
        { word: 'alpha', count: 3 },
        { word: 'beta', count: 2 },
        { word: '42', count: 1 },
        { word: 'delta', count: 1 },
        { word: 'epsilon', count: 1 },
      ],
    });
    assert.deepEqual(await t.ok('NoteRpc.stats', {}, { token: other.token }), {
      notes: 1,
      words: 5,
      topWords: [
        { word: 'omega', count: 4 },
        { word: 'alpha', count: 1 },
      ],
    });
  });

  it('answers a throwing worker with INTERNAL and an error id, and logs the cause under that id only', async () => {
    const user = await t.signup();
    const response = await t.call('FaultyWorkRpc.explode', {}, { token: user.token });
    assert.equal(response.status, 500);
    assert.equal(response.body.success, false);
    assert.equal(response.body.data.code, 'INTERNAL');
    const errorId = response.body.data.errorId;
    assert.match(errorId, UUID);
    assert.equal(response.body.data.error, `Internal error (error id ${errorId})`);
    assert.ok(!JSON.stringify(response.body).includes(SECRET_MESSAGE), 'the worker error leaked to the caller');
    assert.ok(!JSON.stringify(response.body).includes('throwing.mjs'), 'the worker path leaked to the caller');

    const lines = t.logs.map((line) => JSON.parse(line)).filter((line) => line.errorId === errorId);
    assert.equal(lines.length, 1, `log lines with the error id: ${JSON.stringify(lines)}`);
    const [line] = lines;
    assert.equal(line.level, 50); // pino's error level
    assert.equal(line.method, 'FaultyWorkRpc.explode');
    assert.ok(JSON.stringify(line.err).includes(SECRET_MESSAGE), `the log lacks the worker's message: ${JSON.stringify(line)}`);
    assert.match(line.err.message, /Worker task ".*throwing\.mjs" failed/);

    // The pool survives a failed task.
    assert.deepEqual(await t.ok('NoteRpc.stats', {}, { token: user.token }), { notes: 0, words: 0, topWords: [] });
  });

  it('loses only the thread of a task that runs out of memory or is stopped at its time limit, then runs the next task', async () => {
    // The limit leaves a new thread time to start on a loaded machine (it counts from when the task is handed over).
    const pool = new WorkerPool({ size: 1, memoryMb: 32, taskTimeoutMs: 2500, logger: t.app.logger });
    try {
      const failure = (task: Promise<unknown>) =>
        task.then(
          () => assert.fail('the task ended'),
          (error: unknown) => (assert.ok(error instanceof WorkerTaskError, String(error)), [error.failure, error.reason]),
        );
      // Its own generous limit: on a loaded machine filling 32 MB can take longer than the pool's 2.5 s.
      assert.deepEqual(await failure(pool.run(HOG_WORKER, {}, { signal: AbortSignal.timeout(60_000) })), ['lost', 'the thread ran out of memory']);
      // A new thread starts for the next task: its own generous limit too, the time to start counts against it.
      const started = { signal: AbortSignal.timeout(60_000) };
      assert.deepEqual(await pool.run(ECHO_WORKER, { after: 'memory' }, started), { after: 'memory' });
      assert.deepEqual(await failure(pool.run(SPIN_WORKER, {})), ['stopped', 'ran longer than 2500 ms']);
      const mine = new AbortController();
      setTimeout(() => mine.abort(new Error('its caller stopped it')), 100);
      assert.deepEqual(await failure(pool.run(SPIN_WORKER, {}, { signal: mine.signal })), ['stopped', 'its caller stopped it']);
      assert.deepEqual(await pool.run(ECHO_WORKER, { after: 'time' }, { signal: AbortSignal.timeout(60_000) }), { after: 'time' });
    } finally {
      await pool.close();
    }
  });

  it('counts a job whose worker runs out of memory as a failed attempt, and gives it up after its retries', async () => {
    const jobs: Jobs = hogs.app.depsOf('faulty-work').jobs;
    const id = (await jobs.enqueue('hog', {}))!;
    const deadline = Date.now() + 30_000;
    let view = await jobs.get('hog', id);
    while (view?.state !== 'dead' && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      view = await jobs.get('hog', id);
    }
    assert.deepEqual([view?.state, view?.attempts], ['dead', 2]);
    assert.match(view!.lastError!, /lost its thread: the thread ran out of memory/);
    // The process and its pool go on.
    assert.deepEqual(await hogs.app.deps.pool.run(ECHO_WORKER, 1), 1);
  });

  it('has WORKERS threads (1 in the harness) and never runs two tasks at once', async () => {
    assert.equal(t.app.config.workers, 1);
    assert.equal(t.app.deps.pool.size, 1);
    // Each task waits up to 150 ms for the second to start beside it; with one thread it never does.
    assert.deepEqual(await probe(t, 2, 2, 150), { threads: 1, mostAtOnce: 1 });
  });

  it('sizes the pool from WORKERS=3 and runs three tasks at once', async () => {
    assert.equal(three.app.config.workers, 3);
    assert.equal(three.app.deps.pool.size, 3);
    assert.deepEqual(await probe(three, 3, 3, 5000), { threads: 3, mostAtOnce: 3 });
  });
});
