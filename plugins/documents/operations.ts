import * as v from 'valibot';
import { listSchema, recordId, topK } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';
import { DOCUMENT_SCHEMA, SEARCH_HIT_SCHEMA, VERSION_SCHEMA } from './page.service.ts';

const MAX_CONTENT_LENGTH = 1_000_000;
const MAX_TOP_K = 100;
const MAX_TAGS = 50;

const text = (label: string, max: number) =>
  v.pipe(
    v.string(`${label} must be a string`),
    v.check((value) => value.trim().length > 0, `${label} must not be empty`),
    v.maxLength(max, `${label} must be at most ${max} characters`),
  );
const instanceId = text('documentInstanceId', 200);
const title = v.pipe(text('title', 500), v.trim());
const content = v.pipe(v.string('content must be a string'), v.maxLength(MAX_CONTENT_LENGTH, `content must be at most ${MAX_CONTENT_LENGTH} characters`));
const tags = v.pipe(
  v.array(v.pipe(text('tags[]', 100), v.trim()), 'tags must be an array of strings'),
  v.maxLength(MAX_TAGS, `at most ${MAX_TAGS} tags`),
  v.transform((list) => [...new Set(list)]),
);

export const getAllDocuments = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'Every page of a documentation instance, oldest first.',
  result: listSchema(DOCUMENT_SCHEMA),
  params: v.object({ documentInstanceId: instanceId }),
  handler: ({ params, ctx, deps }) => deps.pageService.getAllDocuments(ctx, params.documentInstanceId),
});

export const getById = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'One page by its id.',
  result: DOCUMENT_SCHEMA,
  params: v.object({ docId: recordId('docId') }),
  handler: ({ params, ctx, deps }) => deps.pageService.getById(ctx, params.docId),
});

export const getByTitle = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'The page of the instance with this title (compared regardless of case).',
  result: DOCUMENT_SCHEMA,
  params: v.object({ documentInstanceId: instanceId, title }),
  handler: ({ params, ctx, deps }) => deps.pageService.getByTitle(ctx, params.documentInstanceId, params.title),
});

export const create = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Create a page (Markdown content) in a documentation instance, under parentId when given; version 1. Titles are unique in an instance.',
  result: DOCUMENT_SCHEMA,
  params: v.object({
    title,
    documentInstanceId: instanceId,
    content: v.optional(content),
    parentId: v.optional(v.nullable(recordId('parentId'))),
    tags: v.optional(tags),
  }),
  handler: ({ params, ctx, deps }) => deps.pageService.create(ctx, params),
});

export const update = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Change a page (title, content; also tags, parentId to move it, isArchived); each change is a new version, the earlier ones are kept.',
  result: DOCUMENT_SCHEMA,
  params: v.object({
    _id: recordId('_id'),
    title: v.optional(title),
    content: v.optional(content),
    parentId: v.optional(v.nullable(recordId('parentId'))),
    tags: v.optional(tags),
    isArchived: v.optional(v.boolean('isArchived must be a boolean')),
  }),
  handler: ({ params: { _id, ...changes }, ctx, deps }) => deps.pageService.update(ctx, _id, changes),
});

export const remove = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Delete a page and every page under it; deletedCount says how many.',
  result: v.strictObject({ success: v.literal(true), deletedCount: v.number() }),
  params: v.object({ _id: recordId('_id') }),
  handler: ({ params, ctx, deps }) => deps.pageService.delete(ctx, params._id),
});

export const getVersions = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'Every version of a page, newest first.',
  result: v.array(VERSION_SCHEMA),
  params: v.object({ docId: recordId('docId') }),
  handler: ({ params, ctx, deps }) => deps.pageService.getVersions(ctx, params.docId),
});

export const search = defineOperation({
  access: 'user',
  // The question is embedded by the AI provider.
  kind: 'write',
  describe:
    "Passages of the instance's pages closest in meaning to queryText (cosine similarity as score), best first; filter with the list operators on title, tags, parentId, version, createdBy, lastModifiedBy.",
  result: v.array(SEARCH_HIT_SCHEMA),
  params: v.object({
    documentInstanceId: instanceId,
    queryText: text('queryText', 10_000),
    topK: topK(MAX_TOP_K),
    filter: v.optional(v.unknown()),
  }),
  handler: ({ params, ctx, deps }) => deps.pageService.search(ctx, params),
});
