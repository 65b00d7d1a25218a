import * as v from 'valibot';
import { email, envelope, password, RpcError, SESSION_COOKIE, username, validationError, wireTimestamp, type Transport } from 'rpc-service/plugin';
import type { SessionGrant } from './sign-in.service.ts';
import { SIGNUP_MODES } from './config.ts';
import { defineOperation } from './deps.ts';
import { JOIN_COOKIE } from './join.service.ts';
import { OTP_CHANNELS } from './otp-request.entity.ts';
import { USER_VIEW_SCHEMA } from './user-view.ts';

const personName = v.optional(v.pipe(v.string(), v.trim(), v.maxLength(100)));

const startSession = <T extends SessionGrant>(transport: Transport, grant: T): T => {
  transport.setCookie(SESSION_COOKIE, grant.token, { expires: new Date(grant.expiresAt) });
  return grant;
};

const nonEmpty = (label: string, max = 200) => v.pipe(v.string(), v.trim(), v.minLength(1, `${label} must not be empty`), v.maxLength(max));
const verification = v.object({ otpRequestId: nonEmpty('otpRequestId'), code: nonEmpty('code', 20) });
const inviteCode = v.optional(nonEmpty('inviteCode'));

/** A new session: its token (also set as the session cookie), when it expires unused, and its user. */
const sessionGrant = { token: v.string(), expiresAt: wireTimestamp, user: USER_VIEW_SCHEMA };

export const preSignupValidate = defineOperation({
  access: 'public',
  kind: 'read',
  describe: 'Check signup details (rules, uniqueness, invite code) without creating anything; counted per client address.',
  result: v.strictObject({ message: v.string() }),
  params: v.object({ email, username, inviteCode }),
  handler: async ({ params, deps, transport }) => {
    await deps.authService.preSignupValidate(params, transport.clientIp);
    return envelope({ message: 'The signup details are valid' });
  },
});

export const signup = defineOperation({
  access: 'public',
  kind: 'write',
  describe: 'Create a user: in a new subscription as its admin, or with an invite code in the inviting one. Returns a session.',
  result: v.strictObject({ ...sessionGrant, subscriptionId: v.string() }),
  params: v.object({
    email,
    username,
    password: v.optional(password),
    firstName: personName,
    lastName: personName,
    inviteCode,
    verifications: v.optional(v.object({ email: v.optional(verification), phone: v.optional(verification) })),
  }),
  handler: async ({ params, deps, transport }) => startSession(transport, await deps.authService.signup(params, transport)),
});

export const requestVerificationCode = defineOperation({
  access: 'public',
  kind: 'write',
  describe: 'Send a six-digit code to an e-mail address or phone number; valid for ten minutes.',
  result: v.strictObject({ otpRequestId: v.string(), channelType: v.picklist(OTP_CHANNELS), destination: v.string(), expiresAt: wireTimestamp }),
  params: v.object({
    channelType: v.picklist(OTP_CHANNELS, 'channelType must be email, sms or whatsapp'),
    identifier: nonEmpty('identifier', 254),
    contactInfo: v.optional(
      v.object({
        firstName: v.optional(v.pipe(v.string(), v.maxLength(100))),
        lastName: v.optional(v.pipe(v.string(), v.maxLength(100))),
        contactId: v.optional(v.nullable(v.string())),
      }),
    ),
  }),
  handler: ({ params, deps, transport }) => {
    if (params.channelType === 'email' && !v.is(email, params.identifier)) {
      throw validationError([{ path: 'identifier', message: 'Invalid e-mail address' }]);
    }
    return deps.verificationService.requestVerificationCode(params.channelType, params.identifier, transport.clientIp, params.contactInfo?.firstName);
  },
});

export const verifyCode = defineOperation({
  access: 'public',
  kind: 'write',
  describe: 'Check a code; finalize consumes it. Creates no user.',
  result: v.strictObject({ verified: v.literal(true), otpRequestId: v.string(), finalized: v.boolean() }),
  params: v.object({ otpRequestId: nonEmpty('otpRequestId'), code: nonEmpty('code', 20), finalize: v.optional(v.boolean(), false) }),
  handler: ({ params, deps, transport }) => deps.verificationService.verifyCode(params.otpRequestId, params.code, transport.clientIp, params.finalize),
});

