import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { eventually, startHttpReceiver } from '../../../test/support/peers.ts';
import { putUpload } from '../../../test/support/uploads.ts';
import { addUser } from '../../../test/support/users.ts';
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
  let member: Awaited<ReturnType<typeof addUser>>;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  const as = (session: { token: string }) => ({ token: session.token });
  const ready = (session: { token: string }, docId: string) =>
    eventually(async () => {
      const document = await t.ok('KnowledgeBaseAdminRpc.getDocument', { docId }, as(session));
      return ['ready', 'failed'].includes(document.status) ? document : undefined;
    });
  const ingest = async (session: { token: string }, params: Record<string, unknown>) => {
    const { document } = await t.ok('KnowledgeBaseAdminRpc.ingestText', params, as(session));
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
    const { document, jobId } = await t.ok(
      'KnowledgeBaseAdminRpc.ingestText',
      { name: 'Orbit handbook', content: HANDBOOK, description: 'How Orbit works', collection: 'manuals', tags: ['orbit', 'policy'] },
      as(admin),
    );
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

    const hits = await t.ok('KnowledgeBaseAdminRpc.search', { queryText: 'how long do refunds take' }, as(member));
    assert.ok(hits.length >= 1 && hits.length <= 5);
    const [best] = hits;
    assert.equal(best.documentId, document._id);
    assert.equal(best.name, 'Orbit handbook');
    assert.equal(best.heading, 'Orbit handbook › Orbit handbook › Refunds');
    assert.match(best.text, /ten working days/);
    assert.match(best.context, /ten working days/);
    assert.equal(best.collection, 'manuals');
    assert.deepEqual(best.metadata.tags, ['orbit', 'policy']);
    assert.ok(best.semanticRank >= 1 && best.textRank >= 1, 'found by meaning and by words');
    assert.ok(best.score > 0);
    for (let index = 1; index < hits.length; index++) assert.ok(hits[index - 1].score >= hits[index].score);

    const semantic = await t.ok('KnowledgeBaseAdminRpc.search', { queryText: 'support desk hours', mode: 'semantic', topK: 1 }, as(member));
    assert.equal(semantic.length, 1);
    assert.match(semantic[0].text, /nine to five/);
    assert.equal(semantic[0].textRank, null);
    assert.ok(semantic[0].score > 0 && semantic[0].score <= 1, 'cosine similarity');
  });

  it('reads HTML without its scripts and styles, keeping its headings', async () => {
    const document = await ingest(admin, { name: 'Garden', content: HTML, format: 'html', collection: 'garden' });
    assert.equal(document.status, 'ready');
    assert.equal(document.docType, 'html');
    assert.match(document.content, /^# Garden care/m);
    assert.match(document.content, /^## Pruning/m);
    assert.match(document.content, /^-\s+Prune roses in early spring\./m);
    assert.doesNotMatch(document.content, /tracking|color: red/);
    const [hit] = await t.ok('KnowledgeBaseAdminRpc.search', { queryText: 'when should roses be pruned', collection: 'garden', topK: 1 }, as(member));
    assert.match(hit.text, /Prune roses/);
    assert.equal(hit.heading, 'Garden › Garden care › Pruning');
  });

  it('ingests uploaded files, a PDF made here among them, and fails a broken one with the reason', async () => {
    const { uploadKey, uploadUrl, types, maxBytes } = await t.ok('KnowledgeBaseAdminRpc.getUploadKey', {}, as(admin));
    assert.ok(uploadUrl.endsWith(`/api/uploads/${uploadKey}`));
    assert.ok(types.includes('application/pdf') && types.includes('text/markdown') && types.includes('text/html'));
    assert.ok(maxBytes >= 1024 * 1024 && maxBytes <= 20 * 1024 * 1024, 'KB_MAX_FILE_BYTES, capped by UPLOAD_MAX_BYTES');
    const pdf = await pdfOf(['The fleet has twelve delivery vans.', 'Vans are serviced every six months at the depot.']);
    assert.equal((await putUpload(t, uploadKey, pdf, 'application/pdf', { ...as(admin), fileName: 'fleet.pdf' })).status, 200);
    assert.equal(
      (await putUpload(t, uploadKey, Buffer.from('Plain notes: the depot opens at seven.'), 'text/plain', { ...as(admin), fileName: 'notes.txt' })).status,
      200,
    );
    const { documents } = await t.ok('KnowledgeBaseAdminRpc.ingestFiles', { uploadKey, collection: 'fleet', tags: ['vans'] }, as(admin));
    assert.deepEqual(
      documents.map((document: any) => [document.name, document.docType, document.sourceType]),
      [
        ['fleet.pdf', 'pdf', 'file'],
        ['notes.txt', 'text', 'file'],
      ],
    );
    const pdfDocument = await ready(admin, documents[0]._id);
    assert.equal(pdfDocument.status, 'ready');
    assert.equal(pdfDocument.sizeBytes, pdf.length);
    assert.match(pdfDocument.content, /## Page 2\n\nVans are serviced every six months/);
    const [hit] = await t.ok('KnowledgeBaseAdminRpc.search', { queryText: 'how often are vans serviced', collection: 'fleet', topK: 1 }, as(member));
    assert.equal(hit.documentId, documents[0]._id);
    assert.equal(hit.heading, 'fleet.pdf › Page 2');
    assert.equal((await ready(admin, documents[1]._id)).status, 'ready');
    // The key was used up.
    assert.equal((await t.call('KnowledgeBaseAdminRpc.ingestFiles', { uploadKey }, as(admin))).status, 400);

    const broken = await t.ok('KnowledgeBaseAdminRpc.getUploadKey', {}, as(admin));
    await putUpload(t, broken.uploadKey, Buffer.from('%PDF-1.7\nthis is not really a pdf at all'), 'application/pdf', { ...as(admin), fileName: 'broken.pdf' });
    const failed = await t.ok('KnowledgeBaseAdminRpc.ingestFiles', { uploadKey: broken.uploadKey }, as(admin));
    const outcome = await ready(admin, failed.documents[0]._id);
    assert.equal(outcome.status, 'failed');
    assert.match(outcome.error, /broken\.pdf is not a readable PDF/);
    assert.equal(outcome.chunkCount, 0);
  });

  it('fetches and ingests a web page or file by URL through the outbound guard, and fails what cannot be fetched with the reason', async () => {
    const url = `${web.url}/ferry.html`;
    const { document, jobId } = await t.ok('KnowledgeBaseAdminRpc.ingestUrl', { url, tags: ['travel'] }, as(admin));
    assert.deepEqual([document.name, document.sourceType, document.status, document.sizeBytes], [url, 'url', 'pending', 0]);
    assert.match(jobId, /^[0-9a-f-]{36}$/);
    const page = await ready(admin, document._id);
    assert.equal(page.status, 'ready');
    assert.equal(page.docType, 'html');
    assert.equal(page.sizeBytes, Buffer.byteLength(`<html><head><title>Ferry</title></head><body><h1>Timetable</h1><p>${ferryTimes}</p></body></html>`));
    assert.match(page.content, /^# Timetable/m);
    const fetched = web.requests.find((request) => request.path === '/ferry.html')!;
    assert.match(fetched.headers.accept!, /text\/html/);
    const [hit] = await t.ok(
      'KnowledgeBaseAdminRpc.search',
      { queryText: 'when does the ferry leave the harbour', topK: 1, filter: { tags: 'travel' } },
      as(member),
    );
    assert.deepEqual([hit.documentId, hit.metadata.docType, hit.metadata.sourceType], [document._id, 'html', 'url']);

    // The page changed: ingesting it again as a new version fetches it again.
    ferryTimes = 'From May the ferry leaves the harbour at eight.';
    await t.ok('KnowledgeBaseAdminRpc.ingestUrl', { url, documentId: document._id }, as(admin));
    await eventually(
      async () => ((await t.ok('KnowledgeBaseAdminRpc.getDocument', { docId: document._id }, as(admin))).content.includes('From May') ? true : undefined),
      20_000,
    );
    const versions = await t.ok('KnowledgeBaseAdminRpc.getDocumentVersions', { docId: document._id }, as(admin));
    assert.deepEqual(
      versions.map((version: any) => [version.version, version.sourceUrl, version.docType, version.current]),
      [
        [2, url, 'html', true],
        [1, url, 'html', false],
      ],
    );

    // The parser follows the content type, whatever the URL says.
    const pdf = await t.ok('KnowledgeBaseAdminRpc.ingestUrl', { url: `${web.url}/fleet`, name: 'Fleet' }, as(admin));
    const pdfDocument = await ready(admin, pdf.document._id);
    assert.deepEqual([pdfDocument.status, pdfDocument.docType], ['ready', 'pdf']);
    assert.match(pdfDocument.content, /## Page 2\n\nThe harbour keeps four pilot boats\./);

    const failures: [string, RegExp][] = [
      [`${web.url}/missing.html`, /answered 404/],
      [`${web.url}/data.bin`, /No parser reads application\/octet-stream/],
      // Not the allowed host: a name that resolves to a loopback address is refused when connecting.
      [`http://localhost:${web.port}/ferry.html`, /may not be fetched: localhost is not a public address$/],
    ];
    for (const [failing, reason] of failures) {
      const started = await t.ok('KnowledgeBaseAdminRpc.ingestUrl', { url: failing }, as(admin));
      const outcome = await ready(admin, started.document._id);
      assert.equal(outcome.status, 'failed', failing);
      assert.match(outcome.error, reason);
      assert.equal((await t.ok('KnowledgeBaseAdminRpc.getJob', { jobId: started.jobId }, as(admin))).state, 'failed');
    }
    for (const [refused, message] of [
      ['http://10.1.2.3/page.html', /10\.1\.2\.3 is not a public address/],
      ['ftp://example.com/page.html', /use http or https/],
      ['not a url', /absolute URL/],
    ] as const) {
      const response = await t.call('KnowledgeBaseAdminRpc.ingestUrl', { url: refused }, as(admin));
      assert.equal(response.body.data.code, 'VALIDATION_ERROR', refused);
      assert.equal(response.body.data.issues[0].path, 'url');
      assert.match(response.body.data.issues[0].message, message);
    }
    assert.equal((await t.call('KnowledgeBaseAdminRpc.ingestUrl', { url }, as(member))).body.data.code, 'FORBIDDEN');
  });

  it('keeps versions on re-ingest: search answers from the new text only', async () => {
    const first = await ingest(admin, { name: 'Parking', content: 'Visitors park in the north lot.' });
    const { document } = await t.ok(
      'KnowledgeBaseAdminRpc.ingestText',
      { documentId: first._id, name: 'Parking', content: 'Visitors park in the underground garage.' },
      as(admin),
    );
    assert.equal(document.version, 2);
    assert.equal(document.status, 'pending');
    const second = await ready(admin, first._id);
    assert.equal(second.content, 'Visitors park in the underground garage.');
    const versions = await t.ok('KnowledgeBaseAdminRpc.getDocumentVersions', { docId: first._id }, as(member));
    assert.deepEqual(
      versions.map((version: any) => [version.version, version.current, version.docType]),
      [
        [2, true, 'markdown'],
        [1, false, 'markdown'],
      ],
    );
    const hits = await t.ok('KnowledgeBaseAdminRpc.search', { queryText: 'where do visitors park', filter: { name: 'Parking' } }, as(member));
    assert.deepEqual(
      hits.map((hit: any) => hit.text),
      ['Visitors park in the underground garage.'],
    );
  });

  it('updates metadata without embedding again, and soft-deletes: out of search at once, chunks removed by the job', async () => {
    const document = await ingest(admin, { name: 'Kitchen', content: 'The kitchen dishwasher runs every evening at eight.', tags: ['office'] });
    const before = await chunkRows(document._id);
    const updated = await t.ok(
      'KnowledgeBaseAdminRpc.updateDocument',
      { docId: document._id, updates: { name: 'Office kitchen', tags: ['office', 'facilities'], collection: 'facilities' } },
      as(admin),
    );
    assert.deepEqual([updated.name, updated.tags, updated.collection, updated.version], ['Office kitchen', ['office', 'facilities'], 'facilities', 1]);
    assert.deepEqual(await chunkRows(document._id), before, 'same chunks, same embeddings');
    const filtered = await t.ok('KnowledgeBaseAdminRpc.search', { queryText: 'dishwasher', filter: { tags: 'facilities' } }, as(member));
    assert.deepEqual(
      filtered.map((hit: any) => [hit.name, hit.collection]),
      [['Office kitchen', 'facilities']],
    );

    const deleted = await t.ok('KnowledgeBaseAdminRpc.deleteDocument', { docId: document._id }, as(admin));
    assert.equal(deleted.status, 'deleted');
    assert.ok(deleted.deletedAt);
    const afterDelete = await t.ok('KnowledgeBaseAdminRpc.search', { queryText: 'dishwasher', topK: 100 }, as(member));
    assert.ok(
      afterDelete.every((hit: any) => hit.documentId !== document._id),
      'no hit of the deleted document',
    );
    assert.ok(
      (await chunkRows(document._id)).every((chunk) => chunk.withdrawn),
      'withdrawn until the job removes them',
    );
    const listed = await t.ok('KnowledgeBaseAdminRpc.listDocuments', { search: 'dishwasher' }, as(member));
    assert.equal(listed.totalCount, 0);
    const inBin = await t.ok('KnowledgeBaseAdminRpc.listDocuments', { status: 'deleted' }, as(member));
    assert.ok(inBin.data.some((item: any) => item._id === document._id));
    await eventually(async () => ((await chunkRows(document._id)).length === 0 ? true : undefined));
    assert.equal((await t.call('KnowledgeBaseAdminRpc.getChunks', { docId: document._id }, as(admin))).body.data.code, 'NOT_FOUND');
    assert.equal((await t.call('KnowledgeBaseAdminRpc.deleteDocument', { docId: document._id }, as(admin))).body.data.code, 'NOT_FOUND');
  });

  it('lists, edits and deletes chunks; an edited chunk is embedded again at once', async () => {
    const document = await ingest(admin, { name: 'Chunks', content: HANDBOOK });
    const chunks = await t.ok('KnowledgeBaseAdminRpc.getChunks', { docId: document._id }, as(member));
    assert.equal(chunks.length, document.chunkCount);
    assert.deepEqual(Object.keys(chunks[0]).sort(), ['chunkId', 'embedded', 'heading', 'ordinal', 'sectionId', 'text']);
    assert.deepEqual(
      chunks.map((chunk: any) => chunk.ordinal),
      chunks.map((_: unknown, index: number) => index),
    );
    assert.ok(chunks.every((chunk: any) => chunk.embedded));

    const refunds = chunks.find((chunk: any) => /Refunds/.test(chunk.text));
    const edited = await t.ok(
      'KnowledgeBaseAdminRpc.updateChunk',
      { docId: document._id, chunkId: refunds.chunkId, text: 'Refunds arrive by bank transfer within three days.' },
      as(admin),
    );
    assert.equal(edited.text, 'Refunds arrive by bank transfer within three days.');
    assert.equal(edited.embedded, true);
    const [hit] = await t.ok('KnowledgeBaseAdminRpc.search', { queryText: 'refunds bank transfer', filter: { name: 'Chunks' }, topK: 1 }, as(member));
    assert.equal(hit.chunkId, refunds.chunkId);
    assert.match(hit.text, /bank transfer/);

    const empty = await t.call('KnowledgeBaseAdminRpc.updateChunk', { docId: document._id, chunkId: refunds.chunkId, text: '' }, as(admin));
    assert.equal(empty.body.data.code, 'VALIDATION_ERROR');
    assert.match(JSON.stringify(empty.body.data.issues), /text/);

    assert.deepEqual(await t.ok('KnowledgeBaseAdminRpc.deleteChunk', { docId: document._id, chunkId: refunds.chunkId }, as(admin)), {
      success: true,
      chunkCount: document.chunkCount - 1,
    });
    const left = await t.ok('KnowledgeBaseAdminRpc.getChunks', { docId: document._id }, as(member));
    assert.equal(left.length, chunks.length - 1);
    assert.equal((await t.call('KnowledgeBaseAdminRpc.deleteChunk', { docId: document._id, chunkId: refunds.chunkId }, as(admin))).body.data.code, 'NOT_FOUND');
    assert.equal(
      (await t.call('KnowledgeBaseAdminRpc.updateChunk', { docId: document._id, chunkId: refunds.chunkId, text: 'x' }, as(admin))).body.data.code,
      'NOT_FOUND',
    );

    const reindexed = await t.ok('KnowledgeBaseAdminRpc.reindexDocument', { docId: document._id }, as(admin));
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
    const list = (params: Record<string, unknown>) => t.ok('KnowledgeBaseAdminRpc.listDocuments', params, as(subscriber));
    const names = async (params: Record<string, unknown>) => (await list(params)).data.map((document: any) => document.name);

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
    assert.deepEqual([page2.totalCount, page2.data.map((document: any) => document._id)], [3, [alpha._id]]);
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
      const response = await t.call('KnowledgeBaseAdminRpc.listDocuments', params, as(subscriber));
      assert.equal(response.status, 400, JSON.stringify(params));
      assert.equal(response.body.data.issues[0].path, field);
    }
  });

  it('lists ingestion jobs, cancels a queued one and retries it; counts quota and statistics; lists filter options', async () => {
    const subscriber = await t.signup();
    const done = await ingest(subscriber, { name: 'Done', content: 'Finished text.', collection: 'c1', tags: ['t1', 't2'] });
    // Both slots of the ingestion queue (its concurrency, 2) busy fetching a slow page, for another subscription: the next ingestion waits.
    const busy = await t.signup();
    const slow = await Promise.all([1, 2].map((n) => t.ok('KnowledgeBaseAdminRpc.ingestUrl', { url: `${web.url}/slow/${n}` }, as(busy))));
    await eventually(async () => {
      const states = await Promise.all(slow.map(({ jobId }) => t.ok('KnowledgeBaseAdminRpc.getJob', { jobId }, as(busy))));
      return states.every((job) => job.state === 'running') || undefined;
    });
    const queued = await t.ok('KnowledgeBaseAdminRpc.ingestText', { name: 'Queued', content: 'Waiting text.' }, as(subscriber));
    assert.equal((await t.ok('KnowledgeBaseAdminRpc.getJob', { jobId: queued.jobId }, as(subscriber))).state, 'queued');
    const cancelled = await t.ok('KnowledgeBaseAdminRpc.cancelJob', { jobId: queued.jobId }, as(subscriber));
    assert.equal(cancelled.state, 'cancelled');
    const afterCancel = await t.ok('KnowledgeBaseAdminRpc.getDocument', { docId: queued.document._id }, as(subscriber));
    assert.deepEqual([afterCancel.status, afterCancel.error], ['failed', 'Ingestion cancelled']);
    assert.equal((await t.call('KnowledgeBaseAdminRpc.cancelJob', { jobId: queued.jobId }, as(subscriber))).body.data.code, 'CONFLICT');

    const jobs = await t.ok('KnowledgeBaseAdminRpc.listJobs', {}, as(subscriber));
    assert.equal(jobs.totalCount, 2);
    assert.deepEqual(
      jobs.data.map((job: any) => [job.documentId, job.state]),
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
    assert.equal((await t.ok('KnowledgeBaseAdminRpc.listJobs', { state: 'done' }, as(subscriber))).data[0].documentId, done._id);
    assert.equal((await t.ok('KnowledgeBaseAdminRpc.getJob', { jobId: queued.jobId }, as(subscriber))).state, 'cancelled');

    const retried = await t.ok('KnowledgeBaseAdminRpc.retryJob', { jobId: queued.jobId }, as(subscriber));
    assert.notEqual(retried.jobId, queued.jobId);
    assert.equal(retried.state, 'queued');
    assert.equal((await ready(subscriber, queued.document._id)).status, 'ready');
    assert.equal((await t.ok('KnowledgeBaseAdminRpc.getJob', { jobId: retried.jobId }, as(subscriber))).state, 'done');
    assert.equal((await t.call('KnowledgeBaseAdminRpc.retryJob', { jobId: retried.jobId }, as(subscriber))).body.data.code, 'CONFLICT');

    const quota = await t.ok('KnowledgeBaseAdminRpc.getQuota', {}, as(subscriber));
    assert.deepEqual(quota.documents, { used: 2, limit: 10_000 });
    assert.deepEqual(quota.storageBytes, { used: Buffer.byteLength('Finished text.') + Buffer.byteLength('Waiting text.'), limit: 1024 ** 3 });

    const stats = await t.ok('KnowledgeBaseAdminRpc.getStats', {}, as(subscriber));
    assert.deepEqual(stats.documents, { total: 2, byStatus: { pending: 0, processing: 0, ready: 2, failed: 0, deleted: 0 } });
    assert.deepEqual(stats.chunks, { total: 2, embedded: 2, pending: 0 });
    assert.deepEqual(stats.ingestions, { queued: 0, running: 0, done: 2, failed: 0, cancelled: 1 });
    assert.deepEqual(stats.embedding, { model: 'local-lexical-384', switch: null });

    const options = await t.ok('KnowledgeBaseAdminRpc.getOptions', {}, as(subscriber));
    assert.deepEqual(options.docTypes, ['text', 'markdown', 'html', 'pdf']);
    assert.deepEqual(options.collections, ['c1']);
    assert.deepEqual(options.tags, ['t1', 't2']);
    assert.ok(options.fileTypes.includes('application/pdf'));
  });

  it('refuses ingestion past the quota with QUOTA_EXCEEDED, changing nothing; a refused file ingestion keeps its upload key usable', async () => {
    const small = await startTestApp({ withNotes: false, plugins: ['auth', 'knowledge-base'], env: { KB_MAX_DOCUMENTS: '1', KB_MAX_STORAGE_BYTES: '2000' } });
    try {
      const owner = await small.signup();
      await small.ok('KnowledgeBaseAdminRpc.ingestText', { name: 'One', content: 'x'.repeat(100) }, as(owner));
      const second = await small.call('KnowledgeBaseAdminRpc.ingestText', { name: 'Two', content: 'y' }, as(owner));
      assert.equal(second.status, 403);
      assert.equal(second.body.data.code, 'QUOTA_EXCEEDED');
      const [first] = (await small.ok('KnowledgeBaseAdminRpc.listDocuments', {}, as(owner))).data;
      const tooBig = await small.call('KnowledgeBaseAdminRpc.ingestText', { documentId: first._id, name: 'One', content: 'z'.repeat(2001) }, as(owner));
      assert.equal(tooBig.body.data.code, 'QUOTA_EXCEEDED');
      const after = await small.ok('KnowledgeBaseAdminRpc.listDocuments', {}, as(owner));
      assert.deepEqual([after.totalCount, after.data[0].version], [1, 1]);
      // A new version replaces the old one's bytes.
      await small.ok('KnowledgeBaseAdminRpc.ingestText', { documentId: first._id, name: 'One', content: 'z'.repeat(1500) }, as(owner));

      const { uploadKey } = await small.ok('KnowledgeBaseAdminRpc.getUploadKey', {}, as(owner));
      assert.equal(
        (await putUpload(small, uploadKey, Buffer.from('Parking is underground.\n'), 'text/plain', { ...as(owner), fileName: 'parking.txt' })).status,
        200,
      );
      assert.equal((await small.call('KnowledgeBaseAdminRpc.ingestFiles', { uploadKey }, as(owner))).body.data.code, 'QUOTA_EXCEEDED');
      const unknown = await small.call('KnowledgeBaseAdminRpc.ingestFiles', { uploadKey, documentId: '00000000-0000-4000-8000-000000000000' }, as(owner));
      assert.equal(unknown.body.data.code, 'NOT_FOUND');
      const { documents } = await small.ok('KnowledgeBaseAdminRpc.ingestFiles', { uploadKey, documentId: first._id }, as(owner));
      assert.deepEqual([documents[0]._id, documents[0].version, documents[0].sizeBytes], [first._id, 3, 24], 'the key was still usable');
    } finally {
      await small.close();
    }
  });

  it('lets users read and search, and only admins and staff change the knowledge base', async () => {
    const document = await ingest(admin, { name: 'Rules', content: 'Badges must be worn at all times.' });
    for (const [method, params] of [
      ['KnowledgeBaseAdminRpc.ingestText', { name: 'x', content: 'y' }],
      ['KnowledgeBaseAdminRpc.getUploadKey', {}],
      ['KnowledgeBaseAdminRpc.updateDocument', { docId: document._id, updates: { name: 'z' } }],
      ['KnowledgeBaseAdminRpc.deleteDocument', { docId: document._id }],
      ['KnowledgeBaseAdminRpc.reindexDocument', { docId: document._id }],
    ] as const) {
      const response = await t.call(method, params, as(member));
      assert.equal(response.status, 403, method);
      assert.equal(response.body.data.code, 'FORBIDDEN');
    }
    assert.equal((await t.ok('KnowledgeBaseAdminRpc.getDocument', { docId: document._id }, as(member))).name, 'Rules');

    // A document may belong to another user of the subscription, never to someone outside it.
    const { document: owned } = await t.ok(
      'KnowledgeBaseAdminRpc.ingestText',
      { name: 'Badge log', content: 'Badge 7 was lost.', userId: member.user._id },
      as(admin),
    );
    assert.equal(owned.userId, member.user._id);
    const before = (await t.ok('KnowledgeBaseAdminRpc.getQuota', {}, as(admin))).documents.used;
    for (const userId of [stranger.user._id, '00000000-0000-4000-8000-000000000000']) {
      const refused = await t.call('KnowledgeBaseAdminRpc.ingestText', { name: 'x', content: 'y', userId }, as(admin));
      assert.deepEqual([refused.body.data.code, refused.body.data.issues[0].path], ['VALIDATION_ERROR', 'userId']);
    }
    assert.equal((await t.ok('KnowledgeBaseAdminRpc.getQuota', {}, as(admin))).documents.used, before);
  });

  it("never shows or changes another subscription's documents, chunks, versions or search hits", async () => {
    const document = await ingest(admin, { name: 'Confidential', content: 'The merger closes in March.' });
    const [chunk] = await t.ok('KnowledgeBaseAdminRpc.getChunks', { docId: document._id }, as(admin));
    const calls: [string, Record<string, unknown>][] = [
      ['KnowledgeBaseAdminRpc.getDocument', { docId: document._id }],
      ['KnowledgeBaseAdminRpc.getDocumentVersions', { docId: document._id }],
      ['KnowledgeBaseAdminRpc.getChunks', { docId: document._id }],
      ['KnowledgeBaseAdminRpc.updateDocument', { docId: document._id, updates: { name: 'Stolen' } }],
      ['KnowledgeBaseAdminRpc.updateChunk', { docId: document._id, chunkId: chunk.chunkId, text: 'changed' }],
      ['KnowledgeBaseAdminRpc.deleteChunk', { docId: document._id, chunkId: chunk.chunkId }],
      ['KnowledgeBaseAdminRpc.reindexDocument', { docId: document._id }],
      ['KnowledgeBaseAdminRpc.deleteDocument', { docId: document._id }],
      ['KnowledgeBaseAdminRpc.ingestText', { documentId: document._id, name: 'x', content: 'y' }],
    ];
    for (const [method, params] of calls) {
      const response = await t.call(method, params, as(stranger));
      assert.equal(response.body.data.code, 'NOT_FOUND', method);
    }
    assert.deepEqual(await t.ok('KnowledgeBaseAdminRpc.search', { queryText: 'when does the merger close' }, as(stranger)), []);
    assert.equal((await t.ok('KnowledgeBaseAdminRpc.listDocuments', { search: 'merger' }, as(stranger))).totalCount, 0);
    const mine = await t.ok('KnowledgeBaseAdminRpc.getDocument', { docId: document._id }, as(admin));
    assert.deepEqual([mine.name, mine.status, mine.chunkCount], ['Confidential', 'ready', document.chunkCount]);
    assert.match((await t.ok('KnowledgeBaseAdminRpc.getChunks', { docId: document._id }, as(admin)))[0].text, /merger closes in March/);
  });
});
