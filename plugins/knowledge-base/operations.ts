import * as v from 'valibot';
import { isoTime, listSchema, recordId, SEARCH_MODES, topK, UPLOAD_KEY_WITH_LIMITS, wireTimestamp } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';
import { SOURCE_TYPES, STATUSES } from './document.entity.ts';
import { INGESTION_STATES } from './ingestion.entity.ts';
import { INGESTION_SCHEMA } from './ingestion-jobs.service.ts';
import { DOCUMENT_SCHEMA, FILE_PURPOSE, SORT_FIELDS, VERSION_SCHEMA, type SortField } from './documents.service.ts';
import { INDEXED_CHUNK } from './knowledge-index.ts';

const MAX_TEXT = 2_000_000;
const MAX_TOP_K = 100;
const MAX_LIMIT = 200;

const text = (label: string, max: number) =>
  v.pipe(
    v.string(`${label} must be a string`),
    v.check((value) => value.trim().length > 0, `${label} must not be empty`),
    v.maxLength(max, `${label} must be at most ${max} characters`),
  );
const optionalText = (label: string, max: number) =>
  v.optional(v.pipe(v.string(`${label} must be a string`), v.maxLength(max, `${label} must be at most ${max} characters`)));
const nullableId = (label: string) =>
  v.optional(v.nullable(v.pipe(v.string(`${label} must be a string`), v.minLength(1, `${label} must not be empty`), v.maxLength(200))));
const tags = v.pipe(
  v.array(v.pipe(text('tags[]', 100), v.trim()), 'tags must be an array of strings'),
  v.maxLength(50, 'at most 50 tags'),
  v.transform((list) => [...new Set(list)]),
);
const metadata = {
  description: optionalText('description', 5000),
  collection: v.optional(v.nullable(v.pipe(text('collection', 200), v.trim()))),
  tags: v.optional(tags),
  userId: v.optional(v.nullable(recordId('userId'))),
  contactId: nullableId('contactId'),
  projectId: nullableId('projectId'),
};
const docId = { docId: recordId('docId') };
const name = v.pipe(text('name', 500), v.trim());

/** What ingestText and ingestUrl answer: the document, pending, and its ingestion job. */
const INGESTED = v.strictObject({ document: DOCUMENT_SCHEMA, jobId: v.string() });
/** What reindexDocument and deleteChunk answer: the document's chunks now. */
const CHUNK_COUNT = v.strictObject({ success: v.literal(true), chunkCount: v.number() });
/** A page of listDocuments and listJobs: the list envelope with the page and limit it was read with. */
const pagedList = <T>(item: v.GenericSchema<T>) => v.strictObject({ ...listSchema(item).entries, page: v.number(), limit: v.number() });

export const getUploadKey = defineOperation({
  access: 'staff',
  kind: 'write',
  describe: 'A single-use upload key and the URL to PUT or POST files to (text, Markdown, HTML, PDF and the types of contributed parsers), for ingestFiles.',
  result: UPLOAD_KEY_WITH_LIMITS,
  params: v.object({}),
  handler: async ({ ctx, deps, transport }) => {
    const { uploadKey, expiresAt } = await deps.uploadService.createKey(ctx, FILE_PURPOSE);
    const limits = deps.uploadService.limitsOf(FILE_PURPOSE);
    return {
      uploadKey,
      uploadUrl: `${transport.baseUrl}/api/uploads/${uploadKey}`,
      expiresAt: expiresAt.toISOString(),
      maxBytes: limits.maxBytes,
      maxFiles: limits.maxFiles,
      types: [...limits.types],
    };
  },
});

export const ingestText = defineOperation({
  access: 'staff',
  kind: 'write',
  describe:
    'Ingest a text (format text, markdown or html) as a document, or as a new version of documentId; answers at once with the document pending and the ingestion job id.',
  result: INGESTED,
  params: v.object({
    name,
    content: text('content', MAX_TEXT),
    format: v.optional(v.picklist(['text', 'markdown', 'html'], 'format must be text, markdown or html'), 'markdown'),
    documentId: v.optional(recordId('documentId')),
    ...metadata,
  }),
  handler: ({ params, ctx, deps }) => deps.ingestionService.ingestText(ctx, params),
});

