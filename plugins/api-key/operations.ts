import * as v from 'valibot';
import { jsonObjectText, listSchema, recordId } from 'rpc-service/plugin';
import { API_KEY_RECORD, CREATED_API_KEY } from './api-key.service.ts';
import { defineOperation } from './deps.ts';

const description = v.pipe(
  v.string(),
  v.trim(),
  v.minLength(1, 'description must not be empty'),
  v.maxLength(500, 'description must be at most 500 characters'),
);

export const getData = defineOperation({
  access: 'user',
  kind: 'read',
  describe: "List the calling user's API keys (never the key material).",
  result: listSchema(API_KEY_RECORD),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.apiKeyService.getData(ctx),
});

export const create = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Create an API key; the full key is returned once, in this response only.',
  result: CREATED_API_KEY,
  params: v.object({
    description,
    initialContext: v.optional(v.nullable(jsonObjectText('initialContext')), null),
  }),
  handler: ({ params, ctx, deps }) => deps.apiKeyService.create(ctx, params),
});

export const update = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Change the description, initial context or enabled state of an API key.',
  result: API_KEY_RECORD,
  params: v.object({
    _id: recordId('_id'),
    description: v.optional(description),
    // null or an empty string clears the context.
    initialContext: v.optional(
      v.union([
        v.pipe(
          v.union([v.null(), v.literal('')]),
          v.transform(() => null),
        ),
        jsonObjectText('initialContext'),
      ]),
    ),
    isEnabled: v.optional(v.boolean()),
  }),
  handler: ({ params: { _id, ...changes }, ctx, deps }) => deps.apiKeyService.update(ctx, _id, changes),
});

export const remove = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Delete an API key; it stops working at once on every node.',
  result: v.strictObject({ success: v.literal(true) }),
  params: v.object({ _id: recordId('_id') }),
  handler: ({ params, ctx, deps }) => deps.apiKeyService.delete(ctx, params._id),
});
