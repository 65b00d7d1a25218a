import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import {
  badRequest,
  conflict,
  notFound,
  RateLimiter,
  RpcError,
  SESSION_COOKIE,
  unauthenticated,
  validationError,
  type AuthenticatedContext,
  type Database,
  type EntityManager,
  type EventBus,
  type ExtensionPoints,
  type Keyring,
  type Logger,
  type PluginServices,
  type RequestContext,
  type Transport,
} from 'rpc-service/plugin';
import { Authenticators, type Enrolment } from './authenticators.ts';
import type { AccountSecurityConfig } from './config.ts';
import { Passkey } from './passkey.entity.ts';
import { Passkeys, passkeyView, relyingPartyOf, type ChallengeOwner, type PasskeyView } from './passkeys.ts';
import { Policies, type PolicyView, type RequiredFor } from './policies.ts';
import { RecoveryCodes } from './recovery-codes.ts';
import { Tickets, type OpenTicket } from './tickets.ts';

type SessionService = PluginServices['sessionService'];
type SignInService = PluginServices['signInService'];
type UserService = PluginServices['userService'];
type SignInAttempt = Parameters<SignInService['finish']>[1];
type AmrMethod = SignInAttempt['amr'][number];
type SignInChallenge = Extract<Awaited<ReturnType<SignInService['attempt']>>, { status: 'challenged' }>['challenge'];
type SessionView = Awaited<ReturnType<SessionService['listOfUser']>>[number];

export const FACTOR_CHANGED = 'factor.changed';
export const POLICY_CHANGED = 'factorPolicy.changed';

/** The factors a second step may use, as SECOND_FACTOR_REQUIRED names them. */
export type FactorMethod = 'authenticator' | 'passkey' | 'recovery-code';

/** A sign-in's answer to a browser or app: the session (also set as the cookie), or that an external login's application got it. */
export type SignInAnswer = { status: 'signed-in'; token: string; expiresAt: string } | { status: 'handed-over' };

export interface SecurityOverview {
  authenticator: boolean;
  passkeys: number;
  recoveryCodesLeft: number;
  /** Whether the subscription's policy asks this person for a second factor, and from when sign-ins without one are stopped. */
  required: boolean;
  requiredFrom: string | null;
  /** The calling session: how it was made and when its person last proved who they are; null for an API key. */
  session: { amr: string[]; signedInAt: string } | null;
}

/** Who enrols a factor: a signed-in person, or a sign-in stopped until they enrol one (its ticket). */
interface Enroller {
  subscriptionId: string;
  userId: string;
  ticket: OpenTicket | null;
  sessionId: string | null;
}

interface Deps {
  db: Database;
  keyring: Keyring;
  rateLimiter: RateLimiter;
  bus: EventBus;
  logger: Logger;
  config: AccountSecurityConfig;
  userService: UserService;
  sessionService: SessionService;
  signInService: SignInService;
}

/**
 * Passkeys, authenticator apps, recovery codes, the second step of a sign-in
 * (the `auth.signIn` gate), step-ups, a subscription's policy, and the list of
 * a person's sessions (docs/decisions/0065-second-factors.md).
 */
export class AccountSecurityService {
  readonly #deps: Deps;
  readonly #tickets: Tickets;
  readonly #authenticators: Authenticators;
  readonly #recovery = new RecoveryCodes();
  readonly #passkeys: Passkeys;
  readonly #policies = new Policies();

  constructor(deps: Deps) {
    this.#deps = deps;
    this.#tickets = new Tickets(deps.db, deps.config.ACCOUNT_SECURITY_TICKET_TTL_SECONDS);
    this.#authenticators = new Authenticators(deps.keyring);
    this.#passkeys = new Passkeys(deps.db, deps.logger);
  }

  // The sign-in gate

