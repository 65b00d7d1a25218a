import { randomUUID } from 'node:crypto';
import type { Config } from '../../core/config.ts';
import { assertIdentityAvailable } from '../../core/auth/availability.ts';
import { burnPasswordCheck, hashPassword, verifyPassword } from '../../core/auth/crypto.ts';
import { newUser, SessionSchema, SubscriptionSchema, UserSchema, type User } from '../../core/auth/entities.ts';
import type { SessionService } from '../../core/auth/sessions.ts';
import { toUserView, type UserView } from '../../core/auth/user-view.ts';
import type { Database } from '../../core/db/orm.ts';
import { ACROSS_TENANTS } from '../../core/db/tenant.ts';
import { RateLimiter } from '../../core/rate-limiter.ts';
import type { AuthenticatedContext } from '../../core/rpc/context.ts';
import { badRequest, RpcError, unauthenticated, validationError } from '../../core/rpc/errors.ts';
import type { LifecycleHooks } from '../../core/plugin/hooks.ts';
import type { InviteCodeService } from './invite-codes.service.ts';
import { checkSignupRules } from './signup-policy.ts';
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

export interface SessionGrant {
  token: string;
  expiresAt: string;
  user: UserView;
}

interface LoginRow {
  id: string;
  password_hash: string | null;
  is_active: boolean;
}

interface Deps {
  db: Database;
  sessionService: SessionService;
  rateLimiter: RateLimiter;
  config: Config;
  verificationService: VerificationService;
  inviteCodeService: InviteCodeService;
  lifecycle: LifecycleHooks;
}

/** Signup, login (password or one-time code) and session inspection. */
export class AuthService {
  readonly #db: Database;
  readonly #sessions: SessionService;
  readonly #limiter: RateLimiter;
  readonly #config: Config;
  readonly #codes: VerificationService;
  readonly #invites: InviteCodeService;
  readonly #lifecycle: LifecycleHooks;

  constructor(deps: Deps) {
    this.#db = deps.db;
    this.#sessions = deps.sessionService;
    this.#limiter = deps.rateLimiter;
    this.#config = deps.config;
    this.#codes = deps.verificationService;
    this.#invites = deps.inviteCodeService;
    this.#lifecycle = deps.lifecycle;
  }

