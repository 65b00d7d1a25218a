import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BusEvent } from 'rpc-service/plugin';
import type { SchedulerRpcCreateParams } from '../../../test/support/caller.ts';
import { refused, type Who } from '../../../test/support/caller.ts';
import { createScratchDatabase, TEST_DATABASE_URL } from '../../../test/support/database.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { startModelPeer } from '../../../test/support/model-peer.ts';
import { eventually } from '../../../test/support/peers.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

/** A `once:` schedule this many milliseconds from now. */
const onceIn = (ms: number) => `once:${new Date(Date.now() + ms).toISOString()}`;
const runsOf = async (t: TestApp, session: Who, taskId: string) => (await t.as(session).SchedulerRpc.listRuns({ taskId, pageSize: 200 })).data;
const finishedRuns = (t: TestApp, session: Who, taskId: string, count = 1) =>
  eventually(async () => {
    const runs = await runsOf(t, session, taskId);
    return runs.length >= count && runs.every((run) => run.status !== 'running') ? runs : undefined;
  });
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('SchedulerRpc: firing', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Member;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  const events: BusEvent[] = [];
  const create = (session: Who, taskConfig: SchedulerRpcCreateParams['taskConfig']) => t.as(session).SchedulerRpc.create({ taskConfig });

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'scheduler', 'workflow', 'agent-config'] });
    t.app.deps.bus.subscribe('*', (event) => void events.push(event));
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    stranger = await t.signup();
  });
  after(() => t.close());

  it('fires a once: task once, raising its event with its data, then keeps nextRun null', async () => {
    const taskId = await create(member, {
      name: 'Launch',
      schedule: onceIn(1000),
      actionType: 'event',
      actionConfig: { eventName: 'launch.started', eventData: { wave: 1 } },
    });
    const [run] = await finishedRuns(t, member, taskId);
    assert.deepEqual([run.status, run.taskName, run.actionType, run.attempts, run.error], ['succeeded', 'Launch', 'event', 1, null]);
    assert.ok(run.delayMs >= 0 && run.delayMs < 2000, `fired ${run.delayMs} ms late`);
    const raised = events.filter((event) => event.name === 'launch.started');
    assert.equal(raised.length, 1);
    assert.deepEqual([raised[0]!.payload, raised[0]!.subscriptionId], [{ wave: 1 }, admin.subscriptionId]);
    const task = await t.as(member).SchedulerRpc.findById({ taskId });
    // lastRun is when the node took the task, firedAt when its action started: no later.
    assert.equal(task.nextRun, null);
    assert.ok(
      Date.parse(task.lastRun ?? '') <= Date.parse(run.firedAt) && Date.parse(run.firedAt) - Date.parse(task.lastRun ?? '') < 1000,
      `${task.lastRun} ${run.firedAt}`,
    );
    await pause(1200);
    assert.equal((await runsOf(t, member, taskId)).length, 1, 'fired once');

    // The service's own events are not a tenant's to raise.
    const own = await refused(
      create(member, { name: 'Spoof', schedule: '* * * * *', actionType: 'event', actionConfig: { eventName: 'workflow.completed' } }),
      'VALIDATION_ERROR',
    );
    assert.equal(own.issues?.[0]?.path, 'taskConfig.actionConfig.eventName');
  });

  it('does not fire a disabled task, and fires one catch-up run for a task whose runs were missed', async () => {
    const disabled = await create(member, {
      name: 'Off',
      schedule: onceIn(500),
      enabled: false,
      actionType: 'event',
      actionConfig: { eventName: 'off.fired' },
    });
    const missed = await create(member, { name: 'Hourly', schedule: '0 * * * *', actionType: 'event', actionConfig: { eventName: 'hourly.tick' } });
    // As after a downtime: the task was due three hours ago and has not fired since.
    await t.app.deps.db.execute(`update scheduler_task set next_run = now() - interval '3 hours' where id = ?`, [missed]);
    const runs = await finishedRuns(t, member, missed);
    await pause(1000);
    assert.equal((await runsOf(t, member, missed)).length, 1, 'one catch-up run, not three');
    assert.ok(runs[0].delayMs > 3 * 3600 * 1000 - 60_000);
    const next = new Date((await t.as(member).SchedulerRpc.findById({ taskId: missed })).nextRun!);
    assert.ok(next > new Date() && next.getUTCMinutes() === 0, 'the next hour from now');
    assert.equal((await runsOf(t, member, disabled)).length, 0);
    assert.ok(!events.some((event) => event.name === 'off.fired'));
  });

  it('calls an operation as the task’s user with that user’s rights, never outside their subscription', async () => {
    const adminTask = await create(admin, { name: 'Admin task', schedule: '0 0 1 1 *', actionType: 'event', actionConfig: { eventName: 'new.year' } });
    const strangerTask = await create(stranger, { name: 'Stranger task', schedule: '0 0 1 1 *', actionType: 'event', actionConfig: { eventName: 'new.year' } });
    const listing = await create(member, {
      name: 'List tasks',
      schedule: onceIn(300),
      actionType: 'rpc',
      actionConfig: { method: 'SchedulerRpc.findById', params: { taskId: adminTask } },
    });
    const forbidden = await create(member, {
      name: 'Disable admin',
      schedule: onceIn(300),
      actionType: 'rpc',
      actionConfig: { method: 'SchedulerRpc.disable', params: { taskId: adminTask } },
    });
    const outside = await create(member, {
      name: 'Peek',
      schedule: onceIn(300),
      actionType: 'rpc',
      actionConfig: { method: 'SchedulerRpc.disable', params: { taskId: strangerTask } },
    });

    const [listed] = await finishedRuns(t, member, listing);
    assert.equal(listed.status, 'succeeded');
    assert.equal((listed.result as { name: string }).name, 'Admin task');
    const [refusedRun] = await finishedRuns(t, member, forbidden);
    assert.deepEqual([refusedRun.status, refusedRun.error], ['failed', 'FORBIDDEN: Only its creator, admins and staff may change this task']);
    const [notFound] = await finishedRuns(t, member, outside);
    assert.equal(notFound.status, 'failed');
    assert.match(notFound.error ?? '', /^NOT_FOUND/);
    assert.equal((await t.as(admin).SchedulerRpc.findById({ taskId: adminTask })).enabled, true);
    assert.equal((await t.as(stranger).SchedulerRpc.findById({ taskId: strangerTask })).enabled, true);
    // Runs are the subscription's: a stranger sees none of them.
    assert.equal((await t.as(stranger).SchedulerRpc.listRuns({ taskId: listing })).totalCount, 0);
  });

  it("shows a run's result only to the user the task acts as and to admins", async () => {
    const peek = await create(admin, {
      name: 'Admin peek',
      schedule: onceIn(300),
      actionType: 'rpc',
      actionConfig: { method: 'AuthRpc.getSession', params: {} },
    });
    const [run] = await finishedRuns(t, admin, peek);
    assert.equal((run.result as { user: { _id: string } }).user._id, admin.user._id);
    assert.equal((await t.as(member).SchedulerRpc.listRuns({ taskId: peek })).totalCount, 0);
    const everything = await t.as(member).SchedulerRpc.listRuns({ pageSize: 200 });
    assert.ok(everything.data.length > 0 && everything.data.every((listed) => listed._id !== run._id), "the member's own runs, not the admin's");
    // An admin reads the runs of every task of the subscription.
    const mine = everything.data[0]._id;
    assert.ok((await t.as(admin).SchedulerRpc.listRuns({ pageSize: 200 })).data.some((listed) => listed._id === mine));
  });

  it('fires again a run whose node stopped, and fails it once it was fired SCHEDULER_MAX_ATTEMPTS times', async () => {
    const taskId = await create(member, { name: 'Crashy', schedule: onceIn(200), actionType: 'event', actionConfig: { eventName: 'crashy.fired' } });
    const [run] = await finishedRuns(t, member, taskId);
    const { schedulerRunner } = t.app.depsOf('scheduler');
    // As if its node had died mid-action each time it was fired: still running, long past its lease.
    const stalled = (attempts: number) =>
      t.app.deps.db.execute(`update scheduler_run set status = 'running', finished_at = null, attempts = ?, fired_at = now() - interval '1 day' where id = ?`, [
        attempts,
        run._id,
      ]);
    // Taken up by this call or by the scheduled recovery job, whichever comes first.
    await stalled(2);
    await schedulerRunner.recover();
    const again = await eventually(async () => {
      const [latest] = await runsOf(t, member, taskId);
      return latest.status === 'succeeded' && latest.attempts === 3 ? latest : undefined;
    });
    assert.equal(again._id, run._id);
    await stalled(3);
    await schedulerRunner.recover();
    const given = await eventually(async () => {
      const [latest] = await runsOf(t, member, taskId);
      return latest.status === 'failed' ? latest : undefined;
    });
    assert.match(given.error ?? '', /its node stopped each of the 3 times it was fired.*SCHEDULER_MAX_ATTEMPTS/);
    await pause(500);
    assert.equal(events.filter((event) => event.name === 'crashy.fired').length, 2, 'not fired a third time');
  });

  it('runs a workflow, and records a failure for an aiMessage when no AI provider is configured', async () => {
    await t.as(member).WorkflowRpc.create({
      name: 'Greeter',
      nodes: [
        { id: 'start', type: 'start' },
        { id: 'done', type: 'end', config: { output: '"Hello " & $args.name' } },
      ],
      edges: [{ source: 'start', target: 'done' }],
    });
    const workflowTask = await create(member, {
      name: 'Greet',
      schedule: onceIn(300),
      actionType: 'workflow',
      actionConfig: { workflowIdentifier: 'Greeter', workflowArgs: { name: 'Ada' } },
    });
    const [greeted] = await finishedRuns(t, member, workflowTask);
    assert.equal(greeted.status, 'succeeded');
    assert.equal((greeted.result as { result: { output: unknown } }).result.output, 'Hello Ada');

    await t.as(member).AgentConfigRpc.create({ name: 'Closer', model: 'gpt-4o-mini', promptText: 'You close deals.' });
    const aiTask = await create(member, {
      name: 'Nudge',
      schedule: onceIn(300),
      actionType: 'aiMessage',
      actionConfig: { agentName: 'Closer', message: 'Any news?' },
    });
    const [unanswered] = await finishedRuns(t, member, aiTask);
    assert.equal(unanswered.status, 'failed');
    assert.match(unanswered.error ?? '', /^FEATURE_UNAVAILABLE/);
    const nobody = await create(member, {
      name: 'Nobody',
      schedule: onceIn(300),
      actionType: 'aiMessage',
      actionConfig: { agentName: 'Ghost', message: 'Hello?' },
    });
    assert.equal((await finishedRuns(t, member, nobody))[0].error, 'NOT_FOUND: No agent named Ghost');
  });
});

