import { randomUUID } from 'node:crypto';
import {
  badRequest,
  RateLimiter,
  unauthenticated,
  validationError,
  type AuthenticatedContext,
  type Database,
  type Limit,
  type RowOf,
} from 'rpc-service/plugin';
import type { AuthConfig } from './config.ts';
import type { InviteCodeService } from './invite-code.service.ts';
import type { JoinQuestion, JoinService } from './join.service.ts';
import type { Lifecycle } from './lifecycle.ts';
import { burnPasswordCheck, hashPassword, verifyPassword } from './password.ts';
import { Session } from './session.entity.ts';
import type { AmrMethod, SessionService } from './session.service.ts';
import { accountOf, knownAddress, type SessionGrant, type SignedIn, type SignInOutcome, type SignInService } from './sign-in.service.ts';
import { checkSignupRules } from './signup-policy.ts';
import { Subscription } from './subscription.entity.ts';
import { User } from './user.entity.ts';
import { emailProof, ownerProvedEmail, type UserService } from './user.service.ts';
import { toUserView, type UserView } from './user-view.ts';
import type { VerificationService } from './verification.service.ts';

export interface Verification {
  otpRequestId: string;
  code: string;
}

export interface SignupInput {
  email: string;
  username: string;
  password?: string;
  firstName?: string;
  lastName?: string;
  inviteCode?: string;
  verifications?: { email?: Verification; phone?: Verification };
}

/** Where a sign-in comes from: the client address and User-Agent (Transport). */
export interface SignInFrom {
  clientIp: string;
  userAgent: string | null;
}

type LoginRow = RowOf<User, 'subscriptionId' | 'id' | 'passwordHash' | 'isActive'>;

interface Deps {
  db: Database;
  sessionService: SessionService;
  signInService: SignInService;
  userService: UserService;
  rateLimiter: RateLimiter;
  config: AuthConfig;
  verificationService: VerificationService;
  inviteCodeService: InviteCodeService;
  lifecycle: Lifecycle;
  joinService: JoinService;
}

/** Signup, login (password or one-time code) and session inspection. */
export class AuthService {
  readonly #db: Database;
  readonly #sessions: SessionService;
  readonly #signIns: SignInService;
  readonly #users: UserService;
  readonly #limiter: RateLimiter;
  readonly #config: AuthConfig;
  readonly #codes: VerificationService;
  readonly #invites: InviteCodeService;
  readonly #lifecycle: Lifecycle;
  readonly #join: JoinService;

  constructor(deps: Deps) {
    this.#db = deps.db;
    this.#sessions = deps.sessionService;
    this.#signIns = deps.signInService;
    this.#users = deps.userService;
    this.#limiter = deps.rateLimiter;
    this.#config = deps.config;
    this.#codes = deps.verificationService;
    this.#invites = deps.inviteCodeService;
    this.#lifecycle = deps.lifecycle;
    this.#join = deps.joinService;
  }

  /**
   * What signup would refuse, without creating anything. It tells whether an
   * address or username has an account (and whether an invite code is good),
   * so each call counts against the client address's signup checks.
   */
  async preSignupValidate(input: { email: string; username: string; inviteCode?: string }, clientIp: string): Promise<void> {
    const checks = signupChecks(clientIp);
    await this.#limiter.check([[checks, this.#config.signupCheckIpLimit]]);
    await this.#limiter.hit([checks], this.#config.signupWindowSeconds);
    checkSignupRules(this.#config, input);
    await this.#requireInviteWhenNeeded(input.inviteCode);
    await this.#users.assertAvailable(input);
    if (input.inviteCode) await this.#invites.check(input.inviteCode);
  }

  /**
   * Creates the user: in a new subscription as its admin, or, with an invite
   * code, in the inviting subscription with the code's role. Required
   * verifications are consumed first; the user starts with a session.
   */
  async signup(input: SignupInput, from: SignInFrom): Promise<SessionGrant & { subscriptionId: string }> {
    const { clientIp } = from;
    // An invite is an administrator letting someone in, so only signups without one are counted.
    const byIp: Limit[] = input.inviteCode ? [] : [[RateLimiter.bucket('signup-ip', clientIp), this.#config.signupIpLimit]];
    // A signup refused as taken answers what preSignupValidate does, so it counts among the address's signup checks.
    const checks = signupChecks(clientIp);
    await this.#limiter.check([...byIp, [checks, this.#config.signupCheckIpLimit]]);
    checkSignupRules(this.#config, input);
    await this.#requireInviteWhenNeeded(input.inviteCode);
    this.#requireVerifications(input.verifications);
    await this.#users.assertAvailable(input).catch(async (err: unknown) => {
      await this.#limiter.hit([checks], this.#config.signupWindowSeconds);
      throw err;
    });
    if (input.inviteCode) await this.#invites.check(input.inviteCode);

    const proven = await this.#consumeVerifications(input, clientIp);
    const passwordHash = input.password ? await hashPassword(input.password) : null;
    const em = this.#db.forkEm(null);
    const { user, joined } = await em.transactional(async (tx) => {
      const invite = input.inviteCode ? await this.#invites.redeem(tx, input.inviteCode) : null;
      const subscriptionId = invite?.subscriptionId ?? randomUUID();
      if (!invite) {
        tx.create(Subscription, { id: subscriptionId, name: input.username, serviceCode: null, createdAt: new Date(), updatedAt: new Date() });
        await tx.flush();
      }
      const created = tx.create(
        User,
        this.#users.newUser({
          subscriptionId,
          email: input.email,
          username: input.username,
          passwordHash,
          firstName: input.firstName ?? null,
          lastName: input.lastName ?? null,
          role: invite?.role ?? 'admin',
          // A code the owner received proves the address; without one it is only what the person typed.
          ...(proven.emailVerified ? emailProof(input.email, 'code') : { isVerified: false }),
          phoneNumber: proven.phone ?? null,
          isPhoneVerified: proven.phone !== undefined,
        }),
      );
      await tx.flush();
      return { user: created, joined: invite !== null };
    });
    await this.#limiter.hit(
      byIp.map(([bucket]) => bucket),
      this.#config.signupWindowSeconds,
    );
    await this.#lifecycle.afterSignup({ user: toUserView(user), subscriptionId: user.subscriptionId, joinedExisting: joined });
    const amr: AmrMethod[] = [...(input.password ? ['pwd' as const] : []), ...(proven.emailVerified || proven.phone ? ['code' as const] : [])];
    const grant = signedIn(await this.#signIns.start(user, { amr, clientIp: from.clientIp, userAgent: from.userAgent, resume: {} }));
    return { ...grant, subscriptionId: user.subscriptionId };
  }

