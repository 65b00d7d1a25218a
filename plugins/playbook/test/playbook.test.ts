import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { PlaybookRpcCreateParams } from '../../../test/support/caller.ts';
import { refused } from '../../../test/support/caller.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { putUpload } from '../../../test/support/uploads.ts';

describe('PlaybookRpc', () => {
  let t: TestApp;
  let owner: Awaited<ReturnType<TestApp['signup']>>;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  const create = (params: PlaybookRpcCreateParams, session = owner) => t.as(session).PlaybookRpc.create(params);
  const names = (answer: { data: { name: string }[] }) => answer.data.map((playbook) => playbook.name);

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'playbook'] });
    owner = await t.signup();
    stranger = await t.signup();
    await create({ name: 'Cold outreach', description: 'First contact', content: '## Step 1\nSay hello.', category: 'sales', tags: ['sales', 'email'] });
    await create({ name: 'Renewal call', content: 'Ask about the contract end date.', tags: ['sales', 'phone'] });
    await create({ name: 'Outage response', description: 'When the service is down', content: 'Page the on-call engineer.', tags: ['support'] });
  });
  after(() => t.close());

  it('creates, finds, updates and deletes playbooks; findById raises "Playbook <id> not found"', async () => {
    const playbook = await create({ name: 'Onboarding', content: '1. Welcome\n2. Setup', tags: ['cs'] });
    assert.deepEqual(Object.keys(playbook).sort(), [
      '_id',
      'category',
      'content',
      'createdAt',
      'createdBy',
      'description',
      'isActive',
      'name',
      'resources',
      'source',
      'subscriptionId',
      'tags',
      'updatedAt',
    ]);
    assert.deepEqual([playbook.source, playbook.isActive, playbook.resources, playbook.category, playbook.description], ['api', true, [], null, '']);
    assert.deepEqual(await t.as(owner).PlaybookRpc.findById({ _id: playbook._id }), playbook);
    const updated = await t.as(owner).PlaybookRpc.update({ _id: playbook._id, data: { isActive: false, tags: ['cs', 'new'] } });
    assert.deepEqual([updated.isActive, updated.tags, updated.name], [false, ['cs', 'new'], 'Onboarding']);
    assert.deepEqual(await t.as(owner).PlaybookRpc.delete({ _id: playbook._id }), { success: true, message: `Playbook ${playbook._id} deleted` });
    const gone = await refused(t.as(owner).PlaybookRpc.findById({ _id: playbook._id }), 'NOT_FOUND');
    assert.equal(gone.message, `Playbook ${playbook._id} not found`);
    assert.equal((await refused(t.as(owner).PlaybookRpc.findById({ _id: 'not-an-id' }), 'NOT_FOUND')).message, 'Playbook not-an-id not found');
    assert.equal((await refused(t.as(owner).call('PlaybookRpc.create', { content: 'no name' }), 'VALIDATION_ERROR')).issues?.[0]?.path, 'name');
  });

  it('lists with tags or filter.tags, limit falling back to pageSize, page and sort unused, totalCount the number returned', async () => {
    const all = await t.as(owner).PlaybookRpc.list({});
    assert.deepEqual([all.data.length, all.totalCount], [3, 3]);
    assert.deepEqual(names(await t.as(owner).PlaybookRpc.list({ tags: ['support'] })), ['Outage response']);
    assert.deepEqual(names(await t.as(owner).PlaybookRpc.list({ filter: { tags: ['phone'] } })), ['Renewal call']);
    assert.deepEqual(
      names(await t.as(owner).PlaybookRpc.list({ tags: ['phone'], filter: { tags: ['support'] } })),
      ['Renewal call'],
      'tags wins over filter.tags',
    );
    const limited = await t.as(owner).PlaybookRpc.list({ pageSize: 2 });
    assert.deepEqual([limited.data.length, limited.totalCount], [2, 2], 'totalCount counts what was returned');
    assert.equal((await t.as(owner).PlaybookRpc.list({ limit: 1, pageSize: 2 })).data.length, 1);
    const pageTwo = await t.as(owner).PlaybookRpc.list({ page: 2, pageSize: 2, sort: { name: 1 } });
    assert.deepEqual(names(pageTwo), names(limited), 'page and sort change nothing');
    assert.equal((await refused(t.as(owner).PlaybookRpc.list({ limit: 0 }), 'VALIDATION_ERROR')).issues?.[0]?.path, 'limit');
  });

  it('searches name, description, content and tags, name matches first', async () => {
    assert.deepEqual(names(await t.as(owner).PlaybookRpc.search({ query: 'outage' })), ['Outage response']);
    assert.deepEqual(names(await t.as(owner).PlaybookRpc.search({ query: 'CONTRACT' })), ['Renewal call']);
    assert.deepEqual(
      names(await t.as(owner).PlaybookRpc.search({ query: 'call' })),
      ['Renewal call', 'Outage response'],
      'the name match first, then the content match',
    );
    assert.deepEqual(names(await t.as(owner).PlaybookRpc.search({ query: 'email' })), ['Cold outreach']);
    assert.deepEqual(names(await t.as(owner).PlaybookRpc.search({ tags: ['sales'], query: 'hello' })), ['Cold outreach']);
    assert.deepEqual(names(await t.as(owner).PlaybookRpc.search({ query: '100%_' })), [], 'LIKE characters are text');
    const some = await t.as(owner).PlaybookRpc.search({ tags: ['sales'], limit: 1 });
    assert.deepEqual([some.data.length, some.totalCount], [1, 1]);
  });

  it('appends uploaded resource files, answers added 0 when none was sent, and deletes them with the playbook', async () => {
    const playbook = await create({ name: 'With files' });
    const { uploadKey, uploadUrl, maxFiles } = await t.as(owner).PlaybookRpc.getResourceUploadKey({ playbookId: playbook._id });
    assert.ok(uploadUrl.endsWith(`/api/uploads/${uploadKey}`));
    assert.equal(maxFiles, 20);
    assert.equal((await putUpload(t, uploadKey, Buffer.from('# Script\nHello!'), 'text/markdown', { token: owner.token, fileName: 'script.md' })).status, 200);
    assert.equal(
      (await putUpload(t, uploadKey, Buffer.from('%PDF-1.4 not really'), 'application/pdf', { token: owner.token, fileName: 'deck.pdf' })).status,
      200,
    );
    const finalized = await t.as(owner).PlaybookRpc.finalizeResourceUpload({ playbookId: playbook._id, uploadKey });
    assert.deepEqual([finalized.success, finalized.added], [true, 2]);
    assert.deepEqual(
      finalized.files?.map((file) => [file.fileName, file.mimeType, file.size]),
      [
        ['script.md', 'text/markdown', 15],
        ['deck.pdf', 'application/pdf', 19],
      ],
    );
    assert.deepEqual((await t.as(owner).PlaybookRpc.findById({ _id: playbook._id })).resources, finalized.files);
    const fileId = finalized.files?.[0]?.fileId;
    assert.ok(fileId);
    const file = await fetch(`${t.url}/api/files/${fileId}`, { headers: { authorization: `Bearer ${owner.token}` } });
    assert.deepEqual([file.status, await file.text()], [200, '# Script\nHello!']);
    const theirs = await fetch(`${t.url}/api/files/${fileId}`, { headers: { authorization: `Bearer ${stranger.token}` } });
    assert.equal(theirs.status, 404, "another subscription's caller cannot read the file");

    const empty = await t.as(owner).PlaybookRpc.getResourceUploadKey({ playbookId: playbook._id });
    assert.deepEqual(await t.as(owner).PlaybookRpc.finalizeResourceUpload({ playbookId: playbook._id, uploadKey: empty.uploadKey }), {
      success: true,
      added: 0,
    });

    await t.as(owner).PlaybookRpc.delete({ _id: playbook._id });
    const deleted = await fetch(`${t.url}/api/files/${fileId}`, { headers: { authorization: `Bearer ${owner.token}` } });
    assert.equal(deleted.status, 404, 'the files went with the playbook');
  });

  it('keeps playbooks and their files to their subscription', async () => {
    const [mine] = (await t.as(owner).PlaybookRpc.list({ tags: ['support'] })).data;
    assert.deepEqual((await t.as(stranger).PlaybookRpc.list({})).data, []);
    assert.deepEqual((await t.as(stranger).PlaybookRpc.search({ query: 'outage' })).data, []);
    const theirs = t.as(stranger).PlaybookRpc;
    for (const [method, call] of [
      ['PlaybookRpc.findById', () => theirs.findById({ _id: mine._id })],
      ['PlaybookRpc.update', () => theirs.update({ _id: mine._id, data: { name: 'Hijacked' } })],
      ['PlaybookRpc.delete', () => theirs.delete({ _id: mine._id })],
      ['PlaybookRpc.getResourceUploadKey', () => theirs.getResourceUploadKey({ playbookId: mine._id })],
    ] as const) {
      assert.equal((await refused(call(), 'NOT_FOUND', method)).message, `Playbook ${mine._id} not found`, method);
    }
    const theirKey = await t.as(stranger).PlaybookRpc.getResourceUploadKey({ playbookId: (await create({ name: 'Theirs' }, stranger))._id });
    await refused(t.as(stranger).PlaybookRpc.finalizeResourceUpload({ playbookId: mine._id, uploadKey: theirKey.uploadKey }), 'NOT_FOUND');
    assert.equal((await t.as(owner).PlaybookRpc.findById({ _id: mine._id })).name, 'Outage response');
  });
});
