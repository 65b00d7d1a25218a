import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MessageChannel } from 'node:worker_threads';
import { pino } from 'pino';
import { createApp, type App } from '../../core/app/app.ts';
import { loadConfig } from '../../core/base/config.ts';
import { WorkerPool } from '../../core/pool/worker-pool.ts';
import interpret, { type RunTask } from '../../plugins/workflow/interpreter.worker.ts';
import { createScratchDatabase } from '../support/database.ts';
import { TEST_MASTER_KEY } from '../support/harness.ts';
import type {
  AuthRpcSignupResult,
  WorkflowRpcExecuteWorkflowResult,
  WorkflowRpcGetInstanceResult,
  WorkflowRpcListInstancesResult,
} from '../../clients/typescript/src/operations.ts';

/**
 * `npm run bench` (fifth part), workflows and the scheduler:
 *   (1) workflow executions per second of a 20-node graph (set and condition
 *       nodes with JSONata expressions): the interpreter in the worker pool,
 *       as the service runs it, against one thread running it in this
 *       process; and executeWorkflow end to end (the run kept in the embedded
 *       database) through the in-process caller;
 *   (1d) fairness: a trivial run of one tenant, p50 and p95 from its request
 *       to its end, while a user of another tenant loops runs whose regular
 *       expression backtracks for ever (BENCH_ATTACKERS at once, each again
 *       as soon as its request gives up), against the aim: p95 under 1 s;
 *   (2) with BENCH_DATABASE_URL (PostgreSQL): the scheduler's firing delay,
 *       p50 and p99 of (fired at − due at), for 1,000 and then 10,000 tasks
 *       (BENCH_TASKS) due at the same moment, against the aims: p99 under
 *       250 ms for 1,000 due at once, under 2 s for 10,000.
 */
const EXECUTIONS = Number(process.env.BENCH_EXECUTIONS ?? 2000);
const END_TO_END = Number(process.env.BENCH_END_TO_END ?? 300);
const ATTACKERS = Number(process.env.BENCH_ATTACKERS ?? 6);
const VICTIM_RUNS = Number(process.env.BENCH_VICTIM_RUNS ?? 20);
const TASK_COUNTS = (process.env.BENCH_TASKS ?? '1000,10000').split(',').map(Number);
const DATABASE_URL = process.env.BENCH_DATABASE_URL || undefined;
const INTERPRETER = fileURLToPath(new URL('../../plugins/workflow/interpreter.worker.ts', import.meta.url));

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((values.length * p) / 100))]!;

/** start, 18 nodes alternating set and condition (arithmetic, strings, a conditional edge each), end: 20 nodes. */
function twentyNodes() {
  const nodes: Record<string, unknown>[] = [{ id: 'start', type: 'start', config: {} }];
  const edges: Record<string, unknown>[] = [];
  for (let index = 0; index < 18; index++) {
    const id = `n${index}`;
    nodes.push(
      index % 2 === 0
        ? {
            id,
            type: 'set',
            config: { values: { total: `($exists(total) ? total : 0) + $args.step * ${index}`, label: `"step ${index} of " & $string($args.step)` } },
          }
        : { id, type: 'condition', config: { expression: `total > ${index * 10}` } },
    );
  }
  nodes.push({ id: 'done', type: 'end', config: { output: '{"total": total, "label": label}' } });
  for (let index = 0; index < nodes.length - 1; index++) {
    const source = nodes[index]!.id as string;
    const target = nodes[index + 1]!.id as string;
    if (source.startsWith('n') && Number(source.slice(1)) % 2 === 1) edges.push({ source, target, condition: '$result or true' });
    edges.push({ source, target });
  }
  return { nodes, edges };
}