export const ingestFiles = defineOperation({
  access: 'staff',
  kind: 'write',
  describe:
    'Ingest the files uploaded with an upload key, one document each (named after the file unless name is given), or one file as a new version of documentId.',
  result: v.strictObject({ documents: v.array(DOCUMENT_SCHEMA), jobIds: v.array(v.string()) }),
  params: v.object({
    uploadKey: v.pipe(v.string('uploadKey must be a string'), v.minLength(1, 'uploadKey must not be empty'), v.maxLength(100)),
    name: v.optional(name),
    documentId: v.optional(recordId('documentId')),
    ...metadata,
  }),
  handler: ({ params, ctx, deps }) => deps.ingestionService.ingestFiles(ctx, params),
});

export const ingestUrl = defineOperation({
  access: 'staff',
  kind: 'write',
  describe:
    'Fetch a web page or file (http or https, a public address) and ingest it as a document (named after the URL unless name is given), or as a new version of documentId; answers at once with the document pending and the ingestion job id.',
  result: INGESTED,
  params: v.object({
    url: v.pipe(v.string('url must be a string'), v.trim(), v.url('url must be an absolute URL'), v.maxLength(2048, 'url must be at most 2048 characters')),
    name: v.optional(name),
    documentId: v.optional(recordId('documentId')),
    ...metadata,
  }),
  handler: ({ params, ctx, deps }) => deps.ingestionService.ingestUrl(ctx, params),
});

const pageParams = {
  page: v.optional(
    v.pipe(v.number('page must be a number'), v.integer('page must be a whole number'), v.minValue(1, 'page must be at least 1'), v.maxValue(1_000_000)),
    1,
  ),
  limit: v.optional(
    v.pipe(
      v.number('limit must be a number'),
      v.integer('limit must be a whole number'),
      v.minValue(1, 'limit must be at least 1'),
      v.maxValue(MAX_LIMIT, `limit must be at most ${MAX_LIMIT}`),
    ),
    20,
  ),
};
const isoDate = (label: string) => v.optional(isoTime(label));

export const listDocuments = defineOperation({
  access: 'user',
  kind: 'read',
  describe:
    'Documents of the knowledge base (not deleted ones unless status is deleted), filtered, full-text searched (search), paged and sorted; newest first by default.',
  result: pagedList(DOCUMENT_SCHEMA),
  params: v.object({
    userId: v.optional(recordId('userId')),
    contactId: v.optional(text('contactId', 200)),
    docType: v.optional(text('docType', 50)),
    sourceType: v.optional(v.picklist(SOURCE_TYPES, `sourceType must be one of ${SOURCE_TYPES.join(', ')}`)),
    tags: v.optional(v.array(text('tags[]', 100), 'tags must be an array of strings')),
    status: v.optional(v.picklist(STATUSES, `status must be one of ${STATUSES.join(', ')}`)),
    collection: v.optional(v.nullable(text('collection', 200))),
    search: v.optional(text('search', 500)),
    ...pageParams,
    sortBy: v.optional(v.picklist(Object.keys(SORT_FIELDS) as SortField[], `sortBy must be one of ${Object.keys(SORT_FIELDS).join(', ')}`), 'createdAt'),
    sortDir: v.optional(v.picklist(['asc', 'desc'], 'sortDir must be asc or desc'), 'desc'),
    startTime: isoDate('startTime'),
    endTime: isoDate('endTime'),
    projectId: v.optional(text('projectId', 200)),
  }),
  handler: ({ params, ctx, deps }) => deps.documentsService.listDocuments(ctx, params),
});

