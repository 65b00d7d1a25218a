import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { EXPRESSION_LIMITS } from '../interpreter-limits.ts';
import { callerAt, isRefusal, type Caller } from '../../../test/support/caller.ts';
import { createScratchDatabase, databaseEnv, type ScratchDatabase, TEST_DATABASE_URL } from '../../../test/support/database.ts';
import { eventually } from '../../../test/support/peers.ts';
import { freePort, killLeftoverProcesses, runServer, whenHealthy, type RunningProcess } from '../../../test/support/process.ts';
import { linearGraph } from '../../../test/support/workflows.ts';

/**
 * One member of tenant A loops runs whose regular expression backtracks for
 * ever (each holds its thread until it is stopped, 1 s past the 5 s an
 * expression may take), several at once and again as soon as its requests
 * give up, on a service with two worker threads per core as a 2-core machine
 * has. Another tenant's trivial runs, and those of another user of tenant A,
 * still complete at once: the attacker runs in its own line, within its caps,
 * and past its queue is refused at once.
 */

const RUNAWAY = '$replace("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", /^(a+)+$/, "x")';
const ATTACKERS = 6;
const VICTIM_RUNS = 20;
/** The attacker's queue in this file (WORKFLOW_QUEUED_PER_USER), small so that it fills while the test runs. */
const QUEUED_PER_USER = 4;