describe('SchedulerRpc: aiMessage with a provider', () => {
  it('asks the agent’s model and stores the answer as a notification for the task’s user', async () => {
    const peer = await startModelPeer();
    const t = await startTestApp({
      withNotes: false,
      plugins: ['auth', 'scheduler', 'agent-config', 'notification'],
      env: { AI_CATALOGUE_FILE: peer.catalogueFile, OUTBOUND_ALLOW_PRIVATE: 'true' },
    });
    const answered: BusEvent[] = [];
    t.app.deps.bus.subscribe('notification.created', (event) => void answered.push(event));
    try {
      const user = await t.signup();
      await t.as(user).AgentConfigRpc.create({ name: 'Closer', model: 'peer-chat', promptText: 'You close deals.' });
      const taskId = await t.as(user).SchedulerRpc.create({
        taskConfig: { name: 'Nudge', schedule: onceIn(300), actionType: 'aiMessage', actionConfig: { agentName: 'Closer', message: 'Any news?' } },
      });
      const [run] = await finishedRuns(t, user, taskId);
      assert.deepEqual([run.status, run.result], ['succeeded', { agentName: 'Closer', answer: 'You said: Any news?' }]);
      assert.deepEqual(peer.chats.at(-1), [
        { role: 'system', content: 'You close deals.' },
        { role: 'user', content: 'Any news?' },
      ]);
      const [notification] = (await t.as(user).NotificationRpc.getData({})).data;
      assert.deepEqual(
        [notification.title, notification.message, notification.source, notification.data],
        ['Closer answered (Nudge)', 'You said: Any news?', 'scheduler', { taskId, agentName: 'Closer' }],
      );
      assert.deepEqual([(answered[0]?.payload as { _id: string })._id, answered[0]?.userIds], [notification._id, [user.user._id]]);
    } finally {
      await t.close();
      await peer.close();
    }
  });
});

