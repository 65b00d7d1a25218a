import * as v from 'valibot';
import { defineRecord, ROLES, type FieldMap, type InferRecord } from 'rpc-service/plugin';
import { User } from './user.entity.ts';

/** Never shown: the password hash, nor how the address was proven. The user's own view leaves out what only administrators see, theirs the profile details. */
const HIDDEN = ['passwordHash', 'emailProven', 'emailProvenBy', 'declaredProfiles', 'oauthProfiles'] as const;
const OWN = defineRecord(User, { hide: [...HIDDEN, 'partnerContactId'] });
const ADMIN = defineRecord(User, { hide: [...HIDDEN, 'phoneNumber', 'profilePicture', 'jobTitle', 'department'] });

/**
 * A user's provider profiles as administrators see them: the provider
 * accounts that sign the user in (`linked`, with the address the provider gave
 * when the link was made), oldest first, then those an administrator declared
 * that are not links (data only).
 */
export interface ProfileRecord {
  provider: string;
  id: string;
  email?: string;
  linked: boolean;
}

export function profilesOf(user: User): ProfileRecord[] {
  const links: ProfileRecord[] = (user.oauthProfiles ?? []).map((link) => ({ ...link, linked: true }));
  const declared = (user.declaredProfiles ?? []).filter(({ provider, id }) => !links.some((link) => link.provider === provider && link.id === id));
  return [...links, ...declared.map(({ provider, id }) => ({ provider, id, linked: false }))];
}

/** A user as the user themself sees it (the profile of `plugins/user-profile/README.md`): provider profiles without their addresses. */
export type UserView = InferRecord<typeof OWN> & { oauthProfiles: { provider: string; id: string }[] };

/** The declared result of an answer with a UserView: OWN's columns, with the profiles' names only. */
export const USER_VIEW_SCHEMA = v.strictObject({
  ...OWN.entries,
  // A text column to the view; only ROLES are ever stored.
  role: v.picklist(ROLES),
  oauthProfiles: v.array(v.strictObject({ provider: v.string(), id: v.string() })),
});

export const toUserView = (user: User): UserView => ({
  ...OWN.toRecord(user),
  oauthProfiles: profilesOf(user).map(({ provider, id }) => ({ provider, id })),
});

/** A user as an administrator of the subscription sees it (AdminUserRpc's records, `plugins/admin-user/README.md`). */
export type AdminUserRecord = InferRecord<typeof ADMIN> & { oauthProfiles: ProfileRecord[] };

export const toAdminUserRecord = (user: User): AdminUserRecord => ({ ...ADMIN.toRecord(user), oauthProfiles: profilesOf(user) });

/** What AdminUserRpc lists filter and sort by. */
export const ADMIN_USER_FIELDS: FieldMap = ADMIN.fields;
