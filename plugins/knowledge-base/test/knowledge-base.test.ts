import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import type { KnowledgeBaseAdminRpcIngestTextParams, KnowledgeBaseAdminRpcListDocumentsParams } from '../../../test/support/caller.ts';
import { refused, type Credential } from '../../../test/support/caller.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { eventually, startHttpReceiver } from '../../../test/support/peers.ts';
import { putUpload } from '../../../test/support/uploads.ts';
import { addUser, type Member } from '../../../test/support/users.ts';
import { HANDBOOK } from '../../../test/fixtures/handbook.ts';

const HTML = `<!doctype html><html><head><title>Garden care</title><style>body { color: red }</style><script>var tracking = 1;</script></head>
<body><h1>Garden care</h1><p>Water the tomatoes every morning in summer.</p><h2>Pruning</h2><ul><li>Prune roses in early spring.</li><li>Cut back lavender after flowering.</li></ul></body></html>`;

async function pdfOf(pages: string[]): Promise<Buffer> {
  const document = await PDFDocument.create();
  document.setTitle('Fleet manual');
  const font = await document.embedFont(StandardFonts.Helvetica);
  for (const text of pages) document.addPage().drawText(text, { x: 50, y: 700, size: 12, font });
  return Buffer.from(await document.save());
}

describe('KnowledgeBaseAdminRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Member;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  const ready = (session: Credential, docId: string) =>
    eventually(async () => {
      const document = await t.as(session).KnowledgeBaseAdminRpc.getDocument({ docId });
      return ['ready', 'failed'].includes(document.status) ? document : undefined;
    });
  const ingest = async (session: Credential, params: KnowledgeBaseAdminRpcIngestTextParams) => {
    const { document } = await t.as(session).KnowledgeBaseAdminRpc.ingestText(params);
    return ready(session, document._id);
  };
  const chunkRows = (docId: string) =>
    t.app.deps.db.execute<{ id: string; embedding: string | null; withdrawn: boolean }>(
      `select id, embedding_a::text as embedding, withdrawn from knowledge_base_chunk where source = 'knowledge-base' and record_id = ?`,
      [docId],
    );

  // A web server for ingestUrl, the one loopback host the app may fetch from.
  let ferryTimes = 'The ferry leaves the harbour at seven in the morning.';
  let web: Awaited<ReturnType<typeof startHttpReceiver>>;

  before(async () => {
    const fleetPdf = await pdfOf(['Harbour fleet', 'The harbour keeps four pilot boats.']);
    web = await startHttpReceiver((request) => {
      const page = `<html><head><title>Ferry</title></head><body><h1>Timetable</h1><p>${ferryTimes}</p></body></html>`;
      if (request.path === '/ferry.html') return { status: 200, headers: { 'content-type': 'text/html; charset=utf-8' }, body: page };
      if (request.path === '/fleet') return { status: 200, headers: { 'content-type': 'application/pdf' }, body: fleetPdf };
      // Answered late: an ingestion fetching it holds a slot of the ingestion queue meanwhile.
      if (request.path.startsWith('/slow')) return { status: 200, headers: { 'content-type': 'text/html; charset=utf-8' }, body: page, delayMs: 1500 };
      if (request.path === '/data.bin') return { status: 200, headers: { 'content-type': 'application/octet-stream' }, body: Buffer.from([0, 1, 2, 3]) };
      return { status: 404 };
    });
    t = await startTestApp({
      withNotes: false,
      plugins: ['auth', 'knowledge-base'],
      env: { JOBS_POLL_MS: '500', OUTBOUND_ALLOWED_HOSTS: `127.0.0.1:${web.port}` },
    });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    stranger = await t.signup();
  });
  after(async () => {
    await t.close();
    await web.close();
  });

  it('ingests Markdown in the background and finds the passage that answers a question, with its section as context', async () => {
    const { document, jobId } = await t.as(admin).KnowledgeBaseAdminRpc.ingestText({
      name: 'Orbit handbook',
      content: HANDBOOK,
      description: 'How Orbit works',
      collection: 'manuals',
      tags: ['orbit', 'policy'],
    });
    assert.equal(document.status, 'pending');
    assert.match(jobId, /^[0-9a-f-]{36}$/);
    assert.deepEqual(
      {
        name: document.name,
        docType: document.docType,
        sourceType: document.sourceType,
        version: document.version,
        userId: document.userId,
        collection: document.collection,
      },
      { name: 'Orbit handbook', docType: 'markdown', sourceType: 'text', version: 1, userId: admin.user._id, collection: 'manuals' },
    );
    const done = await ready(admin, document._id);
    assert.equal(done.status, 'ready');
    assert.equal(done.error, null);
    assert.ok(done.chunkCount >= 4);
    assert.equal(done.content, HANDBOOK);

    const hits = await t.as(member).KnowledgeBaseAdminRpc.search({ queryText: 'how long do refunds take' });
    assert.ok(hits.length >= 1 && hits.length <= 5);
    const [best] = hits;
    assert.equal(best.documentId, document._id);
    assert.equal(best.name, 'Orbit handbook');
    assert.equal(best.heading, 'Orbit handbook › Orbit handbook › Refunds');
    assert.match(best.text, /ten working days/);
    assert.match(best.context, /ten working days/);
    assert.equal(best.collection, 'manuals');
    assert.deepEqual(best.metadata.tags, ['orbit', 'policy']);
    assert.ok(best.semanticRank! >= 1 && best.textRank! >= 1, 'found by meaning and by words');
    assert.ok(best.score > 0);
    for (let index = 1; index < hits.length; index++) assert.ok(hits[index - 1].score >= hits[index].score);

    const semantic = await t.as(member).KnowledgeBaseAdminRpc.search({ queryText: 'support desk hours', mode: 'semantic', topK: 1 });
    assert.equal(semantic.length, 1);
    assert.match(semantic[0].text, /nine to five/);
    assert.equal(semantic[0].textRank, null);
    assert.ok(semantic[0].score > 0 && semantic[0].score <= 1, 'cosine similarity');
  });

  it('reads HTML without its scripts and styles, keeping its headings', async () => {
    const document = await ingest(admin, { name: 'Garden', content: HTML, format: 'html', collection: 'garden' });
    assert.equal(document.status, 'ready');
    assert.equal(document.docType, 'html');
    assert.match(document.content!, /^# Garden care/m);
    assert.match(document.content!, /^## Pruning/m);
    assert.match(document.content!, /^-\s+Prune roses in early spring\./m);
    assert.doesNotMatch(document.content!, /tracking|color: red/);
    const [hit] = await t.as(member).KnowledgeBaseAdminRpc.search({ queryText: 'when should roses be pruned', collection: 'garden', topK: 1 });
    assert.match(hit.text, /Prune roses/);
    assert.equal(hit.heading, 'Garden › Garden care › Pruning');
  });

  it('ingests uploaded files, a PDF made here among them, and fails a broken one with the reason', async () => {
    const { uploadKey, uploadUrl, types, maxBytes } = await t.as(admin).KnowledgeBaseAdminRpc.getUploadKey();
    assert.ok(uploadUrl.endsWith(`/api/uploads/${uploadKey}`));
    assert.ok(types.includes('application/pdf') && types.includes('text/markdown') && types.includes('text/html'));
    assert.ok(maxBytes >= 1024 * 1024 && maxBytes <= 20 * 1024 * 1024, 'KB_MAX_FILE_BYTES, capped by UPLOAD_MAX_BYTES');
    const pdf = await pdfOf(['The fleet has twelve delivery vans.', 'Vans are serviced every six months at the depot.']);
    assert.equal((await putUpload(t, uploadKey, pdf, 'application/pdf', { token: admin.token, fileName: 'fleet.pdf' })).status, 200);
    assert.equal(
      (await putUpload(t, uploadKey, Buffer.from('Plain notes: the depot opens at seven.'), 'text/plain', { token: admin.token, fileName: 'notes.txt' }))
        .status,
      200,
    );
    const { documents } = await t.as(admin).KnowledgeBaseAdminRpc.ingestFiles({ uploadKey, collection: 'fleet', tags: ['vans'] });
    assert.deepEqual(
      documents.map((document) => [document.name, document.docType, document.sourceType]),
      [
        ['fleet.pdf', 'pdf', 'file'],
        ['notes.txt', 'text', 'file'],
      ],
    );
    const pdfDocument = await ready(admin, documents[0]._id);
    assert.equal(pdfDocument.status, 'ready');
    assert.equal(pdfDocument.sizeBytes, pdf.length);
    assert.match(pdfDocument.content!, /## Page 2\n\nVans are serviced every six months/);
    const [hit] = await t.as(member).KnowledgeBaseAdminRpc.search({ queryText: 'how often are vans serviced', collection: 'fleet', topK: 1 });
    assert.equal(hit.documentId, documents[0]._id);
    assert.equal(hit.heading, 'fleet.pdf › Page 2');
    assert.equal((await ready(admin, documents[1]._id)).status, 'ready');
    // The key was used up.
    await refused(t.as(admin).KnowledgeBaseAdminRpc.ingestFiles({ uploadKey }), 'BAD_REQUEST');

    const broken = await t.as(admin).KnowledgeBaseAdminRpc.getUploadKey();
    await putUpload(t, broken.uploadKey, Buffer.from('%PDF-1.7\nthis is not really a pdf at all'), 'application/pdf', {
      token: admin.token,
      fileName: 'broken.pdf',
    });
    const failed = await t.as(admin).KnowledgeBaseAdminRpc.ingestFiles({ uploadKey: broken.uploadKey });
    const outcome = await ready(admin, failed.documents[0]._id);
    assert.equal(outcome.status, 'failed');
    assert.match(outcome.error!, /broken\.pdf is not a readable PDF/);
    assert.equal(outcome.chunkCount, 0);
  });

  it('fetches and ingests a web page or file by URL through the outbound guard, and fails what cannot be fetched with the reason', async () => {
    const url = `${web.url}/ferry.html`;
    const { document, jobId } = await t.as(admin).KnowledgeBaseAdminRpc.ingestUrl({ url, tags: ['travel'] });
    assert.deepEqual([document.name, document.sourceType, document.status, document.sizeBytes], [url, 'url', 'pending', 0]);
    assert.match(jobId, /^[0-9a-f-]{36}$/);
    const page = await ready(admin, document._id);
    assert.equal(page.status, 'ready');
    assert.equal(page.docType, 'html');
    assert.equal(page.sizeBytes, Buffer.byteLength(`<html><head><title>Ferry</title></head><body><h1>Timetable</h1><p>${ferryTimes}</p></body></html>`));
    assert.match(page.content!, /^# Timetable/m);
    const fetched = web.requests.find((request) => request.path === '/ferry.html')!;
    assert.match(fetched.headers.accept!, /text\/html/);
    const [hit] = await t.as(member).KnowledgeBaseAdminRpc.search({ queryText: 'when does the ferry leave the harbour', topK: 1, filter: { tags: 'travel' } });
    assert.deepEqual([hit.documentId, hit.metadata.docType, hit.metadata.sourceType], [document._id, 'html', 'url']);

    // The page changed: ingesting it again as a new version fetches it again.
    ferryTimes = 'From May the ferry leaves the harbour at eight.';
    await t.as(admin).KnowledgeBaseAdminRpc.ingestUrl({ url, documentId: document._id });
    await eventually(
      async () => ((await t.as(admin).KnowledgeBaseAdminRpc.getDocument({ docId: document._id })).content!.includes('From May') ? true : undefined),
      20_000,
    );
    const versions = await t.as(admin).KnowledgeBaseAdminRpc.getDocumentVersions({ docId: document._id });
    assert.deepEqual(
      versions.map((version) => [version.version, version.sourceUrl, version.docType, version.current]),
      [
        [2, url, 'html', true],
        [1, url, 'html', false],
      ],
    );

    // The parser follows the content type, whatever the URL says.
    const pdf = await t.as(admin).KnowledgeBaseAdminRpc.ingestUrl({ url: `${web.url}/fleet`, name: 'Fleet' });
    const pdfDocument = await ready(admin, pdf.document._id);
    assert.deepEqual([pdfDocument.status, pdfDocument.docType], ['ready', 'pdf']);
    assert.match(pdfDocument.content!, /## Page 2\n\nThe harbour keeps four pilot boats\./);

    const failures: [string, RegExp][] = [
      [`${web.url}/missing.html`, /answered 404/],
      [`${web.url}/data.bin`, /No parser reads application\/octet-stream/],
      // Not the allowed host: a name that resolves to a loopback address is refused when connecting.
      [`http://localhost:${web.port}/ferry.html`, /may not be fetched: localhost is not a public address$/],
    ];
    for (const [failing, reason] of failures) {
      const started = await t.as(admin).KnowledgeBaseAdminRpc.ingestUrl({ url: failing });
      const outcome = await ready(admin, started.document._id);
      assert.equal(outcome.status, 'failed', failing);
      assert.match(outcome.error!, reason);
      assert.equal((await t.as(admin).KnowledgeBaseAdminRpc.getJob({ jobId: started.jobId })).state, 'failed');
    }
    for (const [bad, message] of [
      ['http://10.1.2.3/page.html', /10\.1\.2\.3 is not a public address/],
      ['ftp://example.com/page.html', /use http or https/],
      ['not a url', /absolute URL/],
    ] as const) {
      const error = await refused(t.as(admin).KnowledgeBaseAdminRpc.ingestUrl({ url: bad }), 'VALIDATION_ERROR', bad);
      assert.equal(error.issues![0]!.path, 'url');
      assert.match(error.issues![0]!.message, message);
    }
    await refused(t.as(member).KnowledgeBaseAdminRpc.ingestUrl({ url }), 'FORBIDDEN');
  });

  it('keeps versions on re-ingest: search answers from the new text only', async () => {
    const first = await ingest(admin, { name: 'Parking', content: 'Visitors park in the north lot.' });
    const { document } = await t
      .as(admin)
      .KnowledgeBaseAdminRpc.ingestText({ documentId: first._id, name: 'Parking', content: 'Visitors park in the underground garage.' });
    assert.equal(document.version, 2);
    assert.equal(document.status, 'pending');
    const second = await ready(admin, first._id);
    assert.equal(second.content, 'Visitors park in the underground garage.');
    const versions = await t.as(member).KnowledgeBaseAdminRpc.getDocumentVersions({ docId: first._id });
    assert.deepEqual(
      versions.map((version) => [version.version, version.current, version.docType]),
      [
        [2, true, 'markdown'],
        [1, false, 'markdown'],
      ],
    );
    const hits = await t.as(member).KnowledgeBaseAdminRpc.search({ queryText: 'where do visitors park', filter: { name: 'Parking' } });
    assert.deepEqual(
      hits.map((hit) => hit.text),
      ['Visitors park in the underground garage.'],
    );
  });

  it('updates metadata without embedding again, and soft-deletes: out of search at once, chunks removed by the job', async () => {
    const document = await ingest(admin, { name: 'Kitchen', content: 'The kitchen dishwasher runs every evening at eight.', tags: ['office'] });
    const before = await chunkRows(document._id);
    const updated = await t.as(admin).KnowledgeBaseAdminRpc.updateDocument({
      docId: document._id,
      updates: { name: 'Office kitchen', tags: ['office', 'facilities'], collection: 'facilities' },
    });
    assert.deepEqual([updated.name, updated.tags, updated.collection, updated.version], ['Office kitchen', ['office', 'facilities'], 'facilities', 1]);
    assert.deepEqual(await chunkRows(document._id), before, 'same chunks, same embeddings');
    const filtered = await t.as(member).KnowledgeBaseAdminRpc.search({ queryText: 'dishwasher', filter: { tags: 'facilities' } });
    assert.deepEqual(
      filtered.map((hit) => [hit.name, hit.collection]),
      [['Office kitchen', 'facilities']],
    );

    const deleted = await t.as(admin).KnowledgeBaseAdminRpc.deleteDocument({ docId: document._id });
    assert.equal(deleted.status, 'deleted');
    assert.ok(deleted.deletedAt);
    const afterDelete = await t.as(member).KnowledgeBaseAdminRpc.search({ queryText: 'dishwasher', topK: 100 });
    assert.ok(
      afterDelete.every((hit) => hit.documentId !== document._id),
      'no hit of the deleted document',
    );
    assert.ok(
      (await chunkRows(document._id)).every((chunk) => chunk.withdrawn),
      'withdrawn until the job removes them',
    );
    const listed = await t.as(member).KnowledgeBaseAdminRpc.listDocuments({ search: 'dishwasher' });
    assert.equal(listed.totalCount, 0);
    const inBin = await t.as(member).KnowledgeBaseAdminRpc.listDocuments({ status: 'deleted' });
    assert.ok(inBin.data.some((item) => item._id === document._id));
    await eventually(async () => ((await chunkRows(document._id)).length === 0 ? true : undefined));
    await refused(t.as(admin).KnowledgeBaseAdminRpc.getChunks({ docId: document._id }), 'NOT_FOUND');
    await refused(t.as(admin).KnowledgeBaseAdminRpc.deleteDocument({ docId: document._id }), 'NOT_FOUND');
  });

  it('lists, edits and deletes chunks; an edited chunk is embedded again at once', async () => {
    const document = await ingest(admin, { name: 'Chunks', content: HANDBOOK });
    const chunks = await t.as(member).KnowledgeBaseAdminRpc.getChunks({ docId: document._id });
    assert.equal(chunks.length, document.chunkCount);
    assert.deepEqual(Object.keys(chunks[0]).sort(), ['chunkId', 'embedded', 'heading', 'ordinal', 'sectionId', 'text']);
    assert.deepEqual(
      chunks.map((chunk) => chunk.ordinal),
      chunks.map((_: unknown, index: number) => index),
    );
    assert.ok(chunks.every((chunk) => chunk.embedded));

    const refunds = chunks.find((chunk) => /Refunds/.test(chunk.text))!;
    const edited = await t
      .as(admin)
      .KnowledgeBaseAdminRpc.updateChunk({ docId: document._id, chunkId: refunds.chunkId, text: 'Refunds arrive by bank transfer within three days.' });
    assert.equal(edited.text, 'Refunds arrive by bank transfer within three days.');
    assert.equal(edited.embedded, true);
    const [hit] = await t.as(member).KnowledgeBaseAdminRpc.search({ queryText: 'refunds bank transfer', filter: { name: 'Chunks' }, topK: 1 });
    assert.equal(hit.chunkId, refunds.chunkId);
    assert.match(hit.text, /bank transfer/);

    const empty = await refused(t.as(admin).KnowledgeBaseAdminRpc.updateChunk({ docId: document._id, chunkId: refunds.chunkId, text: '' }), 'VALIDATION_ERROR');
    assert.match(JSON.stringify(empty.issues), /text/);

    assert.deepEqual(await t.as(admin).KnowledgeBaseAdminRpc.deleteChunk({ docId: document._id, chunkId: refunds.chunkId }), {
      success: true,
      chunkCount: document.chunkCount - 1,
    });
    const left = await t.as(member).KnowledgeBaseAdminRpc.getChunks({ docId: document._id });
    assert.equal(left.length, chunks.length - 1);
    await refused(t.as(admin).KnowledgeBaseAdminRpc.deleteChunk({ docId: document._id, chunkId: refunds.chunkId }), 'NOT_FOUND');
    await refused(t.as(admin).KnowledgeBaseAdminRpc.updateChunk({ docId: document._id, chunkId: refunds.chunkId, text: 'x' }), 'NOT_FOUND');

    const reindexed = await t.as(admin).KnowledgeBaseAdminRpc.reindexDocument({ docId: document._id });
    assert.deepEqual(reindexed, { success: true, chunkCount: document.chunkCount - 1 });
  });

  it('lists documents with every filter, full-text search, paging, sorting and a time window', async () => {
    const subscriber = await t.signup();
    const me = subscriber.user._id;
    const started = new Date().toISOString();
    const alpha = await ingest(subscriber, {
      name: 'Alpha',
      content: 'Comets have icy tails.',
      tags: ['space', 'ice'],
      collection: 'astro',
      contactId: 'c-1',
      projectId: 'p-1',
    });
    const beta = await ingest(subscriber, { name: 'beta', content: 'Volcanoes erupt lava.', tags: ['earth'], format: 'text', contactId: 'c-2' });
    const gamma = await ingest(subscriber, {
      name: 'Gamma',
      content: '<p>Glaciers are rivers of ice.</p>',
      format: 'html',
      tags: ['earth', 'ice'],
      userId: null,
    });
    const list = (params: KnowledgeBaseAdminRpcListDocumentsParams) => t.as(subscriber).KnowledgeBaseAdminRpc.listDocuments(params);
    const names = async (params: KnowledgeBaseAdminRpcListDocumentsParams) => (await list(params)).data.map((document) => document.name);

    const all = await list({});
    assert.deepEqual([all.totalCount, all.page, all.limit], [3, 1, 20]);
    assert.deepEqual(await names({}), ['Gamma', 'beta', 'Alpha'], 'newest first');
    assert.deepEqual(await names({ sortBy: 'name', sortDir: 'asc' }), ['Alpha', 'beta', 'Gamma'], 'names regardless of case');
    assert.deepEqual(await names({ docType: 'html' }), ['Gamma']);
    assert.deepEqual(await names({ sourceType: 'text' }), ['Gamma', 'beta', 'Alpha']);
    assert.deepEqual(await names({ tags: ['ice'] }), ['Gamma', 'Alpha']);
    assert.deepEqual(await names({ tags: ['space', 'earth'] }), ['Gamma', 'beta', 'Alpha'], 'any of the tags');
    assert.deepEqual(await names({ collection: 'astro' }), ['Alpha']);
    assert.deepEqual(await names({ collection: null }), ['Gamma', 'beta']);
    assert.deepEqual(await names({ contactId: 'c-2' }), ['beta']);
    assert.deepEqual(await names({ projectId: 'p-1' }), ['Alpha']);
    assert.deepEqual(await names({ userId: me }), ['beta', 'Alpha'], 'gamma was given no user');
    assert.deepEqual(await names({ status: 'ready' }), ['Gamma', 'beta', 'Alpha']);
    assert.deepEqual(await names({ search: 'lava' }), ['beta'], 'words of the text');
    assert.deepEqual(await names({ search: 'glacier' }), ['Gamma'], 'stemmed: glacier finds glaciers');
    assert.deepEqual(await names({ search: 'alpha' }), ['Alpha'], 'words of the name');
    assert.deepEqual(await names({ startTime: started, endTime: new Date(Date.now() + 60_000).toISOString() }), ['Gamma', 'beta', 'Alpha']);
    assert.deepEqual(await names({ endTime: started }), []);
    const page2 = await list({ limit: 2, page: 2 });
    assert.deepEqual([page2.totalCount, page2.data.map((document) => document._id)], [3, [alpha._id]]);
    assert.ok(beta && gamma);

    for (const [params, field] of [
      [{ sortBy: 'password' }, 'sortBy'],
      [{ sortDir: 'up' }, 'sortDir'],
      [{ limit: 0 }, 'limit'],
      [{ page: -1 }, 'page'],
      [{ status: 'gone' }, 'status'],
      [{ startTime: 'yesterday' }, 'startTime'],
      [{ tags: 'ice' }, 'tags'],
    ] as const) {
      const error = await refused(t.as(subscriber).call('KnowledgeBaseAdminRpc.listDocuments', params), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.equal(error.issues![0]!.path, field);
    }
  });

  it('lists ingestion jobs, cancels a queued one and retries it; counts quota and statistics; lists filter options', async () => {
    const subscriber = await t.signup();
    const done = await ingest(subscriber, { name: 'Done', content: 'Finished text.', collection: 'c1', tags: ['t1', 't2'] });
    // Both slots of the ingestion queue (its concurrency, 2) busy fetching a slow page, for another subscription: the next ingestion waits.
    const busy = await t.signup();
    const slow = await Promise.all([1, 2].map((n) => t.as(busy).KnowledgeBaseAdminRpc.ingestUrl({ url: `${web.url}/slow/${n}` })));
    await eventually(async () => {
      const states = await Promise.all(slow.map(({ jobId }) => t.as(busy).KnowledgeBaseAdminRpc.getJob({ jobId })));
      return states.every((job) => job.state === 'running') || undefined;
    });
    const queued = await t.as(subscriber).KnowledgeBaseAdminRpc.ingestText({ name: 'Queued', content: 'Waiting text.' });
    assert.equal((await t.as(subscriber).KnowledgeBaseAdminRpc.getJob({ jobId: queued.jobId })).state, 'queued');
    const cancelled = await t.as(subscriber).KnowledgeBaseAdminRpc.cancelJob({ jobId: queued.jobId });
    assert.equal(cancelled.state, 'cancelled');
    const afterCancel = await t.as(subscriber).KnowledgeBaseAdminRpc.getDocument({ docId: queued.document._id });
    assert.deepEqual([afterCancel.status, afterCancel.error], ['failed', 'Ingestion cancelled']);
    await refused(t.as(subscriber).KnowledgeBaseAdminRpc.cancelJob({ jobId: queued.jobId }), 'CONFLICT');

    const jobs = await t.as(subscriber).KnowledgeBaseAdminRpc.listJobs();
    assert.equal(jobs.totalCount, 2);
    assert.deepEqual(
      jobs.data.map((job) => [job.documentId, job.state]),
      [
        [queued.document._id, 'cancelled'],
        [done._id, 'done'],
      ],
    );
    assert.deepEqual(Object.keys(jobs.data[0]).sort(), [
      'createdAt',
      'createdBy',
      'documentId',
      'error',
      'finishedAt',
      'jobId',
      'startedAt',
      'state',
      'version',
    ]);
    assert.equal((await t.as(subscriber).KnowledgeBaseAdminRpc.listJobs({ state: 'done' })).data[0].documentId, done._id);
    assert.equal((await t.as(subscriber).KnowledgeBaseAdminRpc.getJob({ jobId: queued.jobId })).state, 'cancelled');

    const retried = await t.as(subscriber).KnowledgeBaseAdminRpc.retryJob({ jobId: queued.jobId });
    assert.notEqual(retried.jobId, queued.jobId);
    assert.equal(retried.state, 'queued');
    assert.equal((await ready(subscriber, queued.document._id)).status, 'ready');
    assert.equal((await t.as(subscriber).KnowledgeBaseAdminRpc.getJob({ jobId: retried.jobId })).state, 'done');
    await refused(t.as(subscriber).KnowledgeBaseAdminRpc.retryJob({ jobId: retried.jobId }), 'CONFLICT');

    const quota = await t.as(subscriber).KnowledgeBaseAdminRpc.getQuota();
    assert.deepEqual(quota.documents, { used: 2, limit: 10_000 });
    assert.deepEqual(quota.storageBytes, { used: Buffer.byteLength('Finished text.') + Buffer.byteLength('Waiting text.'), limit: 1024 ** 3 });

    const stats = await t.as(subscriber).KnowledgeBaseAdminRpc.getStats();
    assert.deepEqual(stats.documents, { total: 2, byStatus: { pending: 0, processing: 0, ready: 2, failed: 0, deleted: 0 } });
    assert.deepEqual(stats.chunks, { total: 2, embedded: 2, pending: 0 });
    assert.deepEqual(stats.ingestions, { queued: 0, running: 0, done: 2, failed: 0, cancelled: 1 });
    assert.deepEqual(stats.embedding, { model: 'local-lexical-384', switch: null });

    const options = await t.as(subscriber).KnowledgeBaseAdminRpc.getOptions();
    assert.deepEqual(options.docTypes, ['text', 'markdown', 'html', 'pdf']);
    assert.deepEqual(options.collections, ['c1']);
    assert.deepEqual(options.tags, ['t1', 't2']);
    assert.ok(options.fileTypes.includes('application/pdf'));
  });

  it('refuses ingestion past the quota with QUOTA_EXCEEDED, changing nothing; a refused file ingestion keeps its upload key usable', async () => {
    const small = await startTestApp({ withNotes: false, plugins: ['auth', 'knowledge-base'], env: { KB_MAX_DOCUMENTS: '1', KB_MAX_STORAGE_BYTES: '2000' } });
    try {
      const owner = await small.signup();
      await small.as(owner).KnowledgeBaseAdminRpc.ingestText({ name: 'One', content: 'x'.repeat(100) });
      await refused(small.as(owner).KnowledgeBaseAdminRpc.ingestText({ name: 'Two', content: 'y' }), 'QUOTA_EXCEEDED');
      const [first] = (await small.as(owner).KnowledgeBaseAdminRpc.listDocuments()).data;
      await refused(small.as(owner).KnowledgeBaseAdminRpc.ingestText({ documentId: first._id, name: 'One', content: 'z'.repeat(2001) }), 'QUOTA_EXCEEDED');
      const after = await small.as(owner).KnowledgeBaseAdminRpc.listDocuments();
      assert.deepEqual([after.totalCount, after.data[0].version], [1, 1]);
      // A new version replaces the old one's bytes.
      await small.as(owner).KnowledgeBaseAdminRpc.ingestText({ documentId: first._id, name: 'One', content: 'z'.repeat(1500) });

      const { uploadKey } = await small.as(owner).KnowledgeBaseAdminRpc.getUploadKey();
      assert.equal(
        (await putUpload(small, uploadKey, Buffer.from('Parking is underground.\n'), 'text/plain', { token: owner.token, fileName: 'parking.txt' })).status,
        200,
      );
      await refused(small.as(owner).KnowledgeBaseAdminRpc.ingestFiles({ uploadKey }), 'QUOTA_EXCEEDED');
      await refused(small.as(owner).KnowledgeBaseAdminRpc.ingestFiles({ uploadKey, documentId: '00000000-0000-4000-8000-000000000000' }), 'NOT_FOUND');
      const { documents } = await small.as(owner).KnowledgeBaseAdminRpc.ingestFiles({ uploadKey, documentId: first._id });
      assert.deepEqual([documents[0]._id, documents[0].version, documents[0].sizeBytes], [first._id, 3, 24], 'the key was still usable');
    } finally {
      await small.close();
    }
  });

  it('lets users read and search, and only admins and staff change the knowledge base', async () => {
    const document = await ingest(admin, { name: 'Rules', content: 'Badges must be worn at all times.' });
    const members = t.as(member).KnowledgeBaseAdminRpc;
    for (const [method, call] of [
      ['ingestText', () => members.ingestText({ name: 'x', content: 'y' })],
      ['getUploadKey', () => members.getUploadKey()],
      ['updateDocument', () => members.updateDocument({ docId: document._id, updates: { name: 'z' } })],
      ['deleteDocument', () => members.deleteDocument({ docId: document._id })],
      ['reindexDocument', () => members.reindexDocument({ docId: document._id })],
    ] as const) {
      await refused(call(), 'FORBIDDEN', method);
    }
    assert.equal((await t.as(member).KnowledgeBaseAdminRpc.getDocument({ docId: document._id })).name, 'Rules');

    // A document may belong to another user of the subscription, never to someone outside it.
    const { document: owned } = await t
      .as(admin)
      .KnowledgeBaseAdminRpc.ingestText({ name: 'Badge log', content: 'Badge 7 was lost.', userId: member.user._id });
    assert.equal(owned.userId, member.user._id);
    const before = (await t.as(admin).KnowledgeBaseAdminRpc.getQuota()).documents.used;
    for (const userId of [stranger.user._id, '00000000-0000-4000-8000-000000000000']) {
      const error = await refused(t.as(admin).KnowledgeBaseAdminRpc.ingestText({ name: 'x', content: 'y', userId }), 'VALIDATION_ERROR');
      assert.deepEqual([error.code, error.issues![0]!.path], ['VALIDATION_ERROR', 'userId']);
    }
    assert.equal((await t.as(admin).KnowledgeBaseAdminRpc.getQuota()).documents.used, before);
  });

  it("never shows or changes another subscription's documents, chunks, versions or search hits", async () => {
    const document = await ingest(admin, { name: 'Confidential', content: 'The merger closes in March.' });
    const [chunk] = await t.as(admin).KnowledgeBaseAdminRpc.getChunks({ docId: document._id });
    const theirs = t.as(stranger).KnowledgeBaseAdminRpc;
    const calls: [string, () => Promise<unknown>][] = [
      ['getDocument', () => theirs.getDocument({ docId: document._id })],
      ['getDocumentVersions', () => theirs.getDocumentVersions({ docId: document._id })],
      ['getChunks', () => theirs.getChunks({ docId: document._id })],
      ['updateDocument', () => theirs.updateDocument({ docId: document._id, updates: { name: 'Stolen' } })],
      ['updateChunk', () => theirs.updateChunk({ docId: document._id, chunkId: chunk!.chunkId, text: 'changed' })],
      ['deleteChunk', () => theirs.deleteChunk({ docId: document._id, chunkId: chunk!.chunkId })],
      ['reindexDocument', () => theirs.reindexDocument({ docId: document._id })],
      ['deleteDocument', () => theirs.deleteDocument({ docId: document._id })],
      ['ingestText', () => theirs.ingestText({ documentId: document._id, name: 'x', content: 'y' })],
    ];
    for (const [method, call] of calls) {
      await refused(call(), 'NOT_FOUND', method);
    }
    assert.deepEqual(await t.as(stranger).KnowledgeBaseAdminRpc.search({ queryText: 'when does the merger close' }), []);
    assert.equal((await t.as(stranger).KnowledgeBaseAdminRpc.listDocuments({ search: 'merger' })).totalCount, 0);
    const mine = await t.as(admin).KnowledgeBaseAdminRpc.getDocument({ docId: document._id });
    assert.deepEqual([mine.name, mine.status, mine.chunkCount], ['Confidential', 'ready', document.chunkCount]);
    assert.match((await t.as(admin).KnowledgeBaseAdminRpc.getChunks({ docId: document._id }))[0].text, /merger closes in March/);
  });
});
