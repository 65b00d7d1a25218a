import type { Role } from '../../config/roles.ts';
import { ROLES } from '../../config/roles.ts';
import { assertIdentityAvailable } from '../../core/auth/availability.ts';
import { hashPassword } from '../../core/auth/crypto.ts';
import { newUser, UserSchema, type OAuthProfile, type User } from '../../core/auth/entities.ts';
import { publishCredentialChange } from '../../core/auth/revocation.ts';
import type { SessionService } from '../../core/auth/sessions.ts';
import { toAdminUserRecord, type AdminUserRecord } from '../../core/auth/user-view.ts';
import type { Database } from '../../core/db/orm.ts';
import type { EventBus } from '../../core/events/bus.ts';
import type { AuthenticatedContext } from '../../core/rpc/context.ts';
import { badRequest, conflict, notFound } from '../../core/rpc/errors.ts';
import { toOrderBy, toWhere, type FieldMap } from '../../core/rpc/list-query.ts';
import { fileIdOfUrl, type UploadService } from '../../core/uploads/upload-service.ts';

export interface UserFields {
  email?: string;
  username?: string;
  firstName?: string | null;
  lastName?: string | null;
  role?: Role;
  isActive?: boolean;
  isVerified?: boolean;
  isPhoneVerified?: boolean;
  onboardingCompleted?: boolean;
  oauthProfiles?: OAuthProfile[];
  partnerContactId?: string | null;
}

export type NewUserInput = UserFields & { email: string; username: string; role: Role; password: string };

export interface UserPage {
  docs: AdminUserRecord[];
  totalDocs: number;
  limit: number;
  page: number;
  totalPages: number;
  hasNextPage: boolean;
  hasPrevPage: boolean;
}

/** What getData may filter and sort on. */
export const USER_FIELDS: FieldMap = {
  _id: { property: 'id', type: 'uuid' },
  email: { property: 'email', type: 'string' },
  username: { property: 'username', type: 'string' },
  firstName: { property: 'firstName', type: 'string' },
  lastName: { property: 'lastName', type: 'string' },
  role: { property: 'role', type: 'string' },
  isActive: { property: 'isActive', type: 'boolean' },
  isVerified: { property: 'isVerified', type: 'boolean' },
  isPhoneVerified: { property: 'isPhoneVerified', type: 'boolean' },
  onboardingCompleted: { property: 'onboardingCompleted', type: 'boolean' },
  partnerContactId: { property: 'partnerContactId', type: 'string' },
  createdAt: { property: 'createdAt', type: 'date' },
  updatedAt: { property: 'updatedAt', type: 'date' },
};

/** The users of the caller's subscription, as its administrators manage them. */
export class AdminUserService {
  readonly #db: Database;
  readonly #bus: EventBus;
  readonly #sessions: SessionService;
  readonly #uploads: UploadService;

  constructor({ db, bus, sessionService, uploadService }: { db: Database; bus: EventBus; sessionService: SessionService; uploadService: UploadService }) {
    this.#db = db;
    this.#bus = bus;
    this.#sessions = sessionService;
    this.#uploads = uploadService;
  }

  availableRoles(): readonly Role[] {
    return ROLES;
  }

  async create(ctx: AuthenticatedContext, { password, ...fields }: NewUserInput): Promise<AdminUserRecord> {
    await assertIdentityAvailable(this.#db, fields);
    const user = ctx.em.create(
      UserSchema,
      newUser({ ...fields, subscriptionId: ctx.subscriptionId, passwordHash: await hashPassword(password) }),
    );
    await ctx.em.flush();
    return toAdminUserRecord(user);
  }

  async findById(ctx: AuthenticatedContext, id: string): Promise<AdminUserRecord> {
    return toAdminUserRecord(await this.#user(ctx, id));
  }

  async list(
    ctx: AuthenticatedContext,
    query: { filter: Record<string, unknown>; sort: Record<string, 1 | -1 | 'asc' | 'desc'>; page: number; pageSize: number },
  ): Promise<UserPage> {
    const where = toWhere(query.filter, USER_FIELDS);
    const orderBy = { ...toOrderBy(query.sort, USER_FIELDS), id: 'asc' as const };
    const [users, total] = await ctx.em.findAndCount(UserSchema, where, {
      orderBy: Object.keys(orderBy).length > 1 ? orderBy : { createdAt: 'asc', id: 'asc' },
      limit: query.pageSize,
      offset: (query.page - 1) * query.pageSize,
    });
    const totalPages = Math.ceil(total / query.pageSize);
    return {
      docs: users.map(toAdminUserRecord),
      totalDocs: total,
      limit: query.pageSize,
      page: query.page,
      totalPages,
      hasNextPage: query.page < totalPages,
      hasPrevPage: query.page > 1,
    };
  }

  async update(ctx: AuthenticatedContext, id: string, changes: UserFields): Promise<AdminUserRecord> {
    const user = await this.#user(ctx, id);
    if (changes.email !== undefined || changes.username !== undefined) {
      await assertIdentityAvailable(this.#db, { email: changes.email, username: changes.username }, user.id);
    }
    const losesAdmin =
      user.role === 'admin' && user.isActive && ((changes.role !== undefined && changes.role !== 'admin') || changes.isActive === false);
    if (losesAdmin) await this.#keepAnAdmin(ctx, user);
    const credentialsChange =
      (changes.role !== undefined && changes.role !== user.role) || (changes.isActive !== undefined && changes.isActive !== user.isActive);
    ctx.em.assign(user, changes);
    await ctx.em.flush();
    // Cached credentials carry the role and the active flag: every node must read them again.
    if (credentialsChange) await publishCredentialChange(this.#bus, { userId: user.id });
    return toAdminUserRecord(user);
  }

  async delete(ctx: AuthenticatedContext, id: string): Promise<{ acknowledged: true; deletedCount: 1 }> {
    const user = await this.#user(ctx, id);
    if (user.id === ctx.userId) throw badRequest('You cannot delete your own account; ask another admin');
    if (user.role === 'admin' && user.isActive) await this.#keepAnAdmin(ctx, user);
    // Sessions and API keys go with the user (foreign keys cascade).
    await ctx.em.remove(user).flush();
    await publishCredentialChange(this.#bus, { userId: user.id });
    const picture = fileIdOfUrl(user.profilePicture);
    if (picture) await this.#uploads.delete(ctx, picture).catch((err) => ctx.log.warn({ err }, 'could not delete the profile picture of a deleted user'));
    return { acknowledged: true, deletedCount: 1 };
  }

  /** Sets a new password and ends every session of the user. */
  async resetPassword(ctx: AuthenticatedContext, id: string, newPassword: string): Promise<boolean> {
    const user = await this.#user(ctx, id);
    user.passwordHash = await hashPassword(newPassword);
    await ctx.em.flush();
    await this.#sessions.revokeAllOfUser(user.id);
    return true;
  }

  async #user(ctx: AuthenticatedContext, id: string): Promise<User> {
    const user = await ctx.em.findOne(UserSchema, { id });
    if (!user) throw notFound(`User ${id} not found`);
    return user;
  }

  /** A subscription must keep at least one active admin, or nobody could manage it any more. */
  async #keepAnAdmin(ctx: AuthenticatedContext, leaving: User): Promise<void> {
    const others = await ctx.em.count(UserSchema, { role: 'admin', isActive: true, id: { $ne: leaving.id } });
    if (others === 0) throw conflict('This is the last active admin of the subscription; make another user admin first');
  }
}
