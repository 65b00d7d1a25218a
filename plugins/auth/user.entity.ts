import { defineEntity, type InferEntity, type Role } from 'rpc-service/plugin';

/** A provider account linked to a user, as the user's views show it (from auth_oauth_link). */
export interface OAuthProfile {
  provider: string;
  id: string;
  /** The verified address the provider gave when the link was made. */
  email?: string;
}

/** A provider account an administrator declared for a user (AdminUserRpc): data kept and shown, never a way to sign in. */
export interface DeclaredProfile {
  provider: string;
  id: string;
}

/** How a user's owner proved their e-mail address: a code sent to it, or a sign-in with a provider that verified it. */
export type EmailProof = 'code' | 'oauth';

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
    /** Shown and set as the spec says; an administrator may set it, so it proves nothing (see emailProven). */
    isVerified: p.boolean().default(false),
    /**
     * The address the user's owner proved they receive mail at, lowercased,
     * and how (emailProvenBy). The proof holds only while it is still the
     * user's e-mail, so any change of address ends it. Only such a proof lets
     * a provider's verified address sign into the account unasked (oauth.service.ts).
     */
    emailProven: p.text().nullable(),
    emailProvenBy: p.text().$type<EmailProof>().nullable(),
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
    /** Provider accounts an administrator declared (AdminUserRpc); shown in oauthProfiles after the links. */
    declaredProfiles: p.json<DeclaredProfile[]>().default('[]'),
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