/** The nearest-rank percentile: of 20 values, p95 is the 19th smallest. */
const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.ceil((values.length * p) / 100) - 1]!;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('fair workflow runs, in a real process', () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-workflow-fairness-'));
  let scratch: ScratchDatabase | undefined;
  let server: RunningProcess;
  let base: string;
  let attacker: Caller;
  let colleague: Caller;
  let otherTenant: Caller;

  /** Signs up a user with a team of their own and logs them in: their calls over HTTP. */
  const signup = async (name: string) => {
    const anonymous = callerAt(base, null);
    await anonymous.AuthRpc.signup({ email: `${name}@example.com`, username: name, password: 'correct horse battery' });
    return callerAt(base, { token: (await anonymous.AuthRpc.login({ identifier: name, password: 'correct horse battery' })).token });
  };

  before(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    if (TEST_DATABASE_URL) scratch = await createScratchDatabase(TEST_DATABASE_URL);
    server = runServer({
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'error',
      WORKERS: '2',
      // The attacker's requests give up early and it sends the next at once: its runs go on, queued.
      WORKFLOW_EXECUTE_WAIT_MS: '2000',
      WORKFLOW_QUEUED_PER_USER: String(QUEUED_PER_USER),
      ...(scratch ? { ...databaseEnv(scratch.url), MASTER_KEY: randomBytes(32).toString('base64') } : {}),
    });
    await whenHealthy(server, base);
    const owner = await signup('owner-a');
    await owner.AdminUserRpc.create({ email: 'member-a@example.com', username: 'member-a', password: 'another long password', role: 'user' });
    attacker = callerAt(base, { token: (await callerAt(base, null).AuthRpc.login({ identifier: 'member-a', password: 'another long password' })).token });
    colleague = owner;
    otherTenant = await signup('owner-b');
    await attacker.WorkflowRpc.create({ name: 'runaway', ...linearGraph([{ id: 'regex', type: 'set', config: { values: { s: RUNAWAY } } }]) });
    for (const user of [colleague, otherTenant]) await user.WorkflowRpc.create({ name: 'trivial', ...linearGraph([], '{"ok": true}') });
  });
  after(async () => {
    killLeftoverProcesses();
    await scratch?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("holds other tenants' and users' trivial runs far under the expression time limit while a member loops runaway expressions", async (t) => {
    let attacking = true;
    const attack = { accepted: 0, refused: [] as { status: number; code: string; error: string }[] };
    const loops = Array.from({ length: ATTACKERS }, async () => {
      while (attacking) {
        // Whatever the service answers counts as accepted but a 429 (a run that fails is a run made); a call that reaches nobody ends the loop.
        const refusal = await attacker.WorkflowRpc.executeWorkflow({ workflowIdentifier: 'runaway' }).then(
          () => undefined,
          (error: unknown) => {
            if (isRefusal(error)) return error;
            throw error;
          },
        );
        if (refusal?.status === 429) {
          attack.refused.push({ status: refusal.status, code: refusal.code, error: refusal.message });
          await pause(250);
          continue;
        }
        attack.accepted++;
      }
    });
    // The attack under way: the attacker's first runs hold their threads.
    await eventually(async () => ((await attacker.WorkflowRpc.listInstances({ status: 'running' })).totalCount >= 2 ? true : undefined));

    /** A trivial run from its request to its end (polled when the request gave up first, as long as `eventually` waits). */
    const timed = async (user: Caller) => {
      const started = performance.now();
      const answer = await user.WorkflowRpc.executeWorkflow({ workflowIdentifier: 'trivial' });
      const run =
        'result' in answer
          ? answer.result
          : await eventually(async () => {
              const instance = await user.WorkflowRpc.getInstance({ instanceId: answer.instanceId });
              return instance.status === 'running' ? undefined : instance;
            });
      assert.deepEqual([run.status, run.output], ['completed', { ok: true }]);
      return performance.now() - started;
    };
    const times = { otherTenant: [] as number[], colleague: [] as number[] };
    let stoppedMeanwhile: number;
    try {
      // Spread over more than one stop of the attacker's threads (each holds its thread 6 s).
      for (let index = 0; index < VICTIM_RUNS; index++) {
        times.otherTenant.push(await timed(otherTenant));
        times.colleague.push(await timed(colleague));
        await pause(250);
      }
      stoppedMeanwhile = (await attacker.WorkflowRpc.listInstances({ status: 'failed' })).totalCount;
    } finally {
      attacking = false;
      await Promise.allSettled(loops);
    }

    const p95 = { otherTenant: percentile(times.otherTenant, 95), colleague: percentile(times.colleague, 95) };
    t.diagnostic(
      `trivial runs during the attack, p95 (p50): another tenant ${p95.otherTenant.toFixed(0)} ms (${percentile(times.otherTenant, 50).toFixed(0)} ms), ` +
        `another user of the tenant ${p95.colleague.toFixed(0)} ms (${percentile(times.colleague, 50).toFixed(0)} ms); ` +
        `attacker: ${attack.accepted} runs accepted, ${stoppedMeanwhile} stopped for time meanwhile, ${attack.refused.length} refused`,
    );
    // The real service holds p95 under 1 s; here the bound is the time one runaway expression holds its thread, so
    // that a loaded machine does not fail the test while a victim waiting behind the attacker's runs still does.
    assert.ok(p95.otherTenant < EXPRESSION_LIMITS.timeout, `another tenant's p95 ${p95.otherTenant} ms`);
    assert.ok(p95.colleague < EXPRESSION_LIMITS.timeout, `another user's p95 ${p95.colleague} ms`);

    // The attack was real: its runs were stopped for time while the others ran, and past its queue it was refused.
    assert.ok(stoppedMeanwhile >= 1, `the attacker's runs stopped for time meanwhile: ${stoppedMeanwhile}`);
    assert.ok(attack.refused.length >= 1, 'the attacker was never refused');
    for (const refusal of attack.refused) {
      assert.equal(refusal.code, 'RATE_LIMITED');
      assert.match(refusal.error, new RegExp(`${QUEUED_PER_USER} runs of yours wait for a thread already \\(WORKFLOW_QUEUED_PER_USER\\)`));
    }
    // A refused run was never made; those accepted whose requests gave up go on to their end in the attacker's line.
    const runs = await attacker.WorkflowRpc.listInstances({ pageSize: 100 });
    assert.equal(runs.totalCount, attack.accepted);
    await eventually(
      async () => ((await attacker.WorkflowRpc.listInstances({ status: 'running' })).totalCount === 0 ? true : undefined),
      (QUEUED_PER_USER + ATTACKERS) * (EXPRESSION_LIMITS.timeout + 3000),
    );
    const failed = await attacker.WorkflowRpc.listInstances({ status: 'failed', pageSize: 100 });
    assert.equal(failed.totalCount, attack.accepted);
    for (const run of failed.data) assert.match(run.error ?? '', /node "regex": an expression ran longer than 5000 ms, and its thread was stopped/);
  });
});