export const getDocument = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'A document, with content: the Markdown its latest ingested version was read as.',
  result: v.strictObject({ ...DOCUMENT_SCHEMA.entries, content: v.nullable(v.string()) }),
  params: v.object(docId),
  handler: ({ params, ctx, deps }) => deps.documentsService.getDocument(ctx, params.docId),
});

export const updateDocument = defineOperation({
  access: 'staff',
  kind: 'write',
  describe: "Change a document's name, description, collection or tags; its chunks follow without being embedded again.",
  result: DOCUMENT_SCHEMA,
  params: v.object({
    ...docId,
    updates: v.object(
      { name: v.optional(name), description: metadata.description, collection: metadata.collection, tags: metadata.tags },
      'updates must be an object',
    ),
  }),
  handler: ({ params, ctx, deps }) => deps.documentsService.updateDocument(ctx, params.docId, params.updates),
});

export const deleteDocument = defineOperation({
  access: 'staff',
  kind: 'write',
  describe: 'Soft-delete a document: status deleted, out of search at once; a job removes its chunks and vectors.',
  result: DOCUMENT_SCHEMA,
  params: v.object(docId),
  handler: ({ params, ctx, deps }) => deps.documentsService.deleteDocument(ctx, params.docId),
});

export const getDocumentVersions = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'Every version of a document (one per ingestion), newest first.',
  result: v.array(VERSION_SCHEMA),
  params: v.object(docId),
  handler: ({ params, ctx, deps }) => deps.documentsService.getDocumentVersions(ctx, params.docId),
});

export const reindexDocument = defineOperation({
  access: 'staff',
  kind: 'write',
  describe: 'Embed every chunk of a ready document again with the current embedding model (a job; searches use the old embeddings until then).',
  result: CHUNK_COUNT,
  params: v.object(docId),
  handler: ({ params, ctx, deps }) => deps.documentsService.reindexDocument(ctx, params.docId),
});

export const getChunks = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'The chunks of a document in order: chunkId, ordinal, sectionId, heading, text, embedded.',
  result: v.array(INDEXED_CHUNK),
  params: v.object(docId),
  handler: ({ params, ctx, deps }) => deps.documentsService.getChunks(ctx, params.docId),
});

export const updateChunk = defineOperation({
  access: 'staff',
  kind: 'write',
  describe: "Replace a chunk's text (at least 1 character); it is embedded again at once.",
  result: INDEXED_CHUNK,
  params: v.object({
    ...docId,
    chunkId: recordId('chunkId'),
    text: v.pipe(v.string('text must be a string'), v.minLength(1, 'text must be at least 1 character'), v.maxLength(20_000)),
  }),
  handler: ({ params, ctx, deps }) => deps.documentsService.updateChunk(ctx, params.docId, params.chunkId, params.text),
});

export const deleteChunk = defineOperation({
  access: 'staff',
  kind: 'write',
  describe: 'Delete one chunk of a document.',
  result: CHUNK_COUNT,
  params: v.object({ ...docId, chunkId: recordId('chunkId') }),
  handler: ({ params, ctx, deps }) => deps.documentsService.deleteChunk(ctx, params.docId, params.chunkId),
});

export const search = defineOperation({
  access: 'user',
  kind: 'read',
  describe:
    'The chunks that best answer queryText, ranked by meaning and by words fused (mode hybrid, the default), by meaning alone (semantic) or by words alone (text, BM25); each with its section as context. filter: list operators on name, tags, docType, sourceType, userId, contactId, projectId, collection.',
  result: v.array(
    v.strictObject({
      chunkId: v.string(),
      documentId: v.string(),
      name: v.string(),
      collection: v.nullable(v.string()),
      heading: v.string(),
      text: v.string(),
      context: v.string(),
      metadata: v.record(v.string(), v.unknown()),
      score: v.number(),
      semanticRank: v.nullable(v.number()),
      textRank: v.nullable(v.number()),
    }),
  ),
  params: v.object({
    queryText: text('queryText', 10_000),
    topK: topK(MAX_TOP_K),
    filter: v.optional(v.unknown()),
    collection: v.optional(v.nullable(text('collection', 200))),
    mode: v.optional(v.picklist(SEARCH_MODES, `mode must be one of ${SEARCH_MODES.join(', ')}`), 'hybrid'),
  }),
  handler: ({ params, ctx, deps }) => deps.documentsService.search(ctx, params),
});