describe('SchedulerRpc: two nodes on one PostgreSQL', { skip: TEST_DATABASE_URL ? false : 'needs TEST_DATABASE_URL' }, () => {
  it('fires each of 200 tasks due at once exactly once', async () => {
    const scratch = await createScratchDatabase(TEST_DATABASE_URL!);
    const options = { withNotes: false, plugins: ['auth', 'scheduler'], databaseUrl: scratch.url };
    const first = await startTestApp(options);
    const second = await startTestApp(options);
    try {
      const user = await first.signup();
      const due = onceIn(4000);
      const ids: string[] = [];
      for (let index = 0; index < 200; index++) {
        ids.push(
          await first.as(user).SchedulerRpc.create({
            taskConfig: { name: `Task ${index}`, schedule: due, actionType: 'event', actionConfig: { eventName: 'batch.fired', eventData: { index } } },
          }),
        );
      }
      const runs = await eventually(async () => {
        const listed = (await second.as(user).SchedulerRpc.listRuns({ pageSize: 200 })).data;
        return listed.length >= 200 && listed.every((run) => run.status === 'succeeded') ? listed : undefined;
      });
      await pause(1500);
      const [{ count }] = await first.app.deps.db.execute<{ count: string }>('select count(*) as count from scheduler_run');
      assert.equal(Number(count), 200, 'no task fired twice');
      assert.deepEqual(new Set(runs.map((run) => run.taskId)), new Set(ids), 'every task fired');
    } finally {
      await first.close();
      await second.close();
      await scratch.drop();
    }
  });
});
