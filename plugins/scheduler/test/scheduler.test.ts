import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { SchedulerRpcCreateParams, SchedulerRpcGetDataParams } from '../../../test/support/caller.ts';
import { refused, type Who } from '../../../test/support/caller.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

type TaskConfig = SchedulerRpcCreateParams['taskConfig'];

const eventTask = (extra: Partial<TaskConfig> = {}): TaskConfig => ({
  name: 'Morning digest',
  schedule: '0 9 * * 1-5',
  actionType: 'event',
  actionConfig: { eventName: 'digest.ready', eventData: { kind: 'daily' } },
  ...extra,
});

describe('SchedulerRpc: tasks', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Member;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  const create = async (session: Who, taskConfig: TaskConfig) => t.as(session).SchedulerRpc.create({ taskConfig });
  const find = (session: Who, taskId: string) => t.as(session).SchedulerRpc.findById({ taskId });

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'scheduler'] });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    stranger = await t.signup();
  });
  after(() => t.close());

  it('creates a task answering its id, with nextRun from the cron pattern in its time zone, and a task’s fields', async () => {
    const id = await create(member, eventTask({ timeZone: 'America/New_York', tags: ['digest'], description: 'Weekday mornings' }));
    assert.match(id, /^[0-9a-f-]{36}$/);
    const task = await find(member, id);
    assert.deepEqual(Object.keys(task).sort(), [
      '_id',
      'actionConfig',
      'actionType',
      'category',
      'context',
      'createdAt',
      'createdBy',
      'description',
      'enabled',
      'lastRun',
      'name',
      'nextRun',
      'schedule',
      'tags',
      'timeZone',
      'updatedAt',
    ]);
    assert.deepEqual(
      [task.name, task.schedule, task.timeZone, task.actionType, task.actionConfig, task.category, task.tags, task.enabled, task.lastRun],
      [
        'Morning digest',
        '0 9 * * 1-5',
        'America/New_York',
        'event',
        { eventName: 'digest.ready', eventData: { kind: 'daily' } },
        'user',
        ['digest'],
        true,
        null,
      ],
    );
    assert.deepEqual(task.context, { userId: member.user._id, subscriptionId: admin.subscriptionId });
    // 09:00 in New York on a weekday: 13:00 or 14:00 UTC, within the coming four days.
    const next = new Date(task.nextRun!);
    assert.ok(next > new Date() && next.getTime() - Date.now() < 4 * 24 * 3600 * 1000);
    assert.ok([13, 14].includes(next.getUTCHours()) && next.getUTCMinutes() === 0, String(task.nextRun));
    assert.ok(next.getUTCDay() >= 1 && next.getUTCDay() <= 5);

    const once = await find(member, await create(member, eventTask({ name: 'Launch', schedule: 'once:2031-05-01T08:30:00Z', category: 'campaign' })));
    assert.deepEqual([once.nextRun, once.category], ['2031-05-01T08:30:00.000Z', 'campaign']);
  });

  it('refuses invalid schedules, time zones and action configs with VALIDATION_ERROR', async () => {
    for (const [taskConfig, path, message] of [
      [eventTask({ schedule: '61 * * * *' }), 'taskConfig.schedule', /not a cron pattern/],
      [eventTask({ schedule: 'every morning' }), 'taskConfig.schedule', /not a cron pattern/],
      [eventTask({ schedule: 'once:2031-05-01 08:30' }), 'taskConfig.schedule', /once:<ISO 8601 UTC time>/],
      [eventTask({ schedule: 'once:2031-05-01T08:30:00+02:00' }), 'taskConfig.schedule', /UTC/],
      [eventTask({ timeZone: 'Mars/Olympus' }), 'taskConfig.timeZone', /not an IANA time zone/],
      [eventTask({ actionType: 'email' as never }), 'taskConfig.actionType', /one of event, rpc, workflow, aiMessage/],
      [eventTask({ actionConfig: {} }), 'taskConfig.actionConfig.eventName', /event: /],
      [eventTask({ actionType: 'rpc', actionConfig: { method: 'not a method' } }), 'taskConfig.actionConfig.method', /Group\.operation/],
      [eventTask({ actionType: 'workflow', actionConfig: { workflowArgs: {} } }), 'taskConfig.actionConfig.workflowIdentifier', /workflow: /],
      [
        eventTask({ actionType: 'aiMessage', actionConfig: { agentName: 'Closer', message: '' } }),
        'taskConfig.actionConfig.message',
        /aiMessage: message must not be empty/,
      ],
      [eventTask({ category: 'misc' as never }), 'taskConfig.category', /one of system, user, campaign, automation/],
      [eventTask({ name: '' }), 'taskConfig.name', /must not be empty/],
    ] as const) {
      const error = await refused(t.as(admin).SchedulerRpc.create({ taskConfig }), 'VALIDATION_ERROR', JSON.stringify(taskConfig));
      assert.equal(error.issues?.[0]?.path, path, JSON.stringify(error.issues));
      assert.match(error.issues?.[0]?.message ?? '', message);
    }
    assert.equal((await t.as(admin).SchedulerRpc.getData({ filter: { name: 'Morning digest', userId: admin.user._id } })).totalCount, 0, 'nothing was saved');
  });

  it('updates, disables (no next run), enables (next run from now) and deletes, answering true', async () => {
    const id = await create(admin, eventTask());
    assert.equal(await t.as(admin).SchedulerRpc.update({ taskId: id, updatedConfig: { schedule: '30 6 * * *', name: 'Early digest' } }), true);
    let task = await find(admin, id);
    assert.deepEqual(
      [task.name, task.schedule, new Date(task.nextRun!).getUTCHours(), new Date(task.nextRun!).getUTCMinutes()],
      ['Early digest', '30 6 * * *', 6, 30],
    );

    assert.equal(await t.as(admin).SchedulerRpc.disable({ taskId: id }), true);
    task = await find(admin, id);
    assert.deepEqual([task.enabled, task.nextRun], [false, null]);
    assert.equal(await t.as(admin).SchedulerRpc.enable({ taskId: id }), true);
    task = await find(admin, id);
    assert.equal(task.enabled, true);
    assert.ok(new Date(task.nextRun!) > new Date());

    const bad = await refused(t.as(admin).SchedulerRpc.update({ taskId: id, updatedConfig: { timeZone: 'Nowhere/Special' } }), 'VALIDATION_ERROR');
    assert.equal(bad.issues?.[0]?.path, 'updatedConfig.timeZone');
    const mismatched = await refused(
      t.as(admin).SchedulerRpc.update({ taskId: id, updatedConfig: { actionType: 'rpc' } }),
      'VALIDATION_ERROR',
      'a new action type needs its own config',
    );
    assert.equal(mismatched.issues?.[0]?.path, 'updatedConfig.actionConfig.method', 'a new action type needs its own config');
    assert.equal((await find(admin, id)).schedule, '30 6 * * *', 'a refused update changes nothing');
    await t.as(admin).SchedulerRpc.update({ taskId: id, updatedConfig: { actionType: 'rpc', actionConfig: { method: 'AuthRpc.whoAmI' } } });
    assert.deepEqual((await find(admin, id)).actionConfig, { method: 'AuthRpc.whoAmI', params: {} });

    assert.equal(await t.as(admin).SchedulerRpc.delete({ taskId: id }), true);
    await refused(t.as(admin).SchedulerRpc.findById({ taskId: id }), 'NOT_FOUND');
  });

  it('acts as the caller; only admins name another user of the subscription; never another subscription', async () => {
    const forMember = await create(admin, eventTask({ name: 'For member', context: { userId: member.user._id, serviceCode: 'crm', projectId: 'p-1' } }));
    assert.deepEqual((await find(admin, forMember)).context, {
      userId: member.user._id,
      subscriptionId: admin.subscriptionId,
      serviceCode: 'crm',
      projectId: 'p-1',
    });
    await refused(create(member, eventTask({ context: { userId: admin.user._id } })), 'FORBIDDEN');
    const outsider = await refused(create(admin, eventTask({ context: { userId: stranger.user._id } })), 'VALIDATION_ERROR');
    assert.equal(outsider.issues?.[0]?.path, 'taskConfig.context.userId');
    const otherSubscription = await refused(create(admin, eventTask({ context: { subscriptionId: stranger.subscriptionId } })), 'VALIDATION_ERROR');
    assert.equal(otherSubscription.issues?.[0]?.path, 'taskConfig.context.subscriptionId');

    // Members change their own tasks only; strangers see none of them.
    const adminTask = await create(admin, eventTask({ name: 'Admin task' }));
    await refused(t.as(member).SchedulerRpc.disable({ taskId: adminTask }), 'FORBIDDEN');
    const strangers = t.as(stranger).SchedulerRpc;
    for (const method of ['findById', 'enable', 'disable', 'delete'] as const) {
      await refused(strangers[method]({ taskId: adminTask }), 'NOT_FOUND', `SchedulerRpc.${method}`);
    }
    await refused(strangers.update({ taskId: adminTask, updatedConfig: { name: 'x' } }), 'NOT_FOUND');
    assert.equal((await t.as(stranger).SchedulerRpc.getData({})).totalCount, 0);
  });

  it('lists with document-store filters, sort and paging', async () => {
    const tenant = await t.signup();
    await create(tenant, eventTask({ name: 'Alpha', tags: ['daily'], category: 'system' }));
    await create(tenant, eventTask({ name: 'beta', tags: ['weekly'], enabled: false }));
    await create(tenant, eventTask({ name: 'Gamma', tags: ['daily', 'ops'], schedule: 'once:2030-01-01T00:00:00Z' }));
    const names = async (params: SchedulerRpcGetDataParams) => (await t.as(tenant).SchedulerRpc.getData(params)).data.map((task) => task.name);
    assert.deepEqual(await names({ sort: { name: 1 } }), ['Alpha', 'Gamma', 'beta']);
    assert.deepEqual(await names({ filter: { name: { $regex: '^(alpha|beta)$', $options: 'i' } }, sort: { name: 1 } }), ['Alpha', 'beta']);
    assert.deepEqual(await names({ filter: { tags: 'daily' }, sort: { name: -1 } }), ['Gamma', 'Alpha']);
    assert.deepEqual(await names({ filter: { enabled: false } }), ['beta']);
    assert.deepEqual(await names({ filter: { nextRun: { $gt: '2029-06-01T00:00:00Z' } } }), ['Gamma']);
    assert.deepEqual(await names({ filter: { category: 'system' } }), ['Alpha']);
    const page = await t.as(tenant).SchedulerRpc.getData({ sort: { name: 1 }, page: 2, pageSize: 2 });
    assert.deepEqual([page.totalCount, page.data.map((task) => task.name)], [3, ['beta']]);
    const disabled = (await t.as(tenant).SchedulerRpc.getData({ filter: { name: 'beta' } })).data[0];
    assert.deepEqual([disabled.enabled, disabled.nextRun], [false, null]);
    assert.equal(
      (await refused(t.as(tenant).SchedulerRpc.getData({ filter: { actionConfig: 'x' } }), 'VALIDATION_ERROR')).issues?.[0]?.path,
      'filter.actionConfig',
    );
  });
});
