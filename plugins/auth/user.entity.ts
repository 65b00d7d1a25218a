import { defineEntity, type InferEntity, type Role } from 'rpc-service/plugin';

/** A provider account linked to a user, as the user's views show it (from auth_oauth_link). */
export interface OAuthProfile {
  provider: string;
  id: string;
  /** The verified address the provider gave when the link was made. */
  email?: string;
}

/** A user; e-mail and username are unique across the service, case-insensitively, since login takes either. */
export const User = defineEntity({
  name: 'User',
  tableName: 'auth_user',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    email: p.text(),
    username: p.text(),
    passwordHash: p.text().nullable().lazy(true, false),
    firstName: p.text().nullable(),
    lastName: p.text().nullable(),
    role: p.text().$type<Role>(),
    isActive: p.boolean().default(true),
    isVerified: p.boolean().default(false),
    isPhoneVerified: p.boolean().default(false),
    phoneNumber: p.text().nullable(),
    onboardingCompleted: p.boolean().default(false),
    /** Read-only: the user's rows of auth_oauth_link, oldest first; only the OAuth login adds one (oauth.service.ts). */
    oauthProfiles: p
      .json<OAuthProfile[]>()
      .formula(
        (table) =>
          `(select coalesce(jsonb_agg(jsonb_strip_nulls(jsonb_build_object('provider', l.provider, 'id', l.subject, 'email', l.email)) order by l.created_at, l.provider, l.subject), '[]'::jsonb) from auth_oauth_link l where l.subscription_id = ${table.alias}.subscription_id and l.user_id = ${table.alias}.id)`,
      ),
    partnerContactId: p.text().nullable(),
    profilePicture: p.text().nullable(),
    jobTitle: p.text().nullable(),
    department: p.text().nullable(),
    serviceCode: p.text().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  }),
  indexes: [
    { name: 'auth_user_email_key', expression: 'create unique index "auth_user_email_key" on "auth_user" (lower("email"))' },
    { name: 'auth_user_username_key', expression: 'create unique index "auth_user_username_key" on "auth_user" (lower("username"))' },
  ],
});
export type User = InferEntity<typeof User>;
