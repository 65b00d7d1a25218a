import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { putUpload } from '../../../test/support/uploads.ts';

describe('PlaybookRpc', () => {
  let t: TestApp;
  let owner: Awaited<ReturnType<TestApp['signup']>>;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  const as = (session: { token: string }) => ({ token: session.token });
  const create = (params: Record<string, unknown>, session = owner) => t.ok('PlaybookRpc.create', params, as(session));
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
    assert.deepEqual(await t.ok('PlaybookRpc.findById', { _id: playbook._id }, as(owner)), playbook);
    const updated = await t.ok('PlaybookRpc.update', { _id: playbook._id, data: { isActive: false, tags: ['cs', 'new'] } }, as(owner));
    assert.deepEqual([updated.isActive, updated.tags, updated.name], [false, ['cs', 'new'], 'Onboarding']);
    assert.deepEqual(await t.ok('PlaybookRpc.delete', { _id: playbook._id }, as(owner)), { success: true, message: `Playbook ${playbook._id} deleted` });
    const gone = await t.call('PlaybookRpc.findById', { _id: playbook._id }, as(owner));
    assert.deepEqual([gone.body.success, gone.body.data.error], [false, `Playbook ${playbook._id} not found`]);
    assert.equal((await t.call('PlaybookRpc.findById', { _id: 'not-an-id' }, as(owner))).body.data.error, 'Playbook not-an-id not found');
    assert.equal((await t.call('PlaybookRpc.create', { content: 'no name' }, as(owner))).body.data.issues[0].path, 'name');
  });

  it('lists with tags or filter.tags, limit falling back to pageSize, page and sort unused, totalCount the number returned', async () => {
    const all = await t.ok('PlaybookRpc.list', {}, as(owner));
    assert.deepEqual([all.data.length, all.totalCount], [3, 3]);
    assert.deepEqual(names(await t.ok('PlaybookRpc.list', { tags: ['support'] }, as(owner))), ['Outage response']);
    assert.deepEqual(names(await t.ok('PlaybookRpc.list', { filter: { tags: ['phone'] } }, as(owner))), ['Renewal call']);
    assert.deepEqual(
      names(await t.ok('PlaybookRpc.list', { tags: ['phone'], filter: { tags: ['support'] } }, as(owner))),
      ['Renewal call'],
      'tags wins over filter.tags',
    );
    const limited = await t.ok('PlaybookRpc.list', { pageSize: 2 }, as(owner));
    assert.deepEqual([limited.data.length, limited.totalCount], [2, 2], 'totalCount counts what was returned');
    assert.equal((await t.ok('PlaybookRpc.list', { limit: 1, pageSize: 2 }, as(owner))).data.length, 1);
    const pageTwo = await t.ok('PlaybookRpc.list', { page: 2, pageSize: 2, sort: { name: 1 } }, as(owner));
    assert.deepEqual(names(pageTwo), names(limited), 'page and sort change nothing');
    assert.equal((await t.call('PlaybookRpc.list', { limit: 0 }, as(owner))).body.data.issues[0].path, 'limit');
  });

  it('searches name, description, content and tags, name matches first', async () => {
    assert.deepEqual(names(await t.ok('PlaybookRpc.search', { query: 'outage' }, as(owner))), ['Outage response']);
    assert.deepEqual(names(await t.ok('PlaybookRpc.search', { query: 'CONTRACT' }, as(owner))), ['Renewal call']);
    assert.deepEqual(
      names(await t.ok('PlaybookRpc.search', { query: 'call' }, as(owner))),
      ['Renewal call', 'Outage response'],
      'the name match first, then the content match',
    );
    assert.deepEqual(names(await t.ok('PlaybookRpc.search', { query: 'email' }, as(owner))), ['Cold outreach']);
    assert.deepEqual(names(await t.ok('PlaybookRpc.search', { tags: ['sales'], query: 'hello' }, as(owner))), ['Cold outreach']);
    assert.deepEqual(names(await t.ok('PlaybookRpc.search', { query: '100%_' }, as(owner))), [], 'LIKE characters are text');
    const some = await t.ok('PlaybookRpc.search', { tags: ['sales'], limit: 1 }, as(owner));
    assert.deepEqual([some.data.length, some.totalCount], [1, 1]);
  });

  it('appends uploaded resource files, answers added 0 when none was sent, and deletes them with the playbook', async () => {
    const playbook = await create({ name: 'With files' });
    const { uploadKey, uploadUrl, maxFiles } = await t.ok('PlaybookRpc.getResourceUploadKey', { playbookId: playbook._id }, as(owner));
    assert.ok(uploadUrl.endsWith(`/api/uploads/${uploadKey}`));
    assert.equal(maxFiles, 20);
    assert.equal((await putUpload(t, uploadKey, Buffer.from('# Script\nHello!'), 'text/markdown', { ...as(owner), fileName: 'script.md' })).status, 200);
    assert.equal((await putUpload(t, uploadKey, Buffer.from('%PDF-1.4 not really'), 'application/pdf', { ...as(owner), fileName: 'deck.pdf' })).status, 200);
    const finalized = await t.ok('PlaybookRpc.finalizeResourceUpload', { playbookId: playbook._id, uploadKey }, as(owner));
    assert.deepEqual([finalized.success, finalized.added], [true, 2]);
    assert.deepEqual(
      finalized.files.map((file: { fileName: string; mimeType: string; size: number }) => [file.fileName, file.mimeType, file.size]),
      [
        ['script.md', 'text/markdown', 15],
        ['deck.pdf', 'application/pdf', 19],
      ],
    );
    assert.deepEqual((await t.ok('PlaybookRpc.findById', { _id: playbook._id }, as(owner))).resources, finalized.files);
    const file = await fetch(`${t.url}/api/files/${finalized.files[0].fileId}`, { headers: { authorization: `Bearer ${owner.token}` } });
    assert.deepEqual([file.status, await file.text()], [200, '# Script\nHello!']);
    const theirs = await fetch(`${t.url}/api/files/${finalized.files[0].fileId}`, { headers: { authorization: `Bearer ${stranger.token}` } });
    assert.equal(theirs.status, 404, "another subscription's caller cannot read the file");

    const empty = await t.ok('PlaybookRpc.getResourceUploadKey', { playbookId: playbook._id }, as(owner));
    assert.deepEqual(await t.ok('PlaybookRpc.finalizeResourceUpload', { playbookId: playbook._id, uploadKey: empty.uploadKey }, as(owner)), {
      success: true,
      added: 0,
    });

    await t.ok('PlaybookRpc.delete', { _id: playbook._id }, as(owner));
    const deleted = await fetch(`${t.url}/api/files/${finalized.files[0].fileId}`, { headers: { authorization: `Bearer ${owner.token}` } });
    assert.equal(deleted.status, 404, 'the files went with the playbook');
  });

  it('keeps playbooks and their files to their subscription', async () => {
    const [mine] = (await t.ok('PlaybookRpc.list', { tags: ['support'] }, as(owner))).data;
    assert.deepEqual((await t.ok('PlaybookRpc.list', {}, as(stranger))).data, []);
    assert.deepEqual((await t.ok('PlaybookRpc.search', { query: 'outage' }, as(stranger))).data, []);
    for (const [method, params] of [
      ['PlaybookRpc.findById', { _id: mine._id }],
      ['PlaybookRpc.update', { _id: mine._id, data: { name: 'Hijacked' } }],
      ['PlaybookRpc.delete', { _id: mine._id }],
      ['PlaybookRpc.getResourceUploadKey', { playbookId: mine._id }],
    ] as const) {
      const response = await t.call(method, params, as(stranger));
      assert.deepEqual([response.body.data.code, response.body.data.error], ['NOT_FOUND', `Playbook ${mine._id} not found`], method);
    }
    const theirKey = await t.ok('PlaybookRpc.getResourceUploadKey', { playbookId: (await create({ name: 'Theirs' }, stranger))._id }, as(stranger));
    const crossed = await t.call('PlaybookRpc.finalizeResourceUpload', { playbookId: mine._id, uploadKey: theirKey.uploadKey }, as(stranger));
    assert.equal(crossed.body.data.code, 'NOT_FOUND');
    assert.equal((await t.ok('PlaybookRpc.findById', { _id: mine._id }, as(owner))).name, 'Outage response');
  });
});
