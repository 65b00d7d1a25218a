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
import type { AuthenticatedContext, RequestContext } from '../../core/rpc/context.ts';
import { badRequest, RpcError, unauthenticated } from '../../core/rpc/errors.ts';

export interface SignupInput {
  email: string;
  username: string;
  password?: string;
  firstName?: string;
  lastName?: string;
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

/** Signup, password login and session inspection: the identity base of AuthRpc. */
export class AuthService {
  readonly #db: Database;
  readonly #sessions: SessionService;
  readonly #limiter: RateLimiter;
  readonly #config: Config;

  constructor({ db, sessionService, rateLimiter, config }: { db: Database; sessionService: SessionService; rateLimiter: RateLimiter; config: Config }) {
    this.#db = db;
    this.#sessions = sessionService;
    this.#limiter = rateLimiter;
    this.#config = config;
  }

  /** Creates a subscription with its first user (role admin) and a session for that user. */
  async signup(_ctx: RequestContext, input: SignupInput): Promise<SessionGrant & { subscriptionId: string }> {
    await assertIdentityAvailable(this.#db, input);
    const subscriptionId = randomUUID();
    const passwordHash = input.password ? await hashPassword(input.password) : null;
    const em = this.#db.forkEm(subscriptionId);
    const user = await em.transactional(async (tx) => {
      tx.create(SubscriptionSchema, {
        id: subscriptionId,
        name: input.username,
        serviceCode: null,
        createdAt: new Date(),
        updatedAt: new Date(),
      });
      await tx.flush();
      const created = tx.create(
        UserSchema,
        newUser({
          subscriptionId,
          email: input.email,
          username: input.username,
          passwordHash,
          firstName: input.firstName ?? null,
          lastName: input.lastName ?? null,
          role: 'admin',
        }),
      );
      await tx.flush();
      return created;
    });
    return { ...(await this.#grant(user)), subscriptionId };
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
    if (!row.is_active) throw unauthenticated('This account is deactivated');
    await this.#limiter.reset(buckets.slice(0, 1));
    const user = await this.#db.forkEm(null).findOneOrFail(UserSchema, { id: row.id }, ACROSS_TENANTS);
    return this.#grant(user);
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