async function interpreterThroughput(): Promise<void> {
  const graph = twentyNodes();
  const task = (): { task: RunTask; port: MessagePort } => {
    const { port1, port2 } = new MessageChannel();
    port1.unref();
    return {
      task: {
        nodes: graph.nodes as never,
        edges: graph.edges as never,
        state: { cursor: 'start', variables: {}, args: { step: 3 }, steps: 0 },
        limits: { maxSteps: 1000, timeoutMs: 60_000, maxValueBytes: 1 << 20, maxVariablesBytes: 1 << 20, maxOutputBytes: 1 << 20 },
        clock: new SharedArrayBuffer(24),
        port: port2 as never,
      },
      port: port2 as never,
    };
  };
  const check = (outcome: { status: string }) => {
    if (outcome.status !== 'completed') throw new Error(`the bench graph did not complete: ${JSON.stringify(outcome)}`);
  };

  check(await interpret(task().task));
  let started = performance.now();
  for (let index = 0; index < EXECUTIONS; index++) check(await interpret(task().task));
  const oneThread = EXECUTIONS / ((performance.now() - started) / 1000);

  const size = availableParallelism();
  const pool = new WorkerPool({ size, logger: pino({ level: 'silent' }) });
  const pooled = (count: number) =>
    Promise.all(
      Array.from({ length: count }, async () => {
        const { task: next, port } = task();
        check(await pool.run<{ status: string }>(INTERPRETER, next, { port: port as never }));
      }),
    );
  await pooled(size * 4);
  started = performance.now();
  await pooled(EXECUTIONS);
  const inPool = EXECUTIONS / ((performance.now() - started) / 1000);
  await pool.close();

  console.log(`\nworkflow interpretation, a 20-node graph (set and condition nodes, JSONata), ${EXECUTIONS} executions`);
  console.log(`(1a) one thread                       ${oneThread.toFixed(0).padStart(8)} executions/s`);
  console.log(`(1b) worker pool, ${pool.conversationThreads} threads          ${inPool.toFixed(0).padStart(8)} executions/s`);
  console.log(`1b/1a = ${(inPool / oneThread).toFixed(2)}   (the pool's threads against one; at most ${size}, the cores)`);
}

async function startApp(plugins: string[], databaseUrl?: string, env: Record<string, string> = {}): Promise<App> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-bench-'));
  return createApp({
    config: loadConfig({
      DATA_DIR: dataDir,
      LOG_LEVEL: 'silent',
      WORKFLOW_EXECUTE_WAIT_MS: '60000',
      ...env,
      ...(databaseUrl ? { DATABASE_URL: databaseUrl, MASTER_KEY: TEST_MASTER_KEY } : {}),
    }),
    inMemoryDatabase: !databaseUrl,
    only: plugins,
  });
}

async function signup(app: App) {
  const name = `bench${randomUUID().slice(0, 8)}`;
  const { user, subscriptionId } = await app
    .createCaller(null)
    .call<AuthRpcSignupResult>('AuthRpc.signup', { email: `${name}@example.com`, username: name, password: 'correct horse battery' });
  return { subscriptionId, userId: user._id, role: 'admin' as const, apiKeyId: null, sessionId: null, initialContext: null };
}

async function endToEnd(): Promise<void> {
  const app = await startApp(['auth', 'workflow']);
  try {
    const caller = app.createCaller(await signup(app));
    await caller.call('WorkflowRpc.create', { name: 'Bench', ...twentyNodes() });
    await caller.call('WorkflowRpc.executeWorkflow', { workflowIdentifier: 'Bench', workflowArgs: { step: 3 } });
    const started = performance.now();
    for (let index = 0; index < END_TO_END; index++) {
      const answer = await caller.call<WorkflowRpcExecuteWorkflowResult>('WorkflowRpc.executeWorkflow', {
        workflowIdentifier: 'Bench',
        workflowArgs: { step: 3 },
      });
      if (!('result' in answer) || answer.result.status !== 'completed') throw new Error('the bench workflow did not complete');
    }
    const rate = END_TO_END / ((performance.now() - started) / 1000);
    console.log(
      `(1c) executeWorkflow end to end, embedded database, one caller ${rate.toFixed(0).padStart(6)} executions/s   (the run kept: a row written, read and updated)`,
    );
  } finally {
    await app.close();
  }
}