  /** What signup would refuse, without creating anything. */
  async preSignupValidate(input: { email: string; username: string; inviteCode?: string }): Promise<void> {
    checkSignupRules(this.#config, input);
    await this.#requireInviteWhenNeeded(input.inviteCode);
    await assertIdentityAvailable(this.#db, input);
    if (input.inviteCode) await this.#invites.check(input.inviteCode);
  }

  /**
   * Creates the user: in a new subscription as its admin, or, with an invite
   * code, in the inviting subscription with the code's role. Required
   * verifications are consumed first; the user starts with a session.
   */
  async signup(input: SignupInput, clientIp: string): Promise<SessionGrant & { subscriptionId: string }> {
    checkSignupRules(this.#config, input);
    await this.#requireInviteWhenNeeded(input.inviteCode);
    this.#requireVerifications(input.verifications);
    await assertIdentityAvailable(this.#db, input);
    if (input.inviteCode) await this.#invites.check(input.inviteCode);

    const proven = await this.#consumeVerifications(input, clientIp);
    const passwordHash = input.password ? await hashPassword(input.password) : null;
    const em = this.#db.forkEm(null);
    const { user, joined } = await em.transactional(async (tx) => {
      const invite = input.inviteCode ? await this.#invites.redeem(tx, input.inviteCode) : null;
      const subscriptionId = invite?.subscriptionId ?? randomUUID();
      if (!invite) {
        tx.create(SubscriptionSchema, { id: subscriptionId, name: input.username, serviceCode: null, createdAt: new Date(), updatedAt: new Date() });
        await tx.flush();
      }
      const created = tx.create(
        UserSchema,
        newUser({
          subscriptionId,
          email: input.email,
          username: input.username,
          passwordHash,
          firstName: input.firstName ?? null,
          lastName: input.lastName ?? null,
          role: invite?.role ?? 'admin',
          isVerified: proven.emailVerified,
          phoneNumber: proven.phone ?? null,
          isPhoneVerified: proven.phone !== undefined,
        }),
      );
      await tx.flush();
      return { user: created, joined: invite !== null };
    });
    const grant = await this.#grant(user);
    await this.#lifecycle.afterSignup({ user: grant.user, subscriptionId: user.subscriptionId, joinedExisting: joined });
    return { ...grant, subscriptionId: user.subscriptionId };
  }

  /** Invite mode needs a code, except for the very first user of a new installation. */
  async #requireInviteWhenNeeded(inviteCode: string | undefined): Promise<void> {
    if (this.#config.signupMode !== 'invite' || inviteCode) return;
    const [anyone] = await this.#db.execute<{ exists: boolean }>('select exists(select 1 from core_user) as exists');
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
   * Password login by e-mail or username. Failures are counted per identifier
   * and per client address; past the limit even a right password is refused.
   */
  async login(identifier: string, password: string, clientIp: string): Promise<SessionGrant> {
    const buckets = [RateLimiter.bucket('login-id', identifier), RateLimiter.bucket('login-ip', clientIp)];
    const limit = this.#config.loginFailureLimit;
    await this.#limiter.check(buckets, limit);
    const [row] = await this.#db.execute<LoginRow>(
      `select id, password_hash, is_active from core_user where lower(email) = lower(?) or lower(username) = lower(?) limit 1`,
      [identifier, identifier],
    );
    const valid = row?.password_hash ? await verifyPassword(password, row.password_hash) : await burnPasswordCheck(password);
    if (!row || !valid) {
      await this.#limiter.hit(buckets, this.#config.loginFailureWindowSeconds);
      throw unauthenticated('Invalid identifier or password');
    }
    await this.#limiter.reset(buckets.slice(0, 1));
    return this.#loginAs(row, 'password');
  }

  /** Passwordless login: a consumed code sent to the e-mail address or phone of an existing user. */
  async loginWithCode(otpRequestId: string, code: string, clientIp: string): Promise<SessionGrant> {
    const proven = await this.#codes.consume(otpRequestId, code, clientIp, 'login');
    const rows = await this.#db.execute<LoginRow>(
      proven.channel === 'email'
        ? 'select id, password_hash, is_active from core_user where lower(email) = ?'
        : 'select id, password_hash, is_active from core_user where phone_number = ? and is_phone_verified',
      [proven.identifier],
    );
    if (rows.length !== 1) throw unauthenticated('No account matches this verified address');
    return this.#loginAs(rows[0]!, 'code');
  }

  async #loginAs(row: LoginRow, method: 'password' | 'code'): Promise<SessionGrant> {
    if (!row.is_active) throw unauthenticated('This account is deactivated');
    const user = await this.#db.forkEm(null).findOneOrFail(UserSchema, { id: row.id }, ACROSS_TENANTS);
    const grant = await this.#grant(user);
    await this.#lifecycle.afterLogin({ user: grant.user, method });
    return grant;
  }

  async #grant(user: User): Promise<SessionGrant> {
    const session = await this.#sessions.create(user);
    return { token: session.token, expiresAt: session.expiresAt.toISOString(), user: toUserView(user) };
  }

  async logout(ctx: AuthenticatedContext): Promise<void> {
    if (!ctx.sessionId) throw badRequest('Logout ends a session; an API key is revoked with ApiKeyRpc.delete');
    await this.#sessions.revoke(ctx.sessionId);
  }

  async getSession(ctx: AuthenticatedContext): Promise<{
    user: UserView;
    subscriptionId: string;
    expiresAt: string | null;
    apiKeyId: string | null;
  }> {
    const user = await ctx.em.findOne(UserSchema, { id: ctx.userId });
    if (!user) throw new RpcError('UNAUTHENTICATED', 'The user of this credential no longer exists');
    const session = ctx.sessionId ? await ctx.em.findOne(SessionSchema, { id: ctx.sessionId }) : null;
    return {
      user: toUserView(user),
      subscriptionId: ctx.subscriptionId,
      expiresAt: session?.expiresAt.toISOString() ?? null,
      apiKeyId: ctx.apiKeyId,
    };
  }
}