const jobId = { jobId: recordId('jobId') };

export const listJobs = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'Ingestion jobs, newest first, by document and state (queued, running, done, failed, cancelled), paged.',
  result: pagedList(INGESTION_SCHEMA),
  params: v.object({
    documentId: v.optional(recordId('documentId')),
    state: v.optional(v.picklist(INGESTION_STATES, `state must be one of ${INGESTION_STATES.join(', ')}`)),
    ...pageParams,
  }),
  handler: ({ params, ctx, deps }) => deps.ingestionJobsService.listJobs(ctx, params),
});

export const getJob = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'One ingestion job: its document and version, state, error, times.',
  result: INGESTION_SCHEMA,
  params: v.object(jobId),
  handler: ({ params, ctx, deps }) => deps.ingestionJobsService.getJob(ctx, params.jobId),
});

export const retryJob = defineOperation({
  access: 'staff',
  kind: 'write',
  describe: "Run a failed or cancelled ingestion again (a new job), if its version is still the document's latest.",
  result: INGESTION_SCHEMA,
  params: v.object(jobId),
  handler: ({ params, ctx, deps }) => deps.ingestionJobsService.retryJob(ctx, params.jobId),
});

export const cancelJob = defineOperation({
  access: 'staff',
  kind: 'write',
  describe: 'Stop a queued or running ingestion; the document keeps what the index holds (an earlier version), else fails as cancelled.',
  result: INGESTION_SCHEMA,
  params: v.object(jobId),
  handler: ({ params, ctx, deps }) => deps.ingestionJobsService.cancelJob(ctx, params.jobId),
});

export const getQuota = defineOperation({
  access: 'user',
  kind: 'read',
  describe: "The subscription's documents and stored bytes against its limits (KB_MAX_DOCUMENTS, KB_MAX_STORAGE_BYTES), and the largest file accepted.",
  result: v.strictObject({
    documents: v.strictObject({ used: v.number(), limit: v.number() }),
    storageBytes: v.strictObject({ used: v.number(), limit: v.number() }),
    maxFileBytes: v.number(),
  }),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.documentsService.getQuota(ctx),
});

export const getStats = defineOperation({
  access: 'user',
  kind: 'read',
  describe:
    'Documents by status, stored bytes, chunks embedded and waiting, ingestion jobs by state, and the embedding model with the progress of a model switch.',
  result: v.strictObject({
    documents: v.strictObject({ total: v.number(), byStatus: v.record(v.picklist(STATUSES), v.number()) }),
    storageBytes: v.number(),
    chunks: v.strictObject({ total: v.number(), embedded: v.number(), pending: v.number() }),
    ingestions: v.record(v.picklist(INGESTION_STATES), v.number()),
    embedding: v.strictObject({
      model: v.string(),
      switch: v.nullable(v.strictObject({ nextModel: v.string(), embedded: v.number(), total: v.number(), startedAt: v.nullable(wireTimestamp) })),
    }),
  }),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.documentsService.getStats(ctx),
});

export const getOptions = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'The values list filters take: docTypes, sourceTypes, statuses, sortBy fields, accepted file types, and the collections and tags in use.',
  result: v.strictObject({
    docTypes: v.array(v.string()),
    sourceTypes: v.array(v.picklist(SOURCE_TYPES)),
    statuses: v.array(v.picklist(STATUSES)),
    sortBy: v.array(v.string()),
    fileTypes: v.array(v.string()),
    collections: v.array(v.string()),
    tags: v.array(v.string()),
  }),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.documentsService.getOptions(ctx),
});
