import * as v from 'valibot';
import { SESSION_COOKIE } from '../../core/auth/credentials.ts';
import { defineOperation, type Transport } from '../../core/rpc/operation.ts';
import { email, password, username } from '../../core/rpc/schemas.ts';
import type { SessionGrant } from './auth.service.ts';

const personName = v.optional(v.pipe(v.string(), v.trim(), v.maxLength(100)));

const startSession = <T extends SessionGrant>(transport: Transport, grant: T): T => {
  transport.setCookie(SESSION_COOKIE, grant.token, { expires: new Date(grant.expiresAt) });
  return grant;
};

export const signup = defineOperation({
  access: 'public',
  describe: 'Create a subscription and its first user (role admin); returns a session for that user.',
  params: v.object({ email, username, password: v.optional(password), firstName: personName, lastName: personName }),
  handler: async ({ params, ctx, deps, transport }) => startSession(transport, await deps.authService.signup(ctx, params)),
});

export const login = defineOperation({
  access: 'public',
  describe: 'Log in with an e-mail address or username and a password; returns a session token.',
  params: v.object({
    identifier: v.pipe(v.string(), v.trim(), v.minLength(1, 'identifier is required'), v.maxLength(254)),
    password: v.pipe(v.string(), v.minLength(1, 'password is required'), v.maxLength(256)),
  }),
  handler: async ({ params, deps, transport }) =>
    startSession(transport, await deps.authService.login(params.identifier, params.password, transport.clientIp)),
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
  handler: () => ({
    signupMode: 'open',
    requiredVerifications: { email: false, phone: false },
    oauthProviders: [],
    passwordMinLength: 8,
  }),
});
