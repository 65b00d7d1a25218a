import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { refused } from '../../../test/support/caller.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { eventually } from '../../../test/support/peers.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

const GUIDE = `Welcome to the Orbit handbook.

# Installation

Download the Orbit installer and run it. The installer asks for a licence key and a folder.

## Linux

Install the package with apt install orbit, then start the service with systemctl start orbit.

# Billing

Invoices are sent by e-mail on the first day of every month. Refunds take ten working days.
`;

describe('DocumentRpc', () => {
  let t: TestApp;
  let owner: Awaited<ReturnType<TestApp['signup']>>;
  let colleague: Member;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  const instance = () => `handbook-${randomUUID().slice(0, 8)}`;
  const chunksOf = (pageId: string) =>
    t.app.deps.db.execute<{ id: string; text: string; embedding: string | null; metadata: Record<string, unknown> }>(
      `select id, text, embedding_a::text as embedding, metadata from knowledge_base_chunk where source = 'documents' and record_id = ? order by ordinal`,
      [pageId],
    );

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'documents'] });
    owner = await t.signup();
    colleague = await addUser(t, owner.subscriptionId, 'user');
    stranger = await t.signup();
  });
  after(() => t.close());

  it('creates a page as version 1 with every field of the record, and reads it by id, by title and in its instance', async () => {
    const documentInstanceId = instance();
    const page = await t.as(owner).DocumentRpc.create({ title: 'Getting started', documentInstanceId, content: GUIDE });
    assert.deepEqual(Object.keys(page).sort(), [
      '_id',
      'content',
      'createdAt',
      'createdBy',
      'documentInstanceId',
      'isArchived',
      'lastModifiedBy',
      'parentId',
      'tags',
      'title',
      'updatedAt',
      'uuid',
      'version',
    ]);
    assert.equal(page.uuid, page._id);
    assert.equal(page.version, 1);
    assert.equal(page.parentId, null);
    assert.deepEqual(page.tags, []);
    assert.equal(page.isArchived, false);
    assert.equal(page.createdBy, owner.user._id);
    assert.equal(page.lastModifiedBy, owner.user._id);
    assert.equal(page.content, GUIDE);
    assert.ok(!Number.isNaN(Date.parse(page.createdAt)));

    assert.deepEqual(await t.as(colleague).DocumentRpc.getById({ docId: page._id }), page);
    assert.deepEqual(await t.as(colleague).DocumentRpc.getByTitle({ documentInstanceId, title: 'GETTING STARTED' }), page);
    const all = await t.as(owner).DocumentRpc.getAllDocuments({ documentInstanceId });
    assert.deepEqual(all, { data: [page], totalCount: 1 });
    assert.deepEqual(await t.as(owner).DocumentRpc.getAllDocuments({ documentInstanceId: instance() }), { data: [], totalCount: 0 });

    const empty = await t.as(owner).DocumentRpc.create({ title: 'Blank', documentInstanceId });
    assert.equal(empty.content, '');
    await refused(t.as(owner).DocumentRpc.getByTitle({ documentInstanceId, title: 'Nothing like it' }), 'NOT_FOUND');
  });

  it('finds the passage that answers a question as soon as create has answered, shaped as plugins/documents/README.md says', async () => {
    const documentInstanceId = instance();
    const guide = await t.as(owner).DocumentRpc.create({ title: 'Orbit handbook', documentInstanceId, content: GUIDE });
    await t.as(owner).DocumentRpc.create({ title: 'Office', documentInstanceId, content: 'The office kitchen has coffee, tea and fruit on Fridays.' });

    const hits = await t.as(colleague).DocumentRpc.search({ documentInstanceId, queryText: 'how are invoices sent' });
    assert.ok(hits.length >= 1 && hits.length <= 5);
    const [best] = hits;
    assert.deepEqual(Object.keys(best).sort(), ['id', 'payload', 'score']);
    assert.deepEqual(Object.keys(best.payload).sort(), ['content', 'metadata']);
    assert.deepEqual(best.payload.metadata, { title: 'Orbit handbook', recordId: guide._id });
    assert.match(best.payload.content, /Invoices are sent by e-mail/);
    assert.match(best.id, /^[0-9a-f-]{36}$/);
    assert.ok(best.score > 0 && best.score <= 1);
    for (let index = 1; index < hits.length; index++) assert.ok(hits[index - 1].score >= hits[index].score);

    const linux = await t.as(owner).DocumentRpc.search({ documentInstanceId, queryText: 'start the service on linux with systemctl', topK: 1 });
    assert.equal(linux.length, 1);
    assert.match(linux[0].payload.content, /systemctl start orbit/);
    // Another instance's pages are not searched.
    assert.deepEqual(await t.as(owner).DocumentRpc.search({ documentInstanceId: instance(), queryText: 'invoices' }), []);
  });

  it('returns topK 5 by default and filters on the page fields; archived pages are left out', async () => {
    const documentInstanceId = instance();
    const pages = [];
    for (let index = 0; index < 7; index++) {
      pages.push(
        await t.as(owner).DocumentRpc.create({
          title: `Release ${index}`,
          documentInstanceId,
          content: `Release ${index} of the rocket engine fixes ignition timing.`,
          tags: index % 2 ? ['odd'] : ['even'],
        }),
      );
    }
    assert.equal((await t.as(owner).DocumentRpc.search({ documentInstanceId, queryText: 'rocket engine ignition' })).length, 5);
    const odd = await t.as(owner).DocumentRpc.search({ documentInstanceId, queryText: 'rocket engine ignition', topK: 10, filter: { tags: 'odd' } });
    assert.deepEqual(odd.map((hit) => hit.payload.metadata.title).sort(), ['Release 1', 'Release 3', 'Release 5']);
    const titled = await t.as(owner).DocumentRpc.search({ documentInstanceId, queryText: 'rocket', filter: { title: { $in: ['Release 2', 'Release 4'] } } });
    assert.deepEqual(titled.map((hit) => hit.payload.metadata.title).sort(), ['Release 2', 'Release 4']);

    await t.as(owner).DocumentRpc.update({ _id: pages[1]._id, isArchived: true });
    const afterArchive = await t.as(owner).DocumentRpc.search({ documentInstanceId, queryText: 'rocket engine', topK: 10, filter: { tags: 'odd' } });
    assert.deepEqual(afterArchive.map((hit) => hit.payload.metadata.title).sort(), ['Release 3', 'Release 5']);

    await refused(t.as(owner).DocumentRpc.search({ documentInstanceId, queryText: 'rocket', filter: { tags: { $bogus: 1 } } }), 'VALIDATION_ERROR');
  });

  it('embeds new pages in the background through the job service', async () => {
    const documentInstanceId = instance();
    const page = await t.as(owner).DocumentRpc.create({ title: 'Background', documentInstanceId, content: GUIDE });
    const chunks = await eventually(async () => {
      const rows = await chunksOf(page._id);
      return rows.length > 0 && rows.every((row) => row.embedding !== null) ? rows : undefined;
    });
    assert.ok(chunks.length >= 3, 'one chunk per section at least');
    assert.deepEqual(chunks[0]!.metadata.title, 'Background');
  });

  it('keeps every version on update, re-embedding only the chunks that changed', async () => {
    const documentInstanceId = instance();
    const page = await t.as(owner).DocumentRpc.create({ title: 'Handbook', documentInstanceId, content: GUIDE });
    await t.as(owner).DocumentRpc.search({ documentInstanceId, queryText: 'invoices' });
    const before = await chunksOf(page._id);
    assert.ok(before.every((chunk) => chunk.embedding !== null));

    const changed = GUIDE.replace('Refunds take ten working days.', 'Refunds take three working days.');
    const updated = await t.as(colleague).DocumentRpc.update({ _id: page._id, content: changed });
    assert.equal(updated.version, 2);
    assert.equal(updated.lastModifiedBy, colleague.user._id);
    assert.equal(updated.createdBy, owner.user._id);
    assert.equal(updated.content, changed);

    const hits = await t.as(owner).DocumentRpc.search({ documentInstanceId, queryText: 'how long do refunds take', topK: 1 });
    assert.match(hits[0].payload.content, /three working days/);
    const after = await chunksOf(page._id);
    const kept = after.filter((chunk) => before.some((old) => old.id === chunk.id && old.embedding === chunk.embedding));
    const fresh = after.filter((chunk) => !before.some((old) => old.id === chunk.id));
    assert.equal(fresh.length, 1, 'only the billing chunk is new');
    assert.match(fresh[0]!.text, /three working days/);
    assert.equal(kept.length, after.length - 1, 'every other chunk kept its embedding');

    // Unchanged: no new version. Changed again: version 3, and all three kept, newest first.
    assert.equal((await t.as(owner).DocumentRpc.update({ _id: page._id, content: changed })).version, 2);
    const renamed = await t.as(owner).DocumentRpc.update({ _id: page._id, title: 'Orbit handbook', tags: ['guide'] });
    assert.equal(renamed.version, 3);
    assert.deepEqual(renamed.tags, ['guide']);
    const versions = await t.as(owner).DocumentRpc.getVersions({ docId: page._id });
    assert.deepEqual(
      versions.map((version) => [version.version, version.title, version.modifiedBy]),
      [
        [3, 'Orbit handbook', owner.user._id],
        [2, 'Handbook', colleague.user._id],
        [1, 'Handbook', owner.user._id],
      ],
    );
    assert.equal(versions[2].content, GUIDE);
    assert.equal(versions[1].content, changed);
    // The title is part of every chunk's heading: a rename re-embeds them all, and hits carry the new title.
    const renamedHit = await t.as(owner).DocumentRpc.search({ documentInstanceId, queryText: 'refunds', topK: 1 });
    assert.equal(renamedHit[0].payload.metadata.title, 'Orbit handbook');
  });

  it('keeps titles unique in an instance, and refuses parents outside it or below the page', async () => {
    const documentInstanceId = instance();
    const root = await t.as(owner).DocumentRpc.create({ title: 'Root', documentInstanceId });
    const child = await t.as(owner).DocumentRpc.create({ title: 'Child', documentInstanceId, parentId: root._id });
    assert.equal(child.parentId, root._id);

    await refused(t.as(owner).DocumentRpc.create({ title: 'root', documentInstanceId }), 'CONFLICT');
    await refused(t.as(owner).DocumentRpc.update({ _id: child._id, title: 'ROOT' }), 'CONFLICT');
    // The same title in another instance is another page.
    await t.as(owner).DocumentRpc.create({ title: 'Root', documentInstanceId: instance() });

    const elsewhere = await t.as(owner).DocumentRpc.create({ title: 'Elsewhere', documentInstanceId: instance() });
    const foreignParent = await refused(t.as(owner).DocumentRpc.create({ title: 'Orphan', documentInstanceId, parentId: elsewhere._id }), 'VALIDATION_ERROR');
    assert.match(JSON.stringify([foreignParent.message, foreignParent.issues]), /parentId/);
    await refused(t.as(owner).DocumentRpc.update({ _id: root._id, parentId: child._id }), 'VALIDATION_ERROR');
    await refused(t.as(owner).DocumentRpc.update({ _id: root._id, parentId: root._id }), 'VALIDATION_ERROR');
    assert.equal((await t.as(owner).DocumentRpc.getById({ docId: root._id })).version, 1, 'refused changes change nothing');

    const moved = await t.as(owner).DocumentRpc.update({ _id: child._id, parentId: null });
    assert.equal(moved.parentId, null);
    assert.equal(moved.version, 2);
  });

  it('deletes a page with every page under it and takes them out of search', async () => {
    const documentInstanceId = instance();
    const top = await t.as(owner).DocumentRpc.create({ title: 'Top', documentInstanceId, content: 'Satellites orbit the planet.' });
    const middle = await t
      .as(owner)
      .DocumentRpc.create({ title: 'Middle', documentInstanceId, parentId: top._id, content: 'Telescopes watch the satellites.' });
    await t.as(owner).DocumentRpc.create({ title: 'Bottom', documentInstanceId, parentId: middle._id, content: 'Satellite dishes point at the sky.' });
    const sibling = await t.as(owner).DocumentRpc.create({ title: 'Sibling', documentInstanceId, content: 'Satellites need fuel.' });
    assert.equal((await t.as(owner).DocumentRpc.search({ documentInstanceId, queryText: 'satellites', topK: 10 })).length, 4);

    assert.deepEqual(await t.as(owner).DocumentRpc.delete({ _id: top._id }), { success: true, deletedCount: 3 });
    const left = await t.as(owner).DocumentRpc.getAllDocuments({ documentInstanceId });
    assert.deepEqual(
      left.data.map((page) => page._id),
      [sibling._id],
    );
    const hits = await t.as(owner).DocumentRpc.search({ documentInstanceId, queryText: 'satellites', topK: 10 });
    assert.deepEqual(
      hits.map((hit) => hit.payload.metadata.recordId),
      [sibling._id],
    );
    assert.equal((await chunksOf(middle._id)).length, 0);
    await refused(t.as(owner).DocumentRpc.getById({ docId: middle._id }), 'NOT_FOUND');
    await refused(t.as(owner).DocumentRpc.getVersions({ docId: top._id }), 'NOT_FOUND');
    await refused(t.as(owner).DocumentRpc.delete({ _id: top._id }), 'NOT_FOUND');
  });

  it("never shows or changes another subscription's pages", async () => {
    const documentInstanceId = instance();
    const page = await t.as(owner).DocumentRpc.create({ title: 'Secret plans', documentInstanceId, content: 'The launch is on Tuesday.' });
    await refused(t.as(stranger).DocumentRpc.getById({ docId: page._id }), 'NOT_FOUND');
    await refused(t.as(stranger).DocumentRpc.getByTitle({ documentInstanceId, title: 'Secret plans' }), 'NOT_FOUND');
    assert.deepEqual(await t.as(stranger).DocumentRpc.getAllDocuments({ documentInstanceId }), { data: [], totalCount: 0 });
    assert.deepEqual(await t.as(stranger).DocumentRpc.search({ documentInstanceId, queryText: 'when is the launch' }), []);
    await refused(t.as(stranger).DocumentRpc.update({ _id: page._id, content: 'hacked' }), 'NOT_FOUND');
    await refused(t.as(stranger).DocumentRpc.delete({ _id: page._id }), 'NOT_FOUND');
    await refused(t.as(stranger).DocumentRpc.getVersions({ docId: page._id }), 'NOT_FOUND');
    await refused(t.as(stranger).DocumentRpc.create({ title: 'Child', documentInstanceId, parentId: page._id }), 'VALIDATION_ERROR');
    // The same instance id in the stranger's subscription is their own, and the title is free there.
    await t.as(stranger).DocumentRpc.create({ title: 'Secret plans', documentInstanceId, content: 'Ours.' });
    assert.equal((await t.as(owner).DocumentRpc.getById({ docId: page._id })).content, 'The launch is on Tuesday.');
  });

  it('refuses bad input with VALIDATION_ERROR naming the field', async () => {
    // Params the types would refuse, called by name.
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['DocumentRpc.create', { documentInstanceId: 'x', title: '   ' }, /title/],
      ['DocumentRpc.create', { title: 'No instance' }, /documentInstanceId/],
      ['DocumentRpc.create', { documentInstanceId: 'x', title: 'T', parentId: 'not-a-uuid' }, /parentId/],
      ['DocumentRpc.create', { documentInstanceId: 'x', title: 'T', tags: 'one' }, /tags/],
      ['DocumentRpc.update', { title: 'No id' }, /_id/],
      ['DocumentRpc.getById', { docId: 42 }, /docId/],
      ['DocumentRpc.search', { documentInstanceId: 'x', queryText: 'q', topK: 0 }, /topK/],
      ['DocumentRpc.search', { documentInstanceId: 'x', queryText: '' }, /queryText/],
    ];
    for (const [method, params, field] of cases) {
      const error = await refused(t.as(owner).call(method, params), 'VALIDATION_ERROR', `${method} ${JSON.stringify(params)}`);
      assert.match(JSON.stringify([error.message, error.issues]), field);
    }
    await refused(t.as(null).DocumentRpc.getAllDocuments({ documentInstanceId: 'x' }), 'UNAUTHENTICATED');
  });
});
