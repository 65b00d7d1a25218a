import * as v from 'valibot';
import { AUDIT_FIELDS, AUDIT_RECORD, listParams, listSchema } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';
import { SECRET_FIELDS, SECRET_RECORD } from './secrets.service.ts';

const MAX_VALUE_LENGTH = 65_536;

const nonEmpty = (label: string, max: number) =>
  v.pipe(v.string(`${label} must be a string`), v.minLength(1, `${label} must not be empty`), v.maxLength(max, `${label} must be at most ${max} characters`));

/** A zone names an environment (`common`, `production`); the first `:` of an `_id` ends it. */
const zone = v.pipe(nonEmpty('zone', 100), v.regex(/^[^:\s]*$/, 'zone must not contain ":" or spaces'));
const key = v.pipe(nonEmpty('key', 200), v.regex(/^(\S(.*\S)?)?$/, 'key must not start or end with spaces'));
const description = v.pipe(v.string('description must be a string'), v.maxLength(1000, 'description must be at most 1000 characters'));
const value = nonEmpty('value', MAX_VALUE_LENGTH);
/** `<zone>:<key>` */
const secretId = v.pipe(v.string('_id must be a string'), v.regex(/^[^:\s]+:\S(.*\S)?$/, '_id must be "<zone>:<key>"'), v.maxLength(301, '_id is too long'));

const { page, pageSize } = listParams(25);

export const getData = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'List secret definitions (never values): filter by zone (exact), key and description (case-insensitive substrings).',
  result: listSchema(SECRET_RECORD),
  params: v.object({
    filter: v.optional(
      v.strictObject(
        Object.fromEntries(SECRET_FIELDS.map((field) => [field, v.optional(v.string(`filter.${field} must be a string`))])),
        `unknown field; filterable fields: ${SECRET_FIELDS.join(', ')}`,
      ),
      {},
    ),
    sort: v.optional(
      v.pipe(
        v.strictObject(
          Object.fromEntries(
            SECRET_FIELDS.map((field) => [field, v.optional(v.picklist([1, -1, 'asc', 'desc'], `sort.${field} must be 1, -1, "asc" or "desc"`))]),
          ),
          `unknown field; sortable fields: ${SECRET_FIELDS.join(', ')}`,
        ),
        v.transform(
          (sort) =>
            Object.fromEntries(
              Object.entries(sort)
                .filter(([, way]) => way !== undefined)
                .map(([field, way]) => [field, way === 1 || way === 'asc' ? 'asc' : 'desc']),
            ) as Record<string, 'asc' | 'desc'>,
        ),
      ),
      {},
    ),
    page,
    pageSize,
  }),
  handler: ({ params, ctx, deps }) => deps.secretsService.getData(ctx, params),
});

export const create = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Create a secret in a zone; its value is stored encrypted and readable only by admins through getSecretValue.',
  result: SECRET_RECORD,
  params: v.object({ zone, key, value, description: v.optional(description, '') }),
  handler: ({ params, ctx, deps }) => deps.secretsService.create(ctx, params),
});

export const update = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Change the value or description of a secret; an omitted or empty value leaves the stored one unchanged.',
  result: SECRET_RECORD,
  params: v.object({
    _id: secretId,
    value: v.optional(v.pipe(v.string('value must be a string'), v.maxLength(MAX_VALUE_LENGTH, `value must be at most ${MAX_VALUE_LENGTH} characters`))),
    description: v.optional(description),
  }),
  handler: ({ params: { _id, ...changes }, ctx, deps }) => deps.secretsService.update(ctx, _id, changes),
});

export const remove = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Delete a secret: its definition and its value.',
  result: v.strictObject({ success: v.literal(true) }),
  params: v.object({ _id: secretId }),
  handler: ({ params, ctx, deps }) => deps.secretsService.delete(ctx, params._id),
});

export const getSecretValue = defineOperation({
  access: 'admin',
  kind: 'read',
  stepUp: true,
  describe: 'Read the value of a secret (admins only); every read is in the audit log, and no value is returned unless its read was recorded.',
  result: v.strictObject({ value: v.string() }),
  params: v.object({ zone, key }),
  handler: ({ params, ctx, deps }) => deps.secretsService.getSecretValue(ctx, params.zone, params.key),
});

export const getAuditLog = defineOperation({
  access: 'admin',
  kind: 'read',
  describe: `Who read or changed which secret (both secret groups), newest first; filter on ${Object.keys(AUDIT_FIELDS).join(', ')}.`,
  result: listSchema(AUDIT_RECORD),
  params: v.object(listParams(25)),
  handler: ({ params, ctx, deps }) => deps.secretsService.getAuditLog(ctx, params),
});
