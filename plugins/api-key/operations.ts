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

/** A group (`TaskRpc`) or an operation (`TaskRpc.getData`); one that names nothing loaded simply allows nothing. */
const scope = v.pipe(
  v.string('each scope must be a string'),
  v.regex(/^[A-Z][A-Za-z0-9]*Rpc(\.[a-z][A-Za-z0-9]*)?$/, 'each scope is a group (TaskRpc) or an operation (TaskRpc.getData)'),
);

/** What a key may call, within its owner's role: the same fields on create and update. */
const limits = {
  scopes: v.optional(
    v.nullable(
      v.pipe(
        v.array(scope, 'scopes must be a list'),
        v.minLength(1, 'scopes must name at least one group or operation (null: all)'),
        v.maxLength(200, 'scopes may name at most 200 groups or operations'),
      ),
    ),
  ),
  readOnly: v.optional(v.boolean('readOnly must be a boolean')),
  rateLimitPerMinute: v.optional(
    v.nullable(
      v.pipe(v.number('rateLimitPerMinute must be a number'), v.integer('rateLimitPerMinute must be a whole number'), v.minValue(1), v.maxValue(100_000)),
    ),
  ),
};

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
  stepUp: true,
  describe:
    'Create an API key, optionally limited to some groups or operations, to reading, or to a rate; the full key is returned once, in this response only.',
  result: CREATED_API_KEY,
  params: v.object({
    description,
    initialContext: v.optional(v.nullable(jsonObjectText('initialContext')), null),
    ...limits,
  }),
  handler: ({ params, ctx, deps }) => deps.apiKeyService.create(ctx, params),
});

export const update = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Change the description, initial context, enabled state, scopes, read-only flag or rate limit of an API key.',
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
    ...limits,
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
