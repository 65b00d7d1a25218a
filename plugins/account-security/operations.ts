import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import * as v from 'valibot';
import { recordId, ROLES, wireTimestamp } from 'rpc-service/plugin';
import { defineJob, defineOperation } from './deps.ts';
import { AUTHENTICATION_RESPONSE, PASSKEY_VIEW, REGISTRATION_RESPONSE } from './passkeys.ts';
import { REQUIRED_FOR } from './policies.ts';

const ticket = v.pipe(v.string('ticket must be a string'), v.minLength(1), v.maxLength(100));
const code = v.pipe(v.string('code must be a string'), v.trim(), v.minLength(1, 'code must not be empty'), v.maxLength(40));
const challengeId = recordId('challengeId');
const passkeyName = v.pipe(v.string(), v.trim(), v.minLength(1, 'name must not be empty'), v.maxLength(100));

const DONE = v.strictObject({ success: v.literal(true) });
const FACTOR_METHOD = v.picklist(['authenticator', 'passkey', 'recovery-code']);
const AMR = v.array(v.string());

/** A sign-in finished: its session (also set as the session cookie), or, for an external login, handed to the application that polls for it. */
const SIGN_IN = v.variant('status', [
  v.strictObject({ status: v.literal('signed-in'), token: v.string(), expiresAt: wireTimestamp }),
  v.strictObject({ status: v.literal('handed-over') }),
]);

/** WebAuthn options for `navigator.credentials.create()` or `.get()` (PublicKeyCredential.parse…OptionsFromJSON), with the challenge's id to answer with. */
const CEREMONY = v.strictObject({ challengeId: v.string(), options: v.record(v.string(), v.unknown()) });

const SESSION = v.strictObject({
  id: v.string(),
  createdAt: wireTimestamp,
  lastSeenAt: wireTimestamp,
  expiresAt: wireTimestamp,
  signedInAt: wireTimestamp,
  amr: AMR,
  ipAddress: v.nullable(v.string()),
  userAgent: v.nullable(v.string()),
  current: v.boolean(),
});

const POLICY = v.strictObject({
  requiredFor: v.picklist(REQUIRED_FOR),
  graceDays: v.number(),
  coveredSince: v.record(v.picklist(ROLES), wireTimestamp),
  updatedAt: v.nullable(wireTimestamp),
  updatedBy: v.nullable(v.string()),
});

const RECOVERY_CODES = v.array(v.string());

// A sign-in waiting for a second factor

export const getSignIn = defineOperation({
  access: 'public',
  kind: 'read',
  describe: 'What a sign-in stopped by SECOND_FACTOR_REQUIRED or ENROLMENT_REQUIRED waits for: a factor (verify) or enrolling one (enrol).',
  result: v.strictObject({ purpose: v.picklist(['verify', 'enrol']), methods: v.array(FACTOR_METHOD), expiresAt: wireTimestamp }),
  params: v.object({ ticket }),
  handler: ({ params, deps }) => deps.accountSecurityService.getSignIn(params.ticket),
});

export const verifySecondFactor = defineOperation({
  access: 'public',
  kind: 'write',
  describe: 'Finish a sign-in stopped by SECOND_FACTOR_REQUIRED with an authenticator app’s code or a recovery code; wrong codes are counted like logins.',
  result: SIGN_IN,
  params: v.object({ ticket, code }),
  handler: ({ params, deps, transport }) => deps.accountSecurityService.verifySecondFactor(params.ticket, params.code, transport),
});

// Passkeys

export const beginPasskeySignIn = defineOperation({
  access: 'public',
  kind: 'write',
  describe:
    'A passkey challenge: with a ticket, the second factor of that sign-in; signed in, a step-up of the session; otherwise a sign-in without a username.',
  result: CEREMONY,
  params: v.object({ ticket: v.optional(ticket) }),
  handler: ({ params, ctx, deps, transport }) => deps.accountSecurityService.beginPasskeySignIn(ctx, params.ticket, transport),
});

export const finishPasskeySignIn = defineOperation({
  access: 'public',
  kind: 'write',
  describe: 'Sign in with the passkey answer to a challenge of beginPasskeySignIn (without a username, or as a ticket’s second factor).',
  result: SIGN_IN,
  params: v.object({ challengeId, response: AUTHENTICATION_RESPONSE }),
  handler: ({ params, deps, transport }) =>
    deps.accountSecurityService.finishPasskeySignIn(params.challengeId, params.response as unknown as AuthenticationResponseJSON, transport),
});

