import * as v from 'valibot';
import { email, envelope, password, SESSION_COOKIE, username, validationError, type Transport } from 'rpc-service/plugin';
import type { SessionGrant } from './auth.service.ts';
import { defineOperation } from './deps.ts';

const personName = v.optional(v.pipe(v.string(), v.trim(), v.maxLength(100)));

const startSession = <T extends SessionGrant>(transport: Transport, grant: T): T => {
  transport.setCookie(SESSION_COOKIE, grant.token, { expires: new Date(grant.expiresAt) });
  return grant;
};

const nonEmpty = (label: string, max = 200) => v.pipe(v.string(), v.trim(), v.minLength(1, `${label} must not be empty`), v.maxLength(max));
const verification = v.object({ otpRequestId: nonEmpty('otpRequestId'), code: nonEmpty('code', 20) });
const inviteCode = v.optional(nonEmpty('inviteCode'));

export const preSignupValidate = defineOperation({
  access: 'public',
  describe: 'Check signup details (rules, uniqueness, invite code) without creating anything.',
  params: v.object({ email, username, inviteCode }),
  handler: async ({ params, deps }) => {
    await deps.authService.preSignupValidate(params);
    return envelope({ message: 'The signup details are valid' });
  },
});

export const signup = defineOperation({
  access: 'public',
  describe: 'Create a user: in a new subscription as its admin, or with an invite code in the inviting one. Returns a session.',
  params: v.object({
    email,
    username,
    password: v.optional(password),
    firstName: personName,
    lastName: personName,
    inviteCode,
    verifications: v.optional(v.object({ email: v.optional(verification), phone: v.optional(verification) })),
  }),
  handler: async ({ params, deps, transport }) => startSession(transport, await deps.authService.signup(params, transport.clientIp)),
});

export const requestVerificationCode = defineOperation({
  access: 'public',
  describe: 'Send a six-digit code to an e-mail address or phone number; valid for ten minutes.',
  params: v.object({
    channelType: v.picklist(['email', 'sms', 'whatsapp'], 'channelType must be email, sms or whatsapp'),
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
  describe: 'Check a code; finalize consumes it. Creates no user.',
  params: v.object({ otpRequestId: nonEmpty('otpRequestId'), code: nonEmpty('code', 20), finalize: v.optional(v.boolean(), false) }),
  handler: ({ params, deps, transport }) => deps.verificationService.verifyCode(params.otpRequestId, params.code, transport.clientIp, params.finalize),
});

export const login = defineOperation({
  access: 'public',
  describe: 'Log in with identifier (e-mail or username) and password, or passwordless with otpRequestId and code.',
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
  handler: async ({ params, deps, transport }) =>
    startSession(
      transport,
      params.otpRequestId !== undefined
        ? await deps.authService.loginWithCode(params.otpRequestId, params.code!, transport.clientIp)
        : await deps.authService.login(params.identifier!, params.password!, transport.clientIp),
    ),
});

export const logout = defineOperation({
  access: 'user',
  describe: 'End the current session.',
  params: v.object({}),
  handler: async ({ ctx, deps, transport }) => {
    await deps.authService.logout(ctx);
    transport.setCookie(SESSION_COOKIE, '', { maxAge: 0 });
    return { success: true };
  },
});

export const getSession = defineOperation({
  access: 'user',
  describe: 'The calling user, their subscription and when the session expires.',
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.authService.getSession(ctx),
});

export const getClientConfig = defineOperation({
  access: 'public',
  describe: 'Public settings a client needs before login: signup mode, verifications, OAuth providers.',
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
  describe: 'The path that starts a login with an OAuth provider: /auth/<provider>.',
  params: v.object({ provider }),
  handler: ({ params, deps }) => ({ url: `/auth/${deps.oauthService.provider(params.provider).name}` }),
});

export const createExternalOAuthLoginSession = defineOperation({
  access: 'public',
  describe: 'Start an OAuth login in an external browser; poll its result with pollExternalOAuthLoginSession.',
  params: v.object({ provider }),
  handler: ({ params, deps, transport }) => deps.oauthService.createExternalOAuthLoginSession(params.provider, transport.baseUrl),
});

export const pollExternalOAuthLoginSession = defineOperation({
  access: 'public',
  describe: 'The state of an external OAuth login: pending, completed (once, with the session) or expired.',
  params: v.object({ sessionId: nonEmpty('sessionId', 100), pollToken: nonEmpty('pollToken', 200) }),
  handler: ({ params, deps }) => deps.oauthService.pollExternalOAuthLoginSession(params.sessionId, params.pollToken),
});
