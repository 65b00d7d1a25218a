import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BusEvent } from 'rpc-service/plugin';
import type { TaskRpcCreateParams, TaskRpcGetDataParams } from '../../../test/support/caller.ts';
import { refused, type Who } from '../../../test/support/caller.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

describe('TaskRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Member;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  const events: BusEvent[] = [];
  const create = (session: Who, params: Omit<TaskRpcCreateParams, 'taskInstanceId'>) => t.as(session).TaskRpc.create({ taskInstanceId: 'board-1', ...params });

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'task'] });
    t.app.deps.bus.subscribe('*', (event) => void events.push(event));
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    stranger = await t.signup();
  });
  after(() => t.close());

  it('creates a task with exactly the documented defaults, and finds it', async () => {
    const task = await create(member, { title: 'Write the launch post' });
    assert.deepEqual(Object.keys(task).sort(), [
      '_id',
      'assignees',
      'comments',
      'completedAt',
      'createdAt',
      'description',
      'dueDate',
      'isArchived',
      'parentId',
      'priority',
      'status',
      'tags',
      'taskInstanceId',
      'title',
      'updatedAt',
    ]);
    assert.deepEqual(
      [
        task.taskInstanceId,
        task.description,
        task.status,
        task.priority,
        task.assignees,
        task.parentId,
        task.dueDate,
        task.completedAt,
        task.tags,
        task.comments,
        task.isArchived,
      ],
      ['board-1', null, 'todo', 'medium', [], null, null, null, [], [], false],
    );
    assert.deepEqual(await t.as(admin).TaskRpc.findById({ _id: task._id }), task);
    assert.ok(events.some((event) => event.name === 'task.created' && (event.payload as { task: { _id: string } }).task._id === task._id));
  });

  it('sets completedAt when a task becomes done and clears it when it leaves done, unless given', async () => {
    const task = await create(member, { title: 'Ship', dueDate: '2027-03-01T12:00:00Z', assignees: ['contact-1'] });
    assert.equal(task.dueDate, '2027-03-01T12:00:00.000Z');
    const done = await t.as(member).TaskRpc.update({ _id: task._id, status: 'done' });
    assert.ok(done.completedAt && Date.now() - Date.parse(done.completedAt) < 5000);
    const reopened = await t.as(member).TaskRpc.update({ _id: task._id, status: 'in_progress' });
    assert.equal(reopened.completedAt, null);
    const backdated = await t.as(member).TaskRpc.update({ _id: task._id, status: 'done', completedAt: '2026-01-02T03:04:05Z' });
    assert.equal(backdated.completedAt, '2026-01-02T03:04:05.000Z');
    const keep = await t.as(member).TaskRpc.update({ _id: task._id, status: 'blocked', completedAt: '2026-01-02T03:04:05Z' });
    assert.equal(keep.completedAt, '2026-01-02T03:04:05.000Z', 'given with the change, it stays');
    const createdDone = await create(member, { title: 'Already done', status: 'done' });
    assert.ok(createdDone.completedAt);

    const assigned = await t.as(member).TaskRpc.update({ _id: task._id, assignees: ['contact-1', 'contact-2'], isArchived: true, priority: 'urgent' });
    assert.deepEqual([assigned.assignees, assigned.isArchived, assigned.priority], [['contact-1', 'contact-2'], true, 'urgent']);
    const assignment = events.filter((event) => event.name === 'task.assigned').at(-1)!;
    assert.deepEqual((assignment.payload as { assignees: string[] }).assignees, ['contact-2'], 'only the assignee added');
    for (const [params, path] of [
      [{ status: 'finished' }, 'status'],
      [{ priority: 'asap' }, 'priority'],
      [{ dueDate: 'tomorrow' }, 'dueDate'],
      [{ title: '' }, 'title'],
    ] as const) {
      const error = await refused(t.as(member).call('TaskRpc.update', { _id: task._id, ...params }), 'VALIDATION_ERROR');
      assert.equal(error.issues?.[0]?.path, path);
    }
  });

  it('keeps subtasks in their instance, and deletes a task with all its descendants', async () => {
    const parent = await create(member, { title: 'Parent' });
    const child = await create(member, { title: 'Child', parentId: parent._id });
    const grandchild = await create(member, { title: 'Grandchild', parentId: child._id });
    const sibling = await create(member, { title: 'Sibling' });
    assert.equal(grandchild.parentId, child._id);
    const otherBoard = await refused(t.as(member).TaskRpc.create({ taskInstanceId: 'board-2', title: 'Elsewhere', parentId: parent._id }), 'VALIDATION_ERROR');
    assert.equal(otherBoard.issues?.[0]?.path, 'parentId');
    const foreign = await refused(t.as(stranger).TaskRpc.create({ taskInstanceId: 'board-1', title: 'Foreign', parentId: parent._id }), 'VALIDATION_ERROR');
    assert.equal(foreign.issues?.[0]?.path, 'parentId');

    assert.deepEqual(await t.as(member).TaskRpc.delete({ _id: parent._id }), { success: true });
    for (const gone of [parent, child, grandchild]) await refused(t.as(member).TaskRpc.findById({ _id: gone._id }), 'NOT_FOUND');
    assert.equal((await t.as(member).TaskRpc.findById({ _id: sibling._id })).title, 'Sibling');
    assert.deepEqual(await t.as(member).TaskRpc.delete({ _id: parent._id }), { success: false });
  });

  it('adds comments in order with the caller as author and a UUID id', async () => {
    const task = await create(member, { title: 'Discuss', comments: [{ content: 'Imported note', authorContactId: 'contact-9' }] });
    assert.equal(task.comments[0].authorContactId, 'contact-9');
    const first = await t.as(member).TaskRpc.addComment({ taskId: task._id, content: 'First!' });
    assert.deepEqual(Object.keys(first).sort(), ['authorContactId', 'commentId', 'content', 'createdAt']);
    assert.match(first.commentId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(first.authorContactId, member.user._id, 'no messaging contact: the user id');
    await t.app.deps.db.execute('update auth_user set partner_contact_id = ? where id = ?', ['contact-admin', admin.user._id]);
    const second = await t.as(admin).TaskRpc.addComment({ taskId: task._id, content: 'Second' });
    assert.equal(second.authorContactId, 'contact-admin');
    const comments = (await t.as(member).TaskRpc.findById({ _id: task._id })).comments;
    assert.deepEqual(
      comments.map((comment) => comment.content),
      ['Imported note', 'First!', 'Second'],
    );
    assert.equal(comments[2].updatedAt, null);
    assert.equal((await refused(t.as(member).TaskRpc.addComment({ taskId: task._id, content: '' }), 'VALIDATION_ERROR')).issues?.[0]?.path, 'content');
    await refused(t.as(stranger).TaskRpc.addComment({ taskId: task._id, content: 'Sneaky' }), 'NOT_FOUND');
    assert.ok(events.some((event) => event.name === 'task.commented'));
  });

  it('creates a whole tree in one transaction, and nothing when any node is invalid', async () => {
    const tree = await t.as(member).TaskRpc.createTaskTree({
      taskInstanceId: 'board-tree',
      tasks: [
        { title: 'Epic', subtasks: [{ title: 'Story', priority: 'high', subtasks: [{ title: 'Step 1' }, { title: 'Step 2', status: 'done' }] }] },
        { title: 'Chore', tags: ['ops'] },
      ],
    });
    assert.equal(tree.created, 5);
    const [epic, chore] = tree.tasks;
    assert.deepEqual(
      [epic.title, epic.subtasks[0].title, epic.subtasks[0].priority, epic.subtasks[0].subtasks.map((task) => task.title), chore.tags],
      ['Epic', 'Story', 'high', ['Step 1', 'Step 2'], ['ops']],
    );
    assert.equal(epic.subtasks[0].parentId, epic._id);
    assert.equal(epic.subtasks[0].subtasks[0].parentId, epic.subtasks[0]._id);
    assert.ok(epic.subtasks[0].subtasks[1].completedAt);

    const invalid = await refused(
      t.as(member).call('TaskRpc.createTaskTree', {
        taskInstanceId: 'board-bad',
        tasks: [{ title: 'Epic', subtasks: [{ title: 'Story', subtasks: [{ title: 'Step', status: 'someday' }] }] }, { title: 'Fine' }],
      }),
      'VALIDATION_ERROR',
    );
    assert.equal(invalid.issues?.[0]?.path, 'tasks.0.subtasks.0.subtasks.0.status');
    assert.equal((await t.as(member).TaskRpc.getData({ taskInstanceId: 'board-bad' })).totalCount, 0, 'nothing was created');
    assert.equal(
      (await refused(t.as(member).call('TaskRpc.createTaskTree', { taskInstanceId: 'board-bad', tasks: [] }), 'VALIDATION_ERROR')).issues?.[0]?.path,
      'tasks',
    );
    const deep = {
      title: 'L1',
      subtasks: [{ title: 'L2', subtasks: [{ title: 'L3', subtasks: [{ title: 'L4', subtasks: [{ title: 'L5', subtasks: [{ title: 'L6' }] }] }] }] }],
    };
    const tooDeep = await refused(t.as(member).TaskRpc.createTaskTree({ taskInstanceId: 'board-bad', tasks: [deep] }), 'VALIDATION_ERROR');
    assert.match(tooDeep.issues?.[0]?.message ?? '', /at most 5 levels deep/);
    assert.equal((await t.as(member).TaskRpc.getData({ taskInstanceId: 'board-bad' })).totalCount, 0);
  });

  it('lists one task instance with filters, sort and paging (page 1, pageSize 50 by default), never another tenant’s', async () => {
    for (const [title, status, tags] of [
      ['Alpha', 'todo', ['x']],
      ['Beta', 'done', ['y']],
      ['Gamma', 'todo', ['x', 'y']],
    ] as const) {
      await t.as(member).TaskRpc.create({ taskInstanceId: 'board-list', title, status, tags: [...tags] });
    }
    await t.as(stranger).TaskRpc.create({ taskInstanceId: 'board-list', title: 'Theirs' });
    const list = (params: Omit<TaskRpcGetDataParams, 'taskInstanceId'>, session: Who = member) =>
      t.as(session).TaskRpc.getData({ taskInstanceId: 'board-list', ...params });
    const titles = async (params: Omit<TaskRpcGetDataParams, 'taskInstanceId'>) => (await list(params)).data.map((task) => task.title);
    assert.deepEqual(await titles({}), ['Alpha', 'Beta', 'Gamma']);
    assert.equal((await list({})).totalCount, 3);
    assert.deepEqual(await titles({ filter: { status: 'todo' }, sort: { title: -1 } }), ['Gamma', 'Alpha']);
    assert.deepEqual(await titles({ filter: { tags: 'y' } }), ['Beta', 'Gamma']);
    assert.deepEqual(await titles({ filter: { title: { $regex: '^a', $options: 'i' } } }), ['Alpha']);
    assert.deepEqual(await titles({ page: 2, pageSize: 2 }), ['Gamma']);
    assert.deepEqual(
      (await list({}, stranger)).data.map((task) => task.title),
      ['Theirs'],
    );
    assert.equal(
      (await refused(t.as(member).TaskRpc.getData({ taskInstanceId: 'board-list', pageSize: 0 }), 'VALIDATION_ERROR')).issues?.[0]?.path,
      'pageSize',
    );
    assert.equal((await refused(t.as(member).call('TaskRpc.getData', {}), 'VALIDATION_ERROR')).issues?.[0]?.path, 'taskInstanceId');
    const theirs = (await list({}, stranger)).data[0];
    await refused(t.as(member).TaskRpc.findById({ _id: theirs._id }), 'NOT_FOUND');
    await refused(t.as(member).TaskRpc.update({ _id: theirs._id, title: 'Mine' }), 'NOT_FOUND');
    assert.deepEqual(await t.as(member).TaskRpc.delete({ _id: theirs._id }), { success: false });
    assert.equal((await t.as(stranger).TaskRpc.findById({ _id: theirs._id })).title, 'Theirs');
  });
});