  /**
   * Stops a sign-in of a person with a second factor until they give it, and
   * of one the policy covers past their grace period until they enrol one.
   */
  async check(attempt: Parameters<ExtensionPoints['auth.signIn']['check']>[0]): Promise<SignInChallenge | undefined> {
    const { user } = attempt;
    const em = this.#em(user.subscriptionId);
    const methods = await this.#methodsOf(em, user.subscriptionId, user.id);
    if (methods.length > 0) {
      const issued = await this.#tickets.issue({ ...attempt, subscriptionId: user.subscriptionId, userId: user.id, purpose: 'verify' });
      return {
        error: new RpcError('SECOND_FACTOR_REQUIRED', 'Give a second factor to finish signing in: AccountSecurityRpc.verifySecondFactor, or a passkey', {
          details: { ...issued, methods },
        }),
        page: `/console#/sign-in/${issued.ticket}`,
      };
    }
    const policy = await this.#policies.get(em, user.subscriptionId);
    const { required, deadline } = this.#policies.requirement(policy, user);
    if (!required || deadline!.getTime() > Date.now()) return undefined;
    const issued = await this.#tickets.issue({ ...attempt, subscriptionId: user.subscriptionId, userId: user.id, purpose: 'enrol' });
    return {
      error: new RpcError('ENROLMENT_REQUIRED', 'This subscription requires a second factor: enrol an authenticator app or a passkey to finish signing in', {
        details: { ...issued, methods: ['authenticator', 'passkey'] },
      }),
      page: `/console#/sign-in/${issued.ticket}`,
    };
  }

