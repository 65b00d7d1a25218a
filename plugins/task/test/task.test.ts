import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BusEvent } from 'rpc-service/plugin';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { addUser } from '../../../test/support/users.ts';

describe('TaskRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Awaited<ReturnType<typeof addUser>>;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  const events: BusEvent[] = [];
  const as = (session: { token: string }) => ({ token: session.token });
  const create = (session: { token: string }, params: Record<string, unknown>) => t.ok('TaskRpc.create', { taskInstanceId: 'board-1', ...params }, as(session));

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
    assert.deepEqual(await t.ok('TaskRpc.findById', { _id: task._id }, as(admin)), task);
    assert.ok(events.some((event) => event.name === 'task.created' && (event.payload as { task: { _id: string } }).task._id === task._id));
  });

  it('sets completedAt when a task becomes done and clears it when it leaves done, unless given', async () => {
    const task = await create(member, { title: 'Ship', dueDate: '2027-03-01T12:00:00Z', assignees: ['contact-1'] });
    assert.equal(task.dueDate, '2027-03-01T12:00:00.000Z');
    const done = await t.ok('TaskRpc.update', { _id: task._id, status: 'done' }, as(member));
    assert.ok(done.completedAt && Date.now() - Date.parse(done.completedAt) < 5000);
    const reopened = await t.ok('TaskRpc.update', { _id: task._id, status: 'in_progress' }, as(member));
    assert.equal(reopened.completedAt, null);
    const backdated = await t.ok('TaskRpc.update', { _id: task._id, status: 'done', completedAt: '2026-01-02T03:04:05Z' }, as(member));
    assert.equal(backdated.completedAt, '2026-01-02T03:04:05.000Z');
    const keep = await t.ok('TaskRpc.update', { _id: task._id, status: 'blocked', completedAt: '2026-01-02T03:04:05Z' }, as(member));
    assert.equal(keep.completedAt, '2026-01-02T03:04:05.000Z', 'given with the change, it stays');
    const createdDone = await create(member, { title: 'Already done', status: 'done' });
    assert.ok(createdDone.completedAt);

    const assigned = await t.ok('TaskRpc.update', { _id: task._id, assignees: ['contact-1', 'contact-2'], isArchived: true, priority: 'urgent' }, as(member));
    assert.deepEqual([assigned.assignees, assigned.isArchived, assigned.priority], [['contact-1', 'contact-2'], true, 'urgent']);
    const assignment = events.filter((event) => event.name === 'task.assigned').at(-1)!;
    assert.deepEqual((assignment.payload as { assignees: string[] }).assignees, ['contact-2'], 'only the assignee added');
    for (const [params, path] of [
      [{ status: 'finished' }, 'status'],
      [{ priority: 'asap' }, 'priority'],
      [{ dueDate: 'tomorrow' }, 'dueDate'],
      [{ title: '' }, 'title'],
    ] as const) {
      const response = await t.call('TaskRpc.update', { _id: task._id, ...params }, as(member));
      assert.deepEqual([response.body.data.code, response.body.data.issues[0].path], ['VALIDATION_ERROR', path]);
    }
  });

  it('keeps subtasks in their instance, and deletes a task with all its descendants', async () => {
    const parent = await create(member, { title: 'Parent' });
    const child = await create(member, { title: 'Child', parentId: parent._id });
    const grandchild = await create(member, { title: 'Grandchild', parentId: child._id });
    const sibling = await create(member, { title: 'Sibling' });
    assert.equal(grandchild.parentId, child._id);
    const otherBoard = await t.call('TaskRpc.create', { taskInstanceId: 'board-2', title: 'Elsewhere', parentId: parent._id }, as(member));
    assert.deepEqual([otherBoard.body.data.code, otherBoard.body.data.issues[0].path], ['VALIDATION_ERROR', 'parentId']);
    const foreign = await t.call('TaskRpc.create', { taskInstanceId: 'board-1', title: 'Foreign', parentId: parent._id }, as(stranger));
    assert.deepEqual([foreign.body.data.code, foreign.body.data.issues[0].path], ['VALIDATION_ERROR', 'parentId']);

    assert.deepEqual(await t.ok('TaskRpc.delete', { _id: parent._id }, as(member)), { success: true });
    for (const gone of [parent, child, grandchild]) assert.equal((await t.call('TaskRpc.findById', { _id: gone._id }, as(member))).body.data.code, 'NOT_FOUND');
    assert.equal((await t.ok('TaskRpc.findById', { _id: sibling._id }, as(member))).title, 'Sibling');
    assert.deepEqual(await t.ok('TaskRpc.delete', { _id: parent._id }, as(member)), { success: false });
  });

  it('adds comments in order with the caller as author and a UUID id', async () => {
    const task = await create(member, { title: 'Discuss', comments: [{ content: 'Imported note', authorContactId: 'contact-9' }] });
    assert.equal(task.comments[0].authorContactId, 'contact-9');
    const first = await t.ok('TaskRpc.addComment', { taskId: task._id, content: 'First!' }, as(member));
    assert.deepEqual(Object.keys(first).sort(), ['authorContactId', 'commentId', 'content', 'createdAt']);
    assert.match(first.commentId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(first.authorContactId, member.user._id, 'no messaging contact: the user id');
    await t.app.deps.db.execute('update auth_user set partner_contact_id = ? where id = ?', ['contact-admin', admin.user._id]);
    const second = await t.ok('TaskRpc.addComment', { taskId: task._id, content: 'Second' }, as(admin));
    assert.equal(second.authorContactId, 'contact-admin');
    const comments = (await t.ok('TaskRpc.findById', { _id: task._id }, as(member))).comments;
    assert.deepEqual(
      comments.map((comment: { content: string }) => comment.content),
      ['Imported note', 'First!', 'Second'],
    );
    assert.equal(comments[2].updatedAt, null);
    assert.equal((await t.call('TaskRpc.addComment', { taskId: task._id, content: '' }, as(member))).body.data.issues[0].path, 'content');
    assert.equal((await t.call('TaskRpc.addComment', { taskId: task._id, content: 'Sneaky' }, as(stranger))).body.data.code, 'NOT_FOUND');
    assert.ok(events.some((event) => event.name === 'task.commented'));
  });

  it('creates a whole tree in one transaction, and nothing when any node is invalid', async () => {
    const tree = await t.ok(
      'TaskRpc.createTaskTree',
      {
        taskInstanceId: 'board-tree',
        tasks: [
          { title: 'Epic', subtasks: [{ title: 'Story', priority: 'high', subtasks: [{ title: 'Step 1' }, { title: 'Step 2', status: 'done' }] }] },
          { title: 'Chore', tags: ['ops'] },
        ],
      },
      as(member),
    );
    assert.equal(tree.created, 5);
    const [epic, chore] = tree.tasks;
    assert.deepEqual(
      [epic.title, epic.subtasks[0].title, epic.subtasks[0].priority, epic.subtasks[0].subtasks.map((task: { title: string }) => task.title), chore.tags],
      ['Epic', 'Story', 'high', ['Step 1', 'Step 2'], ['ops']],
    );
    assert.equal(epic.subtasks[0].parentId, epic._id);
    assert.equal(epic.subtasks[0].subtasks[0].parentId, epic.subtasks[0]._id);
    assert.ok(epic.subtasks[0].subtasks[1].completedAt);

    const invalid = await t.call(
      'TaskRpc.createTaskTree',
      {
        taskInstanceId: 'board-bad',
        tasks: [{ title: 'Epic', subtasks: [{ title: 'Story', subtasks: [{ title: 'Step', status: 'someday' }] }] }, { title: 'Fine' }],
      },
      as(member),
    );
    assert.deepEqual([invalid.body.data.code, invalid.body.data.issues[0].path], ['VALIDATION_ERROR', 'tasks.0.subtasks.0.subtasks.0.status']);
    assert.equal((await t.ok('TaskRpc.getData', { taskInstanceId: 'board-bad' }, as(member))).totalCount, 0, 'nothing was created');
    assert.equal((await t.call('TaskRpc.createTaskTree', { taskInstanceId: 'board-bad', tasks: [] }, as(member))).body.data.issues[0].path, 'tasks');
    const deep = {
      title: 'L1',
      subtasks: [{ title: 'L2', subtasks: [{ title: 'L3', subtasks: [{ title: 'L4', subtasks: [{ title: 'L5', subtasks: [{ title: 'L6' }] }] }] }] }],
    };
    const tooDeep = await t.call('TaskRpc.createTaskTree', { taskInstanceId: 'board-bad', tasks: [deep] }, as(member));
    assert.match(tooDeep.body.data.issues[0].message, /at most 5 levels deep/);
    assert.equal((await t.ok('TaskRpc.getData', { taskInstanceId: 'board-bad' }, as(member))).totalCount, 0);
  });

  it('lists one task instance with filters, sort and paging (page 1, pageSize 50 by default), never another tenant’s', async () => {
    for (const [title, status, tags] of [
      ['Alpha', 'todo', ['x']],
      ['Beta', 'done', ['y']],
      ['Gamma', 'todo', ['x', 'y']],
    ] as const) {
      await t.ok('TaskRpc.create', { taskInstanceId: 'board-list', title, status, tags: [...tags] }, as(member));
    }
    await t.ok('TaskRpc.create', { taskInstanceId: 'board-list', title: 'Theirs' }, as(stranger));
    const list = (params: Record<string, unknown>, session: { token: string } = member) =>
      t.ok('TaskRpc.getData', { taskInstanceId: 'board-list', ...params }, as(session));
    const titles = async (params: Record<string, unknown>) => (await list(params)).data.map((task: { title: string }) => task.title);
    assert.deepEqual(await titles({}), ['Alpha', 'Beta', 'Gamma']);
    assert.equal((await list({})).totalCount, 3);
    assert.deepEqual(await titles({ filter: { status: 'todo' }, sort: { title: -1 } }), ['Gamma', 'Alpha']);
    assert.deepEqual(await titles({ filter: { tags: 'y' } }), ['Beta', 'Gamma']);
    assert.deepEqual(await titles({ filter: { title: { $regex: '^a', $options: 'i' } } }), ['Alpha']);
    assert.deepEqual(await titles({ page: 2, pageSize: 2 }), ['Gamma']);
    assert.deepEqual(
      (await list({}, stranger)).data.map((task: { title: string }) => task.title),
      ['Theirs'],
    );
    assert.equal((await t.call('TaskRpc.getData', { taskInstanceId: 'board-list', pageSize: 0 }, as(member))).body.data.issues[0].path, 'pageSize');
    assert.equal((await t.call('TaskRpc.getData', {}, as(member))).body.data.issues[0].path, 'taskInstanceId');
    const theirs = (await list({}, stranger)).data[0];
    assert.equal((await t.call('TaskRpc.findById', { _id: theirs._id }, as(member))).body.data.code, 'NOT_FOUND');
    assert.equal((await t.call('TaskRpc.update', { _id: theirs._id, title: 'Mine' }, as(member))).body.data.code, 'NOT_FOUND');
    assert.deepEqual(await t.ok('TaskRpc.delete', { _id: theirs._id }, as(member)), { success: false });
    assert.equal((await t.ok('TaskRpc.findById', { _id: theirs._id }, as(stranger))).title, 'Theirs');
  });
});
