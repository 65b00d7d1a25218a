import * as v from 'valibot';
import { listSchema, MAX_PAGE_SIZE, stringList, trimmedText, UPLOAD_KEY_WITH_LIMITS } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';
import { PLAYBOOK_SCHEMA, RESOURCE_SCHEMA } from './playbook.service.ts';

/** Playbooks list and search return at most this many by default. */
const DEFAULT_LIMIT = 50;

const id = (label: string) => trimmedText(label, 200);
const tags = stringList('tags');
const count = (label: string) =>
  v.optional(
    v.pipe(
      v.number(`${label} must be a number`),
      v.integer(`${label} must be a whole number`),
      v.minValue(1, `${label} must be at least 1`),
      v.maxValue(MAX_PAGE_SIZE, `${label} must be at most ${MAX_PAGE_SIZE}`),
    ),
  );
/** The playbook fields callers write (not _id, subscriptionId, source, resources or the timestamps). */
const fields = {
  description: v.optional(v.pipe(v.string('description must be a string'), v.maxLength(5000, 'description must be at most 5000 characters'))),
  content: v.optional(v.pipe(v.string('content must be a string'), v.maxLength(200_000, 'content must be at most 200000 characters'))),
  category: v.optional(v.nullable(trimmedText('category', 200))),
  tags: v.optional(tags),
  isActive: v.optional(v.boolean('isActive must be true or false')),
};

export const list = defineOperation({
  access: 'user',
  kind: 'read',
  describe: `Playbooks with any of tags (or filter.tags), most recently changed first, at most limit (else pageSize, else ${DEFAULT_LIMIT}); page and sort are accepted but not used; totalCount is the number returned.`,
  result: listSchema(PLAYBOOK_SCHEMA),
  params: v.object({
    tags: v.optional(tags),
    limit: count('limit'),
    page: count('page'),
    pageSize: count('pageSize'),
    // Only tags is read from filter: other fields are refused rather than ignored.
    filter: v.optional(v.strictObject({ tags: v.optional(tags) }, 'unknown field; filterable fields: tags'), {}),
    sort: v.optional(v.record(v.string(), v.unknown())),
  }),
  handler: ({ params, ctx, deps }) =>
    deps.playbookService.list(ctx, { tags: params.tags ?? params.filter.tags, limit: params.limit ?? params.pageSize ?? DEFAULT_LIMIT }),
});

export const search = defineOperation({
  access: 'user',
  kind: 'read',
  describe: `Playbooks whose name, description, content or tags hold query (any case), with any of tags; name matches first, at most limit (${DEFAULT_LIMIT}).`,
  result: listSchema(PLAYBOOK_SCHEMA),
  params: v.object({ query: v.optional(v.pipe(v.string('query must be a string'), v.maxLength(500))), tags: v.optional(tags), limit: count('limit') }),
  handler: ({ params, ctx, deps }) => deps.playbookService.search(ctx, { query: params.query, tags: params.tags, limit: params.limit ?? DEFAULT_LIMIT }),
});

export const findById = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'One playbook; "Playbook <id> not found" when there is none.',
  result: PLAYBOOK_SCHEMA,
  params: v.object({ _id: id('_id') }),
  handler: ({ params, ctx, deps }) => deps.playbookService.findById(ctx, params._id),
});

export const create = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Create a playbook: name, description, content (Markdown), category, tags, isActive (true by default). Answers the playbook.',
  result: PLAYBOOK_SCHEMA,
  params: v.object({ name: trimmedText('name', 200), ...fields }),
  handler: ({ params, ctx, deps }) => deps.playbookService.create(ctx, params),
});

export const update = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Change the fields given in data. Answers the playbook.',
  result: PLAYBOOK_SCHEMA,
  params: v.object({ _id: id('_id'), data: v.object({ name: v.optional(trimmedText('name', 200)), ...fields }, 'data must be an object') }),
  handler: ({ params, ctx, deps }) => deps.playbookService.update(ctx, params._id, params.data),
});

export const remove = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Delete a playbook and its resource files. Answers {success: true, message}.',
  result: v.strictObject({ success: v.literal(true), message: v.string() }),
  params: v.object({ _id: id('_id') }),
  handler: ({ params, ctx, deps }) => deps.playbookService.delete(ctx, params._id),
});

export const getResourceUploadKey = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'A single-use upload key and the URL to PUT or POST resource files of a playbook to (up to 20 files of 25 MB).',
  result: UPLOAD_KEY_WITH_LIMITS,
  params: v.object({ playbookId: id('playbookId') }),
  handler: async ({ params, ctx, deps, transport }) => {
    const { uploadKey, expiresAt, maxBytes, maxFiles, types } = await deps.playbookService.getResourceUploadKey(ctx, params.playbookId);
    return { uploadKey, uploadUrl: `${transport.baseUrl}/api/uploads/${uploadKey}`, expiresAt: expiresAt.toISOString(), maxBytes, maxFiles, types: [...types] };
  },
});

export const finalizeResourceUpload = defineOperation({
  access: 'user',
  kind: 'write',
  describe: "Append the files uploaded with the key to the playbook's resources: {success: true, added, files}; added 0 when no file was sent.",
  result: v.strictObject({ success: v.literal(true), added: v.number(), files: v.optional(v.array(RESOURCE_SCHEMA)) }),
  params: v.object({
    playbookId: id('playbookId'),
    uploadKey: v.pipe(v.string('uploadKey must be a string'), v.minLength(1, 'uploadKey must not be empty'), v.maxLength(100)),
  }),
  handler: ({ params, ctx, deps }) => deps.playbookService.finalizeResourceUpload(ctx, params.playbookId, params.uploadKey),
});
