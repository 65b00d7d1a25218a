import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { callerAt, isRefusal, type Caller } from '../../../test/support/caller.ts';
import { createScratchDatabase, databaseEnv, type ScratchDatabase, TEST_DATABASE_URL } from '../../../test/support/database.ts';
import { eventually, startHttpReceiver } from '../../../test/support/peers.ts';
import { freePort, killLeftoverProcesses, runServer, whenHealthy, type RunningProcess } from '../../../test/support/process.ts';
import { linearGraph, waitingRun } from '../../../test/support/workflows.ts';

/**
 * A member's workflow against the service as a real process: expressions
 * that build a text without end, hold their thread, or make values, variables
 * and outputs over their limits fail their run with a reason, while the
 * process goes on answering; a run that keeps losing its thread (out of
 * memory) or its node (killed) fails after WORKFLOW_MAX_ATTEMPTS, also across restarts.
 */

type Node = Parameters<typeof linearGraph>[0][number];
const linear = (...nodes: Node[]) => linearGraph(nodes);
const setNode = (id: string, values: Record<string, string>): Node => ({ id, type: 'set', config: { values } });

const BOMB = '( $f := function($s, $n) { $n = 0 ? $s : $f($s & $s, $n - 1) }; $f("aaaaaaaaaa", 25) )';