  /** Invite mode needs a code, except for the very first user of a new installation. */
  async #requireInviteWhenNeeded(inviteCode: string | undefined): Promise<void> {
    if (this.#config.signupMode !== 'invite' || inviteCode) return;
    const [anyone] = await this.#db.execute<{ exists: boolean }>('select exists(select 1 from auth_user) as exists');
    if (anyone?.exists) throw validationError([{ path: 'inviteCode', message: 'An invite code is required to sign up' }]);
  }

  #requireVerifications(verifications: SignupInput['verifications']): void {
    const issues = [];
    if (this.#config.signupRequireEmailVerification && !verifications?.email) {
      issues.push({ path: 'verifications.email', message: 'A verified e-mail code is required to sign up' });
    }
    if (this.#config.signupRequirePhoneVerification && !verifications?.phone) {
      issues.push({ path: 'verifications.phone', message: 'A verified phone code is required to sign up' });
    }
    if (issues.length > 0) throw validationError(issues);
  }

  async #consumeVerifications(input: SignupInput, clientIp: string): Promise<{ emailVerified: boolean; phone?: string }> {
    const { email, phone } = input.verifications ?? {};
    let emailVerified = false;
    if (email) {
      await this.#codes.consume(email.otpRequestId, email.code, clientIp, 'verifications.email', ({ channel, identifier }) => {
        if (channel !== 'email' || identifier !== input.email) {
          throw validationError([{ path: 'otpRequestId', message: 'This code was not sent to the signup e-mail address' }]);
        }
      });
      emailVerified = true;
    }
    if (!phone) return { emailVerified };
    const proven = await this.#codes.consume(phone.otpRequestId, phone.code, clientIp, 'verifications.phone', ({ channel }) => {
      if (channel === 'email') throw validationError([{ path: 'otpRequestId', message: 'This code was sent to an e-mail address, not a phone' }]);
    });
    return { emailVerified, phone: proven.identifier };
  }

  /**
   * Password login by e-mail or username. Failures are counted per account
   * and address, per account, and per address (docs/decisions/0007-one-time-codes-and-signup.md,
   * "Login limits"). Past a limit every attempt it covers is refused unchecked, right
   * password or wrong, so a locked count is no oracle. The per-account and
   * per-address counts do not cover an account logging in from an address it
   * logged in from before: another account's failures, or failures from
   * elsewhere, never lock a user out of their usual address. The per-address
   * count covers only the accounts that address failed on: a flood from one
   * address leaves every account it never tried one attempt from there.
   */
  async login(identifier: string, password: string, from: SignInFrom): Promise<SessionGrant> {
    const { clientIp } = from;
    const [row] = await this.#db.execute<LoginRow>(
      `select subscription_id, id, password_hash, is_active from auth_user where lower(email) = lower(?) or lower(username) = lower(?) limit 1`,
      [identifier, identifier],
    );
    // One count per account whichever name it is given by; unknown names are counted alike.
    const account = row ? accountOf(row.id) : `name:${identifier}`;
    const { loginFailureLimit, loginAccountFailureLimit, loginIpFailureLimit, loginFailureWindowSeconds } = this.#config;
    const fromHere = RateLimiter.bucket('login-account-ip', `${account} ${clientIp}`);
    const byAccount = RateLimiter.bucket('login-account', account);
    const byIp = RateLimiter.bucket('login-ip', clientIp);
    // Looked up for unknown names too (never found), so existing accounts take no longer.
    const known = (await this.#limiter.count(knownAddress(account, clientIp))) > 0;
    // The address's own count covers only accounts it failed on: a flood from one address (every client, behind
    // a proxy not trusted) leaves each account it never tried its first attempt from there.
    const tried = !known && (await this.#limiter.count(fromHere)) > 0;
    await this.#limiter.check([
      [fromHere, loginFailureLimit],
      ...(known ? [] : ([[byAccount, loginAccountFailureLimit]] as const)),
      ...(tried ? ([[byIp, loginIpFailureLimit]] as const) : []),
    ]);
    const valid = row?.password_hash ? await verifyPassword(password, row.password_hash) : await burnPasswordCheck(password);
    if (!row || !valid) {
      await this.#limiter.hit([fromHere, byAccount, byIp], loginFailureWindowSeconds);
      throw unauthenticated('Invalid identifier or password');
    }
    await this.#limiter.reset([fromHere]);
    return this.#loginAs(row, 'pwd', from);
  }

  /**
   * Passwordless login: a consumed code sent to the e-mail address or phone
   * of an existing user. A code sent to the address proves the person owns
   * it, but an account whose owner never proved that address may have been
   * made by someone else (an administrator, who chose its password): the
   * person is asked first (a JoinQuestion; joinWithCode when they join).
   */
  async loginWithCode(otpRequestId: string, code: string, from: SignInFrom): Promise<SessionGrant | JoinQuestion> {
    const proven = await this.#codes.consume(otpRequestId, code, from.clientIp, 'login');
    const rows = await this.#db.execute<LoginRow>(
      proven.channel === 'email'
        ? 'select subscription_id, id, password_hash, is_active from auth_user where lower(email) = ?'
        : 'select subscription_id, id, password_hash, is_active from auth_user where phone_number = ? and is_phone_verified',
      [proven.identifier],
    );
    if (rows.length !== 1) throw unauthenticated('No account matches this verified address');
    const [row] = rows as [LoginRow];
    if (!row.is_active) throw unauthenticated('This account is deactivated');
    const user = await this.#users.findForLogin(row.subscription_id, row.id);
    if (!user) throw unauthenticated('No account matches this verified address');
    if (proven.channel === 'email' && !ownerProvedEmail(user)) return this.#join.ask(user, proven.identifier, null);
    return signedIn(await this.#signIns.start(user, { amr: ['code'], clientIp: from.clientIp, userAgent: from.userAgent, resume: {} }));
  }

  /** The person a code login asked (join.service.ts) joins the account: it becomes theirs (UserService.claim), and they are signed in. */
  async joinWithCode(user: User, email: string, from: SignInFrom): Promise<SignInOutcome> {
    await this.#users.claim(user, email, 'code');
    const claimed = await this.#users.findForLogin(user.subscriptionId, user.id);
    if (!claimed?.isActive) throw unauthenticated('This account is deactivated or gone');
    return this.#signIns.attempt(claimed, { amr: ['code'], clientIp: from.clientIp, userAgent: from.userAgent, resume: {} });
  }

  async #loginAs(row: LoginRow, method: AmrMethod, from: SignInFrom): Promise<SessionGrant> {
    if (!row.is_active) throw unauthenticated('This account is deactivated');
    const user = await this.#users.findForLogin(row.subscription_id, row.id);
    if (!user) throw unauthenticated('Invalid identifier or password');
    return signedIn(await this.#signIns.start(user, { amr: [method], clientIp: from.clientIp, userAgent: from.userAgent, resume: {} }));
  }

  async logout(ctx: AuthenticatedContext): Promise<void> {
    if (!ctx.sessionId) throw badRequest('Logout ends a session; an API key is revoked with ApiKeyRpc.delete');
    await this.#sessions.revoke(ctx.subscriptionId, ctx.sessionId);
  }

  async getSession(ctx: AuthenticatedContext): Promise<{
    user: UserView;
    subscriptionId: string;
    expiresAt: string | null;
    apiKeyId: string | null;
  }> {
    const user = await this.#users.self(ctx);
    const session = ctx.sessionId ? await ctx.em.findOne(Session, { id: ctx.sessionId }) : null;
    return {
      user: toUserView(user),
      subscriptionId: ctx.subscriptionId,
      expiresAt: session?.expiresAt.toISOString() ?? null,
      apiKeyId: ctx.apiKeyId,
    };
  }
}

/** The session of a sign-in by an operation, which has no external login to hand it to. */
const signedIn = (done: SignedIn): SessionGrant => {
  if (done.status !== 'signed-in') throw new Error('A sign-in without an external login was handed over');
  return { token: done.token, expiresAt: done.expiresAt, user: done.user };
};

/** Counts the answers to whether an address or username has an account, per client address (see preSignupValidate). */
const signupChecks = (clientIp: string): string => RateLimiter.bucket('signup-check-ip', clientIp);