export const login = defineOperation({
  access: 'public',
  kind: 'write',
  describe:
    'Log in with identifier (e-mail or username) and password, or passwordless with otpRequestId and code; CONFIRM_JOIN when the account may be someone else’s making (answer at /auth/join).',
  result: v.strictObject(sessionGrant),
  params: v.pipe(
    v.object({
      identifier: v.optional(v.pipe(v.string(), v.trim(), v.minLength(1, 'identifier must not be empty'), v.maxLength(254))),
      password: v.optional(v.pipe(v.string(), v.minLength(1, 'password must not be empty'), v.maxLength(256))),
      otpRequestId: v.optional(nonEmpty('otpRequestId')),
      code: v.optional(nonEmpty('code', 20)),
    }),
    v.check(
      (params) => (params.identifier !== undefined && params.password !== undefined) !== (params.otpRequestId !== undefined && params.code !== undefined),
      'Send identifier and password, or otpRequestId and code',
    ),
  ),
  handler: async ({ params, deps, transport }) => {
    const login =
      params.otpRequestId !== undefined
        ? await deps.authService.loginWithCode(params.otpRequestId, params.code!, transport)
        : await deps.authService.login(params.identifier!, params.password!, transport);
    if (!('status' in login)) return startSession(transport, login);
    // The account may be someone else's making: this browser answers the question at /auth/join (plugins/auth/README.md).
    transport.setCookie(JOIN_COOKIE, login.token, { expires: login.expiresAt });
    throw new RpcError(
      'CONFIRM_JOIN',
      `The account with ${login.email} (${login.username} in "${login.tenant}") was not made by you, and its owner never proved this address: ` +
        'open /auth/join in this browser to answer whether to join it, which ends the password, sessions and API keys it has',
    );
  },
});

export const logout = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'End the current session.',
  result: v.strictObject({ success: v.literal(true) }),
  params: v.object({}),
  handler: async ({ ctx, deps, transport }) => {
    await deps.authService.logout(ctx);
    transport.setCookie(SESSION_COOKIE, '', { maxAge: 0 });
    return { success: true as const };
  },
});

export const getSession = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'The calling user, their subscription and when the session expires.',
  result: v.strictObject({ user: USER_VIEW_SCHEMA, subscriptionId: v.string(), expiresAt: v.nullable(wireTimestamp), apiKeyId: v.nullable(v.string()) }),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.authService.getSession(ctx),
});

export const getClientConfig = defineOperation({
  access: 'public',
  kind: 'read',
  describe: 'Public settings a client needs before login: signup mode, verifications, OAuth providers.',
  result: v.strictObject({
    signupMode: v.picklist(SIGNUP_MODES),
    requiredVerifications: v.strictObject({ email: v.boolean(), phone: v.boolean() }),
    oauthProviders: v.array(v.string()),
    passwordMinLength: v.number(),
  }),
  params: v.object({}),
  handler: ({ deps }) => ({
    signupMode: deps.config.signupMode,
    requiredVerifications: { email: deps.config.signupRequireEmailVerification, phone: deps.config.signupRequirePhoneVerification },
    oauthProviders: deps.oauthService.providerNames,
    passwordMinLength: 8,
  }),
});

const provider = v.pipe(v.string(), v.trim(), v.minLength(1, 'provider must not be empty'), v.maxLength(50));

export const getOAuthLoginUrl = defineOperation({
  access: 'public',
  kind: 'read',
  describe: 'The path that starts a login with an OAuth provider: /auth/<provider>.',
  result: v.strictObject({ url: v.string() }),
  params: v.object({ provider }),
  handler: ({ params, deps }) => ({ url: `/auth/${deps.oauthService.provider(params.provider).name}` }),
});

export const createExternalOAuthLoginSession = defineOperation({
  access: 'public',
  kind: 'write',
  describe: 'Start an OAuth login in an external browser; poll its result with pollExternalOAuthLoginSession.',
  result: v.strictObject({ sessionId: v.string(), loginUrl: v.string(), pollToken: v.string(), expiresAt: wireTimestamp }),
  params: v.object({ provider }),
  handler: ({ params, deps, transport }) => deps.oauthService.createExternalOAuthLoginSession(params.provider, transport.baseUrl),
});

export const pollExternalOAuthLoginSession = defineOperation({
  access: 'public',
  // Collecting a completed login consumes it: it is answered once.
  kind: 'write',
  describe: 'The state of an external OAuth login: pending, completed (once, with the session) or expired.',
  result: v.variant('status', [
    v.strictObject({ status: v.picklist(['pending', 'expired']) }),
    v.strictObject({ status: v.literal('completed'), ...sessionGrant }),
  ]),
  params: v.object({ sessionId: nonEmpty('sessionId', 100), pollToken: nonEmpty('pollToken', 200) }),
  handler: ({ params, deps }) => deps.oauthService.pollExternalOAuthLoginSession(params.sessionId, params.pollToken),
});