describe('workflow runs within their limits, in a real process', () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-workflow-limits-'));
  let scratch: ScratchDatabase | undefined;
  let server: RunningProcess;
  let base: string;
  let env: Record<string, string>;
  let member: Caller;
  const receiver = startHttpReceiver(() => ({ status: 200, delayMs: 600_000 }));

  const start = async () => {
    server = runServer(env);
    await whenHealthy(server, base);
  };
  let names = 0;
  /** Creates the workflow as the member and runs it; the run's record once it has ended. */
  const runToEnd = async (graph: ReturnType<typeof linearGraph>, timeoutMs = 30_000) => {
    const name = `limits-${++names}`;
    await member.WorkflowRpc.create({ name, ...graph });
    // The run's id: in the answer when it waits or completed, in the refusal's message when it failed.
    const started = await member.WorkflowRpc.executeWorkflow({ workflowIdentifier: name }).then(
      (answer) => ({ answer, instanceId: 'result' in answer ? answer.result.instanceId : answer.instanceId }),
      (error: unknown) => {
        if (!isRefusal(error)) throw error;
        return { answer: { code: error.code, error: error.message }, instanceId: /run ([0-9a-f-]{36})/.exec(error.message)?.[1] };
      },
    );
    const { instanceId } = started;
    assert.ok(instanceId, `no run: ${JSON.stringify(started.answer)}`);
    return eventually(async () => {
      const run = await member.WorkflowRpc.getInstance({ instanceId });
      return ['completed', 'failed', 'cancelled'].includes(run.status) ? run : undefined;
    }, timeoutMs);
  };
  // Given up on only when /health is stuck: a loaded machine may take seconds to answer it.
  const healthy = async () => (await fetch(`${base}/health`, { signal: AbortSignal.timeout(30_000) })).status === 200;

  before(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    if (TEST_DATABASE_URL) scratch = await createScratchDatabase(TEST_DATABASE_URL);
    env = {
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      WORKERS: '1',
      WORKER_MAX_MEMORY_MB: '64',
      WORKFLOW_MAX_ATTEMPTS: '2',
      WORKFLOW_MAX_OUTPUT_BYTES: '100000',
      // The default WORKFLOW_RUN_TIMEOUT_MS (60 s): no test here is about a run's time, and a loaded machine may take
      // seconds over a trivial run. executeWorkflow answers soon; the tests read how a run ended.
      WORKFLOW_EXECUTE_WAIT_MS: '500',
      OUTBOUND_ALLOW_PRIVATE: 'true',
      ...(scratch ? { ...databaseEnv(scratch.url), MASTER_KEY: randomBytes(32).toString('base64') } : {}),
    };
    await start();
    const anonymous = callerAt(base, null);
    await anonymous.AuthRpc.signup({ email: 'owner@example.com', username: 'owner', password: 'correct horse battery' });
    const admin = callerAt(base, { token: (await anonymous.AuthRpc.login({ identifier: 'owner', password: 'correct horse battery' })).token });
    await admin.AdminUserRpc.create({ email: 'member@example.com', username: 'member', password: 'another long password', role: 'user' });
    member = callerAt(base, { token: (await anonymous.AuthRpc.login({ identifier: 'member', password: 'another long password' })).token });
  });
  after(async () => {
    killLeftoverProcesses();
    await (await receiver).close();
    await scratch?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('fails a run whose expression doubles a text without end, and goes on answering', async () => {
    const run = await runToEnd(linear(setNode('bomb', { s: BOMB })));
    assert.equal(run.status, 'failed');
    assert.match(run.error ?? '', /node "bomb".*over 1048576 bytes.*WORKFLOW_MAX_VALUE_BYTES/);
    assert.equal((run.variables as Record<string, unknown>).s, undefined, 'nothing of the text was kept');
    // A text built by one builtin call: stopped by its size when it returns, or by the time limit if it takes that long.
    const padded = await runToEnd(linear(setNode('pad', { s: '$pad("", 1e8)' })));
    assert.equal(padded.status, 'failed');
    assert.match(padded.error ?? '', /node "pad": .*(WORKFLOW_MAX_VALUE_BYTES|ran longer than 5000 ms)/);
    assert.ok(await healthy());
    assert.equal(server.child.exitCode, null);
  });

  it('stops an expression that holds its thread beyond the expression time limit, answering others meanwhile', async () => {
    // A regular expression that backtracks for ever: one builtin call JSONata's own time check cannot interrupt.
    let running = true;
    const run = runToEnd(linear(setNode('regex', { s: '$contains("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", /^(a+)+$/)' }))).finally(() => (running = false));
    const checks: { sent: number; answered: number }[] = [];
    while (running) {
      const sent = Date.now();
      assert.ok(await healthy(), '/health answers while the expression runs');
      checks.push({ sent, answered: Date.now() });
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const { status, error, history } = await run;
    assert.equal(status, 'failed');
    assert.match(error ?? '', /node "regex": an expression ran longer than 5000 ms, and its thread was stopped/);
    // The expression held its thread for the 5 s before its stop: a /health asked and answered in them, however slow
    // the machine, shows the process answering meanwhile.
    const stopped = Date.parse((history as { at: string }[]).at(-1)!.at);
    assert.ok(
      checks.some((check) => check.sent >= stopped - 5000 && check.answered <= stopped),
      `no /health answered while the expression ran: ${JSON.stringify({ stopped, checks })}`,
    );
    // The pool has a thread again: a small run completes.
    assert.equal((await runToEnd(linear(setNode('small', { s: '"ok"' })))).status, 'completed');
  });

  it('fails a run whose variables or output would be larger than allowed, keeping nothing of them', async () => {
    const half = '$join([1..60000].("xxxxxxxxx"))';
    const variables = await runToEnd(linear(setNode('a', { a: half }), setNode('b', { b: half })));
    assert.equal(variables.status, 'failed');
    assert.match(variables.error ?? '', /node "b": its variables would take over 1048576 bytes.*WORKFLOW_MAX_VARIABLES_BYTES/);
    assert.equal((variables.variables as Record<string, unknown>).b, undefined);

    const output = await runToEnd(linearGraph([], '$join([1..20000].("xxxxxxxxx"))'));
    assert.equal(output.status, 'failed');
    assert.match(output.error ?? '', /node "done": its output would take over 100000 bytes.*WORKFLOW_MAX_OUTPUT_BYTES/);
    assert.equal(output.output, null);
  });

  it('fails a run whose thread runs out of memory each time after WORKFLOW_MAX_ATTEMPTS, and the process lives on', async () => {
    const run = await runToEnd(linear(setNode('hog', { n: '$count([1..99999].{"a": [1..2000]})' })), 60_000);
    assert.equal(run.status, 'failed');
    assert.match(run.error ?? '', /stopped 2 times on its way from node "start" \(its thread was lost: the thread ran out of memory\).*WORKFLOW_MAX_ATTEMPTS/);
    assert.ok(await healthy());
    assert.equal(server.child.exitCode, null);
    assert.equal((await runToEnd(linear(setNode('small', { s: '"ok"' })))).status, 'completed');
  });

  it('counts a run whose node was killed under it, and fails it on the restart after WORKFLOW_MAX_ATTEMPTS', async () => {
    const { url, requests } = await receiver;
    const failedBefore = await member.WorkflowRpc.listInstances({ status: 'failed' });
    await member.WorkflowRpc.create({ name: 'hangs', ...linear({ id: 'call', type: 'http', config: { url: `${url}/hang`, method: 'GET' } }) });
    const instanceId = waitingRun(await member.WorkflowRpc.executeWorkflow({ workflowIdentifier: 'hangs' }));
    for (let kill = 1; kill <= 2; kill++) {
      // Its node dies in the middle of the http node; the next node takes the run up once its lease has run out.
      await eventually(() => (requests.filter((request) => request.path === '/hang').length === kill ? true : undefined), 40_000);
      server.child.kill('SIGKILL');
      await server.exited(30_000);
      // A run's lease (15 s, renewed while its node runs it) runs out.
      await new Promise((resolve) => setTimeout(resolve, 16_000));
      await start();
    }
    const run = await eventually(async () => {
      const instance = await member.WorkflowRpc.getInstance({ instanceId });
      return instance.status === 'failed' ? instance : undefined;
    }, 40_000);
    assert.match(run.error ?? '', /stopped 2 times on its way from node "start" \(its node stopped\).*WORKFLOW_MAX_ATTEMPTS/);
    assert.equal(requests.filter((request) => request.path === '/hang').length, 2, 'not started a third time');
    // The runs that failed before the restarts stayed failed: none was run again.
    const failedAfter = await member.WorkflowRpc.listInstances({ status: 'failed' });
    assert.equal(failedAfter.totalCount, failedBefore.totalCount + 1);
    assert.ok(await healthy());
  });
});
