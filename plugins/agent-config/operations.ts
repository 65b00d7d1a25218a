import * as v from 'valibot';
import { listParams, listSchema, recordId, UPLOAD_KEY_ANSWER } from 'rpc-service/plugin';
import { agentFields } from './agent-settings.ts';
import { AGENT_SCHEMA, TOOL } from './agent.service.ts';
import { defineOperation } from './deps.ts';

const name = v.pipe(
  v.string('name must be a string'),
  v.trim(),
  v.minLength(1, 'name must not be empty'),
  v.maxLength(100, 'name must be at most 100 characters'),
);
const model = v.pipe(v.string('model must be a string'), v.minLength(1, 'model must not be empty'), v.maxLength(200));
const nullableText = (label: string, max: number) =>
  v.optional(v.nullable(v.pipe(v.string(`${label} must be a string`), v.maxLength(max, `${label} must be at most ${max} characters`))));
const { model: _model, ...fields } = agentFields;

export const create = defineOperation({
  access: 'user',
  kind: 'write',
  describe:
    'Create an agent configuration; name (unique in the subscription) and model (from the AI catalogue) required. projectId "" makes it global; omitted, the context project.',
  result: AGENT_SCHEMA,
  params: v.object({
    name,
    model,
    ...fields,
    messagingContactId: nullableText('messagingContactId', 200),
    avatarUrl: nullableText('avatarUrl', 2000),
    realtime: v.optional(v.boolean('realtime must be true or false')),
    projectId: nullableText('projectId', 200),
  }),
  handler: ({ params, ctx, deps }) => deps.agentService.create(ctx, params),
});

export const update = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Change any field from name through fileContext of an agent you created (admins and staff: any agent); capabilities merge by key.',
  result: AGENT_SCHEMA,
  params: v.object({ _id: recordId('_id'), name: v.optional(name), model: v.optional(model), ...fields }),
  handler: ({ params: { _id, ...input }, ctx, deps }) => deps.agentService.update(ctx, _id, input),
});

export const findById = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'One agent configuration of the subscription.',
  result: AGENT_SCHEMA,
  params: v.object({ _id: recordId('_id') }),
  handler: ({ params, ctx, deps }) => deps.agentService.findById(ctx, params._id),
});

export const getData = defineOperation({
  access: 'user',
  kind: 'read',
  describe:
    'Agent configurations of the subscription, filtered (name, model, agentClass, role, projectId, realtime, userId, dates) and sorted; by name by default.',
  result: listSchema(AGENT_SCHEMA),
  params: v.object(listParams(25)),
  handler: ({ params, ctx, deps }) => deps.agentService.getData(ctx, params),
});

export const remove = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Delete an agent configuration you created (admins and staff: any), and its avatar.',
  result: v.strictObject({ success: v.literal(true) }),
  params: v.object({ _id: recordId('_id') }),
  handler: ({ params, ctx, deps }) => deps.agentService.delete(ctx, params._id),
});

export const getUploadKeyForAvatar = defineOperation({
  access: 'user',
  kind: 'write',
  describe: "A single-use upload key and the URL to PUT or POST the agent's new avatar to (PNG, JPEG, WebP or GIF, at most 2 MB).",
  result: UPLOAD_KEY_ANSWER,
  params: v.object({ _id: recordId('_id') }),
  handler: async ({ params, ctx, deps, transport }) => {
    const { uploadKey, expiresAt } = await deps.agentService.getUploadKeyForAvatar(ctx, params._id);
    return { uploadKey, uploadUrl: `${transport.baseUrl}/api/uploads/${uploadKey}`, expiresAt: expiresAt.toISOString() };
  },
});

export const updateAvatar = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Make the image uploaded with this key the avatar of the agent; the previous one is deleted.',
  result: AGENT_SCHEMA,
  params: v.object({ _id: recordId('_id'), uploadKey: v.pipe(v.string(), v.minLength(1, 'uploadKey is required'), v.maxLength(100)) }),
  handler: ({ params, ctx, deps }) => deps.agentService.updateAvatar(ctx, params._id, params.uploadKey),
});

export const getAvailableTools = defineOperation({
  access: 'user',
  kind: 'read',
  describe:
    "The tools the server runs for an agent (the core.tools catalogue): name, description, the operation it calls, its access level and params schema. An agent's tools may also name tools its client runs itself; those the server neither checks nor runs.",
  result: v.array(TOOL),
  params: v.object({}),
  handler: ({ deps }) => deps.agentService.getAvailableTools(),
});
