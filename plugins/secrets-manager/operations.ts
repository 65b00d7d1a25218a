import * as v from 'valibot';
import { listParams, listSchema, recordId } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';
import { SCOPES } from './scoped-secret.entity.ts';
import { SCOPE_OPTIONS, SCOPED_SECRET } from './scoped-secrets.service.ts';

const MAX_VALUE_LENGTH = 65_536;

const text = (label: string, max: number) =>
  v.pipe(v.string(`${label} must be a string`), v.minLength(1, `${label} must not be empty`), v.maxLength(max, `${label} must be at most ${max} characters`));
const optionalText = (label: string, max: number) => v.optional(v.nullable(text(label, max)));

const scope = v.picklist(SCOPES, `scope must be one of ${SCOPES.join(', ')}`);
const projectId = optionalText('projectId', 200);
const agentName = optionalText('agentName', 200);
const key = v.pipe(text('key', 200), v.regex(/^\S(.*\S)?$/, 'key must not start or end with spaces'));
const value = text('value', MAX_VALUE_LENGTH);
const label = optionalText('label', 200);
const description = v.optional(v.nullable(v.pipe(v.string('description must be a string'), v.maxLength(1000, 'description must be at most 1000 characters'))));

const { page, pageSize } = listParams(50);

export const getData = defineOperation({
  access: 'user',
  kind: 'read',
  describe: "List the subscription's scope-based secrets (metadata only, never values), by scope, project and agent.",
  result: listSchema(SCOPED_SECRET.schema),
  params: v.object({ scope: v.optional(scope), projectId, agentName, page, pageSize }),
  handler: ({ params, ctx, deps }) => deps.scopedSecretsService.getData(ctx, params),
});

export const create = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Create the secret of a scope (subscription, project or agent) and key, or replace the value of the existing one.',
  result: SCOPED_SECRET.schema,
  params: v.object({ scope, projectId, agentName, key, value, label, description }),
  handler: ({ params, ctx, deps }) =>
    deps.scopedSecretsService.create(ctx, { ...params, projectId: params.projectId ?? null, agentName: params.agentName ?? null }),
});

export const update = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'With a value: rotate the secret (as create; scope, projectId, agentName and key may move it). Without: change label and description only.',
  result: SCOPED_SECRET.schema,
  params: v.object({
    _id: recordId('_id'),
    // Present, it is a create's value (so not empty); null or omitted: a metadata-only update.
    value: v.optional(v.nullable(value)),
    label,
    description,
    scope: v.optional(scope),
    projectId,
    agentName,
    key: v.optional(key),
  }),
  handler: ({ params: { _id, ...input }, ctx, deps }) => deps.scopedSecretsService.update(ctx, _id, input),
});

export const remove = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Delete a secret and its value.',
  result: v.strictObject({ success: v.literal(true) }),
  params: v.object({ _id: recordId('_id') }),
  handler: ({ params, ctx, deps }) => deps.scopedSecretsService.delete(ctx, params._id),
});

export const getSecretValue = defineOperation({
  access: 'admin',
  kind: 'read',
  stepUp: true,
  describe:
    'Read the value of a secret (admins only); every read is in the audit log (SecretsRpc.getAuditLog), and no value is returned unless its read was recorded.',
  result: v.strictObject({ value: v.string() }),
  params: v.object({ _id: recordId('_id') }),
  handler: ({ params, ctx, deps }) => deps.scopedSecretsService.getSecretValue(ctx, params._id),
});

export const getScopeOptions = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'The three scopes as {value, label} for a picker.',
  result: v.array(v.strictObject({ value: v.picklist(SCOPES), label: v.string() })),
  params: v.object({}),
  handler: () => [...SCOPE_OPTIONS],
});