  /** Finishes a stopped sign-in with an authenticator's code or a recovery code. */
  async verifySecondFactor(ticket: string, code: string, transport: Transport): Promise<SignInAnswer> {
    const open = await this.#tickets.open(ticket, ['verify']);
    return this.#tickets.finishing(open, async () => {
      const method = await this.#checkCode(this.#em(open.subscription_id), open.subscription_id, open.user_id, code, transport.clientIp);
      return this.#finish(open, [method], transport);
    });
  }

  /** What a stopped sign-in is waiting for, for the page that finishes it. */
  async getSignIn(ticket: string): Promise<{ purpose: 'verify' | 'enrol'; methods: FactorMethod[]; expiresAt: string }> {
    const open = await this.#tickets.open(ticket, ['verify', 'enrol']);
    const expiresAt = new Date(open.expires_at).toISOString();
    if (open.purpose === 'enrol') return { purpose: 'enrol', methods: ['authenticator', 'passkey'], expiresAt };
    return { purpose: 'verify', methods: await this.#methodsOf(this.#em(open.subscription_id), open.subscription_id, open.user_id), expiresAt };
  }

  // Passkeys

  /**
   * A passkey challenge: for a stopped sign-in's second factor (with its
   * ticket), a step-up of the calling session, or a sign-in without a
   * username (neither).
   */
  async beginPasskeySignIn(ctx: RequestContext, ticket: string | undefined, transport: Transport) {
    const rp = this.#rp(transport);
    if (ticket !== undefined) {
      const open = await this.#tickets.open(ticket, ['verify']);
      return this.#passkeys.authenticationOptions(rp, 'second-factor', owner(open.subscription_id, open.user_id, open.id, null));
    }
    if (ctx.sessionId && ctx.subscriptionId && ctx.userId) {
      return this.#passkeys.authenticationOptions(rp, 'step-up', owner(ctx.subscriptionId, ctx.userId, null, ctx.sessionId));
    }
    // Anyone may ask, and each asking stores a challenge: counted per client address.
    await this.#deps.rateLimiter.take(
      RateLimiter.bucket('passkey-sign-in-ip', transport.clientIp),
      this.#deps.config.ACCOUNT_SECURITY_PASSKEY_SIGN_IN_IP_LIMIT,
      60,
    );
    return this.#passkeys.authenticationOptions(rp, 'sign-in', owner(null, null, null, null));
  }

  /** Signs in with a passkey: a sign-in without a username, or a stopped sign-in's second factor. */
  async finishPasskeySignIn(challengeId: string, response: AuthenticationResponseJSON, transport: Transport): Promise<SignInAnswer> {
    const { passkey, challenge } = await this.#passkeys.authenticate(challengeId, ['sign-in', 'second-factor'], {}, response);
    if (challenge.purpose === 'second-factor') {
      const open = await this.#tickets.byId(challenge.for_subscription_id!, challenge.ticket_id!);
      return this.#tickets.finishing(open, () => this.#finish(open, ['webauthn'], transport));
    }
    // A passkey is a factor of possession verified by the device: it signs in alone, and no gate asks for more.
    const done = await this.#deps.signInService.finish(
      { subscriptionId: passkey.subscriptionId, id: passkey.userId },
      { amr: ['webauthn'], clientIp: transport.clientIp, userAgent: transport.userAgent, resume: {} },
    );
    return answerOf(done, transport);
  }

  async listPasskeys(ctx: AuthenticatedContext): Promise<{ items: PasskeyView[] }> {
    return { items: (await this.#passkeys.list(ctx.em, ctx.userId)).map(passkeyView) };
  }

  async beginPasskeyRegistration(ctx: RequestContext, ticket: string | undefined, transport: Transport) {
    const enroller = await this.#enroller(ctx, ticket);
    const user = await this.#user(enroller.subscriptionId, enroller.userId);
    const displayName = [user.firstName, user.lastName].filter(Boolean).join(' ') || user.username;
    return this.#passkeys.registrationOptions(
      this.#rp(transport),
      { subscriptionId: enroller.subscriptionId, id: enroller.userId, username: user.email, displayName },
      owner(enroller.subscriptionId, enroller.userId, enroller.ticket?.id ?? null, enroller.sessionId),
    );
  }

  async finishPasskeyRegistration(
    ctx: RequestContext,
    input: { ticket?: string; challengeId: string; response: RegistrationResponseJSON; name?: string },
    transport: Transport,
  ): Promise<{ passkey: PasskeyView; recoveryCodes: string[] | null; signIn: SignInAnswer | null }> {
    const enroller = await this.#enroller(ctx, input.ticket);
    const { subscriptionId, userId } = enroller;
    return this.#enrolling(enroller, async () => {
      const passkey = await this.#passkeys.register(
        input.challengeId,
        owner(subscriptionId, userId, enroller.ticket?.id ?? null, enroller.sessionId),
        input.response,
        input.name ?? 'Passkey',
      );
      const recoveryCodes = await this.#firstCodes(subscriptionId, userId);
      await this.#changed(subscriptionId, userId, 'added', 'passkey', passkey.id);
      const signIn = enroller.ticket ? await this.#finish(enroller.ticket, ['webauthn'], transport) : null;
      return { passkey: passkeyView(passkey), recoveryCodes, signIn };
    });
  }

  async renamePasskey(ctx: AuthenticatedContext, id: string, name: string): Promise<PasskeyView> {
    const passkey = await this.#ownPasskey(ctx, id);
    // The name is the person's to tell their devices apart.
    passkey.name = name;
    await ctx.em.flush();
    return passkeyView(passkey);
  }

  async removePasskey(ctx: AuthenticatedContext, id: string): Promise<{ success: true }> {
    this.#person(ctx);
    await this.#ownPasskey(ctx, id);
    await this.#removing(ctx, { passkeyId: id }, (tx) => tx.nativeDelete(Passkey, { subscriptionId: ctx.subscriptionId, userId: ctx.userId, id }));
    await this.#afterRemoval(ctx, 'passkey', id);
    return { success: true };
  }

  // Authenticator apps and recovery codes

  async beginTotpEnrolment(ctx: RequestContext, ticket: string | undefined): Promise<Enrolment> {
    const enroller = await this.#enroller(ctx, ticket);
    const user = await this.#user(enroller.subscriptionId, enroller.userId);
    return this.#authenticators.begin(
      this.#em(enroller.subscriptionId),
      { subscriptionId: enroller.subscriptionId, id: enroller.userId, label: user.email },
      this.#deps.config.ACCOUNT_SECURITY_RP_NAME,
    );
  }

  /** Confirms an enrolment with its first code; the first factor of a person also gives them their recovery codes. */
  async confirmTotpEnrolment(
    ctx: RequestContext,
    input: { ticket?: string; enrolmentId: string; code: string },
    transport: Transport,
  ): Promise<{ recoveryCodes: string[] | null; signIn: SignInAnswer | null }> {
    const enroller = await this.#enroller(ctx, input.ticket);
    const { subscriptionId, userId } = enroller;
    return this.#enrolling(enroller, async () => {
      await this.#attempt(userId, transport.clientIp, async () => {
        const confirmed = await this.#authenticators.confirm(this.#em(subscriptionId), subscriptionId, userId, input.enrolmentId, input.code);
        if (!confirmed) {
          throw validationError([
            { path: 'code', message: 'This code is not the app’s current one: check the clock of the device, and type the code it shows now' },
          ]);
        }
      });
      const recoveryCodes = await this.#firstCodes(subscriptionId, userId);
      await this.#changed(subscriptionId, userId, 'added', 'authenticator', input.enrolmentId);
      const signIn = enroller.ticket ? await this.#finish(enroller.ticket, ['otp'], transport) : null;
      return { recoveryCodes, signIn };
    });
  }

  async removeTotp(ctx: AuthenticatedContext): Promise<{ success: true }> {
    this.#person(ctx);
    if (!(await this.#authenticators.confirmedOf(ctx.em, ctx.subscriptionId, ctx.userId))) throw notFound('No authenticator app is enrolled');
    await this.#removing(ctx, { authenticator: true }, (tx) => this.#authenticators.remove(tx, ctx.subscriptionId, ctx.userId));
    await this.#afterRemoval(ctx, 'authenticator', null);
    return { success: true };
  }

  async regenerateRecoveryCodes(ctx: AuthenticatedContext): Promise<{ recoveryCodes: string[] }> {
    this.#person(ctx);
    if ((await this.#factorsOf(ctx.em, ctx.subscriptionId, ctx.userId)).length === 0) {
      throw badRequest('Recovery codes stand in for a second factor: enrol an authenticator app or a passkey first');
    }
    const recoveryCodes = await ctx.em.transactional((tx) => this.#recovery.issue(tx, ctx.subscriptionId, ctx.userId));
    await this.#changed(ctx.subscriptionId, ctx.userId, 'added', 'recovery-codes', null);
    return { recoveryCodes };
  }

  // Step-up and the overview

  /** The calling session's person proves who they are again: with a factor when they have one, else with their password. */
  async stepUp(
    ctx: AuthenticatedContext,
    input: { password?: string; code?: string; challengeId?: string; response?: AuthenticationResponseJSON },
    clientIp: string,
  ): Promise<{ signedInAt: string; amr: string[] }> {
    if (!ctx.sessionId) {
      throw new RpcError('STEP_UP_REQUIRED', 'Only a signed-in person’s session steps up: an API key needs none, and an app’s token never passes one');
    }
    const factors = await this.#factorsOf(ctx.em, ctx.subscriptionId, ctx.userId);
    let method: AmrMethod;
    if (input.password !== undefined) {
      if (factors.length > 0) throw badRequest('This account has a second factor: confirm with it (a code or a passkey), not the password');
      await this.#deps.userService.confirmPassword(ctx, input.password);
      method = 'pwd';
    } else if (input.code !== undefined) {
      method = await this.#checkCode(ctx.em, ctx.subscriptionId, ctx.userId, input.code, clientIp);
    } else {
      await this.#passkeys.authenticate(input.challengeId!, ['step-up'], owner(ctx.subscriptionId, ctx.userId, null, ctx.sessionId), input.response!);
      method = 'webauthn';
    }
    const { signedInAt, amr } = await this.#deps.sessionService.confirm(ctx.subscriptionId, ctx.sessionId, [method]);
    return { signedInAt, amr };
  }

  async getSecurity(ctx: AuthenticatedContext): Promise<SecurityOverview> {
    const { em, subscriptionId, userId } = ctx;
    const [authenticator, passkeys, recoveryCodesLeft, policy, user, session] = await Promise.all([
      this.#authenticators.confirmedOf(em, subscriptionId, userId),
      this.#passkeys.count(em, userId),
      this.#recovery.left(em, subscriptionId, userId),
      this.#policies.get(em, subscriptionId),
      this.#user(subscriptionId, userId),
      ctx.sessionId ? this.#deps.sessionService.view(subscriptionId, ctx.sessionId) : null,
    ]);
    const { required, deadline } = this.#policies.requirement(policy, user);
    return {
      authenticator: authenticator !== null,
      passkeys,
      recoveryCodesLeft,
      required,
      requiredFrom: deadline?.toISOString() ?? null,
      session: session ? { amr: session.amr, signedInAt: session.signedInAt } : null,
    };
  }

  // Devices

  async listSessions(ctx: AuthenticatedContext, userId = ctx.userId): Promise<{ items: (SessionView & { current: boolean })[] }> {
    if (userId !== ctx.userId) await this.#user(ctx.subscriptionId, userId);
    const sessions = await this.#deps.sessionService.listOfUser(ctx.subscriptionId, userId);
    return { items: sessions.map((session) => ({ ...session, current: session.id === ctx.sessionId })) };
  }

  /** Ends one session of the user (the caller's own by default); NOT_FOUND when they have no such session. */
  async revokeSession(ctx: AuthenticatedContext, sessionId: string, userId = ctx.userId): Promise<{ success: true }> {
    if (!(await this.#deps.sessionService.revokeOfUser(ctx.subscriptionId, userId, sessionId))) throw notFound('No such session');
    return { success: true };
  }

  /** Ends every session of the user but the calling one (all of them for another user, or when called with an API key). */
  async revokeOtherSessions(ctx: AuthenticatedContext, userId = ctx.userId): Promise<{ revoked: number }> {
    if (userId !== ctx.userId) await this.#user(ctx.subscriptionId, userId);
    const keep = userId === ctx.userId ? ctx.sessionId : null;
    return { revoked: await this.#deps.sessionService.revokeAllOfUser(ctx.subscriptionId, userId, keep) };
  }

  /** An admin removes a user's factors and recovery codes (a lost phone), and ends their sessions. */
  async resetUserFactors(ctx: AuthenticatedContext, userId: string): Promise<{ success: true }> {
    await this.#user(ctx.subscriptionId, userId);
    await ctx.em.transactional((tx) => this.removeAllOf(tx, ctx.subscriptionId, userId));
    // Ending their sessions also ends their sign-ins waiting for a second step (sessionsEnded).
    await this.#deps.sessionService.revokeAllOfUser(ctx.subscriptionId, userId, userId === ctx.userId ? ctx.sessionId : null);
    await this.#changed(ctx.subscriptionId, userId, 'removed', 'all', null);
    return { success: true };
  }

  // Policy

  getPolicy(ctx: AuthenticatedContext): Promise<PolicyView> {
    return this.#policies.get(ctx.em, ctx.subscriptionId);
  }

  async setPolicy(ctx: AuthenticatedContext, input: { requiredFor: RequiredFor; graceDays: number }): Promise<PolicyView> {
    const policy = await this.#policies.set(ctx.em, ctx.subscriptionId, input, ctx.userId);
    await this.#deps.bus.publish({ name: POLICY_CHANGED, subscriptionId: ctx.subscriptionId, payload: policy });
    return policy;
  }

  /** Every tenant's expired sign-in tickets go (the hourly job). */
  sweep(): Promise<number> {
    return this.#tickets.sweep();
  }

  /**
   * The owner of an address joins the account with it (auth.lifecycle's
   * accountClaimed): refused while the account has a factor, since whoever
   * holds it is the account's person, and a mailbox alone must not take it
   * over; they sign in with it, or an admin resets it. Otherwise what
   * someone else may have begun (an enrolment, a waiting sign-in) goes.
   */
  async claimed(em: EntityManager, subscriptionId: string, userId: string): Promise<void> {
    if ((await this.#factorsOf(em, subscriptionId, userId)).length > 0) {
      throw conflict('This account has a second factor: sign in with it (password and factor), or ask an administrator to reset it');
    }
    await this.removeAllOf(em, subscriptionId, userId);
    await this.#tickets.endAllOf(subscriptionId, userId, em);
  }

  /** Ends the sign-ins of a user waiting for their second step (auth.lifecycle's sessionsEnded). */
  sessionsEnded({ subscriptionId, userId }: { subscriptionId: string; userId: string }): Promise<void> {
    return this.#tickets.endAllOf(subscriptionId, userId);
  }

  /** A removed user's factors go with them (auth.lifecycle), in the removal's transaction. */
  async removeAllOf(em: EntityManager, subscriptionId: string, userId: string): Promise<void> {
    await this.#authenticators.remove(em, subscriptionId, userId);
    await this.#passkeys.removeAll(em, subscriptionId, userId);
    await this.#recovery.removeAll(em, subscriptionId, userId);
  }

  // Helpers

  #em(subscriptionId: string): EntityManager {
    return this.#deps.db.forkEm(subscriptionId);
  }

  #rp(transport: Transport) {
    return relyingPartyOf(transport.baseUrl, this.#deps.config.ACCOUNT_SECURITY_RP_NAME);
  }

  async #user(subscriptionId: string, userId: string) {
    const user = await this.#deps.userService.findForLogin(subscriptionId, userId);
    if (!user) throw notFound('No such user');
    return user;
  }

  /** What a person's second step may use: their factors, and recovery codes while they have any left (none without a factor). */
  async #methodsOf(em: EntityManager, subscriptionId: string, userId: string): Promise<FactorMethod[]> {
    const [factors, codes] = await Promise.all([this.#factorsOf(em, subscriptionId, userId), this.#recovery.left(em, subscriptionId, userId)]);
    return factors.length > 0 && codes > 0 ? [...factors, 'recovery-code'] : factors;
  }

  /** The factors a person has: an authenticator app, passkeys. */
  async #factorsOf(em: EntityManager, subscriptionId: string, userId: string): Promise<Exclude<FactorMethod, 'recovery-code'>[]> {
    const [authenticator, passkeys] = await Promise.all([this.#authenticators.confirmedOf(em, subscriptionId, userId), this.#passkeys.count(em, userId)]);
    return [...(authenticator ? ['authenticator' as const] : []), ...(passkeys > 0 ? ['passkey' as const] : [])];
  }

  /**
   * An authenticator's code (six digits) or a recovery code, each attempt
   * counted like a login's (#attempt); a recovery code used tells the user.
   */
  async #checkCode(em: EntityManager, subscriptionId: string, userId: string, code: string, clientIp: string): Promise<'otp' | 'recovery'> {
    const method = await this.#attempt(userId, clientIp, async () => {
      const digits = /^\s*\d{3}\s?\d{3}\s*$/.test(code);
      const valid = digits
        ? (await this.#authenticators.verify(em, subscriptionId, userId, code)) && ('otp' as const)
        : (await this.#recovery.use(em, subscriptionId, userId, code)) && ('recovery' as const);
      if (!valid) throw validationError([{ path: 'code', message: 'This code is not valid (a code is used once)' }]);
      return valid;
    });
    if (method === 'recovery') await this.#changed(subscriptionId, userId, 'used', 'recovery-codes', null);
    return method;
  }

  /**
   * One attempt at a code, counted before it is checked (one statement per
   * count, so attempts sent together cannot all be tried first), as logins
   * are: per user and client address, and per user from addresses they have
   * not signed in from lately, so someone with only the password cannot lock
   * the person out of their usual address. Past ACCOUNT_SECURITY_FAILURE_LIMIT
   * in the window every code is refused, right or wrong (RATE_LIMITED with
   * Retry-After); a right one clears the address's count.
   */
  async #attempt<T>(userId: string, clientIp: string, check: () => Promise<T>): Promise<T> {
    const { rateLimiter, signInService, config } = this.#deps;
    const limit = config.ACCOUNT_SECURITY_FAILURE_LIMIT;
    const window = config.ACCOUNT_SECURITY_FAILURE_WINDOW_SECONDS;
    const fromHere = RateLimiter.bucket('second-factor', `${userId} ${clientIp}`);
    await rateLimiter.take(fromHere, limit, window);
    if (!(await signInService.knownAddress(userId, clientIp))) {
      await rateLimiter.take(RateLimiter.bucket('second-factor-user', userId), limit * 4, window);
    }
    const result = await check();
    await rateLimiter.reset([fromHere]);
    return result;
  }

  /** Refuses a call that manages a person's own factors without their session (an API key, an app's token): factors are the person's. */
  #person(ctx: AuthenticatedContext): void {
    if (!ctx.sessionId) throw badRequest('A factor is a person’s: manage it from a signed-in session, not with an API key or an app’s token');
  }

  /** An enrolment's step: with a ticket, as the one request that holds it (Tickets.finishing). */
  #enrolling<T>(enroller: Enroller, step: () => Promise<T>): Promise<T> {
    return enroller.ticket ? this.#tickets.finishing(enroller.ticket, step) : step();
  }

  /**
   * Removes a factor in one transaction with the check that the policy keeps
   * one, under a lock of the user's factors, so two removals at once cannot
   * both see the other's factor left.
   */
  async #removing(ctx: AuthenticatedContext, removing: { passkeyId?: string; authenticator?: boolean }, remove: (tx: EntityManager) => Promise<unknown>) {
    const [policy, user] = await Promise.all([this.#policies.get(ctx.em, ctx.subscriptionId), this.#user(ctx.subscriptionId, ctx.userId)]);
    const required = this.#policies.requirement(policy, user).required;
    await ctx.em.transactional(async (tx) => {
      await tx.execute('select pg_advisory_xact_lock(hashtextextended(?, 0))', [`account-security:factors:${ctx.subscriptionId}:${ctx.userId}`]);
      const [authenticator, passkeys] = await Promise.all([
        this.#authenticators.confirmedOf(tx, ctx.subscriptionId, ctx.userId),
        tx.find(Passkey, { subscriptionId: ctx.subscriptionId, userId: ctx.userId }),
      ]);
      const left = (authenticator && !removing.authenticator ? 1 : 0) + passkeys.filter(({ id }) => id !== removing.passkeyId).length;
      if (left === 0 && required) throw conflict('Your subscription requires a second factor: add another before removing this one');
      await remove(tx);
    });
  }

  /** A stopped sign-in's session, made by the request that holds its ticket (Tickets.finishing). */
  async #finish(ticket: OpenTicket, added: AmrMethod[], transport: Transport): Promise<SignInAnswer> {
    const done = await this.#deps.signInService.finish(
      { subscriptionId: ticket.subscription_id, id: ticket.user_id },
      {
        amr: [...(ticket.amr.split(' ').filter(Boolean) as AmrMethod[]), ...added],
        clientIp: transport.clientIp,
        userAgent: transport.userAgent,
        resume: ticket.resume,
      },
    );
    return answerOf(done, transport);
  }

  /** A signed-in person (a session, not a key or an app), or a sign-in stopped until its person enrols a factor. */
  async #enroller(ctx: RequestContext, ticket: string | undefined): Promise<Enroller> {
    if (ticket !== undefined) {
      const open = await this.#tickets.open(ticket, ['enrol']);
      return { subscriptionId: open.subscription_id, userId: open.user_id, ticket: open, sessionId: null };
    }
    if (!ctx.subscriptionId || !ctx.userId) throw unauthenticated('Sign in (or give the ticket of a sign-in waiting for a factor) to enrol one');
    if (!ctx.sessionId) throw badRequest('A factor is a person’s: enrol it from a signed-in session, not with an API key or an app’s token');
    return { subscriptionId: ctx.subscriptionId, userId: ctx.userId, ticket: null, sessionId: ctx.sessionId };
  }

  /** Recovery codes for a person who had none (their first factor); null when they keep the ones they have. */
  async #firstCodes(subscriptionId: string, userId: string): Promise<string[] | null> {
    const em = this.#em(subscriptionId);
    if ((await this.#recovery.left(em, subscriptionId, userId)) > 0) return null;
    return em.transactional((tx) => this.#recovery.issue(tx, subscriptionId, userId));
  }

  async #ownPasskey(ctx: AuthenticatedContext, id: string) {
    const passkey = (await this.#passkeys.list(ctx.em, ctx.userId)).find((each) => each.id === id);
    if (!passkey) throw notFound('No such passkey');
    return passkey;
  }

  /** After a factor goes: the other sessions end, and with no factor left, so do the recovery codes. */
  async #afterRemoval(ctx: AuthenticatedContext, factor: 'passkey' | 'authenticator', id: string | null): Promise<void> {
    if ((await this.#factorsOf(ctx.em, ctx.subscriptionId, ctx.userId)).length === 0) await this.#recovery.removeAll(ctx.em, ctx.subscriptionId, ctx.userId);
    await this.#deps.sessionService.revokeAllOfUser(ctx.subscriptionId, ctx.userId, ctx.sessionId);
    await this.#changed(ctx.subscriptionId, ctx.userId, 'removed', factor, id);
  }

  #changed(subscriptionId: string, userId: string, action: 'added' | 'removed' | 'used', factor: string, id: string | null): Promise<void> {
    return this.#deps.bus.publish({ name: FACTOR_CHANGED, subscriptionId, userIds: [userId], payload: { action, factor, userId, id } });
  }
}

const owner = (subscriptionId: string | null, userId: string | null, ticketId: string | null, sessionId: string | null): ChallengeOwner => ({
  subscriptionId,
  userId,
  ticketId,
  sessionId,
});

/** A finished sign-in as its caller is answered; a session's token is also set as the cookie. */
function answerOf(done: Awaited<ReturnType<SignInService['finish']>>, transport: Transport): SignInAnswer {
  if (done.status === 'handed-over') return { status: 'handed-over' };
  transport.setCookie(SESSION_COOKIE, done.token, { expires: new Date(done.expiresAt) });
  return { status: 'signed-in', token: done.token, expiresAt: done.expiresAt };
}