export const listPasskeys = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'The caller’s passkeys, oldest first.',
  result: v.strictObject({ items: v.array(PASSKEY_VIEW) }),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.accountSecurityService.listPasskeys(ctx),
});

export const beginPasskeyRegistration = defineOperation({
  access: 'public',
  kind: 'write',
  // Signed in, a new factor needs a recent sign-in; a ticket is itself one.
  stepUp: (params) => params.ticket === undefined,
  describe: 'Options to make a passkey (discoverable, attestation none): signed in, or with the ticket of a sign-in that must enrol a factor.',
  result: CEREMONY,
  params: v.object({ ticket: v.optional(ticket) }),
  handler: ({ params, ctx, deps, transport }) => deps.accountSecurityService.beginPasskeyRegistration(ctx, params.ticket, transport),
});

export const finishPasskeyRegistration = defineOperation({
  access: 'public',
  kind: 'write',
  stepUp: (params) => params.ticket === undefined,
  describe: 'Register the passkey the browser made; the first factor also answers ten recovery codes (shown once), and a ticket’s sign-in finishes.',
  result: v.strictObject({ passkey: PASSKEY_VIEW, recoveryCodes: v.nullable(RECOVERY_CODES), signIn: v.nullable(SIGN_IN) }),
  params: v.object({ ticket: v.optional(ticket), challengeId, response: REGISTRATION_RESPONSE, name: v.optional(passkeyName) }),
  handler: ({ params, ctx, deps, transport }) =>
    deps.accountSecurityService.finishPasskeyRegistration(ctx, { ...params, response: params.response as unknown as RegistrationResponseJSON }, transport),
});

export const renamePasskey = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Rename one of the caller’s passkeys.',
  result: PASSKEY_VIEW,
  params: v.object({ id: recordId('id'), name: passkeyName }),
  handler: ({ params, ctx, deps }) => deps.accountSecurityService.renamePasskey(ctx, params.id, params.name),
});

export const removePasskey = defineOperation({
  access: 'user',
  kind: 'write',
  stepUp: true,
  describe: 'Remove one of the caller’s passkeys; the caller’s other sessions end.',
  result: DONE,
  params: v.object({ id: recordId('id') }),
  handler: ({ params, ctx, deps }) => deps.accountSecurityService.removePasskey(ctx, params.id),
});

// Authenticator apps and recovery codes

export const beginTotpEnrolment = defineOperation({
  access: 'public',
  kind: 'write',
  stepUp: (params) => params.ticket === undefined,
  describe: 'A new authenticator-app secret and its otpauth:// URI (for a QR code), to confirm with its first code within 15 minutes.',
  result: v.strictObject({ enrolmentId: v.string(), secret: v.string(), uri: v.string(), expiresAt: wireTimestamp }),
  params: v.object({ ticket: v.optional(ticket) }),
  handler: ({ params, ctx, deps }) => deps.accountSecurityService.beginTotpEnrolment(ctx, params.ticket),
});

export const confirmTotpEnrolment = defineOperation({
  access: 'public',
  kind: 'write',
  stepUp: (params) => params.ticket === undefined,
  describe:
    'Confirm an authenticator app with its current code; the first factor also answers ten recovery codes (shown once), and a ticket’s sign-in finishes.',
  result: v.strictObject({ recoveryCodes: v.nullable(RECOVERY_CODES), signIn: v.nullable(SIGN_IN) }),
  params: v.object({ ticket: v.optional(ticket), enrolmentId: recordId('enrolmentId'), code }),
  handler: ({ params, ctx, deps, transport }) => deps.accountSecurityService.confirmTotpEnrolment(ctx, params, transport),
});

export const removeTotp = defineOperation({
  access: 'user',
  kind: 'write',
  stepUp: true,
  describe: 'Remove the caller’s authenticator app; the caller’s other sessions end.',
  result: DONE,
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.accountSecurityService.removeTotp(ctx),
});

export const regenerateRecoveryCodes = defineOperation({
  access: 'user',
  kind: 'write',
  stepUp: true,
  describe: 'Ten new recovery codes (shown once); the earlier ones stop working.',
  result: v.strictObject({ recoveryCodes: RECOVERY_CODES }),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.accountSecurityService.regenerateRecoveryCodes(ctx),
});

// Step-up and the overview

