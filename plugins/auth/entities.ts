import { defineEntity, type InferEntity, type Role } from 'rpc-service/plugin';

/** A tenant: everything of a subscription carries its id. Signup makes one with its first user. */
export const Subscription = defineEntity({
  name: 'Subscription',
  tableName: 'auth_subscription',
  properties: (p) => ({
    id: p.uuid().primary(),
    name: p.text(),
    serviceCode: p.text().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
  }),
});
export type Subscription = InferEntity<typeof Subscription>;

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
    id: p.uuid().primary(),
    subscriptionId: p.uuid().index(),
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
          `(select coalesce(jsonb_agg(jsonb_strip_nulls(jsonb_build_object('provider', l.provider, 'id', l.subject, 'email', l.email)) order by l.created_at, l.provider, l.subject), '[]'::jsonb) from auth_oauth_link l where l.user_id = ${table.alias}.id)`,
      ),
    partnerContactId: p.text().nullable(),
    profilePicture: p.text().nullable(),
    jobTitle: p.text().nullable(),
    department: p.text().nullable(),
    serviceCode: p.text().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
  }),
  indexes: [
    { name: 'auth_user_email_key', expression: 'create unique index "auth_user_email_key" on "auth_user" (lower("email"))' },
    { name: 'auth_user_username_key', expression: 'create unique index "auth_user_username_key" on "auth_user" (lower("username"))' },
  ],
});
export type User = InferEntity<typeof User>;

/**
 * A provider account (provider and its subject, the OIDC `sub`) linked to a
 * user. The key makes one provider account sign in at most one user in the
 * whole service; only the OAuth login makes a link (oauth.service.ts).
 */
export const OAuthLink = defineEntity({
  name: 'OAuthLink',
  tableName: 'auth_oauth_link',
  properties: (p) => ({
    provider: p.text().primary(),
    subject: p.text().primary(),
    userId: p.uuid().index(),
    subscriptionId: p.uuid(),
    /** The verified address the provider gave when the link was made. */
    email: p.text().nullable(),
    createdAt: p.datetime(),
  }),
});
export type OAuthLink = InferEntity<typeof OAuthLink>;

/** A session: only the SHA-256 of its token is stored. */
export const Session = defineEntity({
  name: 'Session',
  tableName: 'auth_session',
  properties: (p) => ({
    id: p.uuid().primary(),
    subscriptionId: p.uuid(),
    userId: p.uuid().index(),
    /** SHA-256 of the token, hex; the token itself is never stored. */
    tokenHash: p.text().unique(),
    createdAt: p.datetime(),
    lastSeenAt: p.datetime(),
    expiresAt: p.datetime(),
  }),
});
export type Session = InferEntity<typeof Session>;

/** An invitation to join a subscription. Only the code's hash is stored; `hint` helps tell codes apart. */
export const InviteCode = defineEntity({
  name: 'InviteCode',
  tableName: 'auth_invite_code',
  properties: (p) => ({
    id: p.uuid().primary(),
    subscriptionId: p.uuid(),
    codeHash: p.text().unique(),
    hint: p.text(),
    /** The role a user who signs up with the code receives. */
    role: p.text().$type<Role>(),
    maxUses: p.integer(),
    uses: p.integer().default(0),
    expiresAt: p.datetime().nullable(),
    revokedAt: p.datetime().nullable(),
    createdBy: p.uuid(),
    createdAt: p.datetime(),
  }),
  indexes: [{ properties: ['subscriptionId', 'createdAt'] }],
});
export type InviteCode = InferEntity<typeof InviteCode>;

export type OtpChannel = 'email' | 'sms' | 'whatsapp';

/**
 * A one-time code sent to an e-mail address or phone number. It exists before
 * any account does (signup), so it belongs to no subscription. Only an HMAC of
 * the code is stored.
 */
export const OtpRequest = defineEntity({
  name: 'OtpRequest',
  tableName: 'auth_otp_request',
  properties: (p) => ({
    id: p.uuid().primary(),
    channel: p.text().$type<OtpChannel>(),
    /** Normalised: lower-case e-mail, or a phone number in E.164 form. */
    identifier: p.text(),
    codeHash: p.text(),
    attempts: p.integer().default(0),
    expiresAt: p.datetime().index(),
    verifiedAt: p.datetime().nullable(),
    consumedAt: p.datetime().nullable(),
    createdAt: p.datetime(),
  }),
});
export type OtpRequest = InferEntity<typeof OtpRequest>;

/** A login in progress at an OpenID provider: state (hashed), PKCE verifier (sealed), nonce. */
export const OAuthState = defineEntity({
  name: 'OAuthState',
  tableName: 'auth_oauth_state',
  properties: (p) => ({
    stateHash: p.text().primary(),
    provider: p.text(),
    codeVerifier: p.text(),
    nonce: p.text(),
    externalLoginId: p.uuid().nullable(),
    expiresAt: p.datetime(),
  }),
});

/** A login started for another program (a desktop app) that polls for its result. */
export const ExternalLogin = defineEntity({
  name: 'ExternalLogin',
  tableName: 'auth_external_login',
  properties: (p) => ({
    id: p.uuid().primary(),
    provider: p.text(),
    pollTokenHash: p.text(),
    /** The session token, sealed, until the polling program collects it once. */
    sessionToken: p.text().nullable(),
    userId: p.uuid().nullable(),
    completedAt: p.datetime().nullable(),
    consumedAt: p.datetime().nullable(),
    expiresAt: p.datetime(),
    createdAt: p.datetime(),
  }),
});

export const authEntities = [Subscription, User, OAuthLink, Session, InviteCode, OtpRequest, OAuthState, ExternalLogin];
