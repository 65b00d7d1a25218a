import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import type { PluginServices } from 'rpc-service/plugin';
import type { NotificationCreatedEvent } from '../../../test/support/caller.ts';
import { refused } from '../../../test/support/caller.ts';
import { createScratchDatabase, TEST_DATABASE_URL } from '../../../test/support/database.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { eventually } from '../../../test/support/peers.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

describe('NotificationRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Member;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  const notificationService = (): PluginServices['notificationService'] => t.app.depsOf('notification').notificationService;
  const notify = (subscriptionId: string, userIds: string[], title: string) =>
    notificationService().notify({ subscriptionId, userIds, title, message: `${title} happened`, source: 'test' });

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'notification', 'task'] });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    stranger = await t.signup();
  });
  after(() => t.close());

  it('answers the schema, and the caller’s own notifications, newest first, page 1 and pageSize 25 by default', async () => {
    const schema = await t.as(member).NotificationRpc.getSchema({});
    assert.deepEqual([schema.type, schema.required], ['object', ['_id', 'title', 'message', 'read', 'timestamp', 'userId']]);
    for (let index = 0; index < 27; index++) await notify(admin.subscriptionId, [member.user._id], `Event ${index}`);
    await notify(admin.subscriptionId, [admin.user._id], 'For the admin');
    const page = await t.as(member).NotificationRpc.getData({});
    assert.deepEqual([page.totalCount, page.data.length, page.data[0].title], [27, 25, 'Event 26']);
    assert.deepEqual(Object.keys(page.data[0]).sort(), ['_id', 'data', 'message', 'read', 'source', 'timestamp', 'title', 'userId']);
    assert.ok(page.data.every((notification) => notification.userId === member.user._id && !notification.read));
    assert.equal((await t.as(member).NotificationRpc.getData({ page: 2 })).data.length, 2);
    assert.deepEqual(
      (await t.as(member).NotificationRpc.getData({ filter: { title: 'Event 3' } })).data.map((n) => n.title),
      ['Event 3'],
    );
  });

  it('marks and deletes only the caller’s own notifications, counting what changed', async () => {
    const [mine] = await notify(admin.subscriptionId, [member.user._id], 'Mine');
    const [theirs] = await notify(admin.subscriptionId, [admin.user._id], 'Theirs');
    assert.equal(await t.as(member).NotificationRpc.markAsRead({ _id: mine!._id }), true);
    assert.equal((await t.as(member).NotificationRpc.findById({ _id: mine!._id })).read, true);
    for (const who of [member, stranger]) {
      const notifications = t.as(who).NotificationRpc;
      for (const [method, call] of [
        ['NotificationRpc.findById', () => notifications.findById({ _id: theirs!._id })],
        ['NotificationRpc.markAsRead', () => notifications.markAsRead({ _id: theirs!._id })],
        ['NotificationRpc.delete', () => notifications.delete({ _id: theirs!._id })],
      ] as const) {
        await refused(call(), 'NOT_FOUND', method);
      }
    }
    assert.equal((await t.as(admin).NotificationRpc.findById({ _id: theirs!._id })).read, false);
    const unread = (await t.as(member).NotificationRpc.getData({ filter: { read: false }, pageSize: 200 })).totalCount;
    assert.equal(await t.as(member).NotificationRpc.markAllAsRead({}), unread);
    assert.equal(await t.as(member).NotificationRpc.markAllAsRead({}), 0);
    assert.equal(await t.as(member).NotificationRpc.delete({ _id: mine!._id }), true);
    const left = (await t.as(member).NotificationRpc.getData({ pageSize: 200 })).totalCount;
    assert.equal(await t.as(member).NotificationRpc.deleteAll({}), left);
    assert.equal((await t.as(member).NotificationRpc.getData({})).totalCount, 0);
    assert.equal((await t.as(admin).NotificationRpc.findById({ _id: theirs!._id })).title, 'Theirs', "another user's notifications stay");
  });

  it('notifies a user once per dedupe key, however often a producer runs', async () => {
    const once = (userIds: string[]) =>
      notificationService().notify({
        subscriptionId: admin.subscriptionId,
        userIds,
        title: 'Once',
        message: 'Only once',
        source: 'test',
        dedupeKey: 'test:once',
      });
    assert.equal((await once([member.user._id])).length, 1);
    assert.deepEqual(await once([member.user._id]), []);
    assert.deepEqual(
      (await once([member.user._id, admin.user._id])).map((record) => record.userId),
      [admin.user._id],
    );
    assert.equal((await t.as(member).NotificationRpc.getData({ filter: { title: 'Once' } })).totalCount, 1);
    assert.equal((await t.as(admin).NotificationRpc.getData({ filter: { title: 'Once' } })).totalCount, 1);
  });

  it('notifies the user a task is assigned to, over the WebSocket', async () => {
    await t.app.deps.db.execute('update auth_user set partner_contact_id = ? where id = ?', ['contact-member', member.user._id]);
    const socket = new WebSocket(`${t.url.replace('http', 'ws')}/ws?token=${member.token}`);
    const messages: { type: string; event?: string; payload?: NotificationCreatedEvent }[] = [];
    socket.on('message', (data) => messages.push(JSON.parse(data.toString())));
    try {
      await eventually(() => (messages.some((message) => message.type === 'ready') ? true : undefined));
      const task = await t.as(admin).TaskRpc.create({ taskInstanceId: 'board', title: 'Call the supplier', assignees: ['contact-member', 'contact-nobody'] });
      const pushed = await eventually(() => messages.find((message) => message.event === 'notification.created')?.payload);
      assert.deepEqual(
        [pushed.title, pushed.message, pushed.source, pushed.data],
        ['A task was assigned to you', 'Call the supplier', 'task', { taskId: task._id, taskInstanceId: 'board' }],
      );
      const [stored] = (await t.as(member).NotificationRpc.getData({})).data;
      assert.equal(stored._id, pushed._id);
      assert.equal((await t.as(admin).NotificationRpc.getData({})).data.filter((n) => n.source === 'task').length, 0, 'the assigner is not notified');
    } finally {
      socket.close();
    }
  });

  it('keeps the notifications of a database made while they were the core’s (core_notification)', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-notification-'));
    const scratch = TEST_DATABASE_URL ? await createScratchDatabase(TEST_DATABASE_URL) : undefined;
    const options = { dataDir, persistent: true, databaseUrl: scratch?.url, withNotes: false };
    try {
      // Without the plugin its migration does not run: the core's migrations leave the table as the core made it.
      const old = await startTestApp({ ...options, plugins: ['auth'] });
      const account = await old.signup();
      const id = randomUUID();
      await old.app.deps.db.execute(
        `insert into core_notification (id, subscription_id, user_id, title, message, read, timestamp, source, data, dedupe_key)
         values (?, ?, ?, 'Kept', 'Made before the move', true, '2026-11-20T10:00:00Z', 'task', '{"taskId":"t1"}', 'test:kept')`,
        [id, account.subscriptionId, account.user._id],
      );
      await old.close();
      const moved = await startTestApp({ ...options, plugins: ['auth', 'notification'] });
      try {
        assert.deepEqual((await moved.as(account).NotificationRpc.getData({})).data, [
          {
            _id: id,
            title: 'Kept',
            message: 'Made before the move',
            read: true,
            timestamp: '2026-11-20T10:00:00.000Z',
            userId: account.user._id,
            source: 'task',
            data: { taskId: 't1' },
          },
        ]);
        const service: PluginServices['notificationService'] = moved.app.depsOf('notification').notificationService;
        const again = {
          subscriptionId: account.subscriptionId,
          userIds: [account.user._id],
          title: 'Kept',
          message: 'Again',
          source: 'test',
          dedupeKey: 'test:kept',
        };
        assert.deepEqual(await service.notify(again), [], 'the dedupe keys count as before');
      } finally {
        await moved.close();
      }
    } finally {
      await scratch?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