export const stepUp = defineOperation({
  access: 'user',
  kind: 'write',
  describe:
    'Confirm who you are again, so operations that need a recent sign-in pass: a code (authenticator or recovery) or a passkey (challenge of beginPasskeySignIn), or the password when the account has no second factor.',
  result: v.strictObject({ signedInAt: wireTimestamp, amr: AMR }),
  params: v.pipe(
    v.object({
      password: v.optional(v.pipe(v.string(), v.minLength(1, 'password must not be empty'), v.maxLength(256))),
      code: v.optional(code),
      challengeId: v.optional(challengeId),
      response: v.optional(AUTHENTICATION_RESPONSE),
    }),
    v.check(
      ({ password, code, challengeId, response }) =>
        [password !== undefined, code !== undefined, challengeId !== undefined && response !== undefined].filter(Boolean).length === 1 &&
        (challengeId === undefined) === (response === undefined),
      'Send a password, a code, or a passkey’s challengeId and response: one of them',
    ),
  ),
  handler: ({ params, ctx, deps, transport }) =>
    deps.accountSecurityService.stepUp(ctx, { ...params, response: params.response as AuthenticationResponseJSON | undefined }, transport.clientIp),
});

export const getSecurity = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'The caller’s factors, recovery codes left, whether the subscription requires a factor of them (and from when), and how the session was made.',
  result: v.strictObject({
    authenticator: v.boolean(),
    passkeys: v.number(),
    recoveryCodesLeft: v.number(),
    required: v.boolean(),
    requiredFrom: v.nullable(wireTimestamp),
    session: v.nullable(v.strictObject({ amr: AMR, signedInAt: wireTimestamp })),
  }),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.accountSecurityService.getSecurity(ctx),
});

// Devices

export const listSessions = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'The caller’s sessions (devices): when made and last seen, from which address and browser, and how they signed in.',
  result: v.strictObject({ items: v.array(SESSION) }),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.accountSecurityService.listSessions(ctx),
});

export const revokeSession = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Sign out one of the caller’s sessions.',
  result: DONE,
  params: v.object({ id: recordId('id') }),
  handler: ({ params, ctx, deps }) => deps.accountSecurityService.revokeSession(ctx, params.id),
});

export const revokeOtherSessions = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Sign out every session of the caller but the calling one.',
  result: v.strictObject({ revoked: v.number() }),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.accountSecurityService.revokeOtherSessions(ctx),
});

const userId = recordId('userId');

export const listUserSessions = defineOperation({
  access: 'admin',
  kind: 'read',
  describe: 'The sessions of a user of the caller’s subscription.',
  result: v.strictObject({ items: v.array(SESSION) }),
  params: v.object({ userId }),
  handler: ({ params, ctx, deps }) => deps.accountSecurityService.listSessions(ctx, params.userId),
});

export const revokeUserSessions = defineOperation({
  access: 'admin',
  kind: 'write',
  describe: 'Sign out one session (id) or every session of a user of the caller’s subscription.',
  result: v.strictObject({ revoked: v.number() }),
  params: v.object({ userId, id: v.optional(recordId('id')) }),
  handler: async ({ params, ctx, deps }) => {
    if (params.id === undefined) return deps.accountSecurityService.revokeOtherSessions(ctx, params.userId);
    await deps.accountSecurityService.revokeSession(ctx, params.id, params.userId);
    return { revoked: 1 };
  },
});

export const resetUserFactors = defineOperation({
  access: 'admin',
  kind: 'write',
  stepUp: true,
  describe: 'Remove a user’s passkeys, authenticator app and recovery codes (a lost device), and sign out their sessions.',
  result: DONE,
  params: v.object({ userId }),
  handler: ({ params, ctx, deps }) => deps.accountSecurityService.resetUserFactors(ctx, params.userId),
});

// The subscription's policy

export const getPolicy = defineOperation({
  access: 'admin',
  kind: 'read',
  describe: 'Whom the subscription requires a second factor of (nobody, admins, staff and admins, everyone), and the grace period to enrol one.',
  result: POLICY,
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.accountSecurityService.getPolicy(ctx),
});

export const setPolicy = defineOperation({
  access: 'admin',
  kind: 'write',
  stepUp: true,
  describe:
    'Require a second factor of admins, staff (and admins) or everyone: past the grace period, their sign-ins stop until they enrol one (ENROLMENT_REQUIRED).',
  result: POLICY,
  params: v.object({
    requiredFor: v.picklist(REQUIRED_FOR, `requiredFor must be one of ${REQUIRED_FOR.join(', ')}`),
    graceDays: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(365)), 7),
  }),
  handler: ({ params, ctx, deps }) => deps.accountSecurityService.setPolicy(ctx, params),
});

export const sweep = defineJob({
  describe: 'Deletes the sign-in tickets that expired, of every subscription.',
  data: v.object({}),
  handler: async ({ deps }) => {
    await deps.accountSecurityService.sweep();
  },
  schedule: '41 * * * *',
});
