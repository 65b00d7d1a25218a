import * as v from 'valibot';
import { email, isoTime, listParams, listSchema, pageSchema, password, recordId, ROLES, username } from 'rpc-service/plugin';
import { ADMIN_USER_SCHEMA, INVITE_CODE_SCHEMA } from './admin-user.service.ts';
import { defineOperation } from './deps.ts';

const role = v.picklist(ROLES, `role must be one of ${ROLES.join(', ')}`);
const personName = v.nullable(v.pipe(v.string(), v.trim(), v.maxLength(100)));
/**
 * The user's provider profiles, as a record shows them (`email` and `linked` may be sent back as read). Entries
 * that are not the user's sign-in links are data: only signing in with the provider links one (plugins/auth/user.service.ts).
 */
const oauthProfiles = v.pipe(
  v.array(
    v.object({
      provider: v.pipe(v.string(), v.regex(/^[A-Za-z0-9._-]{1,50}$/, 'provider is a name of 1 to 50 letters, digits, dots, dashes or underscores')),
      id: v.pipe(v.string(), v.minLength(1, 'id must not be empty'), v.maxLength(255)),
      email: v.optional(v.string()),
      linked: v.optional(v.boolean()),
    }),
  ),
  v.maxLength(50, 'at most 50 provider profiles'),
);

/** Fields an admin may set on create and change on update. */
const editable = {
  firstName: v.optional(personName),
  lastName: v.optional(personName),
  isVerified: v.optional(v.boolean()),
  isPhoneVerified: v.optional(v.boolean()),
  onboardingCompleted: v.optional(v.boolean()),
  oauthProfiles: v.optional(oauthProfiles),
  partnerContactId: v.optional(v.nullable(v.pipe(v.string(), v.maxLength(200)))),
};

export const create = defineOperation({
  access: 'admin',
  kind: 'write',
  // Making an admin or staff member is a role change.
  stepUp: (params) => params.role !== 'user',
  describe: 'Create a user in the caller’s subscription.',
  result: ADMIN_USER_SCHEMA,
  params: v.object({ email, password, username, role, isActive: v.optional(v.boolean(), true), ...editable }),
  handler: ({ params, ctx, deps }) => deps.adminUserService.create(ctx, params),
});

export const update = defineOperation({
  access: 'admin',
  kind: 'write',
  // A role is power; an e-mail address is where a one-time code signs the account in.
  stepUp: (params) => params.role !== undefined || params.email !== undefined,
  describe: 'Change a user of the caller’s subscription.',
  result: ADMIN_USER_SCHEMA,
  params: v.object({
    _id: recordId('_id'),
    email: v.optional(email),
    username: v.optional(username),
    role: v.optional(role),
    isActive: v.optional(v.boolean()),
    ...editable,
  }),
  handler: ({ params: { _id, ...changes }, ctx, deps }) => deps.adminUserService.update(ctx, _id, changes),
});

export const remove = defineOperation({
  access: 'admin',
  kind: 'write',
  describe: 'Delete a user of the caller’s subscription, with their sessions and API keys.',
  result: v.strictObject({ acknowledged: v.literal(true), deletedCount: v.literal(1) }),
  params: v.object({ _id: recordId('_id') }),
  handler: ({ params, ctx, deps }) => deps.adminUserService.delete(ctx, params._id),
});

export const findById = defineOperation({
  access: 'admin',
  kind: 'read',
  describe: 'One user of the caller’s subscription.',
  result: ADMIN_USER_SCHEMA,
  params: v.object({ id: recordId('id') }),
  handler: ({ params, ctx, deps }) => deps.adminUserService.findById(ctx, params.id),
});

export const getData = defineOperation({
  access: 'admin',
  kind: 'read',
  describe: 'Users of the caller’s subscription, filtered, sorted and paged.',
  result: pageSchema(ADMIN_USER_SCHEMA),
  params: v.object(listParams(25)),
  handler: ({ params, ctx, deps }) => deps.adminUserService.getData(ctx, params),
});

export const resetPassword = defineOperation({
  access: 'admin',
  kind: 'write',
  // A password an admin sets signs them in as that user.
  stepUp: true,
  describe: 'Set a new password for a user and end all of their sessions.',
  result: v.literal(true),
  params: v.object({ userId: recordId('userId'), newPassword: password }),
  handler: ({ params, ctx, deps }) => deps.adminUserService.resetPassword(ctx, params.userId, params.newPassword),
});

export const getAvailableRoles = defineOperation({
  access: 'admin',
  kind: 'read',
  describe: 'The role names a user can have.',
  result: v.array(v.picklist(ROLES)),
  params: v.object({}),
  handler: ({ deps }) => deps.adminUserService.getAvailableRoles(),
});

export const createInviteCode = defineOperation({
  access: 'admin',
  kind: 'write',
  // A code for an admin or staff member hands out a role.
  stepUp: (params) => params.role !== 'user',
  describe: 'Create an invite code to the caller’s subscription; the code is shown once.',
  result: v.strictObject({ ...INVITE_CODE_SCHEMA.entries, code: v.string() }),
  params: v.object({
    role: v.optional(role, 'user'),
    maxUses: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(10_000)), 1),
    expiresAt: v.optional(
      v.nullable(
        v.pipe(
          isoTime('expiresAt'),
          v.check((date) => date.getTime() > Date.now(), 'expiresAt must be in the future'),
        ),
      ),
      null,
    ),
  }),
  handler: ({ params, ctx, deps }) => deps.inviteCodeService.createInviteCode(ctx, params),
});

export const listInviteCodes = defineOperation({
  access: 'admin',
  kind: 'read',
  describe: 'The invite codes of the caller’s subscription (never the codes themselves).',
  result: listSchema(INVITE_CODE_SCHEMA),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.inviteCodeService.listInviteCodes(ctx),
});

export const revokeInviteCode = defineOperation({
  access: 'admin',
  kind: 'write',
  describe: 'Revoke an invite code; it can no longer be used.',
  result: INVITE_CODE_SCHEMA,
  params: v.object({ _id: recordId('_id') }),
  handler: ({ params, ctx, deps }) => deps.inviteCodeService.revokeInviteCode(ctx, params._id),
});