async function fairness(): Promise<void> {
  // The attacker's requests give up after 2 s, and it sends the next at once.
  const app = await startApp(['auth', 'workflow'], undefined, { WORKFLOW_EXECUTE_WAIT_MS: '2000' });
  try {
    const attacker = app.createCaller(await signup(app));
    const victim = app.createCaller(await signup(app));
    const runaway = '$replace("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", /^(a+)+$/, "x")';
    await attacker.call('WorkflowRpc.create', {
      name: 'Runaway',
      nodes: [
        { id: 'start', type: 'start' },
        { id: 'regex', type: 'set', config: { values: { s: runaway } } },
        { id: 'done', type: 'end' },
      ],
      edges: [
        { source: 'start', target: 'regex' },
        { source: 'regex', target: 'done' },
      ],
    });
    await victim.call('WorkflowRpc.create', {
      name: 'Trivial',
      nodes: [
        { id: 'start', type: 'start' },
        { id: 'done', type: 'end', config: { output: '{"ok": true}' } },
      ],
      edges: [{ source: 'start', target: 'done' }],
    });
    await victim.call('WorkflowRpc.executeWorkflow', { workflowIdentifier: 'Trivial' });
    let attacking = true;
    let refused = 0;
    const loops = Array.from({ length: ATTACKERS }, async () => {
      while (attacking) {
        await attacker.call('WorkflowRpc.executeWorkflow', { workflowIdentifier: 'Runaway' }).catch(async (error: { code?: string }) => {
          if (error.code !== 'RATE_LIMITED') throw error;
          refused++;
          await new Promise((resolve) => setTimeout(resolve, 100));
        });
      }
    });
    // The attacker's first runs hold their threads.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const times: number[] = [];
    for (let index = 0; index < VICTIM_RUNS; index++) {
      const started = performance.now();
      // The answer, or the run it waits on once that ended.
      let answer: { result?: { status: string }; instanceId?: string } = await victim.call<WorkflowRpcExecuteWorkflowResult>('WorkflowRpc.executeWorkflow', {
        workflowIdentifier: 'Trivial',
      });
      while (!answer.result) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        const run = await victim.call<WorkflowRpcGetInstanceResult>('WorkflowRpc.getInstance', { instanceId: answer.instanceId });
        if (run.status !== 'running') answer = { result: run };
      }
      if (answer.result.status !== 'completed') throw new Error(`the victim's run did not complete: ${JSON.stringify(answer)}`);
      times.push(performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    attacking = false;
    await Promise.all(loops);
    // The attacker's runs whose requests gave up go on to their end (each stopped after 6 s) before the app closes.
    while ((await attacker.call<WorkflowRpcListInstancesResult>('WorkflowRpc.listInstances', { status: 'running' })).totalCount > 0)
      await new Promise((resolve) => setTimeout(resolve, 500));
    const p95 = percentile(times, 95);
    console.log(`\nfairness: a trivial run of one tenant while a user of another loops ${ATTACKERS} runaway regular expressions at once, ${VICTIM_RUNS} runs`);
    console.log(
      `(1d) the trivial run, request to end   p50 ${percentile(times, 50).toFixed(0).padStart(5)} ms   p95 ${p95.toFixed(0).padStart(5)} ms   (attacker refused ${refused} times)`,
    );
    console.log(`p95 / 1000 ms aim = ${(p95 / 1000).toFixed(2)}`);
  } finally {
    await app.close();
  }
}

async function firingDelay(baseUrl: string, tasks: number): Promise<void> {
  const scratch = await createScratchDatabase(baseUrl);
  const app = await startApp(['auth', 'scheduler'], scratch.url);
  try {
    const principal = await signup(app);
    const due = new Date(Date.now() + 5000);
    // Written straight into the table: creating 1,000 tasks through the operation would take longer than the 5 s before they are due.
    await app.deps.db.execute(
      `insert into scheduler_task (id, subscription_id, user_id, created_by, authors, name, description, schedule, time_zone, action_type, action_config, context, category, tags, enabled, next_run, last_run, created_at, updated_at)
       select gen_random_uuid(), ?, ?, ?, ?::jsonb, 'Bench ' || n, null, ?, null, 'event', '{"eventName": "bench.fired", "eventData": {}}', '{}', 'user', '{}', true, ?, null, now(), now()
       from generate_series(1, ?) as n`,
      [principal.subscriptionId, principal.userId, principal.userId, JSON.stringify([{ userId: principal.userId }]), `once:${due.toISOString()}`, due, tasks],
    );
    const deadline = Date.now() + 60_000;
    for (;;) {
      const [{ finished }] = await app.deps.db.execute<{ finished: string }>(`select count(*) as finished from scheduler_run where status <> 'running'`);
      if (Number(finished) >= tasks) break;
      if (Date.now() > deadline) throw new Error(`only ${finished} of ${tasks} runs finished in a minute`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const rows = await app.deps.db.execute<{ delay: string; status: string }>(
      `select extract(epoch from fired_at - scheduled_for) * 1000 as delay, status from scheduler_run`,
    );
    const delays = rows.map((row) => Number(row.delay));
    const p99 = percentile(delays, 99);
    console.log(`\nscheduler on PostgreSQL, ${tasks} tasks due at once (event actions), one node, polling every 250 ms`);
    console.log(
      `(2a) firing delay                     p50 ${percentile(delays, 50).toFixed(0).padStart(5)} ms   p99 ${p99.toFixed(0).padStart(5)} ms   (${rows.filter((row) => row.status === 'succeeded').length} succeeded)`,
    );
    const aimMs = tasks <= 1000 ? 250 : 2000;
    console.log(`p99 / ${aimMs} ms aim = ${(p99 / aimMs).toFixed(2)}`);
  } finally {
    await app.close();
    await scratch.drop();
  }
}

await interpreterThroughput();
await endToEnd();
await fairness();
if (DATABASE_URL) for (const tasks of TASK_COUNTS) await firingDelay(DATABASE_URL, tasks);
else console.log('\n(2) scheduler firing delay: set BENCH_DATABASE_URL to a PostgreSQL');
