import * as v from 'valibot';
import { defineRecord, ROLES, type FieldMap, type InferRecord } from 'rpc-service/plugin';
import { User } from './user.entity.ts';

/** Never shown: the password hash. The user's own view leaves out what only administrators see, theirs the profile details. */
const OWN = defineRecord(User, { hide: ['passwordHash', 'partnerContactId', 'oauthProfiles'] });
const ADMIN = defineRecord(User, { hide: ['passwordHash', 'phoneNumber', 'profilePicture', 'jobTitle', 'department', 'oauthProfiles'] });

/** A user as the user themself sees it (the profile of `plugins/user-profile/README.md`): linked providers without their addresses. */
export type UserView = InferRecord<typeof OWN> & { oauthProfiles: { provider: string; id: string }[] };

/** The declared result of an answer with a UserView: OWN's columns, with the links' names only. */
export const USER_VIEW_SCHEMA = v.strictObject({
  ...OWN.entries,
  // A text column to the view; only ROLES are ever stored.
  role: v.picklist(ROLES),
  oauthProfiles: v.array(v.strictObject({ provider: v.string(), id: v.string() })),
});

export const toUserView = (user: User): UserView => ({
  ...OWN.toRecord(user),
  oauthProfiles: (user.oauthProfiles ?? []).map(({ provider, id }) => ({ provider, id })),
});

/** A user as an administrator of the subscription sees it (AdminUserRpc's records, `plugins/admin-user/README.md`), with the address each provider gave when its link was made. */
export type AdminUserRecord = InferRecord<typeof ADMIN> & { oauthProfiles: NonNullable<User['oauthProfiles']> };

export const toAdminUserRecord = (user: User): AdminUserRecord => ({ ...ADMIN.toRecord(user), oauthProfiles: user.oauthProfiles ?? [] });

/** What AdminUserRpc lists filter and sort by. */
export const ADMIN_USER_FIELDS: FieldMap = ADMIN.fields;
