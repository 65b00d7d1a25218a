import * as v from 'valibot';
import {
  badRequest,
  conflict,
  fileIdOfUrl,
  notFound,
  pageOf,
  ROLES,
  toOrderBy,
  toWhere,
  wireTimestamp,
  type AuthenticatedContext,
  type ListQuery,
  type Page,
  type PluginServices,
  type Role,
  type UploadService,
} from 'rpc-service/plugin';

type UserService = PluginServices['userService'];
type User = NonNullable<Awaited<ReturnType<UserService['findById']>>>;
type AdminUserRecord = ReturnType<UserService['adminRecord']>;

/**
 * The declared result of an answer with a user: the auth plugin's record of
 * a user as administrators see it; its provider profiles say whether each is a
 * sign-in link (with the address the provider gave) or declared data.
 */
export const ADMIN_USER_SCHEMA = v.strictObject({
  _id: v.string(),
  subscriptionId: v.string(),
  email: v.string(),
  username: v.string(),
  firstName: v.nullable(v.string()),
  lastName: v.nullable(v.string()),
  role: v.picklist(ROLES),
  isActive: v.boolean(),
  isVerified: v.boolean(),
  isPhoneVerified: v.boolean(),
  onboardingCompleted: v.boolean(),
  partnerContactId: v.nullable(v.string()),
  serviceCode: v.nullable(v.string()),
  createdAt: wireTimestamp,
  updatedAt: wireTimestamp,
  oauthProfiles: v.array(v.strictObject({ provider: v.string(), id: v.string(), email: v.optional(v.string()), linked: v.boolean() })),
});

/** The declared result of an answer with an invite code: the auth plugin's record, never the code, its state spelled out. */
export const INVITE_CODE_SCHEMA = v.strictObject({
  _id: v.string(),
  hint: v.string(),
  role: v.picklist(ROLES),
  maxUses: v.number(),
  uses: v.number(),
  expiresAt: v.nullable(wireTimestamp),
  revokedAt: v.nullable(wireTimestamp),
  createdBy: v.string(),
  createdAt: wireTimestamp,
  status: v.picklist(['active', 'exhausted', 'expired', 'revoked']),
});

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
  oauthProfiles?: Parameters<UserService['update']>[2]['oauthProfiles'];
  partnerContactId?: string | null;
}

export type NewUserInput = UserFields & { email: string; username: string; role: Role; password: string };

/**
 * The users of the caller's subscription, as its administrators manage them.
 * The records belong to the auth plugin; the rules of administration are here.
 */
export class AdminUserService {
  readonly #users: UserService;
  readonly #uploads: UploadService;

  constructor({ userService, uploadService }: { userService: UserService; uploadService: UploadService }) {
    this.#users = userService;
    this.#uploads = uploadService;
  }

  getAvailableRoles(): Role[] {
    return [...ROLES];
  }

  async create(ctx: AuthenticatedContext, input: NewUserInput): Promise<AdminUserRecord> {
    return this.#users.adminRecord(await this.#users.create(ctx, input));
  }

  async findById(ctx: AuthenticatedContext, id: string): Promise<AdminUserRecord> {
    return this.#users.adminRecord(await this.#user(ctx, id));
  }

  async getData(ctx: AuthenticatedContext, query: ListQuery): Promise<Page<AdminUserRecord>> {
    const where = toWhere(query.filter, this.#users.adminFields);
    const sorted = toOrderBy(query.sort, this.#users.adminFields);
    // Sorted by the requested fields, then by id, so pages never overlap.
    const orderBy: Record<string, 'asc' | 'desc'> = Object.keys(sorted).length > 0 ? { ...sorted, id: 'asc' } : { createdAt: 'asc', id: 'asc' };
    const [users, total] = await this.#users.page(ctx, { where, orderBy, limit: query.pageSize, offset: (query.page - 1) * query.pageSize });
    return pageOf(users.map(this.#users.adminRecord), total, query);
  }

  async update(ctx: AuthenticatedContext, id: string, changes: UserFields): Promise<AdminUserRecord> {
    const user = await this.#user(ctx, id);
    const losesAdmin = user.role === 'admin' && user.isActive && ((changes.role !== undefined && changes.role !== 'admin') || changes.isActive === false);
    if (losesAdmin) await this.#keepAnAdmin(ctx, user);
    return this.#users.adminRecord(await this.#users.update(ctx, user, changes));
  }

  async delete(ctx: AuthenticatedContext, id: string): Promise<{ acknowledged: true; deletedCount: 1 }> {
    const user = await this.#user(ctx, id);
    if (user.id === ctx.userId) throw badRequest('You cannot delete your own account; ask another admin');
    if (user.role === 'admin' && user.isActive) await this.#keepAnAdmin(ctx, user);
    await this.#users.remove(ctx, user);
    const picture = fileIdOfUrl(user.profilePicture ?? null);
    if (picture) await this.#uploads.delete(ctx, picture).catch((err) => ctx.log.warn({ err }, 'could not delete the profile picture of a deleted user'));
    return { acknowledged: true, deletedCount: 1 };
  }

  /** Sets a new password and ends every session of the user. */
  async resetPassword(ctx: AuthenticatedContext, id: string, newPassword: string): Promise<true> {
    await this.#users.setPassword(ctx, await this.#user(ctx, id), newPassword);
    return true;
  }

  async #user(ctx: AuthenticatedContext, id: string): Promise<User> {
    const user = await this.#users.findById(ctx, id);
    if (!user) throw notFound(`User ${id} not found`);
    return user;
  }

  /** A subscription must keep at least one active admin, or nobody could manage it any more. */
  async #keepAnAdmin(ctx: AuthenticatedContext, leaving: User): Promise<void> {
    if ((await this.#users.otherActiveAdmins(ctx, leaving.id)) === 0) {
      throw conflict('This is the last active admin of the subscription; make another user admin first');
    }
  }
}
